"""Properties of the solver on random small problems (hypothesis)."""
import numpy as np
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import worked
from worked.audit import audit

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def problems(draw, heads=False):
    n = draw(st.integers(1, 4))
    dm = draw(st.integers(1, 3))
    dk = draw(st.integers(1, 3))
    dv = draw(st.integers(1, 3))
    ent = st.integers(-2, 3)
    mat = lambda r, c: draw(st.lists(st.lists(ent, min_size=c, max_size=c), min_size=r, max_size=r))  # noqa: E731
    X = mat(n, dm)
    scale = draw(st.sampled_from(["sqrt", "none", "2", "0.5"]))
    mask = draw(st.sampled_from(["none", "causal"]))
    decimals = draw(st.integers(1, 3))
    if heads:
        h = draw(st.integers(1, 3))
        hs = [(mat(dm, dk), mat(dm, dk), mat(dm, dv)) for _ in range(h)]
        W_O = mat(h * dv, draw(st.integers(1, 3)))
        return worked.Problem(X, heads=hs, W_O=W_O, scale=scale, mask=mask, decimals=decimals)
    return worked.Problem(X, mat(dm, dk), mat(dm, dk), mat(dm, dv), scale=scale, mask=mask, decimals=decimals)


def solve(p, **kw):
    """Solve, skipping (hypothesis.assume) problems whose scores are too large for a hand exercise."""
    from hypothesis import assume

    try:
        return worked.solve(p, **kw)
    except worked.ProblemError as exc:
        assert "too large for a hand exercise" in str(exc)
        assume(False)


def _np(m):
    return np.array([[float(x) for x in row] for row in m], dtype=float)


def _reference(p, head):
    X = _np(p.X)
    Q, K, V = X @ _np(head.W_Q), X @ _np(head.W_K), X @ _np(head.W_V)
    S = Q @ K.T
    f = {"sqrt": np.sqrt(p.d_k), "none": 1.0}.get(p.scale) if isinstance(p.scale, str) else float(p.scale)
    S = S / f
    if p.mask == "causal":
        S = np.where(np.triu(np.ones_like(S), 1) > 0, -np.inf, S)
    E = np.exp(S - S.max(axis=1, keepdims=True))
    A = E / E.sum(axis=1, keepdims=True)
    return Q, K, V, A, A @ V


@SETTINGS
@given(problems())
def test_weights_rows_sum_to_exactly_one(p):
    """Each row of the exact weights sums to exactly 1 (symbolically, not just numerically)."""
    sol = solve(p)
    w = sol.heads[0].weights
    for i in range(p.n):
        num, den = sp.fraction(sp.together(sp.Add(*w.exact[i])))
        assert sp.expand(num - den) == 0


@SETTINGS
@given(problems())
def test_exact_agrees_with_numpy(p):
    """Exact values agree with a NumPy float computation to 1e-9."""
    sol = solve(p)
    h = sol.heads[0]
    Q, K, V, A, Z = _reference(p, p.heads[0])
    for mine, ref in ((h.Q, Q), (h.K, K), (h.V, V), (h.weights, A), (h.Z, Z)):
        got = np.array([[float(sp.N(x, 30)) for x in row] for row in mine.exact])
        assert np.allclose(got, ref, rtol=1e-9, atol=1e-9)


@SETTINGS
@given(problems(), st.sampled_from(["one", "row", "all"]))
def test_auditor_passes(p, checks):
    """The auditor finds nothing wrong in any displayed line, at every --checks level."""
    assert audit(solve(p, checks=checks)) == []


@SETTINGS
@given(problems())
def test_masked_weights_are_exactly_zero(p):
    """Under the causal mask every weight above the diagonal is exactly 0 and the score is −∞."""
    sol = solve(p)
    h = sol.heads[0]
    for i in range(p.n):
        for j in range(p.n):
            if p.mask == "causal" and j > i:
                assert h.weights.exact[i][j] == 0
                assert h.scores.exact[i][j] == sp.S.NegativeInfinity
                assert h.scores.value(i, j) is None


@SETTINGS
@given(problems(heads=True))
def test_multihead_output_is_concat_times_wo(p):
    """With several heads, the output equals concat(Z_1, …, Z_h)·W_O computed in NumPy."""
    sol = solve(p)
    Zs = [_reference(p, h)[4] for h in p.heads]
    ref = np.hstack(Zs) @ _np(p.W_O)
    got = np.array([[float(sp.N(x, 30)) for x in row] for row in sol.output.exact])
    assert np.allclose(got, ref, rtol=1e-9, atol=1e-9)
    assert audit(sol) == []
