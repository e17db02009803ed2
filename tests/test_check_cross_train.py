"""Checking answers to a cross-attention problem with a [train] table: a mistake that changes the output's shape
(the queries from the encoder side) has no training step, and the checker tries it without one (it raised an
IndexError from the softmax backward before)."""
from __future__ import annotations

from pathlib import Path

from worked import attention
from worked.attention import Float, Transform, forward
from worked.check import check_answers
from worked.problem import Problem

PROBLEMS = Path(__file__).resolve().parents[1] / "problems"


def _decimals(M, d):
    return [["-inf" if x == float("-inf") else f"{x:.{d}f}" for x in row] for row in M]


def test_a_mistake_that_changes_the_output_s_shape_has_no_training_step():
    p = Problem.from_file(PROBLEMS / "cross-attention-train.toml")
    assert p.cross and p.n != p.n_kv and p.train is not None
    run = forward(p, Float(), transform=Transform(sides="q-enc"))
    assert len(run.output) == p.n_kv and run.loss is None and not run.grads
    assert "loss" not in run.matrices() and "dS" not in run.matrices()
    assert attention.forward(p, Float()).loss is not None      # the problem's own pass has its step


def test_wrong_answers_to_a_cross_attention_training_step_are_checked_and_named():
    p = Problem.from_file(PROBLEMS / "cross-attention-train.toml")
    wrong = forward(p, Float(), transform=Transform(softmax_back="identity")).matrices()
    rep = check_answers(p, {"scaled": [["9"] * p.n_kv] * p.n, "dS": _decimals(wrong["dS"], p.decimals)}).to_dict()
    assert rep["summary"]["wrong"] == 2 * p.n * p.n_kv and rep["summary"]["explained"] == p.n * p.n_kv
    assert [d["code"] for d in rep["diagnoses"]] == ["softmax-backward-sum"]
