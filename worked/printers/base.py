"""The printer base: ``_print_<Node>`` dispatch (as in sympy's printers) and one precedence table.

Brackets are decided here, once, from the precedence of a child and of the place it stands in,
so no printer can write ``e^x/3e^x`` for ``e^x/(3e^x)``.
"""
from __future__ import annotations


from .. import eq, i18n
from ..numfmt import terminates

#: labels that are index letters (italic math), not tokens (text): A[i, j], Σ_k A[i, k]
INDEX_LETTERS = ("i", "j", "k", "i,j")

# precedence: the higher, the tighter a node binds
REL, ADD, NEG, MUL, DIV, ATOM = 1, 3, 4, 6, 7, 9


def digits(s: str) -> str:
    """A number's ASCII digits (``-0.49``) with the current language's decimal mark (``-0,49``)."""
    return i18n.current().number(s)


def sym_name(n) -> str:
    """A :class:`worked.eq.Sym`'s name as shown: a word (``word=True``: ``sum``) in the current language, any other
    name as it is."""
    return i18n.translate(n.name) if n.word else n.name


def call_name(n) -> str:
    """A :class:`worked.eq.Call`'s name as shown: a word (:data:`worked.eq.CALL_WORDS`: ``colsum``) in the current
    language, any other name (``softmax``, ``LN_1``) as it is."""
    return i18n.translate(n.name) if n.name in eq.CALL_WORDS else n.name


def sep() -> str:
    """What separates a vector's entries: ``,``, or ``;`` where the decimal mark is a comma."""
    return i18n.current().sep


def escape(s: str, quote: bool = True) -> str:
    """html.escape, imported when a page is first printed (html loads its entity table: 1 ms of start-up)."""
    import html

    return html.escape(s, quote)


class Printer:
    """Subclasses define ``_print_<Node>(node)`` for every node of :mod:`worked.eq`."""

    #: whether a quotient is written inline (``a/b``: it then binds like a product) or stacked
    inline_fractions = False

    # -- the tokens the shared methods below join (each printer sets its own)
    PLUS = MINUS = TIMES = JUXTAPOSE = DOT = NEG = ""
    OPS: dict = {}

    def row(self, parts: list[str]) -> str:
        """Join printed pieces into one group (MathML wraps them in an ``<mrow>``)."""
        return "".join(parts)

    def doprint(self, node) -> str:
        try:
            return self._methods[type(node)](self, node)
        except KeyError:      # a node class first met: its method, looked up by name once per printer class
            fn = self._methods[type(node)] = getattr(type(self), "_print_" + type(node).__name__)
            return fn(self, node)

    #: node class → its ``_print_<Node>`` (each printer class its own)
    _methods: dict = {}

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls._methods = {}

    __call__ = doprint

    # -- precedence and brackets
    def prec(self, n) -> int:
        t = type(n)
        if t is eq.Num:
            v = n.value
            if v < 0:
                return NEG
            if v.denominator != 1 and not terminates(v) and self.inline_fractions:
                return DIV
            return ATOM
        if t is eq.Dec:
            return NEG if n.value < 0 else ATOM
        if t is eq.Neg:
            return NEG
        if t is eq.Add:
            return ADD
        if t in (eq.Mul, eq.Dot):
            return MUL
        if t is eq.Frac:
            return DIV if self.inline_fractions else ATOM
        if t is eq.Dims:
            return ADD
        if t is eq.Rel:
            return REL
        return ATOM

    def paren(self, s: str) -> str:
        raise NotImplementedError

    def wrap(self, n, above: int) -> str:
        """Print *n*, bracketed when it binds looser than *above*."""
        s = self.doprint(n)
        return self.paren(s) if self.prec(n) < above else s

    def factor(self, n) -> str:
        """A factor of a product: sums, negatives and inline fractions in brackets."""
        return self.wrap(n, DIV + 1 if self.inline_fractions else MUL)

    # -- words: a sentence in the current language (the module functions localize it first; a printer used on its
    #    own does it here), a number written as text as that number
    def _print_Said(self, n):
        return self.doprint(n.localized(i18n.current()))

    def _print_NumText(self, n):
        return self.doprint(n.num)

    # -- sums, products, signs and relations: the same in every format but for the tokens
    def _print_Add(self, n):
        parts = [self.wrap(n.terms[0], MUL - 2)]
        for t in n.terms[1:]:
            if self.is_negative(t):
                parts += [self.MINUS, self.wrap(self.negated(t), MUL)]
            else:
                parts += [self.PLUS, self.wrap(t, MUL - 2)]
        return self.row(parts)

    def _print_Mul(self, n):
        fs = n.factors
        parts = [self.factor(fs[0])]
        for a, b in zip(fs, fs[1:]):
            parts += [self.JUXTAPOSE if self.implicit(a, b) else self.TIMES, self.factor(b)]
        return self.row(parts)

    def _print_Dot(self, n):
        return self.row([self.factor(n.left), self.DOT, self.factor(n.right)])

    def _print_Neg(self, n):
        return self.row([self.NEG, self.wrap(n.arg, MUL)])

    def _print_Rel(self, n):
        parts = [self.doprint(n.items[0])]
        for op, x in zip(n.ops, n.items[1:]):
            parts += [self.OPS[op], self.doprint(x)]
        return self.row(parts)

    @staticmethod
    def is_negative(n) -> bool:
        return (type(n) is eq.Neg) or (type(n) in (eq.Num, eq.Dec) and n.value < 0)

    @staticmethod
    def negated(n):
        """−n for a negative term (printed after a minus sign)."""
        if type(n) is eq.Neg:
            return n.arg
        return eq.Num(-n.value) if type(n) is eq.Num else eq.Dec(-n.value, n.places, n.ulps)

    @staticmethod
    def implicit(a, b) -> bool:
        """Juxtapose a number and what follows it (``2√2``, ``3e^x``) instead of writing ``·``."""
        return type(a) is eq.Num and a.value > 0 and type(b) in (eq.Sqrt, eq.Exp, eq.Sym, eq.Pow)

    @staticmethod
    def is_word(label: str) -> bool:
        return not label.isdigit() and label not in (eq.ALL, ":") + INDEX_LETTERS


class InlineFractions:
    """A printer that writes quotients on one line, ``a/b`` with *SLASH* (for exponents: ``e^{3√2/2}``
    stays readable); mix it in before the format's printer."""

    inline_fractions = True
    SLASH = "/"

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            return super()._print_Num(n)
        return f"{v.numerator}{self.SLASH}{v.denominator}"

    def _print_Frac(self, n):
        top = self.wrap(n.num, MUL)
        den = n.den
        # a name, a decimal, a whole number, a root, a power or an entry needs no parentheses: scores/√d_k, e^x/e^m
        simple = type(den) in (eq.Sym, eq.Dec, eq.Sqrt, eq.Exp, eq.Pow, eq.Entry, eq.Call) or \
            type(den) is eq.Num and den.value.denominator == 1 and den.value > 0
        return f"{top}{self.SLASH}{self.doprint(den) if simple else self.paren(self.doprint(den))}"
