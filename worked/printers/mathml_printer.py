"""Presentation MathML (MathML Core) for the HTML pages and the web page."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..numfmt import dec_str, rat_str, terminates
from .base import ATOM, Printer, call_name, digits, escape, sep, sym_name


_OPS = {eq.EQ: "=", eq.APPROX: "≈", eq.TO: "→"}


def _mo(s: str) -> str:
    return f"<mo>{s}</mo>"


def _row(*parts: str) -> str:
    return "<mrow>" + "".join(parts) + "</mrow>"


class MathMLPrinter(Printer):
    PLUS, MINUS, TIMES, JUXTAPOSE, DOT, NEG = _mo("+"), _mo("−"), _mo("·"), _mo("&#x2062;"), _mo("·"), _mo("−")
    OPS = {op: _mo(t) for op, t in _OPS.items()}

    def row(self, parts):
        return _row(*parts)

    def paren(self, s):
        return _row(_mo("("), s, _mo(")"))

    def label(self, s: str) -> str:
        if s == eq.ALL:
            return _mo("·")
        if s == ":":
            return _mo(":")
        if s.isdigit():
            return f"<mn>{s}</mn>"
        return f"<mtext>{escape(s)}</mtext>" if self.is_word(s) else f"<mi>{escape(s)}</mi>"

    def _print_Num(self, n):
        v = n.value
        if v.denominator == 1 or terminates(v):
            s = digits(rat_str(v))
            return _row(_mo("−"), f"<mn>{s[1:]}</mn>") if s.startswith("-") else f"<mn>{s}</mn>"
        frac = f"<mfrac><mn>{abs(v.numerator)}</mn><mn>{v.denominator}</mn></mfrac>"
        return _row(_mo("−"), frac) if v < 0 else frac

    def _print_Dec(self, n):
        s = digits(dec_str(n.value))
        return _row(_mo("−"), f"<mn>{s[1:]}</mn>") if s.startswith("-") else f"<mn>{s}</mn>"

    def _print_Sym(self, n):
        """``<msubsup><mi>W</mi><mi>Q</mi><mo>′</mo></msubsup>``: the name's own subscript or the label (never
        both nested), the prime and the head ⁽¹⁾ above."""
        base, _, namesub = sym_name(n).partition("_")
        variant = ' mathvariant="normal"' if n.upright and len(base) == 1 else ""
        b = f"<mi{variant}>{escape(base)}</mi>"
        label = self.label(n.sub) if n.sub is not None else None
        sub = f"<mi>{escape(namesub)}</mi>" if namesub else None
        if sub and label:
            sub = _row(sub, _mo(","), label)
        elif label:
            sub = label
        sup = []
        if n.prime:
            sup.append("<mo>′</mo>")
        if n.head is not None:
            sup.append(_row(_mo("("), f"<mn>{n.head}</mn>", _mo(")")))
        sup = None if not sup else sup[0] if len(sup) == 1 else _row(*sup)
        if sub is not None and sup is not None:
            return f"<msubsup>{b}{sub}{sup}</msubsup>"
        if sub is not None:
            return f"<msub>{b}{sub}</msub>"
        if sup is not None:
            return f"<msup>{b}{sup}</msup>"
        return b

    def _print_Entry(self, n):
        return _row(self.doprint(n.base), _mo("["), self.label(n.row), _mo(","), self.label(n.col), _mo("]"))

    def _print_Item(self, n):
        return _row(self.doprint(n.base), _mo("["), self.label(n.index), _mo("]"))

    def _print_Col(self, n):
        return _row(self.doprint(n.base), _mo("["), _mo(":"), _mo(","), self.label(n.col), _mo("]"))

    def _print_Vec(self, n):
        inner = _mo(sep()).join(self.doprint(x) for x in n.items)
        return _row(_mo("["), inner, _mo("]"))

    def _print_Frac(self, n):
        return f"<mfrac>{_row(self.doprint(n.num))}{_row(self.doprint(n.den))}</mfrac>"

    def _print_Pow(self, n):
        return f"<msup>{self.wrap(n.base, ATOM)}{_row(self.doprint(n.exp))}</msup>"

    def _print_Sqrt(self, n):
        return f"<msqrt>{self.doprint(n.arg)}</msqrt>"

    def _print_Exp(self, n):
        if n.arg == eq.Num(Fraction(1)):     # e^1 is e
            return "<mi>e</mi>"
        return f"<msup><mi>e</mi>{_row(self.doprint(n.arg))}</msup>"

    def _print_Inf(self, n):
        return "<mi>∞</mi>"

    def _print_Sum(self, n):
        return _row(f"<msub><mo>∑</mo><mi>{escape(n.index)}</mi></msub>", self.doprint(n.body))

    def _print_Call(self, n):
        args = _mo(",").join(self.doprint(a) for a in n.args)
        name, _, sub = call_name(n).partition("_")      # LN_1(…): the operator LN with its subscript
        head = f"<mi>{escape(name)}</mi>" if not sub else f"<msub><mi>{escape(name)}</mi><mi>{escape(sub)}</mi></msub>"
        return _row(head, _mo("&#x2061;"), _mo("("), args, _mo(")"))

    def _print_Blank(self, n):
        return "<mrow></mrow>"

    def _print_Dims(self, n):
        return _row(f"<mn>{n.rows}</mn>", _mo("×"), f"<mn>{n.cols}</mn>")

    def _print_Prose(self, n):
        """HTML: the text escaped, each formula an inline ``<math>`` element with its spoken form as alt text."""
        from . import spoken

        return "".join(escape(x, quote=False) if isinstance(x, str) else
                       math_element(self.doprint(x), alt=spoken(x)) for x in n.parts)



def math_element(body: str, *, display: bool = False, alt: str | None = None) -> str:
    """A ``<math>`` element around printed MathML (``alttext`` for assistive technology)."""
    attrs = ' display="block"' if display else ""
    if alt:
        attrs += f' alttext="{escape(alt, quote=True)}"'
    return f'<math xmlns="http://www.w3.org/1998/Math/MathML"{attrs}>{body}</math>'
