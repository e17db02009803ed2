"""Solving a problem exactly and building the worked steps (Part 9 "Check one" style).

Products of input matrices are computed with Fractions; scaling, softmax and Z with sympy
(√2, e^{√2}, 1/3), and alongside with 50-digit mpmath numbers for the decimals. Every step is
audited (:mod:`worked.audit`) as it is built; a step whose lines do not hold at the chosen
number of places for intermediates is rebuilt with one more place, and ``solve`` raises rather
than return a solution whose shown arithmetic fails.
"""
from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import mpmath
import sympy as sp

from . import numfmt as F
from .audit import audit_lines, lines_hold
from .errors import ProblemError
from .model import HeadResult, Line, Mat, Solution, Step
from .problem import Problem

CHECKS = ("one", "row", "all")
NEG_INF = sp.S.NegativeInfinity
MAX_EXTRA_PLACES = 8
MAX_SCALED = 300   # largest |scaled score|: e^300 already has 131 digits


class AuditFailure(RuntimeError):
    """Internal error: a step could not be shown with lines that hold. Never a user error."""


# ---------------------------------------------------------------- labels

def tok_text(tok: str, i: int) -> str:
    return tok if re.fullmatch(r"[^\W\d]\w{0,19}", tok) else str(i + 1)


def tok_latex(tok: str, i: int) -> str:
    return rf"\text{{{tok}}}" if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,19}", tok) else str(i + 1)


_SUP = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


class _Ctx:
    def __init__(self, problem: Problem, checks: str):
        self.p = problem
        self.checks = checks
        self.lt = [tok_text(t, i) for i, t in enumerate(problem.tokens)]
        self.ll = [tok_latex(t, i) for i, t in enumerate(problem.tokens)]
        self.multi = problem.multihead
        self.dec = problem.decimals

    def sym(self, base: str, head: int | None) -> tuple[str, str]:
        """Text and LaTeX symbol of a per-head matrix: Q or Q⁽¹⁾ / Q^{(1)}."""
        if head is None or not self.multi:
            return base, base
        return f"{base}⁽{str(head).translate(_SUP)}⁾", f"{base}^{{({head})}}"

    def wsym(self, base: str, head: int | None) -> tuple[str, str]:
        """Weight matrix symbol: W_Q or W_Q⁽¹⁾."""
        t, l = f"W_{base}", f"W_{{{base}}}"
        if head is None or not self.multi:
            return t, l
        return f"{t}⁽{str(head).translate(_SUP)}⁾", f"{l}^{{({head})}}"


def _entries(checks: str, rows: int, cols: int, first: tuple[int, int], allowed=None):
    if checks == "one":
        out = [first]
    elif checks == "row":
        out = [(first[0], j) for j in range(cols)]
    else:
        out = [(i, j) for i in range(rows) for j in range(cols)]
    return [e for e in out if allowed is None or allowed(*e)]


# ---------------------------------------------------------------- exact helpers

def _rat(f: Fraction):
    return sp.Rational(f.numerator, f.denominator)


def _mp(f: Fraction):
    return mpmath.mpf(f.numerator) / f.denominator


def _matmul_frac(A, B):
    n, k, m = len(A), len(B), len(B[0])
    return [[sum((A[i][t] * B[t][j] for t in range(k)), Fraction(0)) for j in range(m)] for i in range(n)]


def _mat_from_frac(name, sym, A, rows, cols):
    return Mat(name, sym[0], sym[1], [[_rat(x) for x in r] for r in A], [[_mp(x) for x in r] for r in A], rows, cols)


def _vec_text(xs) -> str:
    return "[" + ", ".join(xs) + "]"


def _vec_latex(xs) -> str:
    return r"\left[" + ",\\ ".join(xs) + r"\right]"


def _round_mp(x, places: int) -> Decimal:
    return F.round_decimal(None, x, places) if not isinstance(x, Fraction) else F.round_decimal(x, None, places)


def _dtext(d: Decimal) -> str:
    s = f"{d:f}"
    if d == 0:
        s = s.lstrip("-")
    return s.replace("-", F.MINUS)


def _dlatex(d: Decimal) -> str:
    s = f"{d:f}"
    return s.lstrip("-") if d == 0 else s


def _frac_dec(f: Fraction, max_places: int = 14) -> Decimal | None:
    """The exact decimal of a Fraction if it terminates within max_places, else None."""
    scaled = f * 10**max_places
    if scaled.denominator != 1:
        return None
    d = Decimal(scaled.numerator).scaleb(-max_places)
    return d.normalize() if d != d.to_integral() else d.quantize(Decimal(1))


def _den_text(s: str) -> str:
    return s if re.fullmatch(r"√?\d+", s) else f"({s})"


def _den_latex(s: str) -> str:
    return s if re.fullmatch(r"(\\sqrt\{)?\d+\}?", s) else rf"\left({s}\right)"


def _exp_text(x) -> str:
    s = F.text(x)
    return f"e^{s}" if (x.is_Integer and x >= 0) else f"e^({s})"


def _exp_latex(x) -> str:
    return f"e^{{{F.latex_inline(x)}}}"


# ---------------------------------------------------------------- the product steps (Q, K, V, scores, output)

def _dot_line(lhs_t, lhs_l, mid_t, mid_l, a, b, result, rel="=", result_t=None, result_l=None, a_text=None):
    at = a_text if a_text is not None else [F.num_text(x) for x in a]
    bt = [F.num_text(x) for x in b]
    al = [t.replace(F.MINUS, "-") for t in a_text] if a_text is not None else [F.num_latex(x) for x in a]
    bl = [F.num_latex(x) for x in b]
    terms_t = " + ".join(f"{F.paren_text(x)}·{F.paren_text(y)}" for x, y in zip(at, bt))
    terms_l = " + ".join(rf"{F.paren_latex(x)} \cdot {F.paren_latex(y)}" for x, y in zip(al, bl))
    rt = result_t if result_t is not None else F.num_text(result)
    rl = result_l if result_l is not None else F.num_latex(result)
    text = f"{lhs_t} = {mid_t} = {_vec_text(at)}·{_vec_text(bt)} = {terms_t} {rel} {rt}"
    latex = rf"{lhs_l} = {mid_l} = {_vec_latex(al)} \cdot {_vec_latex(bl)} = {terms_l} {'=' if rel == '=' else chr(92) + 'approx'} {rl}"
    return Line(text, latex)


def _proj_step(ctx: _Ctx, which: str, head, A, W, R, mat: Mat) -> Step:
    """Q, K or V = X·W: shapes, and 'Check one' expansions."""
    n, dm, dk = len(A), len(W), len(W[0])
    st, sl = ctx.sym(which, head)
    wt, wl = ctx.wsym(which, head)
    lines = []
    for i, j in _entries(ctx.checks, n, dk, (0, 0)):
        col = [W[t][j] for t in range(dm)]
        lines.append(_dot_line(
            f"{st}[{ctx.lt[i]}, {j + 1}]", rf"{sl}_{{{ctx.ll[i]},{j + 1}}}",
            f"x_{ctx.lt[i]}·{wt}[:, {j + 1}]", rf"x_{{{ctx.ll[i]}}} \cdot {wl}[:,{j + 1}]",
            A[i], col, R[i][j]))
    what = {"Q": ("queries", "what each token is looking for"),
            "K": ("keys", "what each token offers to be matched against"),
            "V": ("values", "what each token passes on when another token attends to it")}[which]
    why = (f"Multiply X by {wt}: row i of {st} is token i's row of X times {wt}, the {what[0]} ({what[1]}). "
           f"Each entry is the dot product of a row of X with a column of {wt}.")
    title = f"{what[0].capitalize()}: {st} = X·{wt}"
    return Step(which, title, why, lines, result=which, head=head,
                shape=f"({n}×{dm})·({dm}×{dk}) → {n}×{dk}",
                shape_latex=rf"({n} \times {dm}) \cdot ({dm} \times {dk}) \to {n} \times {dk}")


def _scores_step(ctx: _Ctx, head, Qf, Kf, Sf, scores: Mat) -> Step:
    n, dk = len(Qf), len(Qf[0])
    st, sl = ctx.sym("scores", head)
    qt, ql = ctx.sym("q", head)
    kt, kl = ctx.sym("k", head)
    Qt, _ = ctx.sym("Q", head)
    Kt, _ = ctx.sym("K", head)
    causal = ctx.p.mask == "causal"
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else n), key=lambda j: (Sf[r0][j], -j))
    lines = []
    for i, j in _entries(ctx.checks, n, n, (r0, best)):
        lines.append(_dot_line(
            f"{st}[{ctx.lt[i]}, {ctx.lt[j]}]", rf"\mathrm{{{sl.split('^')[0]}}}{sl[len(sl.split('^')[0]):]}_{{{ctx.ll[i]},{ctx.ll[j]}}}",
            f"{qt}_{ctx.lt[i]}·{kt}_{ctx.lt[j]}", rf"{ql}_{{{ctx.ll[i]}}} \cdot {kl}_{{{ctx.ll[j]}}}",
            Qf[i], Kf[j], Sf[i][j]))
    why = (f"Match every query with every key: {st} = {Qt}·{Kt}ᵀ. Row i, column j is the dot product of "
           f"token i's query with token j's key; the bigger it is, the more token i will attend to token j.")
    notes = []
    if ctx.checks == "one" and n > 1:
        notes.append(f"The entry expanded is the largest score in the row of “{ctx.p.tokens[r0]}”: "
                     f"“{ctx.p.tokens[r0]}” will attend most to “{ctx.p.tokens[best]}”.")
    if causal:
        notes.append("Causal mask: a token may attend only to itself and to earlier tokens, so every score "
                     "above the diagonal (the key of a later token) is set to −∞. After the softmax its weight is exactly 0.")
    return Step("scores", f"Scores: {st} = {Qt}·{Kt}ᵀ" + (" with the causal mask" if causal else ""), why, lines,
                result="scores", head=head, notes=notes,
                shape=f"({n}×{dk})·({dk}×{n}) → {n}×{n}",
                shape_latex=rf"({n} \times {dk}) \cdot ({dk} \times {n}) \to {n} \times {n}")


# ---------------------------------------------------------------- scaling

def _scale_step(ctx: _Ctx, head, scores: Mat, scaled: Mat, factor) -> Step:
    p, n = ctx.p, scores.shape[0]
    st, sl = ctx.sym("scaled", head)
    sct, scl = ctx.sym("scores", head)
    lines, notes = [], []
    if p.scale == "none":
        why = 'The problem sets scale = "none": the scores go into the softmax as they are, so the scaled scores equal the scores.'
        return Step("scaled", f"Scaling: none ({st} = {sct})", why, [], result="scaled", head=head)
    if p.scale == "sqrt":
        dk = p.d_k
        ft, fl = F.text(factor), F.latex(factor)
        if factor.is_Integer:
            lines.append(Line(f"√d_k = √{dk} = {ft}", rf"\sqrt{{d_k}} = \sqrt{{{dk}}} = {fl}"))
        else:
            approx = F.dec_str(factor, mpmath.sqrt(dk), 4)
            first = f"√d_k = √{dk}" + (f" = {ft}" if ft != f"√{dk}" else "")
            first_l = rf"\sqrt{{d_k}} = \sqrt{{{dk}}}" + (rf" = {fl}" if ft != f"√{dk}" else "")
            lines.append(Line(f"{first} ≈ {approx}", rf"{first_l} \approx {approx.replace(F.MINUS, '-')}"))
        why = (f"Divide every score by √d_k = √{dk}: with long vectors, dot products grow large and the softmax would give "
               f"nearly all the weight to one token. Scaling keeps the weights calm; the original Transformer does exactly this.")
        title = f"Scaling: {st} = {sct}/√d_k"
    else:
        ft, fl = F.text(factor), F.latex(factor)
        why = f"The problem sets scale = {F.num_text(p.scale)}: divide every score by {ft}."
        title = f"Scaling: {st} = {sct}/{ft}"
    causal = p.mask == "causal"
    S = scores.exact
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else n), key=lambda j: (float(scores.num[r0][j]), -j))
    for i, j in _entries(ctx.checks, n, n, (r0, best), allowed=lambda i, j: not scaled.is_masked(i, j)):
        s, v = S[i][j], scaled.exact[i][j]
        lhs_t, lhs_l = f"{st}[{ctx.lt[i]}, {ctx.lt[j]}]", rf"\mathrm{{scaled}}_{{{ctx.ll[i]},{ctx.ll[j]}}}"
        if ctx.multi:
            lhs_l = rf"\mathrm{{scaled}}^{{({head})}}_{{{ctx.ll[i]},{ctx.ll[j]}}}"
        t = f"{lhs_t} = {F.paren_text(F.text(s))}/{_den_text(F.text(factor))}"
        l = rf"{lhs_l} = \frac{{{F.latex(s)}}}{{{F.latex(factor)}}}"
        if F.is_rational(v) and F.exact_at(v, ctx.dec):
            t += f" = {F.num_text(v)}"
            l += f" = {F.num_latex(v)}"
        else:
            t += f" = {F.text(v)} ≈ {scaled.dec(i, j, ctx.dec)}"
            l += rf" = {F.latex(v)} \approx {scaled.dec_plain(i, j, ctx.dec)}"
        lines.append(Line(t, l))
    if causal:
        notes.append("Masked entries stay −∞: −∞ divided by a positive number is still −∞.")
    return Step("scaled", title, why, lines, result="scaled", head=head, notes=notes)


# ---------------------------------------------------------------- softmax

def _softmax_rows(ctx: _Ctx, scaled: Mat):
    """Exact weights by row: for each row (js, m, shifts d_j, numerators e^{d_j}, denominator D)."""
    n = scaled.shape[0]
    rows = []
    for i in range(n):
        js = [j for j in range(n) if not scaled.is_masked(i, j)]
        m_idx = min(js, key=lambda j: scaled.num[i][j])
        m = scaled.exact[i][m_idx]
        shifts = {j: scaled.exact[i][j] - m for j in js}
        numer = {j: sp.exp(shifts[j]) for j in js}
        D = sp.Add(*numer.values())
        nshift = {j: scaled.num[i][j] - scaled.num[i][m_idx] for j in js}
        nnum = {j: mpmath.exp(nshift[j]) for j in js}
        nD = mpmath.fsum(nnum.values())
        rows.append((js, m, numer, D, nnum, nD))
    return rows


def _weights_step(ctx: _Ctx, head, scaled: Mat, weights: Mat, rows, places: int, memo: dict | None = None) -> Step:
    """The softmax step with *places* places for intermediates. *memo* (one dict for the rebuilds of one
    step, see :func:`_audited`) keeps what does not depend on the places: e^x exactly and to 50 digits,
    and the exact texts."""
    n = scaled.shape[0]
    if memo is None:
        memo = {}
    at, al = ctx.sym("A", head)
    sct, _ = ctx.sym("scaled", head)
    lines: list[Line] = []
    for i in range(n):
        js, m, numer, D, nnum, nD = rows[i]
        g = f"row {ctx.p.tokens[i]}"
        # 1. the row of scaled scores
        ex_t, ex_l, dv_t, dv_l = [], [], [], []
        all_exact = True
        for j in range(n):
            v = scaled.exact[i][j]
            if v == NEG_INF:
                ex_t.append("−∞"), ex_l.append(r"-\infty"), dv_t.append("−∞"), dv_l.append(r"-\infty")
                continue
            vt = memo.get(("v", i, j))
            if vt is None:
                vt = memo[("v", i, j)] = (F.text(v), F.latex(v))
            ex_t.append(vt[0])
            ex_l.append(vt[1])
            dv_t.append(scaled.dec(i, j, places))
            dv_l.append(scaled.dec_plain(i, j, places))
            all_exact &= F.exact_at(v, places)
        t = f"{sct}[{ctx.lt[i]}, ·] = {_vec_text(ex_t)}"
        l = rf"\mathrm{{scaled}}_{{{ctx.ll[i]},\cdot}} = {_vec_latex(ex_l)}"
        if not all_exact:
            t += f" ≈ {_vec_text(dv_t)}"
            l += rf" \approx {_vec_latex(dv_l)}"
        lines.append(Line(t, l, g))
        # 2. every e^x with its value
        e_dec = {}
        for j in range(n):
            v = scaled.exact[i][j]
            if v == NEG_INF:
                lines.append(Line("e^(−∞) = 0", r"e^{-\infty} = 0", g))
                continue
            got = memo.get(("e", i, j))
            if got is None:
                ev = sp.exp(v)
                nv = mpmath.exp(scaled.num[i][j])
                # small e^x keep as many significant digits as large ones (e^(−6) ≈ 0.0024788, not 0.0025)
                extra = max(0, -int(mpmath.floor(mpmath.log10(nv))) - 1) if nv < 1 else 0
                got = memo[("e", i, j)] = (ev, nv, extra, _exp_text(v), _exp_latex(v))
            ev, nv, extra, v_exp_t, v_exp_l = got
            e_dec[j] = F.round_decimal(ev, nv, places + extra)
            exact_e = F.is_rational(ev)
            rel_t, rel_l = ("=", "=") if exact_e and F.exact_at(ev, places) else ("≈", r"\approx")
            lines.append(Line(f"{v_exp_t} {rel_t} {_dtext(e_dec[j])}", rf"{v_exp_l} {rel_l} {_dlatex(e_dec[j])}", g))
        # 3. the row total, from the values as shown
        total = sum(e_dec.values(), Decimal(0))
        all_e_exact = all(F.is_rational(memo[("e", i, j)][0]) for j in js)
        lhs = "sum"
        sum_terms_t = " + ".join(_dtext(e_dec[j]) for j in js)
        sum_terms_l = " + ".join(_dlatex(e_dec[j]) for j in js)
        rel0 = "=" if all_e_exact else "≈"
        if len(js) > 1:
            lines.append(Line(f"{lhs} {rel0} {sum_terms_t} = {_dtext(total)}",
                              rf"\text{{sum}} {rel0 if rel0 == '=' else chr(92) + 'approx'} {sum_terms_l} = {_dlatex(total)}", g))
        # 4. each weight: exact, simplified, from the shown values, decimal
        den_full = memo.get(("den", i))
        if den_full is None:
            den_full = memo[("den", i)] = sp.Add(*[memo[("e", i, j)][0] for j in js])
        for j in range(n):
            lhs_t = f"{at}[{ctx.lt[i]}, {ctx.lt[j]}]"
            lhs_l = rf"{al}_{{{ctx.ll[i]},{ctx.ll[j]}}}"
            if j not in js:
                lines.append(Line(f"{lhs_t} = e^(−∞)/{_dtext(total)} = 0", rf"{lhs_l} = \frac{{e^{{-\infty}}}}{{{_dlatex(total)}}} = 0", g))
                continue
            w = weights.exact[i][j]
            parts_t = [lhs_t]
            parts_l = [lhs_l]
            if len(js) > 1:
                full = memo.get(("full", i, j))
                if full is None:
                    full = memo[("full", i, j)] = (
                        f"{_exp_text(scaled.exact[i][j])}/{F.paren_text(F.text(den_full))}",
                        rf"\frac{{{_exp_latex(scaled.exact[i][j])}}}{{{F.latex(den_full)}}}")
                full_t, full_l = full
                parts_t.append(full_t)
                parts_l.append(full_l)
            if len(js) == 1:
                parts_t.append(f"{_exp_text(scaled.exact[i][j])}/{_exp_text(scaled.exact[i][j])}")
                parts_l.append(rf"\frac{{{_exp_latex(scaled.exact[i][j])}}}{{{_exp_latex(scaled.exact[i][j])}}}")
            wt = F.text(w)
            if wt != parts_t[-1]:
                parts_t.append(wt)
                parts_l.append(F.latex(w))
            text = " = ".join(parts_t)
            latex = " = ".join(parts_l)
            if len(js) > 1:
                text += f" ≈ {_dtext(e_dec[j])}/{_dtext(total)}"
                latex += rf" \approx \frac{{{_dlatex(e_dec[j])}}}{{{_dlatex(total)}}}"
            wd = weights.dec(i, j, places)
            if not (F.is_rational(w) and F.exact_at(w, 0) and len(js) == 1):
                r = F.rel(w, places)
                text += f" {r} {wd}"
                latex += f" {F.rel_latex(w, places)} {weights.dec_plain(i, j, places)}"
            lines.append(Line(text, latex, g))
        # 5. the row sums to 1
        if len(js) > 1:
            num_sum = " + ".join(F.text(numer[j]) for j in js)
            num_sum_l = " + ".join(F.latex(numer[j]) for j in js)
            dt = F.text(D)
            lines.append(Line(f"sum of row {ctx.lt[i]} = ({num_sum})/{_den_text(dt)} = 1",
                              rf"\textstyle\sum_j {al}_{{{ctx.ll[i]},j}} = \frac{{{num_sum_l}}}{{{F.latex(D)}}} = 1", g))
    why = ("Softmax each row: take e^x of every scaled score (always positive), then divide by the row's total, so the "
           "weights are positive and add up to 1. Top and bottom of each fraction are divided by e to the row's smallest "
           "score, which gives the simpler exact form. Intermediate values are shown to "
           f"{places} places so each line can be checked by hand.")
    notes = []
    if ctx.p.mask == "causal":
        notes.append("Masked scores are −∞ and e^(−∞) = 0, so a token gives exactly 0 weight to every later token.")
    return Step("weights", f"Attention weights: {at} = softmax of each row", why, lines, result="weights",
                head=head, notes=notes, precision=places)


# ---------------------------------------------------------------- Z = A·V

def _z_step(ctx: _Ctx, head, weights: Mat, V: Mat, Z: Mat, places: int) -> Step:
    n, dv = V.shape
    zt, zl = ctx.sym("z", head)
    Zt, _ = ctx.sym("Z", head)
    At, _ = ctx.sym("A", head)
    Vt, _ = ctx.sym("V", head)
    lines = []
    for i in range(n):
        js = [j for j in range(n) if weights.exact[i][j] != 0]
        row_rational = all(F.is_rational(weights.exact[i][j]) for j in js)
        vrows_t = {j: _vec_text([F.num_text(x) for x in V.exact[j]]) for j in js}
        vrows_l = {j: _vec_latex([F.num_latex(x) for x in V.exact[j]]) for j in js}
        if row_rational:
            wts = {j: F._frac(weights.exact[i][j]) for j in js}
            w_t = {j: F.paren_text(F.num_text(wts[j])) for j in js}
            w_l = {j: F.num_latex(wts[j]) for j in js}
            rel1 = "="
        else:
            wd = {j: F.round_decimal(weights.exact[i][j], weights.num[i][j], places) for j in js}
            wts = {j: Fraction(wd[j]) for j in js}
            w_t = {j: _dtext(wd[j]) for j in js}
            w_l = {j: _dlatex(wd[j]) for j in js}
            rel1 = "≈"
        mid = [sum((wts[j] * F._frac(V.exact[j][c]) for j in js), Fraction(0)) for c in range(dv)]
        mid_dec = [_frac_dec(x) for x in mid]
        if all(d is not None for d in mid_dec):
            mid_t = _vec_text([_dtext(d) for d in mid_dec])
            mid_l = _vec_latex([_dlatex(d) for d in mid_dec])
            rel2 = "="
        elif row_rational:
            mid_t = _vec_text([F.num_text(x) for x in mid])
            mid_l = _vec_latex([F.num_latex(x) for x in mid])
            rel2 = "="
        else:
            md = [F.round_decimal(x, None, places) for x in mid]
            mid_t = _vec_text([_dtext(d) for d in md])
            mid_l = _vec_latex([_dlatex(d) for d in md])
            rel2 = "≈"
        fin_t = _vec_text([Z.dec(i, c, ctx.dec) for c in range(dv)])
        fin_l = _vec_latex([Z.dec_plain(i, c, ctx.dec) for c in range(dv)])
        fin_exact = row_rational and all(F.exact_at(Z.exact[i][c], ctx.dec) for c in range(dv))
        terms_t = " + ".join(f"{w_t[j]}·{vrows_t[j]}" for j in js)
        terms_l = " + ".join(rf"{w_l[j]} \cdot {vrows_l[j]}" for j in js)
        named_t = " + ".join(f"{At}[{ctx.lt[i]}, {ctx.lt[j]}]·v_{ctx.lt[j]}" for j in js)
        lines.append(Line(f"{zt}_{ctx.lt[i]} = {named_t}", rf"{zl}_{{{ctx.ll[i]}}} = " + " + ".join(
            rf"A_{{{ctx.ll[i]},{ctx.ll[j]}}} v_{{{ctx.ll[j]}}}" for j in js), f"row {ctx.p.tokens[i]}"))
        text = f"{zt}_{ctx.lt[i]} {rel1} {terms_t} {rel2} {mid_t}"
        latex = rf"{zl}_{{{ctx.ll[i]}}} {'=' if rel1 == '=' else chr(92) + 'approx'} {terms_l} {'=' if rel2 == '=' else chr(92) + 'approx'} {mid_l}"
        if fin_t != mid_t:
            text += f" {'=' if fin_exact else '≈'} {fin_t}"
            latex += f" {'=' if fin_exact else chr(92) + 'approx'} {fin_l}"
        lines.append(Line(text, latex, f"row {ctx.p.tokens[i]}"))
    why = (f"Blend the values: {Zt} = {At}·{Vt}. Each token's new vector is a weighted blend of every token's value row, "
           f"using its own row of {At} as the recipe. Weights are rounded to {places} places here, and the sum of the "
           "rounded terms is shown exactly, so each line checks by hand.")
    notes = []
    if ctx.p.mask == "causal":
        notes.append("Masked tokens have weight 0 and drop out of the blend.")
    m = weights.shape[0]
    return Step("Z", f"Output: {Zt} = {At}·{Vt}", why, lines, result="Z", head=head, notes=notes, precision=places,
                shape=f"({m}×{m})·({m}×{dv}) → {m}×{dv}",
                shape_latex=rf"({m} \times {m}) \cdot ({m} \times {dv}) \to {m} \times {dv}")


# ---------------------------------------------------------------- heads: concat and W_O

def _concat_step(ctx: _Ctx, heads: list[HeadResult], concat: Mat) -> Step:
    h, n, dv = len(heads), concat.shape[0], heads[0].Z.shape[1]
    zs = ", ".join(ctx.sym("Z", k.index)[0] for k in heads)
    why = (f"Put the {h} heads' outputs side by side: row i of the result is token i's row of every head, one after "
           f"another, so each token now carries what every head found.")
    return Step("concat", f"Concatenate the heads: concat({zs})", why, [], result="concat",
                shape=f"{h} × ({n}×{dv}) → {n}×{h * dv}",
                shape_latex=rf"{h} \times ({n} \times {dv}) \to {n} \times {h * dv}")


def _output_step(ctx: _Ctx, concat: Mat, Wo, out: Mat, places: int) -> Step:
    n, hd = concat.shape
    m = len(Wo[0])
    lines = []
    for i, j in _entries(ctx.checks, n, m, (0, 0)):
        if concat.is_rational():
            a = [F._frac(x) for x in concat.exact[i]]
            a_t = [F.num_text(x) for x in a]
            rel_a = "="
        else:
            a_d = [F.round_decimal(x, v, places) for x, v in zip(concat.exact[i], concat.num[i])]
            a = [Fraction(d) for d in a_d]
            a_t = [_dtext(d) for d in a_d]
            rel_a = "≈"
        col = [Wo[t][j] for t in range(hd)]
        s = sum((x * y for x, y in zip(a, col)), Fraction(0))
        sd = _frac_dec(s)
        fin = out.dec(i, j, ctx.dec)
        fin_exact = F.is_rational(out.exact[i][j]) and F.exact_at(out.exact[i][j], ctx.dec)
        if sd is not None:
            rt, rl = _dtext(sd), _dlatex(sd)
            rel = "="
        else:
            d = F.round_decimal(s, None, places)
            rt, rl, rel = _dtext(d), _dlatex(d), "≈"
        line = _dot_line(f"Z[{ctx.lt[i]}, {j + 1}]", rf"Z_{{{ctx.ll[i]},{j + 1}}}",
                         f"concat_{ctx.lt[i]}·W_O[:, {j + 1}]", rf"\mathrm{{concat}}_{{{ctx.ll[i]}}} \cdot W_O[:,{j + 1}]",
                         a, col, s, rel=rel, result_t=rt, result_l=rl, a_text=a_t)
        if rel_a == "≈":
            # the row of concat is rounded: say so on the first relation
            line.text = line.text.replace(" = [", " ≈ [", 1)
            line.latex = line.latex.replace(r" = \left[", r" \approx \left[", 1)
        if not (fin_exact and sd is not None and Fraction(sd) == F._frac(out.exact[i][j])):
            line.text += f" {'=' if fin_exact else '≈'} {fin}"
            line.latex += f" {'=' if fin_exact else chr(92) + 'approx'} {out.dec_plain(i, j, ctx.dec)}"
        lines.append(line)
    why = ("Project the concatenated heads with W_O: Z = concat·W_O. Each entry is the dot product of a token's "
           f"concatenated row with a column of W_O (concat values rounded to {places} places where they are not exact).")
    return Step("output", "Output projection: Z = concat·W_O", why, lines, result="Z", precision=places,
                shape=f"({n}×{hd})·({hd}×{m}) → {n}×{m}",
                shape_latex=rf"({n} \times {hd}) \cdot ({hd} \times {m}) \to {n} \times {m}")


# ---------------------------------------------------------------- driver

def _audited(build, start: int, limit: int, what: str) -> Step:
    """Build a step with *start* places for intermediates, adding places until every line holds.

    First pass: lines must hold strictly (a hand check lands on the value shown). If no number of places
    achieves that (rows that are nearly saturated), accept the fewest places whose lines hold with the
    rounding of the shown numbers carried through. Never return a step whose lines fail."""
    built = {}
    for places in range(start, limit + 1):
        step = built[places] = build(places)
        if lines_hold([ln.text for ln in step.lines], strict=True):
            return step
    last = None
    for places in range(start, limit + 1):
        step = built[places]
        problems = audit_lines([ln.text for ln in step.lines])
        if not problems:
            return step
        last = problems
    raise AuditFailure(f"{what}: shown arithmetic does not hold even with {limit} places: {last[0]}")


def solve(problem: Problem, checks: str = "one") -> Solution:
    """Solve *problem* exactly and build the worked steps. ``checks`` is "one", "row" or "all"."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    ctx = _Ctx(problem, checks)
    n = problem.n
    toks = list(problem.tokens)
    X = [list(r) for r in problem.X]
    if problem.scale == "sqrt":
        factor = sp.sqrt(problem.d_k)
        nfactor = mpmath.sqrt(problem.d_k)
    elif problem.scale == "none":
        factor, nfactor = sp.Integer(1), mpmath.mpf(1)
    else:
        factor, nfactor = _rat(problem.scale), _mp(problem.scale)
    inv = 1 / factor
    causal = problem.mask == "causal"
    start = problem.decimals + 2
    limit = problem.decimals + 2 + MAX_EXTRA_PLACES

    steps: list[Step] = []
    heads: list[HeadResult] = []
    for hi, head in enumerate(problem.heads, 1):
        hid = hi if problem.multihead else None
        Wq, Wk, Wv = [list(r) for r in head.W_Q], [list(r) for r in head.W_K], [list(r) for r in head.W_V]
        Qf, Kf, Vf = _matmul_frac(X, Wq), _matmul_frac(X, Wk), _matmul_frac(X, Wv)
        Sf = [[sum((Qf[i][t] * Kf[j][t] for t in range(len(Qf[0]))), Fraction(0)) for j in range(n)] for i in range(n)]
        cols_k = [str(c + 1) for c in range(len(Qf[0]))]
        cols_v = [str(c + 1) for c in range(len(Vf[0]))]
        Q = _mat_from_frac("Q", ctx.sym("Q", hid), Qf, toks, cols_k)
        K = _mat_from_frac("K", ctx.sym("K", hid), Kf, toks, cols_k)
        V = _mat_from_frac("V", ctx.sym("V", hid), Vf, toks, cols_v)
        masked = frozenset((i, j) for i in range(n) for j in range(n) if causal and j > i)
        raw = _mat_from_frac("scores", ctx.sym("scores", hid), Sf, toks, toks)
        scores = Mat("scores", raw.symbol, raw.symbol_latex,
                     [[NEG_INF if (i, j) in masked else raw.exact[i][j] for j in range(n)] for i in range(n)],
                     [[mpmath.mpf("-inf") if (i, j) in masked else raw.num[i][j] for j in range(n)] for i in range(n)],
                     toks, toks, masked)
        sc_exact = [[NEG_INF if (i, j) in masked else scores.exact[i][j] * inv for j in range(n)] for i in range(n)]
        sc_num = [[mpmath.mpf("-inf") if (i, j) in masked else scores.num[i][j] / nfactor for j in range(n)] for i in range(n)]
        scaled = Mat("scaled", *ctx.sym("scaled", hid), sc_exact, sc_num, toks, toks, masked)
        big = max((abs(x) for r in sc_num for x in r if x != mpmath.mpf("-inf")), default=0)
        if big > MAX_SCALED:
            raise ProblemError("scores", f"a scaled score of about {float(big):.0f} is too large for a hand exercise "
                               f"(e^x would have {int(big / 2.302585) + 1} digits; at most {MAX_SCALED} in size): "
                               "use smaller entries or a larger scale", problem.source)
        rows = _softmax_rows(ctx, scaled)
        w_exact, w_num = [], []
        for i, (js, m, numer, D, nnum, nD) in enumerate(rows):
            w_exact.append([numer[j] / D if j in numer else sp.Integer(0) for j in range(n)])
            w_num.append([nnum[j] / nD if j in nnum else mpmath.mpf(0) for j in range(n)])
        weights = Mat("weights", *ctx.sym("A", hid), w_exact, w_num, toks, toks, masked)
        z_exact, z_num = [], []
        for i, (js, m, numer, D, nnum, nD) in enumerate(rows):
            ze, zn = [], []
            for c in range(len(Vf[0])):
                ze.append(sp.Add(*[numer[j] * V.exact[j][c] for j in js]) / D)
                zn.append(mpmath.fsum(nnum[j] * V.num[j][c] for j in js) / nD)
            z_exact.append(ze)
            z_num.append(zn)
        Z = Mat("Z", *ctx.sym("Z", hid), z_exact, z_num, toks, cols_v)
        hr = HeadResult(hi, Q, K, V, scores, scaled, weights, Z, raw_scores=raw if causal else None)
        heads.append(hr)

        steps.append(_proj_step(ctx, "Q", hid, X, Wq, Qf, Q))
        steps.append(_proj_step(ctx, "K", hid, X, Wk, Kf, K))
        steps.append(_proj_step(ctx, "V", hid, X, Wv, Vf, V))
        steps.append(_scores_step(ctx, hid, Qf, Kf, Sf, scores))
        steps.append(_scale_step(ctx, hid, scores, scaled, factor))
        memo: dict = {}
        steps.append(_audited(lambda pl: _weights_step(ctx, hid, scaled, weights, rows, pl, memo), start, limit, "softmax"))
        steps.append(_audited(lambda pl: _z_step(ctx, hid, weights, V, Z, pl), start, limit, "Z = A·V"))
        for s in steps[-7:]:
            s.result = (f"head{hi}." + s.result) if problem.multihead and s.result else s.result

    concat = None
    output = heads[0].Z
    if problem.multihead:
        dv = problem.d_v
        c_exact = [[h.Z.exact[i][c] for h in heads for c in range(dv)] for i in range(n)]
        c_num = [[h.Z.num[i][c] for h in heads for c in range(dv)] for i in range(n)]
        ccols = [f"{h.index}.{c + 1}" for h in heads for c in range(dv)]
        concat = Mat("concat", "concat", r"\mathrm{concat}", c_exact, c_num, toks, ccols)
        Wo = [list(r) for r in problem.W_O]
        m = len(Wo[0])
        o_exact = [[sp.Add(*[c_exact[i][k] * _rat(Wo[k][j]) for k in range(len(Wo))]) for j in range(m)] for i in range(n)]
        o_num = [[mpmath.fsum(c_num[i][k] * _mp(Wo[k][j]) for k in range(len(Wo))) for j in range(m)] for i in range(n)]
        output = Mat("Z", "Z", "Z", o_exact, o_num, toks, [str(j + 1) for j in range(m)])
        steps.append(_concat_step(ctx, heads, concat))
        steps.append(_audited(lambda pl: _output_step(ctx, concat, Wo, output, pl), start, limit, "output projection"))

    sol = Solution(problem, heads, concat, output, steps, checks, factor)
    return sol
