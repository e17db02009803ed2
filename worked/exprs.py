"""A small expression grammar of our own, for what students type (the answer checker's entries).

It reads entries such as::

    2√2    2*sqrt(2)    4/√2    e^(√2)/(2 + e^(√2))    exp(2)/(1 + exp(2))    -oo    −∞

Grammar (``·``, ``×`` and ``*`` multiply; juxtaposition multiplies, as in ``2√2`` or ``2e^3``, but a number
never directly follows a number: ``1.2.3``, ``1..67`` and ``3..0`` have two decimal points and are errors, not
products; nor does a lone ``e`` directly follow a decimal number: ``0.49e`` lacks its exponent)::

    expr    := term (("+" | "-" | "−") term)*
    term    := unary (("*" | "·" | "×" | "/" | "÷" | <juxtaposition>) unary)*
    unary   := ("-" | "−" | "+") unary | power
    power   := atom ("^" unary)?
    atom    := number | "(" expr ")" | "[" expr ("," expr)* "]" | ("√" | "sqrt") atom
             | "exp" "(" expr ")" | "e" | "pi" | "π" | "∞" | "oo" | "inf" | name

Nothing here calls ``eval`` or ``sympify``. Parsing builds the equation tree of :mod:`worked.eq` (the tree of
every displayed line): ``a − b`` is ``Add((a, Neg(b)))``, ``a/b`` is ``Frac``, ``e`` is ``Exp(1)``, π is
``Sym("π")``, a number is ``Num`` (read exactly; one too large to read, ``1e13`` or ``1e99999999``, stays the
word typed: evaluating it raises the number's error), any other word is a ``Sym`` (a label: evaluating it
raises). The one evaluator of that tree,
:func:`worked.eq.arith.walk`, gives its value in an arithmetic of one's choice (floats, the checker's bounded
Decimals, exact sympy values).
"""
from __future__ import annotations

import re
from fractions import Fraction

from . import eq
from .eq.arith import (MAX_INT_POWER, NUMBER_LIMIT, PI_NAME, NotNumeric, bounded_number, exact_value,  # noqa: F401
                        float_value, number)
from .errors import ExpressionError
from .i18n import Msg

MAX_LENGTH = 400
MAX_DEPTH = 40
E = eq.Exp(eq.Num(Fraction(1)))

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+(?![A-Za-z_]))?)
      | (?P<name>[^\W\d][\w']*)
      | (?P<op>\*\*|[-+*/^()\[\],·×÷−√∞π])
    )""",
    re.VERBOSE,
)


def tokenize(text: str, max_length: int = MAX_LENGTH) -> list[tuple[str, str]]:
    if len(text) > max_length:
        raise ExpressionError(Msg("expression is too long ({n} characters, at most {limit})", n=len(text), limit=max_length))
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            raise ExpressionError(Msg("unexpected character {char} in {text}", char=repr(bad), text=repr(text.strip())))
        kind = m.lastgroup
        val = m.group(kind)
        if out and out[-1][0] == "num" and m.start(kind) == pos:   # directly after a number, no space between
            _glued(text, out[-1][1], kind, val, m.end())
        if kind == "op" and val == "**":
            val = "^"
        if kind == "op" and val == "−":
            val = "-"
        if kind == "op" and val in "×·":
            val = "*"
        if kind == "op" and val == "÷":
            val = "/"
        out.append((kind, val))
        pos = m.end()
    return out


def _glued(text: str, num: str, kind: str, val: str, end: int) -> None:
    """A number written directly after a number, or a lone e directly after a decimal number, is no product:
    ``1.2.3``, ``1..67``, ``0.5.5``, ``3..0`` are numbers with two decimal points, and ``0.49e`` is a number
    whose exponent is missing. Raises ExpressionError naming the number as written."""
    if kind == "num":
        start = end - len(val) - len(num)
        run = re.match(r"[\d.]*(?:[eE][+-]?\d+[\d.]*)?", text[start:]).group(0)
        if re.search(r"[eE]", num):
            raise ExpressionError(Msg("{number}: a decimal point after the exponent of a number", number=run))
        raise ExpressionError(Msg("{number}: two decimal points in one number", number=run))
    if kind == "name" and val == "e" and "." in num and not text[end:].lstrip().startswith(("^", "**")):
        raise ExpressionError(Msg("{number}e: the exponent after e is missing (as in {number}e-2; for {number} times e, "
                                  "write {number}·e)", number=num))


class _Parser:
    def __init__(self, text: str, max_length: int = MAX_LENGTH):
        self.text = text
        self.toks = tokenize(text, max_length)
        self.i = 0
        self.depth = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self, val=None):
        kind, v = self.peek()
        if kind is None:
            raise ExpressionError(Msg("unexpected end of {text}", text=repr(self.text.strip())))
        if val is not None and v != val:
            raise ExpressionError(Msg("expected {want} but found {got} in {text}", want=repr(val), got=repr(v),
                                      text=repr(self.text.strip())))
        self.i += 1
        return kind, v

    def parse(self):
        if not self.toks:
            raise ExpressionError(Msg("empty expression"))
        node = self.expr()
        if self.i != len(self.toks):
            raise ExpressionError(Msg("unexpected {got} in {text}", got=repr(self.toks[self.i][1]),
                                      text=repr(self.text.strip())))
        return node

    def _enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError(Msg("expression is nested too deeply"))

    def expr(self):
        self._enter()
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            rhs = self.term()
            node = eq.Add((node, rhs if op == "+" else eq.Neg(rhs)))
        self.depth -= 1
        return node

    def _starts_atom(self):
        kind, v = self.peek()
        return kind in ("num", "name") or v in ("(", "[", "√", "∞", "π")

    def term(self):
        node = self.unary()
        while True:
            v = self.peek()[1]
            if v in ("*", "/"):
                self.take()
                rhs = self.unary()
                node = eq.Mul((node, rhs)) if v == "*" else eq.Frac(node, rhs)
            elif self._starts_atom():
                node = eq.Mul((node, self.power()))
            else:
                return node

    def unary(self):
        v = self.peek()[1]
        if v in ("-", "+"):
            self.take()
            self._enter()
            inner = self.unary()
            self.depth -= 1
            return eq.Neg(inner) if v == "-" else inner
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek()[1] == "^":
            self.take()
            self._enter()
            exp = self.unary()
            self.depth -= 1
            return eq.Pow(base, exp)
        return base

    def atom(self):
        kind, v = self.take()
        if kind == "num":
            return _number(v)
        if v == "(":
            node = self.expr()
            self.take(")")
            return node
        if v == "[":
            items = [self.expr()]
            while self.peek()[1] == ",":
                self.take()
                items.append(self.expr())
            self.take("]")
            return eq.Vec(tuple(items))
        if v == "√" or (kind == "name" and v == "sqrt"):
            self._enter()
            node = eq.Sqrt(self.atom())
            self.depth -= 1
            return node
        if kind == "name" and v == "exp":
            if self.peek()[1] != "(":
                raise ExpressionError(Msg("exp needs parentheses, as in exp(2), in {text}", text=repr(self.text.strip())))
            return eq.Exp(self.atom())
        if v in ("∞",) or (kind == "name" and v in ("oo", "inf", "infinity")):
            return eq.Inf()
        if v == "π" or (kind == "name" and v == "pi"):
            return eq.Sym(PI_NAME)
        if kind == "name" and v == "e":
            return E
        if kind == "name":
            # a label such as Q, x_cats or scores[cats, chase]
            if self.peek()[1] == "[":
                self.take("[")
                depth = 1
                while depth:
                    k2, v2 = self.take()
                    depth += {"[": 1, "]": -1}.get(v2, 0)
            return _name(v)
        raise ExpressionError(Msg("unexpected {got} in {text}", got=repr(v), text=repr(self.text.strip())))


def parse(text: str, max_length: int = MAX_LENGTH) -> eq.Node:
    """Parse *text* into an equation tree (:mod:`worked.eq`); raise :class:`ExpressionError` if it is not in
    the grammar."""
    return _Parser(text, max_length).parse()


def _number(v: str) -> eq.Node:
    """A number token as a :class:`~worked.eq.Num`; one that cannot be read (``1e13``, ``1e99999999``) stays
    the word typed, a :class:`~worked.eq.Sym` whose evaluation in the checker's arithmetics raises the number's
    error where the walk meets it (an entry's errors are met in one order, left to right, numbers' too)."""
    try:
        return eq.Num(bounded_number(v))
    except ExpressionError:
        return eq.Sym(v)


def _name(v: str) -> eq.Sym:
    """A word that is no constant: a label. A :class:`~worked.eq.Sym`'s name has no prime, so what follows a
    ``'`` (``x'``) is kept in ``sub`` (:func:`worked.eq.arith.sym_name` gives the word back)."""
    head, quote, tail = v.partition("'")
    return eq.Sym(head, sub=quote + tail) if quote else eq.Sym(v)


def value(text: str, max_length: int = MAX_LENGTH):
    """Parse *text* and evaluate it with floats (a tuple for a vector; raises NotNumeric for a name)."""
    return float_value(parse(text, max_length))


def exact(text: str):
    """Parse *text* into an exact sympy number, e.g. ``exact("2√2") == 2*sqrt(2)``."""
    return exact_value(parse(text))


