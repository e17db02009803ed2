"""A Transformer block's training step (issue 27: ``[train] loss = "cross-entropy"``): the gradient of every weight,
the update W − lr·dW and the loss after, over the Float and Interval backends, against an independent NumPy block
written here (its gradients by central differences of its loss), post-LN and pre-LN, with and without a mask; and,
where PyTorch is installed (the ``torch`` extra), against ``nn.TransformerEncoderLayer``'s forward and autograd."""
from fractions import Fraction

import pytest

from worked.errors import ProblemError
from worked.problem import Problem

np = pytest.importorskip("numpy")

from test_block import BLOCK, VARIANTS  # noqa: E402

TRAIN = '\n[train]\nloss = "cross-entropy"\nlr = "1/10"\n'
CASES = {k: v + TRAIN for k, v in VARIANTS.items() if "W_out" in v}


def read(text):
    return Problem.from_text(text, "block-train.toml")


def weights_of(p) -> dict:
    """Every trained weight of *p* as float arrays, by the names the gradients take (``dW_1`` is W_1's), the heads'
    as ``head1.W_Q`` …; vectors as 1 × k arrays."""
    b = p.block
    A = lambda m: np.array([[float(x) for x in r] for r in m])  # noqa: E731
    w = {"W_O": A(p.W_O), "W_1": A(b.W_1), "b_1": A([b.b_1]), "W_2": A(b.W_2), "b_2": A([b.b_2]), "W_out": A(b.W_out)}
    for k in ("gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_f", "beta_f"):
        if getattr(b, k) is not None:
            w[k] = A([getattr(b, k)])
    for h, hd in enumerate(p.heads, 1):
        w.update({f"head{h}.W_Q": A(hd.W_Q), f"head{h}.W_K": A(hd.W_K), f"head{h}.W_V": A(hd.W_V)})
    return w


def np_loss(p, w) -> float:
    """The block's mean cross-entropy in NumPy, from the weights *w* (an independent forward, as the references
    define it: PyTorch's LayerNorm, GPT-2's final LN in pre-LN)."""
    b, n, d = p.block, p.n, p.d_model
    P = np.zeros((n, d))
    if b.positional == "sinusoidal":
        for pos in range(n):
            for i in range(0, d, 2):
                P[pos, i] = np.sin(pos / 10000 ** (i / d))
                if i + 1 < d:
                    P[pos, i + 1] = np.cos(pos / 10000 ** (i / d))
    eps = float(b.eps)

    def ln(x, g, be):
        mu = x.mean(axis=1, keepdims=True)
        return g * (x - mu) / np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps) + be

    def attn(x):
        zs = []
        for h in range(1, len(p.heads) + 1):
            Q, K, V = x @ w[f"head{h}.W_Q"], x @ w[f"head{h}.W_K"], x @ w[f"head{h}.W_V"]
            s = Q @ K.T / np.sqrt(Q.shape[1])
            if p.mask == "causal":
                s = np.where(np.triu(np.ones((n, n)), 1) > 0, -np.inf, s)
            e = np.exp(s - s.max(axis=1, keepdims=True))
            zs.append(e / e.sum(axis=1, keepdims=True) @ V)
        return np.hstack(zs) @ w["W_O"]

    ffn = lambda x: np.maximum(x @ w["W_1"] + w["b_1"], 0) @ w["W_2"] + w["b_2"]  # noqa: E731
    X0 = np.array([[float(x) for x in r] for r in p.X]) + P
    if b.kind == "post-ln":
        H1 = ln(X0 + attn(X0), w["gamma_1"], w["beta_1"])
        last = ln(H1 + ffn(H1), w["gamma_2"], w["beta_2"])
    else:
        H1 = X0 + attn(ln(X0, w["gamma_1"], w["beta_1"]))
        last = ln(H1 + ffn(ln(H1, w["gamma_2"], w["beta_2"])), w["gamma_f"], w["beta_f"])
    logits = last @ w["W_out"]
    logp = logits - logits.max(axis=1, keepdims=True)
    logp = logp - np.log(np.exp(logp).sum(axis=1, keepdims=True))
    return -np.mean([logp[i, t] for i, t in enumerate(b.targets)])


def np_grads(p, w, h=1e-6) -> dict:
    """Every weight's gradient by central differences of :func:`np_loss`, entry by entry."""
    out = {}
    for k, m in w.items():
        g = np.zeros_like(m)
        for idx in np.ndindex(m.shape):
            up, down = {**w, k: m.copy()}, {**w, k: m.copy()}
            up[k][idx] += h
            down[k][idx] -= h
            g[idx] = (np_loss(p, up) - np_loss(p, down)) / (2 * h)
        out[k] = g
    return out


def grad_key(name: str) -> str:
    """The key of weight *name*'s gradient in the pass: ``dW_1``, ``head1.dW_Q``."""
    pre, _, base = name.rpartition(".")
    return (pre + "." if pre else "") + "d" + base


@pytest.mark.parametrize("name", list(CASES))
def test_every_gradient_is_the_central_difference_of_an_independent_numpy_block(name):
    """Float's gradient of every weight (W_Q, W_K, W_V of each head, W_O, W_1, b_1, W_2, b_2, the γ and β, W_out)
    is the central difference of the NumPy block's loss; the update is W − lr·dW and the loss after is the NumPy
    block's loss at the updated weights (lower than before, for these problems)."""
    from worked.attention import Float, block_forward

    p = read(CASES[name])
    w = weights_of(p)
    run = block_forward(p, Float())
    assert run.loss == pytest.approx(np_loss(p, w), rel=1e-12)
    ref = np_grads(p, w)
    assert set(w) >= {"W_O", "W_1", "b_1", "W_2", "b_2", "gamma_1", "beta_1", "gamma_2", "beta_2", "W_out", "head1.W_Q"}
    lr = float(p.train.lr)
    new = {}
    for k, g in ref.items():
        got = np.array(run.shown[grad_key(k)], dtype=float)
        np.testing.assert_allclose(got, g, rtol=1e-6, atol=1e-8, err_msg=k)
        upd = np.array(run.shown[k + "_new"], dtype=float)
        np.testing.assert_allclose(upd, w[k] - lr * got, rtol=1e-14, atol=1e-14, err_msg=k)
        new[k] = upd
    assert run.loss_after == pytest.approx(np_loss(p, new), rel=1e-12)
    assert run.loss_after < run.loss


@pytest.mark.parametrize("name", list(CASES))
def test_the_interval_pass_encloses_every_gradient_narrowly(name):
    """The 50-digit Interval pass encloses each gradient, update and the loss after (Float's values, within float
    error), a few units of the 40th digit wide: the certified decimals of the training step."""
    from decimal import Decimal

    from worked.attention import Float, Interval, block_forward

    p = read(CASES[name])
    f = block_forward(p, Float())
    iv = block_forward(p, Interval(p, widen=False))
    train = [k for k in f.shown if k.rpartition(".")[2].startswith("d") or k.endswith("_new") or k == "loss_after"]
    assert len(train) > 30 and set(train) <= set(iv.shown)
    for k in train:
        for frow, irow in zip(f.shown[k], iv.shown[k]):
            for x, (lo, hi) in zip(frow, irow):
                assert float(lo) - 1e-9 <= x <= float(hi) + 1e-9, (k, lo, hi, x)
                assert hi - lo < Decimal("1e-35"), (k, lo, hi)


def test_the_central_difference_check_agrees_with_the_backward_pass():
    """The check the key will show: (L(w + h) − L(w − h))/2h for one entry of each kind of weight, against the
    backward pass's entry (floats, and the Interval pass's enclosure with an exact h)."""
    from worked.attention import Float, Interval, block_central_difference, block_forward

    p = read(CASES["pre-ln-causal"])
    run = block_forward(p, Float())
    for name, (r, c) in (("W_1", (1, 2)), ("b_1", (0, 0)), ("gamma_1", (0, 2)), ("beta_f", (0, 1)), ("W_O", (0, 1)),
                         ("head1.W_Q", (1, 0)), ("head1.W_V", (2, 1)), ("W_out", (2, 1)), ("W_2", (0, 3))):
        g = run.shown[grad_key(name)][r][c]
        assert block_central_difference(p, Float(), name, r, c, 1e-5) == pytest.approx(g, rel=1e-6, abs=1e-9), name
    iv = Interval(p, widen=False)
    lo, hi = block_central_difference(p, iv, "W_out", 2, 1, Fraction(1, 1000))
    g = run.shown["dW_out"][2][1]
    assert abs(float(lo) - g) < 1e-5 and hi - lo < 1e-30


def test_relu_passes_the_gradient_only_where_it_kept_the_entry():
    from worked.attention import Float, block_forward

    p = read(CASES["post-ln-causal"])
    run = block_forward(p, Float())
    U, dG, dU = run.shown["U"], run.shown["dG"], run.shown["dU"]
    assert any(u <= 0 for r in U for u in r) and any(u > 0 for r in U for u in r)
    for ur, gr, dr in zip(U, dG, dU):
        for u, g, d in zip(ur, gr, dr):
            assert d == (g if u > 0 else 0)


BAD = [
    ("no-targets", BLOCK.replace('targets = ["cat", "sat", "on"]', "") + TRAIN, "train: a block's training step needs its output layer and targets"),
    ("mse", BLOCK + '\n[train]\nloss = "mse"\nlr = 1\n', 'train.loss: expected "cross-entropy" in a block'),
    ("target", BLOCK + "\n[train]\ntarget = [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]]\nlr = 1\n", "train.target: a block has no target T"),
    ("no-lr", BLOCK + '\n[train]\nloss = "cross-entropy"\n', "train.lr: missing"),
    ("cross-entropy-without-block", BLOCK.split("positional")[0].replace('block = "post-ln"', "").replace("W_O = [[1, 0, 0, 1], [0, 1, 1, 0]]", "")
     + "W_Q = [[1, 0], [0, 1], [1, 0], [0, 1]]\nW_K = [[0, 1], [1, 0], [1, 0], [0, 1]]\nW_V = [[1, 0], [0, 1], [1, 1], [0, 0]]\n"
     '[train]\ntarget = [[0, 0], [0, 0], [0, 0]]\nloss = "cross-entropy"\nlr = 1\n', 'train.loss: expected "mse"'),
]


@pytest.mark.parametrize("name,text,fragment", BAD, ids=[b[0] for b in BAD])
def test_a_bad_train_table_in_a_block_is_a_one_line_error(name, text, fragment):
    with pytest.raises(ProblemError) as e:
        read(text)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_a_block_with_train_is_written_and_read_back_the_same():
    p = read(CASES["pre-ln-causal"])
    assert p.train.loss == "cross-entropy" and p.train.target is None and p.train.lr == Fraction(1, 10)
    assert "[train]" in p.to_toml() and "target =" not in p.to_toml()
    assert Problem.from_text(p.to_toml(), "again.toml") == p == Problem.from_dict(p.to_dict())


# ---------------------------------------------------------------- PyTorch (the optional `torch` extra)
TORCH_BLOCK = """
tokens = ["the", "cat", "sat"]
X = [[2, 0, 1, 0], [0, 1, 0, 1], [1, 1, 0, 0]]
positional = "sinusoidal"
block = "post-ln"
W_Q = [[1, 0, 0, 1], [0, 1, 0, 0], [1, 0, -1, 0], [0, 1, 0, 1]]
W_K = [[0, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, -1], [0, 1, 1, 0]]
W_V = [[1, 0, 1, 0], [0, 1, 0, 0], [1, 1, 0, 1], [0, 0, 1, 1]]
W_O = [[1, 0, 0, 1], [0, 1, 1, 0], [1, 0, 1, 0], [0, -1, 0, 1]]
mask = "causal"
W_1 = [[1, 0, -1], [0, 1, 0], [1, 0, 1], [0, -1, 1]]
b_1 = [0, "1/2", -1]
W_2 = [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, -1]]
b_2 = [0, 1, 0, 0]
eps = "1/100"
gamma_1 = [2, 1, 1, "1/2"]
beta_1 = [0, 1, 0, 0]
gamma_2 = [1, 1, 2, 1]
beta_2 = [0, 0, -1, 0]
W_out = [[1, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0], [1, 0, 0, 1]]
vocab = ["the", "cat", "sat", "on"]
targets = ["cat", "sat", "on"]
[train]
loss = "cross-entropy"
lr = "1/10"
"""


@pytest.mark.parametrize("order", ["post-ln", "pre-ln"])
@pytest.mark.parametrize("mask", ["causal", "none"])
def test_pytorch_encoder_layer_agrees(order, mask):
    """nn.TransformerEncoderLayer (one head, d_k = d_v = d_model, dropout 0, ReLU, norm_first for pre-LN) with our
    weights mapped into in_proj/out_proj/linear1/linear2/norm1/norm2 (biases of the attention 0), then the output
    layer (pre-LN: the final LN first) and F.cross_entropy: its block output and every gradient are ours."""
    torch = pytest.importorskip("torch", reason="PyTorch is optional: pip install 'worked[torch]' (torch==2.13.0, CPU)")
    from worked.attention import Float, block_forward

    text = TORCH_BLOCK.replace('"post-ln"', f'"{order}"').replace('mask = "causal"', f'mask = "{mask}"')
    if order == "pre-ln":
        text = text.replace("[train]", 'gamma_f = [1, 2, 1, 1]\nbeta_f = [0, 0, 1, 0]\n[train]')
    p = read(text)
    b, d, n = p.block, p.d_model, p.n
    ours = block_forward(p, Float())
    T = lambda m: torch.tensor([[float(x) for x in r] for r in m], dtype=torch.float64)  # noqa: E731
    Tv = lambda v: torch.tensor([float(x) for x in v], dtype=torch.float64)  # noqa: E731
    layer = torch.nn.TransformerEncoderLayer(d, nhead=1, dim_feedforward=b.d_ff, dropout=0.0, activation="relu",
                                             layer_norm_eps=float(b.eps), batch_first=True, norm_first=order == "pre-ln",
                                             dtype=torch.float64)
    hd = p.heads[0]
    with torch.no_grad():
        layer.self_attn.in_proj_weight.copy_(torch.cat([T(hd.W_Q).T, T(hd.W_K).T, T(hd.W_V).T]))
        layer.self_attn.in_proj_bias.zero_()
        layer.self_attn.out_proj.weight.copy_(T(p.W_O).T)
        layer.self_attn.out_proj.bias.zero_()
        layer.linear1.weight.copy_(T(b.W_1).T)
        layer.linear1.bias.copy_(Tv(b.b_1))
        layer.linear2.weight.copy_(T(b.W_2).T)
        layer.linear2.bias.copy_(Tv(b.b_2))
        for norm, g, be in ((layer.norm1, b.gamma_1, b.beta_1), (layer.norm2, b.gamma_2, b.beta_2)):
            norm.weight.copy_(Tv(g))
            norm.bias.copy_(Tv(be))
    W_out = T(b.W_out).requires_grad_()
    final = None
    if order == "pre-ln":
        final = torch.nn.LayerNorm(d, eps=float(b.eps), dtype=torch.float64)
        with torch.no_grad():
            final.weight.copy_(Tv(b.gamma_f))
            final.bias.copy_(Tv(b.beta_f))
    X0 = torch.tensor(ours.shown["X0"], dtype=torch.float64).unsqueeze(0)
    m = torch.nn.Transformer.generate_square_subsequent_mask(n, dtype=torch.float64) if mask == "causal" else None
    layer.train()        # dropout 0: the same as eval, and autograd's own path (not the fused fast path)
    H = layer(X0, src_mask=m)[0]
    np.testing.assert_allclose(H.detach().numpy(), np.array(ours.shown["H"]), rtol=1e-10, atol=1e-12)
    logits = (final(H) if final is not None else H) @ W_out
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor(list(b.targets)))
    assert float(loss.detach()) == pytest.approx(ours.loss, rel=1e-12)
    loss.backward()
    sa = layer.self_attn
    pairs = {"head1.dW_Q": sa.in_proj_weight.grad[:d].T, "head1.dW_K": sa.in_proj_weight.grad[d:2 * d].T,
             "head1.dW_V": sa.in_proj_weight.grad[2 * d:].T, "dW_O": sa.out_proj.weight.grad.T,
             "dW_1": layer.linear1.weight.grad.T, "db_1": layer.linear1.bias.grad[None], "dW_2": layer.linear2.weight.grad.T,
             "db_2": layer.linear2.bias.grad[None], "dgamma_1": layer.norm1.weight.grad[None],
             "dbeta_1": layer.norm1.bias.grad[None], "dgamma_2": layer.norm2.weight.grad[None],
             "dbeta_2": layer.norm2.bias.grad[None], "dW_out": W_out.grad}
    if final is not None:
        pairs.update({"dgamma_f": final.weight.grad[None], "dbeta_f": final.bias.grad[None]})
    for key, g in pairs.items():
        np.testing.assert_allclose(np.array(ours.shown[key]), g.numpy(), rtol=1e-9, atol=1e-12, err_msg=key)
