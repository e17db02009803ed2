"""Checking a student's answers: per-entry verdicts, error carried forward, named misconceptions.

Public API (used by ``worked check``, ``worked grade`` and the web server)::

    from worked.check import check_answers, parse_entry, read_answers
    report = check_answers(problem, {"scaled": [["1.41", "2.83", "1.41"], ...], "weights": ...})
    report.to_dict()   # the JSON of ``worked check --format json``
    report.text()      # the text of ``worked check``

The answers dict has the keys of an answers file: the JSON names of :meth:`Solution.matrices`
(``Q K V scores scaled weights Z``; with several heads ``head1.Q`` … ``head1.Z``, ``concat``, ``Z``),
or nested per-head tables (``{"head1": {"Q": ...}}``, which is what TOML ``[head1]`` gives). Each
value is a list of rows; an entry is a number, a decimal or fraction string, an exact form
(``"2√2"``, ``"e^2/(1+e^2)"``), ``"-inf"``/``"−∞"`` for a masked score, or blank (``""``, ``"?"``,
``None``) for "not answered".

How answers are judged
----------------------
Every matrix is recomputed with *intervals* (lo, hi) at 50 digits (the forward pass of
:mod:`worked.attention` with its :class:`~worked.attention.Interval` backend). With the default tolerance a
careful student may round every intermediate value to the problem's decimals (√d_k too, to at least
2 places; each e^x of the softmax; each weight), so each computed entry is widened by half a unit
of the last place before it is used further, and the answer itself by another half unit. An answer
is *correct* when it lies in the interval computed from the problem. It is *consistent with the
earlier steps* (error carried forward) when it lies in the interval computed from the student's own
earlier answers instead. With ``--tolerance T`` (absolute) or ``T%`` (relative) the intervals are
the exact values ± T instead.

A misconception is diagnosed on a matrix when its wrong entries (those not explained by an
earlier slip) lie in the interval computed *with that mistake* (from the student's own earlier
answers or from the correct ones), where the mistake changes the answer at all; the mistakes, their
ids and texts are those of :data:`worked.mistakes.MISTAKES`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from decimal import Decimal

from . import eq, exprs, mistakes, printers, stages
from .i18n import Msg, current, localized_text, ngettext, translate
from .i18n import tr as _
from .attention import NA, Hand, Interval, contains, pt, run_pass
from .eq import arith
from .errors import ExpressionError, WorkedError
from .mistakes import MISTAKES
from .model import MATRIX_ALIASES
from .numfmt import CTX

BLANKS = ("", "?")

STAGES = tuple(s.id for s in stages.FORWARD)     # a head's: Q … Z (worked.stages)
LAYER = tuple(s.id for s in stages.COMBINE)      # several heads: their combination, then the output
# a [train] problem's matrices, in the order of the backward pass (loss, dZ and dconcat are not per head)
TRAIN_STAGES = stages.TRAIN_IDS
TRAIN_LAYER = {s.id for s in stages.TRAIN + stages.UPDATE if s.scope == "layer"}
MAY_BE_INF = {s.id for s in stages.every() if s.may_be_inf}     # the matrices whose entries may be −∞
# a softmax whose input may be rounded early (worked.stages: rounded_early), and the head stages that take it:
# the matrix's id → (the softmax stage, whether the matrix is the softmax's own)
EARLY = {**{t.id: (s, False) for s in stages.FORWARD if s.rounded_early for t in stages.FORWARD if s.id in t.inputs},
         **{s.id: (s, True) for s in stages.FORWARD if s.rounded_early}}


# ---------------------------------------------------------------- reading entries

_DECIMAL = arith.Bounded(CTX)         # the entries' first reading: bounded 50-digit Decimals
_TWO_NUMBERS = re.compile(r"[\d.]\s+[\d.]")
_PLAIN_NUMBER = re.compile(r"([-−]?)(\d{1,40}(?:\.\d{1,40})?)")
_NEG_INF_TEXT = re.compile(r"^\s*[-−]\s*(∞|oo|inf|infinity)\s*$", re.IGNORECASE)


def _read(value):
    """``(exact sympy value, 50-digit Decimal)``, ``("-oo", None)`` for −∞, or ``None`` for a blank entry."""
    import sympy as sp

    if value is None:
        return None
    if isinstance(value, bool):
        raise ExpressionError(Msg("expected a number, got {got}", got=str(value).lower()))
    if isinstance(value, int):
        if abs(value) > 10**12:
            raise ExpressionError(Msg("number {number} is too large", number=value))
        return sp.Integer(value), Decimal(value)
    if isinstance(value, Fraction):
        value = f"{value.numerator}/{value.denominator}"
    elif isinstance(value, float):
        if value == -math.inf:
            return sp.S.NegativeInfinity, None
        if not math.isfinite(value):
            raise ExpressionError(Msg("expected a finite number, got {got}", got=value))
        value = repr(value)
    elif getattr(value, "is_number", False) and type(value).__module__.startswith("sympy"):
        if value == sp.S.NegativeInfinity:
            return value, None
        value = str(value)
    if not isinstance(value, str):
        raise ExpressionError(Msg("expected a number or a string, got {got}", got=type(value).__name__))
    text = value.strip()
    if text in BLANKS:
        return None
    if _NEG_INF_TEXT.match(text):
        return sp.S.NegativeInfinity, None
    if "," in text and not text.startswith(("[", "(")):
        text = _decimal_comma(text)
    if _TWO_NUMBERS.search(text):
        raise ExpressionError(Msg("two numbers side by side in {text} (write one number per entry, with * between "
                                  "factors)", text=repr(text)))
    plain = _PLAIN_NUMBER.fullmatch(text)
    if plain:                             # a plain decimal (most answers): its value, without the grammar
        f = exprs.bounded_number(plain.group(2))
        if plain.group(1):
            f = -f
        return sp.Rational(f.numerator, f.denominator), CTX.divide(f.numerator, f.denominator)
    tree = exprs.parse(text)              # an equation tree (worked.eq), evaluated by its one walk twice:
    num = arith.walk(tree, _DECIMAL)      # bounded 50-digit Decimals, cheap: guards the exact evaluation below
    try:
        exact = arith.exact_value(tree)
    except ExpressionError:
        raise
    except Exception as exc:  # pragma: no cover - sympy surprises are still only an error message
        raise ExpressionError(Msg("cannot evaluate {text}: {reason}", text=repr(text), reason=str(exc))) from None
    if not getattr(exact, "is_number", False) or exact.is_real is False:
        raise ExpressionError(Msg("{text} is not a real number", text=repr(text)))
    return exact, num


_COMMA_NUMBER = re.compile(r"([-+−]?)(\d+),(\d+)")


def _decimal_comma(text: str) -> str:
    """"0,16" → "0.16": a decimal comma where it cannot be ambiguous (one comma between digits, no point);
    "1,234" (a thousands separator, or 1.234?) and anything else with a comma: "use a decimal point"."""
    m = _COMMA_NUMBER.fullmatch(text)
    if m and "." not in text and not (len(m.group(3)) == 3 and m.group(2) != "0"):
        return f"{m.group(1)}{m.group(2)}.{m.group(3)}"
    if text.count(",") == 1 and "." not in text:
        raise ExpressionError(Msg("use a decimal point: {number}", number=text.replace(',', '.')))
    raise ExpressionError(Msg("use a decimal point (such as 0.16); one number per entry, without commas"))


def parse_entry(value):
    """Read one answer entry into an exact sympy value, or ``None`` when it is blank (``""``, ``"?"``, None).

    Numbers are read exactly (a float through its shortest decimal form), strings by the grammar of
    :mod:`worked.exprs` (never ``eval``/``sympify``). ``"-inf"``/``"−∞"`` give ``-oo`` (a masked score).
    Raises :class:`worked.errors.ExpressionError` for anything else.
    """
    r = _read(value)
    return None if r is None else r[0]


# ---------------------------------------------------------------- tolerance

@dataclass(frozen=True)
class Tolerance:
    """``Tolerance()`` is the default (rounding to the problem's decimals, also at intermediate steps);
    ``Tolerance(abs=0.01)`` and/or ``Tolerance(rel=0.02)`` accept answers within that distance of the
    exact value (either one suffices)."""

    abs: float | None = None
    rel: float | None = None

    @property
    def default(self) -> bool:
        return self.abs is None and self.rel is None

    @classmethod
    def parse(cls, text) -> "Tolerance":
        """``"0.01"`` (absolute), ``"2%"`` (relative), ``"abs=0.01,rel=0.02"``; None → default."""
        if text is None or isinstance(text, Tolerance):
            return text or cls()
        if isinstance(text, (int, float)) and not isinstance(text, bool):
            return cls._checked(abs=float(text))
        if isinstance(text, dict):
            unknown = sorted(str(k) for k in set(text) - {"abs", "rel", "absolute", "relative"})
            if unknown:
                raise WorkedError(Msg("tolerance: unknown key {key} (expected abs and/or rel, such as abs=0.01,rel=2%)",
                                      key=repr(unknown[0])))
            return cls._checked(abs=_opt_float(text.get("abs", text.get("absolute"))),
                                rel=_opt_float(text.get("rel", text.get("relative"))))
        s = str(text).strip()
        try:
            if "=" in s:
                parts = dict(p.split("=", 1) for p in s.replace(";", ",").split(","))
                parts = {k.strip(): v.strip() for k, v in parts.items()}
                return cls.parse({k: (float(v[:-1]) / 100 if k.startswith("rel") and v.endswith("%") else float(v))
                                  for k, v in parts.items()})
            if s.endswith("%"):
                return cls._checked(rel=float(s[:-1]) / 100)
            return cls._checked(abs=float(s))
        except ValueError:
            raise WorkedError(Msg("tolerance: expected a number such as 0.01, a percentage such as 2%, or "
                                  "abs=0.01,rel=0.02; got {got}", got=repr(text))) from None

    @classmethod
    def _checked(cls, abs=None, rel=None):
        for name, v in (("abs", abs), ("rel", rel)):
            if v is not None and (not math.isfinite(v) or v < 0):
                raise WorkedError(Msg("tolerance: {name} must be a non-negative number, got {got}", name=name, got=v))
        return cls(abs=abs, rel=rel)

    def describe(self, decimals: int) -> str:
        if self.default:
            return ngettext("rounding to {n} decimal place, also at intermediate steps",
                            "rounding to {n} decimal places, also at intermediate steps", decimals)
        parts = []
        if self.abs is not None and (self.abs or not self.rel):
            parts.append(current().number(f"±{self.abs:g}"))
        if self.rel is not None and (self.rel or not self.abs):
            parts.append(current().number(f"±{self.rel * 100:g}%"))
        # a zero part adds nothing: "±0.01", not "±0.01 or ±0%"
        return _("{a} or {b}", a=parts[0], b=parts[1]) if len(parts) == 2 else "".join(parts)

    def to_dict(self, decimals: int) -> dict:
        return {"default": self.default, "abs": self.abs, "rel": self.rel, "description": self.describe(decimals)}


def _opt_float(v):
    if v is None:
        return None
    if isinstance(v, str) and v.strip().endswith("%"):
        return float(v.strip()[:-1]) / 100
    return float(v)


# ---------------------------------------------------------------- context: problem, solution, steps

class _Ctx:
    def __init__(self, problem, solution, tol: Tolerance):
        self.problem = problem
        self.tol = tol
        self.banded = Interval(problem)                 # every value may be rounded: the default band
        self.points = Interval(problem, widen=False)    # the exact values, as points
        self.h = self.banded.h
        self.reach = None                               # a block's: how far mixed rounding moves each entry (_reach)
        self.mats = solution.matrices()
        self.steps = {}
        for num, st in enumerate(solution.steps, 1):
            if st.result:
                self.steps[st.result] = (num, st)

    def step_of(self, key: str) -> dict | None:
        hit = self.steps.get(key)
        if not hit:
            return None
        num, st = hit
        return {"number": num, "id": st.id, "title": _words(st.title_prose), "head": st.head}


def _split(key: str) -> tuple[str, str]:
    """"head2.scaled" → ("head2.", "scaled"); "scaled" → ("", "scaled")."""
    if "." in key:
        a, b = key.split(".", 1)
        return a + ".", b
    return "", key


# ---------------------------------------------------------------- reading an answers dict

def normalize_answers(answers: dict, matrices: dict, multihead: bool) -> tuple[dict, list[dict]]:
    """Flatten nested per-head tables and aliases; return ({key: rows}, errors) with unknown keys as errors."""
    flat: dict[str, Any] = {}
    errors: list[dict] = []
    if not isinstance(answers, dict):
        return {}, [{"matrix": None, "entry": None,
                     "message": Msg("expected a table of matrices, such as scaled = [[...], ...]")}]

    def put(key, value):
        pre, base = _split(key)
        base = MATRIX_ALIASES.get(base, base)
        if not multihead and pre == "head1.":
            pre = ""
        k = pre + base
        if k not in matrices:
            names = ", ".join(matrices)
            if multihead and pre == "" and base in STAGES and base not in LAYER:
                message = Msg("{key}: unknown matrix (this problem has several heads: use head1.Q, …, concat, Z); "
                              "expected some of: {names}", key=key, names=names)
            else:
                message = Msg("{key}: unknown matrix; expected some of: {names}", key=key, names=names)
            errors.append({"matrix": key, "entry": None, "message": message})
            return
        if k in flat:
            errors.append({"matrix": key, "entry": None, "message": Msg("{key}: given twice", key=key)})
            return
        flat[k] = value

    for key, value in answers.items():
        key = str(key).strip()
        if key.startswith("_"):
            continue  # comments, such as "_comment" in JSON
        if key == "heads" and isinstance(value, list):
            for h, d in enumerate(value, 1):
                if isinstance(d, dict):
                    for k2, v2 in d.items():
                        put(f"head{h}.{k2}", v2)
                else:
                    errors.append({"matrix": f"heads[{h}]", "entry": None,
                                   "message": Msg("{key}: expected a table of matrices", key=f"heads[{h}]")})
        elif isinstance(value, dict):
            for k2, v2 in value.items():
                put(f"{key}.{k2}", v2)
        else:
            put(key, value)
    return flat, errors


def _entry_label(key: str, mat, i: int, j: int) -> str:
    return f"{key}[{i + 1},{j + 1}]"


def _read_matrix(key, rows, mat):
    """→ (grid of (exact, num) | "-oo" | None, raw strings, errors, invalid set). Raises _ShapeError."""
    r, c = mat.shape
    if not isinstance(rows, (list, tuple)):
        raise _ShapeError(Msg("{key}: expected a matrix of {rows} rows with {cols} entries each, such as [[1, 2], "
                              "[3, 4]]; got {got}", key=key, rows=r, cols=c, got=type(rows).__name__))
    if len(rows) != r:      # the plural of the count as English has it (one: singular), as de, es, pt do
        shape = dict(key=key, rows=r, cols=c, n=len(rows))
        raise _ShapeError(Msg("{key}: wrong shape: expected {rows}×{cols} ({rows} rows of {cols} entries), got {n} row",
                              **shape) if len(rows) == 1 else
                          Msg("{key}: wrong shape: expected {rows}×{cols} ({rows} rows of {cols} entries), got {n} rows",
                              **shape))
    for i, row in enumerate(rows):
        if not isinstance(row, (list, tuple)):
            msg = Msg("{key}: row {i}: expected a list of {cols} entries, got {got}", key=key, i=i + 1, cols=c, got="")
            raise _ShapeError(Msg(msg.msgid, **{**msg.args, "got": repr(row)[:max(0, 200 - len(msg))]}))  # at most 200
        if len(row) != c:
            shape = dict(key=key, rows=r, cols=c, i=i + 1, n=len(row))
            raise _ShapeError(Msg("{key}: wrong shape: expected {rows}×{cols}; row {i} has {n} entry", **shape)
                              if len(row) == 1 else
                              Msg("{key}: wrong shape: expected {rows}×{cols}; row {i} has {n} entries", **shape))
    grid, raw, errors = [], [], []
    for i, row in enumerate(rows):
        g, rr = [], []
        for j, v in enumerate(row):
            rr.append(_raw_text(v))
            try:
                val = _read(v)
                if val is not None and val[1] is None and mat.name not in MAY_BE_INF:
                    raise ExpressionError(Msg("−∞ is only an answer for masked scores"))
                g.append(val)
            except ExpressionError as exc:
                errors.append({"matrix": key, "entry": [i + 1, j + 1], "label": _entry_label(key, mat, i, j),
                               "message": Msg("{key}: cannot read {text}: {reason}", key=_entry_label(key, mat, i, j),
                                              text=repr(rr[-1]), reason=exc.args[0] if exc.args else str(exc))})
                g.append("invalid")
        grid.append(g)
        raw.append(rr)
    return grid, raw, errors


class _ShapeError(Exception):
    pass


def _raw_text(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "…"


# ---------------------------------------------------------------- the report

@dataclass
class MatrixReport:
    key: str
    symbol: str
    step: dict | None
    rows: list[str]
    cols: list[str]
    verdicts: list[list[str]]          # "correct" | "wrong" | "blank" | "invalid"
    carried: list[list[bool]]          # wrong, but right from the student's own earlier answers
    answers: list[list[str]]
    expected: list[list[str]]
    consistent: bool | None
    based_on: list[str]
    diagnoses: list[dict] = field(default_factory=list)
    errors: list[dict] = field(default_factory=list)
    not_carried: list[int] = field(default_factory=list)   # rows (from 0) the student's values have no value in

    def count(self, what: str) -> int:
        return sum(v == what for row in self.verdicts for v in row)

    @property
    def n_carried(self) -> int:
        return sum(c for row in self.carried for c in row)

    def to_dict(self, reveal: bool) -> dict:
        d = {
            "matrix": self.key,
            "step": self.step,
            "shape": [len(self.rows), len(self.cols)],
            "rows": self.rows,
            "cols": self.cols,
            "verdicts": self.verdicts,
            "carried_forward": self.carried,
            "answers": self.answers,
            "counts": {"correct": self.count("correct"), "wrong": self.count("wrong"), "blank": self.count("blank"),
                       "invalid": self.count("invalid"), "carried_forward": self.n_carried},
            "consistent_with_earlier": self.consistent,
            "based_on": self.based_on,
            "diagnoses": self.diagnoses,
            "errors": self.errors,
            "not_carried": [i + 1 for i in self.not_carried],
        }
        if reveal:
            d["expected"] = self.expected
        return d


MARKS = {"correct": "✓", "wrong": "✗", "blank": "·", "invalid": "?"}
CARRIED_MARK = "↪"


@dataclass
class Report:
    """The result of :func:`check_answers`. ``to_dict()`` is the JSON of ``worked check --format json``;
    ``text()`` is the text output (a ✓/✗/· table per matrix, then the diagnoses)."""

    title: str
    decimals: int
    tolerance: Tolerance
    matrices: list[MatrixReport]
    errors: list[dict]
    diagnoses: list[dict]
    reveal: bool = False

    def summary(self) -> dict:
        s = {"correct": 0, "wrong": 0, "blank": 0, "invalid": 0, "carried_forward": 0}
        for m in self.matrices:
            for k in ("correct", "wrong", "blank", "invalid"):
                s[k] += m.count(k)
            s["carried_forward"] += m.n_carried
        s["answered"] = s["correct"] + s["wrong"]
        # wrong entries that a named mistake explains, and the ones neither a mistake nor an earlier slip does
        s["explained"] = s["unexplained"] = 0
        for m in self.matrices:
            shown = {(i - 1, j - 1) for d in m.diagnoses if not MISTAKES[d["code"]].accepted for i, j in d["entries"]}
            for i, row in enumerate(m.verdicts):
                for j, v in enumerate(row):
                    if v == "wrong" and not m.carried[i][j]:
                        s["explained" if (i, j) in shown else "unexplained"] += 1
        s["mistakes"] = list(dict.fromkeys(d["code"] for d in self.diagnoses if not MISTAKES[d["code"]].accepted))
        return s

    def summary_line(self) -> str:
        """One sentence: "1 mistake (no-scaling), everything after it carried forward correctly. …" when a
        named mistake and error carried forward explain every wrong entry; else the counts."""
        s = self.summary()
        total = s["correct"] + s["wrong"] + s["blank"] + s["invalid"]
        counts = _("{correct} of {total} entries correct", correct=s["correct"], total=total)
        rest = ""
        if s["blank"]:
            rest += _(", {n} not answered", n=s["blank"])
        if s["invalid"]:
            rest += _(", {n} unreadable", n=s["invalid"])
        codes = s["mistakes"]
        if codes and s["wrong"] and not s["unexplained"]:
            n = len(codes)
            head = ngettext("{n} mistake ({codes})", "{n} mistakes ({codes})", n, codes=", ".join(codes))
            if s["carried_forward"]:
                head += ngettext(", everything after it carried forward correctly",
                                 ", everything after them carried forward correctly", n)
            tail = ngettext("{n} shows the mistake", "{n} show the mistake", s["explained"])
            if s["carried_forward"]:
                tail += _(", {n} carried forward", n=s["carried_forward"])
            return _("{mistakes}: {counts}, {entries}{rest}.", mistakes=head, counts=counts, entries=tail, rest=rest)
        line = counts
        if s["wrong"]:
            line += _(", {n} wrong", n=s["wrong"])
            if s["carried_forward"]:
                line += _(" ({n} of them only because of an earlier slip)", n=s["carried_forward"])
        return line + rest + "."

    def to_dict(self) -> dict:
        """The report as data (``worked check --format json``: English). Made in another language (the web page's
        check, :func:`worked.i18n.using`), its words are that language's: the step titles, the mistakes' titles and
        messages, the summary line and the tolerance's description."""
        d = {
            "title": self.title,
            "decimals": self.decimals,
            "tolerance": self.tolerance.to_dict(self.decimals),
            "summary": self.summary(),
            "summary_text": self.summary_line(),
            "matrices": {m.key: m.to_dict(self.reveal) for m in self.matrices},
            "diagnoses": self.diagnoses,
            "errors": self.errors,
        }
        return d if current().is_source else _in_language(d)

    def text(self) -> str:
        out = []
        head = _("Checking answers: {title}", title=self.title) if self.title else _("Checking answers")
        out += [head, "=" * len(head), _("tolerance: {tolerance}", tolerance=self.tolerance.describe(self.decimals)), ""]
        for e in self.errors:
            out.append(_("problem: {message}", message=localized_text(e["message"])))
        if self.errors:
            out.append("")
        any_carried = False
        for m in self.matrices:
            st = m.step
            label = _("Step {n}. {title}", n=st["number"], title=_shown(st["title"])) if st else m.key
            c, w, b = m.count("correct"), m.count("wrong"), m.count("blank")
            total = len(m.rows) * len(m.cols)
            parts = [_("{correct} of {total} correct", correct=c, total=total)]
            if w:
                parts.append(_("{n} wrong", n=w))
            if b:
                parts.append(_("{n} not answered", n=b))
            if m.count("invalid"):
                parts.append(_("{n} unreadable", n=m.count("invalid")))
            out.append(f"{m.key}  ({label})")
            out.append("  " + ", ".join(parts))
            marks = [[CARRIED_MARK if m.carried[i][j] else MARKS[v] for j, v in enumerate(row)]
                     for i, row in enumerate(m.verdicts)]
            any_carried |= any(m.carried[i][j] for i in range(len(m.rows)) for j in range(len(m.cols)))
            shown = [[a if m.verdicts[i][j] != "blank" else "" for j, a in enumerate(row)] for i, row in enumerate(m.answers)]
            out += _table(m.rows, m.cols, marks, shown)
            for e in m.errors:
                out.append(f"  ! {localized_text(e['message'])}")
            steps = ", ".join(m.based_on)
            if m.consistent is True and w:
                which = _("every entry") if m.n_carried == w else _("{n} of the {wrong} wrong entries", n=m.n_carried, wrong=w)
                out.append(ngettext("  Consistent with your earlier step ({steps}): computed from your own answers there, "
                                    "{which} follows correctly (error carried forward).",
                                    "  Consistent with your earlier steps ({steps}): computed from your own answers there, "
                                    "{which} follows correctly (error carried forward).", len(m.based_on), steps=steps,
                                    which=which))
            elif m.consistent is True:
                out.append(ngettext("  Consistent with your earlier step ({steps}).",
                                    "  Consistent with your earlier steps ({steps}).", len(m.based_on), steps=steps))
            elif m.consistent is False and m.n_carried:
                out.append(_("  {n} of the {wrong} wrong entries follow correctly from your earlier answers ({steps}); the "
                             "others do not.", n=m.n_carried, wrong=w, steps=steps))
            if m.not_carried:
                out.append(ngettext("  Your earlier answers could not be carried through row {rows} (a layer norm there "
                                    "meets a row of variance 0 with ε = 0, or what comes of one): its entries are judged "
                                    "against the right values.",
                                    "  Your earlier answers could not be carried through rows {rows} (a layer norm there "
                                    "meets a row of variance 0 with ε = 0, or what comes of one): their entries are "
                                    "judged against the right values.", len(m.not_carried),
                                    rows=", ".join(m.rows[i] for i in m.not_carried)))
            if self.reveal and (w or m.count("invalid")):
                for i in range(len(m.rows)):
                    for j in range(len(m.cols)):
                        if m.verdicts[i][j] in ("wrong", "invalid"):
                            out.append(_("  {entry} ({row}, {col}): you wrote {answer}, expected {expected}",
                                         entry=f"{m.key}[{i + 1},{j + 1}]", row=m.rows[i], col=m.cols[j],
                                         answer=m.answers[i][j], expected=current().number(m.expected[i][j])))
            out.append("")
        if any_carried:
            out.append(_("Marks: ✓ correct   ✗ wrong   {mark} wrong, but right from your own earlier answers   "
                         "· not answered   ? unreadable", mark=CARRIED_MARK))
            out.append("")
        else:
            out.append(_("Marks: ✓ correct   ✗ wrong   · not answered   ? unreadable"))
            out.append("")
        if self.diagnoses:
            heading = _("What went wrong")
            out.append(heading)
            out.append("-" * len(heading))
            for d in self.diagnoses:
                where = ", ".join(d["matrices"])
                step = d.get("step")
                reread = _(" Re-read Step {n} ({title}).", n=step["number"], title=_shown(step["title"])) if step else ""
                mark = _("note") if MISTAKES[d["code"]].accepted else "✗"
                out.append(_("{mark} {code} — {title} (in {where}).", mark=mark, code=d["code"], title=MISTAKES[d["code"]].title_text(),
                             where=where))
                out += ["    " + ln for ln in _wrap(_shown(d["message"]) + reread, 92)]
            out.append("")
        out.append(_("Summary: {summary}", summary=self.summary_line()))
        return "\n".join(out) + "\n"


class _Words(str):
    """Words in English (what the JSON holds) that keep their prose (``.prose``), so that a report in another
    language prints them in it."""

    prose: object = None


def _words(prose) -> _Words:
    """*prose* (a tree with words) as English text that remembers it."""
    from . import i18n

    with i18n.using(None):
        w = _Words(printers.text(prose))
    w.prose = prose
    return w


def _in_language(d):
    """A report's data with its words in the current language (a copy): words that remember their prose printed
    again, a mistake's title translated."""
    if isinstance(d, dict):
        out = {k: _in_language(v) for k, v in d.items()}
        if isinstance(d.get("code"), str) and d["code"] in MISTAKES and isinstance(d.get("title"), str):
            out["title"] = MISTAKES[d["code"]].title_text()
        return out
    if isinstance(d, list):
        return [_in_language(v) for v in d]
    if getattr(d, "prose", None) is not None:
        return _shown(d)
    if isinstance(d, Msg):      # an error's line (reading an answer)
        return d.localized()
    return d


def _shown(text: str) -> str:
    """Words as the current language writes them: the prose they remember, else the text as it is."""
    prose = getattr(text, "prose", None)
    return printers.text(prose) if prose is not None and not current().is_source else str(text)


def _wrap(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width) or [""]


def _table(rows, cols, marks, answers) -> list[str]:
    def cell(i, j):
        a = answers[i][j]
        a = a if len(a) <= 14 else a[:13] + "…"
        return f"{marks[i][j]} {a}" if a else marks[i][j]

    cells = [[cell(i, j) for j in range(len(cols))] for i in range(len(rows))]
    rw = max(len(r) for r in rows)
    widths = [max([len(cols[j])] + [len(cells[i][j]) for i in range(len(rows))]) for j in range(len(cols))]
    out = ["    " + " " * rw + "  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths))]
    for i, r in enumerate(rows):
        out.append("    " + r.ljust(rw) + "  " + "  ".join(cells[i][j].ljust(widths[j]) for j in range(len(cols))))
    return [ln.rstrip() for ln in out]


# ---------------------------------------------------------------- checking

def _bands(ctx: _Ctx, given=None, transform=None, centre=None, points=None) -> dict:
    """The acceptance band of every matrix under the chosen tolerance, for one scenario: the student's
    *given* entries carried forward, a mistake's *transform*. *centre*: the same scenario's exact values
    (points), when they are computed already; *points* the pass they come from (the banded backward pass of
    a training problem starts from it)."""
    if ctx.tol.default and stages.of(ctx.problem).attends:
        return _block_bands(ctx, given, transform)
    if ctx.tol.default:
        return run_pass(ctx.problem, ctx.banded, transform=transform, given=given, points=points).shown
    if centre is None:
        centre = run_pass(ctx.problem, ctx.points, transform=transform, given=given).shown
    band = {}
    for key, grid in centre.items():
        band[key] = []
        for row in grid:
            r = []
            for iv in row:
                if iv is None:
                    r.append(None)
                    continue
                c = CTX.divide(CTX.add(iv[0], iv[1]), 2)
                t = max(Decimal(repr(ctx.tol.abs or 0.0)), CTX.multiply(Decimal(repr(ctx.tol.rel or 0.0)), c.copy_abs()))
                r.append((CTX.subtract(iv[0], t), CTX.add(iv[1], t)))
            band[key].append(r)
    return band


def _block_bands(ctx: _Ctx, given=None, transform=None) -> dict:
    """A Transformer block's default bands: interval arithmetic through a layer norm (x − μ over a root of the
    same x) widens past use, so a block's band is the hull of the values along the ways a careful student
    rounds: exact (the 50-digit pass), every value rounded to the problem's places, or one place more, or the
    carried places (the :class:`~worked.attention.Hand` pass, from the same *given* entries at their middles), and,
    for the right values (no *transform*), any mixture of those places, a choice per step: the carried path ± how
    far such students land (:func:`_reach`, worked out once for the problem); widened by half a unit of the answer's
    last place."""
    p, h = ctx.problem, ctx.h
    exact = run_pass(p, ctx.points, transform=transform, given=given).shown
    mid = None if given is None else {k: [[a if a is NA or a is None else Fraction(CTX.divide(CTX.add(a[0], a[1]), 2))
                                            for a in row] for row in g] for k, g in given.items()}
    hands, carried = [], None
    for places in (p.decimals, p.decimals + 1, p.precision.carried):
        try:
            run = run_pass(p, Hand(p, "decimal", places), transform=transform, given=mid)
        except ZeroDivisionError:     # a mistake's rounded path divides by 0 (no e^x: a row of scores adding up to 0):
            continue                  # that path has no values, as the exact pass has none there
        hands.append(run.shown)
        carried = run.shown if places == p.precision.carried else None
    if transform is None and ctx.reach is None:
        ctx.reach = _reach(p)
    # what a right answer may be (the problem's values, or the student's own carried on) takes in every mixture of
    # places; a mistake's band is its paths' hull, as its values are the mistake's whatever the places
    reach = ctx.reach if transform is None and carried is not None else {}
    band = {}
    for key, grid in exact.items():
        rows = []
        for i, row in enumerate(grid):
            r = []
            for j, iv in enumerate(row):
                paths = [_decimal_of(x[key][i][j]) for x in hands if x[key][i][j] is not None]
                if iv is None and not paths:    # −∞ (a masked score), or no path has a value here
                    r.append(None)
                    continue
                # a carried path with no value here (it met a row a layer norm cannot normalise, or a ReLU input
                # the certified pass cannot place): the others' hull
                ends = ([] if iv is None else [iv[0], iv[1]]) + paths
                if key in reach and carried[key][i][j] is not None and (mid is None or key not in mid):
                    c, e = _decimal_of(carried[key][i][j]), Decimal(repr(reach[key][i][j]))
                    ends += [CTX.subtract(c, e), CTX.add(c, e)]
                r.append((CTX.subtract(min(ends), h), CTX.add(max(ends), h)))
            rows.append(r)
        band[key] = rows
    return band


REACH = (64, 2)     # _reach: the students drawn, and the margin on the farthest any of them lands
REACH_ENTRIES = 1500    # _reach takes a float pass per entry: a larger problem keeps the hull alone (README)


def _reach(p) -> dict:
    """How far from the carried path a student can land who rounds each step to the problem's places, one more, or
    the carried ones (a choice per step): per entry, the farthest that students drawn at random land (each step's
    places drawn, each entry's rounding error drawn within half a unit of them, plus what rounding inside the step
    moves: the step worked at those places from the carried values, against the same in floats), carried on to first
    order through every later step, times a margin (:data:`REACH`). The steps' derivatives are taken at the carried
    path by finite differences (a float pass per entry, every other value given); carried on linearly, the errors
    keep their signs, so no layer norm's x − μ over a root of the same x widens the band. The same for the same
    problem (the draws are seeded); {} where a pass has no value, or for more than :data:`REACH_ENTRIES` entries."""
    import math
    import random

    from .attention import Float

    places = (p.decimals, p.decimals + 1, p.precision.carried)
    try:
        run = run_pass(p, Hand(p, "decimal", places[-1]))
        flow = {k: run.carried.get(k, run.shown[k]) for k in run.shown}
        steps = [run_pass(p, Hand(p, "decimal", d), given=flow).shown for d in places]
    except ZeroDivisionError:
        return {}
    keys = list(run.shown)
    if sum(len(row) for k in keys for row in flow[k]) > REACH_ENTRIES:
        return {}

    def floats(grid):
        return [[-math.inf if x is None else float(x) for x in row] for row in grid]

    flow_f = {k: floats(flow[k]) for k in keys}
    fpass = Float()
    try:
        base = run_pass(p, fpass, given=flow_f).shown
    except (ArithmeticError, ValueError):
        return {}
    # each step's own error at each choice of places: half a unit, or what the step worked there moves, if more
    amp = [{k: [[0.0 if a is None or not math.isfinite(b) else max(0.5 * 10.0 ** -d, abs(float(a) - b))
                 for a, b in zip(ra, rb)] for ra, rb in zip(one[k], base[k])] for k in keys}
           for d, one in zip(places, steps)]
    feeds = {}          # (key, r, c) → [(key, i, j, derivative)] of the entries it is a direct input of
    for n, m in enumerate(keys):
        for r, row in enumerate(flow_f[m]):
            for c, x in enumerate(row):
                if not math.isfinite(x):
                    continue
                dx = 1e-6 * max(1.0, abs(x))
                moved = [list(rr) for rr in flow_f[m]]
                moved[r][c] = x + dx
                try:
                    out = run_pass(p, fpass, given={**flow_f, m: moved}).shown
                except (ArithmeticError, ValueError):
                    continue
                feeds[m, r, c] = [(k, i, j, (y - base[k][i][j]) / dx) for k in keys[n + 1:]
                                  for i, orow in enumerate(out[k]) for j, y in enumerate(orow)
                                  if math.isfinite(y) and math.isfinite(base[k][i][j]) and y != base[k][i][j]]
    rng = random.Random(0)
    paths, margin = REACH
    far = {k: [[0.0] * len(row) for row in flow_f[k]] for k in keys}
    for _ in range(paths):
        dev = {k: [[0.0] * len(row) for row in flow_f[k]] for k in keys}
        for k in keys:
            a = amp[rng.randrange(len(places))][k]
            for r, row in enumerate(dev[k]):
                for c in range(len(row)):
                    e = row[c] + rng.uniform(-1, 1) * a[r][c]
                    row[c] = e
                    if abs(e) > far[k][r][c]:
                        far[k][r][c] = abs(e)
                    for k2, i, j, g in feeds.get((k, r, c), ()):
                        dev[k2][i][j] += g * e
    return {k: [[margin * x for x in row] for row in grid] for k, grid in far.items()}


def _decimal_of(x) -> Decimal:
    """A hand's value (a Fraction) as a 50-digit Decimal."""
    return CTX.divide(Decimal(x.numerator), Decimal(x.denominator))


def _matches(ans, band) -> bool:
    """Does one read answer (exact, num) or −∞ lie in *band* (None = −∞)?"""
    exact, num = ans
    if band is None:
        return num is None
    if num is None:
        return False
    return contains(band, num)


_PLAIN_DECIMAL = re.compile(r"^\s*[-+−]?\d*(?:[.,](\d*))?\s*$")


def _given_grids(parsed: dict, keys=None, raw=None, h=None) -> dict:
    """The student's entries as the later stages see them (:data:`NA` where not given, None for −∞).

    With *raw* (the written texts) and *h* (half a unit of the problem's last place), a decimal entry is the
    interval of every value that rounds to it: the student may have carried on from the unrounded value
    (as the worksheet asks) or from the rounded one. Half a unit of the last written place when it has more
    places than the problem's, else *h* (0.5 may be 0.50, rounded to 2 places). Exact forms (1/3, e^2/(1+e^2))
    are points."""
    out = {}
    for key, grid in parsed.items():
        if keys is not None and key not in keys:
            continue
        g = []
        for i, row in enumerate(grid):
            r = []
            for j, a in enumerate(row):
                if a is None or a == "invalid":
                    r.append(NA)
                elif a[1] is None:
                    r.append(None)
                elif raw is None:
                    r.append(pt(a[1]))
                else:
                    m = _PLAIN_DECIMAL.match(raw[key][i][j])
                    if m is None:
                        r.append(pt(a[1]))
                        continue
                    hh = min(h, Decimal(5).scaleb(-len(m.group(1) or "") - 1))
                    r.append((CTX.subtract(a[1], hh), CTX.add(a[1], hh)))
            g.append(r)
        out[key] = g
    return out


def _rank(key: str, multihead: bool) -> int:
    """The order of the stages: a head's Q … Z, then concat, then the output Z (several heads), then
    the training step's matrices in the order of the backward pass."""
    pre, base = _split(key)
    if multihead and not pre and base in LAYER:
        return len(STAGES) + LAYER.index(base)
    return _stage_rank(base)


def _stage_rank(stage: str) -> int:
    if stage in TRAIN_STAGES:
        return len(STAGES) + len(LAYER) + TRAIN_STAGES.index(stage)
    return STAGES.index(stage)


def _mistake_rank(stage: str, crosshead: bool) -> int:
    """The rank of the matrix where a mistake (made at *stage*) first shows."""
    if crosshead:
        return len(STAGES) + LAYER.index(stage)
    return _stage_rank(stage)


def _earlier(key: str, multihead: bool, nheads: int) -> list[str]:
    """Matrices whose values feed *key* (directly or not), nearest first."""
    pre, base = _split(key)
    if base in TRAIN_STAGES:
        heads = [f"head{h}." for h in range(1, nheads + 1)] if multihead else [""]
        out = []
        for b in reversed(TRAIN_STAGES[:TRAIN_STAGES.index(base)]):
            out += [b] if b in TRAIN_LAYER and multihead else [p + b for p in heads]
        return out + (list(reversed(LAYER)) if multihead else []) + [p + b for p in heads for b in reversed(STAGES)]
    if multihead and not pre and base in LAYER:
        out = list(reversed(LAYER[:LAYER.index(base)]))
        for h in range(1, nheads + 1):
            out += [f"head{h}.{b}" for b in reversed(STAGES)]
        return out
    return [pre + b for b in stages.upstream(base)]


class _Layout:
    """The order of a problem's matrices, for what feeds what: the rank of a matrix, of the matrix a mistake first
    shows in, and the matrices before one (nearest first). Attention's by its stages (the functions above); a
    Transformer block's (its stages before the heads, the heads', after them) by the order of its steps, every
    earlier matrix feeding a later one."""

    def __init__(self, problem, mats):
        self.multihead, self.nheads = problem.multihead, len(problem.heads)
        self.order = list(mats) if stages.of(problem).attends else None

    def rank(self, key: str) -> int:
        if self.order is None:
            return _rank(key, self.multihead)
        return self.order.index(key) if key in self.order else len(self.order)

    def mistake_rank(self, stage: str, crosshead: bool) -> int:
        if self.order is None:
            return _mistake_rank(stage, crosshead)
        return next((k for k, key in enumerate(self.order) if (key == stage if crosshead else _split(key)[1] == stage)),
                    len(self.order))

    def earlier(self, key: str) -> list[str]:
        if self.order is None:
            return _earlier(key, self.multihead, self.nheads)
        return list(reversed(self.order[:self.rank(key)]))


def _stage_of(key: str) -> str:
    return _split(key)[1]


def check_answers(problem, answers: dict, *, tolerance=None, solution=None, reveal: bool = False) -> "Report":
    """Check *answers* (a dict like an answers file) against *problem*; return a :class:`Report`.

    *tolerance*: None for the default (any answer a careful student gets by rounding to the problem's
    decimals, also at intermediate steps), a number (absolute), a string (``"0.01"``, ``"2%"``) or a
    :class:`Tolerance`. *solution*: a ready ``solve(problem)`` result, to save solving again.
    *reveal*: include the expected values (JSON ``expected``; text lists them for wrong entries).
    Never raises for bad answers: unknown matrices, wrong shapes and unreadable entries are reported
    in ``errors`` and everything else is still checked. To check many answers to one problem, keep a
    :class:`Checker`.
    """
    return checker(problem, solution).check(answers, tolerance=tolerance, reveal=reveal)


def checker(problem, solution=None) -> "Checker | ChainChecker":
    """The checker of *problem*: a :class:`Checker`, or for a chain of blocks ([[blocks]]) a :class:`ChainChecker`."""
    if hasattr(problem, "block_problems"):
        return ChainChecker(problem, solution)
    return Checker(problem, solution)


class Checker:
    """Checks answers to one problem. What depends on the problem alone is worked out once and kept: its
    solution, the band of every entry under each tolerance, what each mistake gives from the correct
    values, the early-rounding values and the expected decimals. So checking a class's answers to one
    problem, or one student checking again, costs only what depends on the answers (reading them, the
    bands from the student's own earlier answers, the mistakes from those). ``Checker(p).check(a)`` is
    ``check_answers(p, a)``, the same report."""

    def __init__(self, problem, solution=None):
        if solution is None:
            from .solver import solve

            solution = solve(problem)
        self.problem, self.solution = problem, solution
        self._ctx: dict = {}          # Tolerance → _Ctx
        self._true: dict = {}         # Tolerance → the bands of the correct values
        self._centres: dict = {}      # index into tried → a mistake's values from the correct ones
        self._mistake_bands: dict = {}  # (Tolerance, index) → their bands
        self._expected: dict = {}     # matrix → its expected decimals
        self._early: dict = {}        # (head prefix, matrix) → early-rounding values
        self._read: tuple | None = None   # the last answers read: (their JSON, what reading them gave)
        self._tried = None

    def ctx(self, tol: "Tolerance") -> _Ctx:
        if tol not in self._ctx:
            self._ctx[tol] = _Ctx(self.problem, self.solution, tol)
        return self._ctx[tol]

    def _true_band(self, ctx: _Ctx) -> dict:
        if ctx.tol not in self._true:
            self._true[ctx.tol] = _bands(ctx)
        return self._true[ctx.tol]

    def _tried_mistakes(self) -> list:
        if self._tried is None:
            arch = stages.of(self.problem)      # the mistakes its stages declare
            self._tried = [(m, t) for m in mistakes.of(arch) for t in m.transforms(self.problem)]
        return self._tried

    def _correct_centre(self, ctx: _Ctx, k: int, transform) -> dict:
        """The values of mistake *k* made on the correct values (no answers carried)."""
        if k not in self._centres:
            self._centres[k] = run_pass(self.problem, ctx.points, transform=transform, given=None)
        return self._centres[k].shown

    def _correct_scenario(self, ctx: _Ctx, k: int, transform) -> tuple:
        """(bands, values) of mistake *k* made on the correct values (no answers carried)."""
        centre = self._correct_centre(ctx, k, transform)
        if (ctx.tol, k) not in self._mistake_bands:
            self._mistake_bands[ctx.tol, k] = _bands(ctx, None, transform, centre, self._centres[k])
        return self._mistake_bands[ctx.tol, k], centre

    def _expected_of(self, key: str) -> list:
        if key not in self._expected:
            m, d = self.solution.matrices()[key], self.problem.decimals
            self._expected[key] = [[m.dec_plain(i, j, d) for j in range(m.shape[1])] for i in range(m.shape[0])]
        return [list(row) for row in self._expected[key]]

    def early_values(self, ctx: _Ctx, pre: str, base: str) -> list:
        if (pre, base) not in self._early:
            try:
                self._early[pre, base] = _early_values(ctx, pre, base)
            except (WorkedError, ArithmeticError):    # a block's early-rounded path through a layer norm of a row of
                self._early[pre, base] = []           # variance 0: no such path to point out
        return self._early[pre, base]

    def _read_answers(self, answers, mats) -> tuple:
        """(parsed, raw, entry errors, errors) of *answers*; the last answers read are kept (a variant's
        questions check the same answers under several tolerances)."""
        try:
            key = json.dumps(answers, sort_keys=True, default=repr)
        except (TypeError, ValueError, RecursionError):
            key = None
        if key is None or self._read is None or self._read[0] != key:
            flat, errors = normalize_answers(answers, mats, self.problem.multihead)
            parsed: dict[str, list] = {}
            raw: dict[str, list] = {}
            entry_errors: dict[str, list] = {}
            for k in mats:  # in the order of the worked steps
                if k not in flat:
                    continue
                try:
                    grid, rr, errs = _read_matrix(k, flat[k], mats[k])
                except _ShapeError as exc:
                    hint = _side_hint(self.problem, k, flat[k])
                    errors.append({"matrix": k, "entry": None, "message": Msg("{message} {hint}", message=exc.args[0],
                                                                              hint=hint) if hint else exc.args[0]})
                    continue
                parsed[k], raw[k], entry_errors[k] = grid, rr, errs
                errors.extend(errs)
            self._read = (key, (parsed, raw, entry_errors, errors))
        parsed, raw, entry_errors, errors = self._read[1]
        # the report keeps the lists it is given: a fresh copy for each report
        return (parsed, {k: [list(r) for r in v] for k, v in raw.items()},
                {k: list(v) for k, v in entry_errors.items()}, list(errors))

    def check(self, answers: dict, *, tolerance=None, reveal: bool = False, diagnose: bool = True) -> "Report":
        """The report of :func:`check_answers`. With *diagnose* False, only the verdicts and the error carried
        forward (no misconceptions, no early rounding): what a question's own tolerance changes."""
        problem = self.problem
        tol = Tolerance.parse(tolerance)
        ctx = self.ctx(tol)
        mats = ctx.mats
        parsed, raw, entry_errors, errors = self._read_answers(answers, mats)

        true_band = self._true_band(ctx)
        ecf: list = []

        def ecf_band(key):
            """The bands of the values computed from the student's own earlier entries (error carried forward):
            only a wrong entry needs them."""
            if not ecf:
                ecf.append(_bands(ctx, _given_grids(parsed, raw=raw, h=ctx.h)))
            return ecf[0][key]

        # verdicts
        verdict: dict[str, list] = {}
        carried: dict[str, list] = {}
        # the rows where the values computed from the student's own have none (a layer norm met a row it cannot
        # normalise, and everything after it): those entries are judged by the true values' band alone
        not_carried: dict[str, set] = {k: set() for k in parsed}
        for key, grid in parsed.items():
            V, C = [], []
            for i, row in enumerate(grid):
                vr, cr = [], []
                for j, a in enumerate(row):
                    if a is None:
                        vr.append("blank"), cr.append(False)
                    elif a == "invalid":
                        vr.append("invalid"), cr.append(False)
                    elif _matches(a, true_band[key][i][j]):
                        vr.append("correct"), cr.append(False)
                    else:
                        vr.append("wrong")
                        cr.append(_matches(a, ecf_band(key)[i][j]))
                        if ecf_band(key)[i][j] is None and true_band[key][i][j] is not None:
                            not_carried[key].add(i)
                V.append(vr)
                C.append(cr)
            verdict[key], carried[key] = V, C

        nheads = len(problem.heads)
        lay = _Layout(problem, mats)
        wrong_keys = {k for k, V in verdict.items() if any(v == "wrong" for row in V for v in row)}

        # misconceptions
        multihead = problem.multihead
        diag_by_key: dict[str, list[dict]] = {k: [] for k in parsed}
        arch = stages.of(problem)
        known = set(STAGES + LAYER + TRAIN_STAGES) | {s.id for s in stages.every(arch)}     # a block's stages too
        candidates = [k for k in parsed if _stage_of(k) in known
                      and any(verdict[k][i][j] == "wrong" and not carried[k][i][j]
                              for i in range(len(verdict[k])) for j in range(len(verdict[k][0])))]
        lone: dict[str, list] = {}      # a lone number's key → (distance, own, code, stage, chance) per mistake near
        if candidates and diagnose:
            tried = self._tried_mistakes()
            # how many mistakes could explain a matrix: a chance match is that much likelier (a wrong sign in one
            # matrix's update gives that matrix as the wrong sign in all three does: one explanation, counted once)
            reach = {k: sum(lay.mistake_rank(mistakes.stage_in(arch, m, t), t.across_heads) <= lay.rank(k)
                            for m, t in tried if t.update_of is None)
                     for k in candidates}
            for index, (mistake, transform) in enumerate(tried):
                code = mistake.id
                stage = mistakes.stage_in(arch, mistake, transform)
                crosshead = transform.across_heads
                rank = lay.mistake_rank(stage, crosshead)
                targets = [k for k in candidates if lay.rank(k) >= rank
                           # the mistake's own matrix answered right: it is not what went wrong later (a training step)
                           and not (_split(k)[0] + stage in parsed and _split(k)[0] + stage not in wrong_keys)]
                if not targets:
                    continue
                # the student's right answers may refute the mistake before its bands are worth computing
                centre = self._correct_centre(ctx, index, transform)
                # a mistake that changes a matrix's shape (cross-attention's keys from the decoder side, with fewer
                # decoder tokens) is compared in the matrices it leaves their shape: the shape error names it
                targets = [k for k in targets if k in centre and _same_shape(centre[k], true_band[k])
                           and not _refuted(k, rank, centre, parsed, verdict, true_band, lay)]
                if not targets:
                    continue
                before = {k for k in parsed if lay.rank(k) < rank}
                scenarios = [self._correct_scenario(ctx, index, transform)]
                if any(k in wrong_keys for k in before):
                    b = _given_grids(parsed, before, raw, ctx.h)
                    cpass = run_pass(problem, ctx.points, transform=transform, given=b)
                    centre = cpass.shown
                    scenarios.append((_bands(ctx, b, transform, centre, cpass), centre))
                for key in targets:
                    cands = [(band[key], centre[key]) for band, centre in scenarios]
                    hit = _diagnose(parsed[key], verdict[key], carried[key], true_band[key], cands, reach[key], ctx.h)
                    if hit and not any(d["code"] == code for d in diag_by_key[key]):
                        diag_by_key[key].append(_diag(ctx, code, key, hit, stage))
                    elif not hit and (near := _lone_match(parsed[key], verdict[key], carried[key], true_band[key],
                                                          cands, ctx.h)) is not None:
                        lone.setdefault(key, []).append((near[0], rank == lay.rank(key), code, stage, near[1]))
            # a lone number (the loss alone): named only by the mistake its own stage declares, when that mistake's
            # value is the nearest of those whose bands hold the answer, and a wrong value lands there by chance
            # rarely enough (_lone_match)
            for key, found in lone.items():
                found.sort(key=lambda f: f[0])
                dist, own, code, stage, chance = found[0]
                if own and chance <= EVIDENCE and not diag_by_key[key] and (len(found) == 1 or found[1][0] > dist):
                    diag_by_key[key].append(_diag(ctx, code, key, [(0, 0)], stage, chance=chance))

        # early rounding: accepted, but rounded before the end
        for key in parsed if diagnose else ():
            if _stage_of(key) in EARLY and not wrong_keys & ({key} | set(lay.earlier(key))):
                hit = _early_rounding(ctx, key, parsed[key], verdict[key], self)
                if hit:
                    diag_by_key[key].append(_diag(ctx, "early-rounding", key, hit))

        # per-matrix report
        reports = []
        for key in parsed:
            m = mats[key]
            feeds = [k for k in lay.earlier(key) if k in parsed]
            feeding_wrong = [k for k in feeds if k in wrong_keys]
            V, C = verdict[key], carried[key]
            answered = [(i, j) for i in range(len(V)) for j in range(len(V[0])) if V[i][j] in ("correct", "wrong")]
            if not feeding_wrong or not answered:
                consistent = None
            else:
                consistent = all(V[i][j] == "wrong" and C[i][j] or
                                 (V[i][j] == "correct" and _matches(parsed[key][i][j], ecf_band(key)[i][j]))
                                 for i, j in answered)
            reports.append(MatrixReport(key, printers.text(m.sym), ctx.step_of(key), list(m.rows), list(m.cols), V, C,
                                        raw[key], self._expected_of(key), consistent, feeding_wrong,
                                        diag_by_key[key], entry_errors[key], sorted(not_carried[key])))

        # all diagnoses, merged by (code, head)
        merged: dict[tuple, dict] = {}
        for r in reports:
            for d in r.diagnoses:
                k = (d["code"], _split(r.key)[0])
                if k not in merged:
                    merged[k] = {"code": d["code"], "title": d["title"], "message": d["message"], "step": d["step"],
                                 "matrices": [], "head": d.get("head")}
                merged[k]["matrices"].append(r.key)
        # several mistakes can explain the same few entries; keep the ones that explain the most matrices
        for k, d in list(merged.items()):
            others = [o for k2, o in merged.items() if k2 != k and k2[1] == k[1] and not MISTAKES[o["code"]].accepted]
            if not MISTAKES[d["code"]].accepted and any(set(d["matrices"]) < set(o["matrices"]) for o in others):
                del merged[k]
                for r in reports:
                    r.diagnoses = [x for x in r.diagnoses if not (x["code"] == d["code"] and _split(r.key)[0] == k[1])]
        order = {c: i for i, c in enumerate(MISTAKES)}
        diagnoses = sorted(merged.values(), key=lambda d: (d["head"] or 0, MISTAKES[d["code"]].accepted, order[d["code"]]))
        return Report(problem.title, problem.decimals, tol, reports, errors, diagnoses, reveal)


EVIDENCE = Decimal("0.01")   # the largest chance that random wrong values match a mistake, for it to be named


def _diagnose(grid, V, C, true_b, mistake_bands, reach=1, h=Decimal("0.005")):
    """Entries explained by the mistake, or None. The rule:

    * the wrong entries not explained by an earlier slip (W) are, at least 3 in 4 of them, what the
      mistake gives (in its band);
    * of the answered entries where the mistake changes the verdict (the mistake computed without any
      rounding would be judged wrong), at least 3 in 4 show the mistaken value; and
    * the evidence suffices: the chance that wrong values written at random (at the problem's places,
      within the matrix's spread of values) all land in the mistake's bands, times the number of mistakes
      (*reach*) that could explain this matrix, is at most :data:`EVIDENCE`. One wrong weight matches some
      mistake by chance too often to be named; a −∞ where only a wrong mask puts one, or several entries, are named.
    """
    W = [(i, j) for i in range(len(V)) for j in range(len(V[0])) if V[i][j] == "wrong" and not C[i][j]]
    if not W:
        return None
    for mb, centre in mistake_bands:
        explained = [(i, j) for i, j in W if _matches(grid[i][j], mb[i][j])]
        if not explained or 4 * len(explained) < 3 * len(W):
            continue
        visible = [(i, j) for i in range(len(V)) for j in range(len(V[0]))
                   if V[i][j] in ("correct", "wrong") and _changes(centre[i][j], true_b[i][j])]
        shown = [(i, j) for i, j in visible if _matches(grid[i][j], mb[i][j])]
        if visible and 4 * len(shown) >= 3 * len(visible) and _chance(explained, mb, true_b, h) * reach <= EVIDENCE:
            return explained
    return None


def _chance(entries, mb, true_b, h) -> Decimal:
    """The chance that a random wrong value lands in the mistake's band, multiplied over *entries*: a band
    of width w holds about (w + q)/q of the (spread + q)/q values written at the problem's places (q one
    unit of the last place). A −∞ where the value is finite, or a number where −∞ belongs, is what only a
    wrong mask gives: it counts as one value in 1000."""
    q = 2 * h
    ends = [x for row in mb + true_b for iv in row if iv is not None for x in iv]
    spread = max(Decimal(1), max(ends) - min(ends)) if ends else Decimal(1)
    p = Decimal(1)
    for i, j in entries:
        band = mb[i][j]
        if band is None or true_b[i][j] is None:
            p *= Decimal("0.001")
        else:
            p *= min(Decimal(1), (band[1] - band[0] + q) / (spread + q))
    return p


def _lone_match(grid, V, C, true_b, mistake_bands, h):
    """A lone number (a 1×1 matrix such as the loss), answered wrong and not explained by an earlier slip, that lies in
    the mistake's band (of one of its scenarios): (its distance from the mistake's value, the chance that a wrong value
    written at random lands in that band), else None. A wrong value is taken to be written at the problem's places
    anywhere from 0 to twice the right one (a loss is ≥ 0; a student's slip elsewhere moves it by any amount up to
    that): a band of width w holds (w + q)/(2·|right| + q) of them (q one unit of the last place)."""
    if len(V) != 1 or len(V[0]) != 1 or V[0][0] != "wrong" or C[0][0]:
        return None
    a, right = grid[0][0][1], true_b[0][0]
    if a is None or right is None:
        return None
    q = 2 * h
    scale = CTX.add(right[0], right[1]).copy_abs()           # twice the right value
    best = None
    for mb, centre in mistake_bands:
        band, c = mb[0][0], centre[0][0]
        if band is None or c is None or not contains(band, a):
            continue
        dist = CTX.subtract(a, CTX.divide(CTX.add(c[0], c[1]), 2)).copy_abs()
        chance = min(Decimal(1), CTX.divide(band[1] - band[0] + q, scale + q))
        if best is None or dist < best[0]:
            best = (dist, chance)
    return best


def _refuted(key, rank, centre, parsed, verdict, true_band, lay: "_Layout") -> bool:
    """Did the student show, in a matrix between the mistake's stage and *key*, that they made no such mistake:
    entries the mistake would change, answered correctly? (A K·Qᵀ is not seen in the weights of a student
    whose scores are right.)"""
    pre = _split(key)[0]
    for k in parsed:
        between = lay.rank(k) < lay.rank(key) and lay.rank(k) >= rank
        if not between or _split(k)[0] != pre or k not in centre or not _same_shape(centre[k], true_band[k]):
            continue
        V = verdict[k]
        if any(V[i][j] == "correct" and _changes(centre[k][i][j], true_band[k][i][j])
               for i in range(len(V)) for j in range(len(V[0]))):
            return True
    return False


def _side_hint(problem, key: str, rows) -> str:
    """Cross-attention: what a shape of the decoder side's token count, where the encoder side's belongs, says
    (a stage of a projection's shape has one row per token of the side it is projected from; one whose columns
    are the encoder side's tokens, one column per encoder token)."""
    if not problem.cross or problem.n == problem.n_kv or not isinstance(rows, (list, tuple)):
        return ""
    arch = stages.of(problem)
    base = _split(key)[1]
    stage = arch.stage(base)
    if stage is None:
        return ""
    sides = {k for k, _ in arch.inputs}
    proj = next((s for s in arch.forward if s.inputs[0] in sides and (s.rows, s.cols) == (stage.rows, stage.cols)), None)
    if proj is not None:
        own, other = (problem.n, problem.n_kv) if proj.rows == "n" else (problem.n_kv, problem.n)
        if len(rows) == other:
            code = next(m.id for s in arch.forward if s.inputs[0] == proj.inputs[0] for m in s.mistakes)
            args = dict(key=base, stage=proj.id, a=proj.inputs[0], b=proj.inputs[1], n=other, code=code)
            if proj.rows == "n":
                return Msg("({key} has one row per decoder token: {stage} = {a}·{b} in cross-attention; {n} rows are "
                           "the encoder side's tokens) [{code}]", **args)
            return Msg("({key} has one row per encoder token: {stage} = {a}·{b} in cross-attention; {n} rows are "
                       "the decoder side's tokens) [{code}]", **args)
    if stage.cols == "n_kv" and rows and isinstance(rows[0], (list, tuple)) and len(rows[0]) == problem.n:
        return Msg("(one column per encoder token: {n_kv} in cross-attention, not the decoder side's {n})",
                   n_kv=problem.n_kv, n=problem.n)
    return ""


def _same_shape(a, b) -> bool:
    return len(a) == len(b) and len(a[0]) == len(b[0])


def _changes(centre, band) -> bool:
    """Would the mistaken value (a point, or None for −∞) be judged wrong?"""
    if centre is None or band is None:
        return (centre is None) != (band is None)
    mid = CTX.divide(CTX.add(centre[0], centre[1]), 2)
    return not contains(band, mid)


def _diag(ctx: _Ctx, code: str, key: str, entries, stage: str | None = None, chance: Decimal | None = None) -> dict:
    """A diagnosis of *code* on *key*; *stage*: the matrix where it first showed (by default the mistake's);
    *chance*: named from one number alone (:func:`_lone_match`), the chance that a wrong value lands there at random,
    which the message states."""
    mistake = MISTAKES[code]
    pre, base = _split(key)
    step = ctx.step_of(key if mistake.accepted else pre + (stage or mistake.stage))
    msg = mistake.message_prose(ctx.problem)
    if mistake.accepted and base in EARLY:        # rounded too early: where
        soft, own = EARLY[base]
        msg = eq.prose(msg, " ", eq.say(soft.rounded_early[0 if own else 1]))
    if chance is not None:                        # how sure: named from one number
        msg = eq.prose(msg, " ", eq.say("Named from this one number ({entry}) alone: a wrong value written at random "
                                        "lands this close to what the mistake gives about 1 time in {n}.",
                                        entry=key, n=str(int(1 / chance))))
    msg = _words(msg)
    head = int(pre[4:-1]) if pre else None
    return {"code": code, "title": mistake.title, "message": msg, "step": step, "head": head,
            "entries": [[i + 1, j + 1] for i, j in entries]}


def _early_rounding(ctx: _Ctx, key: str, grid, V, checker: "Checker | None" = None):
    """Accepted entries that are not the exact value rounded at the end but are what rounding earlier gives."""
    m = ctx.mats[key]
    slack = CTX.add(CTX.multiply(ctx.h, Decimal("1.000000001")), Decimal("1e-20"))
    loose = []
    for i, row in enumerate(grid):
        for j, a in enumerate(row):
            if V[i][j] != "correct" or a[1] is None:
                continue
            v = m.num[i][j]
            if CTX.subtract(a[1], v).copy_abs() > slack:
                loose.append((i, j))
    if not loose:
        return None
    pre, base = _split(key)
    cand = checker.early_values(ctx, pre, base) if checker is not None else _early_values(ctx, pre, base)
    if all(any(CTX.subtract(grid[i][j][1], c[i][j]).copy_abs() <= slack for c in cand) for i, j in loose):
        return loose
    return None


def _early_values(ctx: _Ctx, pre: str, base: str) -> list:
    """Point values of *base* (a head's weights or Z) when earlier values are rounded to the problem's
    places, along a few such paths: the scaled scores rounded, each e^x rounded, or both; for Z, the
    weights of each of those (or the exact weights) rounded. None for the output of several heads."""
    p, points = ctx.problem, ctx.points
    if p.multihead and not pre:
        return []
    early_e = Interval(p, widen=False, round_exp=True)
    exact = run_pass(p, points, backward=False).shown     # a block's heads take X0 (or N1): its whole forward pass

    def rounded(grid):
        return [[None if x is None else pt(points.round(x[0])) for x in row] for row in grid]

    def values(grid):
        return [[x[0] for x in row] for row in grid]

    soft, own = EARLY[base]             # the softmax (its input rounded, its e^x rounded), or the stage after it
    A, (T,) = pre + soft.id, soft.inputs
    T_r = {pre + T: rounded(exact[pre + T])}
    weights = [exact[A]] + [run_pass(p, backend, given=given, backward=False).shown[A]
                            for backend, given in ((points, T_r), (early_e, T_r), (early_e, None))]
    if own:
        return [values(w) for w in weights[1:]]
    return [values(run_pass(p, points, given={A: rounded(w)}, backward=False).shown[pre + base]) for w in weights]


# ---------------------------------------------------------------- answers files

def read_answers(path) -> dict:
    """Read an answers file (TOML or JSON). Decimals are kept as strings, so they stay exact.

    Raises :class:`WorkedError` naming the file when it cannot be read (:mod:`worked.readfile`: regular
    files only, at most 1 MB, a BOM allowed)."""
    from .readfile import read_text

    text = read_text(path, expected=Msg("a .toml or .json answers file"))
    return parse_answers_text(text, str(path), "json" if Path(path).suffix.lower() == ".json" else None)


def parse_answers_text(text: str, source: str = "<answers>", fmt: str | None = None) -> dict:
    from .readfile import loads_json, loads_toml

    text = text.removeprefix("\ufeff")
    fmt = fmt or ("json" if source.endswith(".json") or text.lstrip().startswith("{") else "toml")
    data = loads_json(text, source, constants=True) if fmt == "json" else loads_toml(text, source)
    if not isinstance(data, dict):
        raise WorkedError(Msg("{file}: expected a table of matrices, such as scaled = [[...], ...]", file=source))
    return data


# ---------------------------------------------------------------- a chain of blocks ([[blocks]])

_BLOCK_KEY = re.compile(r"block(\d+)\.(.+)")


class ChainChecker:
    """Checks answers to a chain of blocks (:class:`worked.chain.Chain`): answers keyed ``block1.Q`` … (or
    tables ``[block1]``; ``Z`` alone is the last block's output), each block checked as its own problem by a
    :class:`Checker`. Block k+1 is checked against the key and, when the student gave every entry of block k's
    output and it differs from the key's once rounded, also against the block worked from the student's own
    output (rounded to the problem's decimals, as the key carries it on): a wrong entry right from there is
    carried forward, and the mistakes are named from there."""

    def __init__(self, chain, solution=None):
        if solution is None:
            from .solver import solve

            solution = solve(chain)
        self.problem, self.solution = chain, solution
        self._checkers = [Checker(b.problem, b) for b in solution.blocks]
        self._own: dict = {}          # (block, its X) → the Checker of the block worked from the student's X

    def _split(self, answers) -> tuple[list[dict], list[dict], str | None]:
        """The answers by block (a list of each block's answers), the errors of keys that name no block, and the
        name a top-level ``Z`` (the last block's output, reported under that name) was given by, or None."""
        n = len(self.solution.blocks)
        alias = None
        parts: list[dict] = [{} for _ in range(n)]
        errors: list[dict] = []
        if not isinstance(answers, dict):
            return parts, [{"matrix": None, "entry": None, "message": Msg("expected a table of matrices, such as "
                                                                          "block1.scaled = [[...], ...]")}], None
        for key, value in answers.items():
            key = str(key).strip()
            if key.startswith("_"):
                continue
            m = _BLOCK_KEY.fullmatch(key) or re.fullmatch(r"block(\d+)()", key)
            if key in (stages.OUTPUT, "output"):
                out = stages.OUTPUT
                if any(str(o).strip() in (f"block{n}.{out}", f"block{n}.output") for o in answers) or \
                        isinstance(answers.get(f"block{n}"), dict) and out in answers[f"block{n}"]:
                    errors.append({"matrix": key, "entry": None, "message": Msg("{key}: given twice (also as {other})", key=key,
                                                                                  other=f"block{n}.{out}")})
                    continue
                k, rest = n, stages.OUTPUT
                alias = key
            elif m and 1 <= int(m.group(1)) <= n:
                k, rest = int(m.group(1)), m.group(2)
            else:
                errors.append({"matrix": key, "entry": None, "message": Msg("{key}: unknown matrix; a chain's answers are "
                                                                              "named by block: block1.Q, …, {last} (or "
                                                                              "tables [block1], …)", key=key,
                                                                              last=f"block{n}.Z")})
                continue
            if rest:
                parts[k - 1][rest] = value
            elif isinstance(value, dict):
                for k2, v2 in value.items():
                    parts[k - 1][k2] = value[k2]
            else:
                errors.append({"matrix": key, "entry": None,
                               "message": Msg("{key}: expected a table of that block's matrices", key=key)})
        return parts, errors, alias

    def _own_X(self, k: int, given: dict):
        """Block *k*'s X from the student's own output of block k−1 (every entry readable), rounded to the
        problem's decimals as exact Fractions; None when not given whole, or the same as the key's."""
        from .numfmt import round_decimal

        prev = self.solution.blocks[k - 2]
        out_key = stages.OUTPUT
        rows = given.get(out_key, given.get("output"))
        r, c = prev.output.shape
        if not isinstance(rows, (list, tuple)) or len(rows) != r:
            return None
        X = []
        for row in rows:
            if not isinstance(row, (list, tuple)) or len(row) != c:
                return None
            out = []
            for v in row:
                try:
                    got = _read(v)
                except ExpressionError:
                    return None
                if got is None or got[1] is None:
                    return None
                out.append(Fraction(round_decimal(got[0], got[1], self.problem.decimals)))
            X.append(tuple(out))
        X = tuple(X)
        return None if X == self.solution.blocks[k - 1].problem.X else X

    def _own_checker(self, k: int, X) -> "Checker | None":
        if (k, X) not in self._own:
            from .solver import solve

            try:
                p = self.problem.problem(k, X)
                self._own[(k, X)] = Checker(p, solve(p, display=self.solution.blocks[k - 1].display))
            except WorkedError:
                self._own[(k, X)] = None      # the student's values make no problem a hand can do: the key's
        return self._own[(k, X)]

    def check(self, answers: dict, *, tolerance=None, reveal: bool = False, diagnose: bool = True) -> "Report":
        tol = Tolerance.parse(tolerance)
        parts, errors, alias = self._split(answers)
        matrices, diagnoses = [], []
        first = 0
        for k, (ch, given) in enumerate(zip(self._checkers, parts), 1):
            rep = ch.check(given, tolerance=tol, reveal=reveal, diagnose=diagnose)
            own = self._own_checker(k, X) if k > 1 and (X := self._own_X(k, parts[k - 2])) is not None else None
            if own is not None:
                mine = own.check(given, tolerance=tol, reveal=False, diagnose=diagnose)
                by_key = {m.key: m for m in mine.matrices}
                for m in rep.matrices:
                    o = by_key.get(m.key)
                    if o is None:
                        continue
                    for i, row in enumerate(m.verdicts):
                        for j, v in enumerate(row):
                            if v == "wrong" and o.verdicts[i][j] == "correct":
                                m.carried[i][j] = True
                    if any(c for row in m.carried for c in row):
                        m.based_on = [f"block{k - 1}.Z"] + [f"block{k}.{b}" for b in m.based_on]
                        wrong = [(i, j) for i, row in enumerate(m.verdicts) for j, v in enumerate(row) if v == "wrong"]
                        m.consistent = all(m.carried[i][j] for i, j in wrong)
                    else:
                        m.based_on = [f"block{k}.{b}" for b in m.based_on]
                    m.diagnoses = o.diagnoses
                rep_diag = mine.diagnoses
            else:
                for m in rep.matrices:
                    m.based_on = [f"block{k}.{b}" for b in m.based_on]
                rep_diag = rep.diagnoses
            pre = f"block{k}."
            for m in rep.matrices:
                for e in m.errors:
                    _prefix_error(e, pre)
                m.key = pre + m.key
                if m.step:
                    m.step = dict(m.step, number=m.step["number"] + first, block=k)
            for e in rep.errors:
                _prefix_error(e, pre)
            if k == len(self._checkers) and alias:     # answered as "Z": reported as "Z"
                for m in rep.matrices:
                    if m.key == pre + stages.OUTPUT:
                        m.key = stages.OUTPUT
            for d in rep_diag:
                d = dict(d, matrices=[pre + x for x in d.get("matrices", [])], block=k)
                if d.get("step"):
                    d["step"] = dict(d["step"], number=d["step"]["number"] + first, block=k)
                diagnoses.append(d)
            matrices += rep.matrices
            errors += rep.errors
            first += len(self.solution.blocks[k - 1].steps)
        return Report(self.problem.title, self.problem.decimals, tol, matrices, errors, diagnoses, reveal)


def _prefixed(msg: str, pre: str) -> str:
    """*msg*, which starts with a matrix's key, with *pre* before the key (a :class:`Msg` stays one: its first
    placeholder, ``{key}`` or the ``{message}`` that starts with it, prefixed)."""
    if isinstance(msg, Msg):
        first = msg.msgid[1:msg.msgid.find("}")] if msg.msgid.startswith("{") else None
        if first in ("key", "message"):
            return Msg(msg.msgid, **{**msg.args, first: _prefixed(msg.args[first], pre)})
    return pre + msg


def _prefix_error(e: dict, pre: str) -> None:
    key = e.get("matrix")
    if key:
        if e.get("message", "").startswith(key):
            e["message"] = _prefixed(e["message"], pre)
        if e.get("label"):
            e["label"] = pre + e["label"]
        e["matrix"] = pre + key
