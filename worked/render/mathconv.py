"""LaTeX → SVG (ziamath), for the WeasyPrint PDF engine: each formula as the LaTeX printer writes it.

Results are kept per string in a bounded ``functools.lru_cache`` (a sheet repeats many small formulas):
a formula drawn again after its entry was dropped is the same string. (Browsers get MathML from the
MathML printer, :mod:`worked.printers.mathml`.)
"""
from __future__ import annotations

import functools
import re

from ..errors import WorkedError

SVG_SIZE = 16.0          # px size ziamath draws at; the SVG is then sized in em to match the text
_ASCII = re.compile(r"[\x20-\x7e]*")


def _check(latex: str) -> str:
    if not _ASCII.fullmatch(latex):
        raise WorkedError(f"internal: LaTeX for a formula is not ASCII: {latex[:60]!r}")
    return latex


_VIEWBOX = re.compile(r'^<svg xmlns="http://www.w3.org/2000/svg" width="([\d.]+)" height="([\d.]+)" '
                      r'viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"')


@functools.lru_cache(maxsize=8192)
def svg_img(latex: str, display: bool = False) -> str:
    """An ``<img>`` with the formula as a ``data:`` SVG, sized in em and aligned on the text baseline.

    An image rather than inline ``<svg>``: WeasyPrint then parses each formula once, apart from
    the HTML, instead of styling thousands of glyph nodes as part of the page.
    """
    import base64

    import ziamath as zm

    try:
        out = zm.Latex(_check(latex), size=SVG_SIZE, inline=not display).svg()
    except WorkedError:
        raise
    except Exception as exc:  # ziamath failing on our own LaTeX is a bug, not a user error
        raise WorkedError(f"internal: could not draw formula {latex[:60]!r}: {exc}") from None
    m = _VIEWBOX.match(out)
    if not m:
        raise WorkedError(f"internal: unexpected SVG from ziamath for {latex[:60]!r}")
    w, h = float(m.group(1)), float(m.group(2))
    y0, vh = float(m.group(4)), float(m.group(6))
    descent = (y0 + vh) / SVG_SIZE
    flat = flatten_svg(out)
    url = "data:image/svg+xml;base64," + base64.b64encode(flat.encode("utf-8")).decode("ascii")
    return (f'<img class="zm" alt="" src="{url}" '
            f'style="width:{w / SVG_SIZE:.3f}em;height:{h / SVG_SIZE:.3f}em;vertical-align:{-descent:.3f}em">')


_SYMBOL = re.compile(r'<symbol id="([^"]+)" viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"'
                     r'(?: */>|>(.*?)</symbol>)', re.S)   # an empty glyph (a space) is self-closed
_USE = re.compile(r'<use href="#([^"]+)" x="([-\d.]+)" y="([-\d.]+)" width="([-\d.]+)" height="([-\d.]+)"'
                  r'( fill="[^"]*")? */>')


def flatten_svg(svg: str) -> str:
    """Replace ziamath's ``<symbol>``/``<use>`` glyphs by transformed ``<path>`` elements.

    Same drawing (the symbol's viewBox mapped into the use's box with the default
    ``xMidYMid meet``) in plain SVG, with a third of the nodes for WeasyPrint to walk.
    """
    symbols = {}
    for m in _SYMBOL.finditer(svg):
        symbols[m.group(1)] = (tuple(float(m.group(k)) for k in range(2, 6)), m.group(6) or "")
    if not symbols:
        return svg

    def use(m):
        sym = symbols.get(m.group(1))
        if sym is None:
            return m.group(0)
        (vx, vy, vw, vh), inner = sym
        x, y, w, h = (float(m.group(k)) for k in range(2, 6))
        if vw <= 0 or vh <= 0 or not inner:
            return ""
        sc = min(w / vw, h / vh)
        tx = x + (w - vw * sc) / 2 - vx * sc
        ty = y + (h - vh * sc) / 2 - vy * sc
        fill = m.group(6) or ""
        tr = f' transform="matrix({sc:.5g} 0 0 {sc:.5g} {tx:.4f} {ty:.4f})"{fill}'
        return re.sub(r"<path ", "<path" + tr + " ", inner)

    out = _SYMBOL.sub("", svg)
    return _USE.sub(use, out)
