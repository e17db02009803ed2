"""The auditor: re-reads every displayed text line and re-checks its arithmetic with plain floats.

A line is a chain of segments joined by `` = `` or `` ≈ ``. Segments that name things (``Q[cats, 1]``,
``x_cats·W_Q[:, 1]``, ``sum``) are labels and are skipped; every other segment is evaluated with
floats by :mod:`worked.exprs` (independently of sympy) and compared with the previous evaluable
segment:

* ``a = b`` must hold to within 1e-9 (relative): exact at the precision shown;
* ``a ≈ b`` must hold to within half a unit in the last place of the least precise decimal number
  written in either segment (``0.16·2 + 0.67·0 + 0.16·1 ≈ 0.49`` fails: it is 0.48).
"""
from __future__ import annotations

import math
import re

from . import exprs
from .errors import ExpressionError

_SPLIT = re.compile(r"\s+(=|≈)\s+")
_LABEL = re.compile(r"(?:[^\W\d_]|_)")
_KNOWN_WORDS = re.compile(r"\b(?:e|exp|sqrt|pi|oo|inf)\b|[√∞π]")
_DEC_LIT = re.compile(r"(?<![\w.])\d+\.(\d+)")


def _is_label(seg: str) -> bool:
    stripped = _KNOWN_WORDS.sub("", seg)
    return bool(_LABEL.search(stripped))


def _places(seg: str) -> int | None:
    found = [len(m.group(1)) for m in _DEC_LIT.finditer(seg)]
    return min(found) if found else None


def _close(a, b, tol) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        return all(_close(x, y, tol) for x, y in zip(a, b))
    if math.isinf(a) or math.isinf(b):
        return a == b
    if tol is None:
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    return abs(a - b) <= tol + 1e-12 * max(1.0, abs(a), abs(b))


_VALUES: dict = {}   # segment -> ("ok", value) | ("label", None) | ("error", message): exprs.value is a pure function
_NOT_NUMERIC = ("label", None)


def _value(seg: str):
    """``exprs.value(seg)`` remembered per segment (a step rebuilt with more places repeats most of them).

    Returns ``("ok", value)``, ``("label", None)`` when the segment names something, or ``("error", message)``."""
    hit = _VALUES.get(seg)
    if hit is None:
        try:
            hit = ("ok", exprs.value(seg, max_length=1_000_000))
        except exprs.NotNumeric:
            hit = _NOT_NUMERIC
        except ExpressionError as exc:
            hit = ("error", str(exc))
        if len(_VALUES) >= 50_000:
            _VALUES.clear()
        _VALUES[seg] = hit
    return hit


def audit_line(line: str, strict: bool = False) -> list[str]:
    """Problems with one displayed line (empty when every relation holds).

    With *strict*, ``≈`` allows only half a unit in the last place of the least precise number, not
    the rounding carried through arithmetic on rounded numbers: the solver prefers lines that pass it,
    so a student redoing the arithmetic by hand lands on the value shown."""
    parts = _SPLIT.split(line)
    segs, rels = parts[0::2], parts[1::2]
    out = []
    prev = None  # (segment, value)
    rel_since = None
    for k, seg in enumerate(segs):
        if k:
            r = rels[k - 1]
            rel_since = "≈" if (rel_since == "≈" or r == "≈") else r
        if _is_label(seg):
            continue
        kind, val = _value(seg)
        if kind == "label":
            continue
        if kind == "error":
            out.append(f"cannot read {seg!r}: {val}")
            prev = None
            continue
        if prev is not None:
            pseg, pval = prev
            if rel_since == "=":
                ok = _close(pval, val, None)
            else:
                places = [p for p in (_places(pseg), _places(seg)) if p is not None]
                tol = 0.5 * 10 ** -(min(places) if places else 0)
                ok = _close(pval, val, tol)
                if not ok and not strict:
                    # rounded numbers inside an expression (e.g. 0.0024787/0.0207943) carry their rounding
                    # through the arithmetic: allow the propagated rounding error too
                    ok = _close(pval, val, tol + _propagated(pseg) + _propagated(seg))
            if not ok:
                out.append(f"{pseg.strip()} {rel_since} {seg.strip()} does not hold ({_fmt(pval)} vs {_fmt(val)})")
        prev = (seg, val)
        rel_since = None
    return out


def _propagated(seg: str) -> float:
    """Worst-case effect on *seg*'s value of each decimal number in it being off by half a unit in its
    last place (first-order, by numerical partial derivatives). 0 for a bare number."""
    lits = list(_DEC_LIT.finditer(seg))
    if not lits or re.fullmatch(r"\s*[-−]?\s*\d+\.\d+\s*", seg):
        return 0.0
    try:
        base = exprs.value(seg, max_length=1_000_000)
    except Exception:
        return 0.0
    if isinstance(base, tuple):
        return 0.0
    total = 0.0
    for m in lits:
        half = 0.5 * 10 ** -len(m.group(1))
        h = half
        bumped = seg[:m.start()] + repr(float(m.group(0)) + h) + seg[m.end():]
        try:
            v = exprs.value(bumped, max_length=1_000_000)
        except Exception:
            return 0.0
        total += abs(v - base)
    return total * 1.01


def _fmt(v):
    if isinstance(v, tuple):
        return "[" + ", ".join(f"{x:.6g}" for x in v) + "]"
    return f"{v:.10g}"


_LINES: dict = {}   # (line, strict) -> its problems: audit_line is a pure function of its arguments


def _line_problems(line: str, strict: bool) -> tuple[str, ...]:
    key = (line, strict)
    problems = _LINES.get(key)
    if problems is None:   # a step rebuilt with more places repeats its exact lines: checked once
        problems = tuple(audit_line(line, strict))
        if len(_LINES) >= 50_000:
            _LINES.clear()
        _LINES[key] = problems
    return problems


def audit_lines(lines, strict: bool = False) -> list[str]:
    out = []
    for line in lines:
        out.extend(f"{line}: {p}" for p in _line_problems(line, strict))
    return out


def lines_hold(lines, strict: bool = False) -> bool:
    """``not audit_lines(lines, strict)``, stopping at the first line that fails (the lines after it are
    not checked: the solver only asks whether a step's lines all hold before trying more places)."""
    return all(not _line_problems(line, strict) for line in lines)


def audit(solution) -> list[str]:
    """Every problem found in a solution's displayed lines, as 'step title: line: problem'."""
    out = []
    for step in solution.steps:
        for line in step.lines:
            out.extend(f"{step.title}: {line.text}: {p}" for p in audit_line(line.text))
    return out
