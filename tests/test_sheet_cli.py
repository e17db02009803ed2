"""`worked sheet`: files written, folders we did not write left alone, clear one-line errors."""
from __future__ import annotations

from pathlib import Path

from sheet_support import ROOT, parse_html


def test_sheet_writes_both_documents(cli, tmp_path):
    """html and tex for the built-in example land in DIR/<slug>/ and the command says where."""
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "html,tex")
    assert rc == 0, err
    folder = tmp_path / "cats-chase-mice"
    names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    assert names == ["answer-key.html", "answer-key.tex", "worksheet.html", "worksheet.tex"]
    assert str(folder) in out
    assert not [p for p in folder.iterdir() if p.name.endswith(".tmp")]


def test_sheet_refuses_foreign_folder_unless_forced(cli, tmp_path):
    """An existing folder without our marker is not overwritten; --force writes into it."""
    folder = tmp_path / "cats-chase-mice"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine")
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "html")
    assert rc == 2 and err.startswith("error: ") and "--force" in err and err.count("\n") == 1
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "html", "--force")
    assert rc == 0, err
    assert (folder / "answer-key.html").exists() and (folder / "notes.txt").read_text() == "mine"


def test_sheet_rewrites_its_own_folder(cli, tmp_path):
    """A second run over a folder we wrote replaces the files without --force."""
    assert cli("sheet", "-o", tmp_path, "--format", "tex")[0] == 0
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "tex", "--checks", "all")
    assert rc == 0, err


def test_sheet_bad_format_and_bad_problem(cli, tmp_path):
    """Unknown formats and unreadable problems give one-line errors, exit 2, and write nothing."""
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "html,docx")
    assert rc == 2 and "docx" in err and "Traceback" not in err
    bad = tmp_path / "bad.toml"
    bad.write_text('X = [[1, 2], [3]]\nW_Q = [[1]]\n')
    rc, out, err = cli("sheet", bad, "-o", tmp_path / "o")
    assert rc == 2 and "bad.toml" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_template_dir_overrides_by_file_name(cli, tmp_path):
    """A style.css in --template-dir replaces ours; other templates still come from templates/sheet."""
    tdir = tmp_path / "tpl"
    tdir.mkdir()
    (tdir / "style.css").write_text("body { color: #123456; }\n")
    rc, out, err = cli("sheet", "-o", tmp_path / "o", "--format", "html", "--template-dir", tdir)
    assert rc == 0, err
    html = (tmp_path / "o" / "cats-chase-mice" / "answer-key.html").read_text()
    assert "#123456" in html and "table.mat" not in html
    assert parse_html(html).math > 0


def test_template_dir_block_override(cli, tmp_path):
    """A child template can extend ours by another name: documented blocks are replaceable."""
    tdir = tmp_path / "tpl"
    tdir.mkdir()
    ours = (ROOT / "templates" / "sheet" / "worksheet.html").read_text()
    assert "{% block instructions %}" in ours
    (tdir / "worksheet.html").write_text(ours.replace(
        "Work each task by hand, in order", "Show all working, in order"))
    rc, out, err = cli("sheet", "-o", tmp_path / "o", "--format", "html", "--template-dir", tdir)
    assert rc == 0, err
    assert "Show all working" in (tmp_path / "o" / "cats-chase-mice" / "worksheet.html").read_text()


def test_missing_template_dir_is_an_error(cli, tmp_path):
    """A --template-dir that does not exist is a one-line error."""
    rc, out, err = cli("sheet", "-o", tmp_path, "--format", "html", "--template-dir", tmp_path / "nope")
    assert rc == 2 and "template-dir" in err


def test_write_sheet_pdfs_match_single_document_rendering(tmp_path):
    """write_sheet's PDFs (made side by side on two cores) are the bytes of each document made alone."""
    import shutil

    import pytest

    if shutil.which("pdflatex") is None:
        pytest.skip("pdflatex not installed")
    from worked.problem import load
    from worked.render import answer_key_pdf, worksheet_pdf, write_sheet
    from worked.solver import solve

    sol = solve(load(None))
    paths = write_sheet(sol, tmp_path, formats=("pdf",), pdf_engine="latex")
    got = {p.name: p.read_bytes() for p in paths}
    assert got["answer-key.pdf"] == answer_key_pdf(sol, pdf_engine="latex")
    assert got["worksheet.pdf"] == worksheet_pdf(sol, pdf_engine="latex")
