"""The equation tree: every displayed line of a worked solution is one of these, built once.

Nodes are small immutable values (hashable, so a printer may remember its output by value).
They know nothing of any output format: :mod:`worked.printers` turns a tree into Unicode text,
ASCII LaTeX, MathML, Typst or a spoken form, and :func:`evaluate` gives its value (for the
auditor) with the rounding error that its rounded decimals carry.

==========  =====================================================================
node        what it shows
==========  =====================================================================
Num         an exact rational: ``2``, ``−3``, ``0.5``, ``1/3``
Dec         a rounded decimal with a fixed number of places: ``0.1636``
Sym         a named thing: ``Q``, ``W_Q``, ``x_cats``, ``Q⁽¹⁾``, ``scaled``; or a word set as one, ``sum``
Entry       an entry or a row of a matrix: ``Q[cats, 1]``, ``scaled[cats, ·]``
Col         a column of a matrix: ``W_Q[:, 1]``
Item        an entry of a vector: ``b_1[2]``
Vec         a row vector ``[a, b, c]``
Dot         a dot product ``a·b`` of two vectors (or of two symbols)
Add, Mul    sums (a negative term prints as ``− x``) and products (``2√2``, ``0.16·[2, 1]``)
Neg         unary minus
Frac        a quotient: ``a/b`` in text, a fraction elsewhere
Pow, Sqrt   powers and square roots
Exp         ``e^x``
Inf         ``∞`` (``Neg(Inf())`` is ``−∞``)
Sum         ``Σ_j A[cats, j]``
Call        ``softmax(scaled)``, ``concat(Z⁽¹⁾, Z⁽²⁾)``
Blank       room for an answer: ``Q[cats, 1] = ``
Dims, Arrow shapes: ``(3×4)·(4×2) → 3×2``
Rel         a chain ``a = b ≈ c`` (ops ``=``, ``≈``, ``→``)
Prose       a run of prose with math in it: ``("the row's sum ", s_i, " first")``
Said        a sentence declared in English with named places for its math, printed in the shown language:
            ``say("Divide the scores by {root}.", root=tree)`` (:mod:`worked.i18n`)
==========  =====================================================================
"""
from __future__ import annotations

import functools
import operator
import re
from decimal import Decimal
from fractions import Fraction

from ..i18n import N_

__all__ = [
    "Node", "Num", "Dec", "Sym", "Entry", "Col", "Item", "Vec", "Dot", "Add", "Mul", "Neg", "Frac", "Pow", "Sqrt",
    "Exp", "Inf", "Sum", "Call", "Blank", "Dims", "Rel", "Prose", "Said", "NumText", "ALL", "prose", "say", "num", "dec", "neg_inf", "matrix_sym", "from_sympy", "evaluate", "is_label",
    "EQ", "APPROX", "TO", "COLSUM", "LN_BACK", "CALL_WORDS",
]

EQ, APPROX, TO = "=", "≈", "→"
ALL = "·"   # the index of a whole row or column: scaled[cats, ·]


class Node:
    """Base of every node: an immutable value that compares and hashes by value (the hash is
    computed when it is made). A subclass names its fields in ``__slots__``; ``_defaults`` gives the values of
    trailing fields that may be left out."""

    __slots__ = ("_hash",)
    _fields: tuple = ()
    _named: tuple = ("Node",)
    _checks: bool = False
    _defaults: dict = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._fields = fields = tuple(cls.__dict__.get("__slots__", ()))
        cls._named = (cls.__name__,)    # the first item of what its hash is of
        cls._checks = cls._check is not Node._check     # whether it checks its values when made
        if len(fields) > 1:     # the fields' values in one C call (compared and hashed for every cached print)
            get = operator.attrgetter(*fields)
            cls._key = lambda self: get(self)
        elif fields:
            name = fields[0]
            cls._key = lambda self: (getattr(self, name),)
        else:                   # no fields of its own (Inf, Blank): an empty key
            cls._key = lambda self: ()

    def __init__(self, *args, **kw):
        fields = self._fields
        put = object.__setattr__
        for name, value in zip(fields, args):
            put(self, name, value)
        if kw or len(args) != len(fields):      # fields left out or named: each from *kw*, else its default
            if len(args) > len(fields):
                raise TypeError(f"{type(self).__name__} takes {len(fields)} values, got {len(args)}")
            for name in fields[len(args):]:
                if name in kw:
                    put(self, name, kw.pop(name))
                elif name in self._defaults:
                    put(self, name, self._defaults[name])
                else:
                    raise TypeError(f"{type(self).__name__}: missing {name}")
            if kw:
                raise TypeError(f"{type(self).__name__}: unknown field {next(iter(kw))}")
            args = self._key()
        if self._checks:
            self._check()
        # its hash, once, of its values in order (*args* is what _key gives): a tree is hashed whole by the
        # printers' caches (its children's hashes read, not computed again), and equality compares hashes first
        put(self, "_hash", hash(self._named + args))

    def _check(self) -> None:
        pass

    @property
    def fields(self) -> dict:
        """The node's fields by name, in order."""
        return {f: getattr(self, f) for f in self._fields}

    def children(self):
        """The nodes directly inside this one, in order."""
        for f in self._fields:
            x = getattr(self, f)
            if isinstance(x, Node):
                yield x
            elif isinstance(x, tuple):
                yield from (y for y in x if isinstance(y, Node))

    def _key(self) -> tuple:
        return tuple(getattr(self, f) for f in self._fields)

    def __eq__(self, other):
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self._hash == other._hash and self._key() == other._key()

    def __hash__(self):
        return self._hash

    def __setattr__(self, name, value):
        raise AttributeError(f"{type(self).__name__} is immutable")

    __delattr__ = __setattr__

    def __reduce__(self):
        return type(self), self._key()

    def __repr__(self):
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

class Num(Node):
    """An exact rational number."""
    __slots__ = ('value',)


class Dec(Node):
    """A decimal rounded to ``places`` places (``value`` is exactly what is shown). It stands for a
    value within ``ulps`` half-units of its last place: 1 for a rounded value, k for the sum of k
    rounded values (a row total)."""
    __slots__ = ('value', 'places', 'ulps')
    _defaults = {'ulps': 1}


class Sym(Node):
    """A name. ``sub`` is a subscript (a token label or a letter), ``head`` a head number shown as ⁽¹⁾;
    ``upright`` names of several letters (``scaled``, ``sum``) are set upright in math; ``prime`` marks
    the value after an update (``W_Q′``, ``L′``, ``z′_cats``), printed as one prime in every format. ``word``: the
    name is a word of the language (``Sym(N_("sum"), upright=True, word=True)``, the row total of a softmax), which
    every printer writes in the current language (``Summe``, ``somme``); other names (``scores``, ``W_Q``) are the
    problem's and stay.

    The one rule for upright and italic: a name whose letters before ``_`` are one letter is italic
    (``L``, ``z``, ``W_Q``), a name of several letters is upright (``scores``, ``dW_Q``); a prime never
    changes that."""
    __slots__ = ('name', 'sub', 'head', 'upright', 'prime', 'word')
    _defaults = {'sub': None, 'head': None, 'upright': False, 'prime': False, 'word': False}

    def _check(self):
        if "′" in self.name or "'" in self.name:
            raise ValueError(f"a prime is Sym(..., prime=True), not part of the name {self.name!r}")


class Entry(Node):
    """``base[row, col]``; a label is a token (shown as text) or a number; ``ALL`` is a whole row/column.
    Every printer writes the indices in brackets after the symbol (``dW_Q[1, 1]``, ``Q[cats, 1]``), as
    the worksheet's prompts and the quiz's questions do: a subscript is never nested in a subscript."""
    __slots__ = ('base', 'row', 'col')


class Col(Node):
    """Column ``col`` of ``base``: ``W_Q[:, 1]``."""
    __slots__ = ('base', 'col')


class Item(Node):
    """Entry ``index`` of the vector ``base``: ``b_1[2]`` (a bias, γ or β of a Transformer block)."""
    __slots__ = ('base', 'index')


class Vec(Node):
    __slots__ = ('items',)


class Dot(Node):
    __slots__ = ('left', 'right')


class Add(Node):
    __slots__ = ('terms',)


class Mul(Node):
    __slots__ = ('factors',)


class Neg(Node):
    __slots__ = ('arg',)


class Frac(Node):
    __slots__ = ('num', 'den')


class Pow(Node):
    __slots__ = ('base', 'exp')


class Sqrt(Node):
    __slots__ = ('arg',)


class Exp(Node):
    __slots__ = ('arg',)


class Inf(Node):
    __slots__ = ()


class Sum(Node):
    """``Σ_index body``."""
    __slots__ = ('body', 'index')


class Call(Node):
    """A named function applied to arguments: ``softmax(scaled)``, ``concat(Z⁽¹⁾, Z⁽²⁾)``."""
    __slots__ = ('name', 'args')


#: The names of a :class:`Call` that are words of the language, shown translated (``printers.base.call_name``; the
#: tree keeps the English name, which arith evaluates by): a bias's gradient ``colsum(dR2)``, the layer norm's
#: backward ``LNback(dY, X, γ)``. Every other name (softmax, exp, ln, relu, LN, concat) is a symbol, shown as it is.
COLSUM, LN_BACK = N_("colsum"), N_("LNback")
CALL_WORDS = frozenset((COLSUM, LN_BACK))


class Blank(Node):
    """Room to write an answer (a worksheet prompt ``Q[cats, 1] = …``, a grid heading ``Q =``)."""
    __slots__ = ()


class Dims(Node):
    """A shape ``rows×cols``."""
    __slots__ = ('rows', 'cols')


class Rel(Node):
    """``items[0] ops[0] items[1] ops[1] …``"""
    __slots__ = ('items', 'ops')

    def _check(self):
        if len(self.ops) != len(self.items) - 1:
            raise ValueError("a relation chain has one operator fewer than items")


class Prose(Node):
    """A run of prose with its math as trees: ``parts`` are strings (text, printed as text) and nodes
    (math, printed by the format's printer). The text printer gives plain Unicode text; the page
    printers give text with inline math (LaTeX ``$…$``, Typst ``$…$`` with alt text, ``<math>``)."""
    __slots__ = ('parts',)

    def _check(self):
        for x in self.parts:
            if not isinstance(x, (str, Node)) or isinstance(x, Prose):
                raise TypeError(f"a Prose part is a string or a math node, not {type(x).__name__}")

    def __str__(self):
        from .. import printers

        return printers.text(self)

    def localized(self, loc) -> "Prose":
        """This prose with every sentence in it (a :class:`Said` part) in *loc*; itself when it has none."""
        if not any(type(x) is Said for x in self.parts):
            return self
        return prose(*(_localized(x, loc) for x in self.parts))


class Said(Node):
    """A sentence in English with named placeholders (``msgid``: ``"Divide the scores by {root}."``, the
    catalogues' key) and what stands in them (``args``: pairs of a name and a string, a math node, a Prose or
    another Said). The printers show it in the current language (:func:`worked.i18n.localize`: the translation
    cut at its placeholders); in English it is the prose its pieces make. It may stand in a Prose."""
    __slots__ = ('msgid', 'args')

    def _check(self):
        for name, x in self.args:
            if not isinstance(x, (str, Node)):
                raise TypeError(f"a Said value is a string or a node, not {type(x).__name__} ({name})")

    def __str__(self):
        from .. import printers

        return printers.text(self)

    def localized(self, loc) -> "Prose":
        """The prose this sentence says in *loc* (a :class:`worked.i18n.Locale`): its translation cut at its
        placeholders, each value put in (math as math, words as words)."""
        return prose(*(_localized(x, loc) for x in loc.pieces(self.msgid, dict(self.args))))


class NumText(Node):
    """A shown number (a :class:`Num` or :class:`Dec`) written as text in a sentence, not as math (``0.4908`` in
    “(0.4908 from the loss)”): only a value of a :class:`Said`, where it is written in the shown language's digits."""
    __slots__ = ('num',)

    def localized(self, loc) -> str:
        """The number as the text printer writes it in the current language (which *loc* is: it is printed now)."""
        from .. import printers

        return printers.text(self.num)


def _localized(x, loc):
    """A value of a sentence in *loc*: a Said, a Prose or a NumText in that language; anything else as it is."""
    return x.localized(loc) if type(x) in (Said, Prose, NumText) else x


# ---------------------------------------------------------------- building helpers

def say(msgid: str, **args) -> Said:
    """A sentence to translate: *msgid* (marked for extraction where it is written: ``say(N_("…"), …)`` or a
    literal first argument, which pybabel is told to extract) and the values of its ``{name}`` placeholders."""
    return Said(msgid, tuple(args.items()))


def prose(*parts) -> Prose:
    """A :class:`Prose` from strings, math nodes and other Prose (flattened; neighbouring strings
    joined, empty ones dropped). ``prose(p)`` of a Prose is *p*; ``prose("text")`` is text only."""
    if len(parts) == 1 and type(parts[0]) is Prose:
        return parts[0]
    out: list = []
    for x in parts:
        items = x.parts if type(x) is Prose else (x,)
        for y in items:
            if isinstance(y, str):
                if not y:
                    continue
                if out and isinstance(out[-1], str):
                    out[-1] += y
                    continue
            elif not isinstance(y, Node):
                raise TypeError(f"a Prose part is a string or a math node, not {type(y).__name__}")
            out.append(y)
    return Prose(tuple(out))


def num(x) -> Num:
    """An exact number from an int, a Fraction or a sympy Rational."""
    if isinstance(x, Fraction):
        return Num(x)
    if isinstance(x, int):
        return Num(Fraction(x))
    return Num(Fraction(int(x.p), int(x.q)))


def dec(d: Decimal, ulps: int = 1) -> Dec:
    """A rounded decimal as it is shown (its exponent gives the places)."""
    places = max(0, -d.as_tuple().exponent)
    if d == 0:
        d = abs(d)
    return Dec(d, places, ulps)


_GREEK_KEYS = {"gamma": "γ", "beta": "β"}


def shown_name(key: str) -> str:
    """The name a symbol writes for a problem's key: a layer norm's ``gamma_1``, ``beta_f`` and their gradients
    ``dgamma_2`` as ``γ_1``, ``β_f``, ``dγ_2`` (Greek with the subscript, as ``W_Q`` is W with Q); other names as
    they are."""
    letters, sep, sub = key.partition("_")
    d = "d" if letters.startswith("d") and letters[1:] in _GREEK_KEYS else ""
    greek = _GREEK_KEYS.get(letters[len(d):])
    return d + greek + sep + sub if greek else key


def matrix_sym(base: str, head: int | None = None, **kw) -> Sym:
    """A matrix's symbol as the steps write it: ``Q``, ``Q⁽¹⁾`` (*head* only with several heads),
    ``W_Q⁽¹⁾``, ``γ_1`` for the key ``gamma_1`` (:func:`shown_name`); names of several letters (``scores``,
    ``scaled``, ``concat``, ``dW_Q``, ``dγ_2``) are set upright."""
    name = shown_name(base)
    return Sym(name, head=head, upright=len(name.partition("_")[0]) > 1, **kw)


def tok_label(tok: str, i: int) -> str:
    """How a token names a row in a formula (``Q[cats, 1]``, ``x_cats``): the token when it is a plain word, else
    its number (1-based)."""
    return tok if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,19}", tok) else str(i + 1)


def neg_inf() -> Neg:
    return Neg(Inf())


# ---------------------------------------------------------------- sympy values as trees

@functools.lru_cache(maxsize=4096)
def from_sympy(expr) -> Node:
    """The tree of an exact sympy value of the kinds a solution holds: rationals, √n, e^x, sums,
    products and quotients of those, and −∞. Terms of a sum are ordered by their e^x argument
    (constants first), then by coefficient, so the same value always prints the same way.

    Remembered by value (sympy values and trees are immutable) in one bounded cache: eviction
    only means building the tree again."""
    import sympy as sp

    if expr is sp.S.NegativeInfinity:
        return neg_inf()
    if expr is sp.S.Infinity:
        return Inf()
    if expr is sp.E:
        return Exp(Num(Fraction(1)))
    if expr.is_Rational:
        return num(expr)
    if expr.is_Float:       # a value known to its digits (a gradient entry, the loss after the update)
        return dec(Decimal(str(expr)))
    if isinstance(expr, sp.exp):
        return Exp(from_sympy(expr.args[0]))
    if expr.is_Add:
        return Add(tuple(from_sympy(t) for t in _ordered(expr.args, _term_key)))
    if expr.is_Pow:
        base, e = expr.args
        if e == sp.S.Half:
            return Sqrt(from_sympy(base))
        if e.is_Rational and e < 0:
            return Frac(Num(Fraction(1)), from_sympy(base ** -e))
        if base is sp.E:
            return Exp(from_sympy(e))
        return Pow(from_sympy(base), from_sympy(e))
    if expr.is_Mul:
        coeff, rest = expr.as_coeff_Mul()
        numer, denom = [], []
        for f in sp.Mul.make_args(rest):
            if f.is_Pow and f.args[1].is_Rational and f.args[1] < 0:
                denom.append(f.args[0] ** -f.args[1])
            else:
                numer.append(f)
        c = Fraction(int(coeff.p), int(coeff.q))
        top = [from_sympy(f) for f in _ordered(numer, _factor_key)]
        bot = [from_sympy(f) for f in _ordered(denom, _factor_key)]
        sign = c < 0
        c = abs(c)
        if c.numerator != 1 or not top:
            top.insert(0, Num(Fraction(c.numerator)))
        if c.denominator != 1:
            bot.insert(0, Num(Fraction(c.denominator)))
        t = top[0] if len(top) == 1 else Mul(tuple(top))
        node = t if not bot else Frac(t, bot[0] if len(bot) == 1 else Mul(tuple(bot)))
        return Neg(node) if sign else node
    raise TypeError(f"no tree for the value {expr!r}")


def _exp_arg(expr):
    import sympy as sp

    for f in sp.Mul.make_args(expr):
        if isinstance(f, sp.exp):
            return f.args[0]
    return sp.S.Zero


def _ordered(items, key) -> list:
    """*items* sorted by *key*, then by sympy's ``default_sort_key`` where *key* ties (the same value
    always prints the same way). sympy's key is costly: it is taken only when some keys tie."""
    keys = [key(x) for x in items]
    if len(set(keys)) < len(keys):
        import sympy as sp

        keys = [(k, sp.default_sort_key(x)) for k, x in zip(keys, items)]
    return [items[i] for i in sorted(range(len(items)), key=keys.__getitem__)]


def _term_key(t):
    """A term of a sum: by its e^x argument (constants first), then by its coefficient."""
    return (float(_exp_arg(t)), float(t.as_coeff_Mul()[0]))


def _factor_key(f):
    """A factor of a product: numbers and roots before sums and exponentials (2√2·e^x, (2 + e^x))."""
    import sympy as sp

    return 0 if f.is_Number else 1 if f.is_Pow else 3 if isinstance(f, sp.exp) else 2


# ---------------------------------------------------------------- evaluation (one walk: worked.eq.arith)

def is_label(node: Node) -> bool:
    """Whether *node* names something (a symbol, an entry) instead of being a number."""
    return evaluate(node) is None


def evaluate(node: Node):
    """``(value, error)``: the value of *node* computed from the numbers as shown (floats; a tuple for
    a vector), and a first-order bound of how far that can be from the value the rounded decimals in
    it stand for (each :class:`Dec` is off by at most half a unit in its last place). None when the
    node names something instead of being a number. The auditor's arithmetic (:data:`worked.eq.arith.AUDIT`)."""
    try:
        return _walk(node, _AUDIT)
    except _Label:
        return None


def rational_value(node: Node):
    """The exact value of *node* when it is rational arithmetic (+, −, ·, /, whole powers) on the numbers as
    shown (a Fraction; a tuple for a vector), else None (a root, e^x, a label)."""
    try:
        return _walk(node, _RATIONAL)
    except _Undefined:
        return None


from .arith import AUDIT as _AUDIT, RATIONAL as _RATIONAL, Label as _Label, Undefined as _Undefined, walk as _walk  # noqa: E402
