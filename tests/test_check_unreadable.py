"""An entry that is not a number is unreadable, with its reason: `1..67`, `1.2.3`, `0.5.5`, `3..0` have two
decimal points and `0.49e` has no exponent; none is read as a product of the numbers in it. The CLI check,
the class grader and the server's check API give the same verdict (they share worked.exprs' tokenizer)."""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import sympy as sp

from worked.check import check_answers, parse_entry
from worked.errors import ExpressionError
from worked.problem import load

ROOT = Path(__file__).resolve().parents[1]
PART9 = ROOT / "problems" / "cats-chase-mice.toml"

# Part 9's Z is [[0.49, 1.67], [1.00, 1.33], [0.74, 1.50]]: each bad entry stands where a student meant a value
BAD = {(0, 0): ("0.49e", "0.49e: the exponent after e is missing"),
       (0, 1): ("1..67", "1..67: two decimal points in one number"),
       (1, 0): ("1.2.3", "1.2.3: two decimal points in one number"),
       (2, 0): ("0.5.5", "0.5.5: two decimal points in one number"),
       (2, 1): ("3..0", "3..0: two decimal points in one number")}
Z_ANSWER = [["0.49e", "1..67"], ["1.2.3", "1.33"], ["0.5.5", "3..0"]]


@pytest.mark.parametrize("text, reason", [
    ("1..67", "1..67: two decimal points in one number"),
    ("1.2.3", "1.2.3: two decimal points in one number"),
    ("0.5.5", "0.5.5: two decimal points in one number"),
    ("3..0", "3..0: two decimal points in one number"),
    (".5.5", ".5.5: two decimal points in one number"),
    ("2*1.2.3", "1.2.3: two decimal points in one number"),
    ("1e5.5", "1e5.5: a decimal point after the exponent of a number"),
    ("0.49e", "0.49e: the exponent after e is missing (as in 0.49e-2; for 0.49 times e, write 0.49·e)"),
    ("0.49e+", "0.49e: the exponent after e is missing"),
])
def test_not_a_number_is_unreadable_with_its_reason(text, reason):
    with pytest.raises(ExpressionError) as exc:
        parse_entry(text)
    assert str(exc.value).startswith(reason)


@pytest.mark.parametrize("text, value", [
    ("2sqrt(2)", 2 * sp.sqrt(2)), ("2√2", 2 * sp.sqrt(2)), ("2e", 2 * sp.E), ("0.5e^2", sp.exp(2) / 2),
    ("0.49·e", sp.Rational(49, 100) * sp.E), ("0.49e-2", sp.Rational(49, 10000)), ("1.5E+1", sp.Integer(15)),
    ("1/3", sp.Rational(1, 3)), ("e^(√2)/(2+e^(√2))", sp.exp(sp.sqrt(2)) / (2 + sp.exp(sp.sqrt(2)))),
    ("1.", sp.Integer(1)), (".5", sp.Rational(1, 2)),
])
def test_numbers_and_exact_forms_still_read(text, value):
    """What the grammar accepts on purpose stays: a number times a root or e, scientific notation, fractions."""
    assert sp.simplify(parse_entry(text) - value) == 0


def _check_z(rep_dict):
    z = rep_dict["matrices"]["Z"]
    assert z["verdicts"] == [["invalid", "invalid"], ["invalid", "correct"], ["invalid", "invalid"]]
    assert z["counts"]["wrong"] == 0 and z["counts"]["invalid"] == 5
    msgs = [e["message"] for e in rep_dict["errors"]]
    for (i, j), (text, reason) in BAD.items():
        assert any(m.startswith(f"Z[{i + 1},{j + 1}]: cannot read {text!r}: {reason}") for m in msgs), msgs


def test_cli_check_marks_them_unreadable(cli, tmp_path):
    """`worked check` with an answers file: each entry is '?' with its reason, none is wrong."""
    answers = tmp_path / "a.json"
    answers.write_text(json.dumps({"Z": Z_ANSWER}), encoding="utf-8")
    code, out, _ = cli("check", PART9, answers, "--format", "json")
    _check_z(json.loads(out))
    code, out, _ = cli("check", PART9, answers)
    assert "Z[2,1]: cannot read '1.2.3': 1.2.3: two decimal points in one number" in out
    assert "1 of 6 correct, 5 unreadable" in out and "Summary: 1 of 6 entries correct, 5 unreadable." in out
    assert "? 1..67" in out and "✗" not in out.replace("✗ wrong", "")


def test_server_check_api_gives_the_same_verdict(cli, tmp_path):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from test_serve_api import client

    answers = tmp_path / "a.json"
    answers.write_text(json.dumps({"Z": Z_ANSWER}), encoding="utf-8")
    r = client().post("/api/check", json={"problem": load(PART9).to_dict(), "answers": {"Z": Z_ANSWER}})
    assert r.status_code == 200
    _check_z(r.json())
    _, out, _ = cli("check", PART9, answers, "--format", "json")
    assert r.json() == json.loads(out)


def test_grade_lists_them_as_unreadable_and_scores_them_zero(tmp_path):
    """`worked grade`: a response cell `1..67` earns nothing and is listed as unreadable with its reason."""
    from worked.grade import grade

    p = load(PART9)
    manifest = {"title": "q", "seed": 1, "questions": [{"ask": "Z", "points": 6}],
                "students": [{"id": "s1", "name": "Ada", "variant": "V1", "seed": 0, "problem": p.to_dict()}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    f = io.StringIO()
    csv.writer(f).writerows([["id", "name", "Z"], ["s1", "Ada", "; ".join(" ".join(r) for r in Z_ANSWER)]])
    (tmp_path / "responses.csv").write_text(f.getvalue())
    res = grade(tmp_path, tmp_path / "responses.csv", tmp_path / "out")
    (student,) = res["results"]
    assert student.scores == {"Z": 1.0}          # only Z[2,2] = 1.33 is right
    for (i, j), (text, reason) in BAD.items():
        assert any(m.startswith(f"Z[{i + 1},{j + 1}]: cannot read {text!r}: {reason}") for m in student.problems)
    rep = check_answers(p, {"Z": Z_ANSWER})
    assert [e["message"] for e in rep.errors] == [m for m in student.problems if m.startswith("Z[")]
