"""Showing exact values: rounding to decimals, and one-line text and LaTeX forms of sympy values.

The text forms use Unicode (√, ·, −, ∞) and are read back by :mod:`worked.exprs`; the LaTeX
forms are ASCII (``\\cdot``, ``-``) so pdflatex, latex2mathml and ziamath all accept them.
"""
from __future__ import annotations

import functools
import re
from decimal import ROUND_HALF_UP, Context, Decimal
from fractions import Fraction

import mpmath
import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

mpmath.mp.dps = 50

MINUS = "−"


# ---------------------------------------------------------------- rounding

def is_rational(x) -> bool:
    return isinstance(x, Fraction) or bool(getattr(x, "is_Rational", False))


def _frac(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    return Fraction(int(x.p), int(x.q))


_PREC200 = Context(prec=200)   # only its precision is read (its flags are never looked at)
_QUANTA: dict = {}             # places -> Decimal 10**-places


def round_decimal(exact, num, places: int) -> Decimal:
    """Round half away from zero: exactly for rationals, from 50 digits otherwise."""
    q = _QUANTA.get(places)
    if q is None:
        q = Decimal(1).scaleb(-places)
        if type(places) is int and len(_QUANTA) < 1000:
            _QUANTA[places] = q
    if is_rational(exact):
        if isinstance(exact, Fraction):
            p, d = exact.numerator, exact.denominator
        else:
            p, d = int(exact.p), int(exact.q)
        if places < 0:
            f = Fraction(p, d) * (10**places)
            p, d = f.numerator, f.denominator
            scale = 1
        else:
            scale = 10**places
        # exactly: |p|·10^places / d rounded half up (the fraction need not be in lowest terms for this)
        n, r = divmod(abs(p) * scale, d)
        if 2 * r >= d:
            n += 1
        return Decimal(n if p >= 0 else -n).scaleb(-places, context=_PREC200).quantize(q, context=_PREC200)
    d = _digits45(num) if type(num) is mpmath.mpf else _digits45.__wrapped__(num)
    ctx = Context(prec=max(200, d.adjusted() + places + 20))
    return d.quantize(q, rounding=ROUND_HALF_UP, context=ctx)


@functools.lru_cache(maxsize=8192)
def _digits45(num) -> Decimal:
    """*num* (an mpmath number) to 45 significant digits, as a Decimal (the same for every number of places)."""
    return Decimal(mpmath.nstr(num, 45, strip_zeros=False, min_fixed=-10**6, max_fixed=10**6))


def dec_str(exact, num, places: int) -> str:
    """The decimal shown for a value, e.g. ``"2.83"``; negative zero shows as ``"0.00"``."""
    d = round_decimal(exact, num, places)
    if d == 0:
        d = abs(d)
    s = f"{d:f}"
    return s.replace("-", MINUS)


def dec_plain(exact, num, places: int) -> str:
    """Like :func:`dec_str` with an ASCII minus (for LaTeX, CSV and JSON)."""
    return dec_str(exact, num, places).replace(MINUS, "-")


def exact_at(exact, places: int) -> bool:
    """True when the decimal shown with *places* places is the exact value (so '=' may be used)."""
    if not is_rational(exact):
        return False
    f = _frac(exact)
    return (f * 10**places).denominator == 1


def rel(exact, places: int) -> str:
    return "=" if exact_at(exact, places) else "≈"


def rel_latex(exact, places: int) -> str:
    return "=" if exact_at(exact, places) else r"\approx"


# ---------------------------------------------------------------- text printer

_ORDERED_TERMS: dict = {}   # (Add, order) -> its terms in printing order, shared by our printers


class _OrderedTerms:
    """Remembers the printing order of each sum's terms (sympy sorts them with numerical evaluations of
    every term, e.g. of e^(√2)); the same sum is printed in text and LaTeX, and inside many weights."""

    def _as_ordered_terms(self, expr, order=None):
        order = order or self.order
        if order in ("old", "none"):   # printer-dependent orders: not remembered
            return super()._as_ordered_terms(expr, order)
        key = (expr, order)
        hit = _ORDERED_TERMS.get(key)
        if hit is None:
            hit = tuple(expr.as_ordered_terms(order=order))
            if len(_ORDERED_TERMS) >= 8192:
                _ORDERED_TERMS.clear()
            _ORDERED_TERMS[key] = hit
        return list(hit)


_COMPLEX: dict = {}   # a number (sympy) -> complex(number), for _as_terms
_FACTORS: dict = {}   # a factor of a term -> complex(factor), or None when it is not a number or has no value


def _complex(x) -> complex:
    hit = _COMPLEX.get(x)
    if hit is None:
        hit = complex(x)   # may raise, as in sympy: nothing remembered then
        if len(_COMPLEX) >= 8192:
            _COMPLEX.clear()
        _COMPLEX[x] = hit
    return hit


def _factor_value(factor):
    """complex(factor) for a numeric factor (``is_number``) that has one, else None (remembered)."""
    hit = _FACTORS.get(factor, _FACTORS)
    if hit is _FACTORS:
        hit = None
        if factor.is_number:
            try:
                hit = complex(factor)
            except (TypeError, ValueError):
                pass
        if len(_FACTORS) >= 8192:
            _FACTORS.clear()
        _FACTORS[factor] = hit
    return hit


def _as_terms(self):
    """sympy 1.14's ``Expr.as_terms`` with the complex value of each number remembered (:func:`_complex`).

    sympy orders the terms of a sum, to print it or to sort the factors of a product holding it, by
    the 15-digit complex value of each numeric factor (``e^(√2)``, ``e^(3√2/2)``…), evaluated afresh
    for every sum; our sums repeat the same few exponentials. Installed in place of
    ``Expr.as_terms`` by :func:`_speed_up_sympy` for sympy 1.14 only (``tests/test_quiz_speedups.py``
    compares it with sympy's on many sums). The code is sympy's, with ``complex`` replaced."""
    from sympy.core.exprtools import decompose_power
    from sympy.core.sorting import default_sort_key

    Add, Mul, S = sp.Add, sp.Mul, sp.S
    gens, terms = set(), []

    for term in Add.make_args(self):
        coeff, _term = term.as_coeff_Mul()

        coeff = _complex(coeff)
        cpart, ncpart = {}, []

        if _term is not S.One:
            for factor in Mul.make_args(_term):
                value = _factor_value(factor)   # as: if factor.is_number: try: coeff *= complex(factor)
                if value is not None:
                    coeff *= value
                    continue

                if factor.is_commutative:
                    base, exp = decompose_power(factor)

                    cpart[base] = exp
                    gens.add(base)
                else:
                    ncpart.append(factor)

        coeff = coeff.real, coeff.imag
        ncpart = tuple(ncpart)

        terms.append((term, (coeff, cpart, ncpart)))

    gens = sorted(gens, key=default_sort_key)

    k, indices = len(gens), {}

    for i, g in enumerate(gens):
        indices[g] = i

    result = []

    for term, (coeff, cpart, ncpart) in terms:
        monom = [0]*k

        for base, exp in cpart.items():
            monom[indices[base]] = exp

        result.append((term, (coeff, tuple(monom), ncpart)))

    return result, gens


_SYMPY_ORIGINALS: list = []   # (owner, name, original) replaced by _speed_up_sympy


def _speed_up_sympy() -> None:
    """Install :func:`_as_terms` as ``Expr.as_terms`` (sympy 1.14, only Expr defines it)."""
    if _SYMPY_ORIGINALS or sp.__version__ != "1.14.0" or "as_terms" not in sp.Expr.__dict__:
        return
    _SYMPY_ORIGINALS.append((sp.Expr, "as_terms", sp.Expr.__dict__["as_terms"]))
    sp.Expr.as_terms = _as_terms


def _unpatch_sympy() -> None:
    """Restore sympy as it was before :func:`_speed_up_sympy` (for the tests)."""
    while _SYMPY_ORIGINALS:
        owner, name, original = _SYMPY_ORIGINALS.pop()
        setattr(owner, name, original)


_speed_up_sympy()


_TEXT_PARTS: dict = {}   # (kind, sum or product, nesting level) -> its text, for TextPrinter


class TextPrinter(_OrderedTerms, StrPrinter):
    """sympy's str printer with √, e^(…), · and − (one line, readable, re-readable by worked.exprs)."""

    # The text of a sum or product depends only on it and the nesting level (the only state StrPrinter
    # reads, for floats): remembered, since the same denominators recur in every weight of a row.
    def _print_Add(self, expr, order=None):
        if order is not None:
            return super()._print_Add(expr, order)
        return self._remembered("Add", expr, super()._print_Add)

    def _print_Mul(self, expr):
        return self._remembered("Mul", expr, super()._print_Mul)

    def _remembered(self, kind, expr, make):
        key = (kind, expr, self._print_level)
        hit = _TEXT_PARTS.get(key)
        if hit is None:
            hit = make(expr)
            if len(_TEXT_PARTS) >= 16384:
                _TEXT_PARTS.clear()
            _TEXT_PARTS[key] = hit
        return hit

    def _print_Pow(self, expr, rational=False):
        b, e = expr.as_base_exp()
        if e == sp.S.Half:
            inner = self._print(b)
            return "√" + (inner if b.is_Atom and (b.is_Integer and b >= 0) else f"({inner})")
        if e == -sp.S.Half:
            inner = self._print(b)
            return "1/√" + (inner if b.is_Integer and b >= 0 else f"({inner})")
        return super()._print_Pow(expr, rational)

    def _print_exp(self, expr):
        a = expr.args[0]
        s = self._print(a)
        if a.is_Integer and a >= 0:
            return f"e^{s}"
        return f"e^({s})"

    def _print_Exp1(self, expr):
        return "e"

    def _print_Infinity(self, expr):
        return "∞"

    def _print_NegativeInfinity(self, expr):
        return "-∞"


_text_printer = TextPrinter({"order": None})


@functools.lru_cache(maxsize=8192)
def _text_cached(expr) -> str:
    return _text_raw(expr)


def text(expr) -> str:
    """One-line Unicode text of an exact value (cached per expression)."""
    if isinstance(expr, Fraction):
        expr = sp.Rational(expr.numerator, expr.denominator)
    return _text_cached(expr)


def _text_raw(expr) -> str:
    """One-line Unicode text of an exact value: ``2√2``, ``e^(√2)/(2 + e^(√2))``, ``1/3``."""
    if isinstance(expr, Fraction):
        expr = sp.Rational(expr.numerator, expr.denominator)
    s = _text_printer.doprint(expr)
    s = s.replace("exp(", "e^(")
    s = re.sub(r"(?<![\w.])(\d+)\*(?=[√e(])", r"\1", s)  # 2*√2 -> 2√2, 2*e^(..) -> 2e^(..)
    s = s.replace("*", "·")
    s = s.replace("-", MINUS)
    return s


# ---------------------------------------------------------------- LaTeX printer

class TexPrinter(_OrderedTerms, LatexPrinter):
    """sympy's LaTeX printer, kept ASCII, with e^{x} for exponentials."""

    def __init__(self):
        super().__init__({"mul_symbol": None, "fold_short_frac": False})


    def _print_ExpBase(self, expr, exp=None):
        # exponents read better inline: e^{3 \sqrt{2} / 2}, not a cramped stacked fraction
        tex = r"e^{%s}" % _tex_inline.doprint(expr.args[0])
        return self._do_exponent(tex, exp)


class _InlineTexPrinter(_OrderedTerms, LatexPrinter):
    def __init__(self):
        super().__init__({"mul_symbol": None, "fold_short_frac": True})


_tex_inline = _InlineTexPrinter()
_tex_printer = TexPrinter()


def latex_inline(expr) -> str:
    """LaTeX with short fractions folded to a/b (for exponents; cached per expression)."""
    if isinstance(expr, Fraction):
        expr = sp.Rational(expr.numerator, expr.denominator)
    return _latex_inline_cached(expr)


@functools.lru_cache(maxsize=8192)
def _latex_inline_cached(expr) -> str:
    return _tex_inline.doprint(expr)


def latex(expr) -> str:
    """ASCII LaTeX of an exact value (cached per expression)."""
    if isinstance(expr, Fraction):
        expr = sp.Rational(expr.numerator, expr.denominator)
    return _latex_cached(expr)


@functools.lru_cache(maxsize=8192)
def _latex_cached(expr) -> str:
    if isinstance(expr, Fraction):
        expr = sp.Rational(expr.numerator, expr.denominator)
    if expr is sp.S.NegativeInfinity:
        return r"-\infty"
    return _tex_printer.doprint(expr)


def num_text(f) -> str:
    """A rational input entry in text: ``3``, ``0.43``, ``1/2``, with − for negatives."""
    return _rat_str(f).replace("-", MINUS)


def num_latex(f) -> str:
    f = _frac(f) if not isinstance(f, Fraction) else f
    if f.denominator == 1 or _terminates(f):
        return _rat_str(f)
    sign = "-" if f < 0 else ""
    return rf"{sign}\frac{{{abs(f.numerator)}}}{{{f.denominator}}}"


def _terminates(f: Fraction) -> bool:
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1 and f.denominator <= 10**6


def _rat_str(f) -> str:
    f = f if isinstance(f, Fraction) else _frac(f)
    if f.denominator == 1:
        return str(f.numerator)
    if _terminates(f):
        s = format(Decimal(f.numerator) / Decimal(f.denominator), "f")
        return s
    return f"{f.numerator}/{f.denominator}"


def paren_text(s: str) -> str:
    """Wrap a text factor in parentheses when it would not read as one factor (negative, sum, fraction)."""
    if s.startswith(MINUS) or s.startswith("-") or any(c in s for c in "+/") or (MINUS in s[1:]):
        return f"({s})"
    return s


def paren_latex(s: str) -> str:
    if s.startswith("-") or "+" in s or "frac" in s or "-" in s[1:]:
        return rf"\left({s}\right)"
    return s
