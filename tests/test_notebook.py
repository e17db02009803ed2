"""`worked notebook`: the Part 10 walk-through as a Jupyter notebook, run with nbclient, checked against the key.

The notebooks are executed on one kernel for the module (nbclient takes a started KernelManager);
each run starts with ``%reset -f`` so no name is left over from the notebook before.
"""
from __future__ import annotations

import copy
import re
import sys
import tomllib
from pathlib import Path

import nbformat
import pytest

import worked
from worked.writers import notebook as nbw

from test_solve_part10 import PAGE, PAGE_WQ, PAGE_X, part10_problem

pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from nbclient.exceptions import CellExecutionError  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _attention_problems():
    """Every shipped problem file that is a problem (quiz specs, with [family] or [[parts]], are left out; a chain of blocks,
    [[blocks]], has its notebook checked in tests/test_blocks.py)."""
    out = []
    for f in sorted((ROOT / "problems").glob("*.toml")):
        if not {"family", "parts", "blocks", "problem"} & set(tomllib.loads(f.read_text(encoding="utf-8"))):
            out.append(f)
    return out


PROBLEMS = _attention_problems()


@pytest.fixture(scope="module")
def kernel():
    from jupyter_client.manager import KernelManager

    km = KernelManager(kernel_name="python3")
    km.start_kernel()
    yield km
    km.shutdown_kernel(now=True)


def run(nb, km):
    """Execute a copy of *nb* on the shared kernel after a fresh namespace; return it without the reset cell."""
    nb = copy.deepcopy(nb)
    nb.cells.insert(0, nbformat.v4.new_code_cell("%reset -f", id="reset"))
    nbw.execute(nb, km=km)
    del nb.cells[0]
    return nb


def text_of(cell) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def check_cells(nb):
    return [c for c in nb.cells if c.cell_type == "code" and c.id.endswith("-check")]


@pytest.fixture(scope="module")
def part10():
    return worked.solve(part10_problem())


@pytest.fixture(scope="module")
def part10_run(part10, kernel):
    return run(nbw.build(part10), kernel)


@pytest.mark.parametrize("path", [None] + PROBLEMS, ids=lambda p: "builtin" if p is None else p.stem)
def test_every_shipped_problem_runs_and_every_check_passes(path, kernel):
    """Each notebook runs without an error, and each check cell says its step matches the key."""
    sol = worked.solve(worked.load(path))
    nb = run(nbw.build(sol), kernel)
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    checks = check_cells(nb)
    steps = nbw.coded_steps(sol)   # an attention [train] problem: its forward pass; a block's: every step but the check
    numbers = [sol.steps.index(st) + 1 for st in steps]     # (the gradient check's step has no code: numbers skip it)
    assert len(checks) == len(steps) + 1          # one per step, and the one-block cell's
    for k, c in enumerate(checks, 1):
        want = f"Step {numbers[k - 1]} (" if k <= len(steps) else "The whole thing in one block"
        assert text_of(c).startswith("✓ " + want) and "matches the key" in text_of(c), (c.id, text_of(c))


def test_two_heads_and_the_mask_have_their_cells():
    """Two heads: a cell per head's step, concat and W_O; the causal problem masks with −inf before the softmax."""
    nb = nbw.build(worked.solve(worked.load(ROOT / "problems" / "two-heads.toml")))
    src = {c.id: c.source for c in nb.cells}
    assert "Q2 = X @ W_Q2" in src["step08-Q-head2"] and "np.hstack([Z1, Z2])" in src["step15-concat"]
    assert "Z = concat @ W_O" in src["step16-output"] and "for W_Q, W_K, W_V in heads:" in src["whole"]
    nb = nbw.build(worked.solve(worked.load(ROOT / "problems" / "causal-mask.toml")))
    src = {c.id: c.source for c in nb.cells}
    assert "np.where(mask, -np.inf" in src["step04-scores"] and "mask = np.triu" in src["weights"]
    assert "-np.inf" in src["step04-scores-check"]     # the key's masked entries are −∞, as data


def _printed(cell) -> list[list[float]]:
    """The matrix a cell printed (the last `[[...]]` block of its output), as numbers."""
    out = text_of(cell)
    block = out[out.index("[["):out.rindex("]]") + 2]
    return [[float(x) for x in re.findall(r"-?\d+\.?\d*(?:e-?\d+)?", row)] for row in block.split("\n")]


def test_part10_prints_the_pages_tables(part10_run):
    """For Part 10 (default_rng(16)) every printed table equals the page's, to its 2 places."""
    import numpy as np

    cells = {c.id: c for c in part10_run.cells}
    printed = {"X": "inputs", "W_Q": "weights", "Q": "step01-Q", "K": "step02-K", "V": "step03-V",
               "scores": "step04-scores", "weights": "step06-weights", "Z": "step07-Z"}
    page = dict(PAGE, X=PAGE_X, W_Q=PAGE_WQ)
    for name, cid in printed.items():
        got = _printed(cells[cid]) if name != "weights" else _printed_a(cells[cid])
        np.testing.assert_allclose(got, page[name], atol=1e-9, err_msg=name)
    assert "row sums: [1. 1. 1. 1.]" in text_of(cells["step06-weights"])
    assert text_of(cells["inputs"]).startswith("X shape: (4, 3)\n")
    np.testing.assert_allclose(_printed(cells["whole"]), PAGE["Z"], atol=1e-9)


def _printed_a(cell):
    out = text_of(cell).split("row sums:")[0]
    block = out[out.index("[["):out.rindex("]]") + 2]
    return [[float(x) for x in re.findall(r"-?\d+\.?\d*", row)] for row in block.split("\n")]


def _table(cell) -> list[list[str]]:
    """The table a cell printed with `show` (its last `[[…]]` block), as the strings printed."""
    out = text_of(cell)
    block = out[out.rindex("[[", 0, out.rindex("]]")):out.rindex("]]") + 2]
    return [row.strip(" []").split() for row in block.split("\n")]


def _keys_table(m, places: int) -> list[list[str]]:
    """The key's table: each entry as the key rounds it (numfmt.round_decimal, half away from zero), exact."""
    from worked.model import Mat
    from worked.numfmt import round_decimal

    if isinstance(m, Mat):
        return [["-inf" if m.is_neg_inf(i, j) else str(round_decimal(m.exact[i][j], m.num[i][j], places))
                 for j in range(m.shape[1])] for i in range(m.shape[0])]
    return [[str(round_decimal(x, None, places)) for x in row] for row in m]


def _printed_tables(sol, nb):
    """(cell id, printed table, the key's table) for every cell that prints a table."""
    p, mats = sol.problem, sol.matrices()
    # the one-block cell shows its last step's matrix: the output Z (a Transformer block's: its last matrix, with a
    # training step the loss after it)
    coded = nbw.coded_steps(sol)
    want = {"inputs": p.X, "weights": p.heads[0].W_Q, "whole": mats[coded[-1].result]}
    if p.cross:
        want["inputs-enc"] = p.X_enc
    for k, st in enumerate(sol.steps, 1):
        if st in coded:
            want[f"step{k:02d}-{st.id}" + (f"-head{st.head}" if st.head is not None else "")] = mats[st.result]
    printing = [c for c in nb.cells if c.cell_type == "code" and "[[" in text_of(c)]
    assert {c.id for c in printing} == set(want), "a printed table the test does not know, or one not printed"
    return [(c.id, _table(c), _keys_table(want[c.id], p.decimals)) for c in printing]


@pytest.mark.parametrize("path", [None] + PROBLEMS, ids=lambda p: "builtin" if p is None else p.stem)
def test_every_printed_table_is_the_keys(path, kernel):
    """Every table the executed notebook prints (X, W_Q, each step's result, the one block's Z) is the key's
    table at `decimals` places, digit for digit: halves rounded away from zero as the key does, not to even."""
    from decimal import Decimal

    sol = worked.solve(worked.load(path))
    nb = run(nbw.build(sol), kernel)
    for cid, got, want in _printed_tables(sol, nb):
        assert [[x if x == "-inf" else Decimal(x) for x in r] for r in got] == \
               [[x if x == "-inf" else Decimal(x) for x in r] for r in want], cid
        # and printed at the key's places: 1.10, never 1.1 or 1.100
        places = sol.problem.decimals
        assert all(x == "-inf" or len(x.partition(".")[2]) == places for r in got for x in r), (cid, got)


def test_decimal_inputs_q_drink_1_is_the_keys_half_up(kernel):
    """Q[drink, 1] = 1·1 + 0.5·0 + 0.5·0.25 = 1.125 exactly: the key shows 1.13, and so does the notebook
    (NumPy's printing would give the even 1.12)."""
    sol = worked.solve(worked.load(ROOT / "problems" / "decimal-inputs.toml"))
    assert str(sol["Q"][1, 0]) == "9/8"
    nb = run(nbw.build(sol), kernel)
    q = _table(next(c for c in nb.cells if c.id == "step01-Q"))
    assert q[1][0] == "1.13"


def test_show_rounds_halves_away_from_zero(kernel):
    """The notebook's `show`, on floats: an exact binary half (1.125, −1.125), a decimal half that binary
    floats cannot hold (0.145 is 0.14499999999999999…), a half computed with float error (0.1 + 0.015), and
    a small negative that must not print as −0.00; −∞ prints as -inf."""
    sol = worked.solve(worked.load(ROOT / "problems" / "decimal-inputs.toml"))
    nb = nbformat.v4.new_notebook(cells=[c for c in nbw.build(sol).cells if c.id == "import"])
    nb.cells.append(nbformat.v4.new_code_cell(
        "show(np.array([[1.125, -1.125, 0.145], [0.1 + 0.015, -0.001, -np.inf], [2.675, 1.005, 0.0]]))", id="t"))
    got = _table(run(nb, kernel).cells[-1])
    assert got == [["1.13", "-1.13", "0.15"], ["0.12", "0.00", "-inf"], ["2.68", "1.01", "0.00"]]


def test_code_and_markdown_use_the_keys_names(part10):
    """n, d_model and d_k as the key writes them, never D1/D2 or N."""
    nb = nbw.build(part10)
    src = {c.id: c.source for c in nb.cells}
    assert "n, d_model, d_k = 4, 3, 5" in src["inputs"] and "n, d_model, d_k = 4, 3, 5" in src["whole"]
    assert "np.sqrt(d_k)" in src["step05-scaled"] and "\\sqrt{d_k}" in src["whole-md"]
    everything = "\n".join(c.source for c in nb.cells)
    assert not re.search(r"\b(D1|D2|D_1|D_2|N)\b", everything)


def test_an_edited_step_fails_its_check_by_name(part10, kernel):
    """A student who changes a step's code sees that step's check fail, named, and the steps before it pass."""
    nb = nbw.build(part10)
    cell = next(c for c in nb.cells if c.id == "step04-scores")
    cell.source = cell.source.replace("Q @ K.T", "K @ Q.T")
    with pytest.raises(CellExecutionError) as exc:
        run(nb, kernel)
    msg = str(exc.value)
    assert "Step 4 (Scores: scores = Q·Kᵀ) does not match the worked key" in msg
    assert exc.value.ename == "AssertionError"


def test_answers_hidden_has_no_solution_code(part10, kernel):
    """The exercise keeps every check but no step's code (not even the one-block cell); put the answers back
    into its empty cells and it runs green."""
    full = nbw.build(part10)
    for path in [None, ROOT / "problems" / "two-heads.toml", ROOT / "problems" / "causal-mask.toml"]:
        sol = part10 if path is None else worked.solve(worked.load(path))
        ex, full_nb = nbw.build(sol, answers_hidden=True), nbw.build(sol)
        code = "\n".join(c.source for c in ex.cells if c.cell_type == "code")
        for bit in ("@", ".T", "np.exp", "softmax(", "np.sqrt", "np.hstack", "np.where", "/ "):
            assert bit not in code, bit
        blanks = [c for c in ex.cells if c.source.startswith(nbw.PLACEHOLDER)]
        assert len(blanks) == len(nbw.coded_steps(sol)) + 1
        assert [c.source for c in check_cells(ex)] == [c.source for c in check_cells(full_nb)]
        nbformat.validate(ex)
    ex = nbw.build(part10, answers_hidden=True)
    answers = {c.id: c.source for c in full.cells}
    for c in ex.cells:
        if c.source.startswith(nbw.PLACEHOLDER):
            c.source = answers[c.id]
    done = run(ex, kernel)
    assert all("matches the key" in text_of(c) for c in check_cells(done))


def test_answers_hidden_check_fails_until_written(part10, kernel):
    """Run as handed out, the first check stops on the student's first empty cell."""
    with pytest.raises(CellExecutionError) as exc:
        run(nbw.build(part10, answers_hidden=True), kernel)
    assert exc.value.ename == "NameError" and "'Q'" in exc.value.evalue


def test_validates_and_same_bytes(part10):
    """nbformat's schema accepts it, cell ids are fixed, and the same problem gives the same bytes."""
    a, b = nbw.dumps(nbw.build(part10)), nbw.dumps(nbw.build(worked.solve(part10_problem())))
    assert a == b
    nb = nbformat.reads(a, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4 and nb.nbformat_minor >= 5
    ids = [c.id for c in nb.cells]
    assert len(set(ids)) == len(ids) and "step07-Z-check" in ids


def test_markdown_is_the_keys_words(part10):
    """Each step's markdown has the key's title and explanation (with math for W_Q, d_k), and the shapes."""
    nb = nbw.build(part10)
    md = {c.id: c.source for c in nb.cells if c.cell_type == "markdown"}
    st = part10.steps[0]
    assert md["step01-Q-md"].startswith("## Step 1: Queries: $Q = X \\cdot W_{Q}$")
    assert "the queries (what each token is looking for)" in md["step01-Q-md"]
    assert "Shapes: $(4 \\times 3) \\cdot (3 \\times 5) \\to 4 \\times 5$" in md["step01-Q-md"]
    assert st.id == "Q"
    assert "np.set_printoptions(precision=2, suppress=True)" in next(c.source for c in nb.cells if c.id == "import")


def test_markdown_escapes_the_problems_text():
    """A title or token is text, never Markdown or math."""
    p = worked.Problem([[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]], [[1, 0], [0, 1]],
                       tokens=["*a*", "$b$"], title="<b>#1</b> [x](y)")
    nb = nbw.build(worked.solve(p))
    intro = nb.cells[0].source
    assert intro.startswith("# &lt;b\\>\\#1&lt;/b\\> \\[x\\](y)\n")
    assert "\\*a\\*, \\$b\\$" in intro
    assert "words = ['*a*', '$b$']" in next(c.source for c in nb.cells if c.id == "inputs")


# ---------------------------------------------------------------- the command line

def test_cli_writes_executes_and_repeats_bytes(cli, tmp_path):
    """`worked notebook --execute -o F` writes a run notebook; twice gives the same bytes."""
    a, b = tmp_path / "a.ipynb", tmp_path / "b.ipynb"
    for out in (a, b):
        code, _, err = cli("notebook", ROOT / "problems" / "causal-mask.toml", "--execute", "-o", out)
        assert code == 0, err
    assert a.read_bytes() == b.read_bytes()
    nb = nbformat.read(a, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.language_info == {"name": "python"}       # not the kernel's version: same on every machine
    assert all(c.execution_count for c in nb.cells if c.cell_type == "code")
    assert "matches the key" in text_of(nb.cells[-1])
    code, out, _ = cli("notebook", "--answers-hidden")
    assert code == 0 and nbw.PLACEHOLDER in out and nbformat.reads(out, as_version=4).cells


@pytest.mark.parametrize("args, words", [
    (["nope.toml"], "nope.toml: no such file"),
    (["problems/quiz-1.toml"], "family: unknown key"),
    (["-o", "nb.txt"], "nb.txt: expected a file name ending in .ipynb"),
    (["-o", "missing/dir/nb.ipynb"], "no such folder"),
    (["--execute", "--answers-hidden", "-o", "nb.ipynb"], "--execute with --answers-hidden"),
    (["-o", "dir.ipynb"], "dir.ipynb: is a folder"),
])
def test_cli_bad_input_is_one_line_and_writes_nothing(cli, tmp_path, args, words):
    args = [str(ROOT / a) if a.startswith("problems/") else a for a in args]
    if "dir.ipynb" in args:
        (tmp_path / "dir.ipynb").mkdir()
    code, out, err = cli("notebook", *args, cwd=tmp_path)
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.strip().count("\n") == 0 and words in err, err
    assert [p.name for p in tmp_path.rglob("*")] == (["dir.ipynb"] if "dir.ipynb" in args else [])


def test_execute_without_nbclient_is_one_line(cli, tmp_path):
    """Without the notebook extra, --execute says what to install, before any work, and writes nothing."""
    import os
    import subprocess

    shadow = tmp_path / "shadow"        # a Python path on which nbclient cannot be imported
    shadow.mkdir()
    (shadow / "nbclient.py").write_text('raise ImportError("No module named nbclient")\n')
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shadow), str(ROOT)]))
    proc = subprocess.run([sys.executable, "-m", "worked", "notebook", "--execute", "-o", "x.ipynb"], cwd=work,
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == "error: --execute needs nbclient: pip install 'worked[notebook]'\n"
    assert list(work.iterdir()) == []


# ---------------------------------------------------------------- quizzes: one exercise notebook per variant

def test_quiz_ipynb_writes_one_exercise_per_variant(tmp_path, kernel):
    """`worked quiz --format ipynb`: variants/<code>/exercise.ipynb, an exercise for that variant's problem,
    with its code under the title, whose graded matrices are checked for their shape only;
    exercise-key.ipynb, the teacher's copy, keeps every check. Filled in with the answers, both pass every
    check; same bytes again."""
    from worked.problem import Problem
    from worked.quiz import load_spec, run as quiz

    spec = ROOT / "problems" / "quiz-2-causal.toml"
    graded = {q.matrix for q in load_spec(spec).questions}
    out, entries = quiz(spec, count=2, outdir=tmp_path / "q", formats="ipynb", jobs=1, quiet=True)
    assert len(entries) == 2
    for e in entries:
        path = out / "variants" / e["variant"] / "exercise.ipynb"
        nb = nbformat.read(path, as_version=4)
        key_nb = nbformat.read(path.with_name("exercise-key.ipynb"), as_version=4)
        nbformat.validate(nb)
        assert f"**Variant:** {e['variant']}" in nb.cells[0].source
        assert not any("@" in c.source for c in nb.cells if c.cell_type == "code")
        sol = worked.solve(Problem.from_dict(e["problem"]))
        assert [c.source for c in check_cells(key_nb)] == [c.source for c in check_cells(nbw.build(sol))]
        assert [c.source for c in check_cells(nb)] == [c.source for c in check_cells(nbw.build(sol, graded=graded))]
        shape_only = [c for c in check_cells(nb) if "_key" not in c.source]
        assert shape_only and all("np.shape(" in c.source for c in shape_only)
    answers = {c.id: c.source for c in nbw.build(sol).cells}
    for book in (nb, key_nb):
        for c in book.cells:
            if c.source.startswith(nbw.PLACEHOLDER):
                c.source = answers[c.id]
    assert all("matches the key" in text_of(c) for c in check_cells(run(key_nb, kernel)))
    assert all("matches the key" in text_of(c) or "has the right shape" in text_of(c)
               for c in check_cells(run(nb, kernel)))
    again, _ = quiz(spec, count=2, outdir=tmp_path / "q2", formats="ipynb", jobs=1, quiet=True)
    assert (again / "variants" / e["variant"] / "exercise.ipynb").read_bytes() == path.read_bytes()


STUDENT_FILES = ("exercise.ipynb", "worksheet.html", "worksheet.tex")   # what a student is given


def _number_in(text: str, s: str) -> bool:
    return re.search(r"(?<![\d.])" + re.escape(s) + r"(?![\d])", text) is not None


def test_quiz_student_files_hold_no_graded_answer(tmp_path):
    """Issue 25: no expected value of a graded question in a file for students. For every asked cell of every
    variant of quiz-1 (ipynb, html, tex), neither its value at the places shown nor its leading digits as the
    key writes them appear in the variant's worksheet or exercise notebook; the teacher's exercise-key.ipynb
    has them."""
    from decimal import ROUND_HALF_UP, Decimal

    from worked.quiz import run as quiz

    out, entries = quiz(ROOT / "problems" / "quiz-1.toml", count=3, outdir=tmp_path / "q", formats="ipynb,html,tex",
                        jobs=1, quiet=True)
    for e in entries:
        folder = out / "variants" / e["variant"]
        places = worked.problem.Problem.from_dict(e["problem"]).decimals
        student = {f: (folder / f).read_text(encoding="utf-8") for f in STUDENT_FILES}
        teacher = (folder / "exercise-key.ipynb").read_text(encoding="utf-8")
        found_in_key = 0
        for q in e["questions"]:
            for c in q["entries"]:
                if c["expected"] is None or abs(c["expected"]) < 0.5 * 10 ** -places:
                    continue   # (a 0 at the places shown is in every notebook's "never -0.00")
                shown = f"{Decimal(repr(c['expected'])).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP):f}"
                forms = [shown] + ([repr(c["expected"])[:10]] if len(repr(c["expected"]).lstrip("-")) > 10 else [])
                for name, text in student.items():
                    for form in forms:
                        assert not _number_in(text, form), (e["variant"], name, c["ask"], form)
                found_in_key += any(form in teacher for form in forms[1:])
        assert found_in_key   # the teacher's copy checks the values
