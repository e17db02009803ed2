"""Load test of ``worked serve`` on loopback: 200 concurrent /api/check on different quiz variants, then
1,000 requests spread over 60 s, the same for a quiz folder by variant code, then (``--soak``) a memory
soak over 1,000 distinct problems; with ``--compare DIR`` side by side with another checkout.

    .venv/bin/python benchmarks/bench_serve.py [--concurrency 200] [--steady 1000 --seconds 60] [--soak 1000]
    .venv/bin/python benchmarks/bench_serve.py --steady 0 --compare /tmp/serve-orig --rounds 3

Starts ``python -m worked serve --problems QUIZ`` (a real uvicorn process) on a free port of 127.0.0.1, QUIZ a
folder ``worked quiz problems/quiz-1.toml -n 200`` wrote (made once per run), waits until it answers, then
sends requests from an aiohttp client (keep-alive 4 s, under the server's 5 s; ``--client threads``: one
httpx client shared by as many threads as the concurrency, as a threaded client would). Reports per scenario
p50/p90/p99/max latency, throughput, errors, and where the CPU went: milliseconds of CPU per request in the
server process (HTTP, JSON, the event loop, pebble's threads) and in its workers (solving and checking;
workers recycled meanwhile included). Exits 1 on any error response. Targets (issue 14, 25): p99 ≤ 1 s with
no errors for 200 concurrent checks of 200 different problems; (issue 18) the soak's largest memory of the
server's process tree under 300 MB.

``--compare DIR`` runs every scenario also against the server of another checkout (``git worktree add
/tmp/serve-orig main``), started from DIR with ``PYTHONPATH=DIR``; ``--rounds N`` alternates the two N times
(the order swapped every round, so a load on the shared machine falls on both alike) and prints the
medians over the rounds and their ratios (this checkout / DIR).

Scenarios:
  variants:    every request checks a *different* quiz variant, sent as its problem (a distinct random
               problem of the quiz-1 family), with that variant's answers and a slip or two (identical
               requests would be served from the cache and measure nothing);
  steady:      --steady requests, each on another variant, sent at an even rate over --seconds;
  check:       200 different students' answers to the same problem (Part 9), as one class would;
  check again: the same answers once more (a class pressing "check" twice: served from the cache);
  quiz open:   200 students open their own variant of the quiz folder at once (GET /api/variants/CODE);
  quiz check:  then each checks it by its code ({"variant": CODE, "answers"}: the page's request in a quiz,
               marked with the questions' tolerances), a slip or two each;
  soak:        /api/solve?view=1 and /api/check of --soak distinct problems, 8 at a time; the server's
               RSS and PSS (its process and its workers) sampled every 50 requests.
"""
from __future__ import annotations

import argparse
import asyncio
import concurrent.futures as cf
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TICK = os.sysconf("SC_CLK_TCK")

from worked.problem import Problem, load  # noqa: E402
from worked.solver import solve  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(port: int, workers: int, tree: Path = ROOT, problems: Path | None = None) -> subprocess.Popen:
    """``python -m worked serve`` of the checkout *tree* (its own code first on the path)."""
    cmd = [sys.executable, "-m", "worked", "serve", "--port", str(port), "--problems", str(problems or ROOT / "problems")]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("server did not start: " + proc.stderr.read().decode()[-500:])


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds used so far by the server process itself and by all its descendants (forkserver, workers:
    user + system, with the children each has reaped, so a recycled worker still counts)."""
    own = rest = 0.0
    todo = [pid]
    while todo:
        q = todo.pop()
        try:
            with open(f"/proc/{q}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            for tid in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            continue
        if q == pid:
            own += (int(fields[11]) + int(fields[12])) / TICK
            rest += (int(fields[13]) + int(fields[14])) / TICK      # reaped children (none but ours)
        else:
            rest += sum(int(x) for x in fields[11:15]) / TICK
    return own, rest


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
        out.append((d, slipped(p, sol, rng)))
    return out


def slipped(p: Problem, sol, rng: random.Random) -> dict:
    """A student's answers to *p*: the decimals of the key, with one entry of one matrix a random number."""
    mats = sol.matrices()
    a = {k: [[mats[k].dec_plain(i, j, p.decimals) for j in range(mats[k].shape[1])]
             for i in range(mats[k].shape[0])] for k in ("Q", "K", "V", "scores", "weights", "Z")}
    k = rng.choice(list(a))
    a[k][rng.randrange(len(a[k]))][0] = str(rng.randint(-9, 9))
    return a


def quiz_folder(count: int, where: Path) -> tuple[Path, list[tuple[str, dict]]]:
    """A quiz folder of *count* variants of problems/quiz-1.toml (``worked quiz``, manifest and GIFT only), and
    for each variant its code and a student's answers with a slip."""
    out = where / "quiz"
    subprocess.run([sys.executable, "-m", "worked", "quiz", str(ROOT / "problems" / "quiz-1.toml"), "-n", str(count),
                    "--format", "gift", "-o", str(out), "--quiet", "--force"], cwd=ROOT, check=True)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    rng = random.Random(7)
    items = []
    for v in manifest["variants"]:
        p = Problem.from_dict(v["problem"], source=v["variant"])
        items.append((v["variant"], slipped(p, solve(p), rng)))
    return out, items


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


class Threads:
    """The threaded client: one httpx.Client (its pool as large as the concurrency) used from a pool of threads,
    with the calls of the aiohttp session this script uses."""

    def __init__(self, base: str, concurrency: int, timeout: float):
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency, keepalive_expiry=4)
        self.client = httpx.Client(base_url=base, limits=limits, timeout=timeout)
        self.pool = cf.ThreadPoolExecutor(concurrency)

    async def send(self, method: str, path: str, body):
        def call():
            r = self.client.request(method, path, json=body)
            return r.status_code, r.text
        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    def close(self):
        self.pool.shutdown()
        self.client.close()


async def send(client, method: str, path: str, body=None) -> tuple[int, str]:
    if isinstance(client, Threads):
        return await client.send(method, path, body)
    async with client.request(method, path, json=body) as r:
        return r.status, await r.text()


async def _post(client, path, body, lat: list, errors: list) -> None:
    """One timed request (GET when *body* is None): its latency into *lat*, anything but a 200 into *errors*."""
    t = time.perf_counter()
    try:
        status, text = await send(client, "GET" if body is None else "POST", path, body)
        if status != 200:
            errors.append(f"{path}: {status} {text[:120]}")
    except (aiohttp.ClientError, asyncio.TimeoutError, httpx.HTTPError) as exc:
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
                status, text = await send(client, "POST", path, body)
                if status != 200:
                    errors.append(f"{path}: {status} {text[:120]}")
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


def report(name: str, lat: list[float], errors: list[str], wall: float, cpu=None, tag: str = "") -> dict:
    """Print one scenario's line; return its numbers (ms; cpu: ms per request in the server process and in
    its workers)."""
    ms = [x * 1000 for x in lat]
    out = {"p50": pct(ms, 50), "p90": pct(ms, 90), "p99": pct(ms, 99), "max": max(ms), "mean": statistics.mean(ms),
           "rps": len(ms) / wall, "errors": len(errors)}
    cpu_text = ""
    if cpu is not None:
        out["cpu_server"], out["cpu_workers"] = (1000 * c / len(ms) for c in cpu)
        cpu_text = f"  CPU/req server {out['cpu_server']:5.1f} ms, workers {out['cpu_workers']:5.1f} ms"
    print(f"{tag}{name:<11} n={len(ms):>4}  p50={out['p50']:7.1f} ms  p90={out['p90']:7.1f} ms  "
          f"p99={out['p99']:7.1f} ms  max={out['max']:7.1f} ms  {out['rps']:6.1f} req/s  errors={len(errors)}{cpu_text}",
          flush=True)
    for e in errors[:5]:
        print("   ", e)
    return out


async def run_scenarios(args, tree: Path, quiz_dir: Path, data: dict, tag: str = "") -> dict:
    """Start the server of checkout *tree* on the quiz folder, run every scenario, stop it: {scenario: numbers}."""
    port = free_port()
    proc = start_server(port, args.workers, tree, quiz_dir)
    results: dict[str, dict] = {}
    base = f"http://127.0.0.1:{port}"
    if args.client == "threads":
        client = Threads(base, args.concurrency, args.timeout)
    else:
        client = aiohttp.ClientSession(base_url=base,
                                       connector=aiohttp.TCPConnector(limit=args.concurrency, keepalive_timeout=4),
                                       timeout=aiohttp.ClientTimeout(total=args.timeout))

    async def timed(name, runner, *a):
        c0 = tree_cpu(proc.pid)
        lat, errors, wall = await runner(client, *a)
        c1 = tree_cpu(proc.pid)
        results[name] = report(name, lat, errors, wall, (c1[0] - c0[0], c1[1] - c0[1]), tag)

    try:
        # warm-up: one request, so starting the worker processes is not in the numbers
        await send(client, "POST", "/api/check", {"problem": data["quiz"][0][0], "answers": data["quiz"][0][1]})
        n = args.concurrency
        await timed("variants", burst, [("/api/check", {"problem": p, "answers": a})
                                        for p, a in data["quiz"][1:n + 1]], n)
        steady = [("/api/check", {"problem": p, "answers": a}) for p, a in data["quiz"][n + 1:]]
        if steady:
            await timed("steady", paced, steady, args.seconds)
        reqs = [("/api/check", {"problem": data["part9"], "answers": a}) for a in data["answers"][1:]]
        await timed("check", burst, reqs, n)
        await timed("check again", burst, reqs, n)
        codes = data["codes"]
        await timed("quiz open", burst, [(f"/api/variants/{code}", None) for code, _ in codes], n)
        await timed("quiz check", burst, [("/api/check", {"variant": code, "answers": a}) for code, a in codes], n)
        if args.soak:
            ok = await soak(client, proc.pid, variants(args.soak, 10**6))
            results["soak"] = {"errors": 0 if ok else 1}
    finally:
        if isinstance(client, Threads):
            client.close()
        else:
            await client.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return results


def summary(rounds: dict[str, list[dict]], trees: dict[str, Path]) -> None:
    """Medians over the rounds per scenario and checkout, and this checkout's ratio to the other."""
    names = list(trees)
    print(f"\nmedians over {len(rounds[names[0]])} round(s); ratio = {names[0]} / {names[1]}"
          if len(names) > 1 else "")
    for scen in rounds[names[0]][0]:
        if scen == "soak":
            continue
        cells = []
        med = {}
        for name in names:
            runs = [r[scen] for r in rounds[name] if scen in r]
            med[name] = {k: statistics.median(r[k] for r in runs) for k in ("p50", "p99", "rps", "cpu_server", "cpu_workers")}
            m = med[name]
            cells.append(f"{name}: p50 {m['p50']:7.0f} ms, p99 {m['p99']:7.0f} ms, CPU/req {m['cpu_server']:4.1f} + "
                         f"{m['cpu_workers']:5.1f} ms")
        line = f"{scen:<11} " + "  |  ".join(cells)
        if len(names) > 1:
            a, b = med[names[0]], med[names[1]]
            line += (f"  |  ratio p50 ×{a['p50'] / b['p50']:.2f}, p99 ×{a['p99'] / b['p99']:.2f}, "
                     f"CPU ×{(a['cpu_server'] + a['cpu_workers']) / max(1e-9, b['cpu_server'] + b['cpu_workers']):.2f}")
        print(line)


async def main_async(args) -> int:
    rng = random.Random(2026)
    part9 = load(ROOT / "problems" / "cats-chase-mice.toml")
    t = time.perf_counter()
    data = {"quiz": variants(args.concurrency + args.steady + 1, 1), "part9": part9.to_dict(),
            "answers": answer_sets(part9, args.concurrency + 1, rng)}
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        quiz_dir, data["codes"] = quiz_folder(args.concurrency, Path(tmp))
        print(f"(drew and solved {len(data['quiz'])} distinct variants, and a quiz folder of {len(data['codes'])} "
              f"variants, for the answers in {time.perf_counter() - t:.0f} s)")
        trees = {"this": ROOT}
        if args.compare:
            trees["other"] = Path(args.compare).resolve()
            print(f"this = {ROOT}, other = {trees['other']}")
        rounds: dict[str, list[dict]] = {name: [] for name in trees}
        for k in range(args.rounds):
            order = list(trees) if k % 2 == 0 else list(trees)[::-1]
            for name in order:
                print(f"-- round {k + 1}, {name}", flush=True)
                rounds[name].append(await run_scenarios(args, trees[name], quiz_dir, data))
    if args.rounds > 1 or args.compare:
        summary(rounds, trees)
    ok = all(r.get("errors", 0) == 0 for name in rounds for run in rounds[name] for r in run.values())
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
    ap.add_argument("--client", choices=("aiohttp", "threads"), default="aiohttp",
                    help="aiohttp (one event loop) or threads (an httpx client shared by --concurrency threads)")
    ap.add_argument("--compare", metavar="DIR", default=None,
                    help="another checkout (e.g. a git worktree of main) to run side by side")
    ap.add_argument("--rounds", type=int, default=1, help="rounds (with --compare: each runs both, order alternating)")
    args = ap.parse_args()
    print(f"worked serve load test: {args.concurrency} concurrent requests per burst, loopback, "
          f"{args.workers} server process(es), {os.cpu_count()} CPU(s), {args.client} client")
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
