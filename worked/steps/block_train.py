"""The worked lines of a Transformer block's training step (issue 27, ``[train] loss = "cross-entropy"``), as trees:
one entry of each kind of gradient (the logits' (p − y)/n, a sum of products for Mᵀ·d, d·Wᵀ and dγ, a column sum
for a bias or β, ReLU's gate, a residual's two branches), one row's layer-norm backward, one entry of the update
W − lr·dW and the central-difference check. Each line shows the values a hand writes down (the
:class:`worked.attention.Hand` pass of :func:`worked.attention.block_forward`, through
:func:`norm_back_parts` for a layer norm) and holds by the hand rule (:mod:`worked.audit`). At the
end, each block train stage's step (:class:`worked.lines.Shown`, declared with the stage in :mod:`worked.stages`):
``DLOGITS``, ``WEIGHT_GRAD`` (Mᵀ·d), ``INPUT_GRAD`` (d·Wᵀ), ``BIAS_GRAD``, ``RELU_BACK``, ``NORM_BACK``,
``GAMMA_GRAD``, ``RESIDUAL_FFN``, ``RESIDUAL_NORM``, ``PASSED_ON``, ``HEADS_INPUT``, ``UPDATE`` and ``LOSS_AFTER``."""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from .. import eq
from ..lines import APPROX, EQ, Body, Shown, entries, line, p, pick, rel
from ..i18n import N_, translate
from ..i18n import tr as _
from .attention import once
from .block import NormParts, carried_grid, given_input, show_code, step_title, loss_lines, norm_parts, residual_line, shown


class NormBack:
    """One row's layer-norm backward as a hand works it: the forward's parts (*norm*: μ, …, the root, x̂),
    dx̂ = γ ⊙ dY, its mean *m1*, the mean *m2* of dx̂ ⊙ x̂, and dx = (dx̂ − m1 − x̂·m2)/root. A plain class (a
    NamedTuple's class is built at import)."""

    __slots__ = ("norm", "dh", "m1", "m2", "dx")

    def __init__(self, norm: Any, dh: list, m1: Any, m2: Any, dx: list):
        self.norm, self.dh, self.m1, self.m2, self.dx = norm, dh, m1, m2, dx


def norm_back_parts(b, dy, row, gamma, eps) -> NormBack:
    """The layer-norm backward of one *row* (its output's gradient *dy*) in backend *b*, each value as a hand
    writes it (a :class:`~worked.attention.Hand` rounds dx̂, the two means and each dx)."""
    parts = norm_parts(b, row, gamma, [b.entry(Fraction(0))] * len(gamma), eps)
    size = b.entry(Fraction(len(row)))
    dh = [b.carry(b.mul(g, x)) for g, x in zip(gamma, dy)]
    if parts.normed is None:    # a carried row this layer norm cannot normalise (variance 0, ε = 0): no values
        none = [getattr(b, "UNDEFINED", None)] * len(row)
        parts = NormParts(parts.mu, parts.devs, parts.var, parts.root, none, none)
        return NormBack(parts, dh, None, None, none)
    m1 = b.div(b.total(dh), size)
    m2 = b.div(b.total([b.mul(x, h) for x, h in zip(dh, parts.normed)]), size)
    return NormBack(parts, dh, m1, m2, [b.div(b.sub(b.sub(x, m1), b.mul(h, m2)), parts.root)
                                        for x, h in zip(dh, parts.normed)])


def _op(node, value) -> str:
    """= when the arithmetic *node* on the shown numbers is exactly *value* as shown, else ≈."""
    return rel(eq.rational_value(node) == Fraction(value))


def _entry(name: str, row: str, col: str):
    return eq.Entry(eq.matrix_sym(name), row, col)


def _close(items: list, node, value, places: int) -> eq.Rel:
    """``items … = node ≈ value``: the arithmetic *node* on the shown numbers, then the value as carried."""
    return eq.Rel(tuple(items) + (node, shown(value, places)), (EQ,) * (len(items)) + (_op(node, value),))


def dlogits_line(label: str, word: str, prob, target: bool, n: int, value, places: int) -> eq.Rel:
    """``dlogits[the, cat] = (probs[the, cat] − 1)/3 = (0.2312 − 1)/3 ≈ −0.2563``: the cross-entropy's gradient at
    one logit, (p − y)/n with y = 1 at the position's target, else 0."""
    p = shown(prob, places)
    name = eq.Entry(eq.Sym("probs", upright=True), label, word)
    top, num = (eq.Add((name, eq.Neg(eq.num(1)))), eq.Add((p, eq.Neg(eq.num(1))))) if target else (name, p)
    return _close([_entry("dlogits", label, word), eq.Frac(top, eq.num(n))], eq.Frac(num, eq.num(n)), value, places)


def products_line(lhs, pairs: list, value, places: int, plus=None) -> eq.Rel:
    """``dW_1[2, 3] = a₁·b₁ + a₂·b₂ + … ≈ v``: one entry of Mᵀ·d, d·Wᵀ or dγ (Σ dY ⊙ x̂), *pairs* the shown
    factors (a value as carried, or a weight as given); *plus*: a term before them (post-LN's dH1 = dR2 + dU·W_1ᵀ:
    the residual's branch and the feed-forward's)."""
    terms = tuple(eq.Mul((shown(a, places), shown(b, places))) for a, b in pairs)
    if plus is not None:
        terms = (shown(plus, places),) + terms
    return _close([lhs], eq.Add(terms) if len(terms) > 1 else terms[0], value, places)


def colsum_line(lhs, xs: list, value, places: int) -> eq.Rel:
    """``db_1[2] = d₁ + d₂ + d₃ = v``: a bias's (or β's) gradient, the column of d summed over the positions."""
    terms = tuple(shown(x, places) for x in xs)
    return _close([lhs], eq.Add(terms) if len(terms) > 1 else terms[0], value, places)


def relu_back_line(label: str, col: int, u, g, value, places: int) -> eq.Rel:
    """``dU[cat, 2] = dG[cat, 2] = −0.1234`` where U[cat, 2] > 0 (ReLU passed it), else ``dU[cat, 2] = 0``."""
    c = str(col + 1)
    items = [_entry("dU", label, c)] + ([_entry("dG", label, c), shown(g, places)] if u > 0 else [])
    if u <= 0 or shown(value, places) != items[-1]:     # the value once: dU[cat, 2] = dG[cat, 2] = v
        items.append(shown(value, places))
    return eq.Rel(tuple(items), (EQ,) * (len(items) - 1))


def norm_back_lines(label: str, dy, gamma, back, places: int) -> list:
    """One row's layer-norm backward (*back*: its :class:`NormBack` from the hand pass): dx̂ = γ ⊙ dY,
    mean(dx̂), mean(dx̂ ⊙ x̂), then each entry dx[j] = (dx̂[j] − mean(dx̂) − x̂[j]·mean(dx̂ ⊙ x̂))/√(σ² + ε), a line each."""
    d = len(dy)
    dh = [shown(v, places) for v in back.dh]
    hats = [shown(v, places) for v in back.norm.normed]
    m1, m2, root = (shown(v, places) for v in (back.m1, back.m2, back.norm.root))
    dxh = eq.Sym("dx̂", sub=label)
    lines = []
    prods = eq.Vec(tuple(eq.Mul((eq.num(Fraction(g)), shown(y, places))) for g, y in zip(gamma, dy)))
    ok = all(eq.rational_value(a) == Fraction(b) for a, b in zip(prods.items, back.dh))
    lines.append(eq.Rel((dxh, eq.Mul((eq.Sym("γ"), eq.Sym("dY", sub=label))), prods, eq.Vec(tuple(dh))),
                        (EQ, EQ, EQ if ok else APPROX)))
    mean1 = eq.Frac(eq.Add(tuple(dh)), eq.num(d))
    lines.append(_close([eq.Call("mean", (dxh,))], mean1, back.m1, places))
    mean2 = eq.Frac(eq.Add(tuple(eq.Mul((a, h)) for a, h in zip(dh, hats))), eq.num(d))
    lines.append(_close([eq.Call("mean", (eq.Mul((dxh, eq.Sym("x̂", sub=label))),))], mean2, back.m2, places))
    for j, (a, h, v) in enumerate(zip(dh, hats, back.dx)):      # one line per entry (a row of them is too wide)
        quot = eq.Frac(eq.Add((a, eq.Neg(m1), eq.Neg(eq.Mul((h, m2))))), root)
        lines.append(_close([eq.Item(eq.Sym("dx", sub=label), str(j + 1))], quot, v, places))
    return lines


def update_line(name: str, row: str, col: str, w, lr, g, value, places: int) -> eq.Rel:
    """``W_1′[2, 3] = W_1[2, 3] − lr·dW_1[2, 3] = 1 − 0.1·0.2345 ≈ 0.9766``: one entry of the update."""
    named = eq.Add((eq.Entry(eq.matrix_sym(name), row, col), eq.Neg(eq.Mul((eq.Sym("lr", upright=True), _entry("d" + name, row, col))))))
    node = eq.Add((eq.num(Fraction(w)) if type(w) is Fraction else shown(w, places),
                   eq.Neg(eq.Mul((eq.num(Fraction(lr)), shown(g, places))))))
    return _close([eq.Entry(eq.matrix_sym(name, prime=True), row, col), named], node, value, places)


def gradcheck_lines(name: str, row: str, col: str, h, loss_up, loss_down, grad, places: int) -> list:
    """The numerical check of dW[row, col]: L(w + h) and L(w − h), each the loss of a fresh pass carried to
    *places* places, their central difference (a − b)/2h, and the backward pass's entry beside it."""
    w = eq.Entry(eq.matrix_sym(name), row, col)
    hs = eq.Sym("h")
    a, b = shown(loss_up, places), shown(loss_down, places)
    up, down = eq.Call("L", (eq.Add((w, hs)),)), eq.Call("L", (eq.Add((w, eq.Neg(hs))),))
    q = (eq.rational_value(a) - eq.rational_value(b)) / (2 * Fraction(h))
    quot = eq.Frac(eq.Add((a, eq.Neg(b))), eq.Mul((eq.num(2), eq.num(Fraction(h)))))
    return [eq.Rel((up, a), (APPROX,)), eq.Rel((down, b), (APPROX,)),
            eq.Rel((eq.Frac(eq.Add((up, eq.Neg(down))), eq.Mul((eq.num(2), hs))), quot, shown(q, places)),
                   (APPROX, _op(quot, q))),
            eq.Rel((_entry("d" + name, row, col), shown(grad, places)), (APPROX,))]


# ---------------------------------------------------------------- the stages' steps (read through the solver's view)
# A step reads its stage's inputs as the hand pass carried them (a stage's matrix) or as given (an input), and shows
# one entry of its kind with checks "one" (the largest), a row with "row", every entry with "all".

def _rows(ctx, R) -> list:
    """The rows a step works out: every row with checks "all", else the row of R's largest entry (a gradient's last
    row may be all 0 under a causal mask)."""
    return list(range(R.shape[0])) if ctx.checks == "all" else [pick(R)[0]]


def _sym(v, sid: str):
    return v.mat(sid).sym


def _cells(ctx, R, first=None) -> list:
    return entries(ctx.checks, R.shape[0], R.shape[1], first or pick(R))


def _labels(ctx, R) -> tuple:
    return ctx.labels(R.rows), R.cols


def _dlogits_body(ctx, stage, v) -> Body:
    probs, R = v.mat(stage.inputs[0]), v.mat(stage.id)
    targets = v.input(stage.inputs[1])
    n = R.shape[0]
    lines = [line(dlogits_line(ctx.lab[i], R.cols[j], probs.hand[i][j], j == targets[i], n, R.hand[i][j], ctx.P))
             for i, j in _cells(ctx, R, (n - 1, targets[n - 1]))]
    why = eq.say("The gradient of the mean cross-entropy at the logits: each probability minus 1 at the position's "
                 "target (minus 0 elsewhere), over the {n} = {count} positions (the loss is their mean).", n=eq.Sym("n"),
                 count=str(n))
    return Body(why, lines, precision=ctx.P)


def _weight_grad_body(ctx, stage, v) -> Body:
    M, d, R = carried_grid(v, stage.inputs[0]), carried_grid(v, stage.inputs[1]), v.mat(stage.id)
    rows, cols = _labels(ctx, R)
    lines = [line(products_line(eq.Entry(R.sym, rows[r], cols[c]), [(M[i][r], d[i][c]) for i in range(len(M))],
                                R.hand[r][c], ctx.P)) for r, c in _cells(ctx, R)]
    m, g = eq.Sym(v.mat(stage.inputs[0]).sym.name), eq.matrix_sym(stage.inputs[1])
    why = eq.say("The weight multiplies {m}, so its gradient is {mT} times {g}: entry [r, c] is column r of {m} (every "
                 "position's r-th entry) times column c of {g}, summed over the positions.", m=m, mT=eq.Pow(m, eq.Sym("T")),
                 g=g)
    return Body(why, lines, precision=ctx.P)


def _input_grad_body(ctx, stage, v) -> Body:
    d_name, w_name = stage.inputs
    d, W, R = carried_grid(v, d_name), given_input(v, w_name), v.mat(stage.id)
    rows, cols = _labels(ctx, R)
    lines = [line(products_line(eq.Entry(R.sym, rows[i], cols[j]), list(zip(d[i], W[j])), R.hand[i][j], ctx.P))
             for i, j in _cells(ctx, R)]
    w, g = eq.Sym(w_name), eq.matrix_sym(d_name)
    why = eq.say("Back through the weight {w}: the gradient of what it multiplies is {g} times {wT}: entry [i, j] is row i "
                 "of {g} times row j of {w}.", w=w, g=g, wT=eq.Pow(w, eq.Sym("T")))
    return Body(why, lines, precision=ctx.P)


def _bias_grad_body(ctx, stage, v) -> Body:
    d, R = carried_grid(v, stage.inputs[0]), v.mat(stage.id)
    lines = [line(colsum_line(eq.Item(R.sym, R.cols[c]), [row[c] for row in d], R.hand[0][c], ctx.P))
             for _, c in _cells(ctx, R)]
    why = eq.say("A bias (or β) is added to every row, so its gradient is each column of {d} summed over the positions.",
                 d=eq.matrix_sym(stage.inputs[0]))
    return Body(why, lines, precision=ctx.P)


def _relu_back_body(ctx, stage, v) -> Body:
    dG, U, R = carried_grid(v, stage.inputs[0]), carried_grid(v, stage.inputs[1]), v.mat(stage.id)
    lines = [line(relu_back_line(ctx.lab[i], j, U[i][j], dG[i][j], R.hand[i][j], ctx.P), f"row {ctx.p.tokens[i]}")
             for i in _rows(ctx, R) for j in range(R.shape[1])]
    why = eq.say("Back through ReLU: where {U} was positive ReLU passed it on, so the gradient passes too; where {U} was 0 "
                 "or below ReLU gave 0 whatever its input, so the gradient is 0.", U=eq.Sym("U"))
    return Body(why, lines, precision=ctx.P)


def _backs(ctx, v, stage, rows):
    """Each of *rows*' layer-norm backward (:func:`norm_back_parts`) as the hand pass worked it."""
    d_name, m_name, g_name = stage.inputs[-3:]
    dY, M, gamma = carried_grid(v, d_name), carried_grid(v, m_name), given_input(v, g_name)
    return dY, gamma, {i: norm_back_parts(v.by_hand, dY[i], M[i], gamma, ctx.p.block.eps) for i in rows}


def _norm_why():
    """How a layer norm's backward goes, one row at a time."""
    return eq.say("Back through a layer norm, one row at a time: first {dxh} = γ·dY, entry by entry (the gradient of the "
                  "normalised row), then its mean and the mean of {dxh}·{xh} (x̂ the row normalised as in the forward pass, "
                  "entry by entry), then each entry (dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)) over the forward pass's √(σ² + ε).",
                  dxh=eq.Sym("dx̂"), xh=eq.Sym("x̂"))


def _norm_back_body(ctx, stage, v) -> Body:
    R = v.mat(stage.id)
    rows = _rows(ctx, R)
    dY, gamma, backs = _backs(ctx, v, stage, rows)
    lines = [line(x, f"row {ctx.p.tokens[i]}") for i in rows
             for x in norm_back_lines(ctx.lab[i], dY[i], gamma, backs[i], ctx.P)]
    return Body(_norm_why(), lines, precision=ctx.P)


def _gamma_grad_body(ctx, stage, v) -> Body:
    R = v.mat(stage.id)
    dY, _, backs = _backs(ctx, v, stage, range(len(carried_grid(v, stage.inputs[0]))))
    lines = [line(products_line(eq.Item(R.sym, R.cols[c]), [(dY[i][c], backs[i].norm.normed[c]) for i in backs],
                                R.hand[0][c], ctx.P)) for _, c in _cells(ctx, R)]
    why = eq.say("γ multiplies the normalised rows x̂, so its gradient is each column of {d}·x̂ (entry by entry) summed over "
                 "the positions (x̂ as the forward pass carried it).", d=eq.matrix_sym(stage.inputs[0]))
    return Body(why, lines, precision=ctx.P)


def _residual_ffn_body(ctx, stage, v) -> Body:
    d_res, dU, W = carried_grid(v, stage.inputs[0]), carried_grid(v, stage.inputs[1]), given_input(v, stage.inputs[2])
    R = v.mat(stage.id)
    rows, cols = _labels(ctx, R)
    lines = [line(products_line(eq.Entry(R.sym, rows[i], cols[j]), list(zip(dU[i], W[j])), R.hand[i][j], ctx.P,
                                plus=d_res[i][j])) for i, j in _cells(ctx, R)]
    why = eq.say("{H1} feeds two branches, the residual add and the feed-forward, so its gradient is the sum of both: {d} "
                 "plus {dU} times {W1T}.", H1=eq.Sym("H_1"), d=eq.matrix_sym(stage.inputs[0]), dU=eq.matrix_sym("dU"),
                 W1T=eq.Pow(eq.Sym("W_1"), eq.Sym("T")))
    return Body(why, lines, precision=ctx.P)


def _residual_norm_body(ctx, stage, v) -> Body:
    R = v.mat(stage.id)
    rows = _rows(ctx, R)
    d_res = carried_grid(v, stage.inputs[0])
    dY, gamma, backs = _backs(ctx, v, stage, rows)
    lines = []
    for i in rows:
        lines += [line(x, f"row {ctx.p.tokens[i]}") for x in norm_back_lines(ctx.lab[i], dY[i], gamma, backs[i], ctx.P)]
        lines.append(line(residual_line(R.sym.name, ctx.lab[i], _sym(v, stage.inputs[0]).name, d_res[i], "dx",
                                        backs[i].dx, R.hand[i], ctx.P), f"row {ctx.p.tokens[i]}"))
    why = eq.prose(eq.say("{H1} feeds the residual add and LN_2, so its gradient is {d} plus LN_2's backward of {dN}.",
                          H1=eq.Sym("H_1"), d=eq.matrix_sym(stage.inputs[0]), dN=eq.matrix_sym(stage.inputs[1])),
                   " ", _norm_why())
    return Body(why, lines, precision=ctx.P)


def _passed_on_body(ctx, stage, v) -> Body:
    R, src = v.mat(stage.id), v.mat(stage.inputs[0])
    lines = [line(eq.Rel((eq.Entry(R.sym, ctx.lab[i], eq.ALL), eq.Entry(src.sym, ctx.lab[i], eq.ALL),
                          eq.Vec(tuple(shown(x, ctx.P) for x in R.hand[i]))), (EQ, EQ)))
             for i in _rows(ctx, R)]
    why = eq.say("The attention's output was added on its own (the residual add), so its gradient is the sum's, "
                 "unchanged: {rule}.", rule=eq.Rel((R.sym, src.sym), (EQ,)))
    return Body(why, lines, precision=ctx.P)


def _heads_input_body(ctx, stage, v) -> Body:
    R = v.mat(stage.id)
    hand = ctx.carry.run
    grads = [{k: hand.shown[f"head{h}.d{k}"] for k in "QKV"} for h in range(1, len(ctx.p.heads) + 1)]
    hb = v.by_hand
    ws = [{k: [[hb.entry(Fraction(x)) for x in r] for r in getattr(hd, "W_" + k)] for k in "QKV"} for hd in ctx.p.heads]
    rows, cols = _labels(ctx, R)
    lines = [line(products_line(eq.Entry(R.sym, rows[i], cols[j]),
                                [pr for g, w in zip(grads, ws) for k in "QKV" for pr in zip(g[k][i], w[k][j])],
                                R.hand[i][j], ctx.P)) for i, j in _cells(ctx, R)]
    why = eq.say("{N1} is the input of every head's queries, keys and values, so its gradient is the sum over the heads of "
                 "{sum}: entry [i, j] is row i of each gradient times row j of its weight, all added.", N1=eq.Sym("N_1"),
                 sum=eq.prose(eq.matrix_sym("dQ"), "·", eq.Pow(eq.Sym("W_Q"), eq.Sym("T")), " + ", eq.matrix_sym("dK"), "·",
                              eq.Pow(eq.Sym("W_K"), eq.Sym("T")), " + ", eq.matrix_sym("dV"), "·",
                              eq.Pow(eq.Sym("W_V"), eq.Sym("T"))))
    return Body(why, lines, precision=ctx.P)


def _update_body(ctx, stage, v) -> Body:
    w_name, g_name = stage.inputs
    W, g, R = given_input(v, w_name), carried_grid(v, g_name), v.mat(stage.id)
    W = W if W and isinstance(W[0], list) else [W]
    lr = ctx.p.train.lr
    lines = [line(update_line(w_name, R.rows[r] if R.shape[0] > 1 else "1", R.cols[c], W[r][c], lr, g[r][c],
                              R.hand[r][c], ctx.P)) for r, c in _cells(ctx, v.mat(g_name))]
    lrs = eq.Sym("lr", upright=True)
    why = eq.say("One step of gradient descent with {rule}: every entry moves against its gradient, by {lr} times it. The "
                 "new weights are carried to {places} places.", rule=eq.Rel((lrs, eq.num(lr)), (EQ,)),
                 lr=str(lr), places=str(ctx.P))
    return Body(why, lines, precision=ctx.P)


def _loss_after_body(ctx, stage, v) -> Body:
    """L′: the loss of a fresh forward pass with the updated weights (the hand pass's, from the new weights as
    carried): −ln of each target's new probability, then the mean."""
    after, R, hb = ctx.carry.run.after, v.mat(stage.id), v.by_hand
    probs = after.shown["probs"]
    vocab = list(ctx.p.block.vocab)
    cells = [(ctx.lab[i], vocab[t], probs[i][t]) for i, t in enumerate(v.input("targets"))]
    lines = [line(x) for x in loss_lines(cells, [hb.ln(c[2]) for c in cells], R.hand[0][0], ctx.P, prime=True)]
    loss = v.mat("loss")
    down = R.num[0][0] < loss.num[0][0]
    why = eq.say("Run the whole block again (positions, attention, the residual adds and layer norms, the feed-forward, the "
                 "output layer) with every updated weight, then the loss: −ln of each target's new probability, and the "
                 "mean.")
    before, after = eq.Rel((loss.sym, loss.carried(0, 0)), (APPROX,)), eq.Rel((R.sym, R.carried(0, 0)), (APPROX,))
    note = eq.say("The loss went down: {before} before, {after} after.", before=before, after=after) if down else \
        eq.say("The loss did not go down (the learning rate is too large here): {before} before, {after} after.",
               before=before, after=after)
    return Body(why, lines, [note], precision=ctx.P, audit_name="new loss")


# ---- the notebook's NumPy code of each training step (the variables are the stage ids; a head's take its number)
def _lr_code(nb) -> str:
    return f"lr = {_lit(nb.p.train.lr)}   # " + _("the learning rate") + "\n"


def _norm_back_code() -> str:
    return ("def normalised(x):                           # " + _("a layer norm's x̂, each row over its d_model entries")
            + "\n"
            "    mu = x.mean(axis=1, keepdims=True)\n"
            "    root = np.sqrt(((x - mu) ** 2).mean(axis=1, keepdims=True) + eps)\n"
            "    return (x - mu) / root, root\n\n"
            "def layer_norm_back(dy, x, gamma):            # " + _("the gradient of a layer norm's input x") + "\n"
            "    xhat, root = normalised(x)\n"
            "    dxhat = gamma * dy\n"
            "    return (dxhat - dxhat.mean(axis=1, keepdims=True)\n"
            "            - xhat * (dxhat * xhat).mean(axis=1, keepdims=True)) / root\n\n")


def _code(v: str, expr: str, comment: str = "") -> tuple:
    """*v* = *expr*, with *comment* (English, marked with ``N_`` where it is written: translated here), then its
    printing."""
    return v, f"{v} = {expr}" + (f"   # {translate(comment)}" if comment else "") + "\n" + show_code(v)


def _dlogits_numpy(nb, stage, h):
    probs, targets = stage.inputs
    return stage.id, (f"Y = np.eye(len(vocab))[{targets}]          # " + _("1 at each position's target") + "\n"
                      f"{stage.id} = ({probs} - Y) / n\n" + show_code(stage.id))


def _weight_grad_numpy(nb, stage, h):
    m, d = stage.inputs
    return _code(stage.id, f"{m}.T @ {d}")


def _input_grad_numpy(nb, stage, h):
    d, w = stage.inputs
    v, src = _code(stage.id, f"{d} @ {w}.T")
    if stage.by_head:       # each head's block of its columns: that head's gradient (dconcat's: each head's dZ)
        dv = nb.p.d_v
        src += "".join(f"\n{stage.by_head}{k} = {v}[:, {(k - 1) * dv}:{k * dv}]   # " + _("head {k}'s columns", k=k)
                       for k in range(1, len(nb.p.heads) + 1))
    return v, src


def _bias_grad_numpy(nb, stage, h):
    return _code(stage.id, f"{stage.inputs[0]}.sum(axis=0, keepdims=True)", N_("each column summed over the positions"))


def _relu_back_numpy(nb, stage, h):
    dg, u = stage.inputs
    return _code(stage.id, f"{dg} * ({u} > 0)", N_("ReLU passed the gradient where U > 0"))


def _norm_back_numpy(nb, stage, h):
    dy, x, g = stage.inputs[-3:]
    v, src = _code(stage.id, f"layer_norm_back({dy}, {x}, {g})")
    return v, once(nb, "layer_norm_back", _norm_back_code()) + src


def _gamma_grad_numpy(nb, stage, h):
    dy, x = stage.inputs[:2]
    v, src = _code(stage.id, f"({dy} * normalised({x})[0]).sum(axis=0, keepdims=True)")
    return v, once(nb, "layer_norm_back", _norm_back_code()) + src


def _residual_ffn_numpy(nb, stage, h):
    d_res, du, w = stage.inputs
    return _code(stage.id, f"{d_res} + {du} @ {w}.T", N_("both branches"))


def _residual_norm_numpy(nb, stage, h):
    d_res, dn, x, g = stage.inputs
    v, src = _code(stage.id, f"{d_res} + layer_norm_back({dn}, {x}, {g})", N_("both branches"))
    return v, once(nb, "layer_norm_back", _norm_back_code()) + src


def _passed_on_numpy(nb, stage, h):
    return _code(stage.id, f"{stage.inputs[0]}.copy()", N_("the residual add passes it on"))


def _heads_input_numpy(nb, stage, h):
    terms = " + ".join(f"d{x}{k} @ W_{x}{k}.T" for k in range(1, len(nb.p.heads) + 1) for x in "QKV")
    return _code(stage.id, terms, N_("every head's projections"))


def _update_numpy(nb, stage, h):
    w, g = stage.inputs
    v, src = _code(stage.id, f"{w} - lr * {g}")
    return v, once(nb, "lr", _lr_code(nb)) + src


def _lit(x) -> str:
    x = Fraction(x)
    return str(x.numerator) if x.denominator == 1 else f"{x.numerator} / {x.denominator}"


def _loss_after_numpy(nb, stage, h):
    """The block's forward pass again, as a function of every trained weight (its body the forward steps' own
    code), run with the updated weights."""
    sol = nb.sol
    names = [f"W_{x}{k}" for k in range(1, len(sol.problem.heads) + 1) for x in "QKV"]
    names += [s.inputs[0] for s in nb.stages.values() if s.id.endswith("_new") and s.scope == "layer"]
    body = []
    for st in sol.steps:
        sg = nb.stages.get(st.id)
        if sg is None:
            continue
        code = nb.numpy(st, str(st.head) if st.head is not None else "")[1]
        body += ["    " + ln for ln in code.splitlines() if ln and not ln.startswith(("print(", "show("))]
        if (sg.rows, sg.cols) == ("1", "1"):    # the forward pass ends with the loss (its one 1 × 1 stage)
            break
    vec = lambda w: f"{w}_new" if w in ("W_O", "W_1", "W_2", "W_out") else f"{w}_new.ravel()"  # noqa: E731
    args = ", ".join(f"{w}={w.rstrip('0123456789')}_new{w[len(w.rstrip('0123456789')):]}" if w.startswith(("W_Q", "W_K", "W_V"))
                     else f"{w}={vec(w)}" for w in names)
    src = ("def loss_of(" + ", ".join(names) + "):   # " + _("the block's forward pass, as above, with these weights") + "\n"
           + "\n".join(body) + "\n    return loss\n\n"
           + f"{stage.id} = loss_of({args})\n" + f"show({stage.id})")
    return stage.id, src


def head_numpy(sid: str):
    """The NumPy code of a block's head stage of the training step (the attention's own stage *sid*: dV … dW_V, its
    update), on the heads' input the stage takes (X0 or N1); the variables take the head's number (dQ1)."""
    def numpy(nb, stage, h):
        v = stage.id + h
        if sid == "dscores":
            div = nb.scale_code()
            return _code(v, f"dS{h} / {div}" if div else f"dS{h}.copy()", N_("the forward pass's divisor again"))
        if sid.endswith("_new"):
            w = sid[:-4]
            return v, once(nb, "lr", _lr_code(nb)) + _code(v, f"{w}{h} - lr * d{w}{h}")[1]
        if sid.startswith("dW_"):
            return _code(v, f"{stage.inputs[0]}.T @ d{sid[3:]}{h}")
        return _code(v, {"dV": f"A{h}.T @ dZ{h}", "dA": f"dZ{h} @ V{h}.T",
                         "dS": f"A{h} * (dA{h} - (A{h} * dA{h}).sum(axis=1, keepdims=True))",
                         "dQ": f"dscores{h} @ K{h}", "dK": f"dscores{h}.T @ Q{h}"}[sid])
    return numpy


DLOGITS = Shown(step_title, _dlogits_body, _dlogits_numpy)
WEIGHT_GRAD = Shown(step_title, _weight_grad_body, _weight_grad_numpy)
INPUT_GRAD = Shown(step_title, _input_grad_body, _input_grad_numpy)
BIAS_GRAD = Shown(step_title, _bias_grad_body, _bias_grad_numpy)
RELU_BACK = Shown(step_title, _relu_back_body, _relu_back_numpy)
NORM_BACK = Shown(step_title, _norm_back_body, _norm_back_numpy)
GAMMA_GRAD = Shown(step_title, _gamma_grad_body, _gamma_grad_numpy)
RESIDUAL_FFN = Shown(step_title, _residual_ffn_body, _residual_ffn_numpy)
RESIDUAL_NORM = Shown(step_title, _residual_norm_body, _residual_norm_numpy)
PASSED_ON = Shown(step_title, _passed_on_body, _passed_on_numpy)
HEADS_INPUT = Shown(step_title, _heads_input_body, _heads_input_numpy)
UPDATE = Shown(step_title, _update_body, _update_numpy)
LOSS_AFTER = Shown(lambda ctx, stage, head: eq.say("New loss: a fresh pass of the block with the updated weights"), _loss_after_body,
                   _loss_after_numpy)
