"""Every shipped problem renders as a worksheet and an answer key in HTML, LaTeX and PDF."""
from __future__ import annotations

import pytest

from sheet_support import BAD_LOG, PROBLEMS, compile_tex, needs_pdflatex, needs_weasyprint, parse_html, pdf_pages
from worked.problem import load
from worked.render import answer_key_html, answer_key_tex, html_to_pdf, worksheet_html, worksheet_tex
from worked.solver import solve

IDS = [p.stem for p in PROBLEMS]


@pytest.fixture(scope="module", params=PROBLEMS, ids=IDS)
def sol(request):
    return solve(load(request.param))


def test_html_renders(sol):
    """Both documents render to MathML HTML."""
    for make in (answer_key_html, worksheet_html):
        page = parse_html(make(sol))
        assert page.math > 0


@needs_weasyprint
def test_weasyprint_pdf_renders(sol):
    """Both documents render to a WeasyPrint PDF; a 3-token key fits on 4 pages (in the bundled fonts, so on
    every machine)."""
    for make in (answer_key_html, worksheet_html):
        pdf = html_to_pdf(make(sol, for_pdf=True))
        assert pdf.startswith(b"%PDF")
        if make is answer_key_html and sol.problem.n <= 3 and not sol.problem.multihead and sol.problem.train is None \
                and not hasattr(sol.problem, "blocks"):        # a chain of blocks: each block is such a key
            assert pdf_pages(pdf) <= 4


@needs_pdflatex
def test_tex_compiles(sol):
    """Both .tex documents compile with pdflatex without bad log messages."""
    for make in (answer_key_tex, worksheet_tex):
        rc, log, pdf = compile_tex(make(sol))
        assert rc == 0, log[-1500:]
        assert not any(b in log for b in BAD_LOG)
        if make is answer_key_tex and sol.problem.n <= 3 and not sol.problem.multihead and sol.problem.train is None \
                and not hasattr(sol.problem, "blocks"):        # a chain of blocks: each block is such a key
            assert pdf_pages(pdf) <= 4   # 3 with TeX Gyre fonts, 4 with the DejaVu fallback (issue 12)
