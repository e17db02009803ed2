"""The remembered values behind a faster `worked quiz` change no output: each is compared with the plain path.

Covered: the generator's row penalties, a matrix's shown decimals and view cells, the softmax step's
place-independent parts, MathML converted unit by unit, and the embedded font's URL marked safe.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from worked import generate as G
from worked import quiz, solver
from worked.generate import Family
from worked.problem import load
from worked.render import mathconv, view

ROOT = Path(__file__).resolve().parents[1]

FAMILIES = [
    {"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3], "mask": "none"},
    {"tokens": ["the", "cat", "sat", "down"], "d_model": 3, "d_k": 4, "range": [-1, 2], "weight_range": [0, 1],
     "mask": "causal"},
    {"tokens": 3, "d_model": 3, "d_k": 2, "heads": 2, "range": [-1, 2]},
    {"tokens": 4, "d_model": 2, "d_k": 2, "range": [-2, 2], "scale": "none", "max_weight": 0.9},
    {"tokens": 2, "d_model": 3, "d_k": 3, "range": [0, 3], "ties": True},
]


def _families():
    return [Family.from_dict(dict(d)) for d in FAMILIES]


def _solutions(per_family=4):
    """Solutions of the shipped quizzes' variants, generated families and the shipped problems."""
    out = []
    for name in ("quiz-1.toml", "quiz-2-causal.toml"):
        spec = quiz.load_spec(ROOT / "problems" / name)
        out += [quiz.draw_problem(spec, v)[1] for v in quiz.plan(spec.seed, count=per_family)]
    for fam in _families():
        for seed in range(per_family):
            out.append(solver.solve(G.generate(fam, seed)))
    for path in sorted((ROOT / "problems").glob("*.toml")):
        if not path.name.startswith("quiz"):
            out.append(solver.solve(load(str(path)), checks="row"))
    return out


def test_generate_row_penalty_memo_changes_no_problem(monkeypatch):
    """Problems drawn with the search's remembered row penalties are those drawn computing every penalty."""
    fams = _families() + [quiz.load_spec(ROOT / "problems" / n).family for n in ("quiz-1.toml", "quiz-2-causal.toml")]
    seeds = range(12)
    fast = [G.generate(f, s).to_dict() for f in fams for s in seeds]

    def plain_pen(self, h, i):
        row = self.S[h][i]
        return G._row_penalty(self.fam, row[: i + 1] if self.causal else row, self.lmax, self.lmin)

    monkeypatch.setattr(G._Search, "_pen", plain_pen)
    plain = [G.generate(f, s).to_dict() for f in fams for s in seeds]
    assert fast == plain


def _fresh(m):
    """The same matrix without anything remembered."""
    from dataclasses import replace

    return replace(m, _cache={})


def test_matrix_decimals_and_view_cells_remembered_unchanged():
    """Mat.dec/dec_plain/show and the cells of view.mat_view read from memory equal the values made afresh,
    and every mat_view gets cells of its own (a change to one does not reach the next)."""
    checked = 0
    for sol in _solutions():
        for m in sol.matrices().values():
            for places in (0, 2, 4, 7):
                for _ in range(2):   # the second time from memory
                    plain = _fresh(m)
                    for i in range(m.shape[0]):
                        for j in range(m.shape[1]):
                            assert m.dec(i, j, places) == plain.dec(i, j, places)
                            assert m.dec_plain(i, j, places) == plain.dec_plain(i, j, places)
                            assert m.show(i, j, places) == plain.show(i, j, places)
                            checked += 1
                    for exact in (False, True):
                        assert view.mat_view(m, places, exact=exact) == view.mat_view(_fresh(m), places, exact=exact)
                        assert view._mat_cells(m, places, exact) == view._mat_cells_raw(plain, places, exact)
        v1 = view.mat_view(sol.output, 2)
        v1["cells"][0][0]["text"] = "changed"
        v1["cells"][0].append({})
        assert view.mat_view(sol.output, 2) == view.mat_view(_fresh(sol.output), 2)
    assert checked > 5000


def test_weights_step_memo_changes_no_line():
    """The softmax step rebuilt with a shared memo (as _audited does) has the lines built without one."""
    built = 0
    for sol in _solutions(per_family=3):
        p = sol.problem
        ctx = solver._Ctx(p, sol.checks)
        for h in sol.heads:
            hid = h.index if p.multihead else None
            rows = solver._softmax_rows(ctx, h.scaled)
            memo: dict = {}
            for _ in range(2):
                for places in range(p.decimals + 2, p.decimals + 6):
                    fast = solver._weights_step(ctx, hid, h.scaled, h.weights, rows, places, memo)
                    plain = solver._weights_step(ctx, hid, _fresh(h.scaled), _fresh(h.weights), rows, places)
                    assert fast == plain
                    built += 1
            assert memo
    assert built > 100


def _side_formulas():
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_mathml_speedup import EXTRA, _quiz_formulas, _sheet_formulas

    items = _sheet_formulas() + _quiz_formulas(4)
    sides = {side for s, _ in items for side in mathconv._REL.split(s)}
    sides |= set(EXTRA)
    sides |= {r"x^2 y_1 + A_{1,2}' - e^{\sqrt{2}}", r"x'^2 + y_a^b", r"\left(-2\right)^{2} \cdot 3",
              r"\frac{1}{2}^{3} x", r"{x}_{1} {y}^{2}", r"\sqrt{2}' + 1", r"a \cdot \left[1,\ 2\right]_{3}"}
    return sorted(sides)


def test_sides_converted_unit_by_unit_as_whole():
    """A side converted unit by unit (each unit remembered) is latex2mathml's conversion of the whole side."""
    import latex2mathml.converter as l2m

    mathconv._speed_up_latex2mathml()
    if not mathconv._GRAMMAR:
        pytest.skip("latex2mathml version not patched")
    mathconv._SIDES.clear()
    mathconv._UNITS.clear()
    sides = _side_formulas()
    split = 0
    for side in sides:
        for mode in ("inline", "block"):
            for _ in range(2):   # the second time from remembered units and sides
                got = mathconv._side(side, mode)
                if got is None:
                    continue
                split += 1
                whole = l2m.convert(side, display=mode)
                prefix = f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="{mode}"><mrow>'
                assert whole.startswith(prefix) and whole.endswith("</mrow></math>"), side
                assert got == whole[len(prefix):-len("</mrow></math>")], side
            tokens = list(mathconv._GRAMMAR["tokenize"](side))
            starts = mathconv._units(tokens)
            assert (starts is not None) == mathconv._complete(tokens)
            if starts is not None:
                assert starts[0] == 0 and starts == sorted(set(starts))
                assert all(tokens[k] not in ("^", "_", "'") for k in starts)
    assert split > 500
    assert len(mathconv._UNITS) > 100


def test_font_url_marked_safe_only_when_escaping_keeps_it():
    """The embedded font URL is given to the template unescaped only when escaping would not change it."""
    from markupsafe import Markup, escape

    from worked.render import html as H
    from worked.render.fonts import math_font_data_url

    url = H._font_url()
    assert str(url) == math_font_data_url() == str(escape(math_font_data_url()))
    assert isinstance(url, Markup)


def _sums():
    """Sums and other expressions from many solutions (every sub-expression), and a few of other kinds."""
    import sympy as sp

    out = []
    for sol in _solutions(per_family=3):
        for m in sol.matrices().values():
            for row in m.exact:
                for x in row:
                    out += list(sp.preorder_traversal(x))
    r2, x, y = sp.sqrt(2), sp.Symbol("x"), sp.Symbol("y")
    out += [1 + sp.exp(r2) - 2 * sp.exp(-r2), x + 2 * y + 1, x**2 - 3 * x + 2, sp.I * x + 3 - sp.I, 2 - 3 * sp.pi,
            sp.Float("1.5") + sp.exp(sp.Float("0.5")), 3 + sp.O(x), sp.exp(x) + sp.sin(x), -1 + sp.sqrt(3) * 2,
            sp.E + sp.pi + sp.EulerGamma, 1 - 2 * sp.exp(r2 / 2), sp.Rational(1, 3) - sp.exp(sp.Rational(2, 3)) * 5,
            sp.Integer(4), sp.exp(r2), sp.S.NegativeInfinity]
    return list(dict.fromkeys(out))


def test_as_terms_with_remembered_complex_values_as_sympy():
    """sympy with Expr.as_terms remembering each number's complex value gives sympy's own terms, term order,
    sort keys and printed text and LaTeX, for many sums and products (sympy's caches cleared in between)."""
    import sympy as sp
    from sympy.core.cache import clear_cache
    from sympy.printing.latex import latex as sympy_latex
    from sympy.printing.str import sstr

    from worked import numfmt as F

    exprs = _sums()
    assert sum(e.is_Add for e in exprs) > 100

    def observe():
        clear_cache()
        out = []
        for e in exprs:
            out.append(e.as_terms() if isinstance(e, sp.Expr) else None)
            for order in (None, "lex", "grlex"):
                out.append(e.as_ordered_terms(order=order) if isinstance(e, sp.Expr) else None)
            out += [e.sort_key(), sstr(e), sympy_latex(e)]
            if e.is_Mul:
                out.append(e.as_ordered_factors())
        return out

    F._speed_up_sympy()
    if not F._SYMPY_ORIGINALS:
        pytest.skip("sympy version not patched")
    assert sp.Expr.as_terms is F._as_terms
    fast = observe()
    again = observe()   # from remembered complex values
    F._unpatch_sympy()
    try:
        assert sp.Expr.as_terms is not F._as_terms
        plain = observe()
    finally:
        F._speed_up_sympy()
        clear_cache()
    assert F._COMPLEX
    assert len(fast) == len(plain) > 1000
    for a, b, c in zip(fast, again, plain):
        assert a == b == c


def test_lines_hold_is_audit_lines_finding_nothing():
    """audit.lines_hold (stops at the first failing line) answers as ``not audit_lines`` on every step's lines,
    with the lines rounded to fewer places too (where some fail), strict or not."""
    from worked import audit

    checked = failing = 0
    for sol in _solutions(per_family=3):
        for step in sol.steps:
            texts = [ln.text for ln in step.lines]
            variants = [texts, texts[::-1]]
            if step.precision:   # the same lines with fewer places: some no longer hold
                variants.append([t.replace(f".{'0' * 1}", ".", 1) for t in texts])
            for lines in variants:
                for strict in (True, False):
                    audit._LINES.clear()
                    cold = audit.lines_hold(lines, strict)
                    want = not audit.audit_lines(lines, strict)
                    assert cold == want
                    assert audit.lines_hold(lines, strict) == want   # from the remembered lines
                    failing += not want
                    checked += 1
    assert checked > 300
    assert failing > 0


def test_search_updates_match_products_and_penalties_made_afresh():
    """After every change the search's Q, K, scores and row penalties (remembered) are those computed from scratch."""
    import random

    for fam in _families():
        rng = random.Random(7)
        n, dm, dk, H = fam.n, fam.d_model, fam.d_k, fam.heads
        X = G._draw_matrix(rng, n, dm, *fam.range)
        WQs = [G._draw_matrix(rng, dm, dk, *fam.wrange, sparse=True) for _ in range(H)]
        WKs = [G._draw_matrix(rng, dm, dk, *fam.wrange, sparse=True) for _ in range(H)]
        st = G._Search(fam, X, WQs, WKs)
        lmax, lmin = G._logs(fam)
        for step in range(300):
            which = rng.choice("XQK")
            h = rng.randrange(H)
            r = rng.randrange(n if which == "X" else dm)
            c = rng.randrange(dm if which == "X" else dk)
            st.change(which, h, r, c, rng.choice((-2, -1, 1, 2)))
            for g in range(H):
                Q, K = G._matmul(X, WQs[g]), G._matmul(X, WKs[g])
                S = G._matmul(Q, [list(col) for col in zip(*K)])
                assert st.Q[g] == Q and st.K[g] == K and st.S[g] == S
                rows = [S[i][: i + 1] if fam.mask == "causal" else S[i] for i in range(n)]
                assert st.pen[g] == [G._row_penalty(fam, row, lmax, lmin) for row in rows]


TRICKY_SUMS = [r"\text{a + b} + c", r"\frac{a + b}{c} - 3", r"x\ + y", r"\left(a + b\right) \cdot c", r"a + ",
               r"a +  b", r"\verb|a + b| + c", r"\{ + \}", r"{a \} + \{ b}", r"\rightarrow + x", r"\left( a + b",
               r"a - -2", r"2 + 3pt", r"3 - pt", r"\mathrm{a + b} \cdot 2", r"x^ + y", r"x^{2} + y_{1} - z'",
               r"\sqrt{2 + x} - 1", r"\frac 1 2 + 3", r"- a + b", r"a \cdot \cdot b", r"\left[1,\ 2\right] \cdot 3",
               r"e^{\sqrt{2} / 2} + 1", r"1 + e^{\sqrt{2}} + e^{2 \sqrt{2}}", r"\textstyle a + b", r"{\textstyle a} + b"]


def test_sides_cut_into_pieces_as_whole():
    """A side read as remembered pieces cut at its + - and \\cdot is the side converted whole from its tokens,
    or None exactly when the whole side is not complete."""
    import latex2mathml.converter as l2m

    mathconv._speed_up_latex2mathml()
    if not mathconv._GRAMMAR:
        pytest.skip("latex2mathml version not patched")
    sides = _side_formulas() + TRICKY_SUMS
    cut = 0
    for _ in range(2):   # the second time from remembered pieces
        mathconv._SIDES.clear()
        for side in sides:
            for mode in ("inline", "block"):
                try:
                    got = mathconv._side(side, mode)
                except Exception as exc:   # then the whole side fails the same way
                    with pytest.raises(type(exc)):
                        mathconv._convert_tokens(list(mathconv._GRAMMAR["tokenize"](side)), mode)
                    continue
                tokens = list(mathconv._GRAMMAR["tokenize"](side))
                if mathconv._units(tokens) is None:
                    assert got is None, side
                    continue
                assert got == mathconv._convert_tokens(tokens, mode), side
                whole = l2m.convert(side, display=mode)   # and latex2mathml's own, for the whole side
                prefix = f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="{mode}"><mrow>'
                assert whole == prefix + got + "</mrow></math>", side
                cut += mathconv._pieces(side) is not None
    assert cut > 200


def _round_decimal_reference(exact, num, places):
    """numfmt.round_decimal as it was (Fraction arithmetic and a new 200-digit context each time)."""
    from decimal import ROUND_HALF_UP, Context, Decimal
    from fractions import Fraction

    import mpmath

    from worked import numfmt as F

    q = Decimal(1).scaleb(-places)
    if F.is_rational(exact):
        f = F._frac(exact)
        scaled = f * (10**places)
        n, r = divmod(abs(scaled.numerator), scaled.denominator)
        if 2 * r >= scaled.denominator:
            n += 1
        d = Decimal(n if f >= 0 else -n).scaleb(-places, context=Context(prec=200))
        return d.quantize(q, context=Context(prec=200))
    d = F._digits45(num) if type(num) is mpmath.mpf else F._digits45.__wrapped__(num)
    ctx = Context(prec=max(200, d.adjusted() + places + 20))
    return d.quantize(q, rounding=ROUND_HALF_UP, context=ctx)


def test_round_decimal_as_before():
    """round_decimal (no Fraction normalising, one shared 200-digit context) rounds every value as before:
    fractions and sympy rationals with ties, negatives, zero, huge and tiny values, and irrationals."""
    import random
    from decimal import Decimal
    from fractions import Fraction

    import mpmath
    import sympy as sp

    from worked import numfmt as F

    rng = random.Random(3)
    values = [Fraction(0), Fraction(1, 2), Fraction(-1, 2), Fraction(5, 1000), Fraction(-5, 1000), Fraction(-25, 10**5),
              Fraction(10**40 + 1, 3), Fraction(-1, 10**30), Fraction(7, 3), Fraction(2, 3), Fraction(-2, 3)]
    values += [Fraction(rng.randint(-10**6, 10**6), rng.randint(1, 10**4)) for _ in range(1500)]
    values += [Fraction(rng.randint(-999, 999), 2 * 10**rng.randint(0, 8)) for _ in range(500)]   # ties
    rationals = [sp.Rational(v.numerator, v.denominator) for v in values[:400]]
    irr = [(sp.exp(sp.sqrt(k)), mpmath.exp(mpmath.sqrt(k))) for k in range(2, 12)]
    irr += [(-sp.sqrt(k) / 7, -mpmath.sqrt(k) / 7) for k in range(2, 12)]
    for places in range(0, 12):
        for v in values + rationals:
            got, want = F.round_decimal(v, None, places), _round_decimal_reference(v, None, places)
            assert got == want and str(got) == str(want) and type(got) is Decimal, (v, places)
        for e, n in irr:
            assert str(F.round_decimal(e, n, places)) == str(_round_decimal_reference(e, n, places))


TRICKY_UNITS = [r"\left[2.1213,\ 0.7071,\ 0.0000\right]", r"\left[-2,\ 0,\ -1,\ 2\right]", r"\frac{8.3421}{11.3702}",
                r"\left(-2\right)", r"\mathrm{12}", r"\mathrm{x1}", r"\text{12}", r"\sqrt{12}", r"\frac12",
                r"\frac{1}{2}", r"\left[\frac{3 \sqrt{2}}{2},\ \frac{\sqrt{2}}{2},\ 0\right]", r"{1 2 3}",
                r"\left(\mathrm{3} 4\right)", r"\left[x_{1},\ 2\right]", r"\frac{9876543210}{2}", r"2pt",
                r"\left|0.5\right|", r"\left.3\right)", r"{\textstyle 1 + 2}", r"\frac{\mathrm{1}}{2}",
                r"\left[1,\ \left(2\right)\right]", r"\sqrt{\frac{1}{3}}", r"{0}", r"1.50", r"007"]


def test_units_from_their_shapes_as_converted():
    """A unit's MathML made from its shape (numbers put back into the remembered conversion of the unit with
    stand-in numbers) is the unit's own conversion and latex2mathml's, for every unit of our formulas and
    tricky ones (numbers in \\text, \\mathrm, scripts, nested brackets)."""
    import latex2mathml.converter as l2m

    mathconv._speed_up_latex2mathml()
    if not mathconv._GRAMMAR:
        pytest.skip("latex2mathml version not patched")
    units = set()
    for side in _side_formulas() + TRICKY_SUMS + TRICKY_UNITS:
        tokens = list(mathconv._GRAMMAR["tokenize"](side))
        starts = mathconv._units(tokens)
        if starts is not None:
            bounds = starts + [len(tokens)]
            units |= {tuple(tokens[bounds[k]:bounds[k + 1]]) for k in range(len(starts))}
    used = 0
    for _ in range(2):   # the second time from remembered shapes
        for unit in sorted(units):
            for mode in ("inline", "block"):
                got = mathconv._by_shape(unit, mode)
                if got is None:
                    continue
                used += 1
                assert got == mathconv._convert_tokens(unit, mode), unit
                prefix = f'<math xmlns="http://www.w3.org/1998/Math/MathML" display="{mode}"><mrow>'
                assert l2m.convert(" ".join(unit), display=mode) == prefix + got + "</mrow></math>", unit
    assert used > 200
    assert mathconv._by_shape(tuple(mathconv._GRAMMAR["tokenize"](r"\text{12} 3")), "inline") is None
    assert mathconv._by_shape(tuple(mathconv._GRAMMAR["tokenize"](r"x_{1} 2")), "inline") is None
