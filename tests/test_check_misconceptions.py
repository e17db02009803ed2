"""Misconception detectors: each mistake, applied in code to random small problems, is named; correct answers never are.

The wrong answers are made here with NumPy floats (independently of the checker's interval code):
the mistake is applied at its step, later steps are computed correctly from the mistaken values,
and every answer is rounded to the problem's decimals, as a student would write it.
"""
from __future__ import annotations

import functools

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from worked import printers
from worked.check import check_answers
from worked.problem import Problem
from worked.solver import AuditFailure, solve

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@st.composite
def problems(draw, mask=None, min_dk=1):
    n = draw(st.integers(2, 4))
    dm = draw(st.integers(2, 3))
    dk = draw(st.integers(min_dk, 3))
    ints = st.integers(-2, 3)
    mat = lambda r, c: draw(st.lists(st.lists(ints, min_size=c, max_size=c), min_size=r, max_size=r))  # noqa: E731
    m = mask or draw(st.sampled_from(["none", "causal"]))
    p = Problem(mat(n, dm), mat(dm, dk), mat(dm, dk), mat(dm, 2), mask=m)
    S = pipeline(p)["scores"]
    assume(np.max(np.abs(S[np.isfinite(S)])) <= 8)  # a hand exercise: the softmax does not saturate
    assume(solved(p) is not None)
    return p


@functools.lru_cache(maxsize=512)
def solved(p: Problem):
    """The core's solution, or None where the core cannot show the softmax of a near-saturated row
    (AuditFailure: reported to the core, not the checker's business)."""
    try:
        return solve(p).audit()
    except AuditFailure:
        return None


def softmax_rows(T):
    out = np.zeros_like(T)
    for i, row in enumerate(T):
        ok = np.isfinite(row)
        e = np.exp(row[ok] - row[ok].max())
        out[i, ok] = e / e.sum()
    return out


def pipeline(p: Problem, mistake: str | None = None):
    """Float reference of every matrix, with *mistake* applied at its step."""
    f = lambda m: np.array([[float(x) for x in r] for r in m])  # noqa: E731
    X, h = f(p.X), p.heads[0]
    Q, K, V = X @ f(h.W_Q), X @ f(h.W_K), X @ f(h.W_V)
    n = p.n
    raw = K @ Q.T if mistake == "transposed-scores" else Q @ K.T
    mask = np.triu(np.ones((n, n), bool), 1) if p.mask == "causal" else np.zeros((n, n), bool)
    if mistake == "wrong-mask:none":
        mask = np.zeros((n, n), bool)
    elif mistake == "wrong-mask:lower":
        mask = np.tril(np.ones((n, n), bool), -1)
    S = np.where(mask, -np.inf, raw)
    factor = {"no-scaling": 1.0, "scaled-by-dk": float(p.d_k)}.get(mistake, np.sqrt(p.d_k))
    T = S / factor
    if mistake == "column-softmax":
        A = softmax_rows(T.T).T
    elif mistake == "no-exp":
        Tz = np.where(np.isfinite(T), T, 0.0)
        sums = Tz.sum(axis=1, keepdims=True)
        assume(np.all(np.abs(sums) > 0.5))  # the mistake needs a usable row sum
        A = Tz / sums
    else:
        A = softmax_rows(T)
    Z = (A.T if mistake == "weights-transposed" else A) @ V
    return {"Q": Q, "K": K, "V": V, "scores": S, "scaled": T, "weights": A, "Z": Z}


def written(M, places=2):
    """How a student writes a matrix: decimals to *places*, "-inf" for masked entries."""
    return [[("-inf" if not np.isfinite(x) else f"{round(float(x), places) + 0.0:.{places}f}") for x in row] for row in M]


STAGE = {"transposed-scores": "scores", "wrong-mask:none": "scores", "wrong-mask:lower": "scores",
         "no-scaling": "scaled", "scaled-by-dk": "scaled", "column-softmax": "weights", "no-exp": "weights",
         "weights-transposed": "Z"}
ORDER = ["scores", "scaled", "weights", "Z"]


def _visible(good, bad, keys):
    """The mistake changes given entries by clearly more than any rounding band: in the first given matrix,
    a −∞ moved, or at least three entries (one or two entries is not enough evidence to name a mistake: see test_check_evidence.py)."""
    changed = 0
    for k in keys[:1]:   # the first given matrix shows the mistake; the later ones carry it forward
        g, b = good[k], bad[k]
        both = np.isfinite(g) & np.isfinite(b)
        if np.any(np.isfinite(g) != np.isfinite(b)):
            return True
        changed += int(np.sum(np.abs(g[both] - b[both]) > 0.15))
    return changed >= 3


def _run_mistake(p, mistake, pick):
    stage = STAGE[mistake]
    later = ORDER[ORDER.index(stage):]
    keys = [k for k in later if pick(k)] or [later[-1]]
    good, bad = pipeline(p), pipeline(p, mistake)
    assume(_visible(good, bad, keys))
    answers = {k: written(bad[k]) for k in keys}
    report = check_answers(p, answers, solution=solved(p))
    return report, keys


@SETTINGS
@given(problems(), st.sampled_from(["transposed-scores", "no-scaling", "column-softmax", "no-exp", "weights-transposed"]),
       st.data())
def test_each_mistake_is_named(p, mistake, data):
    """A mistake applied to a random problem (and carried correctly into the later answers) is named by its code."""
    report, keys = _run_mistake(p, mistake, lambda k: data.draw(st.booleans(), label=f"give {k}"))
    codes = {d["code"] for d in report.diagnoses}
    assert mistake in codes, (keys, report.text())


@SETTINGS
@given(problems(min_dk=2), st.data())
def test_scaled_by_dk_is_named(p, data):
    """Dividing by d_k instead of √d_k is named scaled-by-dk (d_k ≥ 2, where the two differ)."""
    report, keys = _run_mistake(p, "scaled-by-dk", lambda k: data.draw(st.booleans(), label=f"give {k}"))
    assert "scaled-by-dk" in {d["code"] for d in report.diagnoses}, report.text()


@SETTINGS
@given(problems(mask="causal"), st.sampled_from(["wrong-mask:none", "wrong-mask:lower"]), st.data())
def test_wrong_mask_is_named(p, mistake, data):
    """In a causal problem, masking nothing or the lower triangle is named wrong-mask."""
    report, keys = _run_mistake(p, mistake, lambda k: data.draw(st.booleans(), label=f"give {k}"))
    assert "wrong-mask" in {d["code"] for d in report.diagnoses}, report.text()


@SETTINGS
@given(problems(), st.data())
def test_correct_answers_get_no_diagnosis(p, data):
    """Correct answers, rounded to the problem's decimals at the end (any subset of matrices), are all correct
    and trigger no diagnosis at all."""
    good = pipeline(p)
    keys = [k for k in good if data.draw(st.booleans(), label=k)] or ["Z"]
    report = check_answers(p, {k: written(good[k]) for k in keys}, solution=solved(p))
    assert report.diagnoses == []
    assert report.summary()["wrong"] == 0 and report.summary()["correct"] > 0


@SETTINGS
@given(problems())
def test_early_rounding_is_accepted_but_pointed_out(p):
    """Z from weights rounded to 2 places too early is accepted (all correct) and named early-rounding."""
    good = pipeline(p)
    A_r = np.round(good["weights"], 2)
    Z_early = A_r @ good["V"]
    assume(np.max(np.abs(np.round(Z_early, 2) - good["Z"])) > 0.0051)  # rounding early changed the answer
    report = check_answers(p, {"Z": written(Z_early)}, solution=solved(p))
    assert report.summary()["wrong"] == 0, report.text()
    assert [d["code"] for d in report.diagnoses] == ["early-rounding"]


def test_mistake_degenerate_problem_needs_no_diagnosis():
    """When the mistake gives the true answer (a symmetric score matrix: K·Qᵀ = Q·Kᵀ), nothing is wrong and
    nothing is diagnosed."""
    p = Problem([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 2], [3, 4]])
    bad = pipeline(p, "transposed-scores")
    report = check_answers(p, {"scores": written(bad["scores"])})
    assert report.summary()["wrong"] == 0 and report.diagnoses == []


def test_diagnosis_names_step_to_reread():
    """A diagnosis carries the worked step to re-read: number and title from Solution.steps."""
    p = Problem([[1, 0, 1, 0], [0, 2, 0, 1], [1, 1, 0, 0]], [[1, 0], [0, 1], [1, 0], [0, 1]],
                [[0, 1], [1, 0], [1, 0], [0, 1]], [[1, 0], [0, 1], [1, 1], [0, 0]])
    sol = solve(p)
    bad = pipeline(p, "no-scaling")
    report = check_answers(p, {"weights": written(bad["weights"])}, solution=sol)
    (d,) = report.diagnoses
    number = [i for i, s in enumerate(sol.steps, 1) if s.result == "scaled"][0]
    assert d["code"] == "no-scaling"
    assert d["step"]["number"] == number and d["step"]["title"] == printers.text(sol.steps[number - 1].title_prose)
    assert f"Step {number}" in report.text()
