"""Issue 15's items of the web page in Chromium, at desktop and phone widths: bracketed MathML matrices, titles
in the problem list, the teacher knobs the README names, a large key preview, a quiz variant opened by its code
(its questions, checked with their tolerances and points), and the HTML sheets without sideways scrolling."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import PART9, _Server, browser, server  # noqa: E402,F401  (the fixtures)

from worked.problem import load  # noqa: E402

WIDTHS = [(1200, 900), (390, 844)]


def new_page(browser, width, height):
    pg = browser.new_context(viewport={"width": width, "height": height}).new_page()
    pg.set_default_timeout(60000)
    return pg


def scroll_width(page) -> int:
    return page.evaluate("document.documentElement.scrollWidth")


@pytest.mark.parametrize("width,height", WIDTHS)
def test_student_page_matrices_titles_and_width(browser, server, width, height):
    page = new_page(browser, width, height)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    options = page.locator("#problem-select option").all_text_contents()
    assert "cats chase mice" in options and not any("(cats-chase-mice)" in o or "causal-mask" in o for o in options), options
    page.select_option("#problem-select", "cats-chase-mice")
    page.locator("#problem-title", has_text="cats chase mice").wait_for()
    # X, W_Q, W_K, W_V as bracketed matrices: an <mtable> between [ and ], not a table of boxes
    tables = page.locator("#problem-inputs .bracketed math mtable")
    assert tables.count() == 4
    assert page.locator("#problem-inputs table.m").count() == 0
    box = page.locator("#problem-inputs .bracketed math").first.bounding_box()
    assert box["height"] > 40          # three rows tall: the brackets stretch
    assert scroll_width(page) <= width
    page.context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_teacher_knobs_and_key_preview(browser, server, width, height):
    page = new_page(browser, width, height)
    page.goto(server.url)
    page.click("#tab-teacher")
    for knob in ("r-wlo", "r-whi", "r-max_weight", "r-min_weight", "r-max_score", "r-ties"):
        assert page.locator("#" + knob).count() == 1, knob
    page.fill("#r-wlo", "0")
    page.fill("#r-whi", "1")
    page.check("#r-ties")
    page.fill("#r-seed", "3")
    page.click("#draw")
    page.locator("#teacher-status", has_text="Drew").wait_for()
    from worked import generate

    want = generate.generate(generate.Family.from_dict({
        "tokens": 3, "d_model": 4, "d_k": 2, "heads": 1, "range": [-2, 3], "weight_range": [0, 1], "mask": "none",
        "scale": "sqrt", "decimals": 2, "max_weight": 0.9, "max_score": 5, "ties": True}), 3).to_dict()
    got = [[page.input_value(f"#t-h1_W_Q-{i}-{j}") for j in range(2)] for i in range(4)]
    assert got == [[str(x) for x in row] for row in want["W_Q"]]
    assert {x for row in got for x in row} <= {"0", "1"}      # the weight range 0..1
    page.click("#preview-key")
    frame = page.locator("#key-preview")
    frame.wait_for(state="visible")
    box = frame.bounding_box()
    assert box["width"] >= 0.85 * min(width, 1000) and box["height"] >= 0.7 * height
    assert scroll_width(page) <= width
    page.context.close()


def test_variant_code_in_the_address_shows_its_questions_and_points(browser, tmp_path):
    quiz = tmp_path / "quiz"
    quiz.mkdir()
    manifest = {"format": "worked-quiz-manifest", "version": 1, "title": "Attention quiz", "variants": [
        {"variant": "K3F9AB", "problem": load(PART9).to_dict(), "questions": [
            {"name": "q1", "ask": "weights[1,2]", "points": 2.0, "tolerance": {"abs": 0.02, "rel": 0.0}},
            {"name": "q2", "ask": "Z[2,*]", "points": 3.0}]}]}
    (quiz / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    import worked.server.app as app_mod

    s = _Server.__new__(_Server)
    import threading
    import time

    import uvicorn

    from test_browser_serve import _free_port

    s.port = _free_port()
    s.server = uvicorn.Server(uvicorn.Config(app_mod.create_app(app_mod.Config(problems_dir=quiz)), host="127.0.0.1",
                                             port=s.port, log_level="warning"))
    s.thread = threading.Thread(target=s.server.run, daemon=True)
    s.thread.start()
    while not s.server.started:
        time.sleep(0.05)
    try:
        page = new_page(browser, 1200, 900)
        page.goto(f"http://127.0.0.1:{s.port}/?code=k3f9ab")
        page.locator("#problem-title", has_text="variant K3F9AB").wait_for()
        qs = page.locator("#problem-facts ol.questions li").all_text_contents()
        assert qs == ["q1: weights[1,2] (2 pts; ±0.02)", "q2: Z[2,*] (3 pts; rounding to 2 places)"]
        page.fill("#a-weights-0-1", "0.68")      # within q1's ±0.02 of 0.665, outside the rounding band
        page.fill("#a-Z-1-0", "1.00")
        page.fill("#a-Z-1-1", "1.33")
        page.click("#check-btn")
        page.locator("#summary .score").wait_for()
        assert page.locator("#summary .score").text_content() == "Points: 5 of 5"
        assert page.locator("#a-weights-0-1 + .mark").text_content() == "✓"
    finally:
        s.stop()


@pytest.mark.parametrize("document", ["worksheet", "answer-key"])
def test_html_sheets_do_not_scroll_sideways_on_a_phone(browser, document):
    from worked import render
    from worked.solver import solve

    for name in ("cats-chase-mice", "two-heads", "four-tokens-fractions"):
        sol = solve(load(PART9.parent / f"{name}.toml"))
        html = (render.worksheet_html if document == "worksheet" else render.answer_key_html)(sol)
        page = new_page(browser, 390, 844)
        page.set_content(html)
        assert scroll_width(page) <= 390, name
        page.context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_brackets_around_radicals_stretch_whole_in_the_html_key(browser, width, height):
    """In the key, a bracket around √2 or 3√2/2 is one stretched bracket as tall as what it holds, and nothing
    clips its ends (a clipped top or bottom is what makes [ ] look like the floor signs ⌊ ⌋)."""
    from worked import render
    from worked.solver import solve

    page = new_page(browser, width, height)
    page.set_content(render.answer_key_html(solve(load(PART9))))
    boxes = page.evaluate("""() => {
        const out = [];
        for (const open of document.querySelectorAll('mo')) {
            if (open.textContent !== '[') continue;
            const inside = [];
            let e = open.nextElementSibling;
            while (e && e.textContent !== ']') { inside.push(e); e = e.nextElementSibling; }
            if (!e || !inside.some(x => x.matches('msqrt') || x.querySelector('msqrt'))) continue;
            const need = Math.max(...inside.map(x => x.getBoundingClientRect().height));
            let clip = open.closest('math').parentElement;
            while (clip && getComputedStyle(clip).overflowY === 'visible') clip = clip.parentElement;
            const c = clip.getBoundingClientRect();
            for (const o of [open, e]) {
                const r = o.getBoundingClientRect();
                out.push({h: r.height, need, top: r.top - c.top, bottom: c.bottom - r.bottom});
            }
        }
        return out;
    }""")
    assert len(boxes) >= 4
    for b in boxes:
        assert b["h"] >= 0.95 * b["need"], b
        assert b["top"] >= -0.5 and b["bottom"] >= -0.5, b
    page.context.close()


def test_a_chain_of_blocks_shows_and_checks(browser, server):
    """problems/decoder-layer.toml ([[blocks]]): the inputs (X, X_enc and each block's weights, noted by block), a
    grid per block's matrix, and a check that names the no-scaling mistake planted in block 2 and marks what
    follows it as carried forward."""
    import numpy as np

    from worked.solver import solve

    page = new_page(browser, 1200, 900)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    page.select_option("#problem-select", "decoder-layer")
    page.locator("#problem-title", has_text="decoder layer").wait_for()
    assert page.locator("#problem-inputs .bracketed math mtable").count() == 8
    assert "block 2" in page.locator("#problem-inputs").inner_text()
    sol = solve(load(Path(__file__).resolve().parents[1] / "problems" / "decoder-layer.toml"))
    mats = sol.matrices()
    answers = {k: [["-inf" if m.is_neg_inf(i, j) else m.dec_plain(i, j, 2) for j in range(m.shape[1])]
                   for i in range(m.shape[0])] for k, m in mats.items() if k != "Z"}
    S = mats["block2.scores"].to_numpy()             # block 2 without the scaling: the weights and Z from there
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    answers["block2.scaled"] = [[f"{x:.2f}" for x in r] for r in S]
    answers["block2.weights"] = [[f"{x:.2f}" for x in r] for r in A]
    answers["block2.Z"] = [[f"{x:.2f}" for x in r] for r in A @ mats["block2.V"].to_numpy()]
    assert all(page.locator(f'fieldset[data-key="{k}"]').count() == 1 for k in answers)
    for key, rows in answers.items():
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                page.fill(f"#a-{key.replace('.', '_')}-{i}-{j}", v)
    page.click("#check-btn")
    page.locator("#feedback").wait_for(state="visible")
    differ = sum(f"{x:.2f}" != f"{x / np.sqrt(2):.2f}" for x in S.flat)     # a score of 0 is 0 scaled too
    assert page.locator('fieldset[data-key="block2.scaled"] td.bad').count() == differ == 8
    assert page.locator('fieldset[data-key="block1.Z"] td.ok').count() == 6
    assert page.locator('fieldset[data-key="block2.weights"] td.ecf').count() > 0
    diag = page.locator(".diag", has_text="no-scaling")
    assert diag.count() == 1 and "Step 12" in diag.inner_text()
    scaled = page.locator('fieldset[data-key="block2.scaled"]')      # block 2's own worked step, not block 1's
    scaled.locator("summary", has_text="Show the worked step").click()
    step = scaled.locator("details.step .s")
    assert "Scaling" in step.inner_text() and "le" in step.inner_text() and "1.4142" in step.inner_text()
    page.context.close()
