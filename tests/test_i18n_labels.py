"""Words set as math and math set as words (issues 27 and 28): the softmax's row "sum" is a word each printer writes
in the language; a gradient's or an updated weight's grid label ("Gradient dγ_2", "Updated γ_1") is a sentence with
its symbol as math; a one-row matrix labels its row with its symbol as math (γ with the subscript 2), in every
format. The text of each stays what it was in English (the checker, the quiz and the JSON read it)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

import worked
from worked import eq, i18n, printers, stages
from worked.i18n import N_
from worked.printers.texesc import tex_escape
from worked.render import typst as Y
from worked.render import view
from worked.render.html import render_html
from worked.render.tex import render_tex

from test_i18n import SHIPPED

ROOT = Path(__file__).resolve().parents[1]
SUM = eq.Rel((eq.Sym(N_("sum"), sub="cats", upright=True, word=True), eq.Add((eq.num(1), eq.num(2))), eq.num(3)),
             (eq.EQ, eq.EQ))
FORMATS = ("text", "latex", "mathml", "htmlcss", "typst", "spoken")


@lru_cache(maxsize=None)
def solution(name: str):
    return worked.solve(worked.load(ROOT / "problems" / f"{name}.toml"))


@pytest.mark.parametrize("lang", SHIPPED)
def test_sum_is_a_word_in_every_format(lang):
    word = i18n.get(lang).gettext("sum")
    assert word != "sum"
    for fmt in FORMATS:
        en = getattr(printers, fmt)(SUM)
        with i18n.using(lang):
            shown = getattr(printers, fmt)(SUM)
        assert "sum" in en and word in shown and not re.search(r"(?<![A-Za-z])sum(?![a-z])", shown), (fmt, shown)
    # a name that is no word stays the problem's own
    with i18n.using(lang):
        assert printers.text(eq.Sym("scores", upright=True)) == "scores"


CALLS = eq.Rel((eq.matrix_sym("db_2"), eq.Call(eq.COLSUM, (eq.matrix_sym("dR2"),))), (eq.EQ,)), \
    eq.Rel((eq.matrix_sym("dX"), eq.Call(eq.LN_BACK, (eq.matrix_sym("dY"), eq.Sym("X"), eq.Sym("γ")))), (eq.EQ,))


@pytest.mark.parametrize("lang", SHIPPED)
def test_colsum_and_lnback_are_words_in_every_format(lang):
    """A bias's gradient ``colsum(dR2)`` and the layer norm's backward ``LNback(dY, X, γ)`` name their function in
    the language, in one piece (no ``_``: the printers would make a subscript of it), in every format; the other
    function names (softmax, LN_1) stay symbols, and English is as before."""
    assert eq.CALL_WORDS == {"colsum", "LNback"}
    other = eq.Rel((eq.Sym("A"), eq.Call("softmax", (eq.Sym("S"),)), eq.Call("LN_1", (eq.Sym("X"),))), (eq.EQ, eq.EQ))
    for node, name in zip(CALLS, ("colsum", "LNback")):
        word = i18n.get(lang).gettext(name)
        assert word != name and "_" not in word and " " not in word
        for fmt in FORMATS:     # LaTeX: ASCII, an accent escaped in \text
            word = i18n.get(lang).gettext(name)
            if fmt == "latex" and not word.isascii():
                word = rf"\text{{{tex_escape(word)}}}"
            en = getattr(printers, fmt)(node)
            with i18n.using(lang):
                shown = getattr(printers, fmt)(node)
            assert name in en and word in shown and name not in shown, (fmt, shown)
            if fmt != "spoken":         # spoken says "gleich … von": its sentence is the language's too
                assert shown == en.replace(name, word), (fmt, en, shown)
    assert printers.text(CALLS[0]) == "db_2 = colsum(dR2)"
    with i18n.using(lang):
        assert printers.text(other) == "A = softmax(S) = LN_1(X)"


def test_sum_in_english_is_as_it_was():
    assert printers.text(SUM) == "sum_cats = 1 + 2 = 3"
    assert printers.latex(SUM).startswith(r"\mathrm{sum}_{\text{cats}} = ")
    assert printers.typst(SUM).startswith('"sum"_("cats") = ')


@pytest.mark.parametrize("lang", SHIPPED)
def test_a_softmax_row_sums_in_the_language(lang):
    sol = solution("cats-chase-mice")
    word = i18n.get(lang).gettext("sum")
    weights = next(st for st in sol.steps if st.id == "weights")
    with i18n.using(lang):
        shown = [printers.text(ln.eq) for ln in weights.lines]
    assert any(s.startswith(word + " ") for s in shown) and not any(s.startswith("sum ") for s in shown)


def test_labels_are_sentences_with_math():
    """Every block gradient's and updated weight's label with a symbol in it, and attention's updated W_Q, W_K, W_V,
    is ``Gradient {symbol}`` / ``Updated {symbol}`` with the symbol a tree; its English text is the old label."""
    arch = stages.BLOCK_ARCHS["post-ln"]
    by_id = {s.id: s for s in arch.train + arch.update + stages.SELF.update}
    for sid, text in (("dgamma_2", "Gradient dγ_2"), ("dW_out", "Gradient dW_out"), ("gamma_1_new", "Updated γ_1"),
                      ("W_out_new", "Updated W_out"), ("W_Q_new", "Updated W_Q")):
        label = by_id[sid].grid.label
        assert isinstance(label, eq.Said) and isinstance(dict(label.args)["symbol"], eq.Sym)
        assert printers.text(label) == text
    with i18n.using("de"):
        assert printers.text(by_id["gamma_1_new"].grid.label) == "γ_1 nach dem Update"


@pytest.mark.parametrize("lang", ["en", "de"])
def test_a_block_key_sets_labels_and_one_row_labels_as_math(lang):
    """The block's training key: a step title "Gradient dγ_2: …" and "Updated γ_1: …" has its symbol as math, and
    the one-row matrices (dγ_2, b_1′) label their row with the symbol as math, in HTML, LaTeX and Typst (with alt
    text); no format writes the label as the plain string dγ_2."""
    sol = solution("block-train")
    with i18n.using(lang):
        page = view.build(sol, "answer-key")
        html, tex, typ = render_html(page), render_tex(page), Y.render_typ(page)
        ws = Y.render_typ(view.build(sol, "worksheet"))
        gradient = i18n.tr("Gradient {symbol}", symbol="")
        b1 = printers.spoken(eq.matrix_sym("b_1", prime=True))       # its alt text: "b 1 prime", "b 1 Strich"
    assert "dγ_2" not in html and "dγ\\_2" not in typ and "dγ_2" not in ws and r"\gamma}\_2" not in tex
    assert f'{gradient}<math xmlns="http://www.w3.org/1998/Math/MathML" alttext="d gamma 2">' in html
    assert re.search(r'<th class="rl" scope="row"><math [^>]*alttext="d gamma 2"><msub><mi>dγ</mi><mi>2</mi>', html)
    assert 'rows: ([#eqn("d gamma 2", $"dγ"_2$)],)' in typ and f'rows: ([#eqn("{b1}", $b\'_1$)],)' in ws
    assert r"\text{\small$\mathrm{d}\gamma_{2}$}" in tex
    # the glance's one-row tables too
    assert re.search(r'<th scope="row"><math [^>]*alttext="d gamma 2">', html)


def test_a_one_row_label_is_still_its_text():
    """The label a one-row matrix's row has is the text the checker, the quiz and the JSON have always read."""
    sol = solution("block-train")
    m = sol.matrices()
    assert m["dgamma_2"].rows == ["dγ_2"] and m["b_1_new"].rows == ["b_1′"] and m["loss_after"].rows == ["L′"]
    assert m["dgamma_2"].rows[0].sym == eq.matrix_sym("dgamma_2")
    import pickle

    back = pickle.loads(pickle.dumps(m["b_1_new"].rows[0]))
    assert back == "b_1′" and back.sym == m["b_1_new"].sym


def test_the_web_pages_key_sets_a_one_row_label_as_math():
    """/api/solve?view=1's matrices (what the page's key draws): a one-row matrix's row label comes with its MathML;
    other matrices have none (their labels are tokens and numbers)."""
    pytest.importorskip("starlette")
    from worked.server.views import solution_view

    mats = solution_view(solution("block-train"))["matrices"]
    row = mats["dgamma_2"]["row_math"][0]
    assert row["text"] == "dγ_2" and row["mathml"].startswith("<math") and "<mi>dγ</mi>" in row["mathml"]
    assert "row_math" not in mats["dW_2"] and "row_math" not in mats["P"]
