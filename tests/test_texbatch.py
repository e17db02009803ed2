"""Several LaTeX sheets in one pdflatex run (worked.render.texbatch): each sheet's PDF is byte for byte
what it is alone, whatever shared its run; what cannot be batched safely is compiled alone."""
import io
import re
import shutil

import pytest

from conftest import PROBLEMS

pytestmark = pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")


def _sheets(spec_name, count, **family):
    from dataclasses import replace

    from worked.quiz import build_variant, load_spec, plan

    spec = load_spec(PROBLEMS / spec_name)
    if family:
        spec = replace(spec, family=replace(spec.family, **family))
    out = []
    for v in plan(spec.seed, count=count):
        files = build_variant(spec, v, ("tex",))["files"]
        out += [(files[f"variants/{v.code}/{doc}.tex"].decode("ascii"), doc) for doc in ("worksheet", "answer-key")]
    return out


def _footers(pdf: bytes) -> list[str]:
    from pypdf import PdfReader

    # the total is drawn by a form XObject: pypdf reads it as the next line
    found = [re.search(r"page (\d+) of\s+(\d+)", p.extract_text()) for p in PdfReader(io.BytesIO(pdf)).pages]
    return [f"page {m.group(1)} of {m.group(2)}" for m in found]


def test_batched_sheets_are_the_sheets_alone():
    """Worksheets and keys of two quizzes (one with a causal mask), typeset in one run each, give the
    same bytes as each sheet compiled alone, and every page says "page N of M" with the right M."""
    from worked.render import texbatch as T

    for name in ("quiz-1.toml", "quiz-2-causal.toml"):
        sheets = _sheets(name, 3)
        before = dict(T.STATS)
        batch = T.compile_sheets([t for t, _ in sheets], [d for _, d in sheets])
        assert T.STATS["batched"] == before.get("batched", 0) + 1
        assert T.STATS["fell back"] == before.get("fell back", 0)
        alone = [T.compile_sheets([t], [d])[0] for t, d in sheets]
        assert batch == alone
        for pdf in batch:
            feet = _footers(pdf)
            assert feet == [f"page {k} of {len(feet)}" for k in range(1, len(feet) + 1)]


def test_a_glyph_the_prelude_lacks_means_compiling_alone():
    """A token with an accented letter (a glyph outside the fixed font subsets) makes the batch fall back
    to one run per sheet: the bytes are still those of each sheet alone."""
    from worked.render import texbatch as T

    sheets = [t for t, _ in _sheets("quiz-1.toml", 1)]
    accented = sheets[1].replace("x2", "caf\\'{e}")
    assert accented != sheets[1]
    before = T.STATS["fell back"]
    batch = T.compile_sheets([sheets[0], accented])
    assert T.STATS["fell back"] == before + 1
    assert batch == [T.compile_sheets([sheets[0]])[0], T.compile_sheets([accented])[0]]


def test_ten_pages_or_more_are_typeset_again_with_two_digits():
    """The footer's total is drawn in the width of the digits expected; a sheet that turns out to have ten
    pages is typeset once more with two digits' room, and says "page 1 of 10"."""
    from worked.render import texbatch as T

    ws = _sheets("quiz-1.toml", 1)[0][0]
    k = ws.rindex("\\label{wk-last-page}")
    long = ws[:k] + "\\clearpage\\null" * 8 + ws[k:]
    before = T.STATS["again"]
    pdf = T.compile_sheets([long])[0]
    assert T.STATS["again"] == before + 1
    feet = _footers(pdf)
    assert len(feet) >= 10 and feet[0] == f"page 1 of {len(feet)}" and feet[-1] == f"page {len(feet)} of {len(feet)}"


def test_sheets_with_different_preambles_are_compiled_apart():
    """Sheets on different paper sizes cannot share a run: each is compiled alone, with the same result."""
    from worked.render import texbatch as T

    a4 = _sheets("quiz-1.toml", 1)[0][0]
    letter = a4.replace("a4paper", "letterpaper")
    assert T.compile_sheets([a4, letter]) == [T.compile_sheets([a4])[0], T.compile_sheets([letter])[0]]


def test_quiz_latex_bytes_do_not_depend_on_jobs_or_variant(tmp_path, cli):
    """`worked quiz --pdf-engine latex`: --jobs 1 (one run for all five variants) and --jobs 2 (two runs)
    write the same bytes, and --variant CODE alone rebuilds that variant's PDFs byte for byte."""
    outs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        code, _, err = cli("quiz", PROBLEMS / "quiz-1.toml", "-n", "5", "-o", out, "--format", "pdf",
                           "--pdf-engine", "latex", "--quiet", "--jobs", jobs)
        assert code == 0, err
        outs[jobs] = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert outs["1"] == outs["2"]
    code3 = sorted(k.split("/")[1] for k in outs["1"] if k.startswith("variants/"))[2]
    out = tmp_path / "one"
    code, _, err = cli("quiz", PROBLEMS / "quiz-1.toml", "-n", "5", "-o", out, "--format", "pdf",
                       "--pdf-engine", "latex", "--quiet", "--variant", code3)
    assert code == 0, err
    for doc in ("worksheet", "answer-key"):
        assert (out / "variants" / code3 / f"{doc}.pdf").read_bytes() == outs["1"][f"variants/{code3}/{doc}.pdf"]


def test_accented_names_share_runs_and_rebuild_alone(tmp_path):
    """Students' names with accents (Zoë, Núñez, Łukasz) are within the prelude's glyphs: their sheets share
    a run with the others (no fallback), and --variant rebuilds one of them alone byte for byte."""
    from worked import quiz
    from worked.render import texbatch as T

    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\ns1,Zoë Müller\ns2,Ana\ns3,José Núñez\ns4,Łukasz Żółć\n", encoding="utf-8")
    before = T.STATS["fell back"]
    out, entries = quiz.run(PROBLEMS / "quiz-1.toml", roster=roster, outdir=tmp_path / "all", formats="pdf",
                            quiet=True, jobs=1, pdf_engine="latex")
    assert T.STATS["fell back"] == before
    code = entries[3]["variant"]
    one, _ = quiz.run(PROBLEMS / "quiz-1.toml", roster=roster, outdir=tmp_path / "one", formats="pdf",
                      quiet=True, jobs=1, pdf_engine="latex", variant=code)
    for doc in ("worksheet", "answer-key"):
        assert (one / "variants" / code / f"{doc}.pdf").read_bytes() == (out / "variants" / code / f"{doc}.pdf").read_bytes()
