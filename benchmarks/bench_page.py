"""Timings of what issue 29 added to ``worked serve``: the teacher's quiz builder (POST /api/quiz → a zip of what
``worked quiz`` writes; POST /api/quiz-form, its fields checked as they are typed) and a check whose entries are
unreadable (shown in their cells).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_page.py [--rounds 3]

Runs the app in this process with Starlette's TestClient (its worker pools as `worked serve` has them), cold
then warm; prints the median of --rounds for each (a warm request of the same body is a cache hit, so each round
uses another seed). Measured on the 2-core shared development machine (2026-12-05, other jobs running):

    quiz.zip, 2 variants, html+gift              median 0.09 s  (rounds 0.55 cold, 0.09, 0.09)
    quiz.zip, 10 variants, html+moodle+qti+gift  median 0.43 s  (0.48, 0.40, 0.43)
    check with 4 unreadable entries              median 0.003 s (0.04 cold, 0.002, 0.003)

Issue 29's quiz builder as form fields and the diagnoses' math (issue 30's choice questions), the same machine
(2026-12-05, 03:50 UTC, busier: the zips above took 0.155 s and 0.876 s then):

    quiz form check, quiz-1 (3 questions)        median 0.003 s (0.046 cold, 0.003, 0.002)
    quiz form check, quiz-6-mixed (3 parts)      median 0.003 s (0.003, 0.003, 0.003)
    check with the diagnoses' math (?view=1)     median 0.002 s (0.002, 0.002, 0.002)
"""
from __future__ import annotations

import argparse
import statistics
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SPEC = (ROOT / "problems" / "quiz-1.toml").read_text(encoding="utf-8")
SPECS = {n: tomllib.loads((ROOT / "problems" / f"{n}.toml").read_text(encoding="utf-8")) for n in ("quiz-1", "quiz-6-mixed")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    from starlette.testclient import TestClient

    from worked.problem import load
    from worked.server.app import Config, create_app

    problem = load(ROOT / "problems" / "cats-chase-mice.toml").to_dict()
    with TestClient(create_app(Config(problems_dir=ROOT / "problems"))) as client:
        cases = [
            ("quiz.zip, 2 variants, html+gift", lambda k: client.post("/api/quiz", json={
                "spec": SPEC, "seed": 100 + k, "count": 2, "formats": "html,gift"})),
            ("quiz.zip, 10 variants, html+moodle+qti+gift", lambda k: client.post("/api/quiz", json={
                "spec": SPEC, "seed": 200 + k, "count": 10, "formats": "html,moodle,qti,gift"})),
            ("check with 4 unreadable entries", lambda k: client.post("/api/check", json={
                "problem": problem, "reveal": True,
                "answers": {"Q": [["1..67", "0.49e"], ["3..0", "2, 4, 2"], [str(k), "1"]]}})),
            # the builder's form, checked as it is typed (each round another title: a cache miss)
            ("quiz form check, quiz-1 (3 questions)", lambda k: client.post("/api/quiz-form", json={
                "spec": {**SPECS["quiz-1"], "title": f"t{k}"}})),
            ("quiz form check, quiz-6-mixed (3 parts)", lambda k: client.post("/api/quiz-form", json={
                "spec": {**SPECS["quiz-6-mixed"], "title": f"t{k}"}})),
            ("check with the diagnoses' math (?view=1)", lambda k: client.post("/api/check?view=1", json={
                "problem": problem, "answers": {"scaled": [[str(k), "2.83", "1.41"]]}})),
        ]
        for name, call in cases:
            times = []
            for k in range(args.rounds):
                t = time.perf_counter()
                r = call(k)
                times.append(time.perf_counter() - t)
                assert r.status_code == 200, (name, r.status_code, r.text[:300])
            print(f"{name:45s} median {statistics.median(times):.3f} s  (rounds: {', '.join(f'{x:.3f}' for x in times)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
