"""Real Moodle on our exports: Moodle 4.5's own importers (qformat_xml, qformat_gift) and question engine grade
answers just inside and just outside [exact − tol, exact + tol] in every asked cell of moodle.xml and the GIFT
file, and every option of every choice question (the right one full marks and "Correct.", each wrong one 0 and its
named mistake's feedback, as Moodle renders it), on quiz-1, a hostile quiz (a 200-character title of ``&``, ``/``
and ``<`` with a 100-digit seed: its category name in at most 255 characters, in PostgreSQL when the site runs on
it), the choice quiz and the mixed quiz of three parts (every variant's questions in one category). The driver is
tests/moodle/run_check.py; set WORKED_MOODLE to an installed Moodle site's folder to run it (setup:
tests/moodle/README.md). CI checks the same windows and options as Moodle's code reads them in
test_lms_exports.py and test_quiz_choice.py."""
import importlib.util
import os
from pathlib import Path

import pytest

MOODLE = os.environ.get("WORKED_MOODLE")
pytestmark = pytest.mark.skipif(not MOODLE, reason="set WORKED_MOODLE to a Moodle 4.5 site's folder to grade the "
                                                    "exports in Moodle (tests/moodle/README.md)")


def _driver():
    path = Path(__file__).parent / "moodle" / "run_check.py"
    spec = importlib.util.spec_from_file_location("moodle_run_check", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_moodle_grades_exactly_the_spec_window():
    s = _driver().check(Path(MOODLE))
    assert s["problems"] == []
    by = {r["import"]: r for r in s["imports"]}
    # quiz-1 -n 10: 10 cells a variant, 3 questions a variant in moodle.xml (a numerical, two Cloze), one per cell in GIFT
    assert by["quiz-1 moodle.xml"]["questions"] == 30 and by["quiz-1 quiz.gift.txt"]["questions"] == 100
    assert by["quiz-1 moodle.xml"]["types"] == ["multianswer", "numerical"]
    for r in s["imports"]:
        assert r["cells"] > 0 and r["attempts"] >= 5 * r["cells"] and r["mismatches"] == 0
    assert by["hostile moodle.xml"]["category_chars"] <= 255 and by["hostile quiz.gift.txt"]["category_chars"] <= 255
    for r in s["imports"]:     # every variant's questions in one category of their own
        assert r["categories"] == r["variants"]
    # quiz-5-choice -n 10: two choice questions a variant (4 and 3 options: every option chosen), one numerical
    for f in ("moodle.xml", "quiz.gift.txt"):
        r = by[f"quiz-5-choice {f}"]
        assert r["questions"] == 30 and r["types"] == ["multichoice", "numerical"]
        assert r["choices"] == 20 and r["options"] == 70 and r["wrong_options"] == 50
    # quiz-6-mixed -n 10: three parts (self-attention, causal, training), five questions a variant, two of them choice
    mixed_xml, mixed_gift = by["quiz-6-mixed moodle.xml"], by["quiz-6-mixed quiz.gift.txt"]
    assert mixed_xml["questions"] == 50 and mixed_xml["types"] == ["multianswer", "multichoice", "numerical"]
    assert mixed_gift["questions"] == 70 and mixed_gift["types"] == ["multichoice", "numerical"]
    for r in (mixed_xml, mixed_gift):
        assert r["choices"] == 20 and r["options"] == 70 and r["cells"] == 50
