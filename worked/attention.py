"""The attention forward pass, written once, over a number backend, with an optional mistake.

::

    from worked.attention import Exact, Float, Interval, Transform, forward

    run = forward(problem, Float())                        # Python floats
    run = forward(problem, Exact())                        # Fractions for products, sympy after them
    run = forward(problem, Interval(problem))              # (lo, hi) 50-digit Decimals, widened for rounding
    run = forward(problem, Float(), transform=Transform(scores="KQ"))   # a mistake: K·Qᵀ
    run.matrices()       # {"Q", "K", "V", "scores", "scaled", "weights", "Z"} (one head), or
                         # {"head1.Q", …, "head1.Z", "head2.Q", …, "concat", "Z"}: the keys of Solution.matrices()
    run.heads[0].weights # per head (HeadPass): Q K V raw_scores scores scaled weights Z, masked, softmax
    run.concat, run.output, run.factor

``forward(problem, backend, *, transform=None, given=None) -> Pass``

The pass, per head: Q = X·W_Q, K = X·W_K, V = X·W_V; scores = Q·Kᵀ with ``backend.NEG_INF`` where the
causal mask hides an entry; scaled = scores / factor (√d_k, 1 or the problem's number); weights = the
softmax of each row of scaled; Z = weights·V. With several heads, concat = the heads' Z side by side and
the output Z = concat·W_O. Every matrix is a list of rows.

*transform* (a :class:`Transform`) changes one or more stages, the way a known mistake does
(:mod:`worked.mistakes` names them): K·Qᵀ, another mask, another divisor, the softmax down the columns or
without e^x, Z = Aᵀ·V. *given* substitutes a student's own entries: ``{key: rows}`` with :data:`NA` where
an entry is not given; the later stages then compute from those entries ("error carried forward").
``Pass.matrices()`` holds what each stage computed (``backend.shown``, e.g. widened by rounding);
``Pass.carried`` what flowed on to the next stage (the given entries where there are some).

For the worked solution (``worked.solver``): ``run = forward(problem, Exact())``; per head
``run.heads[k]`` has Q, K, V and ``raw_scores`` (Fractions, the scores before the mask), ``scores`` (with
sympy's −∞ where ``masked``), ``scaled``, ``weights`` and ``Z`` (sympy), and ``softmax``, one
:class:`ExactRow` per row (the parts the softmax step shows); ``run.concat`` and ``run.output`` (sympy) with
several heads; ``run.factor`` is the exact divisor (``Solution.scale_factor``). The same pass with
``Interval(problem, widen=False)`` encloses every value in an interval a few units of the 50th digit wide:
the solver's 50-digit values (``Mat.num``) are the lower ends of those (or a rational's own decimal).

Backends (all three have the same methods: NEG_INF, entry, dot, factor, scale, softmax, no_exp, mix, shown)

* :class:`Exact`: Q, K, V, ``raw_scores`` and the unmasked scores are ``Fraction``; a masked score is
  sympy's ``-oo``; the factor, scaled, weights, Z, concat and output are sympy values (√2, e^{√2}/(…)).
  Each row's softmax is kept as an :class:`ExactRow` (``HeadPass.softmax``): the unmasked columns, the
  column of the smallest score, each x − smallest (``shifted``), e^(x − smallest) (``numer``) and their sum
  ``D``, so weight = numer[j]/D and Z[i][c] = Σ numer[j]·V[j][c] / D; and each e^x itself (``exps``) with
  their sum (``total``): the forms the worked solution shows. Those sums' terms are a rational times e^x, the
  scores being rationals of one unit (1/√d_k or 1): the backend collects like terms by exponent itself and
  builds each sum in sympy's canonical order (``_exp_sum``), the same tree sympy's evaluated sum gives, which
  spares ``worked solve`` the modules sympy's ``Add`` imports on the first sum it evaluates.
* :class:`Float`: Python floats (``-inf`` for a masked score); the softmax subtracts the row's largest
  score before e^x. Fast; for generating problems and the values of mistakes in quizzes.
* :class:`Interval`: ``(lo, hi)`` pairs of 50-digit Decimals that enclose the value, computed in worked's
  own decimal contexts (:data:`worked.numfmt.DOWN` and :data:`~worked.numfmt.UP` round each end outward;
  e^x and √ are correctly rounded to the nearest, so their ends are moved one unit outward; the thread's
  decimal context is neither used nor changed); ``None`` for −∞. With ``widen=True`` each
  computed entry may be rounded by a careful student to the problem's decimals (√d_k to at least 2
  places, each e^x keeping 3 significant digits of a small one), so it is widened by half a unit of the
  last place before it is used further; Z keeps its dependence on the e^x of its row. ``widen=False``
  gives the exact values, enclosed (a point where the value is a 50-digit decimal). ``round_exp=True``
  rounds every e^x to the problem's places (to the nearest): the
  values of a student who rounded e^x early. This is what ``worked check`` judges answers with.
"""
from __future__ import annotations

import functools
import math
from decimal import MAX_EMAX, MIN_EMIN, ROUND_HALF_UP, Context, Decimal
from fractions import Fraction
from typing import Any, Callable

from . import numfmt as F
from . import stages
from .slips import Transform  # noqa: F401  (a mistake's change to the pass: declared with the mistakes)


class _NotGiven:
    def __repr__(self):
        return "NA"


NA = _NotGiven()   # in *given*: this entry was not given (compute it)



class _Values:
    """Matrices by stage id, also as attributes (``hp.values["weights"]`` is ``hp.weights``)."""

    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("_") or name == "values":
            raise AttributeError(name)
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None


class HeadPass(_Values):
    """One head's matrices, as computed, by the id of the stage (``Pass.matrices`` has the same under their
    keys): ``hp.values["scores"]`` or ``hp.scores``; and what the stages leave for the worked steps."""

    __slots__ = ("values", "raw_scores", "masked", "softmax")

    def __init__(self, values: dict, raw_scores: list, masked: frozenset, softmax: list):
        self.values = values            # stage id → its matrix (Q … Z)
        self.raw_scores = raw_scores    # the products before the mask (Q·Kᵀ, or K·Qᵀ under that transform)
        self.masked = masked            # (row, col) of the entries the mask hid
        self.softmax = softmax          # per row, the backend's softmax state (Exact: ExactRow), or None


class HeadGrad(_Values):
    """One head's gradients (the backward pass), as computed, by the id of the stage (``g.dS``: the gradient of
    the scaled scores, ``g.dscores``: of the scores), with the head's gradient of its output it starts from
    (``g.dZ``); ``Pass.matrices`` has them under their keys."""

    __slots__ = ("values", "rowsum", "dW", "new")

    def __init__(self, values: dict, rowsum: list, dW: dict, new: dict):
        self.values = values            # stage id → its matrix
        self.rowsum = rowsum            # per row i: Σ_k A_ik·dA_ik (the softmax backward's Σ term)
        self.dW = dW                    # "W_Q", "W_K", "W_V" → gradient
        self.new = new                  # "W_Q", "W_K", "W_V" → W − lr·dW


class Pass(_Values):
    """The result of :func:`forward`: filled in stage by stage. The matrices after the heads (their
    combination, the training step's loss, dZ, …) by stage id in ``values`` and as attributes (``run.concat``,
    ``run.loss``: a number for a 1×1 stage; None where the problem has no such stage)."""

    __slots__ = ("heads", "output", "factor", "shown", "carried", "grads", "after", "values")

    def __init__(self):
        self.heads: list[HeadPass] = []
        self.output: list | None = None     # the final Z (after W_O with several heads)
        self.factor: Any = None             # the divisor of the scores (after the transform)
        self.shown: dict[str, list] = {}
        self.carried: dict[str, list] = {}
        self.values: dict[str, Any] = {}    # the layer's stages (after the heads) → matrix, or number (1×1)
        # the backward pass, for a problem with a [train] table (empty otherwise)
        self.grads: list[HeadGrad] = []
        self.after: Pass | None = None      # the fresh forward pass with the updated weights (not for Exact)

    def __getattr__(self, name):
        if name in _LAYER:
            return self.values.get(name)
        return super().__getattr__(name)

    def matrices(self) -> dict[str, list]:
        """Every matrix by the keys of ``Solution.matrices()``, in step order."""
        return self.shown


_LAYER = {s.id for s in stages.every() if s.scope == "layer"} | {      # the stages after (or without) the heads,
    s.id for kind in stages.BLOCK_KINDS.values() for part in kind.values() if isinstance(part, tuple) for s in part}  # a block's


def _scalar(stage) -> bool:
    return (stage.rows, stage.cols) == ("1", "1")


def forward(problem, backend, *, transform: Transform | None = None, given: dict | None = None,
            weights: list | None = None, backward: bool = True, check_scaled: Callable | None = None,
            points: Pass | None = None, X: list | None = None, W_O: list | None = None,
            watch: Callable | None = None) -> Pass:
    """Run the attention forward pass of *problem* with *backend* (see the module docstring); for a problem
    with a ``[train]`` table, then the backward pass too (:func:`backward`) unless *backward* is False.
    *weights*: each head's (W_Q, W_K, W_V) already in the backend's numbers, instead of the problem's.
    *check_scaled*: called as ``check_scaled(head, scaled)`` with each head's scaled scores before any e^x
    is taken of them (it may raise). *points*: for a widened :class:`Interval` pass of a ``[train]`` problem,
    the point pass of the same problem, transform and *given* when it is computed already (the backward pass
    bands each stage round those points). *watch*: called as ``watch(key, grid)`` with each matrix of the forward
    pass as the backend shows it, in the order they are computed (it may raise to stop the pass: the solver's pass
    that decides the carried places stops at the first value that rounds to another answer)."""
    t = transform or Transform()
    given = given or {}
    out = Pass()
    n = problem.n

    as_is = getattr(backend, "as_is", False)

    def put(key, grid, shown=True):
        band = ([list(row) for row in grid] if as_is else [[backend.shown(x) for x in row] for row in grid]) if shown else grid
        out.shown[key] = band
        g = given.get(key)
        out.carried[key] = band if g is None else [[b if a is NA else a for a, b in zip(ga, ba)]
                                                    for ga, ba in zip(g, band)]
        if watch is not None:
            watch(key, band)
        return out.carried[key]

    def matmul(A, B):
        cols = list(zip(*B))
        return [[backend.dot(r, c) for c in cols] for r in A]

    X = _inputs(backend, problem.X) if X is None else X        # a block's heads take X0 or LN_1(X0)
    X_enc = _inputs(backend, problem.X_enc) if problem.cross else X
    arch = stages.of(problem)
    inputs = stages.sides(t, {"X": X, "X_enc": X_enc})
    if arch.attends:                # a block's heads take the stage it names (X0, or LN_1(X0))
        inputs[arch.attends] = X
    masked = stages.masked_entries(len(inputs["X"]), problem.mask, t.mask, len(inputs["X_enc" if problem.cross else "X"]))
    weights_arg = weights
    if weights is None:
        weights = [tuple(_inputs(backend, w) for w in (hd.W_Q, hd.W_K, hd.W_V)) for hd in problem.heads]
    envs: list[dict] = []      # each head's values, as they flowed on
    for h, (W_Q, W_K, W_V) in enumerate(weights, 1):
        pre = f"head{h}." if problem.multihead else ""
        run = stages.HeadRun(problem, backend, t, given, pre, h, masked, check_scaled, NA)
        env = {**inputs, "W_Q": W_Q, "W_K": W_K, "W_V": W_V}
        envs.append(env)
        for stage in arch.forward:      # Q, K, V, scores, scaled, weights, Z
            env[stage.id] = put(pre + stage.id, stage.forward(run, *(env[k] for k in stage.inputs)))
            last = pre + stage.id
        out.factor = run.factor
        out.heads.append(HeadPass({s.id: out.shown[pre + s.id] for s in arch.forward}, run.raw, masked, run.states))
    if problem.multihead:
        layer = stages.LayerRun(problem, backend, t, envs)
        env = {"W_O": _inputs(backend, problem.W_O) if W_O is None else W_O}
        for stage in arch.combine:      # concat, Z
            grid = stage.forward(layer, *(env[k] for k in stage.inputs))
            env[stage.id] = put(stage.id, grid, shown=not isinstance(grid, stages.AsIs))
            out.values[stage.id] = out.shown[stage.id]
            last = stage.id
    out.output = out.shown[last]        # the last stage's: the output
    # a mistake that changes the output's shape (the queries from the encoder side: a row per encoder token) has
    # no training step: its output cannot be compared with the target
    if backward and getattr(problem, "train", None) is not None and len(out.output) == len(problem.train.target):
        _backward(problem, backend, out, t, put, inputs, weights, given, weights_arg, points, last)
    return out


def block_forward(problem, backend, *, transform: Transform | None = None, given: dict | None = None,
                  points: Pass | None = None, weights: dict | None = None, backward: bool = True,
                  watch: Callable | None = None, lenient: bool = False) -> Pass:
    """The forward pass of a whole Transformer block (``problem.block``, issue 27) with *backend*: the stages
    before the heads (the positions, X0 = X + P, and for pre-LN LN_1), the heads and W_O as :func:`forward` runs
    them on the heads' input, then the stages after (residual adds, layer norms, the feed-forward, and with an
    output layer the logits, probabilities and loss), each where the problem has its inputs. Every matrix is in
    ``shown`` under its stage id, as :func:`forward` keeps the heads'. *given*: a student's entries (by key, NA
    where not given), carried on instead of the computed ones, as :func:`forward` does (*points* is not used).
    With a ``[train]`` table (and *backward*), then the training step: :func:`_block_backward`. *weights*: the
    weights to use instead of the problem's, in the backend's numbers, by name (``W_1``, ``b_1`` …, ``W_O``, and
    ``heads``: each head's (W_Q, W_K, W_V)). *watch*: as :func:`forward`'s, for every matrix of the forward pass.
    *lenient*: from a student's values though *given* is empty (the fresh pass after their update): a row a layer
    norm cannot normalise has no value (the backend's ``UNDEFINED``, else None), never the problem's ε error."""
    t = transform or Transform()
    given = given or {}
    weights = weights or {}
    arch = stages.of(problem)
    run = stages.BlockRun(problem, backend, t, lenient=lenient or bool(given))
    own = {k: v for k, v in weights.items() if k not in ("heads", "W_O")}     # the layer's weights given
    env = {"X": _inputs(backend, problem.X), **stages.block_inputs(problem, backend, own), **own}
    done: dict[str, list] = {}
    carried: dict[str, list] = {}

    as_is = getattr(backend, "as_is", False)

    def put(key, grid):
        band = done[key] = [list(row) for row in grid] if as_is else [[backend.shown(x) for x in row] for row in grid]    # a hand rounds each
        g = given.get(key)
        carried[key] = band if g is None else [[b if a is NA else a for a, b in zip(ga, ba)] for ga, ba in zip(g, band)]
        if watch is not None:
            watch(key, band)
        return carried[key]

    heads_env = env     # what the heads' side reads (the mistake of positions after attention: X, not X + P)
    for stage in arch.before:
        env[stage.id] = put(stage.id, stage.forward(run, *(heads_env[k] for k in stage.inputs)))
        if t.positions == "after-attention" and arch.before[0].id in stage.inputs:    # X0 = X + P: kept for the
            heads_env = {**env, stage.id: env["X"]}                                   # residual, not the heads
        elif heads_env is not env:
            heads_env[stage.id] = env[stage.id]
    out = forward(problem, backend, transform=t, X=heads_env[arch.attends], backward=False, given=given,
                  weights=weights.get("heads"), W_O=weights.get("W_O"), watch=watch)
    env[stages.OUTPUT] = out.carried[stages.OUTPUT]
    for stage in arch.runs(stages.Dims.of_problem(problem)):  # the output layer only with W_out, the loss with targets
        env[stage.id] = put(stage.id, stage.forward(run, *(env[k] for k in stage.inputs)))
    before = {k: done[k] for k in (s.id for s in arch.before)}
    out.shown = {**before, **out.shown, **{k: v for k, v in done.items() if k not in before}}
    out.carried = {**{k: carried[k] for k in before}, **out.carried, **{k: v for k, v in carried.items() if k not in before}}
    out.values.update({s.id: done[s.id][0][0] if _scalar(s) else done[s.id] for s in arch.before + arch.after
                       if s.id in done})      # the loss a number, as the attention's
    if backward and problem.train is not None:
        _block_backward(problem, backend, t, out, {**env, arch.attends: heads_env[arch.attends]},
                        stages.BLOCK_KINDS[problem.block.kind], weights, given)
    return out


def _block_backward(problem, b, t: Transform, out: Pass, env: dict, kind: dict, weights: dict,
                    given: dict | None = None) -> None:
    """One training step of a block (``[train] loss = "cross-entropy"``), after its forward pass *out*: the layer's
    gradients from the logits down to the attention's output dZ (``kind["train"]``), each head's (the attention's
    own backward stages, on its block of dconcat and the heads' input), pre-LN's LN_1 after them
    (``kind["after_heads"]``), every weight updated, W − lr·dW (the heads' by the attention's update stages), and
    the loss after: a fresh pass with the new weights. Every matrix is in ``shown`` (the heads' as ``head1.dQ``
    …), ``loss_after`` the new loss (a number, as ``loss``), ``after`` its pass. The Exact backend has no closed
    form here. *given*: a student's entries (by key, NA where not given), carried on instead of the computed ones
    (each matrix in ``shown`` is computed from the ones before it as carried), as :func:`block_forward` does."""
    given = given or {}

    def carry(key, grid):
        g = given.get(key)
        return grid if g is None else [[c if a is NA else a for a, c in zip(ga, ca)] for ga, ca in zip(g, grid)]

    run = stages.BlockRun(problem, b, t, lenient=bool(given))
    env = {**env, **out.values, "targets": list(problem.block.targets),
           "W_O": weights.get("W_O") or _inputs(b, problem.W_O)}      # the heads' combination: concat, Z

    shown = lambda grid: [[b.shown(x) for x in row] for row in grid]  # noqa: E731  (a hand rounds each)

    def layer(part):
        for stage in stages.in_order(part, env):
            out.shown[stage.id] = shown(stage.forward(run, *(env[k] for k in stage.inputs)))
            env[stage.id] = carry(stage.id, out.shown[stage.id])
            out.values[stage.id] = env[stage.id][0][0] if _scalar(stage) else env[stage.id]

    layer(kind["train"])
    arch = stages.SELF
    per_head = [s for s in arch.train + arch.update if s.scope == "head"]
    split = next(s for s in kind["train"] if s.by_head)         # dconcat: each head's block of its columns
    dv, lr = problem.d_v, b.entry(problem.train.lr)
    ws = weights.get("heads") or [tuple(_inputs(b, w) for w in (hd.W_Q, hd.W_K, hd.W_V)) for hd in problem.heads]
    heads, new_heads = [], []
    for h, (hp, W) in enumerate(zip(out.heads, ws), 1):
        hv = {"X": env[kind["attends"]], "W_Q": W[0], "W_K": W[1], "W_V": W[2], **hp.values,
              split.by_head: [row[(h - 1) * dv:h * dv] for row in env[split.id]]}
        out.shown[f"head{h}.{split.by_head}"] = hv[split.by_head]      # each head's block of dconcat (its dZ)
        hv[split.by_head] = carry(f"head{h}.{split.by_head}", hv[split.by_head])
        brun = stages.BackRun(problem, b, t, out.factor, lr, hp.masked)
        for stage in stages.in_order(per_head, hv):
            out.shown[f"head{h}.{stage.id}"] = shown(stage.forward(brun, *(hv[k] for k in stage.inputs)))
            hv[stage.id] = carry(f"head{h}.{stage.id}", out.shown[f"head{h}.{stage.id}"])
        heads.append(hv)
        new_heads.append(tuple(hv[w + "_new"] for w in ("W_Q", "W_K", "W_V")))
        out.grads.append(HeadGrad({s.id: hv[s.id] for s in per_head}, brun.rowsum,
                                  {w: hv["d" + w] for w in ("W_Q", "W_K", "W_V")},
                                  {w: hv[w + "_new"] for w in ("W_Q", "W_K", "W_V")}))
    env["head_grads"] = heads
    layer(kind["after_heads"])
    updates = [s for s in kind["update"] if not _scalar(s)]
    layer(updates)
    # the vectors (b_1, γ, β: 1 × k matrices of the update) as the stages take them, lists
    new = {"heads": new_heads, **{s.inputs[0]: stages.flat(env[s.id]) if s.rows == "1" else env[s.id] for s in updates}}
    after = next(s for s in kind["update"] if _scalar(s))       # the loss after, from the fresh pass's loss
    try:
        out.after = block_forward(problem, b, transform=t, weights=new, backward=False, lenient=bool(given))
    except ArithmeticError:
        # a student's gradients (intervals of their rounding) through the fresh pass's layer norms widen past
        # use: the loss after has no value from them (as a layer norm of variance 0 has none), never an error
        if not given:
            raise
        out.after, out.shown[after.id], out.values[after.id] = None, [[None]], None
        return
    env[after.inputs[0]] = out.after.shown[_loss_id(kind)]
    layer((after,))


def _loss_id(kind: dict) -> str:
    """The id of a block's loss (its one 1 × 1 stage)."""
    return next(s.id for s in kind["after"] if _scalar(s))


def block_loss(problem, backend, weights: dict | None = None):
    """The loss of the block's forward pass (a 1 × 1 matrix's entry), with *weights* instead of the problem's
    where given (see :func:`block_forward`)."""
    run = block_forward(problem, backend, weights=weights, backward=False)
    return run.values[_loss_id(stages.BLOCK_KINDS[problem.block.kind])]


def block_weight(problem, backend, name: str):
    """The problem's weight *name* in the backend's numbers, as :func:`block_forward`'s *weights* takes it:
    ``W_1``, ``b_1``, ``gamma_1`` …, ``W_O``, or a head's ``head2.W_Q`` (as the value of ``heads``)."""
    if "." in name:
        h, w = name.split(".")
        ws = [[_inputs(backend, m) for m in (hd.W_Q, hd.W_K, hd.W_V)] for hd in problem.heads]
        return "heads", ws, (int(h.removeprefix("head")) - 1, ("W_Q", "W_K", "W_V").index(w))
    if name == "W_O":
        return name, _inputs(backend, problem.W_O), None
    return name, stages.block_inputs(problem, backend)[name], None


def block_central_difference(problem, backend, name: str, r: int, c: int, h):
    """(L(w + h) − L(w − h))/2h for entry (r, c) of the weight *name* (row r of a vector is 0): the numerical check
    of the backward pass's entry ``d`` + *name* (a head's ``head1.W_Q``: of ``head1.dW_Q``)."""
    losses = []
    for sign in (1, -1):
        key, value, where = block_weight(problem, backend, name)
        m = value[where[0]][where[1]] if where else value
        delta = backend.mul(backend.entry(Fraction(sign)), backend.entry(Fraction(h)))
        if isinstance(m[0], list):
            m[r][c] = backend.add(m[r][c], delta)
        else:
            m[c] = backend.add(m[c], delta)
        losses.append(block_loss(problem, backend, {key: value}))
    return backend.div(backend.sub(losses[0], losses[1]), backend.entry(2 * Fraction(h)))


def run_pass(problem, backend, **kw) -> Pass:
    """The forward pass of *problem* with *backend*: a Transformer block's (:func:`block_forward`), else the
    attention's (:func:`forward`)."""
    if getattr(problem, "block", None) is not None:
        return block_forward(problem, backend, **kw)
    return forward(problem, backend, **kw)


def block_exact(problem, nums: Pass) -> Pass:
    """A block's Exact pass: the stages before the heads in closed form where they have a small one (P: sin and cos
    of rationals, X0 = X + P; a layer norm's entries are :data:`INEXACT` unless rational), every later value
    :data:`INEXACT` (its closed form explodes: a layer norm of softmax rows), as the training step keeps a
    gradient; the solver takes those from the 50-digit pass *nums* (the :class:`Interval` point pass), and −∞ where
    the mask hides a score. The divisor of the scores is exact."""
    b = Exact()
    arch = stages.of(problem)
    run = stages.BlockRun(problem, b, Transform())
    env = {"X": _inputs(b, problem.X), **stages.block_inputs(problem, b)}
    out = Pass()
    for stage in arch.before:
        env[stage.id] = out.shown[stage.id] = stage.forward(run, *(env[k] for k in stage.inputs))
    inexact = lambda grid: [[b.NEG_INF if iv is None else INEXACT for iv in row] for row in grid]  # noqa: E731
    for key, grid in nums.shown.items():
        if key not in out.shown:
            out.shown[key] = inexact(grid)
    out.carried = out.shown
    out.factor = b.factor(problem, None)
    for hp in nums.heads:
        out.heads.append(HeadPass({k: inexact(v) for k, v in hp.values.items()}, inexact(hp.raw_scores), hp.masked,
                                  [None] * len(hp.raw_scores)))
    out.output = out.shown[stages.OUTPUT]
    out.values.update({k: out.shown[k] for k in nums.values if k in out.shown})
    return out


def backward(problem, backend, *, transform: Transform | None = None, given: dict | None = None) -> Pass:
    """The forward pass and then one training step of a problem with a ``[train]`` table (MSE against the
    target T): the :class:`Pass` of :func:`forward` with ``loss``, ``dZ`` (and ``dconcat`` with several
    heads), one :class:`HeadGrad` per head in ``grads``, and (not for :class:`Exact`, whose updated
    weights are transcendental) ``after``, the fresh forward pass with the updated weights, and its
    ``loss_after``. The matrices are in ``shown``/``carried`` under the keys ``loss``, ``dZ``, (``dconcat``,
    ``head1.dZ``, …), ``dV``, ``dA``, ``dS``, ``dscores``, ``dQ``, ``dK``, ``dW_Q``, ``dW_K``, ``dW_V``,
    ``W_Q_new``, ``W_K_new``, ``W_V_new`` and ``loss_after`` (a 1×1 matrix, as ``loss``).

    The formulas, per head (A the weights, f the factor, ``lr`` the learning rate)::

        L = ½ Σ (Z − T)²      dZ = Z − T           (several heads: dconcat = dZ·W_Oᵀ, split by head)
        dV = Aᵀ·dZ            dA = dZ·Vᵀ
        dS_ij = A_ij·(dA_ij − Σ_k A_ik·dA_ik)      (0 where the mask hid the score)
        dscores = dS / f      dQ = dscores·K       dK = dscoresᵀ·Q
        dW_Q = Xᵀ·dQ          dW_K = Xᵀ·dK         dW_V = Xᵀ·dV       W_new = W − lr·dW

    *transform*'s backward fields make the known mistakes (:mod:`worked.mistakes`); *given* substitutes a
    student's entries, as in :func:`forward`."""
    if getattr(problem, "train", None) is None:
        raise ValueError("the problem has no [train] table")
    return forward(problem, backend, transform=transform, given=given)


def _backward(problem, backend, out: Pass, t: Transform, put, inputs, weights, given, weights_given, points=None,
              out_key: str = "") -> None:
    tr = problem.train
    b = backend
    arch = stages.of(problem)

    # a careful student's rounding: with widen, each stage is computed from the exact values of the matrices it
    # uses (a point pass, with the given entries), each widened by its own rounding once, and then widened for
    # its own rounding (bands carried through the whole chain would accept nearly anything late in it)
    pts = None
    if getattr(b, "widen", False):
        pts = points if points is not None and weights_given is None else forward(
            problem, Interval(problem, widen=False), transform=t, given=given, weights=weights_given, backward=True)

    gin = getattr(b, "grad_in", None)   # Exact: the forward's values as rationals or INEXACT

    def use(key, grid=None):
        if pts is None:
            got = out.carried[key] if grid is None else grid
            return got if gin is None else [[gin(x) for x in row] for row in got]
        return [[b.shown(x) for x in row] for row in pts.carried[key]]

    def step(key, grid, shown=True):
        put(key, grid, shown)
        return use(key)

    layer = {out_key: use(out_key), "T": _inputs(b, tr.target)}     # the output (its key is its stage's id), the target
    if problem.multihead:
        layer["W_O"] = _inputs(b, problem.W_O)
    lrun = stages.BackRun(problem, b, t, out.factor, b.entry(tr.lr))
    several = problem.multihead
    for stage in stages.in_order([s for s in arch.train if s.scope == "layer" and (several or s.several)], layer):
        layer[stage.id] = step(stage.id, stage.forward(lrun, *(layer[k] for k in stage.inputs)))
        out.values[stage.id] = layer[stage.id][0][0] if _scalar(stage) else out.shown[stage.id]
    per_head = [s for s in arch.train + arch.update if s.scope == "head"]
    forward_ids = {s.id for s in arch.forward}
    heads_in = {k for s in per_head for k in s.inputs if k in layer}     # what the heads take from the layer: dZ
    # with several heads, a layer matrix whose columns are the heads' own (dconcat: each head's dZ), split
    split = next((s for s in arch.train if several and s.by_head and s.id in layer), None)
    updates = [s for s in arch.update if s.scope == "head"]     # each of a head's weights (s.inputs: W, dW) updated
    own = [{} for _ in out.heads]      # each head's block of the split's columns, every head's first
    if split is not None:
        dv = problem.d_v
        for h, blocks in enumerate(own, 1):
            blocks[split.by_head] = step(f"head{h}.{split.by_head}",
                                         [row[(h - 1) * dv:h * dv] for row in layer[split.id]], shown=False)
    new_weights = []
    for h, (hp, W) in enumerate(zip(out.heads, weights), 1):
        pre = f"head{h}." if several else ""
        env = {**inputs, "W_Q": W[0], "W_K": W[1], "W_V": W[2], **{k: layer[k] for k in heads_in}, **own[h - 1],
               **{k: use(pre + k) for k in sorted({k for s in per_head for k in s.inputs if k in forward_ids})}}
        run = stages.BackRun(problem, b, t, out.factor, lrun.lr, hp.masked)
        for stage in stages.in_order(per_head, env):
            env[stage.id] = step(pre + stage.id, stage.forward(run, *(env[k] for k in stage.inputs)))
        new = {s.inputs[0]: env[s.id] for s in updates}
        new_weights.append((new["W_Q"], new["W_K"], new["W_V"]))
        sh = lambda k: out.shown[pre + k] if pre + k in out.shown else out.shown[k]  # noqa: E731
        out.grads.append(HeadGrad({k: sh(k) for k in sorted(heads_in) + [s.id for s in per_head]}, run.rowsum,
                                  {s.inputs[0]: sh(s.inputs[1]) for s in updates},
                                  {s.inputs[0]: sh(s.id) for s in updates}))
    if getattr(b, "closed_form_only", False):
        return          # Exact: the updated weights are transcendental (the solver rounds them, then runs forward)
    try:
        after = forward(problem, b, weights=new_weights, backward=False,
                        check_scaled=lambda h, S: _check_after(problem, b, h, S))
    except _AfterTooLarge as exc:
        if t == Transform() and not given and weights_given is None:
            raise exc.error(problem) from None      # the problem's own step: the learning rate is too large
        # a mistake's update, or a student's own entries carried forward: that step has no new loss a hand
        # could work out; it is a value no answer matches (never e^x of a score past the limit)
        out.after = None
        for stage in (s for s in arch.update if s.scope == "layer"):
            out.values[stage.id] = put(stage.id, [[b.beyond()]])[0][0]
        return
    out.after = after
    layer["Z_after"] = after.output
    for stage in (s for s in arch.update if s.scope == "layer"):      # the loss after the update
        layer[stage.id] = put(stage.id, stage.forward(lrun, *(layer[k] for k in stage.inputs)))
        out.values[stage.id] = layer[stage.id][0][0] if _scalar(stage) else out.shown[stage.id]


class _AfterTooLarge(Exception):
    """A scaled score of the pass after the update passed the limit (raised before any e^x of it)."""

    def __init__(self, head: int, row: int, size: float):
        super().__init__(head, row, size)
        self.head, self.row, self.size = head, row, size

    def error(self, problem):
        from .errors import ProblemError
        from .problem import LIMITS, exact_text

        top = self.size
        size = "a size beyond any float" if top == math.inf else f"about {top:.3g}" if top >= 1e6 else f"about {top:.0f}"
        head_txt = f" of head {self.head}" if problem.multihead else ""
        return ProblemError("train.lr", f"lr = {exact_text(problem.train.lr)} is too large for this problem: the "
                            f"step makes a scaled score in row {self.row + 1}{head_txt} reach {size} after the update "
                            f"(at most {LIMITS['scaled']} in size, as before the step); use a smaller lr",
                            problem.source)


def _check_after(problem, b, head: int, scaled) -> None:
    """The pass after the update keeps the limit on scaled scores (:data:`worked.problem.LIMITS` ``"scaled"``):
    a step that makes one larger is the learning rate's doing (raised before any e^x of it)."""
    from .problem import LIMITS

    top, where = 0.0, None
    for i, row in enumerate(scaled):
        for x in row:
            v = b.magnitude(x)
            if v is not None and (v != v or v > top):     # NaN: a float overflow, too large
                top, where = (math.inf if v != v else v), i
    if top > LIMITS["scaled"]:
        raise _AfterTooLarge(head, where, top)


def loss_of(problem, backend, run: Pass):
    """½ Σ (Z − T)² of a pass's output against the problem's target, in *backend*'s numbers."""
    T = _inputs(backend, problem.train.target)
    d = [backend.sub(z, y) for zr, yr in zip(run.output, T) for z, y in zip(zr, yr)]
    return backend.mul(backend.entry(Fraction(1, 2)), backend.total([backend.mul(x, x) for x in d]))


def _inputs(backend, M) -> list:
    return [[backend.entry(x) for x in row] for row in M]


def _divisor(problem, how):
    """("sqrt", d_k) / ("one", 1) / ("number", Fraction): what divides the scores."""
    if how == "one" or (how is None and problem.scale == "none"):
        return "number", Fraction(1)
    if how == "d_k":
        return "number", Fraction(problem.d_k)
    if how is not None:
        raise ValueError(f"unknown scale transform {how!r}")
    if problem.scale == "sqrt":
        return "sqrt", problem.d_k
    return "number", Fraction(problem.scale)


# ---------------------------------------------------------------- exact: Fractions, then sympy

class ExactRow:
    """One row's exact softmax: weight[j] = numer[j] / D with numer[j] = e^(scaled[j] − shift); ``exps`` and
    ``total`` are the same without the shift (e^(scaled[j]) and their sum: the forms the worked step shows)."""

    __slots__ = ("js", "low", "shift", "shifted", "numer", "D", "exps", "total")

    def __init__(self, js: list[int], low: int, shift, shifted: dict, numer: dict, D, exps: dict, total):
        self.js = js                # the unmasked columns
        self.low = low              # the column of the smallest scaled score
        self.shift = shift          # that smallest score (sympy)
        self.shifted = shifted      # column → scaled[j] − shift
        self.numer = numer          # column → e^(scaled[j] − shift)
        self.D = D                  # Σ numer
        self.exps = exps            # column → e^(scaled[j])
        self.total = total          # Σ exps (like terms collected: 2e^(√2))


class _Inexact:
    """The value of a gradient entry that the :class:`Exact` backend does not keep in closed form (see there)."""

    __slots__ = ()

    def __repr__(self):
        return "INEXACT"

    def __reduce__(self):
        return "INEXACT"


INEXACT = _Inexact()


def _zero(x) -> bool:
    return isinstance(x, Fraction) and not x


class Exact:
    """Exact values: Fractions for the products of the inputs, sympy from the scaling on.

    The backward pass of a ``[train]`` problem is kept exactly only where it is rational: each value is a
    ``Fraction`` (a masked entry's 0, a row of equal weights, a product with 0) or :data:`INEXACT`, a value with
    no closed form kept. Its closed form would grow with every stage (about n⁴·d terms for an entry of dW: 9 kB
    of text for Part 9, 300 kB for six tokens, minutes to build and print), so the solver takes such an
    entry's value from the 50-digit pass, as it does for the loss after the update."""

    def __init__(self):
        import sympy as sp

        self.sp = sp
        self.NEG_INF = sp.S.NegativeInfinity
        self._inv: dict = {}
        self._order = functools.cmp_to_key(sp.Basic.compare)   # sympy's canonical order of a sum's terms

    def _sym(self, x):
        return self.sp.Rational(x.numerator, x.denominator) if isinstance(x, Fraction) else x

    def entry(self, x: Fraction):
        return Fraction(x)

    def dot(self, xs, ys):
        if all(isinstance(x, Fraction) for x in xs) and all(isinstance(y, Fraction) for y in ys):
            return sum((x * y for x, y in zip(xs, ys)), Fraction(0))
        pairs = [(x, y) for x, y in zip(xs, ys) if not _zero(x) and not _zero(y)]   # 0·x is 0: nothing to build
        if any(x is INEXACT or y is INEXACT for x, y in pairs):
            return INEXACT
        if all(isinstance(x, Fraction) and isinstance(y, Fraction) for x, y in pairs):
            return sum((x * y for x, y in pairs), Fraction(0))
        return self.sp.Add(*[self._sym(x) * self._sym(y) for x, y in pairs])

    def factor(self, problem, how):
        kind, v = _divisor(problem, how)
        return self.sp.sqrt(v) if kind == "sqrt" else self._sym(v)

    def scale(self, s, factor):
        if s is self.NEG_INF:
            return s
        inv = self._inv.get(factor)
        if inv is None:
            inv = self._inv[factor] = 1 / factor
        return self._sym(s) * inv

    def _common(self, row, js):
        """The entries of a scaled row as rationals times one positive number (1/√d_k, or 1), when they are
        that (they are, but for a student's own entries): ``({j: coefficient}, number)``, else None."""
        parts = {j: self._sym(row[j]).as_coeff_Mul() for j in js}
        rests = {r for c, r in parts.values() if c != 0}
        if len(rests) > 1 or not all(r.is_positive for r in rests):
            return None
        return {j: c for j, (c, _) in parts.items()}, next(iter(rests), self.sp.S.One)

    @staticmethod
    def _tally(exponents, js, weights=None):
        """{x: Σ weight} over the columns *js* with exponent x (each weight 1 when *weights* is None): the
        coefficients of Σ_j weight_j·e^(x_j), like terms collected."""
        out: dict = {}
        for j in js:
            x = exponents[j]
            out[x] = out.get(x, Fraction(0)) + (1 if weights is None else weights[j])
        return out

    def _exp_sum(self, coeffs):
        """Σ c·e^x for ``{x: c}`` (x sympy, c rational), each x once (like terms collected by :meth:`_tally`):
        sympy's sum of those terms, its number first and the rest in sympy's canonical order, as ``Add``
        itself orders them; built as it stands, since nothing in it is left to collect."""
        sp = self.sp
        const, terms = Fraction(0), []
        for x, c in coeffs.items():
            if not c:
                continue
            if x == 0:
                const += c
            else:
                terms.append(self._sym(c) * sp.exp(x))
        terms.sort(key=self._order)
        if const:
            terms.insert(0, self._sym(Fraction(const)))
        if len(terms) < 2:
            return terms[0] if terms else sp.Integer(0)
        return sp.Add(*terms, evaluate=False)

    def softmax(self, row):
        sp = self.sp
        js = [j for j, x in enumerate(row) if x is not self.NEG_INF]
        if not js:
            return [sp.Integer(0)] * len(row), None
        common = self._common(row, js)
        if common is not None:   # ordered and subtracted by their coefficients: nothing evaluated
            coeff, unit = common
            low = min(js, key=coeff.__getitem__)
            shifted = {j: (coeff[j] - coeff[low]) * unit for j in js}
        else:
            low = min(js, key=lambda j: self._sym(row[j]))
            shifted = {j: self._sym(row[j]) - self._sym(row[low]) for j in js}
        shift = self._sym(row[low])
        numer = {j: sp.exp(d) for j, d in shifted.items()}
        exps = {j: sp.exp(self._sym(row[j])) for j in js}
        if common is not None:
            D = self._exp_sum(self._tally(shifted, js))
            total = self._exp_sum(self._tally({j: self._sym(row[j]) for j in js}, js))
        else:
            D, total = sp.Add(*numer.values()), sp.Add(*exps.values())
        state = ExactRow(js, low, shift, shifted, numer, D, exps, total)
        return [numer[j] / D if j in numer else sp.Integer(0) for j in range(len(row))], state

    closed_form_only = True   # the updated weights are transcendental: no fresh forward pass here

    def grad_in(self, x):
        """A forward value as the backward pass takes it: a Fraction when it is rational, else INEXACT."""
        if isinstance(x, Fraction) or x is INEXACT:
            return x
        if getattr(x, "is_Rational", False):
            return Fraction(int(x.p), int(x.q))
        return INEXACT

    def add(self, a, b):
        if isinstance(a, Fraction) and isinstance(b, Fraction):
            return a + b
        if a is INEXACT or b is INEXACT:
            return INEXACT
        return self._sym(a) + self._sym(b)

    def sub(self, a, b):
        if isinstance(a, Fraction) and isinstance(b, Fraction):
            return a - b
        if a is INEXACT or b is INEXACT:
            return INEXACT
        return self._sym(a) - self._sym(b)

    def mul(self, a, b):
        if isinstance(a, Fraction) and isinstance(b, Fraction):
            return a * b
        if _zero(a) or _zero(b):
            return Fraction(0)
        if a is INEXACT or b is INEXACT:
            return INEXACT
        return self._sym(a) * self._sym(b)

    def total(self, xs):
        xs = list(xs)
        if all(isinstance(x, Fraction) for x in xs):
            return sum(xs, Fraction(0))
        if any(x is INEXACT for x in xs):
            return INEXACT
        return self.sp.Add(*[self._sym(x) for x in xs])

    def no_exp(self, row):
        sp = self.sp
        js = [j for j, x in enumerate(row) if x is not self.NEG_INF]
        total = sp.Add(*[self._sym(row[j]) for j in js])
        return [self._sym(x) / total if j in js else sp.Integer(0) for j, x in enumerate(row)]

    def position(self, pos: int, col: int, d_model: int, swapped: bool = False):
        """P[pos, col] exactly: sin or cos of pos / 10000^(2i/d_model), a sympy value (0 and 1 at pos 0)."""
        sp = self.sp
        two_i = col - col % 2
        angle = sp.Integer(pos) / sp.Integer(10000) ** sp.Rational(two_i, d_model)
        return (sp.sin if (col % 2 == 0) != swapped else sp.cos)(angle)

    # a Transformer block's arithmetic (issue 27), where a closed form stays small: rationals exactly, the rest INEXACT
    def div(self, a, b):
        return a / b if isinstance(a, Fraction) and isinstance(b, Fraction) and b else INEXACT

    def sqrt(self, x):
        if isinstance(x, Fraction) and x >= 0:
            r = (math.isqrt(x.numerator), math.isqrt(x.denominator))
            if Fraction(r[0] ** 2, r[1] ** 2) == x:
                return Fraction(*r)
        return INEXACT

    def relu(self, x):
        return max(x, Fraction(0)) if isinstance(x, Fraction) else INEXACT

    def ln(self, x):
        return Fraction(0) if isinstance(x, Fraction) and x == 1 else INEXACT

    def may_be_zero(self, x) -> bool:
        return _zero(x)

    def mix(self, state, a_row, v_col):
        sp = self.sp
        if state is not None and all(isinstance(v_col[j], Fraction) for j in state.js):
            return self._exp_sum(self._tally(state.shifted, state.js, v_col)) / state.D
        if state is not None:
            return sp.Add(*[state.numer[j] * self._sym(v_col[j]) for j in state.js]) / state.D
        return sp.Add(*[self._sym(a) * self._sym(v) for a, v in zip(a_row, v_col)])

    def shown(self, x):
        return x

    def carry(self, x):
        """A value shown inside a stage (the softmax backward's row sum) as it flows on: unchanged here."""
        return x

    def scale_grad(self, g, factor):
        """A gradient divided by the factor on the way back (dscores = dS / factor): rational when both are
        (or g is 0), INEXACT when g is or the factor is irrational (a nonzero rational over √d_k is irrational)."""
        if g is INEXACT or _zero(g):
            return g
        if isinstance(g, Fraction):
            return g / F.frac(factor) if F.is_rational(factor) else INEXACT
        return self.scale(g, factor)


# ---------------------------------------------------------------- floats

class Float:
    """Python floats (``-inf`` for a masked score; NaN where a mistake's pass has no value, as a layer norm of a row
    of variance 0)."""

    NEG_INF = -math.inf
    UNDEFINED = math.nan
    as_is = True        # shown and carried as computed (a pass copies its grids without calling shown)

    def entry(self, x: Fraction) -> float:
        return x.numerator / x.denominator if type(x) is Fraction else float(x)    # float(x), without its frames

    def dot(self, xs, ys) -> float:
        return math.fsum(x * y for x, y in zip(xs, ys))

    def factor(self, problem, how) -> float:
        kind, v = _divisor(problem, how)
        return math.sqrt(v) if kind == "sqrt" else float(v)

    def scale(self, s, factor):
        return s / factor

    def softmax(self, row):
        live = [x for x in row if x != -math.inf]
        if not live:
            return [0.0] * len(row), None
        m = max(live)
        e = [0.0 if x == -math.inf else math.exp(x - m) for x in row]
        total = math.fsum(e)
        return [x / total for x in e], None

    def no_exp(self, row):
        total = math.fsum(x for x in row if x != -math.inf)
        if total == 0:
            return [math.nan] * len(row)
        return [0.0 if x == -math.inf else x / total for x in row]

    def mix(self, state, a_row, v_col) -> float:
        return math.fsum(a * v for a, v in zip(a_row, v_col))

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def total(self, xs):
        return math.fsum(xs)

    def shown(self, x):
        return x

    def carry(self, x):
        return x

    def scale_grad(self, g, factor):
        return g / factor

    def magnitude(self, x):
        """|x| (None for −∞, a masked score)."""
        return None if x == -math.inf else abs(x)

    # a Transformer block's arithmetic (issue 27): positions, layer norm, ReLU, the loss
    def position(self, pos: int, col: int, d_model: int, swapped: bool = False) -> float:
        angle = pos / 10000 ** ((col - col % 2) / d_model)
        return (math.cos if (col % 2 == 0) == swapped else math.sin)(angle)

    def div(self, a, b):
        return a / b

    def sqrt(self, x):
        return math.sqrt(x)

    def relu(self, x):
        return x if x > 0 or x != x else 0.0        # NaN (no value) stays NaN

    def relu_back(self, g, u):
        """The gradient *g* through ReLU at *u*: g above 0, else 0 (PyTorch's slope at 0 is 0 too); NaN where
        *u* has no value."""
        return g if u > 0 else math.nan if u != u else 0.0

    def ln(self, x):
        return math.log(x)

    def may_be_zero(self, x) -> bool:
        return x is None or x == 0

    def beyond(self):
        """A value no answer matches (the loss after a step that has none a hand could work out)."""
        return math.inf


# ---------------------------------------------------------------- intervals (what `worked check` uses)

DOWN, UP = F.DOWN, F.UP
_ZERO = Decimal(0)
_NARROW = Decimal("1e-10")


def pt(x):
    """The point interval (x, x)."""
    return (x, x)


def iv_add(a, b):
    return (DOWN.add(a[0], b[0]), UP.add(a[1], b[1]))


def iv_mul(a, b):
    (a0, a1), (b0, b1) = a, b
    if a0 >= 0:                 # the common cases first: neither factor changes sign
        if b0 >= 0:
            return (DOWN.multiply(a0, b0), UP.multiply(a1, b1))
        if b1 <= 0:
            return (DOWN.multiply(a1, b0), UP.multiply(a0, b1))
    elif a1 <= 0:
        if b0 >= 0:
            return (DOWN.multiply(a0, b1), UP.multiply(a1, b0))
        if b1 <= 0:
            return (DOWN.multiply(a1, b1), UP.multiply(a0, b0))
    pairs = ((a0, b0), (a0, b1), (a1, b0), (a1, b1))
    return (min(DOWN.multiply(x, y) for x, y in pairs), max(UP.multiply(x, y) for x, y in pairs))


def iv_div(a, b):
    """a / b, or None when b may be 0."""
    if b[0] <= 0 <= b[1]:
        return None
    pairs = ((a[0], b[0]), (a[0], b[1]), (a[1], b[0]), (a[1], b[1]))
    return (min(DOWN.divide(x, y) for x, y in pairs), max(UP.divide(x, y) for x, y in pairs))


def iv_exp(a):
    """e^a: decimal's exp is correctly rounded to the nearest, so one unit outward encloses e^x. On a narrow
    interval (width w ≤ 10⁻¹⁰, as in a point pass) e^hi = e^lo·e^w ≤ e^lo·(1 + 2w), which saves the second e^x."""
    lo = DOWN.next_minus(DOWN.exp(a[0]))
    w = UP.subtract(a[1], a[0])
    if w <= _NARROW:
        return (lo, UP.multiply(UP.next_plus(UP.next_plus(lo)), UP.add(1, UP.multiply(2, w))))
    return (lo, UP.next_plus(UP.exp(a[1])))


def iv_sum(ivs):
    lo = hi = _ZERO
    for a, b in ivs:
        lo, hi = DOWN.add(lo, a), UP.add(hi, b)
    return (lo, hi)


SLACK = Decimal("1e-30")
_BEYOND = Decimal("1e100000")


def contains(iv, x, slack=SLACK) -> bool:
    return DOWN.subtract(iv[0], slack) <= x <= UP.add(iv[1], slack)


def iv_frac(f: Fraction):
    """The interval of a Fraction: its 50-digit ends (a point when it is a 50-digit decimal)."""
    return (DOWN.divide(f.numerator, f.denominator), UP.divide(f.numerator, f.denominator))


_TRIG = Context(prec=100, Emax=MAX_EMAX, Emin=MIN_EMIN)     # the positions' sin and cos, then enclosed
_TRIG_SLACK = Decimal("1e-70")


def trig_value(angle: Decimal, use_sin: bool) -> Decimal:
    """sin or cos of *angle* (|angle| ≤ 12) to 90 digits: its Taylor series at 100 digits."""
    c = _TRIG
    term = angle if use_sin else Decimal(1)
    total, k, sq = term, (1 if use_sin else 0), c.multiply(angle, angle)
    while abs(term) > Decimal("1e-90") or k < 4:
        term = c.divide(c.multiply(c.minus(term), sq), (k + 1) * (k + 2))     # minus in our context, not the thread's
        total = c.add(total, term)
        k += 2
    return total


def iv_position(pos: int, col: int, d_model: int, swapped: bool = False):
    """P[pos, col] enclosed: sin (even columns) or cos (odd; *swapped*: the other way round) of
    pos / 10000^(2i/d_model), 2i the even column at or before *col*. The angle and its Taylor series are worked
    at 100 digits (the angle is at most 11, so the largest term is below 10⁴ and the rounding of 200 terms stays
    below 10⁻⁹⁰); the tail after the last term taken is below that term; ±10⁻⁷⁰ then encloses the value."""
    c = _TRIG
    two_i = col - col % 2
    use_sin = (col % 2 == 0) != swapped
    if pos == 0:                        # sin 0 = 0, cos 0 = 1: what the series gives
        total = Decimal(0 if use_sin else 1)
    else:
        if (4 * two_i) % d_model == 0:  # 10000^(2i/d_model) = 10^k: the angle is pos/10^k exactly
            angle = Decimal(pos).scaleb(-(4 * two_i // d_model), context=c)
        else:
            angle = c.divide(pos, c.power(Decimal(10000), c.divide(two_i, d_model)))
        total = trig_value(angle, use_sin)
    return (DOWN.subtract(total, _TRIG_SLACK), UP.add(total, _TRIG_SLACK))


class Interval:
    """``(lo, hi)`` pairs of 50-digit Decimals that enclose the value; ``None`` is −∞ (see the module docstring)."""

    NEG_INF = None

    def __init__(self, problem, *, widen: bool = True, round_exp: bool = False):
        self.widen = widen
        self.round_exp = round_exp
        d = problem.decimals
        self.d = d
        self.quantum = Decimal(1).scaleb(-d)        # one unit of the last shown place
        self.h = Decimal(5).scaleb(-d - 1)           # half a unit of the last shown place
        self._tiny = Decimal("1e-40")
        self._near = SLACK
        kind, v = _divisor(problem, None)
        if kind == "sqrt":
            r = F.CTX.sqrt(Decimal(v))                # correctly rounded: one unit outward encloses √v
            exact = DOWN.multiply(r, r) == v == UP.multiply(r, r)     # √4 = 2
            self.exact_factor = (r, r) if exact else (DOWN.next_minus(r), UP.next_plus(r))
        else:
            self.exact_factor = iv_frac(v)
        # a careful student may round √d_k (or any scale) to the problem's places, but not below 2
        fr = self.exact_factor[0].quantize(Decimal(1).scaleb(-max(d, 2)), rounding=ROUND_HALF_UP, context=_WIDE)
        self._factor_band = (min(self.exact_factor[0], fr), max(self.exact_factor[1], fr))

    def round(self, x):
        """x rounded to the problem's places, half away from zero (the one rule: :class:`worked.problem.Precision`)."""
        return x.quantize(self.quantum, rounding=ROUND_HALF_UP, context=_WIDE)

    def shown(self, iv, h=None):
        """What a careful student may write for *iv*: ± half a unit of the last place (unless it is exact there)."""
        if iv is None or not self.widen:
            return iv
        h = self.h if h is None else h
        lo, hi = iv
        if UP.subtract(hi, lo) < self._tiny:
            scaled = lo.scaleb(self.d, context=_WIDE)
            if UP.subtract(scaled, scaled.to_integral_value(rounding=ROUND_HALF_UP)).copy_abs() < self._near:
                return iv  # already exact at the problem's places: rounding changes nothing
        return (DOWN.subtract(lo, h), UP.add(hi, h))

    def carry(self, x):
        return x

    def scale_grad(self, g, factor):
        return self.scale(g, factor)

    def magnitude(self, iv):
        """The largest |x| in *iv*, as a float (None for −∞, a masked score)."""
        if iv is None:
            return None
        return float(max(iv[0].copy_abs(), iv[1].copy_abs()))

    def beyond(self):
        """A value no answer matches (the loss after a step that has none a hand could work out): a point far
        past any answer's size (at most 10¹²), still finite in every context used here."""
        return (_BEYOND, _BEYOND)

    def entry(self, x: Fraction):
        return iv_frac(x)

    def dot(self, xs, ys):
        """Σ x·y: the same operations, in the same order, as summing iv_mul(x, y) with iv_add from (0, 0)
        (so the same ends), written out: this loop is most of the time of a check."""
        lo = hi = _ZERO
        dmul, umul, dadd, uadd = DOWN.multiply, UP.multiply, DOWN.add, UP.add
        for x, y in zip(xs, ys):
            if x is None or y is None:
                return None
            (a0, a1), (b0, b1) = x, y
            if a0 >= 0 and b0 >= 0:             # iv_mul's branches, in its order
                p0, p1 = dmul(a0, b0), umul(a1, b1)
            elif a0 >= 0 and b1 <= 0:
                p0, p1 = dmul(a1, b0), umul(a0, b1)
            elif a0 < 0 and a1 <= 0 and b0 >= 0:
                p0, p1 = dmul(a0, b1), umul(a1, b0)
            elif a0 < 0 and a1 <= 0 and b1 <= 0:
                p0, p1 = dmul(a1, b1), umul(a0, b0)
            else:
                p0, p1 = iv_mul(x, y)
            lo, hi = dadd(lo, p0), uadd(hi, p1)
        return (lo, hi)

    def factor(self, problem, how):
        if how is None:
            return self._factor_band if self.widen else self.exact_factor
        return iv_frac(_divisor(problem, how)[1])

    def scale(self, s, factor):
        if s is None:
            return None
        return iv_div(s, factor)   # factor > 0

    def softmax(self, row):
        """Weights of one row (None = −∞ gets weight 0), each e^x possibly rounded; exact ranges.
        The state is ``(E, weights)``: the e^x boxes by column, for :meth:`mix`."""
        idx = [j for j, s in enumerate(row) if s is not None]
        if not idx:
            return [None] * len(row), None
        E = {}
        for j in idx:
            e = iv_exp(row[j])
            if self.round_exp:
                e = (self.round(e[0]), self.round(e[1]))
            elif self.widen:
                # a careful student rounds e^x to the problem's places, but keeps 3 significant
                # digits of a small one (0.000335, not 0.00, which would leave 0/0)
                e = self.shown(e, min(self.h, DOWN.multiply(e[0], _HALF_PERCENT)))
            E[j] = e
        out = []
        for j in range(len(row)):
            if j not in E:
                out.append(pt(_ZERO))
                continue
            others = iv_sum(E[k] for k in idx if k != j)
            # the weight e/(e + others) grows with e and falls with the others
            d_lo, d_hi = UP.add(E[j][0], others[1]), DOWN.add(E[j][1], others[0])
            lo = DOWN.divide(E[j][0], d_lo) if d_lo > 0 else _ZERO
            hi = UP.divide(E[j][1], d_hi) if d_hi > 0 else Decimal(1 if E[j][1] > 0 else 0)
            out.append((lo, hi))
        return out, (E, out)

    # the backward pass's arithmetic: None (no value: a quotient whose divisor may be 0, as a mistake's weights
    # without e^x can give) stays None in everything computed from it
    def add(self, a, b):
        return None if a is None or b is None else iv_add(a, b)

    def sub(self, a, b):
        return None if a is None or b is None else (DOWN.subtract(a[0], b[1]), UP.subtract(a[1], b[0]))

    def mul(self, a, b):
        if a is None or b is None:
            return None
        if a is b and a[0] < 0 < a[1]:      # x·x of one value (a layer norm's squared deviation): never below 0
            return (_ZERO, max(UP.multiply(a[0], a[0]), UP.multiply(a[1], a[1])))
        return iv_mul(a, b)

    def total(self, xs):
        xs = list(xs)
        return None if any(x is None for x in xs) else iv_sum(xs)

    def no_exp(self, row):
        idx = [j for j, s in enumerate(row) if s is not None]
        if not idx:
            return [None] * len(row)
        total = iv_sum(row[j] for j in idx)
        return [pt(_ZERO) if s is None else iv_div(s, total) for s in row]

    # a Transformer block's arithmetic (issue 27): positions, layer norm, ReLU, the loss; every value enclosed
    def position(self, pos: int, col: int, d_model: int, swapped: bool = False):
        return iv_position(pos, col, d_model, swapped)

    def div(self, a, b):
        return None if a is None or b is None else iv_div(a, b)

    def sqrt(self, a):
        """√a (decimal's √ is correctly rounded to the nearest: one unit outward encloses it); None when a < 0 may be."""
        if a is None or a[0] < 0:
            return None
        lo = DOWN.next_minus(DOWN.sqrt(a[0])) if a[0] > 0 else _ZERO
        return (max(lo, _ZERO), UP.next_plus(UP.sqrt(a[1])))

    def relu(self, a):
        return None if a is None else (max(a[0], _ZERO), max(a[1], _ZERO))

    def relu_back(self, g, u):
        """*g* where all of *u* is above 0, 0 where none is; None (no value) where *u* straddles 0."""
        if g is None or u is None:
            return None
        return g if u[0] > 0 else pt(_ZERO) if u[1] <= 0 else None

    def ln(self, a):
        """ln a (correctly rounded to the nearest: one unit outward); None when a ≤ 0 may be."""
        if a is None or a[0] <= 0:
            return None
        return (DOWN.next_minus(DOWN.ln(a[0])), UP.next_plus(UP.ln(a[1])))

    def may_be_zero(self, a) -> bool:
        return a is None or a[0] <= 0 <= a[1]

    def mix(self, state, a_row, v_col):
        if state is not None and all(v is not None for v in v_col):
            E, weights = state
            if not self.widen:   # boxes a few units of the 50th digit wide: plain interval arithmetic encloses it
                return iv_div(iv_sum(iv_mul(E[j], v_col[j]) for j in E), iv_sum(E.values()))
            inexact = [j for j in E if self.shown(weights[j]) != weights[j]]
            return self._blend(E, v_col, inexact)
        acc = pt(_ZERO)
        for a, v in zip(a_row, v_col):
            if a is None or v is None:
                return None
            acc = iv_add(acc, iv_mul(a, v))
        return acc

    def _blend(self, E: dict, v: list, inexact: list):
        """Range of Σ E_j·v_j / Σ E_j over the boxes E_j (the weights' dependence kept), then each weight
        possibly rounded: ± h·Σ|v_j|. The extremes put E_j at an end of its box, split by the value of v_j:
        the largest value has E_j at the top of its box for the k largest v_j and at the bottom for the rest
        (for some k), the smallest likewise; each candidate is rounded outward."""
        idx = list(E)

        def extreme(sign):
            end = 1 if sign > 0 else 0
            ctx = UP if sign > 0 else DOWN
            order = sorted(idx, key=lambda j: sign * v[j][end], reverse=True)
            best = None
            for k in range(len(order) + 1):
                num = den_lo = den_hi = _ZERO
                for t, j in enumerate(order):
                    e = E[j][1] if t < k else E[j][0]
                    num = ctx.add(num, ctx.multiply(e, v[j][end]))
                    den_lo, den_hi = DOWN.add(den_lo, e), UP.add(den_hi, e)
                if den_lo > 0:
                    # outward: a positive top over the bottom's small end raises it, a negative one its large end
                    val = ctx.divide(num, den_lo if (num >= 0) == (sign > 0) else den_hi)
                    best = val if best is None or sign * val > sign * best else best
            return best

        hi, lo = extreme(+1), extreme(-1)
        if hi is None or lo is None:
            return None
        if self.widen:
            spread = UP.multiply(self.h, iv_sum((_ZERO, max(v[j][0].copy_abs(), v[j][1].copy_abs())) for j in inexact)[1])
            lo, hi = DOWN.subtract(lo, spread), UP.add(hi, spread)
        return (lo, hi)


_WIDE = Context(prec=10**6, Emax=MAX_EMAX, Emin=MIN_EMIN)   # for quantize: enough digits for any value
_HALF_PERCENT = Decimal("0.005")


# ---------------------------------------------------------------- by hand: the numbers a worked solution shows

class Approx(Fraction):
    """A value a hand computes from rounded numbers (so not the true value): a Fraction, marked. Arithmetic on
    it gives plain Fractions; :class:`Hand` marks and rounds the results of its operations."""

    __slots__ = ()


class Irr:
    """An irrational value that a worked line shows exactly (a scaled score √2 in exact display), kept as its
    50-digit decimal for the e^x that follows."""

    __slots__ = ("d",)

    def __init__(self, d: Decimal):
        self.d = d

    def __eq__(self, other):
        return isinstance(other, Irr) and other.d == self.d

    def __hash__(self):
        return hash(self.d)

    def __repr__(self):
        return f"Irr({self.d:.12})"


class HandRow:
    """One softmax row as a hand works it: the unmasked columns, whether e^x is taken of x − m (m the row's
    smallest score, in column ``low``), each exponent as shown (``x`` or ``x − m``, exact), each e^x as carried
    and their total. A plain class (as :class:`ExactRow`): a NamedTuple's class is built at import."""

    __slots__ = ("js", "low", "shift", "exponent", "exps", "total")

    def __init__(self, js: list, low: int, shift: bool, exponent: dict, exps: dict, total: Fraction):
        self.js, self.low, self.shift, self.exponent, self.exps, self.total = js, low, shift, exponent, exps, total


SHIFT_LOW, SHIFT_HIGH = -2.3, 13.8     # e^x < 0.1 or e^x > 10^6: the row's e^x are taken of x − m


class Hand:
    """The numbers as a student working by hand carries them: every stage is computed exactly from the previous
    stages' values *as shown* and then rounded (half away from zero) to ``places``; inside the softmax each e^x
    is rounded, their total is the sum of those, and each weight their quotient, rounded; the softmax backward's
    row sum is rounded before it is used. Values are Fractions: exact ones (an integer product, 1/3 in exact
    display) or :class:`Approx` (rounded, or computed from rounded values); with ``display="exact"`` an
    irrational scaled score (√2) is kept exactly (:class:`Irr`) for its e^x, and rationals stay exact until a
    rounded value enters; with ``display="decimal"`` every value with more than ``places`` places is rounded.
    This is what each displayed line shows, and what the auditor (:mod:`worked.audit`) checks it against."""

    NEG_INF = None
    closed_form_only = True     # the fresh forward pass after the update is shown from true values (labels)

    def __init__(self, problem, display: str, places: int):
        self.decimal = display == "decimal"
        self.P = places
        self.q = Decimal(1).scaleb(-places)
        self.unit = 10**places      # a rounded value is an integer over this

    # -- rounding
    def _round(self, x) -> "Approx":
        if isinstance(x, Decimal):
            return Approx(F.round_decimal(None, x, self.P))
        return Approx(F.rounded_units(x if isinstance(x, Fraction) else Fraction(x), self.P), self.unit)

    def shown(self, x):
        if x is None or isinstance(x, Irr):
            return x
        if isinstance(x, (Approx, Decimal)) or (self.decimal and not F.terminating(x, self.P)):
            return self._round(x)
        return x

    carry = shown

    @staticmethod
    def _mark(value: Fraction, *parts):
        for p in parts:     # marked when any part is
            if isinstance(p, Approx):
                return Approx(value)
        return value

    @staticmethod
    def _dec(x) -> Decimal:
        return x.d if isinstance(x, Irr) else F.mp(x)

    # -- the stages
    def entry(self, x: Fraction):
        return self.shown(Fraction(x))

    def dot(self, xs, ys):
        if any(x is None for x in xs) or any(y is None for y in ys):
            return None
        total = sum((x * y for x, y in zip(xs, ys)), Fraction(0))
        return Approx(total) if any(isinstance(v, Approx) for v in (*xs, *ys)) else total

    def factor(self, problem, how):
        kind, v = _divisor(problem, how)
        if kind == "sqrt":
            r = math.isqrt(v)
            return Fraction(r) if r * r == v else Irr(F.CTX.sqrt(Decimal(v)))
        return Fraction(v)

    def scale(self, s, factor):
        if s is None:
            return None
        if isinstance(factor, Fraction):
            return self._mark(s / factor, s)
        if s == 0:
            return self._mark(Fraction(0), s)
        d = F.N.div(F.mp(s), factor.d)
        if isinstance(s, Approx) or self.decimal:
            return self._round(d)
        return Irr(d)

    def scale_grad(self, g, factor):
        """A gradient is a number a hand carries: never kept as an exact irrational."""
        q = self.scale(g, factor)
        return self._round(q.d) if isinstance(q, Irr) else q

    def _exp(self, x):
        if x == 0:
            return Fraction(1)
        return self._round(F.N.exp(self._dec(x)))

    def softmax(self, row):
        js = [j for j, x in enumerate(row) if x is not None]
        if not js:
            return [Fraction(0)] * len(row), None
        vals = {j: self._dec(row[j]) for j in js}
        low = min(js, key=vals.__getitem__)
        shift = vals[low] < SHIFT_LOW or max(vals.values()) > SHIFT_HIGH
        if shift:
            expo = {j: (Irr(F.N.sub(vals[j], vals[low])) if vals[j] != vals[low] else Fraction(0))
                    if isinstance(row[j], Irr) or isinstance(row[low], Irr) else
                    (self._mark(Fraction(row[j]) - Fraction(row[low]), row[j], row[low]) if vals[j] != vals[low]
                     else Fraction(0)) for j in js}
        else:
            expo = {j: row[j] for j in js}
        exps = {j: self._exp(expo[j]) for j in js}
        total = self._mark(sum(exps.values(), Fraction(0)), *exps.values())
        if not self.decimal and len({vals[j] for j in js}) == 1:
            w = {j: Fraction(1, len(js)) for j in js}     # exact display: equal scores give exactly 1/n
        else:
            w = {j: self._mark(exps[j] / total, exps[j], total) for j in js}
        return [w.get(j, Fraction(0)) for j in range(len(row))], HandRow(js, low, shift, expo, exps, total)

    def no_exp(self, row):
        js = [j for j, x in enumerate(row) if x is not None]
        total = self.total([row[j] for j in js])
        return [Fraction(0) if x is None else self._mark(Fraction(x) / total, x, total) for x in row]

    def mix(self, state, a_row, v_col):
        return self.dot(a_row, v_col)

    def add(self, a, b):
        return None if a is None or b is None else self._mark(a + b, a, b)

    def sub(self, a, b):
        return None if a is None or b is None else self._mark(a - b, a, b)

    def mul(self, a, b):
        return None if a is None or b is None else self._mark(a * b, a, b)

    def total(self, xs):
        xs = list(xs)
        return None if any(x is None for x in xs) else self._mark(sum(xs, Fraction(0)), *xs)

    # a Transformer block's arithmetic (issue 27): each value a hand writes down, rounded as it is written
    def angle(self, pos: int, col: int, d_model: int):
        """pos / 10000^(2i/d_model) as a hand writes it: exact when 10000^(2i/d_model) = 10^(4·2i/d_model) is a
        whole power of 10 (pos/100), else rounded to the carried places."""
        two_i = col - col % 2
        if (4 * two_i) % d_model == 0:
            return Fraction(pos, 10 ** (4 * two_i // d_model))
        return self._round(F.CTX.divide(pos, F.CTX.power(Decimal(10), F.CTX.divide(4 * two_i, d_model))))

    def position(self, pos: int, col: int, d_model: int, swapped: bool = False):
        """sin or cos of the angle as written (:meth:`angle`), rounded."""
        if pos == 0:                  # sin 0 = 0, cos 0 = 1
            return Fraction(int((col % 2 == 0) == swapped))
        a = self.angle(pos, col, d_model)
        use_sin = (col % 2 == 0) != swapped
        # shown at P places: a float's sin or cos (|error| < 2·10⁻¹⁵ for an angle of at most 12) rounds as the
        # 90-digit series does unless within a millionth of a last place of a half; there (or past 8 places) the series
        y = (math.sin if use_sin else math.cos)(float(a)) * self.unit
        if self.P <= 8 and abs(abs(y) % 1 - 0.5) > 1e-6:
            return Approx(int(math.copysign(math.floor(abs(y) + 0.5), y)), self.unit)
        return self._round(trig_value(F.mp(a), use_sin))

    def div(self, a, b):
        return None if a is None or b is None else self.shown(self._mark(Fraction(a) / Fraction(b), a, b))

    def sqrt(self, x):
        if x is None:
            return None
        r = F.N.sqrt(F.mp(x))
        if not isinstance(x, Approx) and Fraction(r) ** 2 == Fraction(x):
            return Fraction(r)        # √(1/4) = 1/2, exactly
        return self._round(r)

    def relu(self, x):
        return None if x is None else x if x > 0 else Fraction(0)

    def relu_back(self, g, u):
        if g is None or u is None:      # no value (a carried row a layer norm could not normalise)
            return None
        return g if u > 0 else Fraction(0)

    def ln(self, x):
        """ln x rounded; None for a probability a hand rounded to 0 (no ln: the page needs more places there)."""
        if x is None or x <= 0:
            return None
        return Fraction(0) if x == 1 else self._round(F.CTX.ln(F.mp(x)))

    def may_be_zero(self, x) -> bool:
        return x is None or x == 0
