"""Solving a problem exactly and building the worked steps (Part 9 "Check one" style).

Every displayed line is built once, as a tree (:mod:`worked.eq`); printers turn it into each
format and the auditor (:mod:`worked.audit`) evaluates it. Products of input matrices are exact
Fractions; scaling, softmax and Z are sympy values (√2, e^{√2}, 1/3) with 50-digit decimal values beside.

The precision policy (see the README):

* intermediate values are carried at ``P = decimals + 2`` places, answers at ``decimals``;
* a value is always shown as its true value rounded (never as a sum of rounded numbers), so the
  same value reads the same in every step that uses it;
* ``=`` stands only where the two sides are equal as shown; ``≈`` where rounding enters, and the
  auditor checks it against the rounding that the shown numbers carry.

With ``display = "decimal"`` (Part 10 style, the default when the inputs are decimals) the lines
show decimals instead of exact forms such as ``e^(√2)/(2 + e^(√2))``; the values underneath stay exact.
"""
from __future__ import annotations

import re
from decimal import Decimal
from fractions import Fraction

import sympy as sp

from . import eq
from . import numfmt as F
from .numfmt import N
from .audit import audit_lines
from .errors import ProblemError
from .model import HeadResult, Line, Mat, Solution, Step
from .problem import Problem

CHECKS = ("one", "row", "all")
DISPLAYS = ("exact", "decimal")
NEG_INF = sp.S.NegativeInfinity
MAX_SCALED = 300   # largest |scaled score|: e^300 already has 131 digits
EQ, APPROX = eq.EQ, eq.APPROX


class AuditFailure(RuntimeError):
    """Internal error: a step could not be shown with lines that hold. Never a user error."""


def tok_label(tok: str, i: int) -> str:
    """How a token names a row in a formula: the token when it is a plain word, else its number."""
    return tok if re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,19}", tok) else str(i + 1)


class _Ctx:
    def __init__(self, problem: Problem, checks: str, display: str):
        self.p = problem
        self.checks = checks
        self.lab = [tok_label(t, i) for i, t in enumerate(problem.tokens)]
        self.multi = problem.multihead
        self.dec = problem.decimals
        self.P = problem.decimals + 2      # places for intermediate values
        self.decimal = display == "decimal"

    def sym(self, base: str, head: int | None, **kw) -> eq.Sym:
        """A per-head symbol: Q, or Q⁽¹⁾ with several heads; ``scaled``/``scores`` upright."""
        return eq.Sym(base, head=head if self.multi else None, upright=len(base.partition("_")[0]) > 1, **kw)


def _rel(a_exact: bool) -> str:
    return EQ if a_exact else APPROX


def _entries(checks: str, rows: int, cols: int, first: tuple[int, int], allowed=None):
    if checks == "one":
        out = [first]
    elif checks == "row":
        out = [(first[0], j) for j in range(cols)]
    else:
        out = [(i, j) for i in range(rows) for j in range(cols)]
    return [e for e in out if allowed is None or allowed(*e)]


def _matmul(A, B):
    n, k, m = len(A), len(B), len(B[0])
    return [[sum((A[i][t] * B[t][j] for t in range(k)), Fraction(0)) for j in range(m)] for i in range(n)]


def _input_mat(name, sym, A, rows, cols):
    return Mat(name, sym, [[sp.Rational(x.numerator, x.denominator) for x in r] for r in A],
               [[F.mp(x) for x in r] for r in A], rows, cols)


def _shown_input(ctx: "_Ctx", x: Fraction):
    """An input (or an exact product of inputs) in a worked line: exact, or in decimal display rounded
    to the carried places when it has more. Returns (node, exact)."""
    if not ctx.decimal or F.terminating(x, ctx.P):
        return eq.num(x), True
    return eq.dec(F.round_decimal(x, None, ctx.P)), False


def _has_dec(node) -> bool:
    """True when a tree holds a rounded decimal (so it only approximates what it stands for)."""
    if type(node) is eq.Dec:
        return True
    if isinstance(node, (eq.Num, eq.Sym, eq.Inf, eq.Dims)):
        return False
    return any(_has_dec(x) for x in node.children())


def _shapes(*dims) -> eq.Rel:
    *ins, out = dims
    left = ins[0] if len(ins) == 1 else eq.Mul(tuple(ins))
    return eq.Rel((left, out), (eq.TO,))


# ---------------------------------------------------------------- the product steps (Q, K, V, scores, output)

def _dot_line(ctx: _Ctx, lhs, mid, a, b, result) -> Line:
    """``lhs = mid = [a]·[b] = a1·b1 + … = result``: *a*, *b* Fractions (inputs) or already-shown nodes;
    *result* a Fraction or (exact value, 50-digit value), shown at the carried places."""
    a_nodes, a_exact = _vec_nodes(ctx, a)
    b_nodes, b_exact = _vec_nodes(ctx, b)
    exact_in = a_exact and b_exact
    items = [lhs, mid, eq.Dot(eq.Vec(tuple(a_nodes)), eq.Vec(tuple(b_nodes))),
             eq.Add(tuple(eq.Mul((x, y)) for x, y in zip(a_nodes, b_nodes)))]
    ops = [EQ, _rel(exact_in), EQ]
    value, num = result if isinstance(result, tuple) else (result, None)
    if exact_in and F.is_rational(value):
        res, res_exact = _shown_input(ctx, F.frac(value))
        ops.append(EQ if res_exact else APPROX)
        items.append(res)
    else:
        res = _carried(value, num, ctx.P)
        items.append(res)
        ops.append(APPROX if not F.exact_at(value, ctx.P) or not exact_in else EQ)
    return Line(eq.Rel(tuple(items), tuple(ops)))


def _vec_nodes(ctx: _Ctx, xs):
    out, exact = [], True
    for x in xs:
        if isinstance(x, eq.Node):
            out.append(x)
            exact &= type(x) in (eq.Num,)
        elif ctx.decimal:
            n, ok = _shown_input(ctx, x)
            out.append(n)
            exact &= ok
        else:
            out.append(eq.num(x))
    return out, exact


def _value_of(node):
    """The exact value a Num or Dec node shows (None for anything else)."""
    return node.value if type(node) in (eq.Num, eq.Dec) else None


def _carried(value, num, places):
    """A computed value as carried: exact when it is exact at *places*, else rounded."""
    if F.exact_at(value, places):
        return eq.num(F.frac(value))
    return eq.dec(F.round_decimal(value, num, places))


def _proj_step(ctx: _Ctx, which: str, head, A, W, R) -> Step:
    """Q, K or V = X·W: shapes, and 'Check one' expansions."""
    n, dm, dk = len(A), len(W), len(W[0])
    s = ctx.sym(which, head)
    w = ctx.sym(f"W_{which}", head)
    lines = []
    for i, j in _entries(ctx.checks, n, dk, (0, 0)):
        col = [W[t][j] for t in range(dm)]
        lines.append(_dot_line(ctx, eq.Entry(s, ctx.lab[i], str(j + 1)),
                               eq.Dot(eq.Sym("x", sub=ctx.lab[i]), eq.Col(w, str(j + 1))),
                               A[i], col, R[i][j]))
    st, wt = _t(s), _t(w)
    what = {"Q": ("queries", "what each token is looking for"),
            "K": ("keys", "what each token offers to be matched against"),
            "V": ("values", "what each token passes on when another token attends to it")}[which]
    why = (f"Multiply X by {wt}: row i of {st} is token i's row of X times {wt}, the {what[0]} ({what[1]}). "
           f"Each entry is the dot product of a row of X with a column of {wt}.")
    title = f"{what[0].capitalize()}: {st} = X·{wt}"
    return Step(which, title, why, lines, result=which, head=head,
                shape_eq=_shapes(eq.Dims(n, dm), eq.Dims(dm, dk), eq.Dims(n, dk)))


def _t(node) -> str:
    from . import printers

    return printers.text(node)


def _scores_step(ctx: _Ctx, head, Q: Mat, K: Mat, Qf, Kf, Sf, scores: Mat) -> Step:
    n, dk = len(Qf), len(Qf[0])
    s = ctx.sym("scores", head)
    causal = ctx.p.mask == "causal"
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else n), key=lambda j: (Sf[r0][j], -j))
    lines = []
    for i, j in _entries(ctx.checks, n, n, (r0, best)):
        lines.append(_dot_line(ctx, eq.Entry(s, ctx.lab[i], ctx.lab[j]),
                               eq.Dot(ctx.sym("q", head, sub=ctx.lab[i]), ctx.sym("k", head, sub=ctx.lab[j])),
                               Qf[i] if not ctx.decimal else [Q.node(i, t, ctx.P) for t in range(dk)],
                               Kf[j] if not ctx.decimal else [K.node(j, t, ctx.P) for t in range(dk)], Sf[i][j]))
    st, qt, kt = _t(s), _t(ctx.sym("Q", head)), _t(ctx.sym("K", head))
    why = (f"Match every query with every key: {st} = {qt}·{kt}ᵀ. Row i, column j is the dot product of "
           f"token i's query with token j's key; the bigger it is, the more token i will attend to token j.")
    notes = []
    if ctx.checks == "one" and n > 1:
        notes.append(f"The entry expanded is the largest score in the row of “{ctx.p.tokens[r0]}”: "
                     f"“{ctx.p.tokens[r0]}” will attend most to “{ctx.p.tokens[best]}”.")
    if causal:
        notes.append("Causal mask: a token may attend only to itself and to earlier tokens, so every score "
                     "above the diagonal (the key of a later token) is set to −∞. After the softmax its weight is exactly 0.")
    return Step("scores", f"Scores: {st} = {qt}·{kt}ᵀ" + (" with the causal mask" if causal else ""), why, lines,
                result="scores", head=head, notes=notes,
                shape_eq=_shapes(eq.Dims(n, dk), eq.Dims(dk, n), eq.Dims(n, n)))


# ---------------------------------------------------------------- scaling

def _scale_step(ctx: _Ctx, head, scores: Mat, scaled: Mat, factor) -> Step:
    p, n, P = ctx.p, scores.shape[0], ctx.P
    s = ctx.sym("scaled", head)
    sc = ctx.sym("scores", head)
    st, sct = _t(s), _t(sc)
    lines, notes = [], []
    if p.scale == "none":
        why = 'The problem sets scale = "none": the scores go into the softmax as they are, so the scaled scores equal the scores.'
        return Step("scaled", f"Scaling: none ({st} = {sct})", why, [], result="scaled", head=head)
    fnode = F.node(factor)
    if p.scale == "sqrt":
        dk = p.d_k
        sqrt_dk = eq.Sqrt(eq.num(dk))
        items, ops = [eq.Sqrt(eq.Sym("d_k")), sqrt_dk], [EQ]
        if fnode != sqrt_dk:
            items.append(fnode)
            ops.append(EQ)
        if not factor.is_Integer:
            items.append(eq.dec(F.round_decimal(factor, N.sqrt(Decimal(dk)), P)))
            ops.append(APPROX)
        lines.append(Line(eq.Rel(tuple(items), tuple(ops))))
        why = (f"Divide every score by √d_k = √{dk}: with long vectors, dot products grow large and the softmax would give "
               f"nearly all the weight to one token. Scaling keeps the weights calm; the original Transformer does exactly this.")
        title = f"Scaling: {st} = {sct}/√d_k"
    else:
        why = f"The problem sets scale = {F.num_text(p.scale)}: divide every score by {_t(fnode)}."
        title = f"Scaling: {st} = {sct}/{_t(fnode)}"
    causal = p.mask == "causal"
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else n), key=lambda j: (float(scores.num[r0][j]), -j))
    for i, j in _entries(ctx.checks, n, n, (r0, best), allowed=lambda i, j: not scaled.is_masked(i, j)):
        v = scaled.exact[i][j]
        lhs = eq.Entry(s, ctx.lab[i], ctx.lab[j])
        carried = scores.node(i, j, P) if ctx.decimal else eq.num(F.frac(scores.exact[i][j]))
        items, ops = [lhs, eq.Frac(carried, fnode)], [_rel(type(carried) is eq.Num)]
        if F.exact_at(v, P) and type(carried) is eq.Num:
            items.append(eq.num(F.frac(v)))
            ops.append(EQ)
        else:
            if not ctx.decimal:
                items.append(F.node(v))
                ops.append(EQ)
            items.append(scaled.node(i, j, P))
            ops.append(APPROX)
        lines.append(Line(eq.Rel(tuple(items), tuple(ops))))
    if causal:
        notes.append("Masked entries stay −∞: −∞ divided by a positive number is still −∞.")
    return Step("scaled", title, why, lines, result="scaled", head=head, notes=notes, precision=P)


# ---------------------------------------------------------------- softmax

def _weights_step(ctx: _Ctx, head, scaled: Mat, weights: Mat, rows) -> Step:
    n, P = scaled.shape[0], ctx.P
    a = ctx.sym("A", head)
    sc = ctx.sym("scaled", head)
    lines: list[Line] = []
    shifted_rows: list[str] = []
    for i in range(n):
        js, numer, D = rows[i]
        g = f"row {ctx.p.tokens[i]}"
        # 1. the row of scaled scores, as carried
        ex = [eq.neg_inf() if scaled.is_neg_inf(i, j) else F.node(scaled.exact[i][j]) for j in range(n)]
        shown = [scaled.node(i, j, P) for j in range(n)]
        items, ops = [eq.Entry(sc, ctx.lab[i], eq.ALL)], []
        if not ctx.decimal:
            items.append(eq.Vec(tuple(ex)))
            ops.append(EQ)
        if ex != shown or ctx.decimal:
            items.append(eq.Vec(tuple(shown)))
            ops.append(EQ if ex == shown else APPROX)
        lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 2. every e^x with its value
        #    (from the row's smallest score m when e^x itself would be too small or too large to carry at
        #    P places: e^(x − m) gives the same weights)
        e_shown = {}
        lo = min(scaled.num[i][j] for j in js)
        hi = max(scaled.num[i][j] for j in js)
        shift = lo < -2.3 or hi > 13.8          # e^x < 0.1 or e^x > 10^6
        m_idx = min(js, key=lambda j: scaled.num[i][j])
        if shift:
            shifted_rows.append(ctx.p.tokens[i])
        for j in range(n):
            if j not in js:
                lines.append(Line(eq.Rel((eq.Exp(eq.neg_inf()), eq.num(0)), (EQ,)), g))
                continue
            x = shown[j] if ctx.decimal else ex[j]
            d_exact = scaled.exact[i][j] - (scaled.exact[i][m_idx] if shift else 0)
            d_num = N.sub(scaled.num[i][j], scaled.num[i][m_idx]) if shift else scaled.num[i][j]
            ev = sp.exp(d_exact)
            e_shown[j] = _carried(ev, N.exp(d_num), P)
            items, ops = [], []
            if shift:
                xm = shown[m_idx] if ctx.decimal else ex[m_idx]
                items.append(eq.Exp(eq.Add((x, eq.Neg(xm)))))
                if ctx.decimal:   # the difference of two shown numbers, exactly
                    diff = Fraction(shown[j].value) - Fraction(xm.value)
                    dn = eq.dec(F.round_decimal(diff, None, P)) if eq.Dec in (type(shown[j]), type(xm)) else eq.num(diff)
                else:
                    dn = F.node(d_exact)
                ops.append(EQ)
                x = dn
            items.append(eq.Exp(x))
            exact_e = type(x) is eq.Num and F.exact_at(ev, P)
            items.append(e_shown[j])
            ops.append(_rel(exact_e))
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 3. the row total, from the values as shown
        total_nodes = tuple(e_shown[j] for j in js)
        total = sum((Fraction(x.value) for x in total_nodes), Fraction(0))
        rounded = sum(type(x) is eq.Dec for x in total_nodes)
        total_node = eq.num(total) if not rounded else eq.dec(F.round_decimal(total, None, P), ulps=rounded)
        if len(js) > 1:
            all_exact = all(F.is_rational(sp.exp(scaled.exact[i][j])) for j in js)
            lines.append(Line(eq.Rel((eq.Sym("sum", upright=True), eq.Add(total_nodes), total_node),
                                     (_rel(all_exact), EQ)), g))
        # 4. each weight: exact, simplified, from the shown values, decimal
        den_full = F.node(sp.Add(*[sp.exp(scaled.exact[i][j]) for j in js]))   # like terms collected: 2e^(√2)
        for j in range(n):
            lhs = eq.Entry(a, ctx.lab[i], ctx.lab[j])
            if j not in js:
                lines.append(Line(eq.Rel((lhs, eq.Frac(eq.Exp(eq.neg_inf()), total_node), eq.num(0)), (EQ, EQ)), g))
                continue
            w = weights.exact[i][j]
            items, ops = [lhs], []
            if not ctx.decimal:
                full = eq.Frac(eq.Exp(ex[j]), den_full if len(js) > 1 else eq.Exp(ex[j]))
                items.append(full)
                ops.append(EQ)
                simple = F.node(w)
                if simple != full:
                    items.append(simple)
                    ops.append(EQ)
            if len(js) > 1:
                items.append(eq.Frac(e_shown[j], total_node))
                ops.append(_rel(not _has_dec(items[-1])))
            if len(js) > 1 or ctx.decimal:
                wn = weights.node(i, j, P)
                if wn != items[-1]:
                    exact_before = len(items) == 1 or not _has_dec(items[-1])
                    items.append(wn)
                    ops.append(_rel(type(wn) is eq.Num and exact_before))
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 5. the row sums to 1
        if len(js) > 1:
            rs = eq.Sum(eq.Entry(a, ctx.lab[i], "j"), "j")
            if ctx.decimal:
                ws = tuple(weights.node(i, j, P) for j in js)
                r = _rel(not any(_has_dec(x) for x in ws))
                lines.append(Line(eq.Rel((rs, eq.Add(ws), eq.num(1)), (r, r)), g))
            else:
                num_sum = eq.Add(tuple(F.node(numer[j]) for j in js))
                lines.append(Line(eq.Rel((rs, eq.Frac(num_sum, F.node(D)), eq.num(1)), (EQ, EQ)), g))
    if ctx.decimal:
        why = ("Softmax each row: take e^x of every scaled score (always positive), then divide by the row's total, so the "
               f"weights are positive and add up to 1. Values are carried to {P} places, so each line can be checked by hand.")
    else:
        why = ("Softmax each row: take e^x of every scaled score (always positive), then divide by the row's total, so the "
               "weights are positive and add up to 1. Top and bottom of each fraction are divided by e to the row's smallest "
               f"score, which gives the simpler exact form. Values are carried to {P} places, so each line can be checked by hand.")
    notes = []
    if shifted_rows:
        notes.append("In the row" + ("s " if len(shifted_rows) > 1 else " ") + ", ".join(f"“{t}”" for t in shifted_rows)
                     + ", e^x is taken of each score minus the row's smallest score m: e^(x − m) = e^x/e^m, so top and "
                     "bottom of every weight are divided by the same e^m and the weights do not change, while the "
                     "numbers stay easy to carry.")
    if ctx.p.mask == "causal":
        notes.append("Masked scores are −∞ and e^(−∞) = 0, so a token gives exactly 0 weight to every later token.")
    return Step("weights", f"Attention weights: {_t(a)} = softmax of each row", why, lines, result="weights",
                head=head, notes=notes, precision=P)


# ---------------------------------------------------------------- Z = A·V

def _z_step(ctx: _Ctx, head, weights: Mat, V: Mat, Z: Mat) -> Step:
    n, dv = V.shape
    P = ctx.P
    z, a, v = ctx.sym("z", head), ctx.sym("A", head), ctx.sym("v", head)
    Zs, As, Vs = ctx.sym("Z", head), ctx.sym("A", head), ctx.sym("V", head)
    lines = []
    if ctx.decimal:
        # Part 10 style: one entry at a time, a row of A times a column of V
        for i, c in _entries(ctx.checks, n, dv, (n - 1 if n > 1 else 0, 0)):
            js = [j for j in range(n) if weights.exact[i][j] != 0]
            a_nodes = [weights.node(i, j, P) for j in js]
            v_nodes = [V.node(j, c, P) for j in js]
            items = [eq.Entry(Zs, ctx.lab[i], str(c + 1)),
                     eq.Dot(eq.Entry(As, ctx.lab[i], eq.ALL), eq.Col(Vs, str(c + 1))),
                     eq.Dot(eq.Vec(tuple(a_nodes)), eq.Vec(tuple(v_nodes))),
                     eq.Add(tuple(eq.Mul((x, y)) for x, y in zip(a_nodes, v_nodes))),
                     Z.node(i, c, P)]
            ops = [EQ, APPROX, EQ, APPROX]
            fin = Z.fixed(i, c, ctx.dec)
            if fin.value != _value_of(items[-1]):
                items.append(fin)
                ops.append(APPROX)
            lines.append(Line(eq.Rel(tuple(items), tuple(ops))))
    else:
        for i in range(n):
            g = f"row {ctx.p.tokens[i]}"
            js = [j for j in range(n) if weights.exact[i][j] != 0]
            row_rational = all(F.is_rational(weights.exact[i][j]) for j in js)
            wn = {j: (eq.num(F.frac(weights.exact[i][j])) if row_rational else weights.node(i, j, P)) for j in js}
            vrow = {j: eq.Vec(tuple(eq.num(F.frac(x)) for x in V.exact[j])) for j in js}
            named = eq.Add(tuple(eq.Mul((eq.Entry(a, ctx.lab[i], ctx.lab[j]), eq.Sym("v", sub=ctx.lab[j], head=v.head)))
                                 for j in js))
            zi = eq.Sym("z", sub=ctx.lab[i], head=z.head)
            lines.append(Line(eq.Rel((zi, named), (EQ,)), g))
            terms = eq.Add(tuple(eq.Mul((wn[j], vrow[j])) for j in js))
            if row_rational and all(F.is_rational(Z.exact[i][c]) for c in range(dv)):
                mid = eq.Vec(tuple(eq.num(F.frac(Z.exact[i][c])) for c in range(dv)))
                mid_rel = EQ
            else:
                mid = eq.Vec(tuple(Z.node(i, c, P) for c in range(dv)))
                mid_rel = APPROX
            items, ops = [zi, terms, mid], [_rel(row_rational), mid_rel]
            fin = eq.Vec(tuple(Z.fixed(i, c, ctx.dec) for c in range(dv)))
            if [x.value for x in fin.items] != [_value_of(x) for x in mid.items] or _has_dec(mid) and ctx.P != ctx.dec:
                items.append(fin)
                ops.append(_rel(all(F.exact_at(Z.exact[i][c], ctx.dec) for c in range(dv)) and mid_rel == EQ))
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
    zt, at, vt = _t(Zs), _t(As), _t(Vs)
    why = (f"Blend the values: {zt} = {at}·{vt}. Each token's new vector is a weighted blend of every token's value row, "
           f"using its own row of {at} as the recipe. Weights and values are carried to {P} places.")
    notes = []
    if ctx.p.mask == "causal":
        notes.append("Masked tokens have weight 0 and drop out of the blend.")
    m = weights.shape[0]
    return Step("Z", f"Output: {zt} = {at}·{vt}", why, lines, result="Z", head=head, notes=notes, precision=P,
                shape_eq=_shapes(eq.Dims(m, m), eq.Dims(m, dv), eq.Dims(m, dv)))


# ---------------------------------------------------------------- heads: concat and W_O

def _concat_step(ctx: _Ctx, heads: list[HeadResult], concat: Mat) -> Step:
    h, n, dv = len(heads), concat.shape[0], heads[0].Z.shape[1]
    zs = ", ".join(_t(ctx.sym("Z", k.index)) for k in heads)
    why = (f"Put the {h} heads' outputs side by side: row i of the result is token i's row of every head, one after "
           f"another, so each token now carries what every head found.")
    return Step("concat", f"Concatenate the heads: concat({zs})", why, [], result="concat",
                shape_eq=eq.Rel((eq.Mul((eq.num(h), eq.Dims(n, dv))), eq.Dims(n, h * dv)), (eq.TO,)))


def _output_step(ctx: _Ctx, concat: Mat, Wo, out: Mat) -> Step:
    n, hd = concat.shape
    m = len(Wo[0])
    P = ctx.P
    lines = []
    for i, j in _entries(ctx.checks, n, m, (0, 0)):
        a = [concat.node(i, k, P) for k in range(hd)]
        col = [Wo[t][j] for t in range(hd)]
        line = _dot_line(ctx, eq.Entry(eq.Sym("Z"), ctx.lab[i], str(j + 1)),
                         eq.Dot(eq.Sym("concat", sub=ctx.lab[i], upright=True), eq.Col(eq.Sym("W_O"), str(j + 1))),
                         a, col, (out.exact[i][j], out.num[i][j]))
        fin = out.fixed(i, j, ctx.dec)
        if fin.value != _value_of(line.eq.items[-1]):
            line = Line(eq.Rel(line.eq.items + (fin,), line.eq.ops + (_rel(F.exact_at(out.exact[i][j], ctx.dec)
                                                                           and line.eq.ops[-1] == EQ),)))
        lines.append(line)
    why = ("Project the concatenated heads with W_O: Z = concat·W_O. Each entry is the dot product of a token's "
           f"concatenated row with a column of W_O (concat values carried to {P} places where they are not exact).")
    return Step("output", "Output projection: Z = concat·W_O", why, lines, result="Z", precision=P,
                shape_eq=_shapes(eq.Dims(n, hd), eq.Dims(hd, m), eq.Dims(n, m)))


# ---------------------------------------------------------------- driver

def _checked(step: Step, what: str) -> Step:
    problems = audit_lines(step.lines)
    if problems:
        raise AuditFailure(f"{what}: shown arithmetic does not hold: {problems[0]}")
    return step


def solve(problem: Problem, checks: str = "one", display: str | None = None) -> Solution:
    """Solve *problem* exactly and build the worked steps. ``checks`` is "one", "row" or "all";
    ``display`` "exact" or "decimal" (default: the problem's own, see :attr:`Problem.display`)."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    display = display or getattr(problem, "display", "exact")
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    ctx = _Ctx(problem, checks, display)
    n = problem.n
    toks = list(problem.tokens)
    X = [list(r) for r in problem.X]
    if problem.scale == "sqrt":
        factor, nfactor = sp.sqrt(problem.d_k), N.sqrt(Decimal(problem.d_k))
    elif problem.scale == "none":
        factor, nfactor = sp.Integer(1), Decimal(1)
    else:
        factor, nfactor = sp.Rational(problem.scale.numerator, problem.scale.denominator), F.mp(problem.scale)
    inv = 1 / factor
    causal = problem.mask == "causal"
    ninf = F.NEG_INF

    steps: list[Step] = []
    heads: list[HeadResult] = []
    for hi, head in enumerate(problem.heads, 1):
        hid = hi if problem.multihead else None
        Wq, Wk, Wv = [list(r) for r in head.W_Q], [list(r) for r in head.W_K], [list(r) for r in head.W_V]
        Qf, Kf, Vf = _matmul(X, Wq), _matmul(X, Wk), _matmul(X, Wv)
        Sf = [[sum((Qf[i][t] * Kf[j][t] for t in range(len(Qf[0]))), Fraction(0)) for j in range(n)] for i in range(n)]
        cols_k = [str(c + 1) for c in range(len(Qf[0]))]
        cols_v = [str(c + 1) for c in range(len(Vf[0]))]
        Q = _input_mat("Q", ctx.sym("Q", hid), Qf, toks, cols_k)
        K = _input_mat("K", ctx.sym("K", hid), Kf, toks, cols_k)
        V = _input_mat("V", ctx.sym("V", hid), Vf, toks, cols_v)
        masked = frozenset((i, j) for i in range(n) for j in range(n) if causal and j > i)
        raw = _input_mat("scores", ctx.sym("scores", hid), Sf, toks, toks)
        scores = Mat("scores", raw.sym,
                     [[NEG_INF if (i, j) in masked else raw.exact[i][j] for j in range(n)] for i in range(n)],
                     [[ninf if (i, j) in masked else raw.num[i][j] for j in range(n)] for i in range(n)],
                     toks, toks, masked)
        sc_exact = [[NEG_INF if (i, j) in masked else scores.exact[i][j] * inv for j in range(n)] for i in range(n)]
        sc_num = [[ninf if (i, j) in masked else N.div(scores.num[i][j], nfactor) for j in range(n)] for i in range(n)]
        scaled = Mat("scaled", ctx.sym("scaled", hid), sc_exact, sc_num, toks, toks, masked)
        big = max((N.abs(x) for r in sc_num for x in r if x != ninf), default=0)
        if big > MAX_SCALED:
            raise ProblemError("scores", f"a scaled score of about {float(big):.0f} is too large for a hand exercise "
                               f"(e^x would have {int(float(big) / 2.302585) + 1} digits; at most {MAX_SCALED} in size): "
                               "use smaller entries or a larger scale", problem.source)
        rows, w_exact, w_num, z_exact, z_num = [], [], [], [], []
        for i in range(n):
            js = [j for j in range(n) if (i, j) not in masked]
            m_idx = min(js, key=lambda j: sc_num[i][j])
            numer = {j: sp.exp(sc_exact[i][j] - sc_exact[i][m_idx]) for j in js}
            D = sp.Add(*numer.values())
            nnum = {j: N.exp(N.sub(sc_num[i][j], sc_num[i][m_idx])) for j in js}
            nD = N.sum(nnum.values())
            rows.append((js, numer, D))
            w_exact.append([numer[j] / D if j in numer else sp.Integer(0) for j in range(n)])
            w_num.append([N.div(nnum[j], nD) if j in nnum else Decimal(0) for j in range(n)])
            z_exact.append([sp.Add(*[numer[j] * V.exact[j][c] for j in js]) / D for c in range(len(Vf[0]))])
            z_num.append([N.div(N.sum(N.mul(nnum[j], V.num[j][c]) for j in js), nD) for c in range(len(Vf[0]))])
        weights = Mat("weights", ctx.sym("A", hid), w_exact, w_num, toks, toks, masked)
        Z = Mat("Z", ctx.sym("Z", hid), z_exact, z_num, toks, cols_v)
        heads.append(HeadResult(hi, Q, K, V, scores, scaled, weights, Z, raw_scores=raw if causal else None))

        head_steps = [
            _proj_step(ctx, "Q", hid, X, Wq, Qf),
            _proj_step(ctx, "K", hid, X, Wk, Kf),
            _proj_step(ctx, "V", hid, X, Wv, Vf),
            _scores_step(ctx, hid, Q, K, Qf, Kf, Sf, scores),
            _scale_step(ctx, hid, scores, scaled, factor),
            _weights_step(ctx, hid, scaled, weights, rows),
            _z_step(ctx, hid, weights, V, Z),
        ]
        for s in head_steps:
            _checked(s, s.title)
            if problem.multihead and s.result:
                s.result = f"head{hi}." + s.result
        steps += head_steps

    concat = None
    output = heads[0].Z
    if problem.multihead:
        dv = problem.d_v
        c_exact = [[h.Z.exact[i][c] for h in heads for c in range(dv)] for i in range(n)]
        c_num = [[h.Z.num[i][c] for h in heads for c in range(dv)] for i in range(n)]
        ccols = [f"{h.index}.{c + 1}" for h in heads for c in range(dv)]
        concat = Mat("concat", eq.Sym("concat", upright=True), c_exact, c_num, toks, ccols)
        Wo = [list(r) for r in problem.W_O]
        m = len(Wo[0])
        o_exact = [[sp.Add(*[c_exact[i][k] * sp.Rational(Wo[k][j].numerator, Wo[k][j].denominator)
                             for k in range(len(Wo))]) for j in range(m)] for i in range(n)]
        o_num = [[N.sum(N.mul(c_num[i][k], F.mp(Wo[k][j])) for k in range(len(Wo))) for j in range(m)] for i in range(n)]
        output = Mat("Z", eq.Sym("Z"), o_exact, o_num, toks, [str(j + 1) for j in range(m)])
        steps.append(_concat_step(ctx, heads, concat))
        steps.append(_checked(_output_step(ctx, concat, Wo, output), "output projection"))

    return Solution(problem, heads, concat, output, steps, checks, factor, display)
