"""The web server's JSON API (``worked serve``), driven in-process with Starlette's test client."""
from __future__ import annotations

import json
import shutil
import sys
import time
import warnings
from pathlib import Path

import pytest

pytest.importorskip("starlette")
pytest.importorskip("httpx")

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

from worked import printers
from worked.problem import Problem, load
from worked.server import app as server
from worked.server.app import Config, create_app
from worked.server.views import safe_mathml
from worked.solver import solve

from sheet_support import is_quiz_spec

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = ROOT / "problems"
PART9 = PROBLEMS / "cats-chase-mice.toml"
NO_SCALING_ANSWERS = PROBLEMS / "answers" / "cats-chase-mice-no-scaling.toml"

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def client(**kw) -> TestClient:
    kw.setdefault("problems_dir", PROBLEMS)
    return TestClient(create_app(Config(**kw)), raise_server_exceptions=False)


@pytest.fixture(scope="module")
def c():
    return client()


@pytest.fixture(scope="module")
def part9_dict():
    return load(PART9).to_dict()


def test_info_lists_the_problems_folder_by_name(c):
    """/api/info names every problem file of the folder (by file stem, with its title), leaves out quiz
    specs (they have a [family] table, or [[parts]]), and lists the features."""
    info = c.get("/api/info").json()
    names = {p["name"]: p["title"] for p in info["problems"]}
    files = {p.stem: is_quiz_spec(p) for p in PROBLEMS.glob("*.toml")}
    assert set(names) == {stem for stem, spec in files.items() if not spec}
    assert names["cats-chase-mice"] == load(PART9).title
    assert info["no_solutions"] is False and info["mode"] == "problems"
    assert set(info["features"]) == {"check", "render", "random"}


def test_problem_by_name_has_its_file_and_empty_grids_of_the_right_shapes(c):
    """A named problem comes back with the same keys as its file and one answer grid per matrix, shaped
    like the solver's matrices, without any values of the solution."""
    data = c.get("/api/problems/cats-chase-mice").json()
    problem = load(PART9)
    assert data["problem"] == problem.to_dict()
    grids = {g["key"]: g for g in data["view"]["grids"]}
    mats = solve(problem).matrices()
    assert list(grids) == list(mats)
    for key, m in mats.items():
        assert (len(grids[key]["rows"]), len(grids[key]["cols"])) == m.shape
        assert "cells" not in grids[key]
    assert all(g["mathml"] and g["mathml"].startswith("<math") for g in grids.values())


def test_two_head_problem_has_per_head_grids_concat_and_Z(c):
    """With several heads the grids follow the answers-file names: head1.Q … head2.Z, concat, Z."""
    data = c.get("/api/problems/two-heads").json()
    keys = [g["key"] for g in data["view"]["grids"]]
    assert keys == list(solve(load(PROBLEMS / "two-heads.toml")).matrices())


def test_solve_returns_the_json_of_worked_solve(c, part9_dict, cli):
    """POST /api/solve gives exactly the JSON of `worked solve --format json` for the same problem."""
    r = c.post("/api/solve", json={"problem": part9_dict})
    assert r.status_code == 200
    code, out, _ = cli("solve", PART9, "--format", "json")
    assert code == 0
    assert r.json() == json.loads(out)


def test_solve_view_adds_mathml_for_every_step_line(c, part9_dict):
    """?view=1 adds, for every step line, the MathML its tree prints (a display <math> element whose alt
    text is the line's spoken form), and each result matrix as shown."""
    from worked import printers

    data = c.post("/api/solve?view=1", json={"problem": part9_dict}).json()
    sol = solve(load(PART9))
    steps = data["view"]["steps"]
    assert [s["id"] for s in steps] == [s.id for s in sol.steps]
    for got, step in zip(steps, sol.steps):
        assert [ln["text"] for ln in got["lines"]] == [printers.text(ln.eq) for ln in step.lines]
        for ln_json, ln in zip(got["lines"], step.lines):
            assert ln_json["mathml"] == printers.math_element(printers.mathml(ln.eq), display=True, alt=printers.spoken(ln.eq))
            assert safe_mathml(ln_json["mathml"]) == ln_json["mathml"]
    assert data["view"]["matrices"]["scaled"]["cells"][0][1] == {"text": printers.text(sol.matrices()["scaled"].cell(0, 1, 2))}
    # as on the printed key, a rounded matrix whose exact entries are short comes with its exact form too
    exact = data["view"]["matrices"]["scaled"]["exact"]
    assert exact["heading"]["text"] == "scaled =" and exact["caption"] == "exact"
    assert exact["cells"][0][1]["text"] == "2√2" and "<msqrt>" in exact["cells"][0][1]["mathml"]
    assert data["view"]["matrices"]["scaled"]["caption"] == "to 2 places"
    assert "exact" not in data["view"]["matrices"]["Q"]


def test_check_returns_the_json_of_worked_check_and_names_the_mistake(c, part9_dict, cli):
    """POST /api/check gives the JSON of `worked check --format json`; the no-scaling answers are diagnosed."""
    from worked.check import read_answers

    answers = read_answers(NO_SCALING_ANSWERS)
    r = c.post("/api/check", json={"problem": part9_dict, "answers": answers})
    assert r.status_code == 200
    code, out, _ = cli("check", PART9, NO_SCALING_ANSWERS, "--format", "json")
    assert r.json() == json.loads(out)
    assert "no-scaling" in [d["code"] for d in r.json()["diagnoses"]]


def test_check_accepts_exact_forms(c, part9_dict):
    """Entries like 2√2 and 3*sqrt(2)/2 are read exactly and marked correct."""
    sol = solve(load(PART9))
    m = sol.matrices()["scaled"]
    answers = {"scaled": [[printers.text(m.exact_node(i, j)) for j in range(3)] for i in range(3)]}
    assert any("√" in x for row in answers["scaled"] for x in row)
    rep = c.post("/api/check", json={"problem": part9_dict, "answers": answers}).json()
    assert rep["matrices"]["scaled"]["verdicts"] == [["correct"] * 3] * 3


def test_no_solutions_never_sends_expected_values():
    """With --no-solutions: /api/solve and answer keys are refused (403); a check report has verdicts and
    diagnoses but no expected values, even when the request asks to reveal them."""
    nc = client(no_solutions=True)
    p = load(PART9).to_dict()
    assert nc.post("/api/solve", json={"problem": p}).status_code == 403
    assert nc.get("/download/problems/cats-chase-mice/answer-key.html").status_code == 403
    assert nc.post("/api/download", json={"problem": p, "document": "answer-key", "format": "tex"}).status_code == 403
    answers = {"scaled": [[2, 4, 2], [3, 3, 3], [2, 3, 2]]}
    r = nc.post("/api/check", json={"problem": p, "answers": answers, "reveal": True})
    body = r.json()
    assert r.status_code == 200
    assert body["matrices"]["scaled"]["verdicts"][0] == ["wrong"] * 3
    assert "no-scaling" in [d["code"] for d in body["diagnoses"]]
    assert '"expected"' not in r.text
    exact_scaled = solve(load(PART9)).matrices()["scaled"].dec_plain(0, 1, 2)  # 2.83
    assert exact_scaled not in r.text
    info = nc.get("/api/info").json()
    assert info["no_solutions"] is True


def test_reveal_is_honoured_when_solutions_are_on(c, part9_dict):
    """Without --no-solutions a check may ask for the expected values (like `worked check --reveal`)."""
    r = c.post("/api/check", json={"problem": part9_dict, "answers": {"Q": [[2, 0], [0, 3], [1, 2]]}, "reveal": True})
    assert float(r.json()["matrices"]["Q"]["expected"][2][1]) == float(solve(load(PART9)).matrices()["Q"].value(2, 1))


@pytest.mark.parametrize("body,ctype,status", [
    (b"{not json", "application/json", 400),
    (b"[1, 2]", "application/json", 400),
    (b'{"problem": {"X": [[NaN]]}}', "application/json", 400),
    (b"\xff\xfe", "application/json", 400),
    (b'{"problem": {}}', "text/plain", 415),
    (b"[" * 100000 + b"]" * 100000, "application/json", 400),
])
def test_bad_bodies_get_a_json_error(c, body, ctype, status):
    """Malformed, non-object, non-UTF-8, deeply nested or non-JSON bodies get a JSON error, not a trace."""
    r = c.post("/api/solve", content=body, headers={"content-type": ctype})
    assert r.status_code == status
    assert set(r.json()) == {"error"} and "Traceback" not in r.text


def test_body_size_is_limited():
    """A body larger than the limit is refused with 413 before it is parsed."""
    small = client(max_body=2000)
    big = {"problem": load(PART9).to_dict(), "pad": "x" * 5000}
    r = small.post("/api/solve", json=big)
    assert r.status_code == 413 and "larger than 2000 bytes" in r.json()["error"]


def test_problem_errors_name_the_field_and_the_limits_are_those_of_files(c):
    """A bad problem gets 422 with the field and what was expected; problem-file limits apply."""
    r = c.post("/api/solve", json={"problem": {"X": [[1, 2]], "W_Q": [[1], [2], [3]], "W_K": [[1]], "W_V": [[1]]}})
    assert r.status_code == 422 and "W_Q" in r.json()["error"] and "expected 2 rows" in r.json()["error"]
    from worked.problem import LIMITS

    n = LIMITS["tokens"] + 1
    too_many = {"X": [[1]] * n, "W_Q": [[1]], "W_K": [[1]], "W_V": [[1]]}
    r = c.post("/api/check", json={"problem": too_many, "answers": {}})
    assert r.status_code == 422 and f"at most {LIMITS['tokens']}" in r.json()["error"]
    r = c.post("/api/solve", json={"problem": {"X": [["__import__('os').system('true')"]], "W_Q": [[1]],
                                               "W_K": [[1]], "W_V": [[1]]}})
    assert r.status_code == 422 and r.json()["error"].startswith("problem: X[1,1]")


@pytest.mark.parametrize("name", ["..%2Fpyproject", "..%2F..%2Fetc%2Fpasswd", "%2Fetc%2Fpasswd", "cats-chase-mice.toml",
                                  "answers", ".hidden", "secret"])
def test_no_path_traversal_through_problem_names(tmp_path, name):
    """Names are looked up in the folder listing; paths, dot names and files outside the folder are 404."""
    folder = tmp_path / "problems"
    folder.mkdir()
    shutil.copy(PART9, folder / "cats-chase-mice.toml")
    shutil.copy(PART9, tmp_path / "secret.toml")  # next to the folder, not in it
    (folder / "answers").mkdir()
    tc = client(problems_dir=folder)
    assert tc.get("/api/problems/cats-chase-mice").status_code == 200
    for url in (f"/api/problems/{name}", f"/download/problems/{name}/worksheet.tex"):
        r = tc.get(url)
        assert r.status_code == 404 and "error" in r.json()


def test_links_to_files_outside_the_folder_are_not_served(tmp_path, caplog):
    """A problem file that is a symbolic link to a file outside the folder (directly, through ``..``, or through
    a link inside the folder) is neither listed nor served, and the log says so in one line naming it; a link
    to a file inside the folder is served; a manifest.json linking outside does not make a quiz."""
    folder = tmp_path / "problems"
    folder.mkdir()
    shutil.copy(PART9, folder / "cats-chase-mice.toml")
    secret = tmp_path / "secret.toml"
    shutil.copy(PROBLEMS / "no-scaling.toml", secret)
    (folder / "secret.toml").symlink_to(secret)
    (folder / "dots.json").symlink_to(Path("..") / "secret.toml")
    (folder / "hop.toml").symlink_to("secret.toml")                 # a link to a link that leaves the folder
    (folder / "alias.toml").symlink_to("cats-chase-mice.toml")      # stays inside: served
    (tmp_path / "manifest.json").write_text(json.dumps({"variants": [
        {"variant": "K3F9AB", "problem": load(PART9).to_dict(), "questions": []}]}), encoding="utf-8")
    (folder / "manifest.json").symlink_to(tmp_path / "manifest.json")
    with caplog.at_level("WARNING", logger="worked.server"):
        tc = client(problems_dir=folder)
        info = tc.get("/api/info").json()
        tc.get("/api/info")
    assert info["mode"] == "problems"
    assert sorted(p["name"] for p in info["problems"]) == ["alias", "cats-chase-mice"]
    assert tc.get("/api/problems/alias").json()["problem"] == load(PART9).to_dict()
    title = load(PROBLEMS / "no-scaling.toml").title
    for name in ("secret", "dots", "hop"):
        for url in (f"/api/problems/{name}", f"/download/problems/{name}/worksheet.tex"):
            r = tc.get(url)
            assert r.status_code == 404 and title not in r.text, (url, r.text)
    assert tc.get("/api/variants/K3F9AB").status_code == 404
    said = [r.getMessage() for r in caplog.records if "outside the problems folder" in r.getMessage()]
    assert sorted(m.split(": not served")[0].rsplit("/", 1)[-1] for m in said) == \
        ["dots.json", "hop.toml", "manifest.json", "secret.toml"]      # each once, though listed twice
    assert all("\n" not in m for m in said)


def make_quiz(tmp_path: Path) -> Path:
    """A quiz folder in the layout `worked quiz` writes (manifest.json with variants), made by hand."""
    quiz = tmp_path / "quiz"
    quiz.mkdir()
    p9 = load(PART9).to_dict()
    other = load(PROBLEMS / "no-scaling.toml").to_dict()
    manifest = {"format": "worked-quiz-manifest", "version": 1, "title": "Attention quiz",
                "variants": [
                    {"variant": "K3F9AB", "student": {"id": "s1", "name": "Ada"}, "problem": p9,
                     "questions": [{"ask": "Z", "points": 3.0, "expected": [[0.49, 1.67]], "exact": "SECRET"}]},
                    {"variant": "ZZ77QQ", "problem": other, "questions": []}]}
    (quiz / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return quiz


def test_quiz_variants_by_code_without_names_or_expected_values(tmp_path):
    """Pointed at a quiz folder, the server offers variants by code (any case, spaces ignored), lists no
    problems, and sends neither student names nor the manifest's expected answers."""
    tc = client(problems_dir=make_quiz(tmp_path), no_solutions=True)
    info = tc.get("/api/info").json()
    assert info["mode"] == "quiz" and info["problems"] == [] and info["quiz"]["variants"] == 2
    r = tc.get("/api/variants/k3f9ab")
    assert r.status_code == 200
    assert r.json()["problem"] == load(PART9).to_dict()
    assert r.json()["questions"] == [{"name": "", "ask": "Z", "points": 3, "tolerance": "rounding to 2 places",
                                      "matrix": "Z", "cells": [[i, j] for i in range(3) for j in range(2)]}]
    assert "SECRET" not in r.text and "Ada" not in r.text and "0.49" not in r.text
    for bad in ("NOPE12", "..%2Fmanifest", "K3F9AB%2F..", "x" * 60):
        rr = tc.get(f"/api/variants/{bad}")
        assert rr.status_code == 404 and "error" in rr.json()
    ws = tc.get("/download/variants/K3F9AB/worksheet.tex")
    assert ws.status_code == 200 and "K3F9AB" in ws.text
    assert tc.get("/download/variants/K3F9AB/answer-key.tex").status_code == 403


def big_problem() -> dict:
    """The most work the limits allow with d_model 12 and 4 heads (9 tokens: 12 are over the limit on work):
    seconds of CPU to solve."""
    import random

    r = random.Random(5)
    m = lambda a, b: [[r.choice([0, 1, 0.5, -0.5]) for _ in range(b)] for _ in range(a)]  # noqa: E731
    return {"X": m(9, 12), "heads": [{"W_Q": m(12, 3), "W_K": m(12, 3), "W_V": m(12, 3)} for _ in range(4)],
            "W_O": m(12, 12), "decimals": 4}


def test_solve_timeout_is_a_json_504():
    """Solving that takes longer than the timeout answers 504 with a message (the server stays up)."""
    tc = client(solve_timeout=0.3)
    r = tc.post("/api/solve", json={"problem": big_problem()})
    assert r.status_code == 504 and "longer than 0.3 s" in r.json()["error"], r.text
    assert tc.get("/api/info").status_code == 200


def test_internal_errors_never_show_a_stack_trace():
    """An unexpected exception in a job gives a 500 with a generic JSON message: no trace, no exception text."""
    from worked.server import jobs

    def broken(problem):
        raise RuntimeError("secret internal detail /home/teacher")

    status, body, media = jobs._guard(broken, None)
    assert status == 500 and media == "application/json"
    assert b"internal error" in body and b"secret" not in body and b"Traceback" not in body


def test_unknown_routes_and_methods_are_json(c):
    """404 and 405 are JSON too."""
    assert c.get("/nope").json() == {"error": "not found"}
    r = c.get("/api/solve")
    assert r.status_code == 405 and r.json() == {"error": "method not allowed"}


def test_page_and_assets_are_served_locally_with_a_strict_policy(c):
    """The page, its script, stylesheet and math font come from this server; the CSP allows nothing else,
    and the page references no external URL."""
    page = c.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    csp = page.headers["content-security-policy"]
    assert "default-src 'self'" in csp and "script-src 'self'" in csp and "unsafe-eval" not in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    for asset in ("/static/app.js", "/static/style.css", "/static/fonts/worked-math.woff2"):
        r = c.get(asset)
        assert r.status_code == 200 and len(r.content) > 100
    for text in (page.text, c.get("/static/app.js").text, c.get("/static/style.css").text):
        assert "http://" not in text.replace("http://www.w3.org", "") and "https://" not in text


def test_text_from_problems_is_data_and_mathml_is_allow_listed(c):
    """A title or token with markup stays a JSON string (the page sets it with textContent), and the
    MathML filter refuses anything but MathML elements."""
    p = load(PART9).to_dict()
    p["title"] = "<img src=x onerror=alert(1)>"
    p["tokens"] = ["<b>cats</b>", "chase", "mice"]
    r = c.post("/api/solve?view=1", json={"problem": p})
    assert r.status_code == 200
    data = r.json()
    assert data["title"] == p["title"]
    for s in data["view"]["steps"]:
        for ln in s["lines"]:
            assert "<b>" not in (ln["mathml"] or "") and "<img" not in (ln["mathml"] or "")
    js = c.get("/static/app.js").text
    assert ".innerHTML = markup" in js and js.count("innerHTML") == 1
    assert safe_mathml('<math xmlns="http://www.w3.org/1998/Math/MathML"><mi>x</mi></math>')
    assert safe_mathml('<math><script>alert(1)</script></math>') is None
    assert safe_mathml('<math><mi onclick="x()">x</mi></math>') is None
    assert safe_mathml('<math><mi href="javascript:x()">x</mi></math>') is None


@pytest.mark.parametrize("markup", [
    '<mi xmlns="http://www.w3.org/1998/Math/MathML">x</mi>',                        # not a <math> element
    '<math xmlns="http://example.org/"><mi>x</mi></math>',                          # another namespace
    '<!DOCTYPE math [<!ENTITY a "x">]><math><mi>&a;</mi></math>',                   # a DTD
    '<math><!-- c --><mi>x</mi></math>',                                            # a comment
    '<?xml-stylesheet href="x"?><math><mi>x</mi></math>',                           # a processing instruction
    '<math><mrow><math><mi>x</mi></math></mrow></math>',                            # math inside math
    '<math><mtable columnalign="left"><mtr><mtd><mi>x</mi></mtd></mtr></mtable></math>',  # no attributes on tables
    '<math><mlabeledtr><mtd><mi>x</mi></mtd></mlabeledtr></math>',                  # not what the printer writes
    '<math><semantics><mi>x</mi><annotation-xml>x</annotation-xml></semantics></math>',
    '<math><mi mathvariant="bold">x</mi></math>',                                   # no attribute on tokens
    '<math class="x"><mi>x</mi></math>',
    '<math display="evil"><mi>x</mi></math>',
    '<math><mspace width="javascript:x()"></mspace></math>',
    '<math><mi xlink:href="x" xmlns:xlink="http://www.w3.org/1999/xlink">x</mi></math>',
    '<math><mi>x</mi><svg xmlns="http://www.w3.org/2000/svg"></svg></math>',
    '<math><mi>x</mi>',                                                             # not well-formed
])
def test_the_mathml_allow_list_is_what_the_printer_writes_and_nothing_else(markup):
    """safe_mathml takes one <math> element of the printer's dozen elements (display and alttext on
    <math>, width on <mspace>, nothing else) and refuses everything else."""
    assert safe_mathml(markup) is None


def test_the_printer_s_mathml_passes_the_allow_list():
    """Every node kind the printer knows, wrapped in <math> with alt text (quotes and all), passes."""
    from decimal import Decimal
    from fractions import Fraction

    from worked import eq, printers

    x = eq.Sym("x", sub="cats")
    tree = eq.Rel((eq.Entry(eq.Sym("A", head=2), "cats", eq.ALL), eq.Sum(eq.Entry(eq.Sym("A"), "cats", "j"), "j"),
                   eq.Dot(eq.Vec((eq.num(Fraction(-1, 3)), eq.Neg(eq.Inf()))), eq.Col(eq.Sym("W_Q", head=1), "1")),
                   eq.Add((eq.Mul((eq.num(2), eq.Sqrt(eq.num(2)))), eq.Frac(eq.Exp(x), eq.Pow(x, eq.num(2))))),
                   eq.Call("softmax", (eq.Sym("scaled", upright=True),)), eq.Dims(3, 2), eq.Blank(),
                   eq.dec(Decimal("-0.16"))), (eq.EQ, eq.EQ, eq.APPROX, eq.EQ, eq.TO, eq.EQ, eq.APPROX))
    for display in (False, True):
        m = printers.math_element(printers.mathml(tree), display=display, alt='a "quoted" <alt> & more')
        assert safe_mathml(m) == m


def test_downloads_of_worksheet_and_key(c):
    """Worksheet and key come as PDF, HTML and TeX, for a named problem and for a posted one."""
    pdf = c.get("/download/problems/cats-chase-mice/answer-key.pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert pdf.headers["content-disposition"] == 'attachment; filename="cats-chase-mice-answer-key.pdf"'
    tex = c.get("/download/problems/cats-chase-mice/worksheet.tex")
    assert tex.status_code == 200 and "\\documentclass" in tex.text
    p = load(PART9).to_dict()
    p["title"] = "a <b>posted</b> problem"
    html = c.post("/api/download", json={"problem": p, "document": "answer-key", "format": "html"})
    assert html.status_code == 200 and "a &lt;b&gt;posted&lt;/b&gt; problem" in html.text
    toml = c.post("/api/download", json={"problem": p, "document": "problem", "format": "toml"})
    assert Problem.from_text(toml.text, "x.toml") == Problem.from_dict(p)
    bad = c.get("/download/problems/cats-chase-mice/answer-key.exe")
    assert bad.status_code == 404 and "expected pdf, html or tex" in bad.json()["error"]


def test_notebook_downloads_with_answers_and_as_exercise(c, tmp_path):
    """The teacher view's notebook buttons: notebook.ipynb (the answers) and exercise.ipynb (checks only),
    for a named problem, a posted one and a quiz variant; refused with --no-solutions."""
    import nbformat

    page = c.get("/").text
    assert 'data-doc="notebook" data-fmt="ipynb"' in page and 'data-doc="exercise" data-fmt="ipynb"' in page
    r = c.get("/download/problems/cats-chase-mice/notebook.ipynb")
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-ipynb+json"
    assert r.headers["content-disposition"] == 'attachment; filename="cats-chase-mice-notebook.ipynb"'
    nb = nbformat.reads(r.text, as_version=4)
    nbformat.validate(nb)
    assert any(cell.source.startswith("Q = X @ W_Q") for cell in nb.cells)
    p = load(PROBLEMS / "two-heads.toml").to_dict()
    ex = c.post("/api/download", json={"problem": p, "document": "exercise", "format": "ipynb"})
    assert ex.status_code == 200 and ex.headers["content-disposition"].endswith('-exercise.ipynb"')
    code = [cell.source for cell in nbformat.reads(ex.text, as_version=4).cells if cell.cell_type == "code"]
    assert any("# your code here" in s for s in code) and not any("@" in s for s in code)
    assert any("concat_key = np.array" in s for s in code)
    bad = c.get("/download/problems/cats-chase-mice/answer-key.ipynb")
    assert bad.status_code == 404 and "expected notebook or exercise" in bad.json()["error"]
    tc = client(problems_dir=make_quiz(tmp_path))
    v = tc.get("/download/variants/K3F9AB/exercise.ipynb")
    assert v.status_code == 200 and "K3F9AB" in v.text and "Ada" not in v.text
    nc = client(no_solutions=True)
    for doc in ("notebook", "exercise"):
        assert nc.get(f"/download/problems/cats-chase-mice/{doc}.ipynb").status_code == 403
        assert nc.post("/api/download", json={"problem": p, "document": doc, "format": "ipynb"}).status_code == 403


def test_random_problem_is_the_generator_s_for_the_same_knobs_and_seed(c):
    """POST /api/new draws the same problem as `worked new` with the same options and seed."""
    from worked import generate

    fam = {"tokens": 3, "d_model": 4, "d_k": 2, "range": [-2, 3], "mask": "causal"}
    a = c.post("/api/new", json={"family": fam, "seed": 7}).json()
    b = c.post("/api/new", json={"family": fam, "seed": 7}).json()
    assert a["problem"] == b["problem"]
    assert a["problem"] == generate.generate(generate.Family.from_dict(fam), 7).to_dict()
    r = c.post("/api/new", json={"family": {"tokens": 99}, "seed": 7})
    assert r.status_code == 422 and "tokens" in r.json()["error"]


# ------------------------------------------------------------------ the math of the page comes from the trees

def _mathml_fragments(obj):
    """Every value of a "mathml" key anywhere in a JSON answer."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "mathml":
                yield v
            else:
                yield from _mathml_fragments(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from _mathml_fragments(v)


def _loadable_problems():
    out = []
    for path in sorted(PROBLEMS.glob("*.toml")):
        try:
            load(path)
        except Exception:  # noqa: BLE001 - quiz specs and the like are not problems
            continue
        out.append(path)
    return out


@pytest.mark.parametrize("path", _loadable_problems(), ids=lambda p: p.stem)
def test_every_mathml_fragment_the_server_sends_passes_the_allow_list(c, path):
    """For every problem of the folder, the problem view (headings, input symbols, fraction cells) and the
    solution view (step lines, matrix headings, cells) have MathML wherever they should, and every
    fragment is a <math> element that passes safe_mathml unchanged."""
    problem = load(path).to_dict()
    pv = c.post("/api/view", json={"problem": problem})
    assert pv.status_code == 200
    v = pv.json()["view"]
    assert all(g["mathml"] for g in v["grids"]) and all(i["mathml"] for i in v["inputs"])
    # each given matrix also as one bracketed MathML matrix (the page shows it), allow-listed
    assert all(i["matrix"] and "<mtable>" in i["matrix"] and safe_mathml(i["matrix"]) == i["matrix"] for i in v["inputs"])
    sv = c.post("/api/solve?view=1", json={"problem": problem})
    assert sv.status_code == 200
    view = sv.json()["view"]
    assert all(ln["mathml"] for s in view["steps"] for ln in s["lines"])
    assert all(m["heading"]["mathml"] for m in view["matrices"].values())
    frags = list(_mathml_fragments(v)) + list(_mathml_fragments(view))
    assert frags
    for f in frags:
        assert isinstance(f, str) and f.startswith('<math xmlns="http://www.w3.org/1998/Math/MathML"')
        assert safe_mathml(f) == f
        assert 'alttext="' in f


def test_fraction_cells_of_the_problem_are_set_as_fractions(c):
    """An entry like 1/3 comes as text and as a stacked fraction; whole numbers and decimals as text only.
    Worked in decimals, the page shows the given entries as the worksheet does: rounded, headed "X ≈"."""
    from fractions import Fraction

    from worked import eq, printers
    from worked.render import view

    p = load(PART9).to_dict()
    p["X"] = [["1/3", "-2/3", "0.5", "2"], [0, 2, 0, 1], [1, 1, 0, 0]]
    p["display"] = "exact"
    x = c.post("/api/view", json={"problem": p}).json()["view"]["inputs"][0]
    cells = x["cells"][0]
    assert [x["text"] for x in cells] == ["1/3", "−2/3", "0.5", "2"]
    assert cells[1]["mathml"] == printers.math_element(printers.mathml(eq.num(Fraction(-2, 3))),
                                                       alt=printers.spoken(eq.num(Fraction(-2, 3))))
    assert "<mfrac>" in cells[0]["mathml"] and "mathml" not in cells[2] and "mathml" not in cells[3]
    assert x["text"] == "X" and x["rel"] == "="
    p["display"] = "decimal"
    x = c.post("/api/view", json={"problem": p}).json()["view"]["inputs"][0]
    sheet = view.build(solve(Problem.from_dict(p)), "worksheet").given[0]
    assert [[c["text"] for c in row] for row in x["cells"]] == [[c["text"] for c in row] for row in sheet["cells"]]
    assert x["cells"][0][:2] == [{"text": "0.3333"}, {"text": "−0.6667"}]
    assert x["text"] == "X ≈" and x["rel"] == "≈" and "<mo>≈</mo>" in x["mathml"]


def test_no_mathml_comes_from_latex2mathml():
    """In a fresh interpreter, the page's requests (info, a problem, a posted view, a solve with its view, a
    check) leave latex2mathml unimported: every formula the server sends is printed from a tree."""
    import subprocess
    import textwrap

    script = textwrap.dedent(f"""
        import sys, warnings
        warnings.simplefilter("ignore")
        from pathlib import Path
        from starlette.testclient import TestClient
        from worked.problem import load
        from worked.server.app import Config, create_app
        c = TestClient(create_app(Config(problems_dir=Path({str(PROBLEMS)!r}))))
        for name in ("cats-chase-mice", "two-heads", "causal-mask"):
            p = c.get("/api/problems/" + name)
            assert p.status_code == 200, p.text
            assert c.post("/api/view", json={{"problem": p.json()["problem"]}}).status_code == 200
            r = c.post("/api/solve?view=1", json={{"problem": p.json()["problem"]}})
            assert r.status_code == 200 and r.json()["view"]["steps"], r.text
        assert c.get("/api/info").status_code == 200
        r = c.post("/api/check", json={{"problem": p.json()["problem"], "answers": {{"Q": [[1, 2], [3, 4], [5, 6]]}}}})
        assert r.status_code == 200, r.text
        print("latex2mathml" in sys.modules, sorted(m for m in sys.modules if "latex2mathml" in m))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split()[0] == "False", proc.stdout


def test_matrices_of_rounded_values_say_approximately(c):
    """A solution matrix shown as rounded decimals is headed "≈" (Z ≈, Z⁽¹⁾ ≈, concat ≈, scaled ≈, A ≈);
    "=" only heads a matrix that is exact at the shown places (Q, K, V, the integer scores)."""
    for path in (PART9, PROBLEMS / "two-heads.toml", PROBLEMS / "causal-mask.toml"):
        problem = load(path)
        sol = solve(problem)
        view = c.post("/api/solve?view=1", json={"problem": problem.to_dict()}).json()["view"]
        places = problem.decimals
        for key, m in sol.matrices().items():
            h = view["matrices"][key]["heading"]
            exact = m.exact_at(places)
            rel = "=" if exact else "≈"
            assert h["rel"] == rel and h["text"] == f"{printers.text(m.sym)} {rel}", (path.stem, key, h)
            assert f"<mo>{rel}</mo>" in h["mathml"] and f"<mo>{'≈' if exact else '='}</mo>" not in h["mathml"]
            assert ("is about" if not exact else "equals") in h["mathml"]  # the alt text says it too
            cells = view["matrices"][key]["cells"]
            assert [[x["text"] for x in row] for row in cells] == [
                [printers.text(m.cell(i, j, places)) for j in range(m.shape[1])] for i in range(m.shape[0])]
        keys = {k.rpartition(".")[2]: view["matrices"][k]["heading"]["rel"] for k in sol.matrices()}
        assert keys["scaled"] == keys["weights"] == keys["Z"] == "≈"   # √d_k = √2: all rounded
        if problem.multihead:
            assert view["matrices"]["concat"]["heading"]["text"] == "concat ≈"
            assert view["matrices"]["head1.Z"]["heading"]["text"] == "Z⁽¹⁾ ≈"
    js = c.get("/static/app.js").text
    assert "result} =" not in js and "x.heading.mathml" in js   # the page shows the server's heading


def test_grid_headings_are_definitions_with_one_equals_sign(c):
    """The heading of an answer grid defines the matrix (Q = X·W_Q, scores = Q·Kᵀ, scaled = scores/√d_k,
    A = softmax(scaled), Z = concat·W_O): one "=" and no value, so it never reads "… ÷ √d_k = √2"."""
    for name in ("cats-chase-mice", "two-heads", "no-scaling", "four-tokens-fractions"):
        grids = c.get(f"/api/problems/{name}").json()["view"]["grids"]
        for g in grids:
            ops = g["mathml"].count("<mo>=</mo>")
            assert ops == (0 if g["key"] == "concat" else 1), (name, g["key"], g["text"])
            assert "≈" not in g["text"] and "<mn>" not in g["mathml"].replace("<mn>2</mn>", "").replace(
                "<mn>1</mn>", "")   # head numbers (1), (2) and the scale 2 only
        by = {g["key"].rpartition(".")[2]: g for g in grids}
        if name == "cats-chase-mice":
            assert "<mfrac>" in by["scaled"]["mathml"] and "<msqrt>" in by["scaled"]["mathml"]
            assert "softmax" in by["weights"]["mathml"] and "<msup>" in by["scores"]["mathml"]
            assert by["scaled"]["hint"].startswith("divide the scores by √d_k = √2")
        if name == "two-heads":
            assert "concat" in by["concat"]["text"] and "Z⁽²⁾" in by["concat"]["text"]
            assert by["Z"]["text"] == "Z = concat·W_O"
        if name == "no-scaling":
            assert by["scaled"]["text"] == "scaled = scores"
        if name == "four-tokens-fractions":
            assert by["scaled"]["text"] == "scaled = scores/2"


def test_a_problem_goes_to_its_own_worker_unless_that_one_is_busier():
    """The quick lane sends a problem to the same worker each time (where its work is kept), spreads different
    problems over the workers, and gives a job to the least busy worker once its own has more than SLACK jobs
    more (a class on one problem keeps every worker busy)."""
    lane = server.Lane("quick", 2, 512, 200)
    keys = [f"problem {k}" for k in range(40)]
    homes = [lane.pick(k) for k in keys]
    assert homes == [lane.pick(k) for k in keys] and set(homes) == {0, 1}
    home = homes[0]
    lane.queued[home] = lane.SLACK
    assert lane.pick(keys[0]) == home
    lane.queued[home] = lane.SLACK + 1
    assert lane.pick(keys[0]) == 1 - home
    lane.queued = [3, 1]
    assert lane.pick(None) == 1
