"""Checking a student's answers: per-entry verdicts, error carried forward, named misconceptions.

Public API (used by ``worked check``, ``worked grade`` and the web server)::

    from worked.check import check_answers, parse_entry, read_answers
    report = check_answers(problem, {"scaled": [["1.41", "2.83", "1.41"], ...], "weights": ...})
    report.to_dict()   # the JSON of ``worked check --format json``
    report.text()      # the text of ``worked check``

The answers dict has the keys of an answers file: the JSON names of :meth:`Solution.matrices`
(``Q K V scores scaled weights Z``; with several heads ``head1.Q`` … ``head1.Z``, ``concat``, ``Z``),
or nested per-head tables (``{"head1": {"Q": ...}}``). Each value is a list of rows; an entry is
a number, a decimal or fraction string, an exact form (``"2√2"``, ``"e^2/(1+e^2)"``), or blank
(``""``, ``"?"``, ``None``) for "not answered".
"""
from __future__ import annotations

BLANKS = ("", "?")


def parse_entry(value):
    """Read one answer entry into an exact sympy value, or ``None`` when it is blank (``""``, ``"?"``, None).

    Numbers are read exactly (a float through its shortest decimal form), strings by the grammar of
    :mod:`worked.exprs` (never ``eval``/``sympify``). ``"-inf"``/``"−∞"`` give ``-oo`` (a masked score).
    Raises :class:`worked.errors.ExpressionError` for anything else.
    """
    raise NotImplementedError  # filled in below


def check_answers(problem, answers: dict, *, tolerance=None, solution=None):
    """Check *answers* (a dict like an answers file) against *problem*; return a :class:`Report`.

    *tolerance*: None for the default (any answer a careful student gets by rounding to the problem's
    decimals, also at intermediate steps), a number (absolute), or a :class:`Tolerance`.
    *solution*: a ready ``solve(problem)`` result, to save solving again.
    """
    raise NotImplementedError


class Report:
    """The result of :func:`check_answers`. ``to_dict()`` is the JSON of ``worked check --format json``;
    ``text()`` is the text output (a ✓/✗/· table per matrix, then the diagnoses)."""

    def to_dict(self) -> dict:
        raise NotImplementedError

    def text(self) -> str:
        raise NotImplementedError
