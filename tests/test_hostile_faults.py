"""Faults: ``kill -9`` of ``worked quiz`` or ``worked serve`` leaves no worker process behind (bounded: a
few seconds each)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def descendants(pid: int) -> set[int]:
    out, todo = set(), [pid]
    while todo:
        q = todo.pop()
        try:
            for tid in os.listdir(f"/proc/{q}/task"):
                with open(f"/proc/{q}/task/{tid}/children") as f:
                    kids = [int(c) for c in f.read().split()]
                out.update(kids)
                todo += kids
        except OSError:
            pass
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    out.add(p)
        except OSError:
            pass
    return out


def wait_for(cond, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.1)


def test_kill_9_of_quiz_leaves_no_workers(tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "worked", "quiz", str(ROOT / "problems" / "quiz-1.toml"), "-n", "60",
                             "-o", str(tmp_path / "q"), "--jobs", "2", "--quiet"], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: len(descendants(proc.pid)) >= 2 or proc.poll() is not None, 60, "no workers started")
        if proc.poll() is not None:
            pytest.skip("the quiz finished before it could be killed")
        kids = descendants(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        wait_for(lambda: not alive(kids), 5, f"workers still alive 5 s after kill -9: {alive(kids)}")
    finally:
        if proc.poll() is None:
            proc.kill()


def test_kill_9_of_serve_leaves_no_workers():
    httpx = pytest.importorskip("httpx")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "worked", "serve", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def up():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 30, "server did not start")
        small = {"X": [[1, 0], [0, 1]], "W_Q": [[1, 0], [0, 1]], "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]]}
        r = httpx.post(f"http://127.0.0.1:{port}/api/check", json={"problem": small, "answers": {"Q": [[1, 0], [0, 1]]}},
                       timeout=30)
        assert r.status_code == 200
        kids = descendants(proc.pid)
        assert len(kids) >= 3    # the forkserver, its workers (and the resource tracker)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(5)
        wait_for(lambda: not alive(kids), 5, f"processes still alive 5 s after kill -9: {alive(kids)}")
    finally:
        if proc.poll() is None:
            proc.kill()
