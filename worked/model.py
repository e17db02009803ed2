"""The solution model: exact matrices and ordered display steps. It knows no output format.

Writers (text, Markdown, JSON, HTML, LaTeX, PDF) read a :class:`Solution`; nothing here renders or prints:
the lines, titles and symbols are trees (:mod:`worked.eq`), numbers are exact, and each consumer calls the
printer of its format (:mod:`worked.printers`), so a new format never means editing this module. Three
conveniences of the Python API hand the solution to a writer at call time (:meth:`Solution.to_dict`,
:meth:`Solution.text`, :meth:`Solution._repr_html_` for Jupyter); those writers import nothing of the core's
solution side, so no import cycle comes of it (tests/test_layout.py checks both).
The records here, in :mod:`worked.problem` and in :mod:`worked.attention` are plain classes (or
NamedTuples), not dataclasses: every ``worked solve`` imports them, and a dataclass writes and compiles
its methods at import (≈ 0.5 ms each, a fifth of what the core adds to sympy's start-up).
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any

import sympy as sp

from . import eq, stages
from . import numfmt as F

#: the results that are numbers, not matrices (held as 1×1 matrices): shown and written as numbers
SCALARS = tuple(s.id for s in stages.every() if (s.rows, s.cols) == ("1", "1"))

#: other names of a matrix (an answers file's, a question's) → its key (the stages' ``aliases``)
MATRIX_ALIASES = {a: s.id for s in stages.every() for a in s.aliases}


class Line:
    """One displayed equation: a tree (:class:`worked.eq.Rel`), printed by each format's printer.
    ``group`` gathers lines (e.g. a softmax row). Immutable, compared and hashed by value."""

    __slots__ = ("eq", "group")

    def __init__(self, eq: eq.Rel, group: str | None = None):
        object.__setattr__(self, "eq", eq)
        object.__setattr__(self, "group", group)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Line is immutable (cannot set {name!r})")

    def __eq__(self, other):
        return type(other) is Line and (self.eq, self.group) == (other.eq, other.group)

    def __hash__(self):
        return hash((self.eq, self.group))

    def __repr__(self):
        return f"Line({self.eq!r}" + (f", group={self.group!r})" if self.group is not None else ")")


class Step:
    """One worked step: its title, why it is done, its displayed lines, and the matrix it produces.

    The title, the explanation and the notes are prose with their math as trees (:class:`worked.eq.Prose`;
    a plain string is prose without math): ``title_prose``, ``why_prose``, ``notes_prose``, and the shapes
    ``shape_eq``; each writer prints them with its format's printer (``printers.text(step.title_prose)`` for
    the terminal and JSON)."""

    def __init__(self, id: str, title, why, lines: list[Line], result: str | None = None,
                 shape_eq: Any = None, head: int | None = None, notes: list | None = None, precision: int = 0):
        self.id = id                # "Q", "K", "V", "scores", "scaled", "weights", "Z", "concat", "output"
        self.title_prose = eq.prose(title)   # e.g. "Queries: " Q = X·W_Q
        self.result = result        # key into Solution.matrices() of the matrix this step produces
        self.head = head            # 1-based head number, None for single-head problems and the final steps
        self._make = None
        self._then: list = []
        self._fill(why, lines, shape_eq, notes, precision)

    def _fill(self, why, lines, shape_eq, notes, precision) -> None:
        self._why_prose = eq.prose(why)       # what is computed and why
        self._lines = lines
        self._shape_eq = shape_eq    # the shapes as a tree: (3×4)·(4×2) → 3×2
        self._notes_prose = [eq.prose(x) for x in (notes or ())]   # extra remarks (e.g. about the mask)
        self._precision = precision  # decimal places used for intermediate values in this step

    @classmethod
    def shown_later(cls, id: str, title, make, result: str | None = None, head: int | None = None) -> "Step":
        """A step whose heading (id, title, result, head) is known now and whose body (explanation, lines,
        notes, shapes, places) is made when first read: ``make()`` returns the whole :class:`Step`. What only
        reads the headings and the values (checking answers) never builds the lines."""
        self = cls.__new__(cls)
        self.id, self.title_prose, self.result, self.head = id, eq.prose(title), result, head
        self._make, self._then = make, []
        return self

    def then(self, fn) -> None:
        """Call ``fn(step)`` once the body is made (now, when it is): the solver audits the lines and adds
        the notes that depend on the carried places."""
        if self._make is None:
            fn(self)
        else:
            self._then.append(fn)

    def _body(self) -> None:
        if self._make is not None:
            s, self._make = self._make(), None
            self._fill(s._why_prose, s._lines, s._shape_eq, s._notes_prose, s._precision)
            for fn in self._then:
                fn(self)
            self._then = []

    def _made(name: str, doc: str):
        def get(self):
            self._body()
            return getattr(self, name)
        return property(get, doc=doc)

    why_prose = _made("_why_prose", "What is computed and why (prose).")
    lines = _made("_lines", "The displayed lines (list of Line).")
    notes_prose = _made("_notes_prose", "Extra remarks (list of prose).")
    shape_eq = _made("_shape_eq", "The shapes as a tree, or None.")
    precision = _made("_precision", "Decimal places of the intermediate values in this step.")
    del _made

    def __repr__(self):
        return f"Step({self.id!r}" + (f", head={self.head}" if self.head is not None else "") + f", {len(self.lines)} lines)"


class SymLabel(str):
    """A row label that is a symbol: a one-row matrix (``b_1′``, ``dγ_2``) labels its row by its name. It *is* the
    name's text (what the checker, the quiz, the JSON and the text writers read: ``dγ_2``); ``sym`` is the tree, which
    the page formats set as math (γ with the subscript 2)."""

    def __new__(cls, sym: "eq.Sym"):
        self = super().__new__(cls, sym.name + "′" * bool(sym.prime))
        self.sym = sym
        return self

    def __reduce__(self):       # pickled (a worker's solution) as what it is
        return (SymLabel, (self.sym,))


class Mat:
    """An exact matrix with its 50-digit values and its labels.

    ``m[i, j]`` is the exact entry (sympy or −∞); ``np.asarray(m, dtype=float)`` or ``m.to_numpy()``
    gives the values as floats (masked entries −inf)."""

    __slots__ = ("name", "_exact", "_later", "num", "rows", "cols", "masked", "sym", "_exact_at", "_hand", "_places")

    def __init__(self, name: str, sym: "eq.Sym", exact, num, rows, cols, masked: frozenset = frozenset(),
                 hand=None, places: int = 0, later=None):
        self.name = name            # JSON key, e.g. "scores"
        self.sym = sym              # the symbol as a tree
        self._exact = exact         # sympy values (−∞ for masked entries); with *later*, a placeholder (neither
        self._later = later         # rational nor −∞) where an entry is made when first read: later(exact) gives
        self.num = num              # them all. 50-digit Decimal values (−Infinity for masked entries)
        self.rows = list(rows)
        self.cols = list(cols)
        self.masked = frozenset(masked)
        self._exact_at: dict = {}
        self._hand = hand           # the values a worked line carries (attention.Hand), or None; or a
        self._places = places       # function giving (those, their places) when first needed (solver)

    @property
    def exact(self) -> list:
        """The exact entries (sympy, −∞ where masked). A value known by its 50-digit enclosure alone (a block's, past
        its closed forms) is written as the shortest decimal in it when the entries are first read: a line that
        shows it rounded, or reads whether it is rational, never needs that decimal."""
        if self._later is not None:
            self._exact, self._later = self._later(self._exact), None
        return self._exact

    @property
    def hand(self):
        """The values a worked line carries (:class:`worked.attention.Hand`), or None."""
        if callable(self._hand):
            self._hand, self._places = self._hand()
        return self._hand

    @property
    def places(self) -> int:
        """The places :attr:`hand` is carried to."""
        self.hand
        return self._places

    def __repr__(self) -> str:
        return f"Mat({self.name!r}, {self.shape[0]}×{self.shape[1]})"

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.num), len(self.num[0]))

    def __getitem__(self, ij):
        i, j = ij
        return self.exact[i][j]

    def __len__(self) -> int:
        return len(self.num)

    def __array__(self, dtype=None, copy=None):
        import numpy as np

        out = np.array([[float(x) for x in row] for row in self.num], dtype=float)
        return out if dtype is None else out.astype(dtype)

    def to_numpy(self):
        """The values as a float NumPy array (masked entries −inf)."""
        import numpy as np

        return np.asarray(self, dtype=float)

    def is_masked(self, i: int, j: int) -> bool:
        return (i, j) in self.masked

    def is_neg_inf(self, i: int, j: int) -> bool:
        return self._exact[i][j] == sp.S.NegativeInfinity

    def value(self, i: int, j: int) -> float | None:
        if self.is_masked(i, j) and self.is_neg_inf(i, j):
            return None
        return float(self.num[i][j])

    def rounded(self, i: int, j: int, places: int):
        """The entry rounded to *places* (a Decimal)."""
        return F.round_decimal(self._exact[i][j], self.num[i][j], places)

    def node(self, i: int, j: int, places: int):
        """What a worked line shows for the entry carried at *places*: the exact number when it is
        exact at *places* (``2``, ``0.5``), else the decimal (:class:`eq.Dec`); −∞ when masked."""
        e = self._exact[i][j]
        if e == sp.S.NegativeInfinity:
            return eq.neg_inf()
        if F.exact_at(e, places):
            return eq.num(F.frac(e))
        return eq.dec(self.rounded(i, j, places))

    def is_exact_at(self, i: int, j: int, places: int) -> bool:
        """True when the entry shown to *places* decimals is the exact value."""
        return F.exact_at(self._exact[i][j], places)

    def carried(self, i: int, j: int):
        """What the worked lines show and carry on for the entry: the hand's value (:class:`attention.Hand`):
        an exact number (``2``, ``1/3``), the exact form of an irrational shown exactly (``√2``), or the
        decimal a hand computes from the numbers shown, at :attr:`places` (``0.4908``); −∞ when masked."""
        h = self.hand[i][j]
        if h is None:
            return eq.neg_inf()
        if isinstance(h, Fraction):     # exact, or rounded (attention.Approx) to `places` places
            return F.hand_node(h, self.places)
        return F.node(self.exact[i][j])

    def is_carried_exact(self, i: int, j: int) -> bool:
        """True when the carried value is the true value (not a rounded one)."""
        h = self.hand[i][j]
        return not isinstance(h, Fraction) or type(h) is Fraction

    def fixed(self, i: int, j: int, places: int):
        """The entry as an answer to *places* places, always written with them (``1.00``): a Dec."""
        return eq.dec(self.rounded(i, j, places))

    def exact_node(self, i: int, j: int):
        return F.node(self.exact[i][j])

    def dec_plain(self, i: int, j: int, places: int) -> str:
        """The entry to *places* decimals in ASCII: ``-2.83``, ``-inf`` (for CSV, LaTeX tables and JSON)."""
        if self.is_neg_inf(i, j):
            return "-inf"
        return F.dec_str(self.rounded(i, j, places))

    def cell(self, i: int, j: int, places: int):
        """What a table cell shows: the exact short form when the whole matrix is exact at *places*
        (``2``, ``-1``, ``0.5``), else the decimal to *places* (a tree)."""
        if self.is_neg_inf(i, j):
            return eq.neg_inf()
        if self.exact_at(places):
            return eq.num(F.frac(self._exact[i][j]))
        return eq.dec(self.rounded(i, j, places))

    @property
    def is_scalar(self) -> bool:
        """A number held as a 1×1 matrix (the loss L, L′): pages show it as ``L ≈ 2.24`` and JSON as a number."""
        return self.name in SCALARS and self.shape == (1, 1)

    def is_rational(self) -> bool:
        return all(F.is_rational(x) for row in self._exact for x in row if x != sp.S.NegativeInfinity)

    def exact_at(self, places: int) -> bool:
        """True when every entry shown to *places* decimals is exact."""
        hit = self._exact_at.get(places)
        if hit is None:
            hit = self._exact_at[places] = all(x == sp.S.NegativeInfinity or F.exact_at(x, places)
                                               for row in self._exact for x in row)
        return hit


class Matrices(dict):
    """The matrices of a solution by key; ``"A"``, ``"attention"``, ``"output"`` … are read as aliases
    (not listed)."""

    def __missing__(self, name):
        pre, dot, base = name.rpartition(".")
        key = pre + dot + MATRIX_ALIASES.get(base, base)
        if key != name and dict.__contains__(self, key):
            return dict.__getitem__(self, key)
        raise KeyError(f"no matrix {name!r}; the matrices are {', '.join(self)}")


class HeadResult:
    """One head's matrices, exact (:class:`Mat`), one per stage of a head of its architecture, in their order, by
    stage id as attributes too: ``h.weights`` (the scores with −∞ where masked, …)."""

    def __init__(self, index: int, matrices: dict[str, Mat], raw_scores: Mat | None = None):
        self.index = index          # 1-based
        self._mats = dict(matrices)
        self.raw_scores = raw_scores  # the scores before the mask (causal problems only)

    def __getattr__(self, name: str) -> Mat:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self._mats[name]
        except KeyError:
            raise AttributeError(name) from None

    def matrices(self) -> dict[str, Mat]:
        return dict(self._mats)


class Solution:
    """Every intermediate as an exact matrix, plus the ordered display steps."""

    def __init__(self, problem: Any, heads: list[HeadResult], concat: Mat | None, output: Mat, steps: list[Step],
                 checks: str = "one", scale_factor: Any = None, display: str = "exact", train: dict | None = None,
                 before: dict | None = None, after: dict | None = None):
        self.problem = problem
        self.heads = heads
        self.concat = concat
        self.output = output          # the final Z (after W_O when there are heads)
        self.steps = steps
        self.checks = checks
        self.scale_factor = scale_factor  # exact divisor applied to the scores (√d_k, 1 or the given number)
        self.display = display        # "exact" (√2, e^(√2)/(2 + e^(√2))) or "decimal" (Part 10 style)
        self.train = train            # a [train] problem's matrices by key: loss, dZ, (dconcat, head1.dZ, …), dV,
                                      # dA, dS, dscores, dQ, dK, dW_Q, dW_K, dW_V, W_Q_new, W_K_new, W_V_new, loss_after
        # a Transformer block's matrices by stage id: before the heads (P, X0, N1) and after them (R1 … loss)
        self.before = before or {}
        self.after = after or {}

    def __repr__(self):
        t = self.problem.title
        return f"<Solution{' of ' + repr(t) if t else ''}: {len(self.steps)} steps; .text() prints it>"

    @property
    def Z(self) -> Mat:
        return self.output

    def audit(self) -> "Solution":
        """Build every step's lines now (they are built when first read), so a line that does not hold raises
        here (:class:`worked.solver.AuditFailure`) rather than where the solution is shown. Returns self."""
        for s in self.steps:
            s.lines
        return self

    def __getitem__(self, name: str) -> Mat:
        """A matrix by name: ``sol["weights"]``, ``sol["A"]``, ``sol["head2.scores"]``."""
        return self.matrices()[name]

    def __getattr__(self, name: str) -> Mat:
        # sol.weights, sol.Q, sol.A ... (attributes and properties are found before this)
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as exc:
            raise AttributeError(str(exc)) from None

    @property
    def decimals(self) -> int:
        return self.problem.decimals

    def matrices(self) -> dict[str, Mat]:
        """All matrices by key: ``"Q"`` … ``"Z"`` for one head; ``"head1.Q"`` …, ``"concat"``, ``"Z"`` for several;
        a Transformer block's ``"P"``, ``"X0"`` (``"N1"``) first and ``"R1"`` … ``"loss"`` after them."""
        out: dict[str, Mat] = dict(self.before)
        if len(self.heads) == 1 and not self.problem.multihead:
            out.update(self.heads[0].matrices())
        else:
            for h in self.heads:
                for k, m in h.matrices().items():
                    out[f"head{h.index}.{k}"] = m
            # the heads' combination: the solver's concat and output, in the order of the combine stages
            out.update(zip((s.id for s in stages.of(self.problem).combine), (self.concat, self.output)))
        out.update(self.after)
        if self.train:
            out.update(self.train)
        return Matrices(out)

    def to_dict(self) -> dict[str, Any]:
        """The documented JSON form (see README: "JSON format"), written by :mod:`worked.writers.json`."""
        from .writers import json

        return json.solution(self)

    def _repr_html_(self) -> str:  # Jupyter / Colab
        try:
            from .render import answer_key_html
        except ImportError:  # the renderers are optional for the core
            from html import escape

            return "<pre>" + escape(self.text()) + "</pre>"
        return answer_key_html(self)

    def text(self) -> str:
        """The worked solution as plain text (:func:`worked.writers.text.render`)."""
        from .writers import text as tw

        return tw.render(self)
