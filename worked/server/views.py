"""What the server's jobs compute from a problem, for the web page (:mod:`worked.server.jobs` calls these in the
workers; :mod:`worked.server.app` only routes): the page's views of a problem and of its solution, every formula
printed as text and allow-listed MathML; a quiz variant's questions; and its answers checked the way ``worked
grade`` marks them. A variant is :class:`worked.server.app.Variant` (read through its attributes: ``code``,
``questions``). This module imports neither the app nor the jobs, so neither import cycles through it.
"""
from __future__ import annotations

import functools
import logging
import re
import xml.etree.ElementTree as ET
from typing import Any

from .. import eq, printers, stages
from ..i18n import Msg, joined, tr as _
from ..errors import ProblemError, WorkedError
from ..problem import Problem
from ..render import view as V

#: the names the page gives what it sends (an error names them as the file it came from), in the page's language
SOURCES = {"quiz spec": Msg("quiz spec"), "random problem": Msg("random problem")}


def said(exc: Exception) -> str:
    """*exc*'s one line in the current language (the request's), what the page sent named as the page names it."""
    if isinstance(exc, ProblemError) and exc.source in SOURCES:
        return joined(": ", [SOURCES[exc.source], *([exc.field] if exc.field else []), exc.message]).localized()
    return exc.localized() if isinstance(exc, WorkedError) else str(exc)


log = logging.getLogger("worked.server")


# Every formula on the page is a tree of worked.eq printed by worked.printers.mathml inside
# printers.math_element; the allow-list is exactly what those two write, and nothing else passes.
_MATHML_TAGS = {"math", "mrow", "mi", "mn", "mo", "mtext", "mspace", "msub", "msup", "msubsup", "mfrac", "msqrt",
                "mtable", "mtr", "mtd"}   # (the bracketed matrices of worked.lms.matrix_mathml)
_MATHML_ATTRS = {"math": {"display", "alttext"}, "mspace": {"width"}}   # (xmlns is the namespace, not an attribute)
_NS = "{http://www.w3.org/1998/Math/MathML}"
_WIDTH_RE = re.compile(r"\d{1,2}(\.\d{1,3})?em")


def safe_mathml(markup: str) -> str | None:
    """*markup* if it is one well-formed ``<math>`` element (MathML namespace, or none) made only of the elements and
    attributes our MathML printer writes, with no DTD, comment or processing instruction; else None."""
    if not isinstance(markup, str) or "<!" in markup or "<?" in markup:
        return None
    try:
        root = ET.fromstring(markup)
    except ET.ParseError:
        return None
    if root.tag not in (_NS + "math", "math"):
        return None
    for el in root.iter():
        tag = el.tag[len(_NS):] if el.tag.startswith(_NS) else el.tag
        if tag not in _MATHML_TAGS or (tag == "math" and el is not root):
            return None
        allowed = _MATHML_ATTRS.get(tag, ())
        for a, v in el.attrib.items():
            if a not in allowed or (a == "display" and v not in ("block", "inline")) \
                    or (a == "width" and not _WIDTH_RE.fullmatch(v)):
                return None
    return markup


@functools.lru_cache(maxsize=8192)
def _math(node, display: bool = False, alt: str | None = None) -> str | None:
    """A ``<math>`` element for a tree: ``printers.mathml`` with ``printers.spoken`` as its alt text (unless
    *alt* is given), allow-listed. None if it cannot be printed; the page then shows the text."""
    try:
        body = printers.mathml(node)
        alt = printers.spoken(node) if alt is None else alt
    except Exception:  # noqa: BLE001 - a printer bug must not take the page down: the text is shown
        log.warning("no MathML for %r", node, exc_info=True)
        return None
    out = safe_mathml(printers.math_element(body, display=display, alt=alt))
    if out is None:
        log.warning("MathML for %r is not on the allow-list", node)
    return out


def _bracketed(m: dict) -> str | None:
    """A given matrix as one bracketed MathML matrix (``X = [ … ]``, :func:`worked.lms.matrix_mathml`), allow-listed."""
    from ..lms import matrix_mathml

    try:
        return safe_mathml(matrix_mathml(m))
    except Exception:  # noqa: BLE001 - a printer bug must not take the page down: the table is shown
        log.warning("no bracketed MathML for %s", m.get("key"), exc_info=True)
        return None


def _cell(cell: dict) -> dict:
    """A matrix cell of the page model: its text always; MathML too when the model sets it as math
    (1/3 is set stacked; 2, −0.5, 0.16 and −∞ read as well in text)."""
    out: dict[str, Any] = {"text": cell["text"]}
    if cell.get("eq") is not None:
        out["mathml"] = _math(cell["eq"])
    return out


def _heading(node) -> dict:
    return {"text": printers.text(node), "mathml": _math(node)}


def mat_heading(m: dict) -> dict:
    """The heading over a matrix of the page model: ``Z =`` when every entry is exact as shown, ``Z ≈``
    when rounding enters (its alt text says "equals" or "is about", not "… blank")."""
    rel = m["rel"]
    alt = f"{printers.spoken(m['symbol'])} {'equals' if rel == eq.EQ else 'is about'}"
    return {"rel": rel, "text": printers.text(m["head"]).rstrip(), "mathml": _math(m["head"], False, alt)}


def _matrix(m: dict) -> dict:
    out = {"rows": list(m["rows"]), "cols": list(m["cols"]), "heading": mat_heading(m), "caption": m["caption"],
           "cells": [[_cell(c) for c in row] for row in m["cells"]]}
    if m.get("row_math"):       # a row labelled by a symbol (a one-row matrix's dγ_2): its MathML beside its text
        out["row_math"] = [None if s is None else {"text": r, "mathml": _math(s)} for r, s in zip(m["rows"], m["row_math"])]
    return out


ANSWERS_FORMS = "2√2, 1/3, e^2/(1+e^2)"


def prose_parts(prose) -> list:
    """A run of prose (:class:`worked.eq.Prose`) for the page: its strings as ``{"text"}`` and its math as
    ``{"text", "mathml"}`` (allow-listed MathML, with the text when it cannot be printed)."""
    from .. import i18n

    prose = eq.prose(i18n.localize(prose))     # its sentences (eq.say) in the page's language: words and math
    return [{"text": x} if isinstance(x, str) else _heading(x) for x in prose.parts]


def mistake_math(code: str, problem, message: str) -> list | None:
    """What ``worked check`` says of the mistake *code* (its *message*, as text) as :func:`prose_parts`: the
    mistake's prose for *problem*, and any text the checker added after it (where rounding entered); None when
    the prose is not what the message says (the page then shows the text)."""
    from ..mistakes import MISTAKES

    m = MISTAKES.get(code)
    try:
        prose = m.message_prose(problem) if m is not None else None
    except Exception:  # noqa: BLE001 - a chain's block, say: the text is shown
        return None
    if prose is None or not isinstance(message, str) or not message.startswith(printers.text(prose)):
        return None
    rest = message[len(printers.text(prose)):]
    return prose_parts(prose) + ([{"text": rest}] if rest else [])


def title_math(code) -> list | None:
    """The title of the mistake *code* as :func:`prose_parts` (its math as MathML: K·Qᵀ instead of Q·Kᵀ); None for
    no such mistake."""
    from ..mistakes import MISTAKES

    m = MISTAKES.get(code) if isinstance(code, str) else None
    return prose_parts(m.title_prose) if m is not None else None


def with_math(report: dict, problem, solution=None) -> dict:
    """*report* (a check report's dict) with each diagnosis's message and title as math too (``message_math``,
    ``title_math``), and the title of each step it names to re-read (the step's ``title_math``, from *solution*'s
    steps)."""
    steps = getattr(solution, "steps", None) or []

    def title(step):
        n = step.get("number") if isinstance(step, dict) else None
        if isinstance(n, int) and 1 <= n <= len(steps) and printers.text(steps[n - 1].title_prose) == step.get("title"):
            step["title_math"] = prose_parts(steps[n - 1].title_prose)

    for d in report.get("diagnoses") or ():
        parts = mistake_math(d.get("code"), problem, d.get("message"))
        if parts is not None:
            d["message_math"] = parts
        named = title_math(d.get("code"))
        if named is not None and "".join(x["text"] for x in named) == d.get("title"):
            d["title_math"] = named
        title(d.get("step"))
    for m in (report.get("matrices") or {}).values():
        title(m.get("step"))
    return report


def problem_view(problem: Problem) -> dict:
    """What the page shows of a problem and its empty answer grids (no solution values): the problem
    part of the page model (:func:`worked.render.view.problem_page`) with its trees printed as text and
    MathML."""
    page = V.problem_page(problem)
    inputs = []
    for g in page.given:
        # the symbol alone over exact entries (X); "X ≈" over entries shown rounded
        head = {**_heading(g["symbol"]), "rel": eq.EQ} if g["rel"] == eq.EQ else mat_heading(g)
        inputs.append({"key": g["key"], "rows": g["rows"], "cols": g["cols"],
                       "cells": [[_cell(c) for c in row] for row in g["cells"]], "note": g["note"],
                       **head, "shape": g["shape"], "matrix": _bracketed(g)})
    grids = [{"key": g["key"], "label": g["label"], "rows": g["rows"], "cols": g["cols"], "masked": g["masked"],
              "hint": g["hint"], **_heading(g["eq"])} for g in page.grids]
    # the page model's facts, with scaling and mask on rows of their own and how answers may be typed
    blocks = problem.block_problems() if hasattr(problem, "block_problems") else None    # a chain ([[blocks]])
    mask = V.mask_text(problem) if blocks is None else "; ".join(_("block {k}: {mask}", k=k, mask=V.mask_text(p))
                                                                  for k, p in enumerate(blocks, 1))
    facts = [{"label": label, "text": text} for label, text in page.facts if label != _("Scaling")] + [
             {"label": _("Scaling"), "text": V.scale_text(blocks[0] if blocks else problem)},
             {"label": _("Mask"), "text": mask},
             {"label": _("Answers"), "text": _("decimals to {places} places, or exact forms like {forms}",
                                               places=page.places, forms=ANSWERS_FORMS)}]
    return {
        "title": page.title,
        "tokens": page.tokens,
        "decimals": page.places,
        "multihead": page.multihead,
        "facts": facts,
        "inputs": inputs,
        "grids": grids,
    }


def solution_view(sol) -> dict:
    """The steps of the answer key's page model (:func:`worked.render.view.build`) for ``/api/solve?view=1``:
    every line's text and MathML, and each result matrix as shown (``exact`` too when the key shows it)."""
    page = V.build(sol, "answer-key")
    steps = []
    mats = {}
    for s in page.steps:
        lines = [{"text": printers.text(ln), "mathml": _math(ln, True), "group": b["label"]}
                 for b in s.blocks for ln in b["lines"]]
        steps.append({"id": s.id, "head": s.head, "title": s.title, "why": s.why, "notes": s.notes,
                      "shape": printers.text(s.shape) if s.shape is not None else None,
                      "result": s.result, "lines": lines})
        if s.result and s.mats:
            shown = _matrix(s.mats[-1])
            if len(s.mats) > 1:
                shown["exact"] = _matrix(s.mats[0])
            mats[s.result] = shown
    return {"steps": steps, "matrices": mats}


# ------------------------------------------------------------------ quiz variants

def points(v) -> float | int | None:
    """A number of points as JSON writes it: ``2`` for 2.0, ``0.5``; None when *v* is not a number."""
    try:
        f = float(str(v))
    except ValueError:
        return None
    return int(f) if f.is_integer() else f


def _questions_of(v, problem: Problem, sol=None) -> list:
    """The variant's questions as :class:`worked.ask.Question`, resolved to their cells (bad ones left out)."""
    from .. import choice, grade
    from ..ask import Question
    from ..solver import solve

    mats = (sol or solve(problem)).matrices()
    out = []
    for q in v.questions:
        try:
            tol = grade.parse_tolerance(q.get("tolerance"), f"variant {v.code}", q["ask"])
            opts = choice.read_options(q["options"], f"variant {v.code}", q["ask"]) if q.get("options") else ()
            gq = Question(q["ask"], float(q["points"] or 0), tol, name=q.get("name") or "", kind="choice" if opts else
                          "value", choices=len(opts), options=opts).resolve_in(mats)
            if opts and len(gq.cells) != 1:
                raise ValueError("a choice question asks one entry")
        except (WorkedError, TypeError, ValueError):
            log.warning("variant %s: question %r left out", v.code, q.get("ask"))
            continue
        out.append(gq)
    return out


def question_list(v, problem: Problem, sol=None) -> list:
    """What the page shows of a variant's questions: name, ask, points and tolerance (no expected values)."""
    out = []
    for q in _questions_of(v, problem, sol):
        tol = q.tolerance.describe(problem.decimals) if q.tolerance is not None else \
            f"rounding to {problem.decimals} places"
        item = {"name": q.name, "ask": q.ask, "points": points(q.points), "tolerance": tol,
                "matrix": q.matrix, "cells": [[i, j] for i, j in q.cells]}
        if q.kind == "choice":      # the options to choose from (which is right is not said)
            item.update(type="choice", tolerance="choose one",
                        options=[{"letter": o["letter"], "value": o["value"]} for o in q.options])
        out.append(item)
    return out


def _chosen_options(answers, questions) -> tuple[dict, dict]:
    """*answers* with each choice question's option, typed as its letter (``B``) or its value, written as its value
    (what the checker reads), and the option chosen by question (None: none of them)."""
    from .. import choice

    picked = {}
    for q in questions:
        if q.kind != "choice":
            continue
        grid = answers.get(q.matrix) if isinstance(answers, dict) else None
        (i, j), = q.cells
        if not (isinstance(grid, list) and len(grid) > i and isinstance(grid[i], list) and len(grid[i]) > j):
            continue
        o = picked[q.name or q.ask] = choice.chosen(grid[i][j], q.options)
        if o is not None:
            grid = [list(r) if isinstance(r, list) else r for r in grid]
            grid[i][j] = o["value"]
            answers = dict(answers, **{q.matrix: grid})
    return answers, picked


def check_variant(problem, answers, v, checker, reveal, view: bool = False) -> dict:
    """Check a variant's answers the way ``worked grade`` marks them: each question's entries with that question's
    tolerance (from the manifest), its points earned for the entries right or carried forward; entries outside
    the questions, and the diagnoses, with the default band. *checker*: the problem's
    :class:`worked.check.Checker`; a question's tolerance changes only verdicts and carried-forward marks, so
    those are all it is asked for (``diagnose=False``)."""
    questions = _questions_of(v, problem, checker.solution)
    answers, picked = _chosen_options(answers, questions)
    base = checker.check(answers, reveal=reveal)
    reports = {None: base}
    for q in questions:
        if q.tolerance not in reports:
            reports[q.tolerance] = checker.check(answers, tolerance=q.tolerance, reveal=reveal, diagnose=False)
    out = base.to_dict()
    mats = out["matrices"]
    scored = []
    last = f"block{len(problem.blocks)}.Z" if hasattr(problem, "block_problems") else None

    def key_of(matrix):     # a chain's Z is its last block's output: the page's grids name it block2.Z
        return last if matrix == stages.OUTPUT and matrix not in mats and last in mats else matrix

    for q in questions:
        if q.kind == "choice":      # the right option earns the points, any other none (no tolerance, no carrying)
            o = picked.get(q.name or q.ask)
            mine = mats.get(key_of(q.matrix))
            if mine is not None:
                (i, j), = q.cells
                mine["verdicts"][i][j] = "correct" if o and o["right"] else ("wrong" if o else mine["verdicts"][i][j])
                mine["carried_forward"][i][j] = False
            right = bool(o and o["right"])
            item = {"name": q.name, "ask": q.ask, "points": points(q.points), "earned": points(q.points if right else 0),
                    "entries": 1, "right": int(right), "tolerance": "choose one", "type": "choice",
                    "chosen": o["letter"] if o else None}
            if o and not o["right"] and o.get("mistake"):    # a wrong option: the mistake it is, and its feedback
                from ..mistakes import MISTAKES

                mk = MISTAKES.get(o["mistake"])
                if mk is not None and mk.answer is not None:    # the option's feedback, as the LMS exports give it
                    said = eq.prose(mk.answer)
                    item["mistake"] = {"code": mk.id, "title": mk.title_text(), "message": printers.text(said)}
                    if view:
                        item["mistake"].update(message_math=prose_parts(said), title_math=title_math(mk.id))
                elif mk is not None:
                    text = mk.message(problem)
                    item["mistake"] = {"code": mk.id, "title": mk.title_text(), "message": text}
                    if view:
                        item["mistake"].update(message_math=mistake_math(mk.id, problem, text), title_math=title_math(mk.id))
            scored.append(item)
            continue
        rep = reports[q.tolerance].to_dict()["matrices"].get(key_of(q.matrix))
        if rep is not None:
            mine = mats[key_of(q.matrix)]
            for i, j in q.cells:
                mine["verdicts"][i][j] = rep["verdicts"][i][j]
                mine["carried_forward"][i][j] = rep["carried_forward"][i][j]
        good, earned = q.score(*((rep["verdicts"], rep["carried_forward"]) if rep is not None else (None, None)))
        scored.append({"name": q.name, "ask": q.ask, "points": points(q.points), "earned": points(earned),
                       "entries": len(q.cells), "right": good,
                       "tolerance": (q.tolerance or base.tolerance).to_dict(problem.decimals)["description"]})
    changed = False
    for m in mats.values():
        counts = {k: sum(v == k for row in m["verdicts"] for v in row) for k in ("correct", "wrong", "blank", "invalid")}
        counts["carried_forward"] = sum(c for row in m["carried_forward"] for c in row)
        changed |= counts != m["counts"]
        m["counts"] = counts
    if changed:   # the questions' tolerances moved some verdicts: count again
        s = out["summary"]
        for k in ("correct", "wrong", "blank", "invalid", "carried_forward"):
            s[k] = sum(m["counts"][k] for m in mats.values())
        s["answered"] = s["correct"] + s["wrong"]
        out["summary_text"] = None
    out["questions"] = scored
    out["score"] = {"earned": points(round(sum(q["earned"] for q in scored), 2)),
                    "points": points(sum(q.points for q in questions))}
    out["variant"] = v.code
    return with_math(out, problem, checker.solution) if view else out


def check_mixed(problems, answers: list, v, checkers, reveal, view: bool = False) -> dict:
    """A variant of a quiz that mixes families (``v.parts``), checked part by part: each part's answers against its
    own problem with :func:`check_variant` (its questions' points and tolerances, error carried forward within the
    part), as ``worked grade`` checks each :attr:`worked.grade.Student.parts`; the total is the parts' sum, rounded
    as :attr:`worked.grade.StudentResult.total` rounds it."""
    parts = []
    for k, (part, problem, answers_k, checker) in enumerate(zip(v.parts, problems, answers, checkers), 1):
        report = check_variant(problem, answers_k, part, checker, reveal, view)
        parts.append({"part": k, "title": part.title, **report})
    earned = round(sum(q["earned"] for r in parts for q in r["questions"]), 2)
    return {"variant": v.code, "parts": parts,
            "score": {"earned": points(earned), "points": points(sum(r["score"]["points"] for r in parts))}}
