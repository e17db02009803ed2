"""Accessibility of the web page and the HTML sheets, in Debian's Chromium: axe-core (npm, pinned in
tests/package.json, installed by .ci/run into the git-ignored tests/node_modules) finds no WCAG 2.1 A/AA
violation on the student page (a problem open and checked), the teacher page, a worksheet and a key; the page
works with the keyboard alone; every verdict has a text label, not only a colour.

Skipped where Chromium, playwright or axe-core is missing on a developer's machine; in CI (CI=true) a missing
axe-core fails.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import browser, fill, no_scaling_answers, server  # noqa: E402,F401  (the fixtures)

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
if not AXE.is_file() and not os.environ.get("CI"):
    pytest.skip("axe-core is not installed: npm ci --prefix tests (.ci/run does)", allow_module_level=True)

WCAG21AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
WIDTHS = [(1200, 900), (390, 844)]


def new_page(browser, width=1200, height=900):
    # the page's Content-Security-Policy allows only its own scripts: the test injects axe-core past it
    ctx = browser.new_context(viewport={"width": width, "height": height}, bypass_csp=True)
    pg = ctx.new_page()
    pg.set_default_timeout(60000)
    return pg


def violations(page) -> list[str]:
    """axe-core's WCAG 2.1 A/AA violations on the page as it is now: "rule: target (summary)"."""
    page.add_script_tag(path=str(AXE))
    result = page.evaluate("(tags) => axe.run(document, {runOnly: {type: 'tag', values: tags}})", WCAG21AA)
    assert len(result["passes"]) >= 5, "axe-core ran hardly any rule"
    out = []
    for v in result["violations"]:
        for node in v["nodes"]:
            out.append(f"{v['id']}: {' '.join(node['target'])} ({node.get('failureSummary', '')[:160]})")
    return out


def open_part9(page, server):
    page.goto(server.url)
    page.select_option("#problem-select", "cats-chase-mice")
    page.locator("#problem-title", has_text="cats chase mice").wait_for()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_student_page_has_no_wcag_violations(browser, server, width, height):
    page = new_page(browser, width, height)
    open_part9(page, server)
    assert violations(page) == []
    fill(page, no_scaling_answers())
    page.click("#check-btn")
    page.locator("#feedback").wait_for(state="visible")
    page.locator("#answer-grids .diag").first.wait_for()     # the diagnosis is shown at its grid
    assert violations(page) == []
    page.context.close()


@pytest.mark.parametrize("width,height", WIDTHS)
def test_teacher_page_has_no_wcag_violations(browser, server, width, height):
    page = new_page(browser, width, height)
    page.goto(server.url + "#teacher")
    page.locator("#teacher").wait_for(state="visible")
    page.click("#preview-key")
    page.locator("#key-preview").wait_for(state="visible")
    assert violations(page) == []
    page.context.close()


@pytest.mark.parametrize("document", ["worksheet", "answer-key"])
def test_sheets_have_no_wcag_violations(browser, document):
    from worked import render
    from worked.problem import load
    from worked.solver import solve

    sol = solve(load(Path(__file__).resolve().parents[1] / "problems" / "cats-chase-mice.toml"))
    html = (render.worksheet_html if document == "worksheet" else render.answer_key_html)(sol)
    for width, height in WIDTHS:
        page = new_page(browser, width, height)
        page.set_content(html)
        page.locator("h1").wait_for()
        assert violations(page) == []
        page.context.close()
    page.context.close()


def test_keyboard_alone_opens_a_problem_checks_and_reads_the_verdicts(browser, server):
    """No mouse: Tab to the problem list, choose with the arrow keys, Tab into the grids, type, Enter checks;
    focus moves on in reading order and every verdict has a text label (not a colour only)."""
    page = new_page(browser)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    for _ in range(10):          # skip link, tabs, … until the problem list has the focus
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "problem-select":
            break
    assert page.evaluate("document.activeElement.id") == "problem-select"
    # the first problem whose title starts "cats" (type-ahead; Chromium changes a closed select as it types): Part 9's
    # (the folder's files sort by name, and a Transformer block's come first)
    page.keyboard.type("cats")
    page.locator("#problem-card").wait_for(state="visible")
    page.locator("#a-Q-0-0").wait_for()
    while page.evaluate("document.activeElement.id") != "a-Q-0-0":
        page.keyboard.press("Tab")
    answers = no_scaling_answers()
    order = [(k, i, j) for k, rows in answers.items() for i, row in enumerate(rows) for j, _ in enumerate(row)]
    title = page.locator("#problem-title").text_content()
    assert "cats chase mice" in title, "typing 'cats' chose Part 9"
    for key, i, j in order[:6]:          # Q and K's first row, typed cell by cell with Tab between
        assert page.evaluate("document.activeElement.id") == f"a-{key}-{i}-{j}"
        page.keyboard.type(answers[key][i][j])
        page.keyboard.press("Tab")
    page.locator("#a-Q-0-0").focus()
    page.keyboard.press("Enter")          # Enter in a cell checks
    page.locator("#feedback").wait_for(state="visible")
    labels = page.evaluate("""() => [...document.querySelectorAll('#answer-grids td')].filter(td => td.querySelector('.mark') && td.querySelector('.mark').textContent)
        .map(td => [td.querySelector('.mark').textContent, td.querySelector('.visually-hidden').textContent])""")
    assert len(labels) == 6
    for mark, text in labels:
        assert {"✓": "correct", "✗": "wrong", "↪": "wrong, but right from your own earlier answers"}[mark] == text
    page.context.close()
