"""Plain text for a terminal: aligned, labelled matrices and the worked lines (Unicode √ · ≈ Kᵀ).

:meth:`worked.model.Solution.text` calls :func:`render` at call time, so this module imports nothing of the
model or the solver (it reads a solution, :class:`worked.model.Solution`, and its matrices,
:class:`worked.model.Mat`, through their attributes)."""
from __future__ import annotations

import functools
import textwrap
import unicodedata

from .. import printers, stages
from ..render import view


def _width(s: str) -> int:
    """Terminal columns: wide characters (CJK tokens) take two, combining marks none."""
    if s.isascii():
        return len(s)
    return sum(map(_char_width, s))


@functools.lru_cache(maxsize=None)
def _char_width(c: str) -> int:
    """A character's columns, looked up once per character (a line repeats the few symbols it uses)."""
    return 2 if unicodedata.east_asian_width(c) in "WF" else 0 if unicodedata.combining(c) else 1


def _pad(s: str, w: int, right: bool = True) -> str:
    gap = " " * max(0, w - _width(s))
    return gap + s if right else s + gap


def matrix_lines(m, places: int, exact: bool = False, indent: str = "  ") -> list[str]:
    """A labelled, aligned matrix: token row labels, column labels above, brackets around each row."""
    r, c = m.shape
    cells = [[printers.text(m.exact_node(i, j) if exact else m.cell(i, j, places)) for j in range(c)] for i in range(r)]
    widths = [max([_width(m.cols[j])] + [_width(cells[i][j]) for i in range(r)]) for j in range(c)]
    lw = max(_width(x) for x in m.rows)
    head = indent + " " * lw + "   " + "  ".join(_pad(m.cols[j], widths[j]) for j in range(c))
    out = [head.rstrip()]
    for i in range(r):
        left = "⎡" if i == 0 and r > 1 else "⎣" if i == r - 1 and r > 1 else "⎢" if r > 1 else "["
        right = "⎤" if i == 0 and r > 1 else "⎦" if i == r - 1 and r > 1 else "⎥" if r > 1 else "]"
        out.append(f"{indent}{_pad(m.rows[i], lw, right=False)} {left} " +
                   "  ".join(_pad(cells[i][j], widths[j]) for j in range(c)) + f" {right}")
    return out


def chain_lines(node, indent: str, width: int = 100) -> list[str]:
    """A relation chain on as few lines of at most *width* columns as it takes: broken at its relation
    signs (=, ≈), each further line aligned under the first sign; a continuation too long for that
    hangs four columns in from *indent* instead. A piece longer than the line stays whole."""
    head, segs = view.chain(node)
    first = indent + printers.text(head)
    out = [first]
    align, hang = " " * _width(first), indent + "    "
    for seg in (printers.text(x) for x in segs):        # " = b", " ≈ c"
        if _width(out[-1]) + _width(seg) <= width:
            out[-1] += seg
        elif _width(align) + _width(seg) - 1 <= width:
            out.append(align + seg[1:])
        else:
            out += _wrap_terms(hang + seg[1:], hang + "    ", width)
    return out


def _wrap_terms(line: str, cont: str, width: int) -> list[str]:
    """A piece too long for its line broken before its + and − signs (the terms of a sum), each further line
    at *cont*; a term longer than the line stays whole."""
    if _width(line) <= width:
        return [line]
    cuts = [i for i in range(1, len(line) - 2) if line[i] == " " and line[i + 1] in "+−" and line[i + 2] == " "]
    out, start = [], 0
    while True:
        room = width - (_width(cont) if out else 0)
        fit = [c for c in cuts if c > start and _width(line[start:c]) <= room]
        if _width(line[start:]) <= room or not fit:
            out.append(line[start:])
            break
        out.append(line[start:fit[-1]])
        start = fit[-1] + 1
    return [out[0]] + [cont + x for x in out[1:]]


def is_chain(sol) -> bool:
    """A chain's solution (:class:`worked.chain.ChainSolution`): its blocks' solutions in a list."""
    return isinstance(getattr(sol, "blocks", None), list)


def render_chain(sol, width: int = 100) -> str:
    """A chain of blocks ([[blocks]]): the shared facts, then each block headed, as one problem of its own."""
    c = sol.problem
    places = c.decimals
    title = c.title or "Attention blocks"
    out = [title, "=" * _width(title), ""]
    out += textwrap.wrap(f"{len(sol.blocks)} blocks in a chain: each block's X is the output Z of the block before, "
                         f"rounded to {places} places as the key shows it.", width)
    out.append(f"tokens: {', '.join(c.tokens)}" + (f"    encoder tokens: {', '.join(c.tokens_enc)}" if c.cross else ""))
    out.append(f"scale: {view.scale_text(sol.blocks[0].problem)}    decimals shown: {places}")
    out.append("")
    first = 1
    for k, (b, head) in enumerate(zip(sol.blocks, sol.titles()), 1):
        out += [head, "#" * _width(head), ""]
        if k > 1:
            out += textwrap.wrap(sol.carried_text(k), width)
            out += matrix_lines(sol.blocks[k - 2].output, places) + [""]
        out += _body(b, width, f"Z of block {k}", first) + [""]
        first += len(b.steps)
    return "\n".join(out) + "\n"


def render(sol, width: int = 100) -> str:
    if is_chain(sol):
        return render_chain(sol, width)
    p = sol.problem
    title = p.title or ("Cross-attention" if p.cross else "Self-attention")
    return "\n".join([title, "=" * _width(title), ""] + _body(sol, width)) + "\n"


def _body(sol, width: int, answer: str = stages.OUTPUT, first: int = 1) -> list[str]:
    p = sol.problem
    places = p.decimals
    out: list[str] = []
    if p.cross:
        out.append("cross-attention: queries from the decoder side X, keys and values from the encoder side X_enc")
        out.append(f"decoder tokens: {', '.join(p.tokens)}    encoder tokens: {', '.join(p.tokens_enc)}")
    out.append(f"{'' if p.cross else 'tokens: ' + ', '.join(p.tokens) + '    '}n = {p.n}"
               + (f", n_enc = {p.n_kv}" if p.cross else "") + f", d_model = {p.d_model}, d_k = {p.d_k}, d_v = {p.d_v}"
               + (f", heads = {len(p.heads)}" if p.multihead else ""))
    out.append(f"scale: {view.scale_text(p)}    mask: {p.mask}    decimals shown: {places}")
    for label, prose in view.block_facts(p):       # a Transformer block: its order, positions, ε, vocabulary, targets
        out += textwrap.wrap(f"{label.lower()}: {printers.text(prose)}", width, subsequent_indent="    ")
    out.append("")
    mats = sol.matrices()
    for k, step in enumerate(sol.steps, first):
        head = f"Step {k}. {printers.text(step.title_prose)}"
        out += [head, "-" * _width(head)]
        out += textwrap.wrap(printers.text(step.why_prose), width)
        if step.shape_eq is not None:
            out.append(f"shapes: {printers.text(step.shape_eq)}")
        for note in step.notes_prose:
            out += textwrap.wrap("Note: " + printers.text(note), width)
        group = None
        for line in step.lines:
            if line.group != group and line.group:
                out.append(f"  {line.group}:")
            group = line.group
            out += chain_lines(line.eq, "    " if line.group else "  ", width)
        if step.result and mats[step.result].is_scalar:     # a number: L ≈ 2.24
            m = mats[step.result]
            out.append(f"  {printers.text(m.sym)} {'=' if m.exact_at(places) else '≈'} {printers.text(m.cell(0, 0, places))}")
        elif step.result:
            m = mats[step.result]
            sym = printers.text(m.sym)
            exact = view.show_exact(m, places, sol.display == "decimal")
            if exact:
                out.append(f"  {sym} (exact):")
                out += matrix_lines(m, places, exact=True, indent="    ")
                out.append(f"  {sym} ≈ (to {places} places):")
            else:
                out.append(f"  {sym} {'=' if m.exact_at(places) else '≈'}" + ("" if m.exact_at(places) else f" (to {places} places)"))
            out += matrix_lines(m, places, indent="    ")
        out.append("")
    out.append(f"Answer: {answer} ({'exact' if sol.output.exact_at(places) else f'to {places} places'})")
    out += matrix_lines(sol.output, places)
    return out
