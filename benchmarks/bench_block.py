"""Benchmark a Transformer block's solve against the attention-only solve of the same problem (issue 27).

Targets: a block solve (every line built and audited) at most 5x the attention-only solve of the same heads
(the block's file without its block keys: the same X, the same heads and W_O), in process, for the shipped
block problems and for `--checks all` (CPU time of this process: the machine is shared); and 20 HTML quiz
variants of a block at most 3 s (`worked quiz … -n 20 --format html`, fresh processes, a [family] with
`block = "post-ln"` or "pre-ln": each variant's block drawn, solved and worked; wall time and the CPU time of the
process tree).

Run: .venv/bin/python benchmarks/bench_block.py [--repeat N] [--runs N] [--no-quiz]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

BLOCK_KEYS = ("block", "positional", "W_1", "b_1", "W_2", "b_2", "activation", "eps", "gamma_1", "beta_1", "gamma_2",
              "beta_2", "gamma_f", "beta_f", "W_out", "vocab", "targets")


def attention_only(problem):
    """The same problem without its block: X and the heads (with W_O) as they are."""
    from worked.problem import Problem

    d = {k: v for k, v in problem.to_dict().items() if k not in BLOCK_KEYS}
    return Problem.from_dict(d, "attention-only")


def timed(problem, checks: str, repeat: int) -> float:
    import worked

    ts = []
    for _ in range(repeat):
        t = time.process_time()
        worked.solve(problem, checks=checks).audit()
        ts.append(time.process_time() - t)
    return statistics.median(ts)


#: the quiz specs timed: a drawn post-LN block with positions and an output layer, a drawn pre-LN causal one
QUIZ = {"post-ln": 'block = "post-ln"\npositional = "sinusoidal"\nmask = "none"',
        "pre-ln-causal": 'block = "pre-ln"\nmask = "causal"'}
QUIZ_SPEC = """title = "Block quiz (benchmark)"
seed = 2027

[family]
tokens = 3
d_model = 4
d_k = 2
range = [-2, 3]
vocab = 4
{block}

[[questions]]
ask = "H[2,3]"
points = 1
tolerance = 0.01

[[questions]]
ask = "loss"
points = 1
tolerance = 0.01
"""
# what a user runs: with the byte code Python writes on the first run (as bench_quiz.py does)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def quiz_run(spec: Path, n: int) -> tuple[float, float]:
    """(wall, CPU of the process tree) of one fresh `worked quiz SPEC -n N --format html`."""
    out = Path(tempfile.mkdtemp()) / "q"
    cmd = [sys.executable, "-m", "worked", "quiz", str(spec), "-n", str(n), "-o", str(out), "--format", "html", "--quiet"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=_ENV, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(out.parent)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def quiz(runs: int) -> None:
    print(f"worked quiz -n 20 --format html of a block family (median of {runs}, target ≤ 3 s wall; "
          f"cores: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f})")
    tmp = Path(tempfile.mkdtemp())
    try:
        for name, block in QUIZ.items():
            spec = tmp / f"quiz-{name}.toml"
            spec.write_text(QUIZ_SPEC.format(block=block))
            rs = [quiz_run(spec, 20) for _ in range(runs)]
            wall, cpu = statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs)
            print(f"  {name:14} {wall:6.2f} s wall, {cpu:6.2f} s CPU  {'met' if wall <= 3 else 'NOT met'}")
    finally:
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--runs", type=int, default=3, help="runs of each 20-variant quiz (the median is printed)")
    ap.add_argument("--no-quiz", action="store_true")
    args = ap.parse_args()
    import worked

    print(f"{'problem':38} {'checks':6} {'block':>9} {'attention':>10} {'ratio':>6}  (CPU, median of {args.repeat}, target ≤ 5x)")
    for name in ("block-post-ln", "block-pre-ln-causal"):
        p = worked.load(ROOT / "problems" / f"{name}.toml")
        a = attention_only(p)
        for checks in ("one", "all"):
            tb, ta = timed(p, checks, args.repeat), timed(a, checks, args.repeat)
            print(f"{name:38} {checks:6} {tb * 1000:7.1f}ms {ta * 1000:8.1f}ms {tb / ta:5.2f}x")
    if not args.no_quiz:
        quiz(args.runs)


if __name__ == "__main__":
    main()
