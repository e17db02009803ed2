"""Figures of `worked check`'s diagnoses (issue 15), over random problems (not a speed benchmark):

* for each mistake of the registry: how often it is named when made (the mistake, then every later step
  done right from the student's own values, rounded at each step or not; full answers);
* how often correct answers (rounded at the end; any subset of the matrices) get any diagnosis (must be 0);
* how often one random wrong entry (a single-entry question such as scores[2,3]; the value drawn at the
  problem's places within the matrix's spread of values) gets a diagnosis: a false one, since no mistake
  was made (must be ≤ 1 %).

    .venv/bin/python benchmarks/check_diagnosis.py              # 200 problems per mistake, 1000 single entries
    .venv/bin/python benchmarks/check_diagnosis.py --problems 300 --singles 2000 --seed 7
"""
from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from worked.attention import Float, forward  # noqa: E402
from worked.check import check_answers  # noqa: E402
from worked.mistakes import MISTAKES  # noqa: E402
from worked.problem import Problem  # noqa: E402
from worked.solver import AuditFailure, solve  # noqa: E402


def mat(rng, r, c, lo=-1, hi=2):
    return [[rng.randint(lo, hi) for _ in range(c)] for _ in range(r)]


def random_problem(rng, multihead=False):
    """A hand-sized problem whose softmax does not saturate and which the core solves; None otherwise."""
    n, dm, dk = rng.randint(2, 4), rng.randint(2, 3), rng.randint(1, 3)
    mask, decimals = rng.choice(["none", "causal"]), rng.choice([2, 2, 3])
    X = mat(rng, n, dm)
    if multihead:
        heads = [(mat(rng, dm, dk), mat(rng, dm, dk), mat(rng, dm, 2)) for _ in range(2)]
        p = Problem(X, heads=heads, W_O=mat(rng, 4, rng.choice([2, 4]), -1, 1), mask=mask, decimals=decimals)
    else:
        p = Problem(X, mat(rng, dm, dk), mat(rng, dm, dk), mat(rng, dm, 2), mask=mask, decimals=decimals)
    if any(abs(x) > 6 for h in forward(p, Float()).heads for row in h.scaled for x in row if x != -math.inf):
        return None
    try:
        return p, solve(p)
    except AuditFailure:
        return None


def text(x, places):
    return "-inf" if x == -math.inf else f"{round(x, places) + 0.0:.{places}f}"


def student(p, transform, rounded):
    keys = list(forward(p, Float()).shown)
    given = {}
    for k in keys:
        grid = forward(p, Float(), transform=transform, given=given if rounded else None).shown[k]
        given[k] = [[x if x == -math.inf else round(x, p.decimals) for x in row] for row in grid]
    return {k: [[text(x, p.decimals) for x in row] for row in g] for k, g in given.items()}


def visible(p, transform):
    """Does the mistake change some entry by more than rounding (0.05), or move a −∞?"""
    good, bad = forward(p, Float()).shown, forward(p, Float(), transform=transform).shown
    for k in good:
        for ra, rb in zip(good[k], bad[k]):
            for a, b in zip(ra, rb):
                if (a == -math.inf) != (b == -math.inf) or (a != -math.inf and abs(a - b) > 0.05):
                    return not any(math.isnan(x) or abs(x) > 50 for g in bad.values() for r in g for x in r
                                   if x != -math.inf)
    return False


def named_rates(rng, problems_per_mistake):
    out = {}
    for m in MISTAKES.values():
        if m.id == "early-rounding" or m.stage not in ("scores", "scaled", "weights", "Z", "concat"):
            continue
        multihead = m.id in ("heads-swapped", "no-W_O", "heads-averaged")
        named = made = tries = 0
        while made < problems_per_mistake and tries < 50 * problems_per_mistake:
            tries += 1
            hit = random_problem(rng, multihead or rng.random() < 0.2)
            if hit is None:
                continue
            p, sol = hit
            ts = m.transforms(p)
            if not ts:
                continue
            t = rng.choice(ts)
            if not visible(p, t):
                continue
            made += 1
            report = check_answers(p, student(p, t, rng.random() < 0.5), solution=sol)
            named += m.id in {d["code"] for d in report.diagnoses}
        out[m.id] = (named, made)
    return out


def correct_rate(rng, count):
    diagnosed = done = 0
    while done < count:
        hit = random_problem(rng, rng.random() < 0.2)
        if hit is None:
            continue
        p, sol = hit
        good = forward(p, Float()).shown
        keys = [k for k in good if rng.random() < 0.5] or [list(good)[-1]]
        report = check_answers(p, {k: [[text(x, p.decimals) for x in row] for row in good[k]] for k in keys}, solution=sol)
        done += 1
        diagnosed += any(d["code"] != "early-rounding" for d in report.diagnoses)
    return diagnosed, done


def single_rate(rng, count):
    diagnosed = done = 0
    names: dict[str, int] = {}
    while done < count:
        hit = random_problem(rng, rng.random() < 0.2)
        if hit is None:
            continue
        p, sol = hit
        good = forward(p, Float()).shown
        key = rng.choice([k for k in good if k.split(".")[-1] in ("scores", "scaled", "weights", "Z")])
        grid = good[key]
        cells = [(i, j) for i, row in enumerate(grid) for j, x in enumerate(row) if x != -math.inf]
        finite = [grid[i][j] for i, j in cells]
        lo, hi = min(finite) - 0.5, max(finite) + 0.5
        i, j = rng.choice(cells)
        value = text(rng.uniform(lo, hi), p.decimals)
        answers = {key: [["" for _ in row] for row in grid]}
        answers[key][i][j] = value
        report = check_answers(p, answers, solution=sol)
        if report.summary()["wrong"] != 1:
            continue          # the random value happened to be right
        done += 1
        codes = [d["code"] for d in report.diagnoses if d["code"] != "early-rounding"]
        diagnosed += bool(codes)
        for c in codes:
            names[c] = names.get(c, 0) + 1
    return diagnosed, done, names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=200, help="random problems per mistake (default 200)")
    ap.add_argument("--singles", type=int, default=1000, help="random wrong single entries (default 1000)")
    ap.add_argument("--seed", type=int, default=15)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"named when made (full answers, one mistake carried forward; {args.problems} problems each):")
    for code, (named, made) in named_rates(rng, args.problems).items():
        print(f"  {code:20s} {named:4d} / {made:4d}  {100 * named / max(made, 1):5.1f} %")
    d, n = correct_rate(rng, args.problems)
    print(f"correct answers with a diagnosis: {d} / {n}")
    d, n, names = single_rate(rng, args.singles)
    print(f"random wrong single entries with a (false) diagnosis: {d} / {n} = {100 * d / n:.2f} %  {names or ''}")


if __name__ == "__main__":
    main()
