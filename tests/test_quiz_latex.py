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


def test_preloaded_format_draws_the_same_pages(tmp_path, monkeypatch):
    """pdflatex with our cached preloaded format gives the same pages as a plain run, and the format is reused."""
    import subprocess

    import numpy as np
    from PIL import Image

    from worked.problem import load
    from worked.render import answer_key_tex
    from worked.render import pdf as P
    from worked.solver import solve

    if shutil.which("pdftoppm") is None:
        pytest.skip("pdftoppm (poppler-utils) is not installed")
    monkeypatch.setenv("WORKED_CACHE_DIR", str(tmp_path / "cache"))
    tex = answer_key_tex(solve(load(None)))
    packages, rest = P._split_preamble(tex)
    assert packages.startswith("\\documentclass") and "\\begin{document}" in rest
    fast = P.tex_to_pdf(tex)
    formats = list((tmp_path / "cache" / "tex-formats").glob("*.fmt"))
    assert len(formats) == 1
    stamp = formats[0].stat().st_mtime_ns
    assert P.tex_to_pdf(tex) == fast and formats[0].stat().st_mtime_ns == stamp   # reused, same bytes
    monkeypatch.setenv("WORKED_NO_TEX_FORMAT", "1")
    plain = P.tex_to_pdf(tex)
    pages = []
    for name, data in (("fast", fast), ("plain", plain)):
        (tmp_path / f"{name}.pdf").write_bytes(data)
        subprocess.run(["pdftoppm", "-r", "50", "-gray", "-png", f"{name}.pdf", name], cwd=tmp_path, check=True)
        pages.append(sorted(tmp_path.glob(f"{name}-*.png")))
    assert len(pages[0]) == len(pages[1]) >= 2
    for a, b in zip(*pages):
        assert np.array_equal(np.asarray(Image.open(a)), np.asarray(Image.open(b)))


def test_page_count_hint_saves_a_pass_and_never_changes_bytes(monkeypatch):
    """With a page-count hint pdflatex runs once when the hint is right, twice when wrong; same bytes always."""
    import subprocess

    from worked.problem import load
    from worked.render import pdf as P
    from worked.render import worksheet_tex
    from worked.solver import solve

    tex = worksheet_tex(solve(load(None)))
    runs = []
    real = subprocess.run

    def counting(cmd, *args, **kwargs):
        if "sheet.tex" in cmd:
            runs.append(cmd)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(P.subprocess, "run", counting)
    plain = P.tex_to_pdf(tex)
    assert len(runs) == 2                            # draft pass + final pass
    P._PAGE_HINTS.pop("test-ws", None)
    assert P.tex_to_pdf(tex, hint="test-ws") == plain
    runs.clear()
    assert P.tex_to_pdf(tex, hint="test-ws") == plain  # the hint is now right: one pass
    assert len(runs) == 1
    runs.clear()
    P._PAGE_HINTS["test-ws"] = 9                     # a wrong hint: LaTeX asks for another pass
    assert P.tex_to_pdf(tex, hint="test-ws") == plain
    assert len(runs) == 2


def test_a_broken_cached_format_falls_back(tmp_path, monkeypatch):
    """A cached format pdfTeX cannot load is dropped and the document compiled the plain way."""
    from worked.problem import load
    from worked.render import pdf as P
    from worked.render import worksheet_tex
    from worked.solver import solve

    monkeypatch.setenv("WORKED_CACHE_DIR", str(tmp_path / "cache"))
    tex = worksheet_tex(solve(load(None)))
    good = P.tex_to_pdf(tex)
    (fmt,) = (tmp_path / "cache" / "tex-formats").glob("*.fmt")
    fmt.write_bytes(b"not a format")
    assert P.tex_to_pdf(tex).startswith(b"%PDF")
    assert not fmt.exists() or fmt.read_bytes() != b"not a format"
    assert P.tex_to_pdf(tex) == good      # rebuilt, same bytes again
