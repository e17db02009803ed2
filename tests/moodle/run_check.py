"""Real Moodle's import and question engine on worked's Moodle XML and GIFT exports: does it accept exactly the
spec's window [exact − tol, exact + tol], and grade and explain every option of a choice question as the spec does?

For each quiz below, ``worked quiz`` writes moodle.xml, quiz.gift.txt and manifest.json; every asked cell of a
value question gets these answers, from the manifest's exact value and tolerance (ε = tol/100, exact decimals):

- exact − tol + ε and exact + tol − ε (inside: full marks), exact − tol − ε and exact + tol + ε (outside: 0),
- the value rounded to the places asked (the answer the sheet shows: full marks),
- every known mistake's value (0, as these lie outside the window);

and every option of a choice question is chosen once (by its text: Moodle shuffles them): the right one must get
full marks and "Correct.", each wrong one 0 and its named mistake's feedback, as Moodle shows it.
``check_window.php`` imports both files through Moodle's qformat_xml / qformat_gift into a fresh course, grades
each answer as one question-engine attempt (a Cloze question's cell in its own sub-question) and reports Moodle's
fraction (and, for a choice, the feedback it renders). Every variant's questions must be in one category of their
own, and moodle.xml's marks one multiple of the points. The quizzes: ``problems/quiz-1.toml -n 10``; a hostile
one: a 200-character title of ``&``, ``/`` and ``<`` and a 100-digit seed (a category name at Moodle's
255-character limit, in PostgreSQL when the site runs on it), with masked cells in a Cloze row and a relative
tolerance; ``problems/quiz-5-choice.toml -n 10`` (choice questions) and ``problems/quiz-6-mixed.toml -n 10``
(three parts: self-attention, causal, a training step).

Run: ``WORKED_MOODLE=/tmp/moodle python tests/moodle/run_check.py`` (prints the counts; exit 1 on a mismatch),
or the pytest test ``tests/test_lms_moodle.py``, which skips without WORKED_MOODLE. Setup: tests/moodle/README.md.
"""
from __future__ import annotations

import html
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from decimal import ROUND_HALF_UP, Decimal
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PHP_SCRIPT = HERE / "check_window.php"

HOSTILE_TITLE = ("R&D / <b>Q&A</b> <i> & //x// </ < &amp; " * 10)[:200]
HOSTILE_SEED = 10 ** 100 - 12345   # 100 digits, near worked.quiz.MAX_SEED
HOSTILE_SPEC = f"""title = {json.dumps(HOSTILE_TITLE)}
seed = {HOSTILE_SEED}

[family]
tokens = ["the", "cat", "sat", "down"]
d_model = 3
d_k = 4
range = [-1, 2]
weight_range = [0, 1]
mask = "causal"

[[questions]]
ask = "scaled[2,*]"
points = 2
tolerance = 0.01

[[questions]]
ask = "weights[4,*]"
points = 2
tolerance = {{ abs = 0.01 }}

[[questions]]
ask = "Z[4,1]"
points = 2
tolerance = {{ abs = 0.01, rel = 0.01 }}
"""


CHOICE_QUIZZES = ("quiz-5-choice", "quiz-6-mixed")   # choice questions; three parts (self-attention, causal, training)


def dec(x) -> Decimal:
    """A manifest number (a float of 12 significant digits) as the decimal it was written as."""
    return Decimal(repr(x)) if isinstance(x, float) else Decimal(x)


def plain(d: Decimal) -> str:
    return format(d, "f")


def cell_answers(e: dict, places: int) -> list[tuple[str, Decimal, int]]:
    """(kind, answer, expected fraction) for one manifest entry: the spec accepts |answer − exact| ≤ tol."""
    exact, tol = dec(e["expected"]), dec(e["tolerance"])
    eps = tol / 100
    r = exact.quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)
    points = [("inside below", exact - tol + eps), ("outside below", exact - tol - eps),
              ("inside above", exact + tol - eps), ("outside above", exact + tol + eps), ("rounded", r)]
    points += [(f"mistake {m['id']}", dec(m["value"]), None) for m in e["mistakes"]]
    return [(kind, x, 1 if abs(x - exact) <= tol else 0) for kind, x, *_ in points]


def sections(v: dict) -> list[dict]:
    """A manifest variant as the problems it asks about: itself, or (a spec with [[parts]]) its parts, in order."""
    return v["parts"] if isinstance(v.get("parts"), list) else [v]


def choice_checks(v: dict, q: dict) -> list[dict]:
    """A choice question's checks: each option chosen by its text (Moodle shuffles them), the right one for full
    marks and "Correct.", each wrong one for 0 and its named mistake's feedback."""
    out = []
    for o in q["options"]:
        kind = f"option {o['letter']} " + ("right" if o["right"] else f"mistake {o['mistake']}")
        out.append({"variant": v["variant"], "cell": q["ask"], "kind": kind, "choice": o["value"], "sub": 0,
                    "expect": 1 if o["right"] else 0, "feedback_expected": o["feedback"], "mistake": o["mistake"],
                    "values": sorted(x["value"] for x in q["options"]),
                    "right": next(x["value"] for x in q["options"] if x["right"])})
    return out


def plan_checks(manifest: dict) -> tuple[list[dict], list[dict]]:
    """The checks of moodle.xml (a Cloze question per multi-cell ask, cell k its k-th sub-question; a choice
    question per choice ask) and of the GIFT file (one numerical question per cell; a choice question per choice
    ask), by the idnumbers the exports document; a quiz with [[parts]] has every part's questions."""
    xml, gift = [], []
    for v in manifest["variants"]:
        for part in sections(v):
            places = part["problem"]["decimals"]
            for q in part["questions"]:
                base = f"{v['variant']}-{q['name']}"
                if q.get("type") == "choice":
                    for c in choice_checks(v, q):
                        xml.append(dict(c, idnumber=base))
                        gift.append(dict(c, idnumber=base))
                    continue
                cells = [e for e in q["entries"] if e["expected"] is not None]
                multi = len(q["entries"]) > 1
                for k, e in enumerate(cells, 1):
                    for kind, x, expect in cell_answers(e, places):
                        c = {"variant": v["variant"], "cell": e["ask"], "kind": kind, "answer": plain(x),
                             "expect": expect, "rounded": plain(dec(e["expected"]).quantize(
                                 Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))}
                        xml.append(dict(c, idnumber=base, sub=k if multi else 0))
                        gift.append(dict(c, idnumber=f"{base}-{e['row']}-{e['col']}" if multi else base, sub=0))
    return xml, gift


def build_quiz(out: Path, spec: Path, *args: str) -> dict:
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(spec), "-o", str(out), "--format", "moodle,gift",
                        "--jobs", "1", "--quiet", *args], capture_output=True, text=True, cwd=ROOT, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(f"worked quiz {spec.name} failed: {r.stderr.strip()}")
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def php_command(moodle: Path) -> list[str]:
    """``php``, as the owner of the site's config.php when we are root (Moodle's caches in its dataroot belong to
    the site's user)."""
    php = os.environ.get("WORKED_MOODLE_PHP", "php")
    owner = (moodle / "config.php").stat().st_uid
    if os.geteuid() == 0 and owner != 0:
        return ["runuser", "-u", pwd.getpwuid(owner).pw_name, "--", php]
    return [php]


def check(moodle: Path, count: int = 10) -> dict:
    """Build the quizzes, run check_window.php on them, and return the summary (see :func:`summarize`)."""
    if not (moodle / "config.php").is_file():
        raise FileNotFoundError(f"WORKED_MOODLE={moodle}: no config.php there (install Moodle first)")
    work = Path(tempfile.mkdtemp(prefix="worked-moodle-"))
    try:
        work.chmod(0o755)   # the site's user reads the files
        hostile = work / "hostile.toml"
        hostile.write_text(HOSTILE_SPEC, encoding="utf-8")
        quizzes = [("quiz-1", build_quiz(work / "quiz-1", ROOT / "problems" / "quiz-1.toml", "-n", str(count))),
                   ("hostile", build_quiz(work / "hostile", hostile, "-n", "4"))]
        quizzes += [(name, build_quiz(work / name, ROOT / "problems" / f"{name}.toml", "-n", str(count)))
                    for name in CHOICE_QUIZZES]
        imports, manifests = [], {}
        for name, manifest in quizzes:
            manifests[name] = manifest
            xml, gift = plan_checks(manifest)
            imports.append({"label": f"{name} moodle.xml", "quiz": name, "format": "xml",
                            "file": str(work / name / "moodle.xml"), "checks": xml})
            imports.append({"label": f"{name} quiz.gift.txt", "quiz": name, "format": "gift",
                            "file": str(work / name / "quiz.gift.txt"), "checks": gift})
        shutil.copy(PHP_SCRIPT, work / PHP_SCRIPT.name)
        plan, out = work / "plan.json", work / "result.json"
        plan.write_text(json.dumps({"imports": imports}), encoding="utf-8")
        for p in (plan, work / PHP_SCRIPT.name):
            p.chmod(0o644)
        out.touch(0o666)
        out.chmod(0o666)
        r = subprocess.run([*php_command(moodle), str(work / PHP_SCRIPT.name), f"--moodle={moodle}", f"--plan={plan}",
                            f"--out={out}"], capture_output=True, text=True, timeout=1800)
        if r.returncode != 0 or not out.read_text():
            raise RuntimeError(f"check_window.php exited {r.returncode}: {(r.stderr or r.stdout).strip()[-2000:]}")
        return summarize(json.loads(out.read_text(encoding="utf-8")), imports, manifests)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def quiz_category_ok(stored: str, manifest: dict) -> bool:
    """The quiz's category as PostgreSQL stored it: at most 255 characters, the seed kept, and shown (HTML)
    as the title, or the title cut with "…"."""
    shown, tail = html.unescape(stored), f" (seed {manifest['seed']})"
    title = " ".join(manifest["title"].split())
    return (len(stored) <= 255 and shown.endswith(tail)
            and (shown == title + tail or (shown.endswith("…" + tail) and title.startswith(shown[:-len(tail) - 1]))))


def words(s: str | None) -> str:
    return " ".join((s or "").split())


def choice_problems(label: str, c: dict) -> list[str]:
    """What is wrong with one chosen option as Moodle graded and showed it (nothing when all is right)."""
    where = f"{label}: {c['idnumber']} {c['cell']} {c['kind']} ({c['choice']})"
    out = []
    if c["fraction"] is None:
        return [f"{where}: not chosen: {c['state']} among Moodle's options {c['options']}"]
    if not c["match"]:
        out.append(f"{where}: got fraction {c['fraction']} ({c['state']}), the spec says {c['expect']}")
    if words(c["feedback"]) != words(c["feedback_expected"]):
        out.append(f"{where}: Moodle shows the feedback {c['feedback']!r}, the manifest says {c['feedback_expected']!r}")
    if c["mistake"] and f"[{c['mistake']}]" not in (c["feedback"] or ""):
        out.append(f"{where}: Moodle's feedback {c['feedback']!r} does not name the mistake {c['mistake']}")
    if sorted(c["options"]) != c["values"]:
        out.append(f"{where}: Moodle's options {c['options']}, the manifest's {c['values']}")
    if not c["shuffle"]:
        out.append(f"{where}: Moodle does not shuffle the options")
    if words(c["rightanswer"]) != c["right"]:
        out.append(f"{where}: Moodle's right answer is {c['rightanswer']!r}, not {c['right']!r}")
    return out


def marks_problems(label: str, got: dict, points: dict) -> list[str]:
    """moodle.xml: Moodle's mark of every question is the same multiple of the spec's points (one K a quiz)."""
    ratios = {Fraction(q["defaultmark"]).limit_denominator(10 ** 6) / Fraction(dec(points[q["idnumber"]]))
              for q in got["questions"] if q["idnumber"] in points}
    return [] if len(ratios) <= 1 else [f"{label}: Moodle's marks are not one multiple of the points: {sorted(ratios)}"]


def category_problems(label: str, got: dict, variant_of: dict) -> list[str]:
    """Every question of a variant in one category, the variant's own ("Variant CODE")."""
    paths: dict[str, set] = {}
    for q in got["questions"]:
        paths.setdefault(variant_of.get(q["idnumber"], "?"), set()).add(tuple(q["category"]))
    return [f"{label}: variant {v}: questions in {len(p)} categories: {sorted(p)}" for v, p in paths.items()
            if len(p) != 1 or next(iter(p))[-1] != f"Variant {v}"]


def summarize(result: dict, imports: list[dict], manifests: dict) -> dict:
    """Counts per import and every disagreement with the spec, one line each."""
    rows, problems = [], []
    for imp, got in zip(imports, result["imports"]):
        label = imp["label"]
        manifest = manifests[imp["quiz"]]
        if not got["ok"]:
            problems.append(f"{label}: Moodle did not import it: {got['output']}")
        for q in got["questions"]:
            if not quiz_category_ok(q["category"][-2], manifest):
                problems.append(f"{label}: {q['idnumber']}: category {q['category'][-2]!r} "
                                f"({len(q['category'][-2])} characters)")
        problems += category_problems(label, got, {c["idnumber"]: c["variant"] for c in imp["checks"]})
        if imp["format"] == "xml":
            problems += marks_problems(label, got, {f"{v['variant']}-{q['name']}": q["points"]
                                                    for v in manifest["variants"] for part in sections(v)
                                                    for q in part["questions"]})
        problems += [f"{label}: {i}: not imported" for i in got["missing"]]
        problems += [f"{label}: {i}: imported but not checked" for i in got["unchecked"]]
        choices = [c for c in got["results"] if "choice" in c]
        values = [c for c in got["results"] if "choice" not in c]
        for c in choices:
            problems += choice_problems(label, c)
        bad = [c for c in values if not c["match"]]
        problems += [f"{label}: {c['idnumber']} {c['cell']} {c['kind']}: answer {c['answer']} got fraction "
                     f"{c['subfraction']} ({c['state']}), the spec says {c['expect']}" for c in bad]
        shown = [c for c in values if c["kind"] == "rounded" and Decimal(c["rightanswer"]) != Decimal(c["rounded"])]
        problems += [f"{label}: {c['idnumber']} {c['cell']}: Moodle's right answer is {c['rightanswer']}, "
                     f"not the rounded {c['rounded']}" for c in shown]
        rows.append({"import": label, "questions": len(got["questions"]),
                     "types": sorted({q["qtype"] for q in got["questions"]}),
                     "variants": len(manifest["variants"]),
                     "categories": len({tuple(q["category"]) for q in got["questions"]}),
                     "cells": sum(1 for c in values if c["kind"] == "rounded"),
                     "choices": len({c["idnumber"] for c in choices}), "options": len(choices),
                     "wrong_options": sum(1 for c in choices if c["expect"] == 0),
                     "attempts": len(got["results"]),
                     "mismatches": len(bad) + sum(1 for c in choices if choice_problems(label, c)),
                     "category_chars": max((len(q["category"][-2]) for q in got["questions"]), default=0),
                     "category": got["questions"][0]["category"] if got["questions"] else None})
    return {"moodle": result["moodle"], "dbtype": result["dbtype"], "imports": rows, "problems": problems}


def main() -> int:
    moodle = os.environ.get("WORKED_MOODLE")
    if not moodle:
        print("error: set WORKED_MOODLE to a Moodle 4.5 site's folder (see tests/moodle/README.md)", file=sys.stderr)
        return 2
    s = check(Path(moodle))
    print(f"Moodle {s['moodle']} ({s['dbtype']})")
    for r in s["imports"]:
        choice = f"{r['choices']} choice questions ({r['options']} options, {r['wrong_options']} wrong), " if r["choices"] else ""
        print(f"{r['import']}: {r['questions']} questions ({', '.join(r['types'])}) in {r['categories']} categories "
              f"for {r['variants']} variants, {r['cells']} cells, {choice}{r['attempts']} attempts, "
              f"{r['mismatches']} mismatches, category name {r['category_chars']} chars")
        print(f"  category as stored: {' / '.join(r['category'] or [])}")
    for p in s["problems"]:
        print("  " + p)
    return 1 if s["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
