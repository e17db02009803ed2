"""The page of ``worked serve`` in a real browser: Playwright driving Debian's Chromium.

Skipped, with the reason, where ``/usr/bin/chromium`` or the ``playwright`` package is missing
(``.ci/run`` installs Chromium). Playwright's own browser downloads are never used.
"""
from __future__ import annotations

import io
import math
import socket
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from worked import printers  # noqa: E402
from worked.problem import load  # noqa: E402
from worked.solver import solve  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "problems"
PART9 = PROBLEMS / "cats-chase-mice.toml"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """uvicorn running the app in a thread on a free loopback port."""

    def __init__(self, problems_dir: Path = PROBLEMS, **cfg):
        import uvicorn

        from worked.server.app import Config, create_app

        self.port = _free_port()
        app = create_app(Config(problems_dir=problems_dir, **cfg))
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started:
            if time.time() > deadline:
                raise RuntimeError("the test server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{self.port}/"

    def stop(self):
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="module")
def server():
    s = _Server()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def browser():
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser, server):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.on("requestfailed", lambda r: errors.append("request failed: " + r.url))
    outside: list[str] = []
    pg.on("request", lambda r: None if r.url.startswith((server.url, "data:", "blob:", "about:")) else outside.append(r.url))
    pg.set_default_timeout(60000)
    pg.goto(server.url)
    yield pg
    assert not errors, errors
    assert not outside, f"requests left the machine: {outside}"
    ctx.close()


def no_scaling_answers() -> dict[str, list[list[str]]]:
    """Part 9 answers with one deliberate mistake: the scores are not divided by √d_k. Q…scores are right;
    the weights and Z are computed correctly from the unscaled scores (so they follow from the slip)."""
    sol = solve(load(PART9))
    mats = sol.matrices()
    d = sol.decimals
    ans = {k: [[printers.text(mats[k].cell(i, j, d)) for j in range(mats[k].shape[1])] for i in range(mats[k].shape[0])]
           for k in ("Q", "K", "V", "scores")}
    scores = [[mats["scores"].value(i, j) for j in range(3)] for i in range(3)]
    ans["scaled"] = [row[:] for row in ans["scores"]]
    weights = [[math.exp(x) / sum(math.exp(y) for y in row) for x in row] for row in scores]
    ans["weights"] = [[f"{w:.{d}f}" for w in row] for row in weights]
    V = [[mats["V"].value(i, j) for j in range(2)] for i in range(3)]
    ans["Z"] = [[f"{sum(weights[i][k] * V[k][j] for k in range(3)):.{d}f}" for j in range(2)] for i in range(3)]
    return ans


def fill(page, answers):
    for key, rows in answers.items():
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                page.fill(f"#a-{key}-{i}-{j}", str(v))


def test_student_checks_part9_with_a_no_scaling_mistake(page):
    """Pick Part 9, type answers with the no-scaling mistake, check: the scaled cells are ✗, the later
    ones are marked as following from the slip, the diagnosis names no-scaling, the worked step for the
    wrong matrix opens, and exact forms like 2√2 are then accepted."""
    page.select_option("#problem-select", "cats-chase-mice")
    page.locator("#problem-title", has_text="cats chase mice").wait_for()
    assert page.locator("#problem-inputs math").count() >= 4  # X, W_Q, W_K, W_V labels in MathML
    # accessible labels and tab order: Tab from the first cell of Q goes to the next cell of the row
    first = page.get_by_label("Queries Q, row cats, column 1")
    first.focus()
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "a-Q-0-1"

    fill(page, no_scaling_answers())
    page.click("#check-btn")
    page.locator("#feedback").wait_for(state="visible")
    scaled = page.locator('fieldset[data-key="scaled"]')
    assert scaled.locator("td.bad").count() == 9
    assert scaled.locator(".mark", has_text="✗").count() == 9
    for key in ("Q", "K", "V", "scores"):
        assert page.locator(f'fieldset[data-key="{key}"] td.ok').count() == page.locator(
            f'fieldset[data-key="{key}"] input').count()
    assert page.locator('fieldset[data-key="weights"] td.ecf').count() > 0  # ↪ follows from the slip
    diag = page.locator(".diag", has_text="no-scaling")
    assert diag.count() == 1
    assert "Step 5" in diag.inner_text()     # √d_k = √2, set as math (its alt text read aloud)
    assert "square root of d k" in diag.locator(".msg math").first.get_attribute("alttext")
    cell = page.get_by_label("Scaled scores, row cats, column chase")
    assert cell.get_attribute("aria-invalid") == "true"
    # the worked step for the wrong matrix
    scaled.locator("summary", has_text="Show the worked step").click()
    step = scaled.locator("details.step .s")
    assert "Scaling" in step.inner_text() and step.locator("math").count() >= 2
    # the exact matrix comes first, headed "scaled =", then the rounded one headed "scaled ≈", in MathML the
    # browser lays out (with its spoken alt text)
    heads = step.locator("figure.mat figcaption math")
    assert heads.count() == 2 and heads.first.get_attribute("alttext") == "scaled equals"
    assert step.locator("figure.mat").first.locator("td msqrt").count() == 9
    head = heads.last
    assert head.get_attribute("alttext") == "scaled is about"
    assert "≈" in head.text_content() and "=" not in head.text_content()
    # the grid heading scaled = scores/√d_k is laid out as a stacked fraction, taller than a letter
    frac = scaled.locator("legend math mfrac").bounding_box()
    letter = scaled.locator("legend math > mrow > mi").first.bounding_box()
    assert frac and letter and frac["height"] > 1.5 * letter["height"]
    # exact forms: fix the first row with √2, 2√2, sqrt(2)
    for j, v in enumerate(["√2", "2√2", "sqrt(2)"]):
        page.fill(f"#a-scaled-0-{j}", v)
    page.click("#check-btn")
    page.locator('fieldset[data-key="scaled"] tbody tr:first-child td.ok').nth(2).wait_for()
    assert page.locator('fieldset[data-key="scaled"] tbody tr:first-child td.ok').count() == 3
    # then the whole solution
    page.click("#show-solution")
    page.locator("#solution").wait_for(state="visible")
    assert page.locator("#solution .s").count() == len(solve(load(PART9)).steps)


def test_teacher_downloads_the_pdf_key_with_the_right_title(page):
    """In the teacher view (which starts from Part 9), the answer-key PDF downloads as a real PDF whose
    title is the problem's."""
    from pypdf import PdfReader

    page.click("#tab-teacher")
    with page.expect_download() as dl:
        page.click('#teacher-downloads button[data-doc="answer-key"][data-fmt="pdf"]')
    d = dl.value
    assert d.suggested_filename == "cats-chase-mice-answer-key.pdf"
    data = Path(d.path()).read_bytes()
    assert data.startswith(b"%PDF")
    reader = PdfReader(io.BytesIO(data))
    assert reader.metadata.title.startswith(load(PART9).title)
    assert "Answer key" in reader.metadata.title


def test_teacher_builds_a_problem_and_gets_its_key(page):
    """Enter a new problem in the teacher grids, preview its worked key, and download the key as HTML."""
    page.click("#tab-teacher")
    page.fill("#t-title", "sun and rain")
    page.fill("#t-tokens", "sun rain")
    page.fill("#t-dmodel", "2")
    page.fill("#t-dk", "2")
    page.fill("#t-dv", "1")
    page.fill("#t-heads", "1")
    page.click("#make-grids")
    values = {"X": [[1, 2], [0, 1]], "h1.W_Q": [[1, 0], [0, 1]], "h1.W_K": [[0, 1], [1, 0]], "h1.W_V": [["1/2"], [1]]}
    for key, rows in values.items():
        for i, row in enumerate(rows):
            for j, v in enumerate(row):
                page.fill(f"#t-{key.replace('.', '_')}-{i}-{j}", str(v))
    page.click("#preview-key")
    frame = page.frame_locator("#key-preview")
    frame.locator("h1", has_text="sun and rain").wait_for()
    assert frame.locator("math").count() > 5
    with page.expect_download() as dl:
        page.click('#teacher-downloads button[data-doc="answer-key"][data-fmt="html"]')
    html = Path(dl.value.path()).read_text(encoding="utf-8")
    assert dl.value.suggested_filename == "sun-and-rain-answer-key.html"
    assert "sun and rain" in html
    # and the same problem can be tried as a student
    page.click("#try-student")
    page.locator("#problem-title", has_text="sun and rain").wait_for()
    assert page.locator('fieldset[data-key="V"] input').count() == 2


def test_teacher_draws_a_random_problem_with_a_seed(page):
    """The random knobs and seed fill the grids with the generator's problem."""
    from worked import generate

    page.click("#tab-teacher")
    page.fill("#r-seed", "11")
    page.click("#draw")
    page.locator("#teacher-status", has_text="Drew").wait_for()
    want = generate.generate(generate.Family.from_dict({"tokens": 3, "d_model": 4, "d_k": 2, "heads": 1,
                                                        "range": [-2, 3], "mask": "none", "scale": "sqrt",
                                                        "decimals": 2}), 11).to_dict()
    got = [[page.input_value(f"#t-X-{i}-{j}") for j in range(4)] for i in range(3)]
    assert got == [[str(x) for x in row] for row in want["X"]]


def test_text_is_escaped_on_the_page(page):
    """A title and tokens with markup are shown as text: no element is made from them."""
    page.click("#tab-teacher")
    page.fill("#t-title", '<img src=x onerror="document.title=1">')
    page.fill("#t-tokens", "<b>cats</b> chase mice")
    page.click("#make-grids")
    page.click("#try-student")
    page.locator("#problem-title", has_text="<img").wait_for()
    assert page.locator("#problem-card img").count() == 0
    assert page.locator("#problem-card b, #answer-grids b").count() == 0
    assert page.locator("#answer-grids th", has_text="<b>cats</b>").count() >= 1


def test_phone_sized_window_has_no_sideways_scrolling(browser, server):
    """On a 390-px-wide window the page itself never scrolls sideways (wide grids scroll inside their
    box), and every answer cell has a label."""
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    pg = ctx.new_page()
    pg.goto(server.url)
    pg.select_option("#problem-select", "four-tokens-fractions")
    pg.locator("#answer-grids input").first.wait_for()
    assert pg.evaluate("document.documentElement.scrollWidth") <= 390
    pg.fill("#a-Q-0-0", "1/2")
    pg.fill("#a-scores-0-1", "7")
    pg.click("#check-btn")
    pg.locator("#feedback").wait_for(state="visible")
    pg.locator('fieldset[data-key="scores"] summary').click()  # the worked step, with its long equations
    assert pg.evaluate("document.documentElement.scrollWidth") <= 390
    inputs = pg.locator("#answer-grids input")
    assert inputs.count() > 0
    assert all(inputs.nth(k).get_attribute("aria-label") for k in range(inputs.count()))
    pg.click("#tab-teacher")
    assert pg.evaluate("document.documentElement.scrollWidth") <= 390
    ctx.close()


def test_no_solutions_page_shows_verdicts_but_no_solution(browser):
    """With --no-solutions the page has no teacher view and no solution button, and checking still works."""
    s = _Server(no_solutions=True)
    try:
        ctx = browser.new_context()
        pg = ctx.new_page()
        pg.goto(s.url)
        pg.select_option("#problem-select", "cats-chase-mice")
        pg.locator("#answer-grids input").first.wait_for()
        assert pg.locator("#tab-teacher").is_hidden()
        pg.fill("#a-Q-0-0", "5")
        pg.click("#check-btn")
        pg.locator("#feedback").wait_for(state="visible")
        assert pg.locator('fieldset[data-key="Q"] td.bad').count() == 1
        assert pg.locator("#show-solution").is_hidden()
        assert pg.locator("details.step").count() == 0
        ctx.close()
    finally:
        s.stop()
