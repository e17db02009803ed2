"""A block's default band (worked.check._block_bands, issue 27): over drawn blocks, students who round each step
to the problem's places, one more, or the carried ones (the same everywhere, or a choice per step) and write their
answers rounded to the problem's places, or as they carried them, have every answer accepted (a training step's
gradients too); and each planted
mistake (the mistake's values, written at the problem's places, in the matrix where it first shows) is still named
wherever it moves that matrix past what such rounding does."""
from __future__ import annotations

import random

import pytest

from worked import mistakes, stages
from worked.attention import Float, Hand, run_pass
from worked.check import Checker
from worked.generate import Family, generate_block
from worked.numfmt import round_decimal
from worked.solver import solve

FAMILIES = [dict(block="post-ln", vocab=4, positional="sinusoidal"),
            dict(block="pre-ln", vocab=4, mask="causal", positional="sinusoidal"),
            dict(block="post-ln", vocab=5, tokens=4, eps="1/100"),
            dict(block="pre-ln", heads=2, d_ff=3, vocab=4),
            dict(block="post-ln", vocab=4, train=True, mask="causal")]      # with a training step: its gradients
SEEDS = range(2)
MIXED = 4           # students with a choice of places per step, per block


def student(p, keys, places):
    """The values of a student who works each matrix (in order) at its own places from their own earlier values:
    a hand pass at those places with the earlier matrices given (consecutive matrices at the same places in one)."""
    given, n = {}, 0
    while n < len(keys):
        d, m = places[keys[n]], n
        while m < len(keys) and places[keys[m]] == d:
            m += 1
        run = run_pass(p, Hand(p, "decimal", d), given=dict(given)).shown
        for k in keys[n:m]:
            given[k] = [list(row) for row in run[k]]
        n = m
    return given


def written(grid, places):
    return [["-inf" if x is None else str(round_decimal(x, None, places)) for x in row] for row in grid]


def blocks():
    if not blocks.cache:
        for fam in FAMILIES:
            for seed in SEEDS:
                p = generate_block(Family.from_dict(fam), seed)
                sol = solve(p)
                blocks.cache.append((p, sol, Checker(p, sol)))
    return blocks.cache


blocks.cache = []


@pytest.mark.parametrize("k", range(len(FAMILIES) * len(SEEDS)))
def test_students_rounding_at_each_step_are_accepted(k):
    p, sol, ch = blocks()[k]
    keys = list(sol.matrices())
    rng = random.Random(k)
    D = (p.decimals, p.decimals + 1, p.precision.carried)
    plans = [{key: d for key in keys} for d in D] + [{key: rng.choice(D) for key in keys} for _ in range(MIXED)]
    for plan in plans:
        vals = student(p, keys, plan)
        for how in ("rounded", "as carried"):
            answers = {key: written(g, p.decimals if how == "rounded" else plan[key]) for key, g in vals.items()}
            rep = ch.check(answers)
            wrong = [(m.key, i + 1, j + 1, m.answers[i][j], m.expected[i][j]) for m in rep.matrices
                     for i, row in enumerate(m.verdicts) for j, v in enumerate(row) if v != "correct"]
            named = [d["code"] for d in rep.diagnoses if d["code"] != "early-rounding"]
            assert wrong == [] and named == [], (p.title, how, [plan[key] for key in keys], wrong[:5], named)


@pytest.mark.parametrize("k", range(len(FAMILIES) * len(SEEDS)))
def test_planted_mistakes_are_named_where_they_show(k):
    """Each mistake the block can make (every transform), written at the problem's places in the matrix where it
    first shows: named when at least 3 in 4 of that matrix's entries it moves are past the right band (what the
    checker's rule asks); and a mistake is never named that was not made."""
    p, sol, ch = blocks()[k]
    arch = stages.of(p)
    shown = 0
    for m in mistakes.of(arch):
        if m.id not in mistakes.MISTAKES or m.stage == "" or m.accepted:
            continue
        for t in m.transforms(p):
            if t.update_of is not None:
                continue
            wrong = run_pass(p, Float(), transform=t).shown
            key = _first_moved(p, sol, wrong)
            if key is None:
                continue
            grid = wrong[key]
            if any(x != x for row in grid for x in row):
                continue            # the mistake's pass has no value here
            rep = ch.check({key: [["-inf" if x == float("-inf") else f"{x:.{p.decimals}f}" for x in row]
                                  for row in grid]})
            named = rep.summary()["mistakes"]
            mat = next(r for r in rep.matrices if r.key == key)
            answered = [v for row in mat.verdicts for v in row if v in ("correct", "wrong")]
            if 4 * mat.count("wrong") >= 3 * len(answered) and mat.count("wrong") >= 2:
                shown += 1
                assert m.id in named, (p.title, m.id, t, key, rep.text()[-900:])
            assert set(named) <= {x.id for x in mistakes.of(arch)}
    assert shown >= 3, shown


def _first_moved(p, sol, wrong):
    """The first matrix (in the order of the steps) whose values the mistake moves at all."""
    right = run_pass(p, Float()).shown
    for key in sol.matrices():
        a, b = right.get(key), wrong.get(key)
        if a is None or b is None or len(a) != len(b) or len(a[0]) != len(b[0]):
            continue
        if any(abs(x - y) > 1e-9 for ra, rb in zip(a, b) for x, y in zip(ra, rb)
               if x == x and y == y and abs(x) != float("inf") and abs(y) != float("inf")):
            return key
    return None
