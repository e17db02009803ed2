"""`worked quiz --pdf-engine latex`: the class PDFs come from our .tex through pdflatex, same bytes every run."""
import shutil

import pytest

from conftest import PROBLEMS

pytestmark = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")


def test_quiz_latex_engine_is_deterministic(tmp_path, cli):
    """Two runs with the latex engine write identical PDFs; each page carries the variant's header."""
    outs = []
    for k in range(2):
        out = tmp_path / f"q{k}"
        code, _, err = cli("quiz", PROBLEMS / "quiz-1.toml", "-n", "2", "-o", out, "--format", "pdf",
                           "--pdf-engine", "latex", "--quiet", "--jobs", str(k + 1))
        assert code == 0, err
        outs.append(out)
    for name in ("class-worksheets.pdf", "class-answer-keys.pdf"):
        a, b = (o / name for o in outs)
        assert a.read_bytes().startswith(b"%PDF") and a.read_bytes() == b.read_bytes()
    from pypdf import PdfReader

    text = "".join(p.extract_text() for p in PdfReader(outs[0] / "class-answer-keys.pdf").pages)
    assert "Graded answers" in text and "Variant" in text
