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
from .attention import (INEXACT, Approx, Exact, Hand, HeadPass, Interval, block_exact, block_loss, block_weight, forward,
                        loss_of, run_pass)
from .audit import failure as audit_failure
from .errors import ProblemError
from .model import HeadResult, Line, Mat, Solution, Step, SymLabel
from .problem import LIMITS, Chain, Problem

CHECKS = ("one", "row", "all")
DISPLAYS = ("exact", "decimal")
MAX_SCALED = LIMITS["scaled"]   # largest |scaled score|: e^300 already has 131 digits


class AuditFailure(RuntimeError):
    """Internal error: a step could not be shown with lines that hold. Never a user error."""


class View:
    """What a stage's step reads (:class:`worked.lines.Shown`): the matrices of its head (or of the layer after
    the heads) by stage id (``mat``), the problem's inputs by name (``input``: X, X_enc, W_Q, …, W_O, T), the
    head (``head``: its number, or None; ``index``: 0-based), and what the passes left for the lines: a head's
    Exact pass (``exact``), the scores before the mask (``raw``), the entries the mask hides (``masked``), the
    hand pass's head and gradients (``hand``, ``hand_grad``, made when first read), the fresh pass after the
    update (``after_output``, ``loss_after``), the loss with one weight moved (``loss_moved``)."""

    def __init__(self, ctx, head, index: int | None, mats: dict, inputs: dict, **extra):
        self.ctx, self.head, self.index, self.mats, self.inputs = ctx, head, index, mats, inputs
        self.masked: frozenset = frozenset()
        self.__dict__.update(extra)

    def mat(self, sid: str) -> Mat:
        return self.mats[sid]

    def input(self, name: str):
        """An input by name: the problem's (exact), or a block's stage that a head takes as its X (X0, N1), as its
        rows are carried (the nodes a line shows)."""
        if name not in self.inputs and name in getattr(self, "layer", {}):
            m = self.layer[name]
            return [[m.carried(i, j) for j in range(m.shape[1])] for i in range(m.shape[0])]
        return self.inputs[name]

    @property
    def by_hand(self) -> Hand:
        """The arithmetic of a hand at the solution's carried places (a block's steps work a row with it)."""
        return Hand(self.ctx.p, "decimal" if self.ctx.decimal else "exact", self.ctx.P)

    @property
    def hand(self):
        return self.ctx.carry.run.heads[self.index]

    @property
    def hand_grad(self):
        return self.ctx.carry.run.grads[self.index]


def _symbol(ctx, stage, hid) -> eq.Sym:
    """The symbol of *stage*'s matrix (of head *hid*): the one its answer grid writes (A for the weights, W_Q′), else
    its id's."""
    if stage.grid is not None and stage.grid.symbol is not None:
        sym = stage.grid.lhs(lambda base, **kw: ctx.sym(base, hid, **kw))
        if isinstance(sym, eq.Sym):
            return sym
    return ctx.sym(stage.id, hid)


def _masked(stage) -> bool:
    """Does the mask hide entries of *stage*'s matrix: a head's n × n_kv matrix (the scores' shape)?"""
    return stage.scope == "head" and (stage.rows, stage.cols) == ("n", "n_kv")


def _shown_now(ctx, shown, stage, view: View, key: str | None, head) -> Step:
    """A step made now (the training step's), audited."""
    b = shown.body(ctx, stage, view)
    st = Step(shown.id or stage.id, shown.title(ctx, stage, view.head), b.why, [Line(*x) for x in b.lines], result=key,
              shape_eq=b.shape_eq, head=head, notes=b.notes, precision=b.precision)
    return _checked(st, b.audit_name or st.title_prose)


def _shown_later(ctx, stage, view: View, key: str) -> Step:
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
    form of (:data:`worked.attention.INEXACT`) is its 50-digit value, as the loss after the update is: written
    (:func:`_enclosed`) when the matrix's exact entries are first read (:attr:`Mat.exact`), not for a page that
    shows it only rounded."""
    ex = [[sp.Rational(x.numerator, x.denominator) if isinstance(x, Fraction) else x for x in er] for er in exact]
    nm = [[F.NEG_INF if iv is None else F.mp(x) if F.is_rational(x) else iv[0] for x, iv in zip(er, nr)]
          for er, nr in zip(ex, num)]
    later = None
    if any(x is INEXACT for er in ex for x in er):
        def later(ex):
            return [[_enclosed(iv) if x is INEXACT else x for x, iv in zip(er, nr)] for er, nr in zip(ex, num)]
    return Mat(name, sym, ex, nm, rows, cols, masked, hand, places, later)


def _enclosed(iv) -> sp.Float:
    """A value known by its 50-digit enclosure (lo, hi) as a sympy Float: the shortest decimal in it, with
    its digits (so an entry that is 0 is 0.0, not a remainder of the 50th digit)."""
    d = F.shortest_in(*iv)
    digits = len(d.as_tuple().digits)
    return sp.Float(str(d), max(digits, 15))


class _Off(Exception):
    """Stops the pass at ``decimals + 2`` places (:func:`hand_pass`) at the first matrix with a carried value that
    rounds to another answer: its cells ``(key, i, j, carried value)``."""

    def __init__(self, off: list):
        super().__init__(off)
        self.off = off


def hand_pass(problem: Problem, display: str, nums=None, first=None):
    """The values a hand carries through *problem* (:class:`worked.attention.Hand`) and the places they are
    carried to: ``decimals + 2``, or one more when at those places some carried value would round to another
    answer than the true value (the solution then says so). The places are decided before the pass the solution
    shows: the pass at ``decimals + 2`` stops at the first matrix with such a value, and only then is the whole pass
    made at one more place. Returns ``(places, pass, entries, first)``, *entries* the cells ``(key, i, j, carried
    value)`` whose carried value still rounds to another answer there, *first* those of the first such matrix at
    ``decimals + 2`` (empty when there is none). *nums*: the point :class:`~worked.attention.Interval` pass (the
    true values), when already computed; *first* (the argument): the pass at ``decimals + 2``, when already
    computed (:func:`worked.generate.generate` makes it to accept a problem it draws)."""
    if nums is None:
        nums = run_pass(problem, Interval(problem, widen=False))
    dec = problem.decimals
    pr = problem.precision
    answers: dict = {}      # the true values' answers, rounded once for both places
    seen: set = set()

    def watch(key, grid):
        seen.add(key)
        off = _off_in(key, grid, nums, dec, answers)
        if off:
            raise _Off(off)

    places, run = pr.carried, first
    try:
        if run is None:
            run = run_pass(problem, Hand(problem, display, places), watch=watch)
        # the matrices the watch did not see (the training step's), or all of a pass already made
        off = [c for key, grid in run.shown.items() if key not in seen for c in _off_in(key, grid, nums, dec, answers)]
    except _Off as stop:
        run, off = None, stop.off
    first = off
    if off or _undefined(run, nums):
        places = pr.more().carried
        run = run_pass(problem, Hand(problem, display, places))
        off = _off_answers(run, nums, dec, answers)
    if _undefined(run, nums):
        key = _undefined(run, nums)
        raise ProblemError(key, f"a value a hand carries to {places} places has no value here ({key}: a probability "
                           "rounds to 0 where its ln is taken): give other numbers or more decimals", problem.source)
    return places, run, off, first


def _undefined(hand, nums) -> str | None:
    """The key of a matrix whose hand value is not defined where its true value is (−ln of a probability a hand
    rounded to 0: a block's loss), or None."""
    for key, grid in hand.shown.items():
        true = nums.shown.get(key)
        if true is not None and any(h is None and t is not None for hr, tr in zip(grid, true) for h, t in zip(hr, tr)):
            return key
    return None


def _off_answers(hand, nums, dec: int, answers: dict | None = None) -> list:
    """The cells ``(key, i, j, carried value)`` whose carried value, rounded to *dec* places, is another answer
    than the true value rounded. *answers*: the true values rounded, by cell, as far as known (filled in here)."""
    answers = {} if answers is None else answers
    return [c for key, grid in hand.shown.items() for c in _off_in(key, grid, nums, dec, answers)]


def _off_in(key: str, grid, nums, dec: int, answers: dict) -> list:
    """:func:`_off_answers` of the one matrix *key*, carried as *grid*."""
    off = []
    true = nums.shown.get(key)
    if true is None:
        return off
    for i, row in enumerate(grid):
        for j, h in enumerate(row):
            if type(h) is not Approx:
                continue
            cell = (key, i, j)
            if cell not in answers:
                answers[cell] = F.round_decimal(None, true[i][j][0], dec)
            if F.round_decimal(h, None, dec) != answers[cell]:
                off.append((key, i, j, h))
    return off


def _check_size(problem: Problem, run: HeadPass, factor, masked_at: str) -> None:
    """A ProblemError when a scaled score is too large for a hand exercise (before any e^x is evaluated): the
    scores are the matrix of the stage the mask enters at (*masked_at*)."""
    top = max((abs(x) for i, row in enumerate(run.raw_scores) for j, x in enumerate(row) if (i, j) not in run.masked),
              default=Fraction(0))
    if top * top > MAX_SCALED**2 * F.frac(factor**2):     # |scaled| = top/factor, compared in rationals
        big = float(sp.Rational(top.numerator, top.denominator) / factor)
        raise ProblemError(masked_at, f"a scaled score of about {big:.0f} is too large for a hand exercise "
                           f"(e^x would have {int(big / 2.302585) + 1} digits; at most {MAX_SCALED} in size): "
                           "use smaller entries or a larger scale", problem.source)


def _check_block_size(problem: Problem, run: HeadPass, factor, masked_at: str) -> None:
    """:func:`_check_size` for a block's head, whose scores are known by their 50-digit enclosures."""
    top = max((max(abs(iv[0]), abs(iv[1])) for i, row in enumerate(run.raw_scores) for j, iv in enumerate(row)
               if (i, j) not in run.masked), default=0)
    big = float(top) / float(factor)
    if big > MAX_SCALED:
        raise ProblemError(masked_at, f"a scaled score of about {big:.0f} is too large for a hand exercise "
                           f"(e^x would have {int(big / 2.302585) + 1} digits; at most {MAX_SCALED} in size): "
                           "use smaller entries or a larger scale", problem.source)


class _Carry:
    """The values a hand carries and their places (:func:`hand_pass`), worked out when a line first needs them:
    a solution read only for its values and headings (checking answers) never makes the hand pass."""

    def __init__(self, problem: Problem, display: str, nums, hand=None):
        self.problem, self.display, self.nums, self.hand = problem, display, nums, hand
        self._got = None

    def _get(self):
        if self._got is None:
            self._got = hand_pass(self.problem, self.display, self.nums, self.hand)
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


def solve(problem: Problem, checks: str = "one", display: str | None = None, *, hand=None) -> Solution:
    """Solve *problem* exactly and build the worked steps. ``checks`` is "one", "row" or "all";
    ``display`` "exact" or "decimal" (default: the problem's own, see :attr:`Problem.display`).

    The values come from the one forward pass (:func:`worked.attention.forward`): exact ones from its
    :class:`~worked.attention.Exact` backend, their 50-digit decimals from its point
    :class:`~worked.attention.Interval` pass; this module only builds the lines that show them, walking the
    stages of the problem's architecture (:func:`worked.stages.of`), each with its declared step. The values
    and every step's heading are there at once; a forward step's lines, and the hand pass they show
    (:func:`hand_pass`), are built when first read (:meth:`Step.shown_later`), audited then: checking
    answers reads only the values and the headings. :meth:`Solution.audit` builds and audits them all.
    *hand*: the hand pass of *problem* at its carried places in its own display, when already made (a drawn
    problem's, from ``worked.generate.generate(..., with_hand=True)``): shown, not made again."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    if isinstance(problem, Chain):      # [[blocks]]: block by block, each solved here
        from .chain import solve_chain

        return solve_chain(problem, solve, checks=checks, display=display)
    block = getattr(problem, "block", None) is not None
    # a Transformer block is worked in decimals (its positions and layer norms are irrational)
    display = "decimal" if block else display or getattr(problem, "display", "exact")
    if display not in DISPLAYS:
        raise ValueError(f"display must be one of {DISPLAYS}, got {display!r}")
    arch = stages.of(problem)
    toks, toks_kv = list(problem.tokens), list(problem.tokens_kv)
    # the stage the mask enters at (the scores: the first whose entries may be −∞); its matrix before the mask
    # is what its worked lines show
    masked_at = next(s.id for s in arch.forward if s.may_be_inf)
    if block:       # a block: the 50-digit pass first, the Exact pass in closed form where it stays small (P, X0)
        nums = run_pass(problem, Interval(problem, widen=False))
        run = block_exact(problem, nums)
        for hp in nums.heads:
            _check_block_size(problem, hp, run.factor, masked_at)
    else:
        run = forward(problem, Exact())
        for hp in run.heads:
            _check_size(problem, hp, run.factor, masked_at)
        nums = forward(problem, Interval(problem, widen=False))
    carry = _Carry(problem, display, nums, hand if not block and display == getattr(problem, "display", "exact") else None)
    ctx = lines.Ctx(problem, checks, display, carry, run, nums, Approx)
    causal = problem.mask == "causal"
    given = {"X": [list(r) for r in problem.X], "X_enc": [list(r) for r in problem.X_kv]}
    if problem.multihead:
        given["W_O"] = problem.W_O

    def M(stage, key, hid, masked=frozenset()):
        """The matrix *key* of *stage*, its carried values from the hand pass when first needed."""
        return _mat(stage.id, _symbol(ctx, stage, hid), run.shown[key], nums.shown[key], stages.labels(stage.rows, problem),
                    stages.labels(stage.cols, problem), masked if _masked(stage) else frozenset(), carry.grid(key))

    steps: list[Step] = []
    heads: list[HeadResult] = []
    # a block's layer stages (before the heads, after them): each a matrix and a step, as a head's
    before, after, block_in = {}, {}, {}
    if block:
        block_in = {"X": problem.X, **stages.block_inputs(problem, Exact())}
        view = View(ctx, None, None, before, block_in)
        for s in arch.before:
            before[s.id] = M(s, s.id, None)
            steps.append(_shown_later(ctx, s, view, s.id))
    for hi, (head, hp) in enumerate(zip(problem.heads, run.heads), 1):
        hid = hi if problem.multihead else None
        pre = f"head{hi}." if problem.multihead else ""
        h0 = hi - 1
        mats = {s.id: M(s, pre + s.id, hid, hp.masked) for s in arch.forward}
        # the scores before the mask (what the scores stage leaves for the worked lines)
        raw = _mat(masked_at, mats[masked_at].sym, hp.raw_scores, nums.heads[h0].raw_scores, toks, toks_kv,
                   hand=carry.shown(h0, "raw_scores"))
        heads.append(HeadResult(hi, mats, raw_scores=raw if causal else None))
        view = View(ctx, hid, h0, mats, {**given, "W_Q": head.W_Q, "W_K": head.W_K, "W_V": head.W_V}, exact=hp, raw=raw,
                    masked=hp.masked, layer=before)
        steps += [_shown_later(ctx, s, view, pre + s.id) for s in arch.forward]

    # the heads' combination: its first stage side by side (concat), its last the layer's output; with one head
    # the output is the head's last stage (Z)
    out_id = arch.combine[-1].id
    layer = {out_id: heads[0].matrices()[arch.forward[-1].id]}
    concat = None
    if problem.multihead:
        layer = {s.id: M(s, s.id, None) for s in arch.combine}
        view = View(ctx, None, None, layer, given)
        steps += [_shown_later(ctx, s, view, s.id) for s in arch.combine]
        concat = layer[arch.combine[0].id]
    output = layer[out_id]
    if block:
        view = View(ctx, None, None, {**before, out_id: output, **after}, block_in)
        for s in arch.runs(stages.Dims.of_problem(problem)):
            view.mats[s.id] = after[s.id] = M(s, s.id, None)
            steps.append(_shown_later(ctx, s, view, s.id))

    train = None
    if problem.train is not None:
        train = ctx.train_mats
        if block:       # a block's training step reads its layer's matrices and inputs, and the heads read its X
            steps += _training(ctx, arch, heads, {**given, **block_in, "W_O": problem.W_O},
                               {**before, **layer, **after}, before)
        else:
            steps += _training(ctx, arch, heads, given, layer)

    sol = Solution(problem, heads, concat, output, steps, checks, run.factor, display, train=train, before=before,
                   after=after)
    by_result = {s.result: s for s in steps if s.result}
    for k, st in enumerate(steps):
        st.then(lambda st: _checked(st, st.title_prose))
        st.then(lambda st, k=k: st.notes_prose.extend(_answer_notes(ctx, sol, st, k == 0, by_result)))
    return sol


def _answer_notes(ctx: lines.Ctx, sol: Solution, step: Step, first: bool, by_result: dict) -> list:
    """Where the carried places are not the usual ones, and why: one more place for the whole solution
    (the note of the *first* step), and, for an entry whose carried value still rounds to another answer, the
    true value that decides it (the note of the step that computes it)."""
    notes = []
    first_off = ctx.carry.first_off
    mats = sol.matrices()
    if first and not first_off and ctx.P > ctx.p.precision.carried:
        notes.append(eq.say("Values are carried to {places} places in this solution, one more than usual: with {usual}, a "
                            "probability would round to 0 where its ln is taken.", places=str(ctx.P),
                            usual=str(ctx.p.precision.carried)))
    if first and first_off:
        key, i, j, h = first_off[0]
        m = mats[key]
        shown = F.round_decimal(Fraction(h), None, ctx.dec)
        notes.append(eq.say(
            "Values are carried to {places} places in this solution, one more than usual: with {usual}, the value a hand "
            "carries for {entry} would round to {wrong}, while the answer (the true value rounded) is {answer}.",
            places=str(ctx.P), usual=str(ctx.p.precision.carried), entry=_cell(m, i, j), wrong=eq.dec(shown),
            answer=m.fixed(i, j, ctx.dec)))
    key = step.result
    m = mats.get(key) if key else None
    if m is None or by_result.get(key) is not step or m.hand is None:
        return notes
    for i, j in ((i, j) for i in range(m.shape[0]) for j in range(m.shape[1]) if not lines.rounds_to_answer(m, i, j, ctx.dec)):
        notes.append(eq.say(
            "{entry}: the value carried here, {carried}, would round to {wrong}, but the true value is {true}…, so the "
            "answer is {answer}.", entry=_cell(m, i, j), carried=m.carried(i, j),
            wrong=eq.dec(F.round_decimal(Fraction(m.hand[i][j]), None, ctx.dec)), true=eq.dec(m.rounded(i, j, ctx.dec + 4)),
            answer=m.fixed(i, j, ctx.dec)))
    return notes


def _cell(m: Mat, i: int, j: int):
    """The tree that names one entry (``Z[cats, 1]``; a 1×1 matrix by its symbol, ``L``)."""
    return m.sym if m.shape == (1, 1) else eq.Entry(m.sym, m.rows[i], m.cols[j])


# ---------------------------------------------------------------- one training step (problems with [train])

def _training(ctx, arch, heads: list[HeadResult], given: dict, forward_layer: dict, before: dict | None = None) -> list[Step]:
    """The training step's steps, walking *arch*'s train and update stages (and its checks between them): a
    layer stage once, a head stage per head; each stage's matrix (in ``ctx.train_mats``, by key) and its step,
    made now. A layer stage's matrix that splits among the heads (dconcat's blocks: each head's dZ) is each
    head's share of it. A Transformer block's: *before*, its stages before the heads (the heads' X, X0 or N1),
    and the loss with one weight moved is the block's (:func:`worked.attention.block_loss`)."""
    problem, run, nums, hand, P = ctx.p, ctx.run, ctx.nums, ctx.carry.run, ctx.P
    several = problem.multihead
    mats = ctx.train_mats
    keys = stages.matrices(stages.Dims.of_problem(problem))
    block = before is not None
    inputs = {**given} if block else {**given, "T": problem.train.target}
    layer = View(ctx, None, None, {**forward_layer}, inputs, after_output=nums.after.output, loss_after=nums.loss_after)
    views = []
    for h0, (hr, head) in enumerate(zip(heads, problem.heads)):
        hid = h0 + 1 if several else None

        def loss_moved(w, r, c, delta, h0=h0):
            """The loss of a fresh forward pass (50-digit values) with weight *w*[r, c] of this head moved by *delta*
            (not a new Problem: W ± h is no entry of the user's file, and may pass the limit on entries)."""
            if block:
                b = Interval(problem, widen=False)
                key, value, (h, k) = block_weight(problem, b, f"head{h0 + 1}.{w}")
                value[h][k][r][c] = b.add(value[h][k][r][c], b.entry(Fraction(delta)))
                return block_loss(problem, b, {key: value})[0]
            ws = [[[list(row) for row in m] for m in (hd.W_Q, hd.W_K, hd.W_V)] for hd in problem.heads]
            ws[h0][("W_Q", "W_K", "W_V").index(w)][r][c] += delta
            b = Interval(problem, widen=False)
            ivs = [tuple([[b.entry(x) for x in row] for row in m] for m in trip) for trip in ws]
            return loss_of(problem, b, forward(problem, b, weights=ivs, backward=False))[0]

        views.append(View(ctx, hid, h0, dict(hr.matrices()), {**inputs, "W_Q": head.W_Q, "W_K": head.W_K, "W_V": head.W_V},
                          masked=run.heads[h0].masked, loss_moved=loss_moved, layer=before or {}))

    def make(stage, key, hid, masked, view):
        sym = _symbol(ctx, stage, hid)
        rows = [SymLabel(sym)] if stage.rows == "1" else stages.labels(stage.rows, problem)   # L, L′, dγ_2: math on a page
        if stage.step.values is not None:       # a matrix the Exact pass has no closed form of
            num, carried = stage.step.values(ctx, stage, view)
            exact = [[INEXACT for _ in row] for row in num]
        else:
            exact, num, carried = run.shown[key], nums.shown[key], hand.shown[key]
        m = mats[key] = _mat(stage.id, sym, exact, num, rows, stages.labels(stage.cols, problem),
                             masked if _masked(stage) else frozenset(), carried, P)
        return m

    steps: list[Step] = []
    for part in (arch.train, arch.update):
        if part is arch.update:
            steps += [_shown_now(ctx, c, None, views[0], None, None) for c in arch.checks]
        for group in stages.by_scope(part):
            if group[0].scope == "layer":
                for s in group:
                    if several or s.several:
                        layer.mats[s.id] = make(s, s.id, None, frozenset(), layer)
                        steps.append(_shown_now(ctx, s.step, s, layer, s.id, None))
                for h0, v in enumerate(views):      # each head's share of a layer stage's matrix
                    for s in group:
                        key = f"head{h0 + 1}.{s.id}"
                        if key in keys and key not in mats:
                            rows, cols = keys[key]
                            v.mats[s.id] = mats[key] = _mat(s.id, ctx.sym(s.id, h0 + 1), run.shown[key], nums.shown[key],
                                                            stages.labels(s.rows, problem), [str(c + 1) for c in range(cols)],
                                                            frozenset(), hand.shown[key], P)
                if not several:
                    for v in views:
                        v.mats.update({s.id: layer.mats[s.id] for s in group if s.id in layer.mats})
                continue
            for h0, v in enumerate(views):
                pre = f"head{h0 + 1}." if several else ""
                for s in group:
                    v.mats[s.id] = make(s, pre + s.id, v.head, v.masked, v)
                    steps.append(_shown_now(ctx, s.step, s, v, pre + s.id, v.head))
    return steps
