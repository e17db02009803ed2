"""The auditor: evaluates every displayed line's tree and re-checks its arithmetic with plain floats.

A line is a chain ``a op b op c …`` (:class:`worked.eq.Rel`). Items that name things (``Q[cats, 1]``,
``x_cats·W_Q[:, 1]``, ``sum``) are labels and are skipped; every other item is evaluated from the
numbers as shown (:func:`worked.eq.evaluate`, independently of sympy) and compared with the
previous evaluable item. The hand rule: a student who redoes the line with the numbers shown gets the
digits shown.

* ``a = b`` must hold to within 1e-9 (relative): equal as shown;
* ``a ≈ b`` where *b* is a number (or a vector of numbers): *b* is *a* computed from the numbers shown,
  rounded to *b*'s places, so ``|a − b|`` is at most half a unit of *b*'s last place.
  ``0.1636·[2, 1] + 0.6728·[0, 2] + 0.1636·[1, 1] ≈ [0.4908, 1.6728]`` holds; ``… ≈ [0.4907, 1.6728]`` does
  not (the shown numbers give 0.49080), nor does ``0.16·2 + 0.67·0 + 0.16·1 = 0.49`` (it is 0.48);
* ``a ≈ b`` where *b* is itself arithmetic on shown numbers (``1/(2 + e^(√2)) ≈ 4.1133/25.1454``, the exact
  value and its hand form): the two must agree within the rounding that the shown decimals carry (each
  stands for a value within half a unit of its last place, carried through the arithmetic to first order).
"""
from __future__ import annotations

import math

from . import eq, printers


def _close(a, b, tol) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        if not (isinstance(a, tuple) and isinstance(b, tuple)) or len(a) != len(b):
            return False
        tols = tol if isinstance(tol, tuple) else (tol,) * len(a)
        return all(_close(x, y, t) for x, y, t in zip(a, b, tols))
    if math.isinf(a) or math.isinf(b):
        return a == b
    slack = 1e-9 * max(1.0, abs(a), abs(b))
    return abs(a - b) <= (tol or 0.0) + slack


def _add(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        a = a if isinstance(a, tuple) else (a,) * len(b)
        b = b if isinstance(b, tuple) else (b,) * len(a)
        return tuple(x + y for x, y in zip(a, b))
    return a + b


def _max(a, b):
    if isinstance(a, tuple) or isinstance(b, tuple):
        a = a if isinstance(a, tuple) else (a,) * len(b)
        b = b if isinstance(b, tuple) else (b,) * len(a)
        return tuple(max(x, y) for x, y in zip(a, b))
    return max(a, b)


def _fmt(v):
    if isinstance(v, tuple):
        return "[" + ", ".join(f"{x:.6g}" for x in v) + "]"
    return f"{v:.10g}"


def _places(node):
    """The places of a number as shown (a tuple for a vector), or None when *node* is not a plain number."""
    t = type(node)
    if t is eq.Dec:
        return node.places
    if t is eq.Num:
        v = node.value
        p = 0
        while (v * 10**p).denominator != 1:
            p += 1
            if p > 12:
                return None       # 1/3 is not a decimal: compared exactly
        return p
    if t is eq.Neg:
        return _places(node.arg)
    if t is eq.Vec:
        ps = tuple(_places(x) for x in node.items)
        return None if any(p is None for p in ps) else ps
    return None


def _half_unit(places):
    if isinstance(places, tuple):
        return tuple(0.5 * 10.0 ** -p for p in places)
    return 0.5 * 10.0 ** -places


def audit_rel(rel: eq.Rel) -> list[str]:
    """Problems with one displayed line (empty when every relation holds)."""
    out = []
    prev = None          # (item, value, error)
    rel_since = None
    for k, item in enumerate(rel.items):
        if k:
            r = rel.ops[k - 1]
            rel_since = eq.APPROX if (rel_since == eq.APPROX or r == eq.APPROX) else r
        try:
            got = eq.evaluate(item)
        except (ValueError, ZeroDivisionError, OverflowError, TypeError) as exc:
            out.append(f"cannot evaluate {printers.text(item)!r}: {exc}")
            prev = None
            continue
        if got is None:
            continue
        val, err = got
        if prev is not None:
            pitem, pval, perr = prev
            if rel_since == eq.TO:
                ok = True
            elif rel_since == eq.EQ:
                ok = _close(pval, val, None)
                err = _max(err, perr)     # equal to what it stands for: the same rounding
            else:
                places = _places(item)
                if places is not None:    # the hand rule: b is a computed from the shown numbers, rounded
                    ok = _close(pval, val, _half_unit(places))
                else:                     # two forms of one value: within the rounding they carry
                    ok = _close(pval, val, _add(perr, err))
            if not ok:
                out.append(f"{printers.text(pitem)} {rel_since} {printers.text(item)} does not hold "
                           f"({_fmt(pval)} vs {_fmt(val)})")
        prev = (item, val, err)
        rel_since = None
    return out


def audit_lines(lines) -> list[str]:
    """Problems with display lines (:class:`worked.model.Line` or trees), as 'line: problem'."""
    out = []
    for line in lines:
        tree = getattr(line, "eq", line)
        out.extend(f"{printers.text(tree)}: {p}" for p in audit_rel(tree))
    return out


def failure(what, lines) -> str | None:
    """The first problem with *lines* as one message, ``"<what>: shown arithmetic does not hold: <line>: <problem>"``
    (*what* is text, or prose such as a step's title), or None when every line holds."""
    problems = audit_lines(lines)
    if not problems:
        return None
    return f"{printers.text(eq.prose(what))}: shown arithmetic does not hold: {problems[0]}"


def audit(solution) -> list[str]:
    """Every problem found in a solution's displayed lines, as 'step title: line: problem' (a chain of blocks,
    :class:`worked.chain.ChainSolution`: every block's)."""
    blocks = getattr(solution, "blocks", None)
    if isinstance(blocks, list):
        return [f"block {k}: {p}" for k, b in enumerate(blocks, 1) for p in audit(b)]
    out = []
    for step in solution.steps:
        problems = audit_lines(step.lines)
        if problems:
            title = printers.text(step.title_prose)
            out.extend(f"{title}: {p}" for p in problems)
    return out
