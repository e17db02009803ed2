"""The Typst PDFs (the default engine): same bytes everywhere, exact page counts, numbers in the text
layer, tagged PDF/UA-1, class PDFs for double-sided printing, templates overridable."""
from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfReader

from sheet_support import HOSTILE_TITLE, PROBLEMS, hostile_problem
from worked import eq, printers
from worked.errors import WorkedError
from worked.problem import load
from worked.render import answer_key_pdf, answer_key_typst, worksheet_pdf, write_sheet
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
EMBEDDED = {"LibertinusSerif", "NewCMMath", "NewCM", "DejaVuSansMono"}   # the fonts built into Typst


@pytest.fixture(scope="module")
def sol():
    return solve(load(None))


@pytest.fixture(scope="module")
def key(sol):
    return answer_key_pdf(sol)


def _fonts(pdf: bytes) -> set[str]:
    """Base names of every font the PDF embeds (subset prefix and encoding suffix dropped)."""
    out = set()
    for page in PdfReader(io.BytesIO(pdf)).pages:
        for f in page["/Resources"].get("/Font", {}).values():
            name = f.get_object()["/BaseFont"].split("+", 1)[-1].removesuffix("-Identity-H")
            out.add(name)
    return out


def _text(pdf: bytes) -> str:
    if shutil.which("pdftotext"):
        r = subprocess.run(["pdftotext", "-", "-"], input=pdf, capture_output=True, check=True)
        return r.stdout.decode("utf-8")
    return "\n".join(p.extract_text() for p in PdfReader(io.BytesIO(pdf)).pages)


def _decimals(node) -> list[str]:
    """Every rounded decimal (``Dec``) shown in a tree, as the text printer writes it."""
    from worked import printers

    out = []
    if isinstance(node, eq.Dec):
        return [printers.text(node)]
    for x in node.children():
        out += _decimals(x)
    return out


def test_same_bytes_twice_and_only_typst_fonts(sol, key):
    """Two renderings give the same bytes; every embedded font is one of Typst's own."""
    assert answer_key_pdf(sol) == key
    fonts = _fonts(key)
    assert fonts and all(any(f.startswith(e) for e in EMBEDDED) for f in fonts), fonts
    from worked.render.typst import compiler  # noqa: F401  (one compiler per process)
    import typst

    embedded = typst.Fonts(include_system_fonts=False, include_embedded_fonts=True)
    assert all(f.path is None for f in embedded.fonts())   # built into the binding, not read from disk


def test_same_bytes_with_system_fonts_hidden(tmp_path, key):
    """A fresh process that sees no system fonts (fontconfig pointed at an empty configuration, no home
    font folders) writes the same key as this one."""
    conf = tmp_path / "fonts.conf"
    conf.write_text('<?xml version="1.0"?><fontconfig></fontconfig>\n')
    env = dict(os.environ, FONTCONFIG_FILE=str(conf), FONTCONFIG_PATH=str(tmp_path), HOME=str(tmp_path),
               XDG_DATA_HOME=str(tmp_path / "share"), XDG_DATA_DIRS=str(tmp_path / "share"))
    r = subprocess.run([sys.executable, "-m", "worked", "sheet", "--format", "pdf", "-o", str(tmp_path / "o")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "o" / "cats-chase-mice" / "answer-key.pdf").read_bytes() == key


# the page counts do not depend on the machine: the fonts come with Typst
PAGES = {"cats-chase-mice": (2, 3)}


def test_page_counts_are_exact(sol, key):
    assert len(PdfReader(io.BytesIO(worksheet_pdf(sol))).pages) == PAGES["cats-chase-mice"][0]
    assert len(PdfReader(io.BytesIO(key)).pages) == PAGES["cats-chase-mice"][1]


@pytest.mark.parametrize("path", PROBLEMS, ids=lambda p: p.stem)
def test_every_problem_compiles_to_tagged_pdf(path):
    """Every shipped problem's sheets compile (PDF/UA-1 refuses a formula without alt text)."""
    s = solve(load(str(path)))
    for make in (worksheet_pdf, answer_key_pdf):
        data = make(s)
        r = PdfReader(io.BytesIO(data))
        assert len(r.pages) >= 1 and "/StructTreeRoot" in r.trailer["/Root"]


def test_key_text_has_every_value_of_the_key(sol, key):
    """pdftotext finds every decimal the key shows: each one of every worked line and of every matrix."""
    text = _text(key).replace("−", "-")
    shown = []
    for st in sol.steps:
        for ln in st.lines:
            shown += _decimals(ln.eq)
    for m in (sol.heads[0].weights, sol.output, sol.heads[0].scaled):
        r, c = m.shape
        shown += [printers.text(m.cell(i, j, sol.decimals)) for i in range(r) for j in range(c)]
    shown = sorted(set(s.replace("−", "-") for s in shown))
    assert "4.1133" in shown and len(shown) > 20
    missing = [v for v in shown if v not in text]
    assert not missing, missing
    assert text.count("4.1133") >= 5


def test_pdf_ua_tagged_with_language_title_and_alt_text(key):
    """Tagged PDF (StructTreeRoot, MarkInfo), the document language and title set, PDF/UA-1 declared
    in the XMP metadata, and every formula's alt text from the spoken printer."""
    r = PdfReader(io.BytesIO(key))
    root = r.trailer["/Root"]
    assert "/StructTreeRoot" in root
    assert bool(root["/MarkInfo"]["/Marked"])
    assert str(root["/Lang"]).startswith("en")
    assert r.metadata.title == "cats chase mice — Answer key"
    xmp = root["/Metadata"].get_object().get_data()
    assert b"pdfuaid:part" in xmp and b"1" in xmp
    # alt text of the formulas lives in the structure tree (/Alt on Formula elements)
    alts = []

    def walk(node, depth=0):
        node = node.get_object()
        if isinstance(node, dict) or hasattr(node, "get"):
            if node.get("/S") == "/Formula" and "/Alt" in node:
                alts.append(str(node["/Alt"]))
            kids = node.get("/K")
            if kids is not None:
                for k in (kids if isinstance(kids, list) else [kids]):
                    if hasattr(k, "get_object") and hasattr(k.get_object(), "get"):
                        walk(k, depth + 1)

    walk(root["/StructTreeRoot"])
    assert len(alts) > 50
    assert any("square root of 2" in a for a in alts)
    assert any(a.startswith("A row cats, column chase equals") for a in alts)


def test_hostile_title_and_tokens_are_text(tmp_path):
    """Typst markup in a title or a token is printed as text, never run."""
    s = solve(hostile_problem())
    text = " ".join(_text(answer_key_pdf(s)).split())
    assert "<script>alert(1)</script>" in text
    assert "50% & $x_1$ #{}~^" in text
    assert HOSTILE_TITLE.split(" <")[0] in text


def test_name_line_and_code_with_numbered_variants(tmp_path, cli):
    """`worked quiz -n 3`: each variant has a Name line, its number and code; the class PDFs start every
    student's sheet on an odd page (a blank page where needed) and every printed page carries the name
    line and the code in its running header. The class PDFs are the sheets' own pages joined with pypdf
    (for printing: untagged; each variant's own PDF is the accessible one): the key's text layer has
    every value of every variant's key."""
    out = tmp_path / "q"
    code, _, err = cli("quiz", ROOT / "problems" / "quiz-1.toml", "-n", "3", "-o", out, "--format", "pdf", "--quiet")
    assert code == 0, err
    man = json.loads((out / "manifest.json").read_text())
    codes = [v["variant"] for v in man["variants"]]
    for doc, name in (("worksheet", "class-worksheets.pdf"), ("answer-key", "class-answer-keys.pdf")):
        whole = PdfReader(out / name)
        start = 0
        for k, c in enumerate(codes):
            own = PdfReader(out / "variants" / c / f"{doc}.pdf")
            n = len(own.pages)
            assert start % 2 == 0   # page start+1, odd
            first = whole.pages[start].extract_text()
            assert "Name:" in first and f"ID: #{k + 1}" in first and c in first
            assert "Graded answers" in first
            for i in range(start, start + n):
                t = whole.pages[i].extract_text()
                assert "Name:" in t and c in t, (name, i)
            last = k == len(codes) - 1
            if n % 2 and not last:
                assert whole.pages[start + n].extract_text().strip() == ""   # the blank back page
            start += n + (n % 2 if not last else 0)
        assert start == len(whole.pages)
        assert whole.metadata.title.startswith("Attention quiz 1")
        if doc == "answer-key":
            text = " ".join(" ".join(p.extract_text() for p in whole.pages).split())
            for v in man["variants"]:
                for q in v["questions"]:
                    for e in q["entries"]:
                        x = e["expected"]
                        if x is not None:   # as the glance tables print it (an exact integer: without decimals)
                            shown = f"{abs(x):.{man['family'].get('decimals', 2)}f}" if x != int(x) else f"{abs(x):g}"
                            assert shown in text, (v["variant"], e["ask"], shown)


def test_class_pdf_is_the_same_twice(tmp_path, cli):
    outs = []
    for k in (1, 2):
        out = tmp_path / f"q{k}"
        code, _, err = cli("quiz", ROOT / "problems" / "quiz-1.toml", "-n", "2", "-o", out, "--format", "pdf",
                           "--quiet", "--jobs", str(k))
        assert code == 0, err
        outs.append(out)
    for name in ("class-worksheets.pdf", "class-answer-keys.pdf"):
        assert (outs[0] / name).read_bytes() == (outs[1] / name).read_bytes()


def test_typ_template_override(tmp_path, sol):
    """A worksheet.typ in --template-dir replaces ours (it may extend our base.typ and change one block);
    a broken one is a one-line error naming the file."""
    (tmp_path / "worksheet.typ").write_text(
        '{% extends "base.typ" %}{% block content %}Bring a pencil, {{ doc.title }}.{% endblock %}\n')
    text = " ".join(_text(worksheet_pdf(sol, template_dir=tmp_path)).split())
    assert "Bring a pencil, cats chase mice." in text and "Task 1" not in text
    (tmp_path / "answer-key.typ").write_text('{% extends "base.typ" %}{% block content %}#let x = ({% endblock %}\n')
    with pytest.raises(WorkedError) as exc:
        answer_key_pdf(sol, template_dir=tmp_path)
    assert "answer-key.typ" in str(exc.value) and "\n" not in str(exc.value)


def test_write_sheet_default_engine_is_typst(tmp_path, sol, key):
    paths = write_sheet(sol, tmp_path, formats=("pdf",))
    assert {p.name for p in paths} == {"worksheet.pdf", "answer-key.pdf"}
    assert (tmp_path / "cats-chase-mice" / "answer-key.pdf").read_bytes() == key
    assert PdfReader(io.BytesIO(key)).metadata.creator.startswith("Typst")


def test_typst_source_is_escaped(sol):
    """The source's formulas are the Typst printer's, each with alt text; prose is escaped."""
    src = answer_key_typst(sol)
    # a chain in pieces that may break at its relation signs: the head speaks for the whole chain, the
    # continuations are artifacts
    assert ('wk-chain([#eqp("square root of d k equals square root of 2 is about 1.4142", $sqrt(d_k)$)], '
            '[#pdf.artifact(eqp("equals square root of 2", $"" = sqrt(2)$))], '
            '[#pdf.artifact(eqp("is about 1.4142", $"" approx 1.4142$))])') in src
    assert "#set document(title: " in src


def test_typst_printer_brackets_and_scripts():
    """What the Typst printer got wrong before it was ever compiled: a head's weight matrix without
    visible brackets, an entry of W_O as a second subscript, fractions in exponents on one level,
    sums with their index at the side."""
    from fractions import Fraction

    from worked import printers

    assert printers.typst(eq.Sym("W_Q", head=1)) == "W_Q^((1))"
    assert printers.typst(eq.Entry(eq.Sym("W_O"), "1", "2")) == "W_O [1, 2]"     # no second subscript: W_O[1, 2]
    half = eq.Frac(eq.Mul((eq.num(3), eq.Sqrt(eq.num(2)))), eq.num(2))
    assert printers.typst(eq.Exp(half)) == "e^(3 sqrt(2)\\/2)"
    assert printers.typst(eq.Exp(eq.num(Fraction(-1, 3)))) == "e^(-1\\/3)"
    assert printers.typst(eq.Sum(eq.Entry(eq.Sym("A"), "cats", "j"), "j")).startswith("scripts(sum)_(j) ")


def _pid_of(task):
    import os

    return task, os.getpid()


def test_each_chunk_of_variants_gets_a_fresh_worker():
    """in_fresh_workers runs every task in a new process (what Typst keeps goes with it), at most
    *jobs* at a time, and gives the results in the order of the tasks."""
    import os

    from worked.quiz import in_fresh_workers

    out = list(in_fresh_workers(_pid_of, list(range(6)), 2))
    assert [t for t, _ in out] == list(range(6))
    pids = [p for _, p in out]
    assert len(set(pids)) == 6 and os.getpid() not in pids


def test_merge_pdfs_starts_every_sheet_on_an_odd_page_also_when_joined_in_parts(monkeypatch):
    """The class PDFs' join: each source's first page on an odd page (1, 3, 5, …), blank pages of the page's
    size between, the same when the sources are joined in parts (qpdf keeps every source open until it
    writes, so at most OPEN_AT_ONCE at a time); same inputs, same bytes."""
    import io

    import pikepdf

    from worked import quiz

    counts = [3, 1, 2, 3, 3, 1, 4]

    def sheet(k, n):   # sheet k: n pages, each 100 + k points wide (to find them again)
        pdf = pikepdf.Pdf.new()
        for _ in range(n):
            pdf.add_blank_page(page_size=(100 + k, 200))
        buf = io.BytesIO()
        pdf.save(buf)
        return buf.getvalue()

    sheets = [sheet(k, n) for k, n in enumerate(counts)]
    outs = []
    for at_once in (100, 2):
        monkeypatch.setattr(quiz, "OPEN_AT_ONCE", at_once)
        buf = io.BytesIO()
        pages = quiz.merge_pdfs(sheets, buf, title="T")
        widths = [float(p.mediabox[2]) for p in pikepdf.Pdf.open(io.BytesIO(buf.getvalue())).pages]
        assert pages == len(widths)
        at, starts = 0, []
        for k, n in enumerate(counts):
            starts.append(at)
            assert widths[at:at + n] == [100 + k] * n
            at += n + n % 2 if k < len(counts) - 1 else n
        assert all(s % 2 == 0 for s in starts) and len(widths) == at   # 0-based even = page 1, 3, 5, …
        outs.append(buf.getvalue())
        buf2 = io.BytesIO()
        quiz.merge_pdfs(sheets, buf2, title="T")
        assert buf2.getvalue() == buf.getvalue()
