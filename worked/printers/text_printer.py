"""Unicode text: ``A[cats, chase] = e^(2√2)/(2e^(√2) + e^(2√2)) ≈ 16.9188/25.1454 ≈ 0.6728``."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..numfmt import dec_str, rat_str
from .base import ATOM, MUL, Printer, call_name, digits, sep, sym_name

MINUS = "−"
_LETTERS = frozenset(eq.Sym(c) for c in "xm")   # exponents written without brackets: e^x, e^m
_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class TextPrinter(Printer):
    inline_fractions = True

    PLUS, MINUS, TIMES, JUXTAPOSE, DOT, NEG = " + ", f" {MINUS} ", "·", "", "·", MINUS
    OPS = {op: f" {op} " for op in (eq.EQ, eq.APPROX, eq.TO)}

    def paren(self, s):
        return f"({s})"

    def _print_Num(self, n):
        return digits(rat_str(n.value)).replace("-", MINUS)

    def _print_Dec(self, n):
        return digits(dec_str(n.value)).replace("-", MINUS)

    def _print_Sym(self, n):
        s = sym_name(n) + ("′" if n.prime else "")
        if n.head is not None:
            s += f"⁽{str(n.head).translate(_SUP)}⁾"
        if n.sub is not None:
            s += f"_{n.sub}"
        return s

    def _print_Entry(self, n):
        return f"{self.doprint(n.base)}[{n.row}, {n.col}]"

    def _print_Item(self, n):
        return f"{self.doprint(n.base)}[{n.index}]"

    def _print_Col(self, n):
        return f"{self.doprint(n.base)}[:, {n.col}]"

    def _print_Vec(self, n):
        return "[" + (sep() + " ").join(self.doprint(x) for x in n.items) + "]"

    def _print_Frac(self, n):
        top = self.wrap(n.num, MUL)
        den = n.den
        simple = type(den) in (eq.Sym, eq.Entry, eq.Dec, eq.Exp) or (type(den) is eq.Num and den.value.denominator == 1
                                                            and den.value > 0) or (
            type(den) is eq.Sqrt and type(den.arg) in (eq.Num, eq.Sym))
        bot = self.doprint(den) if simple else self.paren(self.doprint(den))
        return f"{top}/{bot}"

    def _print_Pow(self, n):
        if n.exp == eq.Sym("T"):     # a transpose: Kᵀ
            return f"{self.wrap(n.base, ATOM)}ᵀ"
        return f"{self.wrap(n.base, ATOM)}^{self._exponent(n.exp)}"

    def _exponent(self, x):
        s = self.doprint(x)
        if type(x) is eq.Num and x.value >= 0 and x.value.denominator == 1 or x in _LETTERS:
            return s
        return f"({s})"

    def _print_Sqrt(self, n):
        a = n.arg
        s = self.doprint(a)
        atom = type(a) is eq.Sym or type(a) is eq.Num and a.value.denominator == 1 and a.value >= 0
        return f"√{s}" if atom else f"√({s})"

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "e"
        return f"e^{self._exponent(n.arg)}"

    def _print_Inf(self, n):
        return "∞"

    def _print_Sum(self, n):
        return f"Σ_{n.index} {self.doprint(n.body)}"

    def _print_Call(self, n):
        return f"{call_name(n)}(" + ", ".join(self.doprint(a) for a in n.args) + ")"

    def _print_Blank(self, n):
        return ""

    def _print_Dims(self, n):
        return f"{n.rows}×{n.cols}"

    def _print_Prose(self, n):
        return "".join(x if isinstance(x, str) else self.doprint(x) for x in n.parts)

