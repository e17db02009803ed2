"""LMS exports of a quiz batch, built from its manifest (``manifest.json``): Moodle XML, Canvas QTI 1.2, GIFT.

Each exporter is a pure function of the manifest dict, so ``worked quiz`` and the tests use the same
data the grader reads. Every variant's question text carries the variant's own matrices, the given
matrices of the page model (:func:`worked.render.view.problem_page`) printed from their trees: LaTeX in
``\\( … \\)`` for Moodle and GIFT (Moodle's MathJax filter renders it), Canvas's equation images for Canvas.
"""
from __future__ import annotations

from html import escape

from .. import eq, printers
from ..problem import Problem
from ..render import view


def fmt_num(x: float) -> str:
    """A plain decimal for an LMS answer field (no exponent, at most 10 significant digits)."""
    s = f"{x:.10g}"
    if "e" in s or "E" in s:
        s = f"{x:.12f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def matrix_latex(m: dict) -> str:
    """A matrix of the page model as LaTeX: ``X = \\begin{bmatrix} … \\end{bmatrix}`` (``X \\approx`` when
    its entries are shown rounded), every piece printed from its tree."""
    rows = [" & ".join(c["tex"] for c in row) for row in m["cells"]]
    return printers.latex(m["head"]) + r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def matrix_mathml(m: dict) -> str:
    """The same matrix as one ``<math>`` element: the symbol and relation, then a bracketed ``<mtable>`` of
    the printed entries; its alt text is the spoken symbol and relation."""
    table = "".join("<mtr>" + "".join(f"<mtd>{printers.mathml(c['node'])}</mtd>" for c in row) + "</mtr>"
                    for row in m["cells"])
    body = (f"<mrow>{printers.mathml(m['symbol'])}{printers.MathMLPrinter.OPS[m['rel']]}"
            f"<mrow><mo>[</mo><mtable>{table}</mtable><mo>]</mo></mrow></mrow>")
    alt = f"{printers.spoken(m['symbol'])} {'equals' if m['rel'] == eq.EQ else 'is about'} a {m['shape']} matrix"
    return printers.math_element(body, alt=alt)


def variant_label(v: dict) -> str:
    st = v.get("student")
    who = f" — {st['name']} ({st['id']})" if st and st.get("name") else (f" — {st['id']}" if st else f" — #{v['number']}")
    return f"Variant {v['variant']}{who}"


def stem_html(v: dict, math) -> str:
    """The shared part of every question of a variant: who, tokens, options and the input matrices.

    *math(m)* returns the markup of one given matrix *m* of the page model (LaTeX in delimiters, or an
    equation image).
    """
    problem = Problem.from_dict(v["problem"], source=f"variant {v['variant']}")
    page = view.problem_page(problem)
    toks = ", ".join(escape(t) for t in page["tokens"])
    mats = " ".join(math(m) for m in page["given"])
    return (f"<p><b>{escape(variant_label(v))}</b></p>"
            f"<p>Self-attention on the tokens {toks} (one row of X each). Scaling: {escape(view.scale_text(problem))}; "
            f"mask: {escape(view.mask_text(problem))}. Indices are 1-based (row, column). "
            f"Give decimals to {page['places']} places.</p>"
            f"<p>{mats}</p>")
