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


def render(sol: Solution) -> str:
    p = sol.problem
    places = p.decimals
    out = [f"# {_cell(p.title or ('Cross-attention' if p.cross else 'Self-attention'))}", ""]
    if p.cross:
        out.append("Cross-attention: the queries from the decoder side X, the keys and values from the encoder side "
                   f"X_enc. Encoder tokens: {', '.join(_cell(t) for t in p.tokens_enc)}; n_enc = {p.n_kv}.")
        out.append("")
    out.append(f"{'Decoder tokens' if p.cross else 'Tokens'}: {', '.join(_cell(t) for t in p.tokens)}; n = {p.n}, d_model = {p.d_model}, d_k = {p.d_k}"
               + (f", {len(p.heads)} heads" if p.multihead else "") + f"; mask: {p.mask}.")
    out.append("")
    mats = sol.matrices()
    for k, step in enumerate(sol.steps, 1):
        out += [f"## Step {k}. {_cell(printers.text(step.title_prose))}", "", _cell(printers.text(step.why_prose)), ""]
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
    out += ["## Answer", ""] + table(sol.output, places) + [""]
    return "\n".join(out)
