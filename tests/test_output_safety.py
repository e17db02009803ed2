"""Nothing of the user's is deleted or half-written (worked/output.py, used by every command that writes).

For quiz, new, grade, sheet and notebook: a full disk (a small tmpfs, mounted when the tests run as
root) and a read-only folder give one ``error:`` line, exit 2, no temporary file, the old output intact.
--force keeps files worked did not write; debris of a killed run is removed by the next one; two quiz
runs into one folder do not both "succeed"; a kill -9 during a sheet write leaves the old set or the new.
"""
from __future__ import annotations

import errno
import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

QUIZ_SPEC = """title = "Safety quiz"
seed = 7
[family]
tokens = 3
[[questions]]
ask = "scores[1,2]"
points = 1
tolerance = 0.01
"""
DEBRIS = re.compile(r"\.tmp|\.old-|\.lock$")


def snapshot(folder: Path) -> dict:
    """Every file under *folder* (relative path → sha256)."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def debris(folder: Path) -> list[str]:
    return [str(p.relative_to(folder)) for p in folder.rglob("*") if DEBRIS.search(p.name)]


@pytest.fixture
def inputs(tmp_path):
    """A quiz spec, a problem file, a quiz folder with a manifest and a responses CSV for grading."""
    d = tmp_path / "in"
    d.mkdir()
    (d / "quiz.toml").write_text(QUIZ_SPEC)
    (d / "roster.csv").write_text("id,name\ns1,Ada\ns2,Ben\n")
    rc, _, err = run_cli("new", "--seed", "3", "-o", d / "p.toml")
    assert rc == 0, err
    rc, _, err = run_cli("quiz", d / "quiz.toml", "--roster", d / "roster.csv", "-o", d / "q", "--format", "html",
                         "--jobs", "1", "--quiet")
    assert rc == 0, err
    (d / "responses.csv").write_text("id,scores[1,2]\ns1,1\ns2,2\n")
    return d


def commands(inputs: Path, out: Path) -> dict:
    """Each command that writes, writing under *out*; the second run of each replaces the first's output."""
    return {
        "quiz": (["quiz", inputs / "quiz.toml", "--roster", inputs / "roster.csv", "-o", out / "quiz", "--format",
                  "html", "--jobs", "1", "--quiet"], out / "quiz"),
        "new": (["new", "--seed", "5", "-o", out / "new.toml", "--force"], out / "new.toml"),
        "grade": (["grade", inputs / "q", inputs / "responses.csv", "-o", out / "grades", "--force"], out / "grades"),
        "sheet": (["sheet", inputs / "p.toml", "-o", out / "sheets", "--format", "html,tex"], out / "sheets"),
        "notebook": (["notebook", inputs / "p.toml", "-o", out / "nb.ipynb"], out / "nb.ipynb"),
    }


def _mount_tmpfs(where: Path, size: str) -> bool:
    if os.geteuid() != 0:
        return False
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], capture_output=True)
    return r.returncode == 0


def _umount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(folder: Path) -> Path:
    """Fill the file system of *folder* to the last byte."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        for chunk in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    f.write(b"\0" * chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    return filler


def _assert_one_line_error(rc, err, name):
    assert rc == 2, f"{name}: exit {rc}: {err}"
    assert err.startswith("error: ") and err.count("\n") == 1, f"{name}: {err!r}"
    assert "Traceback" not in err


@pytest.fixture
def tmpfs(tmp_path):
    mnt = tmp_path / "mnt"
    if not _mount_tmpfs(mnt, "8m"):
        pytest.skip("needs root and mount (a small tmpfs)")
    yield mnt
    _umount(mnt)


@pytest.mark.parametrize("name", ["quiz", "new", "grade", "sheet", "notebook"])
def test_disk_full_one_line_no_debris_old_output_intact(inputs, tmpfs, name):
    args, target = commands(inputs, tmpfs)[name]
    rc, _, err = run_cli(*args)
    assert rc == 0, err
    before = snapshot(tmpfs)
    filler = _fill(tmpfs)
    rc, _, err = run_cli(*(args + (["--force"] if name == "sheet" else [])))
    _assert_one_line_error(rc, err, name)
    assert "No space left" in err
    after = snapshot(tmpfs)
    after.pop(filler.name)
    assert after == before, f"{name}: the old output changed"
    assert debris(tmpfs) == []


@pytest.mark.parametrize("name", ["quiz", "new", "grade", "sheet", "notebook"])
def test_read_only_one_line_no_debris_old_output_intact(inputs, tmp_path, name):
    if os.geteuid() == 0:
        mnt = tmp_path / "ro"
        if not _mount_tmpfs(mnt, "8m"):
            pytest.skip("needs mount as root (a read-only tmpfs)")
        make_ro = lambda: subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)   # noqa: E731
        make_rw = lambda: subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)   # noqa: E731
    else:
        mnt = tmp_path / "ro"
        mnt.mkdir()
        make_ro = lambda: [os.chmod(p, 0o555) for p in [mnt, *mnt.rglob("*")] if p.is_dir()]   # noqa: E731
        make_rw = lambda: [os.chmod(p, 0o755) for p in [mnt, *mnt.rglob("*")] if p.is_dir()]   # noqa: E731
    try:
        args, target = commands(inputs, mnt)[name]
        rc, _, err = run_cli(*args)
        assert rc == 0, err
        before = snapshot(mnt)
        make_ro()
        rc, _, err = run_cli(*args)
        _assert_one_line_error(rc, err, name)
        assert snapshot(mnt) == before
        assert debris(mnt) == []
    finally:
        make_rw()
        if os.geteuid() == 0:
            _umount(mnt)


def test_quiz_force_keeps_foreign_files_and_says_so(inputs, tmp_path):
    out = tmp_path / "q"
    base = ["quiz", inputs / "quiz.toml", "--roster", inputs / "roster.csv", "-o", out, "--format", "html",
            "--jobs", "1", "--quiet"]
    assert run_cli(*base)[0] == 0
    (out / "thesis.docx").write_bytes(b"years of work")
    (out / "variants" / "mine.txt").write_text("notes")
    rc, _, err = run_cli(*base)
    assert rc == 2 and "thesis.docx" in err and "--force" in err
    rc, _, err = run_cli(*base, "--force")
    assert rc == 0, err
    assert (out / "thesis.docx").read_bytes() == b"years of work"
    assert (out / "variants" / "mine.txt").read_text() == "notes"
    assert "left alone 2 files" in err and "thesis.docx" in err
    listed = (out / ".worked").read_text().splitlines()
    assert "manifest.json" in listed and "thesis.docx" not in listed
    # a smaller class: the variant of the student who left is removed (it was ours), the foreign files stay
    (inputs / "roster1.csv").write_text("id,name\ns1,Ada\n")
    rc, _, err = run_cli(*base[:3], inputs / "roster1.csv", *base[4:], "--force")
    assert rc == 0, err
    assert len([p for p in (out / "variants").iterdir() if p.is_dir()]) == 1
    assert (out / "thesis.docx").exists() and (out / "variants" / "mine.txt").exists()
    assert debris(out.parent) == []


def test_sheet_force_keeps_foreign_files(inputs, tmp_path):
    out = tmp_path / "s"
    slug = out / "random-attention-problem-seed-3"
    slug.mkdir(parents=True)
    (slug / "thesis.docx").write_bytes(b"mine")
    rc, _, err = run_cli("sheet", inputs / "p.toml", "-o", out, "--format", "html")
    assert rc == 2 and "--force" in err
    rc, _, err = run_cli("sheet", inputs / "p.toml", "-o", out, "--format", "html", "--force")
    assert rc == 0, err
    assert (slug / "thesis.docx").read_bytes() == b"mine" and "thesis.docx" in err
    # the next run (another format set) replaces worked's set and still leaves thesis.docx alone
    rc, _, err = run_cli("sheet", inputs / "p.toml", "-o", out, "--format", "tex", "--force")
    assert rc == 0, err
    assert sorted(p.name for p in slug.iterdir()) == [".worked", "answer-key.tex", "thesis.docx", "worksheet.tex"]


def test_rerun_removes_debris_of_a_killed_run(inputs, tmp_path):
    out = tmp_path / "q"
    base = ["quiz", inputs / "quiz.toml", "-n", "2", "-o", out, "--format", "html", "--jobs", "1", "--quiet"]
    assert run_cli(*base)[0] == 0
    (tmp_path / ".q.tmp-999999").mkdir()
    (tmp_path / ".q.tmp-999999" / "class-worksheets.pdf").write_bytes(b"x" * 1000)
    (tmp_path / ".q.old-999998").mkdir()
    (out / ".manifest.json.k2j3h4.tmp").write_text("half")
    rc, _, err = run_cli(*base)
    assert rc == 0, err
    assert debris(tmp_path) == []
    # the same for the files of new/notebook (.NAME.tmp-PID of a dead process)
    (tmp_path / ".p.toml.tmp-999999").write_text("half")
    (tmp_path / ".p.toml.tmp123456789").write_text("half")
    assert run_cli("new", "--seed", "1", "-o", tmp_path / "p.toml")[0] == 0
    assert debris(tmp_path) == []


def test_two_quiz_runs_into_one_folder(inputs, tmp_path):
    """While one run writes DIR, a second fails at once, clearly; the first finishes whole."""
    out = tmp_path / "q"
    args = [sys.executable, "-m", "worked", "quiz", str(inputs / "quiz.toml"), "-n", "6", "-o", str(out),
            "--format", "pdf", "--jobs", "1", "--quiet"]
    first = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    lock = tmp_path / ".q.lock"
    t0 = time.monotonic()
    while not lock.exists() and first.poll() is None and time.monotonic() - t0 < 60:
        time.sleep(0.02)
    assert lock.exists(), "the first run never took the lock"
    rc, _, err = run_cli(*args[3:])
    assert rc == 2 and "another worked run" in err and err.count("\n") == 1
    assert first.wait(timeout=300) == 0, first.stderr.read()
    assert not lock.exists()
    import json

    assert len(json.loads((out / "manifest.json").read_text())["variants"]) == 6


def _sheet_sets(inputs: Path, tmp_path: Path) -> tuple[Path, dict, dict, list]:
    """Two versions of one problem (same title, so the same folder), their sheet sets, and the command."""
    text = (inputs / "p.toml").read_text()
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text(text)
    b.write_text(re.sub(r"decimals = \d+", "decimals = 3", text) if "decimals" in text else text + "decimals = 3\n")
    out = tmp_path / "out"
    sets = []
    for src in (b, a):
        rc, _, err = run_cli("sheet", src, "-o", out, "--format", "html,tex")
        assert rc == 0, err
        (folder,) = [p for p in out.iterdir() if p.is_dir()]
        sets.append(snapshot(folder))
    assert sets[0] != sets[1]
    return folder, sets[1], sets[0], ["sheet", b, "-o", out, "--format", "html,tex"]


KILLER = """
import atexit, os, signal, sys
from worked.cli import main
out, n = sys.argv[1], int(sys.argv[2])
count = 0
def hook(event, args):
    global count
    if event in ("open", "os.rename", "os.remove", "os.rmdir", "os.mkdir", "shutil.rmtree", "ctypes.dlsym"):
        path = str(args[0]) if args else ""
        if event == "open" and not ((isinstance(args[1], str) and set(args[1]) & set("wxa+"))
                                    or (args[1] is None and args[2] & (os.O_WRONLY | os.O_RDWR))):
            return
        if event == "ctypes.dlsym":
            path = out if "renameat2" in str(args[1:]) else ""
        if path.startswith(out):
            count += 1
            if count == n:
                os.kill(os.getpid(), signal.SIGKILL)
atexit.register(lambda: print("events", count, file=sys.stderr))
sys.addaudithook(hook)
sys.exit(main(sys.argv[3:]))
"""


def test_kill_during_sheet_write_leaves_old_or_new_set(inputs, tmp_path):
    """kill -9 at every step of the write (each file opened, renamed, removed: Python's audit events)."""
    folder, old, new, args = _sheet_sets(inputs, tmp_path)
    out = str(folder.parent)

    def run(n, problem):
        a = [str(x) for x in args]
        a[1] = str(problem)
        return subprocess.run([sys.executable, "-c", KILLER, out, str(n), *a], cwd=ROOT, capture_output=True,
                              text=True, timeout=300)

    r = run(10**9, tmp_path / "a.toml")
    steps = int(re.search(r"events (\d+)", r.stderr)[1])
    assert r.returncode == 0 and steps >= 6, r.stderr
    outcomes = []
    for n in range(1, steps + 1):
        assert run(10**9, tmp_path / "a.toml").returncode == 0      # the old set back
        r = run(n, tmp_path / "b.toml")
        assert r.returncode == -signal.SIGKILL, r.stderr
        now = snapshot(folder)
        assert now in (old, new), f"kill at step {n}: a mix of old and new files: {sorted(now)}"
        outcomes.append("new" if now == new else "old")
    assert outcomes[0] == "old" and outcomes[-1] == "new"
    rc, _, err = run_cli(*args)       # a rerun removes what the kills left
    assert rc == 0, err
    assert snapshot(folder) == new and debris(folder.parent) == []


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_quiz_workers_exit_when_the_parent_is_killed(inputs, tmp_path):
    args = [sys.executable, "-m", "worked", "quiz", str(inputs / "quiz.toml"), "-n", "40", "-o", str(tmp_path / "q"),
            "--format", "pdf", "--jobs", "2", "--quiet"]
    p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.monotonic()
    kids: list[int] = []
    while len(kids) < 2 and time.monotonic() - t0 < 60 and p.poll() is None:
        kids = _children(p.pid)
        time.sleep(0.05)
    assert len(kids) >= 2, "the quiz never started its workers"
    time.sleep(0.3)
    p.kill()
    p.wait()
    t0 = time.monotonic()
    alive = kids
    while alive and time.monotonic() - t0 < 10:
        alive = [k for k in kids if Path(f"/proc/{k}").exists()
                 and "Z" not in Path(f"/proc/{k}/stat").read_text().split(")")[-1].split()[:1]]
        time.sleep(0.1)
    assert alive == [], f"orphaned workers: {alive}"
