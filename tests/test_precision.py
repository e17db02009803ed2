"""One precision object and one rounding rule (issue 26): answers at ``decimals`` places, carried values at
``decimals + 2`` (one more where a solution needs it), every rounding half away from zero from the exact value:
the solver's, the checker's model of a student's rounding, and the LMS exports' correct answers."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction

from worked import numfmt as F
from worked.attention import Interval
from worked.lms import rounded
from worked.problem import Precision, load

from conftest import PROBLEMS, ROOT


def test_a_problem_has_one_precision():
    p = load(PROBLEMS / "cats-chase-mice.toml")
    assert p.precision == Precision(answer=2, carried=4)
    assert p.precision.more() == Precision(2, 5)


def test_ties_round_away_from_zero_everywhere():
    p = load(PROBLEMS / "cats-chase-mice.toml")
    assert F.round_decimal(Fraction(1, 8), None, 2) == Decimal("0.13")
    assert F.round_decimal(Fraction(-1, 8), None, 2) == Decimal("-0.13")
    assert Interval(p).round(Decimal("0.125")) == Decimal("0.13")        # a student's early rounding of e^x
    assert Interval(p).round(Decimal("-0.125")) == Decimal("-0.13")
    # the LMS answer is the key's answer, not the 12-digit float rounded again
    assert rounded({"expected": 0.12499999999999, "answer": "0.12"}, 2) == Decimal("0.12")


def test_the_manifest_carries_the_keys_answers(tmp_path):
    out = tmp_path / "q"
    subprocess.run([sys.executable, "-m", "worked", "quiz", str(ROOT / "problems" / "quiz-1.toml"), "-n", "2",
                    "--format", "gift", "-o", str(out), "--quiet"], check=True, cwd=tmp_path)
    from worked.problem import Problem
    from worked.solver import solve

    for v in json.loads((out / "manifest.json").read_text())["variants"]:
        mats = solve(Problem.from_dict(v["problem"])).matrices()
        for q in v["questions"]:
            for e in q["entries"]:
                assert e["answer"] == mats[q["matrix"]].dec_plain(e["row"] - 1, e["col"] - 1, 2)
                assert rounded(e, 2) == Decimal(e["answer"])
