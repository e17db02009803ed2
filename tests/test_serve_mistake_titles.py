"""A mistake's title holds its math as trees (``Mistake.title_prose``: K·Qᵀ instead of Q·Kᵀ); its text is the title
every report and export writes, and the web page's check (``?view=1``) sets its math as allow-listed MathML."""
from __future__ import annotations

import pytest

pytest.importorskip("starlette")

from worked import eq, printers  # noqa: E402
from worked.mistakes import MISTAKES  # noqa: E402
from worked.server.views import safe_mathml, with_math  # noqa: E402


def test_a_title_s_text_is_the_text_printer_s_of_its_prose():
    for m in MISTAKES.values():
        assert m.title == printers.text(m.title_prose) and m.title.strip() == m.title and m.title
    trees = {k for k, m in MISTAKES.items() if any(isinstance(x, eq.Node) for x in m.title_prose.parts)}
    assert {"transposed-scores", "weights-transposed", "scaled-by-dk", "dV-not-transposed"} <= trees


@pytest.mark.parametrize("code", ["transposed-scores", "no-scaling-backward", "no-exp"])
def test_a_diagnosis_s_title_is_set_as_math_on_the_page(code):
    m = MISTAKES[code]
    report = with_math({"diagnoses": [{"code": code, "title": m.title, "message": "…"}]}, problem=None)
    parts = report["diagnoses"][0]["title_math"]
    assert "".join(x["text"] for x in parts) == m.title
    maths = [x["mathml"] for x in parts if "mathml" in x]
    assert all(safe_mathml(x) == x for x in maths)
    assert bool(maths) == (code != "no-exp")          # "no exponentials" has no math: its text alone
    # a title the report does not give as the mistake's (a changed text) gets no math: the page shows the text
    other = with_math({"diagnoses": [{"code": code, "title": "something else", "message": "…"}]}, problem=None)
    assert "title_math" not in other["diagnoses"][0]
