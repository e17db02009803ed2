"""The JSON form of a solution (``worked solve --format json``, the web API, ``Solution.to_dict()``; see README:
"JSON format"): every matrix exact (sympy's string form) and as floats, every step's prose and lines printed
as Unicode text and its lines as LaTeX.

This writer reads the solution through its attributes only and imports nothing of :mod:`worked.model` or
:mod:`worked.solver` (the model's ``to_dict`` calls it at call time, with no import cycle).
"""
from __future__ import annotations

from typing import Any

import sympy as sp
from sympy.printing.str import StrPrinter

from .. import printers, stages


class ExactText(StrPrinter):
    """sympy's ``str`` of exact values (the same text, the same settings), remembering the text of every compound
    subexpression it has printed: the entries of a solution share most of theirs (a row's softmax denominator
    in every weight and output of the row, each head's Z in every entry of the output), so a whole solution
    prints several times faster. One per solution (nothing is kept between solutions). Floats are not
    remembered (two of different precision compare equal)."""

    def __init__(self):
        super().__init__({"order": None})
        self._memo: dict = {}

    def _print(self, expr, **kwargs) -> str:
        if kwargs or getattr(expr, "is_Atom", True):
            return super()._print(expr, **kwargs)
        got = self._memo.get(expr)
        if got is None:
            got = self._memo[expr] = super()._print(expr)
        return got


def matrix(m, text=str) -> dict[str, Any]:
    """A matrix (:class:`worked.model.Mat`) as ``{"shape", "exact", "value"}``; *text* writes an exact value
    (``str``, or one :class:`ExactText`'s ``doprint`` for a whole solution: the same text, faster)."""
    if m.is_scalar:      # a number: {"shape": [], "exact": "…", "value": 2.2437…}
        return {"shape": [], "exact": text(m.exact[0][0]), "value": m.value(0, 0)}
    return {
        "shape": list(m.shape),
        "exact": [[text(x) for x in row] for row in m.exact],
        "value": [[m.value(i, j) for j in range(m.shape[1])] for i in range(m.shape[0])],
    }


def step(st) -> dict[str, Any]:
    """A step (:class:`worked.model.Step`): its prose and shapes as text, its lines as text and as LaTeX."""
    return {
        "id": st.id,
        "head": st.head,
        "title": printers.text(st.title_prose),
        "why": printers.text(st.why_prose),
        "notes": [printers.text(x) for x in st.notes_prose],
        "shape": printers.text(st.shape_eq) if st.shape_eq is not None else None,
        "result": st.result,
        "text": [printers.text(ln.eq) for ln in st.lines],
        "latex": [printers.latex(ln.eq) for ln in st.lines],
        "groups": [ln.group for ln in st.lines],
    }


def chain(sol, text) -> dict[str, Any]:
    """A chain of blocks ([[blocks]], :class:`worked.chain.ChainSolution`): the shared fields, each block's JSON
    with the names of one block's (and ``block``, its ``heading`` and ``X``, its input as carried), and ``Z``,
    the last block's output."""
    c = sol.problem
    blocks = []
    for k, (b, head) in enumerate(zip(sol.blocks, sol.titles()), 1):
        d = {"block": k, "heading": head, **solution(b, text)}
        d["X"] = None       # block 1: the top-level X
        if k > 1:      # block k's X: block k−1's output as the key shows it (rounded), exact
            X = b.problem.X
            d["X"] = {"shape": [len(X), len(X[0])], "exact": [[str(sp.Rational(x.numerator, x.denominator)) for x in row]
                                                              for row in X],
                      "value": [[float(x) for x in row] for row in X], "from": f"block{k - 1}.Z"}
        blocks.append(d)
    return {
        "title": c.title,
        "attention": "blocks",
        "tokens": list(c.tokens),
        "tokens_enc": list(c.tokens_enc) if c.cross else None,
        "decimals": c.decimals,
        "display": sol.display,
        "blocks": blocks,
        stages.OUTPUT: matrix(sol.output, text),
    }


def solution(sol, text=None) -> dict[str, Any]:
    """The documented JSON form of a :class:`worked.model.Solution` (or of a chain of blocks: see :func:`chain`)."""
    text = text or ExactText().doprint
    if isinstance(getattr(sol, "blocks", None), list):
        return chain(sol, text)
    p = sol.problem
    return {
        "title": p.title,
        "attention": p.attention,
        "tokens": list(p.tokens),
        "tokens_enc": list(p.tokens_enc) if p.cross else None,
        "decimals": p.decimals,
        "scale": p.scale if isinstance(p.scale, str) else str(p.scale),
        "mask": p.mask,
        "d_k": p.d_k,
        "display": sol.display,
        "heads": [{k: matrix(m, text) for k, m in h.matrices().items()} for h in sol.heads],
        # the heads' combination (concat: None with one head) and the output
        **{s.id: matrix(m, text) if m is not None else None
           for s, m in zip(stages.of(p).combine, (sol.concat, sol.output))},
        "steps": [step(s) for s in sol.steps],
        "train": train(sol, text),
        "transformer": block(sol, text),      # a Transformer block's own (None without one)
    }


def block(sol, text=str) -> dict[str, Any] | None:
    """A Transformer block's own: its order and settings, the loss (a number, with targets) and its matrices by
    the API's names (``P``, ``X0``, ``H1``, ``H``, ``logits``, ``probs``, ``loss`` …); None without a block."""
    b = getattr(sol.problem, "block", None)
    if b is None:
        return None
    mats = {**sol.before, **sol.after}
    return {
        "order": b.kind, "positional": b.positional, "activation": b.activation,
        "eps": str(sp.Rational(b.eps.numerator, b.eps.denominator)),
        "vocab": list(b.vocab) if b.vocab else None,
        "targets": [b.vocab[t] for t in b.targets] if b.targets is not None else None,
        **{k: float(m.num[0][0]) for k, m in mats.items() if m.is_scalar},       # the loss
        "matrices": {k: matrix(m, text) for k, m in mats.items()},
    }


def train(sol, text=str) -> dict[str, Any] | None:
    """The training step (a problem with [train]): its settings and every new matrix by key."""
    t = getattr(sol.problem, "train", None)
    if t is None or not sol.train:
        return None
    # a block's targets are its next tokens (in "transformer"); the attention's a matrix T
    tgt = [[str(sp.Rational(x.numerator, x.denominator)) for x in row] for row in t.target] if t.target is not None else None
    return {
        "loss_function": t.loss, "lr": str(sp.Rational(t.lr.numerator, t.lr.denominator)),
        "target": {"shape": [len(tgt), len(tgt[0])], "exact": tgt, "value": [[float(x) for x in row] for row in t.target]}
        if tgt is not None else None,
        **{k: float(m.num[0][0]) for k, m in sol.train.items() if m.is_scalar},     # the loss, before and after
        "matrices": {k: matrix(m, text) for k, m in sol.train.items()},
    }
