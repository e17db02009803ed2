"""One table of formats (worked.exporters) that the command line, the sheet writer, the quiz and the server
read (issue 26): a new sheet format is one entry."""
from __future__ import annotations

import pytest

from worked import exporters as E
from worked.errors import WorkedError
from worked.problem import load
from worked.solver import solve


def test_the_readers_take_their_formats_from_the_table():
    from worked import quiz, render
    from worked.render import sheet
    from worked.server import app

    assert E.sheet_formats() == render.FORMATS == ("html", "tex", "pdf")
    assert tuple(E.PDF_ENGINES) == render.PDF_ENGINES == sheet.PDF_ENGINES == ("typst", "weasyprint", "latex")
    assert quiz.FORMATS == tuple(E.EXPORTERS) == ("pdf", "html", "tex", "moodle", "qti", "gift", "ipynb")
    assert quiz.DEFAULT_FORMATS == ("pdf", "html", "moodle", "qti", "gift")
    assert app.FORMATS == {e.name: e.media_type for e in E.of_scope("sheet")}
    assert app.NOTEBOOK_TYPE == "application/x-ipynb+json"
    assert quiz.parse_formats("canvas,pdf") == ("qti", "pdf")
    assert [e.file for e in E.of_scope("batch")] == ["moodle.xml", "canvas-qti.zip", "quiz.gift.txt"]


def test_a_new_sheet_format_is_one_entry(tmp_path, monkeypatch):
    """An entry added to the table is a format `write_sheet` writes, from the page it builds once per document."""
    from worked.render.sheet import write_sheet

    pages = []

    def outline(page, **_):
        pages.append(page)
        return f"# {page.title}: {page.doc_label}, {len(page.steps)} steps\n"

    monkeypatch.setitem(E.EXPORTERS, "md", E.Exporter("md", "sheet", "text/markdown", outline, extension=".md"))
    assert E.sheet_formats() == ("html", "tex", "md", "pdf")
    sol = solve(load(None))
    paths = write_sheet(sol, tmp_path, formats=["md", "html"])
    assert [p.name for p in paths] == ["worksheet.html", "worksheet.md", "answer-key.html", "answer-key.md"]
    assert (paths[1]).read_text(encoding="utf-8") == f"# {sol.problem.title}: Worksheet, {len(sol.steps)} steps\n"
    assert [p.kind for p in pages] == ["worksheet", "answer-key"]


def test_unknown_formats_and_engines_are_one_line_errors(tmp_path):
    from worked.render.sheet import check_engine, write_sheet

    sol = solve(load(None))
    with pytest.raises(WorkedError, match=r"^--format: expected some of html, tex, pdf \(comma-separated\), got doc$"):
        write_sheet(sol, tmp_path, formats=["doc"])
    with pytest.raises(WorkedError, match=r"^--pdf-engine: expected typst, weasyprint or latex, got 'x'$"):
        check_engine("x")
    with pytest.raises(WorkedError, match=r"^--paper: expected a4 or letter, got 'b5'$"):
        check_engine("typst", "b5")


def test_the_latex_engine_compiles_the_tex_of_the_same_run(monkeypatch):
    """With tex and pdf, the LaTeX engine compiles the .tex just rendered (rendered once)."""
    from worked.render.view import build

    calls = []
    engine = E.PDF_ENGINES["latex"]
    monkeypatch.setitem(E.PDF_ENGINES, "latex", E.PdfEngine(
        "latex", engine.source, lambda src, page, paper: calls.append(src) or b"%PDF", template="tex",
        source_format="tex"))
    page = build(solve(load(None)), "worksheet")
    out = E.render_sheet(page, ["tex", "pdf"], pdf_engine="latex")
    assert list(out) == [".tex", ".pdf"] and calls == [out[".tex"].decode("ascii")]
