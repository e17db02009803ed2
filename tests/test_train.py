"""One training step ([train]): the backward pass against independent computations, the update and the new
loss, the backward mistakes named by the checker, the [train] table's validation, and the precision policy."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import worked
from worked import eq, printers
from worked.attention import INEXACT, Exact, Float, Interval, Transform, backward, forward, loss_of
from worked.audit import audit
from worked.check import check_answers
from worked.errors import ProblemError
from worked.generate import Family, generate
from worked.mistakes import MISTAKES
from worked.numfmt import CTX

ROOT = Path(__file__).resolve().parents[1]
BACKWARD_IDS = ("softmax-backward-sum", "dV-not-transposed", "no-scaling-backward", "dK-not-transposed",
                "update-wrong-sign")


def _mat(draw, r, c, lo=-2, hi=2):
    return [[draw(st.integers(lo, hi)) for _ in range(c)] for _ in range(r)]


@st.composite
def train_problems(draw, max_heads=2):
    n = draw(st.integers(2, 3))
    dm = draw(st.integers(1, 3))
    dk = draw(st.integers(1, 2))
    dv = draw(st.integers(1, 2))
    H = draw(st.integers(1, max_heads))
    X = _mat(draw, n, dm, 0, 2)
    heads = [(_mat(draw, dm, dk), _mat(draw, dm, dk), _mat(draw, dm, dv)) for _ in range(H)]
    kw = dict(scale=draw(st.sampled_from(["sqrt", "none", "2"])), mask=draw(st.sampled_from(["none", "causal"])))
    width = dv
    if H > 1:
        W_O = _mat(draw, H * dv, 2)
        width = 2
    T = _mat(draw, n, width)
    kw["train"] = {"target": T, "lr": draw(st.sampled_from(["1/10", "1/20", "0.05"]))}
    try:
        if H == 1:
            return worked.Problem(X, *heads[0], **kw)
        return worked.Problem(X, heads=heads, W_O=W_O, **kw)
    except ProblemError as e:      # over the limit on a command's work (README "Limits"): not a problem to draw
        assume(e.field not in ("train", "X", "heads"))
        raise


def _passes(p, *backends):
    """The backward passes of *p*, or a rejected draw where the step's update takes a scaled score over the
    300 limit (one line naming train.lr: tested in test_train_limits.py)."""
    try:
        return [backward(p, b) for b in backends]
    except ProblemError as e:
        assume(e.field != "train.lr")
        raise


def _perturbed(p, h_idx, w, r, c, delta):
    """*p* and its weights with one moved by *delta* (passed to the pass, not built into a Problem: a weight
    ± 10⁻¹² has too many digits for a problem file's limits)."""
    ws = [[[list(row) for row in m] for m in (hd.W_Q, hd.W_K, hd.W_V)] for hd in p.heads]
    ws[h_idx][("W_Q", "W_K", "W_V").index(w)][r][c] += delta
    return p, [tuple(t) for t in ws]


def _loss50(pw):
    q, ws = pw
    b = Interval(q, widen=False)
    ws = [tuple([[b.entry(x) for x in row] for row in m] for m in hd) for hd in ws]   # in the backend's numbers
    lo, hi = loss_of(q, b, forward(q, b, weights=ws, backward=False))
    return CTX.divide(CTX.add(lo, hi), 2)


H = Fraction(1, 10**12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(train_problems())
def test_gradients_match_central_differences_to_1e9(p):
    """Every entry of dW_Q, dW_K, dW_V (every head) against (L(w + h) − L(w − h))/2h with h = 10⁻¹², losses
    from the forward pass alone in 50-digit interval arithmetic (error ~h², far below 1e-9)."""
    run, = _passes(p, Interval(p, widen=False))
    for hk, g in enumerate(run.grads):
        for w in ("W_Q", "W_K", "W_V"):
            grad = g.dW[w]
            for r, row in enumerate(grad):
                for c, iv in enumerate(row):
                    fd = CTX.multiply(CTX.subtract(_loss50(_perturbed(p, hk, w, r, c, H)),
                                                   _loss50(_perturbed(p, hk, w, r, c, -H))), Decimal(10**12) / 2)
                    val = CTX.divide(CTX.add(iv[0], iv[1]), 2)
                    assert abs(fd - val) <= Decimal("1e-9") * max(1, abs(val)), (w, r, c, fd, val)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(train_problems())
def test_exact_float_and_interval_backends_agree(p):
    """Float agrees with the 50-digit pass everywhere; Exact's forward values to 1e-30, and its backward values,
    rationals where it keeps them (INEXACT otherwise), lie in the 50-digit enclosure: masked entries are exactly 0."""
    ex, fl, iv = _passes(p, Exact(), Float(), Interval(p, widen=False))
    for key, grid in iv.shown.items():
        if key == "loss_after":
            continue   # Exact stops at the update (its new weights are transcendental)
        for i, row in enumerate(grid):
            for j, b in enumerate(row):
                if b is None:
                    continue
                assert abs(fl.shown[key][i][j] - float(b[0])) <= 1e-9 * max(1, abs(float(b[0]))), key
        for i, row in enumerate(grid):
            for j, b in enumerate(row):
                e = ex.shown[key][i][j]
                if b is None or e is INEXACT:
                    continue
                if isinstance(e, Fraction):
                    v = CTX.divide(Decimal(e.numerator), Decimal(e.denominator))
                else:
                    assert key.rpartition(".")[2] in FORWARD_KEYS, (key, e)   # sympy only before the backward pass
                    v = Decimal(str(Exact().sp.N(e, 40)))
                assert CTX.subtract(b[0], SLACK) <= v <= CTX.add(b[1], SLACK), (key, i, j)
    for hk, hp in enumerate(ex.heads):
        for i, j in hp.masked:
            assert ex.grads[hk].dS[i][j] == 0 and isinstance(ex.grads[hk].dS[i][j], Fraction)


SLACK = Decimal("1e-30")
FORWARD_KEYS = {"Q", "K", "V", "scores", "scaled", "weights", "Z", "concat"}


def test_exact_backward_keeps_rationals_and_builds_no_closed_forms():
    """A problem whose weights are rational (every row of scores equal) has a rational backward pass, exactly;
    with e^x in the weights the gradients are INEXACT (no closed form of n⁴ terms is built) but a product with
    0 stays exactly 0, and the solution's exact value is the shortest decimal of the 50-digit enclosure."""
    flat = worked.Problem([[1, 0], [0, 1]], [[0, 0], [0, 0]], [[1, 0], [0, 1]], [[1, 2], [3, 4]],
                          train={"target": [[0, 0], [0, 0]], "lr": "1/10"}, scale="none")
    run, fl = backward(flat, Exact()), backward(flat, Float())
    assert run.grads[0].dW["W_V"] == [[2, 3], [2, 3]]      # A = ½ everywhere, Z = dZ = dV = [[2, 3], [2, 3]]
    for k in ("dZ", "dA", "dS", "dscores", "dW_Q", "dW_K", "W_Q_new", "W_V_new"):
        assert all(isinstance(x, Fraction) and float(x) == y for r, fr in zip(run.shown[k], fl.shown[k])
                   for x, y in zip(r, fr)), k
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    run = backward(p, Exact())
    assert run.shown["dW_Q"][0][0] is INEXACT and run.shown["dZ"][1][0] == 1    # Z = 2 exactly there: T − Z = 1
    sol = worked.solve(p)
    dW = sol.matrices()["dW_Q"]
    x = dW.exact[0][0]
    assert x.is_Float and abs(float(x) - float(dW.num[0][0])) < 1e-40 and len(str(x)) < 60
    causal = worked.solve(worked.load(ROOT / "problems/causal-mask-train.toml"))
    # dA[chase, chase] is 0 (its unsimplified closed form was): the enclosure holds 0, and 0 is written, not a
    # remainder at the 48th digit
    assert causal.to_dict()["train"]["matrices"]["dA"]["exact"][1][1] == "0.0"
    assert printers.text(causal.matrices()["dA"].exact_node(1, 1)) == "0.0"


def test_against_pytorch_autograd():
    torch = pytest.importorskip("torch", reason="PyTorch is optional: pip install 'worked[autograd]' (torch==2.13.0, CPU)")
    import random

    rng = random.Random(16)
    for trial in range(20):
        n, dm, dk, dv = rng.randint(2, 4), rng.randint(1, 4), rng.randint(1, 3), rng.randint(1, 3)
        m = lambda r, c: [[rng.randint(-2, 2) for _ in range(c)] for _ in range(r)]  # noqa: E731
        X, WQ, WK, WV, T = m(n, dm), m(dm, dk), m(dm, dk), m(dm, dv), m(n, dv)
        mask = rng.choice(["none", "causal"])
        p = worked.Problem(X, WQ, WK, WV, mask=mask, train={"target": T, "lr": "1/10"})
        run = backward(p, Float())
        t = lambda a, g=False: torch.tensor(a, dtype=torch.float64, requires_grad=g)  # noqa: E731
        tX, tQ, tK, tV, tT = t(X), t(WQ, True), t(WK, True), t(WV, True), t(T)
        S = (tX @ tQ) @ (tX @ tK).T / dk ** 0.5
        if mask == "causal":
            S = S.masked_fill(torch.triu(torch.ones(n, n, dtype=torch.bool), 1), float("-inf"))
        Z = torch.softmax(S, dim=1) @ (tX @ tV)
        L = 0.5 * ((Z - tT) ** 2).sum()
        L.backward()
        assert abs(L.item() - run.loss) < 1e-9
        for name, tw in (("W_Q", tQ), ("W_K", tK), ("W_V", tV)):
            ours = torch.tensor(run.grads[0].dW[name], dtype=torch.float64)
            assert torch.allclose(ours, tw.grad, atol=1e-9, rtol=1e-9), (trial, name)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(train_problems())
def test_loss_after_is_the_loss_of_the_exact_update(p):
    """L′ is the loss of a fresh forward pass with W − lr·dW itself (not the weights rounded for the page):
    the Float pass's own unrounded update agrees to 1e-9, in the matrices and in the JSON (a number)."""
    try:
        sol = worked.solve(p)
    except ProblemError as e:       # the update takes a scaled score over the limit: refused in one line (test_train_limits)
        assume(e.field != "train.lr")
        raise
    ref = backward(p, Float()).loss_after
    la = sol.matrices()["loss_after"]
    assert abs(float(la.num[0][0]) - ref) < 1e-9 * max(1.0, ref)
    got = sol.to_dict()["train"]["loss_after"]
    assert isinstance(got, float) and abs(got - ref) < 1e-9 * max(1.0, ref)


def _answers(p, sol, transform=None):
    run = forward(p, Float(), transform=transform)
    mats = sol.matrices()
    return {k: [[round(x, p.decimals) for x in row] for row in v] for k, v in run.shown.items() if k in mats}


@settings(max_examples=12, deadline=None, derandomize=True,  # the same draws every run (seed 185 of worked new --train: dK-not-transposed zeroes a column and the evidence rule leaves it unnamed)
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.integers(0, 10**6), st.sampled_from(["none", "causal"]))
def test_every_backward_mistake_is_named_and_right_answers_get_none(seed, mask):
    p = generate(Family(train=True, mask=mask), seed)
    sol = worked.solve(p)
    right = check_answers(p, _answers(p, sol), solution=sol)
    assert right.summary()["wrong"] == 0 and right.diagnoses == []
    for code in BACKWARD_IDS:
        for t in MISTAKES[code].transforms(p):
            stage = MISTAKES[code].stage
            good, bad = forward(p, Float()).shown[stage], forward(p, Float(), transform=t).shown[stage]
            if sum(abs(a - b) >= 0.05 for ra, rb in zip(good, bad) for a, b in zip(ra, rb)) < 4:
                # the mistake changes few entries of its matrix: the evidence rule (issue 15) may rightly say
                # only "wrong" (over 80 problems: 421 of 426 named with 2 or more changed entries, all 354 with 4)
                continue
            rep = check_answers(p, _answers(p, sol, t), solution=sol)
            assert code in [d["code"] for d in rep.diagnoses], (seed, code, t, [d["code"] for d in rep.diagnoses])


def test_registry_has_the_backward_mistakes_with_steps():
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    sol = worked.solve(p)
    results = {s.result for s in sol.steps}
    for code in BACKWARD_IDS:
        m = MISTAKES[code]
        assert m.stage in results and m.title and m.feedback and m.answer_feedback.endswith(f"[{code}]")
        assert m.transforms(p)
    assert all(not MISTAKES[c].transforms(worked.load()) for c in BACKWARD_IDS)   # no [train]: none apply


def test_part9_training_key_lines():
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    sol = worked.solve(p)
    assert audit(sol) == []
    ids = [s.id for s in sol.steps]
    for sid in ("loss", "dZ", "dV", "dA", "dS", "dscores", "dQ", "dK", "dW_Q", "dW_K", "dW_V", "gradcheck",
                "W_Q_new", "W_K_new", "W_V_new", "loss_after"):
        assert sid in ids
    m = sol.matrices()
    assert printers.text(m["loss"].fixed(0, 0, 4)) == "2.2438" and printers.text(m["loss_after"].fixed(0, 0, 4)) == "0.7978"
    assert printers.text(m["dW_Q"].fixed(0, 0, 2)) == "0.54" and printers.text(m["dV"].fixed(1, 1, 4)) == "1.4902"
    text = sol.text()
    assert "s_cats = Σ_k A[cats, k]·dA[cats, k] ≈ 0.1636·0.6544 + 0.6728·3.3456 + 0.1636·1.1636 ≈ 2.5483" in text
    assert "(2.2978 − 2.1906)/(2·0.1) = 0.536 ≈ 0.54" in text
    assert "The loss went down" in text
    d = sol.to_dict()
    assert d["train"]["lr"] == "1/10" and set(d["train"]["matrices"]) >= {
        "dZ", "dV", "dA", "dS", "dQ", "dK", "dW_Q", "dW_K", "dW_V", "loss", "loss_after"}
    assert d["heads"][0]["Z"] == worked.solve(worked.load()).to_dict()["heads"][0]["Z"]   # old fields unchanged


def test_causal_training_problem_explains_the_masked_zero_gradient():
    p = worked.load(ROOT / "problems/causal-mask-train.toml")
    sol = worked.solve(p)
    assert audit(sol) == []
    dS = sol.matrices()["dS"]
    assert all(dS.exact[i][j] == 0 for i in range(3) for j in range(3) if j > i)
    step = next(s for s in sol.steps if s.id == "dS")
    assert any("exactly 0 gradient" in n for n in map(printers.text, step.notes_prose))


def test_multihead_goes_through_W_O_first():
    p = worked.load(ROOT / "problems/two-heads.toml")
    d = p.to_dict()
    d["train"] = {"target": [[1] * len(p.W_O[0])] * p.n, "lr": "1/20"}
    q = worked.Problem.from_dict(d)
    sol = worked.solve(q)
    assert audit(sol) == []
    ids = [s.result for s in sol.steps]
    assert ids.index("dconcat") < ids.index("head1.dV") < ids.index("head2.dV")


def test_too_large_lr_is_said_honestly():
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    d = p.to_dict()
    d["train"]["lr"] = "3"
    sol = worked.solve(worked.Problem.from_dict(d))
    assert "did not go down" in sol.text()


@pytest.mark.parametrize("train, field, words", [
    ({"target": [[1, 0], [0, 1]], "lr": "1/10"}, "train.target", "expected 3×2"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "0"}, "train.lr", "positive"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "-1/10"}, "train.lr", "positive"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "11"}, "train.lr", "at most 10"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "abc"}, "train.lr", "positive number"),
    ({"target": [[1, 0], [0, 1], [1, 1]]}, "train.lr", "missing"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "1/10", "loss": "ce"}, "train.loss", "mse"),
    ({"target": [[1, 0], [0, 1], [1, 1]], "lr": "1/10", "extra": 1}, "train.extra", "unknown key"),
    ({"lr": "1/10"}, "train.target", "missing"),
    ({"target": [[1, 0], [0, 1], [1, 2000]], "lr": "1/10"}, "train.target[3,2]", "too large"),
    ("yes", "train", "expected a table"),
])
def test_train_table_errors(tmp_path, train, field, words):
    d = worked.load().to_dict()
    d["train"] = train
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d))
    with pytest.raises(ProblemError) as exc:
        worked.Problem.from_file(f)
    assert exc.value.field == field and words in exc.value.message and str(f) in str(exc.value)
    r = subprocess.run([sys.executable, "-m", "worked", "solve", str(f)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert f"{f}: {field}:" in r.stderr


def test_train_round_trips_through_toml():
    p = worked.load(ROOT / "problems/cats-chase-mice-train.toml")
    q = worked.Problem.from_text(p.to_toml())
    assert q.train == p.train and q == p


def _places(node) -> int:
    if type(node) is eq.Dec:
        return node.places
    return max((_places(x) for x in node.children()), default=0)


def test_precision_policy_over_generated_training_problems():
    """200+ seeds of `worked new --train` (one head, causal, four tokens, two heads): no shown number has more than decimals + 2
    places (two heads: + 3), every line passes the audit (the hand rule), the numerical check agrees, and the step lowers
    the loss."""
    fams = [(Family(train=True), 70), (Family(train=True, mask="causal"), 70), (Family(train=True, tokens=4, d_model=3), 40),
            (Family(train=True, heads=2, range=(-1, 2)), 30)]
    count = 0
    for fam, seeds in fams:
        for seed in range(seeds):
            p = generate(fam, seed)
            sol = worked.solve(p)
            assert audit(sol) == [], seed
            # two heads may carry one more place where decimals + 2 would round some answer otherwise (noted)
            limit = p.decimals + (3 if fam.heads > 1 else 2)
            for s in sol.steps:
                for ln in s.lines:
                    assert _places(ln.eq) <= limit, (seed, s.id, printers.text(ln.eq))
            m = sol.matrices()
            assert m["loss_after"].num[0][0] < m["loss"].num[0][0], seed
            g = next(s for s in sol.steps if s.id == "gradcheck")
            assert printers.text(g.notes_prose[0]).startswith("The two agree"), (seed, g.notes_prose[0])
            big = max(abs(float(x)) for k, mat in m.items() if k.rpartition(".")[2].startswith("d")
                      for row in mat.num for x in row)
            assert big <= 10
            count += 1
    assert count >= 200


def test_worked_new_train_cli(tmp_path):
    out = tmp_path / "t.toml"
    r = subprocess.run([sys.executable, "-m", "worked", "new", "--train", "--lr", "1/20", "--seed", "5", "-o", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert "--train" in text.splitlines()[0] and "[train]" in text
    p = worked.load(out)
    assert p.train.lr == Fraction(1, 20)
    r = subprocess.run([sys.executable, "-m", "worked", "new", "--train", "--lr", "0", "--seed", "5"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "lr" in r.stderr and "Traceback" not in r.stderr


def test_quiz_spec_may_ask_training_matrices():
    from worked.ask import AskError, Question
    from worked.quiz import family_question

    fam = Family(train=True)
    q = family_question(Question("dW_Q[1,2]", 1.0), fam)
    assert (q.matrix, q.cells, q.shape) == ("dW_Q", [(0, 1)], (1, 1))
    q = family_question(Question("loss", 1.0), fam)
    assert (q.matrix, q.cells) == ("loss", [(0, 0)])
    with pytest.raises(AskError, match="unknown matrix 'dW_Q'"):
        family_question(Question("dW_Q[1,2]", 1.0), Family())


def test_training_quiz_offers_the_backward_mistakes_as_wrong_answers(tmp_path):
    spec = tmp_path / "q.toml"
    spec.write_text('title = "Training quiz"\nseed = 7\n[family]\ntokens = 3\nd_model = 3\nd_k = 2\ntrain = true\n'
                    '[[questions]]\nask = "dV"\npoints = 2\ntolerance = 0.02\n'
                    '[[questions]]\nask = "dW_Q[1,2]"\npoints = 1\ntolerance = 0.01\n')
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(spec), "-n", "1", "-o", str(tmp_path / "out"),
                        "--format", "gift"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    gift = (tmp_path / "out" / "quiz.gift.txt").read_text()
    assert "[dV-not-transposed]" in gift and "This is the value you get from dV" in gift   # 0 % answers with feedback


@pytest.mark.parametrize("path", ["problems/cats-chase-mice-train.toml", "problems/causal-mask-train.toml"])
@pytest.mark.parametrize("which", ["W_Q", "W_K", "W_V", None])
def test_update_wrong_sign_is_named_per_matrix(path, which):
    """A student who updates one matrix with the wrong sign (W + lr·dW) and answers everything else right is
    told update-wrong-sign on that matrix, with its own step to re-read; all three wrong is named once, on all
    three."""
    p = worked.load(ROOT / path)
    sol = worked.solve(p)
    answers = _answers(p, sol)
    bad = _answers(p, sol, Transform(update="plus", update_of=which))
    keys = [f"{w}_new" for w in ("W_Q", "W_K", "W_V") if which in (None, w)]
    assert all(bad[k] != answers[k] for k in keys)
    answers.update({k: bad[k] for k in keys})
    rep = check_answers(p, answers, solution=sol)
    wrong = {m.key for m in rep.matrices if any(v == "wrong" for row in m.verdicts for v in row)}
    assert wrong == set(keys)
    assert [(d["code"], d["matrices"]) for d in rep.diagnoses] == [("update-wrong-sign", keys)]
    assert rep.diagnoses[0]["step"]["id"] == keys[0]
    assert rep.summary()["unexplained"] == 0


def test_check_survives_a_mistake_with_no_value_in_the_backward_pass():
    """A mistake's weights without e^x divide by a row total that may be 0 (no value); the backward pass of that
    scenario carries "no value" on instead of failing: every answer wrong is a report, not a traceback."""
    p = worked.Problem([[-1, 1], [1, -1], [0, 1]], [[0, 1], [1, -1]], [[1, -1], [0, 0]], [[1, -1], [-1, 1]],
                       train={"target": [[0, 1], [1, 0], [0, 1]], "lr": "0.0001"})
    sol = worked.solve(p)
    run = forward(p, Float())
    answers = {k: [[f"{x + 0.37:.2f}" for x in row] for row in m] for k, m in run.shown.items() if k in sol.matrices()}
    rep = check_answers(p, answers, solution=sol)
    s = rep.summary()
    assert s["answered"] > 100 and s["invalid"] == 0 and s["wrong"] >= s["answered"] - 2
