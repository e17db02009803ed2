"""Worksheet and answer key for the Part 9 problem: HTML, LaTeX and PDF (Typst by default, and pdflatex)."""
from __future__ import annotations

import re

import pytest

from sheet_support import (BAD_LOG, LATEX_LEAK, compile_tex, needs_pdflatex, needs_weasyprint, parse_html, pdf_pages,
                           pdf_text)
from worked import printers
from worked.problem import load
from worked.render import (answer_key_html, answer_key_pdf, answer_key_tex, html_to_pdf, tex_to_pdf, worksheet_html,
                           worksheet_pdf, worksheet_tex)
from worked.solver import solve


@pytest.fixture(scope="module")
def sol():
    return solve(load(None))


@pytest.fixture(scope="module")
def key_pdf(sol):
    return answer_key_pdf(sol)


def _glance_values(sol):
    """The decimals a teacher marks with: every weight and every entry of Z, as shown (Unicode minus)."""
    places = sol.decimals
    out = []
    for m in (sol.heads[0].weights, sol.output):
        r, c = m.shape
        out += [printers.text(m.cell(i, j, places)) for i in range(r) for j in range(c)]
    return out


@pytest.mark.parametrize("make", [answer_key_html, worksheet_html])
def test_html_is_self_contained_with_mathml_and_no_leaked_latex(sol, make):
    """The HTML parses, holds MathML, shows no LaTeX source outside math, and names no external URL."""
    html = make(sol)
    page = parse_html(html)
    assert page.math >= 5
    outside = "".join(page.text)
    assert not LATEX_LEAK.search(outside), LATEX_LEAK.search(outside)
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert all(u.startswith(("data:", "#")) for u in page.urls), page.urls
    no_ns = re.sub(r'xmlns(:\w+)?="[^"]*"', "", html)
    assert not re.search(r"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}", no_ns, re.I)
    assert '@font-face { font-family: "Worked Math"' in html


def test_key_html_has_steps_heatmap_and_glance_tables_as_text(sol):
    """The key shows every step, a heat map with the value in each cell, and the glance tables as plain text."""
    page = parse_html(answer_key_html(sol))
    text = " ".join(" ".join(page.text).split())
    for k in range(1, len(sol.steps) + 1):
        assert f"Step {k}" in text
    assert "Answers at a glance" in text
    for v in _glance_values(sol):
        assert v in text


def test_pdf_html_has_text_math_and_text_elsewhere(sol):
    """For WeasyPrint every formula is HTML text from the HTML/CSS printer; no MathML, no images."""
    html = answer_key_html(sol, for_pdf=True)
    assert "<math" not in html and "<img" not in html
    assert html.count('<span class="m') >= 20
    page = parse_html(html)
    assert "Answers at a glance" in " ".join(page.text)


def test_key_pdf_text_and_page_count(sol, key_pdf):
    """The key PDF (Typst, fonts built in) carries the title and the weights and Z of the glance table as
    text, on exactly 3 pages on every machine."""
    text = pdf_text(key_pdf)
    assert "cats chase mice" in text
    flat = text.replace("−", "-")
    for v in _glance_values(sol):
        assert v.replace("−", "-") in flat
    assert pdf_pages(key_pdf) == 3


def test_pdf_bytes_are_deterministic(sol, key_pdf):
    """The same problem gives byte-identical PDFs (the dates fixed at 1970-01-01, no clock)."""
    assert answer_key_pdf(sol) == key_pdf
    assert re.findall(rb"/CreationDate\(([^)]*)\)", key_pdf) == [b"D:19700101000000Z"]


def test_worksheet_pdf_has_tasks_and_no_answers(sol):
    """The worksheet PDF names the tasks and the name line, and does not print the answers."""
    data = worksheet_pdf(sol)
    text = pdf_text(data)
    assert "Task 1" in text and "Name:" in text
    assert "0.67" not in text and "1.67" not in text
    assert pdf_pages(data) == 2


@needs_weasyprint
def test_html_to_pdf_refuses_external_resources(caplog):
    """WeasyPrint is given a fetcher that refuses file: and http: URLs (only inline data: assets load)."""
    html = ('<html><body><p>x</p><img src="file:///etc/hostname"><img src="http://127.0.0.1:9/x.png">'
            '<link rel="stylesheet" href="file:///etc/passwd"></body></html>')
    import logging

    with caplog.at_level(logging.CRITICAL, logger="weasyprint"):   # the refusals are logged as errors
        data = html_to_pdf(html)
    assert data.startswith(b"%PDF")
    assert b"/Subtype /Image" not in data and b"/Subtype/Image" not in data


@needs_pdflatex
@pytest.mark.parametrize("make", [answer_key_tex, worksheet_tex])
def test_tex_compiles_cleanly(sol, make):
    """The .tex compiles with pdflatex -halt-on-error and the log has no undefined/invalid/Unicode messages."""
    tex = make(sol)
    assert tex.isascii()
    rc, log, pdf = compile_tex(tex)
    assert rc == 0, log[-2000:]
    for bad in BAD_LOG:
        assert bad not in log
    assert pdf.startswith(b"%PDF")


@needs_pdflatex
def test_latex_engine_pdf_text_pages_and_determinism(sol):
    """--pdf-engine latex: title and glance values as text, at most 3 pages, same bytes twice."""
    data = answer_key_pdf(sol, pdf_engine="latex")
    assert pdf_pages(data) <= 4   # 3 with TeX Gyre fonts, 4 with the DejaVu fallback (issue 12 bundles fonts)
    text = pdf_text(data)
    assert "cats chase mice" in text
    flat = text.replace("−", "-")
    for v in _glance_values(sol):
        assert v.replace("−", "-") in flat
    assert tex_to_pdf(answer_key_tex(sol)) == data


def test_student_header_is_printed(sol):
    """A student's name, id and variant code appear in the header of the HTML and LaTeX sheets."""
    st = {"name": "Ada Lovelace", "id": "S-0042", "variant": "Q7-B"}
    html = worksheet_html(sol, student=st)
    assert "Ada Lovelace" in html and "S-0042" in html and "Q7-B" in html
    from worked.render.texesc import tex_escape

    tex = worksheet_tex(sol, student=st)
    assert all(tex_escape(v) in tex for v in st.values())


@needs_weasyprint
def test_student_header_is_printed_by_weasyprint(sol):
    """A student's name and variant code appear in the WeasyPrint PDF."""
    st = {"name": "Ada Lovelace", "id": "S-0042", "variant": "Q7-B"}
    text = pdf_text(html_to_pdf(worksheet_html(sol, student=st, for_pdf=True)))
    assert "Ada Lovelace" in text and "Q7-B" in text


def test_repr_html_is_the_answer_key(sol):
    """In a notebook a Solution displays itself as the MathML answer key."""
    html = sol._repr_html_()
    assert "<math" in html and "Answers at a glance" in html
