"""PDF from the HTML sheet with WeasyPrint, or from the .tex sheet with pdflatex: one document per call,
as it is, deterministic bytes."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import WorkedError

PAGE_SIZES = {"a4": "A4", "letter": "letter"}


def _fetcher():
    from weasyprint.urls import URLFetcher

    class OwnAssetsOnly(URLFetcher):
        """Refuse every URL except ``data:`` URLs: our pages carry their own assets inline."""

        def fetch(self, url, headers=None):
            if not url.startswith("data:"):
                raise ValueError(f"refused to fetch {url[:80]!r}: sheets use no external resources")
            return super().fetch(url, headers)

    return OwnAssetsOnly(allowed_protocols=("data",), timeout=1)


def html_to_pdf(html: str, *, paper: str = "a4") -> bytes:
    if paper not in PAGE_SIZES:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")
    import weasyprint

    fetcher = _fetcher()
    size = PAGE_SIZES[paper]
    css = weasyprint.CSS(string=f"@page {{ size: {size}; }}", url_fetcher=fetcher)
    doc = weasyprint.HTML(string=html, base_url="data:,", url_fetcher=fetcher)
    # no dates, a fixed identifier: the same HTML gives the same bytes
    return doc.write_pdf(stylesheets=[css], pdf_identifier=b"worked-sheet", uncompressed_pdf=False)


def pdflatex_path() -> str | None:
    return shutil.which("pdflatex")


def require_pdflatex() -> str:
    exe = pdflatex_path()
    if exe is None:
        raise WorkedError("pdflatex is not installed (Debian: apt-get install texlive-latex-base "
                          "texlive-latex-recommended texlive-fonts-recommended lmodern); use another --pdf-engine")
    return exe


def tex_env() -> dict:
    """pdfTeX's environment for reproducible output: no dates from the clock (``SOURCE_DATE_EPOCH``
    with ``FORCE_SOURCE_DATE`` also fixes ``\\today`` and the time stamps pdfTeX writes)."""
    return dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TZ="UTC")


_RERUN = ("Rerun to get", "Label(s) may have changed")
MAX_PASSES = 4


def tex_to_pdf(tex: str) -> bytes:
    """Compile *tex* with pdflatex, as it is, into PDF bytes.

    pdflatex runs again while its log asks for it (our footers print "page N of M", which needs
    the page count of a previous pass), as latexmk would, at most :data:`MAX_PASSES` times.
    The bytes depend on nothing but *tex* (and the TeX installation): the clock is fixed by
    :func:`tex_env`, and our templates turn off the document ID and the pdfTeX banner.
    """
    exe = require_pdflatex()
    with tempfile.TemporaryDirectory(prefix="worked-tex-") as d:
        (Path(d) / "sheet.tex").write_text(tex, encoding="ascii")
        for _ in range(MAX_PASSES):
            log = _run(exe, d)
            if not any(m in log for m in _RERUN):
                break
        return (Path(d) / "sheet.pdf").read_bytes()


def _run(exe: str, d: str) -> str:
    """One pdflatex pass in *d*; its log."""
    try:
        r = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "sheet.tex"],
                           cwd=d, env=tex_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise WorkedError("pdflatex took longer than 120 s") from None
    path = Path(d) / "sheet.log"
    log = path.read_text(encoding="latin-1") if path.exists() else ""
    if r.returncode != 0:
        err = next((ln for ln in log.splitlines() if ln.startswith("!")), None)
        raise WorkedError(f"pdflatex failed: {err or 'see the log'}")
    return log
