"""LMS exports of a quiz batch, built from its manifest (``manifest.json``): Moodle XML, Canvas QTI 1.2, GIFT.

Each exporter is a pure function of the manifest dict, so ``worked quiz`` and the tests use the same
data the grader reads. Every variant's question text carries the variant's own matrices: LaTeX in
``\\( … \\)`` for Moodle and GIFT (Moodle's MathJax filter renders it), MathML for Canvas.
"""
from __future__ import annotations

from html import escape

SCALE_WORDS = {"sqrt": "divide the scores by √d_k", "none": "no scaling"}


def fmt_num(x: float) -> str:
    """A plain decimal for an LMS answer field (no exponent, at most 10 significant digits)."""
    s = f"{x:.10g}"
    if "e" in s or "E" in s:
        s = f"{x:.12f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def entry_latex(v) -> str:
    s = str(v)
    if "/" in s:
        a, b = s.split("/")
        neg = a.startswith("-")
        return ("-" if neg else "") + rf"\tfrac{{{a.lstrip('-')}}}{{{b}}}"
    return s


def matrix_latex(m) -> str:
    rows = [" & ".join(entry_latex(x) for x in row) for row in m]
    return r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def problem_parts(p: dict) -> list[tuple[str, str]]:
    """(LaTeX name, LaTeX matrix) for every input matrix of a problem dict (keys of a problem file)."""
    out = [("X", matrix_latex(p["X"]))]
    if "heads" in p:
        for h, hd in enumerate(p["heads"], 1):
            for k in ("W_Q", "W_K", "W_V"):
                out.append((f"W_{{{k[2]}}}^{{({h})}}", matrix_latex(hd[k])))
        out.append(("W_{O}", matrix_latex(p["W_O"])))
    else:
        for k in ("W_Q", "W_K", "W_V"):
            out.append((f"W_{{{k[2]}}}", matrix_latex(p[k])))
    return out


def variant_label(v: dict) -> str:
    st = v.get("student")
    who = f" — {st['name']} ({st['id']})" if st and st.get("name") else (f" — {st['id']}" if st else f" — #{v['number']}")
    return f"Variant {v['variant']}{who}"


def stem_html(v: dict, math) -> str:
    """The shared part of every question of a variant: who, tokens, options and the input matrices.

    *math(latex)* returns the markup of one formula (LaTeX delimiters or MathML).
    """
    p = v["problem"]
    scale = p["scale"]
    scale_txt = SCALE_WORDS.get(scale, f"divide the scores by {scale}") if isinstance(scale, str) else f"divide the scores by {scale}"
    toks = ", ".join(escape(t) for t in p["tokens"])
    mats = " ".join(math(f"{name} = {m}") for name, m in problem_parts(p))
    return (f"<p><b>{escape(variant_label(v))}</b></p>"
            f"<p>Self-attention on the tokens {toks} (one row of X each). Scale: {escape(scale_txt)}; "
            f"mask: {escape(p['mask'])}. Indices are 1-based (row, column). Give decimals to {p['decimals']} places.</p>"
            f"<p>{mats}</p>")


def cell_words(entry_ask: str) -> str:
    return entry_ask
