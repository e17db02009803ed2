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


def test_tex_to_pdf_is_pdflatex_on_the_file_as_it_is(tmp_path):
    """tex_to_pdf gives the bytes of running pdflatex by hand on the .tex (twice, for "page N of M")
    with a fixed SOURCE_DATE_EPOCH: no preloaded format, no batching, nothing done to the PDF."""
    import os
    import subprocess

    from worked.problem import load
    from worked.render import pdf as P
    from worked.render import worksheet_tex
    from worked.solver import solve

    tex = worksheet_tex(solve(load(None)))
    (tmp_path / "sheet.tex").write_text(tex, encoding="ascii")
    env = dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1")
    for _ in range(2):
        subprocess.run(["pdflatex", "-interaction=nonstopmode", "-halt-on-error", "sheet.tex"], cwd=tmp_path,
                       env=env, capture_output=True, check=True, stdin=subprocess.DEVNULL, timeout=120)
    by_hand = (tmp_path / "sheet.pdf").read_bytes()
    assert P.tex_to_pdf(tex) == by_hand
    assert b"/CreationDate" not in by_hand and b"/ID" not in by_hand and b"PTEX.Fullbanner" not in by_hand


def test_tex_to_pdf_reruns_while_latex_asks(monkeypatch):
    """pdflatex runs again only while its log asks for it: twice for a sheet ("page N of M")."""
    import subprocess

    from worked.render import pdf as P

    runs = []
    real = subprocess.run

    def counting(cmd, *args, **kwargs):
        runs.append(cmd)
        return real(cmd, *args, **kwargs)

    monkeypatch.setattr(P.subprocess, "run", counting)
    one_page = "\\documentclass{article}\\begin{document}x\\end{document}\n"
    assert P.tex_to_pdf(one_page).startswith(b"%PDF") and len(runs) == 1
    runs.clear()
    labelled = "\\documentclass{article}\\begin{document}page 1 of \\pageref{last}\\label{last}\\end{document}\n"
    assert P.tex_to_pdf(labelled).startswith(b"%PDF") and len(runs) == 2


def test_a_latex_error_is_one_line():
    import pytest

    from worked.errors import WorkedError
    from worked.render import pdf as P

    with pytest.raises(WorkedError, match=r"pdflatex failed: ! Undefined control sequence"):
        P.tex_to_pdf("\\documentclass{article}\\begin{document}\\nosuchmacro\\end{document}\n")
