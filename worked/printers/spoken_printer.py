"""A spoken form, for alt text and screen readers: ``A row cats, column chase equals … is about 0.6728``; its words
in the current language (:mod:`worked.i18n`)."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..i18n import N_, translate
from ..i18n import tr as _
from ..numfmt import dec_str, rat_str, terminates
from .base import Printer, call_name, digits, sep, sym_name

_GREEK = {"γ": "gamma", "β": "beta"}
_OPS = {eq.EQ: N_("equals"), eq.APPROX: N_("is about"), eq.TO: N_("gives")}


class SpokenPrinter(Printer):
    def paren(self, s):
        return _("open bracket {x} close bracket", x=s)

    @staticmethod
    def _minus(s: str) -> str:
        return s.replace("-", _("minus") + " ")

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            s = digits(rat_str(v))
        else:
            s = _("{a} over {b}", a=abs(v.numerator), b=v.denominator)
            s = (_("minus") + " " + s) if v < 0 else s
        return self._minus(s)

    def _print_Dec(self, n):
        return self._minus(digits(dec_str(n.value)))

    def _name(self, n):
        s = sym_name(n).replace("_", " ") + (" " + _("prime") if n.prime else "")
        for letter, word in _GREEK.items():     # γ_1 "gamma 1", dγ_2 "d gamma 2"
            s = s.replace("d" + letter, "d " + word).replace(letter, word)
        if n.head is not None:
            s = _("{name} of head {n}", name=s, n=n.head)
        return s

    def _print_Sym(self, n):
        s = self._name(n)
        return f"{s} {n.sub}" if n.sub is not None else s

    def _print_Entry(self, n):
        if n.col == eq.ALL:
            return _("{name} row {row}", name=self._name(n.base), row=n.row)
        return _("{name} row {row}, column {col}", name=self._name(n.base), row=n.row, col=n.col)

    def _print_Item(self, n):
        return f"entry {n.index} of {self._name(n.base)}"

    def _print_Col(self, n):
        return _("column {col} of {name}", col=n.col, name=self._name(n.base))

    def _print_Vec(self, n):
        return _("vector {entries},", entries=(sep() + " ").join(self.doprint(x) for x in n.items))

    def _print_Dot(self, n):
        return _("{a} dot {b}", a=self.doprint(n.left), b=self.doprint(n.right))

    def _print_Add(self, n):
        out = self.doprint(n.terms[0])
        for t in n.terms[1:]:
            if self.is_negative(t):
                inner = self.negated(t)
                out = _("{a} minus {b}", a=out, b=self.doprint(inner))
            else:
                out = _("{a} plus {b}", a=out, b=self.doprint(t))
        return out

    def _print_Mul(self, n):
        return (" " + _("times") + " ").join(self.doprint(f) for f in n.factors)

    def _print_Neg(self, n):
        return _("minus") + " " + self.doprint(n.arg)

    def _print_Frac(self, n):
        return _("the fraction {num} over {den}, end fraction", num=self.doprint(n.num), den=self.doprint(n.den))

    def _print_Pow(self, n):
        if n.exp == eq.Sym("T"):
            return _("{x} transposed", x=self.doprint(n.base))
        return _("{x} to the power {p}", x=self.doprint(n.base), p=self.doprint(n.exp))

    def _print_Sqrt(self, n):
        return _("square root of {x}", x=self.doprint(n.arg))

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "e"
        return _("e to the {x}", x=self.doprint(n.arg))

    def _print_Inf(self, n):
        return _("infinity")

    def _print_Sum(self, n):
        return _("sum over {index} of {x}", index=n.index, x=self.doprint(n.body))

    def _print_Call(self, n):
        return _("{name} of {args}", name=call_name(n), args=", ".join(self.doprint(a) for a in n.args))

    def _print_Blank(self, n):
        return "…"

    def _print_Dims(self, n):
        return _("{rows} by {cols}", rows=n.rows, cols=n.cols)

    def _print_Prose(self, n):
        return "".join(x if isinstance(x, str) else self.doprint(x) for x in n.parts)

    def _print_Rel(self, n):
        out = self.doprint(n.items[0])
        for op, x in zip(n.ops, n.items[1:]):
            out += f" {translate(_OPS[op])} {self.doprint(x)}"
        return out
