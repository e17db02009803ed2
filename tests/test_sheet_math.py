"""Formula conversion: MathML for browsers, SVG for WeasyPrint, and the ziamath speed-up changes nothing."""
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


def _sheet_formulas(problem_file=None, limit=None):
    """Every formula the two PDF documents of a problem draw, in order, without repeats."""
    from worked.render import html as H

    seen = []
    real = mathconv.svg_img

    def record(latex, display=False):
        seen.append(latex)
        return ""

    sol = solve(load(problem_file))
    mathconv.svg_img = record
    try:
        for kind in ("worksheet", "answer-key"):
            H.render_html(kind, sol, for_pdf=True)
    finally:
        mathconv.svg_img = real
    return list(dict.fromkeys(seen))[:limit]


def test_speed_up_leaves_svg_unchanged():
    """ziamath draws byte-identical SVGs with and without our speed-ups, for every formula of two sheets."""
    import ziamath as zm

    latex = _sheet_formulas() + _sheet_formulas("problems/causal-mask.toml", 25)
    mathconv._speed_up_ziamath()
    patched = [zm.Latex(s, size=16).svg() for s in latex]
    mathconv._unpatch_ziamath()
    try:
        plain = [zm.Latex(s, size=16).svg() for s in latex]
    finally:
        mathconv._speed_up_ziamath()
    assert len(latex) > 60
    assert patched == plain


def test_svg_img_is_sized_in_em_and_baseline_aligned():
    """Each formula becomes a data: SVG image, sized in em, lowered by its depth below the baseline."""
    tag = mathconv.svg_img(r"\frac{1}{2 + e^{\sqrt{2}}}", True)
    m = re.search(r'src="data:image/svg\+xml;base64,([^"]+)" style="width:([\d.]+)em;height:([\d.]+)em;'
                  r'vertical-align:(-[\d.]+)em"', tag)
    assert m, tag[:200]
    svg = base64.b64decode(m.group(1)).decode()
    assert svg.startswith("<svg") and "<path" in svg
    assert float(m.group(4)) < 0  # a fraction reaches below the baseline


def test_mathml_for_every_core_formula():
    """latex2mathml turns every formula of a worked solution into a <math> element."""
    for s in _formulas():
        out = mathconv.mathml(s, True)
        assert out.startswith("<math") and 'display="block"' in out


def test_non_ascii_latex_is_refused():
    """The LaTeX source of formulas must be ASCII (pdflatex rejects a Unicode minus in math)."""
    import pytest

    from worked.errors import WorkedError

    with pytest.raises(WorkedError):
        mathconv.mathml("x − 1")


def test_flattened_svg_draws_the_same_glyphs():
    """Flattening symbol/use glyphs keeps every glyph outline and drops the indirection."""
    import ziamath as zm

    raw = zm.Latex(r"A_{\text{cats},1} = \frac{e^{\sqrt{2}}}{2 + e^{\sqrt{2}}}", size=16).svg()
    flat = mathconv.flatten_svg(raw)
    assert "<use" not in flat and "<symbol" not in flat
    assert flat.count("<path") == raw.count("<use")
    assert set(re.findall(r' d="([^"]+)"', flat)) == set(re.findall(r' d="([^"]+)"', raw))


def test_weasyprint_path_cache_gives_identical_pdf():
    """Replaying cached glyph paths writes the same PDF bytes as WeasyPrint's own path parser."""
    import weasyprint.svg as wsvg

    from worked.render import html_to_pdf, pdfmath

    html = "<p>" + " ".join(mathconv.svg_img(s) for s in (r"e^{\sqrt{2}} \approx 4.1133",
                                                       r"\frac{e^{\sqrt{2}}}{2 + e^{\sqrt{2}}}",
                                                       r"e^{\sqrt{2}} + e^{2 \sqrt{2}}")) + "</p>"
    with pdfmath.disabled():   # WeasyPrint's own SVG drawing, where the path cache sits
        cached = html_to_pdf(html)
        fast = wsvg.TAGS["path"]
        original = fast.__closure__ and next(c.cell_contents for c in fast.__closure__
                                            if getattr(c.cell_contents, "__module__", "") == "weasyprint.svg.path")
        wsvg.TAGS["path"] = original
        try:
            plain = html_to_pdf(html)
        finally:
            wsvg.TAGS["path"] = fast
    assert cached == plain
