"""A fast way for WeasyPrint to draw our formula SVGs: each glyph outline once per PDF, reused.

WeasyPrint draws an SVG image by walking its nodes with a CSS-aware renderer, and writes every
glyph's outline into the page again at every use. Our formulas come from ziamath through
:func:`mathconv.flatten_svg`, a tiny subset of SVG: a root ``<svg>`` with a viewBox, ``<path>``
elements with a ``matrix(...)`` transform, a fill and absolute ``M L H V C Q Z`` data, and filled
``<rect>`` elements (fraction bars, roots). For those images :func:`install` hands WeasyPrint a
:class:`FormulaImage` instead:

- each distinct glyph outline becomes one PDF form XObject, registered through WeasyPrint's own
  image table (``Stream.add_image``), so it is written once per document and drawn with ``Do``;
- its name is a hash of the outline, so the PDF bytes do not depend on the order in which a
  process happened to meet the glyphs (``--jobs`` gives the same bytes);
- the drawing is the same as WeasyPrint's: the viewBox is fitted into the box with the default
  ``xMidYMid meet``, each path drawn under its transform and filled with the nonzero rule.

Anything outside that subset (another element, a relative path command, a colour we do not
parse) makes :func:`parse` return ``None`` and WeasyPrint draws the image itself, as before.
"""
from __future__ import annotations

import contextlib
import hashlib
import re

_ROOT = re.compile(r'^<svg xmlns="http://www.w3.org/2000/svg" width="([\d.]+)" height="([\d.]+)" '
                   r'viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)">(.*)</svg>\s*$', re.S)
_ELEMENT = re.compile(r'\s*<(path|rect)((?:\s+[a-z-]+="[^"]*")*)\s*/>', re.S)
_ATTR = re.compile(r'([a-z-]+)="([^"]*)"')
_MATRIX = re.compile(r'^matrix\(([-\d.e+]+) ([-\d.e+]+) ([-\d.e+]+) ([-\d.e+]+) ([-\d.e+]+) ([-\d.e+]+)\)$')
_PATH_TOKEN = re.compile(r'([MLHVCQZ])|(-?(?:\d+\.?\d*|\.\d+))|([\s,]+)|(.)')
_BLACK = {"black", "#000", "#000000", "currentColor"}


def _num(v: float) -> str:
    """A PDF number: plain decimal, no exponent, no negative zero."""
    s = f"{v:.4f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


class Glyph:
    """One glyph outline as a PDF form XObject, in WeasyPrint's image table (``get_x_object``)."""

    def __init__(self, ops: bytes, bbox: tuple[float, float, float, float]):
        self.ops = ops
        self.bbox = bbox
        self.id = "g" + hashlib.sha1(ops).hexdigest()[:16]

    def get_x_object(self, interpolate, dpi_ratio):
        import pydyf

        x0, y0, x1, y1 = self.bbox
        return pydyf.Stream([self.ops], extra={
            "Type": "/XObject", "Subtype": "/Form",
            "BBox": pydyf.Array([float(_num(x0 - 1)), float(_num(y0 - 1)), float(_num(x1 + 1)), float(_num(y1 + 1))]),
        }, compress=True)


_GLYPHS: dict[str, Glyph | None] = {}


def glyph(d: str) -> Glyph | None:
    """The :class:`Glyph` for path data *d* (cached), or None if *d* is outside our subset."""
    if d in _GLYPHS:
        return _GLYPHS[d]
    out: list[str] = []
    xs: list[float] = []
    ys: list[float] = []
    nums: list[float] = []
    cmd = None
    cx = cy = sx = sy = 0.0
    ok = True

    def flush() -> bool:
        nonlocal cx, cy, sx, sy
        need = {"M": 2, "L": 2, "H": 1, "V": 1, "C": 6, "Q": 4}.get(cmd, 0)
        if cmd is None:
            return not nums
        if cmd == "Z":
            if nums:
                return False
            out.append("h")
            cx, cy = sx, sy
            return True
        if need == 0 or not nums or len(nums) % need:
            return False
        for k in range(0, len(nums), need):
            a = nums[k:k + need]
            first = k == 0
            if cmd == "M" and first:
                cx, cy = a
                sx, sy = cx, cy
                out.append(f"{_num(cx)} {_num(cy)} m")
            elif cmd in ("M", "L"):
                cx, cy = a
                out.append(f"{_num(cx)} {_num(cy)} l")
            elif cmd == "H":
                cx = a[0]
                out.append(f"{_num(cx)} {_num(cy)} l")
            elif cmd == "V":
                cy = a[0]
                out.append(f"{_num(cx)} {_num(cy)} l")
            elif cmd == "C":
                x1, y1, x2, y2, cx, cy = a
                xs.extend((x1, x2))
                ys.extend((y1, y2))
                out.append(" ".join(map(_num, (x1, y1, x2, y2, cx, cy))) + " c")
            else:  # Q: the quadratic as the equal cubic
                qx, qy, x, y = a
                xs.append(qx)
                ys.append(qy)
                c1 = (cx + 2 * (qx - cx) / 3, cy + 2 * (qy - cy) / 3)
                c2 = (x + 2 * (qx - x) / 3, y + 2 * (qy - y) / 3)
                cx, cy = x, y
                out.append(" ".join(map(_num, (*c1, *c2, cx, cy))) + " c")
            xs.append(cx)
            ys.append(cy)
        return True

    for m in _PATH_TOKEN.finditer(d):
        letter, number, _space, other = m.groups()
        if other is not None:
            ok = False
            break
        if letter:
            if not flush():
                ok = False
                break
            cmd, nums = letter, []
        elif number is not None:
            nums.append(float(number))
    if ok:
        ok = flush()
    g = None
    if ok and out and out[0].endswith(" m"):
        g = Glyph(("\n".join(out) + "\nf").encode("ascii"), (min(xs), min(ys), max(xs), max(ys)))
    if len(_GLYPHS) < 50000:
        _GLYPHS[d] = g
    return g


def parse(svg: str):
    """``(width, height, viewbox, items)`` for a formula SVG in our subset, else None.

    *items* are ``("use", matrix, glyph)`` and ``("rect", x, y, w, h)``, in drawing order.
    """
    m = _ROOT.match(svg)
    if not m:
        return None
    width, height = float(m.group(1)), float(m.group(2))
    viewbox = tuple(float(m.group(k)) for k in range(3, 7))
    body = m.group(7)
    items = []
    pos = 0
    for el in _ELEMENT.finditer(body):
        if el.start() != pos:
            return None
        pos = el.end()
        attrs = dict(_ATTR.findall(el.group(2)))
        fill = attrs.pop("fill", "black")
        if fill == "none":
            continue
        if fill not in _BLACK:
            return None
        if el.group(1) == "rect":
            if set(attrs) - {"x", "y", "width", "height"}:
                return None
            try:
                x, y, w, h = (float(attrs.get(k, "0")) for k in ("x", "y", "width", "height"))
            except ValueError:
                return None
            items.append(("rect", x, y, w, h))
            continue
        if set(attrs) - {"d", "transform"}:
            return None
        matrix = (1.0, 0.0, 0.0, 1.0, 0.0, 0.0)
        if "transform" in attrs:
            mm = _MATRIX.match(attrs["transform"])
            if not mm:
                return None
            try:
                matrix = tuple(float(v) for v in mm.groups())
            except ValueError:
                return None
        g = glyph(attrs.get("d", ""))
        if g is None:
            return None
        items.append(("use", matrix, g))
    if body[pos:].strip():
        return None
    return width, height, viewbox, items


class FormulaImage:
    """What WeasyPrint asks of an image (intrinsic size, draw), for one parsed formula."""

    def __init__(self, parsed):
        self.width, self.height, self.viewbox, self.items = parsed
        # the operators of each item, formatted once: (glyph or None, text before its name, text after)
        self._ops = []
        for item in self.items:
            if item[0] == "rect":
                _, x, y, w, h = item
                self._ops.append((None, f"{_num(x)} {_num(y)} {_num(w)} {_num(h)} re f", ""))
            else:
                _, mat, g = item
                self._ops.append((g, f"q {' '.join(map(_num, mat))} cm /", " Do Q"))

    def get_intrinsic_size(self, image_resolution, font_size):
        return self.width, self.height, (self.width / self.height if self.height else None)

    def draw(self, stream, concrete_width, concrete_height, style):
        vx, vy, vw, vh = self.viewbox
        if vw <= 0 or vh <= 0 or concrete_width <= 0 or concrete_height <= 0:
            return
        scale = min(concrete_width / vw, concrete_height / vh)
        tx = (concrete_width - vw * scale) / 2 - vx * scale
        ty = (concrete_height - vh * scale) / 2 - vy * scale
        stream.transform(scale, 0, 0, scale, tx, ty)
        ops = ["0 0 0 rg"]
        for g, before, after in self._ops:
            ops.append(before if g is None else before + stream.add_image(g, False, 1) + after)
        stream.stream.append("\n".join(ops).encode("ascii"))


_ENABLED = [True]


@contextlib.contextmanager
def disabled():
    """Within this block WeasyPrint draws every formula SVG itself (for comparisons in tests)."""
    _ENABLED[0] = False
    try:
        yield
    finally:
        _ENABLED[0] = True


def install(formulas: dict[str, str]) -> bool:
    """Make WeasyPrint draw the images whose URL is a key of *formulas* as :class:`FormulaImage`.

    Returns False (and changes nothing) if WeasyPrint's internals are not the shape we expect.
    """
    try:
        import weasyprint.document as wdoc
        from weasyprint.pdf.stream import Stream
    except ImportError:
        return False
    original = getattr(wdoc, "original_get_image_from_uri", None)
    if original is None or not hasattr(Stream, "add_image") or getattr(original, "_worked", False):
        return bool(getattr(original, "_worked", False))

    def get_image_from_uri(cache, url_fetcher, options, url, *args, **kwargs):
        svg = formulas.get(url) if _ENABLED[0] else None
        if svg is not None:
            hit = cache.get(url)
            if hit is not None:
                return hit
            parsed = parse(svg)
            if parsed is not None and parsed[1] > 0:
                image = cache[url] = FormulaImage(parsed)
                return image
        return original(cache, url_fetcher, options, url, *args, **kwargs)

    get_image_from_uri._worked = True
    wdoc.original_get_image_from_uri = get_image_from_uri
    return True


class _ArrayFFI:
    """WeasyPrint's ``ffi`` for ``weasyprint.pdf.fonts``, making ``T[N]`` arrays as ``T[]`` of N items.

    Font subsetting asks cffi for ``hb_codepoint_t[<length>]``; every new length is a new C type
    string, and cffi parses each one with pycparser over all of WeasyPrint's declarations (about
    8 ms). ``ffi.new("T[]", items)`` makes the same array of the same items from one parsed type.
    """

    _ARRAY = re.compile(r"^(\w+)\[(\d+)\]$")

    def __init__(self, real):
        self._real = real

    def new(self, cdecl, init=None):
        m = self._ARRAY.match(cdecl) if isinstance(cdecl, str) else None
        if m and isinstance(init, (list, tuple)) and len(init) == int(m.group(2)):
            return self._real.new(m.group(1) + "[]", init)
        return self._real.new(cdecl, init)

    def __getattr__(self, name):
        return getattr(self._real, name)


def cheaper_array_types() -> bool:
    """Install :class:`_ArrayFFI` in ``weasyprint.pdf.fonts`` (False if WeasyPrint is not shaped so)."""
    try:
        import weasyprint.pdf.fonts as wfonts
    except ImportError:
        return False
    real = getattr(wfonts, "ffi", None)
    if real is None or isinstance(real, _ArrayFFI) or not hasattr(real, "new"):
        return isinstance(real, _ArrayFFI)
    wfonts.ffi = _ArrayFFI(real)
    return True
