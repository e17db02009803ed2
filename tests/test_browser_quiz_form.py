"""Issues 29 and 30 on the web page, in Chromium: the teacher's quiz builder as form fields (a row per question with
an ask picker, checked as it is typed; parts for a mixed quiz) makes the quiz `worked quiz` makes from the spec the
form shows; a choice question is answered with radio buttons, and a wrong option shows its mistake's feedback; a
diagnosis writes its math as MathML; axe-core finds no WCAG 2.1/2.2 AA violation in these states."""
from __future__ import annotations

import io
import json
import os
import tomllib
import zipfile
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import PROBLEMS, _Server, browser, fill, no_scaling_answers, server  # noqa: E402,F401
from test_browser_student import AXE, WIDTHS, _axe, _covered, check, new_page  # noqa: E402

from conftest import run_cli  # noqa: E402
from worked.server.quizform import spec_toml  # noqa: E402


SHOTS = Path(os.environ["WORKED_SHOTS"]) if os.environ.get("WORKED_SHOTS") else None   # screenshots to look at


def teacher(browser, server, width=1200, height=900):
    page = new_page(browser, width, height)
    page.goto(server.url + "#teacher")
    page.locator("#q-check", has_text="makes a quiz").wait_for()
    return page


def ready(page):
    """The form's spec checked by the server and found to make a quiz (after the last change)."""
    page.evaluate("document.getElementById('q-check').textContent = ''")
    page.evaluate("checkQuiz(true)")
    page.locator("#q-check", has_text="makes a quiz").wait_for()


def row(page, k, part=0):
    return page.locator("#q-parts > fieldset.qpart").nth(part).locator("li.qrow").nth(k)


def download(page, tmp_path, formats=("html", "gift")) -> zipfile.ZipFile:
    for box in page.locator('input[name="q-fmt"]').all():
        box.set_checked(box.get_attribute("value") in formats)
    with page.expect_download() as dl:
        page.click("#make-quiz")
    page.locator("#quiz-status", has_text="downloaded").wait_for()
    return zipfile.ZipFile(io.BytesIO(Path(dl.value.path()).read_bytes()))


def cli_quiz(spec: dict, tmp_path, formats="html,gift") -> Path:
    (tmp_path / "spec.toml").write_text(spec_toml(spec), encoding="utf-8")
    out = tmp_path / "cli"
    code, _, err = run_cli("quiz", str(tmp_path / "spec.toml"), "--format", formats, "-o", str(out), "--quiet")
    assert code == 0, err
    return out


def same_quiz_as_the_cli(page, spec: dict, tmp_path) -> dict:
    """The form's TOML is *spec*'s, and its zip's manifest is byte for byte `worked quiz`'s on it (returned)."""
    page.click("#q-toml summary")
    assert page.input_value("#q-spec") == spec_toml(spec)
    z = download(page, tmp_path)
    out = cli_quiz(spec, tmp_path)
    assert z.read("manifest.json") == (out / "manifest.json").read_bytes()
    return json.loads(z.read("manifest.json"))


def test_the_builder_s_fields_make_the_quiz_worked_quiz_makes(browser, server, tmp_path):
    page = teacher(browser, server)
    page.set_default_timeout(120000)
    first = row(page, 0)
    # the picker: a matrix, a row and a column write the ask
    first.locator('[data-q="mat"]').select_option("weights")
    first.locator('[data-q="row"]').select_option("2")
    first.locator('[data-q="col"]').select_option("3")
    assert first.locator('[data-q="ask"]').input_value() == "weights[2,3]"
    first.locator('[data-q="type"]').select_option("choice")
    assert first.locator('[data-q="abs"]').is_hidden() and first.locator('[data-q="choices"]').is_visible()
    first.locator('[data-q="choices"]').fill("3")
    # a question added, filled by typing, moved up to the top; another removed
    page.click("#q-parts .add-question")
    new = page.locator(f'li.qrow[data-n="{row(page, 3).get_attribute("data-n")}"]')     # (it moves)
    assert page.evaluate("document.activeElement.dataset.q") == "ask"
    new.locator('[data-q="ask"]').fill("Q[1,2]")
    assert new.locator('[data-q="mat"]').input_value() == "Q" and new.locator('[data-q="col"]').input_value() == "2"
    new.locator('[data-q="points"]').fill("2")
    new.locator('[data-q="abs"]').fill("0.05")
    new.locator('[data-q="rel"]').fill("0.01")
    for _ in range(3):
        new.locator('[data-act="up"]').click()
    assert row(page, 0).locator('[data-q="ask"]').input_value() == "Q[1,2]"
    assert page.evaluate("document.activeElement.dataset.act") == "up"          # the focus stays on the button
    assert row(page, 0).locator("legend").inner_text() == "Question 1"
    row(page, 3).locator('[data-act="remove"]').click()                         # Z
    # the family's knobs are fields too
    page.fill("#q-title", "Builder quiz")
    page.fill("#q-seed", "77")
    page.fill("#q-count", "2")
    pre = page.locator("#q-parts > fieldset.qpart").get_attribute("data-pre")
    page.fill(f"#{pre}-d_model", "3")
    ready(page)
    spec = page.evaluate("quizSpec()")
    assert spec == {"title": "Builder quiz", "seed": 77, "count": 2,
                    "family": {"tokens": 3, "d_model": 3, "d_k": 2, "range": [-2, 3]},
                    "questions": [{"ask": "Q[1,2]", "points": 2, "tolerance": {"abs": 0.05, "rel": 0.01}},
                                  {"ask": "weights[2,3]", "type": "choice", "choices": 3, "points": 1},
                                  {"ask": "weights[1,*]", "points": 2, "tolerance": 0.01}]}
    manifest = same_quiz_as_the_cli(page, spec, tmp_path)
    assert [q.get("type", "value") for q in manifest["variants"][0]["questions"]] == ["value", "choice", "value"]
    assert len(manifest["variants"][0]["questions"][1]["options"]) == 3
    assert page.errors == []
    page.context.close()


def test_an_ask_is_checked_on_the_spot_with_the_ask_grammar_s_words(browser, server):
    page = teacher(browser, server, 390, 844)
    first = row(page, 0)
    ask = first.locator('[data-q="ask"]')
    ask.fill("scoers[2,3]")
    err = first.locator(".q-err")
    err.wait_for()
    assert "unknown matrix 'scoers'" in err.inner_text() and "questions[1].ask" in err.inner_text()
    assert ask.get_attribute("aria-invalid") == "true"
    assert err.get_attribute("id") in ask.get_attribute("aria-describedby").split()
    assert first.locator('[data-q="mat"]').input_value() == ""                 # the picker says: as typed
    assert "cannot make a quiz yet" in page.inner_text("#q-check")
    ask.fill("weights[1,*]")
    first.locator('[data-q="type"]').select_option("choice")
    page.locator(".q-err", has_text="a choice question asks one value").wait_for()
    first.locator('[data-q="type"]').select_option("value")
    first.locator('[data-q="points"]').fill("-1")
    page.locator(".q-err", has_text="points: expected a positive number").wait_for()
    assert first.locator('[data-q="points"]').get_attribute("aria-invalid") == "true"
    assert ask.get_attribute("aria-invalid") is None
    first.locator('[data-q="points"]').fill("1")
    err.wait_for(state="hidden")
    assert page.errors == []
    page.context.close()


def test_a_shipped_mixed_spec_loads_into_the_form_and_a_part_added_makes_the_cli_s_quiz(browser, server, tmp_path):
    page = teacher(browser, server, 390, 844)
    page.set_default_timeout(120000)
    page.locator("#q-load option").nth(1).wait_for(state="attached")
    page.select_option("#q-load", "quiz-6-mixed")
    page.locator("#quiz-status", has_text="Loaded the spec quiz-6-mixed").wait_for()
    assert page.locator("#q-parts > fieldset.qpart").count() == 3
    assert page.locator("#q-parts > fieldset.qpart > legend").all_inner_texts() == ["Part 1", "Part 2", "Part 3"]
    # the form holds the file's spec, table for table
    assert page.evaluate("quizSpec()") == tomllib.loads((PROBLEMS / "quiz-6-mixed.toml").read_text(encoding="utf-8"))
    # a fourth part: cross-attention, one question picked
    page.click("#q-add-part")
    part = page.locator("#q-parts > fieldset.qpart").nth(3)
    assert page.evaluate("document.activeElement.id").endswith("-title")
    page.keyboard.type("Cross-attention")
    pre = part.get_attribute("data-pre")
    page.select_option(f"#{pre}-attention", "cross")
    page.fill(f"#{pre}-tokens_enc", "2")
    part.locator('li.qrow [data-q="ask"]').fill("K[2,1]")       # K of the encoder side: 2 rows
    ready(page)
    page.fill("#q-count", "1")
    spec = page.evaluate("quizSpec()")
    assert [p["title"] for p in spec["parts"]] == ["Self-attention", "Causal attention", "A training step", "Cross-attention"]
    assert spec["parts"][3]["family"]["attention"] == "cross"
    z = download(page, tmp_path)
    out = cli_quiz(spec, tmp_path)
    assert z.read("manifest.json") == (out / "manifest.json").read_bytes()
    manifest = json.loads(z.read("manifest.json"))
    assert len(manifest["variants"][0]["parts"]) == 4
    # back to one part: a plain spec again
    for _ in range(3):
        page.locator("#q-parts .remove-part").last.click()
    assert "parts" not in page.evaluate("quizSpec()") and page.locator("#q-parts .part-title").is_hidden()
    assert page.errors == []
    page.context.close()


@pytest.fixture(scope="module")
def choice_quiz(tmp_path_factory):
    """A quiz of problems/quiz-5-choice.toml (two choice questions, one value question), served."""
    folder = tmp_path_factory.mktemp("choice")
    code, _, err = run_cli("quiz", str(PROBLEMS / "quiz-5-choice.toml"), "-n", "1", "--format", "html", "-o",
                           str(folder), "--quiet", "--force")
    assert code == 0, err
    variant = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))["variants"][0]
    s = _Server(folder)
    s.variant = variant
    yield s
    s.stop()


def _option(variant, k, right: bool):
    return next(o for o in variant["questions"][k]["options"] if o["right"] == right)


def open_choice_quiz(page, quiz):
    page.goto(quiz.url + "?code=" + quiz.variant["variant"])
    page.locator("fieldset.choice").first.wait_for()


def test_a_choice_question_is_answered_with_radio_buttons_and_a_wrong_option_names_its_mistake(browser, choice_quiz):
    page = new_page(browser, 390, 844)
    open_choice_quiz(page, choice_quiz)
    v = choice_quiz.variant
    q1, q2 = page.locator("fieldset.choice").nth(0), page.locator("fieldset.choice").nth(1)
    assert q1.locator("legend").inner_text().startswith("q1: Attention weights[")
    assert q1.locator('input[type="radio"]').count() == 4 and q2.locator('input[type="radio"]').count() == 3
    assert [x.strip() for x in q1.locator("label").all_inner_texts()] == [f"{o['letter']}. {o['value']}" for o in v["questions"][0]["options"]]
    wrong, right = _option(v, 0, False), _option(v, 1, True)
    q1.get_by_label(f"{wrong['letter']}. {wrong['value']}").check()      # by keyboard-reachable labels
    q2.get_by_label(f"{right['letter']}. {right['value']}").check()
    check(page)
    assert q1.locator(".verdict").inner_text() == "Not the right option (0 of 1 pt)."
    diag = q1.locator(".diag")
    assert wrong["mistake"] in diag.inner_text()
    assert diag.locator(".msg").inner_text().strip() != ""
    assert q2.locator(".verdict").inner_text() == "Right (1 of 1 pt)."
    assert page.locator("#summary .score").inner_text() == "Points: 1 of 3"
    # the letters are kept for the next visit, as the typed answers are
    page.reload()
    page.locator("fieldset.choice").first.wait_for()
    assert page.locator("fieldset.choice").nth(0).locator(f'input[value="{wrong["letter"]}"]').is_checked()
    page.click("#clear-btn")
    assert page.locator("fieldset.choice input:checked").count() == 0
    assert page.errors == []
    page.context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_a_focused_option_is_never_behind_the_check_bar(browser, choice_quiz, width, height):
    page = new_page(browser, width, height)
    open_choice_quiz(page, choice_quiz)
    page.focus("#check-btn")
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")
    seen = []
    while len(seen) < 12 and page.evaluate("document.activeElement.id") != "variant-code":
        page.keyboard.press("Shift+Tab")          # back through the options (a group is one stop) and the cells
        st = _covered(page)
        seen.append(st["id"])
        assert st["ok"], st
    assert any(x.startswith("choice-") for x in seen), seen
    page.focus("fieldset.choice input")
    for _ in range(3):                            # the arrows move among a group's options, and choose
        page.keyboard.press("ArrowDown")
        assert _covered(page)["ok"]
    assert page.locator("fieldset.choice").first.locator("input:checked").count() == 1
    page.context.close()


def test_the_diagnosis_writes_its_math_as_mathml(browser, server):
    page = new_page(browser)
    page.goto(server.url + "#problem=cats-chase-mice")
    page.locator("#a-Q-0-0").wait_for()
    fill(page, no_scaling_answers())
    check(page)
    diag = page.locator('fieldset[data-key="scaled"] .diag')
    assert diag.locator(".msg math").count() >= 1                # √d_k = √2
    alt = diag.locator(".msg math").first.get_attribute("alttext")
    assert "square root" in alt, alt
    assert diag.locator(".reread math").count() == 1              # Step 5's title: scaled = scores/√d_k
    assert "Re-read Step 5" in diag.inner_text()
    assert page.errors == []
    page.context.close()


@pytest.mark.skipif(not AXE.is_file() and not os.environ.get("CI"), reason="axe-core is not installed: npm ci --prefix tests")
@pytest.mark.parametrize("width,height", WIDTHS)
def test_axe_finds_no_violation_in_the_builder_and_the_choice_questions(browser, server, choice_quiz, width, height):
    page = teacher(browser, server, width, height)
    page.locator("#tab-teacher").click()
    assert _axe(page) == [], "the builder"
    row(page, 1).locator('[data-q="ask"]').fill("weights[1,2]")
    row(page, 1).locator('[data-q="type"]').select_option("choice")
    row(page, 0).locator('[data-q="ask"]').fill("scoers[2,3]")
    page.locator(".q-err:not([hidden])").wait_for()
    page.click("#q-add-part")
    pre = page.locator("#q-parts > fieldset.qpart").nth(1).get_attribute("data-pre")
    page.fill(f"#{pre}-tokens", "1")
    page.locator(".fam-err:not([hidden])").wait_for()
    page.click("#q-toml summary")
    assert _axe(page) == [], "the builder with errors, two parts and the TOML shown"
    page.locator("#quiz-card").screenshot(path=str(SHOTS / f"builder-{width}.png")) if SHOTS else None
    page.context.close()
    page = new_page(browser, width, height)
    open_choice_quiz(page, choice_quiz)
    assert _axe(page) == [], "a quiz with choice questions"
    v = choice_quiz.variant
    wrong = _option(v, 0, False)
    page.locator("fieldset.choice").nth(0).get_by_label(f"{wrong['letter']}. {wrong['value']}").check()
    right = _option(v, 1, True)
    page.locator("fieldset.choice").nth(1).get_by_label(f"{right['letter']}. {right['value']}").check()
    check(page)
    assert _axe(page) == [], "a wrong option and a right one, checked"
    page.screenshot(path=str(SHOTS / f"choice-checked-{width}.png"), full_page=True) if SHOTS else None
    page.context.close()


def test_a_block_family_in_the_builder_makes_the_quiz_worked_quiz_makes(browser, server, tmp_path):
    page = teacher(browser, server)
    page.set_default_timeout(120000)
    pre = page.locator("#q-parts > fieldset.qpart").get_attribute("data-pre")
    page.select_option(f"#{pre}-block", "pre-ln")
    page.select_option(f"#{pre}-mask", "causal")
    page.select_option(f"#{pre}-positional", "sinusoidal")
    page.fill(f"#{pre}-d_ff", "3")
    page.fill(f"#{pre}-vocab", "4")
    page.fill(f"#{pre}-eps", "1/100")
    page.fill(f"#{pre}-vocab", "1")               # the server's error, at the field
    page.locator(".fam-err:not([hidden])", has_text="vocab").wait_for()
    assert page.get_attribute(f"#{pre}-vocab", "aria-invalid") == "true"
    page.fill(f"#{pre}-vocab", "4")
    for k, ask in enumerate(("H[2,3]", "probs[1,*]", "loss")):
        row(page, k).locator('[data-q="ask"]').fill(ask)
    page.fill("#q-seed", "31")
    page.fill("#q-count", "2")
    ready(page)
    spec = page.evaluate("quizSpec()")
    assert spec["family"] == {"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3], "mask": "causal",
                              "block": "pre-ln", "positional": "sinusoidal", "d_ff": 3, "vocab": 4, "eps": "1/100"}
    manifest = same_quiz_as_the_cli(page, spec, tmp_path)
    assert manifest["variants"][0]["problem"]["block"] == "pre-ln"
    # loaded back, the fields say the same family
    page.evaluate("fillQuiz(quizSpec())")
    pre = page.locator("#q-parts > fieldset.qpart").get_attribute("data-pre")
    assert page.input_value(f"#{pre}-block") == "pre-ln" and page.input_value(f"#{pre}-eps") == "1/100"
    assert page.evaluate("quizSpec()")["family"] == spec["family"]
    assert page.errors == []
    page.context.close()


@pytest.mark.skipif(not AXE.is_file() and not os.environ.get("CI"), reason="axe-core is not installed: npm ci --prefix tests")
@pytest.mark.parametrize("width,height", WIDTHS)
def test_axe_finds_no_violation_in_the_teacher_view_with_a_block_drawn(browser, server, width, height):
    page = teacher(browser, server, width, height)
    page.set_default_timeout(120000)
    page.select_option("#r-block", "post-ln")
    page.fill("#r-vocab", "4")
    page.check("#r-train")
    page.click("#draw")
    page.locator("#teacher-status", has_text="Drew").wait_for()
    pre = page.locator("#q-parts > fieldset.qpart").get_attribute("data-pre")
    page.select_option(f"#{pre}-block", "post-ln")
    page.fill(f"#{pre}-vocab", "1")
    page.locator(".fam-err:not([hidden])").wait_for()
    assert _axe(page) == [], "the teacher view with a block drawn and a block family's error"
    if SHOTS:
        page.locator("#random-form").screenshot(path=str(SHOTS / f"random-block-{width}.png"))
        page.locator("#q-parts > fieldset.qpart").first.screenshot(path=str(SHOTS / f"builder-block-{width}.png"))
    assert page.errors == []
    page.context.close()


def test_a_loaded_block_the_selects_do_not_offer_is_refused_by_name(browser, server):
    page = teacher(browser, server)
    page.evaluate("""fillQuiz({title: "q", family: {tokens: 3, block: "post-LN"}, questions: [{ask: "H[1,1]"}]})""")
    page.locator(".fam-err:not([hidden])", has_text="post-ln").wait_for()
    assert page.evaluate("quizSpec()")["family"]["block"] == "post-LN"
    assert page.errors == []
    page.context.close()
