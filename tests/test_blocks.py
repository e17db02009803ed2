"""Chained attention blocks ([[blocks]], Part 11's decoder layer): a NumPy reference of the chain written here (the
rounding between blocks too), the hand rule on every line, the problem file's rules, checking with a mistake planted
in block 2 and with error carried forward from block 1, the JSON names, the sheets, the server's check and the
notebook."""
from __future__ import annotations

import json
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from worked.check import check_answers
from worked.problem import Problem, load
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
DECODER = ROOT / "problems" / "decoder-layer.toml"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# a chain with two heads and W_O in block 1 (its output as wide as block 2's d_model), then self-attention
TWO_HEAD_CHAIN = dict(
    title="two heads, then one", tokens=["a", "b", "c"], X=[[1, 0], [0, 1], [1, 1]], decimals=2,
    blocks=[{"attention": "self", "mask": "none",
             "heads": [{"W_Q": [[1, 0], [0, 1]], "W_K": [[1, 1], [0, 1]], "W_V": [[1, 0], [0, 1]]},
                       {"W_Q": [[0, 1], [1, 0]], "W_K": [[1, 0], [1, 1]], "W_V": [[1, 1], [0, 1]]}],
             "W_O": [[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 1, 1]]},
            {"attention": "self", "mask": "causal", "W_Q": [[1, 0], [0, 1], [1, 1]],
             "W_K": [[1, 1], [0, 1], [1, 0]], "W_V": [[1, 0], [0, 1], [1, 1]]}])


def carry(M: np.ndarray, places: int) -> np.ndarray:
    """What the next block starts from: each entry rounded to *places*, halves away from zero (the key's rule;
    np.round would round halves to even)."""
    q = Decimal(1).scaleb(-places)
    return np.array([[float(Decimal(f"{x:.12g}").quantize(q, rounding=ROUND_HALF_UP)) for x in row] for row in M])


def reference(chain_dict: dict) -> dict[str, np.ndarray]:
    """The chain in NumPy: each block's Q, K, V, scores (−∞ where masked), scaled, weights and Z (per head, concat
    and the W_O output with heads), block k+1 from block k's Z carried (rounded)."""
    X = np.array(chain_dict["X"], float)
    Xe = np.array(chain_dict["X_enc"], float) if "X_enc" in chain_dict else None
    places = chain_dict.get("decimals", 2)
    out = {}
    for k, b in enumerate(chain_dict["blocks"], 1):
        kv = Xe if b.get("attention") == "cross" else X
        heads = b.get("heads") or [{"W_Q": b["W_Q"], "W_K": b["W_K"], "W_V": b["W_V"]}]
        pre = f"block{k}."
        Zs = []
        for h, hd in enumerate(heads, 1):
            hp = pre + (f"head{h}." if "heads" in b else "")
            Q, K, V = X @ np.array(hd["W_Q"], float), kv @ np.array(hd["W_K"], float), kv @ np.array(hd["W_V"], float)
            S = Q @ K.T
            if b.get("mask") == "causal":
                S = np.where(np.triu(np.ones(S.shape, bool), 1), -np.inf, S)
            T = S / np.sqrt(Q.shape[1])
            A = np.exp(T - T.max(axis=1, keepdims=True))
            A /= A.sum(axis=1, keepdims=True)
            out.update({hp + "Q": Q, hp + "K": K, hp + "V": V, hp + "scores": S, hp + "scaled": T, hp + "weights": A,
                        hp + "Z": A @ V})
            Zs.append(A @ V)
        if "heads" in b:
            out[pre + "concat"] = np.hstack(Zs)
            out[pre + "Z"] = np.hstack(Zs) @ np.array(b["W_O"], float)
        X = carry(out[pre + "Z"], places)
    out["Z"] = out[f"block{len(chain_dict['blocks'])}.Z"]
    return out


def _decoder_dict() -> dict:
    import tomllib

    return tomllib.loads(DECODER.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def decoder():
    return solve(load(DECODER))


@pytest.mark.parametrize("which", ["decoder-layer", "two-head-chain"])
def test_every_matrix_is_the_numpy_reference(which, decoder):
    data = _decoder_dict() if which == "decoder-layer" else TWO_HEAD_CHAIN
    sol = decoder if which == "decoder-layer" else solve(Problem.from_dict(TWO_HEAD_CHAIN))
    ref = reference(data)
    mats = sol.matrices()
    assert set(mats) == set(ref)
    for key, want in ref.items():
        np.testing.assert_allclose(mats[key].to_numpy(), want, rtol=1e-12, atol=1e-12, err_msg=key)
    # block 2 starts from block 1's output as the key shows it: the rounded decimals, exactly
    X2 = sol.blocks[1].problem.X
    assert [[float(x) for x in r] for r in X2] == carry(ref["block1.Z"], data.get("decimals", 2)).tolist()
    assert all(x.denominator in (1, 2, 4, 5, 10, 20, 25, 50, 100) for r in X2 for x in r)


def test_every_line_holds_by_hand(decoder):
    decoder.audit()
    solve(Problem.from_dict(TWO_HEAD_CHAIN)).audit()
    for b in decoder.blocks:
        assert b.steps and all(st.lines for st in b.steps)


BAD = [
    ("W_Q = [[1, 0], [0, 1]]\n", "W_Q: with [[blocks]], W_Q goes in each block"),
    ('mask = "causal"\n', "mask: with [[blocks]], mask goes in each block"),
    ("[train]\ntarget = [[0, 0], [0, 0], [0, 0]]\nlr = 0.1\n", "train: a training step through [[blocks]] is not supported"),
]


def _with_top(extra: str) -> str:
    text = DECODER.read_text(encoding="utf-8")
    head, sep, rest = text.partition("[[blocks]]")
    if extra.startswith("["):
        return text + "\n" + extra
    return head + extra + sep + rest


@pytest.mark.parametrize("extra, words", BAD, ids=["W_Q", "mask", "train"])
def test_top_level_fields_of_one_block_are_refused_in_one_line(cli, tmp_path, extra, words):
    f = tmp_path / "bad.toml"
    f.write_text(_with_top(extra), encoding="utf-8")
    code, out, err = cli("solve", f)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {f}: {words}"), err
    assert "Traceback" not in err


BLOCK_ERRORS = [
    # block 2's W_Q with 3 rows where block 1's Z has 2 columns
    (lambda d: d["blocks"][1].update(W_Q=[[1, 0], [0, 1], [1, 1]]),
     "blocks[2].W_Q: expected 2 rows (block 2's input is block 1's output Z, which has 2 columns"),
    (lambda d: d.pop("X_enc"), 'X_enc: missing: blocks[2] has attention = "cross"'),
    (lambda d: d["blocks"][1].update(mask="causal"), "blocks[2].mask: a causal mask is not used with attention = \"cross\""),
    (lambda d: d["blocks"][0].update(W_K=[[1], [0]]), "blocks[1].W_K: expected 2 columns like W_Q"),
    (lambda d: d["blocks"][1].update(colour="red"), "blocks[2].colour: unknown key"),
    (lambda d: d.update(blocks=[]), "blocks: expected a list of tables"),
    (lambda d: d["blocks"][1].update(W_V=[[1, "x"], [0, 1]]), "blocks[2].W_V[1,2]: "),
    (lambda d: d["blocks"][1].update(attention="both"), 'blocks[2].attention: expected "self" or "cross"'),
    (lambda d: d["blocks"].extend([d["blocks"][0]] * 3), "blocks: 5 blocks is more than a hand exercise allows"),
]


@pytest.mark.parametrize("change, words", BLOCK_ERRORS, ids=["d_model", "no-X_enc", "cross-causal", "W_K", "unknown",
                                                             "empty", "entry", "attention", "too-many"])
def test_a_bad_block_is_named_in_one_line(cli, tmp_path, change, words):
    d = _decoder_dict()
    change(d)
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(d), encoding="utf-8")
    code, out, err = cli("solve", f)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {f}: {words}"), err


def _answers(sol) -> dict:
    return {k: [["-inf" if m.is_neg_inf(i, j) else m.dec_plain(i, j, 2) for j in range(m.shape[1])]
                for i in range(m.shape[0])] for k, m in sol.matrices().items() if k != "Z"}


def _fmt(M) -> list:
    return [[f"{x:.2f}" for x in row] for row in M]


def test_right_answers_are_all_correct_and_nested_tables_are_read(decoder):
    chain = load(DECODER)
    a = _answers(decoder)
    rep = check_answers(chain, a, solution=decoder)
    s = rep.summary()
    assert s["wrong"] == 0 and s["correct"] == sum(m.shape[0] * m.shape[1] for k, m in decoder.matrices().items()
                                                   if k != "Z")
    nested = {"block1": {k.split(".", 1)[1]: v for k, v in a.items() if k.startswith("block1.")},
              "block2.Z": a["block2.Z"]}
    rep = check_answers(chain, nested, solution=decoder)
    assert [m.key for m in rep.matrices][-1] == "block2.Z" and rep.summary()["wrong"] == 0
    bad = check_answers(chain, {"Q": [[1, 0]] * 3, "block3.Q": [[0]]}, solution=decoder)
    assert [e["matrix"] for e in bad.errors] == ["Q", "block3.Q"]
    assert "named by block: block1.Q" in bad.errors[0]["message"]


def test_a_mistake_in_block_2_is_named_there(decoder):
    """Block 2 worked without the scaling: no-scaling, named at block 2's scaling step, what follows carried."""
    chain = load(DECODER)
    a = _answers(decoder)
    ref = reference(_decoder_dict())
    X2 = carry(ref["block1.Z"], 2)
    Q, K = X2 @ np.array(chain.blocks[1].W_Q, float), np.array(chain.X_enc, float) @ np.array(chain.blocks[1].W_K, float)
    S = Q @ K.T
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    a.update({"block2.scaled": _fmt(S), "block2.weights": _fmt(A), "block2.Z": _fmt(A @ ref["block2.V"])})
    rep = check_answers(chain, a, solution=decoder)
    assert [d["code"] for d in rep.diagnoses] == ["no-scaling"]
    d = rep.diagnoses[0]
    assert d["matrices"] == ["block2.scaled"] and d["block"] == 2
    assert d["step"]["number"] == 12 and d["step"]["id"] == "scaled"    # numbered on from block 1's 7 steps
    assert "1 mistake (no-scaling)" in rep.summary_line()
    assert "block2.scaled  (Step 12. Scaling" in rep.text()


def test_a_wrong_block_1_output_is_carried_forward_into_block_2(decoder):
    """A slip in block 1's Z, block 2 worked right from it: block 2's wrong entries are carried forward (↪)."""
    chain = load(DECODER)
    a = _answers(decoder)
    ref = reference(_decoder_dict())
    Z1 = carry(ref["block1.Z"], 2)
    Z1[2, 0] += 0.5
    a["block1.Z"] = _fmt(Z1)
    b2 = dict(_decoder_dict(), X=Z1.tolist())
    b2["blocks"] = b2["blocks"][1:]
    mine = reference(b2)
    for k in ("Q", "scores", "scaled", "weights", "Z"):
        a["block2." + k] = _fmt(mine["block1." + k])
    rep = check_answers(chain, a, solution=decoder)
    by = {m.key: m for m in rep.matrices}
    assert by["block1.Z"].count("wrong") == 1 and not by["block1.Z"].n_carried
    for k in ("block2.Q", "block2.scores", "block2.weights", "block2.Z"):
        m = by[k]
        assert m.count("wrong") and m.n_carried == m.count("wrong"), k
        assert m.consistent is True and m.based_on[0] == "block1.Z"
    assert rep.summary()["unexplained"] == 1 and not rep.diagnoses
    assert "only because of an earlier slip" in rep.summary_line()
    # without all of block 1's Z, block 2 is checked from the key's: the same entries are wrong, none carried
    del a["block1.Z"]
    rep = check_answers(chain, a, solution=decoder)
    assert not any(m.n_carried for m in rep.matrices if m.key == "block2.Q")


def test_solve_json_has_one_blocks_names_per_block(cli):
    code, out, err = cli("solve", DECODER, "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    one = json.loads(cli("solve", ROOT / "problems" / "cross-attention.toml", "--format", "json")[1])
    assert d["attention"] == "blocks" and [b["block"] for b in d["blocks"]] == [1, 2]
    assert [b["heading"] for b in d["blocks"]] == ["Block 1: masked self-attention",
                                                   "Block 2: cross-attention to the encoder"]
    for b in d["blocks"]:
        assert set(one) <= set(b)
    assert d["blocks"][0]["mask"] == "causal" and d["blocks"][1]["attention"] == "cross"
    assert d["blocks"][1]["X"]["from"] == "block1.Z"
    assert d["Z"] == d["blocks"][1]["Z"]
    text = cli("solve", DECODER)[1]
    assert "Block 1: masked self-attention" in text and "Block 2: cross-attention to the encoder" in text
    assert "X for block 2 is block 1's output Z, rounded to 2 places as in the key." in text
    md = cli("solve", DECODER, "--format", "markdown")[1]
    assert "## Block 2: cross-attention to the encoder" in md and "### Step 8. Queries" in md


def test_sheets_head_each_block(tmp_path, decoder):
    from worked.render import view
    from worked.render.sheet import write_sheet

    paths = write_sheet(decoder, tmp_path, formats=["html", "pdf"])
    assert sorted(p.name for p in paths) == ["answer-key.html", "answer-key.pdf", "worksheet.html", "worksheet.pdf"]
    key = (tmp_path / decoder.problem.slug / "answer-key.html").read_text(encoding="utf-8")
    ws = (tmp_path / decoder.problem.slug / "worksheet.html").read_text(encoding="utf-8")
    for html in (key, ws):
        assert "Block 1: masked self-attention" in html and "Block 2: cross-attention to the encoder" in html
    assert "X for block 2 is block 1&#39;s output Z, rounded to 2 places as in the key." in key
    assert "your Z from block 1" in ws and "your Z from block 1" not in key
    page = view.build(decoder, "answer-key")
    heads = [s.block for s in page.steps if s.block]
    assert [h["number"] for h in heads] == [1, 2] and [s.number for s in page.steps] == list(range(1, 15))
    assert [g["key"] for g in heads[1]["given"]] == ["block2.X", "block2.W_Q", "block2.W_K", "block2.W_V"]
    ws_page = view.build(decoder, "worksheet")
    assert [g["key"] for g in [s.block for s in ws_page.steps if s.block][1]["given"]] == \
        ["block2.W_Q", "block2.W_K", "block2.W_V"]
    assert [g["key"] for g in page.given] == ["X", "X_enc"]
    assert [g["key"] for g in page.grids][:2] == ["block1.Q", "block1.K"] and page.grids[-1]["key"] == "block2.Z"
    pdf = (tmp_path / decoder.problem.slug / "answer-key.pdf").read_bytes()
    assert pdf.startswith(b"%PDF")


def test_server_check_is_the_cli_check(cli, tmp_path, decoder):
    from starlette.testclient import TestClient

    from worked.server.app import Config, create_app

    c = TestClient(create_app(Config(problems_dir=ROOT / "problems")), raise_server_exceptions=False)
    data = c.get("/api/problems/decoder-layer").json()
    assert [g["key"] for g in data["view"]["grids"]] == [k for k in decoder.matrices() if k != "Z"]
    assert [i["key"] for i in data["view"]["inputs"]] == ["X", "X_enc"] + [f"block{k}.W_{w}" for k in (1, 2)
                                                                            for w in "QKV"]
    assert data["view"]["inputs"][-1]["note"] == "block 2"
    a = _answers(decoder)
    a["block2.Q"][0][0] = "7"
    r = c.post("/api/check", json={"problem": data["problem"], "answers": a})
    assert r.status_code == 200
    f = tmp_path / "a.json"
    f.write_text(json.dumps(a), encoding="utf-8")
    code, out, _ = cli("check", DECODER, f, "--format", "json")
    assert code == 1 and r.json() == json.loads(out)
    assert r.json()["matrices"]["block2.Q"]["verdicts"][0][0] == "wrong"
    sv = c.post("/api/solve?view=1", json={"problem": data["problem"]})
    assert sv.status_code == 200 and len(sv.json()["view"]["steps"]) == 14
    # each step's result and matrix named by block, as the grids are: the page finds a grid's worked step
    assert [s["result"] for s in sv.json()["view"]["steps"]] == [k for k in decoder.matrices() if k != "Z"]
    assert set(sv.json()["view"]["matrices"]) == {k for k in decoder.matrices() if k != "Z"}


def test_the_notebook_runs_block_after_block():
    pytest.importorskip("nbclient")
    from worked.writers import notebook as nbw

    sol = solve(load(DECODER))
    nb = nbw.execute(nbw.build(sol))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    checks = [c for c in nb.cells if c.cell_type == "code" and c.id.endswith("-check")]
    assert len(checks) == 14
    assert all("".join(o.get("text", "") for o in c.outputs).startswith("✓ ") for c in checks)
    # steps numbered on across blocks, as on the pages: block 2's queries are Step 8
    assert "".join(o.get("text", "") for o in checks[7].outputs).startswith("✓ Step 8 (Queries")
    assert next(c for c in nb.cells if c.id == "block2-step01-Q-md").source.startswith("## Step 8: Queries")
    src = {c.id: c.source for c in nb.cells}
    assert "X = carry(Z)" in src["block2-inputs"] and "def carry(" in src["block1-import"]
    out = "".join(o.get("text", "") for o in next(c for c in nb.cells if c.id == "block2-inputs").outputs)
    assert "1.34" in out and "1.58" in out


@pytest.mark.parametrize("which", ["decoder-layer", "two-head-chain"])
def test_to_dict_and_to_toml_read_back(which):
    chain = load(DECODER) if which == "decoder-layer" else Problem.from_dict(TWO_HEAD_CHAIN)
    assert Problem.from_dict(chain.to_dict()) == chain
    assert Problem.from_text(chain.to_toml()) == chain


QUIZ = ROOT / "problems" / "quiz-4-decoder.toml"


def test_a_quiz_draws_chains_block_by_block_and_grades_them(tmp_path, cli):
    """[family] blocks = ["self-causal", "cross"]: each variant a chain whose block 2 starts from block 1's rounded
    output; the manifest's expected values are the chain's; graded with the right answers, full points."""
    import csv

    from worked.generate import Family, generate
    from worked.quiz import build_variant, load_spec, plan

    spec = load_spec(QUIZ)
    v = plan(spec.seed, count=1)[0]
    entry = build_variant(spec, v, ())["entry"]
    chain = Problem.from_dict(entry["problem"])
    sol = solve(chain)
    assert [b.problem.attention for b in sol.blocks] == ["self", "cross"] and sol.blocks[0].problem.mask == "causal"
    assert sol.blocks[1].problem.X == tuple(tuple(Fraction(sol.blocks[0].output.rounded(i, j, 2)) for j in range(2))
                                            for i in range(3))
    mats = sol.matrices()
    for q in entry["questions"]:
        for e in q["entries"]:
            i, j = e["row"] - 1, e["col"] - 1
            assert e["expected"] == pytest.approx(mats[q["matrix"]].value(i, j), abs=1e-9)
    # each block's mistakes: block 1's weights show the causal block's (a mask left out), the Z question block 2's
    ids = {q["matrix"]: {m["id"] for e in q["entries"] for m in e["mistakes"]} for q in entry["questions"]}
    assert "wrong-mask" in ids["block1.weights"] and "kv-from-decoder" not in ids["block1.weights"]
    assert generate(spec.family, v.seed, title=spec.title) == chain               # same seed, same chain
    code, _, err = cli("quiz", QUIZ, "-n", "2", "-o", tmp_path / "q", "--format", "moodle", "--quiet")
    assert code == 0, err
    man = json.loads((tmp_path / "q" / "manifest.json").read_text(encoding="utf-8"))
    with open(tmp_path / "r.csv", "w", newline="", encoding="utf-8") as f:
        rows = [{"variant": v["variant"], **{e["ask"]: e["answer"] for q in v["questions"] for e in q["entries"]}}
                for v in man["variants"]]
        w = csv.DictWriter(f, list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    code, out, err = cli("grade", tmp_path / "q", tmp_path / "r.csv", "-o", tmp_path / "g")
    assert code == 0, err
    book = list(csv.DictReader(open(tmp_path / "g" / "gradebook.csv", encoding="utf-8")))
    assert [r["total"] for r in book] == [r["out_of"] for r in book] == ["6", "6"]
    # the web page in quiz mode: answers keyed as its grids (block2.Z), the question "Z" scored from them
    from starlette.testclient import TestClient

    from worked.server.app import Config, create_app

    c = TestClient(create_app(Config(problems_dir=tmp_path / "q")), raise_server_exceptions=False)
    v0 = man["variants"][0]
    grids = c.get(f"/api/variants/{v0['variant']}").json()["view"]["grids"]
    mats = solve(Problem.from_dict(v0["problem"])).matrices()
    answers = {g["key"]: [[mats[g["key"]].dec_plain(i, j, 2) for j in range(len(g["cols"]))] for i in range(len(g["rows"]))]
               for g in grids}
    assert "block2.Z" in answers and "Z" not in answers
    got = c.post("/api/check", json={"variant": v0["variant"], "answers": answers}).json()
    assert got["score"] == {"earned": 6, "points": 6}
    with pytest.raises(Exception, match="family.attention: with blocks"):
        Family.from_dict({"blocks": ["self", "cross"], "attention": "cross"})
    with pytest.raises(Exception, match="family.blocks: expected a list"):
        Family.from_dict({"blocks": ["self", "decoder"]})


def test_a_quiz_exercise_notebook_of_a_chain_holds_no_graded_value():
    """The student's exercise notebook checks a graded question's matrix (block1.weights, and Z: the last block's
    output) by its shape only; the other matrices by their values."""
    from worked.quiz import build_variant, load_spec, plan

    spec = load_spec(QUIZ)
    files = build_variant(spec, plan(spec.seed, count=1)[0], ("ipynb",))["files"]
    nb = json.loads(next(v for k, v in files.items() if k.endswith("/exercise.ipynb")))
    src = {c["id"]: "".join(c["source"]) for c in nb["cells"]}
    for cid in ("block1-step06-weights-check", "block2-step07-Z-check"):
        assert "graded in the quiz" in src[cid] and "_key" not in src[cid], cid
    assert "A_key" in src["block2-step06-weights-check"] and "Z_key" in src["block1-step07-Z-check"]   # not graded
    from worked.writers import notebook as nbw     # block 1's Z graded: block 2's X is checked by its shape only

    nb2 = nbw.build(solve(load(DECODER)), answers_hidden=True, graded={"block1.Z"})
    inputs = next(c.source for c in nb2.cells if c.id == "block2-inputs")
    assert "X_key" not in inputs and "np.shape(X) == (3, 2)" in inputs
    key_nb = json.loads(next(v for k, v in files.items() if k.endswith("/exercise-key.ipynb")))
    assert "Z_key" in next("".join(c["source"]) for c in key_nb["cells"] if c["id"] == "block2-step07-Z-check")


def test_worked_new_draws_a_decoder_layer_the_same_for_the_same_seed(cli, tmp_path):
    """`worked new --blocks self-causal,cross`: a chain worth doing by hand, the same file for the same seed, whose
    header's command makes it again; its lines hold by hand; a bad kind or a per-block option is one line, exit 2."""
    code, first, err = cli("new", "--blocks", "self-causal,cross", "--seed", "3")
    assert code == 0, err
    code, again, _ = cli("new", "--blocks", "self-causal,cross", "--seed", "3")
    assert again == first
    header = first.splitlines()[0]
    assert "--blocks self-causal,cross" in header and "--mask" not in header
    f = tmp_path / "drawn.toml"
    f.write_text(first, encoding="utf-8")
    chain = load(f)
    assert [(b.attention, b.mask) for b in chain.block_problems()] == [("self", "causal"), ("cross", "none")]
    sol = solve(chain)
    sol.audit()
    assert [k for k in sol.matrices() if k.endswith(".weights")] == ["block1.weights", "block2.weights"]
    redo = header.split("`worked ", 1)[1].split("`", 1)[0].split()
    code, remade, _ = cli(*redo)
    assert code == 0 and remade == first
    for bad, words in ((["--blocks", "self,bogus"], "error: --blocks: expected a list of 1 to"),
                       (["--blocks", "self-causal,cross", "--mask", "causal"], "error: --mask: with blocks")):
        code, out, err = cli("new", *bad, "--seed", "3")
        assert code == 2 and out == "" and err.count("\n") == 1 and err.startswith(words), err
