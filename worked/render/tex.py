"""LaTeX writer: amsmath, ASCII only, compiles with pdflatex (texlive-latex-base + -recommended).

Templates use TeX-safe Jinja delimiters: ``((( value )))`` prints (escaped unless it is our own
LaTeX), ``((* for x in xs *))`` ... ``((* endfor *))`` are statements, ``((# ... #))`` comments.
Formulas are trees printed by :class:`worked.printers.LatexPrinter`.
"""
from __future__ import annotations

import re

from .. import eq, printers
from .env import render
from .texesc import TexRaw, tex_escape
from .view import chain as view_chain

_ASCII = re.compile(r"[\x20-\x7e\n]*")


def math(node) -> TexRaw:
    """A formula (a tree, or a Line) as the LaTeX printer writes it, or a table cell's LaTeX text
    (checked to be ASCII)."""
    if node is None:
        return TexRaw("")
    s = node if isinstance(node, str) else printers.latex(getattr(node, "eq", node))
    if not _ASCII.fullmatch(s):
        raise ValueError(f"formula is not ASCII LaTeX: {s[:60]!r}")
    return TexRaw(s)


def chain(node) -> TexRaw:
    """A displayed relation chain as ``\\wkchain{head}{\\wkcont{= b}\\wkcont{≈ c}}`` (base.tex): on one line
    when it fits, else broken at its relation signs, further lines aligned under the first sign."""
    node = getattr(node, "eq", node)
    head, segs = view_chain(node)
    return TexRaw(r"\wkchain{" + math(head) + "}{" + "".join(r"\wkcont{" + math(x) + "}" for x in segs) + "}")


def rich_tex(prose) -> TexRaw:
    """A :class:`worked.eq.Prose` (or plain text) as LaTeX: the text escaped (ASCII), the math inline ``$…$``."""
    return TexRaw(printers.latex(eq.prose(prose)))


def _cell(c, blank: bool) -> str:
    if blank:
        return ""
    if c.get("eq") is not None:
        return printers.latex(c["eq"])
    return c.get("tex") or ""


GRID_CELL = (r"4.2em", r"\rule[-2ex]{0pt}{5.4ex}")   # an answer cell: about 15 x 8 mm, room for "-0.12"


def _row_label(text: str, sym) -> str:
    """A row's label: a token or number in small italic text, a symbol (a one-row matrix's ``d\\gamma_{2}``) as math."""
    return r"\text{\small$" + printers.latex(sym) + "$}" if sym is not None else r"\text{\small\itshape " + tex_escape(text) + "}"


def matrix(m, grid: bool = False) -> TexRaw:
    """A labelled matrix: row labels (text), column labels above, brackets, cells in math.

    Four top-aligned arrays side by side (labels, [, body, ]); every row carries the same strut
    so labels line up with entries, and the header row sits above the body columns. A worksheet
    *grid* is empty cells of :data:`GRID_CELL` with a rule between rows and between columns.
    """
    n, k = m["n_rows"], m["n_cols"]
    tall = m.get("has_math")
    strut = GRID_CELL[1] if grid else (r"\rule[-2.5ex]{0pt}{6.6ex}" if tall else r"\rule[-.45ex]{0pt}{2.5ex}")
    hstrut = r"\rule[-.3ex]{0pt}{2ex}"
    cols = [r"\scriptstyle\mathit{" + tex_escape(c) + "}" if _plain(c) else
            r"\scriptstyle\text{" + tex_escape(c) + "}" for c in m["cols"]]
    # exact cells in display style: a fraction's numerator and denominator at text size, so an exponent inside
    # one (1/(2 + e^√2)) is a first-level script, never a script of a script
    cell_style = r"\displaystyle " if tall and not grid else ""
    body_rows = [" & ".join(cell_style + _cell(c, grid) for c in row) for row in m["cells"]]
    if grid:
        cell = "w{c}{%s}" % GRID_CELL[0]
        spec = "@{}" + cell + "|" * (k > 1) + "|".join([cell] * (k - 1)) + "@{}"
        # no column rules above the grid (\multicolumn must open its cell: the strut goes inside)
        head = " & ".join(r"\multicolumn{1}{c}{" + hstrut + c + "}" for c in cols)
        rows = r"\\\hline ".join(strut + r for r in body_rows)
        body = (r"\begin{array}[t]{%s}" % spec + head + r"\\" + rows + r"\end{array}")
    else:
        colspec = "c" if tall else "r"
        body = (r"\begin{array}[t]{@{\,}*{%d}{%s}@{\,}}" % (k, colspec) + hstrut + " & ".join(cols) + r"\\"
                # the strut last in its row: before a cell's "-0.51" it would make the minus a binary one ("− 0.51")
                + r"\\".join(r + strut for r in body_rows) + r"\end{array}")
    labels = (r"\begin{array}[t]{@{}r@{}}" + hstrut + r"\\"
              + r"\\".join(strut + _row_label(x, s) for x, s in zip(m["rows"], m.get("row_math") or [None] * n))
              + r"\end{array}")
    phantom = r"\begin{array}{@{}c@{}}" + r"\\".join([strut] * n) + r"\end{array}"
    left = r"\begin{array}[t]{@{}c@{}}" + hstrut + r"\\\left[\vphantom{" + phantom + r"}\right.\end{array}"
    right = r"\begin{array}[t]{@{}c@{}}" + hstrut + r"\\\left.\vphantom{" + phantom + r"}\right]\end{array}"
    sym = ""
    if m.get("head") is not None:
        sym = printers.latex(m["head"]) + r"\ "
    arrays = labels + r"\," + left + (r"\," if grid else r"\!") + body + (r"\," if grid else r"\!") + right
    # a grid's brackets reach its first and last rule (TeX lets a \left[ fall 10% or 5pt short);
    # colortbl's rule colour is global: set for the grid, then back to black
    gray, black = ((r"\delimiterfactor=1000 \delimitershortfall=0pt \arrayrulecolor{black!45}",
                    r"\arrayrulecolor{black}") if grid else ("", ""))
    out = (r"\wkmat{" + (r"$\displaystyle " + sym + "$" if sym else "") + "}{" + gray
           + r"$\displaystyle\vcenter{\hbox{$" + arrays + r"$}}$" + black + "}")
    if m.get("caption"):
        out += r"\,{\scriptsize " + tex_escape(m["caption"]) + "}"
    return TexRaw(out)


def _plain(s: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9.]+", s))


def gray(g: int) -> str:
    return f"{g / 255:.3f}"


def render_tex(page, *, paper: str = "a4", template_dir=None) -> str:
    """The page (a :class:`worked.render.view.Page`) through ``<kind>.tex``."""
    out = render("tex", f"{page.kind}.tex", template_dir, doc=page, paper=paper, m=math, chain=chain, rich=rich_tex,
                 matrix=matrix, gray=gray, esc=tex_escape, raw=TexRaw)
    bad = next((c for c in out if ord(c) > 126 or (ord(c) < 32 and c not in "\n\t")), None)
    if bad is not None:  # only a template could do this: escaping makes data ASCII
        from ..errors import WorkedError

        raise WorkedError(f"LaTeX output has a non-ASCII character {bad!r} (from a template)")
    return out
