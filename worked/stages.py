"""The stages of self-attention and of its training step, declared once: each stage's id (the key of its
matrix, ``head2.`` + id per head with several heads), the stages it is computed from, the shape of its matrix
and the words that name it. What iterates the stages (the quiz's shapes, the checker's order of the stages)
reads them here instead of listing them again.

The computation of each stage is still :func:`worked.attention.forward`, and its worked step
:mod:`worked.solver`: moving them here, stage by stage, is the direction of this module.
"""
from __future__ import annotations

from typing import NamedTuple


class Dims(NamedTuple):
    """The sizes the shapes depend on: tokens, d_model, d_k, d_v, heads, the output's columns, [train]."""

    n: int
    d_model: int
    d_k: int
    d_v: int
    heads: int
    d_out: int
    train: bool

    @classmethod
    def of_problem(cls, p) -> "Dims":
        d_out = len(p.W_O[0]) if p.multihead else p.d_v
        return cls(p.n, p.d_model, p.d_k, p.d_v, len(p.heads) if p.multihead else 1, d_out,
                   getattr(p, "train", None) is not None)

    @classmethod
    def of_family(cls, f) -> "Dims":
        return cls(f.n, f.d_model, f.d_k, f.dv, f.heads, f.d_model if f.heads > 1 else f.dv, bool(f.train))


# the sizes a stage's rows and columns have
_SIZE = {
    "n": lambda d: d.n, "d_model": lambda d: d.d_model, "d_k": lambda d: d.d_k, "d_v": lambda d: d.d_v,
    "heads·d_v": lambda d: d.heads * d.d_v, "d_out": lambda d: d.d_out, "1": lambda d: 1,
}


class Stage(NamedTuple):
    id: str                 # the key of its matrix
    inputs: tuple           # the stages (or the problem's inputs X, W_Q, …) it is computed from
    rows: str               # the size of its rows and columns (a key of _SIZE)
    cols: str
    words: str              # what it is, in words (the quiz names a question's matrix with them)
    scope: str = "head"     # "head": one per head; "layer": once (after the heads, or without heads)
    several: bool = True    # with scope "layer": whether it exists with one head too

    def shape(self, d: Dims) -> tuple[int, int]:
        return _SIZE[self.rows](d), _SIZE[self.cols](d)


FORWARD = (
    Stage("Q", ("X", "W_Q"), "n", "d_k", "the queries Q = X·W_Q"),
    Stage("K", ("X", "W_K"), "n", "d_k", "the keys K = X·W_K"),
    Stage("V", ("X", "W_V"), "n", "d_v", "the values V = X·W_V"),
    Stage("scores", ("Q", "K"), "n", "n", "the scores Q·Kᵀ"),
    Stage("scaled", ("scores",), "n", "n", "the scaled scores (the scores divided by the scale)"),
    Stage("weights", ("scaled",), "n", "n", "the attention weights A (softmax of each row of the scaled scores)"),
    Stage("Z", ("weights", "V"), "n", "d_v", "the output Z"),
)
COMBINE = (             # several heads: side by side, then W_O
    Stage("concat", ("Z",), "n", "heads·d_v", "the concatenated head outputs", scope="layer", several=False),
    Stage("Z", ("concat", "W_O"), "n", "d_out", "the output Z", scope="layer", several=False),
)
TRAIN = (               # one training step (a [train] problem): the backward pass and the update
    Stage("loss", ("Z", "T"), "1", "1", "the loss L", scope="layer"),
    Stage("dZ", ("loss",), "n", "d_out", "the gradient of the output dZ", scope="layer"),
    Stage("dconcat", ("dZ", "W_O"), "n", "heads·d_v", "the gradient of the concatenated heads", scope="layer",
          several=False),
    Stage("dV", ("weights", "dZ"), "n", "d_v", "the gradient dV"),
    Stage("dA", ("dZ", "V"), "n", "n", "the gradient dA of the weights"),
    Stage("dS", ("weights", "dA"), "n", "n", "the softmax backward dS"),
    Stage("dscores", ("dS",), "n", "n", "the gradient of the scores"),
    Stage("dQ", ("dscores", "K"), "n", "d_k", "the gradient dQ"),
    Stage("dK", ("dscores", "Q"), "n", "d_k", "the gradient dK"),
    Stage("dW_Q", ("X", "dQ"), "d_model", "d_k", "the gradient dW_Q"),
    Stage("dW_K", ("X", "dK"), "d_model", "d_k", "the gradient dW_K"),
    Stage("dW_V", ("X", "dV"), "d_model", "d_v", "the gradient dW_V"),
)
UPDATE = (              # after every head's gradients: each head's weights updated, then the loss again
    Stage("W_Q_new", ("W_Q", "dW_Q"), "d_model", "d_k", "the updated W_Q"),
    Stage("W_K_new", ("W_K", "dW_K"), "d_model", "d_k", "the updated W_K"),
    Stage("W_V_new", ("W_V", "dW_V"), "d_model", "d_v", "the updated W_V"),
    Stage("loss_after", ("W_Q_new", "W_K_new", "W_V_new"), "1", "1", "the loss after the update L′", scope="layer"),
)
IDS = tuple(dict.fromkeys(s.id for s in FORWARD + COMBINE))       # the forward stages: Q … Z, concat
TRAIN_IDS = tuple(s.id for s in TRAIN + UPDATE)
ALL = FORWARD + COMBINE + TRAIN + UPDATE


def matrices(d: Dims) -> dict[str, tuple[int, int]]:
    """Every matrix of a problem of these sizes, key → shape, in the order of the steps (the keys of
    :meth:`worked.model.Solution.matrices`)."""
    several = d.heads > 1
    pres = [f"head{h}." for h in range(1, d.heads + 1)] if several else [""]
    out = {p + s.id: s.shape(d) for p in pres for s in FORWARD}
    if several:
        out.update({s.id: s.shape(d) for s in COMBINE})
    if d.train:
        for part in (TRAIN, UPDATE):
            for s in part:
                if s.scope == "head":
                    continue
                if several or s.several:
                    out[s.id] = s.shape(d)
                if s.id == "dconcat" and several:     # each head's block of dconcat: its dZ
                    out.update({p + "dZ": (d.n, d.d_v) for p in pres})
            out.update({p + s.id: s.shape(d) for p in pres for s in part if s.scope == "head"})
        out["loss_after"] = out.pop("loss_after")
    return out


def words(key: str) -> str:
    """What the matrix of *key* is, in words ("the scores Q·Kᵀ"; a head's: "… of head 2")."""
    pre, _, base = key.rpartition(".")
    stage = next((s for s in ALL if s.id == base), None)
    text = stage.words if stage is not None else base
    return text + (f" of {pre.replace('head', 'head ')}" if pre else "")
