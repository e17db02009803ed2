"""Benchmark `worked quiz`, side by side in one run: 20 variants as HTML only (target ≤ 0.7 s wall, issue 26), then
with the Typst engine 20 variants worksheet + key as PDF with both class PDFs (target ≤ 2.5 s wall),
100 and 300 variants (linear, both cores busy, peak memory ≤ 300 MB), then where the time goes in one
process (the stages of a variant, and the class PDFs' join).

    .venv/bin/python benchmarks/bench_quiz.py                 # 20 ×3 runs, 100, 300, stages
    .venv/bin/python benchmarks/bench_quiz.py --sizes 20,100 --runs 5
    .venv/bin/python benchmarks/bench_quiz.py --engines typst,weasyprint,latex   # the other engines at 20

Each run is a fresh `worked quiz … --format pdf` (or `html`) process. Printed per size: the median wall time, the
CPU time of the whole process tree (CPU/wall near the number of cores means every core was busy),
seconds per variant and its ratio to the 20-variant run (1.0 = linear), and the peak memory of the
process tree: the sum of the processes' proportional set sizes (PSS: pages shared between the forked
workers counted once), sampled every 20 ms, beside the largest single RSS.
Wall-clock numbers depend on the load of the machine; the CPU time is printed beside them.
"""
from __future__ import annotations

import argparse
import io
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "problems" / "quiz-1.toml"


def _tree(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                todo += [int(x) for x in fh.read().split()]
        except OSError:
            pass
    return out


def _memory_mb(pids: list[int]) -> tuple[float, float]:
    """(sum of the processes' PSS, largest single RSS), in MB."""
    total, largest = 0, 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as fh:
                for line in fh:
                    if line.startswith("Rss:"):
                        largest = max(largest, int(line.split()[1]))
                    elif line.startswith("Pss:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            pass
    return total / 1024, largest / 1024


# what a user runs: with the byte code Python writes on the first run (as bench_solve.py does; an environment with
# PYTHONDONTWRITEBYTECODE set would compile every module of worked again in every run)
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(n: int, engine: str, jobs: int | None, fmt: str = "pdf") -> dict:
    out = Path(tempfile.mkdtemp()) / "q"
    cmd = [sys.executable, "-m", "worked", "quiz", str(SPEC), "-n", str(n), "-o", str(out), "--format", fmt,
           "--quiet", "--pdf-engine", engine]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_ENV)
    peak = [0.0, 0.0]

    def sample():
        while proc.poll() is None:
            pss, rss = _memory_mb(_tree(proc.pid))
            peak[0], peak[1] = max(peak[0], pss), max(peak[1], rss)
            time.sleep(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    code = proc.wait()
    wall = time.perf_counter() - t
    th.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0:
        raise SystemExit(f"worked quiz failed ({code})")
    pages = 0
    if (out / "class-answer-keys.pdf").exists():
        from pypdf import PdfReader

        pages = len(PdfReader(out / "class-answer-keys.pdf").pages) + len(PdfReader(out / "class-worksheets.pdf").pages)
    shutil.rmtree(out.parent)
    return {"wall": wall, "cpu": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "pss": peak[0], "rss": peak[1], "pages": pages}


def stages(k: int = 10) -> None:
    """One process, *k* variants, timed stage by stage (Typst's own time is its compile call)."""
    t = time.perf_counter()
    from worked import quiz
    from worked.render import typst as Y
    from worked.render.view import as_kind, build
    import typst  # noqa: F401

    imports = time.perf_counter() - t
    spec = quiz.load_spec(SPEC)
    vs = quiz.plan(spec.seed, count=k + 1)
    tot: dict[str, float] = {}

    def lap(name, t0):
        tot[name] = tot.get(name, 0.0) + time.perf_counter() - t0

    t = time.perf_counter()
    Y.compiler()
    first = time.perf_counter() - t
    sheets = {d: [] for d in quiz.DOCS}
    for i, v in enumerate(vs):
        if i == 1:
            tot.clear()   # the first variant warms the caches (templates, fonts): counted apart
        t = time.perf_counter(); p, sol, _, qs = quiz.draw_problem(spec, v); lap("draw + solve + expected answers", t)
        st = quiz._student_for(v)
        box = quiz.questions_box(spec, qs, p)
        t = time.perf_counter(); page = build(sol, quiz.DOCS[0], st, questions=box); lap("page model (view.build, once)", t)
        for d in quiz.DOCS:
            page = as_kind(page, d)
            t = time.perf_counter(); src = Y.render_typ(page); lap("Typst source (Jinja + printers, both)", t)
            t = time.perf_counter(); pdf = Y.typ_to_pdf(src); lap(f"Typst compile: {d}", t)
            if i:
                sheets[d].append(pdf)
    t = time.perf_counter()
    for d in quiz.DOCS:
        quiz.merge_pdfs(sheets[d], io.BytesIO(), title="x")
    merge = time.perf_counter() - t
    total = sum(tot.values())
    print(f"where the time goes (one process; imports {imports:.2f} s and the compiler's fonts {first:.3f} s once):")
    for name, s in tot.items():
        print(f"  {name:<40} {1000 * s / k:7.1f} ms per variant  {100 * s / total:4.0f}%")
    print(f"  {'total':<40} {1000 * total / k:7.1f} ms per variant")
    print(f"  {'class PDFs: joining the sheets (pikepdf)':<40} {1000 * merge / k:7.1f} ms per variant (at the end, one core)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="20,100,300")
    ap.add_argument("--runs", type=int, default=3, help="runs of the 20-variant batch (the median is printed)")
    ap.add_argument("--jobs", type=int, default=None, help="default: all cores")
    ap.add_argument("--engines", default="typst", help="engines to time at 20 variants, e.g. typst,weasyprint,latex")
    ap.add_argument("--no-stages", action="store_true")
    ap.add_argument("--no-html", action="store_true", help="leave out the HTML-only run (issue 26: ≤ 0.7 s at 20 variants)")
    a = ap.parse_args()
    cores = os.cpu_count()
    print(f"worked quiz {SPEC.name} --format pdf (worksheet + key per variant, both class PDFs), "
          f"jobs = {a.jobs or cores}, cores: {cores}, load average {os.getloadavg()[0]:.1f}")
    sizes = [int(x) for x in a.sizes.split(",") if x]
    if not a.no_html:   # worksheet + key as HTML only (no PDFs, no class PDFs)
        rs = [run(20, "typst", a.jobs, "html") for _ in range(a.runs)]
        wall = statistics.median(r["wall"] for r in rs)
        print(f"  html         20 variants: {wall:6.2f} s wall (median of {len(rs)}), "
              f"{statistics.median(r['cpu'] for r in rs):6.2f} s CPU, --format html  target ≤ 0.7 s: "
              f"{'met' if wall <= 0.7 else 'NOT met'}")
    base = None
    for engine in a.engines.split(","):
        for n in sizes if engine == "typst" else [20]:
            rs = [run(n, engine, a.jobs) for _ in range(a.runs if n == 20 else 1)]
            wall = statistics.median(r["wall"] for r in rs)
            cpu = statistics.median(r["cpu"] for r in rs)
            per = wall / n
            if engine == "typst" and n == sizes[0]:
                base = per
            goal = ""
            if engine == "typst" and n == 20:
                goal = f"  target ≤ 2.5 s: {'met' if wall <= 2.5 else 'NOT met'}"
            if engine == "typst" and n == 300:
                goal = f"  target ≤ 300 MB: {'met' if max(r['pss'] for r in rs) <= 300 else 'NOT met'}"
            ratio = f"×{per / base:4.2f}" if base and engine == "typst" else "     "
            print(f"  {engine:<10} {n:>4} variants: {wall:6.2f} s wall (median of {len(rs)}), {cpu:6.2f} s CPU "
                  f"(CPU/wall {cpu / wall:3.1f}), {1000 * per:5.0f} ms/variant {ratio} vs {sizes[0]}, "
                  f"peak {max(r['pss'] for r in rs):4.0f} MB PSS (largest RSS {max(r['rss'] for r in rs):4.0f} MB), "
                  f"{rs[0]['pages']} pages{goal}")
    if not a.no_stages:
        stages()


if __name__ == "__main__":
    main()
