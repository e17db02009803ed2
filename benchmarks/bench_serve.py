"""Load test of ``worked serve`` on loopback: 200 concurrent /api/check requests, then a mix with /api/solve.

    .venv/bin/python benchmarks/bench_serve.py [--concurrency 200] [--rounds 3] [--workers 1]

Starts ``python -m worked serve`` on a free port of 127.0.0.1 (a real uvicorn process), waits until it
answers, then fires bursts of requests at once from an httpx async client, each burst bounded by
``--concurrency`` simultaneous requests and a per-request timeout. Reports p50/p90/p99/max latency and
throughput per scenario and fails (exit 1) on any error response. The server is stopped at the end.

Scenarios (Part 9 "cats chase mice" and the other problems of problems/):
  check:      every request checks a different student's answers (correct, no-scaling, column-softmax,
              random slips, different blanks) to the same problem, as a class would;
  check again: the first burst's answers once more (a class pressing "check" twice: served from cache);
  mix:        half /api/check, half /api/solve over all problems of problems/ (solutions are cached
              after the first solve of each problem; the first solves are in the numbers);
  cold-solve: /api/solve of distinct random problems (nothing cached): the worst case.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from worked.problem import Problem, load  # noqa: E402
from worked.solver import solve  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, workers: int) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "worked", "serve", "--port", str(port), "--problems", str(ROOT / "problems")]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start: " + proc.stderr.read().decode()[-500:])


def answer_sets(problem: Problem, count: int, rng: random.Random) -> list[dict]:
    """Students' answers: correct decimals, the no-scaling and column-softmax mistakes, random slips."""
    sol = solve(problem)
    mats = sol.matrices()
    d = problem.decimals

    def grid(key, f=None):
        m = mats[key]
        r, c = m.shape
        return [[f(i, j) if f else m.dec_plain(i, j, d) for j in range(c)] for i in range(r)]

    import math

    sc = [[mats["scores"].value(i, j) for j in range(problem.n)] for i in range(problem.n)]
    unscaled = [[math.exp(x) / sum(math.exp(y) for y in row) for x in row] for row in sc]
    cells = [(key, i, j) for key in ("Q", "K", "V", "scores", "scaled", "weights", "Z")
             for i in range(len(mats[key].exact)) for j in range(len(mats[key].exact[0]))]
    pairs = [(a, b) for a in range(len(cells)) for b in range(a + 1, len(cells))]
    rng.shuffle(pairs)
    out = []
    for k in range(count):
        a = {key: grid(key) for key in ("Q", "K", "V", "scores", "scaled", "weights", "Z")}
        kind = k % 4
        if kind == 1:  # no scaling
            a["scaled"] = grid("scores")
            a["weights"] = [[f"{x:.{d}f}" for x in row] for row in unscaled]
        elif kind == 2:  # column softmax
            w = [[mats["scaled"].value(i, j) for j in range(problem.n)] for i in range(problem.n)]
            cols = [sum(math.exp(w[i][j]) for i in range(problem.n)) for j in range(problem.n)]
            a["weights"] = [[f"{math.exp(w[i][j]) / cols[j]:.{d}f}" for j in range(problem.n)] for i in range(problem.n)]
        elif kind == 3:  # a random slip or two, and some blanks
            key = rng.choice(list(a))
            i, j = rng.randrange(len(a[key])), rng.randrange(len(a[key][0]))
            a[key][i][j] = str(rng.randint(-9, 9))
            a["Z"][0][0] = ""
        for c in pairs[k % len(pairs)]:  # two cells left blank: every request is a different student
            key, i, j = cells[c]
            a[key][i][j] = ""
        out.append(a)
    return out


async def burst(client: httpx.AsyncClient, requests: list[tuple[str, dict]], concurrency: int):
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []
    errors: list[str] = []

    async def one(path, body):
        async with sem:
            t = time.perf_counter()
            try:
                r = await client.post(path, json=body)
                ok = r.status_code == 200
                if not ok:
                    errors.append(f"{path}: {r.status_code} {r.text[:120]}")
            except httpx.HTTPError as exc:
                errors.append(f"{path}: {type(exc).__name__} {exc}")
            lat.append(time.perf_counter() - t)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(p, b) for p, b in requests))
    return lat, errors, time.perf_counter() - t0


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, int(round(p / 100 * len(xs) + 0.5)) - 1))
    return xs[k]


def report(name: str, lat: list[float], errors: list[str], wall: float) -> bool:
    ms = [x * 1000 for x in lat]
    print(f"{name:<11} n={len(ms):>4}  p50={pct(ms, 50):7.1f} ms  p90={pct(ms, 90):7.1f} ms  "
          f"p99={pct(ms, 99):7.1f} ms  max={max(ms):7.1f} ms  mean={statistics.mean(ms):7.1f} ms  "
          f"{len(ms) / wall:6.1f} req/s  errors={len(errors)}")
    for e in errors[:5]:
        print("   ", e)
    return not errors


async def main_async(args) -> int:
    rng = random.Random(2026)
    part9 = load(ROOT / "problems" / "cats-chase-mice.toml")
    problems = [Problem.from_file(p) for p in sorted((ROOT / "problems").glob("*.toml"))
                if "[family]" not in p.read_text(encoding="utf-8")]
    p9 = part9.to_dict()
    # a different student for every request of every burst (the server caches repeated identical checks)
    answers = answer_sets(part9, 2 * args.rounds * args.concurrency + 1, rng)
    fresh = iter(answers[1:])
    port = free_port()
    proc = start_server(port, args.workers)
    ok = True
    try:
        limits = httpx.Limits(max_connections=args.concurrency, max_keepalive_connections=args.concurrency)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", limits=limits,
                                     timeout=httpx.Timeout(args.timeout)) as client:
            # warm-up: one request each, so imports are not in the numbers of the first burst
            await client.post("/api/check", json={"problem": p9, "answers": answers[0]})
            for rnd in range(args.rounds):
                reqs = [("/api/check", {"problem": p9, "answers": next(fresh)}) for _ in range(args.concurrency)]
                ok &= report(f"check #{rnd + 1}", *await burst(client, reqs, args.concurrency))
            for rnd in range(args.rounds):
                reqs = []
                for k in range(args.concurrency):
                    if k % 2:
                        reqs.append(("/api/solve", {"problem": problems[k % len(problems)].to_dict()}))
                    else:
                        reqs.append(("/api/check", {"problem": p9, "answers": next(fresh)}))
                rng.shuffle(reqs)
                ok &= report(f"mix #{rnd + 1}", *await burst(client, reqs, args.concurrency))
            reqs = [("/api/check", {"problem": p9, "answers": a}) for a in answers[1:args.concurrency + 1]]
            ok &= report("check again", *await burst(client, reqs, args.concurrency))  # same answers: cached
            from worked import generate

            fam = generate.Family.from_dict({"tokens": 3, "d_model": 4, "d_k": 2})
            cold, skipped = [], []
            seed = 1000
            while len(cold) < args.cold:
                p = generate.generate(fam, seed)
                try:
                    solve(p)  # the solver itself fails on a few generated problems: not a server error
                    cold.append(("/api/solve", {"problem": p.to_dict()}))
                except Exception as exc:  # noqa: BLE001
                    skipped.append(f"seed {seed}: {type(exc).__name__}")
                seed += 1
            if skipped:
                print(f"cold-solve: skipped {len(skipped)} generated problems the solver cannot solve in-process "
                      f"either ({', '.join(skipped)}); the server answers those with a JSON 500")
            ok &= report("cold-solve", *await burst(client, cold, args.concurrency))
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("OK: no errors" if ok else "FAILED: some requests got errors")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cold", type=int, default=40, help="distinct random problems solved in the cold burst")
    ap.add_argument("--workers", type=int, default=1, help="server processes (worked serve --workers)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request timeout, seconds")
    args = ap.parse_args()
    print(f"worked serve load test: {args.concurrency} concurrent requests per burst, loopback, "
          f"{args.workers} server process(es), {os.cpu_count()} CPU(s)")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
