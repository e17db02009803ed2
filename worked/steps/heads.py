"""The steps after several heads: their outputs side by side (concat), then the output projection W_O."""
from __future__ import annotations

from .. import eq
from ..i18n import tr as _
from ..lines import Body, Shown, dot_line, entries, is_, shapes
from .code import show as _show


def _concat_title(ctx, stage, head):
    return eq.say("Concatenate the heads: {formula}", formula=eq.Call("concat", tuple(ctx.sym("Z", k) for k in range(1, len(ctx.p.heads) + 1))))


def _concat(ctx, stage, v) -> Body:
    concat = v.mat("concat")
    h, n = len(ctx.p.heads), concat.shape[0]
    dv = concat.shape[1] // h
    i = eq.Sym("i")
    if h == 1:      # a Transformer block's one head, as the heads' combination
        why = eq.say("With one head, concat is that head's output {Z} as it is; {W_O} then projects it back to d_model "
                     "columns.", Z=ctx.sym("Z", 1), W_O=eq.Sym("W_O"))
    else:
        why = eq.say("Put the {count} heads' outputs side by side: row {i} of the result is token {i}'s row of every "
                     "head, one after another, so each token now carries what every head found.", count=str(h), i=i)
    return Body(why, [], shape_eq=eq.Rel((eq.Mul((eq.num(h), eq.Dims(n, dv))), eq.Dims(n, h * dv)), (eq.TO,)))


def _concat_numpy(nb, stage, h):
    zs = ", ".join(f"Z{i}" for i in range(1, len(nb.p.heads) + 1))
    return "concat", f"concat = np.hstack([{zs}])   # " + _("the heads' outputs side by side") + "\n" + _show("concat")


CONCAT = Shown(_concat_title, _concat, _concat_numpy)


def _output_title(ctx, stage, head):
    return eq.say("Output projection: {formula}", formula=is_(eq.Sym("Z"), eq.Mul((eq.Sym("concat", upright=True), eq.Sym("W_O")))))


def _output(ctx, stage, v) -> Body:
    concat, Wo, out = v.mat("concat"), v.input("W_O"), v.mat("Z")
    n, hd = concat.shape
    m = len(Wo[0])
    P = ctx.P
    lines = []
    for i, j in entries(ctx.checks, n, m, (0, 0)):
        lines.append(dot_line(ctx, eq.Entry(eq.Sym("Z"), ctx.lab[i], str(j + 1)),
                              eq.Dot(eq.Sym("concat", sub=ctx.lab[i], upright=True), eq.Col(eq.Sym("W_O"), str(j + 1))),
                              [concat.carried(i, k) for k in range(hd)], [Wo[t][j] for t in range(hd)], out, i, j,
                              answer_=True))
    wo, zcw = eq.Sym("W_O"), is_(eq.Sym("Z"), eq.Mul((eq.Sym("concat", upright=True), eq.Sym("W_O"))))
    why = eq.say("Project the concatenated heads with {W_O}: {formula}. Each entry is the dot product of a token's "
                 "concatenated row with a column of {W_O} (concat values carried to {places} places where they are not "
                 "exact).", W_O=wo, formula=zcw, places=str(P))
    return Body(why, lines, shape_eq=shapes(eq.Dims(n, hd), eq.Dims(hd, m), eq.Dims(n, m)), precision=P)


def _output_numpy(nb, stage, h):
    return "Z", "Z = concat @ W_O\n" + _show("Z")


OUTPUT = Shown(_output_title, _output, _output_numpy, id="output")
