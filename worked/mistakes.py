"""The known mistakes, in one registry: the checker diagnoses them, quizzes offer their values as wrong answers.

::

    from worked.mistakes import MISTAKES
    m = MISTAKES["no-scaling"]
    m.id, m.title, m.stage          # "no-scaling", "no scaling", "scaled" (the worked step to re-read)
    m.message(problem)              # what `worked check` (and the web page) says about it
    m.answer_feedback               # the feedback of its value as a 0 % answer in Moodle/GIFT (ends with the id)
    m.transforms(problem)           # the worked.attention.Transform(s) that make the mistake on this problem:
                                    # empty where it changes nothing (no-scaling when the factor is 1) and for
                                    # early-rounding, which is not a different pass (the checker tests it apart)

The ids are the same in ``worked check`` reports, the quiz manifest (``entries[].mistakes[].id``), the LMS
exports' feedback, the grader's class report and the web page.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from . import eq
from .attention import Transform


@dataclass(frozen=True)
class Mistake:
    id: str
    title: str
    stage: str              # the matrix (and worked step) where it first shows: scores, scaled, weights, Z
                            # (training: dS, dV, dscores, dK, W_Q_new)
    feedback: "str | eq.Prose"        # for a student's check report (prose: its math as trees)
    answer: "str | eq.Prose | None"   # "This is the value you get …": the feedback of a wrong answer in a quiz
    _transforms: Callable | None = None   # problem → the Transforms that apply; None: no transform

    def transforms(self, problem) -> list[Transform]:
        return list(self._transforms(problem)) if self._transforms else []

    def stage_of(self, transform: Transform) -> str:
        """The matrix where the mistake made by *transform* first shows: its stage, or for a wrong sign in one
        matrix's update that matrix's update (W_V alone: ``W_V_new``)."""
        if transform.update_of is not None:
            return transform.update_of + "_new"
        return self.stage

    def message_prose(self, problem) -> eq.Prose:
        """The check report's explanation for this problem (the scale named as it is: √d_k = √4 = 2), as
        prose with its math as trees, for a writer that sets math."""
        fb = eq.prose(self.feedback)
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


_ALL = [
    Mistake("no-scaling", "no scaling", "scaled",
            "The scores were not divided by the scale factor before the softmax: these values are what "
            "the unscaled scores give.",
            "This is the value you get without dividing the scores by the scale (√d_k): "
            "the unscaled score was used.",
            lambda p: [Transform(scale="one")] if _scaled(p) else []),
    Mistake("scaled-by-dk", "divided by d_k instead of √d_k", "scaled",
            "The scores were divided by d_k itself instead of by its square root √d_k.",
            "This is the value you get by dividing the scores by d_k instead of by its square root √d_k.",
            lambda p: [Transform(scale="d_k")] if p.scale == "sqrt" and p.d_k != 1 else []),
    Mistake("transposed-scores", "K·Qᵀ instead of Q·Kᵀ", "scores",
            "The scores were computed as K·Qᵀ, the transpose of Q·Kᵀ: row i must be token i's "
            "query matched against every key, not its key against every query.",
            "This is the value you get from K·Qᵀ instead of Q·Kᵀ: the scores are transposed "
            "(row = query, column = key).",
            lambda p: [Transform(scores="KQ")]),
    Mistake("wrong-mask", "causal mask on the wrong entries", "scores",
            "In a causal problem a token may attend only to itself and earlier tokens: the entries above "
            "the diagonal are −∞ (weight 0). These values come from masking the wrong triangle, or not "
            "masking at all.",
            "This is the value you get with the causal mask on the wrong entries (or none): a token attends "
            "only to itself and earlier tokens, so the scores above the diagonal are −∞.",
            lambda p: [Transform(mask="none"), Transform(mask="lower")] if p.mask == "causal" and p.n > 1 else []),
    Mistake("column-softmax", "softmax down the columns", "weights",
            "The softmax was taken down each column; it belongs along each row, so that every "
            "token's weights add up to 1.",
            "This is the value you get by applying the softmax down each column; "
            "the softmax runs along each row (over the keys, for one query).",
            lambda p: [Transform(softmax="columns")]),
    Mistake("no-exp", "no exponentials", "weights",
            "Each score was divided by its row's sum without taking e^x first; the softmax divides e^x by the "
            "row's sum of e^x, which also keeps every weight positive.",
            "This is the value you get by dividing each scaled score by its row's sum without taking e^x first; "
            "the softmax divides e^x by the row's sum of e^x.",
            lambda p: [Transform(softmax="no-exp")]),
    Mistake("weights-transposed", "Aᵀ·V instead of A·V", "Z",
            "Z was computed with the transposed weights (Aᵀ·V): row i of Z must blend the value rows "
            "with token i's row of A.",
            "This is the value you get from Aᵀ·V instead of A·V: row i of Z blends the value rows with "
            "token i's row of A.",
            lambda p: [Transform(weights="AT")]),
    # ---- mistakes across heads (several heads only): how the heads' Z become the output
    Mistake("heads-swapped", "heads concatenated in the wrong order", "concat",
            "The heads' outputs were put side by side in the wrong order: concat = [Z₁ | Z₂ | …], head 1 first, "
            "so that each block of W_O's rows meets its own head.",
            "This is the value you get by concatenating the heads in the wrong order; "
            "concat = [Z₁ | Z₂ | …] with head 1 first.",
            lambda p: [Transform(heads="reversed")] if p.multihead and len(p.heads) > 1 else []),
    Mistake("no-W_O", "W_O left out", "Z",
            "The output was taken to be the concatenated heads themselves; the output projection is still "
            "to come: Z = concat · W_O.",
            "This is the value you get by leaving out W_O: the output is concat · W_O, not the concat itself.",
            lambda p: [Transform(heads="no-W_O")] if p.multihead and _square_W_O(p) else []),
    Mistake("heads-averaged", "heads averaged instead of concatenated", "Z",
            "The heads' outputs were averaged entry by entry; multi-head attention puts them side by side "
            "(concat) and mixes them with W_O: Z = concat · W_O.",
            "This is the value you get by averaging the heads' outputs instead of concatenating them and "
            "multiplying by W_O.",
            lambda p: [Transform(heads="mean")] if p.multihead and _mean_fits(p) else []),
    # ---- end of the mistakes across heads
    # ---- the backward pass (problems with a [train] table): the classic slips of one training step
    Mistake("softmax-backward-sum", "softmax backward without the Σ term", "dS",
            eq.prose("The softmax was treated as if each weight depended only on its own score: dS = dA (the softmax as "
                     "the identity) or A∘dA (the row's Σ term left out). The softmax couples a row: ", _DS_RULE,
                     ", so every row of dS adds up to 0."),
            eq.prose("This is the value you get by treating the softmax as the identity (or leaving out the row's Σ term) "
                     "on the way back: ", _DS_RULE, "."),
            lambda p: [Transform(softmax_back="identity"), Transform(softmax_back="no-sum")] if p.train else []),
    Mistake("dV-not-transposed", "dV = A·dZ instead of Aᵀ·dZ", "dV",
            "dV was computed as A·dZ; Z = A·V gives dV = Aᵀ·dZ: value row j collects column j of A (every token that "
            "attended to token j), not row j.",
            "This is the value you get from dV = A·dZ instead of Aᵀ·dZ (the weights not transposed).",
            lambda p: [Transform(dV="AdZ")] if p.train else []),
    Mistake("no-scaling-backward", "1/√d_k forgotten on the way back", "dscores",
            "The gradient of the scores was not divided by the scale factor again: the forward pass divided the scores "
            "by it, so on the way back dscores = dS divided by the same factor.",
            "This is the value you get when the gradient is not divided by the scale (√d_k) again on the way back.",
            lambda p: [Transform(back_scale="forgot")] if p.train and _scaled(p) else []),
    Mistake("dK-not-transposed", "dK without the transpose", "dK",
            "dK was computed as dscores·Q; scores = Q·Kᵀ gives dK = dscoresᵀ·Q: token j's key collects column j of "
            "dscores (every query matched with it).",
            "This is the value you get from dK = dscores·Q instead of dscoresᵀ·Q (the transpose left out).",
            lambda p: [Transform(dK="SQ")] if p.train else []),
    Mistake("update-wrong-sign", "update with the wrong sign", "W_Q_new",
            "The weights were moved along the gradient (W + lr·dW): gradient descent moves them against it, "
            "W − lr·dW, which is what lowers the loss.",
            "This is the value you get from W + lr·dW: the update goes against the gradient, W − lr·dW.",
            # in all three matrices, or in one of them alone (W_V′ wrong, W_Q′ and W_K′ right)
            lambda p: [Transform(update="plus")] + [Transform(update="plus", update_of=w) for w in ("W_Q", "W_K", "W_V")]
            if p.train else []),
    # ---- end of the backward pass's mistakes
    # not a different pass: accepted answers that differ from the exact values rounded at the end the way
    # values rounded earlier do (worked.check tests the paths of early rounding itself)
    Mistake("early-rounding", "rounded too early", "weights",
            "Accepted: these answers are within the rounding band, but they differ from the exact values "
            "rounded at the end, because earlier values were rounded first. Keep more places in "
            "intermediate values (the worked steps keep 4) and round only the final answer.",
            None, None),
]

MISTAKES: dict[str, Mistake] = {m.id: m for m in _ALL}
