"""WeasyPrint PDFs: every formula drawn, and the forked layout workers give the bytes of one process."""
from __future__ import annotations

import io
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worked.problem import load
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]


def _drawn_images(pdf: bytes) -> list[int]:
    """For each image WeasyPrint drew in *pdf*, how many paths it filled.

    WeasyPrint draws an image (ours are all formulas) inside its box: a clip to the box
    (``re W n``), then ``q``, the opacity state and a translation to the box (``gs cm``); the
    SVG's paths follow, each closed by a fill, until the ``Q`` that matches that ``q``."""
    from pypdf import PdfReader
    from pypdf.generic import ContentStream

    reader = PdfReader(io.BytesIO(pdf))
    fills = []
    for page in reader.pages:
        ops = [op.decode("latin-1") if isinstance(op, bytes) else op
               for _, op in ContentStream(page.get_contents(), reader).operations]
        for i in range(len(ops) - 5):
            if ops[i:i + 6] != ["re", "W", "n", "q", "gs", "cm"]:
                continue
            depth, filled = 0, 0
            for op in ops[i + 3:]:
                depth += (op == "q") - (op == "Q")
                filled += op in ("f", "f*", "B", "B*")
                if depth == 0:
                    break
            fills.append(filled)
    return fills


def test_every_formula_of_a_long_key_is_drawn(caplog):
    """The WeasyPrint answer key of a problem with many formulas draws each formula of its HTML, and
    WeasyPrint reports no image it could not load or render."""
    from worked.render import answer_key_pdf
    from worked.render import html as H

    sol = solve(load(str(ROOT / "problems" / "four-tokens-fractions.toml")), checks="all")
    formulas = H.render_html("answer-key", sol, for_pdf=True).count('<img class="zm"')
    with caplog.at_level(logging.WARNING, logger="weasyprint"):
        pdf = answer_key_pdf(sol, pdf_engine="weasyprint")
    errors = [r.getMessage() for r in caplog.records if r.name.startswith("weasyprint") and r.levelno >= logging.ERROR]
    assert not errors, errors[:3]
    assert not any("Failed to load image" in r.getMessage() for r in caplog.records)
    drawn = _drawn_images(pdf)
    assert formulas > 100
    assert len(drawn) == formulas
    assert min(drawn) > 0   # every formula filled at least one glyph


def test_two_processes_give_the_same_bytes_as_one(tmp_path, monkeypatch):
    """write_sheet lays out the PDFs in two worker processes where it can; the files are the same as in one."""
    from worked.render import write_sheet

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")
    sol = solve(load(None))
    forked = {p.name: p.read_bytes() for p in write_sheet(sol, tmp_path / "a", formats=("html", "pdf"))}
    monkeypatch.setenv("WORKED_NO_FORK", "1")
    single = {p.name: p.read_bytes() for p in write_sheet(sol, tmp_path / "b", formats=("html", "pdf"))}
    assert forked == single and len(forked) == 4


def test_a_failing_child_is_a_clean_error(tmp_path, monkeypatch):
    """If a layout worker fails, the parent raises a WorkedError with its message and writes nothing."""
    from worked.errors import WorkedError
    from worked.render import pdf as P
    from worked.render import sheet

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")

    def boom(*args, **kwargs):
        raise WorkedError("layout failed")

    monkeypatch.setattr(P, "html_to_pdf", boom)   # the forked workers inherit it
    with pytest.raises(WorkedError, match="layout failed"):
        sheet.write_sheet(solve(load(None)), tmp_path / "o", formats=("pdf",))
    assert not (tmp_path / "o").exists()


def test_cli_layout_server_gives_the_same_files(tmp_path):
    """`worked sheet` lays out its PDFs in a WeasyPrint process started before solving; same bytes as one process."""
    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")
    outs = []
    for name, extra in (("served", {}), ("single", {"WORKED_NO_FORK": "1"})):
        env = dict(os.environ, **extra)
        r = subprocess.run([sys.executable, "-m", "worked", "sheet", "-o", str(tmp_path / name)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        folder = tmp_path / name / "cats-chase-mice"
        outs.append({p.name: p.read_bytes() for p in folder.iterdir()})
    assert outs[0] == outs[1] and len(outs[0]) >= 6


def test_cli_bad_problem_with_layout_server_is_one_line(tmp_path):
    """A bad problem file still gives one line on stderr, exit 2 and nothing written, with the server started."""
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\ntokens = ["a"]\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "worked", "sheet", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
