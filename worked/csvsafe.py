"""CSV cells a spreadsheet will not run: OWASP's defence against CSV (formula) injection.

Excel, LibreOffice and Google Sheets treat a cell that begins with ``=``, ``+``, ``-`` or ``@`` as a
formula (``=HYPERLINK(…)``, ``=cmd|' /C calc'!A0``), and a leading tab or carriage return can hide such
a start. Every text cell that ``worked`` writes to a CSV and that begins with one of these characters is
prefixed with a single quote, as https://owasp.org/www-community/attacks/CSV_Injection advises, so the
spreadsheet shows it as text. A cell that is a plain number (``-0.25``) is left alone: it is a value, not
a formula, and reading it back gives the same number.
"""
from __future__ import annotations

import re

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def cell(value) -> str:
    """*value* as a CSV cell that no spreadsheet evaluates."""
    text = "" if value is None else str(value)
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def row(values) -> list[str]:
    return [cell(v) for v in values]
