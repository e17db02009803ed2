"""A whole Transformer block (issue 27): the problem file (its keys read exactly, checked against the attention's
shapes, every bad one a one-line error naming the field: exit 2, no traceback), the forward pass on every backend
against an independent NumPy reference, the worked lines, and the solution the solver makes of the block's
architecture (every matrix, every line audited)."""
import subprocess
import sys
from fractions import Fraction

import pytest

from worked.errors import ProblemError
from worked.problem import Problem, TBlock

BLOCK = """
title = "the cat sat"
tokens = ["the", "cat", "sat"]
X = [[2, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
positional = "sinusoidal"
block = "post-ln"
W_Q = [[1, 0], [0, 1], [1, 0], [0, 1]]
W_K = [[0, 1], [1, 0], [1, 0], [0, 1]]
W_V = [[1, 0], [0, 1], [1, 1], [0, 0]]
W_O = [[1, 0, 0, 1], [0, 1, 1, 0]]
mask = "causal"
W_1 = [[1, 0, -1], [0, 1, 0], [1, 0, 1], [0, -1, 1]]
b_1 = [0, "1/2", -1]
W_2 = [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, -1]]
b_2 = [0, 0, 0, 0]
activation = "relu"
eps = "1/100"
W_out = [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]]
vocab = ["the", "cat", "sat", "on"]
targets = ["cat", "sat", "on"]
"""


def read(text=BLOCK):
    return Problem.from_text(text, "block.toml")


def test_the_block_is_read_exactly():
    p = read()
    b = p.block
    assert isinstance(b, TBlock)
    assert (b.kind, b.positional, b.activation, b.d_ff) == ("post-ln", "sinusoidal", "relu", 3)
    assert b.eps == Fraction(1, 100) and b.b_1 == (0, Fraction(1, 2), -1)
    assert b.gamma_1 == b.gamma_2 == (1, 1, 1, 1) and b.beta_1 == b.beta_2 == (0, 0, 0, 0)   # the defaults
    assert b.gamma_f is None and b.beta_f is None              # post-LN has no final layer norm
    assert b.vocab == ("the", "cat", "sat", "on") and b.targets == (1, 2, 3)
    # one head with its W_O: the heads' combination, with one head
    assert p.multihead and len(p.heads) == 1 and p.W_O == ((1, 0, 0, 1), (0, 1, 1, 0))


def test_pre_ln_with_an_output_layer_has_a_final_layer_norm():
    p = read(BLOCK.replace('"post-ln"', '"pre-ln"') + 'gamma_f = [2, 1, 1, 1]\n')
    assert p.block.gamma_f == (2, 1, 1, 1) and p.block.beta_f == (0, 0, 0, 0)


def test_written_and_read_back_the_same():
    for text in (BLOCK, BLOCK.replace('"post-ln"', '"pre-ln"'), BLOCK.replace("W_out", "# W_out").replace("vocab", "# v")
                 .replace("targets", "# t")):
        p = read(text)
        assert Problem.from_text(p.to_toml(), "again.toml") == p
        assert Problem.from_dict(p.to_dict()) == p


def test_attention_only_is_as_before():
    p = read(BLOCK.replace('block = "post-ln"', "").replace('positional = "sinusoidal"', "")
             .split("W_1 =")[0].replace("W_O = [[1, 0, 0, 1], [0, 1, 1, 0]]", ""))
    assert p.block is None and not p.multihead


def drop(key, text=BLOCK):
    return "\n".join(line for line in text.splitlines() if not line.startswith(key + " "))


def swap(key, value, text=BLOCK):
    return "\n".join(f"{key} = {value}" if line.startswith(key + " ") else line for line in text.splitlines())


CASES = [
    ("bad-block", swap("block", '"mid-ln"'), 'block: expected "post-ln" or "pre-ln"'),
    ("bad-positional", swap("positional", '"learned"'), 'positional: expected "none" or "sinusoidal"'),
    ("bad-activation", swap("activation", '"gelu"'), 'activation: expected "relu"'),
    ("bad-eps", swap("eps", '"-1"'), "eps: expected a number from 0"),
    ("eps-text", swap("eps", '"tiny"'), "eps: expected an exact number"),
    ("no-W_O", drop("W_O"), "W_O: missing: in a block"),
    ("W_O-width", swap("W_O", "[[1, 0, 0], [0, 1, 1]]"), "W_O: expected 4 columns (d_model"),
    ("no-W_1", drop("W_1"), "W_1: missing"),
    ("W_1-rows", swap("W_1", "[[1, 0, -1], [0, 1, 0]]"), "W_1: expected 4 rows (d_model), got 2"),
    ("no-W_2", drop("W_2"), "W_2: missing"),
    ("W_2-shape", swap("W_2", "[[1, 0, 0, 1], [0, 1, 0, 0]]"), "W_2: expected 3×4 (d_ff × d_model), got 2×4"),
    ("b_1-size", swap("b_1", "[0, 1]"), "b_1: expected 3 numbers"),
    ("b_2-matrix", swap("b_2", "[[0, 0, 0, 0]]"), "b_2: expected a list of 4 numbers"),
    ("b_1-entry", swap("b_1", '[0, "x", 1]'), "b_1[1,2]: expected a number"),
    ("gamma-size", BLOCK + "gamma_2 = [1, 1]\n", "gamma_2: expected 4 numbers"),
    ("W_out-rows", swap("W_out", "[[1, 0, 0, 1]]"), "W_out: expected 4 rows"),
    ("no-vocab", drop("vocab"), "vocab: missing: with W_out"),
    ("vocab-size", swap("vocab", '["the", "cat"]'), "vocab: expected 4 tokens"),
    ("vocab-twice", swap("vocab", '["the", "cat", "sat", "cat"]'), "vocab: token 'cat' is there twice"),
    ("target-unknown", swap("targets", '["cat", "sat", "mat"]'), "targets: 'mat' is not in vocab"),
    ("targets-size", swap("targets", '["cat"]'), "targets: expected 3 tokens"),
    ("vocab-without-W_out", drop("W_out"), "vocab: vocab is only used with an output layer"),
    ("final-ln-post", BLOCK + "beta_f = [0, 0, 0, 0]\n", "beta_f: the final layer norm"),
    ("key-without-block", drop("block"), 'positional: positional is only used in a Transformer block'),
    ("cross", BLOCK + 'attention = "cross"\nX_enc = [[1, 0, 0, 0]]\n', "attention: a block with cross-attention"),
    ("W_Q-named-as-written", swap("W_Q", "[[1, 0], [0, 1]]"), "block.toml: W_Q: expected 4 rows"),
]


@pytest.mark.parametrize("name,text,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_block_keys_name_the_field(name, text, fragment):
    with pytest.raises(ProblemError) as e:
        read(text)
    assert fragment in str(e.value)
    assert "\n" not in str(e.value)


def test_the_command_line_says_it_in_one_line(tmp_path):
    """A bad key and a good block alike: one line, exit 2, no traceback, nothing on stdout."""
    bad, good = tmp_path / "bad.toml", tmp_path / "good.toml"
    bad.write_text(swap("W_2", "[[1, 0, 0, 1]]"))
    good.write_text(BLOCK)
    r = subprocess.run([sys.executable, "-m", "worked", "solve", str(bad)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "W_2: expected 3×4" in r.stderr and str(bad) in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "worked", "solve", str(good)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stderr == "" and "−ln(probs[sat, on])" in r.stdout, r.stderr


# ---------------------------------------------------------------- the forward pass (part 2: the stages' computation)
np = pytest.importorskip("numpy")


def reference(p):
    """An independent NumPy block, as the references define it (PyTorch's LayerNorm: the biased variance, ε inside
    the root; GPT-2's final LN before the output layer in pre-LN): every matrix by name."""
    b = p.block
    F = lambda m: np.array([[float(x) for x in row] for row in m])  # noqa: E731
    V = lambda v: np.array([float(x) for x in v])  # noqa: E731
    n, d = p.n, p.d_model
    P = np.zeros((n, d))
    if b.positional == "sinusoidal":
        for pos in range(n):
            for i in range(0, d, 2):
                angle = pos / 10000 ** (i / d)
                P[pos, i] = np.sin(angle)
                if i + 1 < d:
                    P[pos, i + 1] = np.cos(angle)
    eps = float(b.eps)

    def ln(x, g, be):
        mu = x.mean(axis=1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
        return V(g) * (x - mu) / np.sqrt(var + eps) + V(be)

    def attn(x):
        zs = []
        for h in p.heads:
            Q, K, Vv = x @ F(h.W_Q), x @ F(h.W_K), x @ F(h.W_V)
            s = Q @ K.T / np.sqrt(Q.shape[1])
            if p.mask == "causal":
                s = np.where(np.triu(np.ones((n, n)), 1) > 0, -np.inf, s)
            e = np.exp(s - s.max(axis=1, keepdims=True))
            zs.append((e / e.sum(axis=1, keepdims=True)) @ Vv)
        return np.hstack(zs) @ F(p.W_O)

    ffn = lambda x: np.maximum(x @ F(b.W_1) + V(b.b_1), 0) @ F(b.W_2) + V(b.b_2)  # noqa: E731
    X0 = F(p.X) + P
    out = {"P": P, "X0": X0}
    if b.kind == "post-ln":
        out["H1"] = ln(X0 + attn(X0), b.gamma_1, b.beta_1)
        out["H"] = ln(out["H1"] + ffn(out["H1"]), b.gamma_2, b.beta_2)
        last = out["H"]
    else:
        out["H1"] = X0 + attn(ln(X0, b.gamma_1, b.beta_1))
        out["H"] = out["H1"] + ffn(ln(out["H1"], b.gamma_2, b.beta_2))
        last = ln(out["H"], b.gamma_f, b.beta_f) if b.W_out is not None else None
    if b.W_out is not None:
        out["logits"] = last @ F(b.W_out)
        e = np.exp(out["logits"] - out["logits"].max(axis=1, keepdims=True))
        out["probs"] = e / e.sum(axis=1, keepdims=True)
        if b.targets is not None:
            out["loss"] = np.array([[-np.mean([np.log(out["probs"][i, t]) for i, t in enumerate(b.targets)])]])
    return out


VARIANTS = {
    "post-ln-causal": BLOCK,
    "post-ln-no-mask": BLOCK.replace('mask = "causal"', 'mask = "none"'),
    "pre-ln-causal": BLOCK.replace('"post-ln"', '"pre-ln"') + 'gamma_f = [1, 2, 1, "1/2"]\nbeta_f = [0, 1, 0, -1]\n',
    "pre-ln-no-mask": BLOCK.replace('"post-ln"', '"pre-ln"').replace('mask = "causal"', 'mask = "none"'),
    "no-positions-no-output": BLOCK.replace('positional = "sinusoidal"', "").split("W_out =")[0] + "gamma_1 = [2, 1, 1, 1]\n"
                              "beta_2 = [0, 1, 0, 0]\n",
    "two-heads-pre-ln": BLOCK.replace('"post-ln"', '"pre-ln"').replace("W_Q = [[1, 0], [0, 1], [1, 0], [0, 1]]", "")
    .replace("W_K = [[0, 1], [1, 0], [1, 0], [0, 1]]", "").replace("W_V = [[1, 0], [0, 1], [1, 1], [0, 0]]", "")
    .replace("W_O = [[1, 0, 0, 1], [0, 1, 1, 0]]", "W_O = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 1, 0, 0], [0, 0, 1, -1]]")
    + "\n[[heads]]\nW_Q = [[1, 0], [0, 1], [1, 0], [0, 1]]\nW_K = [[0, 1], [1, 0], [1, 0], [0, 1]]\n"
      "W_V = [[1, 0], [0, 1], [1, 1], [0, 0]]\n[[heads]]\nW_Q = [[0, 1], [1, 0], [0, 0], [1, 1]]\n"
      "W_K = [[1, 1], [0, 1], [1, 0], [0, 0]]\nW_V = [[0, 1], [1, 0], [0, 1], [1, 0]]\n",
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_forward_pass_is_the_numpy_reference(name):
    """Float gives the reference's values; the 50-digit Interval pass encloses them, a few units of the 45th
    digit wide: the certified decimals of every matrix of the block."""
    from decimal import Decimal

    from worked.attention import Float, Interval, block_forward

    p = read(VARIANTS[name])
    ref = reference(p)
    f = block_forward(p, Float())
    i = block_forward(p, Interval(p, widen=False))
    assert ("logits" in f.shown) == (p.block.W_out is not None) and ("loss" in f.shown) == (p.block.targets is not None)
    assert ("N1" in f.shown) == (p.block.kind == "pre-ln")
    for key, want in ref.items():
        np.testing.assert_allclose(np.array(f.shown[key], dtype=float), want, rtol=1e-10, atol=1e-12, err_msg=key)
        for got_row, want_row in zip(i.shown[key], want):
            for (lo, hi), w in zip(got_row, want_row):
                assert float(lo) - 1e-12 <= w <= float(hi) + 1e-12, (key, lo, hi, w)
                assert hi - lo < Decimal("1e-40"), (key, lo, hi)


def test_the_positions_are_exact():
    """sin and cos of rationals: P exactly in sympy (0 and 1 in the first row), enclosed by the Interval pass."""
    import sympy as sp
    from decimal import Decimal

    from worked.attention import Exact, Interval

    p = read()
    exact, iv = Exact(), Interval(p, widen=False)
    assert [exact.position(0, c, 4) for c in range(4)] == [0, 1, 0, 1]
    assert exact.position(1, 2, 4) == sp.sin(sp.Rational(1, 100))       # 10000^(2/4) = 100
    for pos in range(4):
        for c in range(4):
            v = Decimal(str(sp.N(exact.position(pos, c, 4), 60)))
            lo, hi = iv.position(pos, c, 4)
            assert lo <= v <= hi


def test_a_row_of_variance_zero_with_eps_zero_is_a_clear_error():
    from worked.attention import Float, block_forward

    text = (BLOCK.replace('positional = "sinusoidal"', "").replace("W_O = [[1, 0, 0, 1], [0, 1, 1, 0]]", "W_O = [[0, 0, 0, 0], [0, 0, 0, 0]]")
            .replace("X = [[2, 0, 1, 0]", "X = [[1, 1, 1, 1]").replace('eps = "1/100"', 'eps = "0"'))
    with pytest.raises(ProblemError, match=r"eps: row 1 \(the\) has variance 0"):
        block_forward(read(text), Float())
    block_forward(read(text.replace('eps = "0"', 'eps = "1/10"')), Float())       # ε > 0: defined


@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_hand_pass_carries_what_a_page_would_show(name):
    """The Hand backend (what a student writes down): every block value at the carried places (μ, x − μ, σ², the
    root, each e^x and ln rounded as written), and within a unit of the answer's next place of the true value, so
    its answers round as the key's (for these problems; the pages' notes will say where one does not)."""
    from decimal import Decimal

    from worked.attention import Hand, Interval, block_forward

    p = read(VARIANTS[name])
    P = p.precision.carried
    hand = block_forward(p, Hand(p, "decimal", P))
    true = block_forward(p, Interval(p, widen=False))
    assert hand.shown.keys() == true.shown.keys()
    for key, grid in true.shown.items():
        for true_row, hand_row in zip(grid, hand.shown[key]):
            for iv, x in zip(true_row, hand_row):
                if iv is None:                      # a masked score
                    assert x is None
                    continue
                assert (Fraction(x) * 10 ** P).denominator == 1, (key, x)
                assert abs(Decimal(x.numerator) / x.denominator - iv[0]) < Decimal(10) ** -(p.decimals + 1), (key, x, iv)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_each_block_matrix_has_its_declared_shape_and_words(name):
    """The consumers read a stage's shape and words from its declaration: the pass's matrices have them."""
    from worked import stages
    from worked.attention import Float, block_forward

    p = read(VARIANTS[name])
    d = stages.Dims.of_problem(p)
    assert (d.d_ff, d.vocab) == (p.block.d_ff, len(p.block.vocab or ()))
    kind = stages.BLOCK_KINDS[p.block.kind]
    run = block_forward(p, Float())
    declared = [s for s in kind["before"] + kind["after"] if s.id in run.shown]
    assert {s.id for s in kind["before"]} <= set(run.shown)
    for s in declared:
        m = run.shown[s.id]
        assert (len(m), len(m[0])) == s.shape(d), s.id
        assert s.words.parts and s.grid is not None and s.scope == "layer"
    if p.block.W_out is not None:
        assert stages.labels("vocab", p) == list(p.block.vocab)
        probs = np.array(run.shown[next(s.id for s in kind["after"] if s.grid.heatmap)])
        np.testing.assert_allclose(probs.sum(axis=1), 1, rtol=1e-12)


def test_each_block_grid_writes_its_definition_in_every_format():
    """A block stage's grid: its symbol and definition are trees every printer writes (the worksheet's and the
    web page's headings will read them)."""
    from worked import eq, printers, stages

    S = lambda base, **kw: eq.matrix_sym(base, None, **kw)  # noqa: E731
    for kind in ("post-ln", "pre-ln"):
        p = read(BLOCK.replace('"post-ln"', f'"{kind}"'))
        k = stages.BLOCK_KINDS[kind]
        for s in k["before"] + k["after"]:
            tree = eq.Rel((s.grid.lhs(S), s.grid.definition(S, p)), (eq.EQ,))
            for pr in (printers.text, printers.latex, printers.mathml, printers.typst, printers.spoken):
                assert pr(tree), (s.id, pr)
    assert printers.text(eq.Rel((stages.BLOCK_KINDS["post-ln"]["before"][0].grid.lhs(S),
                                 stages.BLOCK_KINDS["post-ln"]["before"][0].grid.definition(S, p)), (eq.EQ,))) \
        == "P[pos, 2i] = sin(pos/(10000^(2i/d)))"


def drawn(seed: int) -> Problem:
    """A small random block of small integers (both orders, either mask, one or two heads, odd or even d_model)."""
    rng = np.random.default_rng(seed)
    n, d, dk, heads, dff, vocab = (int(rng.integers(lo, hi)) for lo, hi in ((2, 5), (2, 5), (1, 3), (1, 3), (2, 5), (2, 5)))
    M = lambda r, c: rng.integers(-2, 3, size=(r, c)).tolist()  # noqa: E731
    data = {"X": M(n, d), "block": ["post-ln", "pre-ln"][seed % 2], "positional": ["none", "sinusoidal"][seed // 2 % 2],
            "mask": ["none", "causal"][seed // 4 % 2], "W_O": M(heads * dk, d), "W_1": M(d, dff),
            "b_1": rng.integers(-2, 3, size=dff).tolist(), "W_2": M(dff, d), "b_2": rng.integers(-1, 2, size=d).tolist(),
            "eps": "1/10", "gamma_1": rng.integers(1, 3, size=d).tolist(), "W_out": M(d, vocab),
            "vocab": [f"t{k}" for k in range(vocab)]}
    data["targets"] = [f"t{int(k)}" for k in rng.integers(0, vocab, size=n)]
    hs = [{"W_Q": M(d, dk), "W_K": M(d, dk), "W_V": M(d, dk)} for _ in range(heads)]
    if heads == 1:
        data.update(hs[0])
    else:
        data["heads"] = hs
    return Problem.from_dict(data, "drawn.toml")


def test_drawn_blocks_agree_with_the_reference_and_are_enclosed():
    """200 drawn blocks: Float is the NumPy reference, the Interval pass encloses it, narrowly."""
    from decimal import Decimal

    from worked.attention import Float, Interval, block_forward

    for seed in range(200):
        p = drawn(seed)
        ref = reference(p)
        f = block_forward(p, Float())
        iv = block_forward(p, Interval(p, widen=False))
        for key, want in ref.items():
            np.testing.assert_allclose(np.array(f.shown[key], dtype=float), want, rtol=1e-9, atol=1e-9,
                                       err_msg=f"seed {seed}: {key}")
            for row, want_row in zip(iv.shown[key], want):
                for (lo, hi), w in zip(row, want_row):
                    assert float(lo) - 1e-9 <= w <= float(hi) + 1e-9 and hi - lo < Decimal("1e-35"), (seed, key)


def test_every_layer_norm_and_residual_line_of_drawn_blocks_holds_by_hand():
    """The lines of one row's layer norm (μ, x − μ, σ², √(σ² + ε), the normalised row, γ and β) and of a residual
    add, built from the hand pass of 200 drawn blocks (every row of every layer norm), hold by the hand rule."""
    from worked import printers, stages
    from worked.attention import Hand, block_forward
    from worked.audit import audit_lines
    from worked.steps.block import layer_norm_lines, residual_line

    checked = 0
    for seed in range(200):
        p = drawn(seed)
        P = p.precision.carried
        hand = Hand(p, "decimal", P)
        run = block_forward(p, hand)
        kind = stages.BLOCK_KINDS[p.block.kind]
        env = {**run.shown, **stages.block_inputs(p, hand)}
        for s in kind["before"] + kind["after"]:
            if s.id not in run.shown:
                continue
            if s.forward is stages._layer_norm:
                src, g, be = (env[k] for k in s.inputs)
                for i, row in enumerate(src):
                    parts = stages.norm_parts(hand, row, g, be, p.block.eps)
                    assert parts.out == run.shown[s.id][i] or [hand.shown(x) for x in parts.out] == run.shown[s.id][i]
                    lines = layer_norm_lines(s.id, p.tokens[i], row, g, be, p.block.eps, parts, P)
                    assert not audit_lines(lines), (seed, s.id, [printers.text(x) for x in lines], audit_lines(lines))
                    checked += 1
            elif s.forward is stages._plus and s.inputs[1] != "P":
                a, b = (run.shown[k] for k in s.inputs)
                for i in range(p.n):
                    line = residual_line(s.id, p.tokens[i], s.inputs[0], a[i], s.inputs[1], b[i], run.shown[s.id][i], P)
                    assert not audit_lines([line]), (seed, printers.text(line), audit_lines([line]))
    assert checked > 500


def test_a_layer_norm_row_reads_as_a_student_writes_it():
    from worked import printers, stages
    from worked.attention import Hand
    from worked.steps.block import layer_norm_lines

    p = read()
    hand = Hand(p, "decimal", 4)
    row = [Fraction(2), Fraction(0), Fraction(1), Fraction(1)]
    parts = stages.norm_parts(hand, row, [2, 1, 1, 1], [0, 0, 0, 1], Fraction(1, 100))
    text = [printers.text(x) for x in layer_norm_lines("H1", "cat", row, [2, 1, 1, 1], [0, 0, 0, 1], Fraction(1, 100),
                                                        parts, 4)]
    assert text[0] == "μ_cat = (2 + 0 + 1 + 1)/4 = 4/4 = 1"
    assert text[1] == "x_cat − μ_cat = [2 − 1, 0 − 1, 1 − 1, 1 − 1] = [1, −1, 0, 0]"
    assert text[2] == "σ_cat^2 = (1^2 + (−1)^2 + 0^2 + 0^2)/4 = 0.5"
    assert text[3] == "√(σ_cat^2 + ε) = √(0.5 + 0.01) ≈ 0.7141"
    assert text[4] == ("(x_cat − μ_cat)/(√(σ_cat^2 + ε)) = [1/0.7141, (−1)/0.7141, 0/0.7141, 0/0.7141] "
                       "≈ [1.4004, −1.4004, 0.0000, 0.0000]")
    assert text[5] == "H1[cat, ·] = [2·1.4004 + 0, 1·(−1.4004) + 0, 1·0.0000 + 0, 1·0.0000 + 1] = [2.8008, −1.4004, 0.0000, 1.0000]"


def test_every_feed_forward_and_logit_entry_of_drawn_blocks_holds_by_hand():
    """Every entry of U = x·W_1 + b_1, G = relu(U), F = G·W_2 + b_2 and the logits, as one line each from the hand
    pass of 200 drawn blocks, holds by the hand rule; ReLU cuts some entries and keeps others."""
    from worked import printers, stages
    from worked.attention import Hand, block_forward
    from worked.audit import audit_lines
    from worked.steps.block import affine_line, relu_line

    cut = kept = 0
    for seed in range(200):
        p = drawn(seed)
        P = p.precision.carried
        hand = Hand(p, "decimal", P)
        run = block_forward(p, hand)
        env = {**run.shown, **stages.block_inputs(p, hand)}
        for s in stages.BLOCK_KINDS[p.block.kind]["after"]:
            if s.forward in (stages._affine, stages._times):
                x_name, w_name = s.inputs[:2]
                b_name = s.inputs[2] if len(s.inputs) > 2 else None
                W = env[w_name]
                for i in range(p.n):
                    for j in range(len(W[0])):
                        line = affine_line(s.id, p.tokens[i], j, x_name, env[x_name][i], w_name, [r[j] for r in W],
                                           b_name, env[b_name][j] if b_name else None, run.shown[s.id][i][j], P)
                        assert not audit_lines([line]), (seed, printers.text(line), audit_lines([line]))
            elif s.forward is stages._relu:
                U = env[s.inputs[0]]
                for i, row in enumerate(U):
                    for j, u in enumerate(row):
                        g = run.shown[s.id][i][j]
                        assert g == (u if u > 0 else 0)
                        cut, kept = cut + (u <= 0), kept + (u > 0)
                        assert printers.text(relu_line(s.id, p.tokens[i], j, u, g, P)).startswith(f"{s.id}[{p.tokens[i]}, {j + 1}] = relu(")
    assert cut and kept


def test_every_position_and_loss_line_of_drawn_blocks_holds_by_hand():
    """One row's positions (sin and cos with their arguments) and −ln p of each target with the mean, from the
    hand pass of 200 drawn blocks, hold by the hand rule (the auditor evaluates sin, cos and ln of shown numbers)."""
    from worked import printers, stages
    from worked.attention import Hand, block_forward
    from worked.audit import audit_lines
    from worked.steps.block import loss_lines, position_lines

    losses = 0
    for seed in range(200):
        p = drawn(seed)
        P = p.precision.carried
        hand = Hand(p, "decimal", P)
        run = block_forward(p, hand)
        kind = stages.BLOCK_KINDS[p.block.kind]
        if p.block.positional == "sinusoidal":
            Pm = run.shown[kind["before"][0].id]
            for pos in range(p.n):
                angles = [hand.angle(pos, c, p.d_model) for c in range(p.d_model)]
                lines = position_lines(p.tokens[pos], pos, p.d_model, angles, Pm[pos], P)
                assert not audit_lines(lines), (seed, [printers.text(x) for x in lines], audit_lines(lines))
        loss_stage, probs_stage = kind["after"][-1], kind["after"][-2]
        L = run.shown[loss_stage.id][0][0]
        if L is None:                 # a target's probability rounded to 0 at the carried places
            continue
        probs = run.shown[probs_stage.id]
        cells = [(p.tokens[i], p.block.vocab[t], probs[i][t]) for i, t in enumerate(p.block.targets)]
        terms = [hand.ln(c[2]) for c in cells]
        lines = loss_lines(cells, terms, L, P)
        assert not audit_lines(lines), (seed, [printers.text(x) for x in lines], audit_lines(lines))
        losses += 1
    assert losses > 150


def test_position_and_loss_lines_read_as_a_student_writes_them():
    from worked import printers
    from worked.attention import Hand
    from worked.steps.block import loss_lines, position_lines

    p = read()
    hand = Hand(p, "decimal", 4)
    angles = [hand.angle(1, c, 4) for c in range(4)]
    text = [printers.text(x) for x in position_lines("cat", 1, 4, angles, [hand.position(1, c, 4) for c in range(4)], 4)]
    assert text[0] == "P[cat, 1] = sin(1/(10000^(0/4))) = sin(1) ≈ 0.8415"
    assert text[2] == "P[cat, 3] = sin(1/(10000^(2/4))) = sin(0.01) ≈ 0.0100"
    text = [printers.text(x) for x in loss_lines([("the", "cat", Fraction("0.2312"))], [hand.ln(Fraction("0.2312"))],
                                                 Fraction("1.4645"), 4)]
    assert text == ["−ln(probs[the, cat]) = −ln(0.2312) ≈ 1.4645", "L = 1.4645/1 = 1.4645"]


def test_every_softmax_row_of_the_output_holds_by_hand():
    """One row of probs = softmax(logits), line by line (each e^x, the total, each probability), from the hand
    pass of 200 drawn blocks: every line holds, and it gives the probabilities the hand pass carries."""
    from worked import printers, stages
    from worked.attention import Hand, block_forward
    from worked.audit import audit_lines
    from worked.steps.block import softmax_lines

    for seed in range(200):
        p = drawn(seed)
        P = p.precision.carried
        hand = Hand(p, "decimal", P)
        run = block_forward(p, hand)
        probs_stage = stages.BLOCK_KINDS[p.block.kind]["after"][-2]
        logits = run.shown[probs_stage.inputs[0]]
        for i, row in enumerate(logits):
            weights, state = hand.softmax(row)
            assert [hand.shown(w) for w in weights] == run.shown[probs_stage.id][i]
            lines = softmax_lines(p.tokens[i], list(p.block.vocab), row, state, weights, P)
            assert not audit_lines(lines), (seed, [printers.text(x) for x in lines], audit_lines(lines))


# ---------------------------------------------------------------- the solution (part 3: the solver walks the block)
@pytest.mark.parametrize("name", list(VARIANTS))
def test_the_solution_is_the_numpy_reference(name):
    """``solve`` walks the block's architecture: every matrix under its API name (P, X0, the heads', Z, H1, H, the
    logits, probs and the loss, a number), its 50-digit values the reference's; P and X0 exact in sympy."""
    import sympy as sp

    from worked import solve, stages

    p = read(VARIANTS[name])
    sol = solve(p)
    ref = reference(p)
    mats = sol.matrices()
    assert list(mats) == list(stages.matrices(stages.Dims.of_problem(p)))
    for key, want in ref.items():
        np.testing.assert_allclose(sol[key].to_numpy(), want, rtol=1e-12, atol=1e-12, err_msg=key)
    if p.block.positional == "sinusoidal":
        assert sol["P"][1, 0] == sp.sin(1) and sol["P"][2, 2] == sp.sin(sp.Rational(2, 100))
        assert sol["X0"][1, 0] == sp.sin(1) and sol["X0"][0, 1] == 1       # X + P: cos 0 = 1 added to 0
    if "loss" in ref:
        assert sol["loss"].is_scalar and sol["loss"].shape == (1, 1)
    assert sol["Z"] is sol.output and sol["H"].shape == (p.n, p.d_model)
    assert ("N1" in mats) == (p.block.kind == "pre-ln") and ("Hf" in mats) == (p.block.kind == "pre-ln" and "logits" in ref)


@pytest.mark.parametrize("checks", ["one", "row", "all"])
@pytest.mark.parametrize("name", list(VARIANTS))
def test_every_line_of_a_block_solution_holds_by_hand(name, checks):
    """Every step of the block (positions, X0, the heads, W_O, the residual adds, the layer norms, the
    feed-forward, ReLU, the logits, a softmax row, the loss) has its lines, and each holds by the hand rule."""
    from worked import printers, solve

    sol = solve(read(VARIANTS[name]), checks=checks).audit()
    ids = [s.id for s in sol.steps]
    assert ids[:2] == ["P", "X0"] and ("loss" in ids) == ("probs" in ids)
    for st in sol.steps:
        if st.id in ("concat",) or (st.id == "P" and "positional" not in VARIANTS[name]):
            continue
        assert st.lines, (st.id, printers.text(st.title_prose))


def test_two_hundred_drawn_block_solutions_hold_by_hand():
    """The hand rule on every line of 200 drawn blocks, every entry and row worked (checks "all")."""
    from worked import solve

    for seed in range(200):
        solve(drawn(seed), checks="all").audit()


def test_a_block_solution_reads_as_a_student_works_it():
    """The steps in order, the bias as an entry of its vector (b_1[3], not a subscript), one row's layer norm,
    one softmax row, −ln p of each target."""
    from worked import printers, solve

    sol = solve(read())
    text = {s.id: [printers.text(x.eq) for x in s.lines] for s in sol.steps}
    assert [s.id for s in sol.steps] == ["P", "X0", "Q", "K", "V", "scores", "scaled", "weights", "Z", "concat", "output",
                                         "R1", "H1", "U", "G", "F", "R2", "H", "logits", "probs", "loss"]
    assert text["P"][2] == "P[sat, 3] = sin(2/(10000^(2/4))) = sin(0.02) ≈ 0.0200"
    assert text["U"][0].startswith("U[sat, 3] = H_1[sat, ·]·W_1[:, 3] + b_1[3] = ")
    assert text["H1"][0].startswith("μ_sat = (") and text["H1"][3].startswith("√(σ_sat^2 + ε) = √(")
    assert text["loss"][-1].startswith("L = (") and len(text["loss"]) == 4
    assert any(x.startswith("sum_sat = ") for x in text["probs"])


# ---------------------------------------------------------------- checking answers to a block (part 4)
def _key_answers(sol, keys):
    """The key's answers at the problem's places, by matrix."""
    out = {}
    for k in keys:
        m = sol[k]
        out[k] = [[str(m.rounded(i, j, sol.problem.decimals)) for j in range(m.shape[1])] for i in range(m.shape[0])]
    return out


@pytest.mark.parametrize("name", ["post-ln-causal", "pre-ln-causal"])
def test_the_key_checks_correct_and_a_planted_slip_follows_through(name):
    """The key's own answers are all correct; a slip in one entry of U is wrong, and G and F worked from the
    student's own U are wrong but consistent with their earlier step (error carried forward), not counted twice."""
    from worked import solve
    from worked.check import check_answers

    p = read(VARIANTS[name])
    sol = solve(p)
    keys = [k for k in sol.matrices() if not k.startswith("head")]
    good = _key_answers(sol, keys)
    report = check_answers(p, good).to_dict()
    assert not report["errors"] and report["summary"]["wrong"] == 0, report["errors"]
    assert set(report["matrices"]) == set(keys)

    slipped = {k: [list(r) for r in v] for k, v in good.items()}
    i = p.n - 1
    u = sol["U"].value(i, 0)
    slipped["U"][i][0] = f"{u + 1:.2f}"                                       # the slip
    slipped["G"][i][0] = f"{max(u + 1, 0):.2f}"                                # relu of the student's own U
    byname = check_answers(p, slipped).to_dict()["matrices"]
    assert byname["U"]["verdicts"][i][0] == "wrong" and not byname["U"]["carried_forward"][i][0]
    if max(u + 1, 0) != max(u, 0):
        assert byname["G"]["verdicts"][i][0] == "wrong" and byname["G"]["carried_forward"][i][0]
        assert "U" in byname["G"]["based_on"]


def test_a_wrong_loss_is_named_and_right_ones_count():
    from worked import solve
    from worked.check import check_answers

    p = read()
    sol = solve(p)
    L = sol["loss"].value(0, 0)
    r = check_answers(p, {"loss": [[f"{L:.2f}"]], "probs": _key_answers(sol, ["probs"])["probs"]}).to_dict()
    assert r["summary"]["wrong"] == 0 and r["summary"]["correct"] == 13
    r = check_answers(p, {"loss": [[f"{L / 2.302585:.2f}"]]}).to_dict()           # log base 10: wrong
    assert r["summary"]["wrong"] == 1


def test_a_students_row_of_variance_zero_is_checked_not_an_error():
    """With ε = 0, a student's own R1 row of equal entries has no layer norm: the check says H1 is wrong there,
    it does not fail."""
    from worked import solve
    from worked.check import check_answers

    p = read(swap("eps", '"0"'))
    sol = solve(p)
    answers = _key_answers(sol, ["R1", "H1"])
    answers["R1"][0] = ["1"] * p.d_model
    r = check_answers(p, answers).to_dict()
    assert r["matrices"]["R1"]["verdicts"][0][0] == "wrong" and not r["errors"]


def test_quiz_words_and_mistake_worlds_of_a_block():
    """What a quiz reads of a block problem (a family that draws blocks comes with `worked new --block`): a
    question's words name the rows by token and the columns of probs by word of the vocabulary, and every
    mistake's world is a whole block's pass (the heads' mistakes reach the loss)."""
    from worked import printers
    from worked.quiz import describe, mistake_worlds

    p = read()
    text = printers.text(describe({"matrix": "probs", "ask": "probs[2,3]"}, p))
    assert text.startswith("the next-token probabilities") and "row 2 (cat), column 3 (sat)" in text
    assert printers.text(describe({"matrix": "H", "ask": "H[2,*]"}, p)).endswith("row 2 (cat), every column")
    worlds = dict(mistake_worlds(p))
    assert worlds and all("loss" in w and "P" in w for w in worlds.values())
    from worked import solve

    true = solve(p)["loss"].value(0, 0)
    assert any(abs(w["loss"][0][0] - true) > 1e-6 for w in worlds.values())      # a slip in the heads moves the loss


def test_a_probability_a_hand_rounds_to_0_is_a_clear_error_not_a_crash():
    """−ln of a target's probability that rounds to 0 at the carried places (one more tried) has no value for a hand:
    the solution says so in one line naming the loss, as bad input does."""
    from worked import solve

    d = drawn(23).to_dict()
    d["decimals"] = 1
    with pytest.raises(ProblemError, match="loss: a value a hand carries to 4 places has no value here"):
        solve(Problem.from_dict(d, "d.toml")).audit()


def test_a_block_familys_sizes_are_a_block_problems():
    """What a quiz reads of a family of blocks (its shapes, from ``Dims.of_family``) is what a problem of those
    sizes has: the same matrices, the same shapes (a family's block, d_ff and vocab, as worked new --block draws)."""
    from types import SimpleNamespace

    from worked import stages

    for name in ("post-ln-causal", "pre-ln-causal", "no-positions-no-output"):
        p = read(VARIANTS[name])
        b = p.block
        fam = SimpleNamespace(n=p.n, d_model=p.d_model, d_k=p.d_k, dv=p.d_v, heads=1, train=False, n_enc=p.n,
                              attention="self", block=b.kind, d_ff=b.d_ff, vocab=len(b.vocab or ()))
        assert stages.matrices(stages.Dims.of_family(fam)) == stages.matrices(stages.Dims.of_problem(p)), name


def test_a_quiz_over_a_given_block(tmp_path):
    """A quiz spec with a [problem] table (a block) instead of a [family]: every variant works that problem, the
    questions (H[2,3], probs[1,*], loss) expect the key's values, and the sheets and LMS exports are written."""
    import json
    from pathlib import Path

    from worked import solve
    from worked.quiz import load_spec

    spec_path = Path(__file__).resolve().parents[1] / "problems" / "quiz-7-block.toml"
    spec = load_spec(spec_path)
    assert [q.ask for q in spec.questions] == ["H[2,3]", "probs[1,*]", "loss"]
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(spec_path), "-n", "2", "-o", str(tmp_path / "q")],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    out = tmp_path / "q"
    manifest = json.loads((out / "manifest.json").read_text())
    sol = solve(spec.family.problem)
    for v in manifest["variants"]:
        q = {x["ask"]: x for x in v["questions"]}
        assert abs(q["H[2,3]"]["expected"] - sol["H"].value(1, 2)) < 1e-9
        assert [round(x, 9) for x in q["probs[1,*]"]["expected"]] == [round(sol["probs"].value(0, j), 9) for j in range(4)]
        assert abs(q["loss"]["expected"][0][0] - sol["loss"].value(0, 0)) < 1e-9      # a whole 1×1 matrix
    assert all((out / f).exists() for f in ("moodle.xml", "quiz.gift.txt", "canvas-qti.zip"))


def test_a_quiz_spec_gives_a_family_or_a_problem_not_both():
    from worked.quiz import spec_from_dict

    with pytest.raises(ProblemError, match="problem: give a \\[family\\]"):
        spec_from_dict({"family": {}, "problem": {"X": [[1]]}, "questions": [{"ask": "Z"}]}, "q.toml")
    with pytest.raises(ProblemError, match="problem: expected a table"):
        spec_from_dict({"problem": "block.toml", "questions": [{"ask": "Z"}]}, "q.toml")


def test_a_scaled_score_too_large_for_a_hand_is_a_clear_error():
    """As for attention: a block whose heads would take e^x of a huge scaled score is refused in one line, before any
    e^x is shown."""
    from worked import solve

    with pytest.raises(ProblemError, match="scores: a scaled score of about .* is too large for a hand exercise"):
        solve(read(swap("X", "[[900, 0, 900, 0], [0, 900, 0, 900], [900, 900, 0, 0]]")))


def test_solve_writes_a_block_as_text_markdown_and_json():
    """`worked solve` of a block: the text and Markdown give the block's order and every step; the JSON's "block"
    names the matrices as the API does (P … loss), the loss a number and P exact."""
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "problems" / "block-pre-ln-causal.toml"
    out = {}
    for fmt in ("text", "markdown", "json"):
        r = subprocess.run([sys.executable, "-m", "worked", "solve", str(path), "--format", fmt], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        out[fmt] = r.stdout
    assert "pre-LN (GPT-2)" in out["text"] and "−ln(probs[sat, a])" in out["text"]
    assert "pre-LN (GPT-2)" in out["markdown"] and r"\mathrm{probs}[\text{sat},\text{a}]" in out["markdown"]
    b = json.loads(out["json"])["transformer"]
    assert list(b["matrices"]) == ["P", "X0", "N1", "H1", "N2", "U", "G", "F", "H", "Hf", "logits", "probs", "loss"]
    assert b["order"] == "pre-ln" and b["targets"] == ["cat", "sat", "a"] and isinstance(b["loss"], float)
    assert b["matrices"]["P"]["exact"][1] == ["sin(1)", "cos(1)", "sin(1/100)", "cos(1/100)"]
    assert b["matrices"]["loss"]["shape"] == [] and b["matrices"]["loss"]["value"] == b["loss"]


@pytest.mark.parametrize("name", ["block-post-ln", "block-pre-ln-causal", "block-train"])
def test_the_places_are_decided_by_a_pass_that_stops_at_the_first_value_off(name):
    """The pass at decimals + 2 stops at the first matrix with a carried value that rounds to another answer
    (the solver's ``watch``): the same places, and the same first value (the one the key's note names), as a whole
    pass at decimals + 2 finds; the pass the key shows is the whole pass at those places. A block's 50-digit
    decimals are written when its exact entries are read, the same as the enclosures' shortest decimals."""
    from pathlib import Path

    import sympy as sp

    import worked
    from worked import solver
    from worked.attention import Hand, Interval, run_pass

    p = worked.load(Path(__file__).resolve().parents[1] / "problems" / f"{name}.toml")
    nums = run_pass(p, Interval(p, widen=False))
    places, run, off, first = solver.hand_pass(p, "decimal", nums)
    whole = solver._off_answers(run_pass(p, Hand(p, "decimal", p.precision.carried)), nums, p.decimals)
    assert places == p.precision.carried + (1 if whole else 0)
    assert first[:1] == whole[:1] and all(c in whole for c in first)
    assert run.shown == run_pass(p, Hand(p, "decimal", places)).shown and not off
    sol = worked.solve(p).audit()
    H = sol["H"]
    assert all(isinstance(x, sp.Float) for row in H.exact for x in row)
    assert [[str(x) for x in row] for row in H.exact] == \
        [[str(solver._enclosed(iv)) for iv in row] for row in nums.shown["H"]]
