"""The remembered parts of worked.numfmt's printers (term order, text of sums and products) change no output."""
from __future__ import annotations

import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.printing.printer import Printer
from sympy.printing.str import StrPrinter

from worked import numfmt as F
from worked.problem import load
from worked.solver import solve


class _PlainText(F.TextPrinter):
    """TextPrinter without anything remembered."""

    def _print_Add(self, expr, order=None):
        return StrPrinter._print_Add(self, expr, order)

    def _print_Mul(self, expr):
        return StrPrinter._print_Mul(self, expr)

    def _as_ordered_terms(self, expr, order=None):
        return Printer._as_ordered_terms(self, expr, order)


class _PlainTex(F.TexPrinter):
    def _as_ordered_terms(self, expr, order=None):
        return Printer._as_ordered_terms(self, expr, order)


def _values():
    out = []
    for name in (None, "problems/two-heads.toml", "problems/causal-mask.toml", "problems/decimal-inputs.toml"):
        sol = solve(load(name))
        for h in sol.heads:
            for m in (h.scaled, h.weights, h.Z):
                out += [x for row in m.exact for x in row]
        out += [x for row in sol.output.exact for x in row]
    r2, x = sp.sqrt(2), sp.Rational(3, 7)
    out += [sp.exp(r2) / (2 + sp.exp(2 * r2)), 1 + sp.exp(r2) + sp.exp(5 * r2 / 2), -3 * r2 / 2, x * sp.exp(-x),
            sp.Float("0.125") + sp.exp(sp.Float("1.5")) * 2, (sp.Float("2.50") + r2) / (1 + sp.exp(sp.Float("0.5"))),
            sp.exp(r2) * (sp.Float("1.25") + sp.exp(x)), sp.pi / 3 + sp.E, -sp.exp(-r2) - 2]
    return list(dict.fromkeys(out))


def test_text_and_latex_printers_unchanged_by_memo():
    values = _values()
    assert len(values) > 50
    plain_t, plain_l = _PlainText({"order": None}), _PlainTex()
    # twice: the second pass reads what the first remembered
    for _ in range(2):
        for v in values:
            assert F._text_printer.doprint(v) == plain_t.doprint(v), v
            assert F._tex_printer.doprint(v) == plain_l.doprint(v), v
            assert F._tex_inline.doprint(v) == LatexPrinter({"mul_symbol": None, "fold_short_frac": True}).doprint(v), v
