"""ASCII LaTeX (amsmath): ``A_{\\text{cats},\\text{chase}} = \\frac{e^{2\\sqrt{2}}}{…} \\approx 0.6728``.

Only ASCII is written (``\\cdot``, ``-``): pdflatex rejects a Unicode minus or middle dot in math.
"""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..numfmt import dec_str, rat_str, terminates
from .base import ATOM, InlineFractions, Printer, call_name, digits, sep, sym_name
from .texesc import tex_escape


def _digits(s: str) -> str:
    """A number in math mode: a decimal comma in braces (``0{,}49``: a bare comma is punctuation, spaced)."""
    return digits(s).replace(",", "{,}")


def _op(name: str) -> str:
    """An operator's name in ``\\operatorname``: ASCII as it is, a word with accents (de ``LNrückwärts``) as
    escaped text (the page is ASCII)."""
    return name if name.isascii() else rf"\text{{{tex_escape(name)}}}"


_OPS = {eq.EQ: "=", eq.APPROX: r"\approx", eq.TO: r"\to"}


#: a Greek letter a name is (a layer norm's μ, σ, ε, γ, β), or a name with a hat (its backward's x̂, dx̂), as ASCII LaTeX
_GREEK = {"μ": r"\mu", "σ": r"\sigma", "ε": r"\varepsilon", "γ": r"\gamma", "β": r"\beta", "x̂": r"\hat{x}",
          "dx̂": r"\mathrm{d}\hat{x}", "dγ": r"\mathrm{d}\gamma", "dβ": r"\mathrm{d}\beta"}


class LatexPrinter(Printer):
    PLUS, MINUS, TIMES, JUXTAPOSE, DOT, NEG = " + ", " - ", r" \cdot ", "", r" \cdot ", "-"
    OPS = {op: f" {tex} " for op, tex in _OPS.items()}

    def paren(self, s):
        return rf"\left({s}\right)" if "\\frac" in s else f"({s})"

    def label(self, s: str) -> str:
        if s == eq.ALL:
            return r"\cdot"
        if s == ":":
            return ":"
        return rf"\text{{{s}}}".replace("_", r"\_") if self.is_word(s) else s     # target_i: an underscore in text

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            return _digits(rat_str(v))
        sign = "-" if v < 0 else ""
        return rf"{sign}\frac{{{abs(v.numerator)}}}{{{v.denominator}}}"

    def _print_Dec(self, n):
        return _digits(dec_str(n.value))

    def _print_Sym(self, n):
        """``W'_{Q}``, ``{W_{Q}}^{(1)}``, ``x_{\\text{cats}}``: the name's own subscript or the label, never both
        nested; a prime right after the letters."""
        base, _, namesub = sym_name(n).partition("_")
        s = _GREEK.get(base) or (rf"\mathrm{{{base}}}" if (n.upright or len(base) > 1) else base)
        if n.prime:
            s += "'"
        label = self.label(n.sub) if n.sub is not None else None
        if namesub:       # W_{Q}: a label joins its subscript (no subscript inside a subscript)
            if len(namesub) > 1:
                namesub = rf"\mathrm{{{namesub}}}"     # d_{\mathrm{model}}
            s += "_{" + namesub + ("," + label if label else "") + "}"
            label = None
            if n.head is not None:
                s = f"{{{s}}}^{{({n.head})}}"
        elif n.head is not None:
            s += f"^{{({n.head})}}"
        if label:
            s += f"_{{{label}}}"
        return s

    def _print_Entry(self, n):
        return f"{self.doprint(n.base)}[{self.label(n.row)},{self.label(n.col)}]"

    def _print_Item(self, n):
        return f"{self.doprint(n.base)}[{self.label(n.index)}]"

    def _print_Col(self, n):
        return f"{self.doprint(n.base)}[:,{self.label(n.col)}]"

    def _print_Vec(self, n):
        return r"\left[" + (sep() + r"\ ").join(self.doprint(x) for x in n.items) + r"\right]"

    def _print_Frac(self, n):
        return rf"\frac{{{self.doprint(n.num)}}}{{{self.doprint(n.den)}}}"

    def _print_Pow(self, n):
        base = self.wrap(n.base, ATOM)
        if "^" in base and not base.startswith(r"\left("):    # K^{(1)} transposed: {K^{(1)}}^{T}, not a double superscript
            base = f"{{{base}}}"
        return f"{base}^{{{_INLINE.doprint(n.exp)}}}"

    def _print_Sqrt(self, n):
        return rf"\sqrt{{{self.doprint(n.arg)}}}"

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "e"
        return f"e^{{{_INLINE.doprint(n.arg)}}}"

    def _print_Inf(self, n):
        return r"\infty"

    def _print_Sum(self, n):
        return rf"{{\textstyle\sum_{{{n.index}}}}} {self.doprint(n.body)}"

    def _print_Call(self, n):
        shown = call_name(n)
        name, _, sub = shown.partition("_")      # LN_1(…): the operator LN with its subscript
        head = self.doprint(eq.Sym(shown)) if len(shown) == 1 else rf"\operatorname{{{_op(name)}}}" + (f"_{{{sub}}}" if sub else "")
        return head + r"\left(" + r",\ ".join(self.doprint(a) for a in n.args) + r"\right)"

    def _print_Blank(self, n):
        return ""

    def _print_Dims(self, n):
        return rf"{n.rows} \times {n.cols}"

    def _print_Prose(self, n):
        """LaTeX text (ASCII, escaped) with the math inline, quotients on the line, each formula in a box so that
        the line never breaks inside it: ``the row's sum \\mbox{$s_{i}$}``."""
        from .texesc import tex_escape

        return "".join(tex_escape(x) if isinstance(x, str) else rf"\mbox{{${_INLINE.doprint(x)}$}}" for x in n.parts)



class InlineLatexPrinter(InlineFractions, LatexPrinter):
    """LaTeX with quotients written ``a/b`` (for exponents: ``e^{3\\sqrt{2}/2}`` stays readable)."""


_INLINE = InlineLatexPrinter()
