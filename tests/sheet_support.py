"""Shared helpers for the tests/test_sheet_*.py files (worksheets and answer keys)."""
from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
def _is_problem(path: Path) -> bool:
    import tomllib

    try:
        return "X" in tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False


def is_quiz_spec(path: Path) -> bool:
    """A quiz spec, not a problem: it has a [family] table, or [[parts]] each with its own, or one given [problem]."""
    import tomllib

    return bool({"family", "parts", "problem"} & set(tomllib.loads(path.read_text(encoding="utf-8"))))


PROBLEMS = [p for p in sorted((ROOT / "problems").glob("*.toml")) if _is_problem(p)]  # not quiz configs
HOSTILE_TITLE = r"\input{/etc/passwd} <script>alert(1)</script> 50% & $x_1$ #{}~^"
HOSTILE_TOKENS = [r"\input{/etc/passwd}", "<script>alert(1)</script>", "50% & $x_1$ #{}~^"]
BAD_LOG = ("Undefined control sequence", "invalid in math mode", "Unicode character")

needs_pdflatex = needs_weasyprint = None
try:
    import os

    import pytest

    from worked.render.pdf import weasyprint_problem

    needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None,
                                        reason="pdflatex not installed (CI installs texlive-latex-base/-recommended)")
    # what `--pdf-engine weasyprint` would say (Pango missing: what to install); skipped only on a developer's
    # machine: .ci/run installs Pango, and in CI (CI=true) a missing Pango fails the test
    WEASYPRINT_PROBLEM = weasyprint_problem()
    needs_weasyprint = pytest.mark.skipif(WEASYPRINT_PROBLEM is not None and not os.environ.get("CI"),
                                          reason=WEASYPRINT_PROBLEM or "")
except ImportError:  # pragma: no cover
    pass


def hostile_problem():
    from worked.problem import Problem

    return Problem.from_dict({
        "title": HOSTILE_TITLE, "tokens": HOSTILE_TOKENS,
        "X": [[1, 0, 1], [0, 2, 1], [1, 1, 0]],
        "W_Q": [[1, 0], [0, 1], [1, 1]], "W_K": [[0, 1], [1, 0], [1, 1]], "W_V": [[1, 0], [0, 1], [1, 1]],
    })


def compile_tex(tex: str) -> tuple[int, str, bytes]:
    """Run pdflatex as the issue asks; return (exit code, log text, pdf bytes or b"")."""
    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "t.tex").write_text(tex, encoding="ascii")
        r = subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "t.tex"], cwd=d,
                           capture_output=True, timeout=120, stdin=subprocess.DEVNULL)
        log = (Path(d) / "t.log").read_text(encoding="latin-1")
        pdf = (Path(d) / "t.pdf").read_bytes() if (Path(d) / "t.pdf").exists() else b""
        return r.returncode, log, pdf


def pdf_text(data: bytes) -> str:
    import io

    from pypdf import PdfReader

    return "\n".join(page.extract_text() or "" for page in PdfReader(io.BytesIO(data)).pages)


def pdf_pages(data: bytes) -> int:
    import io

    from pypdf import PdfReader

    return len(PdfReader(io.BytesIO(data)).pages)


class Page(HTMLParser):
    """Collects text outside <math>/<style>, math element count, tags and URL-bearing attributes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth_math = 0
        self.skip = 0
        self.text: list[str] = []
        self.math = 0
        self.tags: list[str] = []
        self.urls: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "math":
            self.math += 1
            self.depth_math += 1
        if tag in ("style", "script"):
            self.skip += 1
        for k, v in attrs:
            if k in ("src", "href", "action", "srcset", "poster", "data") and v is not None:
                self.urls.append(v)

    def handle_endtag(self, tag):
        if tag == "math":
            self.depth_math -= 1
        if tag in ("style", "script"):
            self.skip -= 1

    def handle_data(self, data):
        if not self.depth_math and not self.skip:
            self.text.append(data)


def parse_html(html: str) -> Page:
    p = Page()
    p.feed(html)
    p.close()
    return p


LATEX_LEAK = re.compile(r"\\(frac|text|left|right|sqrt|cdot|approx|mathrm|infty|sum|textstyle)\b|\^\{|_\{")


def golden_normalize(html: str) -> str:
    """Drop the embedded font (a generated binary, checked elsewhere) from HTML before comparing."""
    return re.sub(r"data:font/woff2;base64,[A-Za-z0-9+/=]+", "data:font/woff2;base64,...", html)
