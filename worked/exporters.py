"""The formats worked writes, in one table: name → file extension (or file name), media type, renderer,
and for PDF the engines that make it. ``worked sheet`` (cli, :mod:`worked.render.sheet`), ``worked quiz``
(:mod:`worked.quiz`) and the server (:mod:`worked.server.app`) read this table; adding a format is one
entry here.

Three scopes:

``sheet``
    one file per document (``worksheet.html``, ``answer-key.pdf``): ``render(page, …)`` takes the page
    model (:class:`worked.render.view.Page`, built once by the caller) and returns the file's bytes;
``batch``
    one file per quiz batch (``moodle.xml``): ``render(manifest)`` returns its text or bytes;
``notebook``
    the Jupyter notebooks, written per variant by :mod:`worked.writers.notebook`.

Cheap to import (``worked``'s command line reads it on every run): the renderers import their writers
when called. A consumer module: the core never imports it.
"""
from __future__ import annotations


class PdfEngine:
    """A way to make a sheet's PDF: a *source* (the page rendered as Typst, printed HTML or LaTeX), then
    *compile* it; *require* raises :class:`worked.errors.WorkedError` when the engine is not installed.
    *source_format* names the sheet format whose text it compiles (the LaTeX engine reuses a ``.tex``
    written in the same run), or None; *template* the templates it renders (``typ``, ``html``, ``tex``)
    and *warm* loads what it needs before a quiz's workers start."""
    __slots__ = ("name", "source", "source_format", "compile", "require", "template", "warm")

    def __init__(self, name, source, compile, *, template, source_format=None, require=None, warm=None):
        self.name, self.source, self.source_format, self.compile, self.require = (
            name, source, source_format, compile, require)
        self.template, self.warm = template, warm


class Exporter:
    """One output format: its *name* (as ``--format`` takes it), its *scope* (sheet, batch, notebook), the
    *extension* of a sheet's files or the *file* name of a batch's, its *media_type*, its *render*, the
    *encoding* of its text (None: the renderer returns bytes), whether it is *compiled* from another
    format's text (PDF: written after the formats it may reuse), whether a quiz writes it by default, the
    *template* kind it renders (``html``, ``tex``; PDF: its engine's) and what *warm* loads before a
    quiz's workers start."""
    __slots__ = ("name", "scope", "extension", "file", "media_type", "render", "encoding", "compiled",
                 "quiz_default", "template", "warm")

    def __init__(self, name, scope, media_type, render=None, *, extension=None, file=None, encoding="utf-8",
                 compiled=False, quiz_default=False, template=None, warm=None):
        self.name, self.scope, self.media_type, self.render = name, scope, media_type, render
        self.extension, self.file, self.encoding = extension, file, encoding
        self.compiled, self.quiz_default, self.template, self.warm = compiled, quiz_default, template, warm

    def write(self, *args, **kw) -> bytes:
        out = self.render(*args, **kw)
        return out.encode(self.encoding) if self.encoding is not None else out


# ---------------------------------------------------------------- the sheet renderers (a page → bytes)

def _html(page, *, paper="a4", template_dir=None, sources=None, **_):
    from .render.html import render_html

    out = render_html(page, template_dir=template_dir, paper=paper)
    if sources is not None:
        sources["html"] = out
    return out


def _tex(page, *, paper="a4", template_dir=None, sources=None, **_):
    from .render.tex import render_tex

    out = render_tex(page, paper=paper, template_dir=template_dir)
    if sources is not None:
        sources["tex"] = out
    return out


def _pdf(page, *, paper="a4", template_dir=None, pdf_engine="typst", sources=None, **_):
    """The page as PDF with *pdf_engine*; a source already rendered in this run (*sources*: the ``.tex``
    for the LaTeX engine) is compiled as it is."""
    engine = PDF_ENGINES[pdf_engine]
    src = (sources or {}).get(engine.source_format) if engine.source_format else None
    if src is None:
        src = engine.source(page, paper=paper, template_dir=template_dir)
    return engine.compile(src, page, paper=paper)


# ---------------------------------------------------------------- the PDF engines

def _typst_source(page, *, paper, template_dir):
    from .render.typst import render_typ

    return render_typ(page, paper=paper, template_dir=template_dir)


def _typst_compile(src, page, *, paper):
    from .render.typst import typ_to_pdf

    return typ_to_pdf(src, f"{page.kind}.typ")


def _printed_html(page, *, paper, template_dir):
    from .render.html import render_html

    return render_html(page, for_pdf=True, template_dir=template_dir, paper=paper)


def _weasyprint_compile(src, page, *, paper):
    from .render.pdf import html_to_pdf

    return html_to_pdf(src, paper=paper)


def _weasyprint_require():
    from .render.pdf import require_weasyprint

    require_weasyprint()


def _latex_compile(src, page, *, paper):
    from .render.pdf import tex_to_pdf

    return tex_to_pdf(src)


def _latex_require():
    from .errors import WorkedError
    from .render.pdf import pdflatex_path

    if pdflatex_path() is None:
        raise WorkedError("--pdf-engine latex: pdflatex is not installed (Debian: texlive-latex-base, "
                          "texlive-latex-recommended, texlive-fonts-recommended); use --pdf-engine typst")


def _typst_warm():
    import typst  # noqa: F401

    from .render import typst as _  # noqa: F401  (its renderer and the page model)


def _html_warm():
    import html  # noqa: F401  (the printers' escape: its entity table)

    from .render.html import font_url

    font_url()      # its renderer, the page model, and the math font every page embeds (read and encoded once)


def _tex_warm():
    from .render import tex  # noqa: F401  (its renderer and the page model)


def _weasyprint_warm():
    from .render.pdf import load_weasyprint

    load_weasyprint()


def _notebook_warm():
    import nbformat  # noqa: F401  (and its schema validator, once)


def _latex_source(page, *, paper, template_dir):
    return _tex(page, paper=paper, template_dir=template_dir)


PDF_ENGINES = {e.name: e for e in (
    PdfEngine("typst", _typst_source, _typst_compile, template="typ", warm=_typst_warm),
    PdfEngine("weasyprint", _printed_html, _weasyprint_compile, template="html", require=_weasyprint_require,
              warm=_weasyprint_warm),
    PdfEngine("latex", _latex_source, _latex_compile, template="tex", source_format="tex", require=_latex_require),
)}


# ---------------------------------------------------------------- the batch renderers (a manifest → a file)

def _moodle(manifest):
    from .lms import moodle

    return moodle.export(manifest)


def _qti(manifest):
    from .lms import qti

    return qti.export(manifest)


def _gift(manifest):
    from .lms import gift

    return gift.export(manifest)


# ---------------------------------------------------------------- the table

EXPORTERS = {e.name: e for e in (
    Exporter("pdf", "sheet", "application/pdf", _pdf, extension=".pdf", encoding=None, compiled=True,
             quiz_default=True),
    Exporter("html", "sheet", "text/html; charset=utf-8", _html, extension=".html", quiz_default=True, template="html",
             warm=_html_warm),
    Exporter("tex", "sheet", "application/x-tex; charset=utf-8", _tex, extension=".tex", encoding="ascii",
             template="tex", warm=_tex_warm),
    Exporter("moodle", "batch", "application/xml; charset=utf-8", _moodle, file="moodle.xml", quiz_default=True),
    Exporter("qti", "batch", "application/zip", _qti, file="canvas-qti.zip", encoding=None, quiz_default=True),
    Exporter("gift", "batch", "text/plain; charset=utf-8", _gift, file="quiz.gift.txt", quiz_default=True),
    Exporter("ipynb", "notebook", "application/x-ipynb+json", extension=".ipynb", warm=_notebook_warm),
)}

ALIASES = {"canvas": "qti"}     # other names ``--format`` takes


def of_scope(scope: str) -> list[Exporter]:
    return [e for e in EXPORTERS.values() if e.scope == scope]


def sheet_formats() -> tuple[str, ...]:
    """The formats of a sheet's documents in the order they are written: those rendered from the page
    first, then those compiled (a PDF may compile a ``.tex`` written just before)."""
    sheet = of_scope("sheet")
    return tuple(e.name for e in sheet if not e.compiled) + tuple(e.name for e in sheet if e.compiled)


def words(names, last: str = "or") -> str:
    """``a, b or c``: names in a sentence."""
    names = list(names)
    return ", ".join(names[:-1]) + f" {last} " + names[-1] if len(names) > 1 else "".join(names)


def render_sheet(page, formats, *, paper="a4", template_dir=None, pdf_engine="typst") -> dict[str, bytes]:
    """One document (the *page*) in each of *formats* (sheet formats): ``{extension: bytes}``, in the
    order of :func:`sheet_formats`; the formats share what they render (the LaTeX engine compiles the ``.tex``)."""
    sources: dict[str, str] = {}
    out = {}
    for name in sheet_formats():
        if name in formats:
            e = EXPORTERS[name]
            out[e.extension] = e.write(page, paper=paper, template_dir=template_dir, pdf_engine=pdf_engine,
                                       sources=sources)
    return out


def warm(formats, pdf_engine: str = "typst") -> list[str]:
    """Load what *formats* need (the Typst binding, WeasyPrint, nbformat); return the template kinds they
    render (``html``, ``tex``, ``typ``), each once."""
    kinds = []
    for name in formats:
        e = EXPORTERS[name]
        if name == "pdf":
            e = PDF_ENGINES[pdf_engine]
        if e.template:
            kinds.append(e.template)
        if e.warm is not None:
            e.warm()
    return list(dict.fromkeys(kinds))
