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
from fractions import Fraction

_DEC = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$")
_FRAC = re.compile(r"^([+-]?\d+)\s*/\s*(\d+)$")


class EntryError(ValueError):
    """Raised with a short description of what was wrong with one entry."""


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
        raise EntryError(f"expected a number, got {str(value).lower()}")
    if isinstance(value, int):
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
        raise EntryError(f"expected a rational number, got {value}")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise EntryError(f"expected a finite number, got {value}")
        text = repr(value)
        return Fraction(text), decimal_places(text)
    if isinstance(value, str):
        text = value.strip()
        if _DEC.match(text):
            f = Fraction(text)
            return f, decimal_places(text)
        m = _FRAC.match(text)
        if m:
            if int(m.group(2)) == 0:
                raise EntryError(f"fraction {text!r} has a zero denominator")
            return Fraction(int(m.group(1)), int(m.group(2))), 0
        if text.lower().lstrip("+-") in ("inf", "infinity", "nan", "∞"):
            raise EntryError(f"expected a finite number, got {value!r}")
        raise EntryError(f"expected a number such as 2, 0.43, \"0.43\" or \"1/2\", got {value!r}")
    raise EntryError(f"expected a number, got {type(value).__name__} {value!r}")
