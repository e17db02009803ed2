"""A student's own values that leave a layer norm's row of variance 0 (issue 27, "Checking … Follow-through"):
`worked check` and the web page's `/api/check` give a report (the student's R1 row all equal), never the problem's ε
error or a traceback: from that row the carried path has no values (the entries that depend on it are judged by the
true values' band), on block-train.toml (ε = 1/100) and on the same block with ε = 0, where that row divides by 0.
The problem's own validation is unchanged (tests/test_block.py: a true row of variance 0 with ε = 0 is an error)."""
from __future__ import annotations

import json
import warnings

import pytest

from worked.problem import load

from conftest import PROBLEMS

BLOCK_TRAIN = PROBLEMS / "block-train.toml"
ANSWERS = """R1 = [[1, 1, 1, 1], [1, 2, 3, 4], [0, 1, 0, 2]]
H1 = [[0, 0, 0, 0], [-1.34, -0.45, 0.45, 1.34], [-0.9, 0.3, -0.9, 1.51]]
loss = 1.2
dW_1 = [[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]
"""


def _problems(tmp_path):
    text = BLOCK_TRAIN.read_text()
    assert 'eps        = "1/100"' in text
    eps0 = tmp_path / "block-train-eps0.toml"
    eps0.write_text(text.replace('eps        = "1/100"', 'eps        = "0"'))
    return [BLOCK_TRAIN, eps0]


def test_worked_check_reports_a_students_row_of_variance_zero(tmp_path, cli):
    answers = tmp_path / "answers.toml"
    answers.write_text(ANSWERS)
    for prob in _problems(tmp_path):
        code, out, err = cli("check", prob, answers, "--format", "json")
        assert code in (0, 1), (prob, err)
        assert "Traceback" not in err and "eps" not in err, err
        rep = json.loads(out)
        verdicts = {k: m["verdicts"] for k, m in rep["matrices"].items()}
        assert verdicts["R1"][0] == ["wrong"] * 4           # the row the student made of equal entries
        assert {"R1", "H1", "dW_1"} <= set(verdicts)
        # H1's other rows follow from the student's R1; its first row has no value from it (judged as the true one)
        assert rep["matrices"]["H1"]["carried_forward"][1:] == [[True] * 4] * 2
        if "eps0" in prob.name:     # there the student's row divides by 0: the report says it could not carry it
            assert rep["matrices"]["H1"]["not_carried"] == [1]
            assert rep["matrices"]["R1"]["not_carried"] == []
        code, out, err = cli("check", prob, answers)
        assert code == 1 and "Summary" in out and "Traceback" not in err, err
        assert ("could not be carried through row the" in out) == ("eps0" in prob.name), out


def test_api_check_reports_a_students_row_of_variance_zero(tmp_path, cli):
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    from worked.check import parse_answers_text

    answers = parse_answers_text(ANSWERS, "answers.toml")
    answers_file = tmp_path / "answers.toml"
    answers_file.write_text(ANSWERS)
    c = TestClient(create_app(Config(problems_dir=PROBLEMS)), raise_server_exceptions=False)
    for prob in _problems(tmp_path):
        r = c.post("/api/check", json={"problem": load(prob).to_dict(), "answers": answers})
        assert r.status_code == 200, r.text
        code, out, err = cli("check", prob, answers_file, "--format", "json")
        assert code in (0, 1) and r.json() == json.loads(out), err
        assert "H1" in r.json()["matrices"]
