"""Typst math (the body of ``$ … $``): ``A_("cats", "chase") = frac(e^(2 sqrt(2)), …) approx 0.6728``."""
from __future__ import annotations

from fractions import Fraction

import string

from .. import eq
from ..numfmt import dec_str, rat_str, terminates
from .base import ATOM, InlineFractions, Printer, call_name, digits, sep, sym_name


def _digits(s: str) -> str:
    """A number in math: a decimal comma as an ordinary symbol (``0class("normal", ",")49``: a bare comma is
    punctuation, spaced)."""
    return digits(s).replace(",", 'class("normal", ",")')

_OPS = {eq.EQ: "=", eq.APPROX: "approx", eq.TO: "->"}


_MARKUP = str.maketrans({c: "\\" + c for c in string.punctuation})


def markup(s: str) -> str:
    """Text as Typst markup that prints literally: every ASCII punctuation character escaped."""
    return s.translate(_MARKUP).replace("\n", " ")


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
            return _digits(rat_str(v))
        sign = "-" if v < 0 else ""
        return f"{sign}frac({abs(v.numerator)}, {v.denominator})"

    def _print_Dec(self, n):
        return _digits(dec_str(n.value))

    def _print_Sym(self, n):
        """``W'_Q``, ``W_Q^((1))``, ``x_("cats")``, ``"scores"``: the name's own subscript or the label, never
        both nested; a prime right after the letters."""
        base, _, namesub = sym_name(n).partition("_")
        if len(base) == 2 and base[1] == "\u0302" and not n.upright:     # x̂: Typst's accent, not a combining mark set as text
            s = f"hat({base[0]})"
        else:
            s = _str(base) if (n.upright or len(base) > 1) else base
        if n.prime:
            s += "'"
        label = self.label(n.sub) if n.sub is not None else None
        if namesub:
            ns = _str(namesub) if len(namesub) > 1 else namesub     # d_"model"
            s += f"_({ns}, {label})" if label else f"_{ns}"
            label = None
        if n.head is not None:
            s += f"^(({n.head}))"
        if label:
            s += f"_({label})"
        return s

    def _print_Entry(self, n):
        return f"{self._before_index(n.base)}[{self.label(n.row)}, {self.label(n.col)}]"

    def _before_index(self, base) -> str:
        """The symbol before ``[…]``: a quoted name takes the bracket right after it (``"dS"[i, j]``: a
        space would set a gap), a letter after a space (``W_Q [1, 1]``: the index is not the subscript's)."""
        s = self.doprint(base)
        quoted_sub = type(base) is eq.Sym and "_" in base.name and base.head is None and base.sub is None
        return s if s.endswith('"') and not quoted_sub else s + " "     # X_"enc" [":", 1]: not the subscript's

    def _print_Item(self, n):
        return f"{self._before_index(n.base)}[{self.label(n.index)}]"

    def _print_Col(self, n):
        return f'{self._before_index(n.base)}[":", {self.label(n.col)}]'

    def _print_Vec(self, n):
        return "lr([" + (", " if sep() == "," else "\\; ").join(self.doprint(x) for x in n.items) + "])"

    def _print_Frac(self, n):
        return f"frac({self.doprint(n.num)}, {self.doprint(n.den)})"

    def _print_Pow(self, n):
        b = n.base
        if type(b) is eq.Sym and b.head is not None and b.sub is None:
            # K⁽¹⁾ᵀ: the head and the power in one superscript (a superscript of a superscript is set too small)
            bare = eq.Sym(b.name, upright=b.upright, prime=b.prime, word=b.word)
            return f"{self.doprint(bare)}^(({b.head}) {_INLINE.doprint(n.exp)})"
        return f"{self.wrap(n.base, ATOM)}^({_INLINE.doprint(n.exp)})"

    def _print_Sqrt(self, n):
        return f"sqrt({self.doprint(n.arg)})"

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "e"
        return f"e^({_INLINE.doprint(n.arg)})"

    def _print_Inf(self, n):
        return "infinity"

    def _print_Sum(self, n):
        return f"scripts(sum)_({n.index}) {self.doprint(n.body)}"

    def _print_Call(self, n):
        shown = call_name(n)
        name, _, sub = shown.partition("_")      # LN_1(…): the operator LN with its subscript
        head = self.doprint(eq.Sym(shown)) if len(shown) == 1 else f"op({_str(name)})" + (f"_({_str(sub)})" if sub else "")
        return head + "(" + ", ".join(self.doprint(a) for a in n.args) + ")"

    def _print_Blank(self, n):
        return '""'

    def _print_Dims(self, n):
        return f"{n.rows} times {n.cols}"

    def _print_Prose(self, n):
        """Typst markup: the text escaped, each formula inline in a box (quotients on the line, ``a\\/b``)
        with its spoken form as alt text."""
        from . import spoken

        out = []
        for x in n.parts:
            if isinstance(x, str):
                out.append(markup(x))
            else:
                # in a box: the line never breaks inside a formula ("h = ⏎ 0.1")
                out.append(f"#box({{set math.equation(alt: {_str(spoken(x))}); ${_INLINE.doprint(x)}$}})")
        return "".join(out)



class InlineTypstPrinter(InlineFractions, TypstPrinter):
    """Typst with quotients written ``a\\/b`` (a literal slash, not a stacked fraction): for
    exponents, so ``e^(3 sqrt(2)\\/2)`` stays on one level."""

    SLASH = "\\/"


_INLINE = InlineTypstPrinter()
