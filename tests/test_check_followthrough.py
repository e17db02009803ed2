"""Follow-through for one consistent slip: every mistake in the registry, made once and carried on correctly.

A student's full answers are built here by making one mistake of :data:`worked.mistakes.MISTAKES` (its
transform, in the Float forward pass) and then doing every later step right from the student's own values:
either from the unrounded values (as the worksheet asks) or from the values as written, rounded at each step;
written at any precision the sheet allows (the problem's places or more). The checker must name that one
mistake and mark nothing after it ✗ (each later wrong entry is carried forward, ↪).
"""
from __future__ import annotations

import functools
import math

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from worked import slips
from worked.attention import NA, Float, forward
from worked.check import check_answers
from worked.mistakes import MISTAKES
from worked.problem import Problem
from worked.solver import AuditFailure, solve

SETTINGS = settings(max_examples=40, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
SINGLE = [m for m in MISTAKES if m in ("no-scaling", "scaled-by-dk", "transposed-scores", "wrong-mask",
                                       "column-softmax", "no-exp", "weights-transposed")]
CROSS = ["heads-swapped", "no-W_O", "heads-averaged"]
SIDES = ["kv-from-decoder", "queries-from-encoder", "causal-mask-on-cross"]   # cross-attention: tests/test_cross.py


def test_every_transform_mistake_is_tried_here():
    """Each mistake with a transform (early-rounding has none) is covered by one of the tests below."""
    assert {m.id for m in MISTAKES.values() if m.id != "early-rounding"} <= set(SINGLE) | set(CROSS) | set(SIDES) | BACKWARD \
        | BLOCK


# a Transformer block's mistakes: changed at the block's forward (tests/test_block_slips.py); its checker is to come
BLOCK = {m.id for m in slips.BLOCK_MISTAKES}


# mistakes of the backward pass (another part of the registry) are not forward-pass slips
BACKWARD = {m.id for m in MISTAKES.values() if getattr(m, "stage", "") not in
            ("Q", "K", "V", "scores", "scaled", "weights", "Z", "concat")}


def _mat(draw, r, c, lo=-1, hi=2):
    return [[draw(st.integers(lo, hi)) for _ in range(c)] for _ in range(r)]


@st.composite
def problems(draw, multihead=False):
    n = draw(st.integers(2, 4))
    dm = draw(st.integers(2, 3))
    dk = draw(st.integers(1, 3))
    mask = draw(st.sampled_from(["none", "causal"]))
    decimals = draw(st.sampled_from([2, 2, 3]))
    X = _mat(draw, n, dm)
    if multihead:
        dv = 2
        heads = [(_mat(draw, dm, dk), _mat(draw, dm, dk), _mat(draw, dm, dv)) for _ in range(2)]
        cols = draw(st.sampled_from([2, 4]))          # W_O square (no-W_O fits) or d_v wide (heads-averaged fits)
        p = Problem(X, heads=heads, W_O=_mat(draw, 2 * dv, cols, -1, 1), mask=mask, decimals=decimals)
    else:
        p = Problem(X, _mat(draw, dm, dk), _mat(draw, dm, dk), _mat(draw, dm, 2), mask=mask, decimals=decimals)
    for h in forward(p, Float()).heads:
        live = [abs(x) for row in h.scaled for x in row if x != -math.inf]
        assume(max(live) <= 6)     # a hand exercise: the softmax does not saturate
    assume(solved(p) is not None)
    return p


@functools.lru_cache(maxsize=256)
def solved(p):
    try:
        return solve(p).audit()
    except AuditFailure:
        return None


def _round(x, places):
    return x if x == -math.inf else round(x, places) + 0.0


def _text(x, places):
    return "-inf" if x == -math.inf else f"{_round(x, places):.{places}f}"


def student(p, transform, places, rounded):
    """The full answers of a student who makes *transform* and does the rest right from their own values."""
    keys = list(forward(p, Float()).shown)
    if not rounded:
        shown = forward(p, Float(), transform=transform).shown
        return {k: [[_text(x, places) for x in row] for row in shown[k]] for k in keys}, shown
    given, values = {}, {}
    for k in keys:       # each stage from the earlier stages as written
        grid = forward(p, Float(), transform=transform, given=given).shown[k]
        values[k] = grid
        given[k] = [[_round(x, places) for x in row] for row in grid]
    return {k: [[_text(x, places) for x in row] for row in given[k]] for k in keys}, values


def _stage_keys(p, code, transform):
    """The matrices where the mistake is made: its stage in every head, or concat / the output across heads."""
    stage = MISTAKES[code].stage
    if transform.heads != "concat":
        return ["concat" if stage == "concat" else "Z"]
    if p.multihead:
        return [f"head{h}.{stage}" for h in range(1, len(p.heads) + 1)]
    return [stage]


def _changes(p, key, mistake_values):
    """How many entries of *key* the mistake changes clearly (> 0.15; a −∞ moved counts 3); -1 when it changes
    some entries beyond rounding but fewer than 3 clearly (too little evidence to expect a name, too much to
    expect no ✗)."""
    changed = slight = 0
    for g_row, b_row in zip(forward(p, Float()).shown[key], mistake_values[key]):
        for g, b in zip(g_row, b_row):
            if (g == -math.inf) != (b == -math.inf):
                changed += 3
            elif g != -math.inf and abs(g - b) > 0.15:
                changed += 1
            elif g != -math.inf and abs(g - b) > 0.001:
                slight += 1
    return -1 if slight and changed < 3 else changed


def _distinct(p, code, transform, key):
    """No other mistake gives the same values at *key* (then naming both would be right)."""
    mine = forward(p, Float(), transform=transform).shown[key]
    if not mine:
        return True
    for m in MISTAKES.values():
        if m.id == code:
            continue
        for t in m.transforms(p):
            other = forward(p, Float(), transform=t).shown[key]
            same = all((a == b) if -math.inf in (a, b) else abs(a - b) < 0.2
                       for ra, rb in zip(mine, other) for a, b in zip(ra, rb))
            if same:
                return False
    return True


def _check_follow_through(p, code, data):
    transforms = MISTAKES[code].transforms(p)
    assume(transforms)
    transform = data.draw(st.sampled_from(transforms), label="transform")
    places = p.decimals + data.draw(st.integers(0, 2), label="extra places")
    rounded = data.draw(st.booleans(), label="rounded at each step")
    answers, values = student(p, transform, places, rounded)
    mistaken = forward(p, Float(), transform=transform).shown
    # the mistake needs usable numbers (no-exp divides by a row's sum of scores, which may be about 0)
    assume(all(x == -math.inf or abs(x) < 50 for grid in mistaken.values() for row in grid for x in row))
    stage_keys = _stage_keys(p, code, transform)
    counts = [_changes(p, k, mistaken) for k in stage_keys]
    # enough evidence to name it in each matrix it shows in (see test_check_evidence.py), and one that shows it
    assume(max(counts) >= 3 and all(c == 0 or c >= 3 for c in counts))
    assume(all(_distinct(p, code, transform, k) for k, c in zip(stage_keys, counts) if c))
    report = check_answers(p, answers, solution=solved(p))
    codes = {d["code"] for d in report.diagnoses if d["code"] != "early-rounding"}
    assert codes == {code}, report.text()
    for m in report.matrices:
        if m.key in stage_keys:
            continue
        for i, row in enumerate(m.verdicts):
            for j, v in enumerate(row):
                assert v != "wrong" or m.carried[i][j], (m.key, i, j, report.text())
    assert report.summary()["unexplained"] == 0, report.text()
    assert report.summary_line().startswith(f"1 mistake ({code})"), report.text()


@SETTINGS
@given(problems(), st.sampled_from(SINGLE), st.data())
def test_one_slip_is_one_diagnosis_and_carried_forward(p, code, data):
    _check_follow_through(p, code, data)


@SETTINGS
@given(problems(multihead=True), st.sampled_from(SINGLE + CROSS), st.data())
def test_one_slip_with_two_heads(p, code, data):
    _check_follow_through(p, code, data)


def test_part9_no_scaling_from_unrounded_weights():
    """The issue's case: Part 9 without the √d_k, Z from the unrounded weights: one mistake, the rest ↪."""
    from worked.problem import load

    p = load("problems/cats-chase-mice.toml")
    answers = {"scores": [[2, 4, 2], [3, 3, 3], [2, 3, 2]], "scaled": [[2, 4, 2], [3, 3, 3], [2, 3, 2]],
               "weights": [["0.11", "0.79", "0.11"], ["1/3", "1/3", "1/3"], ["0.21", "0.58", "0.21"]],
               "Z": [["0.32", "1.79"], ["1.00", "1.33"], ["0.64", "1.58"]]}
    report = check_answers(p, answers)
    z = report.to_dict()["matrices"]["Z"]
    assert z["carried_forward"] == [[True, True], [False, False], [True, True]]
    assert [d["code"] for d in report.diagnoses] == ["no-scaling"]
    assert report.summary_line().startswith("1 mistake (no-scaling), everything after it carried forward correctly")
    assert "Summary: 1 mistake (no-scaling)" in report.text()
