"""Quizzes that mix families (``[[parts]]``): one problem per part in every variant, the sheets with the parts in
order, the manifest listing each part's problem, every export carrying all parts (a variant's questions in one
Moodle category), ``worked grade`` per part, and the same bytes for the same seed."""
from __future__ import annotations

import csv
import io
import json
import xml.etree.ElementTree as ET
import zipfile

import pytest

from worked.errors import ProblemError
from worked.lms import all_questions, sections
from worked.problem import Problem
from worked.quiz import part_seed, run, spec_from_dict

from conftest import PROBLEMS
from lms_readers import gift_parse, moodle_category_levels, moodle_gift_category, needs_node

SPEC = PROBLEMS / "quiz-6-mixed.toml"


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("parts") / "q"
    run(SPEC, count=3, outdir=out, formats="pdf,html,moodle,qti,gift", jobs=1, quiet=True)
    return out, json.loads((out / "manifest.json").read_text())


def test_each_variant_draws_one_problem_per_part(batch):
    _, man = batch
    assert [p["title"] for p in man["parts"]] == ["Attention quiz 6 (mixed) — Self-attention",
                                                  "Attention quiz 6 (mixed) — Causal attention",
                                                  "Attention quiz 6 (mixed) — A training step"]
    for v in man["variants"]:
        assert "problem" not in v and [p["part"] for p in v["parts"]] == [1, 2, 3]
        problems = [Problem.from_dict(p["problem"]) for p in v["parts"]]
        assert [p.mask for p in problems] == ["none", "causal", "none"]
        assert [p.train is not None for p in problems] == [False, False, True]
        assert [p["seed"] for p in v["parts"]] == [part_seed(v["seed"], k) for k in (1, 2, 3)]
        assert [q["name"] for q in all_questions(v)] == ["q1", "q2", "q3", "q4", "q5"]
        assert [q["ask"] for q in v["parts"][2]["questions"]] == ["loss", "Z[2,1]"]


def test_the_sheets_hold_the_parts_in_order(batch):
    from pypdf import PdfReader

    out, man = batch
    v = man["variants"][0]
    for doc in ("worksheet", "answer-key"):
        pages = [p.extract_text() for p in PdfReader(out / "variants" / v["variant"] / f"{doc}.pdf").pages]
        starts = [next(i for i, t in enumerate(pages) if p["title"] in t) for p in v["parts"]]
        assert starts == sorted(starts) and starts[0] == 0 and all(s % 2 == 0 for s in starts)
        for k in (1, 2, 3):
            html = (out / "variants" / v["variant"] / f"{doc}-part{k}.html").read_text()
            assert v["parts"][k - 1]["title"] in html


def test_moodle_keeps_a_variants_questions_in_one_category(batch):
    out, man = batch
    root = ET.parse(out / "moodle.xml").getroot()
    category, seen = None, {}
    for q in root:
        if q.get("type") == "category":
            category = moodle_category_levels(q.findtext("category/text"))[-1]
            continue
        seen.setdefault(category, []).append(q.findtext("idnumber"))
    assert seen == {f"Variant {v['variant']}": [f"{v['variant']}-q{k}" for k in range(1, 6)] for v in man["variants"]}
    kinds = [q.get("type") for q in root if q.get("type") != "category"][:5]
    assert kinds == ["multichoice", "numerical", "cloze", "numerical", "multichoice"]


@needs_node
def test_gift_carries_every_part(batch):
    out, man = batch
    text = (out / "quiz.gift.txt").read_text()
    parsed = gift_parse(text)
    lines = [ln for ln in text.splitlines() if ln.startswith("$CATEGORY:")]
    cats = [moodle_category_levels(moodle_gift_category(ln))[-1] for ln in lines]
    assert len(lines) == len([p for p in parsed if p["type"] == "Category"])
    assert cats == [f"Variant {v['variant']}" for v in man["variants"]]
    ids = [p["id"] for p in parsed if p["type"] != "Category"]
    # one per answered cell (the row question is three numerical ones), a choice question one
    per_variant = ["q1", "q2", "q3-3-1", "q3-3-2", "q3-3-3", "q4", "q5"]
    assert ids == [f"{v['variant']}-{n}" for v in man["variants"] for n in per_variant]
    for v in man["variants"]:
        for s in sections(v):       # each question's text names its part and shows its problem
            assert s["part_title"] in text


def test_canvas_has_a_group_per_question_of_every_part(batch):
    out, man = batch
    z = zipfile.ZipFile(io.BytesIO((out / "canvas-qti.zip").read_bytes()))
    ns = {"q": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"}
    doc = ET.fromstring(next(z.read(n) for n in z.namelist() if n.count("/") == 1 and not n.endswith("meta.xml")))
    groups = doc.findall("q:assessment/q:section/q:section", ns)
    assert [g.get("title") for g in groups] == ["q1 weights[2,3]", "q2 scores[1,2]", "q3 weights[3,*] — weights[3,1]",
                                               "q3 weights[3,*] — weights[3,2]", "q3 weights[3,*] — weights[3,3]",
                                               "q4 loss", "q5 Z[2,1]"]
    for g in groups:
        items = g.findall("q:item", ns)
        assert len(items) == len(man["variants"])
    types = [f.findtext("q:fieldentry", namespaces=ns) for g in groups for f in g.iter("{%s}qtimetadatafield" % ns["q"])
             if f.findtext("q:fieldlabel", namespaces=ns) == "question_type"]
    assert types.count("multiple_choice_question") == 2 * len(man["variants"])
    meta = z.read(next(n for n in z.namelist() if n.endswith("assessment_meta.xml"))).decode()
    assert "<points_possible>6.0</points_possible>" in meta


def test_grade_checks_each_part_against_its_own_problem(batch, tmp_path):
    from worked.grade import grade

    out, man = batch
    rows = ["variant,q1,q2,q3,q4,q5"]
    for v in man["variants"]:
        cells = []
        for q in all_questions(v):
            if q.get("type") == "choice":
                cells.append(next(o["letter"] for o in q["options"] if o["right"]))
            else:
                cells.append('"' + " ".join(e["answer"] for e in q["entries"]) + '"')
        rows.append(",".join([v["variant"], *cells]))
    (tmp_path / "r.csv").write_text("\n".join(rows) + "\n")
    grade(out, tmp_path / "r.csv", tmp_path / "g", force=True)
    got = list(csv.DictReader(open(tmp_path / "g" / "gradebook.csv")))
    assert [(r["variant"], r["total"], r["out_of"]) for r in got] == [(v["variant"], "6", "6") for v in man["variants"]]


def test_same_seed_same_bytes(tmp_path):
    a = run(SPEC, count=2, outdir=tmp_path / "a", formats="moodle,qti,gift,html", jobs=1, quiet=True)[0]
    b = run(SPEC, count=2, outdir=tmp_path / "b", formats="moodle,qti,gift,html", jobs=2, quiet=True)[0]
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file() and not p.name.startswith("."))
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file() and not p.name.startswith("."))
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n


@pytest.mark.parametrize("data, field", [
    ({"parts": [{"family": {"tokens": 3}, "questions": [{"ask": "Z[1,1]"}]}], "family": {}}, "family"),
    ({"parts": []}, "parts"),
    ({"parts": [{"family": {"tokens": 3}, "questions": [{"ask": "Z[1,1]"}], "mask": 1}]}, "parts[1].mask"),
    ({"parts": [{"family": {"tokens": 0}, "questions": [{"ask": "Z[1,1]"}]}]}, "parts[1].family.tokens"),
    ({"parts": [{"family": {"tokens": 3}, "questions": [{"ask": "Z[9,1]"}]}]}, "parts[1].questions[1].ask"),
    ({"parts": [{"family": {"tokens": 3}, "questions": [{"ask": "Z[1,1]"}]},
                {"family": {"tokens": 3, "mask": "causal"}, "questions": [{"ask": "Z[1,1]"}]}]},
     "parts[2].questions[1].ask"),
])
def test_spec_errors_name_the_part(data, field):
    with pytest.raises(ProblemError) as exc:
        spec_from_dict(dict(data, seed=1), "mixed.toml")
    assert f"mixed.toml: {field}:" in str(exc.value) or f"{field}:" in str(exc.value), str(exc.value)


def test_the_web_page_serves_a_mixed_variant_part_by_part(batch):
    """(tests/test_serve_mixed_variant.py checks it as worked grade does.)"""
    import warnings

    pytest.importorskip("starlette")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    out, man = batch
    with TestClient(create_app(Config(problems_dir=out)), raise_server_exceptions=False) as tc:
        r = tc.get(f"/api/variants/{man['variants'][0]['variant']}")
    assert r.status_code == 200, r.text
    assert [p["title"] for p in r.json()["parts"]] == [p["title"] for p in man["variants"][0]["parts"]]
