"""One evaluator over the equation tree (issue 26): a student's entry parses into eq nodes, and one walk
(worked.eq.arith.walk) evaluates any tree in five arithmetics: floats, the checker's bounded Decimals, exact
sympy values, the auditor's (value, error) and rational Fractions."""
import math
from decimal import Decimal
from fractions import Fraction

import pytest
import sympy as sp

from worked import eq, exprs
from worked.eq import arith
from worked.errors import ExpressionError
from worked.numfmt import CTX

BOUNDED = arith.Bounded(CTX)


def test_an_entry_parses_into_the_equation_tree():
    assert exprs.parse("2√2") == eq.Mul((eq.Num(Fraction(2)), eq.Sqrt(eq.Num(Fraction(2)))))
    assert exprs.parse("1 − 0.25") == eq.Add((eq.Num(Fraction(1)), eq.Neg(eq.Num(Fraction(1, 4)))))
    assert exprs.parse("e^2/(1+e^2)") == eq.Frac(
        eq.Pow(exprs.E, eq.Num(Fraction(2))), eq.Add((eq.Num(Fraction(1)), eq.Pow(exprs.E, eq.Num(Fraction(2))))))
    assert exprs.parse("[1, 2]") == eq.Vec((eq.Num(Fraction(1)), eq.Num(Fraction(2))))
    assert exprs.parse("π") == exprs.parse("pi") == eq.Sym("π")
    assert exprs.parse("-oo") == eq.Neg(eq.Inf())
    assert exprs.parse("x_cats") == eq.Sym("x_cats")
    assert exprs.parse("x'") == eq.Sym("x", sub="'")       # a Sym's name has no prime; the word is kept
    assert arith.sym_name(exprs.parse("x'y")) == "x'y"


def test_one_tree_in_every_arithmetic():
    tree = exprs.parse("(1/4 + 2^2)·3 − 1")          # rational: 47/4
    assert arith.walk(tree, arith.FLOAT) == 11.75
    assert arith.walk(tree, BOUNDED) == Decimal("11.75")
    assert arith.exact_value(tree) == sp.Rational(47, 4)
    assert eq.evaluate(tree) == (11.75, 0.0)
    assert eq.rational_value(tree) == Fraction(47, 4)
    root = exprs.parse("e^(√2)/(2 + e^(√2))")
    want = math.exp(math.sqrt(2)) / (2 + math.exp(math.sqrt(2)))
    assert arith.walk(root, arith.FLOAT) == pytest.approx(want, rel=1e-15)
    assert float(arith.walk(root, BOUNDED)) == pytest.approx(want, rel=1e-15)
    assert arith.exact_value(root) == sp.exp(sp.sqrt(2)) / (2 + sp.exp(sp.sqrt(2)))
    assert eq.evaluate(root)[0] == pytest.approx(want, rel=1e-15)
    assert eq.rational_value(root) is None                # a root and e^x are not rational


def test_the_auditors_arithmetic_carries_the_rounding_of_shown_decimals():
    tree = eq.Mul((eq.dec(Decimal("0.16")), eq.Vec((eq.num(2), eq.num(1)))))
    v, e = eq.evaluate(tree)
    assert v == pytest.approx((0.32, 0.16)) and e == pytest.approx((0.01, 0.005))
    assert eq.rational_value(tree) == (Fraction(8, 25), Fraction(4, 25))
    assert eq.evaluate(eq.Entry(eq.Sym("Q"), "cats", "1")) is None and eq.is_label(eq.Sym("Q"))
    assert not eq.is_label(eq.num(1))
    with pytest.raises(ValueError, match="relation"):
        eq.evaluate(eq.Rel((eq.num(1), eq.num(1)), (eq.EQ,)))


@pytest.mark.parametrize("text, message", [
    ("x", "unknown name 'x' (an answer is a number"),
    ("[1, 2]", "a single value was expected, not a vector"),
    ("1 + ∞", "∞ can only be a whole answer"),
    ("exp(201)", "power is too large"),
    ("2^100", "value is too large for an answer"),
    ("1/(1 - 1)", "division by zero"),
    ("√(0 - 2)", "square root of a negative number"),
])
def test_the_checkers_decimals_refuse_with_a_message(text, message):
    with pytest.raises(ExpressionError, match=message.replace("(", r"\(").replace("[", r"\[")):
        arith.walk(exprs.parse(text), BOUNDED)


def test_exact_values_bound_powers_with_floats_first():
    with pytest.raises(ExpressionError, match="exponent is too large"):
        arith.exact_value(exprs.parse("exp(-1000)"))
    with pytest.raises(ExpressionError, match="power is too large"):
        arith.exact_value(exprs.parse("0.5^100"))
    with pytest.raises(ExpressionError, match="power is too large"):
        arith.exact_value(exprs.parse("e^(e^(e^100))"))

def test_a_number_too_large_to_read_stays_the_word_typed_and_its_error_comes_where_the_walk_meets_it():
    assert exprs.parse("1e13") == eq.Sym("1e13")
    with pytest.raises(ExpressionError, match="number 1e13 is too large"):
        arith.walk(exprs.parse("2 + 1e13"), BOUNDED)
    with pytest.raises(ExpressionError, match=r"the exponent of 1e999 is out of range"):
        arith.exact_value(exprs.parse("1e999"))
    with pytest.raises(ExpressionError, match="unknown name 'x'"):     # the first error, left to right
        arith.walk(exprs.parse("x + 1e13"), BOUNDED)


def test_floats_name_their_failure():
    with pytest.raises(arith.NotNumeric):
        arith.float_value(exprs.parse("2x"))
    with pytest.raises(ExpressionError, match="cannot evaluate: math range error"):
        arith.float_value(exprs.parse("exp(1000)"))
    assert arith.float_value(exprs.parse("[1, 2]·[3, 4]")) == 11.0
