"""The steps of one training step (a ``[train]`` problem): the loss, the backward pass stage by stage (dZ,
through W_O, dV, dA, the softmax backward, the scaling backward, dQ, dK, dW of the input each projection took),
the numerical check of one gradient entry, the update of the weights and the loss after it. Each stage's step
is a :class:`Shown`; the view's matrices are its head's (forward and backward) and the layer's."""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

from .. import eq
from .. import numfmt as F
from ..i18n import N_
from ..lines import (APPROX, EQ, H, I, J, Body, Shown, answer, entries, grad_prod_step, has_dec, is_, line,
                     node_list, pick, rel, rel_to, row_sum_line, tr, value_of)

_L, _T, _Zs = eq.Sym("L"), eq.Sym("T"), eq.Sym("Z")
_HALF = eq.num(Fraction(1, 2))


def _diff(z, t):
    """z − t, with t ≥ 0 written as − t and t < 0 as + |t| (t a number of the target)."""
    return eq.Add((z, eq.Neg(eq.num(t)) if t >= 0 else eq.num(-t)))


def _title_of(make):
    """A title that depends on the symbols of the head only."""
    return lambda ctx, stage, head: make(lambda b: ctx.sym(b, head))


# ---------------------------------------------------------------- the loss and dZ

def _backward(formula):
    """A backward step's title: ``Backward: dV = Aᵀ·dZ``."""
    return eq.say("Backward: {formula}", formula=formula)


def _loss(ctx, stage, v) -> Body:
    output, loss, T = v.mat("Z"), v.mat("loss"), v.input("T")
    n, m_out, P = output.shape[0], output.shape[1], ctx.P
    terms = tuple(eq.Pow(_diff(output.carried(i, c), T[i][c]) if T[i][c] else output.carried(i, c), eq.num(2))
                  for i in range(n) for c in range(m_out))
    items = [_L, eq.Mul((_HALF, eq.Sum(eq.Pow(eq.Add((eq.Entry(_Zs, "i", "j"), eq.Neg(eq.Entry(_T, "i", "j")))), eq.num(2)), "i,j"))),
             eq.Mul((_HALF, eq.Add(terms))), loss.carried(0, 0)]
    ops = [EQ, rel(not has_dec(items[2])), rel_to(items[2], loss, 0, 0)]
    answer(ctx, items, ops, loss, 0, 0)
    zt = eq.Add((_Zs, eq.Neg(_T)))
    why = eq.say("How far the output is from the target {T}: half the sum of the squared differences over every entry "
                 "(mean squared error without the mean, the usual {half} so that the gradient is simply {diff}). {Z} is "
                 "carried to {places} places.", T=_T, half=eq.Frac(eq.num(1), eq.num(2)), diff=zt, Z=_Zs, places=str(P))
    return Body(why, [line(eq.Rel(tuple(items), tuple(ops)))], precision=P)


def _loss_title(ctx, stage, head):
    return eq.say("Loss: {formula}", formula=is_(_L, eq.Mul((_HALF, eq.Sum(eq.Pow(eq.Add((_Zs, eq.Neg(_T))), eq.num(2)), "i,j")))))


LOSS = Shown(_loss_title, _loss)


def _dz(ctx, stage, v) -> Body:
    output, dZ, T = v.mat("Z"), v.mat("dZ"), v.input("T")
    n, m_out = output.shape
    lab = ctx.lab
    lines = []
    for i, c in entries(ctx.checks, n, m_out, pick(dZ)):
        it = [eq.Entry(dZ.sym, lab[i], str(c + 1)), eq.Add((eq.Entry(_Zs, lab[i], str(c + 1)), eq.Neg(eq.Entry(_T, lab[i], str(c + 1))))),
              _diff(output.carried(i, c), T[i][c]), dZ.carried(i, c)]
        lines.append(line(eq.Rel(tuple(it), (EQ, rel(not has_dec(it[2])), rel_to(it[2], dZ, i, c)))))
    zt = eq.Add((_Zs, eq.Neg(_T)))
    why = eq.say("Start the backward pass at the loss: the derivative of {loss} with respect to each entry of {Z} is "
                 "{diff}. Every gradient below is this one passed back through the steps of the forward pass, one product "
                 "at a time (the chain rule).", loss=eq.Mul((_HALF, eq.Pow(zt, eq.num(2)))), Z=_Zs, diff=zt)
    return Body(why, lines, precision=ctx.P, shape_eq=eq.Rel((eq.Dims(n, m_out),), ()))


DZ = Shown(lambda ctx, stage, head: _backward(is_(ctx.sym("dZ", None), eq.Add((_Zs, eq.Neg(_T))))), _dz)


def _dconcat(ctx, stage, v) -> Body:
    dZ, dcat, Wo = v.mat("dZ"), v.mat("dconcat"), v.input("W_O")
    n, m_out = dZ.shape
    hd = len(Wo)
    wo = eq.Sym("W_O")
    why = eq.say("Several heads: the output was {formula}, so the gradient of the concatenated heads is {dZ} times {WT} "
                 "(row {k} of {W_O} gives column {k} of concat's gradient). It splits back into the heads: each head's "
                 "{dZ} is its block of columns.", formula=eq.Mul((eq.Sym("concat", upright=True), wo)), dZ=dZ.sym,
                 WT=tr(wo), k=eq.Sym("k"), W_O=wo)
    return grad_prod_step(
        ctx, why, dcat,
        lambda i: node_list(dZ, [(i, c) for c in range(m_out)]), lambda k: [Wo[k][c] for c in range(m_out)],
        lambda i, k: eq.Dot(eq.Entry(dZ.sym, ctx.lab[i], eq.ALL), eq.Entry(wo, str(k + 1), eq.ALL)),
        pick(dcat), (eq.Dims(n, m_out), eq.Dims(m_out, hd), eq.Dims(n, hd)))


DCONCAT = Shown(lambda ctx, stage, head: eq.say("Through {W_O}: {formula}", W_O=eq.Sym("W_O"), formula=is_(
    ctx.sym("dconcat", None), eq.Mul((ctx.sym("dZ", None), tr(eq.Sym("W_O")))))), _dconcat)


# ---------------------------------------------------------------- a head's backward pass

def _dv(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    A, dZ, dV = v.mat("weights"), v.mat("dZ"), v.mat("dV")
    n, m, dv = A.shape[0], A.shape[1], dZ.shape[1]
    why = eq.say("{formula}, so the gradient of {V} is {AT} times {dZ}: value row {j} was used by every token {i} with "
                 "weight {a}, so it collects {sum} (column {j} of {A}, not row {j}).",
                 formula=is_(S("Z"), eq.Mul((S("A"), S("V")))), V=S("V"), AT=tr(S("A")), dZ=S("dZ"), j=J, i=I,
                 a=eq.Entry(S("A"), "i", "j"),
                 sum=eq.Sum(eq.Mul((eq.Entry(S("A"), "i", "j"), eq.Entry(S("dZ"), "i", eq.ALL))), "i"), A=S("A"))
    return grad_prod_step(
        ctx, why, dV,
        lambda j: node_list(A, [(i, j) for i in range(n)]), lambda c: node_list(dZ, [(i, c) for i in range(n)]),
        lambda j, c: eq.Dot(eq.Col(S("A"), ctx.lab_kv[j]), eq.Col(S("dZ"), str(c + 1))), pick(dV),
        (eq.Dims(m, n), eq.Dims(n, dv), eq.Dims(m, dv)))


DV = Shown(_title_of(lambda S: _backward(is_(S("dV"), eq.Mul((tr(S("A")), S("dZ")))))), _dv)


def _da(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    dZ, V, dA = v.mat("dZ"), v.mat("V"), v.mat("dA")
    n, m, dv = dA.shape[0], dA.shape[1], V.shape[1]
    why = eq.say("{formula}, so the gradient of the weights is {dZ} times {VT}: entry ({i}, {j}) is token {i}'s output "
                 "gradient · token {j}'s value row.", formula=is_(S("Z"), eq.Mul((S("A"), S("V")))), dZ=S("dZ"),
                 VT=tr(S("V")), i=I, j=J)
    return grad_prod_step(
        ctx, why, dA,
        lambda i: node_list(dZ, [(i, c) for c in range(dv)]), lambda j: node_list(V, [(j, c) for c in range(dv)]),
        lambda i, j: eq.Dot(eq.Entry(S("dZ"), ctx.lab[i], eq.ALL), eq.Entry(S("V"), ctx.lab_kv[j], eq.ALL)), pick(dA),
        (eq.Dims(n, dv), eq.Dims(dv, m), eq.Dims(n, m)),
        notes=[eq.say("A masked weight is 0 whatever dA says: its gradient stops at the softmax (next step).")]
        if v.masked else ())


DA = Shown(_title_of(lambda S: _backward(is_(S("dA"), eq.Mul((S("dZ"), tr(S("V"))))))), _da)


def _ds_title(S):
    aij, daij, si = eq.Entry(S("A"), "i", "j"), eq.Entry(S("dA"), "i", "j"), eq.Sym("s", sub="i")
    return eq.say("Softmax backward: {formula}, row by row",
                  formula=is_(eq.Entry(S("dS"), "i", "j"), eq.Mul((aij, eq.Add((daij, eq.Neg(si)))))))


def _ds(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    A, dA, dS = v.mat("weights"), v.mat("dA"), v.mat("dS")
    n, m = A.shape
    P, masked, lab, lab_kv = ctx.P, v.masked, ctx.lab, ctx.lab_kv
    rs = v.hand_grad.rowsum
    lines = []
    for i in range(n):
        g = f"row {ctx.p.tokens[i]}"
        js = [j for j in range(m) if (i, j) not in masked]
        an = [A.carried(i, j) for j in js]
        dn = [dA.carried(i, j) for j in js]
        s_node = F.hand_node(rs[i], P)
        s_lab = eq.Sym("s", sub=lab[i])
        s_sum = eq.Add(tuple(eq.Mul((a, d)) for a, d in zip(an, dn)))
        lines.append(line(eq.Rel((s_lab, eq.Sum(eq.Mul((eq.Entry(S("A"), lab[i], "k"), eq.Entry(S("dA"), lab[i], "k"))), "k"),
                                  s_sum, s_node),
                                 (EQ, rel(not any(map(has_dec, an + dn))), rel(eq.rational_value(s_sum) == rs[i]))), g))
        for j in range(m):
            lhs = eq.Entry(dS.sym, lab[i], lab_kv[j])
            if (i, j) in masked:
                lines.append(line(eq.Rel((lhs, eq.num(0)), (EQ,)), g))
                continue
            prod = eq.Mul((A.carried(i, j), eq.Add((dA.carried(i, j), eq.Neg(s_node)))))
            lines.append(line(eq.Rel((lhs, eq.Mul((eq.Entry(S("A"), lab[i], lab_kv[j]), eq.Add((eq.Entry(S("dA"), lab[i], lab_kv[j]), eq.Neg(s_lab))))),
                                      prod, dS.carried(i, j)),
                                     (EQ, rel(not has_dec(prod)), rel_to(prod, dS, i, j))), g))
        if len(js) > 1:
            lines.append(row_sum_line(eq.Sum(eq.Entry(dS.sym, lab[i], "j"), "j"), [dS.carried(i, j) for j in js], 0, P, g))
    notes = [eq.say("Each row of dS adds up to 0: the weights of a row always add up to 1, so moving the scores can "
                    "only shift weight from one token to another.")]
    aij, daij, si = eq.Entry(S("A"), "i", "j"), eq.Entry(S("dA"), "i", "j"), eq.Sym("s", sub="i")
    if masked:
        notes.append(eq.say("Masked entries get exactly 0 gradient: their score was −∞ and their weight is 0 whatever the "
                            "score, so changing it changes nothing ({zero} makes every term with the factor {a} 0). No "
                            "gradient flows to the key of a later token through them.", zero=is_(aij, eq.num(0)), a=aij))
    why = eq.say("The softmax couples a row: raising one scaled score raises its own weight and lowers all the others. So "
                 "the gradient of scaled score {j} is {a} times ({da} minus the row's weighted average {s}). First the "
                 "row's sum {si}, then each entry.", j=J, a=aij, da=daij,
                 s=is_(si, eq.Sum(eq.Mul((eq.Entry(S("A"), "i", "k"), eq.Entry(S("dA"), "i", "k"))), "k")), si=si)
    return Body(why, lines, notes, precision=P)


DS = Shown(_title_of(_ds_title), _ds)


def _dscores_title(ctx, stage, head):
    S = lambda b: ctx.sym(b, head)  # noqa: E731
    if ctx.p.scale == "none":
        return eq.say("Scaling backward: none ({formula})", formula=is_(S("dscores"), S("dS")))
    return eq.say("Scaling backward: {formula}", formula=is_(S("dscores"), eq.Frac(S("dS"), F.node(ctx.factor))))


def _dscores(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    dS, dsc = v.mat("dS"), v.mat("dscores")
    n, m = dS.shape
    masked = v.masked
    P = ctx.P
    fnode = F.node(ctx.factor)
    if ctx.p.scale == "none":
        return Body(eq.say('The problem sets scale = "none": the scores were not divided, so their gradient is {dS} itself.',
                           dS=S("dS")), [], precision=P)
    i0, j0 = pick(dsc, lambda i, j: (i, j) not in masked)
    lines = []
    for i, j in entries(ctx.checks, n, m, (i0, j0), allowed=lambda i, j: (i, j) not in masked):
        it = [eq.Entry(dsc.sym, ctx.lab[i], ctx.lab_kv[j]), eq.Frac(eq.Entry(dS.sym, ctx.lab[i], ctx.lab_kv[j]), fnode),
              eq.Frac(dS.carried(i, j), fnode), dsc.carried(i, j)]
        lines.append(line(eq.Rel(tuple(it), (EQ, rel(not has_dec(it[2])), rel_to(it[2], dsc, i, j)))))
    why = eq.say("The forward pass divided every score by {factor}, so every gradient is divided by it again on the way "
                 "back (the chain rule: the derivative of {quotient} with respect to {s} is {one_over}).", factor=fnode,
                 quotient=eq.Frac(eq.Sym("s"), eq.Sym("c")), s=eq.Sym("s"), one_over=eq.Frac(eq.num(1), eq.Sym("c")))
    return Body(why, lines, [eq.say("Masked entries stay 0.")] if masked else [], precision=P)


DSCORES = Shown(_dscores_title, _dscores)


def _dq(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    dsc, K, dQ = v.mat("dscores"), v.mat("K"), v.mat("dQ")
    n, m, dk = dsc.shape[0], dsc.shape[1], K.shape[1]
    why = eq.say("{formula}, so the gradient of the queries is {dscores} times {K}: token {i}'s query moves along the keys "
                 "it was matched with, each by that score's gradient.", formula=is_(S("scores"), eq.Mul((S("Q"), tr(S("K"))))),
                 dscores=S("dscores"), K=S("K"), i=I)
    return grad_prod_step(
        ctx, why, dQ,
        lambda i: node_list(dsc, [(i, j) for j in range(m)]), lambda c: node_list(K, [(j, c) for j in range(m)]),
        lambda i, c: eq.Dot(eq.Entry(S("dscores"), ctx.lab[i], eq.ALL), eq.Col(S("K"), str(c + 1))), pick(dQ),
        (eq.Dims(n, m), eq.Dims(m, dk), eq.Dims(n, dk)))


DQ = Shown(_title_of(lambda S: _backward(is_(S("dQ"), eq.Mul((S("dscores"), S("K")))))), _dq)


def _dk(ctx, stage, v) -> Body:
    S = lambda b: ctx.sym(b, v.head)  # noqa: E731
    dsc, Q, dK = v.mat("dscores"), v.mat("Q"), v.mat("dK")
    n, m, dk = dsc.shape[0], dsc.shape[1], Q.shape[1]
    why = eq.say("{formula}, so the gradient of the keys is {dscoresT} times {Q}: token {j}'s key collects column {j} of "
                 "{dscores} (every query that was matched with it), not row {j}.",
                 formula=is_(S("scores"), eq.Mul((S("Q"), tr(S("K"))))), dscoresT=tr(S("dscores")), Q=S("Q"), j=J,
                 dscores=S("dscores"))
    return grad_prod_step(
        ctx, why, dK,
        lambda j: node_list(dsc, [(i, j) for i in range(n)]), lambda c: node_list(Q, [(i, c) for i in range(n)]),
        lambda j, c: eq.Dot(eq.Col(S("dscores"), ctx.lab_kv[j]), eq.Col(S("Q"), str(c + 1))), pick(dK),
        (eq.Dims(m, n), eq.Dims(n, dk), eq.Dims(m, dk)))


DK = Shown(_title_of(lambda S: _backward(is_(S("dK"), eq.Mul((tr(S("dscores")), S("Q")))))), _dk)


def _who(ctx, source: str) -> str:
    if source == "X_enc":
        return "encoder token"
    return "decoder token" if ctx.p.cross else "token"


#: a weight gradient's explanation by whose rows its input has (whole sentences for the catalogues)
_WEIGHT_GRAD_WHY = {
    "token": N_("{formula}, so the gradient of {W} is {XT} times {dW}: row {r} of {W} collects column {r} of {X} (every "
                "token's {r}-th input) times {dW}."),
    "decoder token": N_("{formula}, so the gradient of {W} is {XT} times {dW}: row {r} of {W} collects column {r} of {X} "
                        "(every decoder token's {r}-th input) times {dW}."),
    "encoder token": N_("{formula}, so the gradient of {W} is {XT} times {dW}: row {r} of {W} collects column {r} of {X} "
                        "(every encoder token's {r}-th input) times {dW}."),
}


def weight_grad(w: str) -> Shown:
    """dW_w = (the input the stage takes)ᵀ·dw: the gradient of the weights of the projection *w* (Q, K, V)."""

    def title(ctx, stage, head):
        source, grad = stage.inputs
        return _backward(is_(ctx.sym(stage.id, head), eq.Mul((tr(eq.Sym(source)), ctx.sym(grad, head)))))

    def body(ctx, stage, v) -> Body:
        S = lambda b: ctx.sym(b, v.head)  # noqa: E731
        source = stage.inputs[0]
        Xs, who, X = eq.Sym(source), _who(ctx, source), v.input(source)
        g, dW = v.mat(stage.inputs[1]), v.mat(stage.id)
        k, dm, cols = len(X), dW.shape[0], dW.shape[1]
        why = eq.say(_WEIGHT_GRAD_WHY[who], formula=is_(S(w), eq.Mul((Xs, S("W_" + w)))), W=S("W_" + w), XT=tr(Xs),
                     dW=S("d" + w), r=eq.Sym("r"), X=Xs)
        return grad_prod_step(
            ctx, why, dW,
            lambda r: [X[i][r] for i in range(k)], lambda c: node_list(g, [(i, c) for i in range(k)]),
            lambda r, c: eq.Dot(eq.Col(Xs, str(r + 1)), eq.Col(S("d" + w), str(c + 1))), pick(dW),
            (eq.Dims(dm, k), eq.Dims(k, cols), eq.Dims(dm, cols)))

    return Shown(title, body)


DW_Q, DW_K, DW_V = weight_grad("Q"), weight_grad("K"), weight_grad("V")


# ---------------------------------------------------------------- the numerical check of one gradient entry

def gradcheck(w: str) -> Shown:
    """The numerical check of one entry of the first head's gradient of the weights *w* (W_Q): a step of its own
    between the backward pass and the update, with no matrix of its own. Its title and body take the first
    head's view of the training step, whose ``loss_moved(w, r, c, delta)`` is the loss of a fresh forward pass
    with that one weight moved."""

    def title(ctx, stage, head):
        dW = ctx.train_mat("d" + w, head)
        r, c = pick(dW)
        return eq.say("Numerical check of {entry}", entry=eq.Entry(dW.sym, str(r + 1), str(c + 1)))

    def body(ctx, stage, v) -> Body:
        return _gradcheck(ctx, v, w)

    return Shown(title, body, id="gradcheck")


def _gradcheck(ctx, v, w: str) -> Body:
    """The entry of dW the check picks (the largest), the loss with that one weight moved by ± h, their central
    difference against the backward pass's value."""
    P, dec = ctx.P, ctx.dec
    dWq = v.mat("d" + w)
    r, c = pick(dWq)
    g_num = dWq.num[r][c]
    g_exact = dWq.exact[r][c]
    chosen = None
    for h in (Fraction(1, 10), Fraction(1, 20), Fraction(1, 40)):
        lp, lm = v.loss_moved(w, r, c, h), v.loss_moved(w, r, c, -h)
        a, b = F.round_decimal(None, lp, P), F.round_decimal(None, lm, P)
        q = (Fraction(a) - Fraction(b)) / (2 * h)
        ok = abs(F.mp(q) - g_num) < Fraction(1, 2) * Fraction(1, 10**dec) and \
            F.round_decimal(q, None, dec) == F.round_decimal(g_exact, g_num, dec)
        chosen = (h, lp, lm, a, b, q, ok)
        if ok:
            break
    h, lp, lm, a, b, q, ok = chosen
    wsym = ctx.sym(w, v.head)
    went = eq.Entry(wsym, str(r + 1), str(c + 1))
    hs = eq.Sym("h")
    lines = [line(eq.Rel((eq.Call("L", (eq.Add((went, hs)),)), eq.dec(a)), (APPROX,))),
             line(eq.Rel((eq.Call("L", (eq.Add((went, eq.Neg(hs))),)), eq.dec(b)), (APPROX,)))]
    qn = eq.num(q) if F.terminating(q, P) else eq.dec(F.round_decimal(q, None, P))
    lines.append(line(eq.Rel((eq.Frac(eq.Add((eq.Call("L", (eq.Add((went, hs)),)), eq.Neg(eq.Call("L", (eq.Add((went, eq.Neg(hs))),))))),
                                      eq.Mul((eq.num(2), hs))),
                              eq.Frac(eq.Add((eq.dec(a), eq.Neg(eq.dec(b)))), eq.Mul((eq.num(2), eq.num(h)))), qn,
                              eq.dec(F.round_decimal(value_of(qn), None, dec))), (APPROX, rel(type(qn) is eq.Num), APPROX))))
    dsym = dWq.sym
    it, op = [eq.Entry(dsym, str(r + 1), str(c + 1)), dWq.carried(r, c)], [APPROX]
    answer(ctx, it, op, dWq, r, c)
    lines.append(line(eq.Rel(tuple(it), tuple(op))))
    dent = eq.Entry(dsym, str(r + 1), str(c + 1))
    quotient, backward = eq.NumText(qn), eq.NumText(dWq.carried(r, c))
    if ok:
        verdict = eq.say("The two agree to {places} places ({quotient} from the loss, {backward} from the backward pass): "
                         "the backward pass is right for this entry.", places=str(dec), quotient=quotient, backward=backward)
    else:
        verdict = eq.say("With {h} the difference quotient ({quotient}) and the backward pass ({backward}) still differ at "
                         "{places} places: the loss curves too much here for a hand check with {carried}-place losses (a "
                         "smaller {H} needs more places).", h=is_(H, eq.num(h)), quotient=quotient, backward=backward,
                         places=str(dec), carried=str(P), H=H)
    if ok:
        why_h = eq.say("This {H} is small enough that the quotient matches to {places} places, and large enough that the "
                       "losses, carried to {carried} places, do not lose those places in the subtraction.", H=H,
                       places=str(dec), carried=str(P))
    else:
        why_h = eq.say("Here no {H} of {h1}, {h2} or {h3} gives a match at {places} places with losses carried to {carried} "
                       "places (see below).", H=H, h1=eq.NumText(eq.dec(Decimal("0.1"))),
                       h2=eq.NumText(eq.dec(Decimal("0.05"))), h3=eq.NumText(eq.dec(Decimal("0.025"))),
                       places=str(dec), carried=str(P))
    why = eq.say("Check one gradient entry numerically, the way a program's gradients are tested: nudge that one weight up "
                 "and down by {h}, run the forward pass twice, and divide the change in the loss by {twice} (a central "
                 "difference). {why_h}", h=is_(H, eq.num(h)), twice=eq.Mul((eq.num(2), H)), why_h=why_h)
    return Body(why, lines, [verdict, eq.say("The backward pass gives {formula}.",
                                             formula=is_(dent, dWq.fixed(r, c, dec), op=APPROX))],
                precision=P, audit_name="gradient check")


GRADCHECK = gradcheck("W_Q")


# ---------------------------------------------------------------- the update and the loss after it

def update(w: str) -> Shown:
    """W′ = W − lr·dW for the weights *w* (W_Q, W_K, W_V): the stage's inputs (the weights, their gradient)."""

    def title(ctx, stage, head):
        lrs = eq.Sym("lr", upright=True)
        step = eq.Neg(eq.Mul((lrs, ctx.sym("d" + w, head))))
        return eq.say("Update: {formula}", formula=is_(ctx.sym(w, head, prime=True), eq.Add((ctx.sym(w, head), step))))

    def body(ctx, stage, v) -> Body:
        hh, P, lr = v.head, ctx.P, ctx.p.train.lr
        Wm, g, new = v.input(stage.inputs[0]), v.mat(stage.inputs[1]), v.mat(stage.id)
        lrs = eq.Sym("lr", upright=True)
        lines = []
        for i, j in entries(ctx.checks, len(g.rows), len(g.cols), pick(g)):
            it = [eq.Entry(new.sym, str(i + 1), str(j + 1)),
                  eq.Add((eq.Entry(ctx.sym(w, hh), str(i + 1), str(j + 1)), eq.Neg(eq.Mul((lrs, eq.Entry(ctx.sym("d" + w, hh), str(i + 1), str(j + 1))))))),
                  eq.Add((eq.num(Wm[i][j]), eq.Neg(eq.Mul((eq.num(lr), g.carried(i, j)))))), new.carried(i, j)]
            lines.append(line(eq.Rel(tuple(it), (EQ, rel(not has_dec(it[2])), rel_to(it[2], new, i, j)))))
        why = eq.say("One step of gradient descent with {lr}: move every weight against its gradient, a little ({lrs} "
                     "times the gradient). The new weights are carried to {places} places.", lr=is_(lrs, eq.num(lr)),
                     lrs=lrs, places=str(P))
        return Body(why, lines, precision=P)

    return Shown(title, body)


W_Q_NEW, W_K_NEW, W_V_NEW = update("W_Q"), update("W_K"), update("W_V")


def _after(ctx, v):
    """The fresh forward pass's output Z′ as shown (rounded to the carried places), the loss worked from it (a
    tree) and its value."""
    after, T, P = v.after_output, ctx.p.train.target, ctx.P
    n, m = len(after), len(after[0])
    zs = [[eq.dec(F.round_decimal(None, after[i][c][0], P)) for c in range(m)] for i in range(n)]
    terms = tuple(eq.Pow(_diff(zs[i][c], T[i][c]) if T[i][c] else zs[i][c], eq.num(2)) for i in range(n) for c in range(m))
    expr = eq.Mul((_HALF, eq.Add(terms)))
    return zs, expr, eq.rational_value(expr)


def _loss_after_values(ctx, stage, v):
    """L′'s 50-digit value (the point pass's) and the value a hand carries: the loss of Z′ as shown, rounded."""
    return [[v.loss_after]], [[ctx.approx(F.round_decimal(_after(ctx, v)[2], None, ctx.P))]]


def _loss_after(ctx, stage, v) -> Body:
    P, lr = ctx.P, ctx.p.train.lr
    zs, expr, shown_after = _after(ctx, v)
    la, loss = v.mat("loss_after"), v.mat("loss")
    items = [la.sym, expr, la.carried(0, 0)]
    ops = [EQ, rel(shown_after == la.hand[0][0])]
    answer(ctx, items, ops, la, 0, 0)
    zrow = [line(eq.Rel((eq.Sym("z", sub=ctx.lab[i], prime=True), eq.Vec(tuple(zs[i]))), (APPROX,)), f"row {ctx.p.tokens[i]}")
            for i in range(len(zs))]
    lt = is_(loss.sym, loss.carried(0, 0), op=APPROX)
    lat = is_(la.sym, la.carried(0, 0), op=APPROX)
    lrs = eq.Sym("lr", upright=True)
    if la.num[0][0] < loss.num[0][0]:
        verdict = eq.say("The loss went down, from {before} to {after}: the step moved the output towards the target.",
                         before=lt, after=lat)
    else:
        verdict = eq.say("The loss did not go down: {before} before, {after} after. The learning rate {lr} is too large "
                         "for this problem: the step overshot. A smaller {lrs} (try half) would lower it.", before=lt,
                         after=lat, lr=is_(lrs, eq.num(lr)), lrs=lrs)
    hs_ = [eq.Sym(f"W_{w}", prime=True) for w in "QKV"]
    why = eq.say("Run the forward pass again ({Q}, {K}, {V}, scores, softmax, {Z}) with the new {WQ}, {WK}, {WV} ({rule}, "
                 "not rounded); its output {Zp}, carried to {places} places, and the loss from it:", Q=eq.Sym("Q"),
                 K=eq.Sym("K"), V=eq.Sym("V"), Z=eq.Sym("Z"), WQ=hs_[0], WK=hs_[1], WV=hs_[2],
                 rule=is_(eq.Sym("W", prime=True), eq.Add((eq.Sym("W"), eq.Neg(eq.Mul((lrs, eq.matrix_sym("dW"))))))),
                 Zp=eq.Sym("Z", prime=True), places=str(P))
    return Body(why, zrow + [line(eq.Rel(tuple(items), tuple(ops)))], [verdict], precision=P, audit_name="new loss")


LOSS_AFTER = Shown(lambda ctx, stage, head: eq.say("New loss: a fresh forward pass with the updated weights"), _loss_after,
                   values=_loss_after_values)
