"""A Transformer block's known mistakes (issue 27), each an alternative forward of its stage declared in
worked/slips.py with a Transform field: run through ``block_forward``, each changes what it should (checked here
against the mistake written out in NumPy) and nothing before the stage that declares it."""
import math

import pytest

from worked import mistakes, stages
from worked.attention import Float, Transform, block_forward
from worked.problem import Problem

np = pytest.importorskip("numpy")

from test_block import BLOCK  # noqa: E402

EPS = BLOCK                                                          # eps = 1/100, sinusoidal, causal, an output layer
PRE = BLOCK.replace('"post-ln"', '"pre-ln"') + 'gamma_f = [1, 2, 1, "1/2"]\nbeta_f = [0, 1, 0, -1]\n'
BLOCK_IDS = {"norm-over-columns", "variance-n-minus-1", "norm-root", "no-residual", "relu-before-bias",
             "positions-after-attention", "sin-cos-swapped", "log10-loss", "output-softmax-columns"}


def read(text):
    return Problem.from_text(text, "slips.toml")


def A(m):
    return np.array(m, dtype=float)


def declared(arch, mid):
    """The stage that declares mistake *mid* in *arch*, and the key of its matrix (a head's: ``head1.Q``)."""
    s = next(s for s in stages.every(arch) if any(m.id == mid for m in s.mistakes))
    return s.id if s.scope == "layer" else "head1." + s.id


@pytest.mark.parametrize("text", [EPS, PRE], ids=["post-ln", "pre-ln"])
def test_every_block_mistake_first_shows_where_its_stage_declares_it(text):
    """Each of the nine (every transform of each) leaves every matrix before its declaring stage as it was and
    changes that stage's matrix (forgetting the second residual add: that add's); all nine apply to these
    problems, and the registry names them."""
    p = read(text)
    arch = stages.of(p)
    found = {m.id for m in mistakes.of(arch)} & BLOCK_IDS
    assert found == BLOCK_IDS and BLOCK_IDS <= set(mistakes.MISTAKES)
    right = block_forward(p, Float())
    for mid in sorted(BLOCK_IDS):
        m = mistakes.MISTAKES[mid]
        ts = m.transforms(p)
        assert ts and m.title and m.message(p), mid
        assert m.answer_feedback.startswith("This is the value you get") and m.answer_feedback.endswith(f"[{mid}]")
        key = declared(arch, mid)
        for t in ts:
            wrong = block_forward(p, Float(), transform=t)
            order = list(right.shown)
            assert list(wrong.shown) == order
            if t.residual == "no-second":     # the second residual add, after the one the stage declares
                key = "R2" if p.block.kind == "post-ln" else "H"
            for k in order[:order.index(key)]:
                np.testing.assert_array_equal(A(wrong.shown[k]), A(right.shown[k]), err_msg=f"{mid} {t}: {k}")
            assert not np.allclose(A(wrong.shown[key]), A(right.shown[key]), equal_nan=True), (mid, t, key)


def ln_ref(x, g, b, eps, axis=1, ddof=0, root="sqrt"):
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).sum(axis=axis, keepdims=True) / (x.shape[axis] - ddof)
    div = {"sqrt": np.sqrt(var + eps), "no-sqrt": var + eps, "no-eps": np.sqrt(var)}[root]
    return g * (x - mu) / div + b


@pytest.mark.parametrize("t,kw", [(Transform(norm_axis="columns"), dict(axis=0)), (Transform(variance="n-1"), dict(ddof=1)),
                                  (Transform(norm_root="no-sqrt"), dict(root="no-sqrt")),
                                  (Transform(norm_root="no-eps"), dict(root="no-eps"))], ids=["columns", "n-1", "no-sqrt", "no-eps"])
def test_the_layer_norm_mistakes_are_the_wrong_formula(t, kw):
    """post-LN's H1 = LN_1(R1) with the wrong axis, n − 1, no √ or no ε (in NumPy); pre-LN's N1 = LN_1(X0) likewise."""
    for text, key, src in ((EPS, "H1", "R1"), (PRE, "N1", "X0")):
        p = read(text)
        b = p.block
        run = block_forward(p, Float(), transform=t)
        want = ln_ref(A(run.shown[src]), A([b.gamma_1]), A([b.beta_1]), float(b.eps), **kw)
        np.testing.assert_allclose(A(run.shown[key]), want, rtol=1e-12, atol=1e-12)


def test_the_residual_the_relu_the_positions_and_the_output_mistakes():
    for text in (EPS, PRE):
        p = read(text)
        b, post = p.block, p.block.kind == "post-ln"
        right = block_forward(p, Float())
        first, second = ("R1", "R2") if post else ("H1", "H")
        run = block_forward(p, Float(), transform=Transform(residual="no-first"))
        np.testing.assert_array_equal(A(run.shown[first]), A(run.shown["Z"]))          # the sublayer's output alone
        run = block_forward(p, Float(), transform=Transform(residual="no-second"))
        np.testing.assert_array_equal(A(run.shown[second]), A(run.shown["F"]))
        np.testing.assert_array_equal(A(run.shown[first]), A(right.shown[first]))
        # ReLU before the bias: relu(x·W_1) + b_1, from the same U
        run = block_forward(p, Float(), transform=Transform(relu="before-bias"))
        U, b1 = A(run.shown["U"]), A([b.b_1])
        np.testing.assert_allclose(A(run.shown["G"]), np.maximum(U - b1, 0) + b1, atol=1e-14)
        # sin and cos swapped
        run = block_forward(p, Float(), transform=Transform(sincos="swapped"))
        for pos in range(p.n):
            for c in range(p.d_model):
                angle = pos / 10000 ** ((c - c % 2) / p.d_model)
                assert run.shown["P"][pos][c] == pytest.approx((math.cos if c % 2 == 0 else math.sin)(angle), abs=1e-15)
        # positions after attention: the heads take X (post) or LN_1(X) (pre); X0 = X + P as before
        run = block_forward(p, Float(), transform=Transform(positions="after-attention"))
        np.testing.assert_array_equal(A(run.shown["X0"]), A(right.shown["X0"]))
        X = A([[float(x) for x in r] for r in p.X])
        heads_in = X if post else ln_ref(X, A([b.gamma_1]), A([b.beta_1]), float(b.eps))
        np.testing.assert_allclose(A(run.shown["head1.Q"]), heads_in @ A(p.heads[0].W_Q), atol=1e-12)
        # log base 10: the loss over ln 10; the output softmax down the columns: each column adds up to 1
        run = block_forward(p, Float(), transform=Transform(log="log10"))
        assert run.loss == pytest.approx(right.loss / math.log(10), rel=1e-13)
        run = block_forward(p, Float(), transform=Transform(output_softmax="columns"))
        np.testing.assert_allclose(A(run.shown["probs"]).sum(axis=0), 1, rtol=1e-13)


def test_a_mistake_applies_only_where_the_problem_can_make_it():
    """No ε: only the forgotten √; no positions: no swapped sin and cos, no positions after attention; no output
    layer: no log₁₀ and no output softmax mistake; a zero b_1: no ReLU-before-bias. Attention-only problems have
    none of the block's mistakes."""
    p = read(BLOCK.replace('eps = "1/100"', 'eps = "0"').replace('positional = "sinusoidal"', "").replace("b_1 = [0, \"1/2\", -1]", "b_1 = [0, 0, 0]")
             .split("W_out =")[0])
    M = mistakes.MISTAKES
    assert M["norm-root"].transforms(p) == [Transform(norm_root="no-sqrt")]
    for mid in ("sin-cos-swapped", "positions-after-attention", "log10-loss", "output-softmax-columns", "relu-before-bias"):
        assert M[mid].transforms(p) == [], mid
    att = read("X = [[1, 0], [0, 1]]\nW_Q = [[1, 0], [0, 1]]\nW_K = [[1, 0], [0, 1]]\nW_V = [[1, 0], [0, 1]]\n")
    assert not {m.id for m in mistakes.of(stages.of(att))} & BLOCK_IDS
    assert all(M[mid].transforms(att) == [] for mid in BLOCK_IDS)


@pytest.mark.parametrize("text", [EPS, PRE], ids=["post-ln", "pre-ln"])
def test_worked_check_names_each_planted_block_mistake(text):
    """A student's answers to the matrix where a mistake first shows, made with that mistake (every transform of
    each) and written at the problem's places: `worked check` names it, but for forgetting ε = 1/100, which moves
    the normalised rows less than a student who rounds σ to the problem's places does (every answer within the
    band: tests/test_block_check_band.py). log₁₀ shows first in the loss, one number:
    named from it alone where a wrong loss lands in its band by chance rarely enough, as here
    (tests/test_block_check_loss.py)."""
    from worked.check import check_answers
    from worked.solver import solve

    p = read(text)
    arch, sol = stages.of(p), solve(p)
    for mid in sorted(BLOCK_IDS):
        for t in mistakes.MISTAKES[mid].transforms(p):
            key = declared(arch, mid)
            if t.residual == "no-second":
                key = "R2" if p.block.kind == "post-ln" else "H"
            wrong = block_forward(p, Float(), transform=t).shown[key]
            report = check_answers(p, {key: [[round(x, p.decimals) for x in row] for row in wrong]}, solution=sol)
            named = report.summary()["mistakes"]
            if t.norm_root == "no-eps":       # √σ² for √(σ² + 1/100): within what rounding σ to 2 places moves
                assert report.summary()["wrong"] <= 1 and named == [], report.text()[:600]
                continue
            assert named == [mid], (mid, t, key, report.text()[:600])


def test_a_mistakes_pass_through_a_row_of_variance_zero_is_undefined_not_an_error():
    """With ε = 0, leaving out the second residual add here leaves a row of equal entries (F's) for LN_2: the
    mistake's pass has no value there (NaN in floats: a quiz offers no such world), where the problem's own pass
    would be an error."""
    p = read(BLOCK.replace('eps = "1/100"', 'eps = "0"'))
    run = block_forward(p, Float(), transform=Transform(residual="no-second"))
    assert any(x != x for row in run.shown["H"] for x in row)        # NaN: no value
    from worked.quiz import mistake_worlds

    assert "no-residual" in dict(mistake_worlds(p))                   # the first residual's world is still offered
    assert all(x is not None for row in block_forward(p, Float()).shown["H"] for x in row)
