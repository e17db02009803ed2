"""The training step bounded and its errors named (issue 25): a step that makes a scaled score too large is one
train.lr error (CLI exit 2, server 422 with field train.lr), never an overflow or the input's field; a problem
predicted to be more work than a command may take is refused before the work starts, with what fits; the
server's lanes count everything that costs (training, d_v, heads, W_O). No timing is asserted here: the times are
measured in benchmarks/bench_train_limits.py."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import worked
from worked.check import check_answers
from worked.errors import ProblemError
from worked.problem import LIMITS, Problem, work, work_of

ROOT = Path(__file__).resolve().parents[1]

# Part 9-sized, lr = 10: the step moves W_Q far enough that a scaled score reaches about 4.9·10¹⁰ after it
OVERFLOW = {"X": [[-2, 1], [3, 3], [3, -3]], "W_Q": [[0, -1], [0, 0]], "W_K": [[-33, 334], [-223, 615]],
            "W_V": [[-571, -808], [-1, -942]], "scale": 1000,
            "train": {"target": [[829, 711], [-202, -114], [244, 561]], "lr": "10"}}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "worked", *args], capture_output=True, text=True, cwd=ROOT)


def _one_line_error(r, *words):
    assert r.returncode == 2, r.stderr
    assert r.stdout == "" and r.stderr.count("\n") == 1 and r.stderr.startswith("error: ")
    assert "Traceback" not in r.stderr and "Overflow" not in r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_a_step_past_the_score_limit_is_one_train_lr_error(tmp_path):
    f = tmp_path / "overflow.json"
    f.write_text(json.dumps(OVERFLOW))
    with pytest.raises(ProblemError) as exc:
        worked.solve(worked.load(f))
    assert exc.value.field == "train.lr"
    assert "after the update" in exc.value.message and "use a smaller lr" in exc.value.message
    assert f"at most {LIMITS['scaled']}" in exc.value.message and "lr = 10" in exc.value.message
    _one_line_error(_cli("solve", str(f)), f"{f}: train.lr:", "after the update", "row 3")
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"Q": [[0, 0], [0, 0], [0, 0]]}))
    _one_line_error(_cli("check", str(f), str(answers)), f"{f}: train.lr:")
    _one_line_error(_cli("sheet", str(f), "-o", str(tmp_path / "out")), f"{f}: train.lr:")
    assert not (tmp_path / "out").exists()         # nothing half-written
    # the gradients are huge here (lr = 10⁻⁵ still reaches 307); a learning rate of 10⁻⁷ solves
    small = {**OVERFLOW, "train": {**OVERFLOW["train"], "lr": "1/10000000"}}
    sol = worked.solve(Problem.from_dict(small))
    assert sol.matrices()["loss_after"].value(0, 0) < sol.matrices()["loss"].value(0, 0)


def test_the_step_never_blames_an_entry_of_the_file(tmp_path):
    """The numerical gradient check moves W_Q[1, 2] = 1000 by ±h: that is no entry of the file, so it is not held
    to the limit on entries (it was "W_Q[1,2]: entry 10001/10 is too large", the file's W_Q[1,2] being 1000)."""
    d = {"X": [["0.001", 0], [0, "0.002"]], "W_Q": [[1000, 1000], [1000, -1000]], "W_K": [[1000, 0], [0, 1000]],
         "W_V": [[1000, 0], [0, 1000]], "train": {"target": [[0, 1], [1, 0]], "lr": "1/10"}}
    f = tmp_path / "edge.json"
    f.write_text(json.dumps(d))
    r = _cli("solve", str(f))
    assert r.returncode == 0, r.stderr
    assert "W_Q[1,2]" not in r.stderr and "Numerical check of dW_Q[1, 2]" in r.stdout


def test_the_server_names_train_lr_as_the_field():
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    from starlette.testclient import TestClient

    from worked.server.app import Config, create_app

    tc = TestClient(create_app(Config()), raise_server_exceptions=False)
    for path, body in (("/api/solve", {"problem": OVERFLOW}),
                       ("/api/check", {"problem": OVERFLOW, "answers": {"Q": [[0, 0], [0, 0], [0, 0]]}})):
        r = tc.post(path, json=body)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "train.lr" and "after the update" in r.json()["error"]
        assert "W_Q" not in r.json()["field"]
    r = tc.post("/api/solve", json={"problem": _one_head_train()})
    assert r.status_code == 422 and r.json()["field"] == "train" and "at most 10 s" in r.json()["error"], r.text


def test_a_student_s_huge_new_weights_are_judged_not_overflowed():
    """W_Q′ and W_K′ answered as 10¹² (the largest answer allowed): carried forward, the pass after that update
    would take e^x of scores near 10³³ (a decimal.Overflow before); it has no new loss, so L′ is judged wrong."""
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    big = [["1e12", "1e12"], ["1e12", "1e12"], ["1e12", "1e12"], ["1e12", "1e12"]]
    rep = check_answers(p, {"W_Q_new": big, "W_K_new": [["1e12", "-1e12"]] + big[1:],
                                "loss_after": [["1"]]})
    s = rep.summary()
    assert s["invalid"] == 0 and s["wrong"] == 17 and s["answered"] == 17


def _largest(train: bool) -> dict:
    """12 tokens, 12 columns, 4 heads: every limit on sizes at its largest."""
    m = lambda r, c: [[(i + j) % 3 - 1 for j in range(c)] for i in range(r)]  # noqa: E731
    d = {"X": m(12, 12), "heads": [{"W_Q": m(12, 12), "W_K": m(12, 12), "W_V": m(12, 12)} for _ in range(4)],
         "W_O": m(48, 12)}
    if train:
        d["train"] = {"target": m(12, 12), "lr": "0.0001"}
    return d


def _one_head_train() -> dict:
    """One head, 12 tokens, d = 12: forward only fits the limit on work, a training step does not."""
    m = lambda r, c: [[(i * 7 + j) % 3 - 1 for j in range(c)] for i in range(r)]  # noqa: E731
    return {"X": m(12, 12), "W_Q": m(12, 12), "W_K": m(12, 12), "W_V": m(12, 12),
            "train": {"target": m(12, 12), "lr": "0.0001"}}


def test_a_problem_over_the_limit_on_work_is_refused_with_what_fits(tmp_path):
    """Refused when read (before any work), one line naming the field and what fits; the same from a file."""
    over = _one_head_train()
    Problem.from_dict({k: v for k, v in over.items() if k != "train"})      # forward only: within the limit
    with pytest.raises(ProblemError) as exc:
        Problem.from_dict(over)
    e = exc.value
    assert e.field == "train" and "is more work than a command may take" in e.message
    assert "at most 10 s" in e.message and "leave out [train]" in e.message
    fit = int(e.message.split("at most ")[2].split(" tokens fit")[0])
    assert 2 <= fit < 12
    fits = {**over, "X": over["X"][:fit], "train": {"target": over["train"]["target"][:fit], "lr": "0.0001"}}
    assert work(Problem.from_dict(fits)).worst <= LIMITS["work"]
    f = tmp_path / "big.json"
    f.write_text(json.dumps(over))
    for args in (("solve", str(f)), ("sheet", str(f), "-o", str(tmp_path / "o")), ("check", str(f), str(f))):
        _one_line_error(_cli(*args), f"{f}: train:", "tokens fit")
    # forward only, too: 4 heads of 12 × 12 at 12 tokens is over the limit, named by heads (with [train] as well)
    for train in (False, True):
        with pytest.raises(ProblemError) as exc:
            Problem.from_dict(_largest(train))
        assert exc.value.field == "heads" and ("tokens fit" in exc.value.message) != train
        assert "use smaller d_model, d_k, d_v or fewer heads" in exc.value.message if train else "tokens fit" in exc.value.message


def test_a_random_family_over_the_limit_is_refused_before_the_search(tmp_path):
    r = _cli("new", "--tokens", "12", "--d-model", "12", "--d-k", "12", "--heads", "4", "--train")
    _one_line_error(r, "train:", "more work than a command may take")


def test_everything_that_costs_raises_the_work():
    """The work counts a training step, d_v, heads and W_O: each makes the prediction larger."""
    base = work_of(3, 4, 2, 2)
    assert work_of(3, 4, 2, 2, train=True).worst > base.worst
    assert work_of(3, 4, 2, 12).worst > base.worst and work_of(3, 4, 2, 12, train=True).check > work_of(3, 4, 2, 2, train=True).check
    assert work_of(3, 4, 2, 2, heads=2).worst > base.worst
    assert work_of(3, 4, 2, 2, heads=2, d_out=12).worst > work_of(3, 4, 2, 2, heads=2, d_out=2).worst
    assert work_of(6, 4, 2, 2).worst > base.worst and work_of(3, 8, 2, 2).worst > base.worst


def test_the_quick_lane_holds_only_cheap_requests():
    """The issue's requests (3 tokens, d_k 7, d_v 12, fractions, [train]; a Part 9 shape with W_O of two heads of
    d_v 12) cost more than the quick lane takes, so they go to the heavy lane; Part 9, its training step and a
    quiz's problems stay on the quick lane."""
    pytest.importorskip("starlette")
    from worked.server.app import Config, Engine, cost

    frac = lambda r, c: [[f"{(i + 2 * j) % 5 - 2}/7" for j in range(c)] for i in range(r)]  # noqa: E731
    wide = Problem.from_dict({"X": frac(3, 4), "W_Q": frac(4, 7), "W_K": frac(4, 7), "W_V": frac(4, 12),
                              "train": {"target": [[0] * 12] * 3, "lr": "1/10"}})
    heads = Problem.from_dict({"X": frac(3, 4), "heads": [{"W_Q": frac(4, 2), "W_K": frac(4, 2), "W_V": frac(4, 12)}] * 2,
                               "W_O": frac(24, 12)})
    cfg = Config()
    engine = Engine(cfg)
    part9 = worked.load()
    train9 = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    for p in (wide, heads):
        assert cost(p) > cfg.quick_cost > cost(part9) and engine.lane(p) is engine.heavy
    forward_only = Problem.from_dict({k: v for k, v in wide.to_dict().items() if k != "train"})
    assert cost(wide) > cost(forward_only) > cost(part9)
    for p in (part9, train9, worked.load(ROOT / "problems/causal-mask-train.toml"), worked.load(ROOT / "problems/two-heads.toml")):
        assert engine.lane(p) is engine.quick, p
    assert engine.family_lane({"tokens": 3, "train": True}) is engine.quick
    assert engine.family_lane({"tokens": 8, "d_model": 8, "d_k": 8, "train": True}) is engine.heavy
