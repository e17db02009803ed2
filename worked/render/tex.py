"""LaTeX writer: amsmath, ASCII only, compiles with pdflatex (texlive-latex-base + -recommended).

Templates use TeX-safe Jinja delimiters: ``((( value )))`` prints (escaped unless it is our own
LaTeX), ``((* for x in xs *))`` ... ``((* endfor *))`` are statements, ``((# ... #))`` comments.
Formulas are trees printed by :class:`worked.printers.LatexPrinter`.
"""
from __future__ import annotations

import re

from .. import printers
from .env import render
from .texesc import TexRaw, tex_escape
from .view import build

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


def rich_tex(pieces) -> TexRaw:
    out = []
    for p in pieces:
        if p[0] == "text":
            out.append(tex_escape(p[1]))
        elif p[0] == "sub":
            out.append(f"$\\mathit{{{tex_escape(p[1])}}}_{{\\mathrm{{{tex_escape(p[2])}}}}}$")
        else:
            base = f"\\mathit{{{tex_escape(p[1])}}}" if p[1] else ""
            sup = r"\top" if p[2] == "T" and not p[1] else f"\\mathrm{{{tex_escape(p[2])}}}"
            if p[1] == "e" and p[2] == "x":
                sup = "x"
            out.append(f"${base}^{{{sup}}}$")
    return TexRaw("".join(out))


def _cell(c, blank: bool) -> str:
    if blank:
        return ""
    if c.get("eq") is not None:
        return printers.latex(c["eq"])
    return c.get("tex") or ""


def matrix(m, grid: bool = False) -> TexRaw:
    """A labelled matrix: row labels (text), column labels above, brackets, cells in math.

    Four top-aligned arrays side by side (labels, [, body, ]); every row carries the same strut
    so labels line up with entries, and the header row sits above the body columns.
    """
    n, k = m["n_rows"], m["n_cols"]
    tall = m.get("has_math")
    strut = r"\rule[-1.4ex]{0pt}{4.2ex}" if tall else (r"\rule[-1.2ex]{0pt}{3.6ex}" if grid else r"\rule[-.45ex]{0pt}{2.5ex}")
    hstrut = r"\rule[-.3ex]{0pt}{2ex}"
    colspec = "c" if (tall or grid) else "r"
    width = r"w{c}{3.2em}" if grid else colspec
    cols = " & ".join(r"\scriptstyle\mathit{" + tex_escape(c) + "}" if _plain(c) else
                      r"\scriptstyle\text{" + tex_escape(c) + "}" for c in m["cols"])
    body_rows = [" & ".join(_cell(c, grid) for c in row) for row in m["cells"]]
    body = (r"\begin{array}[t]{@{\,}*{%d}{%s}@{\,}}" % (k, width) + hstrut + cols + r"\\"
            + r"\\".join(strut + r for r in body_rows) + r"\end{array}")
    labels = (r"\begin{array}[t]{@{}r@{}}" + hstrut + r"\\"
              + r"\\".join(strut + r"\text{\small\itshape " + tex_escape(x) + "}" for x in m["rows"]) + r"\end{array}")
    phantom = r"\begin{array}{@{}c@{}}" + r"\\".join([strut] * n) + r"\end{array}"
    left = r"\begin{array}[t]{@{}c@{}}" + hstrut + r"\\\left[\vphantom{" + phantom + r"}\right.\end{array}"
    right = r"\begin{array}[t]{@{}c@{}}" + hstrut + r"\\\left.\vphantom{" + phantom + r"}\right]\end{array}"
    sym = ""
    if m.get("head") is not None:
        sym = printers.latex(m["head"]) + r"\ "
    arrays = labels + r"\," + left + r"\!" + body + r"\!" + right
    out = r"\wkfit{$\displaystyle " + sym + r"\vcenter{\hbox{$" + arrays + r"$}}$}"
    if m.get("caption"):
        out += r"\,{\scriptsize " + tex_escape(m["caption"]) + "}"
    return TexRaw(out)


def _plain(s: str) -> bool:
    return bool(re.fullmatch(r"[A-Za-z0-9.]+", s))


def gray(g: int) -> str:
    return f"{g / 255:.3f}"


def render_tex(kind: str, sol, *, student=None, paper: str = "a4", template_dir=None) -> str:
    doc = build(sol, kind, student)
    out = render("tex", f"{kind}.tex", template_dir, doc=doc, paper=paper, m=math, rich=rich_tex,
                 matrix=matrix, gray=gray, esc=tex_escape, raw=TexRaw)
    bad = next((c for c in out if ord(c) > 126 or (ord(c) < 32 and c not in "\n\t")), None)
    if bad is not None:  # only a template could do this: escaping makes data ASCII
        from ..errors import WorkedError

        raise WorkedError(f"LaTeX output has a non-ASCII character {bad!r} (from a template)")
    return out
