"""Solving a problem exactly and building the worked steps (Part 9 "Check one" style).

The values come from the one forward pass, :func:`worked.attention.forward`: its Exact backend gives the
exact ones (products of the inputs as Fractions; scaling, softmax and Z as sympy values: √2, e^{√2}, 1/3;
each softmax row's e^x, shifted and not, and their sums), its point Interval pass their 50-digit decimals.
This module computes no matrix itself: it builds each displayed line once, as a tree (:mod:`worked.eq`);
printers turn it into each format and the auditor (:mod:`worked.audit`) evaluates it.

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

from fractions import Fraction

import sympy as sp

from . import eq
from . import numfmt as F
from .numfmt import N
from .attention import INEXACT, Approx, Exact, Hand, HeadPass, Interval, forward
from .audit import failure as audit_failure
from .errors import ProblemError
from .model import HeadResult, Line, Mat, Solution, Step
from .problem import LIMITS, Chain, Problem

CHECKS = ("one", "row", "all")
DISPLAYS = ("exact", "decimal")
MAX_SCALED = LIMITS["scaled"]   # largest |scaled score|: e^300 already has 131 digits
EQ, APPROX = eq.EQ, eq.APPROX


class AuditFailure(RuntimeError):
    """Internal error: a step could not be shown with lines that hold. Never a user error."""


class _Ctx:
    def __init__(self, problem: Problem, checks: str, display: str, carry: "_Carry"):
        self.p = problem
        self.checks = checks
        self.lab = [eq.tok_label(t, i) for i, t in enumerate(problem.tokens)]
        # the rows the keys and values come from (the encoder side's tokens in cross-attention)
        self.lab_kv = [eq.tok_label(t, i) for i, t in enumerate(problem.tokens_kv)] if problem.cross else self.lab
        self.toks_kv = list(problem.tokens_kv)
        self.multi = problem.multihead
        self.dec = problem.decimals
        self.carry = carry
        self.decimal = display == "decimal"

    @property
    def P(self) -> int:
        """Places for intermediate values (decimals + 2, or + 3: see :func:`hand_pass`)."""
        return self.carry.places

    def side(self, which: str):
        """(the input's symbol, the labels of its rows, the words of its side) of the product *which* (Q, K, V)."""
        if self.p.cross and which in ("K", "V"):
            return _XE, self.lab_kv, "encoder token"
        return _X, self.lab, "decoder token" if self.p.cross else "token"

    def sym(self, base: str, head: int | None, **kw) -> eq.Sym:
        """A per-head symbol: Q, or Q⁽¹⁾ with several heads; ``scaled``/``scores`` upright."""
        return eq.matrix_sym(base, head if self.multi else None, **kw)


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

def _dot_line(ctx: _Ctx, lhs, mid, a, b, R: Mat, i: int, j: int, answer: bool = False) -> Line:
    """``lhs = mid = [a]·[b] = a1·b1 + … = result``: *a*, *b* Fractions (inputs) or already-shown nodes; the
    result is R[i, j] as carried: the dot product of the numbers shown, rounded (:class:`attention.Hand`).
    With *answer*, the answer at the problem's places follows (when it reads differently)."""
    a_nodes, a_exact = _vec_nodes(ctx, a)
    b_nodes, b_exact = _vec_nodes(ctx, b)
    items = [lhs, mid, eq.Dot(eq.Vec(tuple(a_nodes)), eq.Vec(tuple(b_nodes))),
             eq.Add(tuple(eq.Mul((x, y)) for x, y in zip(a_nodes, b_nodes))), R.carried(i, j)]
    shown = sum((_value_of(x) * _value_of(y) for x, y in zip(a_nodes, b_nodes)), Fraction(0))
    ops = [EQ, _rel(a_exact and b_exact), EQ, _rel(shown == R.hand[i][j])]
    if answer:
        _answer(ctx, items, ops, R, i, j)
    return Line(eq.Rel(tuple(items), tuple(ops)))


def _row_sum_line(label, shown: list, whole: int, P: int, group: str) -> Line:
    """``Σ_j A[i, j] ≈ 0.2410 + … = 1`` (or ``= 1.0001 ≈ 1``): the sum of a row as shown, and the value the true
    row sums to exactly (1 for the weights, 0 for the softmax backward)."""
    row = eq.Add(tuple(shown))
    total = eq.rational_value(row)
    items, ops = [label, row], [_rel(not _has_dec(row))]
    if total == whole:
        items.append(eq.num(whole))
        ops.append(EQ)
    else:
        items += [F.hand_node(Approx(total), P), eq.num(whole)]
        ops += [EQ, APPROX]
    return Line(eq.Rel(tuple(items), tuple(ops)), group)


def _answer(ctx: _Ctx, items: list, ops: list, R: Mat, i: int, j: int) -> None:
    """Append R[i, j]'s answer at the problem's places (the true value rounded) to a line that ends with its
    carried value, when it reads differently; not when the carried value rounds to another answer (that
    entry's note then says why: see :func:`_answer_notes`)."""
    fin = R.fixed(i, j, ctx.dec)
    last = _value_of(items[-1])
    if last is not None and Fraction(fin.value) == last:
        return
    if not _rounds_to_answer(R, i, j, ctx.dec):
        return
    items.append(fin)
    ops.append(_rel(ops[-1] == EQ and F.exact_at(R.exact[i][j], ctx.dec) and R.is_carried_exact(i, j)))


def _rounds_to_answer(R: Mat, i: int, j: int, dec: int) -> bool:
    """Does the carried value of R[i, j], rounded to *dec* places, give the answer (the true value rounded)?"""
    h = R.hand[i][j]
    if h is None or not isinstance(h, Fraction) or R.is_carried_exact(i, j):
        return True
    return F.round_decimal(Fraction(h), None, dec) == R.rounded(i, j, dec)


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
    """The exact value a Num or Dec node shows, as a Fraction (None for anything else)."""
    t = type(node)
    if t is eq.Num:
        return node.value
    if t is eq.Dec:
        return Fraction(node.value)
    return None


def _proj_step(ctx: _Ctx, which: str, head, A, W, R: Mat) -> Step:
    """Q, K or V = X·W: shapes, and 'Check one' expansions."""
    n, dm, dk = len(A), len(W), len(W[0])
    s = ctx.sym(which, head)
    w = ctx.sym(f"W_{which}", head)
    Xs, lab, who = ctx.side(which)
    lines = []
    for i, j in _entries(ctx.checks, n, dk, (0, 0)):
        col = [W[t][j] for t in range(dm)]
        lines.append(_dot_line(ctx, eq.Entry(s, lab[i], str(j + 1)),
                               eq.Dot(eq.Sym("x", sub=lab[i]), eq.Col(w, str(j + 1))),
                               A[i], col, R, i, j))
    what = _PROJ[which]
    why = _p("Multiply ", Xs, " by ", w, ": row ", _I, " of ", s, f" is {who} ", _I, "'s row of ", Xs, " times ", w,
             f", the {what[0]} ({what[1]}). Each entry is the dot product of a row of ", Xs, " with a column of ", w, ".")
    if ctx.p.cross:
        why = eq.prose(why, " Cross-attention: the queries come from the decoder side ", _X, ", the keys and values from "
                       "the encoder side ", _XE, "." if which == "Q" else
                       f", so {s.name} has one row per encoder token.")
    return Step(which, _title(ctx, which, head), why, lines, result=which, head=head,
                shape_eq=_shapes(eq.Dims(n, dm), eq.Dims(dm, dk), eq.Dims(n, dk)))


_PROJ = {"Q": ("queries", "what each token is looking for"),
         "K": ("keys", "what each token offers to be matched against"),
         "V": ("values", "what each token passes on when another token attends to it")}


def _title(ctx: _Ctx, sid: str, head):
    """The title of forward step *sid* (of *head*): known before any line is built, so a reader of the
    headings alone (the checker) never builds the lines."""
    sym = lambda base: ctx.sym(base, head)  # noqa: E731
    if sid in _PROJ:
        return _p(f"{_PROJ[sid][0].capitalize()}: ", _is(sym(sid), eq.Mul((ctx.side(sid)[0], sym(f"W_{sid}")))))
    if sid == "scores":
        qkt = _is(sym("scores"), eq.Mul((sym("Q"), _tr(sym("K")))))
        return _p("Scores: ", qkt, " with the causal mask" if ctx.p.mask == "causal" else "")
    if sid == "scaled":
        s, sc, scale = sym("scaled"), sym("scores"), ctx.p.scale
        if scale == "none":
            return _p("Scaling: none (", _is(s, sc), ")")
        return _p("Scaling: ", _is(s, eq.Frac(sc, eq.Sqrt(eq.Sym("d_k")) if scale == "sqrt" else F.node(ctx.factor))))
    if sid == "weights":
        return _p("Attention weights: ", sym("A"), " = softmax of each row")
    if sid == "Z":
        return _p("Output: ", _is(sym("Z"), eq.Mul((sym("A"), sym("V")))))
    if sid == "concat":
        return _p("Concatenate the heads: ", eq.Call("concat", tuple(ctx.sym("Z", k) for k in range(1, len(ctx.p.heads) + 1))))
    if sid == "output":
        return _p("Output projection: ", _is(eq.Sym("Z"), eq.Mul((eq.Sym("concat", upright=True), eq.Sym("W_O")))))
    raise KeyError(sid)


# prose with its math as trees (titles, explanations, notes): see worked.eq.Prose
_p = eq.prose
_X, _I, _J, _h = eq.Sym("X"), eq.Sym("i"), eq.Sym("j"), eq.Sym("h")
_XE = eq.Sym("X_enc")


def _is(*items, op: str = EQ) -> eq.Rel:
    """``a = b (= c …)``, a formula inside prose."""
    return eq.Rel(tuple(items), (op,) * (len(items) - 1))


def _tr(x) -> eq.Pow:
    """xᵀ"""
    return eq.Pow(x, eq.Sym("T"))


def _scores_step(ctx: _Ctx, head, Q: Mat, K: Mat, raw: Mat, scores: Mat) -> Step:
    n, dk = Q.shape
    m = K.shape[0]
    Sf = raw.num
    s = ctx.sym("scores", head)
    causal = ctx.p.mask == "causal"
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else m), key=lambda j: (Sf[r0][j], -j))
    lines = []
    for i, j in _entries(ctx.checks, n, m, (r0, best)):
        lines.append(_dot_line(ctx, eq.Entry(s, ctx.lab[i], ctx.lab_kv[j]),
                               eq.Dot(ctx.sym("q", head, sub=ctx.lab[i]), ctx.sym("k", head, sub=ctx.lab_kv[j])),
                               [Q.carried(i, t) for t in range(dk)], [K.carried(j, t) for t in range(dk)], raw, i, j))
    qkt = _is(s, eq.Mul((ctx.sym("Q", head), _tr(ctx.sym("K", head)))))
    if ctx.p.cross:
        why = _p("Match every decoder query with every encoder key: ", qkt, ". Row ", _I, ", column ", _J, " is the dot "
                 "product of decoder token ", _I, "'s query with encoder token ", _J, "'s key; the bigger it is, the more "
                 "decoder token ", _I, " will attend to encoder token ", _J, f". The scores are {n} × {m}: one row per "
                 "decoder token, one column per encoder token.")
    else:
        why = _p("Match every query with every key: ", qkt, ". Row ", _I, ", column ", _J, " is the dot product of token ",
                 _I, "'s query with token ", _J, "'s key; the bigger it is, the more token ", _I, " will attend to token ", _J, ".")
    notes = []
    if ctx.checks == "one" and m > 1:
        notes.append(f"The entry expanded is the largest score in the row of “{ctx.p.tokens[r0]}”: "
                     f"“{ctx.p.tokens[r0]}” will attend most to “{ctx.toks_kv[best]}”.")
    if causal:
        notes.append("Causal mask: a token may attend only to itself and to earlier tokens, so every score "
                     "above the diagonal (the key of a later token) is set to −∞. After the softmax its weight is exactly 0.")
    return Step("scores", _title(ctx, "scores", head), why, lines,
                result="scores", head=head, notes=notes,
                shape_eq=_shapes(eq.Dims(n, dk), eq.Dims(dk, m), eq.Dims(n, m)))


# ---------------------------------------------------------------- scaling

def _scale_step(ctx: _Ctx, head, scores: Mat, scaled: Mat, factor, factor_num) -> Step:
    p, n, P = ctx.p, scores.shape[0], ctx.P
    s = ctx.sym("scaled", head)
    sc = ctx.sym("scores", head)
    lines, notes = [], []
    if p.scale == "none":
        why = 'The problem sets scale = "none": the scores go into the softmax as they are, so the scaled scores equal the scores.'
        return Step("scaled", _title(ctx, "scaled", head), why, [], result="scaled", head=head)
    fnode = F.node(factor)
    if p.scale == "sqrt":
        dk = p.d_k
        sqrt_dk = eq.Sqrt(eq.num(dk))
        items, ops = [eq.Sqrt(eq.Sym("d_k")), sqrt_dk], [EQ]
        if fnode != sqrt_dk:
            items.append(fnode)
            ops.append(EQ)
        if not factor.is_Integer:
            items.append(eq.dec(F.round_decimal(factor, factor_num, P)))
            ops.append(APPROX)
        lines.append(Line(eq.Rel(tuple(items), tuple(ops))))
        why = _p("Divide every score by ", _is(*items[:2 if fnode == sqrt_dk else 3]),
                 ": with long vectors, dot products grow large and the softmax would give nearly all the weight to one "
                 "token. Scaling keeps the weights calm; the original Transformer does exactly this.")
    else:
        why = _p("The problem sets ", _is(eq.Sym("scale", upright=True), F.node(p.scale)), ": divide every score by ", fnode, ".")
    causal = p.mask == "causal"
    r0 = n - 1 if causal else 0
    m = scores.shape[1]
    best = max(range(r0 + 1 if causal else m), key=lambda j: (float(scores.num[r0][j]), -j))
    for i, j in _entries(ctx.checks, n, m, (r0, best), allowed=lambda i, j: not scaled.is_masked(i, j)):
        v = scaled.exact[i][j]
        lhs = eq.Entry(s, ctx.lab[i], ctx.lab_kv[j])
        carried = scores.carried(i, j)
        items, ops = [lhs, eq.Frac(carried, fnode)], [_rel(scores.is_carried_exact(i, j))]
        h = scaled.hand[i][j]
        if isinstance(h, Fraction):          # a number: exact (2/2 = 1), or the quotient of the shown numbers, rounded
            items.append(scaled.carried(i, j))
            ops.append(_rel(type(h) is Fraction))
        else:                                # exact display: the exact form (√2) is carried, its decimal shown
            items.append(F.node(v))
            ops.append(EQ)
            items.append(scaled.node(i, j, P))
            ops.append(APPROX)
        lines.append(Line(eq.Rel(tuple(items), tuple(ops))))
    if causal:
        notes.append("Masked entries stay −∞: −∞ divided by a positive number is still −∞.")
    return Step("scaled", _title(ctx, "scaled", head), why, lines, result="scaled", head=head, notes=notes, precision=P)


# ---------------------------------------------------------------- softmax

def _weights_step(ctx: _Ctx, head, scaled: Mat, weights: Mat, rows, hand_rows) -> Step:
    """*rows*: the Exact pass's softmax of each row (:class:`worked.attention.ExactRow`, for the exact forms);
    *hand_rows*: the same rows as a hand works them (:class:`worked.attention.HandRow`: the exponents, each
    e^x as carried and their total), which every decimal in the lines comes from."""
    (n, m), P = scaled.shape, ctx.P
    a = ctx.sym("A", head)
    sc = ctx.sym("scaled", head)
    lines: list[Line] = []
    shifted_rows: list[str] = []
    for i in range(n):
        r, hr = rows[i], hand_rows[i]
        js = hr.js
        g = f"row {ctx.p.tokens[i]}"
        # 1. the row of scaled scores, as carried
        xs = [scaled.carried(i, j) for j in range(m)]      # the exponents as the lines show them
        items, ops = [eq.Entry(sc, ctx.lab[i], eq.ALL), eq.Vec(tuple(xs))], [EQ]
        if not ctx.decimal:
            dec_row = [xs[j] if scaled.is_neg_inf(i, j) else scaled.node(i, j, P) for j in range(m)]
            if dec_row != xs:
                items.append(eq.Vec(tuple(dec_row)))
                ops.append(APPROX)
        else:
            ops = [_rel(all(scaled.is_carried_exact(i, j) for j in js))]
        lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 2. every e^x with its value (of x − m, m the row's smallest score, when e^x itself would be too small
        #    or too large to carry at P places: e^(x − m) gives the same weights)
        m_idx = hr.low
        if hr.shift:
            shifted_rows.append(ctx.p.tokens[i])
        e_shown = {}
        for j in range(m):
            if j not in js:
                lines.append(Line(eq.Rel((eq.Exp(eq.neg_inf()), eq.num(0)), (EQ,)), g))
                continue
            e = hr.exps[j]
            e_shown[j] = F.hand_node(e, P)
            x = xs[j]
            items, ops = [], []
            if hr.shift:
                items.append(eq.Exp(eq.Add((x, eq.Neg(xs[m_idx])))))
                d = hr.exponent[j]
                if isinstance(d, Fraction):          # the difference of two numbers shown, exactly
                    x = F.hand_node(d, P)
                elif m_idx == r.low:                 # exact display: the exact difference (√2/2)
                    x = F.node(r.shifted[j])
                else:
                    x = F.node(scaled.exact[i][j] - scaled.exact[i][m_idx])
                ops.append(EQ)
            items += [eq.Exp(x), e_shown[j]]
            ops.append(_rel(type(e) is Fraction))
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 3. the row total, the sum of the values as shown
        total_nodes = tuple(e_shown[j] for j in js)
        rounded = sum(type(x) is eq.Dec for x in total_nodes)
        total_node = F.hand_node(hr.total, P)
        if rounded:
            total_node = eq.dec(total_node.value, ulps=rounded)
        if len(js) > 1:
            lines.append(Line(eq.Rel((eq.Sym("sum", upright=True), eq.Add(total_nodes), total_node),
                                     (_rel(not rounded), EQ)), g))
        # 4. each weight: exact, simplified, the quotient of the shown values, and that quotient as carried
        den_full = None if ctx.decimal else F.node(r.total)   # like terms collected: 2e^(√2)
        for j in range(m):
            lhs = eq.Entry(a, ctx.lab[i], ctx.lab_kv[j])
            if j not in js:
                lines.append(Line(eq.Rel((lhs, eq.Frac(eq.Exp(eq.neg_inf()), total_node), eq.num(0)), (EQ, EQ)), g))
                continue
            items, ops = [lhs], []
            if not ctx.decimal:
                full = eq.Frac(eq.Exp(ex_j := F.node(scaled.exact[i][j])), den_full if len(js) > 1 else eq.Exp(ex_j))
                items.append(full)
                ops.append(EQ)
                simple = F.node(weights.exact[i][j])
                if simple != full:
                    items.append(simple)
                    ops.append(EQ)
            h = weights.hand[i][j]
            if len(js) > 1:
                quotient = Fraction(hr.exps[j]) / Fraction(hr.total)
                items.append(eq.Frac(e_shown[j], total_node))
                ops.append(_rel(not rounded))
                # the quotient as carried (exact display: a weight carried exactly, such as 1/3, shows its decimal)
                wn = eq.dec(F.round_decimal(quotient, None, P)) if type(h) is Fraction and not ctx.decimal \
                    else weights.carried(i, j)
                if wn != items[-1]:
                    items.append(wn)
                    ops.append(_rel(_value_of(wn) == quotient))
            elif ctx.decimal:
                items.append(weights.carried(i, j))
                ops.append(EQ)
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
        # 5. the row sums to 1
        if len(js) > 1:
            rs = eq.Sum(eq.Entry(a, ctx.lab[i], "j"), "j")
            if ctx.decimal:
                lines.append(_row_sum_line(rs, [weights.carried(i, j) for j in js], 1, P, g))
            else:
                num_sum = eq.Add(tuple(F.node(r.numer[j]) for j in r.js))
                lines.append(Line(eq.Rel((rs, eq.Frac(num_sum, F.node(r.D)), eq.num(1)), (EQ, EQ)), g))
    ex_, em_ = eq.Exp(eq.Sym("x")), eq.Exp(eq.Sym("m"))
    if ctx.decimal:
        why = _p("Softmax each row: take ", ex_, " of every scaled score (always positive), then divide by the row's total, "
                 f"so the weights are positive and add up to 1. Values are carried to {P} places, so each line can be checked by hand.")
    else:
        why = _p("Softmax each row: take ", ex_, " of every scaled score (always positive), then divide by the row's total, "
                 "so the weights are positive and add up to 1. Top and bottom of each fraction are divided by e to the row's "
                 f"smallest score, which gives the simpler exact form. Values are carried to {P} places, so each line can be "
                 "checked by hand.")
    notes = []
    if shifted_rows:
        notes.append(_p("In the row" + ("s " if len(shifted_rows) > 1 else " ") + ", ".join(f"“{t}”" for t in shifted_rows)
                        + ", ", ex_, " is taken of each score minus the row's smallest score ", eq.Sym("m"), ": ",
                        _is(eq.Exp(eq.Add((eq.Sym("x"), eq.Neg(eq.Sym("m"))))), eq.Frac(ex_, em_)),
                        ", so top and bottom of every weight are divided by the same ", em_,
                        " and the weights do not change, while the numbers stay easy to carry."))
    if ctx.p.mask == "causal":
        notes.append(_p("Masked scores are −∞ and ", _is(eq.Exp(eq.neg_inf()), eq.num(0)),
                        ", so a token gives exactly 0 weight to every later token."))
    return Step("weights", _title(ctx, "weights", head), why, lines, result="weights",
                head=head, notes=notes, precision=P)


# ---------------------------------------------------------------- Z = A·V

def _z_step(ctx: _Ctx, head, weights: Mat, V: Mat, Z: Mat) -> Step:
    m, dv = V.shape
    n = weights.shape[0]
    P = ctx.P
    z, a, v = ctx.sym("z", head), ctx.sym("A", head), ctx.sym("v", head)
    Zs, As, Vs = ctx.sym("Z", head), ctx.sym("A", head), ctx.sym("V", head)
    lines = []
    if ctx.decimal:
        # Part 10 style: one entry at a time, a row of A times a column of V
        for i, c in _entries(ctx.checks, n, dv, (n - 1 if n > 1 else 0, 0)):
            js = [j for j in range(m) if weights.exact[i][j] != 0]
            lines.append(_dot_line(ctx, eq.Entry(Zs, ctx.lab[i], str(c + 1)),
                                   eq.Dot(eq.Entry(As, ctx.lab[i], eq.ALL), eq.Col(Vs, str(c + 1))),
                                   [weights.carried(i, j) for j in js], [V.carried(j, c) for j in js], Z, i, c,
                                   answer=True))
    else:
        for i in range(n):
            g = f"row {ctx.p.tokens[i]}"
            js = [j for j in range(m) if weights.exact[i][j] != 0]
            wn = {j: weights.carried(i, j) for j in js}
            vrow = {j: eq.Vec(tuple(V.carried(j, c) for c in range(dv))) for j in js}
            named = eq.Add(tuple(eq.Mul((eq.Entry(a, ctx.lab[i], ctx.lab_kv[j]), eq.Sym("v", sub=ctx.lab_kv[j], head=v.head)))
                                 for j in js))
            zi = eq.Sym("z", sub=ctx.lab[i], head=z.head)
            lines.append(Line(eq.Rel((zi, named), (EQ,)), g))
            terms = eq.Add(tuple(eq.Mul((wn[j], vrow[j])) for j in js))
            exact_in = all(weights.is_carried_exact(i, j) and all(V.is_carried_exact(j, c) for c in range(dv)) for j in js)
            mid = eq.Vec(tuple(Z.carried(i, c) for c in range(dv)))
            shown = [sum((_value_of(wn[j]) * _value_of(vrow[j].items[c]) for j in js), Fraction(0)) for c in range(dv)]
            items = [zi, terms, mid]
            ops = [_rel(exact_in), _rel(all(shown[c] == Z.hand[i][c] for c in range(dv)))]
            if all(_rounds_to_answer(Z, i, c, ctx.dec) for c in range(dv)):
                fin = eq.Vec(tuple(Z.fixed(i, c, ctx.dec) for c in range(dv)))
                if [Fraction(x.value) for x in fin.items] != [_value_of(x) for x in mid.items] or \
                        _has_dec(mid) and ctx.P != ctx.dec:
                    items.append(fin)
                    ops.append(_rel(ops[-1] == EQ and all(F.exact_at(Z.exact[i][c], ctx.dec) and Z.is_carried_exact(i, c)
                                                          for c in range(dv))))
            lines.append(Line(eq.Rel(tuple(items), tuple(ops)), g))
    zav = _is(Zs, eq.Mul((As, Vs)))
    why = _p("Blend the values: ", zav, ". Each token's new vector is a weighted blend of every token's value row, "
             "using its own row of ", As, f" as the recipe. Weights and values are carried to {P} places.")
    notes = []
    if ctx.p.mask == "causal":
        notes.append("Masked tokens have weight 0 and drop out of the blend.")
    return Step("Z", _title(ctx, "Z", head), why, lines, result="Z", head=head, notes=notes, precision=P,
                shape_eq=_shapes(eq.Dims(n, m), eq.Dims(m, dv), eq.Dims(n, dv)))


# ---------------------------------------------------------------- heads: concat and W_O

def _concat_step(ctx: _Ctx, heads: list[HeadResult], concat: Mat) -> Step:
    h, n, dv = len(heads), concat.shape[0], heads[0].Z.shape[1]
    i = eq.Sym("i")
    why = _p(f"Put the {h} heads' outputs side by side: row ", i, " of the result is token ", i, "'s row of every head, "
             "one after another, so each token now carries what every head found.")
    return Step("concat", _title(ctx, "concat", None), why, [], result="concat",
                shape_eq=eq.Rel((eq.Mul((eq.num(h), eq.Dims(n, dv))), eq.Dims(n, h * dv)), (eq.TO,)))


def _output_step(ctx: _Ctx, concat: Mat, Wo, out: Mat) -> Step:
    n, hd = concat.shape
    m = len(Wo[0])
    P = ctx.P
    lines = []
    for i, j in _entries(ctx.checks, n, m, (0, 0)):
        lines.append(_dot_line(ctx, eq.Entry(eq.Sym("Z"), ctx.lab[i], str(j + 1)),
                               eq.Dot(eq.Sym("concat", sub=ctx.lab[i], upright=True), eq.Col(eq.Sym("W_O"), str(j + 1))),
                               [concat.carried(i, k) for k in range(hd)], [Wo[t][j] for t in range(hd)], out, i, j,
                               answer=True))
    wo, zcw = eq.Sym("W_O"), _is(eq.Sym("Z"), eq.Mul((eq.Sym("concat", upright=True), eq.Sym("W_O"))))
    why = _p("Project the concatenated heads with ", wo, ": ", zcw, ". Each entry is the dot product of a token's "
             "concatenated row with a column of ", wo, f" (concat values carried to {P} places where they are not exact).")
    return Step("output", _title(ctx, "output", None), why, lines, result="Z", precision=P,
                shape_eq=_shapes(eq.Dims(n, hd), eq.Dims(hd, m), eq.Dims(n, m)))


# ---------------------------------------------------------------- driver

def _checked(step: Step, what) -> Step:
    """*step*, when its lines hold; else :class:`AuditFailure` naming *what* (text, or prose such as its title)."""
    msg = audit_failure(what, step.lines)
    if msg:
        raise AuditFailure(msg)
    return step


def _mat(name, sym, exact, num, rows, cols, masked=frozenset(), hand=None, places: int = 0) -> Mat:
    """A matrix of the Exact pass (Fractions, sympy, −∞) with its 50-digit values from the Interval point pass
    (a rational's own 50-digit decimal, else the lower end of its 50-digit narrow interval) and the values a
    hand carries (:class:`worked.attention.Hand`, at *places*). A gradient entry the Exact pass keeps no closed
    form of (:data:`worked.attention.INEXACT`) is its 50-digit value, as the loss after the update is."""
    ex = [[sp.Rational(x.numerator, x.denominator) if isinstance(x, Fraction) else
           _enclosed(iv) if x is INEXACT else x for x, iv in zip(er, nr)] for er, nr in zip(exact, num)]
    nm = [[F.NEG_INF if iv is None else F.mp(x) if F.is_rational(x) else iv[0] for x, iv in zip(er, nr)]
          for er, nr in zip(ex, num)]
    return Mat(name, sym, ex, nm, rows, cols, masked, hand, places)


def _enclosed(iv) -> sp.Float:
    """A value known by its 50-digit enclosure (lo, hi) as a sympy Float: the shortest decimal in it, with
    its digits (so an entry that is 0 is 0.0, not a remainder of the 50th digit)."""
    d = F.shortest_in(*iv)
    digits = len(d.as_tuple().digits)
    return sp.Float(str(d), max(digits, 15))


def hand_pass(problem: Problem, display: str, nums=None):
    """The values a hand carries through *problem* (:class:`worked.attention.Hand`) and the places they are
    carried to: ``decimals + 2``, or one more when at those places some carried value would round to another
    answer than the true value (the solution then says so). Returns ``(places, pass, entries, first)``,
    *entries* the cells ``(key, i, j, carried value)`` whose carried value still rounds to another answer there,
    *first* those at ``decimals + 2``. *nums*: the point :class:`~worked.attention.Interval` pass (the true
    values), when already computed."""
    if nums is None:
        nums = forward(problem, Interval(problem, widen=False))
    dec = problem.decimals
    first = None
    pr = problem.precision
    for places in (pr.carried, pr.more().carried):
        run = forward(problem, Hand(problem, display, places))
        off = _off_answers(run, nums, dec)
        first = off if first is None else first
        if not off:
            break
    return places, run, off, first


def _off_answers(hand, nums, dec: int) -> list:
    """The cells ``(key, i, j, carried value)`` whose carried value, rounded to *dec* places, is another answer
    than the true value rounded."""
    off = []
    for key, grid in hand.shown.items():
        true = nums.shown.get(key)
        if true is None:
            continue
        for i, row in enumerate(grid):
            for j, h in enumerate(row):
                if type(h) is not Approx:
                    continue
                if F.round_decimal(Fraction(h), None, dec) != F.round_decimal(None, true[i][j][0], dec):
                    off.append((key, i, j, h))
    return off


def _check_size(problem: Problem, run: HeadPass, factor) -> None:
    """A ProblemError when a scaled score is too large for a hand exercise (before any e^x is evaluated)."""
    top = max((abs(x) for i, row in enumerate(run.scores) for j, x in enumerate(row) if (i, j) not in run.masked),
              default=Fraction(0))
    if top * top > MAX_SCALED**2 * F.frac(factor**2):     # |scaled| = top/factor, compared in rationals
        big = float(sp.Rational(top.numerator, top.denominator) / factor)
        raise ProblemError("scores", f"a scaled score of about {big:.0f} is too large for a hand exercise "
                           f"(e^x would have {int(big / 2.302585) + 1} digits; at most {MAX_SCALED} in size): "
                           "use smaller entries or a larger scale", problem.source)


class _Carry:
    """The values a hand carries and their places (:func:`hand_pass`), worked out when a line first needs them:
    a solution read only for its values and headings (checking answers) never makes the hand pass."""

    def __init__(self, problem: Problem, display: str, nums):
        self.problem, self.display, self.nums = problem, display, nums
        self._got = None

    def _get(self):
        if self._got is None:
            self._got = hand_pass(self.problem, self.display, self.nums)
        return self._got

    @property
    def places(self) -> int:
        return self._get()[0]

    @property
    def run(self):
        return self._get()[1]

    @property
    def first_off(self) -> list:
        return self._get()[3]

    def grid(self, key: str):
        """A function giving (the carried grid of *key*, the places), for a :class:`Mat`."""
        return lambda: (self.run.shown[key], self.places)

    def shown(self, head: int, what: str):
        """Like :meth:`grid` for a grid the pass keeps unrounded (the causal pass's raw scores): as shown."""
        def get():
            hb = Hand(self.problem, self.display, self.places)
            return [[hb.shown(x) for x in row] for row in getattr(self.run.heads[head], what)], self.places
        return get


def solve(problem: Problem, checks: str = "one", display: str | None = None) -> Solution:
    """Solve *problem* exactly and build the worked steps. ``checks`` is "one", "row" or "all";
    ``display`` "exact" or "decimal" (default: the problem's own, see :attr:`Problem.display`).

    The values come from the one forward pass (:func:`worked.attention.forward`): exact ones from its
    :class:`~worked.attention.Exact` backend, their 50-digit decimals from its point
    :class:`~worked.attention.Interval` pass; this module only builds the lines that show them. The values
    and every step's heading are there at once; a forward step's lines, and the hand pass they show
    (:func:`hand_pass`), are built when first read (:meth:`Step.shown_later`), audited then: checking
    answers reads only the values and the headings. :meth:`Solution.audit` builds and audits them all."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    if isinstance(problem, Chain):      # [[blocks]]: block by block, each solved here
        from .chain import solve_chain

        return solve_chain(problem, solve, checks=checks, display=display)
    display = display or getattr(problem, "display", "exact")
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    X = [list(r) for r in problem.X]
    X_kv = [list(r) for r in problem.X_kv]
    toks, toks_kv = list(problem.tokens), list(problem.tokens_kv)
    run = forward(problem, Exact())
    for hp in run.heads:
        _check_size(problem, hp, run.factor)
    nums = forward(problem, Interval(problem, widen=False))
    carry = _Carry(problem, display, nums)
    ctx = _Ctx(problem, checks, display, carry)
    ctx.factor = run.factor
    causal = problem.mask == "causal"

    def M(key, name, sym, exact, num, rows, cols, masked=frozenset(), hand=None):
        """The matrix *key*, its carried values from the hand pass when first needed."""
        return _mat(name, sym, exact, num, rows, cols, masked, hand or carry.grid(key))

    def made(fn, *args):
        return lambda: fn(ctx, *args)

    def later(sid, hid, make, result=None):
        return Step.shown_later(sid, _title(ctx, sid, hid), make, result=result or sid, head=hid)

    steps: list[Step] = []
    heads: list[HeadResult] = []
    for hi, (head, hp, hn) in enumerate(zip(problem.heads, run.heads, nums.heads), 1):
        hid = hi if problem.multihead else None
        pre = f"head{hi}." if problem.multihead else ""
        h0 = hi - 1
        cols_k = [str(c + 1) for c in range(len(hp.Q[0]))]
        cols_v = [str(c + 1) for c in range(len(hp.V[0]))]
        Q = M(pre + "Q", "Q", ctx.sym("Q", hid), hp.Q, hn.Q, toks, cols_k)
        K = M(pre + "K", "K", ctx.sym("K", hid), hp.K, hn.K, toks_kv, cols_k)
        V = M(pre + "V", "V", ctx.sym("V", hid), hp.V, hn.V, toks_kv, cols_v)
        s_sym = ctx.sym("scores", hid)
        raw = M(pre + "scores", "scores", s_sym, hp.raw_scores, hn.raw_scores, toks, toks_kv,
                hand=carry.shown(h0, "raw_scores"))
        scores = M(pre + "scores", "scores", s_sym, hp.scores, hn.scores, toks, toks_kv, hp.masked)
        scaled = M(pre + "scaled", "scaled", ctx.sym("scaled", hid), hp.scaled, hn.scaled, toks, toks_kv, hp.masked)
        weights = M(pre + "weights", "weights", ctx.sym("A", hid), hp.weights, hn.weights, toks, toks_kv, hp.masked)
        Z = M(pre + "Z", "Z", ctx.sym("Z", hid), hp.Z, hn.Z, toks, cols_v)
        heads.append(HeadResult(hi, Q, K, V, scores, scaled, weights, Z, raw_scores=raw if causal else None))

        steps += [
            later("Q", hid, made(_proj_step, "Q", hid, X, head.W_Q, Q), pre + "Q"),
            later("K", hid, made(_proj_step, "K", hid, X_kv, head.W_K, K), pre + "K"),
            later("V", hid, made(_proj_step, "V", hid, X_kv, head.W_V, V), pre + "V"),
            later("scores", hid, made(_scores_step, hid, Q, K, raw, scores), pre + "scores"),
            later("scaled", hid, made(_scale_step, hid, scores, scaled, run.factor, nums.factor[0]), pre + "scaled"),
            later("weights", hid, (lambda hp=hp, h0=h0, hid=hid, scaled=scaled, weights=weights:
                                   _weights_step(ctx, hid, scaled, weights, hp.softmax, carry.run.heads[h0].softmax)),
                  pre + "weights"),
            later("Z", hid, made(_z_step, hid, weights, V, Z), pre + "Z"),
        ]

    concat = None
    output = heads[0].Z
    if problem.multihead:
        ccols = [f"{h.index}.{c + 1}" for h in heads for c in range(problem.d_v)]
        concat = M("concat", "concat", eq.Sym("concat", upright=True), run.concat, nums.concat, toks, ccols)
        output = M("Z", "Z", eq.Sym("Z"), run.output, nums.output, toks, [str(j + 1) for j in range(len(problem.W_O[0]))])
        steps.append(later("concat", None, lambda: _concat_step(ctx, heads, concat)))
        steps.append(later("output", None, lambda: _output_step(ctx, concat, problem.W_O, output), "Z"))

    train = None
    if problem.train is not None:
        train, tsteps = _train_steps(ctx, problem, run, nums, carry.run, heads, output, concat)
        tsteps += _grad_check_and_update(ctx, problem, run, nums, carry.run, train, train["loss"])
        steps += tsteps

    sol = Solution(problem, heads, concat, output, steps, checks, run.factor, display, train=train)
    by_result = {s.result: s for s in steps if s.result}
    for k, st in enumerate(steps):
        st.then(lambda st: _checked(st, st.title_prose))
        st.then(lambda st, k=k: st.notes_prose.extend(_answer_notes(ctx, sol, st, k == 0, by_result)))
    return sol


def _answer_notes(ctx: _Ctx, sol: Solution, step: Step, first: bool, by_result: dict) -> list:
    """Where the carried places are not the usual ones, and why: one more place for the whole solution
    (the note of the *first* step), and, for an entry whose carried value still rounds to another answer, the
    true value that decides it (the note of the step that computes it)."""
    notes = []
    first_off = ctx.carry.first_off
    mats = sol.matrices()
    if first and first_off:
        key, i, j, h = first_off[0]
        m = mats[key]
        shown = F.round_decimal(Fraction(h), None, ctx.dec)
        notes.append(_p(
            f"Values are carried to {ctx.P} places in this solution, one more than usual: with {ctx.p.precision.carried}, the value "
            "a hand carries for ", _cell(m, i, j), " would round to ", eq.dec(shown), ", while the answer (the true "
            "value rounded) is ", m.fixed(i, j, ctx.dec), "."))
    key = step.result
    m = mats.get(key) if key else None
    if m is None or by_result.get(key) is not step or m.hand is None:
        return notes
    for i, j in ((i, j) for i in range(m.shape[0]) for j in range(m.shape[1]) if not _rounds_to_answer(m, i, j, ctx.dec)):
        notes.append(_p(
            _cell(m, i, j), ": the value carried here, ", m.carried(i, j), ", would round to ",
            eq.dec(F.round_decimal(Fraction(m.hand[i][j]), None, ctx.dec)), ", but the true value is ",
            eq.dec(m.rounded(i, j, ctx.dec + 4)), "…, so the answer is ", m.fixed(i, j, ctx.dec), "."))
    return notes


def _cell(m: Mat, i: int, j: int):
    """The tree that names one entry (``Z[cats, 1]``; a 1×1 matrix by its symbol, ``L``)."""
    return m.sym if m.shape == (1, 1) else eq.Entry(m.sym, m.rows[i], m.cols[j])


# ---------------------------------------------------------------- one training step (problems with [train])

def _pick(M: Mat, allowed=None) -> tuple[int, int]:
    """The entry a "check one" expansion shows: the largest in size (the first of equals)."""
    r, c = M.shape
    cells = [(i, j) for i in range(r) for j in range(c) if allowed is None or allowed(i, j)]
    return max(cells, key=lambda ij: (abs(M.num[ij[0]][ij[1]]), -ij[0], -ij[1])) if cells else (0, 0)


def _grad_prod_step(ctx: _Ctx, sid: str, head, title: str, why: str, R: Mat, left, right, mid, first,
                    shapes, notes=()) -> Step:
    """A product step of the backward pass: R[i, j] = left(i)·right(j), each a list of shown nodes;
    *mid*(i, j) the named form (``A[:, cats]·dZ[:, 1]``)."""
    lines = []
    r, c = R.shape
    for i, j in _entries(ctx.checks, r, c, first):
        # a row of tokens is named by its token's label; a weight matrix's rows (1, 2, …) by their number, even
        # where there are as many tokens as rows
        lab = ctx.lab if list(R.rows) == list(ctx.p.tokens) else ctx.lab_kv if list(R.rows) == ctx.toks_kv else R.rows
        lhs = eq.Entry(R.sym, lab[i], R.cols[j])
        lines.append(_dot_line(ctx, lhs, mid(i, j), left(i), right(j), R, i, j))
    return Step(sid, title, why, lines, result=sid, head=head, notes=list(notes), precision=ctx.P,
                shape_eq=_shapes(*shapes))


def _node_list(M: Mat, P: int, cells) -> list:
    """The entries as carried (:meth:`Mat.carried`)."""
    return [M.carried(i, j) for i, j in cells]


def _rel_to(node, R: Mat, i: int, j: int) -> str:
    """= when the arithmetic *node* (on shown numbers) is exactly R[i, j] as carried, else ≈."""
    return _rel(eq.rational_value(node) == R.hand[i][j])


def _train_steps(ctx: _Ctx, problem: Problem, run, nums, hand, heads: list[HeadResult], output: Mat, concat):
    """The training steps and matrices (a dict by key, as in :meth:`Solution.matrices`)."""
    P, dec = ctx.P, ctx.dec
    n, m = problem.n, problem.n_kv
    toks, toks_kv = list(problem.tokens), ctx.toks_kv
    lab, lab_kv = ctx.lab, ctx.lab_kv
    tr = problem.train
    mats: dict[str, Mat] = {}
    steps: list[Step] = []
    m_out = output.shape[1]
    ocols = [str(j + 1) for j in range(m_out)]
    T = tr.target
    num = lambda key: nums.shown[key]  # noqa: E731

    def M(key, sym, rows, cols, masked=frozenset()):
        m = _mat(key.rpartition(".")[2], sym, run.shown[key], num(key), rows, cols, masked, hand.shown[key], P)
        mats[key] = m
        return m

    Lsym, Tsym = eq.Sym("L"), eq.Sym("T")
    zsym = eq.Sym("Z")
    loss = M("loss", Lsym, ["L"], ["1"])
    # 1. the loss
    terms = tuple(eq.Pow(eq.Add((output.carried(i, c), eq.Neg(eq.num(T[i][c])) if T[i][c] >= 0 else eq.num(-T[i][c]))) if T[i][c] else output.carried(i, c), eq.num(2))
                  for i in range(n) for c in range(m_out))
    items = [Lsym, eq.Mul((eq.num(Fraction(1, 2)), eq.Sum(eq.Pow(eq.Add((eq.Entry(zsym, "i", "j"), eq.Neg(eq.Entry(Tsym, "i", "j")))), eq.num(2)), "i,j"))),
             eq.Mul((eq.num(Fraction(1, 2)), eq.Add(terms))), loss.carried(0, 0)]
    ops = [EQ, _rel(not _has_dec(items[2])), _rel_to(items[2], loss, 0, 0)]
    _answer(ctx, items, ops, loss, 0, 0)
    zt = eq.Add((zsym, eq.Neg(Tsym)))
    steps.append(Step("loss", _p("Loss: ", _is(Lsym, eq.Mul((eq.num(Fraction(1, 2)), eq.Sum(eq.Pow(zt, eq.num(2)), "i,j"))))),
                      _p("How far the output is from the target ", Tsym, ": half the sum of the squared differences over "
                         "every entry (mean squared error without the mean, the usual ", eq.Frac(eq.num(1), eq.num(2)),
                         " so that the gradient is simply ",
                         zt, "). ", zsym, f" is carried to {P} places."),
                      [Line(eq.Rel(tuple(items), tuple(ops)))], result="loss", precision=P))
    # 2. dZ = Z − T
    dZ = M("dZ", eq.Sym("dZ", upright=True), toks, ocols)
    i0, c0 = _pick(dZ)
    lines = []
    for i, c in _entries(ctx.checks, n, m_out, (i0, c0)):
        it = [eq.Entry(dZ.sym, lab[i], str(c + 1)), eq.Add((eq.Entry(zsym, lab[i], str(c + 1)), eq.Neg(eq.Entry(Tsym, lab[i], str(c + 1))))),
              eq.Add((output.carried(i, c), eq.Neg(eq.num(T[i][c])) if T[i][c] >= 0 else eq.num(-T[i][c]))), dZ.carried(i, c)]
        lines.append(Line(eq.Rel(tuple(it), (EQ, _rel(not _has_dec(it[2])), _rel_to(it[2], dZ, i, c)))))
    steps.append(Step("dZ", _p("Backward: ", _is(dZ.sym, zt)),
                      _p("Start the backward pass at the loss: the derivative of ",
                         eq.Mul((eq.num(Fraction(1, 2)), eq.Pow(zt, eq.num(2)))), " with respect to each entry of ", zsym,
                         " is ", zt, ". Every gradient below is this one passed back through the steps of the forward "
                         "pass, one product at a time (the chain rule)."), lines, result="dZ",
                      precision=P, shape_eq=eq.Rel((eq.Dims(n, m_out),), ())))
    head_dZ = [dZ]
    if problem.multihead:
        Wo = problem.W_O
        hd = len(Wo)
        ccols = concat.cols
        dcat = M("dconcat", eq.Sym("dconcat", upright=True), toks, ccols)
        i0, k0 = _pick(dcat)
        steps.append(_checked(_grad_prod_step(
            ctx, "dconcat", None, _p("Through ", eq.Sym("W_O"), ": ", _is(dcat.sym, eq.Mul((dZ.sym, _tr(eq.Sym("W_O")))))),
            _p("Several heads: the output was ", eq.Mul((eq.Sym("concat", upright=True), eq.Sym("W_O"))),
               ", so the gradient of the concatenated heads is ", dZ.sym, " times ", _tr(eq.Sym("W_O")), " (row ", eq.Sym("k"),
               " of ", eq.Sym("W_O"), " gives column ", eq.Sym("k"), " of concat's gradient). It splits back into the heads: "
               "each head's ", dZ.sym, " is its block of columns."), dcat,
            lambda i: _node_list(dZ, P, [(i, c) for c in range(m_out)]), lambda k: [Wo[k][c] for c in range(m_out)],
            lambda i, k: eq.Dot(eq.Entry(dZ.sym, lab[i], eq.ALL), eq.Entry(eq.Sym("W_O"), str(k + 1), eq.ALL)),
            (i0, k0), (eq.Dims(n, m_out), eq.Dims(m_out, hd), eq.Dims(n, hd))), "dconcat"))
        dv = problem.d_v
        head_dZ = []
        for h in range(1, len(problem.heads) + 1):
            key = f"head{h}.dZ"
            head_dZ.append(M(key, ctx.sym("dZ", h), toks, [str(c + 1) for c in range(dv)]))
    dm = problem.d_model
    drows = [str(r + 1) for r in range(dm)]
    for hr, dZh, hp, (hk, head) in zip(heads, head_dZ, run.heads, enumerate(problem.heads, 1)):
        hid = hk if problem.multihead else None
        pre = f"head{hk}." if problem.multihead else ""
        A, V, Q, K = hr.weights, hr.V, hr.Q, hr.K
        dk, dv = Q.shape[1], V.shape[1]
        kc, vc = [str(c + 1) for c in range(dk)], [str(c + 1) for c in range(dv)]
        S = lambda b: ctx.sym(b, hid)  # noqa: E731
        masked = hp.masked
        hsteps = []
        # dV = Aᵀ·dZ
        dV = M(pre + "dV", S("dV"), toks_kv, vc)
        hsteps.append(_grad_prod_step(
            ctx, "dV", hid, _p("Backward: ", _is(S("dV"), eq.Mul((_tr(S("A")), S("dZ"))))),
            _p(_is(S("Z"), eq.Mul((S("A"), S("V")))), ", so the gradient of ", S("V"), " is ", _tr(S("A")), " times ", S("dZ"),
               ": value row ", _J, " was used by every token ", _I, " with weight ", eq.Entry(S("A"), "i", "j"),
               ", so it collects ", eq.Sum(eq.Mul((eq.Entry(S("A"), "i", "j"), eq.Entry(S("dZ"), "i", eq.ALL))), "i"),
               " (column ", _J, " of ", S("A"), ", not row ", _J, ")."), dV,
            lambda j: _node_list(A, P, [(i, j) for i in range(n)]), lambda c: _node_list(dZh, P, [(i, c) for i in range(n)]),
            lambda j, c: eq.Dot(eq.Col(S("A"), lab_kv[j]), eq.Col(S("dZ"), str(c + 1))), _pick(dV),
            (eq.Dims(m, n), eq.Dims(n, dv), eq.Dims(m, dv))))
        # dA = dZ·Vᵀ
        dA = M(pre + "dA", S("dA"), toks, toks_kv, masked)
        hsteps.append(_grad_prod_step(
            ctx, "dA", hid, _p("Backward: ", _is(S("dA"), eq.Mul((S("dZ"), _tr(S("V")))))),
            _p(_is(S("Z"), eq.Mul((S("A"), S("V")))), ", so the gradient of the weights is ", S("dZ"), " times ", _tr(S("V")),
               ": entry (", _I, ", ", _J, ") is token ", _I, "'s output gradient · token ", _J, "'s value row."), dA,
            lambda i: _node_list(dZh, P, [(i, c) for c in range(dv)]), lambda j: _node_list(V, P, [(j, c) for c in range(dv)]),
            lambda i, j: eq.Dot(eq.Entry(S("dZ"), lab[i], eq.ALL), eq.Entry(S("V"), lab_kv[j], eq.ALL)), _pick(dA),
            (eq.Dims(n, dv), eq.Dims(dv, m), eq.Dims(n, m)),
            notes=["A masked weight is 0 whatever dA says: its gradient stops at the softmax (next step)."] if masked else ()))
        # the softmax backward, row by row
        dS = M(pre + "dS", S("dS"), toks, toks_kv, masked)
        rs = hand.grads[hk - 1].rowsum
        lines = []
        for i in range(n):
            g = f"row {toks[i]}"
            js = [j for j in range(m) if (i, j) not in masked]
            an = [A.carried(i, j) for j in js]
            dn = [dA.carried(i, j) for j in js]
            s_node = F.hand_node(rs[i], P)
            s_lab = eq.Sym("s", sub=lab[i])
            s_sum = eq.Add(tuple(eq.Mul((a, d)) for a, d in zip(an, dn)))
            lines.append(Line(eq.Rel((s_lab, eq.Sum(eq.Mul((eq.Entry(S("A"), lab[i], "k"), eq.Entry(S("dA"), lab[i], "k"))), "k"),
                                      s_sum, s_node),
                                     (EQ, _rel(not any(map(_has_dec, an + dn))), _rel(eq.rational_value(s_sum) == rs[i]))), g))
            for j in range(m):
                lhs = eq.Entry(dS.sym, lab[i], lab_kv[j])
                if (i, j) in masked:
                    lines.append(Line(eq.Rel((lhs, eq.num(0)), (EQ,)), g))
                    continue
                prod = eq.Mul((A.carried(i, j), eq.Add((dA.carried(i, j), eq.Neg(s_node)))))
                lines.append(Line(eq.Rel((lhs, eq.Mul((eq.Entry(S("A"), lab[i], lab_kv[j]), eq.Add((eq.Entry(S("dA"), lab[i], lab_kv[j]), eq.Neg(s_lab))))),
                                          prod, dS.carried(i, j)),
                                         (EQ, _rel(not _has_dec(prod)), _rel_to(prod, dS, i, j))), g))
            if len(js) > 1:
                lines.append(_row_sum_line(eq.Sum(eq.Entry(dS.sym, lab[i], "j"), "j"),
                                           [dS.carried(i, j) for j in js], 0, P, g))
        notes = ["Each row of dS adds up to 0: the weights of a row always add up to 1, so moving the scores can only "
                 "shift weight from one token to another."]
        aij, daij, si = eq.Entry(S("A"), "i", "j"), eq.Entry(S("dA"), "i", "j"), eq.Sym("s", sub="i")
        if masked:
            notes.append(_p("Masked entries get exactly 0 gradient: their score was −∞ and their weight is 0 whatever the "
                            "score, so changing it changes nothing (", _is(aij, eq.num(0)), " makes every term with the "
                            "factor ", aij, " 0). No gradient flows to the key of a later token through them."))
        hsteps.append(Step("dS", _p("Softmax backward: ", _is(eq.Entry(S("dS"), "i", "j"), eq.Mul((aij, eq.Add((daij, eq.Neg(si)))))),
                                    ", row by row"),
                           _p("The softmax couples a row: raising one scaled score raises its own weight and lowers all the "
                              "others. So the gradient of scaled score ", _J, " is ", aij, " times (", daij, " minus the row's "
                              "weighted average ", _is(si, eq.Sum(eq.Mul((eq.Entry(S("A"), "i", "k"), eq.Entry(S("dA"), "i", "k"))), "k")),
                              "). First the row's sum ", si, ", then each entry."), lines, result="dS", head=hid,
                           notes=notes, precision=P))
        # the scaling
        dsc = M(pre + "dscores", S("dscores"), toks, toks_kv, masked)
        fnode = F.node(run.factor)
        if problem.scale == "none":
            hsteps.append(Step("dscores", _p("Scaling backward: none (", _is(S("dscores"), S("dS")), ")"),
                               _p('The problem sets scale = "none": the scores were not divided, so their gradient is ', S("dS"), " itself."),
                               [], result="dscores", head=hid, precision=P))
        else:
            i0, j0 = _pick(dsc, lambda i, j: (i, j) not in masked)
            lines = []
            for i, j in _entries(ctx.checks, n, m, (i0, j0), allowed=lambda i, j: (i, j) not in masked):
                it = [eq.Entry(dsc.sym, lab[i], lab_kv[j]), eq.Frac(eq.Entry(dS.sym, lab[i], lab_kv[j]), fnode),
                      eq.Frac(dS.carried(i, j), fnode), dsc.carried(i, j)]
                lines.append(Line(eq.Rel(tuple(it), (EQ, _rel(not _has_dec(it[2])), _rel_to(it[2], dsc, i, j)))))
            hsteps.append(Step("dscores", _p("Scaling backward: ", _is(S("dscores"), eq.Frac(S("dS"), fnode))),
                               _p("The forward pass divided every score by ", fnode, ", so every gradient is divided by it again "
                                  "on the way back (the chain rule: the derivative of ", eq.Frac(eq.Sym("s"), eq.Sym("c")),
                                  " with respect to ", eq.Sym("s"), " is ", eq.Frac(eq.num(1), eq.Sym("c")), ")."), lines, result="dscores", head=hid,
                               notes=["Masked entries stay 0."] if masked else [], precision=P))
        # dQ = dscores·K, dK = dscoresᵀ·Q
        dQ = M(pre + "dQ", S("dQ"), toks, kc)
        hsteps.append(_grad_prod_step(
            ctx, "dQ", hid, _p("Backward: ", _is(S("dQ"), eq.Mul((S("dscores"), S("K"))))),
            _p(_is(S("scores"), eq.Mul((S("Q"), _tr(S("K"))))), ", so the gradient of the queries is ", S("dscores"), " times ",
               S("K"), ": token ", _I, "'s query moves along the keys it was matched with, each by that score's gradient."), dQ,
            lambda i: _node_list(dsc, P, [(i, j) for j in range(m)]), lambda c: _node_list(K, P, [(j, c) for j in range(m)]),
            lambda i, c: eq.Dot(eq.Entry(S("dscores"), lab[i], eq.ALL), eq.Col(S("K"), str(c + 1))), _pick(dQ),
            (eq.Dims(n, m), eq.Dims(m, dk), eq.Dims(n, dk))))
        dK = M(pre + "dK", S("dK"), toks_kv, kc)
        hsteps.append(_grad_prod_step(
            ctx, "dK", hid, _p("Backward: ", _is(S("dK"), eq.Mul((_tr(S("dscores")), S("Q"))))),
            _p(_is(S("scores"), eq.Mul((S("Q"), _tr(S("K"))))), ", so the gradient of the keys is ", _tr(S("dscores")),
               " times ", S("Q"), ": token ", _J, "'s key collects column ", _J, " of ", S("dscores"),
               " (every query that was matched with it), not row ", _J, "."), dK,
            lambda j: _node_list(dsc, P, [(i, j) for i in range(n)]), lambda c: _node_list(Q, P, [(i, c) for i in range(n)]),
            lambda j, c: eq.Dot(eq.Col(S("dscores"), lab_kv[j]), eq.Col(S("Q"), str(c + 1))), _pick(dK),
            (eq.Dims(m, n), eq.Dims(n, dk), eq.Dims(m, dk))))
        # dW = Xᵀ·d(…)
        for w, g, cols in (("Q", dQ, kc), ("K", dK, kc), ("V", dV, vc)):
            key = f"dW_{w}"
            dW = M(pre + key, S(key), drows, cols)
            Xs, _lab, who = ctx.side(w)
            X = problem.X_kv if Xs is _XE else problem.X
            k = len(X)
            hsteps.append(_grad_prod_step(
                ctx, key, hid, _p("Backward: ", _is(S(key), eq.Mul((_tr(Xs), S("d" + w))))),
                _p(_is(S(w), eq.Mul((Xs, S("W_" + w)))), ", so the gradient of ", S("W_" + w), " is ", _tr(Xs), " times ",
                   S("d" + w), ": row ", eq.Sym("r"), " of ", S("W_" + w), " collects column ", eq.Sym("r"), " of ", Xs,
                   f" (every {who}'s ", eq.Sym("r"), "-th input) times ", S("d" + w), "."), dW,
                lambda r, X=X, k=k: [X[i][r] for i in range(k)], lambda c, g=g, k=k: _node_list(g, P, [(i, c) for i in range(k)]),
                lambda r, c, w=w, Xs=Xs: eq.Dot(eq.Col(Xs, str(r + 1)), eq.Col(S("d" + w), str(c + 1))), _pick(dW),
                (eq.Dims(dm, k), eq.Dims(k, len(cols)), eq.Dims(dm, len(cols)))))
        for s in hsteps:
            _checked(s, s.title_prose)
            if problem.multihead:
                s.result = pre + s.result
        steps += hsteps
    return mats, steps


def _grad_check_and_update(ctx: _Ctx, problem: Problem, run, nums, hand, mats: dict, loss: Mat):
    """The numerical check of one gradient entry, the update W ← W − lr·dW, and the fresh forward pass's loss."""
    from .attention import loss_of

    P, dec = ctx.P, ctx.dec
    tr = problem.train
    steps = []
    multi = problem.multihead
    pre = "head1." if multi else ""
    hid = 1 if multi else None
    dWq = mats[pre + "dW_Q"]
    r, c = _pick(dWq)
    g_num = dWq.num[r][c]
    g_exact = dWq.exact[r][c]
    W = [list(map(list, (hd.W_Q, hd.W_K, hd.W_V))) for hd in problem.heads]

    def loss_at(delta):
        # the same problem with one weight moved (not a new Problem: W ± h is no entry of the user's file, and
        # may pass the limit on entries)
        ws = [[[list(row) for row in m] for m in trip] for trip in W]
        ws[0][0][r][c] += delta
        b = Interval(problem, widen=False)
        ivs = [tuple([[b.entry(x) for x in row] for row in m] for m in trip) for trip in ws]
        return loss_of(problem, b, forward(problem, b, weights=ivs, backward=False))[0]

    chosen = None
    for h in (Fraction(1, 10), Fraction(1, 20), Fraction(1, 40)):
        lp, lm = loss_at(h), loss_at(-h)
        a, b = F.round_decimal(None, lp, P), F.round_decimal(None, lm, P)
        q = (Fraction(a) - Fraction(b)) / (2 * h)
        ok = abs(F.mp(q) - g_num) < Fraction(1, 2) * Fraction(1, 10**dec) and \
            F.round_decimal(q, None, dec) == F.round_decimal(g_exact, g_num, dec)
        chosen = (h, lp, lm, a, b, q, ok)
        if ok:
            break
    h, lp, lm, a, b, q, ok = chosen
    wsym = ctx.sym("W_Q", hid)
    went = eq.Entry(wsym, str(r + 1), str(c + 1))
    hs = eq.Sym("h")
    lines = [Line(eq.Rel((eq.Call("L", (eq.Add((went, hs)),)), eq.dec(a)), (APPROX,))),
             Line(eq.Rel((eq.Call("L", (eq.Add((went, eq.Neg(hs))),)), eq.dec(b)), (APPROX,)))]
    qn = eq.num(q) if F.terminating(q, P) else eq.dec(F.round_decimal(q, None, P))
    lines.append(Line(eq.Rel((eq.Frac(eq.Add((eq.Call("L", (eq.Add((went, hs)),)), eq.Neg(eq.Call("L", (eq.Add((went, eq.Neg(hs))),))))),
                                      eq.Mul((eq.num(2), hs))),
                              eq.Frac(eq.Add((eq.dec(a), eq.Neg(eq.dec(b)))), eq.Mul((eq.num(2), eq.num(h)))), qn,
                              eq.dec(F.round_decimal(_value_of(qn), None, dec))), (APPROX, _rel(type(qn) is eq.Num), APPROX))))
    dsym = ctx.sym("dW_Q", hid)
    it, op = [eq.Entry(dsym, str(r + 1), str(c + 1)), dWq.carried(r, c)], [APPROX]
    _answer(ctx, it, op, dWq, r, c)
    lines.append(Line(eq.Rel(tuple(it), tuple(op))))
    dent = eq.Entry(dsym, str(r + 1), str(c + 1))
    if ok:
        verdict = (f"The two agree to {dec} places ({F.number_text(qn)} from the loss, {F.number_text(dWq.carried(r, c))} from the "
                   f"backward pass): the backward pass is right for this entry.")
    else:
        verdict = _p("With ", _is(_h, eq.num(h)), f" the difference quotient ({F.number_text(qn)}) and the backward pass "
                     f"({F.number_text(dWq.carried(r, c))}) still differ at {dec} places: the loss curves too much here for "
                     f"a hand check with {P}-place losses (a smaller ", _h, " needs more places).")
    why = _p("Check one gradient entry numerically, the way a program's gradients are tested: nudge that one weight up and "
             "down by ", _is(_h, eq.num(h)), ", run the forward pass twice, and divide the change in the loss by ",
             eq.Mul((eq.num(2), _h)), " (a central difference). ",
             _p("This ", _h, f" is small enough that the quotient matches to {dec} places, and large enough that the "
                f"losses, carried to {P} places, do not lose those places in the subtraction.") if ok else
             _p("Here no ", _h, f" of 0.1, 0.05 or 0.025 gives a match at {dec} places with losses carried to {P} places "
                "(see below)."))
    steps.append(_checked(Step("gradcheck", _p("Numerical check of ", dent),
                               why, lines, notes=[verdict, _p("The backward pass gives ", _is(dent, dWq.fixed(r, c, dec), op=APPROX), ".")],
                               precision=P), "gradient check"))
    # the update
    lr = tr.lr
    for hk, hd in enumerate(problem.heads, 1):
        hp = f"head{hk}." if multi else ""
        hh = hk if multi else None
        for w, Wm in (("W_Q", hd.W_Q), ("W_K", hd.W_K), ("W_V", hd.W_V)):
            key = hp + w + "_new"
            g = mats[hp + "d" + w]
            rows, cols = g.rows, g.cols
            new = _mat(w + "_new", _new_sym(w, hh), run.shown[key], nums.shown[key], rows, cols,
                       hand=hand.shown[key], places=P)
            mats[key] = new
            i0, j0 = _pick(g)
            lines = []
            for i, j in _entries(ctx.checks, len(rows), len(cols), (i0, j0)):
                it = [eq.Entry(new.sym, str(i + 1), str(j + 1)),
                      eq.Add((eq.Entry(ctx.sym(w, hh), str(i + 1), str(j + 1)), eq.Neg(eq.Mul((eq.Sym("lr", upright=True), eq.Entry(ctx.sym("d" + w, hh), str(i + 1), str(j + 1))))))),
                      eq.Add((eq.num(Wm[i][j]), eq.Neg(eq.Mul((eq.num(lr), g.carried(i, j)))))), new.carried(i, j)]
                lines.append(Line(eq.Rel(tuple(it), (EQ, _rel(not _has_dec(it[2])), _rel_to(it[2], new, i, j)))))
            lrs = eq.Sym("lr", upright=True)
            st = Step(w + "_new", _p("Update: ", _is(new.sym, eq.Add((ctx.sym(w, hh), eq.Neg(eq.Mul((lrs, ctx.sym("d" + w, hh)))))))),
                      _p("One step of gradient descent with ", _is(lrs, eq.num(lr)), ": move every weight against its "
                         "gradient, a little (", lrs, f" times the gradient). The new weights are carried to {P} places."), lines, result=key, head=hh, precision=P)
            steps.append(_checked(st, st.title_prose))
    # the fresh forward pass, with the updated weights W − lr·dW (exact; 50-digit values): its output Z′ is shown
    # (rounded), and L′ is worked from that Z′ as shown
    after = nums.after.output
    true_after = nums.loss_after[0]
    T = tr.target
    n, m = len(after), len(after[0])
    zs = [[eq.dec(F.round_decimal(None, after[i][cc][0], P)) for cc in range(m)] for i in range(n)]
    terms = tuple(eq.Pow(eq.Add((zs[i][cc], eq.Neg(eq.num(T[i][cc])) if T[i][cc] >= 0 else eq.num(-T[i][cc]))) if T[i][cc] else zs[i][cc], eq.num(2))
                  for i in range(n) for cc in range(m))
    expr = eq.Mul((eq.num(Fraction(1, 2)), eq.Add(terms)))
    shown_after = eq.rational_value(expr)
    hand_after = Approx(F.round_decimal(shown_after, None, P))
    la = _mat("loss_after", eq.Sym("L", prime=True), [[INEXACT]], [[nums.loss_after]], ["L′"], ["1"],
              hand=[[hand_after]], places=P)
    mats["loss_after"] = la
    items = [eq.Sym("L", prime=True), expr, la.carried(0, 0)]
    ops = [EQ, _rel(shown_after == hand_after)]
    _answer(ctx, items, ops, la, 0, 0)
    zrow = [Line(eq.Rel((eq.Sym("z", sub=ctx.lab[i], prime=True), eq.Vec(tuple(zs[i]))), (APPROX,)), f"row {problem.tokens[i]}")
            for i in range(n)]
    before, after_v = loss.num[0][0], la.num[0][0]
    lt = _is(loss.sym, loss.carried(0, 0), op=APPROX)
    lat = _is(la.sym, la.carried(0, 0), op=APPROX)
    lrs = eq.Sym("lr", upright=True)
    if after_v < before:
        verdict = _p("The loss went down, from ", lt, " to ", lat, ": the step moved the output towards the target.")
    else:
        verdict = _p("The loss did not go down: ", lt, " before, ", lat, " after. The learning rate ", _is(lrs, eq.num(lr)),
                     " is too large for this problem: the step overshot. A smaller ", lrs, " (try half) would lower it.")
    hs_ = [eq.Sym(f"W_{w}", prime=True) for w in "QKV"]
    steps.append(_checked(Step("loss_after", "New loss: a fresh forward pass with the updated weights",
                               _p("Run the forward pass again (", eq.Sym("Q"), ", ", eq.Sym("K"), ", ", eq.Sym("V"),
                                  ", scores, softmax, ", eq.Sym("Z"), ") with the new ", hs_[0], ", ", hs_[1], ", ", hs_[2],
                                  " (", _is(eq.Sym("W", prime=True), eq.Add((eq.Sym("W"), eq.Neg(eq.Mul((lrs, eq.matrix_sym("dW"))))))), f", not rounded); its output ", eq.Sym("Z", prime=True), f", carried to {P} places, and the loss from it:"), zrow + [Line(eq.Rel(tuple(items), tuple(ops)))],
                               result="loss_after", notes=[verdict], precision=P), "new loss"))
    return steps


def _new_sym(w: str, head) -> eq.Sym:
    """W_Q′ (the updated weights), printed with one prime in every format."""
    return eq.Sym(w, head=head, prime=True)
