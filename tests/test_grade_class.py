"""Grading a class: a manifest built from the core, a CSV of known responses → the known gradebook and report."""
from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from worked.errors import WorkedError
from worked.grade import grade, split_cell
from worked.problem import Problem
from worked.solver import solve

QUESTIONS = [{"ask": "scores[2,3]", "points": 1, "tolerance": 0.01},
             {"ask": "weights[1,*]", "points": 2, "tolerance": 0.01},
             {"ask": "Z", "points": 3, "tolerance": 0.02}]

# two variants of Part 9's problem (different X), as `worked quiz` would make them
X1 = [[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0]]
X2 = [[1, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 0]]
W = dict(W_Q=[[1, 0], [0, 1], [1, 0], [0, 1]], W_K=[[0, 1], [1, 0], [1, 0], [0, 1]],
         W_V=[[1, 0], [0, 1], [1, 1], [0, 0]])


def problem(X):
    return Problem(X, **W, tokens=["cats", "chase", "mice"])


def row(M, i):
    return ", ".join(f"{x:.2f}" for x in M[i])


def mat(M):
    return "; ".join(" ".join(f"{x:.2f}" for x in r) for r in M)


def floats(sol, key):
    m = sol.matrices()[key]
    return np.array([[float(m.num[i][j]) for j in range(m.shape[1])] for i in range(m.shape[0])])


@pytest.fixture
def quiz(tmp_path):
    students = [("s1", "Ada", "V1", X1), ("s2", "Ben", "V2", X2), ("s3", "Cy", "V1", X1), ("s4", "Di", "V2", X2)]
    manifest = {"title": "Attention quiz 1", "seed": 2026, "questions": QUESTIONS,
                "students": [{"id": i, "name": n, "variant": v, "seed": k, "problem": problem(X).to_dict()}
                             for k, (i, n, v, X) in enumerate(students)]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def test_known_class_gives_known_gradebook(quiz, tmp_path):
    """Ada answers all right (6/6); Ben forgets the scaling (weights from unscaled scores, Z from those weights:
    Z[1,1] follows from his weights row → carried forward, Z[2,1] and Z[3,1] are wrong, column 2 is right);
    Cy answers only a wrong score;
    Di does not respond; an unknown id is left out (allow_unmatched) and listed."""
    s1, s2 = solve(problem(X1)), solve(problem(X2))
    S2, V2 = floats(s2, "scores"), floats(s2, "V")
    e = np.exp(S2 - S2.max(axis=1, keepdims=True))
    A_bad = np.round(e / e.sum(axis=1, keepdims=True), 2)        # Ben: softmax of unscaled scores
    Z_bad = A_bad @ V2
    A_true2 = floats(s2, "weights")
    assert np.all(np.abs(A_bad - A_true2) > 0.02)                 # the mistake shows in every entry here
    off = np.abs(np.round(Z_bad, 2) - floats(s2, "Z")) > 0.03
    assert off.tolist() == [[True, False]] * 3   # column 1 of his Z is off; column 2 is right (V's column 2 is all 1)
    rows = [
        ["id", "name", "scores[2,3]", "weights[1,*]", "Z"],
        ["s1", "Ada", f"{floats(s1, 'scores')[1, 2]:.2f}", row(floats(s1, "weights"), 0), mat(floats(s1, "Z"))],
        ["s2", "Ben", f"{S2[1, 2]:.0f}", row(A_bad, 0), json.dumps([[f"{x:.2f}" for x in r] for r in Z_bad])],
        ["s3", "Cy", "7", "", "?"],
        ["zz9", "Stranger", "1", "", ""],
    ]
    f = io.StringIO()
    csv.writer(f).writerows(rows)
    (tmp_path / "responses.csv").write_text(f.getvalue())
    res = grade(quiz, tmp_path / "responses.csv", tmp_path / "out", allow_unmatched=True)
    book = list(csv.DictReader(open(res["gradebook"], encoding="utf-8")))
    got = {r["id"]: (r["scores[2,3]"], r["weights[1,*]"], r["Z"], r["total"], r["misconceptions"], r["responded"])
           for r in book}
    assert got == {
        "s1": ("1", "2", "3", "6", "", "yes"),
        "s2": ("1", "0", "2", "3", "no-scaling", "yes"),   # Z: 3 right + Z[1,1] carried forward → 3·4/6
        "s3": ("0", "0", "0", "0", "", "yes"),
        "s4": ("0", "0", "0", "0", "", "no"),
    }
    assert all(r["out_of"] == "6" for r in book)
    assert any("zz9" in w and "not a student of this quiz" in w for w in res["warnings"])
    assert any("no response from 's4'" in w for w in res["warnings"])
    html = res["report"].read_text(encoding="utf-8")
    assert "<svg" in html and "no-scaling" in html and "Attention quiz 1" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html and "<script" not in html and "<link" not in html


def test_moodle_responses_report(quiz, tmp_path):
    """Moodle's Responses report (Response 1, 2, … in question order; cloze parts; ID number) grades the same."""
    s1 = solve(problem(X1))
    A = floats(s1, "weights")[0]
    cloze = "; ".join(f"part {k + 1}: {x:.2f}" for k, x in enumerate(A))
    rows = [["Surname", "First name", "ID number", "State", "Grade/6.00", "Response 1", "Response 2", "Response 3"],
            ["Lovelace", "Ada", "s1", "Finished", "-", f"{floats(s1, 'scores')[1, 2]:.2f}", cloze, mat(floats(s1, "Z"))],
            ["Overall average", "", "", "", "", "", "", ""]]
    f = io.StringIO()
    csv.writer(f).writerows(rows)
    (tmp_path / "moodle.csv").write_text(f.getvalue())
    res = grade(quiz, tmp_path / "moodle.csv", tmp_path / "m")
    book = {r["id"]: r for r in csv.DictReader(open(res["gradebook"], encoding="utf-8"))}
    assert book["s1"]["total"] == "6"
    assert not any("Overall average" in w for w in res["warnings"])


def test_cell_forms():
    """A multi-entry cell may be comma-, space- or JSON-separated, with ; or newlines between rows."""
    assert split_cell("0.19, 0.62, 0.19", (1, 3)) == ["0.19", "0.62", "0.19"]
    assert split_cell("[[0.49, 1.67], [1.00, 1.33]]", (2, 2)) == ["0.49", "1.67", "1.00", "1.33"]
    assert split_cell("0.49 1.67; 1.00 1.33", (2, 2)) == ["0.49", "1.67", "1.00", "1.33"]
    assert split_cell("e^2/(1+e^2)", (1, 1)) == ["e^2/(1+e^2)"]
    assert split_cell("", (2, 1)) == ["", ""]


def test_bad_manifest_and_csv_are_one_line_errors(quiz, tmp_path, cli):
    """A manifest without students, a question on an unknown matrix, or a CSV without an id column: exit 2 with
    one line naming the file and field; nothing is written."""
    (tmp_path / "r.csv").write_text('who,"scores[2,3]"\nx,1\n')
    code, out, err = cli("grade", quiz, tmp_path / "r.csv", "-o", tmp_path / "o1")
    assert code == 2 and "no id column" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o1").exists()
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "manifest.json").write_text(json.dumps({"questions": QUESTIONS, "students": []}))
    code, out, err = cli("grade", bad, tmp_path / "r.csv")
    assert code == 2 and "students" in err and str(bad / "manifest.json") in err
    m = json.loads((quiz / "manifest.json").read_text())
    m["questions"][0]["ask"] = "scorez[2,3]"
    (bad / "manifest.json").write_text(json.dumps(m))
    (tmp_path / "ok.csv").write_text("id,scorez[2,3]\ns1,1\n")
    with pytest.raises(WorkedError, match="unknown matrix 'scorez'"):
        grade(bad, tmp_path / "ok.csv", tmp_path / "o2")


def test_cli_grade(quiz, tmp_path, cli):
    """`worked grade QUIZDIR CSV -o DIR` writes gradebook.csv and report.html and says so."""
    (tmp_path / "r.csv").write_text("id,scores[2,3],weights[1,*],Z\ns1,3,,\n")   # brackets unquoted: still read
    code, out, err = cli("grade", quiz, tmp_path / "r.csv", "-o", tmp_path / "g")
    assert code == 0, err
    assert (tmp_path / "g" / "gradebook.csv").exists() and (tmp_path / "g" / "report.html").exists()
    assert "graded 1 of 4 students" in out
