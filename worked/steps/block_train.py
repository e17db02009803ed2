"""The worked lines of a Transformer block's training step (issue 27, ``[train] loss = "cross-entropy"``), as trees:
one entry of each kind of gradient (the logits' (p − y)/n, a sum of products for Mᵀ·d, d·Wᵀ and dγ, a column sum
for a bias or β, ReLU's gate, a residual's two branches), one row's layer-norm backward, one entry of the update
W − lr·dW and the central-difference check. Each line shows the values a hand writes down (the
:class:`worked.attention.Hand` pass of :func:`worked.attention.block_forward`, through
:func:`worked.stages.norm_back_parts` for a layer norm) and holds by the hand rule (:mod:`worked.audit`). Not yet
a stage's :class:`worked.lines.Shown`: the solver refuses a block's [train] in one line until they are wired."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..lines import APPROX, EQ, rel
from .block import shown


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
    items.append(shown(value, places))
    return eq.Rel(tuple(items), (EQ,) * (len(items) - 1))


def norm_back_lines(label: str, dy, gamma, back, places: int) -> list:
    """One row's layer-norm backward (*back*: its :class:`worked.stages.NormBack` from the hand pass): dx̂ = γ ⊙ dY,
    mean(dx̂), mean(dx̂ ⊙ x̂), then each dx = (dx̂ − mean(dx̂) − x̂·mean(dx̂ ⊙ x̂))/√(σ² + ε)."""
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
    quots = eq.Vec(tuple(eq.Frac(eq.Add((a, eq.Neg(m1), eq.Neg(eq.Mul((h, m2))))), root) for a, h in zip(dh, hats)))
    out = eq.Vec(tuple(shown(v, places) for v in back.dx))
    ok = all(eq.rational_value(q) == Fraction(v) for q, v in zip(quots.items, back.dx))
    lines.append(eq.Rel((eq.Sym("dx", sub=label), quots, out), (EQ, EQ if ok else APPROX)))
    return lines


def update_line(name: str, row: str, col: str, w, lr, g, value, places: int) -> eq.Rel:
    """``W_1′[2, 3] = W_1[2, 3] − lr·dW_1[2, 3] = 1 − 0.1·0.2345 ≈ 0.9766``: one entry of the update."""
    named = eq.Add((eq.Entry(eq.Sym(name), row, col), eq.Neg(eq.Mul((eq.Sym("lr", upright=True), _entry("d" + name, row, col))))))
    node = eq.Add((eq.num(Fraction(w)) if type(w) is Fraction else shown(w, places),
                   eq.Neg(eq.Mul((eq.num(Fraction(lr)), shown(g, places))))))
    return _close([eq.Entry(eq.Sym(name, prime=True), row, col), named], node, value, places)


def gradcheck_lines(name: str, row: str, col: str, h, loss_up, loss_down, grad, places: int) -> list:
    """The numerical check of dW[row, col]: L(w + h) and L(w − h), each the loss of a fresh pass carried to
    *places* places, their central difference (a − b)/2h, and the backward pass's entry beside it."""
    w = eq.Entry(eq.Sym(name), row, col)
    hs = eq.Sym("h")
    a, b = shown(loss_up, places), shown(loss_down, places)
    up, down = eq.Call("L", (eq.Add((w, hs)),)), eq.Call("L", (eq.Add((w, eq.Neg(hs))),))
    q = (eq.rational_value(a) - eq.rational_value(b)) / (2 * Fraction(h))
    quot = eq.Frac(eq.Add((a, eq.Neg(b))), eq.Mul((eq.num(2), eq.num(Fraction(h)))))
    return [eq.Rel((up, a), (APPROX,)), eq.Rel((down, b), (APPROX,)),
            eq.Rel((eq.Frac(eq.Add((up, eq.Neg(down))), eq.Mul((eq.num(2), hs))), quot, shown(q, places)),
                   (APPROX, _op(quot, q))),
            eq.Rel((_entry("d" + name, row, col), shown(grad, places)), (APPROX,))]
