"""WeasyPrint PDFs: every formula drawn; `worked sheet` with a bad problem writes nothing."""
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


def test_cli_bad_problem_is_one_line(tmp_path):
    """A bad problem file gives one line on stderr, exit 2 and nothing written."""
    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\ntokens = ["a"]\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "worked", "sheet", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
