"""The server's work, as functions run in worker processes (:class:`worked.server.app.Engine`); what they compute for
the page is in :mod:`worked.server.views`.

Each job takes plain data (a :class:`~worked.problem.Problem`, answers, options) and returns
``(status, body bytes, media type)``: the JSON of a solution, a check report or a page view, or a rendered
file. A user's mistake (a WorkedError) is a 4xx body, anything unexpected a generic 500 whose details go
to the log, never to the client. The server caches the bytes it sends, bounded by their size; a worker that
runs past its deadline is killed, so a 504 means the work has stopped.

What a worker keeps between jobs is the work of a problem, which depends on the problem alone: its
:class:`worked.check.Checker` (the solution, the bands of the correct values, what each mistake gives),
the last :data:`KEEP` problems it saw. The server sends each problem to the same worker (``Lane``), so a
class checking one problem, a student checking again, or a check after the variant's page was opened
(that job solved it) costs only the work of the answers. Nothing of a request's answers is kept.
"""
from __future__ import annotations

import collections
import json
import logging
from typing import Any

from .. import i18n
from ..errors import WorkedError
from ..i18n import Msg
from . import views
from .views import SOURCES, said

log = logging.getLogger("worked.server")
JSON = "application/json"
#: the documents' media types by format
KEEP = 128      # problems whose work a worker keeps (a quiz-sized one is about 80 KB)

_checkers: "collections.OrderedDict[str, Any]" = collections.OrderedDict()


def checker(problem):
    """The :class:`~worked.check.Checker` of *problem* (it holds the solution), from this worker's last
    :data:`KEEP` problems or made now. A problem that cannot be solved raises, and nothing is kept."""
    from ..check import checker as checker_of

    key = json.dumps(problem.to_dict(), sort_keys=True, ensure_ascii=False)
    hit = _checkers.get(key)
    if hit is None:
        hit = _checkers[key] = checker_of(problem)
        while len(_checkers) > KEEP:
            _checkers.popitem(last=False)
    else:
        _checkers.move_to_end(key)
    return hit


_SECRET_KEYS = {"expected", "expected_exact", "expected_value", "solution", "exact", "value"}


def redact(report: Any) -> Any:
    """A check report with every expected value removed (``--no-solutions``): verdicts, error carried
    forward, consistency and diagnoses stay. The checker leaves them out already unless asked to
    reveal them; this is a second lock that does not depend on it."""
    if isinstance(report, dict):
        return {k: redact(v) for k, v in report.items() if k not in _SECRET_KEYS}
    if isinstance(report, list):
        return [redact(v) for v in report]
    return report


def _json(obj) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _guard(fn, *args):
    try:
        return fn(*args)
    except WorkedError as exc:
        return 422, _json({"error": said(exc)[:500], **({"field": exc.field} if getattr(exc, "field", None) else {})}), JSON
    except Exception:  # noqa: BLE001 - the log has the details, the client a generic message
        log.exception("internal error in %s", getattr(fn, "__name__", fn))
        return 500, _json({"error": INTERNAL.localized()}), JSON


#: the answer to an error of ours (the log has its details)
INTERNAL = Msg("internal error: the server could not do this; the details are in the server log")


def in_lang(lang, fn, *args):
    """*fn*(*args) with its words and numbers in *lang* (a shipped language; None: English): the job the server
    runs for a page's words (views, checks, files) in the language the request chose."""
    from .. import i18n

    with i18n.using(lang):
        return fn(*args)


def solve_json(problem, view: bool):
    """``worked solve --format json`` of *problem*, with the page's view of every step when *view*."""
    return _guard(_solve_json, problem, view)


def _solve_json(problem, view):
    from ..writers import json as json_writer

    sol = checker(problem).solution
    out = json_writer.solution(sol)
    if view:
        out = {**out, "view": views.solution_view(sol)}
    return 200, _json(out), JSON


def check_json(problem, answers: dict, tolerance, reveal: bool, redact: bool, view: bool = False):
    """``worked check --format json``; with *redact* (``--no-solutions``) every expected value removed; with
    *view*, the diagnoses' math as MathML too (:func:`worked.server.views.with_math`)."""
    return _guard(_check_json, problem, answers, tolerance, reveal, redact, view)


def _check_json(problem, answers, tolerance, reveal, redact_, view):
    from ..check import Tolerance

    tol = Tolerance.parse(tolerance) if tolerance is not None else None
    ch = checker(problem)
    report = ch.check(answers, tolerance=tol, reveal=reveal).to_dict()
    if view:
        report = views.with_math(report, problem, ch.solution)
    return 200, _json(redact(report) if redact_ else report), JSON


def view_json(problem):
    """The page's view of a problem and its empty answer grids."""
    return _guard(_view_json, problem)


def _view_json(problem):
    return 200, _json({"problem": problem.to_dict(), "view": views.problem_view(problem)}), JSON


def generate_json(family: dict, seed: int):
    """A random problem drawn by :mod:`worked.generate` (the options of ``worked new``)."""
    return _guard(_generate_json, family, seed)


def _generate_json(family, seed):
    from .. import generate
    fam = generate.Family.from_dict(family, source="random problem", prefix="")
    problem = generate.generate(fam, seed)
    return 200, _json({"problem": problem.to_dict(), "view": views.problem_view(problem)}), JSON


def render(problem, document: str, fmt: str, student, paper: str):
    """A worksheet or answer key as PDF, HTML or LaTeX; or (fmt ``ipynb``) the notebook or exercise."""
    return _guard(_render, problem, document, fmt, student, paper)


def _render(problem, document, fmt, student, paper):
    from ..exporters import EXPORTERS
    from ..render.view import build

    sol = checker(problem).solution
    if fmt == "ipynb":
        from ..writers import notebook

        nb = notebook.build(sol, answers_hidden=document == "exercise", student=student)
        return 200, notebook.dumps(nb).encode("utf-8"), EXPORTERS["ipynb"].media_type
    e = EXPORTERS[fmt]
    return 200, e.write(build(sol, document, student), paper=paper), e.media_type


def check_variant_json(problem, answers: dict, variant, reveal: bool, redact_: bool, view: bool = False):
    """A quiz variant's answers checked the way ``worked grade`` marks them (each question with its own
    tolerance and points, from the manifest): :func:`worked.server.views.check_variant`."""
    return _guard(_check_variant_json, problem, answers, variant, reveal, redact_, view)


def _check_variant_json(problem, answers, variant, reveal, redact_, view):
    report = views.check_variant(problem, answers, variant, checker(problem), reveal, view)
    return 200, _json(redact(report) if redact_ else report), JSON


def problem_json(name: str, problem):
    """``GET /api/problems/{name}``: the problem of the folder and the page's view of it."""
    return _guard(_problem_json, name, problem)


def _problem_json(name, problem):
    return 200, _json({"name": name, "problem": problem.to_dict(), "view": views.problem_view(problem)}), JSON


def variant_json(problem, variant):
    """``GET /api/variants/{code}``: a quiz variant's problem, the page's view of it and its graded questions
    (resolved to their cells, which needs its solution: solved here, and kept for the checks that follow)."""
    return _guard(_variant_json, problem, variant)


def _variant_json(problem, variant):
    return 200, _json({"code": variant.code, "problem": problem.to_dict(), "view": views.problem_view(problem),
                       "questions": views.question_list(variant, problem, checker(problem).solution)}), JSON


def mixed_variant_json(problems, variant):
    """``GET /api/variants/{code}`` of a quiz that mixes families: each part's problem, the page's view of it and its
    graded questions, in order (as :func:`variant_json` gives them for a variant of one problem)."""
    return _guard(_mixed_variant_json, problems, variant)


def _mixed_variant_json(problems, variant):
    parts = [{"part": k, "title": part.title, "problem": problem.to_dict(), "view": views.problem_view(problem),
              "questions": views.question_list(part, problem, checker(problem).solution)}
             for k, (part, problem) in enumerate(zip(variant.parts, problems), 1)]
    return 200, _json({"code": variant.code, "title": variant.title, "parts": parts}), JSON


def check_mixed_json(problems, answers: list, variant, reveal: bool, redact_: bool, view: bool = False):
    """A mixed quiz's variant checked part by part, the way ``worked grade`` marks it
    (:func:`worked.server.views.check_mixed`)."""
    return _guard(_check_mixed_json, problems, answers, variant, reveal, redact_, view)


def _check_mixed_json(problems, answers, variant, reveal, redact_, view):
    report = views.check_mixed(problems, answers, variant, [checker(p) for p in problems], reveal, view)
    return 200, _json(redact(report) if redact_ else report), JSON


QUIZ_VARIANTS = 60   # the page's quiz builder: at most this many variants in one request (a class; the CLI has no limit)


def quiz_zip(spec_text: str | dict, seed, count, roster_text, formats: str):
    """The teacher's quiz builder: ``worked quiz`` run on the spec (TOML text) into a temporary folder, which is
    sent back as one zip; its files are the command's own (the same manifest, byte for byte, for the same spec
    and seed)."""
    return _guard(_quiz_zip, spec_text, seed, count, roster_text, formats)


def quiz_form_json(spec: dict):
    """The quiz builder's form: :func:`worked.server.quizform.form` of the spec's tables."""
    return _guard(_quiz_form_json, spec)


def _quiz_form_json(spec):
    from . import quizform

    return 200, _json(quizform.form(spec)), JSON


def _quiz_zip(spec_text, seed, count, roster_text, formats):
    import io
    import tempfile
    import zipfile
    from pathlib import Path

    from .. import quiz
    from . import quizform

    if isinstance(spec_text, dict):     # the builder's form: its tables, written as the TOML worked quiz reads
        spec_text = quizform.spec_toml(spec_text)

    with tempfile.TemporaryDirectory(prefix="worked-quiz-") as tmp:
        spec = Path(tmp) / "quiz.toml"
        spec.write_text(spec_text, encoding="utf-8")
        roster = Path(tmp) / "roster.csv"
        if roster_text:
            roster = Path(tmp) / "roster.csv"
            roster.write_text(roster_text, encoding="utf-8")
            try:
                many = len(quiz.load_roster(roster)) > QUIZ_VARIANTS
            except WorkedError as exc:
                raise WorkedError(exc.localized().replace(str(roster), "roster")) from None
            if many:
                raise WorkedError(Msg("roster: at most {n} students in one quiz made on this page (the command line "
                                      "`worked quiz` has no limit)", n=QUIZ_VARIANTS))
        else:
            roster = None
        try:
            n = count if count is not None else None if roster else quiz.load_spec(spec).count or 1
        except WorkedError as exc:
            raise WorkedError(exc.localized().replace(str(spec), SOURCES["quiz spec"].localized())) from None
        if n is not None and not 1 <= n <= QUIZ_VARIANTS:
            raise WorkedError(Msg("variants: expected a whole number from 1 to {n} on this page, got {got}", n=QUIZ_VARIANTS,
                                  got=n))
        out = Path(tmp) / "quiz"
        try:
            # the files as `worked quiz` writes them (in the spec's language; the manifest English), whatever the
            # request's language: that is its errors' only
            with i18n.using(None):
                quiz.run(spec, count=None if roster else n, roster=roster, seed=seed, outdir=out, formats=formats or None,
                         jobs=1, quiet=True, progress=False)
        except WorkedError as exc:    # the messages name the page's fields, not the temporary files
            raise WorkedError(exc.localized().replace(str(spec), SOURCES["quiz spec"].localized()).replace(str(roster), "roster")) from None
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for p in sorted(out.rglob("*")):
                if p.is_file() and not p.name.startswith(".worked"):
                    info = zipfile.ZipInfo(str(p.relative_to(out)), date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    z.writestr(info, p.read_bytes())
        return 200, buf.getvalue(), "application/zip"
