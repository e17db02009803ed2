"""Reading answer entries: exact forms by our own grammar; anything else is an ExpressionError, never code."""
from __future__ import annotations

import builtins
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from worked.check import parse_entry
from worked.errors import ExpressionError


@pytest.mark.parametrize("text, value", [
    ("2*sqrt(2)", 2 * sp.sqrt(2)),
    ("2√2", 2 * sp.sqrt(2)),
    ("e^2/(1+e^2)", sp.exp(2) / (1 + sp.exp(2))),
    ("exp(2)/(1 + exp(2))", sp.exp(2) / (1 + sp.exp(2))),
    ("3√2/2", 3 * sp.sqrt(2) / 2),
    ("1/3", sp.Rational(1, 3)),
    ("0.43", sp.Rational(43, 100)),
    ("−0.5", sp.Rational(-1, 2)),
    ("pi", sp.pi),
    ("e^(√2)/(2 + e^(√2))", sp.exp(sp.sqrt(2)) / (2 + sp.exp(sp.sqrt(2)))),
])
def test_exact_forms_parse_to_their_values(text, value):
    """The exact forms of the issue (and the core's own text forms) read to the exact sympy value."""
    got = parse_entry(text)
    assert sp.simplify(got - value) == 0


@pytest.mark.parametrize("value, expected", [
    (3, sp.Integer(3)), (0.1, sp.Rational(1, 10)), (Fraction(2, 3), sp.Rational(2, 3)), ("  7 ", sp.Integer(7)),
    ("-inf", sp.S.NegativeInfinity), ("−∞", sp.S.NegativeInfinity), (float("-inf"), sp.S.NegativeInfinity),
])
def test_numbers_and_minus_infinity(value, expected):
    """Numbers are exact (a float through its shortest decimal); −∞ (a masked score) reads as -oo."""
    assert parse_entry(value) == expected


@pytest.mark.parametrize("blank", ["", "?", "  ", " ? ", None])
def test_blank_entries_are_not_answered(blank):
    """"", "?" and None mean "not answered"."""
    assert parse_entry(blank) is None


@pytest.mark.parametrize("bad", ["abc", "2 +", "√-4", "1/0", "sqrt(-1)", "[1, 2]", "exp(exp(exp(100)))",
                                 "2^exp(exp(exp(100)))", "9^9^9^9", "1e400", "inf", "x_cats", True, [1], {"a": 1},
                                 "(" * 100 + "1" + ")" * 100, "1" * 500])
def test_bad_entries_are_expression_errors(bad):
    """Unreadable, non-real, huge or non-number entries raise ExpressionError quickly (no hang)."""
    with pytest.raises(ExpressionError):
        parse_entry(bad)


def test_code_is_never_run(tmp_path, monkeypatch):
    """Python code in an entry is an error message; it is not evaluated (no eval/exec, no file appears)."""
    target = tmp_path / "x"
    monkeypatch.setattr(builtins, "eval", _forbidden)
    monkeypatch.setattr(builtins, "exec", _forbidden)
    for text in (f"__import__('os').system('touch {target}')", f"exec(\"open('{target}','w')\")",
                 "().__class__.__bases__[0].__subclasses__()", "lambda: 1", "sympify('1')"):
        with pytest.raises(ExpressionError):
            parse_entry(text)
    assert not target.exists()


def _forbidden(*args, **kwargs):
    raise AssertionError("eval/exec must never be called on answers")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_fuzz_any_text_is_a_value_blank_or_expression_error(text):
    """Any text reads to a value, to blank, or raises ExpressionError, and nothing else."""
    try:
        v = parse_entry(text)
    except ExpressionError:
        return
    assert v is None or v == sp.S.NegativeInfinity or v.is_real


GRAMMAR_BITS = st.sampled_from(list("0123456789.+-*/^()√−·") + ["e", "pi", "exp(", "sqrt(", " ", "inf", "e^", "π"])


@settings(max_examples=400, deadline=None)
@given(st.lists(GRAMMAR_BITS, max_size=30).map("".join))
def test_fuzz_grammar_like_text(text):
    """Text made of the grammar's own pieces (deep powers, exponentials) also reads or raises ExpressionError only."""
    try:
        v = parse_entry(text)
    except ExpressionError:
        return
    assert v is None or v == sp.S.NegativeInfinity or v.is_real


def test_decimal_comma_is_read_where_it_is_not_ambiguous():
    """"0,16" is 0.16 (common in Europe); where a comma could mean something else, the message says plainly to
    use a decimal point."""
    from fractions import Fraction

    import pytest

    from worked.check import parse_entry
    from worked.errors import ExpressionError

    assert parse_entry("0,16") == Fraction(4, 25)
    assert parse_entry("−1,25") == Fraction(-5, 4)
    assert parse_entry(" 0,125 ") == Fraction(1, 8)
    for text, message in [("1,234", "use a decimal point: 1.234"), ("e^0,5", "use a decimal point: e^0.5"),
                          ("1,2,3", "use a decimal point (such as 0.16)"), ("1.5,2", "use a decimal point (such as 0.16)")]:
        with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")
                           .replace("^", r"\^")):
            parse_entry(text)


def test_decimal_comma_in_a_check_report():
    from worked.check import check_answers
    from worked.problem import load

    p = load("problems/cats-chase-mice.toml")
    rep = check_answers(p, {"weights": [["0,16", "0,67", "0,16"], ["1/3", "1/3", "1/3"], ["0,25", "0,50", "0,25"]]})
    assert rep.errors == [] and rep.summary()["wrong"] == 0
