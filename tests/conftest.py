import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "problems"
SEEDS = ROOT.parent / "shared" / "seeds"


def run_cli(*args, cwd=None):
    """Run ``python -m worked ARGS`` in a subprocess; return (exit code, stdout, stderr)."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "worked", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


@pytest.fixture
def cli():
    return run_cli
