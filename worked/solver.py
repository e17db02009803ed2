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

from . import eq, lines, stages
from . import numfmt as F
from .numfmt import N
from .attention import INEXACT, Approx, Exact, Hand, HeadPass, Interval, forward
from .audit import failure as audit_failure
from .errors import ProblemError
from .model import HeadResult, Line, Mat, Solution, Step
from .problem import LIMITS, Problem

CHECKS = ("one", "row", "all")
DISPLAYS = ("exact", "decimal")
MAX_SCALED = LIMITS["scaled"]   # largest |scaled score|: e^300 already has 131 digits
EQ, APPROX = eq.EQ, eq.APPROX


class AuditFailure(RuntimeError):
    """Internal error: a step could not be shown with lines that hold. Never a user error."""



class _Ctx(lines.Ctx):
    def side(self, which: str):
        """(the input's symbol, the labels of its rows, the words of its side) of the product *which* (Q, K, V)."""
        if self.p.cross and which in ("K", "V"):
            return _XE, self.lab_kv, "encoder token"
        return _X, self.lab, "decoder token" if self.p.cross else "token"


_rel, _entries, _has_dec, _shapes, _answer = lines.rel, lines.entries, lines.has_dec, lines.shapes, lines.answer
_rounds_to_answer, _value_of, _is, _tr, _p = lines.rounds_to_answer, lines.value_of, lines.is_, lines.tr, lines.p
_X, _I, _J, _h, _XE = lines.X, lines.I, lines.J, lines.H, lines.XE


def _dot_line(*a, **kw) -> Line:
    return Line(*lines.dot_line(*a, **kw))


def _row_sum_line(*a) -> Line:
    return Line(*lines.row_sum_line(*a))


class HeadView:
    """What a stage's step reads (:class:`worked.lines.Shown`): the matrices of its head (or of the layer after
    the heads) by stage id (``mat``), the problem's inputs by name (``input``: X, X_enc, W_Q, …, W_O), the head
    (``head``: its number, or None), the Exact pass's head (``exact``) and the hand pass's (``hand``, made when
    first read), and the scores before the mask (``raw``)."""

    def __init__(self, ctx, head, index: int | None, mats: dict, inputs: dict, exact=None, raw=None):
        self.ctx, self.head, self.index, self.mats, self.inputs, self.exact, self.raw = ctx, head, index, mats, inputs, exact, raw

    def mat(self, sid: str) -> Mat:
        return self.mats[sid]

    def input(self, name: str):
        return self.inputs[name]

    @property
    def hand(self):
        return self.ctx.carry.run.heads[self.index]


def _labels(size: str, ctx, problem) -> list:
    """The labels of a matrix's rows or columns of *size* (a key of the stages' sizes): tokens, or numbers."""
    if size == "n":
        return list(problem.tokens)
    if size == "n_kv":
        return list(problem.tokens_kv)
    if size == "heads·d_v":
        return [f"{h}.{c + 1}" for h in range(1, len(problem.heads) + 1) for c in range(problem.d_v)]
    n = {"d_k": problem.d_k, "d_v": problem.d_v, "d_model": problem.d_model, "1": 1,
         "d_out": len(problem.W_O[0]) if problem.multihead else problem.d_v}[size]
    return [str(c + 1) for c in range(n)]


def _shown_later(ctx, stage, view: HeadView, key: str) -> Step:
    """*stage*'s worked step (its :class:`worked.lines.Shown`) for the matrix *key*: its heading now, its body
    when first read."""
    shown = stage.step
    sid = shown.id or stage.id
    title = shown.title(ctx, stage, view.head)

    def make():
        b = shown.body(ctx, stage, view)
        return Step(sid, title, b.why, [Line(*x) for x in b.lines], result=key, shape_eq=b.shape_eq, head=view.head,
                    notes=b.notes, precision=b.precision)
    return Step.shown_later(sid, title, make, result=key, head=view.head)


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
    :class:`~worked.attention.Interval` pass; this module only builds the lines that show them, walking the
    stages of the problem's architecture (:func:`worked.stages.of`), each with its declared step. The values
    and every step's heading are there at once; a forward step's lines, and the hand pass they show
    (:func:`hand_pass`), are built when first read (:meth:`Step.shown_later`), audited then: checking
    answers reads only the values and the headings. :meth:`Solution.audit` builds and audits them all."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    display = display or getattr(problem, "display", "exact")
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    arch = stages.of(problem)
    toks, toks_kv = list(problem.tokens), list(problem.tokens_kv)
    run = forward(problem, Exact())
    for hp in run.heads:
        _check_size(problem, hp, run.factor)
    nums = forward(problem, Interval(problem, widen=False))
    carry = _Carry(problem, display, nums)
    ctx = _Ctx(problem, checks, display, carry, run, nums)
    causal = problem.mask == "causal"
    given = {"X": [list(r) for r in problem.X], "X_enc": [list(r) for r in problem.X_kv]}
    if problem.multihead:
        given["W_O"] = problem.W_O

    def M(stage, key, hid, masked=frozenset()):
        """The matrix *key* of *stage*, its carried values from the hand pass when first needed."""
        sym = ctx.sym(stage.grid.symbol, hid) if isinstance(stage.grid.symbol, str) else ctx.sym(stage.id, hid)
        return _mat(stage.id, sym, run.shown[key], nums.shown[key], _labels(stage.rows, ctx, problem),
                    _labels(stage.cols, ctx, problem), masked if stage.grid.masked else frozenset(), carry.grid(key))

    steps: list[Step] = []
    heads: list[HeadResult] = []
    for hi, (head, hp) in enumerate(zip(problem.heads, run.heads), 1):
        hid = hi if problem.multihead else None
        pre = f"head{hi}." if problem.multihead else ""
        h0 = hi - 1
        mats = {s.id: M(s, pre + s.id, hid, hp.masked) for s in arch.forward}
        # the scores before the mask (what the scores stage leaves for the worked lines)
        raw = _mat("scores", mats["scores"].sym, hp.raw_scores, nums.heads[h0].raw_scores, toks, toks_kv,
                   hand=carry.shown(h0, "raw_scores"))
        heads.append(HeadResult(hi, **mats, raw_scores=raw if causal else None))
        view = HeadView(ctx, hid, h0, mats, {**given, "W_Q": head.W_Q, "W_K": head.W_K, "W_V": head.W_V}, hp, raw)
        steps += [_shown_later(ctx, s, view, pre + s.id) for s in arch.forward]

    concat = None
    output = heads[0].Z
    if problem.multihead:
        layer = {s.id: M(s, s.id, None) for s in arch.combine}
        view = HeadView(ctx, None, None, layer, given)
        steps += [_shown_later(ctx, s, view, s.id) for s in arch.combine]
        concat, output = layer["concat"], layer["Z"]

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
