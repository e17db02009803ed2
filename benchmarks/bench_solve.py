"""Benchmark `solve` (issue 2 targets, on this 2-core machine):

* `worked solve` on the Part 9 example: under 1 s wall, end to end (process start and imports included);
* an 8-token, d = 8 problem with `--checks all`: under 2 s.

Run: .venv/bin/python benchmarks/bench_solve.py [--repeat N]
Prints the best and median of N runs for each case, in process (solve only) and end to end (CLI).
"""
from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _mat(rng, r, c, lo=-1, hi=1):
    return [[rng.randint(lo, hi) for _ in range(c)] for _ in range(r)]


def cases():
    import worked

    rng = random.Random(2026)
    yield "3x4x2 (Part 9), checks all", worked.load(), "all"
    yield "4x3x5, checks all", worked.Problem(_mat(rng, 4, 3, 0, 2), _mat(rng, 3, 5), _mat(rng, 3, 5), _mat(rng, 3, 5)), "all"
    yield "8x8x8, checks all", worked.Problem(_mat(rng, 8, 8, 0, 1), _mat(rng, 8, 8), _mat(rng, 8, 8), _mat(rng, 8, 8)), "all"
    heads = [(_mat(rng, 4, 2), _mat(rng, 4, 2), _mat(rng, 4, 2)) for _ in range(4)]
    yield "4 heads (4 tokens, d=4, d_k=2), checks one", worked.Problem(_mat(rng, 4, 4, 0, 2), heads=heads, W_O=_mat(rng, 8, 4)), "one"


def timed(fn, repeat):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return min(ts), statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import worked

    print(f"{'case':48} {'best':>8} {'median':>8}")
    big = None
    for name, problem, checks in cases():
        best, med = timed(lambda: worked.solve(problem, checks=checks), args.repeat)
        print(f"solve  {name:41} {best:7.3f}s {med:7.3f}s")
        if name.startswith("8x8x8"):
            big = problem
    exe = [sys.executable, "-m", "worked", "solve"]
    best, med = timed(lambda: subprocess.run(exe, check=True, capture_output=True, cwd=ROOT), args.repeat)
    print(f"CLI    {'worked solve (Part 9), end to end':41} {best:7.3f}s {med:7.3f}s   target < 1 s")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.toml"
        path.write_text(big.to_toml())
        cmd = exe + [str(path), "--checks", "all"]
        best, med = timed(lambda: subprocess.run(cmd, check=True, capture_output=True, cwd=ROOT), args.repeat)
        print(f"CLI    {'worked solve 8x8x8 --checks all, end to end':41} {best:7.3f}s {med:7.3f}s   target < 2 s")


if __name__ == "__main__":
    main()
