"""Markdown: headings, prose, equations as $$…$$ LaTeX (GitHub and Jupyter render them), matrices as tables."""
from __future__ import annotations

from .. import printers
from ..model import Mat, Solution
from ..render import view


def _cell(s: str) -> str:
    return s.replace("\\", "\\\\").replace("|", "\\|").replace("*", "\\*").replace("_", "\\_").replace("<", "&lt;")


def table(m: Mat, places: int, exact: bool = False) -> list[str]:
    r, c = m.shape
    out = ["| | " + " | ".join(_cell(x) for x in m.cols) + " |", "|---|" + "---:|" * c]
    for i in range(r):
        cells = [printers.text(m.exact_node(i, j) if exact else m.cell(i, j, places)) for j in range(c)]
        out.append(f"| **{_cell(m.rows[i])}** | " + " | ".join(_cell(x) for x in cells) + " |")
    return out


def render_chain(sol) -> str:
    """A chain of blocks ([[blocks]]): the shared facts, then each block under its own heading."""
    c = sol.problem
    places = c.decimals
    out = [f"# {_cell(c.title or 'Attention blocks')}", "",
           f"{len(sol.blocks)} blocks in a chain: each block's X is the output Z of the block before, rounded to "
           f"{places} places as the key shows it. Tokens: {', '.join(_cell(t) for t in c.tokens)}"
           + (f"; encoder tokens: {', '.join(_cell(t) for t in c.tokens_enc)}" if c.cross else "") + ".", ""]
    first = 1
    for k, (b, head) in enumerate(zip(sol.blocks, sol.titles()), 1):
        out += [f"## {_cell(head)}", ""]
        if k > 1:
            out += [_cell(sol.carried_text(k)), ""] + table(sol.blocks[k - 2].output, places) + [""]
        out += _body(b, "###", f"Z of block {k}", first)
        first += len(b.steps)
    out += ["## Answer", ""] + table(sol.output, places) + [""]
    return "\n".join(out)


def render(sol: Solution) -> str:
    if isinstance(getattr(sol, "blocks", None), list):      # [[blocks]]: worked.chain.ChainSolution
        return render_chain(sol)
    p = sol.problem
    out = [f"# {_cell(p.title or ('Cross-attention' if p.cross else 'Self-attention'))}", ""]
    out += _body(sol, "##")
    out += ["## Answer", ""] + table(sol.output, sol.problem.decimals) + [""]
    return "\n".join(out)


def _body(sol: Solution, h: str, answer: str | None = None, first: int = 1) -> list[str]:
    p = sol.problem
    places = p.decimals
    out = []
    if p.cross:
        out.append("Cross-attention: the queries from the decoder side X, the keys and values from the encoder side "
                   f"X_enc. Encoder tokens: {', '.join(_cell(t) for t in p.tokens_enc)}; n_enc = {p.n_kv}.")
        out.append("")
    out.append(f"{'Decoder tokens' if p.cross else 'Tokens'}: {', '.join(_cell(t) for t in p.tokens)}; n = {p.n}, d_model = {p.d_model}, d_k = {p.d_k}"
               + (f", {len(p.heads)} head" + "s" * (len(p.heads) > 1) if p.multihead else "") + f"; mask: {p.mask}.")
    out.append("")
    for label, prose in view.block_facts(p):       # a Transformer block: its order, positions, ε, vocabulary, targets
        out += [f"{label}: {_cell(printers.text(prose))}", ""]
    mats = sol.matrices()
    for k, step in enumerate(sol.steps, first):
        out += [f"{h} Step {k}. {_cell(printers.text(step.title_prose))}", "", _cell(printers.text(step.why_prose)), ""]
        if step.shape_eq is not None:
            out += [f"Shapes: ${printers.latex(step.shape_eq)}$", ""]
        for note in step.notes_prose:
            out += [f"> {_cell(printers.text(note))}", ""]
        group = None
        for line in step.lines:
            if line.group and line.group != group:
                out += [f"**{_cell(line.group)}**", ""]
            group = line.group
            out += ["$$", printers.latex(line.eq), "$$", ""]
        if step.result and mats[step.result].is_scalar:     # a number (the loss), not a 1×1 table
            m = mats[step.result]
            rel = "=" if m.exact_at(places) else r"\approx"
            out += [f"${printers.latex(m.sym)} {rel} {m.dec_plain(0, 0, places)}$", ""]
        elif step.result:
            m = mats[step.result]
            if view.show_exact(m, places, sol.display == "decimal"):   # the page model's rule: rounding enters and every entry is short
                sym = _cell(printers.text(m.sym))
                out += [f"{sym}, exact:", ""] + table(m, places, exact=True) + [""]
                out += [f"{sym}, to {places} places:", ""]
            out += table(m, places) + [""]
    if answer:
        out += [f"{h} Answer: {answer}", ""] + table(sol.output, places) + [""]
    return out
