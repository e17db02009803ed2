"""The limit on work (issue 25): every command on a problem within the limits answers within 10 s, and a problem
over them is refused within 1 s.

The limit is predicted from the problem's shape alone (:func:`worked.problem.work`: tokens, d_model, d_k, d_v,
heads, the columns of W_O, a [train] step), so it is known before any work starts. This measures it:

* **the worst problems the limits allow**: for each shape family (1, 2 or 4 heads; d_model = d_k = d_v = 2, 4,
  8 or 12; forward only or with [train]) the problem with the most tokens whose predicted work fits, with integer
  entries (exact forms: the slowest display). Each command runs end to end as a user runs it, in turn, round
  after round: ``worked solve --format json``, ``worked check`` with an answer to every matrix, every entry
  wrong (the most diagnosis work), ``worked sheet`` (HTML, LaTeX and PDF); and the server's jobs as a worker
  runs them (``/api/solve?view=1``, ``/api/check``, the key's PDF), timed in a fresh process after its imports.
  Median wall seconds and CPU seconds of ``--repeat`` runs; the target is < 10 s.
* **refusals**: the same shape with one more token (over the limit), and the largest shape of all (12 tokens,
  12 columns, 4 heads, [train]): ``worked solve``, ``worked check`` and ``worked sheet`` answer with one
  ``error:`` line, exit 2; the median wall time of the refusal (process start included) is the target < 1 s.

Run: .venv/bin/python benchmarks/bench_train_limits.py [--repeat 3] [--families N] [--fit]

``--families N`` runs the N shape families with the largest predicted work (default 6; 0 = all 24).
``--fit`` instead measures a grid of shapes in-process (CPU seconds of each command, one fresh process per
problem) and prints the coefficients of ``worked.problem._WORK``: least squares on relative error, each model
then raised so that every measured problem is at or below its prediction, and 10 % more.
"""
from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
LIMIT_S = 10.0
REFUSE_S = 1.0


def problem_dict(n, d, heads, train, seed=3, lr="0.0001"):
    """A problem of the shape with entries in −1..1 (integers: shown with exact forms), the target near 0 and a
    learning rate small enough that the step keeps every scaled score within the limit."""
    rng = random.Random(seed)
    m = lambda r, c: [[rng.randint(-1, 1) for _ in range(c)] for _ in range(r)]  # noqa: E731
    out: dict = {"X": m(n, d)}
    if heads == 1:
        out.update(W_Q=m(d, d), W_K=m(d, d), W_V=m(d, d))
        width = d
    else:
        out["heads"] = [{"W_Q": m(d, d), "W_K": m(d, d), "W_V": m(d, d)} for _ in range(heads)]
        out["W_O"] = m(heads * d, d)
        width = d
    if train:
        out["train"] = {"target": [[rng.randint(-1, 1) for _ in range(width)] for _ in range(n)], "lr": lr}
    return out


def wrong_answers(problem) -> dict:
    """An answer to every matrix of the solution, every entry 0.37 off (blank where −∞)."""
    import worked
    from worked.attention import Float, forward

    keys = set(worked.solve(problem).matrices())
    run = forward(problem, Float())
    return {k: [["" if x == float("-inf") else f"{x + 0.37:.4f}" for x in row] for row in m]
            for k, m in run.shown.items() if k in keys}


def worked_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("worked")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "worked"]


def run_timed(cmd: list[str], env=None) -> tuple[float, float, int, str]:
    """(wall s, CPU s of the child, exit status, stderr)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, r.returncode, r.stderr


JOB = r"""
import json, sys, time
import worked
from worked.problem import Problem
from worked.server import jobs
import worked.solver, worked.check, worked.render.view, worked.render.typst   # what a warmed worker has imported
p = Problem.from_dict(json.load(open(sys.argv[1])), source="problem")
answers = json.load(open(sys.argv[2]))
which = sys.argv[3]
t, c = time.perf_counter(), time.process_time()
if which == "solve":
    status = jobs.solve_json(p, True)[0]
elif which == "check":
    status = jobs.check_json(p, answers, None, False, False)[0]
else:
    status = jobs.render(p, "answer-key", "pdf", None, "a4")[0]
print(json.dumps([time.perf_counter() - t, time.process_time() - c, status]))
"""


def measure_family(label, pdict, repeat, tmp: Path) -> list[dict]:
    import worked

    pfile = tmp / f"{label}.json"
    pfile.write_text(json.dumps(pdict))
    p = worked.Problem.from_dict(pdict)
    afile = tmp / f"{label}.answers.json"
    afile.write_text(json.dumps(wrong_answers(p)))
    w = worked.problem.work(p)
    W = worked_cmd()
    cmds = {
        "solve --format json": W + ["solve", str(pfile), "--format", "json"],
        "check (all wrong)": W + ["check", str(pfile), str(afile)],
        "sheet (html,tex,pdf)": W + ["sheet", str(pfile), "-o", str(tmp / "sheets"), "--force"],
    }
    jobs = {f"serve job: {k}": [sys.executable, "-c", JOB, str(pfile), str(afile), k] for k in ("solve", "check", "pdf")}
    res = {k: [] for k in [*cmds, *jobs]}
    for _ in range(repeat):
        for k, cmd in cmds.items():
            wall, cpu, rc, err = run_timed(cmd)
            assert rc in (0, 1), (label, k, rc, err[-300:])
            res[k].append((wall, cpu))
        for k, cmd in jobs.items():
            r = subprocess.run(cmd, capture_output=True, text=True)
            wall, cpu, status = json.loads(r.stdout.strip().splitlines()[-1])
            assert status == 200, (label, k, status)
            res[k].append((wall, cpu))
    out = []
    for k, v in res.items():
        out.append({"family": label, "command": k, "wall": statistics.median(x for x, _ in v),
                    "cpu": statistics.median(c for _, c in v), "predicted": w})
    return out


def refusal(label, pdict, repeat, tmp: Path) -> list[dict]:
    pfile = tmp / f"{label}.over.json"
    pfile.write_text(json.dumps(pdict))
    afile = tmp / "empty.json"
    afile.write_text("{}")
    W = worked_cmd()
    cmds = {"solve": W + ["solve", str(pfile)], "check": W + ["check", str(pfile), str(afile)],
            "sheet": W + ["sheet", str(pfile), "-o", str(tmp / "refused"), "--force"]}
    out = []
    for k, cmd in cmds.items():
        walls = []
        for _ in range(repeat):
            wall, cpu, rc, err = run_timed(cmd)
            assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, (label, k, rc, err[-300:])
            walls.append(wall)
        out.append({"family": label, "command": k, "wall": statistics.median(walls), "error": err.strip()})
    return out


def families():
    """(label, n, d, heads, train) of the problem with the most tokens whose work fits, per shape family."""
    from worked.problem import LIMITS, work_of

    for heads in (1, 2, 4):
        for train in (False, True):
            for d in (2, 4, 8, 12):
                fits = [n for n in range(2, 13) if work_of(n, d, d, d, heads, d, train).worst <= LIMITS["work"]]
                if fits:
                    n = fits[-1]
                    yield (f"{heads}h-d{d}-{'train' if train else 'fwd'}-n{n}", n, d, heads, train,
                           work_of(n, d, d, d, heads, d, train).worst)


# ---------------------------------------------------------------- --fit

HARNESS = r"""
import json, sys, time, tempfile, shutil
import worked
from worked.attention import forward, Float
from worked.check import check_answers
from worked.render.sheet import write_sheet
from worked.server.views import solution_view
p = worked.Problem.from_dict(json.load(open(sys.argv[1])), source="problem", _work_limit=False)
out = {}
def clock(name, fn):
    t = time.process_time(); fn(); out[name] = time.process_time() - t
holder = {}
clock("solve", lambda: holder.setdefault("sol", worked.solve(p)))
sol = holder["sol"]
clock("json", lambda: (json.dumps(sol.to_dict()), json.dumps(solution_view(sol))))
run = forward(p, Float())
ans = {k: [["" if x == float("-inf") else f"{x + 0.37:.2f}" for x in row] for row in m] for k, m in run.shown.items()
       if k in sol.matrices()}
clock("check", lambda: check_answers(p, ans, solution=sol).to_dict())
d = tempfile.mkdtemp()
clock("sheet", lambda: write_sheet(sol, d, force=True))
shutil.rmtree(d, ignore_errors=True)
print(json.dumps(out))
"""


def fit(tmp: Path) -> None:
    import numpy as np

    from worked import problem as P

    rows = []
    grid = [(n, d, h, t) for t in (False, True) for h in (1, 2, 4) for n in (3, 6, 9, 12) for d in (2, 4, 8, 12)
            if not (h > 1 and n == 9)]
    for n, d, h, t in grid:
        pd = problem_dict(n, d, h, t)
        f = tmp / "fit.json"
        f.write_text(json.dumps(pd))
        r = subprocess.run([sys.executable, "-c", HARNESS, str(f)], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"  {n} tokens, d {d}, {h} heads, train {t}: {r.stderr.strip().splitlines()[-1][:120]}")
            continue
        got = json.loads(r.stdout)
        rows.append((P.counts(n, d, d, d, h, d, t), got))
        print(f"  {n:2d} tokens, d {d:2d}, {h} heads, train {t:d}: " + ", ".join(f"{k} {v:.2f} s" for k, v in got.items()),
              flush=True)

    def nnls(A, y):
        idx = list(range(A.shape[1]))
        while True:
            coef, *_ = np.linalg.lstsq(A[:, idx], y, rcond=None)
            if (coef[1:] >= 0).all() or len(idx) == 1:
                out = np.zeros(A.shape[1])
                out[idx] = coef
                return out
            idx.remove(idx[1 + int(np.argmin(coef[1:]))])

    result = {}
    for model, names, parts in (("a", P.ANSWER_TERMS, ("solve", "json")), ("c", P.CHECK_TERMS, ("solve", "check")),
                                ("s", P.SHEET_TERMS, ("solve", "sheet"))):
        A = np.array([[1.0] + [c[k] for k in names] for c, _ in rows])
        y = np.array([1000 * sum(g[k] for k in parts) for _, g in rows])
        coef = nnls(A / y[:, None], np.ones(len(y)))
        k = (y / (A @ coef)).max() * 1.1
        coef = coef * k
        r = y / (A @ coef)
        print(f"{model}: raised ×{k:.2f}; measured/predicted {r.min():.2f} … {r.max():.2f}")
        result[model + "0"] = float(f"{coef[0]:.3g}")
        result.update({n: float(f"{c:.3g}") for n, c in zip(names, coef[1:])})
    print("_WORK =", result)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--families", type=int, default=6)
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.fit:
            fit(tmp)
            return 0
        fams = sorted(families(), key=lambda f: -f[-1])
        if args.families:
            fams = fams[:args.families]
        rows = []
        for label, n, d, heads, train, pred in fams:
            print(f"{label}: predicted {pred / 1000:.1f} s", flush=True)
            rows += measure_family(label, problem_dict(n, d, heads, train), args.repeat, tmp)
        print(f"\nThe worst problems within the limits (median of {args.repeat}; target < {LIMIT_S:g} s wall):")
        print(f"{'family':22s} {'command':30s} {'wall s':>7s} {'CPU s':>7s}")
        for r in rows:
            print(f"{r['family']:22s} {r['command']:30s} {r['wall']:7.2f} {r['cpu']:7.2f}")
        worst = max(rows, key=lambda r: r["wall"])
        print(f"slowest: {worst['family']} {worst['command']}: {worst['wall']:.2f} s "
              f"({'met' if worst['wall'] < LIMIT_S else 'NOT met'})")
        over = []
        for label, n, d, heads, train, pred in fams[:2]:
            if n < 12:
                over += refusal(label + f"+1", problem_dict(n + 1, d, heads, train), args.repeat, tmp)
        over += refusal("12 tokens, d 12, 4 heads, train", problem_dict(12, 12, 4, True), args.repeat, tmp)
        print(f"\nRefusals (median of {args.repeat}, process start included; target < {REFUSE_S:g} s):")
        for r in over:
            print(f"{r['family']:34s} {r['command']:6s} {r['wall']:5.2f} s")
        print("  e.g. " + over[-1]["error"])
        slow = max(r["wall"] for r in over)
        print(f"slowest refusal: {slow:.2f} s ({'met' if slow < REFUSE_S else 'NOT met'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
