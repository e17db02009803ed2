"""Benchmark: `worked sheet` on the Part 9 problem, all formats (target: under 2 s wall end to end).

    .venv/bin/python benchmarks/bench_sheet.py [--runs N]

Prints the end-to-end wall time of the command (fresh process each run, best and median) and its
CPU time (the command splits the PDFs over two processes), then where the time goes in one fresh
process, one stage after the other: imports, solving, HTML with MathML, LaTeX, HTML for WeasyPrint,
WeasyPrint's first document, layout, drawing and writing.
"""
from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROFILE = r'''
import time, json, sys, tempfile
T = {}
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); T[name] = T.get(name, 0) + now - t; t = now
import worked.cli
lap("import worked + cli")
from worked.problem import load
from worked.solver import solve
lap("import solver (sympy, mpmath)")
sol = solve(load(None))
lap("solve Part 9")
import jinja2, latex2mathml.converter
lap("import jinja2, latex2mathml")
from worked.render import html as H, tex as T_, pdf as P
html = {k: H.render_html(k, sol) for k in ("worksheet", "answer-key")}
lap("HTML with MathML (both documents)")
tex = {k: T_.render_tex(k, sol) for k in ("worksheet", "answer-key")}
lap("LaTeX (both documents)")
phtml = {k: H.render_html(k, sol, for_pdf=True) for k in ("worksheet", "answer-key")}
lap("HTML for WeasyPrint, formulas as HTML/CSS (both documents)")
import weasyprint
lap("import weasyprint")
P.html_to_pdf("<p>warm-up</p>")
lap("first WeasyPrint document (fonts, cffi types)")
docs = {}
for k, h in phtml.items():
    docs[k] = weasyprint.HTML(string=h, base_url="data:,", url_fetcher=P._fetcher()).render()
lap("WeasyPrint parse + layout (both)")
for k, d in docs.items():
    d.write_pdf(pdf_identifier=b"worked-sheet")
lap("WeasyPrint draw + write PDF (both)")
print(json.dumps(T))
'''


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    exe = [sys.executable, "-m", "worked", "sheet", "--force"]
    walls, cpus = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as d:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            r = subprocess.run(exe + ["-o", d], cwd=ROOT, capture_output=True, text=True)
            walls.append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                return 1
    print(f"worked sheet (Part 9, html+tex+pdf, both documents): best {min(walls):.2f} s, "
          f"median {statistics.median(walls):.2f} s over {args.runs} runs (target < 2 s); "
          f"CPU {min(cpus):.2f} s (two processes)")
    r = subprocess.run([sys.executable, "-c", PROFILE], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    import json

    parts = json.loads(r.stdout.strip().splitlines()[-1])
    total = sum(parts.values())
    print(f"where the time goes (one fresh process, {total:.2f} s):")
    for k, v in parts.items():
        print(f"  {v:6.2f} s  {100 * v / total:4.0f}%  {k}")
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        r = subprocess.run(exe + ["-o", d, "--pdf-engine", "latex"], cwd=ROOT, capture_output=True, text=True)
        if r.returncode == 0:
            print(f"with --pdf-engine latex: {time.perf_counter() - t:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
