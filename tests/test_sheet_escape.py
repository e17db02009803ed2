"""Text from a problem file is data, never markup: hostile titles and tokens appear literally everywhere."""
from __future__ import annotations

import html as htmllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sheet_support import (BAD_LOG, HOSTILE_TITLE, HOSTILE_TOKENS, compile_tex, hostile_problem, needs_pdflatex,
                           needs_weasyprint, parse_html, pdf_text)
from worked.render import answer_key_html, answer_key_tex, html_to_pdf, worksheet_html, worksheet_tex
from worked.render.texesc import tex_escape
from worked.solver import solve


@pytest.fixture(scope="module")
def sol():
    return solve(hostile_problem())


@pytest.mark.parametrize("make", [answer_key_html, worksheet_html])
def test_hostile_text_is_literal_in_html(sol, make):
    """Title and tokens show as text; no <script> element is created; nothing else is injected."""
    html = make(sol)
    page = parse_html(html)
    assert "script" not in page.tags
    text = "".join(page.text)
    assert HOSTILE_TITLE in text
    for tok in HOSTILE_TOKENS:
        assert tok in text
    assert "<script>" not in html and htmllib.escape("<script>alert(1)</script>", quote=False) in html


@needs_pdflatex
@pytest.mark.parametrize("make", [answer_key_tex, worksheet_tex])
def test_hostile_text_compiles_and_prints_literally_in_tex(sol, make):
    """The .tex compiles cleanly, reads no file, and the PDF shows the title as typed."""
    tex = make(sol)
    assert r"\input{/etc/passwd}" not in tex
    rc, log, pdf = compile_tex(tex)
    assert rc == 0, log[-1500:]
    assert "/etc/passwd" not in log.split("\n", 1)[1].split("(/usr", 1)[0] or "passwd.tex" not in log
    for bad in BAD_LOG:
        assert bad not in log
    text = " ".join(pdf_text(pdf).split())
    assert "\\input{/etc/passwd}" in text
    assert "<script>alert(1)</script>" in text
    assert "50% & $x_1$ #{}~^" in text.replace("˜", "~").replace("ˆ", "^")


@needs_weasyprint
def test_hostile_text_is_literal_in_weasyprint_pdf(sol):
    """The WeasyPrint PDF shows the title and tokens as typed."""
    text = " ".join(pdf_text(html_to_pdf(answer_key_html(sol, for_pdf=True))).split())
    assert HOSTILE_TITLE in text
    assert "<script>alert(1)</script>" in text


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_tex_escape_is_ascii_and_neutralises_specials(s):
    """Any text escapes to ASCII in which no TeX special character is left bare."""
    out = tex_escape(s)
    assert out.isascii()
    bare = out
    for seq in (r"\{", r"\}", r"\$", r"\&", r"\#", r"\%", r"\_", "{}"):
        bare = bare.replace(seq, "")
    import re

    bare = re.sub(r"\\[A-Za-z]+|\\[\^~'\"`=.]", "", bare)  # our commands (\textless, accents \^{O}, ...)
    bare = re.sub(r"\{(\\?[A-Za-z]?)\}", "", bare)   # their arguments ({e} in \'{e})
    for c in "$&#%_^~":
        assert c not in bare, (s, out)
