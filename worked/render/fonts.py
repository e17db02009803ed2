"""The math font embedded in HTML pages: a subset of STIX Two Math (the font ziamath ships).

Browsers draw MathML with the page's math font; offline pages cannot rely on one being installed,
so every HTML page embeds ``assets/worked-math.woff2`` (about 100 KB) as a ``data:`` URL.

The file is generated, not hand-made; regenerate it after changing :data:`CHARS` with::

    .venv/bin/python -m worked.render.fonts

The subset keeps the OpenType MATH table (stretchy brackets, radicals, fraction metrics) and is
renamed "Worked Math" (the SIL Open Font License asks modified fonts not to use the original
name). The license is in ``assets/OFL-1.1.txt``.
"""
from __future__ import annotations

import base64
import functools
from pathlib import Path

ASSETS = Path(__file__).with_name("assets")
MATH_FONT = ASSETS / "worked-math.woff2"
FAMILY = "Worked Math"

# What our LaTeX can produce in MathML: ASCII, math italic letters, operators and fences (no Greek:
# the core writes none; a browser falls back to its own math font for anything missing).
CHARS = (
    set(range(0x20, 0x7F)) | {0xA0, 0xB7, 0xD7, 0xF7, 0xB1}
    | set(range(0x1D434, 0x1D468)) | {0x210E}             # math italic A-Z, a-z (h is U+210E)
    | set(range(0x2000, 0x200C)) | {0x2026, 0x2032, 0x2033, 0x2061, 0x2062, 0x2063, 0x2064}
    | {0x2190, 0x2192, 0x21A6, 0x2211, 0x2212, 0x2213, 0x2215, 0x2217, 0x221A, 0x221E, 0x2223, 0x2225,
       0x2248, 0x2260, 0x2261, 0x2264, 0x2265, 0x22A4, 0x22C5, 0x22EE, 0x22EF, 0x22F1, 0x27E8, 0x27E9,
       0x2308, 0x2309, 0x230A, 0x230B, 0x2016, 0x2225}
)


def ziamath_font() -> Path:
    import ziamath

    return Path(ziamath.__file__).with_name("fonts") / "STIXTwoMath-Regular.ttf"


def build_math_font(out: Path = MATH_FONT) -> int:
    """Subset ziamath's STIX Two Math to :data:`CHARS` (keeping MATH variants), rename, save WOFF2."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    opts = subset.Options()
    opts.layout_features = ["*"]
    opts.flavor = "woff2"
    opts.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]
    opts.notdef_outline = True
    font = TTFont(str(ziamath_font()), recalcTimestamp=False)
    sub = subset.Subsetter(opts)
    sub.populate(unicodes=sorted(CHARS))
    sub.subset(font)
    names = font["name"]
    for rec in names.names:
        if rec.nameID in (1, 4, 16):
            rec.string = FAMILY
        elif rec.nameID == 6:
            rec.string = FAMILY.replace(" ", "") + "-Regular"
        elif rec.nameID == 3:
            rec.string = "worked: subset of STIX Two Math"
    if "head" in font:  # fixed timestamps: the same bytes on every build
        font["head"].created = font["head"].modified = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    font.save(str(out))
    return out.stat().st_size


@functools.lru_cache(maxsize=1)
def math_font_data_url() -> str:
    """The embedded math font as a ``data:font/woff2;base64,…`` URL."""
    return "data:font/woff2;base64," + base64.b64encode(MATH_FONT.read_bytes()).decode("ascii")


if __name__ == "__main__":
    print(f"{MATH_FONT}: {build_math_font()} bytes")
