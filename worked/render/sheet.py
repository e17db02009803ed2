"""Writing a worksheet and an answer key to a folder: every format, atomically, never over others' files."""
from __future__ import annotations

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
    import threading

    if (len(jobs) < 2 or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2 or os.environ.get("WORKED_NO_FORK")
            or threading.active_count() > 1):  # never fork a threaded process (servers)
        return [(name, job()) for name, job in jobs]
    import pickle

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: first job only
        code = 0
        try:
            os.close(r)
            try:
                payload = pickle.dumps((True, jobs[0][1]()))
            except BaseException as exc:  # noqa: BLE001 - handed to the parent as its message
                payload = pickle.dumps((False, str(exc) or type(exc).__name__))
            with os.fdopen(w, "wb") as fh:
                fh.write(payload)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
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


def target_dir(sol, outdir) -> Path:
    return Path(outdir) / sol.problem.slug


def write_sheet(sol, outdir, *, formats=("html", "tex", "pdf"), paper="a4", pdf_engine="weasyprint",
                template_dir=None, force=False, student=None, documents=("worksheet", "answer-key")) -> list[Path]:
    from . import html as H
    from . import tex as T

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
    for kind in documents:
        if "html" in formats:
            out[f"{kind}.html"] = H.render_html(kind, sol, student=student, template_dir=template_dir,
                                                paper=paper).encode("utf-8")
        tex = None
        if "tex" in formats or ("pdf" in formats and pdf_engine == "latex"):
            tex = T.render_tex(kind, sol, student=student, paper=paper, template_dir=template_dir)
            if "tex" in formats:
                out[f"{kind}.tex"] = tex.encode("ascii")
        if "pdf" in formats:
            if pdf_engine == "latex":
                from .pdf import tex_to_pdf

                pdf_jobs.append((f"{kind}.pdf", lambda tex=tex: tex_to_pdf(tex)))
            else:
                pdf_jobs.append((f"{kind}.pdf", lambda kind=kind: document_pdf(
                    kind, sol, student=student, paper=paper, template_dir=template_dir)))
    for name, data in _run_jobs(pdf_jobs):
        out[name] = data
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
