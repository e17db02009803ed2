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
    data = base64.b64encode(out.encode("utf-8")).decode("ascii")
    return (f'<img class="zm" alt="" src="data:image/svg+xml;base64,{data}" '
            f'style="width:{w / SVG_SIZE:.3f}em;height:{h / SVG_SIZE:.3f}em;vertical-align:{-descent:.3f}em">')


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

    def path(svg, node, font_size):
        d = node.get("d", "")
        hit = cache.get(d)
        if hit is not None:
            ops, vertices = hit
            stream = svg.stream
            for name, args, kwargs in ops:
                getattr(stream, name)(*args, **kwargs)
            node.vertices.extend(vertices)
            return
        real = svg.stream
        rec = Recorder(real)
        before = len(node.vertices)
        svg.stream = rec
        try:
            original(svg, node, font_size)
        finally:
            svg.stream = real
        if len(cache) < 20000:
            cache[d] = (rec.ops, list(node.vertices)[before:])

    wsvg.TAGS["path"] = path
