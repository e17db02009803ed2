"""Bad input: one line on stderr naming the file, the field and what was expected; exit 2; no traceback;
nothing on stdout (nothing written)."""
import pytest

from conftest import PROBLEMS

GOOD = (PROBLEMS / "cats-chase-mice.toml").read_text()

CASES = [
    # (name, file text or None for a missing file, expected fragment of the message)
    ("missing", None, "no such file"),
    ("bad-toml", "title = \n", "not valid TOML"),
    ("unknown-key", GOOD + "colour = 3\n", "colour: unknown key"),
    ("missing-matrix", GOOD.replace("W_V = [[1, 0], [0, 1], [1, 1], [0, 0]]", ""), "W_V: missing"),
    ("ragged", GOOD.replace("X   = [[1, 0, 1, 0], [0, 2, 0, 1]", "X   = [[1, 0, 1, 0], [0, 2, 0]"), "X: ragged rows"),
    ("non-numeric", GOOD.replace("[[1, 0], [0, 1], [1, 0], [0, 1]]", '[[1, "x"], [0, 1], [1, 0], [0, 1]]', 1), "W_Q[1,2]: expected a number"),
    ("non-finite", GOOD.replace("[[1, 0], [0, 1], [1, 0], [0, 1]]", "[[1, inf], [0, 1], [1, 0], [0, 1]]", 1), "W_Q[1,2]: expected a finite number"),
    ("nan", GOOD.replace("[[1, 0], [0, 1], [1, 0], [0, 1]]", "[[1, nan], [0, 1], [1, 0], [0, 1]]", 1), "W_Q[1,2]: expected a finite number"),
    ("no-chain", GOOD.replace("W_Q = [[1, 0], [0, 1], [1, 0], [0, 1]]", "W_Q = [[1, 0], [0, 1], [1, 0]]"), "W_Q: expected 4 rows (X has 4 columns), got 3"),
    ("tokens", GOOD.replace('tokens = ["cats", "chase", "mice"]', 'tokens = ["cats", "chase"]'), "tokens: expected 3 tokens (X has 3 rows), got 2"),
    ("dk-mismatch", GOOD.replace("W_K = [[0, 1], [1, 0], [1, 0], [0, 1]]", "W_K = [[0], [1], [1], [0]]"), "W_K: expected 2 columns like W_Q"),
    ("too-many-tokens", "X = " + str([[1, 0]] * 13) + "\nW_Q = [[1],[0]]\nW_K = [[1],[0]]\nW_V = [[1],[0]]\n", "X: 13 tokens"),
    ("entry-too-large", GOOD.replace("[[1, 0, 1, 0], [0, 2", "[[1, 0, 1, 0], [0, 5000", 1), "X[2,2]: entry 5000 is too large"),
    ("too-many-places", GOOD.replace("[[1, 0, 1, 0], [0, 2", "[[1, 0, 1, 0], [0, 0.123456", 1), "X[2,2]: 0.123456 has 6 decimal places"),
    ("bad-scale", GOOD.replace('scale    = "sqrt"', 'scale    = "cube"'), 'scale: expected "sqrt", "none" or a positive number'),
    ("bad-mask", GOOD.replace('mask     = "none"', 'mask     = "future"'), 'mask: expected "none" or "causal"'),
    ("bad-decimals", GOOD.replace("decimals = 2", "decimals = 9"), "decimals: expected a whole number from 0 to 6"),
    ("fraction-zero", GOOD.replace("[[1, 0], [0, 1], [1, 0], [0, 1]]", '[["1/0", 0], [0, 1], [1, 0], [0, 1]]', 1), "zero denominator"),
]

HEADS = """
title = "h"
X = [[1, 0], [0, 1]]
W_O = {wo}
[[heads]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = [[1, 0], [0, 1]]
[[heads]]
W_Q = [[1, 0], [0, 1]]
W_K = [[1, 0], [0, 1]]
W_V = {wq2}
"""
CASES += [
    ("heads-shapes", HEADS.format(wo="[[1],[0],[1],[0]]", wq2="[[1], [0]]"), "heads[2]: every head must have the same shapes"),
    ("wo-shape", HEADS.format(wo="[[1],[0],[1]]", wq2="[[1, 0], [0, 1]]"), "W_O: expected 4 rows (2 heads × d_v = 2), got 3"),
    ("wo-missing", HEADS.replace("W_O = {wo}\n", "").format(wq2="[[1, 0], [0, 1]]"), "W_O: missing"),
]


@pytest.mark.parametrize("name,text,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_problem_file(tmp_path, cli, name, text, fragment):
    """Each class of bad input gets a clear one-line error, exit 2, no traceback, nothing written."""
    path = tmp_path / f"{name}.toml"
    if text is not None:
        path.write_text(text)
    before = set(tmp_path.iterdir())
    code, out, err = cli("solve", path)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: "), err
    assert fragment in lines[0], err
    assert "Traceback" not in err
    assert set(tmp_path.iterdir()) == before


def test_json_problem_accepted(tmp_path, cli):
    """A JSON file with the same keys is accepted; decimals in JSON are exact too."""
    import json

    path = tmp_path / "p.json"
    path.write_text(json.dumps({"X": [[0.1, 1]], "W_Q": [[1], [0]], "W_K": [[1], [0]], "W_V": [[1], [0]]}))
    code, out, err = cli("solve", path, "--format", "json")
    assert code == 0, err
    assert json.loads(out)["heads"][0]["Q"]["exact"] == [["1/10"]]


def test_bad_json(tmp_path, cli):
    """Malformed JSON names the line and column."""
    path = tmp_path / "p.json"
    path.write_text('{"X": [[1, 2]')
    code, out, err = cli("solve", path)
    assert code == 2 and "not valid JSON" in err and "line 1" in err


def test_scores_too_large_for_a_hand_exercise(tmp_path, cli):
    """Scores whose e^x would have hundreds of digits are refused with a clear message, not a crash."""
    path = tmp_path / "big.toml"
    path.write_text('X = [[0, 0, 0], [0, 2, 3]]\nW_Q = [[0, 0, 0], [0, 0, 0], [20, 30, 30]]\n'
                    'W_K = [[0, 0, 0], [0, 0, 1], [30, 30, 30]]\nW_V = [[0], [0], [0]]\nscale = 0.5\n')
    code, out, err = cli("solve", path)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {path}: scores: a scaled score of about") and "too large" in err
