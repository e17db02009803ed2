"""`worked quiz`: spec and roster validation, seeds stable under roster changes, manifest answers = solver's,
--variant regenerates a variant byte for byte, output independent of --jobs (PDFs included)."""
import io
import json
import math

import pytest

from worked import printers
from worked.problem import Problem
from worked.quiz import build_variant, load_roster, load_spec, plan, run, spec_from_dict
from worked.solver import solve
from worked.errors import ProblemError, WorkedError

from conftest import PROBLEMS, run_cli

SPEC = PROBLEMS / "quiz-1.toml"


def _tree(d):
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


BASE = """title = "T"
seed = 1
[family]
tokens = 3
d_model = 4
d_k = 2
range = [-2, 3]
[[questions]]
ask = "scores[2,3]"
tolerance = 0.01
"""


@pytest.mark.parametrize("change, needle", [
    (("[family]", "colour = 1\n[family]"), "colour: unknown key"),
    (("range = [-2, 3]", "range = [3, -2]"), "family.range"),
    (("range = [-2, 3]", "range = [-2, 3]\nwobble = 2"), "family.wobble: unknown key"),
    (('ask = "scores[2,3]"', 'ask = "scores[4,1]"'), "row 4 is outside scores"),
    (('ask = "scores[2,3]"', 'ask = "colour[1,1]"'), "unknown matrix"),
    (("tolerance = 0.01", "tolerance = 0"), "tolerance"),
    (("tolerance = 0.01", "tolerance = 0.01\nweight = 2"), "questions[1].weight: unknown key"),
    (("d_k = 2", "d_k = 2\nmax_weight = 0.2"), "max_weight"),
    (("d_k = 2", "d_k = 2\nmask = \"causal\""), None),
])
def test_bad_specs_fail_with_one_line_and_write_nothing(tmp_path, change, needle):
    """Unknown fields, bad ranges, asks outside the matrix, zero tolerance, impossible constraints → exit 2,
    one `error:` line naming the field, and no output folder."""
    text = BASE.replace(*change)
    if needle is None:  # causal + scores[2,3] is a masked entry
        text = text.replace('ask = "scores[2,3]"', 'ask = "scores[1,3]"')
        needle = "masked"
    spec = _write(tmp_path, "s.toml", text)
    out = tmp_path / "out"
    code, stdout, err = run_cli("quiz", spec, "-n", "2", "-o", out, "--format", "moodle")
    assert code == 2, err
    assert err.startswith("error: ") and err.count("\n") == 1 and needle in err
    assert not out.exists()


@pytest.mark.parametrize("roster, needle", [
    ("id,name\n", "empty roster"),
    ("", "empty roster"),
    ("id,name\ns1,Ada\ns2,Bob\ns1,Cy\n", "line 4: duplicate student id 's1' (also on line 2)"),
    ("name,email\nAda,a@x\n", "no 'id' column"),
    ("id,name\n,Ada\n", "line 2: empty id"),
])
def test_bad_rosters_fail_before_writing(tmp_path, roster, needle):
    """Empty rosters, duplicate ids, missing columns: one line naming the line, exit 2, nothing written."""
    r = _write(tmp_path, "r.csv", roster)
    out = tmp_path / "out"
    code, _, err = run_cli("quiz", SPEC, "--roster", r, "-o", out, "--format", "moodle")
    assert code == 2 and needle in err and err.count("\n") == 1
    assert not out.exists()


def test_roster_variants_stable_under_reordering_and_additions(tmp_path):
    """A student's seed, code and problem depend only on the quiz seed and their id."""
    a = _write(tmp_path, "a.csv", "id,name\ns1,Ada\ns2,Bob\ns3,Cy\n")
    b = _write(tmp_path, "b.csv", "name,id,email\nDee,s4,d@x\nCy,s3,c@x\nAda,s1,a@x\nBob,s2,b@x\n")
    pa = {v.student["id"]: v for v in plan(5, roster=load_roster(a))}
    pb = {v.student["id"]: v for v in plan(5, roster=load_roster(b))}
    assert set(pb) == set(pa) | {"s4"}
    spec = load_spec(SPEC)
    for sid, v in pa.items():
        assert (pb[sid].seed, pb[sid].code) == (v.seed, v.code)
        ea = build_variant(spec, v, ())["entry"]
        eb = build_variant(spec, pb[sid], ())["entry"]
        assert ea["problem"] == eb["problem"] and ea["questions"] == eb["questions"]
    assert len({v.code for v in pb.values()}) == 4
    # another quiz seed gives other variants
    assert {v.seed for v in plan(6, roster=load_roster(a))}.isdisjoint({v.seed for v in pa.values()})


def test_manifest_answers_are_the_solvers(tmp_path):
    """manifest.json: per variant the student, code, seed, problem (problem-file keys) and every expected
    answer with its tolerance; re-solving the stored problem gives the same values."""
    r = _write(tmp_path, "r.csv", "id,name\ns1,Ada Lovelace\ns2,Alan Turing\n")
    out, entries = run(SPEC, roster=r, outdir=tmp_path / "q", formats="moodle", jobs=1, quiet=True)
    man = json.loads((out / "manifest.json").read_text())
    assert man["title"] == "Attention quiz 1" and len(man["variants"]) == 2
    for v in man["variants"]:
        assert v["student"]["id"] in ("s1", "s2") and len(v["variant"]) == 6 and isinstance(v["seed"], int)
        p = Problem.from_dict(v["problem"])
        mats = solve(p).matrices()
        q1, q2, q3 = v["questions"]
        assert q1["ask"] == "scores[2,3]" and q1["points"] == 1 and q1["tolerance"] == {"abs": 0.01, "rel": 0.0}
        assert math.isclose(q1["expected"], mats["scores"].value(1, 2), abs_tol=1e-9)
        assert q1["exact"] == printers.text(mats["scores"].exact_node(1, 2))
        assert [round(x, 9) for x in q2["expected"]] == [round(mats["weights"].value(0, j), 9) for j in range(3)]
        assert math.isclose(sum(q2["expected"]), 1.0, abs_tol=1e-9)
        Z = mats["Z"]
        assert len(q3["expected"]) == Z.shape[0] and all(
            math.isclose(q3["expected"][i][j], Z.value(i, j), abs_tol=1e-9) for i in range(Z.shape[0]) for j in range(Z.shape[1]))
        for e in q3["entries"]:
            assert e["tolerance"] == 0.02
    csv_text = (out / "manifest.csv").read_text()
    import csv

    rows = list(csv.DictReader(io.StringIO(csv_text)))
    assert [r["student_name"] for r in rows] == ["Ada Lovelace", "Alan Turing"]
    for r, v in zip(rows, man["variants"]):
        assert r["variant"] == v["variant"] and json.loads(r["problem"]) == v["problem"]
        assert float(r["q1 scores[2,3]"]) == v["questions"][0]["expected"]
        assert float(r["q3 Z[3,2] tolerance"]) == 0.02


def test_known_mistake_values(tmp_path):
    """The 0 % answers are the values of the named mistakes: unscaled (scaled → scores), K·Qᵀ (transpose)."""
    data = {"title": "M", "seed": 3, "family": {"tokens": 3},
            "questions": [{"ask": "scaled[1,2]"}, {"ask": "scores[1,2]"}, {"ask": "weights[2,1]"}]}
    spec = spec_from_dict(data, "m.toml")
    for v in plan(3, count=4):
        e = build_variant(spec, v, ())["entry"]
        mats = solve(Problem.from_dict(e["problem"])).matrices()
        scaled, scores, weights = (q["entries"][0] for q in e["questions"])
        by = {m["id"]: m["value"] for m in scaled["mistakes"]}
        if abs(mats["scores"].value(0, 1) - scaled["expected"]) > 2 * scaled["tolerance"]:
            assert math.isclose(by["no-scaling"], mats["scores"].value(0, 1), abs_tol=1e-9)
        else:  # a mistake that gives the right value is not offered as a wrong answer
            assert "no-scaling" not in by
        kq = {m["id"]: m["value"] for m in scores["mistakes"]}
        if abs(mats["scores"].value(1, 0) - mats["scores"].value(0, 1)) > 0.02:
            assert math.isclose(kq["transposed-scores"], mats["scores"].value(1, 0), abs_tol=1e-9)
        for m in weights["mistakes"]:
            assert abs(m["value"] - weights["expected"]) > 2 * weights["tolerance"]
        assert all(m["feedback"] for m in weights["mistakes"])


def test_variant_regenerates_exactly_and_jobs_do_not_change_bytes(tmp_path):
    """Typst engine: --jobs 1 and --jobs 2 give byte-identical folders (PDFs included); --variant CODE
    rebuilds exactly that variant's files; the combined class PDF has one section (its pages, with the name) per
    student, each starting on an odd page. (The latex engine's own test is in test_quiz_latex.py.)"""
    from pypdf import PdfReader

    r = _write(tmp_path, "r.csv", "id,name\ns1,Ada Lovelace\ns2,Alan Turing\n")
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    for out, jobs in ((a, "1"), (b, "2")):
        code, _, err = run_cli("quiz", SPEC, "--roster", r, "-o", out, "--jobs", jobs, "--quiet")
        assert code == 0, err
    ta, tb = _tree(a), _tree(b)
    assert ta.keys() == tb.keys() and all(ta[k] == tb[k] for k in ta)
    assert {"class-worksheets.pdf", "class-answer-keys.pdf", "manifest.json", "manifest.csv", "moodle.xml",
            "canvas-qti.zip", "quiz.gift.txt"} <= set(ta)
    man = json.loads(ta["manifest.json"])
    code2 = man["variants"][1]["variant"]
    code, _, err = run_cli("quiz", SPEC, "--roster", r, "-o", c, "--variant", code2, "--quiet")
    assert code == 0, err
    tc = _tree(c)
    mine = {k for k in ta if k.startswith(f"variants/{code2}/")}
    assert mine and {k for k in tc if k.startswith("variants/")} == mine
    assert all(tc[k] == ta[k] for k in mine)
    # one section per student, in roster order
    whole = PdfReader(io.BytesIO(ta["class-worksheets.pdf"]))
    counts = [len(PdfReader(io.BytesIO(ta[f"variants/{v['variant']}/worksheet.pdf"])).pages) for v in man["variants"]]
    assert len(whole.pages) == sum(k + k % 2 for k in counts)   # a blank page after an odd count
    first_pages = [0, counts[0] + counts[0] % 2]
    for v, k in zip(man["variants"], first_pages):
        text = whole.pages[k].extract_text()
        assert v["student"]["name"] in text and v["variant"] in text


def test_variant_code_not_found(tmp_path):
    """An unknown --variant code is a one-line error and writes nothing."""
    code, _, err = run_cli("quiz", SPEC, "-n", "3", "--variant", "ZZZZZZ", "-o", tmp_path / "o", "--format", "moodle")
    assert code == 2 and "no variant ZZZZZZ" in err and not (tmp_path / "o").exists()


def test_spec_seed_override_and_numbered_variants():
    """--seed overrides the spec's seed; numbered variants get distinct codes."""
    spec = load_spec(SPEC)
    assert spec.seed == 2026
    a, b = plan(2026, count=5), plan(2027, count=5)
    assert len({v.code for v in a}) == 5 and [v.code for v in a] != [v.code for v in b]
    assert [v.code for v in plan(2026, count=3)] == [v.code for v in a[:3]]


def test_shipped_specs_load():
    """Every problems/quiz-*.toml loads and its first variant builds."""
    for p in sorted(PROBLEMS.glob("quiz-*.toml")):
        spec = load_spec(p)
        e = build_variant(spec, plan(spec.seed, count=1)[0], ())["entry"]
        qs = [q for part in e.get("parts", [e]) for q in part["questions"]]     # a mixed quiz: every part's
        assert qs and all(q["entries"] for q in qs)


def test_refuses_foreign_folder(tmp_path):
    """A non-empty folder not written by worked quiz is not replaced without --force."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    code, _, err = run_cli("quiz", SPEC, "-n", "1", "-o", out, "--format", "moodle")
    assert code == 2 and "--force" in err and (out / "notes.txt").read_text() == "keep me"


def test_manifest_json_is_json_dumps_of_the_whole_manifest():
    """manifest.json, assembled from the variants' variant.json texts, is byte for byte
    json.dumps(manifest, indent=2, ensure_ascii=False) + newline, with unicode, quotes, newlines in
    strings and nested lists in the entries, and for an empty list of variants."""
    from worked.quiz import manifest_json

    entries = [{"variant": "AB12CD", "student": {"id": "s1", "name": "Zoë \"Z\"\nO'Brien"},
                "questions": [{"expected": [[1.5, None], [-2.0, 3e-12]], "exact": ["√2/2", "e^{√2}"]}], "n": 1},
               {"variant": "EF34GH", "student": None, "questions": [], "empty": {}, "list": []}]
    head = {"format": "worked-quiz-manifest", "version": 1, "title": "Quiz — ä", "seed": 7,
            "family": {"range": [-2, 3]}, "formats": ["html"]}
    for vs in (entries, entries[:1], []):
        manifest = dict(head, variants=vs)
        texts = [(json.dumps(e, indent=2, ensure_ascii=False) + "\n").encode() for e in vs]
        assert manifest_json(manifest, texts) == (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode()


def test_html_and_tex_sheets_carry_name_line_and_variant_on_every_page(tmp_path):
    """The HTML and LaTeX sheets, like the Typst PDFs: a Name line to fill in on a numbered variant (-n), the
    student's name when there is a roster, and name and variant code in the running head / page footer."""
    code, _, err = run_cli("quiz", SPEC, "-n", "2", "--format", "html,tex", "-o", tmp_path / "n", "--quiet")
    assert code == 0, err
    for v in sorted((tmp_path / "n" / "variants").iterdir()):
        html = (v / "worksheet.html").read_text(encoding="utf-8")
        tex = (v / "worksheet.tex").read_text(encoding="utf-8")
        assert '<span>Name: <span class="blank"></span></span>' in html
        assert f"— variant {v.name}</span>" in html          # the running head (and the printed page footer)
        assert r"Name: \makebox[15em]{\hrulefill}" in tex
        assert f"--- variant {v.name}}}" in tex               # the page footer
    roster = _write(tmp_path, "r.csv", "id,name\ns1,Ada Lovelace\n")
    code, _, err = run_cli("quiz", SPEC, "--roster", roster, "--format", "html,tex", "-o", tmp_path / "r", "--quiet")
    assert code == 0, err
    (v,) = (tmp_path / "r" / "variants").iterdir()
    for kind in ("worksheet", "answer-key"):
        html = (v / f"{kind}.html").read_text(encoding="utf-8")
        tex = (v / f"{kind}.tex").read_text(encoding="utf-8")
        assert "Name: <b>Ada Lovelace</b>" in html and f"— Ada Lovelace — variant {v.name}</span>" in html
        assert r"Name: \textbf{Ada Lovelace}" in tex and f"--- Ada Lovelace --- variant {v.name}}}" in tex
