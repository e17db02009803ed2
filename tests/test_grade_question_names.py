"""`worked grade` reads a question's column by its ask (scores[2,3]) or by its name in the quiz (q1), and says
which columns it read."""
from __future__ import annotations

import csv
import json

from conftest import PROBLEMS


def _quiz(cli, tmp_path):
    code, out, err = cli("quiz", PROBLEMS / "quiz-1.toml", "-n", "2", "-o", tmp_path / "q", "--format", "html", "--quiet")
    assert code == 0, err
    return json.loads((tmp_path / "q" / "manifest.json").read_text())


def test_grade_accepts_question_names_and_says_which_columns(cli, tmp_path):
    manifest = _quiz(cli, tmp_path)
    qs = manifest["variants"][0]["questions"]
    names = [q["name"] for q in qs]
    assert names[:3] == ["q1", "q2", "q3"]
    rows = [["variant"] + names]
    for v in manifest["variants"]:
        rows.append([v["variant"]] + [json.dumps(q["expected"]) if isinstance(q["expected"], list) else str(q["expected"])
                                      for q in v["questions"]])
    with open(tmp_path / "r.csv", "w", newline="") as f:
        csv.writer(f).writerows(rows)
    code, out, err = cli("grade", tmp_path / "q", tmp_path / "r.csv", "-o", tmp_path / "g")
    assert code == 0, err
    assert "no column" not in err
    first = out.splitlines()[0]
    assert first.startswith("read columns: ")
    for q in qs:
        assert f"{q['ask']} ← '{q['name']}'" in first
    assert "students by 'variant'" in first
    book = list(csv.DictReader(open(tmp_path / "g" / "gradebook.csv", encoding="utf-8")))
    full = sum(q["points"] for q in qs)
    assert [float(r["total"]) for r in book] == [full, full]


def test_no_matching_column_names_both_spellings(cli, tmp_path):
    _quiz(cli, tmp_path)
    (tmp_path / "r.csv").write_text("id,foo\na,1\n")
    code, out, err = cli("grade", tmp_path / "q", tmp_path / "r.csv")
    assert code == 2
    assert "scores[2,3] or q1" in err and "Traceback" not in err
