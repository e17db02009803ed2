"""The quiz builder's form on the server (issue 29): a spec's tables written as the TOML `worked quiz` reads
(:func:`worked.server.quizform.spec_toml`), checked as the form is typed (POST /api/quiz-form: each question's
error in the spec reader's words, the matrices for the ask picker), and POST /api/quiz from the tables making the
command's quiz; the diagnoses' math (POST /api/check?view=1) as MathML from their prose."""
from __future__ import annotations

import io
import json
import tomllib
import zipfile

import pytest
from test_serve_api import PROBLEMS, TestClient  # (it skips where Starlette or httpx is missing)

from worked import printers
from worked.check import read_answers
from worked.errors import WorkedError
from worked.mistakes import MISTAKES
from worked.problem import load
from worked.server.app import Config, create_app
from worked.server.quizform import form, spec_toml
from worked.server.views import safe_mathml

SPECS = sorted(PROBLEMS.glob("quiz-*.toml"))

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def c():
    return TestClient(create_app(Config(problems_dir=PROBLEMS)), raise_server_exceptions=False)


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_every_shipped_spec_is_written_back_table_for_table_and_makes_a_quiz(path):
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    assert tomllib.loads(spec_toml(data)) == data
    out = form(data)
    assert out["error"] is None and out["toml"] == spec_toml(data)
    assert len(out["parts"]) == len(data.get("parts", [data]))
    for part, given in zip(out["parts"], data.get("parts", [data])):
        assert part["family_error"] is None and part["matrices"]
        assert [q["error"] for q in part["questions"]] == [None] * len(given["questions"])
        keys = {m["key"] for m in part["matrices"]}
        for q in given["questions"]:
            assert q["ask"].split("[")[0] in keys | {"A"}


def test_strings_are_escaped_as_toml_and_nothing_but_data_is_written():
    data = {"title": 'a "quoted" title\nwith a line, a tab\t, DEL \x7f, é and 𝑥', "seed": 3,
            "family": {"tokens": 3, "range": [-2, 3], "max_weight": 0.9, "ties": False},
            "questions": [{"ask": "Z[1,2]", "tolerance": {"abs": 1e-05, "rel": 0.02}}]}
    text = spec_toml(data)
    assert tomllib.loads(text) == data
    assert "\x7f" not in text and "\\u007F" in text
    for bad in ({"title": float("nan")}, {"family": {"tokens": object()}}, {"family": "three"},
                {"questions": [[[[[[1]]]]]]}):
        with pytest.raises(WorkedError) as exc:
            spec_toml(bad)
        assert str(exc.value).startswith("quiz spec: ")


def test_each_question_s_error_is_at_its_row_in_the_spec_reader_s_words():
    data = tomllib.loads((PROBLEMS / "quiz-6-mixed.toml").read_text(encoding="utf-8"))
    data["parts"][0]["questions"][0]["ask"] = "weights[2,*]"          # a choice question asks one value
    data["parts"][1]["questions"][0]["ask"] = "wieghts[3,1]"
    data["parts"][2]["questions"][1]["tolerance"] = 0
    data["parts"][2]["family"]["tokens"] = 1
    out = form(data)
    assert out["error"]["field"] == "parts[1].questions[1].ask"
    (q1, q2), (q3,), (q4, q5) = (p["questions"] for p in out["parts"])
    assert q1["error"]["field"] == "ask" and "a choice question asks one value" in q1["error"]["message"]
    assert q1["error"]["message"].startswith("quiz spec: parts[1].questions[1].ask: ")
    assert q2["error"] is None
    assert q3["error"]["message"].startswith("quiz spec: parts[2].questions[1].ask: unknown matrix 'wieghts'")
    fam = out["parts"][2]["family_error"]
    assert fam["field"] == "parts[3].family.tokens" and "tokens" in fam["message"]
    assert out["parts"][2]["matrices"] == [] and q4["error"] is None and q5["error"] is None   # (its family first)
    data["parts"][2]["family"]["tokens"] = 3
    q5 = form(data)["parts"][2]["questions"][1]
    assert q5["error"]["field"] == "tolerance" and "parts[3].questions[2].tolerance" in q5["error"]["message"]


def test_the_form_route_and_a_quiz_from_the_tables(c, tmp_path, cli):
    data = tomllib.loads((PROBLEMS / "quiz-5-choice.toml").read_text(encoding="utf-8"))
    r = c.post("/api/quiz-form", json={"spec": data})
    assert r.status_code == 200 and r.json()["error"] is None
    assert r.json()["toml"] == spec_toml(data)                # the floats arrive as floats (0.01, not "0.01")
    assert {m["key"]: (m["rows"], m["cols"]) for m in r.json()["parts"][0]["matrices"]}["weights"] == (3, 3)
    assert c.post("/api/quiz-form", json={"spec": "title = 1"}).status_code == 400
    r = c.post("/api/quiz", json={"spec": {**data, "count": 2}, "formats": "html,gift"})
    assert r.status_code == 200, r.text
    (tmp_path / "spec.toml").write_text(spec_toml({**data, "count": 2}), encoding="utf-8")
    code, _, err = cli("quiz", tmp_path / "spec.toml", "--format", "html,gift", "-o", tmp_path / "out", "--quiet")
    assert code == 0, err
    assert zipfile.ZipFile(io.BytesIO(r.content)).read("manifest.json") == (tmp_path / "out" / "manifest.json").read_bytes()
    assert TestClient(create_app(Config(problems_dir=PROBLEMS, no_solutions=True))).post(
        "/api/quiz-form", json={"spec": data}).status_code == 403


def test_a_check_with_view_writes_the_diagnoses_math_and_without_it_is_worked_check_s(c):
    problem = load(PROBLEMS / "cats-chase-mice.toml")
    answers = read_answers(PROBLEMS / "answers" / "cats-chase-mice-no-scaling.toml")
    plain = c.post("/api/check", json={"problem": problem.to_dict(), "answers": answers}).json()
    seen = c.post("/api/check?view=1", json={"problem": problem.to_dict(), "answers": answers}).json()
    d = next(x for x in seen["diagnoses"] if x["code"] == "no-scaling")
    assert "message_math" not in json.dumps(plain) and "title_math" not in json.dumps(plain)
    assert "".join(p["text"] for p in d["message_math"]) == d["message"]
    maths = [p["mathml"] for p in d["message_math"] if "mathml" in p]
    assert maths and all(safe_mathml(m) == m for m in maths)
    assert printers.text(MISTAKES["no-scaling"].message_prose(problem)) == d["message"]
    assert "".join(p["text"] for p in d["step"]["title_math"]) == d["step"]["title"]
    assert any("<msqrt>" in p.get("mathml", "") for p in d["step"]["title_math"])
