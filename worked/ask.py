"""What a question asks, read by one grammar everywhere: a quiz spec's ``[[questions]]``, a quiz manifest that
``worked grade`` reads, and a variant checked on the web page. One :class:`Question` holds what is asked, its
points and tolerance and, once resolved against a problem's matrices, its cells; :meth:`Question.score` is the
one rule for the points it earns.

An ask is a matrix key with an optional ``[row, column]``::

    scores[2,3]      one entry (1-based)
    weights[1,*]     row 1, every column (``*``: every row or column)
    head2.V          every entry of head 2's V
    Z[cats,1]        rows and columns may be named by their labels (a token) where the labels are known
    A[2,2]           the aliases of :data:`worked.model.MATRIX_ALIASES` (A, attention, output …) name their matrix
"""
from __future__ import annotations

import re
from typing import NamedTuple

from .i18n import Msg
from .model import MATRIX_ALIASES

GRAMMAR = re.compile(r"^\s*([A-Za-z][\w.]*)\s*(?:\[\s*([^\],\s][^\],]*?)\s*,\s*([^\],\s][^\],]*?)\s*\])?\s*$")


class AskError(ValueError):
    """What is wrong with an ask, in words (the caller adds the file and the field)."""


class Ask(NamedTuple):
    matrix: str             # key into Solution.matrices(), aliases resolved: "scores", "head2.weights"
    row: str | None         # "2", a label, or None for every row ("*")
    col: str | None

    @property
    def one_row(self) -> bool:
        return self.row is not None

    @property
    def one_col(self) -> bool:
        return self.col is not None


def parse(text) -> Ask:
    """*text* read by the grammar; raises :class:`AskError`."""
    m = GRAMMAR.match(text) if isinstance(text, str) else None
    if not m:
        raise AskError(Msg("cannot read {text}: expected a matrix name with an optional [row,col] (1-based, "
                           "* for all), such as scores[2,3], weights[1,*] or Z", text=repr(text)))
    head, dot, base = m.group(1).rpartition(".")      # "head2.A" → "head2." + "weights"
    star = lambda t: None if t in (None, "*") else t  # noqa: E731
    return Ask(head + dot + MATRIX_ALIASES.get(base, base), star(m.group(2)), star(m.group(3)))


def cells(ask: Ask, shapes: dict, labels: dict | None = None) -> tuple[list, tuple]:
    """The 0-based cells ``[(i, j)]`` an ask names and their layout ``(rows, cols)``, for matrices of these
    *shapes* (key → (rows, cols)) and, where known, their *labels* (key → (row labels, column labels)).
    Raises :class:`AskError`."""
    if ask.matrix not in shapes:
        raise AskError(Msg("unknown matrix {matrix} (expected one of: {names})", matrix=repr(ask.matrix),
                           names=", ".join(shapes)))
    r, c = shapes[ask.matrix]
    rl, cl = (labels or {}).get(ask.matrix, ((), ()))

    def index(tok, names, size, what):
        if tok is None:
            return list(range(size))
        if tok.isdigit() and 1 <= int(tok) <= size:
            return [int(tok) - 1]
        if tok in names:
            return [list(names).index(tok)]
        at = dict(tok=tok, matrix=ask.matrix, r=r, c=c, size=size)
        if what == "row":
            raise AskError(Msg("row {tok} is outside {matrix} ({r}×{c}; rows are 1..{size} or a label)", **at) if names
                           else Msg("row {tok} is outside {matrix} ({r}×{c}; rows are 1..{size})", **at))
        raise AskError(Msg("column {tok} is outside {matrix} ({r}×{c}; columns are 1..{size} or a label)", **at) if names
                       else Msg("column {tok} is outside {matrix} ({r}×{c}; columns are 1..{size})", **at))

    rows = index(ask.row, rl, r, "row")
    cols = index(ask.col, cl, c, "column")
    return [(i, j) for i in rows for j in cols], (len(rows), len(cols))


class Question:
    """One question: *ask* (its text), *points*, *tolerance* (a :class:`worked.check.Tolerance`, or None for the
    rounding default) and *name* (q1: a column header too); after :meth:`resolve`, the *matrix* it asks and its
    0-based *cells*, laid out as *shape*."""

    __slots__ = ("ask", "points", "tolerance", "name", "parsed", "matrix", "cells", "shape", "kind", "choices", "options")

    def __init__(self, ask: str, points: float, tolerance=None, name: str = "", *, kind: str = "value",
                 choices: int = 0, options: tuple = ()):
        self.ask, self.points, self.tolerance, self.name = ask, points, tolerance, name
        # kind "choice": a multiple-choice question of *choices* options; *options*, once a variant's are drawn
        # (the manifest's: {"letter", "value", "right", "mistake"}), are what a response may choose
        self.kind, self.choices, self.options = kind, choices, tuple(options)
        self.parsed: Ask | None = None
        self.matrix, self.cells, self.shape = "", [], (1, 1)

    def __repr__(self):
        more = f", kind={self.kind!r}, choices={self.choices!r}" if self.kind != "value" else ""
        return f"Question({self.ask!r}, {self.points!r}, {self.tolerance!r}, name={self.name!r}{more})"

    def resolve(self, shapes: dict, labels: dict | None = None) -> "Question":
        """Fill :attr:`matrix`, :attr:`cells` and :attr:`shape` (see :func:`cells`); raises :class:`AskError`."""
        self.parsed = parse(self.ask)
        self.cells, self.shape = cells(self.parsed, shapes, labels)
        self.matrix = self.parsed.matrix
        return self

    def resolve_in(self, matrices: dict) -> "Question":
        """:meth:`resolve` against a solution's matrices (their shapes and row and column labels)."""
        return self.resolve({k: m.shape for k, m in matrices.items()},
                            {k: (m.rows, m.cols) for k, m in matrices.items()})

    def score(self, verdicts, carried) -> tuple[int, float]:
        """(entries right, points earned) from a check's verdicts and carried-forward marks of its matrix (None:
        not answered): an entry counts when correct or carried forward correctly; the points are shared by the
        cells, to 2 places."""
        if self.kind == "choice":
            raise ValueError("a choice question is scored by the option chosen: worked.choice.score")
        right = 0 if verdicts is None else sum(verdicts[i][j] == "correct" or bool(carried[i][j]) for i, j in self.cells)
        return right, round(self.points * right / len(self.cells), 2)
