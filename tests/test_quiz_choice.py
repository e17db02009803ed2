"""Choice questions (``type = "choice"``): the wrong options are the values named mistakes give; the exports
(Moodle XML multichoice, GIFT read by gift-pegjs, Canvas QTI multiple_choice_question), the sheets, ``worked
grade`` and the web page's quiz check."""
from __future__ import annotations

import io
import json
import math
import re
import warnings
import xml.etree.ElementTree as ET
import zipfile
from decimal import Decimal

import pytest

from worked import choice
from worked.attention import Float, forward
from worked.errors import ProblemError, WorkedError
from worked.mistakes import MISTAKES
from worked.quiz import draw_problem, load_spec, plan, run, spec_from_dict

from conftest import PROBLEMS
from lms_readers import gift_parse, needs_node, strip_tags

SPEC = PROBLEMS / "quiz-5-choice.toml"
FAMILY = {"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3], "mask": "none"}


def _spec(*questions, **top):
    return spec_from_dict({"title": "Choice", "seed": 7, "family": dict(FAMILY), "questions": list(questions), **top},
                          "spec.toml")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("choice") / "q"
    run(SPEC, count=4, outdir=out, formats="moodle,qti,gift,html", jobs=1, quiet=True)
    return out, json.loads((out / "manifest.json").read_text())


def _choice_questions(man):
    return [(v, q) for v in man["variants"] for q in v["questions"] if q.get("type") == "choice"]


def test_options_are_the_right_value_and_the_named_mistakes_values(batch):
    _, man = batch
    spec = load_spec(SPEC)
    letters = set()
    assert len(_choice_questions(man)) == 8
    for v, q in _choice_questions(man):
        opts = q["options"]
        n = next(s.choices for s in spec.questions if s.name == q["name"])
        assert [o["letter"] for o in opts] == list("ABCDEFGH"[:n])
        right = [o for o in opts if o["right"]]
        assert len(right) == 1 and right[0]["value"] == q["entries"][0]["answer"]
        letters.add(right[0]["letter"])
        values = [Decimal(o["value"]) for o in opts]
        assert len(set(values)) == len(values)          # distinct at the places shown, none equal to the right one
        from worked.problem import Problem
        problem = Problem.from_dict(v["problem"])
        i, j = q["entries"][0]["row"] - 1, q["entries"][0]["col"] - 1
        for o in opts:
            if o["right"]:
                continue
            m = MISTAKES[o["mistake"]]
            assert o["feedback"] == m.answer_feedback and o["title"] == m.title
            # the option is that mistake's value at the cell, rounded to the places shown
            got = [forward(problem, Float(), transform=t).matrices()[q["matrix"]][i][j] for t in m.transforms(problem)]
            assert any(choice.shown(w, problem.decimals) == Decimal(o["value"]) for w in got if math.isfinite(w))
    assert len(letters) > 1          # shuffled: the right option is not always at the same letter


def test_same_seed_same_options_and_too_few_redraws(tmp_path):
    spec = _spec({"ask": "weights[2,3]", "type": "choice", "choices": 5}, seed=2030)
    vs = plan(spec.seed, count=10)
    a = [draw_problem(spec, v) for v in vs]
    b = [draw_problem(spec, v) for v in vs]
    assert [x[3] for x in a] == [x[3] for x in b]
    # where the mistakes give too few distinct values, the variant was drawn again (the same way for the same seed)
    assert any(x[2] > 0 for x in a) and [x[2] for x in a] == [x[2] for x in b]
    assert all(len(x[3][0]["options"]) == 5 for x in a)


def test_an_entry_too_few_mistakes_change_is_a_one_line_error(tmp_path):
    path = tmp_path / "few.toml"
    path.write_text('seed = 1\n[family]\ntokens = 3\nd_model = 4\nd_k = 2\n'
                    '[[questions]]\nask = "scores[2,1]"\ntype = "choice"\nchoices = 3\n')
    with pytest.raises(WorkedError, match=r"few.toml: questions: .*scores\[2,1\].*fewer choices"):
        run(path, count=1, outdir=tmp_path / "o", formats="html", jobs=1, quiet=True)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("q, field, words", [
    ({"ask": "weights[1,*]", "type": "choice"}, "questions[1].ask", "names one entry"),
    ({"ask": "Z[1,1]", "type": "pick"}, "questions[1].type", '"choice"'),
    ({"ask": "Z[1,1]", "type": "choice", "choices": 1}, "questions[1].choices", "from 2 to 8"),
    ({"ask": "Z[1,1]", "type": "choice", "choices": True}, "questions[1].choices", "from 2 to 8"),
    ({"ask": "Z[1,1]", "choices": 3}, "questions[1].choices", 'type = "choice"'),
])
def test_spec_errors_name_the_field(q, field, words):
    with pytest.raises(ProblemError) as exc:
        _spec(q)
    assert field in str(exc.value) and words in str(exc.value) and "\n" not in str(exc.value)


def test_a_scalar_may_be_a_choice_question():
    fam = dict(FAMILY, train=True)
    spec = spec_from_dict({"seed": 3, "family": fam, "questions": [{"ask": "loss", "type": "choice", "choices": 3}]},
                          "s.toml")
    _, _, _, qs = draw_problem(spec, plan(3, count=1)[0])
    assert len(qs[0]["options"]) == 3 and sum(o["right"] for o in qs[0]["options"]) == 1


def test_moodle_multichoice(batch):
    out, man = batch
    root = ET.parse(out / "moodle.xml").getroot()
    mc = root.findall("question[@type='multichoice']")
    assert len(mc) == len(_choice_questions(man))
    for el, (v, q) in zip(mc, _choice_questions(man)):
        assert el.findtext("single") == "true" and el.findtext("shuffleanswers") == "true"
        # Moodle shows the combined feedback after the option's own: blank, or the right one says "Correct." twice
        assert [el.findtext(f"{k}feedback/text") for k in ("correct", "partiallycorrect", "incorrect")] == ["", "", ""]
        assert el.findtext("idnumber") == f"{v['variant']}-{q['name']}"
        answers = el.findall("answer")
        assert [(a.findtext("text"), a.get("fraction")) for a in answers] == [
            (o["value"], "100" if o["right"] else "0") for o in q["options"]]
        for a, o in zip(answers, q["options"]):
            fb = a.findtext("feedback/text")
            assert fb == ("Correct." if o["right"] else o["feedback"]) and (o["right"] or f"[{o['mistake']}]" in fb)
    # the value question stays numerical in the same variant category
    assert len(root.findall("question[@type='numerical']")) == len(man["variants"])


@needs_node
def test_gift_multiple_choice_as_gift_pegjs_reads_it(batch):
    out, man = batch
    parsed = [p for p in gift_parse((out / "quiz.gift.txt").read_text()) if p["type"] in ("MC", "Numerical")]
    mc = [p for p in parsed if p["type"] == "MC"]
    assert len(mc) == len(_choice_questions(man))
    for p, (v, q) in zip(mc, _choice_questions(man)):
        assert p["id"] == f"{v['variant']}-{q['name']}"
        assert [(c["text"]["text"], c["isCorrect"]) for c in p["choices"]] == [(o["value"], o["right"]) for o in q["options"]]
        for c, o in zip(p["choices"], q["options"]):
            assert strip_tags(c["feedback"]["text"]) == ("Correct." if o["right"] else o["feedback"])


def test_canvas_multiple_choice_in_its_question_group(batch):
    out, man = batch
    z = zipfile.ZipFile(io.BytesIO((out / "canvas-qti.zip").read_bytes()))
    ns = {"q": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"}
    doc = ET.fromstring(next(z.read(n) for n in z.namelist() if n.count("/") == 1 and not n.endswith("meta.xml")))
    sections = doc.findall("q:assessment/q:section/q:section", ns)
    assert len(sections) == 3            # one group per question: each draws one variant's item
    for sec in sections:
        assert sec.findtext("q:selection_ordering/q:selection/q:selection_number", namespaces=ns) == "1"
    by_title = {}
    for item in doc.iter("{%s}item" % ns["q"]):
        by_title[item.get("title")] = item
    for v, q in _choice_questions(man):
        item = by_title[f"{v['variant']} {q['name']} {q['ask']}"]
        meta = {f.findtext("q:fieldlabel", namespaces=ns): f.findtext("q:fieldentry", namespaces=ns)
                for f in item.iter("{%s}qtimetadatafield" % ns["q"])}
        assert meta["question_type"] == "multiple_choice_question"
        labels = item.findall("q:presentation/q:response_lid/q:render_choice/q:response_label", ns)
        assert [lab.findtext("q:material/q:mattext", namespaces=ns) for lab in labels] == [o["value"] for o in q["options"]]
        ids = {o["letter"]: lab.get("ident") for lab, o in zip(labels, q["options"])}
        scoring = [c for c in item.iter("{%s}respcondition" % ns["q"]) if c.find("q:setvar", ns) is not None]
        assert len(scoring) == 1 and scoring[0].findtext("q:setvar", namespaces=ns) == "100"
        right = next(o for o in q["options"] if o["right"])
        assert scoring[0].findtext("q:conditionvar/q:varequal", namespaces=ns) == ids[right["letter"]]
        fb = {f.get("ident"): f.findtext("q:flow_mat/q:material/q:mattext", namespaces=ns)
              for f in item.findall("q:itemfeedback", ns)}
        for o in q["options"]:
            assert fb[ids[o["letter"]] + "_fb"] == ("Correct." if o["right"] else o["feedback"])


def test_sheets_show_the_options_and_the_key_names_the_mistakes(batch):
    out, man = batch
    v = man["variants"][0]
    ws = (out / "variants" / v["variant"] / "worksheet.html").read_text()
    key = (out / "variants" / v["variant"] / "answer-key.html").read_text()
    for q in v["questions"]:
        for o in q.get("options", []):
            assert f"({o['letter']})" in ws and f"({o['letter']})" in key
            if not o["right"]:
                assert f"[{o['mistake']}]" in key and f"[{o['mistake']}]" not in ws
    assert "✓ right" in key and "✓ right" not in ws


def _responses(man, pick):
    rows = ["variant,q1,q2,q3"]
    for v in man["variants"]:
        cells = [pick(q) if q.get("type") == "choice" else str(q["expected"]) for q in v["questions"]]
        rows.append(",".join([v["variant"], *cells]))
    return "\n".join(rows) + "\n"


def test_grade_takes_a_letter_or_a_value(batch, tmp_path):
    from worked.grade import grade

    out, man = batch
    right = lambda q: next(o for o in q["options"] if o["right"])      # noqa: E731
    wrong = lambda q: next(o for o in q["options"] if not o["right"])  # noqa: E731
    cases = {"letter": lambda q: right(q)["letter"].lower(), "value": lambda q: right(q)["value"],
             "wrong": lambda q: wrong(q)["letter"]}
    for name, pick in cases.items():
        (tmp_path / f"{name}.csv").write_text(_responses(man, pick))
        grade(out, tmp_path / f"{name}.csv", tmp_path / name, force=True)
        rows = list(__import__("csv").DictReader(open(tmp_path / name / "gradebook.csv")))
        assert len(rows) == len(man["variants"])
        for r, v in zip(rows, man["variants"]):
            qs = v["questions"]
            if name == "wrong":
                assert (r[qs[0]["ask"]], r[qs[1]["ask"]], r["total"]) == ("0", "0", "1")
                for q in qs[:2]:
                    assert wrong(q)["mistake"] in r["misconceptions"]
            else:
                assert r["total"] == "3", (name, r)


def test_the_web_pages_quiz_check_takes_an_option(batch):
    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    out, man = batch
    tc = TestClient(create_app(Config(problems_dir=out)), raise_server_exceptions=False)
    v = man["variants"][0]
    q1 = v["questions"][0]
    listed = tc.get(f"/api/variants/{v['variant']}").json()["questions"][0]
    assert listed["type"] == "choice" and listed["options"] == [{"letter": o["letter"], "value": o["value"]}
                                                                for o in q1["options"]]
    assert "right" not in json.dumps(listed) and "mistake" not in json.dumps(listed)
    shape = q1["shape"]
    i, j = q1["entries"][0]["row"] - 1, q1["entries"][0]["col"] - 1
    for o in q1["options"]:
        for typed in (o["letter"], o["value"]):
            grid = [["" for _ in range(shape[1])] for _ in range(shape[0])]
            grid[i][j] = typed
            r = tc.post("/api/check", json={"variant": v["variant"], "answers": {q1["matrix"]: grid}})
            assert r.status_code == 200, r.text
            got = r.json()
            assert got["questions"][0]["earned"] == (q1["points"] if o["right"] else 0)
            assert got["matrices"][q1["matrix"]]["verdicts"][i][j] == ("correct" if o["right"] else "wrong")


@pytest.mark.parametrize("options, words", [
    ("A", "expected the list of a choice question's options"),
    ([{"letter": "A", "value": "0.5", "right": True}, {"letter": "B", "value": "x", "right": False}], "options[2]"),
    ([{"letter": "A", "value": "0.5", "right": True}, {"letter": "B", "value": "0.6", "right": True}], "exactly one"),
])
def test_grade_refuses_a_manifest_with_bad_options_in_one_line(batch, tmp_path, options, words):
    from worked.grade import load_manifest

    _, man = batch
    bad = json.loads(json.dumps(man))
    bad["variants"][0]["questions"][0]["options"] = options
    (tmp_path / "manifest.json").write_text(json.dumps(bad))
    with pytest.raises(WorkedError) as exc:
        load_manifest(tmp_path)
    msg = str(exc.value)
    assert "manifest.json" in msg and "students[1].questions[1].options" in msg and words in msg and "\n" not in msg


def test_a_response_that_is_none_of_the_options_earns_nothing_and_is_named(batch, tmp_path):
    from worked.grade import grade

    out, man = batch
    (tmp_path / "r.csv").write_text(_responses(man, lambda q: "Z"))
    grade(out, tmp_path / "r.csv", tmp_path / "g", force=True)
    rows = list(__import__("csv").DictReader(open(tmp_path / "g" / "gradebook.csv")))
    assert all(r["total"] == "1" for r in rows)
    report = (tmp_path / "g" / "report.html").read_text()
    assert "is none of the options" in report
