"""A mixed quiz with a Transformer block's training step (problems/quiz-8-block-train.toml: a self-attention part,
then a post-LN block with [train] asking the loss, dW_1[1,2] and the loss after): every variant's block part is a
block with its training step, through the LMS exports (Moodle XML, GIFT, Canvas QTI) and `worked grade`."""
import csv
import json
import subprocess
import sys
import zipfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SPEC = ROOT / "problems" / "quiz-8-block-train.toml"


def _run(*args):
    r = subprocess.run([sys.executable, "-m", "worked", *map(str, args)], capture_output=True, text=True, timeout=900,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def quiz(tmp_path_factory):
    out = tmp_path_factory.mktemp("quiz8") / "q"
    _run("quiz", SPEC, "-n", 2, "-o", out, "--format", "html,moodle,qti,gift")
    return out


def _value(e):
    while isinstance(e, list):
        e = e[0]
    return e


def test_every_variant_has_a_block_with_its_training_step(quiz):
    from worked.problem import Problem
    from worked.solver import solve

    m = json.loads((quiz / "manifest.json").read_text())
    for v in m["variants"]:
        first, block = v["parts"]
        assert "block" not in first["problem"] and block["problem"]["block"] == "post-ln"
        assert block["problem"]["train"]["loss"] == "cross-entropy"
        asks = {q["ask"]: q for q in block["questions"]}
        assert set(asks) == {"loss", "dW_1[1,2]", "loss_after"}
        sol = solve(Problem.from_dict(block["problem"], "variant"))
        assert _value(asks["dW_1[1,2]"]["expected"]) == pytest.approx(float(sol["dW_1"].num[0][1]), abs=1e-9)
        assert abs(_value(asks["dW_1[1,2]"]["expected"])) > 0.005        # ReLU leaves no W_1 column without gradient
        assert _value(asks["loss_after"]["expected"]) < _value(asks["loss"]["expected"])


def test_the_lms_exports_ask_the_gradient(quiz):
    root = ET.parse(quiz / "moodle.xml").getroot()
    names = [q.findtext("name/text") or "" for q in root.iter("question")]
    assert sum("dW_1[1,2]" in n for n in names) == 2 and sum("scores[1,2]" in n for n in names) == 2
    assert (quiz / "quiz.gift.txt").read_text(encoding="utf-8").count("dW_1[1,2]::") >= 2
    with zipfile.ZipFile(quiz / "canvas-qti.zip") as z:
        docs = [ET.fromstring(z.read(n)) for n in z.namelist() if n.endswith(".xml")]
    assert docs and any("dW_1[1,2]" in ET.tostring(d, encoding="unicode") for d in docs)


def test_grade_reads_the_gradient_column(quiz, tmp_path):
    m = json.loads((quiz / "manifest.json").read_text())
    asks = [q["ask"] for part in m["variants"][0]["parts"] for q in part["questions"]]
    resp = tmp_path / "responses.csv"
    with resp.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["variant"] + asks)
        for k, v in enumerate(m["variants"]):
            row = [v["variant"]]
            for part in v["parts"]:
                for q in part["questions"]:     # the second student slips in dW_1[1,2] only
                    row.append("9" if k == 1 and q["ask"] == "dW_1[1,2]" else f"{_value(q['expected']):.2f}")
            w.writerow(row)
    _run("grade", quiz, resp, "-o", tmp_path / "grades")
    rows = list(csv.DictReader((tmp_path / "grades" / "gradebook.csv").open()))
    assert [r["dW_1[1,2]"] for r in rows] == ["2", "0"]
    assert [r["total"] for r in rows] == [r["out_of"] for r in rows][:1] + [str(int(rows[1]["out_of"]) - 2)]
