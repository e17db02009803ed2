"""The worked lines of a block's training step (worked/steps/block_train.py), built from the hand pass of
:func:`worked.attention.block_forward` for every entry of every gradient, update and layer-norm row of the block's
train stages, on the shipped-style blocks and drawn ones: every line holds by the hand rule (worked/audit.py)."""
from fractions import Fraction

import pytest

from worked import eq, printers, stages
from worked.attention import Hand, Interval, block_forward, block_loss, block_weight
from worked.audit import audit_lines
from worked.generate import Family, generate
from worked.steps import block_train as L

from test_block_train import CASES, read


def problems():
    out = [read(t) for t in CASES.values()]
    for fam in (dict(block="post-ln", vocab=4, train=True, mask="causal"),
                dict(block="pre-ln", positional="sinusoidal", vocab=3, train=True, d_ff=3)):
        out += [generate(Family.from_dict(fam), seed) for seed in range(4)]
    return out


def E(name, r, c):
    return eq.Entry(eq.matrix_sym(name), str(r), str(c))


def lines_of(p):
    """Every line of the training step of *p*: (stage id, line)."""
    P = p.precision.carried
    hb = Hand(p, "decimal", P)
    run = block_forward(p, hb)
    S = {**run.shown, **stages.block_inputs(p, hb), "W_O": [[hb.entry(x) for x in r] for r in p.W_O]}
    kind = stages.BLOCK_KINDS[p.block.kind]
    out = []
    for s in kind["train"] + kind["after_heads"] + kind["update"]:
        f, R = s.forward, run.shown[s.id]
        ins = [S.get(k) for k in s.inputs]
        if f is stages._d_logits:
            out += [(s.id, L.dlogits_line(p.tokens[i], p.block.vocab[j], ins[0][i][j], j == t, p.n, R[i][j], P))
                    for i, t in enumerate(p.block.targets) for j in range(len(R[0]))]
        elif f is stages._d_of_weight:          # Mᵀ·d
            M, d = ins
            out += [(s.id, L.products_line(E(s.id, r + 1, c + 1), [(M[i][r], d[i][c]) for i in range(len(M))], R[r][c], P))
                    for r in range(len(R)) for c in range(len(R[0]))]
        elif f is stages._d_of_input:           # d·Wᵀ
            d, W = ins
            out += [(s.id, L.products_line(E(s.id, i + 1, j + 1), list(zip(d[i], W[j])), R[i][j], P))
                    for i in range(len(R)) for j in range(len(R[0]))]
        elif f is stages._d_bias:
            out += [(s.id, L.colsum_line(eq.Item(eq.matrix_sym(s.id), str(c + 1)), [row[c] for row in ins[0]], R[0][c], P))
                    for c in range(len(R[0]))]
        elif f is stages._d_relu:
            dG, U = ins
            out += [(s.id, L.relu_back_line(p.tokens[i], j, U[i][j], dG[i][j], R[i][j], P))
                    for i in range(len(R)) for j in range(len(R[0]))]
        elif f in (stages._d_norm, stages._d_gamma):
            dY, M, g = ins
            backs = [stages.norm_back_parts(hb, dY[i], M[i], g, p.block.eps) for i in range(len(M))]
            if f is stages._d_norm:
                for i, back in enumerate(backs):
                    assert back.dx == R[i]
                    out += [(s.id, x) for x in L.norm_back_lines(p.tokens[i], dY[i], g, back, P)]
            else:
                out += [(s.id, L.products_line(eq.Item(eq.matrix_sym(s.id), str(c + 1)),
                                               [(dY[i][c], backs[i].norm.normed[c]) for i in range(len(M))], R[0][c], P))
                        for c in range(len(R[0]))]
        elif f is stages._d_residual_ffn:       # dR2 + dU·W_1ᵀ
            d_res, dU, W = ins
            out += [(s.id, L.products_line(E(s.id, i + 1, j + 1), list(zip(dU[i], W[j])), R[i][j], P, plus=d_res[i][j]))
                    for i in range(len(R)) for j in range(len(R[0]))]
        elif f is stages._block_update:
            W = ins[0] if isinstance(ins[0][0], list) else [ins[0]]
            out += [(s.id, L.update_line(s.inputs[0], str(r + 1), str(c + 1), W[r][c], p.train.lr, ins[1][r][c], R[r][c], P))
                    for r in range(len(R)) for c in range(len(R[0]))]
    return out, run


@pytest.mark.parametrize("k", range(len(CASES) + 8))
def test_every_training_line_of_a_block_holds_by_hand(k):
    p = problems()[k]
    lines, run = lines_of(p)
    kinds = {sid for sid, _ in lines}
    assert {"dlogits", "dW_out", "dW_1", "db_1", "dU", "dW_2", "db_2", "dW_O", "dgamma_2", "dbeta_2", "W_1_new",
            "b_2_new", "gamma_1_new", "W_out_new"} <= kinds
    bad = [(sid, printers.text(x), audit_lines([x])) for sid, x in lines if audit_lines([x])]
    assert not bad, bad[:5]


def test_a_training_line_reads_as_a_student_writes_it():
    p = read(CASES["post-ln-causal"])
    lines, _ = lines_of(p)
    text = {sid: printers.text(x) for sid, x in reversed(lines)}      # the first line of each stage
    assert text["dlogits"].startswith("dlogits[the, the] = probs[the, the]/3 = ")
    assert text["dW_out"].startswith("dW_out[1, 1] = ") and "≈" in text["dW_out"]
    assert text["W_1_new"] == "W_1′[1, 1] = W_1[1, 1] − lr·dW_1[1, 1] = 1 − 0.1·0.0577 ≈ 0.9942"


def test_the_relu_backward_line_writes_its_value_once():
    """Where U > 0 the gradient passes: dU[the, 1] = dG[the, 1] = v, the value once (not = v = v); else dU = 0."""
    passed = printers.text(L.relu_back_line("the", 0, Fraction(1, 2), Fraction(-1, 8), Fraction(-1, 8), 4))
    assert passed == "dU[the, 1] = dG[the, 1] = −0.125"
    cut = printers.text(L.relu_back_line("cat", 1, Fraction(-1), Fraction(3, 10), Fraction(0), 4))
    assert cut.startswith("dU[cat, 2] = 0") and cut.count("=") == 1, cut
    for k in range(len(CASES)):
        for sid, x in lines_of(problems()[k])[0]:
            if sid == "dU":
                shown = printers.text(x).split(" = ")
                assert len(shown) == len(set(shown)), printers.text(x)


def test_the_central_difference_check_lines_hold_and_agree():
    """L(w ± h) from the certified pass, carried to the solution's places, their quotient, beside dW: the lines
    hold, and with one of h = 1/10, 1/20, 1/40 the quotient matches the backward pass to the answer's places."""
    p = read(CASES["pre-ln-causal"])
    P, dec = p.precision.carried, p.decimals
    run = block_forward(p, Hand(p, "decimal", P))
    iv = Interval(p, widen=False)
    for name, (r, c) in (("W_1", (0, 0)), ("W_out", (2, 1)), ("gamma_1", (0, 2)), ("head1.W_V", (1, 1))):
        g = run.shown[name.replace("W_", "dW_").replace("gamma", "dgamma")][r][c]
        ok = False
        for h in (Fraction(1, 10), Fraction(1, 20), Fraction(1, 40)):
            losses = []
            for sign in (1, -1):
                key, value, where = block_weight(p, iv, name)
                m = value[where[0]][where[1]] if where else value
                if isinstance(m[0], list):
                    m[r][c] = iv.add(m[r][c], iv.entry(sign * h))
                else:
                    m[c] = iv.add(m[c], iv.entry(sign * h))
                losses.append(Fraction(block_loss(p, iv, {key: value})[0]))
            lines = L.gradcheck_lines(name.split(".")[-1], str(r + 1), str(c + 1), h, *losses, g, P)
            assert not audit_lines(lines), [printers.text(x) for x in lines]
            q = eq.rational_value(lines[2].items[1])
            ok = ok or round(float(q), dec) == round(float(g), dec)
        assert ok, name
