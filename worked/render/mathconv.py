"""LaTeX → MathML (latex2mathml, for browsers) and LaTeX → SVG (ziamath, for WeasyPrint PDFs).

Both read the same ASCII LaTeX the core writes for every equation. Results are cached per
string for the life of the process (a sheet repeats many small formulas; quiz batches repeat more).

ziamath lays out every ``<mrow>`` twice (once to measure the row without stretchy fences), and
nested rows multiply that. :func:`_speed_up_ziamath` skips the measuring pass for rows that hold
no stretchy operator (the measurement is only read by stretchy operators, so the SVG is
unchanged: ``tests/test_sheet_math.py`` checks byte-identical output) and makes style copies
shallow. Together about 3× faster on our formulas.
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


@functools.lru_cache(maxsize=8192)
def mathml(latex: str, display: bool = False) -> str:
    """MathML for *latex* (``display=True`` for a block formula)."""
    import latex2mathml.converter as l2m

    out = l2m.convert(_check(latex), display="block" if display else "inline")
    return out


_patched = False


def _speed_up_ziamath() -> None:
    global _patched
    if _patched:
        return
    import ziamath.styles as styles
    from ziamath import operators
    from ziamath.nodes.mrow import Mrow

    stretchy = {op[0] for op, p in operators.operators.items() if p.get("stretchy") == "true"} | set(operators.fences)
    original = Mrow._get_height_nostretch

    def can_stretch(line) -> bool:
        for child in line:
            for el in child.iter():
                if el.tag.rsplit("}", 1)[-1] != "mo":
                    continue
                if el.get("stretchy") == "true" or "minsize" in el.attrib or "maxsize" in el.attrib:
                    return True
                if el.get("stretchy") != "false" and (el.text or "").strip() in stretchy:
                    return True
        return False

    def height_nostretch(self, line, **kwargs):
        if not can_stretch(line):
            return (0.0, 0.0)  # read only by stretchy operators, and this row has none
        return original(self, line, **kwargs)

    Mrow._get_height_nostretch = height_nostretch
    Mrow._worked_original_height = original
    styles.asdict = lambda obj: dict(obj.__dict__)  # parse_style only reads the copy
    _patched = True


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

    _speed_up_ziamath()
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
    data = base64.b64encode(flatten_svg(out).encode("utf-8")).decode("ascii")
    return (f'<img class="zm" alt="" src="data:image/svg+xml;base64,{data}" '
            f'style="width:{w / SVG_SIZE:.3f}em;height:{h / SVG_SIZE:.3f}em;vertical-align:{-descent:.3f}em">')


_SYMBOL = re.compile(r'<symbol id="([^"]+)" viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)">(.*?)</symbol>', re.S)
_USE = re.compile(r'<use href="#([^"]+)" x="([-\d.]+)" y="([-\d.]+)" width="([-\d.]+)" height="([-\d.]+)"'
                  r'( fill="[^"]*")? */>')


def flatten_svg(svg: str) -> str:
    """Replace ziamath's ``<symbol>``/``<use>`` glyphs by transformed ``<path>`` elements.

    Same drawing (the symbol's viewBox mapped into the use's box with the default
    ``xMidYMid meet``), a third of the nodes for WeasyPrint to walk, and identical ``d`` strings for
    repeated glyphs (replayed from the path cache of :func:`speed_up_weasyprint`).
    """
    symbols = {}
    for m in _SYMBOL.finditer(svg):
        symbols[m.group(1)] = (tuple(float(m.group(k)) for k in range(2, 6)), m.group(6))
    if not symbols:
        return svg

    def use(m):
        sym = symbols.get(m.group(1))
        if sym is None:
            return m.group(0)
        (vx, vy, vw, vh), inner = sym
        x, y, w, h = (float(m.group(k)) for k in range(2, 6))
        if vw <= 0 or vh <= 0:
            return ""
        sc = min(w / vw, h / vh)
        tx = x + (w - vw * sc) / 2 - vx * sc
        ty = y + (h - vh * sc) / 2 - vy * sc
        fill = m.group(6) or ""
        tr = f' transform="matrix({sc:.5g} 0 0 {sc:.5g} {tx:.4f} {ty:.4f})"{fill}'
        return re.sub(r"<path ", "<path" + tr + " ", inner)

    out = _SYMBOL.sub("", svg)
    return _USE.sub(use, out)


_wp_patched = False


def speed_up_weasyprint() -> None:
    """Memoise WeasyPrint's SVG path parser per ``d`` string (glyph outlines repeat many times).

    ``path()`` turns the ``d`` attribute into drawing operators on ``svg.stream`` and records
    vertices on the node; both depend only on ``d`` (our paths use plain numbers, no units), so
    the recorded operators are replayed for a repeated ``d``. Skipped if WeasyPrint changes shape.
    """
    global _wp_patched
    if _wp_patched:
        return
    _wp_patched = True
    try:
        import weasyprint.svg as wsvg
    except ImportError:
        return
    original = getattr(wsvg, "TAGS", {}).get("path")
    if original is None or getattr(original, "__module__", "") != "weasyprint.svg.path":
        return
    cache: dict = {}

    class Recorder:
        def __init__(self, real):
            self.real, self.ops = real, []

        def __getattr__(self, name):
            fn = getattr(self.real, name)

            def call(*args, **kwargs):
                self.ops.append((name, args, kwargs))
                return fn(*args, **kwargs)
            return call

    try:
        import pydyf

        plain = {name: getattr(pydyf.Stream, name) for name in ("move_to", "line_to", "curve_to", "close")}
    except (ImportError, AttributeError):
        plain = {}

    def path(svg, node, font_size):
        d = node.get("d", "")
        hit = cache.get(d)
        stream = svg.stream
        if hit is not None:
            ops, chunks, vertices = hit
            if chunks is not None and all(getattr(type(stream), n, None) is plain.get(n) for n, _, _ in ops):
                stream.stream.extend(chunks)  # the operators' bytes, as pydyf wrote them the first time
            else:
                for name, args, kwargs in ops:
                    getattr(stream, name)(*args, **kwargs)
            node.vertices.extend(vertices)
            return
        rec = Recorder(stream)
        before = len(node.vertices)
        start = len(getattr(stream, "stream", ()))
        svg.stream = rec
        try:
            original(svg, node, font_size)
        finally:
            svg.stream = stream
        chunks = None
        if plain and all(n in plain for n, _, _ in rec.ops) and isinstance(getattr(stream, "stream", None), list):
            chunks = list(stream.stream[start:])
        if len(cache) < 20000:
            cache[d] = (rec.ops, chunks, list(node.vertices)[before:])

    wsvg.TAGS["path"] = path
