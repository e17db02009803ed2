"""PDF output: WeasyPrint from HTML (default) or pdflatex from our .tex. Both deterministic."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..errors import WorkedError

PAGE_SIZES = {"a4": "A4", "letter": "letter"}


def _fetcher():
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    from . import mathconv

    class OwnAssetsOnly(URLFetcher):
        """Refuse every URL except ``data:`` URLs: our pages carry their own assets inline."""

        def fetch(self, url, headers=None):
            if url.startswith(mathconv.FORMULA_SCHEME):
                svg = mathconv.formula_svg(url)
                if svg is None:
                    raise ValueError(f"unknown formula {url[:80]!r}")
                return URLFetcherResponse(url, svg.encode("utf-8"), {"Content-Type": "image/svg+xml"})
            if not url.startswith("data:"):
                raise ValueError(f"refused to fetch {url[:80]!r}: sheets use no external resources")
            return super().fetch(url, headers)

    return OwnAssetsOnly(allowed_protocols=("data",), timeout=1)


def html_to_pdf(html: str, *, paper: str = "a4") -> bytes:
    if paper not in PAGE_SIZES:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")
    import logging

    import weasyprint

    from .mathconv import speed_up_weasyprint

    speed_up_weasyprint()
    logging.getLogger("weasyprint").setLevel(logging.ERROR)
    fetcher = _fetcher()
    size = PAGE_SIZES[paper]
    css = weasyprint.CSS(string=f"@page {{ size: {size}; }}", url_fetcher=fetcher)
    from .mathconv import short_formula_urls

    doc = weasyprint.HTML(string=short_formula_urls(html), base_url="data:,", url_fetcher=fetcher)
    # no dates, a fixed identifier: the same HTML gives the same bytes
    return doc.write_pdf(stylesheets=[css], pdf_identifier=b"worked-sheet", uncompressed_pdf=False)


def pdflatex_path() -> str | None:
    return shutil.which("pdflatex")


def tex_to_pdf(tex: str) -> bytes:
    exe = pdflatex_path()
    if exe is None:
        raise WorkedError("pdflatex is not installed (Debian: apt-get install texlive-latex-base "
                          "texlive-latex-recommended texlive-fonts-recommended); use --pdf-engine weasyprint")
    # fixed dates and document ID: the same .tex gives the same bytes
    head = "\\pdfinfoomitdate=1\\pdftrailerid{}\\pdfsuppressptexinfo=-1\n"
    env = dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TZ="UTC")
    with tempfile.TemporaryDirectory(prefix="worked-tex-") as d:
        src = Path(d) / "sheet.tex"
        src.write_text(head + tex, encoding="ascii")
        # a first pass in draft mode (no PDF written: faster) collects the labels for "page N of M",
        # the second writes the PDF
        for draft in (True, False, False):
            try:
                r = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                                    *(["-draftmode"] if draft else []),
                                    "sheet.tex"], cwd=d, env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=120)
            except subprocess.TimeoutExpired:
                raise WorkedError("pdflatex took longer than 120 s") from None
            log = (Path(d) / "sheet.log").read_text(encoding="latin-1") if (Path(d) / "sheet.log").exists() else ""
            if r.returncode != 0:
                err = next((ln for ln in log.splitlines() if ln.startswith("!")), "see the log")
                raise WorkedError(f"pdflatex failed: {err}")
            if draft:
                continue
            if "Rerun to get" not in log and "Label(s) may have changed" not in log:
                break
        return (Path(d) / "sheet.pdf").read_bytes()
