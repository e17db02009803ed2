"""Writing a worksheet and an answer key to a folder: the set at once (:mod:`worked.output`), never over others' files."""
from __future__ import annotations

from pathlib import Path

from ..errors import WorkedError
from ..output import MARKER, FolderSet, read_marker  # noqa: F401  (MARKER: the folder's list of our files)

SHEET_FILES = ("worksheet.*", "answer-key.*")   # what a sheet folder with an old marker holds
PDF_ENGINES = ("typst", "weasyprint", "latex")
PAPERS = ("a4", "letter")


def check_engine(pdf_engine: str, paper: str = "a4") -> None:
    if pdf_engine not in PDF_ENGINES:
        raise WorkedError(f"--pdf-engine: expected typst, weasyprint or latex, got {pdf_engine!r}")
    if paper not in PAPERS:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")


def document_pdf(kind: str, sol, *, student=None, paper="a4", pdf_engine="typst", template_dir=None,
                 extra=None) -> bytes:
    """One document as PDF bytes.

    typst (default): ``templates/sheet/<kind>.typ`` compiled in this process (see :mod:`.typst`);
    weasyprint: the HTML sheet printed as it is; latex: the ``.tex`` compiled by pdflatex.
    *extra* is more template data for the Typst templates (the quiz's graded questions).
    """
    check_engine(pdf_engine, paper)
    if pdf_engine == "typst":
        from . import typst as Y

        return Y.render_pdf(kind, sol, student=student, paper=paper, template_dir=template_dir, extra=extra)
    from . import pdf as P

    if pdf_engine == "latex":
        from . import tex as T

        return P.tex_to_pdf(T.render_tex(kind, sol, student=student, paper=paper, template_dir=template_dir))
    from . import html as H

    html = H.render_html(kind, sol, student=student, for_pdf=True, template_dir=template_dir, paper=paper)
    return P.html_to_pdf(html, paper=paper)


def target_dir(sol, outdir) -> Path:
    return Path(outdir) / sol.problem.slug


def write_sheet(sol, outdir, *, formats=("html", "tex", "pdf"), paper="a4", pdf_engine="typst",
                template_dir=None, force=False, student=None, documents=("worksheet", "answer-key")) -> list[Path]:
    """Write the documents in every format; see :func:`worked.render.write_sheet`."""
    formats = list(dict.fromkeys(formats))
    bad = [f for f in formats if f not in ("html", "tex", "pdf")]
    if bad or not formats:
        raise WorkedError(f"--format: expected some of html, tex, pdf (comma-separated), got {','.join(formats) or 'nothing'}")
    check_engine(pdf_engine, paper)
    if "pdf" in formats and pdf_engine == "latex":
        from .pdf import pdflatex_path

        if pdflatex_path() is None:
            raise WorkedError("--pdf-engine latex: pdflatex is not installed (Debian: texlive-latex-base, "
                              "texlive-latex-recommended, texlive-fonts-recommended); use --pdf-engine typst")
    if "pdf" in formats and pdf_engine == "weasyprint":
        from .pdf import require_weasyprint

        require_weasyprint()
    folder = target_dir(sol, outdir)
    if folder.exists() and not folder.is_dir():
        raise WorkedError(f"{folder}: exists and is not a folder")
    if folder.is_dir() and read_marker(folder) is None and any(folder.iterdir()) and not force:
        raise WorkedError(f"{folder}: folder exists and was not written by worked; use --force to write into it "
                          "(it leaves the other files alone)")

    # render everything first: an error leaves the folder as it was
    from . import html as H
    from . import tex as T

    out: dict[str, bytes] = {}
    for kind in documents:
        if "html" in formats:
            out[f"{kind}.html"] = H.render_html(kind, sol, student=student, template_dir=template_dir,
                                                paper=paper).encode("utf-8")
        if "tex" in formats:
            out[f"{kind}.tex"] = T.render_tex(kind, sol, student=student, paper=paper,
                                              template_dir=template_dir).encode("ascii")
        if "pdf" in formats:
            if pdf_engine == "latex" and "tex" in formats:
                from .pdf import tex_to_pdf

                out[f"{kind}.pdf"] = tex_to_pdf(out[f"{kind}.tex"].decode("ascii"))
            else:
                out[f"{kind}.pdf"] = document_pdf(kind, sol, student=student, paper=paper, pdf_engine=pdf_engine,
                                                  template_dir=template_dir)
    # the set is swapped in whole: a key never sits beside a worksheet of another problem or version
    with FolderSet(folder, kind="worked sheet", force=force, legacy=SHEET_FILES,
                   hint="use --force to write into it") as stage:
        stage.write(out)
        stage.commit()
    paths = [folder / name for name in out]
    if stage.note():
        import sys

        print(f"note: {stage.note()}", file=sys.stderr)
    return paths
