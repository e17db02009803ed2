"""The teacher's quiz builder as form fields: a quiz spec as data (the tables of the TOML file ``worked quiz`` reads,
as JSON), written as that TOML (:func:`spec_toml`), and what the form shows of it while it is typed (:func:`form`):
each part's matrices for the ask picker, and each question's error in the words of the spec's own reader
(:func:`worked.quiz.spec_from_dict`, the ask grammar of :mod:`worked.ask`). The page sends the data; the server
writes the TOML, so the quiz it makes is ``worked quiz`` on that file, byte for byte."""
from __future__ import annotations

import json
import math
import re

from .. import printers, quiz, stages
from ..errors import ProblemError, WorkedError
from ..i18n import Msg, joined
from .views import SOURCES, said

SOURCE = "quiz spec"
#: what the page calls the spec in its messages, in the page's language (SOURCE in English)
SPEC = SOURCES[SOURCE]
_BARE = re.compile(r"[A-Za-z0-9_-]{1,60}")
_TOP = ("title", "seed", "count", "paper", "instructions")      # the spec's own keys, before its tables
MAX_DEPTH = 4


def _key(k) -> str:
    if not isinstance(k, str) or not k:
        raise WorkedError(Msg("{file}: expected tables whose keys are names, got {got}", file=SPEC, got=repr(k)))
    return k if _BARE.fullmatch(k) else _string(k)


def _string(s: str) -> str:
    # JSON's escapes are TOML's; DEL, which JSON leaves as it is, TOML does not allow in a string
    return json.dumps(s, ensure_ascii=False).replace("\x7f", "\\u007F")


def _value(v, where: str, depth: int = 0) -> str:
    """*v* as a TOML value: a string, a whole number, a (finite) number, a boolean, a list or an inline table."""
    if depth > MAX_DEPTH:
        raise WorkedError(Msg("{file}: {field}: nested too deeply", file=SPEC, field=where))
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise WorkedError(Msg("{file}: {field}: expected a finite number, got {got}", file=SPEC, field=where, got=repr(v)))
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, list):
        return "[" + ", ".join(_value(x, where, depth + 1) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x, where, depth + 1)}" for k, x in v.items()) + "}"
    raise WorkedError(Msg("{file}: {field}: expected a string, a number, true/false or a list, got {got}", file=SPEC,
                          field=where, got=repr(v)))


def _pairs(table: dict, where: str) -> list[str]:
    return [f"{_key(k)} = {_value(v, f'{where}{k}')}" for k, v in table.items()]


def _table(table, where: str) -> dict:
    if not isinstance(table, dict):
        raise WorkedError(Msg("{file}: {field}: expected a table, got {got}", file=SPEC, field=where, got=repr(table)))
    return table


def _family_and_questions(data: dict, prefix: str) -> list[str]:
    """The ``[family]`` and ``[[questions]]`` tables of *data* (a spec, or a part at *prefix* ``parts.``)."""
    out = []
    if "family" in data:
        out += ["", f"[{prefix}family]"] + _pairs(_table(data["family"], prefix + "family"), prefix + "family.")
    qs = data.get("questions", [])
    for k, q in enumerate(qs if isinstance(qs, list) else [qs], 1):
        out += ["", f"[[{prefix}questions]]"] + _pairs(_table(q, f"{prefix}questions[{k}]"), f"{prefix}questions[{k}].")
    return out


def spec_toml(data) -> str:
    """A quiz spec's tables as TOML text: its own keys, then ``[family]`` and ``[[questions]]``, or its
    ``[[parts]]`` (each with its title, ``[parts.family]`` and ``[[parts.questions]]``). What the text means is
    :func:`worked.quiz.spec_from_dict`'s to say (an unknown key is written as it is, and that refuses it)."""
    data = _table(data, "the spec")
    top = [k for k in data if k not in ("family", "problem", "questions", "parts")]
    lines = _pairs({k: data[k] for k in sorted(top, key=lambda k: (_TOP.index(k) if k in _TOP else len(_TOP), k))}, "")
    if "problem" in data:       # one given problem instead of a [family]: its keys as a table
        lines += ["", "[problem]"] + _pairs(_table(data["problem"], "problem"), "problem.")
    lines += _family_and_questions(data, "")
    parts = data.get("parts")
    if parts is not None:
        for k, part in enumerate(parts if isinstance(parts, list) else [parts], 1):
            part = _table(part, f"parts[{k}]")
            lines += ["", "[[parts]]"] + _pairs({x: v for x, v in part.items() if x not in ("family", "questions")},
                                                f"parts[{k}].")
            lines += _family_and_questions(part, "parts.")
    return "\n".join(lines).lstrip("\n") + "\n"


def _matrices(fam) -> list[dict]:
    """The matrices a variant of *fam* has, for the ask picker: key, shape and what it is in words."""
    arch = stages.of(quiz.family_dims(fam)) if not fam.blocks else stages.SELF
    out = []
    for key, (r, c) in quiz.matrix_shapes(fam).items():
        try:
            words = printers.text(stages.words(key.split(".", 1)[1] if key.startswith("block") else key, arch))
        except Exception:  # noqa: BLE001 - a key with no words: its name says it
            words = ""
        out.append({"key": key, "rows": r, "cols": c, "words": words})
    return out


def _part(data: dict, where: str) -> dict:
    """What the form shows of one part (or of a spec without parts): its family's error or matrices, and each
    question's error (the field it is in: ask, points, tolerance, type, choices or name)."""
    from ..generate import Family

    fam_data = data.get("family", {})
    out: dict = {"family_error": None, "matrices": [], "questions": []}
    try:
        if "problem" in data:       # one given problem (a Transformer block's, say): its matrices, its questions
            from ..problem import Problem

            fam = fam_data = quiz.Given(Problem.from_dict(_table(data["problem"], "problem"), source=SOURCE))
        else:
            fam = Family.from_dict(dict(fam_data) if isinstance(fam_data, dict) else fam_data, source=SOURCE,
                                   prefix=where + "family.")
    except (WorkedError, TypeError, ValueError, RecursionError) as exc:
        out["family_error"] = {"message": said(exc), "field": getattr(exc, "field", "")}
        fam = None
    if fam is not None:
        try:
            out["matrices"] = _matrices(fam)
        except (WorkedError, TypeError, ValueError, KeyError) as exc:
            out["family_error"] = {"message": joined(": ", [SPEC, where + "family", said(exc)]).localized(),
                                   "field": where + "family"}
    qs = data.get("questions")
    for k, q in enumerate(qs if isinstance(qs, list) else [], 1):
        err = None
        if fam is not None:
            try:
                # the reader of the spec on this one question: its words, and the field it names
                quiz.read_questions(fam_data, [q], prefix=where, first=k, source=SOURCE)
            except ProblemError as exc:
                field = exc.field.replace(f"{where}questions[1]", f"{where}questions[{k}]", 1)
                err = {"message": joined(": ", [SPEC, field, exc.message]).localized(), "field": field.rpartition(".")[2]}
            except (WorkedError, TypeError, ValueError, RecursionError) as exc:
                err = {"message": said(exc), "field": ""}
        out["questions"].append({"error": err})
    return out


def form(data) -> dict:
    """The builder's view of a spec (its tables as JSON): its TOML, the spec's first error as ``worked quiz``
    says it (None when it makes a quiz), and per part (one for a spec without ``[[parts]]``) :func:`_part`."""
    out: dict = {"toml": None, "error": None, "parts": []}
    try:
        out["toml"] = spec_toml(data)
    except WorkedError as exc:
        out["error"] = {"message": said(exc), "field": ""}
        return out
    try:
        quiz.spec_from_dict(data, SOURCE)
    except (WorkedError, TypeError, ValueError, RecursionError) as exc:
        out["error"] = {"message": said(exc), "field": getattr(exc, "field", "")}
    parts = data.get("parts")
    if isinstance(parts, list):
        out["parts"] = [_part(p, f"parts[{k}].") if isinstance(p, dict) else {"family_error": None, "matrices": [],
                                                                              "questions": []}
                        for k, p in enumerate(parts, 1)]
    else:
        out["parts"] = [_part(data, "")]
    return out
