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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commands", nargs="+", help='worked commands, e.g. "solve problems/cats-chase-mice.toml"')
    ap.add_argument("--base", type=Path, help="another checkout of worked to run the same commands with")
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    trees = {"this": ROOT} | ({"base": a.base.resolve()} if a.base else {})
    tmp = Path(tempfile.mkdtemp(prefix="bench-cpu-"))
    runs: dict[str, tuple[list[str], dict, Path]] = {"import sympy": ([sys.executable, "-c", "import sympy"], env, ROOT)}
    for c in a.commands:
        args = shlex.split(c)
        for name, tree in trees.items():
            extra = ["-o", str(tmp / name), "--quiet", "--force"] if args[0] == "quiz" else []
            runs[f"{name}: {c}"] = ([sys.executable, "-m", "worked", *args, *extra], env | {"PYTHONPATH": str(tree)}, tree)
    for run in runs.values():
        cpu(*run)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(a.rounds):
        for k, run in runs.items():
            times[k].append(cpu(*run))
    sympy = statistics.median(times["import sympy"])
    print(f"CPU time, median of {a.rounds} rounds (load average {os.getloadavg()[0]:.1f})")
    for k, ts in times.items():
        m = statistics.median(ts)
        vs = ""
        if a.base and k.startswith("this: "):
            vs = f"   this / base ×{m / statistics.median(times['base: ' + k[6:]]):.2f}"
        print(f"  {k:60} {m:7.3f} s  ×{m / sympy:5.2f} of import sympy{vs}")


if __name__ == "__main__":
    main()
