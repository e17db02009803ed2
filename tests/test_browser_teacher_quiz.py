"""Issue 29: the teacher's quiz builder on the page makes what `worked quiz` makes: one zip whose manifest.json
is byte-identical to the command's for the same spec and seed (and a roster gives one variant per student)."""
from __future__ import annotations

import io
import tomllib
import zipfile
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's Chromium (/usr/bin/chromium) is not installed; .ci/run installs it", allow_module_level=True)
playwright_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")

from test_browser_serve import browser, server  # noqa: E402,F401

from conftest import run_cli  # noqa: E402

SPEC = Path(__file__).resolve().parents[1] / "problems" / "quiz-1.toml"


def _zip_from_page(browser, server, *, seed, count=None, roster=None, tmp_path=None):
    ctx = browser.new_context(viewport={"width": 1200, "height": 900}, accept_downloads=True)
    page = ctx.new_page()
    page.set_default_timeout(120000)
    page.goto(server.url + "#teacher")
    page.locator("#q-load option").nth(1).wait_for(state="attached")
    page.select_option("#q-load", "quiz-1")           # the form holds the shipped spec, table for table
    page.locator("#quiz-status", has_text="Loaded the spec quiz-1").wait_for()
    page.fill("#q-seed", str(seed))
    page.fill("#q-count", "" if count is None else str(count))
    if roster is not None:
        page.set_input_files("#q-roster", str(roster))
    for fmt in ("moodle", "qti"):            # html and gift stay checked
        page.uncheck(f'input[name="q-fmt"][value="{fmt}"]')
    with page.expect_download() as dl:
        page.click("#make-quiz")
    data = Path(dl.value.path()).read_bytes()
    assert dl.value.suggested_filename == "quiz.zip"
    page.locator("#quiz-status", has_text="downloaded").wait_for()
    ctx.close()
    return zipfile.ZipFile(io.BytesIO(data))


def test_the_quiz_zip_holds_the_manifest_worked_quiz_writes(browser, server, tmp_path):
    z = _zip_from_page(browser, server, seed=77, count=2)
    out = tmp_path / "cli"
    code, _, err = run_cli("quiz", str(SPEC), "-n", "2", "--seed", "77", "--format", "html,gift", "-o", str(out), "--quiet")
    assert code == 0, err
    assert z.read("manifest.json") == (out / "manifest.json").read_bytes()
    assert z.read("manifest.csv") == (out / "manifest.csv").read_bytes()
    names = set(z.namelist())
    cli = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and not p.name.startswith(".worked")}
    assert names == cli
    assert any(n.endswith("answer-key.html") for n in names) and "quiz.gift.txt" in names


def test_a_roster_gives_a_variant_per_student_and_errors_name_the_field(browser, server, tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\ns1,Ada Lovelace\ns2,Alan Turing\ns3,Grace Hopper\n", encoding="utf-8")
    z = _zip_from_page(browser, server, seed=5, roster=roster)
    import json

    manifest = json.loads(z.read("manifest.json"))
    assert [v["student"]["name"] for v in manifest["variants"]] == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    # a bad spec: a one-line error that names the spec's field, no temporary path
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(server.url + "#teacher")
    page.locator("#q-parts fieldset.qpart").wait_for()
    pre = page.locator("#q-parts fieldset.qpart").get_attribute("data-pre")
    page.fill(f"#{pre}-tokens", "1")
    page.click("#make-quiz")
    err = page.locator("#quiz-error")
    err.wait_for()
    text = err.inner_text()
    assert "tokens" in text and "/tmp" not in text and "worked-quiz-" not in text, text
    page.context.close()


def _preview(page) -> str:
    page.evaluate("document.getElementById('key-preview').removeAttribute('srcdoc')")
    page.click("#preview-key")
    page.locator("#teacher-status", has_text="The key is below").wait_for()
    return page.frame_locator("#key-preview").locator("body").inner_text()


def test_the_teacher_loads_shipped_problems_and_adds_a_training_step(browser, server):
    page = browser.new_context(viewport={"width": 1200, "height": 900}).new_page()
    page.set_default_timeout(60000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "#teacher")
    page.locator("#t-load option").nth(1).wait_for(state="attached")
    page.select_option("#t-load", "two-heads")
    page.locator("#teacher-status", has_text="Loaded").wait_for()
    assert page.locator('#teacher-grids fieldset[data-key="W_O"]').count() == 1
    assert page.input_value("#t-heads") == "2"
    page.select_option("#t-load", "cats-chase-mice-train")
    page.locator('#teacher-grids fieldset[data-key="T"]').wait_for()
    assert page.is_checked("#t-train") and page.input_value("#t-lr") in ("1/10", "0.1")
    assert "gradient" in _preview(page).lower()
    page.select_option("#t-load", "cross-attention")          # its encoder side is kept as loaded
    page.locator("#teacher-status", has_text="Loaded “").wait_for()
    assert not page.is_checked("#t-train")
    sent = page.evaluate("teacherProblem()")
    assert sent["attention"] == "cross" and sent["X_enc"] and sent["tokens_enc"]
    assert "cross" in _preview(page).lower()
    page.select_option("#t-load", "decoder-layer")            # a chain: used whole
    page.locator("#t-whole", has_text="chain of 2 blocks").wait_for()
    assert "block 2" in _preview(page).lower()
    # a plain problem with a training step added on the page
    page.select_option("#t-load", "cats-chase-mice")
    page.locator("#t-whole").wait_for(state="hidden")
    page.check("#t-train")
    page.locator('#teacher-grids fieldset[data-key="T"]').wait_for()
    for i in range(3):
        for j in range(2):
            page.fill(f"#t-T-{i}-{j}", str((i + j) % 2))
    assert "gradient" in _preview(page).lower()
    assert errors == []
    page.context.close()


def _random_form(browser, server):
    """The teacher view on a phone, its page errors, and a function that draws the random problem and returns it."""
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.set_default_timeout(120000)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(server.url + "#teacher")
    page.locator("#draw").wait_for()

    def draw():
        page.evaluate("document.getElementById('teacher-status').textContent = ''")
        page.click("#draw")
        page.locator("#teacher-status", has_text="Drew").wait_for()
        return page.evaluate("teacherProblem()")
    return page, errors, draw


def test_the_random_form_offers_cross_attention_chains_and_training(browser, server):
    from worked import generate

    page, _, draw = _random_form(browser, server)

    base = {"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3], "scale": "sqrt", "decimals": 2, "max_weight": 0.9,
            "max_score": 5, "ties": False}
    page.select_option("#r-attention", "cross")
    page.fill("#r-tokens_enc", "2")
    page.fill("#r-seed", "4")
    got = draw()
    want = generate.generate(generate.Family.from_dict({**base, "heads": 1, "attention": "cross", "tokens_enc": 2}), 4)
    assert got["attention"] == "cross" and got["X_enc"] == want.to_dict()["X_enc"]
    page.select_option("#r-attention", "self")
    page.fill("#r-tokens_enc", "")
    page.fill("#r-blocks", "self-causal, cross")
    got = draw()
    want = generate.generate(generate.Family.from_dict({**base, "blocks": ["self-causal", "cross"]}), 4).to_dict()
    assert got["blocks"] == want["blocks"] and got["X"] == want["X"]
    assert page.locator("#t-whole", has_text="chain of 2 blocks").is_visible()
    page.fill("#r-blocks", "")
    page.check("#r-train")
    got = draw()
    want = generate.generate(generate.Family.from_dict({**base, "heads": 1, "mask": "none", "train": True}), 4).to_dict()
    assert got["train"]["target"] == [[str(x) for x in r] for r in want["train"]["target"]] or \
        got["train"]["target"] == want["train"]["target"]
    assert page.locator('#teacher-grids fieldset[data-key="T"]').count() == 1
    page.context.close()


def test_a_grid_wider_than_a_phone_says_it_scrolls(browser, server):
    page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
    page.goto(server.url + "#teacher")
    page.locator("#t-X-0-3").wait_for(state="attached")
    page.fill("#t-dmodel", "6")
    page.click("#make-grids")
    page.locator('#teacher-grids fieldset[data-key="X"] .more').wait_for()
    wide = page.evaluate("(() => { const s = document.querySelector('#teacher-grids fieldset[data-key=X] .scroll');"
                         " return s.scrollWidth > s.clientWidth; })()")
    assert wide
    page.set_viewport_size({"width": 1200, "height": 900})
    page.locator('#teacher-grids fieldset[data-key="X"] .more').wait_for(state="detached")
    page.context.close()


def test_a_shipped_spec_with_the_random_knobs_as_its_family_makes_the_cli_s_quiz(browser, server, tmp_path):
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, accept_downloads=True, bypass_csp=True)
    page = ctx.new_page()
    page.set_default_timeout(120000)
    page.goto(server.url + "#teacher")
    page.locator("#q-load option").nth(1).wait_for(state="attached")
    assert "quiz-2-causal" in page.locator("#q-load option").all_text_contents()
    page.select_option("#q-load", "quiz-1")
    page.locator("#quiz-status", has_text="Loaded the spec quiz-1").wait_for()
    # (quiz-1 says mask = "none"; the builder's first spec does not)
    page.wait_for_function("document.getElementById('q-spec').value.includes('mask = \"none\"')")
    assert tomllib.loads(page.input_value("#q-spec")) == tomllib.loads(SPEC.read_text(encoding="utf-8"))
    page.fill("#r-tokens", "4")
    page.fill("#r-lo", "-1")
    page.click("#q-parts .use-random")
    page.locator("#quiz-status", has_text="family is now").wait_for()
    page.wait_for_function("document.getElementById('q-spec').value.includes('tokens = 4')")
    spec = page.input_value("#q-spec")
    assert "tokens = 4" in spec and "range = [-1, 3]" in spec and spec.count("\n[family]\n") == 1
    assert spec.count("\n[[questions]]\n") == 3 and 'title = "Attention quiz 1"' in spec
    page.fill("#q-count", "2")
    with page.expect_download() as dl:
        page.click("#make-quiz")
    z = zipfile.ZipFile(io.BytesIO(Path(dl.value.path()).read_bytes()))
    ctx.close()
    (tmp_path / "spec.toml").write_text(spec, encoding="utf-8")
    out = tmp_path / "cli"
    code, _, err = run_cli("quiz", str(tmp_path / "spec.toml"), "-n", "2", "--format", "html,moodle,qti,gift", "-o",
                           str(out), "--quiet")
    assert code == 0, err
    assert z.read("manifest.json") == (out / "manifest.json").read_bytes()
    import json

    manifest = json.loads(z.read("manifest.json"))
    assert manifest["family"]["range"] == [-1, 3] and len(manifest["variants"][0]["problem"]["tokens"]) == 4


def test_the_random_form_draws_a_transformer_block_with_and_without_a_training_step(browser, server):
    from worked import generate

    page, errors, draw = _random_form(browser, server)

    base = {"tokens": 3, "d_model": 4, "d_k": 2, "heads": 1, "range": [-2, 3], "mask": "none", "scale": "sqrt",
            "decimals": 2, "max_weight": 0.9, "max_score": 5, "ties": False}
    assert page.locator("#r-block").input_value() == ""           # attention only, unless asked
    assert page.get_attribute("#r-d_ff", "placeholder") == "d_model" and page.get_attribute("#r-eps", "placeholder") == "0"
    page.select_option("#r-block", "post-ln")
    page.select_option("#r-positional", "sinusoidal")
    page.fill("#r-d_ff", "3")
    page.fill("#r-seed", "5")
    got = draw()
    want = generate.generate(generate.Family.from_dict({**base, "block": "post-ln", "positional": "sinusoidal",
                                                        "d_ff": 3}), 5).to_dict()
    assert got["block"] == "post-ln" and got["positional"] == "sinusoidal"
    def same(a, b):     # (the grids read their cells as the text typed)
        return [[str(x) for x in r] for r in a] == [[str(x) for x in r] for r in b]

    assert same(got["X"], want["X"]) and same(got["W_1"], want["W_1"]) and same(got["W_O"], want["W_O"])
    for key in ("X", "h1.W_Q", "h1.W_K", "h1.W_V", "W_O"):     # the attention's grids, W_O as a block has it
        assert page.locator(f'#teacher-grids fieldset[data-key="{key}"]').is_visible(), key
    assert page.locator('#teacher-grids fieldset[data-key="T"]').count() == 0
    assert "layer norm" in _preview(page).lower()
    # with an output layer and its training step
    page.select_option("#r-positional", "none")
    page.fill("#r-d_ff", "")
    page.fill("#r-vocab", "4")
    page.fill("#r-eps", "1/100")
    page.check("#r-train")
    got = draw()
    want = generate.generate(generate.Family.from_dict({**base, "block": "post-ln", "vocab": 4, "eps": "1/100",
                                                        "train": True}), 5).to_dict()
    assert got["train"]["loss"] == "cross-entropy" and got["targets"] == want["targets"] and got["eps"] == want["eps"]
    assert same(got["W_out"], want["W_out"]) and same(got["X"], want["X"])
    assert page.locator('#teacher-grids fieldset[data-key="T"]').count() == 0
    assert "gradient" in _preview(page).lower()
    # the server's error, in one line, names the field
    page.check("#r-train")
    page.fill("#r-vocab", "")
    page.click("#draw")
    page.locator("#teacher-error", has_text="vocab").wait_for()
    assert "\n" not in page.locator("#teacher-error").inner_text().strip()
    assert errors == []
    page.context.close()
