"""Formulas for print engines without MathML: the HTML/CSS printer (every number and sign is text)."""
from __future__ import annotations

import re
import unicodedata
from decimal import Decimal
from fractions import Fraction

import sympy as sp

from worked import eq, printers
from worked.problem import load
from worked.solver import solve

from sheet_support import is_quiz_spec


def _text(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("\u00a0", " ")


def test_a_fraction_is_two_stacked_spans_of_text():
    w = eq.from_sympy(sp.exp(2 * sp.sqrt(2)) / (2 * sp.exp(sp.sqrt(2)) + sp.exp(2 * sp.sqrt(2))))
    html = printers.htmlcss(w)
    m = re.fullmatch(r'<span class="m-fr"><span class="m-nu">(.*)</span><span class="m-de">(.*)</span></span>', html)
    assert m, html
    assert _text(m.group(1)) == "e2√2" and _text(m.group(2)) == "2e√2 + e2√2"
    assert "<sup>" in m.group(1) and 'class="m-rt"' in m.group(1)     # a power, a root with its overline


def test_numbers_and_signs_are_text_with_a_true_minus():
    line = eq.Rel((eq.Add((eq.dec(Decimal("4.1133")), eq.num(-2))), eq.dec(Decimal("-0.1636"))), (eq.APPROX,))
    assert _text(printers.htmlcss(line)) == "4.1133 − 2 ≈ −0.1636"
    assert _text(printers.htmlcss(eq.num(Fraction(-1, 3)))) == "−13"
    assert printers.htmlcss(eq.Dims(3, 2)) == "3×2"


def test_exponents_keep_fractions_inline():
    html = printers.htmlcss(eq.from_sympy(sp.exp(3 * sp.sqrt(2) / 2)))
    assert "m-fr" not in html and _text(html) == "e3√2/2"


def test_tall_brackets_only_around_tall_things():
    flat = printers.htmlcss(eq.Vec((eq.num(1), eq.num(2))))
    assert flat == "[1,\u00a02]"       # a no-break space: a vector never breaks across lines
    tall = printers.htmlcss(eq.Vec((eq.num(1), eq.num(Fraction(4, 3)))))
    assert tall.startswith('<span class="m-big"><span class="m-dl m-sq"></span>') and "m-dr m-sq" in tall
    call = printers.htmlcss(eq.Call("softmax", (eq.Frac(eq.Sym("x"), eq.num(2)),)))
    assert call.startswith('softmax<span class="m-big"><span class="m-dl m-rd">')


def test_names_indices_and_heads():
    assert printers.htmlcss(eq.Entry(eq.Sym("A"), "cats", "chase")) == "<i>A</i>[cats,\u00a0chase]"   # as the asks write it
    assert printers.htmlcss(eq.Sym("W_Q")) == "<i>W</i><sub><i>Q</i></sub>"
    both = printers.htmlcss(eq.Sym("Q", sub="cats", head=2))
    assert both == '<i>Q</i><span class="m-ss"><span class="m-sp">(2)</span><span class="m-sb">cats</span></span>'
    assert printers.htmlcss(eq.Sym("scaled", upright=True)) == "scaled"


def test_data_is_escaped():
    assert "&lt;script&gt;" in printers.htmlcss(eq.Entry(eq.Sym("A"), "<script>", "1"))


def test_every_line_of_every_problem_prints_the_text_printer_s_numbers():
    """Each shown line of the shipped problems prints, as text, the same numbers as the text printer."""
    from pathlib import Path

    nums = re.compile(r"\d+(?:\.\d+)?")
    for path in sorted((Path(__file__).resolve().parents[1] / "problems").glob("*.toml")):
        if is_quiz_spec(path):
            continue
        sol = solve(load(str(path)), checks="row")
        for st in [st for b in getattr(sol, "blocks", None) or [sol] for st in b.steps]:    # each block of a chain
            for ln in st.lines:
                apart = re.sub(r"<[^>]+>", " ", printers.htmlcss(ln.eq))   # a numerator and its denominator
                assert nums.findall(apart) == nums.findall(unicodedata.normalize("NFKC", printers.text(ln.eq))), printers.text(ln.eq)
