"""A mistake is named only on sufficient evidence: one wrong entry that happens to match a mistake's value is
"wrong" without a diagnosis; several entries, or a value only that mistake gives (a number where −∞ belongs),
are named. (The rate of false diagnoses of random wrong single entries is measured by
benchmarks/check_diagnosis.py.)"""
from __future__ import annotations

from worked.check import check_answers
from worked.problem import load


def blank(shape, i, j, value):
    rows = [["" for _ in range(shape[1])] for _ in range(shape[0])]
    rows[i][j] = value
    return rows


def test_one_entry_matching_a_mistake_is_only_wrong():
    p = load("problems/cats-chase-mice.toml")
    # 0.79 is weights[1,2] without the √d_k (no-scaling); alone it is not enough to say so
    rep = check_answers(p, {"weights": blank((3, 3), 0, 1, "0.79")})
    assert rep.summary()["wrong"] == 1 and rep.diagnoses == []
    assert rep.summary_line() == "0 of 9 entries correct, 1 wrong, 8 not answered."
    # the whole row is: three entries that all show it
    rep = check_answers(p, {"weights": [["0.11", "0.79", "0.11"], ["", "", ""], ["", "", ""]]})
    assert [d["code"] for d in rep.diagnoses] == ["no-scaling"]


def test_a_value_only_a_wrong_mask_gives_is_named_alone():
    from worked.attention import Float, Transform, forward

    p = load("problems/causal-mask.toml")
    n = p.n
    # an unmasked score written where −∞ belongs (scores[1,3]): what masking nothing gives
    unmasked = forward(p, Float(), transform=Transform(mask="none")).shown["scores"]
    rep = check_answers(p, {"scores": blank((n, n), 0, n - 1, f"{unmasked[0][n - 1]:g}")})
    assert rep.summary()["wrong"] == 1
    assert [d["code"] for d in rep.diagnoses] == ["wrong-mask"], rep.text()
