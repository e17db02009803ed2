"""A variant of a quiz that mixes families ([[parts]]) on the server: its page gives every part (problem, view,
questions) in order, and its check scores each part against its own problem as `worked grade` does
(:func:`worked.grade.grade_student` on :attr:`worked.grade.Student.parts`), the total being the parts' sum."""
from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from conftest import run_cli
from worked import grade
from worked.problem import Problem
from worked.server.app import Config, create_app
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def quiz(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mixed") / "quiz"
    code, _, err = run_cli("quiz", str(ROOT / "problems" / "quiz-6-mixed.toml"), "-n", "1", "--format", "html", "-o",
                           str(folder), "--quiet", "--jobs", "1")
    assert code == 0, err
    return folder


def client(folder, **kw):
    return TestClient(create_app(Config(problems_dir=folder, **kw)), raise_server_exceptions=False)


def said_and_answers(variant):
    """Responses by question name (a wrong option, a slip, right values) and the page's answers to each part."""
    said, answers = {}, []
    for part in variant["parts"]:
        sol = solve(Problem.from_dict(part["problem"], source="test"))
        mats, grids = sol.matrices(), {}
        for q in part["questions"]:
            m = mats[q["matrix"]]
            grid = grids.setdefault(q["matrix"], [[""] * m.shape[1] for _ in range(m.shape[0])])
            if q.get("type") == "choice":
                said[q["name"]] = next(o for o in q["options"] if o["right"] == (q["name"] != "q1"))["letter"]
                e = q["entries"][0]
                grid[e["row"] - 1][e["col"] - 1] = said[q["name"]]
                continue
            vals = [m.dec_plain(e["row"] - 1, e["col"] - 1, 2) for e in q["entries"]]
            if q["name"] == "q3":
                vals[0] = f"{float(vals[0]) + 0.2:.2f}"
            for e, v in zip(q["entries"], vals):
                grid[e["row"] - 1][e["col"] - 1] = v
            said[q["name"]] = ", ".join(vals)
        answers.append(grids)
    return said, answers


def test_the_page_of_a_mixed_variant_holds_its_parts_in_order(quiz):
    v = json.loads((quiz / "manifest.json").read_text(encoding="utf-8"))["variants"][0]
    with client(quiz) as tc:
        r = tc.get("/api/variants/" + v["variant"].lower())
        assert r.status_code == 200, r.text
        data = r.json()
    assert data["code"] == v["variant"] and data["title"] == "Attention quiz 6 (mixed)"
    assert [p["title"] for p in data["parts"]] == [p["title"] for p in v["parts"]]
    for mine, theirs in zip(data["parts"], v["parts"]):
        assert mine["problem"] == Problem.from_dict(theirs["problem"], source="test").to_dict()
        assert [q["name"] for q in mine["questions"]] == [q["name"] for q in theirs["questions"]]
        assert {g["key"] for g in mine["view"]["grids"]} >= {q["matrix"] for q in theirs["questions"]}
        for q in mine["questions"]:       # no expected value, no right option
            assert "expected" not in q and all(set(o) == {"letter", "value"} for o in q.get("options", []))
    assert any(g["masked"] for g in data["parts"][1]["view"]["grids"])       # part 2 is causal


def test_a_mixed_variant_is_scored_per_part_as_worked_grade_scores_it(quiz):
    v = json.loads((quiz / "manifest.json").read_text(encoding="utf-8"))["variants"][0]
    said, answers = said_and_answers(v)
    with client(quiz) as tc:
        r = tc.post("/api/check?view=1", json={"variant": v["variant"], "answers": answers})
        assert r.status_code == 200, r.text
        report = r.json()
    student = grade.load_manifest(quiz).students[0]
    asks = {q["name"]: q["ask"] for p in v["parts"] for q in p["questions"]}
    graded = grade.grade_student(student, grade.Row(student.id, {asks[n]: t for n, t in said.items()}, 2), "test")
    assert [p["part"] for p in report["parts"]] == [1, 2, 3]
    for part, mine in zip(v["parts"], report["parts"]):
        assert [q["name"] for q in mine["questions"]] == [q["name"] for q in part["questions"]]
        for q in mine["questions"]:
            assert q["earned"] == pytest.approx(graded.scores[q["ask"]]), q
        assert mine["score"]["earned"] == pytest.approx(round(sum(graded.scores[q["ask"]] for q in part["questions"]), 2))
    assert report["score"] == {"earned": pytest.approx(graded.total), "points": 6}
    assert 0 < graded.total < 6
    wrong = report["parts"][0]["questions"][0]
    assert wrong["chosen"] == said["q1"] and wrong["mistake"]["code"] in graded.codes
    # ?view=1: the mistake's title as prose parts too, whose text is its title (the JSON's own title, unchanged)
    assert "".join(x["text"] for x in wrong["mistake"]["title_math"]) == wrong["mistake"]["title"]
    assert report["parts"][1]["matrices"]["weights"]["verdicts"][2].count("wrong") == 1     # the slip, where it is


def test_a_mixed_variant_s_answers_are_a_list_per_part_and_its_sheets_are_per_part(quiz):
    v = json.loads((quiz / "manifest.json").read_text(encoding="utf-8"))["variants"][0]
    with client(quiz, no_solutions=True) as tc:
        r = tc.post("/api/check", json={"variant": v["variant"], "answers": {"Z": [["1"]]}})
        assert r.status_code == 400 and "a list of 3 tables" in r.json()["error"], r.text
        r = tc.post("/api/check", json={"variant": v["variant"], "answers": [{}, {}, {"loss": [["1"]]}], "reveal": True})
        assert r.status_code == 200, r.text
        assert "expected" not in json.dumps(r.json())         # --no-solutions: no expected value leaves the server
        assert "_math" not in json.dumps(r.json())            # without ?view=1, no math for the page
        r = tc.get(f"/download/variants/{v['variant']}/worksheet.html")
        assert r.status_code == 404 and "3 parts" in r.json()["error"], r.text
