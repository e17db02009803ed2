"""The stages of self-attention and of its training step, declared once: each stage's id (the key of its
matrix, ``head2.`` + id per head with several heads), the stages it is computed from, the shape of its matrix
and the words that name it, its computation, its answer grid and its worked step. What iterates the stages
(the solver, the notebook, the quiz's shapes, the checker's order of the stages) reads them here instead of
listing them again.

A stage's computation runs over any backend of :mod:`worked.attention` (exact, float, interval), with the
mistakes of :class:`worked.attention.Transform` as alternative forwards: :func:`worked.attention.forward` and
:func:`worked.attention.backward` run them in order, knowing none by name. Its worked step (``step``: a
:class:`worked.lines.Shown`: title, lines, notes, shapes, NumPy code) is built in :mod:`worked.steps`
(``attention``: Q … Z, ``heads``: concat and W_O, ``train``: the training step); :func:`worked.solver.solve`
and the notebook walk the stages and make each stage's matrix and step, naming none.
"""
from __future__ import annotations

from fractions import Fraction
from collections import namedtuple
from typing import Any, Callable

from . import eq
from .i18n import N_
from .lines import Shown
from .steps import attention as shown_attention
from .steps import block as shown_block
from .steps import block_train as shown_block_train
from .steps import heads as shown_heads
from .steps import train as shown_train
from . import slips


class Dims(namedtuple("Dims", (
        "n",                # int
        "d_model",          # int
        "d_k",              # int
        "d_v",              # int
        "heads",            # int
        "d_out",            # int
        "train",            # bool
        "n_kv",             # int = 0
        "cross",            # bool = False
        "d_ff",             # int = 0: a Transformer block's: the feed-forward's width
        "vocab",            # int = 0: and its output layer's columns (0: none)
        "block",            # str = "": its order ("post-ln", "pre-ln"; "": no block)
        "given",            # tuple = (): its optional inputs the problem gives (W_out, targets, gamma_f, beta_f)
), defaults=(0, False, 0, 0, "", ()))):
    """The sizes the shapes depend on: tokens, d_model, d_k, d_v, heads, the output's columns, [train], and
    the tokens the keys and values come from (*n_kv*: the encoder's in cross-attention, else *n*), *cross*."""

    __slots__ = ()

    @classmethod
    def of_problem(cls, p) -> "Dims":
        d_out = len(p.W_O[0]) if p.multihead else p.d_v
        b = getattr(p, "block", None)
        return cls(p.n, p.d_model, p.d_k, p.d_v, len(p.heads) if p.multihead else 1, d_out,
                   getattr(p, "train", None) is not None, p.n_kv, p.cross,
                   b.d_ff if b is not None else 0, len(b.vocab) if b is not None and b.vocab else 0,
                   b.kind if b is not None else "",
                   tuple(k for k in ("W_out", "targets", "gamma_f", "beta_f") if b is not None and getattr(b, k) is not None))

    @classmethod
    def of_family(cls, f) -> "Dims":
        cross = getattr(f, "attention", "self") == "cross"
        # a family of Transformer blocks (its block, d_ff and vocab, where the family has them: worked new --block)
        block = getattr(f, "block", None) or ""
        v = getattr(f, "vocab", None) or 0
        vocab = len(v) if isinstance(v, (list, tuple)) else int(v)
        given = (("W_out", "targets") + (("gamma_f", "beta_f") if block == "pre-ln" else ())) if block and vocab else ()
        return cls(f.n, f.d_model, f.d_k, f.dv, f.heads, f.d_model if f.heads > 1 or block else f.dv, bool(f.train),
                   f.n_enc if cross else f.n, cross, int(getattr(f, "dff", None) or getattr(f, "d_ff", 0) or 0) if block else 0,
                   vocab if block else 0, block, given)


# the sizes a stage's rows and columns have
_SIZE = {
    "n": lambda d: d.n, "n_kv": lambda d: d.n_kv or d.n, "d_model": lambda d: d.d_model, "d_k": lambda d: d.d_k, "d_v": lambda d: d.d_v,
    "heads·d_v": lambda d: d.heads * d.d_v, "d_out": lambda d: d.d_out, "1": lambda d: 1,
    "d_ff": lambda d: d.d_ff, "vocab": lambda d: d.vocab,
}
# what labels a matrix's rows or columns of a size have on the pages: the tokens, else their numbers
_TOKEN_LABELS = {"n": lambda p: list(p.tokens), "n_kv": lambda p: list(p.tokens_kv), "1": lambda p: ["1"],
                 "heads·d_v": lambda p: [f"{h}.{c + 1}" for h in range(1, len(p.heads) + 1) for c in range(p.d_v)],
                 "vocab": lambda p: list(p.block.vocab)}


def words_of(size: str, problem) -> list[str] | None:
    """The words that name a matrix's rows or columns of *size*: the tokens (the decoder's or the encoder's), a
    block's vocabulary; None for a size whose rows are numbered."""
    return _TOKEN_LABELS[size](problem) if size in ("n", "n_kv", "vocab") else None


def labels(size: str, problem) -> list[str]:
    """The labels of a matrix's rows or columns of *size* (a key of the sizes) in *problem*: its tokens (the
    decoder's or the encoder's), a head's columns side by side (``2.1``), or the numbers 1, 2, …"""
    if size in _TOKEN_LABELS:
        return _TOKEN_LABELS[size](problem)
    return [str(c + 1) for c in range(_SIZE[size](Dims.of_problem(problem)))]


class Stage(namedtuple("Stage", (
        "id",               # str: the key of its matrix
        "inputs",           # tuple: the stages (or the problem's inputs X, W_Q, …) it is computed from
        "rows",             # str: the size of its rows and columns (a key of _SIZE)
        "cols",             # str
        "words",            # eq.Prose: what it is, in words, its math as trees (the quiz names a question's matrix with them)
        "scope",            # str = "head": "head": one per head; "layer": once (after the heads, or without heads)
        "several",          # bool = True: with scope "layer": whether it exists with one head too
        "forward",          # Callable | None = None: forward(head, *inputs) → its matrix (see HeadRun)
        "grid",             # "Grid | None" = None: its answer grid on the worksheet and the web page
        "step",             # "Shown | None" = None: its worked step: title, lines, notes, shapes, NumPy code (worked.steps)
        "mistakes",         # tuple = (): its known mistakes (worked.slips): alternative forwards, as Transforms
        "may_be_inf",       # bool = False: its entries may be −∞ (where the mask hides a score)
        "rounded_early",    # tuple = (): a softmax's: what rounding before it shows (its input and its e^x rounded
                            # to the problem's places), in its own matrix, then in the stage that takes it
        "aliases",          # tuple = (): other names an answers file or a question may give its matrix (A[2,2])
        "by_head",          # str | None = None: with several heads, its columns, head by head, are each head's matrix
                            # of this id (the gradient of the concat: each head's dZ)
), defaults=("head", True, None, None, None, (), False, (), (), None))):
    __slots__ = ()

    def shape(self, d: Dims) -> tuple[int, int]:
        return _SIZE[self.rows](d), _SIZE[self.cols](d)


class HeadRun:
    """What a head's stages share while they run: the backend *b* and its ``matmul``, the problem, the
    mistake's :class:`~worked.attention.Transform` *t*, the student's *given* entries, the key prefix *pre*
    (``head2.``), the entries the mask hides; and what the stages leave for the worked solution: the scores
    before the mask (``raw``), the divisor (``factor``), each softmax row's state (``states``)."""

    def __init__(self, problem, b, t, given: dict, pre: str, head: int, masked: frozenset,
                 check_scaled: Callable | None, NA: Any):
        self.problem, self.b, self.t, self.given, self.pre, self.head = problem, b, t, given, pre, head
        self.masked, self.check_scaled, self.NA = masked, check_scaled, NA
        self.raw: list = []
        self.factor: Any = None
        self.states: list = [None] * problem.n

    def matmul(self, A, B) -> list:
        cols = list(zip(*B))
        return [[self.b.dot(r, c) for c in cols] for r in A]


def masked_entries(n: int, mask: str, how: str | None, m: int | None = None) -> frozenset:
    """The (row, col) of an n × m score matrix the mask hides: the problem's *mask*, or a mistake's (*how*:
    "none", "lower", "upper": a causal mask where there is none, as on cross-attention)."""
    how = how or ("upper" if mask == "causal" else "none")
    m = n if m is None else m
    if how == "none":
        return frozenset()
    if how == "upper":
        return frozenset((i, j) for i in range(n) for j in range(m) if j > i)
    if how == "lower":
        return frozenset((i, j) for i in range(n) for j in range(m) if j < i)
    raise ValueError(f"unknown mask transform {how!r}")


def sides(t, env: dict) -> dict:
    """The inputs as a mistake binds them (*t*'s ``sides``): the keys and values taken from the decoder side
    (X_enc read as X), or the queries from the encoder side (X read as X_enc); else as they are."""
    if t.sides == "kv-dec":
        return {**env, "X_enc": env["X"]}
    if t.sides == "q-enc":
        return {**env, "X": env["X_enc"]}
    if t.sides is not None:
        raise ValueError(f"unknown sides transform {t.sides!r}")
    return env


def _project(r: HeadRun, X, W):
    return r.matmul(X, W)


def _scores(r: HeadRun, Q, K):
    """Q·Kᵀ (the mistake: K·Qᵀ), −∞ where the mask hides an entry."""
    first, second = (K, Q) if r.t.scores == "KQ" else (Q, K)
    n, m = len(first), len(second)
    r.raw = [[r.b.dot(first[i], second[j]) for j in range(m)] for i in range(n)]
    return [[r.b.NEG_INF if (i, j) in r.masked else r.raw[i][j] for j in range(m)] for i in range(n)]


def _scaled(r: HeadRun, S):
    """The scores over the divisor (√d_k, 1 or the problem's number; the mistakes: 1 or d_k)."""
    r.factor = r.b.factor(r.problem, r.t.scale)
    return [[r.b.scale(s, r.factor) for s in row] for row in S]


def _weights(r: HeadRun, T):
    """The softmax of each row (the mistakes: of each column, or each score over its row's sum)."""
    if r.check_scaled is not None:
        r.check_scaled(r.head, T)        # before any e^x is taken of them
    n, m = len(T), len(T[0])
    if r.t.softmax == "rows":
        rows = [r.b.softmax(row) for row in T]
        r.states = [s for _, s in rows]
        return [w for w, _ in rows]
    r.states = [None] * n       # no softmax state of a row to reuse (the mistakes below)
    if r.t.softmax == "columns":
        cols = [r.b.softmax([T[i][j] for i in range(n)])[0] for j in range(m)]
        return [[cols[j][i] for j in range(m)] for i in range(n)]
    if r.t.softmax == "no-exp":
        return [r.b.no_exp(row) for row in T]
    raise ValueError(f"unknown softmax transform {r.t.softmax!r}")


def _blend(r: HeadRun, A, V):
    """Z = A·V (the mistake: Aᵀ·V); a row of weights that is the softmax of its scaled row lets Z use its parts."""
    g = r.given.get(r.pre + "weights")
    if r.t.weights == "AT":
        A = [list(c) for c in zip(*A)]
        mix = [None] * len(A)
    else:
        mix = [s if g is None or all(a is r.NA for a in g[i]) else None for i, s in enumerate(r.states)]
    return [[r.b.mix(mix[i], A[i], [V[j][c] for j in range(len(V))]) for c in range(len(V[0]))] for i in range(len(A))]


_S = eq.matrix_sym     # a matrix's symbol as the steps write it (scores upright)
_words = eq.prose


def _is(lhs, rhs):
    return eq.Rel((lhs, rhs), (eq.EQ,))


class Grid(namedtuple("Grid", (
        "label",            # "str | eq.Said": words (N_), or a sentence with math in it (eq.say: "Updated {symbol}")
        "symbol",           # "str | Callable | None"
        "definition",       # Callable
        "hint",             # Callable | None = None
        "masked",           # bool = False
                            # what the worksheet asks of its step (worked.render.view reads them)
        "task",             # Callable | None = None: task(p, head, places, decimals) → prose; None: the step's own why
        "beside",           # bool = False: its matrix fits beside the step's formulas
        "dot_check",        # bool = False: an entry is checked by expanding it as a dot product
        "row_check",        # Callable | None = None: row_check(token, head) → prose: a row is checked at a time
        "glance",           # Callable | None = None: glance(p) → whether the answers at a glance show it (None: always)
        "heatmap",          # bool = False: the answer key draws it as a heatmap (weights in [0, 1])
), defaults=(None, False, None, False, False, None, None, False))):
    """A stage's answer grid: its *label*, the left side of its definition (a base name, whose symbol *S* gives,
    a function of *S*, or None: the definition is written alone), the right side ``definition(S, problem)``
    (*S*: a base name → that head's symbol), its *hint* ``hint(problem)`` (prose, or None), and whether the
    causal mask hides entries of it."""

    __slots__ = ()

    def lhs(self, S):
        return S(self.symbol) if isinstance(self.symbol, str) else self.symbol(S)


def scale_prose(p) -> eq.Prose:
    """The scaling rule in words, its math as trees: ``divide the scores by √d_k = √4 = 2`` (the root
    simplified when it is simpler: √4 = 2, √8 = 2√2)."""
    if p.scale == "sqrt":
        import sympy as sp

        root = eq.Sqrt(eq.num(p.d_k))
        simple = eq.from_sympy(sp.sqrt(sp.Integer(p.d_k)))
        chain = (eq.Sqrt(eq.Sym("d_k")), root) + ((simple,) if simple != root else ())
        return eq.say("divide the scores by {scale}", scale=eq.Rel(chain, (eq.EQ,) * (len(chain) - 1)))
    if p.scale == "none":
        return eq.say("none (the scores go into the softmax unscaled)")
    return eq.say("divide the scores by {scale}", scale=eq.num(p.scale))


def scaled_def(p, scores):
    """The right side of ``scaled = …``: scores/√d_k, scores/2, or the scores themselves."""
    if p.scale == "sqrt":
        return eq.Frac(scores, eq.Sqrt(eq.Sym("d_k")))
    if p.scale == "none":
        return scores
    return eq.Frac(scores, eq.num(p.scale))


def _causal(p, text: str, otherwise=None):
    return text if p.mask == "causal" else otherwise


_X = eq.Sym("X")
_GRIDS = {
    "Q": Grid(N_("Queries Q"), "Q", lambda S, p: eq.Mul((_X, S("W_Q"))),
              task=lambda p, *_: _project_task(N_("queries"), _X, eq.say(" (the decoder side)") if p.cross else ""),
              beside=True, dot_check=True),
    "K": Grid(N_("Keys K"), "K", lambda S, p: eq.Mul((_X, S("W_K"))),
              task=lambda p, *_: _project_task(N_("keys"), _X, ""), beside=True, dot_check=True),
    "V": Grid(N_("Values V"), "V", lambda S, p: eq.Mul((_X, S("W_V"))),
              task=lambda p, *_: _project_task(N_("values"), _X, ""), beside=True, dot_check=True),
    "scores": Grid(N_("Scores"), "scores", lambda S, p: eq.Mul((S("Q"), eq.Pow(S("K"), eq.Sym("T")))),
                   lambda p: _causal(p, eq.say("masked entries are −∞ (type -inf)")), masked=True,
                   task=lambda p, *_: _scores_task(p), beside=True, dot_check=True),
    "scaled": Grid(N_("Scaled scores"), "scaled", lambda S, p: scaled_def(p, S("scores")),
                   lambda p: eq.prose(scale_prose(p), _causal(p, eq.say("; masked entries stay −∞"), "")), masked=True,
                   task=lambda p, h, places, dec: _scaled_task(p, dec), beside=True,
                   glance=lambda p: p.scale != "none"),
    "weights": Grid(N_("Attention weights"), "A", lambda S, p: eq.Call("softmax", (S("scaled"),)),
                    lambda p: eq.say("softmax of each row") if p.mask != "causal" else
                    eq.say("softmax of each row; masked entries get weight 0"), masked=True,
                    task=lambda p, h, places, dec: _weights_task(places, dec),
                    row_check=lambda tok, h: eq.say("Row {token}: write {ex} of each scaled score, the row total, "
                                                    "then each weight.", token=tok, ex=_EX), heatmap=True),
    "Z": Grid(N_("Output Z"), "Z", lambda S, p: eq.Mul((S("A"), S("V"))),
              task=lambda p, h, places, dec: eq.say("Blend the value rows: each row of the output is its row of weights "
                                                    "times {V}. Give entries to {places} places.", V=_S("V", h),
                                                    places=str(dec)),
              dot_check=True,
              row_check=lambda tok, h: eq.say("Row {token}: write the output row as a weighted sum of the rows of {V}.",
                                              token=tok, V=_S("V", h))),
    "concat": Grid(N_("Concatenated heads"), None,
                   lambda S, p: eq.Call("concat", tuple(_S("Z", h) for h in range(1, len(p.heads) + 1))),
                   task=lambda *_: eq.say("Put the heads' outputs side by side, one head after another."), beside=True),
    "output": Grid(N_("Output Z"), "Z", lambda S, p: eq.Mul((_S("concat"), eq.Sym("W_O"))),
                   task=lambda p, h, places, dec: eq.say("Multiply the concatenated heads by {W_O}. Give entries to {places} "
                                                         "places.", W_O=eq.Sym("W_O"), places=str(dec)),
                   beside=True, dot_check=True),
}


def _half_sum_sq(z):
    """½ Σ_{i,j} (z − T)²"""
    return eq.Mul((eq.Frac(eq.num(1), eq.num(2)),
                   eq.Sum(eq.Pow(eq.Add((z, eq.Neg(eq.Sym("T")))), eq.num(2)), "i,j")))


def _tr(x):
    return eq.Pow(x, eq.Sym("T"))


def _zero(p):
    return _causal(p, "masked entries get zero gradient")


def _dS_entry(S):
    return eq.Entry(S("dS"), "i", "j")


def _dS_def(S, p):
    """A_ij·(dA_ij − Σ_k A_ik·dA_ik)"""
    i, j, k = "i", "j", "k"
    return eq.Mul((eq.Entry(S("A"), i, j), eq.Add((eq.Entry(S("dA"), i, j), eq.Neg(eq.Sum(
        eq.Mul((eq.Entry(S("A"), i, k), eq.Entry(S("dA"), i, k))), k))))))


def updated_label(w: str) -> "eq.Said":
    """An updated weight's grid label, ``Updated W_Q`` … ``Updated γ_1``: a sentence with the weight's symbol as math."""
    return eq.say(N_("Updated {symbol}"), symbol=eq.matrix_sym(w))


def gradient_label(sid: str) -> "eq.Said":
    """A gradient's grid label, ``Gradient dW_2`` … ``Gradient dγ_1``: a sentence with its symbol as math."""
    return eq.say(N_("Gradient {symbol}"), symbol=eq.matrix_sym(sid))


def _new_grid(w: str) -> Grid:
    return Grid(updated_label(f"W_{w}"), lambda S: S(f"W_{w}", prime=True),
                lambda S, p: eq.Add((S(f"W_{w}"), eq.Neg(eq.Mul((eq.Sym("lr", upright=True), S(f"dW_{w}")))))))


_TRAIN_GRIDS = {
    "loss": Grid(N_("Loss L"), lambda S: eq.Sym("L"), lambda S, p: _half_sum_sq(eq.Sym("Z"))),
    "dZ": Grid(gradient_label("dZ"), lambda S: _S("dZ"), lambda S, p: eq.Add((eq.Sym("Z"), eq.Neg(eq.Sym("T"))))),
    "dconcat": Grid(gradient_label("dconcat"), lambda S: _S("dconcat"), lambda S, p: eq.Mul((_S("dZ"), _tr(eq.Sym("W_O"))))),
    "dV": Grid(gradient_label("dV"), "dV", lambda S, p: eq.Mul((_tr(S("A")), S("dZ")))),
    "dA": Grid(gradient_label("dA"), "dA", lambda S, p: eq.Mul((S("dZ"), _tr(S("V")))), _zero),
    "dS": Grid(N_("Softmax backward dS"), _dS_entry, _dS_def,
               lambda p: _causal(p, eq.say("each row adds up to 0; masked entries get zero gradient"),
                                  eq.say("each row adds up to 0"))),
    "dscores": Grid(N_("Gradient of the scores"), "dscores", lambda S, p: scaled_def(p, S("dS")), _zero),
    "dQ": Grid(gradient_label("dQ"), "dQ", lambda S, p: eq.Mul((S("dscores"), S("K")))),
    "dK": Grid(gradient_label("dK"), "dK", lambda S, p: eq.Mul((_tr(S("dscores")), S("Q")))),
    "dW_Q": Grid(gradient_label("dW_Q"), "dW_Q", lambda S, p: eq.Mul((_tr(_X), S("dQ")))),
    "dW_K": Grid(gradient_label("dW_K"), "dW_K", lambda S, p: eq.Mul((_tr(_X), S("dK")))),
    "dW_V": Grid(gradient_label("dW_V"), "dW_V", lambda S, p: eq.Mul((_tr(_X), S("dV")))),
    "W_Q_new": _new_grid("Q"), "W_K_new": _new_grid("K"), "W_V_new": _new_grid("V"),
    "loss_after": Grid(N_("Loss after the update L′"), lambda S: eq.Sym("L", prime=True),
                       lambda S, p: _half_sum_sq(eq.Sym("Z", prime=True))),
}


FORWARD = (
    Stage("Q", ("X", "W_Q"), "n", "d_k", eq.say("the queries {formula}", formula=_is(_S("Q"), eq.Mul((_S("X"), _S("W_Q"))))), forward=_project,
          grid=_GRIDS["Q"], step=shown_attention.QUERIES),
    Stage("K", ("X", "W_K"), "n_kv", "d_k", eq.say("the keys {formula}", formula=_is(_S("K"), eq.Mul((_S("X"), _S("W_K"))))), forward=_project,
          grid=_GRIDS["K"], step=shown_attention.KEYS),
    Stage("V", ("X", "W_V"), "n_kv", "d_v", eq.say("the values {formula}", formula=_is(_S("V"), eq.Mul((_S("X"), _S("W_V"))))), forward=_project,
          grid=_GRIDS["V"], step=shown_attention.VALUES),
    Stage("scores", ("Q", "K"), "n", "n_kv", eq.say("the scores {formula}", formula=eq.Mul((_S("Q"), eq.Pow(_S("K"), eq.Sym("T"))))), forward=_scores,
          grid=_GRIDS["scores"], mistakes=(slips.TRANSPOSED_SCORES, slips.WRONG_MASK, slips.CAUSAL_MASK_ON_CROSS),
          may_be_inf=True, step=shown_attention.SCORES),
    Stage("scaled", ("scores",), "n", "n_kv", eq.say("the scaled scores (the scores divided by the scale)"), forward=_scaled,
          grid=_GRIDS["scaled"], mistakes=(slips.NO_SCALING, slips.SCALED_BY_DK), may_be_inf=True,
          aliases=("scaled_scores",), step=shown_attention.SCALED),
    Stage("weights", ("scaled",), "n", "n_kv", eq.say("the attention weights {A} (softmax of each row of the scaled scores)", A=_S("A")),
          forward=_weights, grid=_GRIDS["weights"], mistakes=(slips.COLUMN_SOFTMAX, slips.NO_EXP, slips.EARLY_ROUNDING),
          rounded_early=(N_("Here the scaled scores (or the e^x values) were rounded before the softmax."),
                         N_("Here the weights were rounded before Z = A·V.")),
          aliases=("A", "attention"), step=shown_attention.WEIGHTS),
    Stage("Z", ("weights", "V"), "n", "d_v", eq.say("the output {Z}", Z=_S("Z")), forward=_blend, grid=_GRIDS["Z"],
          mistakes=(slips.WEIGHTS_TRANSPOSED,), step=shown_attention.Z),
)
# ---- cross-attention (Vaswani et al. 2017, §3.2.3): the queries from the decoder side X, the keys and values
# from the encoder side X_enc; the scores are n × n_enc (one row per decoder token, one column per encoder token)
_XE = eq.Sym("X_enc")
_CROSS_GRIDS = {
    "K": Grid(N_("Keys K (from the encoder side)"), "K", lambda S, p: eq.Mul((_XE, S("W_K"))),
              task=lambda p, *_: _project_task(N_("keys"), _XE, eq.say(" (the encoder side)")), beside=True, dot_check=True),
    "V": Grid(N_("Values V (from the encoder side)"), "V", lambda S, p: eq.Mul((_XE, S("W_V"))),
              task=lambda p, *_: _project_task(N_("values"), _XE, eq.say(" (the encoder side)")), beside=True, dot_check=True),
}
_FWD = {s.id: s for s in FORWARD}
CROSS_FORWARD = (
    _FWD["Q"]._replace(words=eq.say("the queries {formula} (from the decoder side)",
                                     formula=_is(_S("Q"), eq.Mul((_S("X"), _S("W_Q"))))),
                       mistakes=(slips.QUERIES_FROM_ENCODER,)),
    Stage("K", ("X_enc", "W_K"), "n_kv", "d_k", eq.say("the keys {formula} (from the encoder side)",
                                                       formula=_is(_S("K"), eq.Mul((_XE, _S("W_K"))))), forward=_project, grid=_CROSS_GRIDS["K"],
          mistakes=(slips.KV_FROM_DECODER,), step=shown_attention.KEYS),
    Stage("V", ("X_enc", "W_V"), "n_kv", "d_v", eq.say("the values {formula} (from the encoder side)",
                                                       formula=_is(_S("V"), eq.Mul((_XE, _S("W_V"))))), forward=_project, grid=_CROSS_GRIDS["V"],
          step=shown_attention.VALUES),
) + FORWARD[3:]


class AsIs(list):
    """A stage's matrix that is other matrices' entries as they were shown (the heads side by side), so the
    backend does not show (round) them again."""


class LayerRun:
    """What the stages after the heads share: the backend, the problem, the transform and every head's values
    (``heads[k][stage id]``, as they flowed on). A plain class (as :class:`HeadRun`): a NamedTuple's class is
    built at import, for every ``worked solve``."""

    __slots__ = ("problem", "b", "t", "heads")

    def __init__(self, problem: Any, b: Any, t: Any, heads: list):
        self.problem, self.b, self.t, self.heads = problem, b, t, heads


def _concat(r: LayerRun):
    """The heads' Z side by side, head 1 first (the mistake: in the reverse order)."""
    zs = [h["Z"] for h in r.heads][::-1 if r.t.heads == "reversed" else 1]
    return AsIs([x for Z in zs for x in Z[i]] for i in range(len(zs[0])))


def _output(r: LayerRun, concat, W_O):
    """concat·W_O (the mistakes: W_O left out; the heads' Z averaged)."""
    if r.t.heads == "no-W_O":
        return AsIs(concat)
    if r.t.heads == "mean":
        zs = [h["Z"] for h in r.heads]
        share = [r.b.entry(Fraction(1, len(zs)))] * len(zs)
        return [[r.b.dot([Z[i][c] for Z in zs], share) for c in range(len(zs[0][0]))] for i in range(len(zs[0]))]
    if r.t.heads in ("concat", "reversed"):
        cols = list(zip(*W_O))
        return [[r.b.dot(row, c) for c in cols] for row in concat]
    raise ValueError(f"unknown heads transform {r.t.heads!r}")


COMBINE = (             # several heads: side by side, then W_O
    Stage("concat", (), "n", "heads·d_v", eq.say("the concatenated head outputs"), scope="layer", several=False,
          forward=_concat, grid=_GRIDS["concat"], mistakes=(slips.HEADS_SWAPPED,), step=shown_heads.CONCAT),
    Stage("Z", ("concat", "W_O"), "n", "d_out", eq.say("the output {Z}", Z=_S("Z")), scope="layer", several=False, forward=_output,
          grid=_GRIDS["output"], mistakes=(slips.NO_W_O, slips.HEADS_AVERAGED), aliases=("output",), step=shown_heads.OUTPUT),
)


class BackRun:
    """What a training step's stages share: the backend *b*, the problem, the transform *t* (its backward
    fields are the backward mistakes), the divisor of the forward pass, the learning rate, and per head the
    entries the mask hid; the softmax backward leaves each row's Σ_k A_ik·dA_ik in ``rowsum``."""

    def __init__(self, problem, b, t, factor, lr, masked: frozenset = frozenset()):
        self.problem, self.b, self.t, self.factor, self.lr, self.masked = problem, b, t, factor, lr, masked
        self.zero = b.entry(Fraction(0))
        self.rowsum: list = []

    def matmul(self, A, B) -> list:
        cols = list(zip(*B))
        return [[self.b.dot(r, c) for c in cols] for r in A]


def _tp(M) -> list:
    return [list(c) for c in zip(*M)]


def _d_out(r: BackRun, Z, T):
    return [[r.b.sub(z, y) for z, y in zip(zr, yr)] for zr, yr in zip(Z, T)]


def _loss(r: BackRun, dZ):
    b = r.b
    return [[b.mul(b.entry(Fraction(1, 2)), b.total([b.mul(d, d) for row in dZ for d in row]))]]


def _d_concat(r: BackRun, dZ, W_O):
    return r.matmul(dZ, _tp(W_O))


def _d_values(r: BackRun, A, dZ):
    return r.matmul(A if r.t.dV == "AdZ" else _tp(A), dZ)


def _d_weights(r: BackRun, dZ, V):
    return r.matmul(dZ, _tp(V))


def _d_softmax(r: BackRun, A, dA):
    """dS_ij = A_ij·(dA_ij − Σ_k A_ik·dA_ik), 0 where the mask hid the score (the mistakes: dS = dA; the Σ left out)."""
    b, n, m, masked = r.b, len(A), len(A[0]), r.masked
    r.rowsum = [b.carry(b.total([b.mul(A[i][k], dA[i][k]) for k in range(m) if (i, k) not in masked])) for i in range(n)]
    how = r.t.softmax_back
    if how == "identity":
        return [[r.zero if (i, j) in masked else dA[i][j] for j in range(m)] for i in range(n)]
    if how == "no-sum":
        return [[r.zero if (i, j) in masked else b.mul(A[i][j], dA[i][j]) for j in range(m)] for i in range(n)]
    if how == "jacobian":
        return [[r.zero if (i, j) in masked else b.mul(A[i][j], b.sub(dA[i][j], r.rowsum[i])) for j in range(m)]
                for i in range(n)]
    raise ValueError(f"unknown softmax_back transform {how!r}")


def _d_scores(r: BackRun, dS):
    """dS over the divisor again (the mistake: the divisor forgotten on the way back)."""
    if r.t.back_scale == "forgot":
        return [list(row) for row in dS]
    return [[r.zero if (i, j) in r.masked else r.b.scale_grad(x, r.factor) for j, x in enumerate(row)]
            for i, row in enumerate(dS)]


def _d_queries(r: BackRun, dsc, K):
    return r.matmul(dsc, K)


def _d_keys(r: BackRun, dsc, Q):
    return r.matmul(dsc if r.t.dK == "SQ" else _tp(dsc), Q)


def _d_weight(r: BackRun, X, d):
    return r.matmul(_tp(X), d)


def _update(w: str):
    """W′ = W − lr·dW (the mistake: W + lr·dW, in every weight or in *w* alone)."""
    def new(r: BackRun, W, dW):
        b = r.b
        upd = b.add if r.t.update == "plus" and r.t.update_of in (None, w) else b.sub
        return [[upd(x, b.mul(r.lr, g)) for x, g in zip(wr, gr)] for wr, gr in zip(W, dW)]
    return new


def _trained(sid: str, *args, **kw) -> Stage:
    """A stage of the training step, with its answer grid."""
    return Stage(sid, *args, grid=_TRAIN_GRIDS[sid], **kw)


TRAIN = (               # one training step (a [train] problem): the backward pass, in the order of the steps
    _trained("loss", ("dZ",), "1", "1", eq.say("the loss {L}", L=_S("L")), scope="layer", forward=_loss, step=shown_train.LOSS),
    _trained("dZ", ("Z", "T"), "n", "d_out", eq.say("the gradient of the output {dZ}", dZ=_S("dZ")), scope="layer", forward=_d_out, step=shown_train.DZ),
    _trained("dconcat", ("dZ", "W_O"), "n", "heads·d_v", eq.say("the gradient of the concatenated heads"), scope="layer",
          several=False, forward=_d_concat, by_head="dZ", step=shown_train.DCONCAT),
    _trained("dV", ("weights", "dZ"), "n_kv", "d_v", eq.say("the gradient {matrix}", matrix=_S("dV")), forward=_d_values,
             mistakes=(slips.DV_NOT_TRANSPOSED,), step=shown_train.DV),
    _trained("dA", ("dZ", "V"), "n", "n_kv", eq.say("the gradient {dA} of the weights", dA=_S("dA")), forward=_d_weights, step=shown_train.DA),
    _trained("dS", ("weights", "dA"), "n", "n_kv", eq.say("the softmax backward {dS}", dS=_S("dS")), forward=_d_softmax,
             mistakes=(slips.SOFTMAX_BACKWARD_SUM,), step=shown_train.DS),
    _trained("dscores", ("dS",), "n", "n_kv", eq.say("the gradient of the scores"), forward=_d_scores,
             mistakes=(slips.NO_SCALING_BACKWARD,), step=shown_train.DSCORES),
    _trained("dQ", ("dscores", "K"), "n", "d_k", eq.say("the gradient {matrix}", matrix=_S("dQ")), forward=_d_queries, step=shown_train.DQ),
    _trained("dK", ("dscores", "Q"), "n_kv", "d_k", eq.say("the gradient {matrix}", matrix=_S("dK")), forward=_d_keys,
             mistakes=(slips.DK_NOT_TRANSPOSED,), step=shown_train.DK),
    _trained("dW_Q", ("X", "dQ"), "d_model", "d_k", eq.say("the gradient {matrix}", matrix=_S("dW_Q")), forward=_d_weight, step=shown_train.DW_Q),
    _trained("dW_K", ("X", "dK"), "d_model", "d_k", eq.say("the gradient {matrix}", matrix=_S("dW_K")), forward=_d_weight, step=shown_train.DW_K),
    _trained("dW_V", ("X", "dV"), "d_model", "d_v", eq.say("the gradient {matrix}", matrix=_S("dW_V")), forward=_d_weight, step=shown_train.DW_V),
)
UPDATE = (              # after every head's gradients: each head's weights updated, then the loss again
    _trained("W_Q_new", ("W_Q", "dW_Q"), "d_model", "d_k", eq.say("the updated {matrix}", matrix=_S("W_Q")), forward=_update("W_Q"),
             mistakes=(slips.UPDATE_WRONG_SIGN,), step=shown_train.W_Q_NEW),
    _trained("W_K_new", ("W_K", "dW_K"), "d_model", "d_k", eq.say("the updated {matrix}", matrix=_S("W_K")), forward=_update("W_K"), step=shown_train.W_K_NEW),
    _trained("W_V_new", ("W_V", "dW_V"), "d_model", "d_v", eq.say("the updated {matrix}", matrix=_S("W_V")), forward=_update("W_V"), step=shown_train.W_V_NEW),
    _trained("loss_after", ("Z_after", "T"), "1", "1", eq.say("the loss after the update {L}", L=eq.Sym("L", prime=True)), scope="layer",
          forward=lambda r, Z, T: _loss(r, _d_out(r, Z, T)), step=shown_train.LOSS_AFTER),      # Z_after: a fresh pass with the new weights
)


_TR = {s.id: s for s in TRAIN}
_CROSS_DW = {"dW_K": Grid(gradient_label("dW_K"), "dW_K", lambda S, p: eq.Mul((_tr(_XE), S("dK")))),
             "dW_V": Grid(gradient_label("dW_V"), "dW_V", lambda S, p: eq.Mul((_tr(_XE), S("dV"))))}
CROSS_TRAIN = tuple(s._replace(inputs=("X_enc",) + s.inputs[1:], grid=_CROSS_DW[s.id]) if s.id in _CROSS_DW else s
                    for s in TRAIN)


# ---- a whole Transformer block (issue 27): positions, the residual adds, layer norm, the feed-forward, the output
class BlockRun:
    """What a block's stages (before and after the heads) share: the backend, the problem and the transform;
    *lenient*: a student's entries carried on (a row of variance 0, with ε = 0, is not defined, no error). A plain
    class, as :class:`LayerRun`."""

    __slots__ = ("problem", "b", "t", "lenient")

    def __init__(self, problem: Any, b: Any, t: Any, lenient: bool = False):
        self.problem, self.b, self.t, self.lenient = problem, b, t, lenient


def _positions(r: BlockRun):
    """P[pos, 2i] = sin(pos/10000^(2i/d_model)), P[pos, 2i+1] = cos(the same), pos from 0."""
    d = r.problem.d_model
    if r.problem.block.positional == "none":        # no positions: P is 0, X0 is X
        return [[r.b.entry(Fraction(0))] * d for _ in range(r.problem.n)]
    swapped = r.t.sincos == "swapped"      # the mistake: cos in the even columns, sin in the odd
    return [[r.b.position(pos, c, d, swapped) for c in range(d)] for pos in range(r.problem.n)]


def _plus(r: BlockRun, A, B):
    """A + B entry by entry: X + P, and each residual add."""
    return [[r.b.add(a, x) for a, x in zip(ra, rb)] for ra, rb in zip(A, B)]


NormParts, norm_parts = shown_block.NormParts, shown_block.norm_parts     # one row's layer norm (worked.steps.block)


def _residual(which: str) -> Callable:
    """A residual add, A + B (the mistake: the *which* one, "first" or "second", left out: B alone)."""
    def add(r: BlockRun, A, B):
        return [list(row) for row in B] if r.t.residual == f"no-{which}" else _plus(r, A, B)
    add.__doc__ = f"The {which} residual add: its input plus the sublayer's output."
    return add


def no_value(b):
    """What backend *b* holds where a pass has no value (a layer norm of a row of variance 0 with ε = 0, and all
    computed from it): its ``UNDEFINED`` (Float: NaN), else None."""
    return getattr(b, "UNDEFINED", None)


def undefined(x) -> bool:
    """Is *x* a value a pass does not have (None, or a Float pass's NaN)?"""
    return x is None or (type(x) is float and x != x)


def _norm_slip(r: BlockRun, M, gamma, beta):
    """A layer norm as the mistakes take it: over each column (the tokens) instead of each row, σ² over d − 1, the
    √ or ε left out; no value (the backend's UNDEFINED, else None) where it divides by what may be 0."""
    b, t, eps = r.b, r.t, r.problem.block.eps
    cols = t.norm_axis == "columns"
    lines = [list(c) for c in zip(*M)] if cols else M

    def one(xs):
        k = len(xs) - (1 if t.variance == "n-1" else 0)
        if k == 0:
            return [None] * len(xs)
        mu = b.div(b.total(xs), b.entry(Fraction(len(xs))))
        devs = [b.sub(x, mu) for x in xs]
        var = b.div(b.total([b.mul(x, x) for x in devs]), b.entry(Fraction(k)))
        root = {"sqrt": lambda: b.sqrt(b.add(var, b.entry(eps))), "no-sqrt": lambda: b.add(var, b.entry(eps)),
                "no-eps": lambda: b.sqrt(var)}[t.norm_root]()
        return [None] * len(xs) if b.may_be_zero(root) else [b.div(x, root) for x in devs]

    normed = [[None] * len(xs) if any(undefined(x) for x in xs) else one(xs) for xs in lines]
    normed = [list(c) for c in zip(*normed)] if cols else normed
    return [[no_value(b) if q is None else b.add(b.mul(g, q), be) for q, g, be in zip(row, gamma, beta)] for row in normed]


def _layer_norm(r: BlockRun, M, gamma, beta):
    """Each row over d_model: μ = the row's mean, σ² = the mean of (x − μ)² (dividing by d_model), then
    γ ⊙ (x − μ)/√(σ² + ε) + β (the mistakes: :func:`_norm_slip`)."""
    if (r.t.norm_axis, r.t.variance, r.t.norm_root) != ("rows", "n", "sqrt"):
        return _norm_slip(r, M, gamma, beta)
    out = []
    for i, row in enumerate(M):
        if any(undefined(x) for x in (*row, *gamma, *beta)):   # a row with no value (a carried path met a row it
            out.append([no_value(r.b)] * len(row))          # could not normalise before): none after it either
            continue
        parts = norm_parts(r.b, row, gamma, beta, r.problem.block.eps)
        # from a student's own row, or in a mistake's pass (a residual left out may leave a row of equal entries):
        # not defined (a band of nothing), never an error
        if parts.out is None and (r.lenient or r.t != type(r.t)()):
            out.append([no_value(r.b)] * len(row))
            continue
        if parts.out is None:
            from .errors import ProblemError

            raise ProblemError("eps", f"row {i + 1} ({r.problem.tokens[i]}) has variance 0 where layer norm takes it, "
                               "and ε is 0: layer norm would divide by 0 (give eps > 0, or other numbers)",
                               r.problem.source)
        out.append(parts.out)
    return out


def _affine(r: BlockRun, M, W, bias):
    """M·W + b (b added to every row)."""
    cols = list(zip(*W))
    return [[r.b.add(r.b.dot(row, c), be) for c, be in zip(cols, bias)] for row in M]


def _relu(r: BlockRun, U, bias):
    """relu(U), U = x·W_1 + b_1 (the mistake: ReLU before the bias, relu(x·W_1) + b_1 = relu(U − b_1) + b_1)."""
    b = r.b
    if r.t.relu == "before-bias":
        return [[b.add(b.relu(b.sub(x, be)), be) for x, be in zip(row, bias)] for row in U]
    return [[b.relu(x) for x in row] for row in U]


def _times(r: BlockRun, M, W):
    cols = list(zip(*W))
    return [[r.b.dot(row, c) for c in cols] for row in M]


def _row_softmax(r: BlockRun, L):
    """The softmax of each row (the mistake: of each column)."""
    if r.t.output_softmax == "columns":
        cols = [r.b.softmax(list(c))[0] for c in zip(*L)]
        return [list(row) for row in zip(*cols)]
    return [r.b.softmax(row)[0] for row in L]


def _cross_entropy(r: BlockRun, probs, targets):
    """The mean over positions of −ln probs[i, target_i], natural log: a 1 × 1 matrix."""
    b = r.b
    terms = [b.ln(probs[i][t]) for i, t in enumerate(targets)]
    if any(x is None for x in terms):     # a hand's probability rounded to 0: no ln of it (the value is not defined)
        return [[None]]
    if r.t.log == "log10":                # the mistake: log base 10, ln p / ln 10
        ten = b.ln(b.entry(Fraction(10)))
        terms = [b.div(x, ten) for x in terms]
    return [[b.div(b.sub(b.entry(Fraction(0)), b.total(terms)), b.entry(Fraction(len(terms))))]]


_B = eq.Sym


def _ln_of(which: str, x):
    return eq.Call(f"LN_{which}", (x,))


def _ln_check(tok, head) -> eq.Prose:
    """What the worksheet asks of one row's layer norm."""
    return eq.say("Row {token}: write the mean {mu}, each x − μ, the variance {var}, the root {root}, then the normalised "
                  "row.", token=tok, mu=eq.Sym("μ"), var=eq.Pow(eq.Sym("σ"), eq.num(2)),
                  root=eq.Sqrt(eq.Add((eq.Pow(eq.Sym("σ"), eq.num(2)), eq.Sym("ε")))))


_BLOCK_GRIDS = {
    "P": Grid(N_("Positions P"), lambda S: eq.Entry(_B("P"), "pos", "2i"), lambda S, p: eq.Call("sin", (eq.Frac(
        _B("pos", upright=True), eq.Pow(eq.num(10000), eq.Frac(_B("2i", upright=True), _B("d")))),)),
              lambda p: eq.say("d = d_model; odd columns 2i + 1: cos of the same; pos counts from 0"),
              row_check=lambda tok, h: eq.say("Row {token}: write each angle pos/10000^(2i/d_model), then its sin (even "
                                               "columns) or cos (odd columns), in radians.", token=tok)),
    "X0": Grid(N_("Block input X0"), "X_0", lambda S, p: eq.Add((_X, _B("P")))),
    "R1": Grid(N_("First residual sum"), "R_1", lambda S, p: eq.Add((_B("X_0"), _B("Z")))),
    "N1": Grid(N_("Layer norm LN_1"), "N_1", lambda S, p: _ln_of("1", _B("X_0")), row_check=_ln_check),
    "H1": Grid(N_("After the attention sublayer H1"), "H_1", lambda S, p: (
        _ln_of("1", _B("R_1")) if p.block.kind == "post-ln" else eq.Add((_B("X_0"), _B("Z")))), row_check=_ln_check),
    "N2": Grid(N_("Layer norm LN_2"), "N_2", lambda S, p: _ln_of("2", _B("H_1")), row_check=_ln_check),
    "U": Grid(N_("Feed-forward, first layer"), "U", lambda S, p: eq.Add((eq.Mul((
        _B("H_1" if p.block.kind == "post-ln" else "N_2"), _B("W_1"))), _B("b_1"))), beside=True, dot_check=True),
    "G": Grid(N_("After ReLU"), "G", lambda S, p: eq.Call("relu", (_B("U"),)),
              row_check=lambda tok, h: eq.say("Row {token}: write relu of each entry of the row of {U}.", token=tok, U=_B("U"))),
    "F": Grid(N_("Feed-forward output"), "F", lambda S, p: eq.Add((eq.Mul((_B("G"), _B("W_2"))), _B("b_2"))),
              beside=True, dot_check=True),
    "R2": Grid(N_("Second residual sum"), "R_2", lambda S, p: eq.Add((_B("H_1"), _B("F")))),
    "H": Grid(N_("Block output H"), "H", lambda S, p: (
        _ln_of("2", _B("R_2")) if p.block.kind == "post-ln" else eq.Add((_B("H_1"), _B("F")))), row_check=_ln_check),
    "Hf": Grid(N_("Final layer norm"), "H_f", lambda S, p: _ln_of("f", _B("H")), row_check=_ln_check),
    "logits": Grid(N_("Logits"), "logits", lambda S, p: eq.Mul((_B("H" if p.block.kind == "post-ln" else "H_f"),
                                                            _B("W_out"))), dot_check=True),
    "probs": Grid(N_("Next-token probabilities"), "probs", lambda S, p: eq.Call("softmax", (_B("logits", upright=True),)),
                  lambda p: eq.say("softmax of each row"), heatmap=True,
                  row_check=lambda tok, h: eq.say("Row {token}: write {ex} of each logit, the row total, then each "
                                                  "probability.", token=tok, ex=_EX)),
    "loss": Grid(N_("Loss"), lambda S: eq.Sym("L"), lambda S, p: eq.Neg(eq.Mul((eq.Frac(eq.num(1), eq.Sym("n")), eq.Sum(
        eq.Call("ln", (eq.Entry(_B("probs", upright=True), "i", "target_i"),)), "i")))),
                 lambda p: eq.say("natural log; the mean over the positions")),
}


def _block_stage(sid, inputs, rows, cols, words, forward, **kw) -> Stage:
    return Stage(sid, inputs, rows, cols, eq.prose(eq.say(words)), scope="layer", forward=forward, grid=_BLOCK_GRIDS[sid], **kw)


# ---- a block's training step (issue 27; [train] loss = "cross-entropy"): the gradient of every weight, the update
def _col_sums(b, M) -> list:
    """The sums of *M*'s columns, as a 1 × cols matrix (a bias's gradient: each row added it once)."""
    return [[b.total([row[j] for row in M]) for j in range(len(M[0]))]]


def flat(v) -> list:
    """A vector as the stages take it (a list), from a 1 × k matrix or a list."""
    return list(v[0]) if v and isinstance(v[0], list) else list(v)     # (an Interval's entry is a tuple)


def _d_logits(r: BlockRun, probs, targets):
    """(probs − Y)/n, Y one-hot of each position's target: the gradient of the mean cross-entropy at the logits."""
    b = r.b
    n, one = b.entry(Fraction(len(probs))), b.entry(Fraction(1))
    return [[b.div(b.sub(p, one) if j == t else p, n) for j, p in enumerate(row)] for row, t in zip(probs, targets)]


def _d_of_weight(r: BlockRun, M, d):
    """Mᵀ·d: the gradient of a weight that multiplies M (W_out, W_1, W_2, W_O)."""
    cols = list(zip(*d))
    return [[r.b.dot(mc, dc) for dc in cols] for mc in zip(*M)]


def _d_of_input(r: BlockRun, d, W):
    """d·Wᵀ: the gradient of what a weight W multiplies."""
    return [[r.b.dot(row, wr) for wr in W] for row in d]


def _d_bias(r: BlockRun, d):
    """The sums of d's columns: the gradient of a bias (β, b_1, b_2)."""
    return _col_sums(r.b, d)


def _d_relu(r: BlockRun, dG, U):
    """dG where U > 0, else 0 (ReLU's slope: 1 above 0, 0 at or below it). The certified pass cannot tell the slope
    of an entry of U it encloses round 0: from a student's values (or a mistake's) that entry has no value; in the
    problem's own pass the problem is refused in one line (its gradient would rest on which side of 0 U is)."""
    out = [[r.b.relu_back(g, u) for g, u in zip(gr, ur)] for gr, ur in zip(dG, U)]
    if not r.lenient and r.t == type(r.t)():
        for i, (row, ur, gr) in enumerate(zip(out, U, dG)):
            for j, (d, u, g) in enumerate(zip(row, ur, gr)):
                if undefined(d) and not (undefined(u) or undefined(g)):
                    from .errors import ProblemError

                    raise ProblemError("W_1", f"U[{i + 1},{j + 1}] = x·W_1 + b_1 is 0 (or too near 0 to tell) where the "
                                       "training step takes ReLU's slope: its gradient is not defined (give other "
                                       "numbers)", r.problem.source)
    return out


def _norm_back_rows(r: BlockRun, dY, M, gamma):
    """Each row's layer-norm backward: with x̂ = (x − μ)/√(σ² + ε) and dx̂ = γ ⊙ dY,
    dx = (dx̂ − mean(dx̂) − x̂ ⊙ mean(dx̂ ⊙ x̂))/√(σ² + ε); and the x̂ rows (for dγ). :func:`norm_back_parts`
    gives one row's parts as a hand writes them."""
    parts = [norm_back_parts(r.b, dy, row, gamma, r.problem.block.eps) for dy, row in zip(dY, M)]
    return [q.dx for q in parts], [q.norm.normed for q in parts]


#: one row's layer-norm backward as a hand works it (declared with the steps that show it: worked/steps/block_train.py)
NormBack, norm_back_parts = shown_block_train.NormBack, shown_block_train.norm_back_parts


def _d_norm(r: BlockRun, dY, M, gamma):
    """The gradient of a layer norm's input M from the gradient dY of its output."""
    return _norm_back_rows(r, dY, M, gamma)[0]


def _d_gamma(r: BlockRun, dY, M, gamma):
    """dγ: the sums of the columns of dY ⊙ x̂ (x̂ the normalised rows of the layer norm's input M)."""
    hats = _norm_back_rows(r, dY, M, gamma)[1]
    return _col_sums(r.b, [[r.b.mul(d, h) for d, h in zip(dr, hr)] for dr, hr in zip(dY, hats)])


def _d_residual_ffn(r: BlockRun, d_res, dU, W_1):
    """post-LN: dH1 = dR2 + dU·W_1ᵀ (H1 feeds the residual add and the feed-forward)."""
    return _plus(r, d_res, _d_of_input(r, dU, W_1))


def _d_residual_norm(r: BlockRun, d_res, dN, M, gamma):
    """pre-LN: dH1 = dH + LN_2's backward of dN2 (H1 feeds the residual add and LN_2)."""
    return _plus(r, d_res, _d_norm(r, dN, M, gamma))


def _same(r: BlockRun, d):
    """The gradient passed on unchanged (the residual add's branch: dZ = dR1, or dH1)."""
    return [list(row) for row in d]


def _d_heads_input(r: BlockRun, heads):
    """pre-LN: dN1 = Σ over the heads of dQ·W_Qᵀ + dK·W_Kᵀ + dV·W_Vᵀ (N1 feeds every head's projections)."""
    b = r.b
    terms = [_d_of_input(r, h[d], h[w]) for h in heads for d, w in (("dQ", "W_Q"), ("dK", "W_K"), ("dV", "W_V"))]
    return [[b.total([t[i][j] for t in terms]) for j in range(len(terms[0][0]))] for i in range(len(terms[0]))]


def _block_update(r: BlockRun, W, dW):
    """W − lr·dW (a vector's as a 1 × k matrix)."""
    b, lr = r.b, r.b.entry(r.problem.train.lr)
    W = W if W and isinstance(W[0], list) else [W]
    return [[b.sub(x, b.mul(lr, g)) for x, g in zip(wr, gr)] for wr, gr in zip(W, dW)]


_D = lambda name: eq.matrix_sym("d" + name)  # noqa: E731


def _grad_grid(sid: str, label: "str | eq.Said", definition: Callable, hint: Callable | None = None) -> Grid:
    return Grid(label, lambda S, sid=sid: eq.matrix_sym(sid), lambda S, p, f=definition: f(p), hint)


def _mT(name: str):
    return eq.Pow(_B(name), eq.Sym("T"))


def _back(dY: str, M: str, gamma: str):
    return eq.Call(eq.LN_BACK, (eq.matrix_sym(dY), _B(M), _B(gamma)))


_LN_BACK_HINT = lambda p: eq.say("the layer norm's backward, row by row: dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂))/√(σ² + ε), "  # noqa: E731
                                 "dx̂ = γ·dY, entry by entry")
_BLOCK_TRAIN_GRIDS = {
    "dlogits": _grad_grid("dlogits", N_("Gradient of the logits"), lambda p: eq.Frac(
        eq.Add((_B("probs", upright=True), eq.Neg(_B("Y")))), eq.Sym("n")), lambda p: eq.say("Y: 1 at each position's target, else 0")),
    "dW_out": _grad_grid("dW_out", gradient_label("dW_out"), lambda p: eq.Mul((_mT("H" if p.block.kind == "post-ln" else "H_f"),
                                                                        _D("logits")))),
    "dH": _grad_grid("dH", N_("Gradient of the block output"), lambda p: eq.Mul((_D("logits"), _mT("W_out")))
                     if p.block.kind == "post-ln" else _back("dHf", "H", "γ_f"),
                     lambda p: None if p.block.kind == "post-ln" else _LN_BACK_HINT(p)),
    "dHf": _grad_grid("dHf", N_("Gradient of the final layer norm"), lambda p: eq.Mul((_D("logits"), _mT("W_out")))),
    "dR2": _grad_grid("dR2", N_("Gradient of the second residual sum"), lambda p: _back("dH", "R_2", "γ_2"), _LN_BACK_HINT),
    "dW_2": _grad_grid("dW_2", gradient_label("dW_2"), lambda p: eq.Mul((_mT("G"), _D("R2" if p.block.kind == "post-ln" else "H")))),
    "db_2": _grad_grid("db_2", gradient_label("db_2"), lambda p: eq.Call(eq.COLSUM, (_D("R2" if p.block.kind == "post-ln" else "H"),))),
    "dG": _grad_grid("dG", N_("Gradient of the hidden values"), lambda p: eq.Mul((_D("R2" if p.block.kind == "post-ln" else "H"),
                                                                             _mT("W_2")))),
    "dU": _grad_grid("dU", N_("Gradient before ReLU"), lambda p: eq.Mul((_D("G"), eq.Call("step", (_B("U"),)))),
                     lambda p: eq.say("dG where U > 0, else 0")),
    "dW_1": _grad_grid("dW_1", gradient_label("dW_1"), lambda p: eq.Mul((_mT("H_1" if p.block.kind == "post-ln" else "N_2"), _D("U")))),
    "db_1": _grad_grid("db_1", gradient_label("db_1"), lambda p: eq.Call(eq.COLSUM, (_D("U"),))),
    "dN2": _grad_grid("dN2", N_("Gradient of LN_2's output"), lambda p: eq.Mul((_D("U"), _mT("W_1")))),
    "dgamma_2": _grad_grid("dgamma_2", gradient_label("dgamma_2"), lambda p: eq.Call(eq.COLSUM, (eq.Mul((
        _D("H" if p.block.kind == "post-ln" else "N2"), _B("x̂"))),)), lambda p: eq.say("x̂: LN_2's normalised rows")),
    "dbeta_2": _grad_grid("dbeta_2", gradient_label("dbeta_2"), lambda p: eq.Call(eq.COLSUM, (_D("H" if p.block.kind == "post-ln" else "N2"),))),
    "dgamma_f": _grad_grid("dgamma_f", gradient_label("dgamma_f"), lambda p: eq.Call(eq.COLSUM, (eq.Mul((_D("Hf"), _B("x̂"))),)),
                           lambda p: eq.say("x̂: LN_f's normalised rows")),
    "dbeta_f": _grad_grid("dbeta_f", gradient_label("dbeta_f"), lambda p: eq.Call(eq.COLSUM, (_D("Hf"),))),
    "dH1": _grad_grid("dH1", N_("Gradient of H1"), lambda p: eq.Add((_D("R2"), eq.Mul((_D("U"), _mT("W_1")))))
                      if p.block.kind == "post-ln" else eq.Add((_D("H"), _back("dN2", "H_1", "γ_2")))),
    "dR1": _grad_grid("dR1", N_("Gradient of the first residual sum"), lambda p: _back("dH1", "R_1", "γ_1"), _LN_BACK_HINT),
    "dZ": _grad_grid("dZ", N_("Gradient of the attention's output"), lambda p: _D("R1" if p.block.kind == "post-ln" else "H1")),
    "dconcat": _grad_grid("dconcat", gradient_label("dconcat"), lambda p: eq.Mul((_D("Z"), _mT("W_O")))),
    "dW_O": _grad_grid("dW_O", gradient_label("dW_O"), lambda p: eq.Mul((_mT("concat"), _D("Z")))),
    "dgamma_1": _grad_grid("dgamma_1", gradient_label("dgamma_1"), lambda p: eq.Call(eq.COLSUM, (eq.Mul((
        _D("H1" if p.block.kind == "post-ln" else "N1"), _B("x̂"))),)), lambda p: eq.say("x̂: LN_1's normalised rows")),
    "dbeta_1": _grad_grid("dbeta_1", gradient_label("dbeta_1"), lambda p: eq.Call(eq.COLSUM, (_D("H1" if p.block.kind == "post-ln" else "N1"),))),
    "dN1": _grad_grid("dN1", N_("Gradient of LN_1's output"), lambda p: eq.Sum(eq.Add(tuple(
        eq.Mul((_D(x), _mT("W_" + x))) for x in ("Q", "K", "V"))), "heads")),
}


def _block_grad(sid, inputs, rows, cols, words, forward) -> Stage:
    return Stage(sid, inputs, rows, cols, eq.prose(eq.say(words) if isinstance(words, str) else words), scope="layer",
                 forward=forward, grid=_BLOCK_TRAIN_GRIDS[sid], step=_BLOCK_TRAIN_STEPS[forward])


#: each kind of a block's gradient, its worked step (worked/steps/block_train.py)
_BLOCK_TRAIN_STEPS = {
    _d_logits: shown_block_train.DLOGITS, _d_of_weight: shown_block_train.WEIGHT_GRAD,
    _d_of_input: shown_block_train.INPUT_GRAD, _d_bias: shown_block_train.BIAS_GRAD, _d_relu: shown_block_train.RELU_BACK,
    _d_norm: shown_block_train.NORM_BACK, _d_gamma: shown_block_train.GAMMA_GRAD,
    _d_residual_ffn: shown_block_train.RESIDUAL_FFN, _d_residual_norm: shown_block_train.RESIDUAL_NORM,
    _same: shown_block_train.PASSED_ON, _d_heads_input: shown_block_train.HEADS_INPUT,
}


_DLOGITS = (
    _block_grad("dlogits", ("probs", "targets"), "n", "vocab", N_("the gradient of the logits (probs − Y)/n"), _d_logits),
)
_DW_O = (      # dconcat's columns, head by head, are each head's dZ (the heads' backward starts from them)
    _block_grad("dconcat", ("dZ", "W_O"), "n", "heads·d_v", N_("the gradient of the concatenated heads dZ·W_Oᵀ"),
                _d_of_input)._replace(by_head="dZ"),
    _block_grad("dW_O", ("concat", "dZ"), "heads·d_v", "d_model", N_("the gradient dW_O = concatᵀ·dZ"), _d_of_weight),
)
#: the weights a block's training step updates (the heads' W_Q, W_K, W_V by the attention's own update stages)
BLOCK_WEIGHTS = ("W_O", "W_1", "b_1", "W_2", "b_2", "gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_f", "beta_f", "W_out")
_SHAPES = {"W_O": ("heads·d_v", "d_model"), "W_1": ("d_model", "d_ff"), "b_1": ("1", "d_ff"), "W_2": ("d_ff", "d_model"),
           "W_out": ("d_model", "vocab")}


_LOSS_AFTER = Stage("loss_after", ("loss_new",), "1", "1", eq.say("the loss after the update {L}", L=eq.Sym("L", prime=True)),
                    scope="layer", forward=_same, grid=Grid(N_("Loss after the update L′"), lambda S: eq.Sym("L", prime=True),
                                                            lambda S, p: eq.Sym("L", prime=True),
                                                            lambda p: eq.say("the loss of a fresh pass with the updated weights")),
                    step=shown_block_train.LOSS_AFTER)


def _block_updates(weights: tuple) -> tuple:
    """Each weight's update W − lr·dW, then the loss after them (its input ``loss_new``: the loss of a fresh pass
    with the updated weights)."""
    return tuple(Stage(w + "_new", (w, "d" + w), *_SHAPES.get(w, ("1", "d_model")), eq.say("the updated {w}", w=w),
                       scope="layer", forward=_block_update,
                       step=shown_block_train.UPDATE,
                       grid=Grid(updated_label(w), lambda S, w=w: eq.matrix_sym(w, prime=True),
                                 lambda S, p, w=w: eq.Add((eq.matrix_sym(w), eq.Neg(eq.Mul((eq.Sym("lr", upright=True),
                                                                                  eq.matrix_sym("d" + w)))))))) for w in weights) + (
        _LOSS_AFTER,)


def _ffn_back(d_out: str, x_in: str) -> tuple:
    """The feed-forward's backward, from the gradient *d_out* of its output F to its weights, given its input
    *x_in*: dW_2, db_2, dG, dU (through ReLU), dW_1, db_1."""
    return (
        _block_grad("dW_2", ("G", d_out), "d_ff", "d_model", eq.say("the gradient dW_2 = Gᵀ·{d}", d=d_out), _d_of_weight),
        _block_grad("db_2", (d_out,), "1", "d_model", N_("the gradient db_2"), _d_bias),
        _block_grad("dG", (d_out, "W_2"), "n", "d_ff", eq.say("the gradient of the hidden values {d}·W_2ᵀ", d=d_out), _d_of_input),
        _block_grad("dU", ("dG", "U"), "n", "d_ff", N_("the gradient before ReLU"), _d_relu),
        _block_grad("dW_1", (x_in, "dU"), "d_model", "d_ff", eq.say("the gradient dW_1 = {x}ᵀ·dU", x=x_in), _d_of_weight),
        _block_grad("db_1", ("dU",), "1", "d_ff", N_("the gradient db_1"), _d_bias),
    )


def _output_back(H: str, dH: str) -> tuple:
    """The output layer's backward, from dlogits: dW_out = Hᵀ·dlogits and the gradient *dH* of its input *H*."""
    return (
        _block_grad("dW_out", (H, "dlogits"), "d_model", "vocab", eq.say("the gradient dW_out = {H}ᵀ·dlogits", H=H), _d_of_weight),
        _block_grad(dH, ("dlogits", "W_out"), "n", "d_model", eq.say("the gradient of {H}: dlogits·W_outᵀ", H=H), _d_of_input),
    )


def _norm_back(d: str, M: str, k: str, dM: str | None) -> tuple:
    """A layer norm's backward from the gradient *d* of its output (its input *M*, its γ and β ``gamma_`` + *k*):
    the gradient *dM* of its input (None: not needed), dγ and dβ."""
    return ((_block_grad(dM, (d, M, "gamma_" + k), "n", "d_model", eq.say("the gradient of {M} (LN_{k} backward)", M=M, k=k), _d_norm),)
            if dM else ()) + (
        _block_grad("dgamma_" + k, (d, M, "gamma_" + k), "1", "d_model", eq.say("the gradient dγ_{k}", k=k), _d_gamma),
        _block_grad("dbeta_" + k, (d,), "1", "d_model", eq.say("the gradient dβ_{k}", k=k), _d_bias),
    )


_POST_TRAIN = _DLOGITS + _output_back("H", "dH") + _norm_back("dH", "R2", "2", "dR2") + _ffn_back("dR2", "H1") + (
    _block_grad("dH1", ("dR2", "dU", "W_1"), "n", "d_model", N_("the gradient of H1 dR2 + dU·W_1ᵀ"), _d_residual_ffn),
) + _norm_back("dH1", "R1", "1", "dR1") + (
    _block_grad("dZ", ("dR1",), "n", "d_model", N_("the gradient of the attention's output dZ = dR1"), _same),
) + _DW_O
_PRE_TRAIN = _DLOGITS + _output_back("Hf", "dHf") + _norm_back("dHf", "H", "f", "dH") + _ffn_back("dH", "N2") + (
    _block_grad("dN2", ("dU", "W_1"), "n", "d_model", N_("the gradient of LN_2's output dU·W_1ᵀ"), _d_of_input),
) + _norm_back("dN2", "H1", "2", None) + (
    _block_grad("dH1", ("dH", "dN2", "H1", "gamma_2"), "n", "d_model", N_("the gradient of H1: dH + LN_2's backward of dN2"),
                _d_residual_norm),
    _block_grad("dZ", ("dH1",), "n", "d_model", N_("the gradient of the attention's output dZ = dH1"), _same),
) + _DW_O
#: pre-LN's stages after the heads' backward: LN_1 feeds the heads
_PRE_AFTER_HEADS = (
    _block_grad("dN1", ("head_grads",), "n", "d_model", N_("the gradient of LN_1's output (every head's projections)"),
                _d_heads_input),
) + _norm_back("dN1", "X0", "1", None)


_POSITIONS = _block_stage("P", (), "n", "d_model", N_("the positions P (sinusoidal)"), _positions, step=shown_block.POSITIONS,
                          mistakes=(slips.SIN_COS_SWAPPED,))
_NORM_SLIPS = (slips.NORM_OVER_COLUMNS, slips.VARIANCE_N_MINUS_1, slips.NORM_ROOT)      # the block's first layer norm's
_BLOCK_IN = _block_stage("X0", ("X", "P"), "n", "d_model", N_("the block's input X + P"), _plus, step=shown_block.PLUS)
_OUTPUT_LAYER = (
    _block_stage("probs", ("logits",), "n", "vocab", N_("the next-token probabilities (softmax of each row of the logits)"),
                 _row_softmax, step=shown_block.SOFTMAX, mistakes=(slips.OUTPUT_SOFTMAX_COLUMNS,)),
    _block_stage("loss", ("probs", "targets"), "1", "1", N_("the loss: the mean of −ln p of each target"), _cross_entropy,
                 step=shown_block.LOSS, mistakes=(slips.LOG10_LOSS,)),
)
_FFN_REST = (      # the feed-forward after its first layer, in either order (G takes b_1 for ReLU before the bias)
    _block_stage("G", ("U", "b_1"), "n", "d_ff", N_("the feed-forward's hidden values after ReLU"), _relu,
                 step=shown_block.RELU, mistakes=(slips.RELU_BEFORE_BIAS,)),
    _block_stage("F", ("G", "W_2", "b_2"), "n", "d_model", N_("the feed-forward's output G·W_2 + b_2"), _affine,
                 step=shown_block.AFFINE),
)
#: the stages of a post-LN block (Vaswani et al. 2017): before the heads, the heads' input, after the heads
POST_LN = {
    "before": (_POSITIONS, _BLOCK_IN),
    "attends": "X0",
    "after": (
        _block_stage("R1", ("X0", "Z"), "n", "d_model", N_("the first residual sum X0 + Z"), _residual("first"),
                     step=shown_block.PLUS, mistakes=(slips.NO_RESIDUAL,)),
        _block_stage("H1", ("R1", "gamma_1", "beta_1"), "n", "d_model", N_("H1 = LN_1(X0 + Z)"), _layer_norm, step=shown_block.NORM,
                     mistakes=_NORM_SLIPS),
        _block_stage("U", ("H1", "W_1", "b_1"), "n", "d_ff", N_("the feed-forward's first layer H1·W_1 + b_1"), _affine, step=shown_block.AFFINE),
        *_FFN_REST,
        _block_stage("R2", ("H1", "F"), "n", "d_model", N_("the second residual sum H1 + F"), _residual("second"),
                     step=shown_block.PLUS),
        _block_stage("H", ("R2", "gamma_2", "beta_2"), "n", "d_model", N_("the block's output H = LN_2(H1 + F)"), _layer_norm, step=shown_block.NORM),
        _block_stage("logits", ("H", "W_out"), "n", "vocab", N_("the logits H·W_out"), _times, step=shown_block.AFFINE),
    ) + _OUTPUT_LAYER,
    # a [train] step: the layer's gradients down to dZ, then the heads' (the attention's stages), then those after them
    "train": _POST_TRAIN,
    "after_heads": (),
    "update": _block_updates(tuple(w for w in BLOCK_WEIGHTS if not w.endswith("_f"))),
}
#: a pre-LN block (GPT-2): layer norm before each sublayer, a final one before the output layer
PRE_LN = {
    "before": (_POSITIONS, _BLOCK_IN,
               _block_stage("N1", ("X0", "gamma_1", "beta_1"), "n", "d_model", N_("LN_1(X0), the heads' input"),
                            _layer_norm, step=shown_block.NORM,
                            mistakes=_NORM_SLIPS + (slips.POSITIONS_AFTER_ATTENTION,))),
    "attends": "N1",
    "after": (
        _block_stage("H1", ("X0", "Z"), "n", "d_model", N_("H1 = X0 + Z (the residual add)"), _residual("first"),
                     step=shown_block.PLUS, mistakes=(slips.NO_RESIDUAL,)),
        _block_stage("N2", ("H1", "gamma_2", "beta_2"), "n", "d_model", N_("LN_2(H1), the feed-forward's input"), _layer_norm, step=shown_block.NORM),
        _block_stage("U", ("N2", "W_1", "b_1"), "n", "d_ff", N_("the feed-forward's first layer N2·W_1 + b_1"), _affine, step=shown_block.AFFINE),
        *_FFN_REST,
        _block_stage("H", ("H1", "F"), "n", "d_model", N_("the block's output H = H1 + F"), _residual("second"),
                     step=shown_block.PLUS),
        _block_stage("Hf", ("H", "gamma_f", "beta_f"), "n", "d_model", N_("the final layer norm LN_f(H)"), _layer_norm, step=shown_block.NORM),
        _block_stage("logits", ("Hf", "W_out"), "n", "vocab", N_("the logits LN_f(H)·W_out"), _times, step=shown_block.AFFINE),
    ) + _OUTPUT_LAYER,
    "train": _PRE_TRAIN,
    "after_heads": _PRE_AFTER_HEADS,
    "update": _block_updates(BLOCK_WEIGHTS),
}
BLOCK_KINDS = {"post-ln": POST_LN, "pre-ln": PRE_LN}
_COMPUTES = {_layer_norm: "layer norm", _relu: "relu", _row_softmax: "softmax"}


def computes(stage: Stage) -> str | None:
    """What a block stage computes, for those whose kind a rule reads (``worked new --block``'s): "layer norm",
    "relu", "softmax" (the output's rows), else None."""
    return _COMPUTES.get(stage.forward)


def block_inputs(problem, backend, given: dict | None = None) -> dict:
    """A block's own inputs in the backend's numbers, by the names its stages take (those it has: W_out,
    targets and the final LN's γ and β only where the problem gives them). *given*: inputs already in the
    backend's numbers, by name, taken instead of the problem's (not converted)."""
    b = problem.block
    given = given or {}
    mat = lambda k, M: given[k] if k in given else [[backend.entry(x) for x in row] for row in M]  # noqa: E731
    vec = lambda k, v: given[k] if k in given else [backend.entry(x) for x in v]  # noqa: E731
    env = {"W_1": mat("W_1", b.W_1), "b_1": vec("b_1", b.b_1), "W_2": mat("W_2", b.W_2), "b_2": vec("b_2", b.b_2)}
    for k in ("gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_f", "beta_f"):
        if getattr(b, k) is not None:
            env[k] = vec(k, getattr(b, k))
    if b.W_out is not None:
        env["W_out"] = mat("W_out", b.W_out)
    if b.targets is not None:
        env["targets"] = list(b.targets)
    return env


class Arch:
    """An architecture: its stages, in the order of the steps (each part iterated by the solver, the checker,
    the pages and the quiz): a head's forward stages, the heads' combination, a training step's backward stages
    and its update. *inputs*: the problem's matrices the stages start from, with the words that say where each
    comes from. *checks*: steps of their own between the training step and the update (the gradient check).
    A Transformer block's: the layer stages before the heads (*before*: P, X0, …), the stage the heads take as
    their X (*attends*), and the layer stages after the heads' combination (*after*: the residual adds … the
    loss). A plain class, each architecture one object (a NamedTuple's class is built at import)."""

    __slots__ = ("name", "forward", "combine", "train", "update", "inputs", "checks", "before", "after", "attends")

    def __init__(self, name: str, forward: tuple, combine: tuple, train: tuple, update: tuple, inputs: tuple,
                 checks: tuple = (), before: tuple = (), after: tuple = (), attends: str | None = None):
        self.name, self.forward, self.combine, self.train, self.update = name, forward, combine, train, update
        self.inputs, self.checks, self.before, self.after, self.attends = inputs, checks, before, after, attends

    def stage(self, sid: str) -> "Stage | None":
        """The stage of id *sid* (a head's forward stage before the layer's of the same id), or None."""
        return next((s for s in self.forward + self.combine + self.before + self.after + self.train + self.update
                     if s.id == sid), None)

    def runs(self, d: "Dims") -> tuple:
        """The stages after the heads that a problem of sizes *d* has: each whose inputs it has (the output
        layer with W_out, the loss with targets, the final layer norm's γ and β where the output layer is)."""
        known = {s.id for s in self.before + self.forward + self.combine} | set(_BLOCK_ALWAYS) | set(d.given)
        out = []
        for s in self.after:
            if all(k in known for k in s.inputs):
                out.append(s)
                known.add(s.id)
        return tuple(out)


SELF = Arch("self", FORWARD, COMBINE, TRAIN, UPDATE, (("X", "the input, one row per token"),),
            checks=(shown_train.GRADCHECK,))
CROSS = Arch("cross", CROSS_FORWARD, COMBINE, CROSS_TRAIN, UPDATE,
             (("X", "the decoder side, one row per decoder token: the queries come from it"),
              ("X_enc", "the encoder side, one row per encoder token: the keys and values come from it")),
             checks=(shown_train.GRADCHECK,))


def _block_heads(attends: str) -> tuple:
    """A block's head stages: self-attention's, whose queries, keys and values take the block's *attends*."""
    x = _S({"X0": "X_0", "N1": "N_1"}[attends])
    out = []
    for s in FORWARD:
        if s.inputs[0] == "X":
            g = s.grid
            s = s._replace(inputs=(attends,) + s.inputs[1:], grid=g._replace(
                definition=lambda S, p, w=s.inputs[1]: eq.Mul((x, S(w))),
                task=lambda p, *_, what=g.label.split()[0].lower(): _project_task(what, x, "")))
            if not out and attends == "X0":     # post-LN: the heads take X0 itself, so positions added after them
                s = s._replace(mistakes=s.mistakes + (slips.POSITIONS_AFTER_ATTENTION,))     # first show in Q
        out.append(s)
    return tuple(out)


_BLOCK_INPUTS = (("X", "the input, one row per token (the block adds the positions P to it)"),)
_BLOCK_ALWAYS = ("X", "W_1", "b_1", "W_2", "b_2", "gamma_1", "beta_1", "gamma_2", "beta_2")


def _block_head_train(attends: str, part: tuple) -> tuple:
    """A block's head stages of the training step (*part*: the attention's train or update stages): the attention's
    own, the gradients of W_Q, W_K and W_V taking the block's *attends* (X0 or N1) where the attention takes X."""
    x = _S({"X0": "X_0", "N1": "N_1"}[attends])
    out = []
    for s in part:
        if s.scope != "head":
            continue
        if s.inputs[0] == "X":
            s = s._replace(inputs=(attends,) + s.inputs[1:], grid=s.grid._replace(
                definition=lambda S, p, d=s.inputs[1]: eq.Mul((_tr(x), S(d)))))
        out.append(s._replace(step=s.step._replace(numpy=shown_block_train.head_numpy(s.id))))     # its NumPy code
    return tuple(out)


BLOCK_ARCHS = {name: Arch(name, _block_heads(k["attends"]), COMBINE,
                          k["train"] + _block_head_train(k["attends"], TRAIN) + k["after_heads"],
                          _block_head_train(k["attends"], UPDATE) + k["update"], _BLOCK_INPUTS,
                          checks=(shown_train.GRADCHECK,), before=k["before"], after=k["after"], attends=k["attends"])
               for name, k in BLOCK_KINDS.items()}
ARCHS = {a.name: a for a in (SELF, CROSS, *BLOCK_ARCHS.values())}


def of(p) -> Arch:
    """The architecture of a problem (or of a :class:`Dims`, or a quiz family): a Transformer block's (post-LN or
    pre-LN), cross-attention or self-attention."""
    if isinstance(p, Dims):
        return BLOCK_ARCHS[p.block] if p.block else CROSS if p.cross else SELF
    b = getattr(p, "block", None)
    if b is not None and not isinstance(b, str):
        return BLOCK_ARCHS[b.kind]
    return ARCHS[getattr(p, "attention", "self")]


def in_order(stages_: tuple, ready) -> list:
    """*stages_* in the order they can be computed: each after the stages it takes (``ready``: the names known
    before), else in the order declared (the loss is shown before dZ but computed from it)."""
    known, todo, out = set(ready), list(stages_), []
    while todo:
        s = next(s for s in todo if all(k in known for k in s.inputs))
        todo.remove(s)
        out.append(s)
        known.add(s.id)
    return out


OUTPUT = COMBINE[-1].id      # the key of a problem's output, Z (one head's last stage shares it); a chain's: its last block's
IDS = tuple(dict.fromkeys(s.id for s in FORWARD + COMBINE))       # the forward stages: Q … Z, concat
TRAIN_IDS = tuple(s.id for s in TRAIN + UPDATE)
ALL = FORWARD + COMBINE + TRAIN + UPDATE


def matrices(d: Dims) -> dict[str, tuple[int, int]]:
    """Every matrix of a problem of these sizes, key → shape, in the order of the steps (the keys of
    :meth:`worked.model.Solution.matrices`)."""
    a = of(d)
    several = d.heads > 1 or bool(a.attends)     # a block's one head is the heads' combination with one head
    pres = [f"head{h}." for h in range(1, d.heads + 1)] if several else [""]
    out = {s.id: s.shape(d) for s in a.before}
    out.update({p + s.id: s.shape(d) for p in pres for s in a.forward})
    if several:
        out.update({s.id: s.shape(d) for s in a.combine})
    out.update({s.id: s.shape(d) for s in a.runs(d)})
    if d.train:     # as the solver makes them: each run of layer stages, then each head's share, then a run of head stages
        for part in (a.train, a.update):
            for group in by_scope(part):
                if group[0].scope == "head":
                    out.update({p + s.id: s.shape(d) for p in pres for s in group})
                    continue
                out.update({s.id: s.shape(d) for s in group if several or s.several})
                if several:      # each head's block of a layer matrix that splits by head (dconcat's: its dZ)
                    out.update({p + s.by_head: (d.n, d.d_v) for p in pres for s in group if s.by_head})
        out["loss_after"] = out.pop("loss_after")
    return out


def by_scope(part: tuple) -> list[list]:
    """*part*'s stages in runs of one scope, in order: a run of layer stages (made once), a run of head stages
    (made per head), … (the order the solver makes a training step's matrices in)."""
    groups: list[list] = []
    for s in part:
        if groups and groups[-1][0].scope == s.scope:
            groups[-1].append(s)
        else:
            groups.append([s])
    return groups


def upstream(sid: str) -> list[str]:
    """The head stages a head stage is computed from, directly or not: nearest first (by its inputs, then
    theirs), the later step first among equally near ones. ``upstream("Z")`` is weights, V, scaled, scores, K, Q."""
    order = [s.id for s in FORWARD]
    inputs = {s.id: s.inputs for s in FORWARD}
    out, level = [], [sid]
    while level:
        nxt = {k for x in level for k in inputs[x] if k in inputs and k not in out}
        level = sorted(nxt, key=order.index, reverse=True)
        out += level
    return out


def words(key: str, arch: Arch = SELF) -> eq.Prose:
    """What the matrix of *key* is, in words with its math as trees (the scores Q·Kᵀ; a head's: … of head 2)."""
    pre, _, base = key.rpartition(".")
    stage = arch.stage(base)
    what = stage.words if stage is not None else base
    if not pre:
        return eq.prose(what)
    if pre.startswith("head"):
        return eq.prose(eq.say("{what} of head {n}", what=what, n=pre[4:]))
    return eq.prose(what, f" of {pre}")


def every(arch: "Arch | None" = None) -> tuple:
    """Every stage of *arch* in the order of the steps (a head's, the heads' combination, the training step,
    the update); with no *arch*, of every architecture (a stage shared by several once: the same object, found by
    its identity, so that no stage's fields, its grid's functions and its mistakes' trees, are hashed at import)."""
    if arch is not None:
        return arch.before + arch.forward + arch.combine + arch.after + arch.train + arch.update
    return tuple({id(s): s for a in ARCHS.values() for s in every(a)}.values())


# ---- what the worksheet asks of a step (the grids' tasks)
_EX = eq.Exp(eq.Sym("x"))


def _project_task(what: str, X, side: str) -> eq.Prose:
    return eq.say("Compute the {what}: multiply {X}{side} by the weight matrix. Each entry is a row of {X} times a "
                  "column of the weight matrix.", what=eq.say(what), X=X, side=side)


def _scores_task(p) -> eq.Prose:
    i, j = eq.Sym("i"), eq.Sym("j")
    if p.cross:
        t = eq.say("Compute the scores: every query times every key (row {i}, column {j} = decoder token {i}'s query · "
                   "encoder token {j}'s key).", i=i, j=j)
    else:
        t = eq.say("Compute the scores: every query times every key (row {i}, column {j} = token {i}'s query · "
                   "token {j}'s key).", i=i, j=j)
    if p.mask == "causal":
        t = eq.prose(t, eq.say(" Causal mask: a token may not look at later tokens, so write −∞ above the diagonal."))
    return t


def _scaled_task(p, dec: int) -> eq.Prose:
    if p.scale == "none":
        return eq.say("This problem uses no scaling: the scaled scores are the scores. Copy them, or skip this task.")
    return eq.say("Divide every score by the scale factor. Give each entry to {places} decimal places.", places=str(dec))


def _weights_task(places: int, dec: int) -> eq.Prose:
    return eq.say("Softmax each row: {ex} of every scaled score, divide by the row's total. Keep {carried} decimal places "
                  "in intermediate values; give the weights to {places} places. Each row should add up to 1.", ex=_EX,
                  carried=str(places), places=str(dec))
