"""LMS exports parse back and carry the solver's answers and tolerances: Moodle XML (numerical + Cloze, 0 %
answers for known mistakes), Canvas QTI 1.2 zip (numeric ranges), GIFT (numeric answers)."""
import io
import json
import math
import re
import xml.etree.ElementTree as ET
import zipfile

import pytest

from worked.problem import Problem
from worked.quiz import run
from worked.solver import solve

from conftest import PROBLEMS


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    out = tmp_path_factory.mktemp("lms") / "q"
    for spec in ("quiz-1.toml", "quiz-2-causal.toml"):
        run(PROBLEMS / spec, count=3, outdir=out / spec, formats="moodle,qti,gift", jobs=1, quiet=True)
    return out


def _expected(batch, spec):
    """(variant code, entry ask) → (solver value, tolerance) from re-solving each stored problem."""
    man = json.loads((batch / spec / "manifest.json").read_text())
    out = {}
    for v in man["variants"]:
        mats = solve(Problem.from_dict(v["problem"])).matrices()
        for q in v["questions"]:
            for e in q["entries"]:
                val = mats[q["matrix"]].value(e["row"] - 1, e["col"] - 1)
                out[(v["variant"], e["ask"])] = (val, e["tolerance"], e["mistakes"], q)
    return man, out


SPECS = ["quiz-1.toml", "quiz-2-causal.toml"]


@pytest.mark.parametrize("spec", SPECS)
def test_moodle_xml_answers(batch, spec):
    """Every numerical/Cloze answer at 100 % is the solver's value with the tolerance; mistakes are 0 % with feedback."""
    man, exp = _expected(batch, spec)
    root = ET.parse(batch / spec / "moodle.xml").getroot()
    assert root.tag == "quiz"
    seen = set()
    cats = [q for q in root.findall("question") if q.get("type") == "category"]
    assert len(cats) == len(man["variants"])
    for q in root.findall("question"):
        kind = q.get("type")
        if kind == "category":
            continue
        code, qname, ask = q.find("name/text").text.split(" ", 2)
        if kind == "numerical":
            answers = q.findall("answer")
            right = [a for a in answers if a.get("fraction") == "100"]
            assert len(right) == 1
            val, tol, mistakes, spec_q = exp[(code, ask)]
            assert math.isclose(float(right[0].find("text").text), val, abs_tol=1e-6)
            assert math.isclose(float(right[0].find("tolerance").text), tol, rel_tol=1e-9)
            assert float(q.find("defaultgrade").text) == spec_q["points"]
            wrong = [a for a in answers if a.get("fraction") == "0"]
            assert len(wrong) == len(mistakes)
            for a, m in zip(wrong, mistakes):
                assert math.isclose(float(a.find("text").text), m["value"], abs_tol=1e-6)
                assert abs(float(a.find("text").text) - val) > 2 * tol
                assert a.find("feedback/text").text == m["feedback"]
            seen.add((code, ask))
        else:
            assert kind == "cloze"
            text = q.find("questiontext/text").text
            assert "\\begin{bmatrix}" in text  # the variant's matrices as LaTeX for MathJax
            for cell, body in re.findall(r"<tr><td>([^<]+)</td><td>\{1:NUMERICAL:(.*?)\}</td></tr>", text):
                parts = re.split(r"(?<!\\)~", body)
                m = re.match(r"=([-0-9.]+):([0-9.]+)#", parts[0])
                val, tol, mistakes, _ = exp[(code, cell)]
                assert math.isclose(float(m.group(1)), val, abs_tol=1e-6) and math.isclose(float(m.group(2)), tol)
                wrong = [re.match(r"%0%([-0-9.]+):([0-9.]+)#(.*)", p, re.S) for p in parts[1:]]
                assert [float(w.group(1)) for w in wrong] == pytest.approx([mm["value"] for mm in mistakes], abs=1e-6)
                for w, mm in zip(wrong, mistakes):
                    assert re.sub(r"\\(.)", r"\1", w.group(3)) == mm["feedback"]
                seen.add((code, cell))
    live = {k for k, v in exp.items() if v[0] is not None}
    assert seen == live


@pytest.mark.parametrize("spec", SPECS)
def test_qti_zip_canvas_structure_and_ranges(batch, spec):
    """imsmanifest.xml names the assessment file; every item is a numerical_question whose range is value ± tolerance."""
    man, exp = _expected(batch, spec)
    z = zipfile.ZipFile(io.BytesIO((batch / spec / "canvas-qti.zip").read_bytes()))
    names = z.namelist()
    assert "imsmanifest.xml" in names
    mroot = ET.fromstring(z.read("imsmanifest.xml"))
    ns = {"cp": "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"}
    res = mroot.find("cp:resources/cp:resource", ns)
    assert res.get("type") == "imsqti_xmlv1p2"
    href = res.find("cp:file", ns).get("href")
    assert href in names
    q = {"q": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"}
    root = ET.fromstring(z.read(href))
    sections = root.findall("q:assessment/q:section/q:section", q)
    assert len(sections) == len(man["variants"])
    seen = set()
    for sec in sections:
        for item in sec.findall("q:item", q):
            code, qname, ask = item.get("title").split(" ", 2)
            meta = {f.find("q:fieldlabel", q).text: f.find("q:fieldentry", q).text
                    for f in item.findall("q:itemmetadata/q:qtimetadata/q:qtimetadatafield", q)}
            assert meta["question_type"] == "numerical_question"
            assert item.find("q:presentation/q:response_str/q:render_fib", q).get("fibtype") == "Decimal"
            _check_equation_images(item.find("q:presentation/q:material/q:mattext", q).text, man, code)
            cond = item.find("q:resprocessing/q:respcondition/q:conditionvar", q)
            val, tol, _, spec_q = exp[(code, ask)]
            eq = float(cond.find("q:or/q:varequal", q).text)
            lo = float(cond.find("q:or/q:and/q:vargte", q).text)
            hi = float(cond.find("q:or/q:and/q:varlte", q).text)
            assert math.isclose(eq, val, abs_tol=1e-6)
            assert math.isclose(lo, val - tol, abs_tol=1e-6) and math.isclose(hi, val + tol, abs_tol=1e-6)
            assert item.find("q:resprocessing/q:respcondition/q:setvar", q).text == "100"
            seen.add((code, ask))
    assert seen == {k for k, v in exp.items() if v[0] is not None}


def _given(man, code):
    """The given matrices of a variant as the page model has them (the worksheet shows the same)."""
    from worked.render import view

    v = next(v for v in man["variants"] if v["variant"] == code)
    return view.problem_page(Problem.from_dict(v["problem"]))["given"]


def _check_equation_images(html, man, code):
    """A Canvas question's math is one editable equation image per given matrix: the LaTeX printed from the
    trees in data-equation-content (and, twice URL-encoded, in the /equation_images/ path), and MathML
    printed from the same trees in data-mathml. No hand-made or converted math."""
    from html.parser import HTMLParser
    from urllib.parse import unquote

    from worked import printers
    imgs = []

    class P(HTMLParser):
        def handle_starttag(self, tag, attrs):
            if tag == "img":
                imgs.append(dict(attrs))

    P().feed(html)
    given = _given(man, code)
    assert len(imgs) == len(given) and "<math" not in html.replace(" data-mathml=", "")
    for img, m in zip(imgs, given):
        latex = img["data-equation-content"]
        assert img["class"] == "equation_image" and img["title"] == latex
        assert unquote(unquote(img["src"].removeprefix("/equation_images/"))) == latex
        cells = [[c["node"] for c in row] for row in m["cells"]]
        assert latex == printers.latex(m["head"]) + r"\begin{bmatrix} " + r" \\ ".join(
            " & ".join(printers.latex(x) for x in row) for row in cells) + r" \end{bmatrix}"
        mathml = img["data-mathml"]
        assert ET.fromstring(mathml).tag == "{http://www.w3.org/1998/Math/MathML}math"
        assert f"<mrow>{printers.mathml(m['symbol'])}<mo>{m['rel']}</mo><mrow><mo>[</mo><mtable>" in mathml
        for row in cells:
            assert "<mtr>" + "".join(f"<mtd>{printers.mathml(x)}</mtd>" for x in row) + "</mtr>" in mathml


def _gift_questions(text):
    """A small GIFT reader: (name, body text, answers) per question; answers = [(percent, value, tol, feedback)]."""
    out = []
    for block in re.split(r"\n\s*\n", text):
        block = block.strip()
        if not block or block.startswith("//") or block.startswith("$CATEGORY"):
            continue
        m = re.match(r"::(.*?)(?<!\\)::(.*)", block, re.S)
        name, rest = m.group(1), m.group(2)
        k = max(i for i in range(len(rest)) if rest[i] == "{" and (i == 0 or rest[i - 1] != "\\"))
        body, ans = rest[:k], rest[k + 1:].rstrip()
        assert ans.endswith("}") and ans.startswith("#")
        answers = []
        for a in re.findall(r"=(%\d+%)?([-0-9.]+):([0-9.]+)#(.*)", ans[1:-1]):
            pct = int(a[0].strip("%")) if a[0] else 100
            answers.append((pct, float(a[1]), float(a[2]), re.sub(r"\\(.)", r"\1", a[3]).strip()))
        out.append((re.sub(r"\\(.)", r"\1", name), body, answers))
    return out


@pytest.mark.parametrize("spec", SPECS)
def test_gift_numeric_answers(batch, spec):
    """Each GIFT question is {#=value:tolerance …}; the 100 % value is the solver's, mistakes are =%0% with feedback."""
    man, exp = _expected(batch, spec)
    qs = _gift_questions((batch / spec / "quiz.gift.txt").read_text())
    seen = set()
    for name, body, answers in qs:
        code, qname, ask = name.split(" ", 2)
        val, tol, mistakes, _ = exp[(code, ask)]
        assert answers[0][0] == 100
        assert math.isclose(answers[0][1], val, abs_tol=1e-6) and math.isclose(answers[0][2], tol)
        assert [(a[0], a[3]) for a in answers[1:]] == [(0, m["feedback"]) for m in mistakes]
        assert "\\(" in body and "bmatrix" in body
        # the LaTeX row break \\ survives GIFT's escaping: written \\\\, read back as \\
        assert r" \\\\ " in body and r"\begin{bmatrix}" in re.sub(r"\\(.)", r"\1", body)
        seen.add((code, ask))
    assert seen == {k for k, v in exp.items() if v[0] is not None}


def test_exports_are_deterministic(tmp_path):
    """The same spec and seed give byte-identical LMS files."""
    a = run(PROBLEMS / "quiz-1.toml", count=2, outdir=tmp_path / "a", formats="moodle,qti,gift", jobs=1, quiet=True)[0]
    b = run(PROBLEMS / "quiz-1.toml", count=2, outdir=tmp_path / "b", formats="moodle,qti,gift", jobs=2, quiet=True)[0]
    for f in ("moodle.xml", "canvas-qti.zip", "quiz.gift.txt", "manifest.json", "manifest.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes()
