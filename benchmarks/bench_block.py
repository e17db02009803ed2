"""Benchmark a Transformer block's solve against the attention-only solve of the same problem (issue 27).

Target: a block solve (every line built and audited) at most 5x the attention-only solve of the same heads
(the block's file without its block keys: the same X, the same heads and W_O), in process, for the shipped
block problems and for `--checks all`.

Run: .venv/bin/python benchmarks/bench_block.py [--repeat N]
"""
from __future__ import annotations

import argparse
import statistics
import sys
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
        t = time.perf_counter()
        worked.solve(problem, checks=checks).audit()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    import worked

    print(f"{'problem':38} {'checks':6} {'block':>9} {'attention':>10} {'ratio':>6}  (median of {args.repeat}, target ≤ 5x)")
    for name in ("block-post-ln", "block-pre-ln-causal"):
        p = worked.load(ROOT / "problems" / f"{name}.toml")
        a = attention_only(p)
        for checks in ("one", "all"):
            tb, ta = timed(p, checks, args.repeat), timed(a, checks, args.repeat)
            print(f"{name:38} {checks:6} {tb * 1000:7.1f}ms {ta * 1000:8.1f}ms {tb / ta:5.2f}x")


if __name__ == "__main__":
    main()
