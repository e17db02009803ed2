"""Grading reads the manifest that `worked quiz` writes (variants, per-variant questions, roster students)."""
from __future__ import annotations

import csv
import json

from conftest import PROBLEMS


def test_grade_reads_worked_quiz_manifest(cli, tmp_path):
    """A quiz made by `worked quiz` with a roster, answered with its own expected values (one student leaves
    the weights blank), grades to full marks and to full marks minus the weights question."""
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\na1,Ann\nb2,Bob\n")
    code, out, err = cli("quiz", PROBLEMS / "quiz-1.toml", "--roster", roster, "-o", tmp_path / "q", "--format", "html", "--quiet")
    assert code == 0, err
    manifest = json.loads((tmp_path / "q" / "manifest.json").read_text())
    rows = [["id", "scores[2,3]", "weights[1,*]", "Z"]]
    for v in manifest["variants"]:
        q = {x["ask"]: x for x in v["questions"]}
        w = ", ".join(str(x) for x in q["weights[1,*]"]["expected"]) if v["student"]["id"] == "a1" else ""
        rows.append([v["student"]["id"], str(q["scores[2,3]"]["expected"]), w,
                     json.dumps(q["Z"]["expected"])])
    with open(tmp_path / "r.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    code, out, err = cli("grade", tmp_path / "q", tmp_path / "r.csv", "-o", tmp_path / "g")
    assert code == 0, err
    book = {r["id"]: r for r in csv.DictReader(open(tmp_path / "g" / "gradebook.csv", encoding="utf-8"))}
    points = {q["ask"]: q["points"] for q in manifest["variants"][0]["questions"]}
    full = sum(points.values())
    assert float(book["a1"]["total"]) == full and book["a1"]["name"] == "Ann"
    assert float(book["b2"]["total"]) == full - points["weights[1,*]"]
