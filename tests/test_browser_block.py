"""A whole Transformer block on the web page (issue 27), in Chromium: the problem with its block inputs, a grid
for every matrix from P to the loss, and a check that marks a slip in U wrong and the entries worked from it as
following from it."""
from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import PROBLEMS, _Server, browser, fill, server  # noqa: E402,F401  (the fixtures)
from test_browser_student import check, new_page  # noqa: E402

from worked.problem import load  # noqa: E402
from worked.solver import solve  # noqa: E402

BLOCK = PROBLEMS / "block-post-ln.toml"


def _open(browser, server, path):
    """The problem *path* solved, and the page showing it, with a grid for every matrix (P, head1.Q … the loss, and
    with [train] every gradient, update and the loss after; a head's block of dconcat is dconcat's columns)."""
    sol = solve(load(path))
    page = new_page(browser)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    page.select_option("#problem-select", path.stem)
    page.locator("#a-P-0-0").wait_for()
    for key in sol.matrices():
        if not key.endswith(".dZ"):
            assert page.locator(f'fieldset[data-key="{key}"]').count() == 1, key
    return sol, page


def _slip_and_follow(page, sol, key, at, then, then_at, worked):
    """Every entry of *key* and *then* right but *key*[at] one too large and *then*[then_at] worked from the slip
    (``worked(answers)``); checked: the slip is marked wrong, 1 wrong in *key*; returns *then*[then_at]'s mark."""
    answers = {k: [[sol[k].dec_plain(i, j, 2) for j in range(sol[k].shape[1])] for i in range(sol[k].shape[0])]
               for k in (key, then)}
    answers[key][at[0]][at[1]] = f"{sol[key].value(*at) + 1:.2f}"
    answers[then][then_at[0]][then_at[1]] = f"{worked(answers):.2f}"
    fill(page, answers)
    check(page)
    mark = lambda k, ij: page.locator(f"#a-{k}-{ij[0]}-{ij[1]}").locator("xpath=ancestor::td").locator(".mark")  # noqa: E731
    assert mark(key, at).text_content() == "✗"
    assert "1 wrong" in page.locator(f'fieldset[data-key="{key}"] .verdict').inner_text()
    assert page.errors == []
    return mark(then, then_at).text_content()


def test_a_block_is_shown_and_checked(browser, server):
    sol, page = _open(browser, server, BLOCK)
    inputs = page.locator("#problem-inputs").inner_text()
    assert "the feed-forward's first layer" in inputs and "the output layer" in inputs and "rows: \n" not in inputs
    # a slip in U, and G's entry worked from it
    assert _slip_and_follow(page, sol, "U", (2, 0), "G", (2, 0), lambda a: max(float(a["U"][2][0]), 0)) != "✓"
    page.context.close()


def test_a_blocks_training_step_is_shown_and_checked(browser, server):
    """The block with [train]: a grid for every gradient, update and the loss after; a slip in dU is marked wrong
    and db_1 (its column sums) worked from the student's own dU is not marked plain wrong."""
    sol, page = _open(browser, server, PROBLEMS / "block-train.toml")
    assert _slip_and_follow(page, sol, "dU", (0, 0), "db_1", (0, 0),
                            lambda a: sum(float(a["dU"][i][0]) for i in range(3))) != "✗"
    page.context.close()
