"""The quiz's "Graded answers" box is page data (:class:`worked.render.view.Questions`), printed by every
sheet template (HTML, LaTeX, Typst) from the page, its math from the equation trees (issue 26)."""
from __future__ import annotations

from pathlib import Path

import pytest

from worked import eq, i18n, printers
from worked.problem import Problem, load
from worked.quiz import ask_tree, build_variant, describe, load_spec, plan, questions_box
from worked.render.html import render_html
from worked.render.tex import render_tex
from worked.render.typst import render_typ
from worked.render.view import Page, QuestionItem, Questions, as_kind, build
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
QUIZ = ROOT / "problems" / "quiz-1.toml"


@pytest.fixture(scope="module")
def sol():
    return solve(load(None))


@pytest.fixture(scope="module")
def chain_sol():
    """A chain of blocks: its worksheet and key differ where a block starts (your Z / the key's X)."""
    return solve(load(ROOT / "problems" / "decoder-layer.toml"))


def _box() -> Questions:
    ask = eq.Entry(eq.matrix_sym("weights"), "1", eq.ALL)
    text = eq.prose("the scores ", eq.Mul((eq.Sym("Q"), eq.Pow(eq.Sym("K"), eq.Sym("T")))), ": row 1 (cats), every column")
    return Questions(title="Graded answers", intro="Only these are marked.", items=[
        QuestionItem(ask="weights[1,*]", ask_eq=ask, text=text, points="2 pts", tolerance="±0.01",
                     options=[])])


@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
def test_the_box_is_printed_from_the_page_in_every_format(sol, kind):
    box = _box()
    page = build(sol, kind, {"variant": "ABC234"}, questions=box)
    assert isinstance(page, Page) and page.questions is box
    ask, text = box.items[0].ask_eq, box.items[0].text

    html = render_html(page)
    assert '<section class="quiz-questions"' in html and "Only these are marked." in html
    assert printers.mathml(ask) in html                       # weights[1, ·] as MathML
    assert printers.mathml(text) in html                      # the prose, Q·Kᵀ as <msup>
    assert "<msup><mi>K</mi>" in html and "(2 pts, ±0.01)" in html
    assert printers.htmlcss(ask) in render_html(page, for_pdf=True)   # the printed (WeasyPrint) HTML

    tex = render_tex(page)
    assert r"\textbf{Graded answers}" in tex and "Only these are marked." in tex
    assert f"\\item ${printers.latex(ask)}$ --- {printers.latex(text)} (2 pts, \\ensuremath{{\\pm}}0.01)" in tex
    assert r"\mathrm{weights}[1,\cdot]" in tex and "K^{T}" in tex

    typ = render_typ(page)
    assert "#text(weight: \"bold\")[Graded answers]" in typ and "Only these are marked\\." in typ
    assert f'#eqn("{printers.spoken(ask)}", ${printers.typst(ask)}$)' in typ
    assert printers.typst(text) in typ


def test_no_box_without_questions(sol):
    page = build(sol, "worksheet")
    assert page.questions is None
    assert "quiz-questions" not in render_html(page)
    assert "Graded answers" not in render_tex(page) and "Graded answers" not in render_typ(page)


def test_the_quiz_box_holds_its_math_as_trees():
    spec = load_spec(QUIZ)
    v = plan(spec.seed, count=1)[0]
    out = build_variant(spec, v, ("html", "tex"))
    entry = out["entry"]
    problem = Problem.from_dict(entry["problem"])
    box = questions_box(spec, entry["questions"], problem)
    asks = [q.ask for q in box.items]
    assert asks == ["scores[2,3]", "weights[1,*]", "Z"]
    assert [printers.text(q.ask_eq) for q in box.items] == ["scores[2, 3]", "weights[1, ·]", "Z"]
    assert ask_tree({"ask": "head2.Z", "matrix": "head2.Z"}) == eq.matrix_sym("Z", 2)
    words = describe(entry["questions"][0], problem)
    assert isinstance(words, eq.Prose) and printers.text(words).startswith("the scores Q·Kᵀ: row 2 (")
    shown = i18n.localize(words).parts      # the sentence (eq.say) as it is shown: its words and its trees
    assert eq.Mul((eq.matrix_sym("Q"), eq.Pow(eq.matrix_sym("K"), eq.Sym("T")))) in shown   # Q·Kᵀ, a tree
    # and the files of the variant carry it, from the page
    files = out["files"]
    key_html = files[f"variants/{v.code}/answer-key.html"].decode()
    key_tex = files[f"variants/{v.code}/answer-key.tex"].decode()
    assert printers.mathml(box.items[1].ask_eq) in key_html
    assert r"\item $\mathrm{weights}[1,\cdot]$ --- the attention weights \mbox{$A$}" in key_tex


@pytest.mark.parametrize("chain", [False, True], ids=["one block", "chain"])
@pytest.mark.parametrize("first,other", [("worksheet", "answer-key"), ("answer-key", "worksheet")])
def test_the_other_documents_page_is_the_same_page_but_its_kind(sol, chain_sol, first, other, chain):
    """A quiz variant and `worked sheet` build the page once and take the other document's page from it
    (view.as_kind): it prints exactly what a page built for that document prints, in every format."""
    student, box = {"name": "Ada", "variant": "ABC234"}, _box()
    if chain:
        sol, box = chain_sol, None
    page = as_kind(build(sol, first, student, questions=box), other)
    fresh = build(sol, other, student, questions=box)
    assert (page.kind, page.is_key, page.doc_label) == (fresh.kind, fresh.is_key, fresh.doc_label)
    assert page.kind == other and page.is_key == (other == "answer-key")
    assert render_html(page) == render_html(fresh)
    assert render_html(page, for_pdf=True) == render_html(fresh, for_pdf=True)
    assert render_tex(page) == render_tex(fresh)
    assert render_typ(page) == render_typ(fresh)
