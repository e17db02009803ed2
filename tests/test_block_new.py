"""`worked new --block` (issue 27): Transformer blocks worth doing by hand, the same file for the same seed, every
rule of a good block met (checked here from the file read back, with an independent float pass), one-line errors."""
import math
import subprocess
from fractions import Fraction
import sys

import pytest

from worked.errors import WorkedError
from worked.generate import Family, generate, violations
from worked.problem import Problem

FAMILIES = {
    "post-ln": dict(block="post-ln"),
    "pre-ln-causal-positions-vocab": dict(block="pre-ln", positional="sinusoidal", vocab=4, mask="causal", d_ff=3),
    "post-ln-two-heads-vocab": dict(block="post-ln", positional="sinusoidal", vocab=4, heads=2, d_ff=3),
    "pre-ln-four-tokens-eps": dict(block="pre-ln", tokens=4, vocab=5, eps="1/100"),
    "post-ln-train": dict(block="post-ln", vocab=4, train=True, mask="causal"),
    "pre-ln-train-lr": dict(block="pre-ln", positional="sinusoidal", vocab=3, train=True, lr="1/20", words=["a", "b", "c"]),
}


def family(name):
    return Family.from_dict(FAMILIES[name])


def independent(p):
    """The block in plain floats, written here (not worked's passes): the heads' raw scores and weights, every row a
    layer norm takes, ReLU's input, and the output's probabilities."""
    F = lambda m: [[float(x) for x in r] for r in m]  # noqa: E731
    mm = lambda A, B: [[sum(a * b for a, b in zip(r, c)) for c in zip(*B)] for r in A]  # noqa: E731
    add = lambda A, B: [[a + b for a, b in zip(ra, rb)] for ra, rb in zip(A, B)]  # noqa: E731
    b, n, d = p.block, p.n, p.d_model
    eps = float(b.eps)
    seen = {"ln_rows": [], "scores": [], "weights": []}

    def ln(M, g, be):
        out = []
        for row in M:
            seen["ln_rows"].append(row)
            mu = sum(row) / d
            var = sum((x - mu) ** 2 for x in row) / d
            out.append([float(gg) * (x - mu) / math.sqrt(var + eps) + float(bb) for x, gg, bb in zip(row, g, be)])
        return out

    def softmax(row):
        m = max(row)
        e = [math.exp(x - m) for x in row]
        return [x / sum(e) for x in e]

    def attn(x):
        zs = []
        for h in p.heads:
            Q, K, V = mm(x, F(h.W_Q)), mm(x, F(h.W_K)), mm(x, F(h.W_V))
            S = mm(Q, [list(c) for c in zip(*K)])
            A = []
            for i, row in enumerate(S):
                live = row[: i + 1] if p.mask == "causal" else row
                seen["scores"].append(live)
                w = softmax([s / math.sqrt(len(Q[0])) for s in live])
                seen["weights"].append(w)
                A.append(w + [0.0] * (n - len(w)))
            zs.append(mm(A, V))
        return mm([sum((z[i] for z in zs), []) for i in range(n)], F(p.W_O))

    P = [[(math.sin if c % 2 == 0 else math.cos)(pos / 10000 ** ((c - c % 2) / d)) if b.positional == "sinusoidal" else 0.0
          for c in range(d)] for pos in range(n)]
    X0 = add(F(p.X), P)

    def ffn(x):
        U = [[u + float(bb) for u, bb in zip(r, b.b_1)] for r in mm(x, F(b.W_1))]
        seen["U"] = [u for r in U for u in r]
        return [[f + float(bb) for f, bb in zip(r, b.b_2)] for r in mm([[max(u, 0.0) for u in r] for r in U], F(b.W_2))]

    if b.kind == "post-ln":
        H1 = ln(add(X0, attn(X0)), b.gamma_1, b.beta_1)
        last = H = ln(add(H1, ffn(H1)), b.gamma_2, b.beta_2)
    else:
        H1 = add(X0, attn(ln(X0, b.gamma_1, b.beta_1)))
        H = add(H1, ffn(ln(H1, b.gamma_2, b.beta_2)))
        last = ln(H, b.gamma_f, b.beta_f) if b.W_out is not None else H
    if b.W_out is not None:
        seen["logits"] = mm(last, F(b.W_out))
        seen["probs"] = [softmax(r) for r in seen["logits"]]
    return seen


def assert_good(fam, p):
    """The rules of a good block, from the independent pass (small margins for the floats)."""
    s = independent(p)
    for row in s["ln_rows"]:
        mu = sum(row) / len(row)
        assert sum((x - mu) ** 2 for x in row) / len(row) >= 0.05 - 1e-9
    assert min(s["U"]) <= 0 < max(s["U"])                    # ReLU cuts some entries, keeps others
    for sc, w in zip(s["scores"], s["weights"]):
        if len(w) < 2:
            continue
        assert max(w) <= fam.max_weight + 1e-9 and min(w) >= fam.min_w - 1e-9
        assert sorted(sc)[-2] < max(sc) - 1e-9
        assert max(abs(x) for x in sc) / math.sqrt(p.d_k) <= fam.max_score + 1e-9
    if fam.vocab:
        assert len(p.block.vocab) == fam.vocab and len(p.block.targets) == p.n
        for row in s["probs"]:
            assert max(row) <= fam.max_weight + 1e-9 and min(row) >= fam.min_w - 1e-9
        # the next token at each position, where the vocabulary has it
        assert all(p.block.vocab[t] == p.tokens[i + 1] for i, t in enumerate(p.block.targets[:-1]) if p.tokens[i + 1] in p.block.vocab)
    else:
        assert p.block.W_out is None and "probs" not in s


@pytest.mark.parametrize("name", list(FAMILIES))
def test_every_drawn_block_is_good_and_its_file_loads_and_runs(name):
    """Many seeds: no violation, the rules hold by an independent pass, the written file reads back as the same
    problem, and the block's forward pass runs on every backend that has one."""
    from worked.attention import Float, Hand, Interval, block_forward

    fam = family(name)
    for seed in range(12):
        p = generate(fam, seed)
        assert violations(fam, p) == [], (name, seed)
        assert p.block.kind == fam.block and p.block.positional == fam.positional and p.block.d_ff == fam.dff
        assert p.n == fam.n and p.d_model == fam.d_model and len(p.heads) == fam.heads and p.block.eps == fam.eps
        assert_good(fam, p)
        again = Problem.from_text(p.to_toml(), "drawn.toml")
        assert again == p
        for backend in (Float(), Interval(again, widen=False), Hand(again, "decimal", again.precision.carried)):
            run = block_forward(again, backend, backward=False)
            assert ("loss" in run.shown) == bool(fam.vocab)
        if seed < 3 and not fam.train:      # the solver works it, every line audited (a block with [train]: not yet)
            from worked.solver import solve

            solve(again, checks="all").audit()
        assert (p.train is not None) == fam.train
        if fam.train:       # cross-entropy; the family's lr, or one of 1/10 … 1/100; the step lowers the loss
            assert p.train.loss == "cross-entropy" and p.train.lr == (fam.lr or p.train.lr) and p.train.lr <= Fraction(1, 10)
            run = block_forward(p, Float())
            assert run.loss_after < run.loss
            assert max(abs(x) for k, m in run.shown.items() if k.rpartition(".")[2].startswith("d") for r in m for x in r) <= 10


def test_same_seed_same_bytes_and_other_seeds_differ(tmp_path):
    """The same options and seed write the same bytes, in this process and in fresh ones; other seeds differ."""
    fam = family("pre-ln-causal-positions-vocab")
    assert generate(fam, 7).to_toml() == generate(fam, 7).to_toml()
    assert len({generate(fam, s).to_toml() for s in range(4)}) == 4
    args = ["new", "--block", "pre-ln", "--positional", "sinusoidal", "--vocab", "4", "--mask", "causal", "--d-ff", "3",
            "--seed", "7"]
    outs = [subprocess.run([sys.executable, "-m", "worked", *args], capture_output=True, text=True, timeout=120)
            for _ in range(2)]
    assert outs[0].returncode == 0 and outs[0].stdout == outs[1].stdout
    assert outs[0].stdout.startswith("# Generated by `worked new ") and "--block pre-ln" in outs[0].stdout
    body = outs[0].stdout.split("\n", 2)[2]
    assert Problem.from_text(body, "cli.toml") == generate(fam, 7, title="Random Transformer block (seed 7)")
    # the command in the header makes the same file again
    cmd = outs[0].stdout.splitlines()[0].split("`")[1].split()[1:]
    again = subprocess.run([sys.executable, "-m", "worked", *cmd], capture_output=True, text=True, timeout=120)
    assert again.stdout == outs[0].stdout


BAD = [
    (["--positional", "sinusoidal"], "--positional: positional is only used in a Transformer block"),
    (["--block", "pre-ln", "--vocab", "1"], "--vocab: expected a whole number from 2"),
    (["--block", "pre-ln", "--d-ff", "0"], "--d-ff: expected a whole number from 1"),
    (["--block", "pre-ln", "--eps", "tiny"], "--eps: expected a number from 0 to 1"),
    (["--block", "post-ln", "--attention", "cross"], "--attention: with block, attention is not a family option"),
    (["--block", "post-ln", "--train"], "--train: a block's training step needs its output layer"),
    (["--block", "mid-ln"], "invalid choice"),
]


@pytest.mark.parametrize("args,fragment", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_options_are_one_line_errors(args, fragment):
    r = subprocess.run([sys.executable, "-m", "worked", "new", *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert fragment in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 or fragment == "invalid choice", r.stderr


def test_an_impossible_block_family_fails_at_once_and_a_hard_one_gives_up_in_one_line(monkeypatch):
    from worked import generate as G
    from worked.errors import ProblemError

    with pytest.raises(ProblemError, match=r"family.vocab: 4 words leave no output softmax row"):
        Family.from_dict(dict(block="post-ln", vocab=4, min_weight=0.3))
    monkeypatch.setattr(G, "MAX_BLOCK_STEPS", 3)      # a search cut short: what a hard family meets
    with pytest.raises(WorkedError, match="no block of this family met the constraints in 3 tries") as e:
        generate(family("post-ln-two-heads-vocab"), 1)
    assert "\n" not in str(e.value)


def test_a_quiz_family_of_blocks_draws_good_blocks(tmp_path):
    """A quiz spec's [family] with block (the options of worked new --block): every variant is a good block of
    the family, asked H[2,3] and the loss."""
    import json

    spec = tmp_path / "quiz.toml"
    spec.write_text('title = "Block quiz"\nseed = 3\n[family]\nblock = "post-ln"\nvocab = 4\n'
                    '[[questions]]\nask = "H[2,3]"\n[[questions]]\nask = "loss"\n')
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(spec), "-n", "2", "-o", str(tmp_path / "out"),
                        "--format", "html"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    fam = Family.from_dict({"block": "post-ln", "vocab": 4})
    assert len(manifest["variants"]) == 2
    for v in manifest["variants"]:
        p = Problem.from_dict(v["problem"])
        assert p.block is not None and violations(fam, p) == []
        assert [q["matrix"] for q in v["questions"]] == ["H", "loss"]
