"""Jupyter/Colab: the problem walked the way Part 10 does it, in NumPy, each step checked against the key.

:func:`build` turns a :class:`~worked.model.Solution` into an nbformat v4 notebook (a ``NotebookNode``):

* an import cell with ``show``, which prints a table as the key does: each entry rounded to the problem's
  ``decimals``, halves away from zero (NumPy's own printing rounds halves to even: 1.125 would print 1.12
  where the key shows 1.13);
* X and the weight matrices as NumPy arrays of the problem's numbers (a decimal entry is written as
  its decimal, which NumPy reads back as the very float it came from);
* per solution step a markdown cell in the key's words (title, what and why, the shapes, the notes),
  the step's NumPy code, and a check cell: ``np.testing.assert_allclose`` of the result against the
  key's values, written into the notebook as data, with a message naming the step;
* "the whole thing in one block", as on the page, and its check.

``answers_hidden=True`` leaves every step cell (and the one-block cell) for the student, with
``# your code here``, and keeps the checks: an exercise notebook. Cell ids are derived from the step,
so the same problem gives the same bytes (:func:`dumps`). :func:`execute` runs a notebook with nbclient
(the optional ``notebook`` extra) and stores its outputs.
"""
from __future__ import annotations

import copy
import os
import re
from fractions import Fraction
from pathlib import Path

import nbformat
from nbformat import v4

from .. import eq, i18n, printers, stages
from ..i18n import Msg, current
from ..i18n import tr as _
from ..steps.code import docstring, print_shape, python_repr, quoted
from ..errors import WorkedError
from ..model import Mat, Solution

PLACEHOLDER = "# your code here"      # in English; placeholder() gives it in the notebook's language


def placeholder() -> str:
    """The first line of a student's empty cell, in the current language (:data:`PLACEHOLDER` in English)."""
    return "# " + _("your code here")

RTOL = ATOL = 1e-9      # the key's values are exact to 17 digits; float arithmetic stays far inside this

KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
LANGUAGE_INFO = {"name": "python"}

_MD_SPECIAL = set("\\`*_[]<>#|$~")


# ---------------------------------------------------------------- text

def _md(text: str) -> str:
    """Plain text as Markdown: every character that Markdown (or MathJax's $) would read is escaped, and a
    line break is a space (a title must not start a heading of its own)."""
    text = " ".join(text.splitlines())
    return "".join("&lt;" if c == "<" else "\\" + c if c in _MD_SPECIAL else c for c in text)


def _rich_md(prose) -> str:
    """Prose (a :class:`worked.eq.Prose`, or plain text) as Markdown: the text escaped, the math inline
    ``$…$`` from the LaTeX printer (Jupyter's MathJax sets it)."""
    from .. import i18n

    return "".join(_md(x) if isinstance(x, str) else f"${printers.latex(x)}$"
                   for x in i18n.localize(eq.prose(prose)).parts)


# ---------------------------------------------------------------- numbers as code

def _lit(f: Fraction) -> str:
    """An exact entry as a Python literal: 2, -0.75, 0.57161…, or 1/3 when it has no finite decimal."""
    if f.denominator == 1:
        return str(f.numerator)
    d = f.denominator
    for p in (2, 5):
        while d % p == 0:
            d //= p
    if d == 1:
        from decimal import Decimal, localcontext

        with localcontext() as ctx:
            ctx.prec = 60
            return format(Decimal(f.numerator) / Decimal(f.denominator), "f")
    return f"{f.numerator}/{f.denominator}"


def _array(rows, indent: int) -> str:
    pad = " " * indent
    lines = ["[" + ", ".join(rows_i) + "]" for rows_i in rows]
    return "np.array([" + (",\n" + pad + "          ").join(lines) + "])"


def _input(name: str, m) -> str:
    head = f"{name} = "
    return head + _array([[_lit(x) for x in r] for r in m], len(head))


def _key(name: str, m: Mat) -> str:
    vals = [[("-np.inf" if v == float("-inf") else repr(float(v))) for v in row] for row in m.to_numpy()]
    head = f"{name} = "
    return head + _array(vals, len(head))


def _scale_code(p) -> str | None:
    if p.scale == "sqrt":
        return "np.sqrt(d_k)"
    if p.scale == "none":
        return None
    s = _lit(p.scale)
    return f"({s})" if "/" in s else s


def _show_code(places: int) -> str:
    """The notebook's ``show``: a table printed with the key's rounding (worked.numfmt.round_decimal: half away
    from zero). A float is first read to 12 significant digits, which drops the last bits of float error, so
    an exact half computed as 1.1249999999999998 still prints 1.13, as the key's exact 9/8 does."""
    return (
        "from decimal import Decimal, ROUND_HALF_UP\n\n"
        f"def show(M, places={places}):\n"
        + docstring(_("Print a table as the key does: each entry rounded to `places` decimals, halves away from zero."))
        + "    def entry(x):\n"
        "        if np.isinf(x):\n"
        "            return \"-inf\" if x < 0 else \"inf\"\n"
        "        d = Decimal(f\"{x:.12g}\").quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)\n"
        "        return f\"{d.copy_abs() if d == 0 else d:f}\"    # " + _("never -0.00") + "\n"
        "    rows = [[entry(x) for x in row] for row in np.atleast_2d(M)]\n"
        "    w = max(len(s) for row in rows for s in row)\n"
        "    print(\"[\" + \"\\n \".join(\"[\" + \"  \".join(s.rjust(w) for s in row) + \"]\" for row in rows) + \"]\")")


# ---------------------------------------------------------------- the cells

def _sizes() -> str:
    """The comment on the line that names the sizes n, d_model, d_k."""
    return _("words, size of each word's row of X, size of a query or key")


def _student_line(st: dict) -> str:
    """``**Name:** Ada · **Id:** 7 · **Variant:** K3Q9`` in the current language."""
    words = {"name": _("Name"), "id": _("Id"), "variant": _("Variant")}
    return " · ".join(_fact(words[k], _md(st[k])) for k in ("name", "id", "variant") if k in st)


def _fact(label: str, value: str) -> str:
    """``**Tokens:** cats, chase, mice``: a label in bold and its value, as the language punctuates it (French sets a
    no-break space before the colon)."""
    return _("**{label}:** {value}", label=label, value=value)


class _Builder:
    def __init__(self, sol: Solution, answers_hidden: bool, student: dict | None = None,
                 graded: frozenset = frozenset(), first: int = 0):
        self.first = first          # the steps before (a chain's earlier blocks'): numbered on from them
        self.graded = frozenset(graded)
        self.student = {k: str(v) for k, v in (student or {}).items() if k in ("name", "id", "variant") and v not in (None, "")}
        self.sol = sol
        self.p = sol.problem
        self.hidden = answers_hidden
        self.cells: list = []
        self.defined: set = set()      # what a step's code defined already (the softmax)
        self.stages = _coded(self.p)

    def md(self, cid: str, text: str):
        self.cells.append(v4.new_markdown_cell(text, id=cid))

    def code(self, cid: str, source: str):
        self.cells.append(v4.new_code_cell(source, id=cid))

    def step_code(self, cid: str, source: str, todo: str):
        """A step's code, or in an exercise notebook the student's empty cell: the placeholder and *todo*, what the
        cell computes (a comment, in the notebook's language: :func:`_compute`)."""
        if self.hidden:
            source = f"{placeholder()}\n# {todo}"
        self.code(cid, source)

    def check(self, cid: str, var: str, m: Mat, label: str, matrix: str = ""):
        if matrix in self.graded:   # a graded question's matrix: its values stay out of the student's file
            shape = tuple(m.shape)
            # the message says what shape it got where the translation puts it (the shape is known only when it runs)
            before, _got, after = _("{label} should have shape {shape}, got {got}", label=label, shape=repr(shape),
                                    got="\0").partition("\0")
            src = ("# " + _("graded in the quiz: this check looks at the shape only (your teacher's copy checks the "
                            "values)") + "\n"
                   f"assert np.shape({var}) == {shape!r}, {python_repr(before)} + str(np.shape({var}))"
                   + (f" + {python_repr(after)}" if after else "") + "\n"
                   + "print(" + python_repr("✓ " + _("{label} has the right shape (its values are graded)", label=label)) + ")")
            self.code(cid, src)
            return
        key = f"{var}_key"
        src = ("# " + _("the worked key: its exact values, to float precision") + "\n" + _key(key, m) + "\n"
               f"np.testing.assert_allclose({var}, {key}, rtol={RTOL}, atol={ATOL},\n"
               "                           err_msg=" + python_repr(_("{label} does not match the worked key", label=label)) + ")\n"
               "print(" + python_repr("✓ " + _("{label} matches the key", label=label)) + ")")
        self.code(cid, src)

    # -- the page's opening
    def intro(self):
        from ..render.view import problem_page

        p = self.p
        page = problem_page(p, self.sol.display)
        title = p.title or _("Self-attention")
        facts = "\n".join("* " + _fact(_md(a), _rich_md(b)) for a, b in page.facts_rich)
        text = [f"# {_md(title)}", ""]
        if self.student:
            text += [_student_line(self.student), ""]
        text += [
                (_("A Transformer block in code with NumPy: we run one step at a time, print the result, and check it "
                   "against the worked answer key.") if stages.of(p).attends else
                 _("Self-attention in code with NumPy: we run one step at a time, print the result, and check it "
                   "against the worked answer key.")), "", facts, "",
                _("You don't need anything installed. Open this notebook in Google Colab (free, runs in your browser), "
                  "or in any Python where numpy is available, and you'll get exactly the same numbers as the key.")]
        if self.hidden:
            text += ["", _("**This is an exercise.** Write the code for each step in the cell marked {placeholder}; the "
                           "cell after it checks your result against the key and says which step does not match.",
                           placeholder=f"`{placeholder()}`")]
        self.md("intro", "\n".join(text))
        self.md("import-md", _("## Step 0: import NumPy") + "\n\n" + _(
                "`show` prints a table the way the key does: every number rounded to {places} decimals, and a number "
                "exactly halfway rounded up (away from zero), so {example} shows as {up}. NumPy's own printing would "
                "round it to the even {even}.", places=p.decimals, example=current().number("1.125"),
                up=current().number("1.13"), even=current().number("1.12")))
        self.code("import", "import numpy as np\n"
                  f"np.set_printoptions(precision={p.decimals}, suppress=True)   "
                  "# " + _("other numbers with {places} decimals", places=p.decimals) + "\n\n" + _show_code(p.decimals))

    def inputs(self):
        p = self.p
        words = "words = [" + ", ".join(repr(t) for t in p.tokens) + "]"
        self.md("inputs-md", _("## The input matrix X") + "\n\n" + _(
                "A table with one row per word: these are the plain, “starting” descriptions of each word. "
                "They don't know anything about the other words yet."))
        self.code("inputs", f"{words}\nn, d_model, d_k = {p.n}, {p.d_model}, {p.d_k}   # {_sizes()}\n"
                  + _input("X", p.X) + "\n" + print_shape("X") + "\nshow(X)")
        if p.cross:
            self.md("inputs-enc-md", _("## The encoder side X_enc") + "\n\n" + _(
                    "Cross-attention: the words above are the decoder's, and ask the questions (the queries come from "
                    "X). The encoder's words answer them: the keys and values come from X_enc, one row per encoder word."))
            self.code("inputs-enc", "words_enc = [" + ", ".join(repr(t) for t in p.tokens_enc) + "]\n"
                      f"n_enc = {p.n_kv}   # " + _("encoder words") + "\n" + _input("X_enc", p.X_enc)
                      + "\n" + print_shape("X_enc") + "\nshow(X_enc)")
        text = (_("## The weight matrices") + "\n\n" + _(
                "W_Q, W_K and W_V create the queries, keys and values. In a real Transformer they are learned during "
                "training; here they are the problem's numbers. Each has one row per column of X: X ({n}×{d}) can only "
                "be multiplied by a {d} × something table.", n=p.n, d=p.d_model))
        src = []
        heads = [(f"{h}" if p.multihead else "", head) for h, head in enumerate(p.heads, 1)]
        for suf, head in heads:
            for nm, w in (("W_Q", head.W_Q), ("W_K", head.W_K), ("W_V", head.W_V)):
                src.append(_input(nm + suf, w))
        if p.multihead:
            text += _(" There are {count} heads, each with its own W_Q, W_K, W_V (W_Q1 is head 1's); W_O projects their "
                      "outputs, side by side, to the result.", count=len(p.heads))
            src.append(_input("W_O", p.W_O))
        first = "W_Q" + heads[0][0]
        src.append(print_shape(first) + f"\nshow({first})")
        if p.mask == "causal":
            text += "\n\n" + _("This is decoder self-attention: a word may look only at itself and the words before it. "
                               "`mask` is True where a word would look ahead; those scores become −∞ before the softmax, "
                               "so their weight is 0.")
            src.append("mask = np.triu(np.ones((n, n), dtype=bool), k=1)   # "
                       + _("True above the diagonal: a later word"))
        self.md("weights-md", _md_keep(text))
        self.code("weights", "\n".join(src))
        if getattr(p, "block", None) is not None:
            self.block_inputs()

    def block_inputs(self):
        """A Transformer block's own inputs: the feed-forward's weights and biases, the layer norms' γ, β and ε,
        the output layer, the vocabulary and the targets (each position's next word, as its column)."""
        b = self.p.block
        src = []
        for name in ("W_1", "b_1", "W_2", "b_2", "gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_f", "beta_f", "W_out"):
            v = getattr(b, name)
            if v is None:
                continue
            src.append(_input(name, v) if isinstance(v[0], (list, tuple)) else f"{name} = np.array([{', '.join(_lit(x) for x in v)}])")
        src.append(f"eps = {_lit(b.eps)}   # " + _("layer norm's ε, inside the square root"))
        if b.vocab:
            src.append("vocab = [" + ", ".join(repr(t) for t in b.vocab) + "]")
        if b.targets is not None:
            src.append("targets = np.array([" + ", ".join(str(t) for t in b.targets) + "])   # "
                       + _("each position's next word: {words}", words=", ".join(b.vocab[t] for t in b.targets)))
        self.md("block-md", "## " + _("The rest of the block") + "\n\n" + (
                _("The feed-forward's two layers (W_1, b_1, then W_2, b_2), the layer norms' scales γ and shifts β and "
                  "their ε, the output layer W_out, the vocabulary and each position's target word.") if b.vocab else
                _("The feed-forward's two layers (W_1, b_1, then W_2, b_2), the layer norms' scales γ and shifts β and "
                  "their ε.")))
        self.code("block", "\n".join(src))
        self.block_src = src

    def one_block_of_steps(self):
        """A Transformer block in one cell: the inputs, then every step's code (without its printing), in order,
        and the check of the last matrix."""
        p = self.p
        src = ["import numpy as np", _show_code(p.decimals), "", f"n, d_model, d_k = {p.n}, {p.d_model}, {p.d_k}",
               _input("X", p.X)]
        for suf, head in [(f"{h}" if p.multihead else "", head) for h, head in enumerate(p.heads, 1)]:
            src += [_input(nm + suf, w) for nm, w in (("W_Q", head.W_Q), ("W_K", head.W_K), ("W_V", head.W_V))]
        if p.multihead:
            src.append(_input("W_O", p.W_O))
        if p.mask == "causal":
            src.append("mask = np.triu(np.ones((n, n), dtype=bool), k=1)   # " + _("later words are hidden"))
        src += self.block_src + [""]
        self.defined = set()
        last = None
        for st in self.sol.steps:
            if st.id in self.stages:
                var, code = self.numpy(st, str(st.head) if st.head is not None else "")
                src += [ln for ln in code.splitlines() if not ln.startswith(("print(", "show("))]
                last = st
        var = self.numpy(last, "")[0]
        src += ["", f"show({var})"]
        self.md("whole-md", "## " + _("The whole block in one cell") + "\n\n" + _(
                "Everything together, from X to the last step: paste it into Colab and run it.")
                + ("\n\n" + _("Write it yourself, in one cell.") if self.hidden else ""))
        shape = self.sol.matrices()[last.result].shape
        self.step_code("whole", "\n".join(src), _("compute {name}, from X and the weights, in one block, shape {shape}",
                                                  name=var, shape=shape))
        self.check("whole-check", var, self.sol.matrices()[last.result], _("The whole thing in one block"), last.result)

    # -- one cell per step
    def step(self, k: int, st):
        mats = self.sol.matrices()
        suf = str(st.head) if st.head is not None else ""
        base = f"step{k:02d}-{st.id}" + (f"-head{suf}" if suf else "")
        k += self.first
        label = _("Step {n} ({title})", n=k, title=printers.text(st.title_prose))    # what the check cell prints
        md = ["## " + _("Step {n}: {title}", n=k, title=_rich_md(st.title_prose)), "", _rich_md(st.why_prose)]
        if st.shape_eq is not None:
            md += ["", _("Shapes: {shapes}", shapes=f"${printers.latex(st.shape_eq)}$")]
        for note in st.notes_prose:
            md += ["", "> " + _rich_md(note)]
        self.md(base + "-md", "\n".join(md))
        m = mats[st.result]
        var, src = self.numpy(st, suf)
        self.step_code(base, src, _("compute {name}, shape {shape}", name=var, shape=m.shape) if m.shape else
                       _("compute {name}", name=var))
        self.check(base + "-check", var, m, label, st.result)

    def numpy(self, st, h: str) -> tuple[str, str]:
        """The variable a step defines and its NumPy code, in the page's style: the code its stage declares
        (:attr:`worked.lines.Shown.numpy`)."""
        stage = self.stages[st.id]
        return stage.step.numpy(self, stage, h)

    def scale_code(self) -> str | None:
        """The divisor of the scores as NumPy code (None: not divided)."""
        return _scale_code(self.p)

    # -- the whole thing in one block
    def one_block(self):
        p = self.p
        div = _scale_code(p)
        src = ["import numpy as np", _show_code(p.decimals), "",
               f"n, d_model, d_k = {p.n}, {p.d_model}, {p.d_k}", _input("X  ", p.X)]
        heads = [(f"{h}" if p.multihead else "", head) for h, head in enumerate(p.heads, 1)]
        for suf, head in heads:
            for nm, w in (("W_Q", head.W_Q), ("W_K", head.W_K), ("W_V", head.W_V)):
                src.append(_input(nm + suf, w))
        if p.multihead:
            src.append(_input("W_O", p.W_O))
        if p.mask == "causal":
            src.append("mask = np.triu(np.ones((n, n), dtype=bool), k=1)   # " + _("later words are hidden"))
        src.append("")
        if p.cross:
            src.insert(-1, _input("X_enc", p.X_enc))
        Xkv = "X_enc" if p.cross else "X"
        body = [f"Q, K, V = X @ W_Q, {Xkv} @ W_K, {Xkv} @ W_V       # "
                + (_("queries, keys, values (keys and values from the encoder side)") if p.cross else
                   _("queries, keys, values")),
                "scores = Q @ K.T" + (f" / {div}" if div else "") + "            # "
                + _("how well each query matches each key")]
        if p.mask == "causal":
            body.append("scores = np.where(mask, -np.inf, scores)   # " + _("no looking ahead"))
        body.append("A = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)   # " + _("softmax"))
        if p.multihead:
            src.append("heads = [" + ", ".join(f"(W_Q{s}, W_K{s}, W_V{s})" for s, _ in heads) + "]")
            src.append("Zs = []")
            src.append("for W_Q, W_K, W_V in heads:")
            src += ["    " + b for b in body] + ["    Zs.append(A @ V)                      # " + _("blend the values"), "",
                                                "Z = np.hstack(Zs) @ W_O                   # " + _("concat, then project")]
        else:
            src += body + ["Z = A @ V                                 # " + _("blend the values")]
        src += ["", "show(Z)                                   # " + _("{n} rich vectors, {m} numbers each", n=p.n,
                                                                         m=self.sol.output.shape[1])]
        formula = "Z = \\mathrm{softmax}\\left(\\frac{Q K^T}{" + (
            "\\sqrt{d_k}" if p.scale == "sqrt" else "1" if p.scale == "none" else div) + "}\\right) V"
        md = ["## " + _("The whole thing in one block"), "",
              _("Here is everything together. Paste it into Colab and run it. It is exactly the formula from the key:"),
              "", f"$${formula}$$"]
        if p.mask == "causal":
            md += ["", _("with the mask: scores of later words are −∞ before the softmax.")]
        if p.multihead:
            md += ["", _("for each head, then the heads side by side, times W_O.")]
        if self.hidden:
            md += ["", _("Write it yourself: from X and the weight matrices to Z, in one cell.")]
        self.md("whole-md", _md_keep("\n".join(md)))
        out = self.sol.output.name      # the layer's output (Z)
        self.step_code("whole", "\n".join(src), _("compute {name}, from X and the weight matrices, in one block, shape "
                                                  "{shape}", name=out, shape=self.sol.output.shape))
        self.check("whole-check", out, self.sol.output, _("The whole thing in one block"), out)


def _md_keep(text: str) -> str:
    """Our own Markdown (with `code`), with the matrix names as math."""
    import re

    return re.sub(r"\bW_([QKVO])(\d?)\b", lambda m: f"$W_{m.group(1)}$" + m.group(2), text)


# a [train] problem's steps (worked.solver): not in the notebook yet, which walks the forward pass (their stages
# declare no NumPy code)
TRAINING_STEPS = frozenset([s.step.id or s.id for a in stages.ARCHS.values() for s in a.train + a.update]
                           + [c.id for a in stages.ARCHS.values() for c in a.checks])


def coded_steps(sol) -> list:
    """The steps of *sol* the notebook writes code for (its forward pass: a [train] problem's training step is not
    in the notebook yet), in order."""
    coded = _coded(sol.problem)
    return [st for st in sol.steps if st.id in coded]


def _coded(problem) -> dict:
    """The stages of *problem*'s architecture that declare NumPy code, by the id of their step."""
    a = stages.of(problem)
    return {s.step.id or s.id: s for part in (a.before, a.forward, a.combine, a.after, a.train, a.update) for s in part
            if s.step is not None and s.step.numpy is not None}


def build(sol: Solution, *, answers_hidden: bool = False, student: dict | None = None,
          graded=frozenset(), first: int = 0) -> "nbformat.NotebookNode":
    """The notebook (nbformat v4) for *sol*: the answer notebook, or with *answers_hidden* the exercise.
    *student* (``{"name", "id", "variant"}``, any of them) is named under the title, as on the sheets.
    *graded* names matrices (keys of ``Solution.matrices()``, e.g. ``"weights"``, ``"head1.scores"``) whose
    check cells test the shape only, without their values: a quiz's graded questions, in a student's file. *first*:
    the steps before these (a chain's earlier blocks'), so that the steps are numbered on from them."""
    if isinstance(getattr(sol, "blocks", None), list):      # [[blocks]]: a chain (worked.chain.ChainSolution)
        return build_chain(sol, answers_hidden=answers_hidden, student=student, graded=graded)
    b = _Builder(sol, answers_hidden, student, graded, first)
    b.intro()
    b.inputs()
    for k, st in enumerate(sol.steps, 1):
        if st.id in b.stages:
            b.step(k, st)
    if stages.of(sol.problem).attends:     # a Transformer block: its steps' code in one cell
        b.one_block_of_steps()
    else:
        b.one_block()
    nb = v4.new_notebook(cells=b.cells, metadata={"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)})
    nbformat.validate(nb)
    return nb


def dumps(nb) -> str:
    """The notebook's JSON text (nbformat's own writer: sorted keys, so the same notebook gives the same bytes)."""
    return nbformat.writes(nb, version=4)


# ---------------------------------------------------------------- running and writing

PIP = "'worked[notebook]'"     # what pip installs for --execute (a command, the same in every language)


def require_execute():
    """Fail in one line, before any work, when nbclient or ipykernel is missing."""
    import importlib

    missing = []
    for m in ("nbclient", "ipykernel"):
        try:
            importlib.import_module(m)
        except ImportError:
            missing.append(m)
    if missing:
        raise WorkedError(Msg("--execute needs {a} and {b}: pip install {package}", a=missing[0], b=missing[1], package=PIP)
                          if len(missing) == 2 else Msg("--execute needs {a}: pip install {package}", a=missing[0], package=PIP))


def execute_checked(nb, **kw):
    """:func:`execute`, with a failing cell or a kernel that cannot start as a one-line :class:`WorkedError`."""
    require_execute()
    from jupyter_client.kernelspec import NoSuchKernel
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    try:
        return execute(nb, **kw)
    except CellExecutionError as exc:
        name = getattr(exc, "ename", "error")
        value = (getattr(exc, "evalue", "") or "").strip().splitlines()
        raise WorkedError(_not_run(name, value[0] if value else "")) from None
    except (NoSuchKernel, DeadKernelError, TimeoutError, RuntimeError) as exc:
        raise WorkedError(_not_run(type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "")) from None


def _not_run(error: str, detail: str) -> Msg:
    """The line for a notebook that failed: the error's name and its first line (Python's or the kernel's own
    words, as they are), as before ``"the notebook did not run: NameError: name 'x' is not defined"``."""
    line = f"{error}: {detail}".rstrip(": ")       # as it was: no empty detail, no trailing colon
    error, sep, detail = line.partition(": ")
    return (Msg("the notebook did not run: {error}: {detail}", error=error, detail=detail) if sep
            else Msg("the notebook did not run: {error}", error=error))


def execute(nb, *, km=None, timeout: float = 120, cwd: str | None = None):
    """Run every cell with nbclient and store the outputs (in place; also returned). *km* is a started
    ``jupyter_client`` KernelManager to reuse (it is left running); by default a kernel is started and
    stopped. A failing cell raises ``nbclient.exceptions.CellExecutionError`` naming it."""
    try:
        from nbclient import NotebookClient
    except ImportError:
        raise WorkedError(Msg("--execute needs {a} and {b}: pip install {package}", a="nbclient", b="ipykernel",
                              package=PIP)) from None
    meta = nbformat.from_dict(dict(nb.metadata))
    # outputs that arrive late on a busy machine are waited for, never silently dropped (nbclient's default)
    client = NotebookClient(nb, km=km, timeout=timeout, kernel_name=KERNELSPEC["name"], record_timing=False,
                            iopub_timeout=60, raise_on_iopub_timeout=True,
                            resources={"metadata": {"path": cwd or os.getcwd()}})
    if km is None:   # our own kernel: its start-up chatter (a warning about TCP) is not the user's business
        import subprocess

        client.execute(stderr=subprocess.DEVNULL)
    else:
        client.execute()
    nb.metadata = meta      # the kernel's own language_info (its Python version) would differ between machines
    _join_streams(nb)
    return nb


def _join_streams(nb):
    """One output per run of same-named stream outputs: a busy kernel may send a print's text and its newline
    as two messages, and the notebook's bytes must not depend on that timing."""
    for cell in nb.cells:
        outs = []
        for o in cell.get("outputs", []):
            if o.output_type == "stream" and outs and outs[-1].output_type == "stream" and outs[-1].name == o.name:
                outs[-1].text += o.text
            else:
                outs.append(o)
        if "outputs" in cell:
            cell.outputs = outs


def write(nb, path) -> Path:
    """Write *nb* to *path* atomically (:func:`worked.output.write_file`)."""
    from ..output import write_file

    out = Path(path)
    if out.is_dir():
        raise WorkedError(Msg("{path}: is a folder, expected a notebook file name", path=out))
    return write_file(out, dumps(nb))


# ---------------------------------------------------------------- a chain of blocks ([[blocks]])

def _carry_code(places: int) -> str:
    return ("def carry(M, places=%d):\n" % places
            + docstring(_("The next block's X: each entry of M rounded as the key shows it, halves away from zero\n"
                          "(np.round would round halves to even: 1.125 to 1.12, where the key carries on with 1.13)."))
            + "    q = Decimal(1).scaleb(-places)\n"
            "    return np.array([[float(Decimal(f\"{x:.12g}\").quantize(q, rounding=ROUND_HALF_UP)) for x in row]\n"
            "                     for row in np.atleast_2d(M)])")


def build_chain(sol, *, answers_hidden: bool = False, student: dict | None = None,
                graded=frozenset()) -> "nbformat.NotebookNode":
    """The notebook of a chain of blocks: the opening and ``show`` once (and ``carry``, the key's rounding between
    blocks), then block after block its cells as one block's notebook has them (ids ``block2-…``); from block 2
    on, X is ``carry(Z)`` of the block before, checked against the key's. *graded* names matrices as
    ``block2.weights``."""
    from ..render.view import problem_page

    c = sol.problem
    page = problem_page(c, sol.display)
    cells = []
    st = {k: str(v) for k, v in (student or {}).items() if k in ("name", "id", "variant") and v not in (None, "")}
    text = [f"# {_md(c.title or _('Attention blocks'))}", ""]
    if st:
        text += [_student_line(st), ""]
    text += [_("{count} attention blocks in a chain, in code with NumPy: each block is worked as a problem of its own, "
               "one step at a time, and checked against the worked answer key. Each block's X is the output Z of the "
               "block before, rounded to {places} places as the key shows it.", count=len(sol.blocks),
               places=c.decimals), "",
             "\n".join("* " + _fact(_md(a), _rich_md(b)) for a, b in page.facts_rich)]
    if answers_hidden:
        text += ["", _("**This is an exercise.** Write the code for each step in the cell marked {placeholder}; the "
                       "cell after it checks your result against the key.", placeholder=f"`{placeholder()}`")]
    cells.append(v4.new_markdown_cell("\n".join(text), id="intro"))
    first = 0
    for k, (b, head) in enumerate(zip(sol.blocks, sol.titles()), 1):
        if k > 1:
            first += len(sol.blocks[k - 2].steps)
        mine = frozenset(g.split(".", 1)[1] for g in graded if g.startswith(f"block{k}.")) | (
            {stages.OUTPUT} if k == len(sol.blocks) and stages.OUTPUT in graded else set())      # Z: the last block's output
        nb = build(b, answers_hidden=answers_hidden, graded=mine, first=first)
        pre = f"block{k}-"
        intro = [f"# {_md(head)}"]
        if k > 1:
            intro += ["", _md(sol.carried_text(k)) + _(" `carry` rounds it the key's way (NumPy's `np.round` would "
                                                       "round a half to even).")]
        cells.append(v4.new_markdown_cell("\n".join(intro), id=pre + "heading"))
        for cell in nb.cells:
            if cell.id == "intro" or cell.id.startswith("whole") or k > 1 and cell.id.startswith("import"):
                continue
            cell = copy.deepcopy(cell)
            if k > 1 and cell.id == "inputs-md":
                cell.source = (_("## The input matrix X of block {k}", k=k) + "\n\n" + _(
                               "Block {before}'s output Z, rounded to {places} places: the numbers block {k} starts "
                               "from, as the key carries them on.", before=k - 1, places=c.decimals, k=k))
            if k > 1 and cell.id == "inputs":
                p = b.problem
                key = [[repr(float(x)) for x in row] for row in p.X]
                msg = _("block {k}: X is not block {before}'s Z as the key carries it on", k=k, before=k - 1)
                check = ("X_key = " + _array(key, 8) + "\n"
                         f"np.testing.assert_allclose(X, X_key, rtol={RTOL}, atol={ATOL}, err_msg={quoted(msg)})\n")
                if f"block{k - 1}.Z" in graded:     # a graded question's values stay out of the student's file
                    msg = _("block {k}: X should be block {before}'s Z", k=k, before=k - 1)
                    check = f"assert np.shape(X) == {(p.n, p.d_model)!r}, {quoted(msg)}\n"
                cell.source = ("words = [" + ", ".join(repr(t) for t in p.tokens) + "]\n"
                               f"n, d_model, d_k = {p.n}, {p.d_model}, {p.d_k}   # {_sizes()}\n"
                               "X = carry(Z)      # " + _("block {before}'s output, as the key shows it", before=k - 1) + "\n"
                               + check + print_shape("X") + "\nshow(X)")
            if k == 1 and cell.id == "import":
                cell.source += "\n\n\n" + _carry_code(c.decimals)
            cell.id = pre + cell.id
            cells.append(cell)
    nb = v4.new_notebook(cells=cells, metadata={"kernelspec": dict(KERNELSPEC), "language_info": dict(LANGUAGE_INFO)})
    nbformat.validate(nb)
    return nb
