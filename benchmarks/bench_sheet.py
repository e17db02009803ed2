"""Benchmark `worked sheet` (Part 9, all formats, Typst PDFs) against its floor, `python -c "import sympy,
jinja2, typst"`, side by side in one run (target: at most 2× the floor); the other PDF engines beside it;
then where the time goes in one fresh process.

    .venv/bin/python benchmarks/bench_sheet.py [--runs N] [--engines typst,weasyprint,latex]

Each command runs N times in a fresh process, alternating, so that the load of the machine falls on
both alike; printed: the median and best wall time and the CPU time, and the ratio of the medians.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROFILE = r'''
import time, json
T = {}
t = time.perf_counter()
def lap(name):
    global t
    now = time.perf_counter(); T[name] = T.get(name, 0) + now - t; t = now
import worked.cli
lap("import worked + cli")
from worked.problem import load
from worked.solver import solve
lap("import solver (sympy)")
sol = solve(load(None))
lap("solve Part 9")
from worked.render import html as H, tex as T_, typst as Y
from worked.render.view import build
lap("import render (jinja2)")
pages = {k: build(sol, k) for k in ("worksheet", "answer-key")}
lap("page model (both documents)")
html = {k: H.render_html(pages[k]) for k in pages}
lap("HTML with MathML (both documents)")
tex = {k: T_.render_tex(pages[k]) for k in pages}
lap("LaTeX (both documents)")
typ = {k: Y.render_typ(pages[k]) for k in pages}
lap("Typst source (both documents)")
import typst
Y.compiler()
lap("import typst + compiler (embedded fonts)")
for k, s in typ.items():
    Y.typ_to_pdf(s)
    lap(f"Typst compile {k}")
print(json.dumps(T))
'''


def timed(cmd: list[str]) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        r = subprocess.run([c.replace("{out}", d) for c in cmd], cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--engines", default="typst", help="comma-separated: typst,weasyprint,latex")
    args = ap.parse_args()
    floor = [sys.executable, "-c", "import sympy, jinja2, typst"]
    cmds = {"python -c 'import sympy, jinja2, typst'": floor}
    for e in args.engines.split(","):
        if e == "latex" and shutil.which("pdflatex") is None:
            continue
        cmds[f"worked sheet (html,tex,pdf; --pdf-engine {e})"] = [sys.executable, "-m", "worked", "sheet", "--force",
                                                                "-o", "{out}", "--pdf-engine", e]
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(args.runs):
        for k, c in cmds.items():
            times[k].append(timed(c))
    base = statistics.median(w for w, _ in times[next(iter(cmds))])
    print(f"Part 9, {args.runs} runs each, alternating (median, best; CPU median; ratio of medians to the floor):")
    for k, ts in times.items():
        med = statistics.median(w for w, _ in ts)
        cpu = statistics.median(c for _, c in ts)
        goal = ""
        if "typst" in k and "sheet" in k:
            goal = f"  target ≤ 2×: {'met' if med <= 2 * base else 'NOT met'}"
        print(f"  {k:<52} {med:5.2f} s, best {min(w for w, _ in ts):5.2f} s, CPU {cpu:5.2f} s, ×{med / base:4.2f}{goal}")
    r = subprocess.run([sys.executable, "-c", PROFILE], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        print(r.stderr, file=sys.stderr)
        return 1
    parts = json.loads(r.stdout.strip().splitlines()[-1])
    total = sum(parts.values())
    print(f"where the time goes (one fresh process, stage after stage, {total:.2f} s):")
    for k, v in parts.items():
        print(f"  {v:6.3f} s  {100 * v / total:4.0f}%  {k}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
