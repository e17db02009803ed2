"""CPU time of `worked` commands, this tree side by side with another checkout, for a machine that other work
shares (wall time then says little; the CPU time of the whole process tree much more).

    .venv/bin/python benchmarks/bench_cpu.py --base /path/to/older-worktree --rounds 9 \\
        "solve problems/cats-chase-mice.toml" "quiz problems/quiz-1.toml -n 20 --format html"

Each command runs as ``python -m worked COMMAND`` (a quiz also gets ``-o`` a temporary folder, ``--quiet``
and ``--force``), once with this tree first on ``PYTHONPATH`` and once with ``--base``'s, the two in turn, round
after round, after one warm-up run each (byte code written, files in the page cache); ``python -c "import
sympy"`` runs in the same rounds as the yardstick. Printed per command: the median CPU time (user + system,
of the process and every process it started, from ``getrusage(RUSAGE_CHILDREN)``), its ratio to ``import
sympy``, and the ratio of this tree to the base. The children run with byte-code caching on, as an installed
package has it.

An older worktree to compare with, without a branch checkout: ``git worktree add --detach ../base COMMIT``.

With ``--instructions`` each run is counted in instructions instead, by ``valgrind --tool=callgrind`` (the same
from run to run within about 0.2 %, whatever else the machine is doing; a run takes about 30 times as long). A
forked worker's count would include its parent's up to the fork, so a quiz then runs with ``--jobs 1``: the
whole batch's work in one process.
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu(cmd: list[str], env: dict, cwd: Path) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=cwd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def instructions(cmd: list[str], env: dict, cwd: Path) -> float:
    """The instructions *cmd* executes (millions), counted by callgrind."""
    p = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *cmd], check=True,
                       capture_output=True, text=True, env=env, cwd=cwd)
    return sum(int(line.split()[-1].replace(",", "")) for line in p.stderr.splitlines() if "Collected" in line) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commands", nargs="+", help='worked commands, e.g. "solve problems/cats-chase-mice.toml"')
    ap.add_argument("--base", type=Path, help="another checkout of worked to run the same commands with")
    ap.add_argument("--rounds", type=int, default=None, help="rounds (default 9; 1 with --instructions)")
    ap.add_argument("--instructions", action="store_true", help="count instructions (valgrind) instead of CPU time")
    a = ap.parse_args()
    measure, unit = (instructions, "M instructions") if a.instructions else (cpu, "s")
    rounds = a.rounds or (1 if a.instructions else 9)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = {"this": ROOT} | ({"base": a.base.resolve()} if a.base else {})
    tmp = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    runs: dict[str, tuple[list[str], dict, Path]] = {"import sympy": ([sys.executable, "-c", "import sympy"], env, ROOT)}
    for c in a.commands:
        args = shlex.split(c)
        for name, tree in trees.items():
            extra = ["-o", str(tmp / name), "--quiet", "--force"] if args[0] == "quiz" else []
            if args[0] == "quiz" and a.instructions:
                extra += ["--jobs", "1"]
            runs[f"{name}: {c}"] = ([sys.executable, "-m", "worked", *args, *extra], env | {"PYTHONPATH": str(tree)}, tree)
    for run in runs.values():
        cpu(*run)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(rounds):
        for k, run in runs.items():
            times[k].append(measure(*run))
    sympy = statistics.median(times["import sympy"])
    print(f"{'instructions' if a.instructions else 'CPU time'}, median of {rounds} rounds "
          f"(load average {os.getloadavg()[0]:.1f})")
    for k, ts in times.items():
        m = statistics.median(ts)
        vs = ""
        if a.base and k.startswith("this: "):
            vs = f"   this / base ×{m / statistics.median(times['base: ' + k[6:]]):.3f}"
        print(f"  {k:60} {m:9.3f} {unit}  ×{m / sympy:5.3f} of import sympy{vs}")


if __name__ == "__main__":
    main()
