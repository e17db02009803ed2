"""A spoken form, for alt text and screen readers: ``A row cats, column chase equals … is about 0.6728``."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..numfmt import dec_str, rat_str, terminates
from .base import Printer

_GREEK = {"γ": "gamma", "β": "beta"}
_OPS = {eq.EQ: "equals", eq.APPROX: "is about", eq.TO: "gives"}


class SpokenPrinter(Printer):
    def paren(self, s):
        return f"open bracket {s} close bracket"

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            s = rat_str(v)
        else:
            s = f"{abs(v.numerator)} over {v.denominator}"
            s = ("minus " + s) if v < 0 else s
        return s.replace("-", "minus ")

    def _print_Dec(self, n):
        return dec_str(n.value).replace("-", "minus ")

    def _name(self, n):
        s = n.name.replace("_", " ") + (" prime" if n.prime else "")
        for letter, word in _GREEK.items():     # γ_1 "gamma 1", dγ_2 "d gamma 2"
            s = s.replace("d" + letter, "d " + word).replace(letter, word)
        if n.head is not None:
            s += f" of head {n.head}"
        return s

    def _print_Sym(self, n):
        s = self._name(n)
        return f"{s} {n.sub}" if n.sub is not None else s

    def _print_Entry(self, n):
        if n.col == eq.ALL:
            return f"{self._name(n.base)} row {n.row}"
        return f"{self._name(n.base)} row {n.row}, column {n.col}"

    def _print_Item(self, n):
        return f"entry {n.index} of {self._name(n.base)}"

    def _print_Col(self, n):
        return f"column {n.col} of {self._name(n.base)}"

    def _print_Vec(self, n):
        return "vector " + ", ".join(self.doprint(x) for x in n.items) + ","

    def _print_Dot(self, n):
        return f"{self.doprint(n.left)} dot {self.doprint(n.right)}"

    def _print_Add(self, n):
        out = self.doprint(n.terms[0])
        for t in n.terms[1:]:
            if self.is_negative(t):
                inner = self.negated(t)
                out += f" minus {self.doprint(inner)}"
            else:
                out += f" plus {self.doprint(t)}"
        return out

    def _print_Mul(self, n):
        return " times ".join(self.doprint(f) for f in n.factors)

    def _print_Neg(self, n):
        return "minus " + self.doprint(n.arg)

    def _print_Frac(self, n):
        return f"the fraction {self.doprint(n.num)} over {self.doprint(n.den)}, end fraction"

    def _print_Pow(self, n):
        if n.exp == eq.Sym("T"):
            return f"{self.doprint(n.base)} transposed"
        return f"{self.doprint(n.base)} to the power {self.doprint(n.exp)}"

    def _print_Sqrt(self, n):
        return f"square root of {self.doprint(n.arg)}"

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "e"
        return f"e to the {self.doprint(n.arg)}"

    def _print_Inf(self, n):
        return "infinity"

    def _print_Sum(self, n):
        return f"sum over {n.index} of {self.doprint(n.body)}"

    def _print_Call(self, n):
        return f"{n.name} of " + ", ".join(self.doprint(a) for a in n.args)

    def _print_Blank(self, n):
        return "…"

    def _print_Dims(self, n):
        return f"{n.rows} by {n.cols}"

    def _print_Prose(self, n):
        return "".join(x if isinstance(x, str) else self.doprint(x) for x in n.parts)

    def _print_Rel(self, n):
        out = self.doprint(n.items[0])
        for op, x in zip(n.ops, n.items[1:]):
            out += f" {_OPS[op]} {self.doprint(x)}"
        return out
