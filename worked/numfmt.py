"""Numbers as shown: exact rounding to decimals, 50-digit values, and short text/LaTeX of exact values.

Rounding is half away from zero: exactly for rationals, from 50 significant digits otherwise
(computed in this module's own decimal contexts, so nobody else's precision is touched: :data:`CTX`
rounds to the nearest; :data:`DOWN` and :data:`UP` round toward −∞ and +∞, for the ends of the
intervals of :class:`worked.attention.Interval`). Exact
values become trees here (:func:`node`, :func:`worked.eq.from_sympy`) and each format's printer
(:mod:`worked.printers`) writes them; this module imports no printer. The plain digits of a shown number
(:func:`rat_str`, :func:`dec_str`, :func:`number_text`) are written here, and the printers use them.
"""
from __future__ import annotations

from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from fractions import Fraction

from . import eq

MINUS = "−"

CTX = Context(prec=50, Emax=10**6, Emin=-10**6)   # our own decimal context: 50 digits (nobody else's setting)
# directed rounding for interval ends (+, −, ×, ÷ are exact then rounded down/up; exp and sqrt are
# correctly rounded to the nearest in any context, so interval code steps them outward by one unit);
# the exponent range is decimal's widest, so e^x of any bounded answer neither overflows nor underflows
DOWN = Context(prec=50, rounding=ROUND_FLOOR, Emax=MAX_EMAX, Emin=MIN_EMIN)
UP = Context(prec=50, rounding=ROUND_CEILING, Emax=MAX_EMAX, Emin=MIN_EMIN)
NEG_INF = Decimal("-Infinity")
_WHOLE = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)     # moves a decimal point exactly (scaleb)
_SIG45, _SIG60 = Context(prec=45), Context(prec=60)     # round_decimal's: 45 significant digits, and room to quantize


class N:
    """50-digit arithmetic on Decimals, every operation in :data:`CTX` (never the thread's context)."""

    add, sub, mul, div, exp, sqrt, abs = CTX.add, CTX.subtract, CTX.multiply, CTX.divide, CTX.exp, CTX.sqrt, CTX.abs

    @staticmethod
    def sum(xs) -> Decimal:
        total = Decimal(0)
        for x in xs:
            total = CTX.add(total, x)
        return total


def is_rational(x) -> bool:
    return isinstance(x, (Fraction, int)) or bool(getattr(x, "is_Rational", False))


def frac(x) -> Fraction:
    """A rational value (int, Fraction or sympy Rational) as a Fraction."""
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    return Fraction(int(x.p), int(x.q))


def mp(x) -> Decimal:
    """A 50-digit value (a Decimal) of a Fraction or an int."""
    f = frac(x)
    return CTX.divide(Decimal(f.numerator), Decimal(f.denominator))


def rounded_units(f: Fraction, places: int) -> int:
    """The rational *f* rounded to *places*, half away from zero, in units of its last place (10^−places): the
    rounded value is that integer · 10^−places."""
    p, d = f.numerator, f.denominator
    n, r = divmod(abs(p) * 10**places, d) if places >= 0 else divmod(abs(p), d * 10**-places)
    if 2 * r >= d * (1 if places >= 0 else 10**-places):
        n += 1
    return n if p >= 0 else -n


def round_decimal(exact, num, places: int) -> Decimal:
    """*exact* (a rational) or else *num* (a 50-digit Decimal) rounded to *places*, half away from zero
    (from 45 significant digits)."""
    if is_rational(exact):
        return Decimal(rounded_units(frac(exact), places)).scaleb(-places, context=_WHOLE)
    d = _SIG45.plus(num)
    top = d.adjusted() + places + 20
    return d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP, context=_SIG60 if top <= 60 else Context(prec=top))


def shortest_in(lo: Decimal, hi: Decimal) -> Decimal:
    """The decimal with the fewest places in [lo, hi] (0 when the interval holds it): a value known only by an
    enclosure, written with the digits the enclosure fixes."""
    if lo <= 0 <= hi:
        return Decimal(0)
    wide = Context(prec=max(60, lo.adjusted() + 80, hi.adjusted() + 80))

    def at(places):         # the smallest decimal of *places* places from lo up, when it is in [lo, hi]
        c = lo.quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING, context=wide)
        return c if c <= hi else None

    high = min(119, wide.prec - abs(lo.adjusted()) - 2)       # places whose quantize the context holds
    if at(high) is None:
        return lo
    # a decimal with k places in [lo, hi] is one with k + 1 places too: search the fewest, first at the places
    # the interval's width gives (one at least 10^-k wide holds a decimal of k places: mostly the fewest)
    k = min(high, max(0, -wide.subtract(hi, lo).adjusted()))
    if at(k) is None:
        low = k + 1
    elif k == 0 or at(k - 1) is None:
        return at(k)
    else:
        low, high = 0, k - 1
    while low < high:
        mid = (low + high) // 2
        if at(mid) is None:
            low = mid + 1
        else:
            high = mid
    return at(low)


def exact_at(exact, places: int) -> bool:
    """True when the decimal shown with *places* places is the exact value (so '=' may be used)."""
    return is_rational(exact) and (frac(exact) * 10**places).denominator == 1


def terminating(f: Fraction, max_places: int) -> bool:
    """Does *f* have at most *max_places* decimal places (f·10^places whole: its denominator, in lowest terms,
    divides 10^places)?"""
    return 10**max_places % f.denominator == 0


def node(exact):
    """The tree of an exact value (a Fraction, an int or a sympy value)."""
    if isinstance(exact, (Fraction, int)):
        return eq.num(exact)
    return eq.from_sympy(exact)


def hand_node(h: Fraction, places: int):
    """The tree of a value as a hand carries it (:class:`worked.attention.Hand`): a plain Fraction is exact
    (``2``, ``1/3``); a rounded one (``Approx``) is a decimal of *places* places (``0.4908``, ``2.5000``)."""
    if type(h) is Fraction:
        return eq.num(h)
    return eq.dec(Decimal(h.numerator * 10**places // h.denominator).scaleb(-places))


def terminates(f: Fraction) -> bool:
    """True when *f* is a decimal with at most 6 places (shown as a decimal, not a fraction)."""
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    return d == 1 and f.denominator <= 10**6


def rat_str(f: Fraction) -> str:
    """``3``, ``0.43`` or ``1/3`` (ASCII minus)."""
    if f.denominator == 1:
        return str(f.numerator)
    if terminates(f):
        return format(Decimal(f.numerator) / Decimal(f.denominator), "f")
    return f"{f.numerator}/{f.denominator}"


def dec_str(d) -> str:
    """A shown decimal, ASCII minus, never ``-0.00``."""
    s = f"{d:f}"
    return s.lstrip("-") if d == 0 else s


def number_text(n) -> str:
    """A shown number (an :class:`worked.eq.Num` or :class:`worked.eq.Dec`) as Unicode text, as the text printer
    writes it: ``0.4908``, ``−1/3`` (for a number that prose names in words, not as math)."""
    if type(n) is eq.Num:
        return rat_str(n.value).replace("-", MINUS)
    if type(n) is eq.Dec:
        return dec_str(n.value).replace("-", MINUS)
    raise TypeError(f"not a shown number: {n!r}")
