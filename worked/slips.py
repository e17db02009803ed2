"""The known mistakes, each declared once, as data: the stages of :mod:`worked.stages` list their own
(``Stage.mistakes``), and :mod:`worked.mistakes` collects them from the architectures into one registry.

A mistake is an alternative forward of its stage: a :class:`Transform` of the correct pass (what the stage's
computation does instead), with its id, its title and the words that explain it. Its stage is not written
here: the stage that declares it is its owner (``Mistake.stage`` is filled in when it is collected). The
order of :data:`ALL` is the order in which reports list the mistakes.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from . import eq


class Transform(NamedTuple):
    """A change to the correct pass at one or more stages (the default changes nothing).

    scores: "QK" (Q·Kᵀ) or "KQ" (K·Qᵀ); mask: None (the problem's), "none" (nothing masked) or
    "lower" (the entries below the diagonal); scale: None (the problem's factor), "one" (not divided) or
    "d_k" (divided by d_k); softmax: "rows", "columns" or "no-exp" (each score over its row's sum, no
    e^x); weights: "A" or "AT" (Z = Aᵀ·V). With several heads, heads: "concat" (side by side, head 1 first),
    "reversed" (the heads side by side in the reverse order), "no-W_O" (the output is the concat, W_O left out)
    or "mean" (the output is the heads' Z averaged, entry by entry).
    """

    scores: str = "QK"
    mask: str | None = None
    scale: str | None = None
    softmax: str = "rows"
    weights: str = "A"
    heads: str = "concat"
    sides: str | None = None        # cross-attention: "kv-dec" (keys and values from the decoder side X) or
                                    # "q-enc" (the queries from the encoder side X_enc); see stages.sides
    # the backward pass (problems with a [train] table; see :func:`backward`)
    softmax_back: str = "jacobian"   # "identity" (dS = dA) or "no-sum" (dS = A∘dA: the Σ term left out)
    dV: str = "ATdZ"                 # "AdZ": dV = A·dZ
    back_scale: str = "divide"       # "forgot": dscores = dS (the 1/√d_k forgotten on the way back)
    dK: str = "STQ"                  # "SQ": dK = dscores·Q (no transpose)
    update: str = "minus"            # "plus": W + lr·dW
    update_of: str | None = None     # "W_Q", "W_K" or "W_V": the update's sign applies to that matrix only
                                     # (the others are updated W − lr·dW); None: to all three
    # a Transformer block's stages (issue 27; see worked.stages, the block's forwards)
    norm_axis: str = "rows"          # "columns": each layer norm over a column (the tokens) instead of a row
    variance: str = "n"              # "n-1": σ² divided by d_model − 1 instead of d_model
    norm_root: str = "sqrt"          # "no-sqrt": (x − μ)/(σ² + ε), the root forgotten; "no-eps": (x − μ)/√σ²
    residual: str = "both"           # "no-first" / "no-second": that residual add left out (the sublayer's output alone)
    relu: str = "after-bias"         # "before-bias": G = relu(x·W_1) + b_1
    positions: str = "before"        # "after-attention": the heads take X without P; P enters with the residual
    sincos: str = "sin-even"         # "swapped": cos in the even columns, sin in the odd ones
    log: str = "ln"                  # "log10": the loss with log base 10
    output_softmax: str = "rows"     # "columns": the probabilities a softmax down each column of the logits

    @property
    def across_heads(self) -> bool:
        """Does it change how the heads are combined (not the default side by side, head 1 first)?"""
        return self.heads != Transform._field_defaults["heads"]


class Mistake:
    """A known mistake: an immutable value (equal to another with the same fields). A plain class, not a
    dataclass: every ``worked solve`` imports the mistakes its stages declare, and a dataclass imports
    :mod:`dataclasses` and writes and compiles its methods at import (see :mod:`worked.model`).

    *id*; *name*: its title, prose where it holds math (K·Qᵀ instead of Q·Kᵀ, as trees); *feedback*: for a
    student's check report (prose: its math as trees); *answer*: "This is the value you get …", the feedback of a
    wrong answer in a quiz; *_transforms*: problem → the Transforms that apply (None: no transform); *accepted*:
    not a mistake, answers within the band, pointed out (rounded too early). What the stage that declares the
    mistake gives it (:mod:`worked.mistakes` collects them from the architectures, :meth:`replace`): *stage*, that
    stage's id, the matrix (and worked step) where the mistake first shows; *updates*: (weight matrix, the id of
    the stage that updates it), for a mistake of the update."""

    __slots__ = ("id", "name", "feedback", "answer", "_transforms", "accepted", "stage", "updates")

    def __init__(self, id: str, name: "str | eq.Prose", feedback: "str | eq.Prose | Callable",
                 answer: "str | eq.Prose | None", _transforms: Callable | None = None, accepted: bool = False,
                 stage: str = "", updates: tuple = ()):
        for field, value in zip(self.__slots__, (id, name, feedback, answer, _transforms, accepted, stage, updates)):
            object.__setattr__(self, field, value)

    def _fields(self) -> tuple:
        return tuple(getattr(self, field) for field in self.__slots__)

    def replace(self, **changes) -> "Mistake":
        """A copy with *changes* (field name → value)."""
        return Mistake(**{field: changes.pop(field, getattr(self, field)) for field in self.__slots__}, **changes)

    def __setattr__(self, field, value):
        raise AttributeError(f"Mistake is immutable: cannot set {field}")

    def __eq__(self, other):
        return self._fields() == other._fields() if type(other) is Mistake else NotImplemented

    def __hash__(self):
        return hash(self._fields())

    def __reduce__(self):
        return Mistake, self._fields()

    def __repr__(self):
        return f"Mistake({', '.join(f'{field}={getattr(self, field)!r}' for field in self.__slots__)})"

    @property
    def title_prose(self) -> eq.Prose:
        """The title as prose, its math as trees (for a writer that sets math: the web page's MathML)."""
        return eq.prose(self.name)

    @property
    def title(self) -> str:
        """The title as Unicode text (the text printer of :attr:`title_prose`), as reports and exports write it."""
        from . import printers

        return printers.text(self.title_prose)

    def transforms(self, problem) -> list[Transform]:
        return list(self._transforms(problem)) if self._transforms else []

    def stage_of(self, transform: Transform) -> str:
        """The matrix where the mistake made by *transform* first shows: its stage, or for a wrong sign in one
        matrix's update that matrix's update (W_V alone: ``W_V_new``)."""
        if transform.update_of is not None:
            return dict(self.updates)[transform.update_of]
        return self.stage

    def message_prose(self, problem) -> eq.Prose:
        """The check report's explanation for this problem (the scale named as it is: √d_k = √4 = 2), as
        prose with its math as trees, for a writer that sets math."""
        fb = eq.prose(self.feedback(problem) if callable(self.feedback) else self.feedback)
        if self.id == "no-scaling" and problem.scale == "sqrt":
            import sympy as sp

            root = eq.Sqrt(eq.num(problem.d_k))
            simple = eq.from_sympy(sp.sqrt(sp.Integer(problem.d_k)))
            chain = (eq.Sqrt(eq.Sym("d_k")), root) + ((simple,) if simple != root else ())
            rule = eq.Rel(chain, (eq.EQ,) * (len(chain) - 1))       # √d_k = √4 = 2
            parts = []
            for x in fb.parts:
                if isinstance(x, str) and "the scale factor" in x:
                    a, _, b = x.partition("the scale factor")
                    parts += [a, rule, b]
                else:
                    parts.append(x)
            fb = eq.prose(*parts)
        return fb

    def message(self, problem) -> str:
        """The check report's explanation, for this problem, as Unicode text (the text printer)."""
        from . import printers

        return printers.text(self.message_prose(problem))

    @property
    def answer_feedback(self) -> str | None:
        """The quiz feedback of this mistake's value, with its id (the code `worked check` names it by)."""
        from . import printers

        return None if self.answer is None else f"{printers.text(eq.prose(self.answer))} [{self.id}]"


def _entry(name: str, row: str, col: str) -> eq.Entry:
    return eq.Entry(eq.matrix_sym(name), row, col)


#: the softmax backward, as the key writes it: dS[i, j] = A[i, j]·(dA[i, j] − Σ_k A[i, k]·dA[i, k])
_DS_RULE = eq.Rel((_entry("dS", "i", "j"), eq.Mul((_entry("A", "i", "j"), eq.Add((_entry("dA", "i", "j"), eq.Neg(eq.Sum(
    eq.Mul((_entry("A", "i", "k"), _entry("dA", "i", "k"))), "k"))))))), (eq.EQ,))


def _scaled(problem) -> bool:
    """Is the problem's divisor something other than 1?"""
    if problem.scale == "sqrt":
        return problem.d_k != 1
    if problem.scale == "none":
        return False
    return problem.scale != 1


def _square_W_O(problem) -> bool:
    """Has the concat the output's shape (W_O square), so that leaving W_O out gives an answer of the right shape?"""
    return len(problem.W_O) == len(problem.W_O[0])


def _mean_fits(problem) -> bool:
    """Has one head's Z the output's shape (d_v = the output's width), so that the heads' average is comparable?"""
    return len(problem.heads[0].W_V[0]) == len(problem.W_O[0])


def _T(x: eq.Node) -> eq.Node:
    return eq.Pow(x, eq.Sym("T"))


def _m(name: str, head: int | None = None) -> eq.Sym:
    return eq.matrix_sym(name, head)


def _is(*items) -> eq.Rel:
    return eq.Rel(tuple(items), (eq.EQ,) * (len(items) - 1))


# the math the explanations name, as trees (the text printer gives the Unicode of before: Q·Kᵀ, √d_k, W − lr·dW)
_QK, _KQ = eq.Mul((_m("Q"), _T(_m("K")))), eq.Mul((_m("K"), _T(_m("Q"))))
_AV, _ATV = eq.Mul((_m("A"), _m("V"))), eq.Mul((_T(_m("A")), _m("V")))
_EX, _SQRT_DK, _DK = eq.Exp(eq.Sym("x")), eq.Sqrt(eq.Sym("d_k")), eq.Sym("d_k")
_CONCAT = eq.Sym("concat", upright=True)
_CONCAT_HEADS = eq.Call("concat", (_m("Z", 1), _m("Z", 2)))
_OUT = _is(_m("Z"), eq.Mul((_CONCAT, _m("W_O"))))
_LR_DW = eq.Mul((eq.Sym("lr", upright=True), _m("dW")))
_DESCENT, _ASCENT = eq.Add((_m("W"), eq.Neg(_LR_DW))), eq.Add((_m("W"), _LR_DW))
_DV, _DV_WRONG = _is(_m("dV"), eq.Mul((_T(_m("A")), _m("dZ")))), _is(_m("dV"), eq.Mul((_m("A"), _m("dZ"))))
_DK_RULE, _DK_WRONG = (_is(_m("dK"), eq.Mul((_T(_m("dscores")), _m("Q")))),
                       _is(_m("dK"), eq.Mul((_m("dscores"), _m("Q")))))
_DSCORES = _is(_m("dscores"), eq.Frac(_m("dS"), _SQRT_DK))
_I, _J = eq.Sym("i"), eq.Sym("j")
_XE = eq.Sym("X_enc")
_P = eq.prose

NO_SCALING = Mistake("no-scaling", "no scaling",
    _P("The scores were not divided by the scale factor before the softmax: these values are what "
       "the unscaled scores give."),
    _P("This is the value you get without dividing the scores by the scale (", _SQRT_DK, "): "
       "the unscaled score was used."),
    lambda p: [Transform(scale="one")] if _scaled(p) else [])
SCALED_BY_DK = Mistake("scaled-by-dk", _P("divided by ", _DK, " instead of ", _SQRT_DK),
    _P("The scores were divided by ", _DK, " itself instead of by its square root ", _SQRT_DK, "."),
    _P("This is the value you get by dividing the scores by ", _DK, " instead of by its square root ",
       _SQRT_DK, "."),
    lambda p: [Transform(scale="d_k")] if p.scale == "sqrt" and p.d_k != 1 else [])
TRANSPOSED_SCORES = Mistake("transposed-scores", _P(_KQ, " instead of ", _QK),
    _P("The scores were computed as ", _KQ, ", the transpose of ", _QK, ": row ", _I, " must be token ", _I, "'s "
       "query matched against every key, not its key against every query."),
    _P("This is the value you get from ", _KQ, " instead of ", _QK, ": the scores are transposed "
       "(row = query, column = key)."),
    lambda p: [Transform(scores="KQ")] if p.n == p.n_kv else [])
WRONG_MASK = Mistake("wrong-mask", "causal mask on the wrong entries",
    _P("In a causal problem a token may attend only to itself and earlier tokens: the entries above "
       "the diagonal are ", eq.neg_inf(), " (weight 0). These values come from masking the wrong triangle, "
       "or not masking at all."),
    _P("This is the value you get with the causal mask on the wrong entries (or none): a token attends "
       "only to itself and earlier tokens, so the scores above the diagonal are ", eq.neg_inf(), "."),
    lambda p: [Transform(mask="none"), Transform(mask="lower")] if p.mask == "causal" and p.n > 1 else [])
COLUMN_SOFTMAX = Mistake("column-softmax", "softmax down the columns",
    _P("The softmax was taken down each column; it belongs along each row, so that every "
       "token's weights add up to 1."),
    _P("This is the value you get by applying the softmax down each column; "
       "the softmax runs along each row (over the keys, for one query)."),
    lambda p: [Transform(softmax="columns")])
NO_EXP = Mistake("no-exp", "no exponentials",
    _P("Each score was divided by its row's sum without taking ", _EX, " first; the softmax divides ", _EX,
       " by the row's sum of ", _EX, ", which also keeps every weight positive."),
    _P("This is the value you get by dividing each scaled score by its row's sum without taking ", _EX,
       " first; the softmax divides ", _EX, " by the row's sum of ", _EX, "."),
    lambda p: [Transform(softmax="no-exp")])
WEIGHTS_TRANSPOSED = Mistake("weights-transposed", _P(_ATV, " instead of ", _AV),
    _P(_m("Z"), " was computed with the transposed weights (", _ATV, "): row ", _I, " of ", _m("Z"),
       " must blend the value rows with token ", _I, "'s row of ", _m("A"), "."),
    _P("This is the value you get from ", _ATV, " instead of ", _AV, ": row ", _I, " of ", _m("Z"),
       " blends the value rows with token ", _I, "'s row of ", _m("A"), "."),
    lambda p: [Transform(weights="AT")] if p.n == p.n_kv else [])
# ---- cross-attention: which side each matrix comes from
KV_FROM_DECODER = Mistake("kv-from-decoder", "keys and values from the decoder side",
    _P("The keys and values were computed from the decoder side ", _m("X"), "; in cross-attention they come "
       "from the encoder side: ", _is(_m("K"), eq.Mul((_XE, _m("W_K")))), " and ",
       _is(_m("V"), eq.Mul((_XE, _m("W_V")))), ", one row per encoder token (only the queries come from ",
       _m("X"), ")."),
    _P("This is the value you get by computing the keys and values from the decoder side ", _m("X"),
       " instead of the encoder side ", _XE, "."),
    lambda p: [Transform(sides="kv-dec")] if p.cross else [])
QUERIES_FROM_ENCODER = Mistake("queries-from-encoder", "queries from the encoder side",
    _P("The queries were computed from the encoder side ", _XE, "; in cross-attention they come from the "
       "decoder side: ", _is(_m("Q"), eq.Mul((_m("X"), _m("W_Q")))), ", one row per decoder token (the keys "
       "and values come from ", _XE, ")."),
    _P("This is the value you get by computing the queries from the encoder side ", _XE, " instead of the "
       "decoder side ", _m("X"), "."),
    lambda p: [Transform(sides="q-enc")] if p.cross else [])
CAUSAL_MASK_ON_CROSS = Mistake("causal-mask-on-cross", "a causal mask on cross-attention",
    _P("A causal mask was applied to cross-attention. The mask keeps a decoder token from seeing later "
       "decoder tokens in self-attention; in cross-attention every decoder token may attend to every encoder "
       "token, so no score is ", eq.neg_inf(), "."),
    _P("This is the value you get by masking the cross-attention scores as if they were causal; cross-attention "
       "masks nothing: every decoder token sees the whole encoder side."),
    lambda p: [Transform(mask="upper")] if p.cross and p.n_kv > 1 else [])
# ---- mistakes across heads (several heads only): how the heads' Z become the output
HEADS_SWAPPED = Mistake("heads-swapped", "heads concatenated in the wrong order",
    _P("The heads' outputs were put side by side in the wrong order: they go in the order of the heads, ",
       _CONCAT_HEADS, " for two, head 1 first, so that each block of the rows of ", _m("W_O"), " meets its own head."),
    _P("This is the value you get by concatenating the heads in the wrong order; they go in the order of "
       "the heads, ", _CONCAT_HEADS, " for two, head 1 first."),
    lambda p: [Transform(heads="reversed")] if p.multihead and len(p.heads) > 1 else [])
NO_W_O = Mistake("no-W_O", _P(_m("W_O"), " left out"),
    _P("The output was taken to be the concatenated heads themselves; the output projection is still "
       "to come: ", _OUT, "."),
    _P("This is the value you get by leaving out ", _m("W_O"), ": the output is ",
       eq.Mul((_CONCAT, _m("W_O"))), ", not the concat itself."),
    lambda p: [Transform(heads="no-W_O")] if p.multihead and _square_W_O(p) else [])
HEADS_AVERAGED = Mistake("heads-averaged", "heads averaged instead of concatenated",
    _P("The heads' outputs were averaged entry by entry; multi-head attention puts them side by side "
       "(concat) and mixes them with ", _m("W_O"), ": ", _OUT, "."),
    _P("This is the value you get by averaging the heads' outputs instead of concatenating them and "
       "multiplying by ", _m("W_O"), "."),
    lambda p: [Transform(heads="mean")] if p.multihead and _mean_fits(p) else [])
# ---- end of the mistakes across heads
# ---- the backward pass (problems with a [train] table): the classic slips of one training step
SOFTMAX_BACKWARD_SUM = Mistake("softmax-backward-sum", "softmax backward without the Σ term",
    _P("The softmax was treated as if each weight depended only on its own score: ", _is(_m("dS"), _m("dA")),
       " (the softmax as the identity) or ", _is(_entry("dS", "i", "j"),
                                                eq.Mul((_entry("A", "i", "j"), _entry("dA", "i", "j")))),
       " (the row's Σ term left out). The softmax couples a row: ", _DS_RULE,
       ", so every row of ", _m("dS"), " adds up to 0."),
    _P("This is the value you get by treating the softmax as the identity (or leaving out the row's Σ term) "
       "on the way back: ", _DS_RULE, "."),
    lambda p: [Transform(softmax_back="identity"), Transform(softmax_back="no-sum")] if p.train else [])
DV_NOT_TRANSPOSED = Mistake("dV-not-transposed", _P(_DV_WRONG, " instead of ", eq.Mul((_T(_m("A")), _m("dZ")))),
    _P(_m("dV"), " was computed as ", eq.Mul((_m("A"), _m("dZ"))), "; ", _is(_m("Z"), _AV), " gives ", _DV,
       ": value row ", _J, " collects column ", _J, " of ", _m("A"), " (every token that attended to token ",
       _J, "), not row ", _J, "."),
    _P("This is the value you get from ", _DV_WRONG, " instead of ", eq.Mul((_T(_m("A")), _m("dZ"))),
       " (the weights not transposed)."),
    lambda p: [Transform(dV="AdZ")] if p.train else [])
NO_SCALING_BACKWARD = Mistake("no-scaling-backward", _P(eq.Frac(eq.num(1), _SQRT_DK), " forgotten on the way back"),
    _P("The gradient of the scores was not divided by the scale factor again: the forward pass divided the "
       "scores by it, so on the way back ", _DSCORES, "."),
    _P("This is the value you get when the gradient is not divided by the scale (", _SQRT_DK,
       ") again on the way back."),
    lambda p: [Transform(back_scale="forgot")] if p.train and _scaled(p) else [])
DK_NOT_TRANSPOSED = Mistake("dK-not-transposed", _P(_m("dK"), " without the transpose"),
    _P(_m("dK"), " was computed as ", eq.Mul((_m("dscores"), _m("Q"))), "; ", _is(_m("scores"), _QK), " gives ",
       _DK_RULE, ": token ", _J, "'s key collects column ", _J, " of ", _m("dscores"),
       " (every query matched with it)."),
    _P("This is the value you get from ", _DK_WRONG, " instead of ", eq.Mul((_T(_m("dscores")), _m("Q"))),
       " (the transpose left out)."),
    lambda p: [Transform(dK="SQ")] if p.train else [])
UPDATE_WRONG_SIGN = Mistake("update-wrong-sign", "update with the wrong sign",
    _P("The weights were moved along the gradient (", _ASCENT, "): gradient descent moves them against it, ",
       _DESCENT, ", which is what lowers the loss."),
    _P("This is the value you get from ", _ASCENT, ": the update goes against the gradient, ", _DESCENT, "."),
    # in all three matrices, or in one of them alone (W_V′ wrong, W_Q′ and W_K′ right)
    lambda p: [Transform(update="plus")] + [Transform(update="plus", update_of=w) for w in ("W_Q", "W_K", "W_V")]
    if p.train else [])
# ---- end of the backward pass's mistakes
# ---- a Transformer block's (issue 27): layer norm, the residual adds, the feed-forward, positions, the output
_MU, _VAR, _EPS, _GAM, _BET = eq.Sym("μ"), eq.Pow(eq.Sym("σ"), eq.num(2)), eq.Sym("ε"), eq.Sym("γ"), eq.Sym("β")
_XMU = eq.Add((eq.Sym("x"), eq.Neg(_MU)))
_LN_RULE = eq.Add((eq.Mul((_GAM, eq.Frac(_XMU, eq.Sqrt(eq.Add((_VAR, _EPS)))))), _BET))


def _block(p):
    return getattr(p, "block", None)


def _eps(p) -> bool:
    return _block(p) is not None and _block(p).eps > 0


def _positional(p) -> bool:
    return _block(p) is not None and _block(p).positional == "sinusoidal"


def _output(p) -> bool:
    return _block(p) is not None and _block(p).W_out is not None


NORM_OVER_COLUMNS = Mistake("norm-over-columns", "layer norm over the wrong axis",
    _P("The layer norm was taken down each column (over the tokens); it normalises each row, one token's d_model "
       "values: ", _MU, " and ", _VAR, " are that row's mean and mean square deviation."),
    _P("This is the value you get by normalising each column instead of each row: a layer norm works on one token's "
       "row at a time."),
    lambda p: [Transform(norm_axis="columns")] if _block(p) is not None and p.n > 1 else [])
VARIANCE_N_MINUS_1 = Mistake("variance-n-minus-1", "variance divided by n − 1",
    _P("The variance was divided by d_model − 1; layer norm divides the sum of squared deviations by d_model (the "
       "biased variance, as PyTorch's LayerNorm does)."),
    _P("This is the value you get by dividing the squared deviations by d_model − 1 instead of d_model."),
    lambda p: [Transform(variance="n-1")] if _block(p) is not None and p.d_model > 1 else [])
NORM_ROOT = Mistake("norm-root", "the √ (or ε) forgotten in layer norm",
    _P("The deviations were divided by ", eq.Add((_VAR, _EPS)), " without its square root, or by ", eq.Sqrt(_VAR),
       " without ε; layer norm divides by ", eq.Sqrt(eq.Add((_VAR, _EPS))), ": ", _LN_RULE, "."),
    _P("This is the value you get by leaving out the square root (or ε) in layer norm's ",
       eq.Sqrt(eq.Add((_VAR, _EPS))), "."),
    lambda p: ([Transform(norm_root="no-sqrt")] + ([Transform(norm_root="no-eps")] if _eps(p) else []))
    if _block(p) is not None else [])
NO_RESIDUAL = Mistake("no-residual", "the residual add forgotten",
    _P("A residual add was left out: each sublayer's output is added to its input (", _m("X_0"), " + ", _m("Z"),
       ", ", _m("H_1"), " + ", _m("F"), ") before going on."),
    _P("This is the value you get by leaving out the residual add: the sublayer's input is added to its output."),
    lambda p: [Transform(residual="no-first"), Transform(residual="no-second")] if _block(p) is not None else [])
RELU_BEFORE_BIAS = Mistake("relu-before-bias", "ReLU before the bias",
    _P("ReLU was applied before adding the bias: ", _is(_m("G"), eq.Call("relu", (eq.Add((
        eq.Mul((eq.Sym("x"), _m("W_1"))), _m("b_1"))),))), ", the bias first."),
    _P("This is the value you get by applying ReLU before adding ", _m("b_1"), "."),
    lambda p: [Transform(relu="before-bias")] if _block(p) is not None and any(_block(p).b_1) else [])
POSITIONS_AFTER_ATTENTION = Mistake("positions-after-attention", "positions added after attention",
    _P("The positions were added after the attention: they go in before it, ", _is(_m("X_0"), eq.Add((_m("X"), _m("P")))),
       ", so that the queries, keys and values know each token's place."),
    _P("This is the value you get by adding the positions after the attention instead of to ", _m("X"), " before it."),
    lambda p: [Transform(positions="after-attention")] if _positional(p) else [])
SIN_COS_SWAPPED = Mistake("sin-cos-swapped", "sin and cos swapped",
    _P("sin and cos were swapped: the even columns 2i take sin, the odd ones 2i + 1 take cos (of the same angle)."),
    _P("This is the value you get with cos in the even columns and sin in the odd ones."),
    lambda p: [Transform(sincos="swapped")] if _positional(p) else [])
LOG10_LOSS = Mistake("log10-loss", "log base 10 instead of ln",
    _P("The loss was taken with log base 10; cross-entropy uses the natural log: ",
       eq.Neg(eq.Call("ln", (eq.Sym("p"),))), " of each target's probability."),
    _P("This is the value you get with ", eq.Sym("log", sub="10", upright=True), " instead of ln in the loss."),
    lambda p: [Transform(log="log10")] if _output(p) and _block(p).targets is not None else [])
OUTPUT_SOFTMAX_COLUMNS = Mistake("output-softmax-columns", "output softmax over the wrong axis",
    _P("The softmax of the logits was taken down each column; each position's row of logits is a distribution over "
       "the vocabulary, so the softmax runs along the row."),
    _P("This is the value you get by applying the softmax down each column of the logits instead of along each row."),
    lambda p: [Transform(output_softmax="columns")] if _output(p) and p.n > 1 else [])
BLOCK_MISTAKES = (NORM_OVER_COLUMNS, VARIANCE_N_MINUS_1, NORM_ROOT, NO_RESIDUAL, RELU_BEFORE_BIAS,
                  POSITIONS_AFTER_ATTENTION, SIN_COS_SWAPPED, LOG10_LOSS, OUTPUT_SOFTMAX_COLUMNS)
# ---- end of a block's mistakes
# not a different pass: accepted answers that differ from the exact values rounded at the end the way
# values rounded earlier do (worked.check tests the paths of early rounding itself)
EARLY_ROUNDING = Mistake("early-rounding", "rounded too early",
    lambda p: _P("Accepted: these answers are within the rounding band, but they differ from the exact values "
                 "rounded at the end, because earlier values were rounded first. Keep more places in "
                 f"intermediate values (the worked steps keep {p.precision.carried}) and round only the final "
                 "answer."),
    None, None, accepted=True)

#: every mistake, in the order reports list them
ALL = (NO_SCALING, SCALED_BY_DK, TRANSPOSED_SCORES, WRONG_MASK, COLUMN_SOFTMAX, NO_EXP, WEIGHTS_TRANSPOSED, KV_FROM_DECODER, QUERIES_FROM_ENCODER, CAUSAL_MASK_ON_CROSS, HEADS_SWAPPED, NO_W_O, HEADS_AVERAGED, SOFTMAX_BACKWARD_SUM, DV_NOT_TRANSPOSED, NO_SCALING_BACKWARD, DK_NOT_TRANSPOSED, UPDATE_WRONG_SIGN) + BLOCK_MISTAKES + (EARLY_ROUNDING,)
