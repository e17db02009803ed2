"""A small expression grammar of our own, shared by the auditor and the answer checker.

It reads what the worked steps display and what students type:

    2√2    2*sqrt(2)    4/√2    e^(√2)/(2 + e^(√2))    exp(2)/(1 + exp(2))    -oo    −∞
    [1, 0, 1, 0]·[1, 0, 1, 0]    0.1636·[2, 1] + 0.6728·[0, 2]

Grammar (``·``, ``×`` and ``*`` multiply; juxtaposition multiplies, as in ``2√2`` or ``2e^3``, but a number
never directly follows a number: ``1.2.3``, ``1..67`` and ``3..0`` have two decimal points and are errors, not
products; nor does a lone ``e`` directly follow a decimal number: ``0.49e`` lacks its exponent)::

    expr    := term (("+" | "-" | "−") term)*
    term    := unary (("*" | "·" | "×" | "/" | "÷" | <juxtaposition>) unary)*
    unary   := ("-" | "−" | "+") unary | power
    power   := atom ("^" unary)?
    atom    := number | "(" expr ")" | "[" expr ("," expr)* "]" | ("√" | "sqrt") atom
             | "exp" "(" expr ")" | "e" | "pi" | "π" | "∞" | "oo" | "inf" | name

A *name* (any other word, such as ``Q`` or ``x_cats``) parses, but evaluating it raises
:class:`NotNumeric`: the auditor uses that to skip labels. Nothing here calls ``eval`` or
``sympify``; parsing builds a small tree of tuples that two evaluators walk: one with plain
floats (the auditor's independent arithmetic), one building exact sympy objects (the checker).
"""
from __future__ import annotations

import math
import re
from fractions import Fraction

from .errors import ExpressionError

MAX_LENGTH = 400
MAX_DEPTH = 40
MAX_INT_POWER = 64

_TOKEN = re.compile(
    r"""\s*(?:
        (?P<num>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+(?![A-Za-z_]))?)
      | (?P<name>[^\W\d][\w']*)
      | (?P<op>\*\*|[-+*/^()\[\],·×÷−√∞π])
    )""",
    re.VERBOSE,
)


class NotNumeric(Exception):
    """The expression contains a name (a label), so it has no numeric value."""


def tokenize(text: str, max_length: int = MAX_LENGTH) -> list[tuple[str, str]]:
    if len(text) > max_length:
        raise ExpressionError(f"expression is too long ({len(text)} characters, at most {max_length})")
    pos, out = 0, []
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            bad = text[pos:].lstrip()[:1]
            raise ExpressionError(f"unexpected character {bad!r} in {text.strip()!r}")
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
            raise ExpressionError(f"{run}: a decimal point after the exponent of a number")
        raise ExpressionError(f"{run}: two decimal points in one number")
    if kind == "name" and val == "e" and "." in num and not text[end:].lstrip().startswith(("^", "**")):
        raise ExpressionError(f"{num}e: the exponent after e is missing (as in {num}e-2; for {num} times e, "
                              f"write {num}·e)")


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
            raise ExpressionError(f"unexpected end of {self.text.strip()!r}")
        if val is not None and v != val:
            raise ExpressionError(f"expected {val!r} but found {v!r} in {self.text.strip()!r}")
        self.i += 1
        return kind, v

    def parse(self):
        if not self.toks:
            raise ExpressionError("empty expression")
        node = self.expr()
        if self.i != len(self.toks):
            raise ExpressionError(f"unexpected {self.toks[self.i][1]!r} in {self.text.strip()!r}")
        return node

    def _enter(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExpressionError("expression is nested too deeply")

    def expr(self):
        self._enter()
        node = self.term()
        while self.peek()[1] in ("+", "-"):
            op = self.take()[1]
            node = ("add" if op == "+" else "sub", node, self.term())
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
                node = ("mul" if v == "*" else "div", node, self.unary())
            elif self._starts_atom():
                node = ("mul", node, self.power())
            else:
                return node

    def unary(self):
        v = self.peek()[1]
        if v in ("-", "+"):
            self.take()
            self._enter()
            inner = self.unary()
            self.depth -= 1
            return ("neg", inner) if v == "-" else inner
        return self.power()

    def power(self):
        base = self.atom()
        if self.peek()[1] == "^":
            self.take()
            self._enter()
            exp = self.unary()
            self.depth -= 1
            return ("pow", base, exp)
        return base

    def atom(self):
        kind, v = self.take()
        if kind == "num":
            return ("num", v)
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
            return ("vec", items)
        if v == "√" or (kind == "name" and v == "sqrt"):
            self._enter()
            node = ("sqrt", self.atom())
            self.depth -= 1
            return node
        if kind == "name" and v == "exp":
            if self.peek()[1] != "(":
                raise ExpressionError(f"exp needs parentheses, as in exp(2), in {self.text.strip()!r}")
            return ("exp", self.atom())
        if v in ("∞",) or (kind == "name" and v in ("oo", "inf", "infinity")):
            return ("inf",)
        if v == "π" or (kind == "name" and v == "pi"):
            return ("pi",)
        if kind == "name" and v == "e":
            return ("e",)
        if kind == "name":
            # a label such as Q, x_cats or scores[cats, chase]
            if self.peek()[1] == "[":
                self.take("[")
                depth = 1
                while depth:
                    k2, v2 = self.take()
                    depth += {"[": 1, "]": -1}.get(v2, 0)
            return ("name", v)
        raise ExpressionError(f"unexpected {v!r} in {self.text.strip()!r}")


def parse(text: str, max_length: int = MAX_LENGTH):
    """Parse *text* into a tree of tuples; raise :class:`ExpressionError` if it is not in the grammar.

    *max_length* guards user input; the auditor, reading our own lines, passes a larger one."""
    return _Parser(text, max_length).parse()


# ---------------------------------------------------------------- float evaluation (the auditor's)

def _fl_binop(op, a, b):
    va, vb = isinstance(a, tuple), isinstance(b, tuple)
    if op in ("add", "sub"):
        if va != vb:
            raise ExpressionError("cannot add a vector and a number")
        f = (lambda x, y: x + y) if op == "add" else (lambda x, y: x - y)
        if va:
            if len(a) != len(b):
                raise ExpressionError("vectors of different lengths")
            return tuple(f(x, y) for x, y in zip(a, b))
        return f(a, b)
    if op == "mul":
        if va and vb:
            if len(a) != len(b):
                raise ExpressionError("dot product of vectors of different lengths")
            return math.fsum(x * y for x, y in zip(a, b))
        if va:
            return tuple(x * b for x in a)
        if vb:
            return tuple(a * y for y in b)
        return a * b
    if op == "div":
        if vb:
            raise ExpressionError("cannot divide by a vector")
        if va:
            return tuple(x / b for x in a)
        return a / b
    raise AssertionError(op)


def eval_float(node):
    """Evaluate with plain floats. Vectors are tuples; ``[a]·[b]`` is the dot product."""
    kind = node[0]
    try:
        if kind == "num":
            return float(node[1])
        if kind == "name":
            raise NotNumeric(node[1])
        if kind == "inf":
            return math.inf
        if kind == "pi":
            return math.pi
        if kind == "e":
            return math.e
        if kind == "vec":
            items = [eval_float(n) for n in node[1]]
            if any(isinstance(x, tuple) for x in items):
                raise ExpressionError("nested vectors")
            return tuple(items)
        if kind == "neg":
            v = eval_float(node[1])
            return tuple(-x for x in v) if isinstance(v, tuple) else -v
        if kind == "sqrt":
            v = eval_float(node[1])
            if isinstance(v, tuple) or v < 0:
                raise ExpressionError("square root of a negative number or a vector")
            return math.sqrt(v)
        if kind == "exp":
            v = eval_float(node[1])
            if isinstance(v, tuple):
                raise ExpressionError("exp of a vector")
            return 0.0 if v == -math.inf else math.exp(v)
        if kind == "pow":
            b, x = eval_float(node[1]), eval_float(node[2])
            if isinstance(b, tuple) or isinstance(x, tuple):
                raise ExpressionError("power of a vector")
            if b == math.e and x == -math.inf:
                return 0.0
            return math.pow(b, x)
        if kind in ("add", "sub", "mul", "div"):
            return _fl_binop(kind, eval_float(node[1]), eval_float(node[2]))
    except (OverflowError, ZeroDivisionError, ValueError) as exc:
        raise ExpressionError(f"cannot evaluate: {exc}") from None
    raise AssertionError(kind)


def value(text: str, max_length: int = MAX_LENGTH):
    """Parse and evaluate *text* with floats (raises NotNumeric for labels)."""
    return eval_float(parse(text, max_length))


# ---------------------------------------------------------------- exact evaluation (the checker's)

def number(s: str) -> Fraction:
    """A number token read exactly ("0.43" is 43/100), its digits and exponent bounded first
    (:func:`worked.exact.decimal`: ``1e99999999`` is an error, not a hundred-million-digit integer)."""
    from .exact import EntryError, decimal

    try:
        return decimal(s)
    except EntryError as exc:
        raise ExpressionError(str(exc)) from None


def _check_exponent(node, message: str, size: bool = True) -> None:
    """Bound a base or exponent with plain floats before building it exactly: sympy would otherwise try
    to evaluate something like exp(exp(exp(100))) and never finish. Raises ExpressionError."""
    try:
        v = eval_float(node)
    except NotNumeric:
        raise ExpressionError("unknown name in a power") from None
    if isinstance(v, tuple) or (size and abs(v) > 700):
        raise ExpressionError(message)


def eval_exact(node):
    """Build an exact sympy value from the tree (no sympify). Vectors are not allowed."""
    import sympy as sp

    kind = node[0]
    if kind == "num":
        f = number(node[1])
        if abs(f) > 10**12:
            raise ExpressionError(f"number {node[1]} is too large")
        return sp.Rational(f.numerator, f.denominator)
    if kind == "name":
        raise ExpressionError(f"unknown name {node[1]!r}")
    if kind == "inf":
        return sp.oo
    if kind == "pi":
        return sp.pi
    if kind == "e":
        return sp.E
    if kind == "vec":
        raise ExpressionError("a single value was expected, not a vector")
    if kind == "neg":
        return -eval_exact(node[1])
    if kind == "sqrt":
        v = eval_exact(node[1])
        if v.is_negative:
            raise ExpressionError("square root of a negative number")
        return sp.sqrt(v)
    if kind == "exp":
        _check_exponent(node[1], "exponent is too large")
        return sp.exp(eval_exact(node[1]))
    if kind == "pow":
        b, x = eval_exact(node[1]), eval_exact(node[2])
        if x.is_Rational and b.is_Rational:
            if abs(x.p) > MAX_INT_POWER or x.q > MAX_INT_POWER or abs(b) > 10**6:
                raise ExpressionError("power is too large")
        else:
            _check_exponent(node[1], "power is too large", size=False)
            _check_exponent(node[2], "power is too large")
        return sp.Pow(b, x)
    if kind in ("add", "sub", "mul", "div"):
        a, b = eval_exact(node[1]), eval_exact(node[2])
        if kind == "add":
            return a + b
        if kind == "sub":
            return a - b
        if kind == "mul":
            return a * b
        if b == 0:
            raise ExpressionError("division by zero")
        return a / b
    raise AssertionError(kind)


def exact(text: str):
    """Parse *text* into an exact sympy number, e.g. ``exact("2√2") == 2*sqrt(2)``."""
    return eval_exact(parse(text))
