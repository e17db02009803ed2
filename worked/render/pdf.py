"""PDF output: WeasyPrint from HTML (default) or pdflatex from our .tex. Both deterministic."""
from __future__ import annotations

import functools
import os
import re
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


def warm_up_weasyprint() -> None:
    """Lay out a tiny page once: WeasyPrint's first document parses C types and loads fonts.

    Done where it costs nothing (a process waiting for work) or once before forking workers.
    """
    try:
        html_to_pdf('<h2>Warm-up</h2><p style="width:6em">a paragraph long enough to be broken into lines'
                    '</p><table><tr><th>x</th><td><i>1.5</i></td></tr></table>')
    except Exception:  # noqa: BLE001 - the real documents report any problem themselves
        pass


def pdflatex_path() -> str | None:
    return shutil.which("pdflatex")


_PREAMBLE_LINE = re.compile(r"\\documentclass(\[[^\]]*\])?\{[^}]*\}|\\usepackage(\[[^\]]*\])?\{[^}]*\}|%.*|\s*")


def _split_preamble(tex: str) -> tuple[str, str]:
    """(the leading ``\\documentclass``/``\\usepackage`` lines, the rest of the document)."""
    lines = tex.splitlines(keepends=True)
    k = 0
    while k < len(lines) and _PREAMBLE_LINE.fullmatch(lines[k].rstrip("\n")):
        k += 1
    head = "".join(lines[:k])
    if "\\documentclass" not in head or "\\begin{document}" in head:
        return "", tex
    return head, "".join(lines[k:])


def _format_dir() -> Path | None:
    from .env import user_cache_dir

    return user_cache_dir("tex-formats")


@functools.lru_cache(maxsize=4)
def _tex_version(exe: str) -> bytes | None:
    try:
        return subprocess.run([exe, "--version"], capture_output=True, timeout=20,
                              stdin=subprocess.DEVNULL).stdout[:200]
    except (OSError, subprocess.TimeoutExpired):
        return None


def _preloaded_format(exe: str, packages: str, env: dict) -> Path | None:
    """A pdfTeX format with our class and packages already loaded (cached per preamble), or None.

    Loading the packages is about a third of a pdflatex run on our sheets; a quiz batch runs pdflatex
    a hundred times with the same preamble. The format is built once (``pdftex -ini "&pdflatex"``,
    then ``\\dump``) into the user's cache and replaced atomically; any failure means no format.
    """
    if os.environ.get("WORKED_NO_TEX_FORMAT"):
        return None
    d = _format_dir()
    if d is None or not packages:
        return None
    import hashlib

    version = _tex_version(exe)
    if version is None:
        return None
    name = hashlib.sha256(version + packages.encode("ascii")).hexdigest()[:24]
    fmt = d / f"worked-{name}.fmt"
    if fmt.exists():
        return fmt
    with tempfile.TemporaryDirectory(prefix="worked-fmt-", dir=d) as t:
        (Path(t) / "pre.tex").write_text(packages + "\\dump\n", encoding="ascii")
        try:
            r = subprocess.run([exe, "-ini", "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                                f"-jobname=worked-{name}", "&pdflatex", "pre.tex"], cwd=t, env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
        except (OSError, subprocess.TimeoutExpired):
            return None
        built = Path(t) / f"worked-{name}.fmt"
        if r.returncode != 0 or not built.exists():
            return None
        os.replace(built, fmt)
    return fmt


_PAGE_HINTS: dict[str, int] = {}   # pages of the last document compiled per hint key (see tex_to_pdf)


def tex_to_pdf(tex: str, *, hint: str | None = None) -> bytes:
    """Compile *tex* with pdflatex into deterministic PDF bytes.

    "page N of M" needs a second pass once the first has counted the pages. Documents of one kind in
    a batch (say every variant's worksheet) usually have the same number of pages, so with a *hint*
    key the page count of the previous such document is written into the .aux beforehand, and a
    single pass suffices when it was right; LaTeX's "Label(s) may have changed" asks for another
    pass when it was not. The final pass always reads the true count, so the bytes are the same.
    """
    exe = require_pdflatex()
    packages, rest = _split_preamble(tex)
    guess = _PAGE_HINTS.get(hint) if hint else None
    pdf, pages = compile_source(exe, packages, rest, guesses={LAST_PAGE: guess} if guess else None)
    if hint and LAST_PAGE in pages:
        _PAGE_HINTS[hint] = pages[LAST_PAGE]
    return pdf


LAST_PAGE = "wk-last-page"     # the label our templates put on a sheet's last page


def require_pdflatex() -> str:
    exe = pdflatex_path()
    if exe is None:
        raise WorkedError("pdflatex is not installed (Debian: apt-get install texlive-latex-base "
                          "texlive-latex-recommended texlive-fonts-recommended); use --pdf-engine weasyprint")
    return exe


def tex_env() -> dict:
    return dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TZ="UTC")


def compile_source(exe: str, packages: str, rest: str, *, guesses: dict[str, int] | None = None,
                   rerun: bool = True) -> tuple[bytes, dict[str, int]]:
    """Compile ``packages + rest`` (the preloaded format holds *packages*): (PDF bytes, page of each label).

    With *guesses* (label -> page) written into the .aux, the first pass is a real one; without, a
    draft pass collects the labels first. With *rerun*, passes repeat while LaTeX asks for it; without,
    there is one pass, whose PDF is returned with the pages it found.
    """
    # fixed dates and document ID: the same .tex gives the same bytes
    fixed = "\\pdfinfoomitdate=1\\pdftrailerid{}\\pdfsuppressptexinfo=-1\n"
    env = tex_env()
    fmt = _preloaded_format(exe, packages, env)
    if fmt is not None:
        try:
            return _compile(exe, fixed + rest, env, fmt, guesses, rerun)
        except _FormatFailed:   # a format pdfTeX will not load: drop it, compile the plain way
            try:
                fmt.unlink()
            except OSError:
                pass
    return _compile(exe, fixed + packages + rest, env, None, guesses, rerun)


class _FormatFailed(Exception):
    pass


_LABEL_PAGE = re.compile(r"\\newlabel\{([^}]*)\}\{\{[^}]*\}\{(\d+)\}")


def _compile(exe: str, source: str, env: dict, fmt: Path | None, guesses: dict[str, int] | None,
             rerun: bool) -> tuple[bytes, dict[str, int]]:
    with tempfile.TemporaryDirectory(prefix="worked-tex-") as d:
        (Path(d) / "sheet.tex").write_text(source, encoding="ascii")
        first = [exe]
        if fmt is not None:
            shutil.copyfile(fmt, Path(d) / "worked.fmt")
            first = [exe, "-fmt=worked"]
        # a first pass in draft mode (no PDF written: faster) collects the labels for "page N of M",
        # the second writes the PDF; with page-count guesses the first pass is a real one
        passes = (True, False, False) if rerun else (False,)
        if guesses:
            aux = "".join(f"\\newlabel{{{label}}}{{{{}}{{{g}}}}}\n" for label, g in guesses.items())
            total = sum(guesses.values())
            (Path(d) / "sheet.aux").write_text(f"\\relax \n{aux}\\gdef \\@abspage@last{{{total}}}\n",
                                               encoding="ascii")
            passes = (False, False, False) if rerun else (False,)
        for k, draft in enumerate(passes):
            try:
                r = subprocess.run([*first, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape",
                                    *(["-draftmode"] if draft else []),
                                    "sheet.tex"], cwd=d, env=env, stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=120)
            except subprocess.TimeoutExpired:
                raise WorkedError("pdflatex took longer than 120 s") from None
            log = (Path(d) / "sheet.log").read_text(encoding="latin-1") if (Path(d) / "sheet.log").exists() else ""
            if r.returncode != 0:
                err = next((ln for ln in log.splitlines() if ln.startswith("!")), None)
                if err is None and fmt is not None and k == 0:
                    raise _FormatFailed()
                raise WorkedError(f"pdflatex failed: {err or 'see the log'}")
            if draft or not rerun:
                continue
            if "Rerun to get" not in log and "Label(s) may have changed" not in log:
                break
        aux = (Path(d) / "sheet.aux").read_text(encoding="latin-1") if (Path(d) / "sheet.aux").exists() else ""
        pages = {m.group(1): int(m.group(2)) for m in _LABEL_PAGE.finditer(aux)}
        return (Path(d) / "sheet.pdf").read_bytes(), pages
