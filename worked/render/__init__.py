"""Printable worksheets and answer keys: HTML, LaTeX and PDF from Jinja2 templates.

One model, many writers: :class:`worked.model.Solution` knows no format. This package turns it into

* HTML (one self-contained file: CSS inline, math as MathML from the MathML printer, a math font embedded),
* LaTeX (amsmath, compiles with pdflatex),
* Typst source (``templates/sheet/*.typ``, formulas from the Typst printer with spoken alt text),
* PDF, by default with Typst in this process: tagged PDF/UA-1, only the fonts embedded in Typst,
  the same bytes on every machine. ``pdf_engine="weasyprint"`` prints the HTML sheet,
  ``pdf_engine="latex"`` compiles the .tex with pdflatex.

Every function takes the same optional keywords:

``student``
    ``None`` or a dict with any of ``"name"``, ``"id"``, ``"variant"`` (strings); printed in the
    page header instead of the blank name/date line (used by quiz batches).
``template_dir``
    a folder searched before ours: a template file with the same name overrides ours
    (see ``templates/README.md`` for the files and their blocks).

Text from the problem (title, tokens) and from ``student`` is data, never markup: it is escaped
for every format. Output is deterministic: the same input gives the same bytes (PDFs included).

Public API (stable; the quiz batches build on it)::

    answer_key_html(solution, *, student=None, for_pdf=False, template_dir=None) -> str
    worksheet_html(solution, *, student=None, for_pdf=False, template_dir=None) -> str
    answer_key_tex(solution, *, student=None, paper="a4", template_dir=None) -> str
    worksheet_tex(solution, *, student=None, paper="a4", template_dir=None) -> str
    answer_key_typst(solution, *, student=None, paper="a4", template_dir=None) -> str
    worksheet_typst(solution, *, student=None, paper="a4", template_dir=None) -> str
    html_to_pdf(html, *, paper="a4") -> bytes
    tex_to_pdf(tex) -> bytes
    answer_key_pdf(solution, *, student=None, paper="a4", pdf_engine="typst", template_dir=None) -> bytes
    worksheet_pdf(solution, *, student=None, paper="a4", pdf_engine="typst", template_dir=None) -> bytes
    write_sheet(solution, outdir, *, formats=("html", "tex", "pdf"), paper="a4", pdf_engine="typst",
                template_dir=None, force=False, student=None) -> list[Path]
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

__all__ = [
    "answer_key_html", "worksheet_html", "answer_key_tex", "worksheet_tex",
    "answer_key_typst", "worksheet_typst", "html_to_pdf", "tex_to_pdf", "answer_key_pdf", "worksheet_pdf", "write_sheet",
    "DOCUMENTS", "FORMATS", "PAPERS", "PDF_ENGINES",
]

from .. import exporters as _exporters

DOCUMENTS = ("worksheet", "answer-key")
FORMATS = _exporters.sheet_formats()          # html, tex, pdf (the sheet formats of worked.exporters)
PAPERS = ("a4", "letter")
PDF_ENGINES = tuple(_exporters.PDF_ENGINES)   # typst, weasyprint, latex


def answer_key_html(solution, *, student: dict | None = None, for_pdf: bool = False,
                    template_dir: str | Path | None = None, paper: str = "a4") -> str:
    """The answer key as one self-contained HTML page (what ``Solution._repr_html_`` shows).

    With ``for_pdf=False`` (default) every formula is MathML and a math font is embedded, for
    browsers and notebooks. With ``for_pdf=True`` every formula is an inline SVG drawn by ziamath
    (WeasyPrint cannot draw MathML); feed that string to :func:`html_to_pdf`.
    """
    from .html import render_html
    from .view import build

    return render_html(build(solution, "answer-key", student), for_pdf=for_pdf, template_dir=template_dir, paper=paper)


def worksheet_html(solution, *, student: dict | None = None, for_pdf: bool = False,
                   template_dir: str | Path | None = None, paper: str = "a4") -> str:
    """The student worksheet as one self-contained HTML page (see :func:`answer_key_html`)."""
    from .html import render_html
    from .view import build

    return render_html(build(solution, "worksheet", student), for_pdf=for_pdf, template_dir=template_dir, paper=paper)


def answer_key_tex(solution, *, student: dict | None = None, paper: str = "a4",
                   template_dir: str | Path | None = None) -> str:
    """The answer key as a LaTeX document (amsmath; compiles with pdflatex). ASCII only."""
    from .tex import render_tex
    from .view import build

    return render_tex(build(solution, "answer-key", student), paper=paper, template_dir=template_dir)


def worksheet_tex(solution, *, student: dict | None = None, paper: str = "a4",
                  template_dir: str | Path | None = None) -> str:
    """The student worksheet as a LaTeX document (amsmath; compiles with pdflatex). ASCII only."""
    from .tex import render_tex
    from .view import build

    return render_tex(build(solution, "worksheet", student), paper=paper, template_dir=template_dir)


def answer_key_typst(solution, *, student: dict | None = None, paper: str = "a4",
                     template_dir: str | Path | None = None) -> str:
    """The answer key as Typst source (what the default PDF engine compiles)."""
    from .typst import render_typ
    from .view import build

    return render_typ(build(solution, "answer-key", student), paper=paper, template_dir=template_dir)


def worksheet_typst(solution, *, student: dict | None = None, paper: str = "a4",
                    template_dir: str | Path | None = None) -> str:
    """The student worksheet as Typst source."""
    from .typst import render_typ
    from .view import build

    return render_typ(build(solution, "worksheet", student), paper=paper, template_dir=template_dir)


def html_to_pdf(html: str, *, paper: str = "a4") -> bytes:
    """Lay out *html* (from ``..._html(for_pdf=True)``) with WeasyPrint; deterministic bytes.

    No network: the URL fetcher refuses everything except ``data:`` URLs (our own inline assets) and the
    fonts bundled with worked, in which the text is set (``--serif``/``--sans`` of ``style.css``), the same
    on every machine. ``paper`` ("a4" or "letter") overrides the page size named in the HTML. Raises
    :class:`worked.errors.WorkedError` saying what to install where Pango is missing.
    """
    from .pdf import html_to_pdf as _h

    return _h(html, paper=paper)


def tex_to_pdf(tex: str) -> bytes:
    """Compile *tex* with pdflatex, one document per run (twice when needed).

    Raises :class:`worked.errors.WorkedError` when pdflatex is not installed or the run fails
    (with the first error line of the log). Deterministic: fixed dates and document ID.
    """
    from .pdf import tex_to_pdf as _t

    return _t(tex)


def answer_key_pdf(solution, *, student: dict | None = None, paper: str = "a4", pdf_engine: str = "typst",
                   template_dir: str | Path | None = None) -> bytes:
    """The answer key as PDF bytes (Typst; or WeasyPrint from the HTML, or pdflatex from the .tex)."""
    from .sheet import document_pdf

    return document_pdf("answer-key", solution, student=student, paper=paper, pdf_engine=pdf_engine,
                        template_dir=template_dir)


def worksheet_pdf(solution, *, student: dict | None = None, paper: str = "a4", pdf_engine: str = "typst",
                  template_dir: str | Path | None = None) -> bytes:
    """The worksheet as PDF bytes (Typst; or WeasyPrint from the HTML, or pdflatex from the .tex)."""
    from .sheet import document_pdf

    return document_pdf("worksheet", solution, student=student, paper=paper, pdf_engine=pdf_engine,
                        template_dir=template_dir)


def write_sheet(solution, outdir: str | Path, *, formats: Iterable[str] = FORMATS, paper: str = "a4",
                pdf_engine: str = "typst", template_dir: str | Path | None = None, force: bool = False,
                student: dict | None = None, documents: Iterable[str] = DOCUMENTS) -> list[Path]:
    """Write ``outdir/<slug>/worksheet.*`` and ``answer-key.*``; return the paths written.

    The files are one set, swapped in at once (:class:`worked.output.FolderSet`). A folder we did not
    write (no ``.worked`` marker inside) is not written into unless ``force=True`` (raises WorkedError),
    and then only our files are replaced.
    """
    from .sheet import write_sheet as _w

    return _w(solution, outdir, formats=formats, paper=paper, pdf_engine=pdf_engine, template_dir=template_dir,
              force=force, student=student, documents=documents)
