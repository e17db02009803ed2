"""Typst math (the body of ``$ … $``): ``A_("cats", "chase") = frac(e^(2 sqrt(2)), …) approx 0.6728``."""
from __future__ import annotations

from .. import eq
from .base import ATOM, InlineFractions, Printer, dec_str, rat_str, terminates

_OPS = {eq.EQ: "=", eq.APPROX: "approx", eq.TO: "->"}


def _str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class TypstPrinter(Printer):
    PLUS, MINUS, TIMES, JUXTAPOSE, DOT, NEG = " + ", " - ", " dot ", " ", " dot ", "-"
    OPS = {op: f" {t} " for op, t in _OPS.items()}

    def paren(self, s):
        return f"lr(( {s} ))"

    def label(self, s: str) -> str:
        if s == eq.ALL:
            return "dot.c"
        if s == ":":
            return '":"'
        return _str(s) if self.is_word(s) else s

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            return rat_str(v)
        sign = "-" if v < 0 else ""
        return f"{sign}frac({abs(v.numerator)}, {v.denominator})"

    def _print_Dec(self, n):
        return dec_str(n.value)

    def _base(self, n):
        base, _, sub = n.name.partition("_")
        b = _str(base) if (n.upright or len(base) > 1) else base
        return f"{b}_{sub}" if sub else b

    def _scripts(self, base: str, sub: str | None, head: int | None, has_sub: bool = False) -> str:
        """``Q^((1))_("cats", 1)``; a base that has its own subscript (``W_Q``) takes the entry's indices
        as a second attachment (``attach(W_Q^((1)), b: #($…$))``): no visible brackets, as ``{W_Q}_{…}``."""
        s = base if head is None else f"{base}^(({head}))"
        if sub is None:
            return s
        return f"attach({s}, b: #(${sub}$))" if has_sub else f"{s}_({sub})"

    def _print_Sym(self, n):
        return self._scripts(self._base(n), self.label(n.sub) if n.sub is not None else None, n.head,
                             "_" in n.name)

    def _print_Entry(self, n):
        return self._scripts(self._base(n.base), f"{self.label(n.row)}, {self.label(n.col)}", n.base.head,
                             "_" in n.base.name)

    def _print_Col(self, n):
        return f'{self.doprint(n.base)} [":", {self.label(n.col)}]'

    def _print_Vec(self, n):
        return "lr([" + ", ".join(self.doprint(x) for x in n.items) + "])"

    def _print_Frac(self, n):
        return f"frac({self.doprint(n.num)}, {self.doprint(n.den)})"

    def _print_Pow(self, n):
        return f"{self.wrap(n.base, ATOM)}^({_INLINE.doprint(n.exp)})"

    def _print_Sqrt(self, n):
        return f"sqrt({self.doprint(n.arg)})"

    def _print_Exp(self, n):
        return f"e^({_INLINE.doprint(n.arg)})"

    def _print_Inf(self, n):
        return "infinity"

    def _print_Sum(self, n):
        return f"scripts(sum)_({n.index}) {self.doprint(n.body)}"

    def _print_Call(self, n):
        return f"op({_str(n.name)})(" + ", ".join(self.doprint(a) for a in n.args) + ")"

    def _print_Blank(self, n):
        return '""'

    def _print_Dims(self, n):
        return f"{n.rows} times {n.cols}"



class InlineTypstPrinter(InlineFractions, TypstPrinter):
    """Typst with quotients written ``a\\/b`` (a literal slash, not a stacked fraction): for
    exponents, so ``e^(3 sqrt(2)\\/2)`` stays on one level."""

    SLASH = "\\/"


_INLINE = InlineTypstPrinter()
