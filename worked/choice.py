"""Multiple-choice questions (a quiz's ``type = "choice"``): the wrong options are the values named mistakes give.

A choice question names one entry (``Z[1,2]``) or a scalar (``loss``). Its options, for one variant:

- the right value, shown at the problem's places (the key's digits: the exact value rounded half away from zero);
- a wrong option per named mistake (:func:`worked.mistakes.of` the problem's architecture, in the registry's
  order) whose value, shown at the same places, differs from the right one and from every option before it,
  until there are ``choices`` options: each carries its mistake's id and feedback;
- shuffled per variant, reproducibly (a generator seeded with SHA-256 of the variant's seed and the question's
  name), and lettered A, B, C, ….

Too few distinct wrong values: :class:`TooFewOptions`, and :func:`worked.quiz.draw_problem` draws the variant
again (seed + 1, …: the same for the same seed).

A response chooses an option by its letter (``B``, ``b``, ``(B)``) or by its value (``0.49``, ``0,49``, ``0.4908``: equal
at the places shown): :func:`chosen`. A choice question earns its points for the right option, none otherwise
(:func:`score`).
"""
from __future__ import annotations

import hashlib
import random
import re
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from .i18n import Msg

MIN_CHOICES, MAX_CHOICES = 2, 8
LETTERS = "ABCDEFGH"


class TooFewOptions(Exception):
    """The named mistakes give fewer distinct wrong values than the question needs (the variant is redrawn)."""


def shown(x, places: int) -> Decimal:
    """*x* (a float, a Decimal or a decimal string) at *places*, half away from zero; no negative zero."""
    d = (x if isinstance(x, Decimal) else Decimal(repr(x) if isinstance(x, float) else str(x)))
    d = d.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    return d.copy_abs() if d == 0 else d


def options(right: str, wrong: list[tuple[str, float, str]], choices: int, places: int, key: str) -> list[dict]:
    """The options of one question for one variant: *right* (the key's answer at *places*, a decimal string),
    *wrong* [(mistake id, value, feedback)] in the registry's order; shuffled with *key* (the variant's seed and
    the question's name). Raises :class:`TooFewOptions`."""
    r = shown(right, places)
    opts = [{"value": str(r), "right": True, "mistake": None, "feedback": "Correct."}]
    seen_ids = set()
    for mid, w, feedback in wrong:
        if len(opts) == choices:
            break
        if mid in seen_ids:
            continue          # one option per mistake (a causal problem's wrong mask is two transforms)
        s = shown(w, places)
        if any(s == Decimal(o["value"]) for o in opts):
            continue
        seen_ids.add(mid)
        opts.append({"value": str(s), "right": False, "mistake": mid, "feedback": feedback})
    if len(opts) < choices:
        at = dict(n=len(opts) - 1, needed=choices - 1)
        raise TooFewOptions(Msg("{n} distinct wrong value from the named mistakes, {needed} needed", **at) if len(opts) == 2
                            else Msg("{n} distinct wrong values from the named mistakes, {needed} needed", **at))
    rng = random.Random(int.from_bytes(hashlib.sha256(f"worked-choice\x00{key}".encode()).digest()[:8], "big"))
    rng.shuffle(opts)
    return [{"letter": LETTERS[k], **o} for k, o in enumerate(opts)]


_LETTER = re.compile(r"^\s*\(?\s*([A-Ha-h])\s*[).:]?\s*$")


def chosen(text, opts) -> dict | None:
    """The option a response *text* chooses (by letter, or by value equal at the places shown), or None."""
    if text is None:
        return None
    t = str(text).strip()
    if not t:
        return None
    m = _LETTER.match(t)
    if m:
        return next((o for o in opts if o["letter"] == m.group(1).upper()), None)
    t = t.replace("−", "-").replace(",", ".").replace(" ", "")
    try:
        d = Decimal(t)
    except InvalidOperation:
        return None
    if not d.is_finite():
        return None
    for o in opts:
        v = Decimal(o["value"])
        if shown(d, max(0, -v.as_tuple().exponent)) == v:
            return o
    return None


def score(text, opts, points: float) -> tuple[int, float, dict | None]:
    """(1 if right else 0, points earned, the option chosen or None) for a response to a choice question."""
    o = chosen(text, opts)
    right = bool(o and o["right"])
    return int(right), (points if right else 0.0), o


def _decimal(s) -> bool:
    """Is *s* a finite decimal string of at most 40 characters?"""
    try:
        return isinstance(s, str) and len(s) <= 40 and Decimal(s).is_finite()
    except InvalidOperation:
        return False


def read_options(raw, src: str, where: str) -> tuple:
    """A choice question's options as a manifest holds them (``worked quiz`` writes them: letter, value, right,
    mistake), checked; a one-line :class:`worked.errors.WorkedError` naming *src* and *where* otherwise."""
    from .errors import WorkedError

    def _err(src, field_, msg):
        return WorkedError(Msg("{file}: {field}: {message}", file=src, field=field_, message=msg))

    if not isinstance(raw, list) or len(raw) < 2:
        raise _err(src, where, Msg("expected the list of a choice question's options (letter, value, right)"))
    out = []
    for k, o in enumerate(raw, 1):
        if not (isinstance(o, dict) and isinstance(o.get("letter"), str) and len(o["letter"]) == 1
                and o["letter"].upper() in LETTERS and _decimal(o.get("value")) and isinstance(o.get("right"), bool)):
            raise _err(src, f"{where}[{k}]", Msg("expected an option {example}",
                                                 example='{"letter": "A", "value": "0.49", "right": true}'))
        out.append({"letter": o["letter"].upper(), "value": o["value"], "right": o["right"],
                    "mistake": o.get("mistake") if isinstance(o.get("mistake"), str) else None})
    if sum(o["right"] for o in out) != 1:
        raise _err(src, where, Msg("expected exactly one option with \"right\": true"))
    return tuple(out)


def right_option(opts) -> dict:
    return next(o for o in opts if o["right"])
