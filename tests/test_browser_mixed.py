"""Issues 29/30 on the web page, in Chromium: a variant of a quiz that mixes families (problems/quiz-6-mixed.toml:
self-attention, causal attention, a training step) opened by its code is one page with every part in order, checked
in one go; the points per part and in total are `worked grade`'s for the same answers (a wrong option, a slip, right
answers); axe-core finds no WCAG 2.1/2.2 AA violation before and after the check at both widths, and a focused
cell or option is never under the sticky Check bar."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import PROBLEMS, _Server, browser  # noqa: E402,F401
from test_browser_student import AXE, WIDTHS, _axe, _covered, check, new_page  # noqa: E402

from conftest import run_cli  # noqa: E402
from worked.mistakes import MISTAKES  # noqa: E402
from worked.problem import Problem  # noqa: E402
from worked.solver import solve  # noqa: E402

SHOTS = Path(os.environ["WORKED_SHOTS"]) if os.environ.get("WORKED_SHOTS") else None   # screenshots to look at


@pytest.fixture(scope="module")
def mixed_quiz(tmp_path_factory):
    """One variant of problems/quiz-6-mixed.toml, served."""
    folder = tmp_path_factory.mktemp("mixed")
    code, _, err = run_cli("quiz", str(PROBLEMS / "quiz-6-mixed.toml"), "-n", "1", "--format", "html", "-o",
                           str(folder / "quiz"), "--quiet", "--jobs", "1")
    assert code == 0, err
    s = _Server(folder / "quiz")
    s.folder = folder
    s.variant = json.loads((folder / "quiz" / "manifest.json").read_text(encoding="utf-8"))["variants"][0]
    yield s
    s.stop()


def math_in_title(option) -> bool:
    """Does the option's mistake have math in its title (K·Qᵀ instead of Q·Kᵀ)?"""
    return bool(option["mistake"]) and any(not isinstance(x, str) for x in MISTAKES[option["mistake"]].title_prose.parts)


def responses(variant) -> dict[str, str]:
    """Each question's response, by its name: a wrong option (part 1's q1; one whose mistake's title holds math, if
    any), a right value (q2), a slip in the first entry of a row (part 2's q3; its other entries right), the right
    loss and the right option (part 3)."""
    out = {}
    for part in variant["parts"]:
        sol = solve(Problem.from_dict(part["problem"], source="test"))
        places = part["problem"].get("decimals", 2)
        mats = sol.matrices()
        for q in part["questions"]:
            if q.get("type") == "choice":
                fits = sorted((o for o in q["options"] if o["right"] == (q["name"] != "q1")), key=math_in_title)
                out[q["name"]] = fits[-1]["letter"]
                continue
            m = mats[q["matrix"]]
            vals = [m.dec_plain(e["row"] - 1, e["col"] - 1, places) for e in q["entries"]]
            if q["name"] == "q3":
                vals[0] = f"{float(vals[0]) + 0.2:.{places}f}"     # a slip
            out[q["name"]] = ", ".join(vals)
    return out


def answer_on_page(page, variant, said):
    for k, part in enumerate(variant["parts"], 1):
        for q in part["questions"]:
            if q.get("type") == "choice":
                o = next(o for o in q["options"] if o["letter"] == said[q["name"]])
                page.locator(f"#choice-p{k}-{q['name']}").get_by_label(f"{o['letter']}. {o['value']}").check()
                continue
            key = q["matrix"].replace(".", "_")
            for e, v in zip(q["entries"], said[q["name"]].split(", ")):
                page.fill(f"#a-p{k}-{key}-{e['row'] - 1}-{e['col'] - 1}", v)


def grade_of(quiz, said, tmp_path) -> dict[str, float]:
    """`worked grade` of the same responses: points by question ask, and the total."""
    names = [q["name"] for p in quiz.variant["parts"] for q in p["questions"]]
    with (tmp_path / "responses.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["variant"] + names)
        w.writerow([quiz.variant["variant"]] + [said[n] for n in names])
    code, _, err = run_cli("grade", str(quiz.folder / "quiz"), str(tmp_path / "responses.csv"), "-o",
                           str(tmp_path / "grades"))
    assert code == 0, err
    with (tmp_path / "grades" / "gradebook.csv").open(encoding="utf-8") as f:
        row = next(csv.DictReader(f))
    return row


def fmt(x: float) -> str:
    return f"{x:g}"


def test_a_mixed_variant_is_one_page_scored_per_part_as_worked_grade_scores_it(browser, mixed_quiz, tmp_path):
    v = mixed_quiz.variant
    page = new_page(browser)
    page.goto(mixed_quiz.url + "?code=" + v["variant"])
    page.locator("section.part").nth(2).wait_for()
    heads = page.locator("section.part > h3").all_inner_texts()
    assert heads == ["Part 1: Self-attention", "Part 2: Causal attention", "Part 3: A training step"], heads
    # each part shows its own problem: its given X, and only the grids its questions ask for
    for k in (1, 2, 3):
        sec = page.locator("section.part").nth(k - 1)
        assert sec.locator(".mats figure").count() >= 1
        assert sec.locator("fieldset.choice").count() == sum(q.get("type") == "choice" for q in v["parts"][k - 1]["questions"])
    said = responses(v)
    answer_on_page(page, v, said)
    check(page)
    lines = page.locator("#summary .part-scores > li").all_inner_texts()
    assert len(lines) == 3, lines
    row = grade_of(mixed_quiz, said, tmp_path)
    for k, (line, part) in enumerate(zip(lines, v["parts"]), 1):
        earned = sum(float(row[q["ask"]]) for q in part["questions"])
        out_of = sum(q["points"] for q in part["questions"])
        assert line.startswith(f"{heads[k - 1]}: {fmt(earned)} of {fmt(out_of)} points"), (line, row)
        for q in part["questions"]:
            assert f"{q['name']}: {fmt(float(row[q['ask']]))} of {fmt(q['points'])}" in line, (line, row)
    assert page.locator("#summary > strong.score").inner_text() == f"Points: {fmt(float(row['total']))} of {row['out_of']}"
    # the answers make the three kinds of marks: a wrong option names its mistake, the slip is ✗ where it is
    wrong = next(o for o in v["parts"][0]["questions"][0]["options"] if o["letter"] == said["q1"])
    assert wrong["mistake"] in page.locator("#choice-p1-q1 .diag").inner_text()
    if math_in_title(wrong):        # the mistake's title sets its math as MathML, with the text as its alt text
        alts = page.locator("#choice-p1-q1 .diag-title math").evaluate_all("ms => ms.map((m) => m.getAttribute('alttext'))")
        assert alts and all(alts), alts
    assert wrong["mistake"] in row["misconceptions"].split()
    slip = page.locator("section.part").nth(1).locator("td.bad")
    assert slip.count() == 1
    assert page.locator("#choice-p3-q5 .verdict").inner_text().startswith("Right")
    assert 0 < float(row["total"]) < float(row["out_of"])
    # the answers are kept per part for the next visit
    page.reload()
    page.locator("section.part").nth(2).wait_for()
    key = v["parts"][1]["questions"][0]["matrix"]
    e = v["parts"][1]["questions"][0]["entries"][0]
    assert page.input_value(f"#a-p2-{key}-{e['row'] - 1}-{e['col'] - 1}") == said["q3"].split(", ")[0]
    assert page.errors == []
    page.context.close()


@pytest.mark.skipif(not AXE.is_file() and not os.environ.get("CI"), reason="axe-core is not installed: npm ci --prefix tests")
@pytest.mark.parametrize("width,height", WIDTHS)
def test_axe_and_focus_on_a_mixed_variant(browser, mixed_quiz, width, height):
    v = mixed_quiz.variant
    page = new_page(browser, width, height)
    page.goto(mixed_quiz.url + "?code=" + v["variant"])
    page.locator("section.part").nth(2).wait_for()
    assert _axe(page) == [], "a mixed variant, before a check"
    answer_on_page(page, v, responses(v))
    check(page)
    assert _axe(page) == [], "a mixed variant, checked"
    if SHOTS:
        page.screenshot(path=str(SHOTS / f"mixed-checked-{width}.png"), full_page=True)
    page.click("#show-solution")
    page.locator("#solution").wait_for(state="visible")
    assert page.locator("#solution-body > h3.part-head").count() == 3
    assert _axe(page) == [], "a mixed variant with its solutions shown"
    # focus: back from the Check button through every part's cells and options, never under the bar
    page.focus("#check-btn")
    seen = []
    while len(seen) < 60 and page.evaluate("document.activeElement.id") != "variant-code":
        page.keyboard.press("Shift+Tab")
        st = _covered(page)
        seen.append(st["id"])
        assert st["ok"], st
    assert any(x.startswith("a-p1-") for x in seen) and any(x.startswith("a-p3-") for x in seen), seen
    assert any(x.startswith("choice-p1-") for x in seen), seen
    assert page.errors == []
    page.context.close()
