"""Writing a worksheet and an answer key to a folder: the set at once (:mod:`worked.output`), never over others' files."""
from __future__ import annotations

from pathlib import Path

from .. import exporters as E
from ..errors import WorkedError
from ..i18n import Msg
from ..output import MARKER, FolderSet, read_marker  # noqa: F401  (MARKER: the folder's list of our files)

SHEET_FILES = ("worksheet.*", "answer-key.*")   # what a sheet folder with an old marker holds
PDF_ENGINES = tuple(E.PDF_ENGINES)
PAPERS = ("a4", "letter")


def check_engine(pdf_engine: str, paper: str = "a4") -> None:
    if pdf_engine not in PDF_ENGINES:
        raise WorkedError(Msg("--pdf-engine: expected {engines}, got {got}", engines=E.words(PDF_ENGINES), got=repr(pdf_engine)))
    if paper not in PAPERS:
        raise WorkedError(Msg("--paper: expected {papers}, got {got}", papers=E.words(PAPERS), got=repr(paper)))


def document_pdf(kind: str, sol, *, student=None, paper="a4", pdf_engine="typst", template_dir=None) -> bytes:
    """One document as PDF bytes (see :func:`page_pdf`)."""
    from .view import build

    return page_pdf(build(sol, kind, student), paper=paper, pdf_engine=pdf_engine, template_dir=template_dir)


def page_pdf(page, *, paper="a4", pdf_engine="typst", template_dir=None) -> bytes:
    """A page (:class:`worked.render.view.Page`) as PDF bytes.

    typst (default): ``templates/sheet/<kind>.typ`` compiled in this process (see :mod:`.typst`);
    weasyprint: the HTML sheet printed as it is; latex: the ``.tex`` compiled by pdflatex
    (the engines of :data:`worked.exporters.PDF_ENGINES`).
    """
    check_engine(pdf_engine, paper)
    return E.EXPORTERS["pdf"].write(page, paper=paper, pdf_engine=pdf_engine, template_dir=template_dir)


def target_dir(sol, outdir) -> Path:
    return Path(outdir) / sol.problem.slug


def check_formats(formats) -> list[str]:
    """The sheet formats asked for, each once; a one-line error for an unknown one or none."""
    formats = list(dict.fromkeys(formats))
    names = E.sheet_formats()
    bad = [f for f in formats if f not in names]
    if bad or not formats:
        at = dict(formats=", ".join(names), got=",".join(formats))
        raise WorkedError(Msg("--format: expected some of {formats} (comma-separated), got {got}", **at) if formats else
                          Msg("--format: expected some of {formats} (comma-separated), got nothing", **at))
    return formats


def require_engine(formats, pdf_engine: str) -> None:
    """Refuse, before anything is rendered, a PDF engine that is not installed."""
    engine = E.PDF_ENGINES[pdf_engine]
    if "pdf" in formats and engine.require is not None:
        engine.require()


def write_sheet(sol, outdir, *, formats=E.sheet_formats(), paper="a4", pdf_engine="typst",
                template_dir=None, force=False, student=None, documents=("worksheet", "answer-key")) -> list[Path]:
    """Write the documents in every format; see :func:`worked.render.write_sheet`."""
    formats = check_formats(formats)
    check_engine(pdf_engine, paper)
    require_engine(formats, pdf_engine)
    folder = target_dir(sol, outdir)
    if folder.exists() and not folder.is_dir():
        raise WorkedError(Msg("{path}: exists and is not a folder", path=folder))
    if folder.is_dir() and read_marker(folder) is None and any(folder.iterdir()) and not force:
        raise WorkedError(Msg("{path}: folder exists and was not written by worked; use --force to write into it (it "
                              "leaves the other files alone)", path=folder))

    # render everything first: an error leaves the folder as it was; the page is built once, for every document
    from .view import as_kind, build

    out: dict[str, bytes] = {}
    page = None
    for kind in documents:
        page = build(sol, kind, student) if page is None else as_kind(page, kind)
        for ext, data in E.render_sheet(page, formats, paper=paper, template_dir=template_dir,
                                        pdf_engine=pdf_engine).items():
            out[f"{kind}{ext}"] = data
    # the set is swapped in whole: a key never sits beside a worksheet of another problem or version
    with FolderSet(folder, kind="worked sheet", force=force, legacy=SHEET_FILES,
                   hint=Msg("use --force to write into it")) as stage:
        stage.write(out)
        stage.commit()
    paths = [folder / name for name in out]
    if stage.note():
        import sys

        print(Msg("note: {note}", note=stage.note()).localized(), file=sys.stderr)
    return paths
