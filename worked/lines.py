"""The shared pieces of the worked steps' lines, which every stage's step builder (:mod:`worked.steps`) uses:
the context of a solution being shown (:class:`Ctx`), a dot product worked out (:func:`dot_line`), a row's
sum (:func:`row_sum_line`), the answer after a carried value (:func:`answer`), the entries a "check" expands
(:func:`entries`, :func:`pick`), a product step of the backward pass (:func:`grad_prod_step`), and what a
step builder returns (:class:`Body`).

A line is a pair (tree, group): a :class:`worked.eq.Rel` and the group it is shown in (a softmax row), or
None; the solver makes each a :class:`worked.model.Line`. This module imports only the trees and the number
formats, so the stages (:mod:`worked.stages`) can name their steps' builders without a cycle.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from collections import namedtuple
from typing import Any

from . import eq
from . import numfmt as F

EQ, APPROX = eq.EQ, eq.APPROX

# prose with its math as trees (titles, explanations, notes): see worked.eq.Prose
p = eq.prose
X, XE, I, J, H = eq.Sym("X"), eq.Sym("X_enc"), eq.Sym("i"), eq.Sym("j"), eq.Sym("h")


class Body:
    """What a stage's step builder returns: the explanation, the lines (pairs (tree, group)), the notes, the
    shapes as a tree, the places of the intermediate values and what a failed audit names (*audit_name*, else
    the step's title). The solver adds the id, title, result, head. A plain class (a NamedTuple's class is built
    at import, for every ``worked solve``)."""

    __slots__ = ("why", "lines", "notes", "shape_eq", "precision", "audit_name")

    def __init__(self, why: Any, lines: list, notes: list | None = None, shape_eq: Any = None, precision: int = 0,
                 audit_name: str | None = None):
        self.why, self.lines, self.notes, self.shape_eq = why, lines, [] if notes is None else notes, shape_eq
        self.precision, self.audit_name = precision, audit_name


class Shown(namedtuple("Shown", (
        "title",            # Any
        "body",             # Any
        "numpy",            # Any = None
        "id",               # str | None = None
        "values",           # Any = None: values(ctx, stage, view) → (50-digit values, values a hand carries) of a matrix
                            #                         the Exact pass has no closed form of (the loss after the update)
), defaults=(None, None, None))):
    """A stage's worked step, declared with the stage (:mod:`worked.stages`): its title ``title(ctx, stage,
    head)`` (known before any line is built, so a reader of the headings alone never builds the lines), its
    body ``body(ctx, stage, view)`` (a :class:`Body`; *view*: the matrices and inputs it reads, see
    :mod:`worked.solver`), its NumPy code for the notebook ``numpy(nb, stage, h)`` → (the variable it defines,
    the code), or None; *id*: the step's id when it is not the stage's (the output projection's "output")."""

    __slots__ = ()


class Ctx:
    """A solution being shown: the problem *p*, the checks ("one", "row", "all"), the row labels of the tokens
    (``lab``) and of the tokens the keys and values come from (``lab_kv``), whether several heads, the answer's
    places, the hand pass (*carry*, its places ``P``), decimal display; the Exact and point passes (``run``,
    ``nums``), the divisor of the scores (``factor``, ``factor_num``), and the training step's matrices."""

    def __init__(self, problem, checks: str, display: str, carry, run=None, nums=None, approx=Fraction):
        self.p = problem
        self.checks = checks
        self.lab = [eq.tok_label(t, i) for i, t in enumerate(problem.tokens)]
        # the rows the keys and values come from (the encoder side's tokens in cross-attention)
        self.lab_kv = [eq.tok_label(t, i) for i, t in enumerate(problem.tokens_kv)] if problem.cross else self.lab
        self.toks_kv = list(problem.tokens_kv)
        self.multi = problem.multihead
        self.dec = problem.decimals
        self.carry = carry
        self.decimal = display == "decimal"
        self.run, self.nums = run, nums
        self.factor = run.factor if run is not None else None
        self.factor_num = nums.factor[0] if nums is not None else None
        self.approx = approx    # marks a value a hand computed from rounded numbers (worked.attention.Approx)
        self.train_mats: dict = {}      # a training step's matrices by key, as they are made

    def train_mat(self, sid: str, head):
        """The training step's matrix *sid* of *head* (its key ``head1.`` + sid with several heads)."""
        return self.train_mats[(f"head{head}." if self.multi else "") + sid]

    @property
    def P(self) -> int:
        """Places for intermediate values (decimals + 2, or + 3: see :func:`worked.solver.hand_pass`)."""
        return self.carry.places

    def labels(self, rows: list) -> list:
        """The labels of a matrix's rows: its tokens' (the decoder's or the encoder's), else the rows as they are
        (a weight matrix's rows 1, 2, … are named by their number, even where there are as many tokens)."""
        if list(rows) == list(self.p.tokens):
            return self.lab
        if list(rows) == self.toks_kv:
            return self.lab_kv
        return list(rows)

    def sym(self, base: str, head: int | None, **kw) -> eq.Sym:
        """A per-head symbol: Q, or Q⁽¹⁾ with several heads; ``scaled``/``scores`` upright."""
        return eq.matrix_sym(base, head if self.multi else None, **kw)


def rel(a_exact: bool) -> str:
    return EQ if a_exact else APPROX


def is_(*items, op: str = EQ) -> eq.Rel:
    """``a = b (= c …)``, a formula inside prose."""
    return eq.Rel(tuple(items), (op,) * (len(items) - 1))


def tr(x) -> eq.Pow:
    """xᵀ"""
    return eq.Pow(x, eq.Sym("T"))


def line(rel_: eq.Rel, group: str | None = None) -> tuple:
    return (rel_, group)


def entries(checks: str, rows: int, cols: int, first: tuple[int, int], allowed=None):
    if checks == "one":
        out = [first]
    elif checks == "row":
        out = [(first[0], j) for j in range(cols)]
    else:
        out = [(i, j) for i in range(rows) for j in range(cols)]
    return [e for e in out if allowed is None or allowed(*e)]


def shown_input(ctx: Ctx, x: Fraction):
    """An input (or an exact product of inputs) in a worked line: exact, or in decimal display rounded
    to the carried places when it has more. Returns (node, exact)."""
    if not ctx.decimal or F.terminating(x, ctx.P):
        return eq.num(x), True
    return eq.dec(F.round_decimal(x, None, ctx.P)), False


def has_dec(node) -> bool:
    """True when a tree holds a rounded decimal (so it only approximates what it stands for)."""
    if type(node) is eq.Dec:
        return True
    if isinstance(node, (eq.Num, eq.Sym, eq.Inf, eq.Dims)):
        return False
    return any(has_dec(x) for x in node.children())


def shapes(*dims) -> eq.Rel:
    *ins, out = dims
    left = ins[0] if len(ins) == 1 else eq.Mul(tuple(ins))
    return eq.Rel((left, out), (eq.TO,))


def rounded_at(x: Fraction, places: int):
    """A value a hand computes from numbers shown at *places* places (a sum of them), as its decimal."""
    return eq.dec(Decimal(x.numerator * 10**places // x.denominator).scaleb(-places))


def dot_line(ctx: Ctx, lhs, mid, a, b, R, i: int, j: int, answer_: bool = False) -> tuple:
    """``lhs = mid = [a]·[b] = a1·b1 + … = result``: *a*, *b* Fractions (inputs) or already-shown nodes; the
    result is R[i, j] as carried: the dot product of the numbers shown, rounded (:class:`attention.Hand`).
    With *answer_*, the answer at the problem's places follows (when it reads differently)."""
    a_nodes, a_exact = vec_nodes(ctx, a)
    b_nodes, b_exact = vec_nodes(ctx, b)
    items = [lhs, mid, eq.Dot(eq.Vec(tuple(a_nodes)), eq.Vec(tuple(b_nodes))),
             eq.Add(tuple(eq.Mul((x, y)) for x, y in zip(a_nodes, b_nodes))), R.carried(i, j)]
    shown = sum((value_of(x) * value_of(y) for x, y in zip(a_nodes, b_nodes)), Fraction(0))
    ops = [EQ, rel(a_exact and b_exact), EQ, rel(shown == R.hand[i][j])]
    if answer_:
        answer(ctx, items, ops, R, i, j)
    return line(eq.Rel(tuple(items), tuple(ops)))


def row_sum_line(label, shown: list, whole: int, P: int, group: str) -> tuple:
    """``Σ_j A[i, j] ≈ 0.2410 + … = 1`` (or ``= 1.0001 ≈ 1``): the sum of a row as shown, and the value the true
    row sums to exactly (1 for the weights, 0 for the softmax backward)."""
    row = eq.Add(tuple(shown))
    total = eq.rational_value(row)
    items, ops = [label, row], [rel(not has_dec(row))]
    if total == whole:
        items.append(eq.num(whole))
        ops.append(EQ)
    else:
        items += [rounded_at(total, P), eq.num(whole)]
        ops += [EQ, APPROX]
    return line(eq.Rel(tuple(items), tuple(ops)), group)


def answer(ctx: Ctx, items: list, ops: list, R, i: int, j: int) -> None:
    """Append R[i, j]'s answer at the problem's places (the true value rounded) to a line that ends with its
    carried value, when it reads differently; not when the carried value rounds to another answer (that
    entry's note then says why: the solver's notes on the answers)."""
    fin = R.fixed(i, j, ctx.dec)
    last = value_of(items[-1])
    if last is not None and Fraction(fin.value) == last:
        return
    if not rounds_to_answer(R, i, j, ctx.dec):
        return
    items.append(fin)
    ops.append(rel(ops[-1] == EQ and R.is_exact_at(i, j, ctx.dec) and R.is_carried_exact(i, j)))


def rounds_to_answer(R, i: int, j: int, dec: int) -> bool:
    """Does the carried value of R[i, j], rounded to *dec* places, give the answer (the true value rounded)?"""
    h = R.hand[i][j]
    if h is None or not isinstance(h, Fraction) or R.is_carried_exact(i, j):
        return True
    return F.round_decimal(Fraction(h), None, dec) == R.rounded(i, j, dec)


def vec_nodes(ctx: Ctx, xs):
    out, exact = [], True
    for x in xs:
        if isinstance(x, eq.Node):
            out.append(x)
            exact &= type(x) in (eq.Num,)
        elif ctx.decimal:
            n, ok = shown_input(ctx, x)
            out.append(n)
            exact &= ok
        else:
            out.append(eq.num(x))
    return out, exact


def value_of(node):
    """The exact value a Num or Dec node shows, as a Fraction (None for anything else)."""
    t = type(node)
    if t is eq.Num:
        return node.value
    if t is eq.Dec:
        return Fraction(node.value)
    return None


def pick(M, allowed=None) -> tuple[int, int]:
    """The entry a "check one" expansion shows: the largest in size (the first of equals)."""
    r, c = M.shape
    cells = [(i, j) for i in range(r) for j in range(c) if allowed is None or allowed(i, j)]
    return max(cells, key=lambda ij: (abs(M.num[ij[0]][ij[1]]), -ij[0], -ij[1])) if cells else (0, 0)


def node_list(M, cells) -> list:
    """The entries as carried (:meth:`worked.model.Mat.carried`)."""
    return [M.carried(i, j) for i, j in cells]


def rel_to(node, R, i: int, j: int) -> str:
    """= when the arithmetic *node* (on shown numbers) is exactly R[i, j] as carried, else ≈."""
    return rel(eq.rational_value(node) == R.hand[i][j])


def grad_prod_step(ctx: Ctx, why, R, left, right, mid, first, dims, notes=()) -> Body:
    """A product step of the backward pass: R[i, j] = left(i)·right(j), each a list of shown nodes;
    *mid*(i, j) the named form (``A[:, cats]·dZ[:, 1]``)."""
    lines = []
    r, c = R.shape
    lab = ctx.labels(R.rows)
    for i, j in entries(ctx.checks, r, c, first):
        lines.append(dot_line(ctx, eq.Entry(R.sym, lab[i], R.cols[j]), mid(i, j), left(i), right(j), R, i, j))
    return Body(why, lines, list(notes), shapes(*dims), ctx.P)
