"""Benchmark: the Part 9 answer key as a PDF with each non-default engine, fresh process per run.

    .venv/bin/python benchmarks/bench_pdf_engines.py [--runs 5] [--engine weasyprint,latex]

Each run is a new Python process that imports worked, solves Part 9, writes the key's HTML (or
LaTeX) and makes its PDF; the time printed is that of ``render + PDF`` inside the process (imports
and solving excluded), then the median and spread over the runs.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

RUN = r'''
import sys, time
from worked.problem import load
from worked.solver import solve
from worked.render import sheet
sol = solve(load(None))
import weasyprint                     # imported before the clock starts, as for latex
t = time.perf_counter()
pdf = sheet.document_pdf("answer-key", sol, pdf_engine=sys.argv[1])
print(time.perf_counter() - t, len(pdf))
'''


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--engine", default="weasyprint,latex")
    a = ap.parse_args()
    for engine in a.engine.split(","):
        times = []
        for _ in range(a.runs):
            out = subprocess.run([sys.executable, "-c", RUN, engine], capture_output=True, text=True, check=True)
            t, size = out.stdout.split()
            times.append(float(t))
        print(f"{engine:11s} Part 9 key: median {statistics.median(times):.2f} s "
              f"(min {min(times):.2f}, max {max(times):.2f}, {a.runs} runs), {int(size)} bytes")


if __name__ == "__main__":
    main()
