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


def test_a_block_is_shown_and_checked(browser, server):
    sol = solve(load(BLOCK))
    page = new_page(browser)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    page.select_option("#problem-select", "block-post-ln")
    page.locator("#a-P-0-0").wait_for()
    for key in sol.matrices():          # a grid for every matrix, head1.Q … loss
        assert page.locator(f'fieldset[data-key="{key}"]').count() == 1, key
    inputs = page.locator("#problem-inputs").inner_text()
    assert "the feed-forward's first layer" in inputs and "the output layer" in inputs and "rows: \n" not in inputs
    answers = {k: [[sol[k].dec_plain(i, j, 2) for j in range(sol[k].shape[1])] for i in range(sol[k].shape[0])]
               for k in ("U", "G")}
    u = sol["U"].value(2, 0)
    answers["U"][2][0] = f"{u + 1:.2f}"                 # a slip, and G's entry worked from it
    answers["G"][2][0] = f"{max(u + 1, 0):.2f}"
    fill(page, answers)
    check(page)
    u_td = page.locator("#a-U-2-0").locator("xpath=ancestor::td")
    g_td = page.locator("#a-G-2-0").locator("xpath=ancestor::td")
    assert u_td.locator(".mark").text_content() == "✗"
    assert "1 wrong" in page.locator('fieldset[data-key="U"] .verdict').inner_text()
    assert g_td.locator(".mark").text_content() != "✓"
    assert page.errors == []
    page.context.close()


def test_a_blocks_training_step_is_shown_and_checked(browser, server):
    """The block with [train]: a grid for every gradient, update and the loss after; a slip in dU is marked wrong
    and db_1 (its column sums) worked from the student's own dU is not marked plain wrong."""
    sol = solve(load(PROBLEMS / "block-train.toml"))
    page = new_page(browser)
    page.goto(server.url)
    page.locator("#problem-select option").nth(1).wait_for(state="attached")
    page.select_option("#problem-select", "block-train")
    page.locator("#a-dW_1-0-0").wait_for()
    for key in sol.matrices():          # a grid for every matrix, P … dlogits … dW_1 … W_1_new … loss_after
        if not key.endswith(".dZ"):     # (a head's block of dconcat is no grid of its own: dconcat's columns)
            assert page.locator(f'fieldset[data-key="{key}"]').count() == 1, key
    answers = {k: [[sol[k].dec_plain(i, j, 2) for j in range(sol[k].shape[1])] for i in range(sol[k].shape[0])]
               for k in ("dU", "db_1")}
    du = sol["dU"].value(0, 0)
    answers["dU"][0][0] = f"{du + 1:.2f}"               # a slip, and db_1's entry worked from it
    answers["db_1"][0][0] = f"{sum(float(answers['dU'][i][0]) for i in range(3)):.2f}"
    fill(page, answers)
    check(page)
    assert page.locator("#a-dU-0-0").locator("xpath=ancestor::td").locator(".mark").text_content() == "✗"
    assert "1 wrong" in page.locator('fieldset[data-key="dU"] .verdict').inner_text()
    assert page.locator("#a-db_1-0-0").locator("xpath=ancestor::td").locator(".mark").text_content() != "✗"
    assert page.errors == []
    page.context.close()
