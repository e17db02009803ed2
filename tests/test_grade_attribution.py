"""Every grade lands on the right student, or the run stops: students are matched exactly as
`worked quiz` identified them (ids without case-folding), and a row that matches no student, or
several, is an error naming the row (exit 2, nothing written) unless --allow-unmatched."""
from __future__ import annotations

import csv
import json

import pytest

from worked.errors import WorkedError
from worked.grade import grade
from worked.problem import Problem
from worked.solver import solve

X1 = [[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0]]
X2 = [[1, 0, 1, 1], [0, 1, 0, 1], [1, 1, 0, 0]]
W = dict(W_Q=[[1, 0], [0, 1], [1, 0], [0, 1]], W_K=[[0, 1], [1, 0], [1, 0], [0, 1]],
         W_V=[[1, 0], [0, 1], [1, 1], [0, 0]])
ASK = "scores[1,2]"


def problem(X):
    return Problem(X, **W, tokens=["cats", "chase", "mice"])


def right(X) -> str:
    m = solve(problem(X)).matrices()["scores"]
    return str(m.num[0][1])


def wrong(X) -> str:
    return str(float(right(X)) + 7)


# ids that differ only in case are two students; two students share a name
STUDENTS = [("A1", "Ann Roe", "K3F9", X1), ("a1", "Bo Park", "M7Q2", X2),
            ("s3", "Sam Lee", "P4R8", X1), ("s4", "Sam Lee", "T5W6", X2), ("s5", "Cy Dunn", "Z9X3", X1)]


@pytest.fixture
def quiz(tmp_path):
    manifest = {"title": "q", "seed": 1, "questions": [{"ask": ASK, "points": 1, "tolerance": 0.01}],
                "students": [{"id": i, "name": n, "variant": v, "problem": problem(X).to_dict()}
                             for i, n, v, X in STUDENTS]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    return tmp_path


def responses(tmp_path, rows, header=("id", "name", ASK)):
    p = tmp_path / "responses.csv"
    with open(p, "w", newline="") as f:
        csv.writer(f).writerows([list(header), *rows])
    return p


def book(res) -> dict:
    return {r["id"]: (r[ASK], r["responded"]) for r in csv.DictReader(open(res["gradebook"], encoding="utf-8"))}


def test_ids_differing_only_in_case_are_two_students(quiz, tmp_path):
    """A1 answers right, a1 wrong: each keeps their own grade (no case-folding)."""
    p = responses(tmp_path, [["A1", "Ann Roe", right(X1)], ["a1", "Bo Park", wrong(X2)],
                             ["s3", "Sam Lee", right(X1)], ["s4", "Sam Lee", wrong(X2)], ["s5", "Cy Dunn", right(X1)]])
    res = grade(quiz, p, tmp_path / "out")
    assert book(res) == {"A1": ("1", "yes"), "a1": ("0", "yes"), "s3": ("1", "yes"), "s4": ("0", "yes"),
                         "s5": ("1", "yes")}


def test_id_in_another_case_is_an_error_naming_the_row(quiz, tmp_path):
    p = responses(tmp_path, [["A1", "Ann Roe", right(X1)], ["S5", "Cy Dunn", right(X1)]])
    with pytest.raises(WorkedError) as e:
        grade(quiz, p, tmp_path / "out")
    msg = str(e.value)
    assert "line 3" in msg and "'S5'" in msg and "'s5'" in msg and "exactly" in msg
    assert not (tmp_path / "out").exists()


def test_duplicate_names_without_ids_stop_the_run(quiz, tmp_path):
    """Matched by name only: 'Sam Lee' is two students, so the row is ambiguous; no grade is guessed."""
    p = responses(tmp_path, [["Ann Roe", right(X1)], ["Sam Lee", right(X1)]], header=("name", ASK))
    with pytest.raises(WorkedError) as e:
        grade(quiz, p, tmp_path / "out")
    assert "line 3" in str(e.value) and "2 students have this name" in str(e.value) and "s3, s4" in str(e.value)
    assert not (tmp_path / "out").exists()


def test_unique_names_match_and_ambiguous_rows_are_listed_with_allow_unmatched(quiz, tmp_path):
    p = responses(tmp_path, [["Ann Roe", right(X1)], ["Sam Lee", right(X1)], ["Cy Dunn", wrong(X1)]],
                  header=("name", ASK))
    res = grade(quiz, p, tmp_path / "out", allow_unmatched=True)
    got = book(res)
    assert got["A1"] == ("1", "yes") and got["s5"] == ("0", "yes")
    assert got["s3"] == ("0", "no") and got["s4"] == ("0", "no")   # neither Sam gets the row
    assert any("not graded" in w and "line 3" in w for w in res["warnings"])
    assert "line 3" in (tmp_path / "out" / "report.html").read_text()


def test_missing_student_scores_zero_and_the_others_keep_theirs(quiz, tmp_path):
    p = responses(tmp_path, [["A1", "", right(X1)], ["a1", "", right(X2)], ["s3", "", wrong(X1)], ["s4", "", right(X2)]])
    res = grade(quiz, p, tmp_path / "out")
    assert book(res) == {"A1": ("1", "yes"), "a1": ("1", "yes"), "s3": ("0", "yes"), "s4": ("1", "yes"),
                         "s5": ("0", "no")}
    assert any("no response from 's5'" in w for w in res["warnings"])


def test_extra_row_stops_the_run_or_is_listed(quiz, tmp_path, cli):
    p = responses(tmp_path, [["A1", "", right(X1)], ["zz9", "Stranger", right(X1)]])
    rc, out, err = cli("grade", quiz, p, "-o", tmp_path / "out")
    assert rc == 2 and err.startswith("error: ") and err.count("\n") == 1
    assert "line 3" in err and "zz9" in err and "--allow-unmatched" in err
    assert not (tmp_path / "out").exists()
    rc, out, err = cli("grade", quiz, p, "-o", tmp_path / "out", "--allow-unmatched")
    assert rc == 0, err
    assert "zz9" in (tmp_path / "out" / "report.html").read_text()
    assert book({"gradebook": tmp_path / "out" / "gradebook.csv"})["A1"] == ("1", "yes")


def test_two_rows_for_one_student_stop_the_run(quiz, tmp_path):
    p = responses(tmp_path, [["A1", "", right(X1)], ["A1", "", wrong(X1)]])
    with pytest.raises(WorkedError, match=r"lines 2 and 3: two rows for 'A1'"):
        grade(quiz, p, tmp_path / "out")


def test_variant_code_matches_and_id_wins_over_name(quiz, tmp_path):
    """A row is matched by its id or code; a name that belongs to someone else does not move it."""
    p = responses(tmp_path, [["a1", "Ann Roe", wrong(X2)], ["", "", right(X1)]], header=("id", "name", ASK))
    with pytest.raises(WorkedError, match="line 3"):
        grade(quiz, p, tmp_path / "o")      # a row with no id, no code, no name
    p = responses(tmp_path, [["a1", "", wrong(X2)], ["", "k3f9", right(X1)]], header=("id", "variant", ASK))
    res = grade(quiz, p, tmp_path / "o")
    assert book(res)["a1"] == ("0", "yes") and book(res)["A1"] == ("1", "yes")


def test_id_and_code_of_different_students_is_ambiguous(quiz, tmp_path):
    p = responses(tmp_path, [["A1", "M7Q2", right(X1)]], header=("id", "variant", ASK))
    with pytest.raises(WorkedError, match=r"line 2 .*more than one student \(A1, a1\)"):
        grade(quiz, p, tmp_path / "o")


def test_grade_output_needs_force_to_overwrite(quiz, tmp_path, cli):
    p = responses(tmp_path, [["A1", "", right(X1)]])
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert cli("grade", quiz, p, "-o", out)[0] == 0
    before = (out / "gradebook.csv").read_bytes()
    rc, _, err = cli("grade", quiz, p, "-o", out)
    assert rc == 2 and "--force" in err and err.count("\n") == 1
    assert (out / "gradebook.csv").read_bytes() == before
    rc, _, err = cli("grade", quiz, p, "-o", out, "--force")
    assert rc == 0, err
    assert (out / "notes.txt").read_text() == "mine" and "notes.txt" in err


def test_semicolon_csv_is_read(quiz, tmp_path):
    p = tmp_path / "semi.csv"
    p.write_text(f"id;name;{ASK}\nA1;Ann Roe;{right(X1)}\na1;Bo Park;{wrong(X2)}\n")
    res = grade(quiz, p, tmp_path / "out")
    assert book(res)["A1"] == ("1", "yes") and book(res)["a1"] == ("0", "yes")
