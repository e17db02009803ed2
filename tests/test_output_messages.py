"""Input taken silently wrong, or errors that pass on Python's advice (issue 18, item 7)."""
from __future__ import annotations

import pytest

from conftest import run_cli
from worked.check import Tolerance
from worked.errors import WorkedError

SPEC = 'title = "t"\nseed = 1\n[family]\ntokens = 3\n[[questions]]\nask = "scores[1,1]"\ntolerance = 0.01\n'


@pytest.mark.parametrize("text", ["foo=1", "abs=0.01,foo=2", "absx=0.1"])
def test_unknown_tolerance_key_is_refused(text):
    with pytest.raises(WorkedError, match="unknown key"):
        Tolerance.parse(text)


def test_unknown_tolerance_key_on_the_command_line(tmp_path):
    assert run_cli("new", "--seed", "1", "-o", tmp_path / "p.toml")[0] == 0
    (tmp_path / "a.toml").write_text('scores = [["1", "", ""], ["", "", ""], ["", "", ""]]\n')
    rc, _, err = run_cli("check", tmp_path / "p.toml", tmp_path / "a.toml", "--tolerance", "foo=1")
    assert rc == 2 and "unknown key 'foo'" in err and err.count("\n") == 1


def test_known_tolerance_keys_still_work():
    assert Tolerance.parse("abs=0.01,rel=2%") == Tolerance(abs=0.01, rel=0.02)
    assert Tolerance.parse({"absolute": 0.1}) == Tolerance(abs=0.1)


def test_semicolon_roster_is_read(tmp_path):
    (tmp_path / "q.toml").write_text(SPEC)
    (tmp_path / "r.csv").write_text("id;name\ns1;Ada Lovelace\ns2;Ben Ng\n")
    rc, _, err = run_cli("quiz", tmp_path / "q.toml", "--roster", tmp_path / "r.csv", "-o", tmp_path / "out",
                         "--format", "html", "--jobs", "1", "--quiet")
    assert rc == 0, err
    assert "Ada Lovelace" in (tmp_path / "out" / "manifest.csv").read_text()


@pytest.mark.parametrize("what", ["problem", "answers", "spec"])
def test_huge_integers_give_a_plain_message(tmp_path, what):
    big = "1" * 5000
    assert run_cli("new", "--seed", "1", "-o", tmp_path / "p.toml")[0] == 0
    if what == "problem":
        (tmp_path / "x.toml").write_text((tmp_path / "p.toml").read_text() + f"\nextra = {big}\n")
        args = ["solve", tmp_path / "x.toml"]
    elif what == "answers":
        (tmp_path / "x.toml").write_text(f"scores = [[{big}]]\n")
        args = ["check", tmp_path / "p.toml", tmp_path / "x.toml"]
    else:
        (tmp_path / "x.toml").write_text(SPEC.replace("seed = 1", f"seed = {big}"))
        args = ["quiz", tmp_path / "x.toml", "-o", tmp_path / "o"]
    rc, _, err = run_cli(*args)
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "set_int_max_str_digits" not in err and "more than 4300 digits" in err


def test_manifest_with_bom_is_read(tmp_path):
    (tmp_path / "q.toml").write_text(SPEC)
    assert run_cli("quiz", tmp_path / "q.toml", "-n", "1", "-o", tmp_path / "q", "--format", "html", "--jobs", "1",
                   "--quiet")[0] == 0
    m = tmp_path / "q" / "manifest.json"
    m.write_bytes(b"\xef\xbb\xbf" + m.read_bytes())
    code = __import__("json").loads(m.read_text("utf-8-sig"))["variants"][0]["variant"]
    (tmp_path / "r.csv").write_text(f"variant,scores[1,1]\n{code},1\n")
    rc, _, err = run_cli("grade", tmp_path / "q", tmp_path / "r.csv", "-o", tmp_path / "g")
    assert rc == 0 and "utf-8-sig" not in err, err
