"""Checking answers: verdicts, error carried forward, bad answers, several heads, tolerance, the CLI."""
from __future__ import annotations

import json

import numpy as np
import pytest

from worked import printers
from worked.check import Tolerance, check_answers, parse_answers_text, read_answers
from worked.errors import WorkedError
from worked.problem import Problem, load
from worked.solver import solve

from conftest import PROBLEMS


@pytest.fixture(scope="module")
def cats():
    p = load(PROBLEMS / "cats-chase-mice.toml")
    return p, solve(p)


def dec(sol, key, places=2):
    m = sol.matrices()[key]
    return [[m.dec_plain(i, j, places) for j in range(m.shape[1])] for i in range(m.shape[0])]


def softmax_rows(T):
    e = np.exp(T - T.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_error_carried_forward(cats):
    """A wrong scaled-scores entry followed by weights computed correctly from it: the weights are marked
    consistent with the earlier step (carried forward), and the slip is counted once."""
    p, sol = cats
    scaled = np.array([[float(x) for x in row] for row in dec(sol, "scaled")])
    scaled[0, 1] = 3.83                          # a slip: 2.83 written as 3.83
    weights = np.round(softmax_rows(scaled), 2)
    answers = {"scaled": [[f"{x:.2f}" for x in row] for row in scaled],
               "weights": [[f"{x:.2f}" for x in row] for row in weights]}
    rep = check_answers(p, answers, solution=sol)
    d = rep.to_dict()
    assert d["matrices"]["scaled"]["counts"]["wrong"] == 1
    w = d["matrices"]["weights"]
    assert w["consistent_with_earlier"] is True and w["based_on"] == ["scaled"]
    assert w["counts"]["wrong"] == w["counts"]["carried_forward"] == 3      # the whole cats row, carried
    assert w["verdicts"][1] == ["correct"] * 3 and w["verdicts"][2] == ["correct"] * 3
    assert rep.diagnoses == []                                               # a slip is no misconception
    assert "Consistent with your earlier step (scaled)" in rep.text()
    assert d["summary"]["carried_forward"] == 3


def test_wrong_later_step_is_not_consistent(cats):
    """Weights that are neither right nor follow from the student's own scaled scores are plainly wrong."""
    p, sol = cats
    answers = {"scaled": dec(sol, "scaled"), "weights": dec(sol, "weights")}
    answers["scaled"][0][0] = "2.41"
    answers["weights"][1][1] = "0.43"
    d = check_answers(p, answers, solution=sol).to_dict()["matrices"]["weights"]
    assert d["consistent_with_earlier"] is False
    assert d["verdicts"][1][1] == "wrong" and d["carried_forward"][1][1] is False


def test_all_correct_in_many_forms(cats):
    """The shipped correct answers file (exact forms, fractions, decimals) is all correct."""
    p, sol = cats
    rep = check_answers(p, read_answers(PROBLEMS / "answers" / "cats-chase-mice-correct.toml"), solution=sol)
    s = rep.summary()
    assert s["wrong"] == 0 and s["blank"] == 0 and s["correct"] == 51 and rep.errors == []


def test_part9_page_slip_is_accepted_by_default_and_by_tolerance(cats):
    """z_cats = 0.48 (from the page's rounded weights) and 0.49 are both within the default band; an explicit
    tolerance of 0.001 rejects the early-rounded 0.48 (2.7% off), and 3% accepts it."""
    p, sol = cats
    for z in ("0.48", "0.49"):
        assert check_answers(p, {"Z": [[z, "?"], ["?", "?"], ["?", "?"]]}, solution=sol).summary()["correct"] == 1
    tight = check_answers(p, {"Z": [["0.48", "?"], ["?", "?"], ["?", "?"]]}, tolerance="0.001", solution=sol)
    assert tight.summary()["wrong"] == 1
    assert check_answers(p, {"Z": [["0.48", "?"], ["?", "?"], ["?", "?"]]}, tolerance="3%", solution=sol).summary()["correct"] == 1


def test_bad_answers_are_named_and_the_rest_still_checked(cats):
    """Unknown matrix, wrong shape and an unreadable entry each give a message naming matrix (and entry);
    the other answers are still checked."""
    p, sol = cats
    answers = {"scorez": [[1]], "scores": [[2, 4, 2], [3, 3, 3]], "weights": dec(sol, "weights"),
               "Z": dec(sol, "Z")}
    answers["weights"][0][1] = "0.6 7"
    answers["Z"][2][0] = "__import__('os')"
    rep = check_answers(p, answers, solution=sol)
    msgs = [e["message"] for e in rep.errors]
    assert any(m.startswith("scorez: unknown matrix") for m in msgs)
    assert any(m.startswith("scores: wrong shape: expected 3×3") for m in msgs)
    assert any(m.startswith("weights[1,2]: cannot read '0.6 7'") for m in msgs)
    assert any(m.startswith("Z[3,1]: cannot read") for m in msgs)
    d = rep.to_dict()
    assert "scores" not in d["matrices"]
    assert d["matrices"]["weights"]["verdicts"][0] == ["correct", "invalid", "correct"]
    assert d["matrices"]["Z"]["counts"] == {"correct": 5, "wrong": 0, "blank": 0, "invalid": 1, "carried_forward": 0}
    assert "scorez: unknown matrix" in rep.text()


def test_several_heads_flat_and_nested_keys_agree():
    """With several heads, "head2.scaled" keys and nested tables ([head2] in TOML) give the same report; a
    mistake in head 2 is named with head 2's step."""
    p = load(PROBLEMS / "two-heads.toml")
    sol = solve(p)
    scores2 = [[float(x) for x in row] for row in dec(sol, "head2.scores")]
    bad = softmax_rows(np.array(scores2))                  # head 2 without scaling
    rows = [[f"{x:.2f}" for x in row] for row in bad]
    flat = check_answers(p, {"head2.weights": rows, "head1.Q": dec(sol, "head1.Q")}, solution=sol)
    toml = "[head2]\nweights = " + json.dumps(rows) + "\n[head1]\nQ = " + json.dumps(dec(sol, "head1.Q")) + "\n"
    nested = check_answers(p, parse_answers_text(toml, "a.toml"), solution=sol)
    assert flat.to_dict() == nested.to_dict()
    (d,) = flat.diagnoses
    step = [s for s in sol.steps if s.result == "head2.scaled"][0]
    assert d["code"] == "no-scaling" and d["head"] == 2 and d["step"]["title"] == printers.text(step.title_prose)
    bare = check_answers(p, {"Q": dec(sol, "head1.Q")}, solution=sol)
    assert "several heads" in bare.errors[0]["message"]


def test_causal_masked_scores(cats):
    """In a causal problem, masked scores are answered as -inf/−∞; a number there is wrong."""
    p = load(PROBLEMS / "causal-mask.toml")
    sol = solve(p)
    good = dec(sol, "scores")
    rep = check_answers(p, {"scores": good}, solution=sol)
    assert rep.summary()["wrong"] == 0 and good[0][2] == "-inf"
    good[0][2] = "2"
    assert check_answers(p, {"scores": good}, solution=sol).to_dict()["matrices"]["scores"]["verdicts"][0][2] == "wrong"


def test_tolerance_parsing():
    """--tolerance reads 0.01 (absolute), 2% (relative) and abs=…,rel=…; nonsense is a one-line error."""
    assert Tolerance.parse("0.01") == Tolerance(abs=0.01)
    assert Tolerance.parse("2%") == Tolerance(rel=0.02)
    assert Tolerance.parse("abs=0.01,rel=5%") == Tolerance(abs=0.01, rel=0.05)
    assert Tolerance.parse(None).default
    for bad in ("abc", "-1", "nan"):
        with pytest.raises(WorkedError):
            Tolerance.parse(bad)


def test_cli_text_json_and_exit_codes(cli, tmp_path):
    """`worked check` prints the table and diagnoses (exit 1 when something is wrong, 0 when all correct);
    --format json is Report.to_dict(); an unreadable answers file is a one-line error, exit 2."""
    prob = PROBLEMS / "cats-chase-mice.toml"
    code, out, err = cli("check", prob, PROBLEMS / "answers" / "cats-chase-mice-no-scaling.toml")
    assert code == 1 and "no-scaling" in out and "✗" in out and "↪" in out and "Re-read Step 5" in out
    code, out, err = cli("check", prob, PROBLEMS / "answers" / "cats-chase-mice-correct.toml")
    assert code == 0 and "51 of 51 entries correct" in out
    code, out, err = cli("check", prob, PROBLEMS / "answers" / "cats-chase-mice-column-softmax.json", "--format", "json")
    p = load(prob)
    expected = check_answers(p, read_answers(PROBLEMS / "answers" / "cats-chase-mice-column-softmax.json")).to_dict()
    assert json.loads(out) == expected and expected["diagnoses"][0]["code"] == "column-softmax"
    bad = tmp_path / "a.toml"
    bad.write_text("scores = [[1, 2]\n")
    code, out, err = cli("check", prob, bad)
    assert code == 2 and err.startswith(f"error: {bad}: not valid TOML") and len(err.strip().splitlines()) == 1


def test_single_problem_from_lists_with_problem_api():
    """check_answers works on a Problem built in code, solving it itself."""
    p = Problem([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 2], [3, 4]], decimals=3)
    rep = check_answers(p, {"scores": [[1, 0], [0, 1]], "scaled": [["1/√2", 0], [0, "0.707"]]})
    assert rep.summary() == {"correct": 8, "wrong": 0, "blank": 0, "invalid": 0, "carried_forward": 0, "answered": 8,
                            "explained": 0, "unexplained": 0, "mistakes": []}


def test_a_kept_checker_gives_the_reports_of_fresh_checks():
    """One Checker per problem, used for many students' answers under several tolerances in turn (what the server
    keeps per problem), gives byte for byte the JSON and text that a fresh check_answers gives each time; with
    diagnose=False, the same verdicts and carried-forward marks, and no diagnoses."""
    import random

    from worked.check import Checker

    rng = random.Random(11)
    for name in ("cats-chase-mice", "two-heads", "causal-mask", "cats-chase-mice-train", "decimal-inputs"):
        p = load(PROBLEMS / f"{name}.toml")
        sol = solve(p)
        key = {k: dec(sol, k, p.decimals) for k in sol.matrices()}
        students = [key]
        for n in range(4):
            a = json.loads(json.dumps(key))
            for _ in range(n + 1):      # a slip or a whole row wrong, somewhere
                k = rng.choice(sorted(a))
                i = rng.randrange(len(a[k]))
                a[k][i] = [str(rng.randint(-3, 3)) for _ in a[k][i]]
            students.append(a)
        checker = Checker(p)
        for a in students + students[::-1]:
            for tol in (None, "0.01", "2%"):
                fresh = check_answers(p, a, tolerance=tol, reveal=True)
                kept = checker.check(a, tolerance=tol, reveal=True)
                assert json.dumps(kept.to_dict()) == json.dumps(fresh.to_dict()), (name, tol)
                assert kept.text() == fresh.text()
                quick = checker.check(a, tolerance=tol, diagnose=False).to_dict()
                for m, mq in zip(fresh.to_dict()["matrices"].values(), quick["matrices"].values()):
                    assert (mq["verdicts"], mq["carried_forward"]) == (m["verdicts"], m["carried_forward"])
                assert quick["diagnoses"] == []


def test_checking_answers_builds_no_worked_line(monkeypatch):
    """A solution's values and step headings come at once; its lines, and the hand pass they show, only when
    read: a check (which needs the values and the headings) makes neither, and the report names the steps."""
    import worked.solver as S

    p = load(PROBLEMS / "cats-chase-mice.toml")
    right = solve(p)
    answers = {"scores": dec(right, "scores"), "weights": dec(right, "weights")}
    answers["weights"][0][0] = "0.99"

    def no_hand_pass(*args, **kwargs):
        raise AssertionError("the hand pass was made")

    monkeypatch.setattr(S, "hand_pass", no_hand_pass)
    rep = check_answers(p, answers).to_dict()
    assert rep["matrices"]["scores"]["verdicts"][0] == ["correct"] * 3
    assert rep["matrices"]["weights"]["verdicts"][0][0] == "wrong"
    assert rep["matrices"]["weights"]["step"]["title"] == "Attention weights: A = softmax of each row"
    sol = S.solve(p)
    assert [s.title_prose for s in sol.steps] == [s.title_prose for s in right.steps]
    with pytest.raises(AssertionError, match="hand pass"):
        sol.steps[0].lines
