"""A quiz variant checked on the web page uses that question's tolerance and points from the manifest."""
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

from worked.problem import load
from worked.server.app import Config, create_app

ROOT = Path(__file__).resolve().parents[1]
PART9 = ROOT / "problems" / "cats-chase-mice.toml"
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def quiz(tmp_path, tolerance):
    folder = tmp_path / "quiz"
    folder.mkdir(parents=True)
    manifest = {"format": "worked-quiz-manifest", "version": 1, "title": "Attention quiz", "variants": [
        {"variant": "K3F9AB", "problem": load(PART9).to_dict(), "questions": [
            {"name": "q1", "ask": "weights[1,2]", "points": 2.0, "tolerance": tolerance, "expected": 0.665},
            {"name": "q2", "ask": "Z[2,*]", "points": 3.0, "expected": [1.0, 1.33]}]}]}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return TestClient(create_app(Config(problems_dir=folder)), raise_server_exceptions=False)


def blank(r, c):
    return [["" for _ in range(c)] for _ in range(r)]


def check(tc, value):
    w = blank(3, 3)
    w[0][1] = value
    z = blank(3, 2)
    z[1] = ["1.00", "1.33"]
    # the posted problem is ignored: a variant is checked against its own problem
    r = tc.post("/api/check", json={"variant": "k3f9ab", "problem": {"X": [[1]]}, "answers": {"weights": w, "Z": z}})
    assert r.status_code == 200, r.text
    return r.json()


def test_variant_check_uses_the_questions_tolerance_and_points(tmp_path):
    # 0.68 is outside the rounding band of 0.665 at 2 places but within the question's ±0.02
    loose = check(quiz(tmp_path / "a", {"abs": 0.02, "rel": 0.0}), "0.68")
    assert loose["matrices"]["weights"]["verdicts"][0][1] == "correct"
    assert loose["score"] == {"earned": 5, "points": 5}
    assert [(q["name"], q["earned"], q["points"]) for q in loose["questions"]] == [("q1", 2, 2), ("q2", 3, 3)]
    tight = check(quiz(tmp_path / "b", {"abs": 0.001, "rel": 0.0}), "0.68")
    assert tight["matrices"]["weights"]["verdicts"][0][1] == "wrong"
    assert tight["score"] == {"earned": 3, "points": 5}
    assert tight["questions"][0]["tolerance"] == "±0.001"


def test_variant_page_lists_its_questions(tmp_path):
    tc = quiz(tmp_path, {"abs": 0.02, "rel": 0.0})
    v = tc.get("/api/variants/K3F9AB").json()
    assert [(q["name"], q["ask"], q["points"], q["tolerance"]) for q in v["questions"]] == [
        ("q1", "weights[1,2]", 2, "±0.02"), ("q2", "Z[2,*]", 3, "rounding to 2 places")]
    assert "0.665" not in json.dumps(v)
    r = tc.post("/api/check", json={"variant": "NOPE99", "answers": {}})
    assert r.status_code == 404 and "error" in r.json()
