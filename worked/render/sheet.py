"""Writing a worksheet and an answer key to a folder: every format, atomically, never over others' files."""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from ..errors import WorkedError

MARKER = ".worked"   # written into every folder we create; without it we refuse to overwrite
PDF_ENGINES = ("weasyprint", "latex")
PAPERS = ("a4", "letter")


def document_pdf(kind: str, sol, *, student=None, paper="a4", pdf_engine="weasyprint", template_dir=None) -> bytes:
    from . import html as H
    from . import pdf as P
    from . import tex as T

    if pdf_engine not in PDF_ENGINES:
        raise WorkedError(f"--pdf-engine: expected weasyprint or latex, got {pdf_engine!r}")
    if paper not in PAPERS:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")
    if pdf_engine == "latex":
        return P.tex_to_pdf(T.render_tex(kind, sol, student=student, paper=paper, template_dir=template_dir))
    html = H.render_html(kind, sol, student=student, for_pdf=True, template_dir=template_dir, paper=paper)
    return P.html_to_pdf(html, paper=paper)


def _umask() -> int:
    old = os.umask(0o022)
    os.umask(old)
    return old


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _run_jobs(jobs):
    """Run PDF jobs; with two or more cores, the first in a forked child while this process does the rest.

    The result is the same either way (each PDF is deterministic); the child sends back its bytes, or
    its exception, through a pipe. Where fork is unavailable, or on one core, the jobs run in turn.
    """
    if len(jobs) < 2 or not _can_fork():
        return [(name, job()) for name, job in jobs]
    import pickle

    r, w = os.pipe()
    pid = fork_child(lambda: _send_outcome(w, jobs[0][1]), close=(r,))   # the child: first job only
    os.close(w)
    results = []
    try:
        rest = [(name, job()) for name, job in jobs[1:]]
    finally:
        with os.fdopen(r, "rb") as fh:
            payload = fh.read()
        os.waitpid(pid, 0)
    ok, value = pickle.loads(payload) if payload else (False, "PDF worker process failed")
    if not ok:
        raise WorkedError(value)
    results.append((jobs[0][0], value))
    return results + rest


def outcome(work) -> tuple[bool, object]:
    """``(True, work())``, or ``(False, message)`` if it raised: what a child process sends its parent."""
    try:
        return True, work()
    except BaseException as exc:  # noqa: BLE001 - handed to the parent as its message
        return False, str(exc) or type(exc).__name__


def fork_child(body, close=()) -> int:
    """Fork; the child closes the file descriptors *close*, runs *body* and exits (status 1 if it raised)."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            for fd in close:
                os.close(fd)
            body()
        except BaseException:  # noqa: BLE001 - the parent sees the missing reply
            code = 1
        finally:
            os._exit(code)
    return pid


def _send_outcome(fd: int, work) -> None:
    import pickle

    payload = pickle.dumps(outcome(work))
    with os.fdopen(fd, "wb") as fh:
        fh.write(payload)


def _can_fork() -> bool:
    import threading

    return (hasattr(os, "fork") and (os.cpu_count() or 1) >= 2 and not os.environ.get("WORKED_NO_FORK")
            and threading.active_count() == 1)   # never fork a threaded process (servers)


def _render_text_formats(out, pdf_jobs, sol, documents, formats, *, student, paper, pdf_engine, template_dir,
                         pdf_here) -> None:
    """HTML and LaTeX of each document into *out*; the PDF jobs to run here (unless a child makes them)."""
    from . import html as H
    from . import tex as T

    for kind in documents:
        if "html" in formats:
            out[f"{kind}.html"] = H.render_html(kind, sol, student=student, template_dir=template_dir,
                                                paper=paper).encode("utf-8")
        tex = None
        if "tex" in formats or ("pdf" in formats and pdf_engine == "latex"):
            tex = T.render_tex(kind, sol, student=student, paper=paper, template_dir=template_dir)
            if "tex" in formats:
                out[f"{kind}.tex"] = tex.encode("ascii")
        if "pdf" in formats and pdf_here:
            if pdf_engine == "latex":
                from .pdf import tex_to_pdf

                pdf_jobs.append((f"{kind}.pdf", lambda tex=tex: tex_to_pdf(tex)))
            else:
                pdf_jobs.append((f"{kind}.pdf", lambda kind=kind: document_pdf(
                    kind, sol, student=student, paper=paper, template_dir=template_dir)))


def target_dir(sol, outdir) -> Path:
    return Path(outdir) / sol.problem.slug


def write_sheet(sol, outdir, *, formats=("html", "tex", "pdf"), paper="a4", pdf_engine="weasyprint",
                template_dir=None, force=False, student=None, documents=("worksheet", "answer-key"),
                layout_server=None) -> list[Path]:
    """Write the documents in every format; see :func:`worked.render.write_sheet`.

    *layout_server* (a :class:`worked.render.pdfserver.LayoutServer`, started by the CLI before it
    solved the problem) lays out the WeasyPrint PDFs in its own process.
    """
    formats = list(dict.fromkeys(formats))
    bad = [f for f in formats if f not in ("html", "tex", "pdf")]
    if bad or not formats:
        raise WorkedError(f"--format: expected some of html, tex, pdf (comma-separated), got {','.join(formats) or 'nothing'}")
    if paper not in PAPERS:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")
    if pdf_engine not in PDF_ENGINES:
        raise WorkedError(f"--pdf-engine: expected weasyprint or latex, got {pdf_engine!r}")
    if "pdf" in formats and pdf_engine == "latex":
        from .pdf import pdflatex_path

        if pdflatex_path() is None:
            raise WorkedError("--pdf-engine latex: pdflatex is not installed (Debian: texlive-latex-base, "
                              "texlive-latex-recommended, texlive-fonts-recommended); use --pdf-engine weasyprint")
    folder = target_dir(sol, outdir)
    if folder.exists() and not folder.is_dir():
        raise WorkedError(f"{folder}: exists and is not a folder")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / MARKER).exists() and not force:
        raise WorkedError(f"{folder}: folder exists and was not written by worked; use --force to write into it")

    # render everything first: an error leaves the folder as it was
    out: dict[str, bytes] = {}
    pdf_jobs = []
    documents = list(documents)
    served = "pdf" in formats and pdf_engine == "weasyprint"
    own_server = contextlib.nullcontext()
    if served and layout_server is None and len(documents) >= 2 and _can_fork():
        from .pdfserver import LayoutServer

        layout_server = own_server = LayoutServer()   # imports WeasyPrint while the formulas are drawn here
    served = served and layout_server is not None
    with own_server:
        if served:
            from . import html as H

            for kind in documents[::-1]:   # the key first: the longest layout starts soonest
                layout_server.submit(kind, H.render_html(kind, sol, student=student, for_pdf=True,
                                                         template_dir=template_dir, paper=paper), paper)
        _render_text_formats(out, pdf_jobs, sol, documents, formats, student=student, paper=paper,
                             pdf_engine=pdf_engine, template_dir=template_dir, pdf_here=not served)
        for name, data in _run_jobs(pdf_jobs):
            out[name] = data
        if served:
            out.update((f"{k}.pdf", layout_server.result(k)) for k in documents)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / MARKER
        if not marker.exists():
            _atomic_write(marker, b"written by worked sheet; worked may overwrite the files in this folder\n")
        paths = []
        for name, data in out.items():
            p = folder / name
            _atomic_write(p, data)
            paths.append(p)
    except OSError as exc:
        raise WorkedError(f"{folder}: cannot write: {exc.strerror or exc}") from None
    return paths
