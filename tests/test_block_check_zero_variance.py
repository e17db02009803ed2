"""A student's own values that leave a layer norm's row of variance 0 (issue 27, "Checking … Follow-through"):
`worked check` and the web page's `/api/check` give a report (the student's R1 row all equal), never the problem's ε
error or a traceback: from that row the carried path has no values (the entries that depend on it are judged by the
true values' band), on block-train.toml (ε = 1/100) and on the same block with ε = 0, where that row divides by 0.
The problem's own validation is unchanged (tests/test_block.py: a true row of variance 0 with ε = 0 is an error)."""
from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction

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


@pytest.mark.parametrize("backend", ["Float", "Hand", "Interval"])
def test_every_backend_carries_no_value_through_a_row_of_variance_zero(tmp_path, backend):
    """The forward pass and the training step from a student's R1 with a row of equal entries (ε = 0), on each
    backend: that row of H1 and what depends on it have no value (NaN in floats, else None), the other rows do."""
    from worked import attention as A
    from worked.attention import NA

    p = load(_problems(tmp_path)[1])
    b = {"Float": lambda: A.Float(), "Hand": lambda: A.Hand(p, "decimal", 4),
         "Interval": lambda: A.Interval(p, widen=False)}[backend]()
    R1 = [[b.entry(Fraction(1))] * 4] + [[NA] * 4 for _ in range(2)]
    run = A.block_forward(p, b, given={"R1": R1})
    none = lambda x: x is None or (isinstance(x, float) and math.isnan(x))  # noqa: E731
    assert all(none(x) for x in run.shown["H1"][0]) and not any(none(x) for row in run.shown["H1"][1:] for x in row)
    assert all(none(x) for x in run.shown["dR1"][0])      # the layer norm's backward of that row too
    assert not any(none(x) for x in run.shown["dlogits"][1])


def test_a_given_block_with_U_at_relus_kink_is_refused_in_one_line(tmp_path, cli):
    """The problem's own training step where U = x·W_1 + b_1 is 0 (here H1's first row is (1, −3, 3, −1)/√5 and W_1's
    first column (−2, −1, 0, 1)): the certified pass cannot tell ReLU's slope, so `worked solve` names W_1 (exit 2)."""
    prob = tmp_path / "kink.toml"
    prob.write_text(KINK)
    code, out, err = cli("solve", prob)
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "W_1: U[1,1]" in err and "ReLU's slope" in err


KINK = """tokens = ["x1", "x2", "x3"]
mask = "causal"
decimals = 2
X = [[1, 1, -2, 0], [2, 1, 1, 0], [1, 0, 2, -1]]
block = "post-ln"
W_1 = [[-2, 2, 0, 3], [-1, 1, 2, 2], [0, 2, -1, 2], [1, 0, 1, -1]]
b_1 = [0, 0, -2, 0]
W_2 = [[0, -1, 2, 2], [-1, -1, -2, -2], [3, 2, 3, 1], [3, 1, 0, 1]]
b_2 = [-1, 0, 0, 0]
W_out = [[0, 0, 0, 1], [0, -1, 2, 0], [3, 0, 1, 3], [-2, 2, -2, -1]]
vocab = ["x1", "x2", "x3", "v1"]
targets = ["x2", "x3", "x1"]
W_O = [[0, 2, -2, -2], [0, 2, -1, 3]]
W_Q = [[0, -2], [3, 3], [0, 2], [1, 2]]
W_K = [[-2, 0], [2, -1], [0, 3], [1, -1]]
W_V = [[2, -1], [-1, -1], [2, 1], [-2, -2]]

[train]
loss = "cross-entropy"
lr = "0.1"
"""
