"""One evaluator over the equation tree, parametrised by an arithmetic.

:func:`walk` visits a tree (:mod:`worked.eq`) once, bottom-up, through a dispatch table by node class, and
leaves every operation to an *arithmetic* object (the way :mod:`worked.attention` has backends):

===================  ==========================================================================================
:data:`FLOAT`        plain floats (a tuple for a vector): the bounds taken before exact evaluation
:class:`Bounded`     50-digit Decimals (:data:`worked.numfmt.CTX`) that refuse huge values: the answer checker's
                     first reading of an entry, before sympy sees anything (e^(e^(e^100)) is an error, not a hang)
:class:`Exact`       exact sympy values, built without ``sympify``, each power bounded with floats first
:data:`AUDIT`        ``(value, error)``: floats with a first-order bound of what the rounded decimals shown
                     carry (the auditor's, :mod:`worked.audit`)
:data:`RATIONAL`     exact Fractions while the arithmetic is rational (else :class:`Undefined`: the tree's
                     ``rational_value`` is None)
===================  ==========================================================================================

An arithmetic's methods take the values of a node's children (already evaluated) and the node itself where
it needs it (a bound, a name for a message). A name (:class:`~worked.eq.Sym` and the other labels) goes to
``label``: the auditor skips it, the checker's arithmetics refuse it with a message. ``Sym("π")`` is π; a
``Sym`` whose name is a number is a number the entry's parser could not read (its error, where it is met).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

from ..errors import ExpressionError
from ..i18n import Msg

PI_NAME = "π"


class Label(Exception):
    """The node names something (a symbol or an entry): it has no value."""


class NotNumeric(Label):
    """The expression contains a name (a label), so it has no numeric value (:data:`FLOAT`)."""


class Undefined(Exception):
    """The value is not one of the arithmetic's (:data:`RATIONAL`: a root, e^x, a label)."""


# ---------------------------------------------------------------- the walk

def walk(node, a):
    """The value of *node* in the arithmetic *a* (exceptions are the arithmetic's: a label, an error)."""
    h = _TABLE.get(type(node))
    if h is None:
        h = _handler(type(node))
    return h(node, a)


def _handler(cls):
    """The handler of a node class, by its name (this module imports nothing of :mod:`worked.eq`, which imports
    it: no cycle), remembered by class; anything else is a label."""
    h = _TABLE[cls] = _BY_NAME.get(cls.__name__, _label) if cls.__module__ == _EQ else _label
    return h


def _num(n, a):
    return a.num(n)


def _dec(n, a):
    return a.dec(n)


def _inf(n, a):
    return a.inf(n)


def _sym(n, a):
    if n.name == PI_NAME and n.sub is None:
        return a.pi()
    return a.label(n)


def _label(n, a):
    return a.label(n)


def _rel(n, a):
    return a.relation(n)


def _vec(n, a):
    if not a.vectors:
        return a.no_vector(n)
    return a.vec([walk(x, a) for x in n.items])


def _neg(n, a):
    return a.neg(walk(n.arg, a))


def _add(n, a):
    terms = n.terms
    v = walk(terms[0], a)
    add = a.add
    for t in terms[1:]:
        v = add(v, walk(t, a))
    return v


def _mul(n, a):
    factors = n.factors
    v = walk(factors[0], a)
    mul = a.mul
    for f in factors[1:]:
        v = mul(v, walk(f, a))
    return v


def _dot(n, a):
    return a.dot(walk(n.left, a), walk(n.right, a))


def _frac(n, a):
    return a.div(walk(n.num, a), walk(n.den, a))


def _sqrt(n, a):
    return a.sqrt(walk(n.arg, a))


def _exp(n, a):
    return a.exp(walk(n.arg, a), n)


def _pow(n, a):
    return a.pow(walk(n.base, a), walk(n.exp, a), n)


#: the functions of one number a shown line may apply (a Transformer block's: its positions, its loss, ReLU); any
#: other call (softmax(scaled), concat(…)) names a matrix: a label. An arithmetic without ``function`` (the
#: checker's) reads every call as a label.
FUNCTIONS = ("sin", "cos", "ln", "relu")


def _call(n, a):
    f = getattr(a, "function", None)
    if f is None or n.name not in FUNCTIONS or len(n.args) != 1:
        return a.label(n)
    return f(n.name, walk(n.args[0], a))


_BY_NAME = {"Num": _num, "Dec": _dec, "Inf": _inf, "Sym": _sym, "Vec": _vec, "Neg": _neg, "Add": _add, "Mul": _mul,
            "Dot": _dot, "Frac": _frac, "Sqrt": _sqrt, "Exp": _exp, "Pow": _pow, "Rel": _rel, "Call": _call}
_EQ = __name__.rpartition(".")[0]     # "worked.eq": the module of the node classes
_TABLE: dict = {}     # node class → handler, filled on first sight by _handler


# ---------------------------------------------------------------- helpers on scalars and tuples

def _map(f, v):
    return tuple(f(x) for x in v) if isinstance(v, tuple) else f(v)


def _zip(f, a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            raise ValueError("vectors of different lengths")
        return tuple(f(x, y) for x, y in zip(a, b))
    return f(a, b)


def _broadcast(f, a, b):
    if isinstance(a, tuple) and isinstance(b, tuple):
        return _zip(f, a, b)
    if isinstance(a, tuple):
        return tuple(f(x, b) for x in a)
    if isinstance(b, tuple):
        return tuple(f(a, y) for y in b)
    return f(a, b)


# ---------------------------------------------------------------- floats

class Float:
    """Plain floats; vectors are tuples and ``[a]·[b]`` is the dot product. Errors are
    :class:`ExpressionError` (see :func:`float_value`); a name raises :class:`NotNumeric`."""

    vectors = True

    def num(self, n):
        return float(n.value)

    dec = num

    def inf(self, n):
        return math.inf

    def pi(self):
        return math.pi

    def label(self, n):
        raise NotNumeric(getattr(n, "name", None))

    def relation(self, n):
        raise ExpressionError(Msg("a relation has no single value"))

    def vec(self, items):
        if any(isinstance(x, tuple) for x in items):
            raise ExpressionError(Msg("nested vectors"))
        return tuple(items)

    def neg(self, v):
        return tuple(-x for x in v) if isinstance(v, tuple) else -v

    def add(self, a, b):
        va, vb = isinstance(a, tuple), isinstance(b, tuple)
        if va != vb:
            raise ExpressionError(Msg("cannot add a vector and a number"))
        if va:
            if len(a) != len(b):
                raise ExpressionError(Msg("vectors of different lengths"))
            return tuple(x + y for x, y in zip(a, b))
        return a + b

    def mul(self, a, b):
        va, vb = isinstance(a, tuple), isinstance(b, tuple)
        if va and vb:
            return self.dot(a, b)
        if va:
            return tuple(x * b for x in a)
        if vb:
            return tuple(a * y for y in b)
        return a * b

    def dot(self, a, b):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            raise ExpressionError(Msg("dot product of vectors of different lengths"))
        return math.fsum(x * y for x, y in zip(a, b))

    def div(self, a, b):
        if isinstance(b, tuple):
            raise ExpressionError(Msg("cannot divide by a vector"))
        if isinstance(a, tuple):
            return tuple(x / b for x in a)
        return a / b

    def sqrt(self, v):
        if isinstance(v, tuple) or v < 0:
            raise ExpressionError(Msg("square root of a negative number or a vector"))
        return math.sqrt(v)

    def exp(self, v, n):
        if isinstance(v, tuple):
            raise ExpressionError(Msg("exp of a vector"))
        return 0.0 if v == -math.inf else math.exp(v)

    def pow(self, b, x, n):
        if isinstance(b, tuple) or isinstance(x, tuple):
            raise ExpressionError(Msg("power of a vector"))
        if b == math.e and x == -math.inf:
            return 0.0
        return math.pow(b, x)


FLOAT = Float()


def float_value(node):
    """*node*'s value in floats (:data:`FLOAT`); arithmetic failures (overflow, a zero divisor, a domain
    error) are :class:`ExpressionError` ``cannot evaluate: …``; a name raises :class:`NotNumeric`."""
    try:
        return walk(node, FLOAT)
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise ExpressionError(Msg("cannot evaluate: {reason}", reason=str(exc))) from None


# ---------------------------------------------------------------- 50-digit bounded Decimals (the checker's)

LIMIT_EXPONENT = 12                 # largest |value| an answer entry may have: 10**12
MAX_EXP_ARG = 200                   # largest x in e^x inside an answer entry
PI_DIGITS = "3.1415926535897932384626433832795028841971693993751"   # π to 50 digits


class Bounded:
    """50-digit Decimals in *ctx* (the checker's :data:`worked.numfmt.CTX`) that refuse huge values (|value| > 10¹², e^x with
    x > 200, a power whose logarithm exceeds 200), a name, ∞ and a vector, each with its message. It
    runs before sympy sees an entry, so nothing expensive is ever evaluated."""

    vectors = False

    def __init__(self, ctx):
        from decimal import Decimal

        self.ctx = ctx          # worked.numfmt.CTX, given by the checker (numfmt imports worked.eq: no cycle)
        self.limit = Decimal(10) ** LIMIT_EXPONENT
        self.pi_value = Decimal(PI_DIGITS)

    def _bounded(self, x):
        if not x.is_finite() or x.copy_abs() > self.limit:
            raise ExpressionError(Msg("value is too large for an answer"))
        return x

    def num(self, n):
        f = n.value
        return self.ctx.divide(f.numerator, f.denominator)

    def dec(self, n):
        return self.ctx.plus(n.value)

    def inf(self, n):
        raise ExpressionError(Msg("∞ can only be a whole answer, as −∞ for a masked score"))

    def pi(self):
        return self.pi_value

    def label(self, n):
        f = _typed_number(n)
        if f is not None:
            return self.ctx.divide(f.numerator, f.denominator)
        if type(n).__name__ == "Sym":
            raise ExpressionError(Msg("unknown name {name} (an answer is a number, such as 0.62, 2√2 or e^2/(1+e^2))",
                                      name=repr(sym_name(n))))
        raise ExpressionError(Msg("not a number"))

    def relation(self, n):
        raise ExpressionError(Msg("not a number"))

    def no_vector(self, n):
        raise ExpressionError(Msg("a single value was expected, not a vector"))

    def neg(self, v):
        return v.copy_negate()

    def add(self, a, b):
        return self._bounded(self.ctx.add(a, b))

    def mul(self, a, b):
        return self._bounded(self.ctx.multiply(a, b))

    def dot(self, a, b):
        raise ExpressionError(Msg("a single value was expected, not a vector"))

    def div(self, a, b):
        if b == 0:
            raise ExpressionError(Msg("division by zero"))
        return self._bounded(self.ctx.divide(a, b))

    def sqrt(self, v):
        if v < 0:
            raise ExpressionError(Msg("square root of a negative number"))
        return self.ctx.sqrt(v)

    def exp(self, v, n):
        if v > MAX_EXP_ARG:
            raise ExpressionError(Msg("power is too large"))
        return self._bounded(self.ctx.exp(v))

    def pow(self, b, x, n):
        ctx = self.ctx
        if b < 0 and x != int(x):
            raise ExpressionError(Msg("fractional power of a negative number"))
        if b == 0 and x <= 0:
            raise ExpressionError(Msg("0 to a power that is not positive"))
        if b != 0 and ctx.multiply(x, ctx.ln(b.copy_abs())).copy_abs() > MAX_EXP_ARG:
            raise ExpressionError(Msg("power is too large"))
        return self._bounded(ctx.power(b, x))


NUMBER_LIMIT = 10**12       # largest |number| written in an entry


def number(s: str) -> Fraction:
    """A number token read exactly ("0.43" is 43/100), its digits and exponent bounded first
    (:func:`worked.exact.decimal`: ``1e99999999`` is an error, not a hundred-million-digit integer)."""
    from ..exact import EntryError, decimal

    try:
        return decimal(s)
    except EntryError as exc:
        raise ExpressionError(exc.args[0]) from None


def bounded_number(s: str) -> Fraction:
    """:func:`number`, refusing more than 10¹² (``number 1e13 is too large``)."""
    f = number(s)
    if abs(f) > NUMBER_LIMIT:
        raise ExpressionError(Msg("number {number} is too large", number=s))
    return f


def _typed_number(n):
    """A :class:`Sym` that is a number as typed (the parser keeps one it could not read as the word): its
    value, or (always, for the parser's) its error. None for any other node."""
    if type(n).__name__ == "Sym" and n.name[:1] in "0123456789.":
        return bounded_number(n.name)
    return None


def sym_name(n) -> str:
    """A name as it was typed: the parser keeps what follows a ``'`` in ``sub`` (a :class:`Sym`'s name has no
    prime)."""
    return n.name + (n.sub or "") if n.sub and n.sub.startswith("'") else n.name


# ---------------------------------------------------------------- exact sympy values

MAX_INT_POWER = 64


class Exact:
    """Exact sympy values, built without ``sympify``; vectors, names and huge powers are refused. A power's
    base and exponent are bounded with floats (:data:`FLOAT`) before the power is built: sympy would
    otherwise try to evaluate something like exp(exp(exp(100))) and never finish."""

    vectors = False

    def __init__(self):
        import sympy as sp

        self.sp = sp

    def num(self, n):
        f = n.value
        return self.sp.Rational(f.numerator, f.denominator)

    def dec(self, n):
        f = Fraction(n.value)
        return self.sp.Rational(f.numerator, f.denominator)

    def inf(self, n):
        return self.sp.oo

    def pi(self):
        return self.sp.pi

    def label(self, n):
        f = _typed_number(n)
        if f is not None:
            return self.sp.Rational(f.numerator, f.denominator)
        if type(n).__name__ == "Sym":
            raise ExpressionError(Msg("unknown name {name}", name=repr(sym_name(n))))
        raise ExpressionError(Msg("not a number"))

    relation = label

    def no_vector(self, n):
        raise ExpressionError(Msg("a single value was expected, not a vector"))

    dot = no_vector

    def neg(self, v):
        return -v

    def add(self, a, b):
        return a + b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        if b == 0:
            raise ExpressionError(Msg("division by zero"))
        return a / b

    def sqrt(self, v):
        if v.is_negative:
            raise ExpressionError(Msg("square root of a negative number"))
        return self.sp.sqrt(v)

    def exp(self, v, n):
        _check_exponent(n.arg, Msg("exponent is too large"))
        return self.sp.exp(v)

    def pow(self, b, x, n):
        if x.is_Rational and b.is_Rational:
            if abs(x.p) > MAX_INT_POWER or x.q > MAX_INT_POWER or abs(b) > 10**6:
                raise ExpressionError(Msg("power is too large"))
        else:
            _check_exponent(n.base, Msg("power is too large"), size=False)
            _check_exponent(n.exp, Msg("power is too large"))
        return self.sp.Pow(b, x)


@functools.cache
def _exact() -> Exact:
    return Exact()


def exact_value(node):
    """*node*'s exact sympy value (:class:`Exact`)."""
    return walk(node, _exact())


def _check_exponent(node, message: str, size: bool = True) -> None:
    """Bound a base or exponent with plain floats before building it exactly. Raises ExpressionError."""
    try:
        v = float_value(node)
    except NotNumeric:
        raise ExpressionError(Msg("unknown name in a power")) from None
    if isinstance(v, tuple) or (size and abs(v) > 700):
        raise ExpressionError(message)


# ---------------------------------------------------------------- the auditor's: (value, error bound)

class Audit:
    """``(value, error)``: the value computed from the numbers as shown (floats; a tuple for a vector) and a
    first-order bound of how far that can be from the value the rounded decimals in it stand for (each
    :class:`Dec` is off by at most ``ulps`` half-units in its last place). A label raises :class:`Label`;
    arithmetic that a shown line cannot hold raises ValueError or ZeroDivisionError."""

    vectors = True

    def num(self, n):
        return float(n.value), 0.0

    def dec(self, n):
        return float(n.value), 0.5 * n.ulps * 10.0 ** -n.places

    def inf(self, n):
        return math.inf, 0.0

    def pi(self):
        return math.pi, 0.0

    def label(self, n):
        raise Label()

    def relation(self, n):
        raise ValueError("a relation has no single value")

    def vec(self, items):
        return tuple(v for v, _ in items), tuple(e for _, e in items)

    def neg(self, p):
        v, e = p
        return (tuple(-x for x in v) if isinstance(v, tuple) else -v), e

    def add(self, p, q):
        (v, e), (v2, e2) = p, q
        if isinstance(v, tuple) or isinstance(v2, tuple):
            return _zip(lambda a, b: a + b, v, v2), _zip(lambda a, b: a + b, e, e2)
        return v + v2, e + e2

    def mul(self, p, q):
        (a, ea), (b, eb) = p, q
        if isinstance(a, tuple) and isinstance(b, tuple):
            raise ValueError("use Dot for a product of two vectors")
        if isinstance(a, tuple):
            return tuple(x * b for x in a), tuple(abs(x) * eb + abs(b) * dx + dx * eb for x, dx in zip(a, ea))
        if isinstance(b, tuple):
            return tuple(a * y for y in b), tuple(abs(a) * dy + abs(y) * ea + ea * dy for y, dy in zip(b, eb))
        return a * b, abs(a) * eb + abs(b) * ea + ea * eb

    def dot(self, p, q):
        (a, ea), (b, eb) = p, q
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            raise ValueError("a dot product needs two vectors of one length")
        v = sum(x * y for x, y in zip(a, b))
        e = sum(abs(x) * dy + abs(y) * dx + dx * dy for x, y, dx, dy in zip(a, b, ea, eb))
        return v, e

    def div(self, p, q):
        (a, ea), (b, eb) = p, q
        if isinstance(b, tuple):
            raise ValueError("cannot divide by a vector")
        if b == 0:
            raise ZeroDivisionError("division by zero in a shown line")
        if math.isinf(b):
            return _map(lambda x: 0.0 if not math.isinf(x) else math.nan, a), 0.0
        lo = abs(b) - eb
        bound = (lambda x, dx: (abs(x) * eb + abs(b) * dx) / (abs(b) * lo)) if lo > 0 else (lambda x, dx: math.inf)
        if isinstance(a, tuple):
            return tuple(x / b for x in a), _zip(bound, a, ea)
        return a / b, bound(a, ea)

    def sqrt(self, p):
        a, ea = p
        r = math.sqrt(a)
        return r, (ea / (2 * math.sqrt(max(a - ea, 0.0)) + 1e-300) if ea else 0.0)

    def exp(self, p, n):
        a, ea = p
        if math.isinf(a):
            return (0.0 if a < 0 else math.inf), 0.0
        v = math.exp(a)
        return v, (math.exp(a + ea) - v if ea else 0.0)

    def pow(self, p, q, n):
        (a, ea), (b, eb) = p, q
        v = a ** b
        if not (ea or eb):
            return v, 0.0
        whole = not eb and float(b).is_integer()      # (−0.5)² is fine: an integer power of any base
        hi = max(abs((a + s * ea) ** (b + u * eb) - v) for s in (-1, 1) for u in (-1, 1) if whole or a + s * ea > 0)
        return v, hi


    def function(self, name: str, p):
        """sin, cos (|derivative| ≤ 1), ln (1/x, bounded below by x − error) and relu of a shown number."""
        a, ea = p
        if isinstance(a, tuple):
            raise ValueError(f"{name} of a vector")
        if name == "sin":
            return math.sin(a), ea
        if name == "cos":
            return math.cos(a), ea
        if name == "ln":
            if a <= 0:
                raise ValueError("ln of a number that is not positive")
            return math.log(a), (ea / (a - ea) if a > ea else math.inf) if ea else 0.0
        return max(a, 0.0), ea


AUDIT = Audit()


# ---------------------------------------------------------------- rational Fractions

class Rational:
    """Exact Fractions (a tuple for a vector) while the arithmetic is rational (+, −, ·, /, whole powers on
    the numbers as shown); anything else (a root, e^x, a label, a zero divisor) raises :class:`Undefined`."""

    vectors = True

    def num(self, n):
        return n.value

    def dec(self, n):
        return Fraction(n.value)

    def _undefined(self, *args):
        raise Undefined()

    inf = label = relation = sqrt = exp = _undefined

    def function(self, name: str, v):
        """relu of a rational is rational; sin, cos and ln of one are not (but sin 0, cos 0, ln 1)."""
        if isinstance(v, tuple):
            raise Undefined()
        if name == "relu":
            return max(v, Fraction(0))
        if v == 0 and name in ("sin", "cos"):
            return Fraction(int(name == "cos"))
        if v == 1 and name == "ln":
            return Fraction(0)
        raise Undefined()

    def pi(self):
        raise Undefined()

    def vec(self, items):
        return tuple(items)

    def neg(self, v):
        return tuple(-x for x in v) if isinstance(v, tuple) else -v

    def add(self, a, b):
        if isinstance(a, tuple) or isinstance(b, tuple):
            return _broadcast(lambda x, y: x + y, a, b)
        return a + b

    def mul(self, a, b):
        if isinstance(a, tuple) or isinstance(b, tuple):
            return _broadcast(lambda x, y: x * y, a, b)
        return a * b

    def dot(self, a, b):
        if not (isinstance(a, tuple) and isinstance(b, tuple)):
            raise Undefined()
        return sum((x * y for x, y in zip(a, b)), Fraction(0))

    def div(self, a, b):
        if isinstance(b, tuple) or b == 0:
            raise Undefined()
        return _map(lambda x: x / b, a)

    def pow(self, a, b, n):
        if isinstance(b, tuple) or b.denominator != 1:
            raise Undefined()
        return _map(lambda x: x ** int(b), a)


RATIONAL = Rational()
