"""Typst writer: the page model (:mod:`worked.render.view`) through ``templates/sheet/*.typ``, compiled
to PDF in this process by Typst (PyPI ``typst``).

* Formulas are printed by :class:`worked.printers.TypstPrinter`; each one carries alt text from the
  spoken printer (``#eqn("…", $…$)``), so the PDF is tagged PDF/UA-1 and its numbers are text.
* Only Typst's embedded fonts are used (Libertinus Serif, New Computer Modern Math, DejaVu Sans
  Mono), system fonts never: the same bytes on every machine. The timestamp is fixed.
* Templates are Jinja2 with the usual delimiters, found like the HTML/LaTeX ones (``--template-dir``
  first). Every value a template prints is escaped as Typst markup unless it is Typst source we
  wrote (:class:`Typ`: formulas, matrices, string literals).

One :class:`typst.Compiler` (and its fonts) is made per process and reused for every document.
"""
from __future__ import annotations

import functools
import re

from .. import eq, printers
from ..errors import WorkedError
from .env import render
from .typesc import Typ, esc, lit
from .view import TEXT_WIDTH_EM, chain, matrix_width_em

PDF_STANDARDS = ["ua-1"]   # tagged PDF/UA-1: needs a title, a language and alt text on every formula
TIMESTAMP = 0              # 1970-01-01T00:00:00Z in the PDF's dates and XMP metadata

def math(node, block: bool = False) -> Typ:
    """A formula (a tree or a Line) as ``#eqn(alt, $…$)`` in the text, or with *block* as a
    displayed equation (``$ … $``: full-size fractions, and the line is as tall as they are)."""
    if node is None:
        return Typ("")
    node = getattr(node, "eq", node)
    body = printers.typst(node)
    if block:
        body = f" {body} "
    return Typ(f"#eqn({lit(printers.spoken(node))}, ${body}$)")


def piece(node, alt: str | None = None, artifact: bool = False) -> Typ:
    """A formula or a piece of one (see :func:`worked.render.view.chain`) as ``#eqp(alt, $…$)``: set
    in display style but in the line, in a box, so that the line never breaks inside it. With
    *artifact* it is marked as a PDF artifact (the head of its chain already speaks for it)."""
    if alt is None:
        alt = printers.spoken(node).removeprefix("… ")
    src = f"eqp({lit(alt)}, ${printers.typst(node)}$)"
    return Typ(f"#pdf.artifact({src})" if artifact else "#" + src)


def line(node) -> Typ:
    """A displayed relation chain as ``#wk-chain(head, continuations…)``: on one line when it fits, else
    broken at its relation signs onto continuation lines aligned under the first sign (the template's
    ``wk-chain``). Never scaled down. The head carries the whole chain's alt text (PDF/UA: one
    formula for assistive technology), the continuations are artifacts."""
    node = getattr(node, "eq", node)
    head, segs = chain(node)
    pieces = [piece(head, alt=printers.spoken(node))] + [piece(x, artifact=True) for x in segs]
    return Typ("#wk-chain(" + ", ".join(f"[{p}]" for p in pieces) + ")")


def row(nodes) -> Typ:
    """One row of the worked solution: a chain alone (:func:`line`), or short formulas side by side,
    each whole (the row wraps between them)."""
    nodes = [getattr(n, "eq", n) for n in nodes]
    if len(nodes) == 1:
        return Typ(f"#wk-line({line(nodes[0])[1:]})")
    return Typ("#wk-line(" + ", ".join(f"[{piece(n)}]" for n in nodes) + ")")


def rich(prose) -> Typ:
    """A :class:`worked.eq.Prose` (or plain text) as Typst markup: the text escaped, the math inline from
    the Typst printer, each formula with its spoken form as alt text."""
    return Typ(printers.typst(eq.prose(prose)))


def _cell(c: dict, blank: bool) -> str:
    """A matrix cell as Typst content: math for exact forms, plain text (Unicode minus) otherwise."""
    if blank:
        return "[]"
    if c.get("eq") is not None:
        return "[" + math(c["eq"], block=True) + "]"
    return "[" + esc(c.get("text") or "") + "]"


def _array(items) -> str:
    items = list(items)
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _row_labels(m: dict) -> str:
    """The row labels: tokens and numbers as strings, a symbol (a one-row matrix's dγ_2) as math with its alt text."""
    return _array("[" + math(s) + "]" if s is not None else lit(r) for r, s in zip(m["rows"], m.get("row_math") or
                                                                                  [None] * len(m["rows"])))


def matrix(m: dict, grid: bool = False) -> Typ:
    """A labelled matrix as a call of the template's ``wk-matrix`` (layout is the template's)."""
    rows = _row_labels(m)
    cols = _array(lit(c) for c in m["cols"])
    blank = grid or m.get("blank", False)
    cells = _array(_array(_cell(c, blank) for c in row) for row in m["cells"])
    masked = _array(_array("true" if c.get("masked") else "false" for c in row) for row in m["cells"])
    head = "[" + math(m["head"]) + "]" if m.get("head") is not None else "none"
    caption = lit(m["caption"]) if m.get("caption") else "none"
    # a matrix that surely fits beside its label (the rough width, with room to spare) is kept with it; one that
    # may not is left to the line breaking, which moves it below its label when it does not fit
    label = len(printers.text(m["head"])) * 0.5 if m.get("head") is not None else 0.0
    keep = label + matrix_width_em(m) * (1.6 if m.get("has_math") else 1.0) <= 0.8 * TEXT_WIDTH_EM
    return Typ(f"#wk-matrix(head: {head}, rows: {rows}, cols: {cols}, cells: {cells}, masked: {masked}, "
               f"caption: {caption}, grid: {'true' if blank else 'false'}, math: {'true' if m.get('has_math') else 'false'}, "
               f"keep: {'true' if keep else 'false'})")


def heatmap(h: dict) -> Typ:
    cells = _array(_array(f"(text: {lit(c['text'])}, gray: {c['gray']}, dark: {'true' if c['dark'] else 'false'})"
                          for c in row) for row in h["cells"])
    return Typ(f"#wk-heatmap(title: {lit(h['title'])}, rows: {_array(lit(r) for r in h['rows'])}, "
               f"cols: {_array(lit(c) for c in h['cols'])}, cells: {cells})")


def glance(g: dict) -> Typ:
    cells = _array(_array(lit(c["text"]) for c in row) for row in g["cells"])
    return Typ(f"#wk-glance(label: [{rich(g['label'])}], rows: {_row_labels(g)}, "
               f"cols: {_array(lit(c) for c in g['cols'])}, cells: {cells})")


def render_typ(page, *, paper: str = "a4", template_dir=None) -> str:
    """The Typst source of the page (a :class:`worked.render.view.Page`), through ``<kind>.typ``."""
    return render("typ", f"{page.kind}.typ", template_dir, doc=page, paper=paper, m=math, rich=rich, row=row,
                  piece=piece, matrix=matrix, heatmap=heatmap, glance=glance, esc=esc, lit=lit, raw=Typ)


@functools.lru_cache(maxsize=1)
def compiler():
    """This process's Typst compiler: embedded fonts only (no system fonts, no font folders)."""
    import typst

    fonts = typst.Fonts(include_system_fonts=False, include_embedded_fonts=True)
    return typst.Compiler(font_paths=fonts, ignore_system_fonts=True)


_WHERE = re.compile(r"\.typ:(\d+):(\d+)")


def typ_to_pdf(source: str, name: str = "document.typ", *, root=None, standards: bool = True) -> bytes:
    """Compile Typst source to tagged PDF/UA-1 bytes (plain tagged PDF without *standards*) with a
    fixed timestamp; files the source names (``image("/…")``) are read under *root*.

    A Typst error becomes a one-line :class:`WorkedError` naming *name*, the line of the source
    (as rendered from the template) and Typst's message."""
    import typst

    try:
        return compiler().compile(input=source.encode("utf-8"), format="pdf", timestamp=TIMESTAMP,
                                  pdf_standards=PDF_STANDARDS if standards else [],
                                  **({"root": str(root)} if root is not None else {}))
    except typst.TypstError as exc:
        where = _WHERE.search(getattr(exc, "diagnostic", "") or "")
        at = f" (line {where.group(1)} of the rendered source)" if where else ""
        raise WorkedError(f"{name}: Typst error{at}: {getattr(exc, 'message', None) or exc}") from None


def render_pdf(page, *, paper: str = "a4", template_dir=None) -> bytes:
    return typ_to_pdf(render_typ(page, paper=paper, template_dir=template_dir), f"{page.kind}.typ")
