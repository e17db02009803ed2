"""Pages that fit (issue 24, parts 2 and 3): every shipped problem's worksheet and key, and the Part 10 pair
made from unrounded NumPy arrays, as Typst PDFs, read back from poppler's word boxes (``pdftotext -bbox``):
no word below the top of the footer ("page N of M"), no two words printed over each other, no word shrunk
to fit (first-level subscripts measure about 6.8 pt here; under 5.5 pt means scaled down). Training
worksheets carry every prompt and show T and lr; the text solution keeps within 100 columns."""
from __future__ import annotations

import re
import shutil
import subprocess
from functools import lru_cache

import pytest
from sheet_support import PROBLEMS

import worked
from worked import eq, printers
from worked.render import typst as Y
from worked.render import view
from worked.render.sheet import document_pdf

needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                     reason="pdftotext not installed (Debian: poppler-utils)")

# -- reading word boxes (the logic of shared/tools/pagecheck.py, which is not in the repo) -------------
WORD = re.compile(r'<word xMin="([\d.]+)" yMin="([\d.]+)" xMax="([\d.]+)" yMax="([\d.]+)">([^<]*)</word>')
PAGE = re.compile(r'<page width="[\d.]+" height="([\d.]+)">(.*?)</page>', re.S)
MIN_HEIGHT = 5.5   # pt; a first-level subscript is about 6.8 pt


def pages(pdf: bytes):
    out = subprocess.run(["pdftotext", "-bbox", "-", "-"], input=pdf, capture_output=True, check=True).stdout
    for m in PAGE.finditer(out.decode("utf-8")):
        yield [(float(a), float(b), float(c), float(d), w) for a, b, c, d, w in WORD.findall(m.group(2))]


def layout_problems(pdf: bytes, footer_word: str = "page") -> list[str]:
    """One line per fault: words run into the footer, words over words, words shrunk below MIN_HEIGHT.
    *footer_word*: the footer's first word ("page N of M"; "Seite" in German)."""
    found = []
    for pno, words in enumerate(pages(pdf), 1):
        foot = [w for w in words if w[4] == footer_word]
        ftop = min(w[1] for w in foot) if foot else None
        if foot:
            foot_line = [w for w in words if abs(w[1] - ftop) < 2]
            below = [w for w in words if w[3] > ftop + 0.5 and w not in foot_line]
            if below:
                found.append(f"page {pno}: {len(below)} words run into the footer, e.g. {below[0][4]!r}")
        body = [w for w in words if ftop is None or w[1] < ftop - 2]
        clash = []
        for i, a in enumerate(body):
            for b in body[i + 1:i + 60]:
                ix = min(a[2], b[2]) - max(a[0], b[0])
                iy = min(a[3], b[3]) - max(a[1], b[1])
                if ix > 1.5 and iy > 0.75 * min(a[3] - a[1], b[3] - b[1]):
                    clash.append((a[4], b[4]))
        if clash:
            found.append(f"page {pno}: {len(clash)} pairs of words overprint each other, e.g. {clash[0]!r}")
        tiny = [w for w in words if w[3] - w[1] < MIN_HEIGHT]
        if tiny:
            found.append(f"page {pno}: {len(tiny)} words under {MIN_HEIGHT} pt high, e.g. {tiny[0][4]!r}")
    return found


def pdf_text(pdf: bytes, first: int | None = None, last: int | None = None) -> str:
    rng = (["-f", str(first)] if first else []) + (["-l", str(last)] if last else [])
    return subprocess.run(["pdftotext", *rng, "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()


# -- the problems ------------------------------------------------------------------------------------
NAMES = [p.stem for p in PROBLEMS] + ["part10"]
TRAIN = [p.stem for p in PROBLEMS if "[train]" in p.read_text(encoding="utf-8")]
# the attention's (a target T, the squared error) and a Transformer block's (the next tokens, cross-entropy)
BLOCK_TRAIN = [p.stem for p in PROBLEMS if p.stem in TRAIN and re.search(r"(?m)^block\s*=", p.read_text(encoding="utf-8"))]
ATTN_TRAIN = [n for n in TRAIN if n not in BLOCK_TRAIN]


@lru_cache(maxsize=None)
def solution(name: str):
    if name == "part10":   # Part 10: unrounded NumPy arrays, shown to 4 places
        np = pytest.importorskip("numpy")
        rng = np.random.default_rng(16)
        X = rng.uniform(0, 1, size=(4, 3))
        W_Q, W_K, W_V = (rng.uniform(-2, 2, size=(3, 5)) for _ in range(3))
        return worked.solve(worked.Problem(X, W_Q, W_K, W_V, tokens=["I", "drink", "hot", "coffee"]))
    return worked.solve(worked.Problem.from_file(str(next(p for p in PROBLEMS if p.stem == name))))


@lru_cache(maxsize=None)
def pdf(name: str, kind: str) -> bytes:
    return document_pdf(kind, solution(name))


def test_training_problems_are_shipped():
    assert set(TRAIN) >= {"cats-chase-mice-train", "causal-mask-train"}


@needs_pdftotext
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", NAMES)
def test_typst_pages_fit(name, kind):
    """Nothing over the footer, nothing printed twice over, nothing scaled down to fit."""
    assert layout_problems(pdf(name, kind)) == []


@needs_pdftotext
@pytest.mark.parametrize("name", TRAIN)
def test_training_worksheet_has_every_prompt(name):
    """The softmax-backward task asks for every s_i, every dS entry and every row total, and each is on
    a page (a long task breaks between prompts; none is clipped or set over the footer)."""
    sol = solution(name)
    n = sol.problem.n
    step = next(s for s in view.build(sol, "worksheet").steps if s.id == "dS")
    asked = [printers.text(c["eq"]) for c in step.checks if c.get("eq") is not None]
    want = {k: sum(a.startswith(k) for a in asked) for k in ("s_", "dS", "Σ")}
    assert want["s_"] == n and want["dS"] >= n * (n + 1) // 2
    if sol.problem.mask == "none":
        assert want == {"s_": n, "dS": n * sol.problem.n_kv, "Σ": n}
    text = pdf_text(pdf(name, "worksheet"))
    task = text[text.index(f"Task {step.number} "):text.index(f"Task {step.number + 1} ")]
    prompts = re.findall(r"Evaluate: (\S+)", task)
    got = {"s_": sum(p.startswith("𝑠") for p in prompts), "dS": sum(p.startswith("dS") for p in prompts),
           "Σ": sum(p.startswith("∑") for p in prompts)}
    assert got == want and len(prompts) == len(asked)


@needs_pdftotext
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", ATTN_TRAIN)
def test_training_problem_section_shows_target_and_rate(name, kind):
    """T as a labelled matrix, the learning rate and the loss, in the problem section (page 1)."""
    sol = solution(name)
    doc = view.build(sol, kind)
    t = doc.training
    assert t["target"]["symbol"] == eq.Sym("T")
    assert [[c["text"] for c in row] for row in t["target"]["cells"]] == \
        [[printers.text(eq.num(x)) for x in row] for row in sol.problem.train.target]
    first = pdf_text(pdf(name, kind), 1, 1)
    problem = first[first.index("THE PROBLEM"):]
    assert "learning rate" in problem and "lr" in problem
    assert "𝐿 =" in problem and "𝑇 =" in problem          # the loss formula and the labelled target
    src = Y.render_typ(view.build(sol, kind))
    assert src.count('#wk-matrix(head: [#eqn("T ') == 1


@pytest.mark.parametrize("name", ATTN_TRAIN)
def test_key_glance_lists_the_training_matrices(name):
    from worked import printers

    labels = [printers.text(g["label"]) for g in view.build(solution(name), "answer-key").glance]
    for want in ("L", "dZ", "dV", "dA", "dS", "dQ", "dK", "dW_Q", "dW_K", "dW_V", "W_Q′", "W_K′", "W_V′", "L′"):
        assert want in labels


@needs_pdftotext
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", BLOCK_TRAIN)
def test_a_block_training_problem_section_shows_rate_and_loss(name, kind):
    """A block's training step has no matrix T (its targets are the next tokens, in its facts): the learning rate
    and the mean cross-entropy in the problem section (page 1)."""
    sol = solution(name)
    t = view.build(sol, kind).training
    assert t["target"] is None and t["loss_name"] == "cross-entropy"
    first = pdf_text(pdf(name, kind), 1, 1)
    problem = first[first.index("THE PROBLEM"):]
    assert "learning rate" in problem and "cross-entropy" in problem and "𝐿 =" in problem
    assert "TARGETS" in problem.upper()


@pytest.mark.parametrize("name", BLOCK_TRAIN)
def test_a_block_key_glance_lists_every_gradient_and_update(name):
    from worked import printers

    labels = {printers.text(g["label"]).split(" (head")[0] for g in view.build(solution(name), "answer-key").glance}
    for want in ("L", "dlogits", "dW_out", "dW_1", "db_1", "dW_2", "db_2", "dW_O", "dV⁽¹⁾", "dQ⁽¹⁾", "dW_Q⁽¹⁾",
                 "W_1′", "W_out′", "W_Q′⁽¹⁾", "L′"):
        assert want in labels, (want, sorted(labels))


@needs_pdftotext
@pytest.mark.parametrize("name", ["cats-chase-mice", "part10"])
def test_name_once_on_page_one(name):
    assert pdf_text(pdf(name, "worksheet"), 1, 1).count("Name:") == 1


@pytest.mark.parametrize("name", NAMES)
def test_text_solution_within_100_columns(name):
    """Chains break at their relation signs, and a piece still too long (a loss's sum of squares, a blend of
    three value rows) before its + and − signs: no line of the text solution is over 100 columns; a piece
    that was broken is all there, term by term."""
    from worked.writers import text as tw

    text = tw.render(solution(name))     # Solution.text(); a chain of blocks ([[blocks]]) has no such method
    assert [ln for ln in text.splitlines() if len(ln) > 100] == []


def test_a_sum_too_long_for_its_line_breaks_before_its_signs():
    from worked.writers.text import _wrap_terms

    line = "      = " + " + ".join(f"(0.{k}{k}{k}{k} − 1)^2" for k in range(1, 10))
    out = _wrap_terms(line, "          ", 60)
    assert len(out) > 1 and all(len(x) <= 60 for x in out)
    assert all(x.startswith("          + ") for x in out[1:])
    assert " ".join(x.strip() for x in out) == line.strip()
    assert _wrap_terms("  x" * 40, "    ", 60) == ["  x" * 40]      # no sign to break at: stays whole


def test_typst_never_scales_a_formula():
    """No scale-to-fit is left in the templates or the writers: long lines break instead."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for f in [*(root / "templates" / "sheet").iterdir(), *(root / "worked" / "render").glob("*.py")]:
        if f.is_file():
            s = f.read_text(encoding="utf-8")
            assert "resizebox" not in s and "scale(x:" not in s and "wkfit" not in s, f


# -- the LaTeX engine: the same sheets through pdflatex ------------------------------------------------
needs_pdflatex = pytest.mark.skipif(shutil.which("pdflatex") is None or shutil.which("pdffonts") is None,
                                    reason="pdflatex or pdffonts not installed (Debian: texlive-latex-base, "
                                           "texlive-latex-recommended, texlive-fonts-recommended, lmodern, "
                                           "poppler-utils)")


@needs_pdflatex
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", NAMES)
def test_latex_pages_fit(name, kind, tmp_path):
    """pdflatex sets no line wider than the text (no Overfull \\hbox: a chain breaks, a matrix moves below its
    label, the glance's tables wrap), nothing runs into the footer, and no script of a script: TeX's
    first-level scripts are 7 pt at 10 pt (poppler measures their lmodern boxes at about 5.3 pt), a
    second-level one would be set in a 5 pt font (an exponent in a text-style fraction, in a matrix cell or
    a worksheet prompt)."""
    from worked.render.pdf import tex_env
    from worked.render.tex import render_tex

    (tmp_path / "s.tex").write_text(render_tex(view.build(solution(name), kind)), encoding="ascii")
    subprocess.run(["pdflatex", "-interaction=batchmode", "-halt-on-error", "s.tex"], cwd=tmp_path,
                   env=tex_env(), capture_output=True, check=True, timeout=300)
    log = (tmp_path / "s.log").read_text(encoding="latin-1")
    assert "Overfull \\hbox" not in log, re.findall(r"Overfull \\hbox.*", log)[:3]
    fonts = subprocess.run(["pdffonts", "s.pdf"], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    assert not re.search(r"\b(LMRoman|LMMathItalic|LMMathSymbols)5-", fonts), fonts
    found = [f for f in layout_problems((tmp_path / "s.pdf").read_bytes()) if "footer" in f]
    assert found == []


def _lone_prompt_pages(pdf_bytes: bytes, word: str) -> list[int]:
    """The pages that hold one prompt (its label *word*) and no task's title: a task's prompt left alone."""
    out = []
    for pno, words in enumerate(pages(pdf_bytes), 1):
        text = " ".join(w[4] for w in words)
        if text.upper().count(word.upper()) == 1 and not re.search(r"\bTask \d", text):
            out.append(pno)
    return out


@needs_pdftotext
@pytest.mark.parametrize("name", TRAIN)
def test_no_worksheet_page_holds_a_lone_prompt(name):
    """A task's last prompt stays with the one before it (issue 27: the block's last page held only L′ =): no
    page of a training worksheet holds a single prompt without its task, and the Typst source makes the
    second-to-last prompt of every task sticky (its LaTeX: no page break after it)."""
    sol = solution(name)
    page = view.build(sol, "worksheet")
    assert _lone_prompt_pages(pdf(name, "worksheet"), page.steps[0].checks_word) == []
    src = Y.render_typ(page)
    penult = [s.checks[-2] for s in page.steps if len(s.checks) >= 2]
    assert src.count("breakable: false, sticky: true)[#block(") == sum(not c.get("aside") for c in penult) > 0
