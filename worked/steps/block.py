"""The worked lines of a Transformer block's stages (issue 27), as trees: so far one row's layer norm
(μ → σ² → √(σ² + ε) → the normalised row → γ and β), the residual add of one row, one entry of a product
with a bias (the feed-forward's x·W_1 + b_1, W_2's, the logits), ReLU, one row's positions (sin and cos with
their arguments) and the loss (−ln p of each target, then the mean). Each line shows the
values a hand writes down (:class:`worked.attention.Hand`, through :func:`norm_parts`) and holds by the hand
rule (:mod:`worked.audit`). At the end, each block stage's step (:class:`worked.lines.Shown`: its title from its
answer grid, its body from the lines above, read through the solver's view), which :mod:`worked.stages` declares
with the stage: ``POSITIONS``, ``PLUS`` (X0 = X + P and each residual add), ``NORM``, ``AFFINE`` (x·W + b, and
the logits x·W), ``RELU``, ``SOFTMAX`` (the next-token probabilities) and ``LOSS``."""
from __future__ import annotations

from fractions import Fraction
from typing import Any

from .. import eq
from .. import numfmt as F
from ..lines import APPROX, EQ, Body, Shown, entries, is_, line
from ..i18n import N_
from ..i18n import tr as _
from .attention import once
from .code import row_sums, softmax_code
from .code import show as _show


class NormParts:
    """One row's layer norm, as the step writes it: the mean μ, the deviations x − μ, the variance σ², the root
    √(σ² + ε), the normalised entries (x − μ)/root, and the output γ ⊙ normalised + β. A plain class (a
    NamedTuple's class is built at import)."""

    __slots__ = ("mu", "devs", "var", "root", "normed", "out")

    def __init__(self, mu: Any, devs: list, var: Any, root: Any, normed: list, out: list):
        self.mu, self.devs, self.var, self.root, self.normed, self.out = mu, devs, var, root, normed, out


def norm_parts(b, row, gamma, beta, eps) -> NormParts:
    """The layer norm of *row* in backend *b*, each value as the step will write it down (a :class:`Hand` rounds
    it there): μ, each x − μ (exact from the shown x and μ), σ² from those (the squares not rounded on their own:
    σ² = (d₁² + … + d_n²)/d_model ≈ σ²), the root, each (x − μ)/root; None for the root's parts when it may be 0."""
    size, eps_ = b.entry(Fraction(len(row))), b.entry(eps)
    mu = b.div(b.total(row), size)
    devs = [b.carry(b.sub(x, mu)) for x in row]
    var = b.div(b.total([b.mul(x, x) for x in devs]), size)
    root = b.sqrt(b.add(var, eps_))
    if b.may_be_zero(root):
        return NormParts(mu, devs, var, root, None, None)
    normed = [b.carry(b.div(x, root)) for x in devs]
    return NormParts(mu, devs, var, root, normed, [b.add(b.mul(g, q), be) for q, g, be in zip(normed, gamma, beta)])


def shown(x, places: int):
    """A value as a line shows it: exact (an integer, or a decimal of at most *places* places that no rounding
    made) as itself, else its decimal at *places* places."""
    f = Fraction(x)
    if type(x) is Fraction and F.terminating(f, places):
        return eq.num(f)
    return eq.dec(F.round_decimal(f, None, places))


def _op(node, value) -> str:
    """= when the arithmetic *node* on the shown numbers is exactly *value* as shown, else ≈."""
    return EQ if eq.rational_value(node) == Fraction(value) else APPROX


def _vec(xs, places):
    return eq.Vec(tuple(shown(x, places) for x in xs))


def layer_norm_lines(name: str, label: str, row, gamma, beta, eps, parts, places: int) -> list:
    """One row's layer norm, line by line: the row of *name* (its label *label*), γ, β and ε as given, *parts* its
    :class:`worked.stages.NormParts` from the hand pass, every value carried at *places* places."""
    d = len(row)
    x = [shown(v, places) for v in row]
    mu, var, root = (shown(v, places) for v in (parts.mu, parts.var, parts.root))
    devs = [shown(v, places) for v in parts.devs]
    mu_sym, var_sym = eq.Sym("μ", sub=label), eq.Pow(eq.Sym("σ", sub=label), eq.num(2))
    lines = []
    total = eq.Add(tuple(x))
    mean = eq.Frac(total, eq.num(d))
    s = eq.rational_value(total)
    lines.append(eq.Rel((mu_sym, mean, eq.Frac(eq.num(s), eq.num(d)), mu), (EQ, EQ, _op(mean, parts.mu))))
    diff = eq.Vec(tuple(eq.Add((xi, eq.Neg(mu))) for xi in x))
    lines.append(eq.Rel((eq.Add((eq.Sym("x", sub=label), eq.Neg(mu_sym))), diff, eq.Vec(tuple(devs))), (EQ, EQ)))
    squares = eq.Frac(eq.Add(tuple(eq.Pow(dv, eq.num(2)) for dv in devs)), eq.num(d))
    lines.append(eq.Rel((var_sym, squares, var), (EQ, _op(squares, parts.var))))
    under = eq.Sqrt(eq.Add((var, eq.num(Fraction(eps)))))
    lines.append(eq.Rel((eq.Sqrt(eq.Add((var_sym, eq.Sym("ε")))), under, root),
                        (EQ, EQ if Fraction(parts.root) ** 2 == Fraction(parts.var) + Fraction(eps) else APPROX)))
    quot = eq.Vec(tuple(eq.Frac(dv, root) for dv in devs))
    normed = _vec(parts.normed, places)
    lines.append(eq.Rel((eq.Frac(eq.Add((eq.Sym("x", sub=label), eq.Neg(mu_sym))),
                                 eq.Sqrt(eq.Add((var_sym, eq.Sym("ε"))))), quot, normed),
                        (EQ, EQ if all(eq.rational_value(q) == Fraction(v) for q, v in zip(quot.items, parts.normed))
                         else APPROX)))
    if any(g != 1 for g in gamma) or any(b != 0 for b in beta):
        affine = eq.Vec(tuple(eq.Add((eq.Mul((eq.num(g), q)), eq.num(b))) for g, q, b in zip(gamma, normed.items, beta)))
        out = _vec(parts.out, places)
        ok = all(eq.rational_value(a) == eq.rational_value(v) for a, v in zip(affine.items, out.items))
        lines.append(eq.Rel((eq.Entry(eq.Sym(name), label, eq.ALL), affine, out), (EQ, EQ if ok else APPROX)))
    return lines


def residual_line(name: str, label: str, a_name: str, a_row, b_name: str, b_row, out_row, places: int):
    """``R_1[cat, ·] = X_0[cat, ·] + Z[cat, ·] = [a…] + [b…] = [a + b…]``: one row's residual add, from the shown rows."""
    a, b = _vec(a_row, places), _vec(b_row, places)
    out = _vec(out_row, places)
    total = eq.Add((a, b))
    ok = all(eq.rational_value(x) + eq.rational_value(y) == eq.rational_value(z)
             for x, y, z in zip(a.items, b.items, out.items))
    row = lambda n: eq.Entry(eq.Sym(n), label, eq.ALL)  # noqa: E731  (R_1[cat, ·]: no subscript in a subscript)
    return eq.Rel((row(name), eq.Add((row(a_name), row(b_name))), total, out), (EQ, EQ, EQ if ok else APPROX))


def affine_line(name: str, label: str, col: int, x_name: str, x_row, w_name: str, w_col, b_name: str | None, bias,
                value, places: int):
    """``U[cat, 2] = N2[cat, ·]·W_1[:, 2] + b_1[2] = [x…]·[w…] + b = x₁·w₁ + … + b ≈ u``: one entry of x·W (+ b),
    from the shown row and the weights as given; *value* the entry as carried."""
    xs, ws = [shown(v, places) for v in x_row], [eq.num(Fraction(v)) for v in w_col]
    products = tuple(eq.Mul((a, w)) for a, w in zip(xs, ws))
    named = eq.Dot(eq.Entry(eq.Sym(x_name), label, eq.ALL), eq.Col(eq.Sym(w_name), str(col + 1)))
    dot = eq.Dot(eq.Vec(tuple(xs)), eq.Vec(tuple(ws)))
    if b_name is not None:
        b = eq.num(Fraction(bias))
        named, dot, worked = (eq.Add((named, eq.Item(eq.Sym(b_name), str(col + 1)))), eq.Add((dot, b)),
                              eq.Add(products + (b,)))
    else:
        worked = eq.Add(products)
    out = shown(value, places)
    return eq.Rel((eq.Entry(eq.Sym(name), label, str(col + 1)), named, dot, worked, out),
                  (EQ, EQ, EQ, _op(worked, value)))


def relu_line(name: str, label: str, col: int, u, g, places: int):
    """``G[cat, 2] = relu(−0.35) = 0``: ReLU keeps a positive entry and makes any other 0."""
    return eq.Rel((eq.Entry(eq.Sym(name), label, str(col + 1)), eq.Call("relu", (shown(u, places),)), shown(g, places)),
                  (EQ, EQ))


def position_lines(label: str, pos: int, d_model: int, angles: list, values: list, places: int) -> list:
    """One row's positions, an entry a line: ``P[cat, 3] = sin(1/10000^(2/4)) = sin(0.01) ≈ 0.0100`` (sin in the
    even columns 2i, counting from 0, cos in the odd ones), the angle as a hand writes it (*angles*, from
    :meth:`worked.attention.Hand.angle`) and each value a hand rounds (*values*)."""
    lines = []
    for col, (angle, value) in enumerate(zip(angles, values)):
        fn = "sin" if col % 2 == 0 else "cos"
        two_i = col - col % 2
        true = eq.Call(fn, (eq.Frac(eq.num(pos), eq.Pow(eq.num(10000), eq.Frac(eq.num(two_i), eq.num(d_model)))),))
        a = shown(angle, places)
        exact_angle = type(angle) is Fraction
        items, ops = [eq.Entry(eq.Sym("P"), label, str(col + 1)), true, eq.Call(fn, (a,))], [EQ, EQ if exact_angle else APPROX]
        if pos == 0:
            items, ops = items[:2], ops[:1]
        items.append(shown(value, places))
        ops.append(EQ if pos == 0 else APPROX)
        lines.append(eq.Rel(tuple(items), tuple(ops)))
    return lines


def loss_lines(cells: list, terms: list, loss, places: int, prime: bool = False) -> list:
    """``−ln probs[cat, sat] = −ln(0.2312) ≈ 1.4645`` for each position's target (*cells*: (row label, target,
    probability as carried); *terms*: each ln as carried), then ``L = (1.4645 + …)/n ≈ L``; *prime*: the loss after
    the update's (probs′, L′)."""
    lines = []
    minus = []
    for (row, target, prob), ln in zip(cells, terms):
        value = shown(type(ln)(-ln), places)      # −ln p as carried (a rounded ln stays a rounded value)
        minus.append(value)
        lines.append(eq.Rel((eq.Neg(eq.Call("ln", (eq.Entry(eq.Sym("probs", upright=True, prime=prime), row, target),))),
                             eq.Neg(eq.Call("ln", (shown(prob, places),))), value),
                            (EQ, EQ if Fraction(prob) == 1 else APPROX)))
    mean = eq.Frac(eq.Add(tuple(minus)) if len(minus) > 1 else minus[0], eq.num(len(minus)))
    lines.append(eq.Rel((eq.Sym("L", prime=prime), mean, shown(loss, places)), (EQ, _op(mean, loss))))
    return lines


def softmax_lines(label: str, cols: list, row, state, weights, places: int) -> list:
    """One row of probs = softmax(logits), as the attention weights are worked: each e^x (of x − m, m the row's
    smallest logit, when the logits are large or small; *state* the hand's :class:`worked.attention.HandRow`),
    their total, then each probability e^x / total."""
    lines = []
    low = shown(row[state.low], places)
    for j in state.js:
        x = shown(row[j], places)
        arg = eq.Add((x, eq.Neg(low))) if state.shift else x
        e = shown(state.exps[j], places)
        items, ops = [eq.Exp(arg)], []
        if state.shift:
            items.append(eq.Exp(shown(state.exponent[j], places)))
            ops.append(EQ)
        items.append(e)
        ops.append(EQ if Fraction(state.exps[j]) == 1 and not Fraction(state.exponent[j]) else APPROX)
        lines.append(eq.Rel(tuple(items), tuple(ops)))
    exps = tuple(shown(state.exps[j], places) for j in state.js)
    total = eq.Add(exps)
    lines.append(eq.Rel((eq.Sym(N_("sum"), sub=label, upright=True, word=True), total, shown(state.total, places)),
                        (EQ, _op(total, state.total))))
    t = shown(state.total, places)
    for j, e in zip(state.js, exps):
        q, w = eq.Frac(e, t), shown(weights[j], places)     # the weight as carried: e^x / total, rounded
        lines.append(eq.Rel((eq.Entry(eq.Sym("probs", upright=True), label, cols[j]), q, w),
                            (EQ, EQ if eq.rational_value(q) == eq.rational_value(w) else APPROX)))
    return lines


# ---------------------------------------------------------------- the stages' steps (read through the solver's view)

def step_title(ctx, stage, head):
    """``Layer norm LN_1: N_1 = LN_1(X_0)``: the stage's answer grid, its symbol and definition."""
    g = stage.grid
    S = lambda base, **kw: ctx.sym(base, None, **kw)  # noqa: E731
    what = g.label if isinstance(g.label, eq.Said) else eq.say(g.label)
    return eq.say("{what}: {formula}", what=what, formula=is_(g.lhs(S), g.definition(S, ctx.p)))


def carried_grid(v, name: str) -> list:
    """The matrix *name* as the lines carry it: a stage's values a hand carries, or an input as given."""
    if name in v.mats:
        return v.mat(name).hand
    return [list(r) for r in v.input(name)]


def _name(v, name: str) -> str:
    """The name a line writes for a matrix: a stage's symbol (N_2 for the stage N2), else the input's own name."""
    return v.mat(name).sym.name if name in v.mats else eq.shown_name(name)


def _rows(ctx, n: int) -> list:
    """The rows a step works out: every row with checks "all", else the last (the token that sees every other
    one under a causal mask)."""
    return list(range(n)) if ctx.checks == "all" else [n - 1]


def given_input(v, name: str) -> list:
    """A vector or matrix of the block's inputs as the hand pass took it (rounded where a decimal display
    rounds it)."""
    hb = v.by_hand
    M = v.input(name)
    if M and isinstance(M[0], (list, tuple)):
        return [[hb.entry(Fraction(x)) for x in row] for row in M]
    return [hb.entry(Fraction(x)) for x in M]


def _positions_body(ctx, stage, v) -> Body:
    R = v.mat(stage.id)
    n, d = R.shape
    if ctx.p.block.positional == "none":
        return Body(eq.say('This block adds no positions (positional = "none"): P is 0, so {rule}.',
                           rule=is_(eq.Sym("X_0"), eq.Sym("X"))), [])
    lines = []
    for i in _rows(ctx, n):
        angles = [v.by_hand.angle(i, c, d) for c in range(d)]
        lines += [line(x, f"row {ctx.p.tokens[i]}") for x in position_lines(ctx.lab[i], i, d, angles, R.hand[i], ctx.P)]
    why = eq.say("Attention itself does not know the order of the tokens: each position gets its own pattern of sines "
                 "and cosines, added to its row of {X}. Even columns 2i take the sin of the angle, odd columns 2i + 1 the "
                 "cos of the same angle (in radians); pos counts from 0, so the first row is [0, 1, 0, 1, …].",
                 X=eq.Sym("X"))
    return Body(why, lines, precision=ctx.P)


def _plus_body(ctx, stage, v) -> Body:
    a_name, b_name = stage.inputs
    A, B, R = carried_grid(v, a_name), carried_grid(v, b_name), v.mat(stage.id)
    lines = [line(residual_line(_name(v, stage.id), ctx.lab[i], _name(v, a_name), A[i], _name(v, b_name), B[i], R.hand[i],
                                ctx.P)) for i in _rows(ctx, R.shape[0])]
    if b_name == "P":
        why = eq.say("Add the positions to the input, entry by entry: the block works on {rule}.",
                     rule=is_(eq.Sym("X_0"), eq.Add((eq.Sym("X"), eq.Sym("P")))))
    else:
        why = eq.say("The residual add: the sublayer's output is added back to its input, entry by entry ({rule}), so "
                     "what the sublayer adds is a correction to the row, not a replacement of it.",
                     rule=is_(eq.Sym(_name(v, stage.id)), eq.Add((eq.Sym(_name(v, a_name)), eq.Sym(_name(v, b_name))))))
    return Body(why, lines, precision=ctx.P)


def _norm_body(ctx, stage, v) -> Body:
    src, g_name, b_name = stage.inputs
    X, R, hb = carried_grid(v, src), v.mat(stage.id), v.by_hand
    gamma, beta, eps = given_input(v, g_name), given_input(v, b_name), ctx.p.block.eps
    lines = []
    for i in _rows(ctx, R.shape[0]):
        parts = norm_parts(hb, X[i], gamma, beta, eps)
        lines += [line(x, f"row {ctx.p.tokens[i]}") for x in
                  layer_norm_lines(_name(v, stage.id), ctx.lab[i], X[i], gamma, beta, eps, parts, ctx.P)]
    mu, var = eq.Sym("μ"), eq.Pow(eq.Sym("σ"), eq.num(2))
    why = eq.say("Layer norm, each row on its own (over its {d_model} entries): its mean {mu}, its variance {var} (the "
                 "mean of the squared deviations, dividing by {d_model}), then each entry's deviation over {root}, then "
                 "{gamma} times that plus {beta} (column by column). Values are carried to {places} places.",
                 d_model=eq.Sym("d_model"), mu=mu, var=var, root=eq.Sqrt(eq.Add((var, eq.Sym("ε")))),
                 gamma=eq.Sym("γ"), beta=eq.Sym("β"), places=str(ctx.P))
    notes = [eq.say("Here {eps}, and {gamma} is all 1 and {beta} all 0, so the normalised row is the output row.",
                    eps=is_(eq.Sym("ε"), eq.num(Fraction(eps))), gamma=eq.Sym("γ"), beta=eq.Sym("β"))] if all(x == 1 for x in gamma) and \
        not any(beta) else []
    return Body(why, lines, notes, precision=ctx.P)


def _affine_body(ctx, stage, v) -> Body:
    x_name, w_name = stage.inputs[:2]
    b_name = stage.inputs[2] if len(stage.inputs) > 2 else None
    X, W, R = carried_grid(v, x_name), given_input(v, w_name), v.mat(stage.id)
    bias = given_input(v, b_name) if b_name else None
    n, m = R.shape
    i0 = n - 1
    first = (i0, max(range(m), key=lambda j: (abs(R.num[i0][j]), -j)))
    lines = [line(affine_line(_name(v, stage.id), ctx.lab[i], j, _name(v, x_name), X[i], w_name, [row[j] for row in W],
                              b_name, bias[j] if bias else None, R.hand[i][j], ctx.P))
             for i, j in entries(ctx.checks, n, m, first)]
    x, w = eq.Sym(_name(v, x_name)), eq.Sym(w_name)
    why = eq.say("Each entry is a row of {x} times a column of {w}, plus that column's entry of {b} (the bias).", x=x, w=w,
                 b=eq.Sym(b_name)) if b_name else eq.say("Each entry is a row of {x} times a column of {w}.", x=x, w=w)
    return Body(why, lines, precision=ctx.P)


def _relu_body(ctx, stage, v) -> Body:
    U, R = carried_grid(v, stage.inputs[0]), v.mat(stage.id)
    lines = [line(relu_line(_name(v, stage.id), ctx.lab[i], j, U[i][j], R.hand[i][j], ctx.P), f"row {ctx.p.tokens[i]}")
             for i in _rows(ctx, R.shape[0]) for j in range(R.shape[1])]
    why = eq.say("ReLU keeps each positive entry and makes every other one 0: {rule}.",
                 rule=is_(eq.Call("relu", (eq.Sym("x"),)), eq.Call("max", (eq.Sym("x"), eq.num(0)))))
    return Body(why, lines, precision=ctx.P)


def _softmax_body(ctx, stage, v) -> Body:
    L, R, hb = carried_grid(v, stage.inputs[0]), v.mat(stage.id), v.by_hand
    lines = []
    for i in _rows(ctx, R.shape[0]):
        weights, state = hb.softmax(L[i])
        lines += [line(x, f"row {ctx.p.tokens[i]}") for x in softmax_lines(ctx.lab[i], R.cols, L[i], state, weights, ctx.P)]
    why = eq.say("Softmax each row of the logits: {ex} of every logit, then each over the row's total: the probability "
                 "of each word of the vocabulary coming next.", ex=eq.Exp(eq.Sym("x")))
    return Body(why, lines, precision=ctx.P)


def _loss_body(ctx, stage, v) -> Body:
    probs, R, hb = v.mat(stage.inputs[0]), v.mat(stage.id), v.by_hand
    cells = [(ctx.lab[i], probs.cols[t], probs.hand[i][t]) for i, t in enumerate(v.input(stage.inputs[1]))]
    terms = [hb.ln(c[2]) for c in cells]
    lines = [line(x) for x in loss_lines(cells, terms, R.hand[0][0], ctx.P)]
    why = eq.say("The loss: at each position, −ln of the probability given to the word that really comes next (the "
                 "target), then the mean over the positions. The natural log: ln, not the log to base 10.")
    return Body(why, lines, precision=ctx.P)


# ---- the notebook's NumPy code of each step (nb: the notebook being written; the variables are the stage ids)
def show_code(v: str) -> str:
    return _show(v, f"np.shape({v})")


def _positions_numpy(nb, stage, h):
    v = stage.id
    if nb.p.block.positional == "none":
        return v, f"{v} = np.zeros((n, d_model))   # " + _("no positions") + "\n" + show_code(v)
    return v, ("pos = np.arange(n)[:, None]                    # " + _("0, 1, 2, … down the rows") + "\n"
               "two_i = (np.arange(d_model) // 2 * 2)[None, :]  # " + _("0, 0, 2, 2, … across the columns") + "\n"
               "angle = pos / 10000 ** (two_i / d_model)\n"
               f"{v} = np.where(np.arange(d_model) % 2 == 0, np.sin(angle), np.cos(angle))   # "
               + _("sin even, cos odd") + "\n" + show_code(v))


def _plus_numpy(nb, stage, h):
    a, b = stage.inputs
    return stage.id, f"{stage.id} = {a} + {b}\n" + show_code(stage.id)


def _layer_norm_code() -> str:
    return ("def layer_norm(x, gamma, beta):              # " + _("each row over its d_model entries") + "\n"
            "    mu = x.mean(axis=1, keepdims=True)\n"
            "    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)   # " + _("divide by d_model (not d_model - 1)") + "\n"
            "    return gamma * (x - mu) / np.sqrt(var + eps) + beta\n\n")


def _norm_numpy(nb, stage, h):
    src = once(nb, "layer_norm", _layer_norm_code())
    x, g, b = stage.inputs
    return stage.id, src + f"{stage.id} = layer_norm({x}, {g}, {b})\n" + show_code(stage.id)


def _affine_numpy(nb, stage, h):
    x, w = stage.inputs[:2]
    bias = f" + {stage.inputs[2]}" if len(stage.inputs) > 2 else ""
    return stage.id, f"{stage.id} = {x} @ {w}{bias}\n" + show_code(stage.id)


def _relu_numpy(nb, stage, h):
    return stage.id, (f"{stage.id} = np.maximum({stage.inputs[0]}, 0)   # " + _("ReLU: negatives become 0") + "\n"
                      + show_code(stage.id))


def _softmax_numpy(nb, stage, h):
    src = once(nb, "softmax", softmax_code())
    v = stage.id
    return v, src + f"{v} = softmax({stage.inputs[0]})\n" + show_code(v) + "\n" + row_sums(v)


def _loss_numpy(nb, stage, h):
    probs, targets = stage.inputs
    v = stage.id
    return v, (f"{v} = -np.mean(np.log({probs}[np.arange(n), {targets}]))   # "
               + _("natural log of each target's probability") + f"\nshow({v})")


POSITIONS = Shown(step_title, _positions_body, _positions_numpy)
PLUS = Shown(step_title, _plus_body, _plus_numpy)
NORM = Shown(step_title, _norm_body, _norm_numpy)
AFFINE = Shown(step_title, _affine_body, _affine_numpy)
RELU = Shown(step_title, _relu_body, _relu_numpy)
SOFTMAX = Shown(step_title, _softmax_body, _softmax_numpy)
LOSS = Shown(step_title, _loss_body, _loss_numpy)
