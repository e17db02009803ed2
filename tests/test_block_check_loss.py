"""log₁₀ named from a lone loss (issue 27, "Checking"): a quiz asks `loss` alone, so `worked check`, `worked grade`, the
LMS exports and the web page's check name the mistake from that one number where the evidence is good: the answer is
in the log₁₀ loss's band and not in the right one's, no other mistake's value is nearer, and a wrong loss written at
random (anywhere from 0 to twice the right one) lands in that band at most 1 time in 100 (worked.check.EVIDENCE),
which the feedback states. Checked over drawn blocks: the log₁₀ loss rounded as a student writes it is named (where
the band is that narrow, which is most drawn blocks), random wrong losses are not."""
from __future__ import annotations

import csv
import json
import math
import random
import re
import xml.etree.ElementTree as ET
from decimal import Decimal
from pathlib import Path

import pytest

from worked.attention import Float, Transform, run_pass
from worked.check import EVIDENCE, Checker, check_answers
from worked.generate import Family, generate_block
from worked.problem import load
from worked.solver import solve

from test_block_train_quiz import _run  # noqa: E402  (the CLI in a subprocess)

ROOT = Path(__file__).resolve().parents[1]
FAMILIES = [dict(block="post-ln", vocab=4, positional="sinusoidal"),
            dict(block="pre-ln", vocab=4, mask="causal", positional="sinusoidal"),
            dict(block="post-ln", vocab=5, tokens=4, eps="1/100"),
            dict(block="pre-ln", heads=2, d_ff=3, vocab=4)]       # a training step's loss: block-train.toml below
SEEDS = range(4)
SURE = re.compile(r"Named from this one number \(loss\) alone: .* about 1 time in (\d+)\.")


def drawn():
    """(problem, its checker, the true loss, the log₁₀ loss) of every drawn block, once."""
    if not drawn.cache:
        for fam in FAMILIES:
            for seed in SEEDS:
                p = generate_block(Family.from_dict(fam), seed)
                loss = run_pass(p, Float()).shown["loss"][0][0]
                log10 = run_pass(p, Float(), transform=Transform(log="log10")).shown["loss"][0][0]
                drawn.cache.append((p, Checker(p, solve(p)), loss, log10))
    return drawn.cache


drawn.cache = []


def written(x, places):
    return f"{x:.{places}f}"


def lone(ch, value):
    rep = ch.check({"loss": [[value]]})
    return rep, rep.summary()["mistakes"]


def test_the_log10_loss_rounded_as_a_student_writes_it_is_named_with_how_sure():
    named = 0
    for p, ch, loss, log10 in drawn():
        rep, codes = lone(ch, written(log10, p.decimals))
        assert rep.summary()["wrong"] == 1
        assert codes in ([], ["log10-loss"]), rep.text()
        if codes:
            named += 1
            (d,) = rep.diagnoses
            sure = SURE.search(d["message"])
            assert sure and int(sure.group(1)) >= 1 / EVIDENCE, d["message"]
            assert d["matrices"] == ["loss"] and d["step"]["id"] == "loss"
    # about half of today's drawn blocks (8 of 16; 11 of 16 with the draws before W_out was drawn sparse): the rest have
    # a band too wide for their loss's size to name it from one number
    assert named >= 0.4 * len(drawn()), named


@pytest.mark.parametrize("name", ["block-post-ln", "block-pre-ln-causal", "block-train"])
def test_the_shipped_blocks_name_it(name):
    p = load(ROOT / "problems" / f"{name}.toml")
    log10 = run_pass(p, Float(), transform=Transform(log="log10")).shown["loss"][0][0]
    rep = check_answers(p, {"loss": [[written(log10, p.decimals)]]})
    assert rep.summary()["mistakes"] == ["log10-loss"], rep.text()
    assert "1 shows the mistake" in rep.summary_line()


def test_random_wrong_losses_are_not_named_log10():
    """Wrong losses near the right one (within ±40 %) are never named; wrong losses anywhere in [0, 2·loss] (which
    holds the log₁₀ loss, 0.43·loss) are named at most at the evidence bound's rate, and a lone loss is never given
    another mistake's name."""
    rng = random.Random(27)
    near = wide = named_wide = 0
    for p, ch, loss, log10 in drawn():
        q = 10 ** -p.decimals
        for k in range(24):
            lo, hi = (0.6 * loss, 1.4 * loss) if k % 2 == 0 else (0.0, 2 * loss)
            value = written(round(rng.uniform(lo, hi) / q) * q, p.decimals)
            rep, codes = lone(ch, value)
            if rep.summary()["wrong"] != 1:
                continue            # within the right band: not a wrong answer
            assert codes in ([], ["log10-loss"]), (value, codes)
            if k % 2 == 0:
                near += 1
                assert codes == [], (p.title, loss, log10, value)
            else:
                wide += 1
                named_wide += bool(codes)
    assert near > 150 and wide > 150
    assert named_wide <= 1.5 * float(EVIDENCE) * wide, (named_wide, wide)


def test_log10_from_the_students_own_probabilities_is_named_and_a_carried_loss_is_not():
    """A student whose probabilities are wrong (the logits' softmax down the columns) and whose loss is log₁₀ of
    their own probabilities: named from there; the loss taken with ln from those probabilities is carried forward,
    not a mistake of its own."""
    p = load(ROOT / "problems" / "block-post-ln.toml")
    t = Transform(output_softmax="columns")
    probs = run_pass(p, Float(), transform=t).shown["probs"]
    mine = [[written(x, 4) for x in row] for row in probs]
    given = {"probs": [[Decimal(x) for x in row] for row in mine]}
    ln_own = -sum(math.log(float(given["probs"][i][w])) for i, w in enumerate(p.block.targets)) / p.n
    rep = check_answers(p, {"probs": mine, "loss": [[written(ln_own, p.decimals)]]})
    assert "log10-loss" not in rep.summary()["mistakes"] and rep.summary()["carried_forward"] == 1, rep.text()
    rep = check_answers(p, {"probs": mine, "loss": [[written(ln_own / math.log(10), p.decimals)]]})
    assert "log10-loss" in rep.summary()["mistakes"], rep.text()


@pytest.fixture(scope="module")
def quiz7(tmp_path_factory):
    out = tmp_path_factory.mktemp("quiz7") / "q"
    _run("quiz", ROOT / "problems" / "quiz-7-block.toml", "-n", 2, "-o", out, "--format", "moodle,gift,qti", "--quiet")
    return out


def _loss_entry(v):
    q = next(q for q in v["questions"] if q["ask"] == "loss")
    return q["entries"][0]


def test_the_lms_exports_name_log10_for_a_loss_ask(quiz7):
    """The manifest's loss entry has the log₁₀ loss among its mistakes, and Moodle XML and GIFT give it a 0 % window
    of the question's tolerance whose feedback names it (as an attention ask's mistakes have); Canvas's numerical
    questions hold right answers only, for every ask."""
    m = json.loads((quiz7 / "manifest.json").read_text())
    e = _loss_entry(m["variants"][0])
    (mk,) = [x for x in e["mistakes"] if x["id"] == "log10-loss"]
    assert mk["value"] == pytest.approx(e["expected"] / math.log(10), rel=1e-9)
    assert mk["feedback"].endswith("[log10-loss]")
    root = ET.parse(quiz7 / "moodle.xml").getroot()
    loss_qs = [q for q in root.iter("question") if (q.findtext("name/text") or "").endswith("loss")]
    assert len(loss_qs) == 2
    for q in loss_qs:
        wins = [(a.get("fraction"), float(a.findtext("text")), float(a.findtext("tolerance")), a.findtext("feedback/text"))
                for a in q.iter("answer")]
        hit = [w for w in wins if "[log10-loss]" in w[3]]
        assert len(hit) == 1 and hit[0][0] == "0" and hit[0][2] == pytest.approx(0.02)
        right = [w for w in wins if w[0] == "100"]
        assert all(abs(hit[0][1] - r[1]) > r[2] + hit[0][2] for r in right)     # its window is not the right one's
    gift = (quiz7 / "quiz.gift.txt").read_text(encoding="utf-8")
    assert gift.count("[log10-loss]") == 2 and f"=%0%{mk['value']:.12g}:0.02#" in gift


def test_grade_names_log10_from_the_loss_column(quiz7, tmp_path):
    m = json.loads((quiz7 / "manifest.json").read_text())
    resp = tmp_path / "responses.csv"
    with resp.open("w", newline="") as f:
        w = csv.writer(f)
        asks = [q["ask"] for q in m["variants"][0]["questions"]]
        w.writerow(["variant"] + asks)
        for k, v in enumerate(m["variants"]):
            row = [v["variant"]]
            for q in v["questions"]:
                xs = [e["expected"] for e in q["entries"]]
                if q["ask"] == "loss" and k == 1:
                    xs = [x / math.log(10) for x in xs]
                row.append(" ".join(f"{x:.2f}" for x in xs))
            w.writerow(row)
    _run("grade", quiz7, resp, "-o", tmp_path / "grades")
    rows = list(csv.DictReader((tmp_path / "grades" / "gradebook.csv").open()))
    assert [r["misconceptions"] for r in rows] == ["", "log10-loss"]
    assert [r["loss"] for r in rows] == ["2", "0"]


def test_the_web_pages_check_names_it():
    pytest.importorskip("starlette")
    pytest.importorskip("httpx")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    p = load(ROOT / "problems" / "block-post-ln.toml")
    log10 = run_pass(p, Float(), transform=Transform(log="log10")).shown["loss"][0][0]
    c = TestClient(create_app(Config()), raise_server_exceptions=False)
    r = c.post("/api/check", json={"problem": p.to_dict(), "answers": {"loss": [[written(log10, p.decimals)]]}})
    assert r.status_code == 200, r.text
    rep = r.json()
    assert [d["code"] for d in rep["diagnoses"]] == ["log10-loss"]
    assert SURE.search(rep["diagnoses"][0]["message"])
