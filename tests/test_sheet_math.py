"""Formula conversion: MathML for browsers, SVG for WeasyPrint."""
from __future__ import annotations

import base64
import re

from worked.problem import load
from worked.render import mathconv
from worked.solver import solve


def _formulas(limit=40):
    sol = solve(load(None), checks="row")
    out = [ln.latex for st in sol.steps for ln in st.lines]
    return list(dict.fromkeys(out))[:limit]


def test_svg_img_is_sized_in_em_and_baseline_aligned():
    """Each formula becomes a data: SVG image, sized in em, lowered by its depth below the baseline."""
    tag = mathconv.svg_img(r"\frac{1}{2 + e^{\sqrt{2}}}", True)
    m = re.search(r'src="data:image/svg\+xml;base64,([^"]+)" style="width:([\d.]+)em;height:([\d.]+)em;'
                  r'vertical-align:(-[\d.]+)em"', tag)
    assert m, tag[:200]
    svg = base64.b64decode(m.group(1)).decode()
    assert svg.startswith("<svg") and "<path" in svg
    assert float(m.group(4)) < 0  # a fraction reaches below the baseline


def test_non_ascii_latex_is_refused():
    """The LaTeX source of formulas must be ASCII (pdflatex rejects a Unicode minus in math)."""
    import pytest

    from worked.errors import WorkedError

    with pytest.raises(WorkedError):
        mathconv.svg_img("x − 1")


def test_flattened_svg_draws_the_same_glyphs():
    """Flattening symbol/use glyphs keeps every glyph outline and drops the indirection."""
    import ziamath as zm

    raw = zm.Latex(r"A_{\text{cats},1} = \frac{e^{\sqrt{2}}}{2 + e^{\sqrt{2}}}", size=16).svg()
    flat = mathconv.flatten_svg(raw)
    assert "<use" not in flat and "<symbol" not in flat
    assert flat.count("<path") == raw.count("<use")
    assert set(re.findall(r' d="([^"]+)"', flat)) == set(re.findall(r' d="([^"]+)"', raw))
