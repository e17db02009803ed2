"""The solution model: exact matrices and ordered display steps. It knows no output format.

Writers (text, Markdown, JSON, HTML, LaTeX, PDF) read a :class:`Solution`; nothing here renders.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import sympy as sp

from . import numfmt as F


@dataclass
class Line:
    """One displayed equation, as Unicode text and as ASCII LaTeX. ``group`` gathers lines (e.g. a softmax row)."""

    text: str
    latex: str
    group: str | None = None


@dataclass
class Step:
    id: str                 # "Q", "K", "V", "scores", "scaled", "weights", "Z", "concat", "output"
    title: str              # e.g. "Queries: Q = X·W_Q"
    why: str                # plain-text explanation: what is computed and why
    lines: list[Line]
    result: str | None = None     # key into Solution.matrices() of the matrix this step produces
    shape: str | None = None      # "(3×4)·(4×2) → 3×2"
    shape_latex: str | None = None
    head: int | None = None       # 1-based head number, None for single-head problems and the final steps
    notes: list[str] = field(default_factory=list)  # extra plain-text remarks (e.g. about the mask)
    precision: int = 0            # decimal places used for intermediate values in this step

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "head": self.head,
            "title": self.title,
            "why": self.why,
            "notes": list(self.notes),
            "shape": self.shape,
            "result": self.result,
            "text": [ln.text for ln in self.lines],
            "latex": [ln.latex for ln in self.lines],
            "groups": [ln.group for ln in self.lines],
        }


@dataclass
class Mat:
    """An exact matrix with its high-precision numeric values and its labels."""

    name: str               # JSON key, e.g. "scores"
    symbol: str             # text symbol, e.g. "Q" or "Q⁽¹⁾"
    symbol_latex: str       # LaTeX symbol, e.g. "Q" or "Q^{(1)}"
    exact: list[list[Any]]  # sympy values (−∞ for masked entries)
    num: list[list[Any]]    # mpmath values (−inf for masked entries)
    rows: list[str]
    cols: list[str]
    masked: frozenset = frozenset()
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.exact), len(self.exact[0]))

    def is_masked(self, i: int, j: int) -> bool:
        return (i, j) in self.masked

    def value(self, i: int, j: int) -> float | None:
        if self.is_masked(i, j) and self.exact[i][j] == sp.S.NegativeInfinity:
            return None
        return float(self.num[i][j])

    def dec(self, i: int, j: int, places: int) -> str:
        """The entry as shown to *places* decimals (Unicode minus; ``−∞`` when masked)."""
        # remembered per entry and places (like exact_at): a solution's entries are shown many times over,
        # in the steps (each rebuilt with more places until its lines check), the tables and the answers
        key = ("dec", i, j, places)
        hit = self._cache.get(key)
        if hit is None:
            e = self.exact[i][j]
            hit = "−∞" if e == sp.S.NegativeInfinity else F.dec_str(e, self.num[i][j], places)
            self._cache[key] = hit
        return hit

    def dec_plain(self, i: int, j: int, places: int) -> str:
        """Like :meth:`dec` with ASCII: ``-2.83``, ``-inf`` (for CSV, LaTeX tables and JSON)."""
        return self.dec(i, j, places).replace("−", "-").replace("∞", "inf")

    def show(self, i: int, j: int, places: int) -> str:
        """What a matrix cell shows: the exact short form when the whole matrix is exact at *places*
        (``2``, ``-1``, ``0.5``), else the decimal to *places*. Unicode minus."""
        e = self.exact[i][j]
        if e == sp.S.NegativeInfinity:
            return "−∞"
        if self.exact_at(places):
            return F.num_text(e)
        return self.dec(i, j, places)

    def show_latex(self, i: int, j: int, places: int) -> str:
        """ASCII LaTeX of :meth:`show` (``-\\infty`` when masked)."""
        e = self.exact[i][j]
        if e == sp.S.NegativeInfinity:
            return r"-\infty"
        if self.exact_at(places):
            return F.num_latex(e) if F._frac(e).denominator == 1 or F._terminates(F._frac(e)) else F.num_text(e)
        return self.dec_plain(i, j, places)

    def exact_text(self, i: int, j: int) -> str:
        return F.text(self.exact[i][j])

    def exact_latex(self, i: int, j: int) -> str:
        return F.latex(self.exact[i][j])

    def is_rational(self) -> bool:
        return all(F.is_rational(x) for row in self.exact for x in row if x != sp.S.NegativeInfinity)

    def exact_at(self, places: int) -> bool:
        """True when every entry shown to *places* decimals is exact."""
        key = ("exact_at", places)
        if key not in self._cache:
            self._cache[key] = all(x == sp.S.NegativeInfinity or F.exact_at(x, places) for row in self.exact for x in row)
        return self._cache[key]

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape),
            "exact": [[str(x) for x in row] for row in self.exact],
            "value": [[self.value(i, j) for j in range(self.shape[1])] for i in range(self.shape[0])],
        }


@dataclass
class HeadResult:
    index: int              # 1-based
    Q: Mat
    K: Mat
    V: Mat
    scores: Mat             # Q·Kᵀ, with −∞ where masked
    scaled: Mat
    weights: Mat
    Z: Mat
    raw_scores: Mat | None = None  # Q·Kᵀ before the mask (causal problems only)

    NAMES = ("Q", "K", "V", "scores", "scaled", "weights", "Z")

    def matrices(self) -> dict[str, Mat]:
        return {k: getattr(self, k) for k in self.NAMES}


@dataclass
class Solution:
    """Every intermediate as an exact matrix, plus the ordered display steps."""

    problem: Any
    heads: list[HeadResult]
    concat: Mat | None
    output: Mat             # the final Z (after W_O when there are heads)
    steps: list[Step]
    checks: str = "one"
    scale_factor: Any = None  # exact divisor applied to the scores (√d_k, 1 or the given number)

    @property
    def Z(self) -> Mat:
        return self.output

    @property
    def decimals(self) -> int:
        return self.problem.decimals

    def matrices(self) -> dict[str, Mat]:
        """All matrices by key: ``"Q"`` … ``"Z"`` for one head; ``"head1.Q"`` …, ``"concat"``, ``"Z"`` for several."""
        out: dict[str, Mat] = {}
        if len(self.heads) == 1 and not self.problem.multihead:
            out.update(self.heads[0].matrices())
        else:
            for h in self.heads:
                for k, m in h.matrices().items():
                    out[f"head{h.index}.{k}"] = m
            out["concat"] = self.concat
            out["Z"] = self.output
        return out

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (see README: "JSON format")."""
        p = self.problem
        return {
            "title": p.title,
            "tokens": list(p.tokens),
            "decimals": p.decimals,
            "scale": p.scale if isinstance(p.scale, str) else str(p.scale),
            "mask": p.mask,
            "d_k": p.d_k,
            "heads": [{k: m.to_dict() for k, m in h.matrices().items()} for h in self.heads],
            "concat": self.concat.to_dict() if self.concat is not None else None,
            "Z": self.output.to_dict(),
            "steps": [s.to_dict() for s in self.steps],
        }

    def _repr_html_(self) -> str:  # Jupyter / Colab
        try:
            from .render import answer_key_html
        except ImportError:  # the renderers are optional for the core
            from html import escape

            return "<pre>" + escape(self.text()) + "</pre>"
        return answer_key_html(self)

    def text(self) -> str:
        from .writers import text as tw

        return tw.render(self)
