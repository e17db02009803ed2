"""The HTML sheets and their WeasyPrint PDFs (issue 24, page review): a training problem shows its target T,
its learning rate and its loss on page 1; a task's heading stays on the page of its text and first prompt;
displayed formulas break only where they may (before + and −, never inside a vector)."""
from __future__ import annotations

import re
import shutil
import subprocess
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest

from worked import eq, printers
from worked.problem import Problem, load
from worked.render import answer_key_html, html_to_pdf, worksheet_html
from worked.render import view
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]
needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                     reason="pdftotext not installed (Debian: poppler-utils)")
VOID = {"meta", "br", "img", "hr", "input", "link", "wbr", "col", "area", "base", "source"}


class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    @property
    def cls(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def find_all(self, pred):
        for c in self.children:
            if isinstance(c, Node):
                if pred(c):
                    yield c
                yield from c.find_all(pred)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)


class Tree(HTMLParser):
    """The page as a tree of Nodes (enough for our own, well-formed pages)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        n = Node(tag, attrs, self.cur)
        self.cur.children.append(n)
        if tag not in VOID:
            self.cur = n

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        if n is not None and n.parent is not None:
            self.cur = n.parent

    def handle_data(self, data):
        self.cur.children.append(data)


def tree(html: str) -> Node:
    t = Tree()
    t.feed(html)
    t.close()
    return t.root


def has_class(c):
    return lambda n: c in n.cls


@lru_cache(maxsize=None)
def training_problem():
    """cats chase mice with a target and a learning rate that appear nowhere else on the page."""
    d = load(str(ROOT / "problems" / "cats-chase-mice-train.toml")).to_dict()
    d["train"] = {"target": [[7, -3], ["1/3", 5], [6, 9]], "loss": "mse", "lr": "3/100"}
    return solve(Problem.from_dict(d))


# -- 1. the training facts and the target T on page 1 -------------------------------------------------
@pytest.mark.parametrize("for_pdf", [False, True], ids=["mathml", "weasyprint"])
@pytest.mark.parametrize("make", [worksheet_html, answer_key_html])
def test_training_problem_section_shows_T_lr_and_the_loss(make, for_pdf):
    """The problem section has a Training row (the text, lr = 0.03, the loss L = ½ Σ (Z − T)²) and the
    target T as a labelled matrix with its entries, row by row, as in the Typst and LaTeX sheets."""
    sol = training_problem()
    page = tree(make(sol, for_pdf=for_pdf))
    problem = next(page.find_all(has_class("problem")))
    row = next(problem.find_all(has_class("training")))
    label = "aria-label" if for_pdf else "alttext"
    spoken = [n.attrs[label] for n in row.find_all(lambda n: label in n.attrs)]
    assert printers.spoken(view.training(sol.problem)["lr"]) in spoken
    assert printers.spoken(view.loss_def()) in spoken
    text = " ".join(row.text().split())
    assert text.startswith("Training") and "one step of gradient descent" in text
    assert "learning rate" in text and "loss" in text
    if for_pdf:
        assert "lr = 0.03" in text.replace("\u00a0", " ")
    figs = [f for f in problem.find_all(lambda n: n.tag == "figure")
            if any(n.attrs.get(label, "").startswith("T equals") for n in f.find_all(lambda n: label in n.attrs))]
    assert len(figs) == 1
    cells = [[td for td in tr.find_all(lambda n: n.tag == "td" and "v" in n.cls)]
             for tr in figs[0].find_all(lambda n: n.tag == "tr")]
    cells = [r for r in cells if r]
    assert [[" ".join(td.text().split()) for td in r] for r in cells] == [["7", "−3"], ["13", "5"], ["6", "9"]]
    third = [n.attrs[label] for n in cells[1][0].find_all(lambda n: label in n.attrs)]    # ⅓ as a fraction
    assert third == [printers.spoken(eq.num(Fraction(1, 3)))]


@needs_pdftotext
def test_training_facts_and_T_are_on_page_one_of_the_weasyprint_pdf():
    sol = training_problem()
    pdf = html_to_pdf(worksheet_html(sol, for_pdf=True))
    first = subprocess.run(["pdftotext", "-layout", "-l", "1", "-", "-"], input=pdf, capture_output=True,
                           check=True).stdout.decode()
    assert "TRAINING" in first.upper() and "learning rate lr = 0.03" in " ".join(first.split())
    rows = [" ".join(ln.split()) for ln in first.splitlines()]
    assert any(r.endswith("7 −3") for r in rows) and any(r.endswith("6 9") for r in rows)


# -- 2. a task's heading with its text and first prompt -------------------------------------------------
@pytest.mark.parametrize("name", ["cats-chase-mice-train", "two-heads"])
def test_each_task_heading_is_kept_with_its_text_and_first_prompt(name):
    """In the worksheet, each task's heading, grid, text and first prompt are one unbreakable block
    (``.keep``: break-inside: avoid), so that no heading is left alone at the foot of a page."""
    sol = solve(load(str(ROOT / "problems" / f"{name}.toml")))
    html = worksheet_html(sol, for_pdf=True)
    css = html[html.index("<style>"):html.index("</style>")]
    assert re.search(r"\.keep \{[^}]*break-inside: avoid", css)
    steps = list(tree(html).find_all(lambda n: n.tag == "section" and "step" in n.cls))
    doc_steps = view.build(sol, "worksheet").steps
    assert len(steps) == len(sol.steps) == len(doc_steps)
    for s in steps:
        keep = [c for c in s.children if isinstance(c, Node)][0]
        assert "keep" in keep.cls
        kinds = [n.tag if n.tag == "h2" else n.cls[0] for n in keep.find_all(
            lambda n: n.tag == "h2" or n.cls[:1] in (["why"], ["check"], ["matrix"]))]
        assert kinds[0] == "h2" and "why" in kinds, kinds
        assert ("matrix" in kinds) == (doc_steps[steps.index(s)].grid is not None)
        checks = list(s.find_all(has_class("check")))
        if checks:
            assert checks[0] in list(keep.find_all(has_class("check")))
            assert all(c not in list(keep.find_all(has_class("check"))) for c in checks[1:])


@needs_pdftotext
@pytest.mark.parametrize("name", ["cats-chase-mice-train", "two-heads"])
def test_weasyprint_worksheet_prints_each_heading_with_its_first_prompt(name):
    """In the WeasyPrint PDF, every task heading is on the page of its first prompt ("CHECK ONE ..."), and
    the task's text starts beside its grid as a whole line (not its first word alone)."""
    sol = solve(load(str(ROOT / "problems" / f"{name}.toml")))
    pdf = html_to_pdf(worksheet_html(sol, for_pdf=True))
    text = subprocess.run(["pdftotext", "-layout", "-", "-"], input=pdf, capture_output=True, check=True).stdout.decode()
    seq = []
    for pno, page in enumerate(text.split("\f"), 1):
        for ln in page.splitlines():
            ln = ln.strip()
            if m := re.match(r"Task (\d+) ", ln):
                seq.append(("task", int(m.group(1)), pno))
            elif ln.startswith("CHECK ONE"):
                seq.append(("check", None, pno))
    doc = view.build(sol, "worksheet")
    with_checks = {s.number for s in doc.steps if any(not c.get("aside") for c in s.checks)}
    assert sorted(n for k, n, _ in seq if k == "task") == [s.number for s in doc.steps]
    for i, (kind, num, pno) in enumerate(seq):
        if kind == "task" and num in with_checks:
            nxt = next(x for x in seq[i + 1:] if x[0] == "check")
            assert nxt[2] == pno, f"Task {num} is on page {pno}, its first prompt on page {nxt[2]}"
    lines = [ln.strip() for ln in text.splitlines()]
    for s in doc.steps:
        first_word = printers.text(s.task_rich).split()[0]
        assert first_word not in lines, f"{first_word!r} alone on a line (task {s.number})"


# -- 3, 6, 7. where a displayed formula may break; tall round brackets ------------------------------
def test_a_displayed_sum_breaks_only_before_its_signs_and_never_in_a_vector():
    nb = "\u00a0"
    s = eq.Add((eq.dec(Decimal("0.5669")), eq.dec(Decimal("0.4307")), eq.Neg(eq.dec(Decimal("0.0941")))))
    html = printers.htmlcss(eq.Rel((eq.Sym("v"), s), (eq.APPROX,)))
    assert html == f"<i>v</i>{nb}≈{nb}0.5669 +{nb}0.4307 −{nb}0.0941"   # breakable spaces: before + and − only
    vec = eq.Vec(tuple(eq.dec(Decimal(x)) for x in ("-1.3389", "0.2186", "0.5215")))
    assert " " not in printers.htmlcss(vec)
    dot = printers.htmlcss(eq.Dot(vec, vec))
    assert dot.count("<wbr>·") == 1 and " " not in dot          # a dot product of vectors: before its ·
    assert printers.htmlcss(eq.Rel((eq.Sym("X"), eq.Blank()), (eq.EQ,))) == f"<i>X</i>{nb}="


def test_a_power_of_a_tall_bracket_is_raised_to_its_top():
    tall = eq.Pow(eq.Add((eq.num(Fraction(4, 3)), eq.num(-1))), eq.num(2))
    html = printers.htmlcss(tall)
    assert 'class="m-big"><span class="m-dl m-rd">' in html and html.endswith('<sup class="m-hi">2</sup>')
    assert printers.htmlcss(eq.Pow(eq.Sym("x"), eq.num(2))) == "<i>x</i><sup>2</sup>"


def test_a_space_before_an_inline_formula_is_a_span_of_its_own():
    """(WeasyPrint breaks "Blend the value rows: … times V." after "Blend" when only the space before V
    overflows; a space in its own span is broken at as it should be.)"""
    html = printers.htmlcss(eq.prose("Blend the rows of ", eq.Sym("V"), ". Then ", eq.Sym("Z"), "."))
    assert html.startswith('Blend the rows of<span class="m-s"> </span><span class="m" role="math"')
    assert '. Then<span class="m-s"> </span><span class="m"' in html and html.endswith("</span>.")


def test_weasyprint_key_sets_chain_pieces_as_one_cell_tables_and_centres_exact_matrices():
    sol = solve(load(str(ROOT / "problems" / "causal-mask.toml")))
    page = tree(answer_key_html(sol, for_pdf=True))
    pieces = list(page.find_all(lambda n: n.cls[:2] == ["m", "d"]))
    assert pieces and all([c.cls for c in p.children if isinstance(c, Node)] == [["m-l"]] for p in pieces)
    figs = list(page.find_all(lambda n: n.tag == "figure" and "matrix" in n.cls))
    math_cells = [f for f in figs if any("x" in td.cls for td in f.find_all(lambda n: n.tag == "td"))]
    assert math_cells and all("x" in f.cls for f in math_cells)     # .x: every cell and label centred
    assert all("x" not in f.cls for f in figs if f not in math_cells)
