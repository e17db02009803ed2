"""Benchmark `worked quiz`: 20 variants worksheet + key as PDF (target ≤ 6 s), 20 as HTML only (target ≤ 1 s),
and growth for 100 and 300 variants; then where the time goes, per variant, in one process.

    .venv/bin/python benchmarks/bench_quiz.py            # HTML 20/100/300, PDF 20, stage breakdown
    .venv/bin/python benchmarks/bench_quiz.py --pdf-sizes 20,100,300 --jobs 2
    .venv/bin/python benchmarks/bench_quiz.py --pdf-engine weasyprint   # the other PDF engine

Wall-clock numbers depend on the load of the machine: the CPU time of the run is printed beside them.
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "problems" / "quiz-1.toml"


def run(n: int, fmt: str, jobs: int | None, engine: str) -> tuple[float, float]:
    out = Path(tempfile.mkdtemp()) / "q"
    cmd = [sys.executable, "-m", "worked", "quiz", str(SPEC), "-n", str(n), "-o", str(out), "--format", fmt, "--quiet",
           "--pdf-engine", engine]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=ROOT)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    shutil.rmtree(out.parent)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def stages(engine: str, k: int = 3) -> None:
    t = time.perf_counter()
    from worked import quiz, render, solver  # noqa: F401
    if engine == "weasyprint":
        import weasyprint  # noqa: F401
    print(f"  imports (sympy, jinja2{', weasyprint' if engine == 'weasyprint' else ''}…)"
          f"{'':<{20 if engine == 'weasyprint' else 32}}{time.perf_counter() - t:6.2f} s once per run"
          " (forked workers inherit them)")
    spec = quiz.load_spec(SPEC)
    vs = quiz.plan(spec.seed, count=k)
    tot = {"generate": 0.0, "generate + solve (with redraws)": 0.0, "answers": 0.0, "html (2 docs)": 0.0}
    if engine == "weasyprint":
        tot.update({"pdf html (2 docs)": 0.0, "weasyprint (2 docs)": 0.0})
    else:
        tot.update({"tex (2 docs)": 0.0})
    pdfs, texs = [], []
    for v in vs:
        t = time.perf_counter(); quiz.generate(spec.family, v.seed, title=spec.title); tot["generate"] += time.perf_counter() - t
        t = time.perf_counter(); p, sol, _ = quiz.draw_problem(spec, v); tot["generate + solve (with redraws)"] += time.perf_counter() - t
        t = time.perf_counter(); quiz.expected_answers(spec, p, sol); tot["answers"] += time.perf_counter() - t
        st = {"name": "A", "id": "1", "variant": v.code}
        t = time.perf_counter()
        render.worksheet_html(sol, student=st); render.answer_key_html(sol, student=st)
        tot["html (2 docs)"] += time.perf_counter() - t
        if engine == "weasyprint":
            t = time.perf_counter()
            hs = [render.worksheet_html(sol, student=st, for_pdf=True), render.answer_key_html(sol, student=st, for_pdf=True)]
            tot["pdf html (2 docs)"] += time.perf_counter() - t
            t = time.perf_counter()
            pdfs += [render.html_to_pdf(h) for h in hs]
            tot["weasyprint (2 docs)"] += time.perf_counter() - t
        else:
            t = time.perf_counter()
            texs += [render.worksheet_tex(sol, student=st), render.answer_key_tex(sol, student=st)]
            tot["tex (2 docs)"] += time.perf_counter() - t
    for name, s in tot.items():
        print(f"  {name:<38} {s / k:6.3f} s per variant")
    if engine == "latex":
        from worked.render import texbatch

        texbatch.warm_up(texs[0])
        texbatch.compile_sheets(texs[:2], ["worksheet", "answer-key"])   # learns the page counts
        t = time.perf_counter()
        texbatch.compile_sheets(texs[:2], ["worksheet", "answer-key"])
        one = time.perf_counter() - t
        t = time.perf_counter()
        pdfs = texbatch.compile_sheets(texs, ["worksheet", "answer-key"] * k)
        batch = time.perf_counter() - t
        print(f"  {'pdflatex, 1 variant alone (1 run)':<38} {one:6.3f} s per variant")
        print(f"  {f'pdflatex, {k} variants in 1 run':<38} {batch / k:6.3f} s per variant (cutting into sheets included)")
    t = time.perf_counter()
    quiz.merge_pdfs(pdfs)
    print(f"  {'merge ' + str(len(pdfs)) + ' PDFs':<38} {time.perf_counter() - t:6.3f} s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html-sizes", default="20,100,300")
    ap.add_argument("--pdf-sizes", default="20")
    ap.add_argument("--jobs", type=int, default=None, help="default: all cores")
    ap.add_argument("--no-stages", action="store_true")
    ap.add_argument("--pdf-engine", default="auto", choices=("auto", "weasyprint", "latex"),
                    help="auto (the command's default): latex when pdflatex is installed")
    a = ap.parse_args()
    if a.pdf_engine == "auto":
        a.pdf_engine = "latex" if shutil.which("pdflatex") else "weasyprint"
    print(f"worked quiz {SPEC.name}, jobs = {a.jobs or os.cpu_count()} (cores: {os.cpu_count()})")
    for fmt, sizes, target in (("html", a.html_sizes, 1.0), ("pdf", a.pdf_sizes, 6.0)):
        for n in [int(x) for x in sizes.split(",") if x]:
            wall, cpu = run(n, fmt, a.jobs, a.pdf_engine)
            goal = f" (target ≤ {target:g} s: {'met' if wall <= target else 'NOT met'})" if n == 20 else ""
            print(f"  {n:>4} variants, {fmt + (' (' + a.pdf_engine + ')' if fmt == 'pdf' else ''):<4}: {wall:7.2f} s wall, {cpu:7.2f} s CPU, {wall / n:6.3f} s/variant{goal}")
    if not a.no_stages:
        print("where the time goes (one process, per variant):")
        stages(a.pdf_engine, k=10 if a.pdf_engine == "latex" else 3)


if __name__ == "__main__":
    main()
