"""Turning user-supplied entries into exact rational numbers (never via binary floats or sympify).

Accepted entries:

* integers (``3``, ``-2``);
* decimals, as numbers or strings (``0.43`` or ``"0.43"`` is exactly 43/100);
* fractions as strings (``"1/2"``, ``"-3/4"``);
* via the Python API also ``fractions.Fraction``, sympy Rationals and NumPy scalars. A binary float
  (Python or NumPy) is read through its shortest round-trip decimal representation, ``repr(x)``:
  ``0.1`` becomes exactly 1/10 and ``np.float64(0.5716...)`` becomes the 17-digit decimal it prints as.
"""
from __future__ import annotations

import math
import re
import reprlib
from fractions import Fraction

from .i18n import Msg

# patterns, compiled (and kept) by ``re`` when a decimal or fraction string is first read: a problem of
# integers needs none of them
_DEC = r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$"
_PARTS = r"^[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$"

MAX_EXPONENT = 100     # largest |e| in a written 1.5e-3: more is no hand exercise, and 1e99999999 would
                       # otherwise build a 100-million-digit integer
MAX_DIGITS = 100       # digits written in one decimal (mantissa)
_FRAC = r"^([+-]?\d+)\s*/\s*(\d+)$"


class EntryError(ValueError):
    """Raised with a short description of what was wrong with one entry."""


def decimal(text: str) -> Fraction:
    """The exact value of a decimal string (``"0.43"``, ``"-1.5e-3"``), after bounding what it costs: at
    most :data:`MAX_DIGITS` digits and an exponent of at most ±:data:`MAX_EXPONENT`, checked on the text
    before any number is built. Raises EntryError."""
    m = re.match(_PARTS, text.strip())
    if not m or not (m.group(1) or m.group(2)):
        raise EntryError(Msg("expected a decimal number, got {got}", got=shown(text)))
    exp = (m.group(3) or "").lstrip("+-").lstrip("0")
    if len(exp) > 3 or exp and int(exp) > MAX_EXPONENT:
        raise EntryError(Msg("the exponent of {number} is out of range (at most ±{limit})", number=_short(text),
                                limit=MAX_EXPONENT))
    if len(m.group(1)) + len(m.group(2) or "") > MAX_DIGITS:
        raise EntryError(Msg("{number} has more than {limit} digits", number=_short(text), limit=MAX_DIGITS))
    return Fraction(text.strip())


_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxlist, _REPR.maxdict, _REPR.maxstring, _REPR.maxother = 2, 4, 4, 40, 40


def shown(value) -> str:
    """A short ``repr`` of a user's value for an error message (deep or long values abbreviated)."""
    return _REPR.repr(value)


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 24 else text[:12] + "…" + text[-8:]


def decimal_places(text: str) -> int:
    """Number of decimal places written in a decimal string (``"0.430"`` → 3; ``"1e-3"`` → 3)."""
    m = re.match(r"^[+-]?(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$", text)
    if not m:
        return 0
    frac = len(m.group(2) or "")
    exp = int(m.group(3) or 0)
    return max(0, frac - exp)


def to_fraction(value) -> tuple[Fraction, int]:
    """Return ``(exact value, decimal places as written)`` for one entry, or raise EntryError."""
    if isinstance(value, bool):
        raise EntryError(Msg("expected a number, got {got}", got=str(value).lower()))
    if isinstance(value, int):
        if value.bit_length() > 4 * MAX_DIGITS:
            raise EntryError(Msg("an integer with more than {limit} digits is too large", limit=MAX_DIGITS))
        return Fraction(value), 0
    if isinstance(value, Fraction):
        return value, 0
    # NumPy scalars and sympy numbers, without importing either
    mod = type(value).__module__ or ""
    if mod.startswith("numpy"):
        if hasattr(value, "is_integer") and "int" in type(value).__name__:
            return Fraction(int(value)), 0
        value = float(value)
    elif mod.startswith("sympy"):
        if getattr(value, "is_Rational", False):
            return Fraction(int(value.p), int(value.q)), 0
        raise EntryError(Msg("expected a rational number, got {got}", got=value))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EntryError(Msg("expected a finite number, got {got}", got=value))
        text = repr(value)
        return decimal(text), decimal_places(text)
    if isinstance(value, str):
        text = value.strip()
        if re.match(_DEC, text):
            return decimal(text), decimal_places(text)
        m = re.match(_FRAC, text)
        if m:
            if len(m.group(1)) > MAX_DIGITS or len(m.group(2)) > MAX_DIGITS:
                raise EntryError(Msg("fraction {number} has more than {limit} digits", number=_short(text), limit=MAX_DIGITS))
            if int(m.group(2)) == 0:
                raise EntryError(Msg("fraction {number} has a zero denominator", number=shown(text)))
            return Fraction(int(m.group(1)), int(m.group(2))), 0
        if text.lower().lstrip("+-") in ("inf", "infinity", "nan", "∞"):
            raise EntryError(Msg("expected a finite number, got {got}", got=shown(value)))
        raise EntryError(Msg('expected a number such as 2, 0.43, "0.43" or "1/2", got {got}', got=shown(value)))
    raise EntryError(Msg("expected a number, got {type} {got}", type=type(value).__name__, got=shown(value)))
