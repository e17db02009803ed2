"""The notebook in the teacher's language (issue 28): its code comments, docstrings and what its cells print (the
shapes, the row sums, each check's message) go through the catalogues as its markdown does; the Python identifiers and
NumPy stay. Run in every shipped language, every check passes and no English sentence is left; in English the code is
what it always was."""
from __future__ import annotations

import io
import re
import tokenize
from functools import lru_cache
from pathlib import Path

import pytest

import worked
from worked import i18n, printers
from worked.writers import notebook as nbw

from test_i18n import SHIPPED, _stray_english
from test_notebook import kernel, run  # noqa: F401  (kernel: the module's kernel, a fixture)

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from nbclient.exceptions import CellExecutionError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: attention with a mask, cross-attention, two heads, and a Transformer block with its training step
NAMES = ["causal-mask", "cross-attention", "two-heads", "block-train"]


@lru_cache(maxsize=None)
def solution(name: str):
    return worked.solve(worked.load(ROOT / "problems" / f"{name}.toml"))


def printed(cell) -> str:
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")


def words_of_code(source: str) -> list[str]:
    """What a reader of *source* reads as words: its comments and its string literals (docstrings, the messages it
    prints), without the code."""
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append(tok.string.lstrip("#"))
        elif tok.type == tokenize.STRING and not tok.string.startswith(("f", "F")):
            out.append(tok.string)
    return out


def english_left(nb, sol) -> list[str]:
    """The English words left in the code's comments and strings and in what the cells printed."""
    text = []
    for c in nb.cells:
        if c.cell_type == "code":
            text += words_of_code(c.source) + [printed(c)]
    # the problem's vocabulary is its own words (a target named in a comment), as its tokens are
    vocab = " ".join(getattr(getattr(sol.problem, "block", None), "vocab", None) or ())
    text = re.sub(r"`[^`]*`", " ", "\n".join(text))       # `places`: a name in the code, quoted as code
    return sorted({w for w in _stray_english(text, sol) if w not in vocab})


@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("name", NAMES)
def test_the_notebook_runs_in_every_language_and_speaks_it(name, lang, kernel):
    """Each notebook, written in the language and run, passes every check, says so in the language, and its code
    comments, docstrings and printed lines hold no English sentence."""
    sol = solution(name)
    with i18n.using(lang):
        nb = nbw.build(sol)
        ok = i18n.tr("{label} matches the key", label="")
    done = run(nb, kernel)
    assert not [o for c in done.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    checks = [c for c in done.cells if c.cell_type == "code" and c.id.endswith("-check")]
    assert checks and all(printed(c).startswith("✓ ") and ok.strip() in printed(c) for c in checks)
    assert english_left(done, sol) == []
    loc = i18n.get(lang)
    assert printed(next(c for c in done.cells if c.id == "inputs")).startswith(loc.format("{name} shape:", name="X"))


@pytest.mark.parametrize("lang", SHIPPED)
def test_the_exercise_and_a_chain_speak_the_language(lang):
    """The student's empty cells (the placeholder, what to compute), a graded check's comment and messages, and a
    chain of blocks' carried X and its checks: in the language, with no English left."""
    sol = solution("cats-chase-mice")
    with i18n.using(lang):
        ex = nbw.build(sol, answers_hidden=True, graded=frozenset({"scores"}))
        chain = worked.solve(worked.load(ROOT / "problems" / "decoder-layer.toml"))
        chain_ex = nbw.build(chain, answers_hidden=True)
        placeholder = nbw.placeholder()
    assert placeholder != nbw.PLACEHOLDER
    blanks = [c for c in ex.cells if c.source.startswith(placeholder)]
    assert len(blanks) == len(nbw.coded_steps(sol)) + 1
    assert english_left(ex, sol) == [] and english_left(chain_ex, chain.blocks[0]) == []
    assert not any(c.source.startswith(nbw.PLACEHOLDER) for c in ex.cells + chain_ex.cells)
    if lang == "fr":        # the intro's facts punctuated as French is: a no-break space before the colon
        assert "**Tokens\u00a0:** cats, chase, mice" in ex.cells[0].source


def test_a_graded_checks_message_names_the_shape_in_the_language(kernel):
    """A graded matrix's check tests its shape only; a wrong shape fails with the language's sentence, the shape
    the student's code gave put where the translation has it."""
    sol = solution("cats-chase-mice")
    full = {c.id: c.source for c in nbw.build(sol).cells}
    with i18n.using("de"):
        ex = nbw.build(sol, answers_hidden=True, graded=frozenset({"Q"}))
        want = i18n.tr("{label} should have shape {shape}, got {got}", label=i18n.tr("Step {n} ({title})", n=1,
                       title=printers.text(sol.steps[0].title_prose)), shape="(3, 2)", got="(1, 1)")
    ex.cells = [c for c in ex.cells if not c.id.startswith(("step02", "step03", "step04", "step05", "step06", "step07",
                                                             "whole"))]
    q = next(c for c in ex.cells if c.id == "step01-Q")
    q.source = "Q = np.zeros((1, 1))"
    with pytest.raises(CellExecutionError) as exc:
        run(ex, kernel)
    assert exc.value.ename == "AssertionError" and want in str(exc.value)
    q.source = full["step01-Q"]
    done = run(ex, kernel)
    with i18n.using("de"):
        ok = "✓ " + i18n.tr("{label} has the right shape (its values are graded)", label=i18n.tr(
            "Step {n} ({title})", n=1, title=printers.text(sol.steps[0].title_prose)))
    assert printed(next(c for c in done.cells if c.id == "step01-Q-check")).strip() == ok


def test_english_code_is_as_it_was():
    """In English the comments and messages are the ones the notebook always had (the tests of test_notebook.py
    read them: "row sums:", "✓ Step 1 (…) matches the key")."""
    sol = solution("cats-chase-mice")
    src = {c.id: c.source for c in nbw.build(sol).cells}
    ex = {c.id: c.source for c in nbw.build(sol, answers_hidden=True, graded=frozenset({"Q"})).cells}
    assert 'print("X shape:", X.shape)' in src["inputs"]
    assert "# words, size of each word's row of X, size of a query or key" in src["inputs"]
    assert "Q = X @ W_Q     # queries: what each word is looking for" in src["step01-Q"]
    assert 'print("row sums:", A.sum(axis=1))' in src["step06-weights"]
    assert "err_msg='Step 1 (Queries: Q = X·W_Q) does not match the worked key'" in src["step01-Q-check"]
    assert ex["step02-K"] == "# your code here\n# compute K, shape (3, 2)"
    assert ex["step01-Q-check"].startswith("# graded in the quiz: this check looks at the shape only")
    assert "'Step 1 (Queries: Q = X·W_Q) should have shape (3, 2), got ' + str(np.shape(Q))\n" in ex["step01-Q-check"]
    assert re.search(r"def show\(M, places=2\):\n    \"\"\"Print a table as the key does", src["import"])
