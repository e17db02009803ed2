"""Cross-attention (Part 11's encoder–decoder attention), declared as stages: NumPy references written here for
the forward pass and one training step (one and two heads), the problem file's rules, the mistakes planted and
named, and every page of a cross problem audited by the hand rule."""
from __future__ import annotations

import numpy as np
import pytest

from worked import stages
from worked.attention import Float, Transform, forward
from worked.check import check_answers
from worked.errors import ProblemError
from worked.problem import Problem, load
from worked.render import view
from worked.solver import solve

CROSS = "problems/cross-attention.toml"
CROSS_TRAIN = "problems/cross-attention-train.toml"

TWO_HEADS = dict(
    attention="cross", tokens=["a", "b"], X=[[1, 0], [0, 1]], tokens_enc=["u", "v", "w"], X_enc=[[1, 1], [0, 1], [1, 0]],
    heads=[{"W_Q": [[1, 0], [0, 1]], "W_K": [[1, 1], [0, 1]], "W_V": [[1, 0], [0, 1]]},
           {"W_Q": [[0, 1], [1, 0]], "W_K": [[1, 0], [1, 1]], "W_V": [[1, 1], [0, 1]]}],
    W_O=[[1, 0], [0, 1], [1, 1], [0, 1]], train={"target": [[1, 0], [0, 1]], "lr": "1/2"})


def _reference(p):
    """Cross-attention and one MSE step in NumPy: Q = X·W_Q, K = X_enc·W_K, V = X_enc·W_V (per head), W_O."""
    X, Xe = np.array(p.X, float), np.array(p.X_enc, float)
    out, cache = {}, []
    for h, hd in enumerate(p.heads, 1):
        WQ, WK, WV = (np.array(m, float) for m in hd)
        Q, K, V = X @ WQ, Xe @ WK, Xe @ WV
        S = Q @ K.T
        T = S / np.sqrt(Q.shape[1])
        A = np.exp(T - T.max(axis=1, keepdims=True))
        A /= A.sum(axis=1, keepdims=True)
        pre = f"head{h}." if p.multihead else ""
        out.update({pre + "Q": Q, pre + "K": K, pre + "V": V, pre + "scores": S, pre + "scaled": T,
                    pre + "weights": A, pre + "Z": A @ V})
        cache.append((pre, Q, K, V, A, WQ, WK, WV))
    concat = np.hstack([out[c[0] + "Z"] for c in cache])
    Z = concat @ np.array(p.W_O, float) if p.multihead else concat
    out["Z"] = Z
    if p.train is not None:
        dZ = Z - np.array(p.train.target, float)
        out["loss"] = np.array([[0.5 * (dZ ** 2).sum()]])
        dcat = dZ @ np.array(p.W_O, float).T if p.multihead else dZ
        dv = cache[0][3].shape[1]
        lr = float(p.train.lr)
        for k, (pre, Q, K, V, A, WQ, WK, WV) in enumerate(cache):
            dZh = dcat[:, k * dv:(k + 1) * dv]
            dA = dZh @ V.T
            dS = A * (dA - (A * dA).sum(axis=1, keepdims=True))
            dsc = dS / np.sqrt(Q.shape[1])
            dQ, dK, dV = dsc @ K, dsc.T @ Q, A.T @ dZh
            out.update({pre + "dV": dV, pre + "dA": dA, pre + "dS": dS, pre + "dscores": dsc, pre + "dQ": dQ,
                        pre + "dK": dK, pre + "dW_Q": X.T @ dQ, pre + "dW_K": Xe.T @ dK, pre + "dW_V": Xe.T @ dV,
                        pre + "W_Q_new": WQ - lr * X.T @ dQ, pre + "W_K_new": WK - lr * Xe.T @ dK,
                        pre + "W_V_new": WV - lr * Xe.T @ dV})
    return out


@pytest.mark.parametrize("problem", [load(CROSS), load(CROSS_TRAIN), Problem.from_dict(TWO_HEADS)],
                         ids=["cross", "cross-train", "two-heads-train"])
def test_forward_and_backward_match_numpy(problem):
    got = forward(problem, Float()).shown
    ref = _reference(problem)
    for key, want in ref.items():
        assert np.allclose(np.array(got[key], float), want, atol=1e-12), key
    d = stages.Dims.of_problem(problem)
    assert {k: np.array(v).shape for k, v in got.items()} == stages.matrices(d)
    w = problem.heads[0]
    assert np.array(got["head1.scores" if problem.multihead else "scores"]).shape == (problem.n, problem.n_kv)
    assert np.array(got["head1.Z" if problem.multihead else "Z"]).shape == (problem.n, len(w.W_V[0]))


def test_exact_solution_agrees_and_every_line_holds_by_hand():
    for f in (CROSS, CROSS_TRAIN):
        p = load(f)
        ref = _reference(p)
        for display in ("exact", "decimal"):
            for checks in ("one", "all"):
                sol = solve(p, checks=checks, display=display)
                sol.audit()         # the hand rule on every line (an AuditFailure otherwise)
        mats = sol.matrices()
        for key, want in ref.items():
            m = mats[key]
            assert np.allclose([[float(m.num[i][j]) for j in range(m.shape[1])] for i in range(m.shape[0])], want), key
        # rows of the decoder's tokens, columns of the encoder's
        assert list(mats["scores"].rows) == list(p.tokens) and list(mats["scores"].cols) == list(p.tokens_enc)
        assert list(mats["K"].rows) == list(p.tokens_enc) and list(mats["Q"].rows) == list(p.tokens)


def test_pages_say_which_side_each_matrix_comes_from():
    p = load(CROSS)
    sol = solve(p)
    text = sol.text if isinstance(getattr(sol, "text", None), str) else None
    from worked.writers.text import render
    out = render(sol)
    assert "Keys: K = X_enc·W_K" in out and "Values: V = X_enc·W_V" in out and "Queries: Q = X·W_Q" in out
    assert "encoder tokens: le, chat, noir, dort" in out
    grids = {g["key"]: g for g in view.answer_grids(p)}
    assert grids["scores"]["rows"] == list(p.tokens) and grids["scores"]["cols"] == list(p.tokens_enc)
    assert grids["K"]["rows"] == list(p.tokens_enc) and "encoder" in grids["K"]["label"]
    given = {g["key"]: g for g in view.given(p)}
    assert "X_enc" in given and "encoder side" in given["X_enc"]["note"] and "decoder side" in given["X"]["note"]
    assert text is None or "X_enc" in text


def test_problem_file_rules():
    base = load(CROSS).to_dict()
    assert Problem.from_dict(base) == load(CROSS)
    assert Problem.from_text(load(CROSS).to_toml()) == load(CROSS)
    with pytest.raises(ProblemError, match=r"mask: a causal mask is not used with attention = \"cross\""):
        Problem.from_dict({**base, "mask": "causal"})
    with pytest.raises(ProblemError, match="X_enc: missing"):
        Problem.from_dict({k: v for k, v in base.items() if k != "X_enc"})
    with pytest.raises(ProblemError, match="X_enc: expected 4 columns like X"):
        Problem.from_dict({**base, "X_enc": [[1, 0], [0, 1]], "tokens_enc": ["a", "b"]})
    with pytest.raises(ProblemError, match="tokens_enc: expected 4 tokens"):
        Problem.from_dict({**base, "tokens_enc": ["a"]})
    with pytest.raises(ProblemError, match='X_enc: X_enc is only used with attention = "cross"'):
        Problem.from_dict({**base, "attention": "self", "tokens_enc": None})
    with pytest.raises(ProblemError, match='attention: expected "self" or "cross"'):
        Problem.from_dict({**base, "attention": "both"})


def _answers(p, transform, keys):
    shown = forward(p, Float(), transform=transform).shown
    return {k: [["-inf" if x == float("-inf") else round(x, p.decimals) for x in row] for row in shown[k]] for k in keys}


@pytest.mark.parametrize("code, transform, keys", [
    ("causal-mask-on-cross", Transform(mask="upper"), ["scores", "scaled", "weights", "Z"]),
    ("kv-from-decoder", Transform(sides="kv-dec"), ["Z"]),
])
def test_mistakes_planted_are_named(code, transform, keys):
    p = load(CROSS)
    report = check_answers(p, _answers(p, transform, keys)).to_dict()
    assert [d["code"] for d in report["diagnoses"]] == [code]
    assert check_answers(p, _answers(p, Transform(), keys)).to_dict()["diagnoses"] == []


def test_sides_mistakes_on_equal_sides_and_shape_hints():
    # with as many decoder as encoder tokens, the queries taken from the encoder side are comparable and named
    p = Problem.from_dict({**load(CROSS).to_dict(), "tokens": ["a", "b", "c", "d"],
                           "X": [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 1]]})
    report = check_answers(p, _answers(p, Transform(sides="q-enc"), ["scores", "weights", "Z"])).to_dict()
    assert "queries-from-encoder" in [d["code"] for d in report["diagnoses"]]
    # with fewer decoder tokens, a K of the decoder's shape is a shape error that names the side
    q = load(CROSS)
    errors = check_answers(q, _answers(q, Transform(sides="kv-dec"), ["K"])).to_dict()["errors"]
    assert len(errors) == 1 and "one row per encoder token" in errors[0]["message"] and "kv-from-decoder" in errors[0]["message"]


def test_new_draws_good_cross_problems(tmp_path, cli):
    from worked.generate import Family, generate, violations

    fam = Family.from_dict({"attention": "cross", "tokens": 2, "tokens_enc": 3, "d_model": 3})
    for seed in range(4):
        p = generate(fam, seed)
        assert p.cross and (p.n, p.n_kv) == (2, 3) and violations(fam, p) == []
        assert generate(fam, seed) == p            # the same seed, the same problem
    out = tmp_path / "p.toml"
    code, _, err = cli("new", "--attention", "cross", "--tokens", "the,cat", "--tokens-enc", "le,chat,noir",
                       "--seed", "3", "-o", str(out))
    assert code == 0, err
    p = load(str(out))
    assert p.tokens == ("the", "cat") and p.tokens_enc == ("le", "chat", "noir")
    assert "--attention cross --tokens-enc le,chat,noir --seed 3" in out.read_text()
    code, _, err = cli("new", "--attention", "cross", "--mask", "causal")
    assert code == 2 and err.count("\n") == 1 and "causal mask is not used" in err


def test_quiz_of_cross_variants_names_encoder_rows(tmp_path):
    import json

    from worked.quiz import run

    run("problems/quiz-3-cross.toml", count=2, outdir=tmp_path, formats="html,moodle", jobs=1, quiet=True)
    man = json.loads((tmp_path / "manifest.json").read_text())
    for v in man["variants"]:
        p = Problem.from_dict(v["problem"])
        assert p.cross and (p.n, p.n_kv) == (2, 3)
        k = next(q for q in v["questions"] if q["ask"] == "K[3,*]")
        assert [e["ask"] for e in k["entries"]] == ["K[3,1]", "K[3,2]"]
        z = next(q for q in v["questions"] if q["ask"] == "Z")
        assert any(m["id"] == "kv-from-decoder" for e in z["entries"] for m in e["mistakes"])
    html = next(tmp_path.glob("variants/*/worksheet.html")).read_text()
    assert "row 3 (e3)" in html and "Cross-attention, worked by hand" in html


def test_server_serves_and_checks_a_cross_problem():
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    import warnings
    from pathlib import Path

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    c = TestClient(create_app(Config(problems_dir=Path("problems"))), raise_server_exceptions=False)
    data = c.get("/api/problems/cross-attention").json()
    assert data["problem"] == load(CROSS).to_dict()
    grids = {g["key"]: g for g in data["view"]["grids"]}
    assert grids["scores"]["rows"] == ["<s>", "the", "cat"] and grids["scores"]["cols"] == ["le", "chat", "noir", "dort"]
    p = load(CROSS)
    r = c.post("/api/check", json={"problem": p.to_dict(), "answers": _answers(p, Transform(mask="upper"),
                                                                            ["scores", "scaled", "weights", "Z"])})
    assert r.status_code == 200 and [d["code"] for d in r.json()["diagnoses"]] == ["causal-mask-on-cross"]


def test_the_encoder_side_s_column_is_not_set_in_its_subscript():
    from worked import eq, printers

    col = eq.Col(eq.Sym("X_enc"), "1")
    assert printers.typst(col) == 'X_"enc" [":", 1]'           # the index after the subscript, not in it
    assert printers.latex(col) == r"X_{\mathrm{enc}}[:,1]" and printers.text(col) == "X_enc[:, 1]"
