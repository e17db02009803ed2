"""Issue 24, parts 4 and 5: math in prose comes from the tree, and one notation in every format.

* prose (titles, explanations, notes, worksheet tasks) is :class:`worked.eq.Prose`, printed by every
  printer; no raw ASCII math (``A_ij``, ``e^x``) on a typeset page;
* one index style, ``dW_Q[1, 1]``, never a subscript inside a subscript;
* the loss is a number (pages and JSON), one prime (′), "scores" in the quiz, √4 = 2, e^0 = 1.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import worked
from worked import eq, i18n, printers
from worked.render import answer_key_html, answer_key_tex, answer_key_typst, worksheet_tex, worksheet_typst

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = [p for p in sorted((ROOT / "problems").glob("*.toml")) if not p.stem.startswith("quiz")]
FORMATS = (printers.text, printers.latex, printers.mathml, printers.typst, printers.htmlcss, printers.spoken)


@pytest.fixture(scope="module")
def solutions():
    out = {}
    for p in PROBLEMS:
        sol = worked.solve(worked.Problem.from_file(str(p)))
        if isinstance(getattr(sol, "blocks", None), list):     # a chain of blocks ([[blocks]]): each block's
            out.update({f"{p.stem}.block{k}": b for k, b in enumerate(sol.blocks, 1)})
        else:
            out[p.stem] = sol
    return out


def _nodes(node):
    yield node
    for c in node.children():
        yield from _nodes(c)


def _every_tree(sol):
    for st in sol.steps:
        for ln in st.lines:
            yield ln.eq
        for pr in [st.title_prose, st.why_prose, *st.notes_prose]:
            yield pr
        if st.shape_eq is not None:
            yield st.shape_eq
    for m in sol.matrices().values():
        yield m.sym


def _nested_subscript(fmt: str, s: str) -> bool:
    """A subscript that holds a subscript (or an index attached to a subscripted base)."""
    if fmt == "latex":
        return bool(re.search(r"_\{[^{}]*_\{|\}_\{[^{}]*\}\}_\{|\{\{?[A-Za-z\\]+(?:\{[A-Za-z]+\})?_\{[^{}]*\}\}_\{", s))
    if fmt == "mathml":
        return bool(re.search(r"<msub>\s*<msub>|<msubsup>\s*<msub>|<msub><mrow><msub>", s))
    if fmt == "htmlcss":
        return "</sub><sub>" in s or "</sub></span><sub>" in s or bool(re.search(r"<sub>[^<]*<sub>", s))
    if fmt == "typst":
        return "attach(" in s or bool(re.search(r"_[A-Za-z\"]+\)?_\(", s))
    return bool(re.search(r"_[^\s\[\]]*_", s))        # text: W_Q_1


def test_no_nested_subscripts_for_any_symbol_the_solver_uses(solutions):
    seen = 0
    for sol in solutions.values():
        for tree in _every_tree(sol):
            for n in _nodes(tree):
                if type(n) is eq.Entry or type(n) is eq.Col:
                    assert not (type(n.base) is eq.Sym and "_" in n.base.name and n.base.sub is not None)
                    for name, fmt in zip(("text", "latex", "mathml", "typst", "htmlcss"), FORMATS):
                        s = fmt(n)
                        assert not _nested_subscript(name, s), (name, s)
                    seen += 1
                if type(n) is eq.Sym:
                    assert not ("_" in n.name and n.sub is not None), n
    assert seen > 300


def test_an_entry_of_a_subscripted_symbol_is_written_as_the_asks_write_it():
    e = eq.Entry(eq.matrix_sym("dW_Q"), "1", "1")
    assert printers.text(e) == "dW_Q[1, 1]"
    assert printers.latex(e) == r"\mathrm{dW}_{Q}[1,1]"
    assert printers.typst(e) == '"dW"_Q [1, 1]'
    assert printers.htmlcss(e) == "dW<sub><i>Q</i></sub>[1,\u00a01]"
    assert printers.mathml(e).startswith("<mrow><msub><mi>dW</mi><mi>Q</mi></msub><mo>[</mo>")
    new = eq.Entry(eq.Sym("W_Q", prime=True), "1", "1")
    assert printers.latex(new) == "W'_{Q}[1,1]" and printers.typst(new) == "W'_Q [1, 1]"
    assert printers.text(new) == "W_Q′[1, 1]"


def test_prose_is_printed_by_every_printer():
    pr = eq.prose("the row's sum ", eq.Sym("s", sub="i"), " = ",
                  eq.Sum(eq.Mul((eq.Entry(eq.Sym("A"), "i", "k"), eq.Entry(eq.matrix_sym("dA"), "i", "k"))), "k"),
                  " & e^x: ", eq.Exp(eq.Sym("x")))
    assert printers.text(pr) == "the row's sum s_i = Σ_k A[i, k]·dA[i, k] & e^x: e^x"
    tex = printers.latex(pr)
    assert tex.isascii() and r"$s_{i}$" in tex and r"\&" in tex and "$e^{x}$" in tex
    # each formula in a box: a line never breaks inside it (LaTeX \mbox, Typst box)
    assert r"\mbox{$s_{i}$}" in tex
    assert "#box({set math.equation(alt: \"s i\"); $s_(i)$})" in printers.typst(pr)
    assert 'alttext="e to the x"' in printers.mathml(pr) and "&amp;" in printers.mathml(pr)
    assert 'aria-label="s i"' in printers.htmlcss(pr)
    assert printers.spoken(pr).startswith("the row's sum s i = sum over k of A row i, column k times dA")
    assert eq.prose(pr) is pr and eq.prose("a", "b").parts == ("ab",)


def test_step_prose_stays_plain_text_in_json(solutions):
    sol = solutions["cats-chase-mice-train"]
    d = sol.to_dict()
    for st, sd in zip(sol.steps, d["steps"]):
        assert isinstance(sd["why"], str) and sd["why"] == printers.text(st.why_prose)
        assert isinstance(sd["title"], str) and all(isinstance(n, str) for n in sd["notes"])
    ds = next(s for s in d["steps"] if s["id"] == "dS")
    assert "s_i = Σ_k A[i, k]·dA[i, k]" in ds["why"]


_RAW = re.compile(r"[A-Za-z]_[A-Za-z0-9{(]|\be\^|\^\(|[A-Za-z]_ij\b")


def _prose_of_typst(src: str) -> str:
    """The markup text of a Typst page without its formulas, strings and code."""
    src = re.sub(r"\$[^$]*\$", " ", src)
    src = re.sub(r'"(?:[^"\\]|\\.)*"', " ", src)
    return src.replace("\\_", "_").replace("\\^", "^")


@pytest.mark.parametrize("name", ["cats-chase-mice-train", "causal-mask-train", "two-heads", "decimal-inputs"])
def test_no_raw_ascii_math_on_a_typeset_page(solutions, name):
    sol = solutions[name]
    for make in (answer_key_typst, worksheet_typst):
        text = _prose_of_typst(make(sol))
        hits = [m.group(0) for m in _RAW.finditer(text)]
        assert not hits, hits[:5]
    for make in (answer_key_tex, worksheet_tex):
        tex = make(sol)
        assert r"\_" not in tex and r"\textasciicircum" not in tex, name
    html = answer_key_html(sol)
    body = re.sub(r"<math.*?</math>", " ", html, flags=re.S)
    body = re.sub(r"<(style|script)\b.*?</\1>", " ", body, flags=re.S)
    body = re.sub(r"<[^>]+>", " ", body)
    hits = [m.group(0) for m in _RAW.finditer(body)]
    assert not hits, hits[:5]


def test_scalars_are_numbers(solutions):
    sol = solutions["cats-chase-mice-train"]
    d = json.loads(json.dumps(sol.to_dict()))
    tr = d["train"]
    assert isinstance(tr["loss"], float) and isinstance(tr["loss_after"], float)
    for k in ("loss", "loss_after"):
        assert isinstance(tr["matrices"][k]["value"], float) and tr["matrices"][k]["shape"] == []
    text = sol.text()
    assert "L ≈ 2.24" in text and "L′ ≈ 0.80" in text and "L [" not in text and "L′ [" not in text
    typ = answer_key_typst(sol)
    assert 'rows: ("L",)' not in typ and 'rows: ("L′",)' not in typ


def test_json_loss_from_the_command_line_is_a_number():
    out = subprocess.run([sys.executable, "-m", "worked", "solve", str(ROOT / "problems/cats-chase-mice-train.toml"),
                          "--format", "json"], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    tr = json.loads(out)["train"]
    assert isinstance(tr["loss"], float) and isinstance(tr["matrices"]["loss"]["value"], float)


def test_one_prime(solutions):
    for sol in solutions.values():
        for st in sol.steps:
            for s in [*map(printers.text, [st.title_prose, st.why_prose, *st.notes_prose]), *(printers.text(ln.eq) for ln in st.lines)]:
                assert not re.search(r"\b[A-Za-z]'(?!s\b)", s), s      # L', Z': the prime is ′
        for tree in _every_tree(sol):
            for n in _nodes(tree):
                if type(n) is eq.Sym:
                    assert "′" not in n.name and "'" not in n.name
    sol = solutions["cats-chase-mice-train"]
    la = sol.matrices()["loss_after"].sym
    z = next(ln.eq.items[0] for st in sol.steps if st.id == "loss_after" for ln in st.lines if ln.group)
    # one rule for upright and italic: L′ and z′_cats are both single letters, both italic, in every format
    assert printers.latex(la) == "L'" and printers.latex(z).startswith("z'_")
    assert printers.typst(la) == "L'" and printers.typst(z).startswith("z'_")
    assert printers.htmlcss(la) == "<i>L</i>′" and printers.htmlcss(z).startswith("<i>z</i>′")


def test_quiz_says_scores():
    from worked import stages

    assert all("S = Q" not in printers.text(s.words) and "S divided" not in printers.text(s.words) for s in stages.ALL)
    src = (ROOT / "worked/quiz.py").read_text(encoding="utf-8") + "".join(
        p.read_text(encoding="utf-8") for p in (ROOT / "templates").rglob("*.*"))
    assert "S = Q" not in src


def test_sqrt_of_a_perfect_square_is_simplified():
    from worked.render import view

    p = worked.Problem.from_file(str(ROOT / "problems/decimal-inputs.toml"))
    p4 = next((worked.Problem.from_file(str(f)) for f in PROBLEMS
               if worked.Problem.from_file(str(f)).d_k == 4 and worked.Problem.from_file(str(f)).scale == "sqrt"), None)
    for prob in filter(None, (p, p4)):
        text = view.scale_text(prob)
        if prob.d_k in (1, 4, 9, 16):
            assert text.endswith(f"√{prob.d_k} = {int(prob.d_k ** 0.5)}"), text
    from worked.generate import Family, generate

    prob = generate(Family(d_k=4), 1)
    assert view.scale_text(prob) == "divide the scores by √d_k = √4 = 2"
    sol = worked.solve(prob)
    assert "√d_k = √4 = 2" in printers.text(next(s for s in sol.steps if s.id == "scaled").why_prose)


def test_e_to_an_exact_zero_is_one():
    from worked.generate import Family, generate

    found = 0
    for seed in range(40):
        sol = worked.solve(generate(Family(), seed), display="decimal")
        for st in sol.steps:
            for ln in st.lines:
                text = printers.text(ln.eq)
                assert "e^(0.0000)" not in text and "e^(0.000)" not in text, text
                found += "e^0 = 1" in text
    assert found


def test_mistake_feedback_holds_its_math_as_trees():
    from worked.generate import Family, generate
    from worked.mistakes import MISTAKES

    p = generate(Family(d_k=4), 1)
    m = MISTAKES["softmax-backward-sum"]
    pr = m.message_prose(p)
    assert any(isinstance(x, eq.Rel) for x in i18n.localize(pr).parts)     # its sentence as shown: words and trees
    assert "dS[i, j] = A[i, j]·(dA[i, j] − Σ_k A[i, k]·dA[i, k])" in m.message(p)
    assert "_ij" not in m.message(p) and "_ij" not in m.answer_feedback
    assert printers.latex(pr).isascii() and r"\_" not in printers.latex(pr)
    assert "√d_k = √4 = 2" in MISTAKES["no-scaling"].message(p)


def test_weight_rows_are_numbers_even_with_as_many_tokens_as_rows():
    """the cat sat: 3 tokens and d_model 3; dW_Q's rows are the rows of W_Q (1, 2, 3), never tokens."""
    from pathlib import Path

    from worked import printers, problem, solver
    from worked.render import view

    path = Path(__file__).resolve().parents[1] / "problems" / "causal-mask-train.toml"
    sol = solver.solve(problem.load(str(path)))
    assert sol.problem.n == sol.problem.d_model
    tokens = set(sol.problem.tokens)
    for kind in ("answer-key", "worksheet"):
        for s in view.build(sol, kind).steps:
            if not s.id.startswith("dW_"):
                continue
            names = [printers.text(c["eq"]) for c in s.checks if c.get("eq") is not None]
            names += [printers.text(ln.eq) for st in sol.steps if st.id == s.id for ln in st.lines]
            assert names
            for t in names:
                row = t[t.index("[") + 1:t.index(",")]
                assert row.isdigit() and row not in tokens, t
