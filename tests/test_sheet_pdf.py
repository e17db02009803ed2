"""PDFs of the two non-default engines: formulas are text, the bytes come from the document as it is."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from sheet_support import needs_pdflatex, needs_weasyprint
from worked import eq
from worked.problem import load
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None, reason="pdftotext (poppler-utils) is not installed")
_DECIMAL = re.compile(r"\d+\.\d+")


def key_decimals(sol) -> set[str]:
    """Every decimal the answer key shows: the rounded values in its worked lines (the trees' Dec nodes)
    and the entries of its matrices and tables, without their signs."""
    from worked.render.view import Record, build

    out: set[str] = set()

    def walk(x):
        if isinstance(x, eq.Dec):
            out.add(f"{abs(x.value):f}")
        elif isinstance(x, eq.Node):
            for c in x.children():
                walk(c)
        elif isinstance(x, Record):
            for f in x.FIELDS:
                walk(getattr(x, f))
        elif isinstance(x, dict):
            if isinstance(x.get("text"), str):
                out.update(_DECIMAL.findall(x["text"]))
            for v in x.values():
                walk(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                walk(v)

    walk(build(sol, "answer-key", None))
    return out


def pdftotext(pdf: bytes, tmp_path: Path) -> str:
    (tmp_path / "k.pdf").write_bytes(pdf)
    return subprocess.run(["pdftotext", "-layout", "k.pdf", "-"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def part9():
    return solve(load(None))


@needs_pdftotext
@pytest.mark.parametrize("engine", [pytest.param("weasyprint", marks=needs_weasyprint),
                                    pytest.param("latex", marks=needs_pdflatex)])
def test_every_decimal_of_the_part9_key_is_text(part9, engine, tmp_path):
    """pdftotext on the Part 9 key finds every decimal the key shows, as a whole number (4.1133, 0.1636,
    the sums 25.1454 in the fractions, the glance tables): formulas are text, not drawings."""
    from worked.render import answer_key_pdf

    wanted = key_decimals(part9)
    assert {"4.1133", "16.9188", "25.1454", "0.6728", "1.4142", "0.16"} <= wanted and len(wanted) > 30
    found = set(_DECIMAL.findall(pdftotext(answer_key_pdf(part9, pdf_engine=engine), tmp_path)))
    assert wanted <= found, sorted(wanted - found)


@needs_pdftotext
@needs_weasyprint
def test_fractions_of_a_long_key_are_text(tmp_path):
    """A key full of exact fractions (four tokens, every check): every decimal is text in the WeasyPrint PDF."""
    from worked.render import answer_key_pdf

    sol = solve(load(str(ROOT / "problems" / "four-tokens-fractions.toml")), checks="all")
    wanted = key_decimals(sol)
    found = set(_DECIMAL.findall(pdftotext(answer_key_pdf(sol, pdf_engine="weasyprint"), tmp_path)))
    assert wanted <= found, sorted(wanted - found)


@needs_weasyprint
def test_weasyprint_path_imports_no_ziamath():
    """The WeasyPrint PDF is made without ziamath (or any SVG of formulas)."""
    code = ("import sys\nfrom worked.problem import load\nfrom worked.solver import solve\n"
            "from worked.render import answer_key_pdf, worksheet_pdf\nsol = solve(load(None))\n"
            "pdf = answer_key_pdf(sol, pdf_engine='weasyprint') + worksheet_pdf(sol, pdf_engine='weasyprint')\n"
            "assert pdf.count(b'%PDF') == 2\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ziamath'))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, WORKED_NO_FORK="1"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == "[]"


def test_pdf_html_has_no_images_of_formulas(part9):
    """For WeasyPrint, formulas are HTML text (class "m"), never an image or an SVG."""
    from worked.render import answer_key_html

    html = answer_key_html(part9, for_pdf=True)
    assert "<img" not in html and "<svg" not in html and "<math" not in html
    assert html.count('<span class="m') > 50 and "4.1133" in html


def test_latex_worksheet_grid_has_column_and_row_rules(part9):
    """Each worksheet grid of the LaTeX worksheet is an array with a rule between columns (|) and rows
    (\\hline), cells about 15 mm wide and 8 mm high, and no rules above it by its column labels."""
    from worked.render import worksheet_tex
    from worked.render.tex import GRID_CELL

    tex = worksheet_tex(part9)
    grids = re.findall(r"\\begin\{array\}\[t\]\{@\{\}(w\{c\}\{[^}]*\}(?:\|w\{c\}\{[^}]*\})*)@\{\}\}(.*?)\\end\{array\}", tex)
    assert len(grids) == len(part9.steps)
    for spec, body in grids:
        k = spec.count("w{c}")
        assert spec.count("|") == k - 1 and k >= 2
        assert f"w{{c}}{{{GRID_CELL[0]}}}" in spec
        assert body.count(r"\multicolumn{1}{c}") == k           # column labels without the rules
        assert body.count(r"\hline") == part9.problem.n - 1            # the rows are the tokens
        assert body.count(GRID_CELL[1]) >= 3


_GRAY_SEGMENT = re.compile(rb"0\.55 G\s*q\s*1 0 0 1 [-\d.]+ [-\d.]+ cm\s*\[\]0 d 0 J [\d.]+ w 0 0 m ([\d.]+) ([\d.]+) l S")


@needs_pdflatex
def test_latex_worksheet_draws_the_grid_rules(part9):
    """The compiled worksheet draws each grid's rules in gray (black!45): vertical segments between
    columns, 8 mm (a row) long, and horizontal ones between rows."""
    import io

    from pypdf import PdfReader

    from worked.render import worksheet_pdf

    pdf = worksheet_pdf(part9, pdf_engine="latex")
    content = b"".join(p.get_contents().get_data() for p in PdfReader(io.BytesIO(pdf)).pages)
    segments = [(float(x), float(y)) for x, y in _GRAY_SEGMENT.findall(content)]
    vertical = [y for x, y in segments if x == 0]
    horizontal = [x for x, y in segments if y == 0]
    n, grids = part9.problem.n, len(part9.steps)
    assert len(vertical) >= grids * n and len(horizontal) >= grids * (n - 1)
    assert all(21 < y < 25 for y in vertical)          # 23.2 pt = 8.2 mm a row
    assert all(x > 2 * 40 for x in horizontal)         # across two or more cells of 15 mm (42 pt)


def test_cli_bad_problem_is_one_line(tmp_path):
    """A bad problem file gives one line on stderr, exit 2 and nothing written."""
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\ntokens = ["a"]\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "worked", "sheet", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
