"""Quiz batches: one variant per student from a short spec, with keys, a manifest and LMS exports.

``worked quiz SPEC [-n COUNT | --roster roster.csv] [--seed S] [-o DIR] [--format ...] [--jobs J] [--variant CODE]``

Pipeline (everything is validated and built in memory first; files are written into a temporary
folder that replaces DIR at the end, so a failure writes nothing):

1. :func:`load_spec` reads the TOML spec (title, seed, [family], [[questions]]) and checks every ask
   against the family's shapes; :func:`load_roster` reads ``id,name`` CSV rows.
2. :func:`plan` gives every variant a seed and a short code, derived with SHA-256 from the quiz
   seed and the student id (or the variant number): stable when the roster is reordered or grows.
3. :func:`build_variant` (run in worker processes) draws the problem, solves it exactly, works out the
   expected answers with tolerances and the values of known mistakes, and renders the sheets. A worker
   process builds VARIANTS_PER_WORKER consecutive variants, then ends, and a fresh one (forked from the
   main process) takes the next chunk (:func:`in_fresh_workers`).
4. The main process writes each variant's files into a temporary folder as they arrive (keeping none of
   them in memory), then, the workers gone, joins the sheets just written into the two class PDFs
   (:func:`merge_pdfs`, with pikepdf: each student's sheet starting on an odd page), one after the
   other; ``manifest.json``/``manifest.csv`` and the LMS exports (:mod:`worked.lms`, from the written
   ``variant.json`` files) follow, and the folder replaces DIR.

Memory (peak PSS of the process tree, 300 variants, two cores: see benchmarks/bench_quiz.py). Typst
keeps what it compiled for the next ten documents of its process, about 11 MB a document here, and does
not give it back to the system: a long-lived worker reached about 200 MB, so a worker lives for 2
variants (4 documents, about 100–115 MB). qpdf holds the pages it joins until it writes: joining the
keys of 300 variants takes about 170 MB, which is why it runs alone, after the workers, and writes
straight into its file. (Placing the
pages in one Typst document instead took about 400 MB for the keys; the class PDFs as one Typst
document of the sheets' sources about 15 MB a variant; pypdf joined them 5 times slower than qpdf.)

Same spec and seed → same bytes, whatever ``--jobs`` is: the chunks do not depend on it.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import choice, eq, i18n, printers, stages
from . import exporters as E
from .ask import AskError, Question, parse
from .attention import Float, run_pass
from .check import Tolerance
from .errors import ProblemError, WorkedError
from .generate import Family, block_families, generate
from .i18n import N_, Msg
from .mistakes import MISTAKES
from .mistakes import of as mistakes_of      # the mistakes an architecture's stages declare

SPEC_KEYS = ("title", "seed", "count", "paper", "instructions", "lang", "family", "problem", "questions", "parts")
PART_KEYS = ("title", "family", "questions")
MAX_PARTS = 10
QUESTION_KEYS = ("ask", "points", "tolerance", "name", "type", "choices")
QUESTION_TYPES = ("value", "choice")
TOLERANCE_KEYS = ("abs", "rel")
FORMATS = tuple(E.EXPORTERS)                                   # pdf, html, tex, moodle, qti, gift, ipynb
DEFAULT_FORMATS = tuple(f for f, e in E.EXPORTERS.items() if e.quiz_default)   # pdf, html, moodle, qti, gift
MAX_VARIANTS = 2000
# a seed's digits are in the quiz's Moodle category name (varchar(255)), which always keeps them: see
# worked.lms.quiz_category
MAX_SEED_DIGITS = 100
MAX_SEED = 10 ** MAX_SEED_DIGITS - 1
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L: easy to read aloud and type

# ---------------------------------------------------------------- spec

@dataclass(frozen=True)
class QuizSpec:
    title: str
    seed: int
    family: Family
    questions: tuple[Question, ...]      # resolved against the family's shapes (worked.ask)
    count: int | None = None
    paper: str = "a4"
    instructions: str = ""
    source: str = "<spec>"
    pdf_engine: str = "typst"   # or "weasyprint" (the HTML sheets printed) or "latex" (pdflatex on the .tex)
    lang: str | None = None     # the language of the sheets, notebooks and LMS texts (worked.i18n); None: English
    # a quiz that mixes families ([[parts]]): each part a QuizSpec of its own (its family and questions; its
    # title the part's); then *family* is the first part's and *questions* all parts' questions, in order
    parts: tuple = ()


@dataclass(frozen=True)
class Given:
    """A quiz over one given problem (a ``[problem]`` table: a problem file's keys) instead of a [family]: every
    variant works the same problem (a Transformer block's, until ``worked new --block`` draws them)."""

    problem: Any
    title: str = ""
    blocks = None           # not a chain of blocks
    train = False

    @property
    def decimals(self) -> int:
        return self.problem.decimals

    @property
    def mask(self) -> str:
        return self.problem.mask

    def to_dict(self) -> dict:
        return {"problem": self.problem.to_dict()}


def family_dims(fam) -> "stages.Dims":
    """The sizes of a family's variants (or of the given problem's)."""
    return stages.Dims.of_problem(fam.problem) if isinstance(fam, Given) else stages.Dims.of_family(fam)


def _draw(fam, seed: int, title: str):
    """A variant's problem: drawn from the family with *seed*, or the given problem (titled as the quiz); and the
    hand pass that accepted a drawn problem, for its solution to show (:func:`worked.generate.generate`; None for a
    given problem)."""
    if isinstance(fam, Given):
        d = fam.problem.to_dict()
        d["title"] = title
        from .problem import Problem

        return Problem.from_dict(d, source=fam.problem.source), None
    return generate(fam, seed, title=title, with_hand=True)


def _may_be_inf(key: str, fam: Family) -> bool:
    """May an entry of the matrix of *key* be −∞ (a score the mask hides)? Its stage says."""
    stage = (stages.of(fam.problem) if isinstance(fam, Given) else stages.of(family_dims(fam))).stage(key.rpartition(".")[2])
    return stage is not None and stage.may_be_inf


def matrix_shapes(fam: Family) -> dict[str, tuple[int, int]]:
    """The shape of every matrix a variant of *fam* has, by key (the training step's too, for a [train] family; a
    chain's blocks' as ``block1.Q`` …, and ``Z`` the last block's)."""
    if fam.blocks:
        out = {}
        for k, bf in enumerate(block_families(fam), 1):
            out.update({f"block{k}.{key}": s for key, s in matrix_shapes(bf).items()})
        out[stages.OUTPUT] = out[f"block{len(fam.blocks)}.{stages.OUTPUT}"]
        return out
    return stages.matrices(family_dims(fam))


def _in_block(matrix: str) -> tuple[int | None, str]:
    """``block2.weights`` → (2, "weights"); ``weights`` → (None, "weights")."""
    m = re.fullmatch(r"block(\d+)\.(.+)", matrix)
    return (int(m.group(1)), m.group(2)) if m else (None, matrix)


def family_question(q: Question, fam: Family) -> Question:
    """*q* resolved against the shapes of *fam*'s variants (by numbers: a variant's tokens are drawn); an entry
    the causal mask hides (−∞) is refused. Raises :class:`worked.ask.AskError`."""
    q.resolve(matrix_shapes(fam))
    k, _ = _in_block(q.matrix)
    bf = block_families(fam)[k - 1] if fam.blocks and k else fam
    if (bf.mask == "causal" and q.parsed.one_row and q.parsed.one_col and q.cells[0][1] > q.cells[0][0]
            and _may_be_inf(q.matrix, bf)):
        raise AskError(Msg("{ask} is masked by the causal mask (−∞): ask an entry with column ≤ row", ask=q.ask))
    return q


def spec_from_dict(data: dict, source: str) -> QuizSpec:
    def err(fieldname, msg):
        return ProblemError(fieldname, msg, source)

    if not isinstance(data, dict):
        raise err("", Msg("expected a TOML table"))
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise err(unknown[0], Msg("unknown key (expected some of: {keys})", keys=", ".join(SPEC_KEYS)))
    title = data.get("title", "Attention quiz")
    if not isinstance(title, str) or not title.strip() or len(title) > 200:
        raise err("title", Msg("expected a non-empty string of at most {n} characters", n=200))
    seed = data.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise err("seed", Msg("expected a whole number ≥ 0, got {got}", got=repr(seed)))
    if seed > MAX_SEED:
        raise err("seed", Msg("expected a whole number of at most {n} digits (it names the quiz's LMS "
                              "category, at most 255 characters), got a longer one", n=MAX_SEED_DIGITS))
    count = data.get("count")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_VARIANTS):
        raise err("count", Msg("expected a whole number from {lo} to {hi}, got {got}", lo=1, hi=MAX_VARIANTS,
                               got=repr(count)))
    paper = data.get("paper", "a4")
    if paper not in ("a4", "letter"):
        raise err("paper", Msg('expected "a4" or "letter", got {got}', got=repr(paper)))
    instructions = data.get("instructions", "")
    if not isinstance(instructions, str) or len(instructions) > 2000:
        raise err("instructions", Msg("expected a string of at most {n} characters", n=2000))
    lang = data.get("lang")
    if lang is not None:
        from . import i18n

        try:
            lang = i18n.canonical(lang) if isinstance(lang, str) else i18n.canonical(repr(lang))
        except i18n.UnknownLanguage as exc:
            raise err("lang", exc.args[0]) from None
    common = dict(seed=seed, count=count, paper=paper, instructions=instructions, source=source, lang=lang)
    if "parts" in data:
        for key in ("family", "questions"):
            if key in data:
                raise err(key, Msg("a quiz with [[parts]] gives each part its own [parts.family] and [[parts.questions]]"))
        raw = data["parts"]
        if not isinstance(raw, list) or not raw or len(raw) > MAX_PARTS:
            raise err("parts", Msg("expected 1 to {n} [[parts]] tables, each with [parts.family] and [[parts.questions]]",
                                   n=MAX_PARTS))
        parts, names, first, asks = [], set(), 1, {}
        for k, pd in enumerate(raw, 1):
            where = f"parts[{k}]"
            if not isinstance(pd, dict):
                raise err(where, Msg("expected a table with family and questions"))
            unknown = sorted(set(pd) - set(PART_KEYS))
            if unknown:
                raise err(f"{where}.{unknown[0]}", Msg("unknown key (expected some of: {keys})", keys=", ".join(PART_KEYS)))
            ptitle = pd.get("title", f"Part {k}")
            if not isinstance(ptitle, str) or not ptitle.strip() or len(ptitle) > 200:
                raise err(f"{where}.title", Msg("expected a non-empty string of at most {n} characters", n=200))
            fam, questions = _family_and_questions(pd.get("family", {}), pd.get("questions"), f"{title} — {ptitle}",
                                                   err, f"{where}.", first, names, source)
            for j, q in enumerate(questions, 1):
                if q.ask in asks:
                    raise err(f"{where}.questions[{j}].ask", Msg("{ask} is asked in part {part} too: the responses and "
                                                                 "the LMS reports name a question by its ask (ask another "
                                                                 "entry)", ask=q.ask, part=asks[q.ask]))
                asks[q.ask] = k
            first += len(questions)
            parts.append(QuizSpec(title=f"{title} — {ptitle}", family=fam, questions=tuple(questions), **common))
        return QuizSpec(title=title, family=parts[0].family, questions=tuple(q for p in parts for q in p.questions),
                        parts=tuple(parts), **common)
    if "problem" in data:       # one given problem for every variant
        if "family" in data:
            raise err("problem", Msg("give a [family] (a problem drawn for each student) or a [problem], not both"))
        if not isinstance(data["problem"], dict):
            raise err("problem", Msg("expected a table with a problem file's keys (X, W_Q, …, block, …)"))
        from .problem import Problem

        fam = Given(Problem.from_dict(data["problem"], source=f"{source}: problem"), title=title)
    else:
        fam = data.get("family", {})
    fam, questions = _family_and_questions(fam, data.get("questions"), title, err, "", 1, set(), source)
    return QuizSpec(title=title, family=fam, questions=tuple(questions), **common)


def _family_and_questions(fam_data, qs, title, err, prefix: str, first: int, names: set, source: str):
    """A [family] and its [[questions]] (at *prefix*: "" or "parts[2]."), the questions named q<first>, … unless
    named; *names*: the names taken (by the parts before)."""
    if isinstance(fam_data, Given):
        fam = fam_data
    else:
        fam = Family.from_dict(dict(fam_data) if isinstance(fam_data, dict) else fam_data, source=source,
                               prefix=prefix + "family.")
    if not fam.title:
        from dataclasses import replace

        fam = replace(fam, title=title)
    if not isinstance(qs, list) or not qs:
        raise err(prefix + "questions", Msg("expected at least one [[questions]] table with ask = \"…\""))
    if len(qs) > 50:
        raise err(prefix + "questions", Msg("{n} questions is more than a quiz sheet holds (at most {most})", n=len(qs),
                                            most=50))
    default_tol = 10.0 ** -fam.decimals
    questions = []
    for k, q in enumerate(qs, 1):
        where = f"{prefix}questions[{k}]"
        if not isinstance(q, dict):
            raise err(where, Msg("expected a table with ask, points and tolerance"))
        unknown = sorted(set(q) - set(QUESTION_KEYS))
        if unknown:
            raise err(f"{where}.{unknown[0]}", Msg("unknown key (expected some of: {keys})", keys=", ".join(QUESTION_KEYS)))
        if "ask" not in q:
            raise err(f"{where}.ask", Msg('missing: what is asked, such as "scores[2,3]", "weights[1,*]" or "Z"'))
        name = q.get("name", f"q{first + k - 1}")
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]{1,40}", name):
            raise err(f"{where}.name", Msg("expected a short name of letters, digits, _ . - (e.g. q1)"))
        if name in names:
            raise err(f"{where}.name", Msg("duplicate question name {name}", name=repr(name)))
        names.add(name)
        points = q.get("points", 1)
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 < points <= 1000:
            raise err(f"{where}.points", Msg("expected a positive number, got {got}", got=repr(points)))
        tol = q.get("tolerance", default_tol)
        if isinstance(tol, dict):
            unknown = sorted(set(tol) - set(TOLERANCE_KEYS))
            if unknown:
                raise err(f"{where}.tolerance.{unknown[0]}", Msg("unknown key (expected abs and/or rel)"))
            ta, tr = tol.get("abs", 0.0), tol.get("rel", 0.0)
        else:
            ta, tr = tol, 0.0
        for label, v in (("abs", ta), ("rel", tr)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1000 or math.isnan(v):
                raise err(f"{where}.tolerance", Msg("expected a number ≥ 0 (or {table}), got {got}",
                                                    table="{abs = …, rel = …}", got=repr(v)))
        if ta == 0 and tr == 0:
            raise err(f"{where}.tolerance", Msg("is zero: decimal answers could never match; give e.g. tolerance = 0.01"))
        kind = q.get("type", "value")
        if kind not in QUESTION_TYPES:
            raise err(f"{where}.type", Msg('expected "value" (a number to type) or "choice" (options to choose), got {got}',
                                           got=repr(kind)))
        nchoices = q.get("choices", 4 if kind == "choice" else None)
        if nchoices is not None and kind != "choice":
            raise err(f"{where}.choices", Msg('is for type = "choice" questions only'))
        if kind == "choice" and (isinstance(nchoices, bool) or not isinstance(nchoices, int)
                                 or not choice.MIN_CHOICES <= nchoices <= choice.MAX_CHOICES):
            raise err(f"{where}.choices", Msg("expected a whole number of options from {lo} to {hi} (the right value and "
                                              "the wrong ones), got {got}", lo=choice.MIN_CHOICES, hi=choice.MAX_CHOICES,
                                              got=repr(nchoices)))
        question = Question(q["ask"].strip() if isinstance(q["ask"], str) else q["ask"], float(points),
                            Tolerance(abs=float(ta), rel=float(tr)), name=name, kind=kind, choices=nchoices or 0)
        try:
            questions.append(family_question(question, fam))
        except AskError as exc:
            raise err(f"{where}.ask", exc.args[0]) from None
        if kind == "choice" and len(question.cells) != 1:
            raise err(f"{where}.ask", Msg("a choice question asks one value: expected an ask that names one entry "
                                          "(such as Z[1,2]) or a scalar (such as loss), got {got}", got=repr(question.ask)))
    return fam, questions


def read_questions(fam_data, qs: list, *, prefix: str = "", first: int = 1, source: str = "<spec>"):
    """A ``[family]`` and its ``[[questions]]`` (of a part at *prefix*, such as ``parts[2].``) read and checked as
    :func:`spec_from_dict` reads them: (family, questions), or the :class:`ProblemError` it raises (the web page's
    quiz builder checks a question at a time with it)."""
    return _family_and_questions(fam_data, qs, "quiz", lambda f, m: ProblemError(f, m, source), prefix, first, set(),
                                 source)


def load_spec(path) -> QuizSpec:
    """Read a TOML quiz spec (a regular file of at most 1 MB, a BOM allowed; see :mod:`worked.readfile`)."""
    from .readfile import InputError, loads_toml, read_text

    try:
        data = loads_toml(read_text(path, expected=Msg("a TOML quiz spec")), str(path), parse_float=float)
    except InputError as exc:
        raise ProblemError("", exc.message, str(path)) from None
    return spec_from_dict(data, str(path))


# ---------------------------------------------------------------- roster

def _bad_char(s: str) -> str | None:
    """The first character of *s* a roster refuses, named (U+0007), or None: control characters (C0, DEL,
    C1: no PDF, TeX or XML shows them), lone surrogates and the noncharacters U+FFFE/U+FFFF."""
    for c in s:
        o = ord(c)
        if o < 0x20 or 0x7F <= o <= 0x9F or 0xD800 <= o <= 0xDFFF or o in (0xFFFE, 0xFFFF):
            return f"U+{o:04X}"
    return None


def load_roster(path) -> list[dict]:
    """Rows of a CSV with at least ``id`` and ``name`` columns → [{"id", "name"}], validated.

    Errors name the file, the line and what was expected (``roster.csv: line 4: name contains the control
    character U+0007; expected printable text``); line numbers are the file's, also after a quoted field
    that spans lines."""
    from .readfile import csv_rows, read_text

    src = str(path)
    from .csvin import delimiter

    text = read_text(path, expected=Msg("a UTF-8 CSV roster"))
    rows = csv_rows(text, src, delimiter(text), expected=Msg("id,name rows"))
    while rows and not any(c.strip() for c in rows[0][1]):
        rows.pop(0)
    if not rows:
        raise WorkedError(Msg("{file}: empty roster (expected a header line id,name and one line per student)", file=src))
    hl, head = rows[0]
    header = [h.strip().lower() for h in head]
    for col in ("id", "name"):
        if col not in header:
            raise WorkedError(Msg("{file}: line {line}: no {column} column (the header must name at least id and name)",
                                  file=src, line=hl, column=repr(col)))
    ii, ni = header.index("id"), header.index("name")
    students: list[dict] = []
    seen: dict[str, int] = {}
    for ln, r in rows[1:]:
        if not any(c.strip() for c in r):
            continue
        if len(r) <= max(ii, ni):
            raise WorkedError(Msg("{file}: line {line}: expected {n} columns, got {got}", file=src, line=ln, n=len(header),
                                  got=len(r)))
        sid, name = r[ii].strip(), r[ni].strip()
        if not sid:
            raise WorkedError(Msg("{file}: line {line}: empty id", file=src, line=ln))
        for label, value in (("id", sid), ("name", name)):
            bad = _bad_char(value)
            if bad:
                at = dict(file=src, line=ln, column=label, char=bad)
                raise WorkedError(Msg("{file}: line {line}: {column} contains the control character {char}; expected "
                                      "printable text on one line", **at) if bad in ("U+000A", "U+000D") else
                                  Msg("{file}: line {line}: {column} contains the control character {char}; expected "
                                      "printable text", **at))
        if len(sid) > 64 or len(name) > 120:
            raise WorkedError(Msg("{file}: line {line}: id or name too long (at most {id} and {name} characters)", file=src,
                                  line=ln, id=64, name=120))
        if sid in seen:
            raise WorkedError(Msg("{file}: line {line}: duplicate student id {id} (also on line {other})", file=src, line=ln,
                                  id=repr(sid), other=seen[sid]))
        seen[sid] = ln
        students.append({"id": sid, "name": name})
    if not students:
        raise WorkedError(Msg("{file}: empty roster (a header but no students)", file=src))
    if len(students) > MAX_VARIANTS:
        raise WorkedError(Msg("{file}: {n} students is more than {most}", file=src, n=len(students), most=MAX_VARIANTS))
    return students


# ---------------------------------------------------------------- variants

@dataclass(frozen=True)
class Variant:
    number: int            # 1-based position in this batch
    code: str
    seed: int
    student: dict | None   # {"id", "name"} or None


def _digest(quiz_seed: int, key: str) -> bytes:
    return hashlib.sha256(f"worked-quiz\x00{quiz_seed}\x00{key}".encode("utf-8")).digest()


def variant_seed_and_code(quiz_seed: int, key: str) -> tuple[int, str]:
    """Seed (48 bits) and 6-character code of the variant named *key* ("id:<student id>" or "n:<number>")."""
    d = _digest(quiz_seed, key)
    seed = int.from_bytes(d[:6], "big")
    x = int.from_bytes(d[6:14], "big")
    code = ""
    for _ in range(6):
        x, r = divmod(x, len(CODE_ALPHABET))
        code += CODE_ALPHABET[r]
    return seed, code


def plan(quiz_seed: int, *, roster: list[dict] | None = None, count: int | None = None) -> list[Variant]:
    out = []
    if roster is not None:
        for k, st in enumerate(roster, 1):
            s, c = variant_seed_and_code(quiz_seed, "id:" + st["id"])
            out.append(Variant(k, c, s, {"id": st["id"], "name": st["name"]}))
    else:
        for k in range(1, (count or 1) + 1):
            s, c = variant_seed_and_code(quiz_seed, f"n:{k}")
            out.append(Variant(k, c, s, None))
    codes: dict[str, int] = {}
    for v in out:
        if v.code in codes:
            raise WorkedError(Msg("variants {a} and {b} have the same code {code}; use another --seed", a=codes[v.code],
                                  b=v.number, code=v.code))
        codes[v.code] = v.number
    return out


# ---------------------------------------------------------------- answers

REDRAWS = 8          # draws of a variant whose worked steps cannot be shown
CHOICE_REDRAWS = 24  # draws of a variant whose choice questions lack distinct wrong values


def draw_problem(spec: QuizSpec, variant: Variant):
    """The variant's problem, its exact solution, the redraws it took and its questions (the manifest's list:
    :func:`expected_answers`). A draw whose worked steps cannot be shown, or where a choice question's named
    mistakes give too few distinct wrong values, is redrawn (deterministically: seed, seed+1, …), so a batch
    never stops half-way."""
    from .solver import AuditFailure, solve

    title = spec.title
    last = None
    tries = CHOICE_REDRAWS if any(q.kind == "choice" for q in spec.questions) else REDRAWS
    for attempt in range(tries):
        problem, hand = _draw(spec.family, variant.seed + attempt, title)
        try:
            sol = solve(problem, hand=hand).audit()
        except AuditFailure as exc:  # pragma: no cover - depends on the solver's auditor
            last = exc
            continue
        try:
            return problem, sol, attempt, expected_answers(spec, problem, sol, key=variant.seed)
        except choice.TooFewOptions as exc:
            last = exc
    if isinstance(last, choice.TooFewOptions):
        raise WorkedError(Msg("{file}: questions: variant {code}, {reason} in each of {tries} draws: ask an entry that more "
                              "mistakes change, or fewer choices", file=spec.source, code=variant.code,
                              reason=last.args[0] if last.args else "", tries=tries))
    raise WorkedError(Msg("variant {code}: the worked solution could not be shown ({reason})", code=variant.code,
                          reason=str(last)))


def mistake_worlds(problem) -> list[tuple[str, dict[str, list[list[float]]]]]:
    """(mistake id, float matrices by the keys of Solution.matrices()) for every known mistake with a quiz
    feedback that applies to *problem*, in the registry's order (one per transform: a causal problem's wrong
    mask is two). A masked score is -inf. A wrong sign in one matrix's update alone (which the checker tries, to
    name it) gives that matrix as the wrong sign in all three does: not a world of its own."""
    if hasattr(problem, "block_problems"):      # a chain: each block's mistakes, from the key's X of that block
        from .solver import solve

        sol = solve(problem)
        last = len(sol.blocks)
        return [(mid, {**{f"block{k}.{key}": v for key, v in world.items()}, **({stages.OUTPUT: world[stages.OUTPUT]} if k == last else {})})
                for k, b in enumerate(sol.blocks, 1) for mid, world in mistake_worlds(b.problem)]
    worlds = [(m.id, run_pass(problem, Float(), transform=t).matrices())
              for m in mistakes_of(stages.of(problem)) if m.answer for t in m.transforms(problem) if t.update_of is None]
    # a mistake whose pass has no value here (a block's layer norm of a row of variance 0: NaN) offers no answer
    block = getattr(problem, "block", None) is not None
    return [(mid, w) for mid, w in worlds if not block or all(x == x for m in w.values() for row in m for x in row)]


def _num(x: float) -> float:
    """A float for JSON: the value to 12 significant digits (stable text, far below any tolerance)."""
    return float(f"{x:.12g}")


def expected_answers(spec: QuizSpec, problem, solution, *, key=0) -> list[dict]:
    """The manifest's ``questions`` list for one variant (see README: "Random problems and quizzes"); a choice
    question's options are shuffled with *key* (the variant's seed) and its name. Raises
    :class:`worked.choice.TooFewOptions`."""
    mats = solution.matrices()
    worlds = mistake_worlds(problem)
    out = []
    for q in spec.questions:
        M = mats[q.matrix]
        shape = M.shape
        entries = []
        ta, tr = q.tolerance.abs, q.tolerance.rel
        for i0, j0 in q.cells:
            i, j = i0 + 1, j0 + 1
            v = M.value(i0, j0)
            e: dict[str, Any] = {"ask": f"{q.matrix}[{i},{j}]", "row": i, "col": j}
            if v is None:
                e.update(expected=None, exact=None, answer=None, tolerance=None, mistakes=[])
            else:
                tol = max(ta, tr * abs(v))
                mistakes = []
                for mid, world in worlds:
                    got = world.get(q.matrix)
                    if got is None:
                        continue    # a chain's mistake in another block
                    if (len(got), len(got[0])) != shape:
                        continue    # a mistake that changes the matrix's shape (keys from the decoder side)
                    w = got[i0][j0]
                    if not math.isfinite(w) or abs(w - v) <= 2 * tol:
                        continue
                    if any(abs(w - m["value"]) <= 2 * tol for m in mistakes):
                        continue
                    mistakes.append({"id": mid, "value": _num(w), "feedback": MISTAKES[mid].answer_feedback})
                e.update(expected=_num(v), exact=printers.text(M.exact_node(i0, j0)),
                         answer=M.dec_plain(i0, j0, problem.decimals), tolerance=_num(tol), mistakes=mistakes)
            entries.append(e)
        if q.parsed.one_row and q.parsed.one_col:
            expected, exact = entries[0]["expected"], entries[0]["exact"]
        elif q.parsed.one_row or q.parsed.one_col:
            expected, exact = [e["expected"] for e in entries], [e["exact"] for e in entries]
        else:
            cols = shape[1]
            expected = [[e["expected"] for e in entries[r * cols:(r + 1) * cols]] for r in range(shape[0])]
            exact = [[e["exact"] for e in entries[r * cols:(r + 1) * cols]] for r in range(shape[0])]
        item = {"name": q.name, "ask": q.ask, "matrix": q.matrix, "points": q.points,
                "tolerance": {"abs": ta, "rel": tr}, "shape": list(shape),
                "expected": expected, "exact": exact, "entries": entries}
        if q.kind == "choice":
            item.update(type="choice", options=choice_options(q, M, worlds, problem.decimals, key))
        out.append(item)
    return out


def choice_options(q: Question, M, worlds, places: int, key) -> list[dict]:
    """A choice question's options for one variant (:func:`worked.choice.options`): the key's answer and the
    values of the named mistakes at its one cell."""
    i0, j0 = q.cells[0]
    if M.value(i0, j0) is None:     # pragma: no cover - refused when the spec is read (a masked entry)
        raise choice.TooFewOptions(Msg("{ask} is masked", ask=q.ask))
    wrong = []
    for mid, world in worlds:
        got = world.get(q.matrix)
        if got is None or (len(got), len(got[0])) != M.shape:
            continue
        w = got[i0][j0]
        if math.isfinite(w):
            wrong.append((mid, w, MISTAKES[mid].answer_feedback))
    try:
        opts = choice.options(M.dec_plain(i0, j0, places), wrong, q.choices, places, f"{key}\x00{q.name}")
    except choice.TooFewOptions as exc:
        raise choice.TooFewOptions(Msg("question {name} ({ask}): {reason}", name=q.name, ask=q.ask,
                                       reason=exc.args[0] if exc.args else "")) from None
    return [dict(o, title=MISTAKES[o["mistake"]].title if o["mistake"] else "right") for o in opts]


def describe(q: dict, problem) -> eq.Prose:
    """Words for a question, its math as trees (the stage's words): "the scores Q·Kᵀ: row 2 (x2), column 3 (x3)";
    a row or column of tokens is named by its token (the encoder side's, for cross-attention's keys' rows)."""
    if hasattr(problem, "block_problems"):     # a chain: the block's words, named by its block (Z: the last's)
        blocks = problem.block_problems()
        k, matrix = _in_block(q["matrix"])
        k = k or len(blocks)
        inner = dict(q, matrix=matrix, ask=q["ask"].split(".", 1)[1] if q["ask"].startswith("block") else q["ask"])
        return eq.prose(eq.say("block {k}, {what}", k=str(k), what=describe(inner, blocks[k - 1])))
    base = q["matrix"].split(".")[-1]
    arch = stages.of(problem)
    words = stages.words(q["matrix"], arch)
    stage = arch.stage(base)
    rows_t = stages.words_of(stage.rows, problem) if stage else None       # tokens (a block's vocabulary) by name
    cols_t = stages.words_of(stage.cols, problem) if stage else None
    a = parse(q["ask"])
    r, c = a.row, a.col
    rname = lambda: f" ({rows_t[int(r) - 1]})" if rows_t else ""  # noqa: E731
    cname = lambda: f" ({cols_t[int(c) - 1]})" if cols_t else ""  # noqa: E731
    scalar = stage is not None and (stage.rows, stage.cols) == ("1", "1")
    if r and c:
        where = eq.say("row {row}, column {col}", row=f"{r}{rname()}", col=f"{c}{cname()}")
    elif c:
        where = eq.say("column {col}, every row", col=f"{c}{cname()}")
    elif r:
        where = eq.say("row {row}, every column", row=f"{r}{rname()}")
    elif scalar:
        where = eq.say("a number")
    else:
        where = eq.say("the whole matrix")
    return eq.prose(eq.say("{what}: {where}", what=words, where=where))


def ask_tree(q: dict):
    """The entry a question names, as a tree: ``weights[1,*]`` → weights[1, ·], ``head2.Z`` → Z⁽²⁾."""
    a = parse(q["ask"])
    pre, _, base = _in_block(a.matrix)[1].rpartition(".")      # a chain's block2.weights: the block's weights
    sym = eq.matrix_sym(base, int(pre[4:]) if pre.startswith("head") else None)
    if a.row is None and a.col is None and "[" not in q["ask"]:
        return sym
    return eq.Entry(sym, a.row or eq.ALL, a.col or eq.ALL)


# ---------------------------------------------------------------- building one variant (worker)

def _student_for(variant: Variant) -> dict:
    st = {"variant": variant.code}
    if variant.student:
        st.update(name=variant.student["name"], id=variant.student["id"])
    else:
        st.update(name="", id=f"#{variant.number}")
    return st


_INTRO = N_("Work through the tasks below; these answers are graded. Indices are 1-based: row, then column; "
            "· (typed *) means every entry of that row or column.")


def _tolerance_text(tol: dict) -> str:
    number = i18n.current().number
    if tol["abs"] and tol["rel"]:
        return i18n.tr("{abs} or {rel} %", abs=number(f"±{tol['abs']:g}"), rel=number(f"{tol['rel'] * 100:g}"))
    if tol["rel"]:
        return number(f"±{tol['rel'] * 100:g} %")
    return number(f"±{tol['abs']:g}") if tol["abs"] else ""


def _points_text(q: dict) -> str:
    return i18n.ngettext("{points} pt", "{points} pts", 1 if q["points"] == 1 else 2,
                         points=i18n.current().number(f"{q['points']:g}"))


def questions_box(spec: QuizSpec, questions: list[dict], problem):
    """The "Graded answers" box as page data (:class:`worked.render.view.Questions`), which every sheet
    template prints: each question's entry and description with their math as trees."""
    from decimal import Decimal

    from .render.view import QuestionItem, QuestionOption, Questions

    def options(q):
        return [QuestionOption(letter=o["letter"], value=eq.dec(Decimal(o["value"])), right=o["right"],
                               note=i18n.tr("right") if o["right"] else f"{MISTAKES[o['mistake']].title_text()} [{o['mistake']}]")
                for o in q.get("options") or ()]

    return Questions(title=i18n.tr("Graded answers"), intro=spec.instructions or i18n.translate(_INTRO), items=[
        QuestionItem(ask=q["ask"], ask_eq=ask_tree(q), text=describe(q, problem), points=_points_text(q),
                     tolerance=i18n.tr("choose one") if q.get("options") else _tolerance_text(q["tolerance"]),
                     options=options(q)) for q in questions])


DOCS = ("worksheet", "answer-key")


def part_seed(seed: int, k: int) -> int:
    """The seed (48 bits) of part *k* of a variant whose seed is *seed* (a quiz with [[parts]])."""
    return int.from_bytes(hashlib.sha256(f"worked-quiz-part\x00{seed}\x00{k}".encode()).digest()[:6], "big")


def build_variant(spec: QuizSpec, variant: Variant, formats: tuple[str, ...]) -> dict:
    """Everything for one variant: its manifest entry and its files (relative path → bytes). A quiz with [[parts]]
    draws one problem per part (its seed :func:`part_seed`): the entry lists the parts, each with its problem and
    questions; a sheet in PDF holds the parts in order, the other files are one per part (``worksheet-part2.html``)."""
    from dataclasses import replace

    entry: dict[str, Any] = {
        "variant": variant.code,
        "number": variant.number,
        "student": dict(variant.student) if variant.student else None,
        "seed": variant.seed,
    }
    files: dict[str, bytes] = {}
    folder = f"variants/{variant.code}"
    if not spec.parts:
        problem, sol, attempt, questions = draw_problem(spec, variant)
        entry.update(redraws=attempt, problem=problem.to_dict(), questions=questions)
        files[f"{folder}/variant.json"] = b""      # first in the folder's order
        with i18n.using(spec.lang):       # the sheets and notebooks in the quiz's language; the entry stays English
            files.update(_part_files(spec, variant, formats, sol, questions, problem, folder, ""))
    else:
        entry["parts"] = []
        pdfs: dict[str, list] = {}
        files[f"{folder}/variant.json"] = b""
        for k, part in enumerate(spec.parts, 1):
            pv = replace(variant, seed=part_seed(variant.seed, k))
            problem, sol, attempt, questions = draw_problem(part, pv)
            entry["parts"].append({"part": k, "title": part.title, "seed": pv.seed, "redraws": attempt,
                                   "problem": problem.to_dict(), "questions": questions})
            with i18n.using(spec.lang):
                made = _part_files(part, variant, formats, sol, questions, problem, folder, f"-part{k}")
            for name, data in made.items():
                doc = name.rsplit("/", 1)[1]
                if doc.endswith(".pdf"):
                    pdfs.setdefault(doc.replace(f"-part{k}", ""), []).append(data)
                else:
                    files[name] = data
        for doc, parts in pdfs.items():     # the parts in order, each from a new (right-hand) page
            buf = io.BytesIO()
            with i18n.using(spec.lang):
                label = i18n.tr("answer key") if doc.startswith("answer") else i18n.tr("worksheet")
                title = i18n.tr("{title} — {document} — variant {code}", title=spec.title, document=label,
                               code=variant.code)
            merge_pdfs(parts, buf, title=title)
            files[f"{folder}/{doc}"] = buf.getvalue()
    files[f"{folder}/variant.json"] = (json.dumps(entry, indent=2, ensure_ascii=False) + "\n").encode()
    return {"entry": entry, "files": files}


def _part_files(spec: QuizSpec, variant: Variant, formats, sol, questions, problem, folder: str, suffix: str) -> dict:
    """A problem's sheets and notebooks for one variant (*suffix*: ``-part2`` for a part of a mixed quiz)."""
    files: dict[str, bytes] = {}
    if "ipynb" in formats:   # the exercise notebook: the student writes each step, the checks say which is wrong
        from .writers import notebook

        # the student's copy checks a graded question's matrix for its shape only (no expected value of a
        # graded question in a file for students); the teacher's copy, next to the answer key, checks every value
        graded = frozenset(q.matrix for q in spec.questions)
        files[f"{folder}/exercise{suffix}.ipynb"] = notebook.dumps(
            notebook.build(sol, answers_hidden=True, student=_student_for(variant), graded=graded)).encode()
        files[f"{folder}/exercise-key{suffix}.ipynb"] = notebook.dumps(
            notebook.build(sol, answers_hidden=True, student=_student_for(variant))).encode()
    sheet = [f for f in E.sheet_formats() if f in formats]
    if not sheet:
        return files
    from .render.view import as_kind, build

    student = _student_for(variant)
    box = questions_box(spec, questions, problem)
    page = build(sol, DOCS[0], student, questions=box)     # once: the other document's page is the same but its kind
    for doc in DOCS:
        page = as_kind(page, doc)
        for ext, data in E.render_sheet(page, sheet, paper=spec.paper, pdf_engine=spec.pdf_engine).items():
            files[f"{folder}/{doc}{suffix}{ext}"] = data
    return files


VARIANTS_PER_WORKER = 2   # then the worker process ends and a fresh one takes over: see build_all


def _build_chunk(task) -> list[dict]:
    """A few consecutive variants, built in one worker process."""
    spec, variants, formats = task
    return [build_variant(spec, v, formats) for v in variants]


# ---------------------------------------------------------------- the class PDFs

OPEN_AT_ONCE = 100   # source PDFs open at once while joining (a part's odd page count gets its blank page)


def merge_pdfs(pdfs: list, out, *, title: str | None = None) -> int:
    """Write to *out* (a path or a binary file) one PDF of the pages of *pdfs* (PDF bytes or paths), in
    order, each starting on an odd page (a blank page of the same size after an odd count: for
    double-sided printing); return its page count.

    Made with pikepdf (qpdf): the pages as they are (without the sheets' tags: qpdf does not merge
    structure trees, so a class PDF is for printing; each variant's own PDF is the accessible one).
    Same inputs, same bytes: qpdf writes no date, and the file ID is computed from the content."""
    import pikepdf

    if len(pdfs) > OPEN_AT_ONCE:   # qpdf keeps each source file open until it writes: join in parts first
        import tempfile

        with tempfile.TemporaryDirectory(prefix="worked-class-") as tmp:
            parts = [Path(tmp) / f"{k:05d}.pdf" for k in range(0, len(pdfs), OPEN_AT_ONCE)]
            for k, part in zip(range(0, len(pdfs), OPEN_AT_ONCE), parts):
                merge_pdfs(pdfs[k:k + OPEN_AT_ONCE], part)
            return merge_pdfs(parts, out, title=title)
    doc = pikepdf.Pdf.new()
    sources = []   # a page's objects are copied when *doc* is written: its document stays open until then
    try:
        for pdf in pdfs:
            src = pikepdf.Pdf.open(io.BytesIO(pdf) if isinstance(pdf, bytes) else pdf)
            sources.append(src)
            if len(doc.pages) % 2:
                box = doc.pages[-1].mediabox
                doc.add_blank_page(page_size=(float(box[2]) - float(box[0]), float(box[3]) - float(box[1])))
            doc.pages.extend(src.pages)
        if title is not None:
            doc.docinfo["/Title"] = title
            doc.docinfo["/Author"] = "worked"
        doc.save(out, deterministic_id=True)
        return len(doc.pages)
    finally:
        for src in sources:
            src.close()


CLASS_PDFS = (("worksheet", "class-worksheets.pdf", N_("worksheets")),
              ("answer-key", "class-answer-keys.pdf", N_("answer keys")))


def manifest_json(manifest: dict, entry_texts: list[bytes]) -> bytes:
    """``json.dumps(manifest, indent=2, ensure_ascii=False) + "\\n"``, encoded, made from the variants' own
    ``variant.json`` texts (the same JSON one level deeper) instead of encoding every entry again:
    Python's indenting encoder is pure Python, about 0.6 ms per variant."""
    head = dict(manifest, variants=[])
    text = json.dumps(head, indent=2, ensure_ascii=False)
    if not entry_texts:
        return (text + "\n").encode()
    marker = '\n  "variants": []'
    k = text.rfind(marker)
    if k < 0 or text[k + len(marker):] != "\n}":   # "variants" is not the last key: the plain way
        return (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()
    items = b",\n".join(b"\n".join(b"    " + line for line in t.rstrip(b"\n").split(b"\n")) for t in entry_texts)
    return text[:k].encode() + b'\n  "variants": [\n' + items + b"\n  ]\n}\n"


def manifest_csv(entries: list[dict]) -> str:
    """One row per variant: student, code, seed, the problem (JSON), then expected value and tolerance per entry.
    Cells a spreadsheet would run as a formula (a roster name ``=HYPERLINK(…)``) are quoted (:mod:`worked.csvsafe`)."""
    from . import csvsafe

    buf = io.StringIO()
    wr = csv.writer(buf, lineterminator="\n")
    from .lms import all_questions, sections

    cells = [(q["name"], e["ask"]) for q in all_questions(entries[0]) for e in q["entries"]] if entries else []
    head = ["variant", "student_id", "student_name", "seed", "problem"]
    for name, ask in cells:
        head += [f"{name} {ask}", f"{name} {ask} tolerance"]
    wr.writerow(csvsafe.row(head))
    for v in entries:
        row = [v["variant"], (v["student"] or {}).get("id", ""), (v["student"] or {}).get("name", ""), v["seed"],
               json.dumps(v["problem"] if "problem" in v else [p["problem"] for p in sections(v)], ensure_ascii=False,
                          separators=(",", ":"))]
        for q in all_questions(v):
            for e in q["entries"]:
                row += ["" if e["expected"] is None else repr(e["expected"]),
                        "" if e["tolerance"] is None else repr(e["tolerance"])]
        wr.writerow(csvsafe.row(row))
    return buf.getvalue()


def parse_formats(text: str | None) -> tuple[str, ...]:
    if not text:
        return DEFAULT_FORMATS
    out = []
    for f in text.split(","):
        f = f.strip().lower()
        f = E.ALIASES.get(f, f)
        if f not in FORMATS:
            raise WorkedError(Msg("--format: unknown format {format} (expected some of: {formats})", format=repr(f),
                                  formats=", ".join(FORMATS)))
        if f not in out:
            out.append(f)
    return tuple(out)


class _Progress:
    def __init__(self, total: int, enabled: bool, lang: str | None = None):
        self.total, self.done, self.enabled, self.lang = total, 0, enabled, lang

    def step(self):
        self.done += 1
        if self.enabled:
            w = 30
            k = w * self.done // self.total
            line = Msg("[{bar}] {done}/{total} variants", bar="#" * k + "." * (w - k), done=self.done, total=self.total)
            sys.stderr.write("\r" + line.localized(i18n.get(self.lang)))
            sys.stderr.flush()

    def end(self):
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def _warm_up(formats: tuple[str, ...], engine: str) -> None:
    """Load, before the workers fork (they inherit it), what every variant would load lazily: the
    templates, each format's renderer (and the page model), the Typst binding, what sympy imports on its
    first evaluated sum and e^x (its tensor and set-expression modules), the printers. No Typst compiler is
    made here: each process makes its own (see worked.render.typst)."""
    import sympy as sp

    sp.exp(sp.Rational(1, 2)) + 1

    from . import render, solver  # noqa: F401
    from .render.env import env

    printers.load_all()

    for kind in E.warm(formats, engine):
        for doc in DOCS:
            env(kind).get_template(f"{doc}.{kind}")


def _pool():
    """A pool of one worker process (forked where the platform can: it inherits what the parent loaded),
    which ends when the parent dies."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    try:
        ctx = mp.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        ctx = mp.get_context()
    from .workers import die_with_parent

    # kill -9 of `worked quiz` takes its workers with it (no orphans holding 100+ MB each)
    return ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=die_with_parent, initargs=(os.getpid(),))


def _read_back(folder: Path, code: str) -> dict:
    """A variant's result as :func:`assemble` needs it, from the ``variant.json`` written in *folder*."""
    name = f"variants/{code}/variant.json"
    text = (folder / name).read_bytes()
    return {"entry": json.loads(text), "files": {name: text}}


def in_fresh_workers(fn, tasks: list, jobs: int):
    """``fn(task)`` for every task, each in a new worker process, at most *jobs* at a time; the results
    in the order of *tasks*, each as soon as it and those before it are done.

    A process per task (a one-worker ProcessPoolExecutor each, forked from this thread): whatever a task
    leaves behind in its process (Typst's caches) goes with the process. Python 3.11 refuses
    ``max_tasks_per_child`` with fork, and a spawned or forkserver worker would import everything again."""
    from concurrent.futures import FIRST_COMPLETED, wait

    running: dict = {}
    done: dict[int, Any] = {}
    start = out = 0
    try:
        while out < len(tasks):
            while start < len(tasks) and len(running) < jobs:
                ex = _pool()
                running[ex.submit(fn, tasks[start])] = (start, ex)
                start += 1
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for f in finished:
                k, ex = running.pop(f)
                ex.shutdown()           # its process has ended before the next one starts
                done[k] = f.result()    # a worker's error is raised here
            while out in done:
                yield done.pop(out)
                out += 1
    finally:
        for _, ex in running.values():
            ex.shutdown(wait=False, cancel_futures=True)


def build_all(spec: QuizSpec, variants: list[Variant], formats: tuple[str, ...], jobs: int, progress: bool,
              *, stage=None) -> list[dict]:
    """Build every variant (in *jobs* processes); results in variant order whatever *jobs* is.

    With *stage*, each variant's files are written into it as soon as they arrive (nothing of them is
    kept in memory: each manifest entry is read back from its ``variant.json`` at the end), and then,
    when the batch has PDFs, the two class PDFs are joined from the sheets written there.

    Memory: each worker process builds VARIANTS_PER_WORKER variants and ends. Typst keeps what it
    compiled for the next ten documents of its process (about 11 MB a document here; it is not given
    back to the system), so a long-lived worker grows to about 200 MB PSS; one of 2 variants ends at
    100–115 MB. Same bytes whatever *jobs* is: the chunks do not depend on it."""
    bar = _Progress(len(variants), progress, spec.lang)
    results: list[dict] = []
    jobs = max(1, min(jobs, len(variants)))
    # Typst PDFs: a fresh process every VARIANTS_PER_WORKER variants (its caches); otherwise nothing grows
    # in a worker, and a fork costs a few ms: up to 10 variants a process, shared out evenly over the
    # workers (the output does not depend on it)
    n = VARIANTS_PER_WORKER if "pdf" in formats and spec.pdf_engine == "typst" else min(10, -(-len(variants) // jobs))
    tasks = [(spec, variants[i:i + n], formats) for i in range(0, len(variants), n)]

    def keep(chunk):
        for r in chunk:
            if stage is not None:   # only the code is kept: the entry is read back from variant.json
                stage.write(r["files"])
                r = {"code": r["entry"]["variant"]}
            results.append(r)
            bar.step()

    if jobs == 1:
        for t in tasks:
            keep(_build_chunk(t))
    else:
        _warm_up(formats, spec.pdf_engine)
        for chunk in in_fresh_workers(_build_chunk, tasks, jobs):
            keep(chunk)
    bar.end()
    # the class PDFs, after the workers have gone, from the sheets just written, one after the other,
    # each written by qpdf straight into its file
    if stage is not None and "pdf" in formats and stage.scope is None:
        for doc, name, label in CLASS_PDFS:
            sheets = [stage.tmp / "variants" / r["code"] / f"{doc}.pdf" for r in results]
            with i18n.using(spec.lang):
                title = f"{spec.title} — {i18n.translate(label)}"
            stage.write_with(name, lambda path: merge_pdfs(sheets, path, title=title))
    if stage is not None:
        results = [_read_back(stage.tmp, r["code"]) for r in results]
    return results


def assemble(spec: QuizSpec, results: list[dict], formats: tuple[str, ...], *, single: bool = False) -> dict[str, bytes]:
    """The batch's own files (manifests, LMS exports) and the variants' files still in *results*
    (relative path → bytes). The class PDFs are made by :func:`build_all`."""
    files: dict[str, bytes] = {}
    entries = [r["entry"] for r in results]
    for r in results:
        files.update(r["files"])
    if single:
        return files
    manifest = {
        "format": "worked-quiz-manifest",
        "version": 1,
        "title": spec.title,
        "seed": spec.seed,
        "family": spec.family.to_dict(),
        **({"parts": [{"part": k, "title": p.title, "family": p.family.to_dict()} for k, p in enumerate(spec.parts, 1)]}
           if spec.parts else {}),
        "formats": list(formats),
        "variants": entries,
    }
    files["manifest.json"] = manifest_json(manifest, [r["files"][f"variants/{e['variant']}/variant.json"]
                                                      for r, e in zip(results, entries)])
    files["manifest.csv"] = manifest_csv(entries).encode()
    for e in E.of_scope("batch"):     # the LMS exports: Moodle XML, Canvas QTI, GIFT (in the quiz's language)
        if e.name in formats:
            with i18n.using(spec.lang):
                files[e.file] = e.write(manifest)
    return files


QUIZ_FILES = ("manifest.json", "manifest.csv", "moodle.xml", "canvas-qti.zip", "quiz.gift.txt", "class-*.pdf",
              "variants/*")   # what a quiz folder with an old marker (one that listed nothing) holds


def _stage(outdir, *, force: bool = False, scope=None):
    """The staging folder of :mod:`worked.output` for a quiz folder (*scope*: the variant folders replaced)."""
    from .output import FolderSet

    return FolderSet(outdir, kind="worked quiz", force=force, scope=scope, legacy=QUIZ_FILES)


def write_tree(outdir: Path, files: dict[str, bytes], *, force: bool = False, replace_whole: bool = True):
    """Write *files* into a staging folder next to *outdir*, then swap them in (nothing half-written;
    files worked did not write are left alone). Returns the :class:`worked.output.FolderSet`."""
    scope = None if replace_whole else sorted({"/".join(r.split("/")[:2]) for r in files if r.startswith("variants/")})
    with _stage(outdir, force=force, scope=scope) as stage:
        stage.write(files)
        stage.commit()
    return stage


def run(spec_path, *, count=None, roster=None, seed=None, outdir=None, formats=None, jobs=None,
        variant=None, quiet=False, force=False, progress=None, pdf_engine="typst", lang=None) -> tuple[Path, list[dict]]:
    """The ``worked quiz`` command as a function. Returns (output folder, manifest entries).

    *lang*: the language of the sheets, notebooks and LMS texts (a shipped one; default: the spec's ``lang``, else
    English). The manifest is the same in every language.

    *pdf_engine*: "typst" (default), "weasyprint" or "latex" (see :func:`worked.render.sheet.document_pdf`).
    """
    spec = load_spec(spec_path)
    from dataclasses import replace

    if pdf_engine not in E.PDF_ENGINES:
        raise WorkedError(Msg("--pdf-engine: expected {engines}, got {got}", engines=E.words(E.PDF_ENGINES),
                              got=repr(pdf_engine)))
    if pdf_engine == "latex":
        from .render.pdf import pdflatex_path

        if pdflatex_path() is None:
            raise WorkedError(Msg("--pdf-engine latex: pdflatex is not installed (Debian: apt-get install {packages})",
                                  packages="texlive-latex-base texlive-latex-recommended texlive-fonts-recommended"))
    spec = replace(spec, pdf_engine=pdf_engine)
    if lang is not None:
        spec = replace(spec, lang=lang, parts=tuple(replace(p, lang=lang) for p in spec.parts))
    if seed is not None:
        if seed < 0:
            raise WorkedError(Msg("--seed: expected a whole number ≥ 0, got {got}", got=seed))
        if seed > MAX_SEED:
            raise WorkedError(Msg("--seed: expected a whole number of at most {n} digits (it names the quiz's LMS "
                                  "category, at most 255 characters), got a longer one", n=MAX_SEED_DIGITS))
        spec = replace(spec, seed=seed)
    fmts = parse_formats(formats)
    if pdf_engine == "weasyprint" and "pdf" in fmts:
        from .render.pdf import require_weasyprint

        require_weasyprint()   # Pango and the bundled fonts: checked before anything runs
    if count is not None and roster is not None:
        raise WorkedError(Msg("give either -n COUNT or --roster FILE, not both"))
    if count is not None and not 1 <= count <= MAX_VARIANTS:
        raise WorkedError(Msg("-n: expected a whole number from {lo} to {hi}, got {got}", lo=1, hi=MAX_VARIANTS, got=count))
    students = load_roster(roster) if roster is not None else None
    n = count or spec.count or 1
    if variant is not None:
        code = variant.strip().upper()
        pool = plan(spec.seed, roster=students, count=None if students else max(n, MAX_VARIANTS))
        chosen = [v for v in pool if v.code == code]
        if not chosen:
            if students:
                raise WorkedError(Msg("--variant: no variant {code} in the roster for seed {seed}", code=code,
                                      seed=spec.seed))
            raise WorkedError(Msg("--variant: no variant {code} in variants 1..{n} for seed {seed}", code=code,
                                  n=max(n, MAX_VARIANTS), seed=spec.seed))
        variants = chosen
    else:
        variants = plan(spec.seed, roster=students, count=n)
    # a quick dry draw of the first variant: an impossible family fails here, before anything is written
    # (with choice questions, the whole draw: too few distinct wrong options fails here too)
    for k, part in enumerate(spec.parts or (spec,), 1):
        seed0 = part_seed(variants[0].seed, k) if spec.parts else variants[0].seed
        if any(q.kind == "choice" for q in part.questions):
            draw_problem(part, replace(variants[0], seed=seed0))
        else:
            _draw(part.family, seed0, part.title)
    out = Path(outdir) if outdir else Path("output") / (Path(spec_path).stem or "quiz")
    if jobs is None:
        jobs = os.cpu_count() or 1
    if jobs < 1:
        raise WorkedError(Msg("--jobs: expected a whole number ≥ 1, got {got}", got=jobs))
    if progress is None:
        progress = not quiet and sys.stderr.isatty()
    with _stage(out, force=force, scope=None if variant is None else [f"variants/{v.code}" for v in variants]) as stage:
        results = build_all(spec, variants, fmts, jobs, progress, stage=stage)
        stage.write(assemble(spec, results, fmts, single=variant is not None))
        stage.commit()
    if stage.note():
        with i18n.using(spec.lang):
            print(Msg("note: {note}", note=stage.note()).localized(), file=sys.stderr)
    return out, [r["entry"] for r in results]
