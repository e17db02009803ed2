"""Benchmark `worked solve`, side by side with `python -c "import sympy"` in one run.

Target (issue 11): `worked solve` on the Part 9 example at most 1.2x `import sympy`, end to end
(process start and imports included), run as the user runs it: the installed `worked` script of this
Python's environment (`python -m worked` where there is none). Also shown: the same with an evaluated sympy sum (sympy imports
its tensor module on the first one, which every exact solve needs), an 8-token d = 8 problem with
`--checks all`, and in-process solve times.

Run: .venv/bin/python benchmarks/bench_solve.py [--repeat N]

The commands run in turn, round after round, so a load on the machine falls on all of them alike;
medians and ratios to `import sympy` are printed. The children run with byte-code caching on (as an
installed package has it), even where PYTHONDONTWRITEBYTECODE is set in this shell.
"""
from __future__ import annotations

import argparse
import os
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
    yield "3x4x2 (Part 9), forward only", worked.load(ROOT / "problems/cats-chase-mice.toml"), "one"
    yield "3x4x2 (Part 9) with [train]", worked.load(ROOT / "problems/cats-chase-mice-train.toml"), "one"
    yield "4 heads (4 tokens, d=4, d_k=2), checks one", worked.Problem(_mat(rng, 4, 4, 0, 2), heads=heads, W_O=_mat(rng, 8, 4)), "one"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    import worked

    print("in process (solve only), median of", args.repeat)
    big = None
    for name, problem, checks in cases():
        ts = []
        for _ in range(args.repeat):
            t = time.perf_counter()
            worked.solve(problem, checks=checks)
            ts.append(time.perf_counter() - t)
        print(f"  solve {name:44} {statistics.median(ts) * 1000:7.1f} ms")
        if name.startswith("8x8x8"):
            big = problem

    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    py = sys.executable
    # the command a user types: the installed `worked` script beside this Python (python -m worked without it)
    script = Path(py).with_name("worked")
    w = [str(script)] if script.is_file() else [py, "-m", "worked"]
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "big.toml"
        path.write_text(big.to_toml())
        cmds = {
            "python -c 'import sympy'": [py, "-c", "import sympy"],
            "python -c 'import sympy; sqrt(2) + 1'": [py, "-c", "import sympy; sympy.sqrt(2) + 1"],
            "worked solve (Part 9)": w + ["solve"],
            "worked solve 8x8x8 --checks all": w + ["solve", str(path), "--checks", "all"],
            # issue 16: one training step on Part 9 (target limit: 2x the forward-only solve of the same problem)
            "worked solve problems/cats-chase-mice.toml": w + ["solve", "problems/cats-chase-mice.toml"],
            "worked solve problems/cats-chase-mice-train.toml": w + ["solve", "problems/cats-chase-mice-train.toml"],
        }
        for c in cmds.values():   # warm up: byte code written, files in the page cache
            subprocess.run(c, check=True, capture_output=True, cwd=ROOT, env=env)
        times = {k: [] for k in cmds}
        for _ in range(args.repeat):
            for k, c in cmds.items():
                t = time.perf_counter()
                subprocess.run(c, check=True, capture_output=True, cwd=ROOT, env=env)
                times[k].append(time.perf_counter() - t)
    base = statistics.median(times["python -c 'import sympy'"])
    print(f"\nend to end, median of {args.repeat} rounds (ratio to import sympy)")
    for k, ts in times.items():
        m = statistics.median(ts)
        note = "   target <= 1.20x" if k == "worked solve (Part 9)" else ""
        print(f"  {k:42} {m:6.3f} s  {m / base:5.2f}x{note}")
    fwd = statistics.median(times["worked solve problems/cats-chase-mice.toml"])
    trn = statistics.median(times["worked solve problems/cats-chase-mice-train.toml"])
    print(f"\ntraining step (issue 16): Part 9 with [train] / forward only = {trn / fwd:.2f}x   target <= 2.00x")


if __name__ == "__main__":
    main()
