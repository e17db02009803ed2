"""The ``worked serve`` command line: help, one-line errors, and a real server answering on loopback."""
from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_serve_help_names_the_options(cli):
    """`worked serve --help` documents host (127.0.0.1 by default), port, problems and no-solutions."""
    code, out, _ = cli("serve", "--help")
    assert code == 0
    for opt in ("--host", "--port", "--problems", "--no-solutions", "127.0.0.1", "--read-timeout",
                "--connections-per-client"):
        assert opt in out


def test_busy_port_is_a_one_line_error(cli):
    """A port already in use gives `error: …` on one line and exit status 2, not a uvicorn trace."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code, out, err = cli("serve", "--port", port)
    assert code == 2
    assert err.strip().count("\n") == 0 and err.startswith("error: cannot listen on 127.0.0.1:")


def test_missing_problems_folder_is_a_one_line_error(cli, tmp_path):
    """--problems naming no folder is refused before anything starts."""
    code, _, err = cli("serve", "--problems", tmp_path / "nope")
    assert code == 2 and "no such folder" in err and err.strip().count("\n") == 0


@pytest.mark.parametrize("opt, value, expected", [("--read-timeout", "0", "--read-timeout: expected seconds"),
                                                   ("--connections-per-client", "0", "--connections-per-client: expected 1")])
def test_connection_limits_out_of_range_are_one_line_errors(cli, opt, value, expected):
    """A read deadline or a per-client cap that cannot work is refused before anything starts."""
    code, _, err = cli("serve", opt, value)
    assert code == 2 and err.startswith("error: " + expected) and err.strip().count("\n") == 0


def test_serve_answers_on_loopback_and_stops(tmp_path):
    """`worked serve` started as a process serves the page and the API on 127.0.0.1."""
    httpx = pytest.importorskip("httpx")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "worked", "serve", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 30
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/api/info", timeout=1)
                break
            except httpx.HTTPError:
                if time.time() > deadline or proc.poll() is not None:
                    raise AssertionError("server did not start: " + proc.stderr.read().decode()[-300:])
                time.sleep(0.1)
        assert r.status_code == 200 and r.json()["name"] == "worked"
        page = httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
        assert "<title>worked" in page.text
    finally:
        proc.terminate()
        proc.wait(timeout=10)
