"""The known mistakes, each declared once, as data: the stages of :mod:`worked.stages` list their own
(``Stage.mistakes``), and :mod:`worked.mistakes` collects them from the architectures into one registry.

A mistake is an alternative forward of its stage: a :class:`Transform` of the correct pass (what the stage's
computation does instead), with its id, its title and the words that explain it. Its stage is not written
here: the stage that declares it is its owner (``Mistake.stage`` is filled in when it is collected). The
order of :data:`ALL` is the order in which reports list the mistakes.
"""
from __future__ import annotations

from collections import namedtuple
from typing import Callable

from . import eq
from .i18n import N_


class Transform(namedtuple("Transform", (
        "scores",           # str = "QK"
        "mask",             # str | None = None
        "scale",            # str | None = None
        "softmax",          # str = "rows"
        "weights",          # str = "A"
        "heads",            # str = "concat"
        "sides",            # str | None = None: cross-attention: "kv-dec" (keys and values from the decoder side X) or
                            # "q-enc" (the queries from the encoder side X_enc); see stages.sides
                            # the backward pass (problems with a [train] table; see :func:`backward`)
        "softmax_back",     # str = "jacobian": "identity" (dS = dA) or "no-sum" (dS = A∘dA: the Σ term left out)
        "dV",               # str = "ATdZ": "AdZ": dV = A·dZ
        "back_scale",       # str = "divide": "forgot": dscores = dS (the 1/√d_k forgotten on the way back)
        "dK",               # str = "STQ": "SQ": dK = dscores·Q (no transpose)
        "update",           # str = "minus": "plus": W + lr·dW
        "update_of",        # str | None = None: "W_Q", "W_K" or "W_V": the update's sign applies to that matrix only
                            # (the others are updated W − lr·dW); None: to all three
                            # a Transformer block's stages (issue 27; see worked.stages, the block's forwards)
        "norm_axis",        # str = "rows": "columns": each layer norm over a column (the tokens) instead of a row
        "variance",         # str = "n": "n-1": σ² divided by d_model − 1 instead of d_model
        "norm_root",        # str = "sqrt": "no-sqrt": (x − μ)/(σ² + ε), the root forgotten; "no-eps": (x − μ)/√σ²
        "residual",         # str = "both": "no-first" / "no-second": that residual add left out (the sublayer's output alone)
        "relu",             # str = "after-bias": "before-bias": G = relu(x·W_1) + b_1
        "positions",        # str = "before": "after-attention": the heads take X without P; P enters with the residual
        "sincos",           # str = "sin-even": "swapped": cos in the even columns, sin in the odd ones
        "log",              # str = "ln": "log10": the loss with log base 10
        "output_softmax",   # str = "rows": "columns": the probabilities a softmax down each column of the logits
), defaults=("QK", None, None, "rows", "A", "concat", None, "jacobian", "ATdZ", "divide", "STQ", "minus", None, "rows", "n", "sqrt", "both", "after-bias", "before", "sin-even", "ln", "rows"))):
    """A change to the correct pass at one or more stages (the default changes nothing).

    scores: "QK" (Q·Kᵀ) or "KQ" (K·Qᵀ); mask: None (the problem's), "none" (nothing masked) or
    "lower" (the entries below the diagonal); scale: None (the problem's factor), "one" (not divided) or
    "d_k" (divided by d_k); softmax: "rows", "columns" or "no-exp" (each score over its row's sum, no
    e^x); weights: "A" or "AT" (Z = Aᵀ·V). With several heads, heads: "concat" (side by side, head 1 first),
    "reversed" (the heads side by side in the reverse order), "no-W_O" (the output is the concat, W_O left out)
    or "mean" (the output is the heads' Z averaged, entry by entry).
    """

    __slots__ = ()

    @property
    def across_heads(self) -> bool:
        """Does it change how the heads are combined (not the default side by side, head 1 first)?"""
        return self.heads != Transform._field_defaults["heads"]


class Mistake:
    """A known mistake: an immutable value (equal to another with the same fields). A plain class, not a
    dataclass: every ``worked solve`` imports the mistakes its stages declare, and a dataclass imports
    :mod:`dataclasses` and writes and compiles its methods at import (see :mod:`worked.model`).

    *id*; *name*: its title, a sentence (eq.say) with its math as trees (K·Qᵀ instead of Q·Kᵀ); *feedback*: for a
    student's check report (prose: its math as trees); *answer*: "This is the value you get …", the feedback of a
    wrong answer in a quiz; *_transforms*: problem → the Transforms that apply (None: no transform); *accepted*:
    not a mistake, answers within the band, pointed out (rounded too early). What the stage that declares the
    mistake gives it (:mod:`worked.mistakes` collects them from the architectures, :meth:`replace`): *stage*, that
    stage's id, the matrix (and worked step) where the mistake first shows; *updates*: (weight matrix, the id of
    the stage that updates it), for a mistake of the update."""

    __slots__ = ("id", "name", "feedback", "answer", "_transforms", "accepted", "stage", "updates")

    def __init__(self, id: str, name: "str | eq.Prose | eq.Said", feedback: "str | eq.Prose | Callable",
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
        """The title as Unicode text in English (the text printer of :attr:`title_prose`), as JSON and the registry
        keep it (JSON is locale-free)."""
        from . import i18n, printers

        with i18n.using(None):
            return printers.text(self.title_prose)

    def title_text(self) -> str:
        """The title as Unicode text in the current language, as reports and exports show it."""
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
        if self.id == "no-scaling":      # the scale named as the problem has it (√d_k = √4 = 2)
            return eq.prose(eq.say(_NOT_SCALED, scale=_scale_named(problem)))
        return eq.prose(self.feedback(problem) if callable(self.feedback) else self.feedback)

    def message(self, problem) -> str:
        """The check report's explanation, for this problem, as Unicode text (the text printer)."""
        from . import printers

        return printers.text(self.message_prose(problem))

    @property
    def answer_feedback(self) -> str | None:
        """The quiz feedback of this mistake's value, with its id (the code `worked check` names it by)."""
        from . import printers

        return None if self.answer is None else f"{printers.text(eq.prose(self.answer))} [{self.id}]"


def _instead(wrong: eq.Node, right: eq.Node) -> eq.Said:
    """A mistake's title: the slip's math instead of the right one (K·Qᵀ instead of Q·Kᵀ)."""
    return eq.say("{wrong} instead of {right}", wrong=wrong, right=right)


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


def _scale_named(p):
    """The scale as the report names it: √d_k = √4 = 2 for the problem's √d_k, else “the scale factor”."""
    if p.scale == "sqrt":
        import sympy as sp

        root = eq.Sqrt(eq.num(p.d_k))
        simple = eq.from_sympy(sp.sqrt(sp.Integer(p.d_k)))
        chain = (eq.Sqrt(eq.Sym("d_k")), root) + ((simple,) if simple != root else ())
        return eq.Rel(chain, (eq.EQ,) * (len(chain) - 1))       # √d_k = √4 = 2
    return eq.say("the scale factor")


_NOT_SCALED = N_("The scores were not divided by {scale} before the softmax: these values are what the unscaled scores "
                 "give.")

NO_SCALING = Mistake("no-scaling", eq.say("no scaling"),
    lambda p: eq.say(_NOT_SCALED, scale=eq.say("the scale factor")),
    eq.say("This is the value you get without dividing the scores by the scale ({scale}): the unscaled score was used.",
       scale=_SQRT_DK),
    lambda p: [Transform(scale="one")] if _scaled(p) else [])
SCALED_BY_DK = Mistake("scaled-by-dk", eq.say("divided by {d_k} instead of {root}", d_k=_DK, root=_SQRT_DK),
    eq.say("The scores were divided by {d_k} itself instead of by its square root {root}.", d_k=_DK, root=_SQRT_DK),
    eq.say("This is the value you get by dividing the scores by {d_k} instead of by its square root {root}.", d_k=_DK,
       root=_SQRT_DK),
    lambda p: [Transform(scale="d_k")] if p.scale == "sqrt" and p.d_k != 1 else [])
TRANSPOSED_SCORES = Mistake("transposed-scores", _instead(_KQ, _QK),
    eq.say("The scores were computed as {KQ}, the transpose of {QK}: row {i} must be token {i}'s query matched against "
       "every key, not its key against every query.", KQ=_KQ, QK=_QK, i=_I),
    eq.say("This is the value you get from {KQ} instead of {QK}: the scores are transposed (row = query, column = key).",
       KQ=_KQ, QK=_QK),
    lambda p: [Transform(scores="KQ")] if p.n == p.n_kv else [])
WRONG_MASK = Mistake("wrong-mask", eq.say("causal mask on the wrong entries"),
    eq.say("In a causal problem a token may attend only to itself and earlier tokens: the entries above the diagonal are "
       "{inf} (weight 0). These values come from masking the wrong triangle, or not masking at all.", inf=eq.neg_inf()),
    eq.say("This is the value you get with the causal mask on the wrong entries (or none): a token attends only to itself "
       "and earlier tokens, so the scores above the diagonal are {inf}.", inf=eq.neg_inf()),
    lambda p: [Transform(mask="none"), Transform(mask="lower")] if p.mask == "causal" and p.n > 1 else [])
COLUMN_SOFTMAX = Mistake("column-softmax", eq.say("softmax down the columns"),
    eq.say("The softmax was taken down each column; it belongs along each row, so that every token's weights add up to 1."),
    eq.say("This is the value you get by applying the softmax down each column; the softmax runs along each row (over the "
       "keys, for one query)."),
    lambda p: [Transform(softmax="columns")])
NO_EXP = Mistake("no-exp", eq.say("no exponentials"),
    eq.say("Each score was divided by its row's sum without taking {ex} first; the softmax divides {ex} by the row's sum "
       "of {ex}, which also keeps every weight positive.", ex=_EX),
    eq.say("This is the value you get by dividing each scaled score by its row's sum without taking {ex} first; the "
       "softmax divides {ex} by the row's sum of {ex}.", ex=_EX),
    lambda p: [Transform(softmax="no-exp")])
WEIGHTS_TRANSPOSED = Mistake("weights-transposed", _instead(_ATV, _AV),
    eq.say("{Z} was computed with the transposed weights ({ATV}): row {i} of {Z} must blend the value rows with token "
       "{i}'s row of {A}.", Z=_m("Z"), ATV=_ATV, i=_I, A=_m("A")),
    eq.say("This is the value you get from {ATV} instead of {AV}: row {i} of {Z} blends the value rows with token {i}'s "
       "row of {A}.", ATV=_ATV, AV=_AV, i=_I, Z=_m("Z"), A=_m("A")),
    lambda p: [Transform(weights="AT")] if p.n == p.n_kv else [])
# ---- cross-attention: which side each matrix comes from
KV_FROM_DECODER = Mistake("kv-from-decoder", eq.say("keys and values from the decoder side"),
    eq.say("The keys and values were computed from the decoder side {X}; in cross-attention they come from the encoder "
       "side: {K} and {V}, one row per encoder token (only the queries come from {X}).", X=_m("X"),
       K=_is(_m("K"), eq.Mul((_XE, _m("W_K")))), V=_is(_m("V"), eq.Mul((_XE, _m("W_V"))))),
    eq.say("This is the value you get by computing the keys and values from the decoder side {X} instead of the encoder "
       "side {X_enc}.", X=_m("X"), X_enc=_XE),
    lambda p: [Transform(sides="kv-dec")] if p.cross else [])
QUERIES_FROM_ENCODER = Mistake("queries-from-encoder", eq.say("queries from the encoder side"),
    eq.say("The queries were computed from the encoder side {X_enc}; in cross-attention they come from the decoder side: "
       "{Q}, one row per decoder token (the keys and values come from {X_enc}).", X_enc=_XE,
       Q=_is(_m("Q"), eq.Mul((_m("X"), _m("W_Q"))))),
    eq.say("This is the value you get by computing the queries from the encoder side {X_enc} instead of the decoder side "
       "{X}.", X_enc=_XE, X=_m("X")),
    lambda p: [Transform(sides="q-enc")] if p.cross else [])
CAUSAL_MASK_ON_CROSS = Mistake("causal-mask-on-cross", eq.say("a causal mask on cross-attention"),
    eq.say("A causal mask was applied to cross-attention. The mask keeps a decoder token from seeing later decoder tokens "
       "in self-attention; in cross-attention every decoder token may attend to every encoder token, so no score is "
       "{inf}.", inf=eq.neg_inf()),
    eq.say("This is the value you get by masking the cross-attention scores as if they were causal; cross-attention masks "
       "nothing: every decoder token sees the whole encoder side."),
    lambda p: [Transform(mask="upper")] if p.cross and p.n_kv > 1 else [])
# ---- mistakes across heads (several heads only): how the heads' Z become the output
HEADS_SWAPPED = Mistake("heads-swapped", eq.say("heads concatenated in the wrong order"),
    eq.say("The heads' outputs were put side by side in the wrong order: they go in the order of the heads, {concat} for "
       "two, head 1 first, so that each block of the rows of {W_O} meets its own head.", concat=_CONCAT_HEADS,
       W_O=_m("W_O")),
    eq.say("This is the value you get by concatenating the heads in the wrong order; they go in the order of the heads, "
       "{concat} for two, head 1 first.", concat=_CONCAT_HEADS),
    lambda p: [Transform(heads="reversed")] if p.multihead and len(p.heads) > 1 else [])
NO_W_O = Mistake("no-W_O", eq.say("{W_O} left out", W_O=_m("W_O")),
    eq.say("The output was taken to be the concatenated heads themselves; the output projection is still to come: "
       "{formula}.", formula=_OUT),
    eq.say("This is the value you get by leaving out {W_O}: the output is {formula}, not the concat itself.", W_O=_m("W_O"),
       formula=eq.Mul((_CONCAT, _m("W_O")))),
    lambda p: [Transform(heads="no-W_O")] if p.multihead and _square_W_O(p) else [])
HEADS_AVERAGED = Mistake("heads-averaged", eq.say("heads averaged instead of concatenated"),
    eq.say("The heads' outputs were averaged entry by entry; multi-head attention puts them side by side (concat) and "
       "mixes them with {W_O}: {formula}.", W_O=_m("W_O"), formula=_OUT),
    eq.say("This is the value you get by averaging the heads' outputs instead of concatenating them and multiplying by "
       "{W_O}.", W_O=_m("W_O")),
    lambda p: [Transform(heads="mean")] if p.multihead and _mean_fits(p) else [])
# ---- end of the mistakes across heads
# ---- the backward pass (problems with a [train] table): the classic slips of one training step
SOFTMAX_BACKWARD_SUM = Mistake("softmax-backward-sum", eq.say("softmax backward without the Σ term"),
    eq.say("The softmax was treated as if each weight depended only on its own score: {identity} (the softmax as the "
       "identity) or {no_sum} (the row's Σ term left out). The softmax couples a row: {rule}, so every row of {dS} "
       "adds up to 0.", identity=_is(_m("dS"), _m("dA")),
       no_sum=_is(_entry("dS", "i", "j"), eq.Mul((_entry("A", "i", "j"), _entry("dA", "i", "j")))), rule=_DS_RULE,
       dS=_m("dS")),
    eq.say("This is the value you get by treating the softmax as the identity (or leaving out the row's Σ term) on the way "
       "back: {rule}.", rule=_DS_RULE),
    lambda p: [Transform(softmax_back="identity"), Transform(softmax_back="no-sum")] if p.train else [])
DV_NOT_TRANSPOSED = Mistake("dV-not-transposed", _instead(_DV_WRONG, eq.Mul((_T(_m("A")), _m("dZ")))),
    eq.say("{dV} was computed as {wrong}; {Z} gives {rule}: value row {j} collects column {j} of {A} (every token that "
       "attended to token {j}), not row {j}.", dV=_m("dV"), wrong=eq.Mul((_m("A"), _m("dZ"))), Z=_is(_m("Z"), _AV),
       rule=_DV, j=_J, A=_m("A")),
    eq.say("This is the value you get from {wrong} instead of {right} (the weights not transposed).", wrong=_DV_WRONG,
       right=eq.Mul((_T(_m("A")), _m("dZ")))),
    lambda p: [Transform(dV="AdZ")] if p.train else [])
NO_SCALING_BACKWARD = Mistake("no-scaling-backward", eq.say("{factor} forgotten on the way back", factor=eq.Frac(eq.num(1), _SQRT_DK)),
    eq.say("The gradient of the scores was not divided by the scale factor again: the forward pass divided the scores by "
       "it, so on the way back {rule}.", rule=_DSCORES),
    eq.say("This is the value you get when the gradient is not divided by the scale ({root}) again on the way back.",
       root=_SQRT_DK),
    lambda p: [Transform(back_scale="forgot")] if p.train and _scaled(p) else [])
DK_NOT_TRANSPOSED = Mistake("dK-not-transposed", eq.say("{dK} without the transpose", dK=_m("dK")),
    eq.say("{dK} was computed as {wrong}; {scores} gives {rule}: token {j}'s key collects column {j} of {dscores} (every "
       "query matched with it).", dK=_m("dK"), wrong=eq.Mul((_m("dscores"), _m("Q"))), scores=_is(_m("scores"), _QK),
       rule=_DK_RULE, j=_J, dscores=_m("dscores")),
    eq.say("This is the value you get from {wrong} instead of {right} (the transpose left out).", wrong=_DK_WRONG,
       right=eq.Mul((_T(_m("dscores")), _m("Q")))),
    lambda p: [Transform(dK="SQ")] if p.train else [])
UPDATE_WRONG_SIGN = Mistake("update-wrong-sign", eq.say("update with the wrong sign"),
    eq.say("The weights were moved along the gradient ({ascent}): gradient descent moves them against it, {descent}, which "
       "is what lowers the loss.", ascent=_ASCENT, descent=_DESCENT),
    eq.say("This is the value you get from {ascent}: the update goes against the gradient, {descent}.", ascent=_ASCENT,
       descent=_DESCENT),
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


NORM_OVER_COLUMNS = Mistake("norm-over-columns", eq.say("layer norm over the wrong axis"),
    eq.say("The layer norm was taken down each column (over the tokens); it normalises each row, one token's d_model "
           "values: {mu} and {var} are that row's mean and mean square deviation.", mu=_MU, var=_VAR),
    eq.say("This is the value you get by normalising each column instead of each row: a layer norm works on one "
           "token's row at a time."),
    lambda p: [Transform(norm_axis="columns")] if _block(p) is not None and p.n > 1 else [])
VARIANCE_N_MINUS_1 = Mistake("variance-n-minus-1", eq.say("variance divided by n − 1"),
    eq.say("The variance was divided by d_model − 1; layer norm divides the sum of squared deviations by d_model (the "
           "biased variance, as PyTorch's LayerNorm does)."),
    eq.say("This is the value you get by dividing the squared deviations by d_model − 1 instead of d_model."),
    lambda p: [Transform(variance="n-1")] if _block(p) is not None and p.d_model > 1 else [])
NORM_ROOT = Mistake("norm-root", eq.say("the √ (or ε) forgotten in layer norm"),
    eq.say("The deviations were divided by {sum} without its square root, or by {root} without ε; layer norm divides "
           "by {right}: {rule}.", sum=eq.Add((_VAR, _EPS)), root=eq.Sqrt(_VAR), right=eq.Sqrt(eq.Add((_VAR, _EPS))),
           rule=_LN_RULE),
    eq.say("This is the value you get by leaving out the square root (or ε) in layer norm's {root}.",
           root=eq.Sqrt(eq.Add((_VAR, _EPS)))),
    lambda p: ([Transform(norm_root="no-sqrt")] + ([Transform(norm_root="no-eps")] if _eps(p) else []))
    if _block(p) is not None else [])
NO_RESIDUAL = Mistake("no-residual", eq.say("the residual add forgotten"),
    eq.say("A residual add was left out: each sublayer's output is added to its input ({first}, {second}) before going "
           "on.", first=eq.Add((_m("X_0"), _m("Z"))), second=eq.Add((_m("H_1"), _m("F")))),
    eq.say("This is the value you get by leaving out the residual add: the sublayer's input is added to its output."),
    lambda p: [Transform(residual="no-first"), Transform(residual="no-second")] if _block(p) is not None else [])
RELU_BEFORE_BIAS = Mistake("relu-before-bias", eq.say("ReLU before the bias"),
    eq.say("ReLU was applied before adding the bias: {rule}, the bias first.", rule=_is(_m("G"), eq.Call("relu", (eq.Add((
        eq.Mul((eq.Sym("x"), _m("W_1"))), _m("b_1"))),)))),
    eq.say("This is the value you get by applying ReLU before adding {b_1}.", b_1=_m("b_1")),
    lambda p: [Transform(relu="before-bias")] if _block(p) is not None and any(_block(p).b_1) else [])
POSITIONS_AFTER_ATTENTION = Mistake("positions-after-attention", eq.say("positions added after attention"),
    eq.say("The positions were added after the attention: they go in before it, {rule}, so that the queries, keys and "
           "values know each token's place.", rule=_is(_m("X_0"), eq.Add((_m("X"), _m("P"))))),
    eq.say("This is the value you get by adding the positions after the attention instead of to {X} before it.",
           X=_m("X")),
    lambda p: [Transform(positions="after-attention")] if _positional(p) else [])
SIN_COS_SWAPPED = Mistake("sin-cos-swapped", eq.say("sin and cos swapped"),
    eq.say("sin and cos were swapped: the even columns 2i take sin, the odd ones 2i + 1 take cos (of the same angle)."),
    eq.say("This is the value you get with cos in the even columns and sin in the odd ones."),
    lambda p: [Transform(sincos="swapped")] if _positional(p) else [])
LOG10_LOSS = Mistake("log10-loss", eq.say("log base 10 instead of ln"),
    eq.say("The loss was taken with log base 10; cross-entropy uses the natural log: {rule} of each target's "
           "probability.", rule=eq.Neg(eq.Call("ln", (eq.Sym("p"),)))),
    eq.say("This is the value you get with {log} instead of ln in the loss.", log=eq.Sym("log", sub="10", upright=True)),
    lambda p: [Transform(log="log10")] if _output(p) and _block(p).targets is not None else [])
OUTPUT_SOFTMAX_COLUMNS = Mistake("output-softmax-columns", eq.say("output softmax over the wrong axis"),
    eq.say("The softmax of the logits was taken down each column; each position's row of logits is a distribution "
           "over the vocabulary, so the softmax runs along the row."),
    eq.say("This is the value you get by applying the softmax down each column of the logits instead of along each "
           "row."),
    lambda p: [Transform(output_softmax="columns")] if _output(p) and p.n > 1 else [])
BLOCK_MISTAKES = (NORM_OVER_COLUMNS, VARIANCE_N_MINUS_1, NORM_ROOT, NO_RESIDUAL, RELU_BEFORE_BIAS,
                  POSITIONS_AFTER_ATTENTION, SIN_COS_SWAPPED, LOG10_LOSS, OUTPUT_SOFTMAX_COLUMNS)
# ---- end of a block's mistakes
# not a different pass: accepted answers that differ from the exact values rounded at the end the way
# values rounded earlier do (worked.check tests the paths of early rounding itself)
EARLY_ROUNDING = Mistake("early-rounding", eq.say("rounded too early"),
    lambda p: eq.say("Accepted: these answers are within the rounding band, but they differ from the exact values rounded at "
                 "the end, because earlier values were rounded first. Keep more places in intermediate values (the "
                 "worked steps keep {places}) and round only the final answer.", places=str(p.precision.carried)),
    None, None, accepted=True)

#: every mistake, in the order reports list them
ALL = (NO_SCALING, SCALED_BY_DK, TRANSPOSED_SCORES, WRONG_MASK, COLUMN_SOFTMAX, NO_EXP, WEIGHTS_TRANSPOSED, KV_FROM_DECODER, QUERIES_FROM_ENCODER, CAUSAL_MASK_ON_CROSS, HEADS_SWAPPED, NO_W_O, HEADS_AVERAGED, SOFTMAX_BACKWARD_SUM, DV_NOT_TRANSPOSED, NO_SCALING_BACKWARD, DK_NOT_TRANSPOSED, UPDATE_WRONG_SIGN) + BLOCK_MISTAKES + (EARLY_ROUNDING,)
