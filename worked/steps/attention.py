"""A head's steps: the projections Q, K, V (of the input a stage's declaration names: X, or X_enc in
cross-attention), the scores, their scaling, the softmax and Z = A·V. Each stage's step is a :class:`Shown`:
its title ``title(ctx, stage, head)``, its body ``body(ctx, stage, view)`` (*view*: the head's matrices and
inputs, see :class:`worked.solver.View`) and its NumPy code ``numpy(nb, stage, h)`` (*nb*: the notebook being
written, *h* the head's suffix)."""
from __future__ import annotations

from fractions import Fraction

from .. import eq
from ..i18n import N_
from .. import numfmt as F
from ..i18n import tr as _
from ..i18n import translate
from ..lines import (APPROX, EQ, I, J, X, XE, Body, Shown, dot_line, entries, has_dec, is_, line, rel,
                     rounds_to_answer, row_sum_line, shapes, tr, value_of)
from .code import row_sums, softmax_code
from .code import show as _show


# ---------------------------------------------------------------- Q, K, V = X·W

def _who(ctx, source: str) -> str:
    """Whose rows the input *source* has: a token's, or in cross-attention a decoder's or an encoder's."""
    if source == "X_enc":
        return "encoder token"
    return "decoder token" if ctx.p.cross else "token"


#: the projection's explanation by whose rows its input has (each a whole sentence for the catalogues)
_PROJECTION_WHY = {
    "token": N_("Multiply {X} by {W}: row {i} of {R} is token {i}'s row of {X} times {W}, the {what} ({role}). Each entry "
                "is the dot product of a row of {X} with a column of {W}."),
    "decoder token": N_("Multiply {X} by {W}: row {i} of {R} is decoder token {i}'s row of {X} times {W}, the {what} "
                        "({role}). Each entry is the dot product of a row of {X} with a column of {W}."),
    "encoder token": N_("Multiply {X} by {W}: row {i} of {R} is encoder token {i}'s row of {X} times {W}, the {what} "
                        "({role}). Each entry is the dot product of a row of {X} with a column of {W}."),
}


#: a projection's title word (its *what* capitalised), marked for the catalogues
_TITLES = {"queries": N_("Queries"), "keys": N_("Keys"), "values": N_("Values")}


def projection(what: str, role: str, comment: str) -> Shown:
    """Q, K or V = X·W (the input the stage takes: X, or X_enc): *what* it is (queries), *role* (what each token
    is looking for), *comment* (its NumPy line's)."""

    def title(ctx, stage, head):
        return eq.say("{what}: {formula}", what=eq.say(_TITLES[what]),
                      formula=is_(ctx.sym(stage.id, head), eq.Mul((eq.Sym(stage.inputs[0]), ctx.sym(stage.inputs[1], head)))))

    def body(ctx, stage, v):
        which, source = stage.id, stage.inputs[0]
        A, W, R = v.input(source), v.input(stage.inputs[1]), v.mat(which)
        head = v.head
        n, dm, dk = len(A), len(W), len(W[0])
        s = ctx.sym(which, head)
        w = ctx.sym(stage.inputs[1], head)
        Xs, lab, who = eq.Sym(source), ctx.labels(R.rows), _who(ctx, source)
        lines = []
        for i, j in entries(ctx.checks, n, dk, (0, 0)):
            col = [W[t][j] for t in range(dm)]
            lines.append(dot_line(ctx, eq.Entry(s, lab[i], str(j + 1)),
                                  eq.Dot(eq.Sym("x", sub=lab[i]), eq.Col(w, str(j + 1))), A[i], col, R, i, j))
        why = eq.say(_PROJECTION_WHY[who], X=Xs, W=w, i=I, R=s, what=eq.say(what), role=eq.say(role))
        if ctx.p.cross and source == "X":
            why = eq.prose(why, eq.say(" Cross-attention: the queries come from the decoder side {X}, the keys and values "
                                       "from the encoder side {X_enc}.", X=X, X_enc=XE))
        elif ctx.p.cross:
            why = eq.prose(why, eq.say(" Cross-attention: the queries come from the decoder side {X}, the keys and values "
                                       "from the encoder side {X_enc}, so {name} has one row per encoder token.", X=X,
                                       X_enc=XE, name=s.name))
        return Body(why, lines, shape_eq=shapes(eq.Dims(n, dm), eq.Dims(dm, dk), eq.Dims(n, dk)))

    def numpy(nb, stage, h):
        v = stage.id + h
        return v, f"{v} = {stage.inputs[0]} @ {stage.inputs[1]}{h}     # {translate(comment)}\n" + _show(v)

    return Shown(title, body, numpy)


# ---------------------------------------------------------------- scores = Q·Kᵀ

def _scores_title(ctx, stage, head):
    qkt = is_(ctx.sym("scores", head), eq.Mul((ctx.sym("Q", head), tr(ctx.sym("K", head)))))
    if ctx.p.mask == "causal":
        return eq.say("Scores: {formula} with the causal mask", formula=qkt)
    return eq.say("Scores: {formula}", formula=qkt)


def _scores(ctx, stage, v) -> Body:
    head, Q, K, raw = v.head, v.mat("Q"), v.mat("K"), v.raw
    n, dk = Q.shape
    m = K.shape[0]
    Sf = raw.num
    s = ctx.sym("scores", head)
    causal = ctx.p.mask == "causal"
    r0 = n - 1 if causal else 0
    best = max(range(r0 + 1 if causal else m), key=lambda j: (Sf[r0][j], -j))
    lines = []
    for i, j in entries(ctx.checks, n, m, (r0, best)):
        lines.append(dot_line(ctx, eq.Entry(s, ctx.lab[i], ctx.lab_kv[j]),
                              eq.Dot(ctx.sym("q", head, sub=ctx.lab[i]), ctx.sym("k", head, sub=ctx.lab_kv[j])),
                              [Q.carried(i, t) for t in range(dk)], [K.carried(j, t) for t in range(dk)], raw, i, j))
    qkt = is_(s, eq.Mul((ctx.sym("Q", head), tr(ctx.sym("K", head)))))
    if ctx.p.cross:
        why = eq.say("Match every decoder query with every encoder key: {formula}. Row {i}, column {j} is the dot product "
                     "of decoder token {i}'s query with encoder token {j}'s key; the bigger it is, the more decoder token "
                     "{i} will attend to encoder token {j}. The scores are {n} × {m}: one row per decoder token, one "
                     "column per encoder token.", formula=qkt, i=I, j=J, n=str(n), m=str(m))
    else:
        why = eq.say("Match every query with every key: {formula}. Row {i}, column {j} is the dot product of token {i}'s "
                     "query with token {j}'s key; the bigger it is, the more token {i} will attend to token {j}.",
                     formula=qkt, i=I, j=J)
    notes = []
    if ctx.checks == "one" and m > 1:
        notes.append(eq.say("The entry expanded is the largest score in the row of “{token}”: “{token}” will attend most "
                            "to “{other}”.", token=ctx.p.tokens[r0], other=ctx.toks_kv[best]))
    if causal:
        notes.append(eq.say("Causal mask: a token may attend only to itself and to earlier tokens, so every score above "
                            "the diagonal (the key of a later token) is set to −∞. After the softmax its weight is "
                            "exactly 0."))
    return Body(why, lines, notes, shapes(eq.Dims(n, dk), eq.Dims(dk, m), eq.Dims(n, m)))


def _scores_numpy(nb, stage, h):
    v = "scores" + h
    if nb.p.mask == "causal":
        src = (f"{v} = Q{h} @ K{h}.T        # " + _('K.T means "K transposed": rows turned into columns') + "\n"
               f"{v} = np.where(mask, -np.inf, {v})   # " + _("a word may not look at later words") + "\n")
    else:
        src = f"{v} = Q{h} @ K{h}.T        # " + _('K.T means "K transposed": rows turned into columns') + "\n"
    return v, src + _show(v)


SCORES = Shown(_scores_title, _scores, _scores_numpy)


# ---------------------------------------------------------------- scaling

def _scaled_title(ctx, stage, head):
    s, sc, scale = ctx.sym("scaled", head), ctx.sym("scores", head), ctx.p.scale
    if scale == "none":
        return eq.say("Scaling: none ({formula})", formula=is_(s, sc))
    return eq.say("Scaling: {formula}", formula=is_(s, eq.Frac(sc, eq.Sqrt(eq.Sym("d_k")) if scale == "sqrt" else F.node(ctx.factor))))


def _scaled(ctx, stage, v) -> Body:
    head, scores, scaled = v.head, v.mat("scores"), v.mat("scaled")
    factor, factor_num = ctx.factor, ctx.factor_num
    pr, n, P = ctx.p, scores.shape[0], ctx.P
    s = ctx.sym("scaled", head)
    lines, notes = [], []
    if pr.scale == "none":
        why = eq.say('The problem sets scale = "none": the scores go into the softmax as they are, so the scaled scores '
                     'equal the scores.')
        return Body(why, [])
    fnode = F.node(factor)
    if pr.scale == "sqrt":
        dk = pr.d_k
        sqrt_dk = eq.Sqrt(eq.num(dk))
        items, ops = [eq.Sqrt(eq.Sym("d_k")), sqrt_dk], [EQ]
        if fnode != sqrt_dk:
            items.append(fnode)
            ops.append(EQ)
        if not factor.is_Integer:
            items.append(eq.dec(F.round_decimal(factor, factor_num, P)))
            ops.append(APPROX)
        lines.append(line(eq.Rel(tuple(items), tuple(ops))))
        why = eq.say("Divide every score by {formula}: with long vectors, dot products grow large and the softmax would "
                     "give nearly all the weight to one token. Scaling keeps the weights calm; the original Transformer "
                     "does exactly this.", formula=is_(*items[:2 if fnode == sqrt_dk else 3]))
    else:
        why = eq.say("The problem sets {formula}: divide every score by {factor}.",
                     formula=is_(eq.Sym("scale", upright=True), F.node(pr.scale)), factor=fnode)
    causal = pr.mask == "causal"
    r0 = n - 1 if causal else 0
    m = scores.shape[1]
    best = max(range(r0 + 1 if causal else m), key=lambda j: (float(scores.num[r0][j]), -j))
    for i, j in entries(ctx.checks, n, m, (r0, best), allowed=lambda i, j: not scaled.is_masked(i, j)):
        lhs = eq.Entry(s, ctx.lab[i], ctx.lab_kv[j])
        carried = scores.carried(i, j)
        items, ops = [lhs, eq.Frac(carried, fnode)], [rel(scores.is_carried_exact(i, j))]
        h = scaled.hand[i][j]
        if isinstance(h, Fraction):          # a number: exact (2/2 = 1), or the quotient of the shown numbers, rounded
            items.append(scaled.carried(i, j))
            ops.append(rel(type(h) is Fraction))
        else:                                # exact display: the exact form (√2) is carried, its decimal shown
            items.append(scaled.exact_node(i, j))
            ops.append(EQ)
            items.append(scaled.node(i, j, P))
            ops.append(APPROX)
        lines.append(line(eq.Rel(tuple(items), tuple(ops))))
    if causal:
        notes.append(eq.say("Masked entries stay −∞: −∞ divided by a positive number is still −∞."))
    return Body(why, lines, notes, precision=P)


def _scaled_numpy(nb, stage, h):
    v, div = "scaled" + h, nb.scale_code()
    if div is None:
        return v, (f"{v} = scores{h}           # "
                   + _('scale = "none": the scores go into the softmax as they are') + "\n" + _show(v))
    return v, f"{v} = scores{h} / {div}           # " + _("calm the numbers down") + "\n" + _show(v)


SCALED = Shown(_scaled_title, _scaled, _scaled_numpy)


# ---------------------------------------------------------------- softmax

def _weights_title(ctx, stage, head):
    return eq.say("Attention weights: {A} = softmax of each row", A=ctx.sym("A", head))


def _weights(ctx, stage, v) -> Body:
    """The exact forms from the Exact pass's softmax of each row (:class:`worked.attention.ExactRow`), every
    decimal in the lines from the same rows as a hand works them (:class:`worked.attention.HandRow`: the
    exponents, each e^x as carried and their total)."""
    head, scaled, weights = v.head, v.mat("scaled"), v.mat("weights")
    rows, hand_rows = v.exact.softmax, v.hand.softmax
    (n, m), P = scaled.shape, ctx.P
    a = ctx.sym("A", head)
    sc = ctx.sym("scaled", head)
    lines: list = []
    shifted_rows: list[str] = []
    for i in range(n):
        r, hr = rows[i], hand_rows[i]
        js = hr.js
        g = f"row {ctx.p.tokens[i]}"
        # 1. the row of scaled scores, as carried
        xs = [scaled.carried(i, j) for j in range(m)]      # the exponents as the lines show them
        items, ops = [eq.Entry(sc, ctx.lab[i], eq.ALL), eq.Vec(tuple(xs))], [EQ]
        if not ctx.decimal:
            dec_row = [xs[j] if scaled.is_neg_inf(i, j) else scaled.node(i, j, P) for j in range(m)]
            if dec_row != xs:
                items.append(eq.Vec(tuple(dec_row)))
                ops.append(APPROX)
        else:
            ops = [rel(all(scaled.is_carried_exact(i, j) for j in js))]
        lines.append(line(eq.Rel(tuple(items), tuple(ops)), g))
        # 2. every e^x with its value (of x − m, m the row's smallest score, when e^x itself would be too small
        #    or too large to carry at P places: e^(x − m) gives the same weights)
        m_idx = hr.low
        if hr.shift:
            shifted_rows.append(ctx.p.tokens[i])
        e_shown = {}
        for j in range(m):
            if j not in js:
                lines.append(line(eq.Rel((eq.Exp(eq.neg_inf()), eq.num(0)), (EQ,)), g))
                continue
            e = hr.exps[j]
            e_shown[j] = F.hand_node(e, P)
            x = xs[j]
            items, ops = [], []
            if hr.shift:
                items.append(eq.Exp(eq.Add((x, eq.Neg(xs[m_idx])))))
                d = hr.exponent[j]
                if isinstance(d, Fraction):          # the difference of two numbers shown, exactly
                    x = F.hand_node(d, P)
                elif m_idx == r.low:                 # exact display: the exact difference (√2/2)
                    x = F.node(r.shifted[j])
                else:
                    x = F.node(scaled.exact[i][j] - scaled.exact[i][m_idx])
                ops.append(EQ)
            items += [eq.Exp(x), e_shown[j]]
            ops.append(rel(type(e) is Fraction))
            lines.append(line(eq.Rel(tuple(items), tuple(ops)), g))
        # 3. the row total, the sum of the values as shown
        total_nodes = tuple(e_shown[j] for j in js)
        rounded = sum(type(x) is eq.Dec for x in total_nodes)
        total_node = F.hand_node(hr.total, P)
        if rounded:
            total_node = eq.dec(total_node.value, ulps=rounded)
        if len(js) > 1:
            lines.append(line(eq.Rel((eq.Sym(N_("sum"), upright=True, word=True), eq.Add(total_nodes), total_node),
                                     (rel(not rounded), EQ)), g))
        # 4. each weight: exact, simplified, the quotient of the shown values, and that quotient as carried
        den_full = None if ctx.decimal else F.node(r.total)   # like terms collected: 2e^(√2)
        for j in range(m):
            lhs = eq.Entry(a, ctx.lab[i], ctx.lab_kv[j])
            if j not in js:
                lines.append(line(eq.Rel((lhs, eq.Frac(eq.Exp(eq.neg_inf()), total_node), eq.num(0)), (EQ, EQ)), g))
                continue
            items, ops = [lhs], []
            if not ctx.decimal:
                full = eq.Frac(eq.Exp(ex_j := F.node(scaled.exact[i][j])), den_full if len(js) > 1 else eq.Exp(ex_j))
                items.append(full)
                ops.append(EQ)
                simple = F.node(weights.exact[i][j])
                if simple != full:
                    items.append(simple)
                    ops.append(EQ)
            h = weights.hand[i][j]
            if len(js) > 1:
                quotient = Fraction(hr.exps[j]) / Fraction(hr.total)
                items.append(eq.Frac(e_shown[j], total_node))
                ops.append(rel(not rounded))
                # the quotient as carried (exact display: a weight carried exactly, such as 1/3, shows its decimal)
                wn = eq.dec(F.round_decimal(quotient, None, P)) if type(h) is Fraction and not ctx.decimal \
                    else weights.carried(i, j)
                if wn != items[-1]:
                    items.append(wn)
                    ops.append(rel(value_of(wn) == quotient))
            elif ctx.decimal:
                items.append(weights.carried(i, j))
                ops.append(EQ)
            lines.append(line(eq.Rel(tuple(items), tuple(ops)), g))
        # 5. the row sums to 1
        if len(js) > 1:
            rs = eq.Sum(eq.Entry(a, ctx.lab[i], "j"), "j")
            if ctx.decimal:
                lines.append(row_sum_line(rs, [weights.carried(i, j) for j in js], 1, P, g))
            else:
                num_sum = eq.Add(tuple(F.node(r.numer[j]) for j in r.js))
                lines.append(line(eq.Rel((rs, eq.Frac(num_sum, F.node(r.D)), eq.num(1)), (EQ, EQ)), g))
    ex_, em_ = eq.Exp(eq.Sym("x")), eq.Exp(eq.Sym("m"))
    if ctx.decimal:
        why = eq.say("Softmax each row: take {ex} of every scaled score (always positive), then divide by the row's total, "
                     "so the weights are positive and add up to 1. Values are carried to {places} places, so each line can "
                     "be checked by hand.", ex=ex_, places=str(P))
    else:
        why = eq.say("Softmax each row: take {ex} of every scaled score (always positive), then divide by the row's total, "
                     "so the weights are positive and add up to 1. Top and bottom of each fraction are divided by e to the "
                     "row's smallest score, which gives the simpler exact form. Values are carried to {places} places, so "
                     "each line can be checked by hand.", ex=ex_, places=str(P))
    notes = []
    if shifted_rows:
        quoted = ", ".join(f"“{t}”" for t in shifted_rows)
        rule = is_(eq.Exp(eq.Add((eq.Sym("x"), eq.Neg(eq.Sym("m"))))), eq.Frac(ex_, em_))
        several = N_("In the rows {rows}, {ex} is taken of each score minus the row's smallest score {m}: {rule}, so top "
                     "and bottom of every weight are divided by the same {em} and the weights do not change, while the "
                     "numbers stay easy to carry.")
        one = N_("In the row {rows}, {ex} is taken of each score minus the row's smallest score {m}: {rule}, so top and "
                 "bottom of every weight are divided by the same {em} and the weights do not change, while the numbers "
                 "stay easy to carry.")
        notes.append(eq.say(several if len(shifted_rows) > 1 else one, rows=quoted, ex=ex_, m=eq.Sym("m"), rule=rule,
                            em=em_))
    if ctx.p.mask == "causal":
        notes.append(eq.say("Masked scores are −∞ and {rule}, so a token gives exactly 0 weight to every later token.",
                            rule=is_(eq.Exp(eq.neg_inf()), eq.num(0))))
    return Body(why, lines, notes, precision=P)


def once(nb, name: str, code: str) -> str:
    """*code* (a helper's definition, such as ``softmax``) the first time a notebook's step asks for *name*, then ""."""
    if name in nb.defined:
        return ""
    nb.defined.add(name)
    return code


def _weights_numpy(nb, stage, h):
    v = "A" + h
    src = once(nb, "softmax", softmax_code())
    return v, src + f"{v} = softmax(scaled{h})\n" + _show(v) + "\n" + row_sums(v)


WEIGHTS = Shown(_weights_title, _weights, _weights_numpy)


# ---------------------------------------------------------------- Z = A·V

def _z_title(ctx, stage, head):
    return eq.say("Output: {formula}", formula=is_(ctx.sym("Z", head), eq.Mul((ctx.sym("A", head), ctx.sym("V", head)))))


def _z(ctx, stage, v) -> Body:
    head, weights, V, Z = v.head, v.mat("weights"), v.mat("V"), v.mat("Z")
    m, dv = V.shape
    n = weights.shape[0]
    P = ctx.P
    z, a, vs = ctx.sym("z", head), ctx.sym("A", head), ctx.sym("v", head)
    Zs, As, Vs = ctx.sym("Z", head), ctx.sym("A", head), ctx.sym("V", head)
    lines = []
    if ctx.decimal:
        # Part 10 style: one entry at a time, a row of A times a column of V
        for i, c in entries(ctx.checks, n, dv, (n - 1 if n > 1 else 0, 0)):
            js = [j for j in range(m) if weights.exact[i][j] != 0]
            lines.append(dot_line(ctx, eq.Entry(Zs, ctx.lab[i], str(c + 1)),
                                  eq.Dot(eq.Entry(As, ctx.lab[i], eq.ALL), eq.Col(Vs, str(c + 1))),
                                  [weights.carried(i, j) for j in js], [V.carried(j, c) for j in js], Z, i, c,
                                  answer_=True))
    else:
        for i in range(n):
            g = f"row {ctx.p.tokens[i]}"
            js = [j for j in range(m) if weights.exact[i][j] != 0]
            wn = {j: weights.carried(i, j) for j in js}
            vrow = {j: eq.Vec(tuple(V.carried(j, c) for c in range(dv))) for j in js}
            named = eq.Add(tuple(eq.Mul((eq.Entry(a, ctx.lab[i], ctx.lab_kv[j]), eq.Sym("v", sub=ctx.lab_kv[j], head=vs.head)))
                                 for j in js))
            zi = eq.Sym("z", sub=ctx.lab[i], head=z.head)
            lines.append(line(eq.Rel((zi, named), (EQ,)), g))
            terms = eq.Add(tuple(eq.Mul((wn[j], vrow[j])) for j in js))
            exact_in = all(weights.is_carried_exact(i, j) and all(V.is_carried_exact(j, c) for c in range(dv)) for j in js)
            mid = eq.Vec(tuple(Z.carried(i, c) for c in range(dv)))
            shown = [sum((value_of(wn[j]) * value_of(vrow[j].items[c]) for j in js), Fraction(0)) for c in range(dv)]
            items = [zi, terms, mid]
            ops = [rel(exact_in), rel(all(shown[c] == Z.hand[i][c] for c in range(dv)))]
            if all(rounds_to_answer(Z, i, c, ctx.dec) for c in range(dv)):
                fin = eq.Vec(tuple(Z.fixed(i, c, ctx.dec) for c in range(dv)))
                if [Fraction(x.value) for x in fin.items] != [value_of(x) for x in mid.items] or \
                        has_dec(mid) and ctx.P != ctx.dec:
                    items.append(fin)
                    ops.append(rel(ops[-1] == EQ and all(F.exact_at(Z.exact[i][c], ctx.dec) and Z.is_carried_exact(i, c)
                                                         for c in range(dv))))
            lines.append(line(eq.Rel(tuple(items), tuple(ops)), g))
    zav = is_(Zs, eq.Mul((As, Vs)))
    why = eq.say("Blend the values: {formula}. Each token's new vector is a weighted blend of every token's value row, "
                 "using its own row of {A} as the recipe. Weights and values are carried to {places} places.",
                 formula=zav, A=As, places=str(P))
    notes = []
    if ctx.p.mask == "causal":
        notes.append(eq.say("Masked tokens have weight 0 and drop out of the blend."))
    return Body(why, lines, notes, shapes(eq.Dims(n, m), eq.Dims(m, dv), eq.Dims(n, dv)), P)


def _z_numpy(nb, stage, h):
    v = "Z" + h
    return v, f"{v} = A{h} @ V{h}\n" + _show(v)


Z = Shown(_z_title, _z, _z_numpy)
QUERIES = projection(N_("queries"), N_("what each token is looking for"), N_("queries: what each word is looking for"))
KEYS = projection(N_("keys"), N_("what each token offers to be matched against"), N_("keys:    what each word can offer"))
VALUES = projection(N_("values"), N_("what each token passes on when another token attends to it"),
                    N_("values:  what each word passes on"))
