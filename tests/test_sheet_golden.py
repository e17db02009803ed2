"""Golden files: the Part 9 answer key as LaTeX and HTML, byte for byte.

When a change to the templates or the core is intended, regenerate and review by eye:

    WORKED_ACCEPT_GOLDEN=1 .venv/bin/python -m pytest tests/test_sheet_golden.py
    git diff tests/golden/      # then render and look at the result before committing

(The HTML golden file has the embedded math font replaced by "..."; the font is a generated file.)
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from sheet_support import golden_normalize
from worked.problem import load
from worked.render import answer_key_html, answer_key_tex
from worked.solver import solve

GOLDEN = Path(__file__).with_name("golden")
ACCEPT = os.environ.get("WORKED_ACCEPT_GOLDEN") == "1"


@pytest.mark.parametrize("name, make", [
    ("part9-answer-key.tex", lambda s: answer_key_tex(s)),
    ("part9-answer-key.html", lambda s: golden_normalize(answer_key_html(s))),
])
def test_part9_key_matches_golden(name, make):
    """The rendered key equals the reviewed golden file (regenerate with WORKED_ACCEPT_GOLDEN=1)."""
    got = make(solve(load(None)))
    path = GOLDEN / name
    if ACCEPT:
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"{path} missing: run with WORKED_ACCEPT_GOLDEN=1, then review it"
    assert got == path.read_text(encoding="utf-8"), f"{name} differs from the golden file (see module docstring)"
