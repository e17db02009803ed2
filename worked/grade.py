"""Grading a class: a quiz manifest + a CSV of responses → a gradebook CSV and a self-contained HTML report.

``worked grade QUIZDIR RESPONSES.csv [-o DIR]`` reads ``QUIZDIR/manifest.json`` (written by
``worked quiz``). Fields read from the manifest (anything else is ignored)::

    {
      "title": "Attention quiz 1",                          # optional
      "questions": [                                        # the questions, in order
        {"ask": "scores[2,3]", "points": 1, "tolerance": 0.01},
        {"ask": "weights[1,*]", "points": 2, "tolerance": {"abs": 0.01, "rel": 0.02}},
        {"ask": "Z", "points": 3}                           # no tolerance: the rounding default
      ],
      "students": [                                         # one per student (or "variants")
        {"id": "s001", "name": "Ada Lovelace", "variant": "K3F9",
         "problem": { ...the keys of a problem file... },
         "questions": [...]}                                # optional: per-student questions override
      ]
    }

A question is named ``M``, ``M[i,j]``, ``M[i,*]`` or ``M[*,j]`` with M a matrix name of
``Solution.matrices()`` (``scores``, ``head2.weights``, …) and 1-based indices (or token names).
The expected answers are recomputed from each student's ``problem`` by the solver; expected values
in the manifest are not needed. Student ids may be missing (numbered variants): then responses
are matched by variant code.

RESPONSES.csv: a row per student; an id column (``id``, ``student_id``, ``ID number``,
``username``, ``email``…) or a ``variant`` column; a column per question named as in the manifest
(``scores[2,3]``) or by its name in the quiz (``q1``), or one column per entry (``Z[1,1]``, ``Z[1,2]``, …). A cell with several entries
lists them row by row: ``0.19, 0.62, 0.19`` or ``[[0.49, 1.67], [1.00, 1.33]]`` or ``0.49 1.67; 1.00 1.33``.
Moodle's quiz "Responses" report also works: ``Response 1``, ``Response 2``, … are the questions in
order, students are matched by ``ID number``, ``Email address`` or name, and cloze answers
(``part 1: 0.19; part 2: 0.62``) are split into entries. A choice question (``"type": "choice"`` with its
``options``) takes the option's letter (``B``) or its value (``0.49``, as Moodle's report writes the option
chosen): the right option earns the points, any other none, and a wrong option names its mistake. A variant of a
quiz that mixes families has ``"parts"`` (each with its ``problem`` and ``questions``) instead: each part is
checked against its own problem, and the responses have a column per question of every part.
"""
from __future__ import annotations

import csv
import io
import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from . import choice, i18n
from .i18n import Msg, current, joined, localized_text, ngettext, translate
from .i18n import tr as _
from .ask import AskError, Question
from .errors import ProblemError, WorkedError

ID_COLUMNS = ("id", "student_id", "student id", "studentid", "id number", "idnumber", "sis id", "sis_user_id",
              "username", "user", "login", "email", "email address", "student")
VARIANT_COLUMNS = ("variant", "variant code", "variant_code", "code")
NAME_COLUMNS = ("name", "student name", "full name", "fullname")


# ---------------------------------------------------------------- manifest

@dataclass
class Student:
    id: str
    name: str
    variant: str
    problem: object
    questions: list
    solution: object = None
    parts: list | None = None   # a quiz with [[parts]]: a Student per part (its problem and questions); then
    #                             *problem* is the first part's and *questions* all parts' questions, in order


@dataclass
class Manifest:
    title: str
    questions: list            # the quiz's questions (names, points) in order
    students: list
    source: str


def _err(src, field_, msg):
    if field_:
        return WorkedError(Msg("{file}: {field}: {message}", file=src, field=field_, message=msg))
    return WorkedError(Msg("{file}: {message}", file=src, message=msg))


def _as_plain(exc) -> WorkedError:
    """A :class:`ProblemError` of a manifest's problem as a plain one-line :class:`WorkedError` (its words kept
    translatable)."""
    where = ": ".join(p for p in (exc.source, exc.field) if p)
    return WorkedError(Msg("{file}: {message}", file=where, message=exc.message) if where else exc.message)


def parse_tolerance(value, src, where):
    """A manifest tolerance (a number, "2%", or {"abs": …, "rel": …}) → a :class:`worked.check.Tolerance`, or None
    for the rounding default; a one-line error naming *src* and *where* otherwise."""
    from .check import Tolerance

    if value is None:
        return None
    try:
        tol = Tolerance.parse(value)   # unknown keys are refused, never dropped
    except WorkedError as exc:
        if "unknown key" in str(exc):
            raise _err(src, where, exc.message if isinstance(exc, ProblemError) else str(exc).removeprefix("tolerance: ")) from None
        raise _err(src, where, Msg("expected a tolerance such as 0.01 or {example}, got {got}",
                                   example='{"abs": 0.01, "rel": 0.02}', got=repr(value))) from None
    except (TypeError, ValueError):
        raise _err(src, where, Msg("expected a tolerance such as 0.01 or {example}, got {got}",
                                   example='{"abs": 0.01, "rel": 0.02}', got=repr(value))) from None
    return None if tol.default else tol


def _questions(raw, src, where) -> list[Question]:
    if not isinstance(raw, list) or not raw:
        raise _err(src, where, Msg("expected a non-empty list of questions, each with \"ask\" (such as \"scores[2,3]\")"))
    out = []
    for k, q in enumerate(raw, 1):
        if isinstance(q, str):
            q = {"ask": q}
        if not isinstance(q, dict):
            raise _err(src, f"{where}[{k}]", Msg("expected a table with \"ask\" and \"points\""))
        ask = q.get("ask", q.get("question", q.get("name")))
        name = q.get("name") if isinstance(q.get("name"), str) and q.get("name") != ask else ""
        if not isinstance(ask, str) or not ask.strip():
            raise _err(src, f"{where}[{k}].ask", Msg("missing: the question, such as \"scores[2,3]\""))
        pts = q.get("points", 1)
        if isinstance(pts, bool) or not isinstance(pts, (int, float)) or pts < 0:
            try:
                pts = float(pts)
                assert pts >= 0
            except (TypeError, ValueError, AssertionError):
                raise _err(src, f"{where}[{k}].points", Msg("expected a non-negative number, got {got}", got=repr(pts))) from None
        tol = q.get("tolerance")
        if tol is None and ("abs" in q or "rel" in q):
            tol = {"abs": q.get("abs"), "rel": q.get("rel")}
        kind, options = "value", ()
        if q.get("type") == "choice":
            kind, options = "choice", choice.read_options(q.get("options"), src, f"{where}[{k}].options")
        out.append(Question(ask.strip(), float(pts), parse_tolerance(tol, src, f"{where}[{k}].tolerance"), name=name.strip(),
                            kind=kind, choices=len(options), options=options))
    return out


def load_manifest(quizdir) -> Manifest:
    """Read ``QUIZDIR/manifest.json`` (or a manifest file given directly); one-line errors naming the field."""
    from .problem import Problem, ProblemError

    path = Path(quizdir)
    if path.is_dir():
        path = path / "manifest.json"
    src = str(path)
    from .readfile import MANIFEST_LIMIT, loads_json, read_text

    data = loads_json(read_text(path, MANIFEST_LIMIT, "the manifest.json written by `worked quiz`"), src)
    if not isinstance(data, dict):
        raise WorkedError(Msg("{file}: expected a JSON object with \"questions\" and \"students\"", file=src))
    quiz = data.get("quiz") if isinstance(data.get("quiz"), dict) else {}
    title = data.get("title") or quiz.get("title") or ""
    studs = data.get("students", data.get("variants"))
    if not isinstance(studs, list) or not studs:
        raise _err(src, "students", Msg("expected a non-empty list of students (or \"variants\")"))
    top_q = data.get("questions", quiz.get("questions"))
    questions = _questions(top_q, src, "questions") if top_q is not None else None
    students, seen = [], set()
    for k, s in enumerate(studs, 1):
        where = f"students[{k}]"
        if not isinstance(s, dict):
            raise _err(src, where, Msg("expected an object with the student's id, variant and problem"))
        stud = s.get("student") if isinstance(s.get("student"), dict) else {}
        sid = s.get("id", s.get("student_id"))
        if sid is None:
            sid = stud.get("id", s.get("student") if isinstance(s.get("student"), (str, int)) else None)
        variant = s.get("variant", s.get("variant_code", s.get("code")))
        if sid is None and variant is None:
            raise _err(src, f"{where}.id", Msg("missing: each student needs an \"id\" or a \"variant\" code"))
        sid = str(sid if sid is not None else variant)
        if sid in seen:
            raise _err(src, f"{where}.id", Msg("duplicate student id {id}", id=repr(sid)))
        seen.add(sid)
        name = s.get("name") or stud.get("name") or ""
        if isinstance(s.get("parts"), list) and "problem" not in s:   # a quiz that mixes families: a problem per part
            parts = [_part_student(sid, str(name or ""), str(variant or ""), p, src, f"{where}.parts[{j}]")
                     for j, p in enumerate(s["parts"], 1)]
            if not parts:
                raise _err(src, f"{where}.parts", Msg("expected the variant's parts, each with its problem and questions"))
            students.append(Student(sid, str(name or ""), str(variant or ""), parts[0].problem,
                                    [q for p in parts for q in p.questions], parts=parts))
            continue
        prob = s.get("problem")
        if not isinstance(prob, dict):
            raise _err(src, f"{where}.problem", Msg("missing: the student's problem (the keys of a problem file)"))
        try:
            problem = Problem.from_dict(prob, source=f"{src}: {where}.problem")
        except ProblemError as exc:
            raise _as_plain(exc) from None
        own = s.get("questions", s.get("answers"))
        if isinstance(own, dict):  # {"scores[2,3]": {"points":..., "tolerance":...}}
            own = [dict(v, ask=k2) if isinstance(v, dict) else {"ask": k2} for k2, v in own.items()]
        qs = _questions(own, src, f"{where}.questions") if isinstance(own, list) and own else None
        if qs is None and questions is None:
            raise _err(src, "questions", Msg("missing: the list of questions (top level or per student)"))
        if qs is not None and questions is not None:
            # per-student entries carry expected values and tolerances; points/names come from the quiz
            by_ask = {q.ask: q for q in qs}
            qs = [Question(q.ask, q.points, by_ask[q.ask].tolerance if q.ask in by_ask and by_ask[q.ask].tolerance else q.tolerance,
                           name=q.name or (by_ask[q.ask].name if q.ask in by_ask else ""),
                           **({"kind": "choice", "choices": by_ask[q.ask].choices, "options": by_ask[q.ask].options}
                              if q.ask in by_ask and by_ask[q.ask].kind == "choice" else
                              {"kind": q.kind, "choices": q.choices, "options": q.options}))
                  for q in questions]
        students.append(Student(sid, str(name or ""), str(variant or ""), problem, qs or [
            Question(q.ask, q.points, q.tolerance, name=q.name, kind=q.kind, choices=q.choices, options=q.options)
            for q in questions]))
    if questions is None:
        questions = students[0].questions
    return Manifest(str(title), questions, students, src)


def _part_student(sid, name, variant, part, src, where) -> Student:
    """One part of a mixed quiz's variant (its problem and questions) as a :class:`Student` of its own."""
    from .problem import Problem, ProblemError

    if not isinstance(part, dict) or not isinstance(part.get("problem"), dict):
        raise _err(src, f"{where}.problem", Msg("missing: the part's problem (the keys of a problem file)"))
    try:
        problem = Problem.from_dict(part["problem"], source=f"{src}: {where}.problem")
    except ProblemError as exc:
        raise _as_plain(exc) from None
    return Student(sid, name, variant, problem, _questions(part.get("questions"), src, f"{where}.questions"))


def resolve_question(q: Question, student: Student, src: str):
    """Fill q.matrix, q.cells and q.shape for this student's problem (indices 1-based or labels: :mod:`worked.ask`)."""
    try:
        q.resolve_in(student.solution.matrices())
    except AskError as exc:
        raise WorkedError(Msg("{file}: question {ask}: {reason}", file=src, ask=repr(q.ask), reason=exc.args[0])) from None


# ---------------------------------------------------------------- responses

def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", str(s).strip().lower())


def split_cell(text: str, shape: tuple) -> list:
    """Entries of one response cell, row by row, as strings (blank → "")."""
    s = (text or "").strip()
    count = shape[0] * shape[1]
    if not s:
        return [""] * count
    if count == 1:
        return [re.sub(r"^part\s*1\s*:\s*", "", s, flags=re.I)]
    if s.startswith("["):
        try:
            data = json.loads(s, parse_float=str)
            flat = []

            def walk(x):
                if isinstance(x, list):
                    for y in x:
                        walk(y)
                else:
                    flat.append("" if x is None else str(x))
            walk(data)
            return flat
        except (json.JSONDecodeError, ValueError):
            s = s.replace("[", " ").replace("]", ";")
    s = re.sub(r"part\s*\d+\s*:", "", s, flags=re.I)          # Moodle cloze: part 1: x; part 2: y
    rows = [r for r in re.split(r"[;\n]", s) if r.strip()]
    out = []
    for r in rows:
        out += [e.strip() for e in (r.split(",") if "," in r else r.split())]
    return out


def _merge_brackets(cells: list[str], delim: str) -> list[str]:
    """Header cells split inside brackets by an unquoted comma (scores[2,3]) are joined again."""
    out = []
    for c in cells:
        if out and out[-1].count("[") > out[-1].count("]"):
            out[-1] += delim + c
        else:
            out.append(c)
    return out


@dataclass
class Row:
    key: str            # the student id or variant code it matched
    cells: dict         # question ask → cell text (or per-entry dict)
    line: int


def _name_key(s: str) -> str:
    return re.sub(r"\s+", " ", str(s).strip())


def read_responses(path, manifest: Manifest, *, allow_unmatched: bool = False) -> tuple[list[Row], list[str], str]:
    """Read the responses CSV; return (rows matched to manifest students, warnings, which columns were read:
    "read columns: scores[2,3] ← 'q1'; …; students by 'id'").

    A question's column is named by its ask (``scores[2,3]``) or by its name in the quiz (``q1``). A row
    that matches no student, or more than one, or a student already matched, is an error naming the row;
    with *allow_unmatched* it is left out and listed in the warnings (and the report)."""
    from .readfile import csv_rows, read_bytes

    src = str(path)
    raw = read_bytes(path, expected=Msg("a CSV of responses"))
    text = None
    for enc in ("utf-8-sig", "cp1252"):
        try:
            text = raw.decode(enc)
            break
        except UnicodeDecodeError:
            continue
    if text is None:
        raise WorkedError(Msg("{file}: not a text CSV file", file=src))
    from .csvin import delimiter

    delim = delimiter(text)
    rows = [r for _, r in csv_rows(text, src, delim, "a CSV of responses")]
    if not rows or not any(h.strip() for h in rows[0]):
        raise WorkedError(Msg("{file}: empty file (expected a header row with an id column and one column per question)",
                              file=src))
    header = _merge_brackets([h.strip() for h in rows[0]], delim)
    lower = [_norm(h) for h in header]
    asks = [q.ask for q in manifest.questions]
    names = {q.ask: q.name for q in manifest.questions if q.name}
    warnings: list[Msg] = []

    # which column answers which question: its ask (scores[2,3]) or its name in the quiz (q1)
    qcol: dict[str, int | dict] = {}
    for q in asks:
        for label in (q, names.get(q)):
            if not label:
                continue
            if label in header:
                qcol[q] = header.index(label)
            elif _norm(label) in lower:
                qcol[q] = lower.index(_norm(label))
            else:
                continue
            break
    for k, q in enumerate(asks, 1):
        if q in qcol:
            continue
        moodle = f"response {k}"
        if moodle in lower:
            qcol[q] = lower.index(moodle)
            continue
        # per-entry columns: Z[1,1], Z[1,2], ...
        base = re.sub(r"\[.*$", "", q).strip()
        ent = {h: i for i, h in enumerate(header) if re.fullmatch(re.escape(base) + r"\s*\[\s*\w+\s*,\s*\w+\s*\]", h)}
        if ent:
            qcol[q] = ent
    missing = [q for q in asks if q not in qcol]
    if len(missing) == len(asks):
        expected = ", ".join(Msg("{ask} or {name}", ask=q, name=names[q]).localized() if q in names else q for q in asks)
        raise WorkedError(Msg("{file}: no column for any question (expected columns named {expected}, or Moodle's "
                              "Response 1, Response 2, …)", file=src, expected=expected))
    for q in missing:
        warnings.append(Msg("no column for question {ask}: it scores 0 for everyone", ask=repr(q)))

    # students are matched exactly as `worked quiz` identified them: ids as written (no case-folding),
    # variant codes (upper case), names only when no id or code matches and the name is one student's
    by_id = {s.id: s for s in manifest.students}
    by_variant: dict[str, list[Student]] = {}
    for s in manifest.students:
        if s.variant:
            by_variant.setdefault(s.variant.upper(), []).append(s)
    folded: dict[str, list[str]] = {}
    for s in manifest.students:
        folded.setdefault(s.id.casefold(), []).append(s.id)
    by_name: dict[str, list[Student]] = {}
    for s in manifest.students:
        if s.name:
            by_name.setdefault(_name_key(s.name), []).append(s)
    id_cols = [lower.index(c) for c in ID_COLUMNS if c in lower]
    var_cols = [lower.index(c) for c in VARIANT_COLUMNS if c in lower]
    name_col = next((lower.index(c) for c in NAME_COLUMNS if c in lower), None)
    first_last = (lower.index("first name"), lower.index("surname")) if "first name" in lower and "surname" in lower else None
    if not (id_cols or var_cols or name_col is not None or first_last):
        raise WorkedError(Msg("{file}: no id column (expected one of: {columns})", file=src,
                              columns="id, student_id, ID number, username, email, variant"))

    # an id or code column counts when it names students of this quiz (Moodle's "Email address" may not):
    # then a row with a value there is that student or no one, never matched on its name instead
    data = [r + [""] * (len(header) - len(r)) for r in rows[1:]]
    id_cols = [c for c in id_cols if any(r[c].strip() in by_id for r in data)]
    var_cols = [c for c in var_cols if any(r[c].strip().upper() in by_variant for r in data)]

    read = []
    for q in asks:
        c = qcol.get(q)
        if isinstance(c, dict):
            read.append(Msg("{ask} ← {n} entry columns ({names})", ask=q, n=len(c),
                            names=", ".join(list(c)[:2]) + (", …" if len(c) > 2 else "")))
        elif c is not None:
            read.append(Msg("{ask} ← {column}", ask=q, column=repr(header[c])))
    who = [header[c] for c in id_cols + var_cols] + ([header[name_col]] if name_col is not None else [])
    columns = Msg("read columns: {columns}; students by {who}", columns=joined("; ", read),
                  who=", ".join(repr(w) for w in who) or Msg("first name + surname"))

    out, seen, unmatched = [], {}, []
    for line, r in enumerate(rows[1:], 2):
        if not any(x.strip() for x in r):
            continue
        r = r + [""] * (len(header) - len(r))
        ids = [r[c].strip() for c in id_cols if r[c].strip()]
        codes = [r[c].strip() for c in var_cols if r[c].strip()]
        nm = ""
        if name_col is not None or first_last:
            nm = r[name_col] if name_col is not None else f"{r[first_last[0]]} {r[first_last[1]]}"
        if not (ids or codes) and "overall average" in (_norm(nm), _norm(" ".join(r[:2]))):
            continue     # Moodle's last row
        label = (ids + codes + [nm.strip()])[0] if (ids or codes or nm.strip()) else ""
        cands = {by_id[i].id: by_id[i] for i in ids if i in by_id}
        for c in codes:
            cands.update({s.id: s for s in by_variant.get(c.upper(), [])})   # a code shared by students: ambiguous
        student = None
        if len(cands) > 1:
            unmatched.append(Msg("line {line} ({label}): matches more than one student ({ids})", line=line, label=repr(label),
                                 ids=", ".join(sorted(cands))))
            continue
        if cands:
            student = next(iter(cands.values()))
        elif nm.strip():
            found = by_name.get(_name_key(nm), [])
            if len(found) > 1:
                unmatched.append(Msg("line {line} ({label}): {n} students have this name ({ids}); give an id column",
                                     line=line, label=repr(nm.strip()), n=len(found), ids=", ".join(s.id for s in found)))
                continue
            if found and not (ids or codes):
                student = found[0]
        if student is None:
            near = sorted({x for i in ids for x in folded.get(i.casefold(), [])})
            at = dict(line=line, label=repr(label) if label else Msg("'no id'"))
            unmatched.append(Msg("line {line} ({label}): not a student of this quiz (ids are compared exactly; the quiz has "
                                 "{ids})", ids=", ".join(map(repr, near)), **at) if near else
                             Msg("line {line} ({label}): not a student of this quiz", **at))
            continue
        if student.id in seen:
            first = seen[student.id]
            unmatched.append(Msg("lines {first} and {line}: two rows for {id}", first=first, line=line, id=repr(student.id)))
            out = [o for o in out if o.key != student.id]
            continue
        seen[student.id] = line
        cells = {}
        for q, c in qcol.items():
            cells[q] = {h: r[i] for h, i in c.items()} if isinstance(c, dict) else r[c]
        out.append(Row(student.id, cells, line))
    if unmatched and not allow_unmatched:
        at = dict(file=src, n=len(unmatched), rows=joined("; ", unmatched[:5]), more=len(unmatched) - 5)
        if len(unmatched) == 1:
            raise WorkedError(Msg("{file}: {n} row cannot be given to exactly one student: {rows}. Nothing was graded: fix "
                                  "the rows, or use --allow-unmatched to grade the others and list these in the report", **at))
        if len(unmatched) <= 5:
            raise WorkedError(Msg("{file}: {n} rows cannot be given to exactly one student: {rows}. Nothing was graded: fix "
                                  "the rows, or use --allow-unmatched to grade the others and list these in the report", **at))
        raise WorkedError(Msg("{file}: {n} rows cannot be given to exactly one student: {rows} and {more} more. Nothing was "
                              "graded: fix the rows, or use --allow-unmatched to grade the others and list these in the "
                              "report", **at))
    warnings += [Msg("not graded: {row}", row=u) for u in unmatched]
    return out, warnings, columns


# ---------------------------------------------------------------- grading

@dataclass
class StudentResult:
    student: Student
    responded: bool
    scores: dict            # ask → points earned
    fractions: dict         # ask → fraction of the question's entries right (or carried forward)
    codes: list             # misconception codes diagnosed
    problems: list          # messages about unreadable responses

    @property
    def total(self) -> float:
        return round(sum(self.scores.values()), 2)


def grade_student(student: Student, row: Row | None, src: str) -> StudentResult:
    """Check one student's responses (all questions together, so error carried forward works across them)."""
    from .check import check_answers
    from .solver import solve

    if student.parts:       # a quiz with [[parts]]: each part checked against its own problem
        results = [grade_student(p, row, src) for p in student.parts]
        merged = StudentResult(student, any(r.responded for r in results), {}, {}, [], [])
        for r in results:
            merged.scores.update(r.scores)
            merged.fractions.update(r.fractions)
            merged.codes += [c for c in r.codes if c not in merged.codes]
            merged.problems += r.problems
        return merged
    if student.solution is None:
        student.solution = solve(student.problem)
    for q in student.questions:
        resolve_question(q, student, src)
    if row is None:
        return StudentResult(student, False, {q.ask: 0.0 for q in student.questions},
                             {q.ask: 0.0 for q in student.questions}, [], [])
    mats = student.solution.matrices()
    answers: dict[str, list] = {}
    problems = []
    picked: dict = {}       # a choice question's ask → the option chosen (or None)
    for q in student.questions:
        cell = row.cells.get(q.ask)
        if isinstance(cell, dict):      # per-entry columns
            m = mats[q.matrix]
            vals = []
            for (i, j) in q.cells:
                keys = [f"{q.matrix}[{i + 1},{j + 1}]", f"{re.sub(r'[[].*$', '', q.ask)}[{i + 1},{j + 1}]"]
                vals.append(next((cell[k] for k in keys if k in cell), ""))
        else:
            vals = split_cell(cell or "", q.shape)
        if len(vals) != len(q.cells):
            at = dict(ask=q.ask, n=len(q.cells), got=len(vals))
            problems.append(Msg("{ask}: expected {n} entry, got {got}", **at) if len(q.cells) == 1 else
                            Msg("{ask}: expected {n} entries, got {got}", **at))
            vals = [""] * len(q.cells)
        grid = answers.setdefault(q.matrix, [[None] * mats[q.matrix].shape[1] for _ in range(mats[q.matrix].shape[0])])
        if q.kind == "choice":      # an option by its letter or its value: checked as its value
            picked[q.ask] = choice.chosen(vals[0], q.options)
            if vals[0].strip() and picked[q.ask] is None:
                problems.append(Msg("{ask}: {answer} is none of the options ({options})", ask=q.ask,
                                    answer=repr(vals[0].strip()[:40]),
                                    options=", ".join(o["letter"] + " " + o["value"] for o in q.options)))
            vals = [picked[q.ask]["value"] if picked[q.ask] else vals[0]]
        for (i, j), v in zip(q.cells, vals):
            if v.strip():
                grid[i][j] = v
    tols = {q.tolerance for q in student.questions}
    reports = {t: check_answers(student.problem, answers, tolerance=t, solution=student.solution) for t in tols}
    scores, fractions, codes = {}, {}, []
    for q in student.questions:
        if q.kind == "choice":      # the right option earns the points, any other none
            o = picked.get(q.ask)
            good, scores[q.ask] = (1, q.points) if o is not None and o["right"] else (0, 0.0)
            fractions[q.ask] = float(good)
            continue
        rep = reports[q.tolerance]
        m = next((mr for mr in rep.matrices if mr.key == q.matrix), None)
        good, scores[q.ask] = q.score(*((m.verdicts, m.carried) if m is not None else (None, None)))
        fractions[q.ask] = good / len(q.cells)
    # misconceptions are about the method, not the grading tolerance: read them with the default band
    if None not in reports:
        reports[None] = check_answers(student.problem, answers, tolerance=None, solution=student.solution)
    codes = [d["code"] for d in reports[None].diagnoses]
    # a wrong option is the value of a named mistake: the student's choice names it
    codes += [o["mistake"] for o in picked.values() if o is not None and o.get("mistake") and o["mistake"] not in codes]
    for rep in reports.values():
        for e in rep.errors:
            if e["message"] not in problems:
                problems.append(e["message"])
    return StudentResult(student, True, scores, fractions, codes, problems)


def grade(quizdir, responses, outdir=None, *, force: bool = False, allow_unmatched: bool = False, lang=None) -> dict:
    """Grade a class. Writes ``gradebook.csv`` and ``report.html`` to *outdir* (default: QUIZDIR/grades),
    replacing them only with *force*; returns {"gradebook": path, "report": path, "warnings": [...],
    "results": [StudentResult], "note": what was left alone, "columns": "read columns: …"}. Rows that match no student or several
    stop the run (:func:`read_responses`) unless *allow_unmatched*. *lang*: the report's language (the gradebook is
    data, the same in every language)."""
    from .output import FolderSet

    manifest = load_manifest(quizdir)
    out = Path(outdir) if outdir else (Path(quizdir) if Path(quizdir).is_dir() else Path(quizdir).parent) / "grades"
    names = ("gradebook.csv", "report.html")
    clash = [n for n in names if (out / n).exists()]
    if clash and not force:
        if len(clash) == 1:
            raise WorkedError(Msg("{folder}: {file} already exists (use --force to overwrite, or another -o)", folder=out,
                                  file=clash[0]))
        raise WorkedError(Msg("{folder}: {a} and {b} already exist (use --force to overwrite, or another -o)", folder=out,
                              a=clash[0], b=clash[1]))
    rows, warnings, columns = read_responses(responses, manifest, allow_unmatched=allow_unmatched)
    by_key = {r.key: r for r in rows}
    results = []
    for s in manifest.students:
        res = grade_student(s, by_key.get(s.id), manifest.source)
        if not res.responded:
            warnings.append(Msg("no response from {id} ({name}): scored 0", id=repr(s.id), name=s.name) if s.name else
                            Msg("no response from {id}: scored 0", id=repr(s.id)))
        for msg in res.problems:
            warnings.append(Msg("{id}: {problem}", id=s.id, problem=msg))
        results.append(res)
    files = {"gradebook.csv": gradebook_csv(manifest, results).encode("utf-8"),
             "report.html": _report_in(lang, manifest, results, warnings).encode("utf-8")}
    with FolderSet(out, kind="worked grade", force=force, ask_to_replace=True, legacy=names) as stage:
        stage.write(files)
        stage.commit()
    return {"gradebook": out / names[0], "report": out / names[1], "warnings": warnings, "results": results,
            "note": stage.note(), "columns": columns}


def _fmt(x: float) -> str:
    return f"{x:.2f}".rstrip("0").rstrip(".") if x != int(x) else str(int(x))


def gradebook_csv(manifest: Manifest, results: list[StudentResult]) -> str:
    """One row per student: id, name, variant, points per question, total, out of, misconceptions. Cells a
    spreadsheet would run as a formula are quoted (:mod:`worked.csvsafe`)."""
    from . import csvsafe

    asks = [q.ask for q in manifest.questions]
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    maxpts = sum(q.points for q in manifest.questions)
    w.writerow(csvsafe.row(["id", "name", "variant"] + asks + ["total", "out_of", "misconceptions", "responded"]))
    for r in results:
        w.writerow(csvsafe.row([r.student.id, r.student.name, r.student.variant] + [_fmt(r.scores.get(a, 0.0)) for a in asks]
                               + [_fmt(r.total), _fmt(maxpts), " ".join(r.codes), "yes" if r.responded else "no"]))
    return out.getvalue()


# ---------------------------------------------------------------- the class report

def _svg_bars(items, *, width=560, bar_h=22, label_w=170, fmt=lambda v: str(v), vmax=None, color="#3b6ea8",
              title="") -> str:
    """A horizontal bar chart as inline SVG: items = [(label, value)]."""
    from html import escape

    vmax = vmax or max([it[1] for it in items] + [1])
    h = bar_h * len(items) + 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" viewBox="0 0 {width} {h}" '
             f'role="img" aria-label="{escape(title)}">']
    span = width - label_w - 100
    for k, item in enumerate(items):
        label, v = item[0], item[1]
        fill = item[2] if len(item) > 2 else color
        y = 5 + k * bar_h
        bw = 0 if vmax == 0 else span * v / vmax
        parts.append(f'<text x="{label_w - 8}" y="{y + bar_h * 0.68:.1f}" text-anchor="end" font-size="13">{escape(str(label))}</text>')
        parts.append(f'<rect x="{label_w}" y="{y + 3}" width="{bw:.1f}" height="{bar_h - 6}" fill="{fill}"/>')
        parts.append(f'<text x="{label_w + bw + 6:.1f}" y="{y + bar_h * 0.68:.1f}" font-size="13">{escape(fmt(v))}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _svg_histogram(values, maxpts, *, width=560, height=220) -> str:
    """Score distribution: 10 bins from 0 to the maximum, as inline SVG columns."""
    from html import escape

    bins = [0] * 10
    for v in values:
        k = min(9, int(10 * v / maxpts)) if maxpts else 0
        bins[k] += 1
    top = max(bins + [1])
    left, bottom, plot_h = 36, 30, height - 50
    bw = (width - left - 10) / 10
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
             'role="img" aria-label="' + escape(_("score distribution")) + '">']
    parts.append(f'<line x1="{left}" y1="{height - bottom}" x2="{width - 10}" y2="{height - bottom}" stroke="#444"/>')
    for k, c in enumerate(bins):
        x = left + k * bw
        hgt = plot_h * c / top
        y = height - bottom - hgt
        parts.append(f'<rect x="{x + 2:.1f}" y="{y:.1f}" width="{bw - 4:.1f}" height="{hgt:.1f}" fill="#3b6ea8"/>')
        if c:
            parts.append(f'<text x="{x + bw / 2:.1f}" y="{y - 4:.1f}" text-anchor="middle" font-size="12">{c}</text>')
        parts.append(f'<text x="{x + bw / 2:.1f}" y="{height - bottom + 15}" text-anchor="middle" font-size="11">'
                     f'{10 * k}–{10 * (k + 1)}%</text>')
    label = escape(_("percent of {points} points", points=current().number(_fmt(maxpts))))
    parts.append(f'<text x="{left}" y="{height - 3}" font-size="11" fill="#555">{label}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _report_in(lang, manifest, results, warnings) -> str:
    with i18n.using(lang):
        return report_html(manifest, results, warnings)


def report_html(manifest: Manifest, results: list[StudentResult], warnings: list[str]) -> str:
    """The class report: summary, score distribution, per-question difficulty, misconceptions, students."""
    import jinja2
    from markupsafe import Markup

    from .mistakes import MISTAKES

    def fmt(x: float) -> str:       # a number as the report's language writes it (the gradebook keeps _fmt's)
        return current().number(_fmt(x))

    maxpts = sum(q.points for q in manifest.questions)
    responded = [r for r in results if r.responded]
    totals = [r.total for r in responded]
    qstats = []
    for q in manifest.questions:
        fr = [r.fractions.get(q.ask, 0.0) for r in responded]
        qstats.append({"ask": q.ask, "points": fmt(q.points),
                       "mean": fmt(round(statistics.mean([r.scores.get(q.ask, 0.0) for r in responded]), 2)) if responded else "–",
                       "right": round(100 * statistics.mean(fr)) if fr else 0,
                       "full": sum(1 for f in fr if f == 1.0)})
    counts = {c: sum(1 for r in responded if c in r.codes) for c in MISTAKES}
    # an accepted note (rounded too early) goes last, after the real mistakes
    mis = [(c, n) for c, n in sorted(counts.items(), key=lambda kv: (MISTAKES[kv[0]].accepted, -kv[1],
                                                                     list(MISTAKES).index(kv[0]))) if n]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    from .render.env import template_globals

    env.globals.update(template_globals("html"))
    tpl = env.get_template("class.html")
    return tpl.render(
        title=manifest.title or _("Quiz"),
        n=len(results), n_responded=len(responded), maxpts=fmt(maxpts),
        mean=fmt(round(statistics.mean(totals), 2)) if totals else "–",
        median=fmt(round(statistics.median(totals), 2)) if totals else "–",
        hist=Markup(_svg_histogram(totals, maxpts)),
        difficulty=Markup(_svg_bars([(q["ask"], q["right"]) for q in qstats], vmax=100, fmt=lambda v: f"{v}%",
                                    title=_("per-question difficulty: share of entries right"))),
        questions=qstats,
        misconceptions=[{"code": c, "title": MISTAKES[c].title_text() + (_(" (accepted, pointed out)")
                                                                              if MISTAKES[c].accepted else ""),
                         "count": n} for c, n in mis],
        mis_chart=Markup(_svg_bars([(c, n, "#8c8c8c") if MISTAKES[c].accepted else (c, n) for c, n in mis],
                                   fmt=lambda v: ngettext("{n} student", "{n} students", v), color="#b5562f",
                                   title=_("misconceptions"))) if mis else None,
        asks=[q.ask for q in manifest.questions],
        students=[{"id": r.student.id, "name": r.student.name, "variant": r.student.variant,
                   "scores": [fmt(r.scores.get(q.ask, 0.0)) for q in manifest.questions], "total": fmt(r.total),
                   "codes": r.codes, "responded": r.responded} for r in results],
        warnings=[localized_text(w) for w in warnings],
    )


TEMPLATES = Path(__file__).resolve().parent / "templates" / "report"   # worked/templates (see pyproject.toml)
