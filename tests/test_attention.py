"""One forward pass (worked.attention) and one registry of mistakes (worked.mistakes).

* The Exact, Float and Interval backends agree on random problems (drawn with worked.generate), with and
  without every mistake's transform; the Exact pass is the solver's, form for form.
* Every mistake has a transform (early-rounding, documented, has none), applies where it can change
  something, and changes its stage (and nothing before it) on problems where it should.
* The same ids in the quiz manifest, the LMS exports and the check reports.
"""
from __future__ import annotations

import decimal
import json
import math
from decimal import Decimal
from fractions import Fraction

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worked.attention import NA, Exact, Float, Interval, Transform, contains, forward
from worked.check import check_answers
from worked.generate import Family, generate
from worked.mistakes import MISTAKES
from worked.problem import Problem, load
from worked.quiz import run
from worked.solver import AuditFailure, solve

from conftest import PROBLEMS

STAGES = ("Q", "K", "V", "scores", "scaled", "weights", "Z")

families = st.builds(
    Family,
    tokens=st.integers(2, 4),
    d_model=st.integers(2, 4),
    d_k=st.sampled_from([1, 2, 3, 4]),
    heads=st.sampled_from([1, 1, 2]),
    mask=st.sampled_from(["none", "causal"]),
    scale=st.sampled_from(["sqrt", "sqrt", "none"]),
    range=st.sampled_from([(-2, 3), (-1, 2), (0, 2)]),
)

def _all_transforms(problem):
    return [None] + [t for m in MISTAKES.values() for t in m.transforms(problem)]


def _as_float(x):
    """An exact value (Fraction or sympy) as a float; None for −∞ or an undefined value."""
    if x is sp.S.NegativeInfinity:
        return None
    try:
        v = complex(sp.N(x, 30)) if isinstance(x, sp.Basic) else complex(float(x))
    except TypeError:   # zoo, nan: 0/0 of no-exp
        return None
    return v.real if v.imag == 0 and math.isfinite(v.real) else None


def _close(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fam=families, seed=st.integers(0, 2**32))
def test_backends_agree_on_random_problems(fam, seed):
    """Exact, Float and 50-digit Interval passes give the same matrices, for the correct pass and for every
    mistake's transform; the rounding band of the widened Interval pass holds the exact value."""
    p = generate(fam, seed)
    for t in _all_transforms(p):
        ex = forward(p, Exact(), transform=t).matrices()
        fl = forward(p, Float(), transform=t).matrices()
        pt = forward(p, Interval(p, widen=False), transform=t).matrices()
        band = forward(p, Interval(p), transform=t).matrices()
        assert list(ex) == list(fl) == list(pt) == list(band)
        for key in ex:
            for i, row in enumerate(ex[key]):
                for j, x in enumerate(row):
                    e, f, iv, b = _as_float(x), fl[key][i][j], pt[key][i][j], band[key][i][j]
                    if x is sp.S.NegativeInfinity:
                        assert f == -math.inf and iv is None and b is None, (t, key)
                        continue
                    if e is None or not math.isfinite(f) or iv is None:
                        # no-exp over a row that sums to 0: undefined in every backend
                        assert t == Transform(softmax="no-exp"), (t, key, x, f, iv)
                        continue
                    assert iv[1] - iv[0] <= Decimal("1e-45") * max(1, abs(iv[0])), (t, key)   # widen=False: 50 digits
                    assert _close(e, f) and _close(e, float(iv[0])), (t, key, i, j, x, f, iv)
                    assert contains(b, iv[0]), (t, key)   # within 1e-30, as the checker compares


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fam=families, seed=st.integers(0, 2**32))
def test_exact_pass_is_the_solvers(fam, seed):
    """The Exact backend gives the solver's exact values in the solver's forms (what the worked steps show),
    and the keys of Solution.matrices(); its softmax rows hold weight = numer/D."""
    p = generate(fam, seed)
    try:
        sol = solve(p).audit()
    except AuditFailure:
        return
    run_ = forward(p, Exact())
    mats = sol.matrices()
    assert list(run_.matrices()) == list(mats)
    for key, m in mats.items():
        for i, row in enumerate(run_.matrices()[key]):
            for j, x in enumerate(row):
                assert str(sp.sympify(x) if not isinstance(x, sp.Basic) else x) == str(m.exact[i][j]), (key, i, j)
    assert run_.factor == sol.scale_factor
    for hp, hr in zip(run_.heads, sol.heads):
        assert hp.masked == hr.scores.masked
        for i, state in enumerate(hp.softmax):
            assert [state.numer[j] / state.D for j in state.js] == [hr.weights.exact[i][j] for j in state.js]
            assert state.js == [j for j in range(p.n) if (i, j) not in hp.masked]
            assert all(state.numer[j] == sp.exp(state.shifted[j]) for j in state.js)
            assert all(state.exps[j] == sp.exp(hp.scaled[i][j]) for j in state.js)
            assert state.total == sp.Add(*state.exps.values()) and state.D == sp.Add(*state.numer.values())
            assert state.shifted[state.low] == 0 and all(state.shifted[j] >= 0 for j in state.js)
    # the solver's 50-digit values lie in the point Interval pass's enclosures
    pts = forward(p, Interval(p, widen=False)).matrices()
    for key, m in mats.items():
        for i, row in enumerate(pts[key]):
            for j, iv in enumerate(row):
                assert (iv is None) == m.is_neg_inf(i, j)
                if iv is not None:
                    assert iv[0] <= m.num[i][j] <= iv[1], (key, i, j)


@settings(max_examples=300, deadline=None)
@given(cs=st.lists(st.integers(-6, 6), min_size=1, max_size=6), d=st.integers(1, 5),
       vs=st.lists(st.fractions(min_value=-3, max_value=3, max_denominator=4), min_size=6, max_size=6))
def test_exact_softmax_sums_are_sympys_own(cs, d, vs):
    """The Exact softmax collects a row's like terms itself (by exponent) and builds each sum in sympy's
    order: the denominators, the row's total of e^x and each Z entry's numerator are the very expressions
    sympy's evaluated sum gives (the same tree, so the same text and hash), with ties, a zero exponent,
    rational exponents (d = 1, 4) and coefficients that cancel."""
    ex = Exact()
    row = [sp.Rational(c, 2) / sp.sqrt(d) for c in cs]
    weights, state = ex.softmax(row)
    assert sp.srepr(state.D) == sp.srepr(sp.Add(*state.numer.values()))
    assert sp.srepr(state.total) == sp.srepr(sp.Add(*state.exps.values()))
    v = vs[:len(cs)]
    z = ex.mix(state, weights, v)
    want = sp.Add(*[state.numer[j] * sp.Rational(v[j].numerator, v[j].denominator) for j in state.js]) / state.D
    assert sp.srepr(z) == sp.srepr(want) and hash(z) == hash(want)
    v = [sp.sqrt(2)] + [sp.Rational(x.numerator, x.denominator) for x in v[1:]]   # not all rational: sympy sums
    want = sp.Add(*[state.numer[j] * v[j] for j in state.js]) / state.D
    assert sp.srepr(ex.mix(state, weights, v)) == sp.srepr(want)


def test_interval_precision_does_not_depend_on_the_thread_decimal_context():
    """The checker's 50 digits come from worked's own decimal contexts: a low precision or another rounding in
    the thread's decimal context changes nothing."""
    p = load(str(PROBLEMS / "cats-chase-mice.toml"))
    before = forward(p, Interval(p, widen=False)).matrices()["weights"]
    with decimal.localcontext(decimal.Context(prec=5, rounding=decimal.ROUND_UP)):
        low = forward(p, Interval(p, widen=False)).matrices()["weights"]
    assert before == low
    exact = Decimal(str(sp.N(solve(p).matrices()["weights"].exact[0][0], 60)))
    lo, hi = low[0][0]
    assert lo <= exact <= hi and hi - lo < Decimal("1e-45")


def _exact_value(x):
    """An exact value as a Fraction (rational) or a 70-digit Decimal; None for −∞ or an undefined value."""
    if x is sp.S.NegativeInfinity:
        return None
    if isinstance(x, Fraction):
        return x
    if getattr(x, "is_Rational", False):
        return Fraction(int(x.p), int(x.q))
    v = sp.N(x, 70)
    if not v.is_real or not v.is_finite:   # zoo, nan: 0/0 of no-exp
        return None
    return Decimal(str(v))


def _inside(iv, x) -> bool:
    """lo ≤ x ≤ hi, exactly (Decimals compare exactly with each other; Fractions through Fraction(Decimal))."""
    if isinstance(x, Fraction):
        return Fraction(iv[0]) <= x <= Fraction(iv[1])
    return iv[0] <= x <= iv[1]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fam=families, seed=st.integers(0, 2**32))
def test_interval_encloses_the_exact_value_on_random_problems(fam, seed):
    """Directed rounding makes the Interval backend an enclosure: on random problems and under every mistake's
    transform, each entry of the point pass (widen=False) and of the checker's widened band holds the exact
    value (a rational compared exactly, any other value to 70 digits), with no slack."""
    p = generate(fam, seed)
    for t in _all_transforms(p):
        ex = forward(p, Exact(), transform=t).matrices()
        pts = forward(p, Interval(p, widen=False), transform=t).matrices()
        band = forward(p, Interval(p), transform=t).matrices()
        for key in ex:
            for i, row in enumerate(ex[key]):
                for j, x in enumerate(row):
                    v, iv, b = _exact_value(x), pts[key][i][j], band[key][i][j]
                    if v is None or iv is None:
                        assert (x is sp.S.NegativeInfinity) == (iv is None) or t == Transform(softmax="no-exp")
                        continue
                    assert iv[0] <= iv[1] and _inside(iv, v), (t, key, i, j, x, iv)
                    assert _inside(b, v), (t, key, i, j, x, b)


def test_interval_ends_are_rounded_outward():
    """Each interval operation encloses its exact result; a value that is a 50-digit decimal stays a point."""
    from worked.attention import iv_div, iv_exp, iv_frac, iv_mul, iv_sum

    third = iv_frac(Fraction(1, 3))
    assert Fraction(third[0]) < Fraction(1, 3) < Fraction(third[1])
    assert iv_frac(Fraction(-43, 100)) == (Decimal("-0.43"), Decimal("-0.43"))
    for a, b in [(third, iv_frac(Fraction(-2, 7))), (iv_frac(Fraction(-5, 3)), iv_frac(Fraction(-1, 9))),
                 ((Decimal(-1), Decimal(2)), third)]:
        fa, fb = (Fraction(a[0]), Fraction(a[1])), (Fraction(b[0]), Fraction(b[1]))
        prods = [x * y for x in fa for y in fb]
        m = iv_mul(a, b)
        assert Fraction(m[0]) <= min(prods) and max(prods) <= Fraction(m[1])
        if not b[0] <= 0 <= b[1]:
            q = iv_div(a, b)
            quots = [x / y for x in fa for y in fb]
            assert Fraction(q[0]) <= min(quots) and max(quots) <= Fraction(q[1])
    s = iv_sum([third] * 3)
    assert Fraction(s[0]) <= 1 <= Fraction(s[1]) and s[0] < s[1]
    for x in ("0", "1", "-2.5", "13.8", "-40", "300"):
        e = iv_exp((Decimal(x), Decimal(x)))
        true = Decimal(str(sp.N(sp.exp(sp.Rational(x)), 70)))
        assert e[0] < true < e[1] or (x == "0" and e[0] < 1 < e[1])
    p = load(str(PROBLEMS / "cats-chase-mice.toml"))     # √2
    lo, hi = Interval(p, widen=False).factor(p, None)
    assert Fraction(lo) ** 2 < 2 < Fraction(hi) ** 2 and hi - lo < Decimal("1e-48")


def test_given_entries_are_carried_forward():
    """Given entries replace computed ones for the later stages; NA keeps the computed entry."""
    p = load(str(PROBLEMS / "cats-chase-mice.toml"))
    right = forward(p, Float()).matrices()
    unscaled = [[x for x in row] for row in right["scores"]]
    run_ = forward(p, Float(), given={"scaled": unscaled})
    assert run_.matrices()["scaled"] == right["scaled"]             # what the stage computed
    assert run_.carried["scaled"] == unscaled                       # what flowed on
    no_scaling = forward(p, Float(), transform=Transform(scale="one")).matrices()
    assert run_.matrices()["weights"] == no_scaling["weights"]
    partial = [[NA] * 3, unscaled[1], [NA] * 3]
    mixed = forward(p, Float(), given={"scaled": partial}).matrices()["weights"]
    assert mixed == [right["weights"][0], no_scaling["weights"][1], right["weights"][2]]


# ---------------------------------------------------------------- the registry

def _problems():
    return [load(str(PROBLEMS / name)) for name in
            ("cats-chase-mice.toml", "causal-mask.toml", "two-heads.toml", "no-scaling.toml", "four-tokens-fractions.toml",
             "cross-attention.toml")]


def test_every_mistake_has_a_transform_or_is_early_rounding():
    """Each mistake has an id, a title, a stage, a check text and, except early-rounding (which is not a
    different pass), quiz feedback ending with its id and a transform on some shipped problem."""
    forward_pass = ["no-scaling", "scaled-by-dk", "transposed-scores", "wrong-mask", "column-softmax",
                    "no-exp", "weights-transposed", "kv-from-decoder", "queries-from-encoder", "causal-mask-on-cross",
                    "heads-swapped", "no-W_O", "heads-averaged", "early-rounding"]
    assert [m for m in MISTAKES if m in forward_pass] == forward_pass
    backward = ["softmax-backward-sum", "dV-not-transposed", "no-scaling-backward", "dK-not-transposed",
                "update-wrong-sign"]   # a [train] problem's: tests/test_train.py
    block = ["norm-over-columns", "variance-n-minus-1", "norm-root", "no-residual", "relu-before-bias",
             "positions-after-attention", "sin-cos-swapped", "log10-loss", "output-softmax-columns"]   # tests/test_block_slips.py
    assert [m for m in MISTAKES if m not in forward_pass] == backward + block
    # (W_O square: the only kind of problem where leaving W_O out gives an output of the right shape)
    square = Problem([[1, 0], [0, 1]], heads=[([[1, 0], [0, 1]], [[0, 1], [1, 0]], [[1], [2]])] * 2,
                     W_O=[[1, 0], [0, 1]])
    for mid, m in MISTAKES.items():
        if mid not in forward_pass:
            continue
        assert m.id == mid and m.title and m.stage in STAGES + ("concat",) and m.feedback
        if mid == "early-rounding":
            assert m.answer is None and m.answer_feedback is None
            assert all(m.transforms(p) == [] for p in _problems())
            continue
        assert m.answer_feedback.startswith("This is the value you get") and m.answer_feedback.endswith(f"[{mid}]")
        assert any(m.transforms(p) for p in _problems() + [square]), mid


def test_each_mistake_changes_its_stage_and_nothing_before():
    """On every shipped problem where it applies, a mistake's transform leaves the stages before its own as
    they are and changes its own stage (wrong-mask and weights-transposed: their first changed matrix)."""
    first = {"no-scaling": "scaled", "scaled-by-dk": "scaled", "transposed-scores": "scores", "wrong-mask": "scores",
             "column-softmax": "weights", "no-exp": "weights", "weights-transposed": "Z",
             "kv-from-decoder": "K", "queries-from-encoder": "Q", "causal-mask-on-cross": "scores"}
    for p in _problems():
        right = forward(p, Exact()).matrices()
        for mid, stage in first.items():
            for t in MISTAKES[mid].transforms(p):
                wrong = forward(p, Exact(), transform=t).matrices()
                for key in right:
                    base = key.split(".")[-1]
                    if base in STAGES and STAGES.index(base) < STAGES.index(stage):
                        assert wrong[key] == right[key], (p.title, mid, key)
                changed = [k for k in right if k.split(".")[-1] == stage and wrong[k] != right[k]]
                assert changed, (p.title, mid, t)


def test_mistakes_apply_only_where_they_change_something():
    p = load(str(PROBLEMS / "cats-chase-mice.toml"))           # d_k = 2, no mask
    assert MISTAKES["wrong-mask"].transforms(p) == []
    assert len(MISTAKES["wrong-mask"].transforms(load(str(PROBLEMS / "causal-mask.toml")))) == 2
    none = load(str(PROBLEMS / "no-scaling.toml"))
    assert none.scale == "none"
    assert MISTAKES["no-scaling"].transforms(none) == [] and MISTAKES["scaled-by-dk"].transforms(none) == []
    one = Problem([[1, 0], [0, 1]], [[1], [2]], [[1], [1]], [[1], [0]])   # d_k = 1: √d_k = d_k = 1
    assert MISTAKES["no-scaling"].transforms(one) == [] and MISTAKES["scaled-by-dk"].transforms(one) == []


@pytest.mark.parametrize("name", ["cats-chase-mice.toml", "causal-mask.toml", "four-tokens-fractions.toml"])
def test_checker_names_each_mistake_from_its_own_pass(name):
    """A student who makes one mistake (the mistake's pass, every answer rounded to the problem's places)
    is told that mistake, by its registry id."""
    p = load(str(PROBLEMS / name))
    sol = solve(p)
    for m in MISTAKES.values():
        for t in m.transforms(p):
            wrong = forward(p, Float(), transform=t).matrices()
            right = forward(p, Float()).matrices()
            keys = [k for k in ("scores", "scaled", "weights", "Z") if wrong[k] != right[k]]
            answers = {k: [["-inf" if x == -math.inf else f"{x:.{p.decimals}f}" for x in row] for row in wrong[k]]
                       for k in keys}
            codes = [d["code"] for d in check_answers(p, answers, solution=sol).diagnoses]
            assert m.id in codes, (name, m.id, t, codes)


# ---------------------------------------------------------------- the same ids everywhere

@pytest.fixture(scope="module")
def quiz(tmp_path_factory):
    out = tmp_path_factory.mktemp("ids") / "q"
    run(PROBLEMS / "quiz-2-causal.toml", count=3, outdir=out, formats="moodle,gift", jobs=1, quiet=True)
    return out


def test_same_ids_in_manifest_exports_and_check_reports(quiz):
    """Every mistake in the manifest has a registry id and its registry feedback; the Moodle and GIFT exports
    carry that feedback (with the id); answering a question's matrix the mistaken way, the checker names
    the same id."""
    man = json.loads((quiz / "manifest.json").read_text())
    moodle = (quiz / "moodle.xml").read_text()
    gift = (quiz / "quiz.gift.txt").read_text()
    seen = set()
    for v in man["variants"]:
        p = Problem.from_dict(v["problem"])
        sol = solve(p)
        for q in v["questions"]:
            ids = {m["id"] for e in q["entries"] for m in e["mistakes"]}
            for e in q["entries"]:
                for m in e["mistakes"]:
                    assert m["id"] in MISTAKES and m["feedback"] == MISTAKES[m["id"]].answer_feedback
                    assert f"[{m['id']}]" in moodle and f"[{m['id']}]" in gift
            key = q["matrix"]
            for mid in ids:
                for t in MISTAKES[mid].transforms(p):
                    grid = forward(p, Float(), transform=t).matrices()[key]
                    if grid == forward(p, Float()).matrices()[key]:
                        continue
                    ans = {key: [["-inf" if x == -math.inf else f"{x:.{p.decimals}f}" for x in row] for row in grid]}
                    rep = check_answers(p, ans, solution=sol)
                    codes = [d["code"] for d in rep.diagnoses]
                    assert set(codes) <= set(MISTAKES)
                    if mid in codes:
                        seen.add(mid)
    assert {"no-scaling", "transposed-scores", "column-softmax"} <= seen
