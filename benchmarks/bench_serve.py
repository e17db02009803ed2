"""Load test of ``worked serve`` on loopback: 200 concurrent /api/check on different quiz variants, then
1,000 requests spread over 60 s, then (``--soak``) a memory soak over 1,000 distinct problems.

    .venv/bin/python benchmarks/bench_serve.py [--concurrency 200] [--steady 1000 --seconds 60] [--soak 1000]

Starts ``python -m worked serve`` on a free port of 127.0.0.1 (a real uvicorn process), waits until it
answers, then sends requests from an aiohttp client (keep-alive 4 s, under the server's 5 s). Reports p50/p90/p99/max latency, throughput and
errors per scenario, and exits 1 on any error response. Targets (issue 14): p99 ≤ 1 s with no errors for
the 200 concurrent; (issue 18) the soak's largest memory of the server's process tree under 300 MB.

Scenarios:
  variants:    every request checks a *different* quiz variant (a distinct random problem of the quiz-1
               family) with that variant's answers and a slip or two (identical requests would be served
               from the cache and measure nothing);
  steady:      --steady requests, each on another variant, sent at an even rate over --seconds;
  check:       200 different students' answers to the same problem (Part 9), as one class would;
  check again: the same answers once more (a class pressing "check" twice: served from the cache);
  soak:        /api/solve?view=1 and /api/check of --soak distinct problems, 8 at a time; the server's
               RSS and PSS (its process and its workers) sampled every 50 requests.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import aiohttp
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


def variants(count: int, seed0: int) -> list[tuple[dict, dict]]:
    """*count* distinct problems of the quiz-1 family, each with its answers (one or two slips)."""
    from worked import generate

    fam = generate.Family.from_dict({"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3]})
    rng = random.Random(seed0)
    out, seen, seed = [], set(), seed0
    while len(out) < count:
        seed += 1
        try:
            p = generate.generate(fam, seed)
            sol = solve(p)
        except Exception:  # noqa: BLE001 - a family draw the generator or solver refuses: take the next seed
            continue
        d = p.to_dict()
        key = json.dumps(d, sort_keys=True)
        if key in seen:
            continue
        seen.add(key)
        mats = sol.matrices()
        a = {k: [[mats[k].dec_plain(i, j, p.decimals) for j in range(mats[k].shape[1])]
                 for i in range(mats[k].shape[0])] for k in ("Q", "K", "V", "scores", "weights", "Z")}
        k = rng.choice(list(a))
        a[k][rng.randrange(len(a[k]))][0] = str(rng.randint(-9, 9))
        out.append((d, a))
    return out


def tree_memory(pid: int) -> tuple[float, float, float]:
    """(RSS, PSS) in MB summed over *pid* and its descendants (the uvicorn process, the forkserver, workers),
    and the RSS of *pid* alone."""
    pids, todo = [], [pid]
    while todo:
        q = todo.pop()
        pids.append(q)
        try:
            for tid in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    rss = pss = root = 0
    for q in pids:
        try:
            with open(f"/proc/{q}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                        root += int(line.split()[1]) if q == pid else 0
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except OSError:
            pass
    return rss / 1024, pss / 1024, root / 1024


async def _post(client, path, body, lat: list, errors: list) -> None:
    """One timed POST: its latency into *lat*, anything but a 200 into *errors*."""
    t = time.perf_counter()
    try:
        async with client.post(path, json=body) as r:
            text = await r.text()
            if r.status != 200:
                errors.append(f"{path}: {r.status} {text[:120]}")
    except (aiohttp.ClientError, asyncio.TimeoutError) as exc:
        errors.append(f"{path}: {type(exc).__name__} {exc}")
    lat.append(time.perf_counter() - t)


async def paced(client, requests: list[tuple[str, dict]], seconds: float):
    """Send *requests* at an even rate over *seconds* (each on its own task, not waiting for the last)."""
    lat: list[float] = []
    errors: list[str] = []
    step = seconds / max(1, len(requests))

    async def one(path, body, at):
        await asyncio.sleep(max(0.0, at - time.perf_counter()))
        await _post(client, path, body, lat, errors)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(p, b, t0 + k * step) for k, (p, b) in enumerate(requests)))
    return lat, errors, time.perf_counter() - t0


async def soak(client, pid: int, items: list[tuple[dict, dict]]) -> bool:
    sem = asyncio.Semaphore(8)
    errors: list[str] = []
    peak = [0.0, 0.0, 0.0]
    done = [0]

    async def one(problem, answers):
        async with sem:
            for path, body in (("/api/solve?view=1", {"problem": problem}),
                               ("/api/check", {"problem": problem, "answers": answers})):
                async with client.post(path, json=body) as r:
                    text = await r.text()
                    if r.status != 200:
                        errors.append(f"{path}: {r.status} {text[:120]}")
            done[0] += 1
            if done[0] % 50 == 0:
                rss, pss, root = tree_memory(pid)
                peak[:] = max(peak[0], rss), max(peak[1], pss), max(peak[2], root)
                print(f"  soak {done[0]:>5} problems: tree RSS {rss:6.1f} MB  PSS {pss:6.1f} MB; "
                      f"server process RSS {root:6.1f} MB", flush=True)

    t0 = time.perf_counter()
    rss0, pss0, root0 = tree_memory(pid)
    await asyncio.gather(*(one(p, a) for p, a in items))
    print(f"soak        {len(items)} distinct problems in {time.perf_counter() - t0:.0f} s: tree RSS {rss0:.0f} → peak "
          f"{peak[0]:.0f} MB, PSS {pss0:.0f} → peak {peak[1]:.0f} MB (target < 300 MB); server process RSS "
          f"{root0:.0f} → peak {peak[2]:.0f} MB  errors={len(errors)}")
    for e in errors[:5]:
        print("   ", e)
    return not errors and peak[1] < 300


async def burst(client, requests: list[tuple[str, dict]], concurrency: int):
    sem = asyncio.Semaphore(concurrency)
    lat: list[float] = []
    errors: list[str] = []

    async def one(path, body):
        async with sem:
            await _post(client, path, body, lat, errors)

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
    p9 = part9.to_dict()
    t = time.perf_counter()
    quiz = variants(args.concurrency + args.steady + 1, 1)
    print(f"(drew and solved {len(quiz)} distinct variants for the answers in {time.perf_counter() - t:.0f} s)")
    answers = answer_sets(part9, args.concurrency + 1, rng)
    port = free_port()
    proc = start_server(port, args.workers)
    ok = True
    try:
        # aiohttp, not httpx: httpx's async pool alone took 1.5-5 s for 200 concurrent GET /api/info here
        async with aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}",
                                         connector=aiohttp.TCPConnector(limit=args.concurrency, keepalive_timeout=4),
                                         timeout=aiohttp.ClientTimeout(total=args.timeout)) as client:
            # warm-up: one request, so starting the worker processes is not in the numbers
            async with client.post("/api/check", json={"problem": quiz[0][0], "answers": quiz[0][1]}) as r:
                await r.read()
            reqs = [("/api/check", {"problem": p, "answers": a}) for p, a in quiz[1:args.concurrency + 1]]
            ok &= report("variants", *await burst(client, reqs, args.concurrency))
            reqs = [("/api/check", {"problem": p, "answers": a}) for p, a in quiz[args.concurrency + 1:]]
            if reqs:
                ok &= report("steady", *await paced(client, reqs, args.seconds))
            reqs = [("/api/check", {"problem": p9, "answers": a}) for a in answers[1:]]
            ok &= report("check", *await burst(client, reqs, args.concurrency))
            ok &= report("check again", *await burst(client, reqs, args.concurrency))
            if args.soak:
                items = variants(args.soak, 10**6)
                ok &= await soak(client, proc.pid, items)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    print("OK: no errors" if ok else "FAILED: some requests got errors (or the soak went over 300 MB)")
    return 0 if ok else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, default=200)
    ap.add_argument("--steady", type=int, default=1000, help="requests of the steady scenario")
    ap.add_argument("--seconds", type=float, default=60.0, help="the steady scenario's duration")
    ap.add_argument("--soak", type=int, default=0, help="distinct problems of the memory soak (0: no soak)")
    ap.add_argument("--workers", type=int, default=1, help="server processes (worked serve --workers)")
    ap.add_argument("--timeout", type=float, default=120.0, help="per-request timeout, seconds")
    args = ap.parse_args()
    print(f"worked serve load test: {args.concurrency} concurrent requests per burst, loopback, "
          f"{args.workers} server process(es), {os.cpu_count()} CPU(s)")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
