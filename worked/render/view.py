"""The format-free page model: what is on a worksheet and an answer key, built from a Solution.

A page is a :class:`Page` (its problem part a :class:`ProblemPage`, its steps :class:`Step`, the quiz's
graded-answers box :class:`Questions`): records with fixed fields, built once by the caller
(:func:`build`) and handed to every renderer (HTML, LaTeX, Typst); nothing is kept on the solution.
Templates read their fields; the matrices and cells inside them are plain dicts. Every formula is a tree
(:mod:`worked.eq`) that the writer's ``math()`` prints for its format; every piece of prose with math
in it (``*_rich``) is a :class:`worked.eq.Prose`, text and trees, that the writer's ``rich()`` prints
with its format's printer (the text is escaped, the math set as math). Cells of tables carry a Unicode ``text``, an ASCII ``tex``
and, for exact forms that need math, the tree ``eq``.
"""
from __future__ import annotations

from typing import Any

from .. import eq, stages
from ..i18n import N_, translate
from ..i18n import tr as _
from .. import numfmt as F
from .. import printers
from ..problem import Precision

SHORT_LINE = 52          # LaTeX characters: shorter lines without fractions are set side by side
EXACT_CELL_LIMIT = 28    # exact matrix entries longer than this (as text) are not shown as an exact matrix


class Record:
    """A record of the page model: the fields its class annotates (slots), given by keyword, read as
    attributes (templates too). Plain classes, not dataclasses: :mod:`worked.writers.text` imports this
    module on every ``worked solve`` (see :mod:`worked.model`)."""
    __slots__ = ()
    FIELDS: tuple[str, ...] = ()

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.FIELDS = tuple(f for k in reversed(cls.__mro__) for f in k.__dict__.get("__slots__", ()))

    def __init__(self, **fields):
        missing = [f for f in self.FIELDS if f not in fields]
        extra = [f for f in fields if f not in self.FIELDS]
        if missing or extra:
            raise TypeError(f"{type(self).__name__}: missing {missing}, unknown {extra}")
        for f in self.FIELDS:
            setattr(self, f, fields[f])

    def __repr__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{f}={getattr(self, f)!r}" for f in self.FIELDS) + ")"


class QuestionItem(Record):
    """One graded question of a quiz sheet: what is asked as typed (``weights[1,*]``), the entry it names
    as a tree (``ask_eq``: weights[1, ·]), its description as prose (``text``, its math as trees:
    ``the scores Q·Kᵀ: row 2 (x2), column 3 (x3)``), its points and tolerance in words."""
    ask: str
    ask_eq: Any
    text: eq.Prose
    points: str
    tolerance: str
    options: list           # a choice question's options (QuestionOption), lettered; empty for a value to type
    __slots__ = ("ask", "ask_eq", "text", "points", "tolerance", "options")


class QuestionOption(Record):
    """One option of a choice question: its letter, its value as a tree (a decimal as shown), whether it is the
    right one, and (for the key) what it is: "right", or the mistake that gives it (``no scaling [no-scaling]``)."""
    letter: str
    value: Any
    right: bool
    note: str
    __slots__ = ("letter", "value", "right", "note")


class Questions(Record):
    """The quiz's "Graded answers" box: a heading, a sentence (``intro``, text) and the questions."""
    title: str
    intro: str
    items: list
    __slots__ = ("title", "intro", "items")


class ProblemPage(Record):
    """The problem part of a page (no solution needed): see :func:`problem_page`."""
    training: dict | None
    title: str
    tokens: list
    facts: list
    facts_rich: list
    given: list
    legend: list
    needs_legend: bool
    grids: list
    places: int
    n: int
    multihead: bool
    causal: bool
    big: bool
    kicker: str              # the running head: "Self-attention, worked by hand", or the architecture's name
    __slots__ = ("training", "title", "tokens", "facts", "facts_rich", "given", "legend", "needs_legend", "grids",
                 "places", "n", "multihead", "causal", "big", "kicker")


class Step(Record):
    """One step of the worked solution as the page shows it (the key's lines, the worksheet's task)."""
    number: int
    id: str
    head: int | None
    title: str
    title_rich: eq.Prose
    why: str
    notes: list
    result: str | None
    why_rich: eq.Prose
    notes_rich: list
    shape: Any
    blocks: list
    mats: list
    grid: dict | None
    side: bool
    task_rich: eq.Prose
    checks: list
    checks_word: str
    block: dict | None       # a chain's block starts here ([[blocks]]): its number, title, intro and given matrices
    section: str | None      # the heading a new section starts with here ("Head 1", "Training step: update"), or None
    __slots__ = ("number", "id", "head", "title", "title_rich", "why", "notes", "result", "why_rich", "notes_rich",
                 "shape", "blocks", "mats", "grid", "side", "task_rich", "checks", "checks_word", "block", "section")


class Page(ProblemPage):
    """A worksheet or an answer key: the problem part, then the steps, heatmaps, answers at a glance and the
    final output; ``student`` (name, id, variant) or None; ``questions`` (the quiz's box) or None."""
    kind: str
    is_key: bool
    student: dict | None
    doc_label: str
    steps: list
    heatmaps: list
    glance: list
    final: dict
    questions: Questions | None
    __slots__ = ("kind", "is_key", "student", "doc_label", "steps", "heatmaps", "glance", "final", "questions")


def _cell(node, math: bool = False, masked: bool = False) -> dict:
    """A table cell: its text, its LaTeX, and the tree when it needs math (fractions, roots, e^x);
    ``node`` is the tree in every case (for writers that set every entry as math)."""
    out = {"text": printers.text(node), "tex": printers.latex(node), "eq": node if math else None, "node": node}
    if masked:
        out["masked"] = True
    return out


def _needs_math(node) -> bool:
    return not (type(node) in (eq.Dec,) or type(node) is eq.Num and (node.value.denominator == 1
                                                                       or F.terminating(node.value, 6)))


def matrix(sym, rows: list[str], cols: list[str], cells: list[list[dict]], *,
           rel: str = eq.EQ, caption: str = "", name: str = "", corner: str = "") -> dict:
    """A labelled matrix: token row labels, column labels, cells of {text, tex, eq}; ``head`` is the
    tree ``sym =`` (or ``sym ≈`` when rounding enters)."""
    head = eq.Rel((sym, eq.Blank()), (rel,)) if sym is not None else None
    # a row labelled by a symbol (a one-row matrix's dγ_2: model.SymLabel): its tree, set as math by each format
    row_math = [getattr(r, "sym", None) for r in rows]
    return {"symbol": sym, "head": head, "rel": rel, "rows": list(rows), "row_math": row_math if any(row_math) else None,
            "cols": list(cols), "cells": cells,
            "caption": caption, "name": name, "corner": corner, "n_rows": len(rows), "n_cols": len(cols),
            "has_math": any(c.get("eq") is not None for r in cells for c in r)}


def input_matrix(name: str, sym, m, rows: list[str], cols: list[str], places: int | None = None) -> dict:
    """A given matrix. With *places* (decimal display) entries with more places are shown rounded."""
    cells, rel = [], eq.EQ
    for r in m:
        row = []
        for x in r:
            if places is not None and not F.terminating(x, places):
                row.append(_cell(eq.dec(F.round_decimal(x, None, places))))
                rel = eq.APPROX
            else:
                n = eq.num(x)
                row.append(_cell(n, math=_needs_math(n)))
        cells.append(row)
    return matrix(sym, rows, cols, cells, name=name, rel=rel)


def mat_view(m, places: int, *, exact: bool = False, rel: str | None = None, caption: str = "") -> dict:
    """A solution matrix (:class:`worked.model.Mat`) as decimals (or its exact entries)."""
    r, c = m.shape
    cells = []
    for i in range(r):
        row = []
        for j in range(c):
            masked = m.is_masked(i, j) and m.is_neg_inf(i, j)
            if exact:
                n = m.exact_node(i, j)
                row.append(_cell(n, math=_needs_math(n) and not masked, masked=masked))
            else:
                row.append(_cell(m.cell(i, j, places), masked=masked))
        cells.append(row)
    if rel is None:
        rel = eq.EQ if (exact or m.exact_at(places)) else eq.APPROX
    return matrix(m.sym, m.rows, m.cols, cells, rel=rel, caption=caption, name=m.name)


def show_exact(m, places: int, decimal: bool = False) -> bool:
    """Also show the exact matrix when rounding enters and every entry stays short; in decimal display only
    when every entry is a decimal of at most ``places + 2`` places (never 0.96875 beside 0.97). A value known
    only to 50 digits (the loss after the update) has no exact form to show."""
    if m.exact_at(places):
        return False
    if decimal and not m.exact_at(Precision.of(places).carried):
        return False
    if any(getattr(x, "is_Float", False) for row in m.exact for x in row):
        return False
    if not all(_few_nodes(x, 3 * EXACT_CELL_LIMIT) for row in m.exact for x in row):
        return False    # a tree that large never prints within the limit (and printing it would take long)
    return all(len(printers.text(m.exact_node(i, j))) <= EXACT_CELL_LIMIT for i in range(m.shape[0]) for j in range(m.shape[1]))


def _few_nodes(x, limit: int) -> bool:
    """True when the sympy tree of *x* has at most *limit* nodes (counted until the limit is passed, so a
    huge tree costs no more than a small one). Every node prints as at least a third of a character."""
    stack, seen = [x], 0
    while stack:
        seen += 1
        if seen > limit:
            return False
        stack.extend(getattr(stack.pop(), "args", ()))
    return True


def _packed(lines: list) -> list[list]:
    """Group consecutive short formulas into rows set side by side; long ones get a row each."""
    out: list[list] = []
    for ln in lines:
        if _is_short(ln) and out and _is_short(out[-1][-1]):
            out[-1].append(ln)
        else:
            out.append([ln])
    return out


def _is_short(ln) -> bool:
    """Short, and no fraction except inside an exponent (e^{\frac{..}{..}} stays low)."""
    s = printers.latex(ln)
    return len(s) <= SHORT_LINE and r"\frac" not in s.replace(r"^{\frac", "")


def chain(node) -> tuple[Any, list]:
    """A relation chain ``a = b ≈ c`` as the pieces it may break into, at its relation signs: the
    head ``a`` and the continuations ``= b``, ``≈ c`` (each a tree, ``Rel((Blank(), b), (op,))``).
    A writer sets the pieces on one line when they fit, else the continuations on lines of their
    own, aligned under the first relation sign. Anything but a chain is one piece."""
    if type(node) is not eq.Rel or len(node.items) < 2:
        return node, []
    return node.items[0], [eq.Rel((eq.Blank(), x), (op,)) for op, x in zip(node.ops, node.items[1:])]


def _blocks(step) -> list[dict]:
    blocks: list[dict] = []
    for ln in step.lines:
        if not blocks or blocks[-1]["label"] != ln.group:
            blocks.append({"label": ln.group, "lines": []})
        blocks[-1]["lines"].append(ln.eq)
    for b in blocks:
        b["rows"] = _packed(b["lines"])
        b["label"] = group_label(b["label"])
    return blocks


def group_label(group: str | None) -> str | None:
    """A group of lines as the page heads it: ``row cats`` (the core's group) in the current language."""
    if group is not None and group.startswith("row "):
        from ..i18n import current

        return current().format(N_("row {token}"), token=group[4:])
    return group


TEXT_WIDTH_EM = 50.0     # A4 text width at 10 pt, in em, less a little


def matrix_width_em(m: dict) -> float:
    """Rough width of a labelled matrix in em (for deciding what fits beside what)."""
    lab = max((len(x) for x in m["rows"]), default=1) * 0.5
    cols = 0.0
    for j in range(m["n_cols"]):
        w = max([len(m["cols"][j])] + [len(r[j]["text"]) for r in m["cells"]]) * 0.5 + 1.1
        cols += w
    return 3.0 + lab + cols + 1.0


def _grid_of(step, p) -> "stages.Grid | None":
    """The answer grid of the stage a step computes (by its result's key: ``head2.scores``; the output ``Z`` of
    several heads is the combination's), or None."""
    if not step.result:
        return None
    arch = stages.of(p)
    pre, _dot, base = step.result.rpartition(".")
    parts = arch.before + arch.combine + arch.after + arch.train + arch.update if p.multihead and not pre \
        else arch.forward + arch.train + arch.update
    stage = next((s for s in parts if s.id == base), None)
    return stage.grid if stage is not None else None


def _fits_side(step, views, p) -> bool:
    """Set the result matrix beside the step's formulas when both fit on the line."""
    g = _grid_of(step, p)
    if g is None or not g.beside or len(views) != 1:
        return False
    widest = max((len(printers.text(ln.eq)) for ln in step.lines), default=0) * 0.46 + 1.0
    return widest + matrix_width_em(views[0]) <= TEXT_WIDTH_EM


_OUTPUT_INPUTS = ("W_out", "gamma_f")    # the output layer's own inputs: its stages start at the first that takes one


def _ids(part) -> set:
    """The ids of the steps of *part* (a stage's, or its step's own: the output projection's "output")."""
    return {x for s in part for x in (s.id, getattr(getattr(s, "step", None), "id", None)) if x}


def _section(st, p, arch) -> str | None:
    """The section a block's step belongs to (None: the block's input, before any heading): a head's steps, the
    heads' combination, the rest of the block's forward pass, its output layer and loss, and the training step's
    gradients (a head's apart), gradient check and update."""
    sid = st.id
    if sid in _ids(arch.before):
        return None
    if sid in _ids(arch.train):
        return _("Training step: gradients of head {n}", n=st.head) if st.head else _("Training step: gradients")
    if sid in _ids(arch.checks):
        return _("Training step: gradient check")
    if sid in _ids(arch.update):
        return _("Training step: update")
    if st.head:
        return _("Head {n}", n=st.head)
    if sid in _ids(arch.combine):
        return _("Combining the heads")
    start = next((k for k, s in enumerate(arch.after) if set(s.inputs) & set(_OUTPUT_INPUTS)), len(arch.after))
    return _("Output and loss") if sid in _ids(arch.after[start:]) else _("Residuals, layer norms and feed-forward")


def sections(steps, p) -> list:
    """The heading each step starts (None: it continues the section before). Self- and cross-attention: "Head h"
    where a head's steps start and "Combining the heads" after them; a Transformer block's: each of its sections
    (:func:`_section`) where it starts."""
    out, before = [], None
    if getattr(p, "block", None) is None:
        for st in steps:
            out.append(_("Head {n}", n=st.head) if st.head and st.head != before else
                       _("Combining the heads") if not st.head and before else None)
            before = st.head
        return out
    arch = stages.of(p)
    for st in steps:
        now = _section(st, p, arch)
        out.append(now if now != before else None)
        before = now
    return out


def shade(w: float | None) -> dict:
    """Grayscale fill for a weight in [0, 1]: white (0) to dark gray (1); light text on dark cells.

    White text from gray 117 down, black above: either has a contrast of at least 4.5:1 (WCAG 2.1 AA)."""
    if w is None:
        return {"gray": 255, "dark": False, "pct": 0}
    g = round(255 - 190 * max(0.0, min(1.0, w)))
    return {"gray": g, "dark": g < 118, "pct": round(100 * (255 - g) / 255)}


def heatmap(m, places: int, title: str, darker: str = "get more attention") -> dict:
    r, c = m.shape
    cells = []
    for i in range(r):
        row = []
        for j in range(c):
            v = m.value(i, j)
            masked = m.is_masked(i, j)
            text = "−∞" if m.is_neg_inf(i, j) else printers.text(m.fixed(i, j, places))
            cell = {"text": text, "tex": m.dec_plain(i, j, places), "masked": masked}
            cell.update(shade(0.0 if masked else v))
            row.append(cell)
        cells.append(row)
    return {"title": title, "rows": list(m.rows), "cols": list(m.cols), "cells": cells, "symbol": printers.latex(m.sym),
            "darker": darker}


_X = eq.Sym("X")
_XE = eq.Sym("X_enc")


def _task_text(step, p, places: int, dec: int) -> eq.Prose:
    """What a worksheet task asks, as prose (its math as trees): its stage's grid's task, else the step's why."""
    g = _grid_of(step, p)
    if g is None or g.task is None:
        return step.why_prose
    return g.task(p, step.head, places, dec)


def _check_prompts(step, lt: list[str], tokens, checks: str = "one", p=None) -> list[dict]:
    """What the worksheet asks the student to expand ("Check one" style), from the key's lines."""
    g = _grid_of(step, p) if p is not None else None
    out = []
    if g is not None and g.row_check is not None:
        seen = []
        for ln in step.lines:
            if ln.group and ln.group not in seen:
                seen.append(ln.group)
        for grp in seen:
            tok = grp[4:] if grp.startswith("row ") else grp
            # room to write: six lines for a row worked in many lines (a softmax row, a layer norm), else three
            worked = sum(ln.group == grp for ln in step.lines)
            out.append({"rich": g.row_check(tok, step.head), "eq": None, "lines": 6 if worked > 4 else 3})
        if checks == "one" and len(seen) > 1:
            out = out[:1] + [{"rich": eq.say(N_("(Only the first row is asked for a full check; fill the other rows in the grid.)")),
                              "eq": None, "aside": True}]
        if seen:
            return out
    for ln in step.lines:
        items = ln.eq.items
        if g is not None and g.dot_check and len(items) > 2 and type(items[1]) is eq.Dot:
            out.append({"rich": eq.say(N_("Expand as a dot product and evaluate:")),
                        "eq": eq.Rel((items[0], items[1], eq.Blank()), (eq.EQ, eq.EQ))})
        elif len(items) > 1 and type(items[0]) is not eq.Sqrt:
            out.append({"rich": eq.say(N_("Evaluate:")), "eq": eq.Rel((items[0], eq.Blank()), (eq.EQ,))})
    return out


head_sym = eq.matrix_sym   # a matrix's symbol as the steps write it (Q, Q⁽¹⁾, W_Q⁽¹⁾, scores upright)


scale_prose = stages.scale_prose     # the scaling rule in words (the scaling stage's)


def scale_text(p) -> str:
    """The scaling rule in words (Unicode text)."""
    return printers.text(scale_prose(p))


def mask_text(p) -> str:
    return _("causal: each token attends only to itself and earlier tokens") if p.mask == "causal" else _("none")





def given(p, places: int | None = None) -> list[dict]:
    """The problem's matrices (X, the weights of each head, W_O) as labelled matrices, each with its
    ``key`` in a problem or answers file (``X``, ``head1.W_Q``), a ``note`` and its ``shape`` in words.
    With *places* (decimal display) entries with more places are shown rounded, headed ``≈``."""
    toks = list(p.tokens)
    nums = lambda k: [str(j) for j in range(1, k + 1)]  # noqa: E731
    out = [dict(input_matrix("X", eq.Sym("X"), p.X, toks, nums(p.d_model), places), key="X",
                note=_("the decoder side, one row per decoder token: the queries come from it") if p.cross
                else _("one row per token"))]
    if p.cross:
        out.append(dict(input_matrix("X_enc", _XE, p.X_enc, list(p.tokens_enc), nums(p.d_model), places), key="X_enc",
                        note=_("the encoder side, one row per encoder token: the keys and values come from it")))
    for h, head in enumerate(p.heads, 1):
        hd = h if p.multihead else None
        for nm, w in (("W_Q", head.W_Q), ("W_K", head.W_K), ("W_V", head.W_V)):
            g = input_matrix(f"{nm}{hd or ''}", head_sym(nm, hd), w, nums(p.d_model), nums(len(w[0])), places)
            out.append(dict(g, key=(f"head{h}." if p.multihead else "") + nm, note=None))
    if p.multihead:
        g = input_matrix("W_O", eq.Sym("W_O"), p.W_O, nums(len(p.W_O)), nums(len(p.W_O[0])), places)
        out.append(dict(g, key="W_O", note=_("output projection")))
    out += _block_given(p, places, nums)
    for g in out:
        g["shape"] = f"{g['n_rows']}×{g['n_cols']}"
    return out


_BLOCK_GIVEN = (      # a Transformer block's own inputs: key, what it is, whether shown when it is the default
    ("W_1", N_("the feed-forward's first layer"), True), ("b_1", N_("its bias"), True),
    ("W_2", N_("the feed-forward's second layer"), True), ("b_2", N_("its bias"), True),
    ("gamma_1", N_("layer norm 1's scale γ"), False), ("beta_1", N_("layer norm 1's shift β"), False),
    ("gamma_2", N_("layer norm 2's scale γ"), False), ("beta_2", N_("layer norm 2's shift β"), False),
    ("gamma_f", N_("the final layer norm's scale γ"), False), ("beta_f", N_("the final layer norm's shift β"), False),
    ("W_out", N_("the output layer: one column per word of the vocabulary"), True),
)


def _block_given(p, places, nums) -> list[dict]:
    """A Transformer block's given matrices and vectors (a vector as one row), each γ and β only when it is not
    the default (all 1, all 0)."""
    b = getattr(p, "block", None)
    if b is None:
        return []
    out = []
    for key, note, always in _BLOCK_GIVEN:
        v = getattr(b, key)
        if v is None or not always and all(x == (1 if key.startswith("gamma") else 0) for x in v):
            continue
        M = v if isinstance(v[0], (list, tuple)) else [v]
        rows = nums(len(M)) if len(M) > 1 or key.startswith("W") else [""]
        cols = list(b.vocab) if key == "W_out" else nums(len(M[0]))
        name = {"gamma": "γ", "beta": "β"}.get(key.split("_")[0])
        sym = eq.Sym(f"{name}_{key.split('_')[1]}" if name else key)
        out.append(dict(input_matrix(key, sym, M, rows, cols, places), key=key, note=translate(note)))
    return out


def grid_label(g) -> str:
    """A grid's label as text in the current language (a sentence with math, ``Updated {symbol}``, as the text
    printer writes it)."""
    return printers.text(g.label) if isinstance(g.label, eq.Said) else translate(g.label)


def answer_grids(p) -> list[dict]:
    """The matrices a student fills in, in the order and with the keys of an answers file (``Q`` … ``Z``,
    or ``head1.Q`` … ``concat``, ``Z``): a ``label``, the defining formula ``eq`` (one ``=``, no value),
    row and column labels, the ``masked`` cells [i, j] and a ``hint``. No values of the solution."""
    toks, toks_kv = list(p.tokens), list(p.tokens_kv)
    nums = lambda k: [str(j) for j in range(1, k + 1)]  # noqa: E731
    masked = sorted([i, j] for i, j in stages.masked_entries(p.n, p.mask, None, p.n_kv))
    heads = range(1, len(p.heads) + 1) if p.multihead else [None]
    X, T = eq.Sym("X"), eq.Sym("T")
    is_ = lambda lhs, rhs: eq.Rel((lhs, rhs), (eq.EQ,))  # noqa: E731
    dims = stages.Dims.of_problem(p)
    arch = stages.of(p)
    labels = lambda size, k: toks if size == "n" else toks_kv if size == "n_kv" else [""] if size == "1" else nums(k)  # noqa: E731

    def grid(stage, S, pre="", hx=""):
        g = stage.grid
        rhs = g.definition(S, p)
        rows, cols = stage.shape(dims)
        out = dict(key=pre + stage.id, label=grid_label(g) + hx, eq=rhs if g.symbol is None else is_(g.lhs(S), rhs),
                   rows=labels(stage.rows, rows), cols=labels(stage.cols, cols))
        if g.masked:
            out["masked"] = masked
        hint = g.hint(p) if g.hint else None
        if hint is not None:
            out["hint"] = printers.text(eq.prose(hint))
        elif g.hint:
            out["hint"] = None
        return out

    grids = [grid(s, head_sym) for s in arch.before]       # a block's stages before the heads (P, X0, …)
    syms = {h: (lambda b, h=h, **kw: head_sym(b, h, **kw)) for h in heads}
    for h in heads:
        pre = f"head{h}." if h else ""
        hx = _(" (head {n})").replace("{n}", str(h)) if h else ""
        grids += [grid(s, syms[h], pre, hx) for s in arch.forward]
    if p.multihead:
        grids += [grid(s, head_sym) for s in arch.combine]
    grids += [grid(s, head_sym) for s in arch.runs(dims)]     # and after them (the residual adds … the loss)
    if getattr(p, "train", None) is not None:     # the loss and dZ (dconcat), each head's gradients and updates, L′
        layer = lambda part: [grid(s, head_sym) for s in part if s.scope == "layer" and (p.multihead or s.several)]  # noqa: E731
        grids += layer(arch.train)
        for h in heads:
            pre = f"head{h}." if h else ""
            hx = _(" (head {n})").replace("{n}", str(h)) if h else ""
            grids += [grid(s, syms[h], pre, hx) for s in arch.train + arch.update if s.scope == "head"]
        grids += layer(arch.update)
    for g in grids:
        g.setdefault("masked", [])
        g.setdefault("hint", None)
    return grids


def loss_def(p=None):
    """The loss as a tree: ``L = ½ Σ_{i,j} (Z − T)²``: the definition of the training step's number (its 1×1
    stage) on its answer grid."""
    arch = stages.of(p) if p is not None else stages.SELF
    g = next(s for s in arch.train + arch.after if (s.rows, s.cols) == ("1", "1")).grid     # a block's: its forward loss
    return eq.Rel((g.lhs(head_sym), g.definition(head_sym, p)), (eq.EQ,))


def training(p) -> dict | None:
    """What a ``[train]`` problem adds to the problem section: the target T (a labelled matrix with the
    output's rows and columns), the learning rate and the loss as trees; None without ``[train]``."""
    t = getattr(p, "train", None)
    if t is None:
        return None
    if getattr(p, "block", None) is not None:      # a block's: the next tokens (its facts' targets), no matrix T
        return {"target": None, "lr": eq.Rel((eq.Sym("lr", upright=True), eq.num(t.lr)), (eq.EQ,)),
                "loss": loss_def(p), "loss_name": t.loss,
                "text": _("one step of gradient descent on the mean cross-entropy of the next tokens")}
    toks = list(p.tokens)
    cols = [str(j) for j in range(1, len(t.target[0]) + 1)]
    target = dict(input_matrix("T", eq.Sym("T"), t.target, toks, cols), key="train.target", note=_("the target"))
    return {"target": target, "lr": eq.Rel((eq.Sym("lr", upright=True), eq.num(t.lr)), (eq.EQ,)),
            "loss": loss_def(p), "loss_name": t.loss,
            "text": _("one step of gradient descent on the loss, from the output Z towards the target T")}


#: the worksheet's word before each prompt, by the --checks option
CHECKS_WORDS = {"one": N_("Check one"), "row": N_("Check a row"), "all": N_("Check every entry")}


def _heads(p):
    """``, 2 heads`` after the sizes of a problem with several heads."""
    if not p.multihead:
        return ""
    return eq.say(", {count} heads", count=str(len(p.heads))) if len(p.heads) > 1 else eq.say(", 1 head")


def problem_page(p, display: str | None = None) -> ProblemPage:
    """The problem part of the page model (no solution needed): title, facts, the given matrices, the
    token legend and the empty answer grids. *display* "decimal" shows given entries with more than
    ``decimals + 2`` places rounded (default: the problem's own display)."""
    if _is_chain(p):
        return ProblemPage(**_chain_fields(p, p.block_problems(), display))
    return ProblemPage(**_problem_fields(p, display))


def _problem_fields(p, display: str | None) -> dict[str, Any]:
    places = p.decimals
    toks = list(p.tokens)
    tl = [eq.tok_label(t, i) for i, t in enumerate(toks)]
    display = display or getattr(p, "display", "exact")
    size = lambda name, v: eq.Rel((eq.Sym(name), eq.num(v)), (eq.EQ,))  # noqa: E731
    if p.cross:
        toks_enc = list(p.tokens_enc)
        facts_rich = [
            (_("Attention"), eq.say("cross-attention: the queries from the decoder side {X}, the keys and values from "
                                    "the encoder side {X_enc}", X=_X, X_enc=_XE)),
            (_("Decoder tokens"), eq.prose(", ".join(toks))),
            (_("Encoder tokens"), eq.prose(", ".join(toks_enc))),
            (_("Sizes"), eq.prose(eq.say("{n} decoder tokens, {n_enc} encoder tokens, ", n=size("n", p.n),
                                         n_enc=size("n_enc", p.n_kv)),
                                  size("d_model", p.d_model), ", ", size("d_k", p.d_k), ", ", size("d_v", p.d_v),
                                  _heads(p))),
        ]
    else:
        facts_rich = [
            (_("Tokens"), eq.prose(", ".join(toks))),
            (_("Sizes"), eq.prose(eq.say("{n} tokens, ", n=size("n", p.n)), size("d_model", p.d_model), ", ",
                                  size("d_k", p.d_k), ", ", size("d_v", p.d_v), _heads(p))),
        ]
    facts_rich += [
        (_("Scaling"), eq.prose(scale_prose(p), eq.say("; mask: {mask}; answers to {places} decimal places",
                                                       mask=mask_text(p), places=str(places)))),
    ] + block_facts(p)
    facts = [(a, printers.text(b)) for a, b in facts_rich]
    return dict(
        training=training(p),
        title=p.title or (_("Cross-attention") if p.cross else _("Self-attention")), tokens=toks,
        facts=facts, facts_rich=facts_rich,
        given=given(p, p.precision.carried if display == "decimal" else None),
        legend=[{"index": i + 1, "token": t} for i, t in enumerate(toks)]
        + ([{"index": i + 1, "token": _("{token} (encoder)", token=t)} for i, t in enumerate(p.tokens_enc)] if p.cross else []),
        needs_legend=any(lab != t for lab, t in zip(tl, toks))
        or p.cross and any(eq.tok_label(t, i) != t for i, t in enumerate(p.tokens_enc)),
        grids=answer_grids(p),
        places=places, n=p.n, multihead=p.multihead, causal=p.mask == "causal",
        big=p.n > 5 or p.d_model > 6,
        kicker=_kicker(p),
    )


def _kicker(p) -> str:
    """The running head: the architecture, worked by hand."""
    b = getattr(p, "block", None)
    if b is not None:
        return _("A Transformer block (post-LN), worked by hand") if b.kind == "post-ln" else \
            _("A Transformer block (pre-LN), worked by hand")
    return _("Cross-attention, worked by hand") if p.cross else _("Self-attention, worked by hand")


def block_facts(p) -> list:
    """What a Transformer block adds to the problem's facts: its order as formulas, the positions, ε, the
    vocabulary and the targets."""
    b = getattr(p, "block", None)
    if b is None:
        return []
    arch = stages.of(p)
    S = lambda base, **kw: head_sym(base, None, **kw)  # noqa: E731
    dims = stages.Dims.of_problem(p)
    forms = [eq.Rel((s.grid.lhs(S), s.grid.definition(S, p)), (eq.EQ,)) for s in arch.before + arch.runs(dims)
             if isinstance(s.grid.symbol, str)]      # X_0 = X + P … probs = softmax(logits)
    order = eq.prose(eq.say("post-LN (Vaswani et al. 2017)") if b.kind == "post-ln" else eq.say("pre-LN (GPT-2)"), ": ",
                     *[x for f in forms for x in (f, "; ")][:-1])
    out = [(_("Block"), order),
           (_("Positions"), eq.say("sinusoidal, added to {X} (pos counts from 0)", X=_X) if b.positional == "sinusoidal"
            else eq.say("none")),
           (_("Layer norm"), eq.say("over each row, dividing by {d_model}; {eps}; ReLU in the feed-forward",
                                    d_model=eq.Sym("d_model"), eps=eq.Rel((eq.Sym("ε"), eq.num(b.eps)), (eq.EQ,)))),
           ]
    if b.vocab:
        out.append((_("Vocabulary"), eq.prose(", ".join(b.vocab))))
    if b.targets is not None:
        out.append((_("Targets"), eq.say("{targets} (the next token at each position)",
                                         targets=", ".join(b.vocab[t] for t in b.targets))))
    return out


def build(sol, kind: str, student: dict | None = None, questions: Questions | None = None) -> Page:
    """The page model for *kind* ("worksheet" or "answer-key"), for the *student* (a dict with any of
    name, id, variant) and with the quiz's graded-answers box *questions*. The caller builds it once and
    hands it to each renderer (a sheet renders the same page as HTML, LaTeX and Typst)."""
    if _is_chain(sol):
        return _chain_page(sol, kind, student, questions)
    p = sol.problem
    places = p.decimals
    toks = list(p.tokens)
    mats = sol.matrices()
    tl = [eq.tok_label(t, i) for i, t in enumerate(toks)]
    page = _problem_fields(p, sol.display)

    # -- the steps
    steps = []
    for k, st in enumerate(sol.steps, 1):
        res = mats.get(st.result) if st.result else None
        views = []
        if res is not None and res.is_scalar:
            pass        # a number (the loss): the step's last line shows it, L ≈ 2.24, never as a 1×1 matrix
        elif res is not None:
            if show_exact(res, places, sol.display == "decimal"):
                views.append(mat_view(res, places, exact=True, caption=_("exact")))
                views.append(mat_view(res, places, caption=_("to {places} places", places=places)))
            else:
                views.append(mat_view(res, places))
        grid = None
        if res is not None:
            r, c = res.shape
            blank = [[{"text": "", "tex": "", "eq": None} for j in range(c)] for i in range(r)]
            grid = matrix(res.sym, [""] * r if res.is_scalar else res.rows, [""] * c if res.is_scalar else res.cols,
                          blank, name=res.name)
            grid["blank"] = True
        steps.append(Step(
            number=k, id=st.id, head=st.head, title=printers.text(st.title_prose), title_rich=st.title_prose,
            why=printers.text(st.why_prose), notes=[printers.text(x) for x in st.notes_prose], result=st.result,
            why_rich=st.why_prose, notes_rich=list(st.notes_prose),
            shape=st.shape_eq, blocks=_blocks(st), mats=views, grid=grid,
            side=_fits_side(st, views, p),
            task_rich=_task_text(st, p, st.precision or p.precision.carried, places),
            checks=[dict(c, text=printers.text(c["rich"])) for c in _check_prompts(st, tl, toks, sol.checks, p)],
            checks_word=translate(CHECKS_WORDS[sol.checks]),
            block=None, section=None,
        ))
    for st, sec in zip(steps, sections(sol.steps, p)):
        st.section = sec

    # -- heatmaps and answers at a glance
    heat = []
    glance = [_glance_view(m, places) for m in sol.before.values()]      # a block's P, X0 (N1) first
    for h in sol.heads:
        suffix = _(" (head {n})").replace("{n}", str(h.index)) if p.multihead else ""
        heat += [heatmap(getattr(h, s.id), places, grid_label(s.grid) + suffix) for s in stages.of(p).forward if s.grid.heatmap]
        for stage in stages.of(p).forward:
            if stage.grid.glance is not None and not stage.grid.glance(p):
                continue
            m = getattr(h, stage.id)
            v = mat_view(m, places, rel="=")
            v["label"] = eq.prose(m.sym) if not p.multihead else eq.prose(m.sym, suffix)
            glance.append(v)
    if p.multihead:
        v = mat_view(sol.concat, places, rel="=")
        v["label"] = eq.prose(sol.concat.sym)
        glance.append(v)
        v = mat_view(sol.output, places, rel="=")
        v["label"] = eq.prose(sol.output.sym, _(" (output)"))
        glance.append(v)
    arch = stages.of(p)
    heat += [heatmap(m, places, grid_label(arch.stage(key).grid), "are the likelier next words") for key, m in sol.after.items()
             if arch.stage(key).grid.heatmap]
    glance += [_glance_view(m, places) for m in sol.after.values()]      # and R1 … the loss after the heads
    for key, m in (sol.train or {}).items():
        v = mat_view(m, places, rel="=")
        v["label"] = eq.prose(m.sym)       # the symbol as math (dW_Q, W_Q′), in every format
        if m.is_scalar:         # L, L′: a number in a box, no row or column label
            v["rows"], v["cols"], v["row_math"] = [""], [""], None
        glance.append(v)
    final = mat_view(sol.output, places)

    stu = None
    if student:
        stu = {k: str(student.get(k, "")) for k in ("name", "id", "variant") if student.get(k) not in (None, "")}
    return Page(**page, **_kind_fields(kind), student=stu, steps=steps, heatmaps=heat, glance=glance, final=final,
                questions=questions)


def _glance_view(m, places: int) -> dict:
    """A matrix of the layer at a glance: its symbol as math; a number (the loss) in a box, no labels."""
    v = mat_view(m, places, rel="=")
    v["label"] = eq.prose(m.sym)
    if m.is_scalar:
        v["rows"], v["cols"], v["row_math"] = [""], [""], None
    return v


def _kind_fields(kind: str) -> dict[str, Any]:
    """The only fields of a :class:`Page` that depend on which document it is."""
    return dict(kind=kind, is_key=kind == "answer-key", doc_label=_("Answer key") if kind == "answer-key" else _("Worksheet"))


def as_kind(page: Page, kind: str) -> Page:
    """*page* as the page of document *kind* ("worksheet" or "answer-key"): every other field is the same
    for both documents of a solution, so a caller that writes both builds the page once (:func:`build`) and
    takes the other from it. The fields are shared, not copied (renderers only read them). A chain's block heads
    keep both documents' words and X (``docs``): the one of *kind* is picked."""
    fields = {f: getattr(page, f) for f in Page.FIELDS}
    fields.update(_kind_fields(kind))
    if any(st.block for st in page.steps):      # a chain: where a block starts, the two documents differ
        is_key = fields["is_key"]
        fields["steps"] = [Step(**{f: getattr(st, f) for f in Step.FIELDS if f != "block"},
                                block=dict(st.block, **st.block["docs"][is_key])) if st.block else st
                           for st in page.steps]
    return Page(**fields)


# ---------------------------------------------------------------- a chain of blocks ([[blocks]])

def _is_chain(x) -> bool:
    """A chain of blocks (:class:`worked.chain.Chain`) or its solution: the blocks are in ``blocks``."""
    return hasattr(x, "block_problems") or isinstance(getattr(x, "blocks", None), list)


def _chain_fields(c, problems: list, display: str | None) -> dict[str, Any]:
    """The problem part of a chain's page: the shared facts and inputs (X, X_enc), then every block's weights (keys
    ``block1.W_Q`` …) and every block's answer grids (keys ``block1.Q`` …). A sheet gives each block's weights where
    the block starts instead (:func:`block_given`)."""
    first = problems[0]
    page = _problem_fields(first, display)
    places = c.decimals
    size = lambda name, v: eq.Rel((eq.Sym(name), eq.num(v)), (eq.EQ,))  # noqa: E731
    names = "; ".join(f"{k}. {c.block_name(p)}" for k, p in enumerate(problems, 1))
    facts_rich = [
        (_("Blocks"), eq.say("{blocks}. From block 2 on, a block's {X} is the output {Z} of the block before, rounded to "
                             "{places} places.", blocks=names, X=_X, Z=eq.Sym("Z"), places=str(places))),
        (_("Decoder tokens") if c.cross else _("Tokens"), eq.prose(", ".join(c.tokens))),
    ]
    if c.cross:
        facts_rich.append((_("Encoder tokens"), eq.prose(", ".join(c.tokens_enc))))
    sizes = eq.say("{n} tokens, {n_enc} encoder tokens", n=size("n", c.n), n_enc=size("n_enc", len(c.X_enc))) \
        if c.cross else eq.say("{n} tokens", n=size("n", c.n))
    facts_rich += [
        (_("Sizes"), eq.prose(sizes, ", ", size("d_model", c.d_model))),
        (_("Scaling"), eq.prose(scale_prose(first), eq.say("; answers to {places} decimal places", places=str(places)))),
    ]
    given_top = [g for g in page["given"] if g["key"] == "X"]
    cross = [p for p in problems if p.cross]
    if cross:       # the encoder side, as a cross block gives it
        given_top += [g for g in _problem_fields(cross[0], display)["given"] if g["key"] == "X_enc"]
        page["legend"] = page["legend"] + [{"index": i + 1, "token": _("{token} (encoder)", token=t)}
                                           for i, t in enumerate(c.tokens_enc)]
        page["needs_legend"] = page["needs_legend"] or any(eq.tok_label(t, i) != t for i, t in enumerate(c.tokens_enc))
    for k, p in enumerate(problems, 1):       # every block's weights, named by block (block1.W_Q): the web page
        given_top += [dict(g, note=_("block {k}", k=k) + (f", {g['note']}" if g["note"] else ""))
                      for g in block_given(c, p, k, False, display)]
    grids = []
    for k, p in enumerate(problems, 1):
        for g in answer_grids(p):
            grids.append(dict(g, key=f"block{k}.{g['key']}", label=_("Block {k}: {name}", k=k, name=g["label"])))
    page.update(
        title=c.title or _("Attention blocks"), facts_rich=facts_rich, facts=[(a, printers.text(b)) for a, b in facts_rich],
        given=given_top, grids=grids, causal=any(p.mask == "causal" for p in problems),
        multihead=any(p.multihead for p in problems),
        kicker=_("A chain of attention blocks, worked by hand"),
    )
    return page


def block_given(c, p, k: int, is_key: bool, display: str | None = None) -> list[dict]:
    """What block *k* starts with on the page: its weights (keys ``block2.W_Q`` …) and, from block 2 on and on the
    key only, its X (the block before's output as the key shows it)."""
    shown = given(p, p.precision.carried if (display or p.display) == "decimal" else None)
    out = []
    for g in shown:
        if g["key"] == "X_enc" or g["key"] == "X" and (k == 1 or not is_key):
            continue
        note = g["note"]
        if g["key"] == "X":
            note = _("block {before}'s output Z, rounded to {places} places", before=k - 1, places=c.decimals)
        out.append(dict(g, key=f"block{k}.{g['key']}", note=note))
    return out


def _chain_page(sol, kind: str, student, questions) -> Page:
    """A chain's page: its problem part, then each block's steps (numbered on from the block before), the first
    of each headed by its block (:attr:`Step.block`), then every block's answers at a glance."""
    c = sol.problem
    is_key = kind == "answer-key"
    pages = [build(b, kind, student, questions) for b in sol.blocks]
    fields = _chain_fields(c, [b.problem for b in sol.blocks], sol.display)
    steps, heat, glance = [], [], []
    number = 0
    for k, (b, pg) in enumerate(zip(sol.blocks, pages), 1):
        intros = (None, None)
        if k > 1:
            intros = (_("X for block {k} is your Z from block {before}, rounded to {places} places: carry on with your "
                        "own values.", k=k, before=k - 1, places=c.decimals), sol.carried_text(k))
        p = b.problem
        about = eq.prose(eq.say("mask: {mask}; ", mask=mask_text(p)), eq.Rel((eq.Sym("d_k"), eq.num(p.d_k)), (eq.EQ,)),
                         ", ", eq.Rel((eq.Sym("d_v"), eq.num(p.d_v)), (eq.EQ,)), _heads(p), ".")
        # the worksheet's and the key's words and X where the block starts (index: is_key), for as_kind
        docs = tuple({"intro": intros[key], "given": block_given(c, p, k, key, sol.display)} for key in (False, True))
        head = {"number": k, "title": c.block_title(p, k), "about": about, "docs": docs, **docs[is_key]}
        for i, st in enumerate(pg.steps):
            number += 1
            steps.append(Step(**{f: getattr(st, f) for f in Step.FIELDS if f not in ("number", "block", "result")},
                              number=number, block=head if i == 0 else None,
                              result=f"block{k}.{st.result}" if st.result else None))
        for h in pg.heatmaps:
            heat.append(dict(h, title=_("Block {k}: {name}", k=k, name=h["title"])))
        for g in pg.glance:
            glance.append(dict(g, label=eq.say("Block {k}: {name}", k=str(k), name=g["label"])))
    last = pages[-1]
    fields["given"] = [g for g in fields["given"] if g["key"] in ("X", "X_enc")]   # the blocks' own: where they start
    return Page(**fields, kind=kind, is_key=is_key, student=last.student, doc_label=last.doc_label, steps=steps,
                heatmaps=heat, glance=glance, final=last.final, questions=questions)
