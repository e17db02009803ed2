"""HTML with CSS classes, for print engines that cannot lay out MathML (WeasyPrint).

Every number, letter and sign stays text (a PDF made from it can be searched, copied and read
aloud); the layout is plain CSS, in ``templates/sheet/style.css`` (classes ``m-…``):

* a fraction is an inline block of two stacked spans, the numerator underlined by the bar;
* powers and indices are ``<sup>``/``<sub>`` (both at once: two stacked spans);
* a square root is ``√`` followed by its argument under an overline;
* brackets around something tall (a fraction) are drawn by table cells that stretch to the
  height of what they enclose: square ones as borders, round ones as a parenthesis-shaped
  background (a curved stroke, thick in the middle, thin at the ends).

Where a displayed formula (``.m.d``) may break onto another line: only before a ``+`` or a binary
``−`` (a space before the sign, a no-break space after it) and before the ``·`` of a dot product
(``<wbr>``); never at a relation sign inside a piece (a chain is broken at those by the page, see
:func:`worked.render.view.chain`), never inside a bracketed vector, a call's arguments or an index.
Inline formulas (``.m``) never break.
"""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..numfmt import dec_str, rat_str, terminates
from .base import ATOM, MUL, Printer, call_name, digits, escape, sep, sym_name


_NB = "\u00a0"        # a binary operator keeps its right operand: a line may break before it only
_MINUS = "\u2212"
_OPS = {eq.EQ: "=", eq.APPROX: "≈", eq.TO: "→"}
_TALL = 'class="m-fr"'   # what makes a printed piece taller than a line (it needs big brackets)


def _span(cls: str, s: str) -> str:
    return f'<span class="{cls}">{s}</span>'


def _minus(s: str) -> str:
    return _MINUS + s[1:] if s.startswith("-") else s


def _ident(s: str, upright: bool = False) -> str:
    """A name: one letter in italic, a word (``softmax``, ``scaled``) upright."""
    s = escape(s)
    return s if (upright or len(s) > 1) else f"<i>{s}</i>"


class HtmlCssPrinter(Printer):
    PLUS, MINUS, TIMES, JUXTAPOSE, DOT, NEG = " +" + _NB, f" {_MINUS}{_NB}", "·", "", "<wbr>·", _MINUS
    OPS = {op: f"{_NB}{t}{_NB}" for op, t in _OPS.items()}
    SEP = "," + _NB     # between a vector's entries, a call's arguments: never a line break

    def fence(self, left: str, s: str, right: str, kind: str) -> str:
        """``left s right``; around something tall, brackets drawn by CSS (``kind``: ``rd`` or ``sq``)."""
        if _TALL not in s:
            return left + s + right
        return (f'<span class="m-big"><span class="m-dl m-{kind}"></span>'
                f'<span class="m-in">{s}</span><span class="m-dr m-{kind}"></span></span>')

    def paren(self, s):
        return self.fence("(", s, ")", "rd")

    def _print_Rel(self, n):
        """``a = b``, the sign between no-break spaces (``X =`` before a blank: no space after it)."""
        parts = [self.doprint(n.items[0])]
        for op, x in zip(n.ops, n.items[1:]):
            parts += [self.OPS[op].rstrip(_NB) if type(x) is eq.Blank else self.OPS[op], self.doprint(x)]
        return self.row(parts)

    def label(self, s: str) -> str:
        if s == eq.ALL:
            return "·"
        if s == ":":
            return ":"
        return escape(s) if self.is_word(s) or s.isdigit() else f"<i>{escape(s)}</i>"

    def frac(self, num: str, den: str) -> str:
        return f'<span class="m-fr"><span class="m-nu">{num}</span><span class="m-de">{den}</span></span>'

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            return _minus(digits(rat_str(v)))
        f = self.frac(str(abs(v.numerator)), str(v.denominator))
        return _MINUS + f if v < 0 else f

    def _print_Dec(self, n):
        return _minus(digits(dec_str(n.value)))

    def _head(self, head: int | None) -> str | None:
        return None if head is None else f"({head})"

    def _print_Sym(self, n):
        """``W′`` with ``Q`` below (the name's own subscript or the label, never both nested), the head ⁽¹⁾ above."""
        base, _, namesub = sym_name(n).partition("_")
        b = _ident(base, n.upright) + ("′" if n.prime else "")
        label = self.label(n.sub) if n.sub is not None else None
        sub = _ident(namesub) if namesub else None
        if sub and label:
            sub = f"{sub},{label}"
        elif label:
            sub = label
        return self.scripts(b, sub, self._head(n.head))

    def scripts(self, base: str, sub: str | None, sup: str | None) -> str:
        if sub is not None and sup is not None:
            return base + _span("m-ss", _span("m-sp", sup) + _span("m-sb", sub))
        if sub is not None:
            return f"{base}<sub>{sub}</sub>"
        if sup is not None:
            return f"{base}<sup>{sup}</sup>"
        return base

    def _print_Entry(self, n):
        return f"{self.doprint(n.base)}[{self.label(n.row)},{_NB}{self.label(n.col)}]"

    def _print_Item(self, n):
        return f"{self.doprint(n.base)}[{self.label(n.index)}]"

    def _print_Col(self, n):
        return f"{self.doprint(n.base)}[:,{self.label(n.col)}]"

    def _print_Vec(self, n):
        return self.fence("[", (sep() + _NB).join(self.doprint(x) for x in n.items), "]", "sq")

    def _print_Frac(self, n):
        return self.frac(self.doprint(n.num), self.doprint(n.den))

    def _print_Pow(self, n):
        base = self.wrap(n.base, ATOM)
        sup = '<sup class="m-hi">' if _TALL in base else "<sup>"    # raised to the top of a tall base
        return f"{base}{sup}{_INLINE.doprint(n.exp)}</sup>"

    def _print_Sqrt(self, n):
        return "√" + _span("m-rt", self.doprint(n.arg))

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "<i>e</i>"
        return f"<i>e</i><sup>{_INLINE.doprint(n.arg)}</sup>"

    def _print_Inf(self, n):
        return "∞"

    def _print_Sum(self, n):
        return f"∑<sub>{_ident(n.index)}</sub>{_NB}{self.doprint(n.body)}"

    def _print_Call(self, n):
        shown = call_name(n)
        name, _, sub = shown.partition("_")      # LN_1(…): the operator LN with its subscript
        head = self.doprint(eq.Sym(shown)) if len(shown) == 1 else escape(name) + (f"<sub>{escape(sub)}</sub>" if sub else "")
        return head + self.paren(self.SEP.join(self.doprint(a) for a in n.args))

    def _print_Blank(self, n):
        return ""

    def _print_Dims(self, n):
        return f"{n.rows}×{n.cols}"

    def _print_Prose(self, n):
        """HTML: the text escaped, each formula a ``role="math"`` span labelled with its spoken form.

        A space just before a formula is set in a span of its own (:func:`space_before`)."""
        from . import spoken

        out = []
        for k, x in enumerate(n.parts):
            if isinstance(x, str):
                t = escape(x, quote=False)
                nxt = n.parts[k + 1] if k + 1 < len(n.parts) else None
                out.append(space_before(t) if nxt is not None and not isinstance(nxt, str) else t)
            else:
                out.append(f'<span class="m" role="math" aria-label="{escape(spoken(x))}">{_INLINE.doprint(x)}</span>')
        return "".join(out)


SPACE = '<span class="m-s"> </span>'


def space_before(text: str) -> str:
    """*text* followed by an element: a space at its end set as a span of its own (``SPACE``).

    WeasyPrint (70) breaks a text run that ends in a space before an element after its first word
    when only that last space overflows the line ("Blend" / "the value rows: … times V."); with the
    space in a run of its own the line breaks before the element, as it should."""
    stripped = text.rstrip(" ")
    return stripped + SPACE if stripped != text and stripped else text


class InlineHtmlCssPrinter(HtmlCssPrinter):
    """Quotients written ``a/b`` (in exponents: ``e^(3√2/2)`` stays one line high)."""

    inline_fractions = True

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            return super()._print_Num(n)
        return _minus(f"{v.numerator}/{v.denominator}")

    def _print_Frac(self, n):
        top = self.wrap(n.num, MUL)
        den = n.den
        simple = type(den) in (eq.Sym, eq.Dec) or type(den) is eq.Num and den.value.denominator == 1 and den.value > 0
        return f"{top}/{self.doprint(den) if simple else self.paren(self.doprint(den))}"


_INLINE = InlineHtmlCssPrinter()
