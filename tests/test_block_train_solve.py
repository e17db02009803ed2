"""A block's training step on the pages (issue 27): ``worked solve`` of a block with ``[train] loss = "cross-entropy"``
works one entry of each kind of gradient, one row of each layer norm's backward, the gradient check, the update
and the loss after; every line holds by the hand rule, at every --checks level; the values are the training step's
(the 50-digit pass), by the API's names; the JSON has them; the checker follows a student's own gradients on."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from worked.audit import audit
from worked.problem import Problem
from worked.solver import solve

from test_block_train import CASES, read

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "problems" / "block-train.toml"


@pytest.mark.parametrize("checks", ["one", "all"])
@pytest.mark.parametrize("name", list(CASES))
def test_every_line_of_a_block_training_step_holds(name, checks):
    sol = solve(read(CASES[name]), checks=checks)
    assert audit(sol) == []
    ids = [st.id for st in sol.steps]
    # one step per gradient, the check between the backward pass and the update, the loss after last
    for sid in ("dlogits", "dW_out", "dW_1", "db_1", "dU", "dW_2", "db_2", "dW_O", "dgamma_1", "dbeta_1", "dV", "dW_Q",
                "gradcheck", "W_1_new", "W_out_new", "gamma_1_new", "loss_after"):
        assert sid in ids, sid
    assert ids.index("gradcheck") < ids.index("W_Q_new") < ids.index("W_1_new") < ids.index("loss_after") == len(ids) - 1
    if "pre-ln" in name:
        assert {"dN1", "dgamma_f", "dbeta_f", "gamma_f_new"} <= set(ids)


def test_the_solution_has_the_training_matrices_by_the_api_names():
    from worked.attention import Float, block_forward

    p = Problem.from_file(str(SHIPPED))
    sol = solve(p)
    run = block_forward(p, Float())
    for key in ("dlogits", "dW_out", "dW_1", "db_1", "dgamma_2", "dW_O", "head1.dW_Q", "W_1_new", "b_1_new"):
        got = [float(x) for row in sol[key].num for x in row]
        assert got == pytest.approx([float(x) for row in run.shown[key] for x in row], abs=1e-9), key
    assert sol["dW_1"].shape == (4, 3) and sol["b_1_new"].shape == (1, 3)
    assert float(sol["loss_after"].num[0][0]) == pytest.approx(run.loss_after) and run.loss_after < run.loss


def test_a_step_reads_as_a_student_writes_it():
    text = solve(Problem.from_file(str(SHIPPED))).text()
    assert "dlogits[sat, on] = (probs[sat, on] − 1)/3 = (" in text
    assert "W_1′[1, 2] = W_1[1, 2] − lr·dW_1[1, 2] = 0 − 0.1·(−0.26162) ≈ 0.02616" in text
    assert "L′ = (0.49485 + 3.07153 + 1.89200)/3 = 1.81946" in text
    assert "Numerical check of dW_Q⁽¹⁾" in text


def test_solve_json_has_the_training_step(tmp_path):
    r = subprocess.run([sys.executable, "-m", "worked", "solve", str(SHIPPED), "--format", "json"], capture_output=True,
                       text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    t = json.loads(r.stdout)["train"]
    assert t["loss_function"] == "cross-entropy" and t["lr"] == "1/10" and t["target"] is None
    assert 1.8 < t["loss_after"] < 1.85
    assert {"dW_1", "db_1", "dgamma_1", "head1.dW_Q", "W_1_new", "loss_after"} <= set(t["matrices"])
    assert t["matrices"]["dW_1"]["shape"] == [4, 3]


def test_the_checker_follows_a_students_own_gradients_on(tmp_path):
    """dlogits three times too large (the mean forgotten), then dW_out and dH computed correctly from them: the
    first is wrong, the other two follow from it (error carried forward)."""
    from worked.attention import Float, block_forward
    from worked.check import check_answers, read_answers

    p = Problem.from_file(str(SHIPPED))
    true = block_forward(p, Float())
    dl = [[3 * x for x in row] for row in true.shown["dlogits"]]
    own = block_forward(p, Float(), given={"dlogits": dl})
    fmt = lambda M: "[" + ", ".join("[" + ", ".join(f'"{x:.2f}"' for x in row) + "]" for row in M) + "]"  # noqa: E731
    path = tmp_path / "answers.toml"
    path.write_text(f'dlogits = {fmt(dl)}\ndW_out = {fmt(own.shown["dW_out"])}\ndH = {fmt(own.shown["dH"])}\n')
    rep = check_answers(p, read_answers(path))
    by = {m.key: m for m in rep.matrices}
    assert by["dlogits"].count("wrong") == 12 and by["dlogits"].consistent is not True
    for key in ("dW_out", "dH"):
        assert by[key].consistent is True and by[key].n_carried == by[key].count("wrong") > 0, key
    right = tmp_path / "right.toml"
    right.write_text("\n".join(f"{k} = {fmt(true.shown[k])}" for k in ("dlogits", "dW_1", "db_1", "head1.dW_Q", "W_1_new"))
                     + f'\nloss_after = [["{true.loss_after:.2f}"]]\n')
    rep = check_answers(p, read_answers(right))
    assert all(m.count("wrong") == 0 and m.count("correct") > 0 for m in rep.matrices)


@pytest.mark.parametrize("kind", ["post-ln", "pre-ln"])
def test_a_blocks_pages_head_its_sections_as_the_blocks(kind):
    """The sheets' headings (worked/render/view.py's ``section``): a block's steps after the heads read as the
    block's (not "Combining the heads"), the training step has its own sections (a head's gradients apart, the
    gradient check, the update: not "Head 1"), each heading once where its section starts; attention pages keep
    "Head h" and "Combining the heads"."""
    from worked.generate import Family, generate
    from worked.render import view
    p = read(SHIPPED.read_text()) if kind == "post-ln" else generate(
        Family.from_dict(dict(block="pre-ln", positional="sinusoidal", vocab=3, train=True, d_ff=3)), 1)
    page = view.build(solve(p), "answer-key")
    heads = [(st.id, st.section) for st in page.steps if st.section]
    assert [s for _, s in heads] == ["Head 1", "Combining the heads", "Residuals, layer norms and feed-forward",
                                     "Output and loss", "Training step: gradients", "Training step: gradients of head 1"] \
        + (["Training step: gradients"] if kind == "pre-ln" else []) \
        + ["Training step: gradient check", "Training step: update"], heads
    ids = [st.id for st in page.steps]
    at = dict(heads)
    assert at.get("dlogits") == "Training step: gradients" and at.get("gradcheck") == "Training step: gradient check"
    assert ids.index("W_Q_new") == ids.index("gradcheck") + 1 and at["W_Q_new"] == "Training step: update"
    assert "loss" not in at and ids.index(next(i for i, s in heads if s == "Output and loss")) < ids.index("loss")
    two = view.build(solve(Problem.from_file(ROOT / "problems" / "two-heads.toml")), "answer-key")
    assert [st.section for st in two.steps if st.section] == ["Head 1", "Head 2", "Combining the heads"]
