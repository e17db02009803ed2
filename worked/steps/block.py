"""The worked lines of a Transformer block's stages (issue 27), as trees: so far one row's layer norm
(μ → σ² → √(σ² + ε) → the normalised row → γ and β), the residual add of one row, one entry of a product
with a bias (the feed-forward's x·W_1 + b_1, W_2's, the logits), ReLU, one row's positions (sin and cos with
their arguments) and the loss (−ln p of each target, then the mean). Each line shows the
values a hand writes down (:class:`worked.attention.Hand`, through :func:`worked.stages.norm_parts`) and holds
by the hand rule (:mod:`worked.audit`). Not yet a stage's :class:`worked.lines.Shown`: the solver does not work a
block yet."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from .. import numfmt as F
from ..lines import APPROX, EQ


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
        ok = all(eq.rational_value(a) == Fraction(v) for a, v in zip(affine.items, parts.out))
        lines.append(eq.Rel((eq.Entry(eq.Sym(name), label, eq.ALL), affine, out), (EQ, EQ if ok else APPROX)))
    return lines


def residual_line(name: str, label: str, a_name: str, a_row, b_name: str, b_row, out_row, places: int):
    """``R1[cat] = X0[cat] + Z[cat] = [a…] + [b…] = [a + b…]``: one row's residual add, from the shown rows."""
    a, b = _vec(a_row, places), _vec(b_row, places)
    out = _vec(out_row, places)
    total = eq.Add((a, b))
    ok = all(eq.rational_value(x) + eq.rational_value(y) == eq.rational_value(z)
             for x, y, z in zip(a.items, b.items, out.items))
    return eq.Rel((eq.Sym(name, sub=label), eq.Add((eq.Sym(a_name, sub=label), eq.Sym(b_name, sub=label))), total, out),
                  (EQ, EQ, EQ if ok else APPROX))


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
        named, dot, worked = (eq.Add((named, eq.Sym(b_name, sub=str(col + 1)))), eq.Add((dot, b)),
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


def loss_lines(cells: list, terms: list, loss, places: int) -> list:
    """``−ln probs[cat, sat] = −ln(0.2312) ≈ 1.4645`` for each position's target (*cells*: (row label, target,
    probability as carried); *terms*: each ln as carried), then ``L = (1.4645 + …)/n ≈ L``."""
    lines = []
    minus = []
    for (row, target, prob), ln in zip(cells, terms):
        value = shown(-Fraction(ln), places)
        minus.append(value)
        lines.append(eq.Rel((eq.Neg(eq.Call("ln", (eq.Entry(eq.Sym("probs", upright=True), row, target),))),
                             eq.Neg(eq.Call("ln", (shown(prob, places),))), value),
                            (EQ, EQ if Fraction(prob) == 1 else APPROX)))
    mean = eq.Frac(eq.Add(tuple(minus)) if len(minus) > 1 else minus[0], eq.num(len(minus)))
    lines.append(eq.Rel((eq.Sym("L"), mean, shown(loss, places)), (EQ, _op(mean, loss))))
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
    lines.append(eq.Rel((eq.Sym("sum", sub=label, upright=True), total, shown(state.total, places)),
                        (EQ, _op(total, state.total))))
    t = shown(state.total, places)
    for j, e in zip(state.js, exps):
        q, w = eq.Frac(e, t), shown(weights[j], places)     # the weight as carried: e^x / total, rounded
        lines.append(eq.Rel((eq.Entry(eq.Sym("probs", upright=True), label, cols[j]), q, w),
                            (EQ, EQ if eq.rational_value(q) == eq.rational_value(w) else APPROX)))
    return lines
