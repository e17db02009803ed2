"""LMS exports read back the way their importers read them (see tests/lms_readers.py): every answer,
tolerance, point and mistake feedback equals the manifest's.

- Moodle XML: numerical questions (``<defaultgrade>`` is the mark) and Cloze questions (the mark is the
  sum of the whole-number sub-question weights), marks in proportion to the points; the first right answer is
  the value at the places asked with the tolerance the rounding leaves, the second the exact value with the
  spec's tolerance, so full marks go to exactly [exact ± tol]; categories split as Moodle splits them; stable idnumbers.
- Canvas QTI: the structure QTIMigrationTool reads (a question group of one item per variant for each
  answered cell, ``selection_number`` 1, ``points_per_item``), Canvas's exact answer and margin,
  ``assessment_meta.xml``'s points.
- GIFT: parsed by gift-pegjs (npm), the third-party GIFT parser.
"""
import html
import io
import json
import math
import re
import xml.etree.ElementTree as ET
import zipfile
from decimal import Decimal
from fractions import Fraction

import pytest

from worked.problem import Problem
from worked.quiz import run

from conftest import PROBLEMS
from lms_readers import (canvas_numeric, gift_parse, moodle_category_levels, moodle_cloze, moodle_gift_category,
                         needs_node, rounded)

Q = {"q": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"}
CLOZE_SPEC = """
title = "Cloze quiz"
seed = 11

[family]
tokens = 3
d_model = 4
d_k = 2
range = [-2, 3]
mask = "causal"

[[questions]]
ask = "scores[2,*]"
points = 2
tolerance = 0.01

[[questions]]
ask = "weights[2,*]"
points = 3
tolerance = 0.01

[[questions]]
ask = "Z[1,*]"
points = 4
tolerance = 0.02
"""
SPECS = ["quiz-1.toml", "quiz-2-causal.toml", "quiz-3-cross.toml", "quiz-4-decoder.toml", "cloze.toml"]


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    root = tmp_path_factory.mktemp("lms")
    (root / "cloze.toml").write_text(CLOZE_SPEC)
    out = root / "q"
    for spec in SPECS:
        path = root / spec if spec == "cloze.toml" else PROBLEMS / spec
        run(path, count=3, outdir=out / spec, formats="moodle,qti,gift", jobs=1, quiet=True)
    return out


def _manifest(batch, spec):
    man = json.loads((batch / spec / "manifest.json").read_text())
    cells = {}
    for v in man["variants"]:
        places = Problem.from_dict(v["problem"]).decimals
        for q in v["questions"]:
            for e in q["entries"]:
                cells[(v["variant"], q["name"], e["ask"])] = (e, q, places)
    return man, cells


def _check_answer(value, tol, e, places):
    """The first 100 % answer is the manifest's value at the places asked (the correct answer shown), with the
    tolerance left after the rounding: its window lies inside the spec's [exact ± tol]."""
    value, tol = Decimal(value), Decimal(tol)
    assert value == rounded(e["expected"], places)
    v, t = Decimal(repr(e["expected"])), Decimal(repr(e["tolerance"]))
    assert tol == t - abs(v - value) >= 0
    assert v - t <= value - tol and value + tol <= v + t


def _check_right(answers, e, places):
    """The 100 % answers [(value, tolerance)]: the rounded one (unless the rounding leaves no tolerance), then the
    exact value with the spec's tolerance (one answer when the rounded value is exact)."""
    v, t = Decimal(repr(e["expected"])), Decimal(repr(e["tolerance"]))
    r = rounded(e["expected"], places)
    if r == v:
        assert [(Decimal(a), Decimal(b)) for a, b in answers] == [(v, t)]
        return
    *first, last = answers
    assert (Decimal(last[0]), Decimal(last[1])) == (v, t)
    assert len(first) == (1 if abs(v - r) <= t else 0)
    for a, b in first:
        _check_answer(a, b, e, places)


def _points(man):
    return {q["name"]: Decimal(repr(q["points"])) for q in man["variants"][0]["questions"]}


@pytest.mark.parametrize("spec", SPECS)
def test_moodle_xml_as_moodle_reads_it(batch, spec):
    man, cells = _manifest(batch, spec)
    root = ET.parse(batch / spec / "moodle.xml").getroot()
    assert root.tag == "quiz"
    seen, ids = set(), []
    marks: dict[tuple[str, str], Decimal] = {}
    cats = [q for q in root.findall("question") if q.get("type") == "category"]
    assert [moodle_category_levels(c.find("category/text").text) for c in cats] == [
        ["$course$", "top", f"{man['title']} (seed {man['seed']})", f"Variant {v['variant']}"] for v in man["variants"]]
    for q in root.findall("question"):
        kind = q.get("type")
        if kind == "category":
            continue
        ids.append(q.find("idnumber").text)
        code, qname, *_ = q.find("name/text").text.split(" ")
        if kind == "numerical":
            ask = q.find("name/text").text.split(" ")[-1]
            e, spec_q, places = cells[(code, qname, ask)]
            answers = q.findall("answer")
            right = [a for a in answers if a.get("fraction") == "100"]
            assert [a.get("fraction") for a in answers] == ["100"] * len(right) + ["0"] * len(e["mistakes"])
            _check_right([(a.find("text").text, a.find("tolerance").text) for a in right], e, places)
            for a, m in zip(answers[len(right):], e["mistakes"]):
                assert float(a.find("text").text) == m["value"]
                assert float(a.find("tolerance").text) == e["tolerance"]
                assert a.find("feedback").get("format") == "html"
                assert a.find("feedback/text").text == m["feedback"]   # no HTML special characters in ours
            marks[(code, qname)] = marks.get((code, qname), 0) + Decimal(q.find("defaultgrade").text)
            seen.add((code, qname, ask))
        else:
            assert kind == "cloze"
            text = q.find("questiontext/text").text
            assert "\\begin{bmatrix}" in text  # the variant's matrices as LaTeX for MathJax
            mark, subs, stored = moodle_cloze(text)
            marks[(code, qname)] = marks.get((code, qname), 0) + mark
            asks = re.findall(r"<tr><td>([^<]+)</td><td>\{#\d+\}</td></tr>", stored)
            assert len(asks) == len(subs)
            for ask, sub in zip(asks, subs):
                e, spec_q, places = cells[(code, qname, ask)]
                assert sub["numerical"]
                right = [a for a in sub["answers"] if a[0] == 1.0]
                wrong = sub["answers"][len(right):]
                assert all(fb == "Correct." for *_, fb in right)
                _check_right([(a, t) for _, a, t, _ in right], e, places)
                assert [(f, float(a), float(t)) for f, a, t, _ in wrong] == [
                    (0.0, m["value"], e["tolerance"]) for m in e["mistakes"]]
                assert [html_text(fb) for *_, fb in wrong] == [m["feedback"] for m in e["mistakes"]]
                seen.add((code, qname, ask))
    assert seen == {k for k, (e, _, _) in cells.items() if e["expected"] is not None}
    # every mark is K × the points, K the smallest whole number that makes every Cloze weight whole
    points = _points(man)
    k = math.lcm(*[(Fraction(points[q["name"]]) / len([e for e in q["entries"] if e["expected"] is not None])).denominator
                   for q in man["variants"][0]["questions"] if len(q["entries"]) > 1] or [1])
    assert k == {"quiz-1.toml": 6, "cloze.toml": 1}.get(spec, k)
    assert marks == {(v["variant"], n): k * p for v in man["variants"] for n, p in points.items()}
    info = cats[0].find("info/text").text
    assert (f"Marks are {k} × the points" in info) == (k != 1) and f"seed {man['seed']}" in info
    # one Moodle question per ask, in the spec's order (worked grade reads Moodle's Response 1, 2, … so)
    per_variant = [q for q in root.findall("question")]
    assert [q.find("name/text").text.split(" ")[1] for q in per_variant if q.get("type") != "category"] == [
        q["name"] for v in man["variants"] for q in v["questions"]]
    assert len(ids) == len(set(ids)) and all(re.fullmatch(r"[A-Z0-9]{6}-[A-Za-z0-9_.-]+", i) for i in ids)


def html_text(fragment):
    """What a browser shows of an HTML fragment without tags."""
    return html.unescape(fragment)


def _zip(batch, spec):
    z = zipfile.ZipFile(io.BytesIO((batch / spec / "canvas-qti.zip").read_bytes()))
    return z, {n: z.read(n) for n in z.namelist()}


@pytest.mark.parametrize("spec", SPECS)
def test_qti_as_canvas_reads_it(batch, spec):
    """Point by point what QTIMigrationTool's classes accept where (its CheckLocation parents) and what Canvas
    takes from it: one question group per answered cell holding every variant's item, selection of 1,
    points per item adding up to the question's points; each item an exact answer with a margin."""
    man, cells = _manifest(batch, spec)
    z, files = _zip(batch, spec)
    cp = {"cp": "http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1"}
    mroot = ET.fromstring(files["imsmanifest.xml"])
    res = {r.get("identifier"): r for r in mroot.findall("cp:resources/cp:resource", cp)}
    qti = [r for r in res.values() if r.get("type") == "imsqti_xmlv1p2"]
    assert len(qti) == 1
    href = qti[0].find("cp:file", cp).get("href")
    meta_res = res[qti[0].find("cp:dependency", cp).get("identifierref")]
    assert meta_res.get("type") == "associatedcontent/imscc_xmlv1p1/learning-application-resource"
    meta_href = meta_res.find("cp:file", cp).get("href")
    assert {href, meta_href, "imsmanifest.xml"} == set(files)

    root = ET.fromstring(files[href])
    assert root.tag == "{%s}questestinterop" % Q["q"]
    (assessment,) = root.findall("q:assessment", Q)
    assert assessment.get("title") == man["title"]
    (top,) = assessment.findall("q:section", Q)
    groups = top.findall("q:section", Q)
    assert not top.findall("q:item", Q)
    points = _points(man)
    total = Decimal(0)
    per_question: dict[str, Decimal] = {}
    seen = set()
    for g in groups:
        sel = g.find("q:selection_ordering/q:selection", Q)
        assert sel.find("q:selection_number", Q).text == "1"
        ppi = Decimal(sel.find("q:selection_extension/q:points_per_item", Q).text)
        items = g.findall("q:item", Q)
        assert len(items) == len(man["variants"])
        assert len({i.get("title").split(" ", 2)[2] for i in items}) == 1   # the same cell of every variant
        qname = items[0].get("title").split(" ")[1]
        per_question[qname] = per_question.get(qname, 0) + ppi
        total += ppi
        for item in items:
            code, qn, ask = item.get("title").split(" ", 2)
            e, _, places = cells[(code, qn, ask)]
            meta = {f.find("q:fieldlabel", Q).text: f.find("q:fieldentry", Q).text
                    for f in item.findall("q:itemmetadata/q:qtimetadata/q:qtimetadatafield", Q)}
            assert meta["question_type"] == "numerical_question" and Decimal(meta["points_possible"]) == ppi
            pres = item.find("q:presentation", Q)
            assert pres.find("q:material/q:mattext", Q).get("texttype") == "text/html"
            rs = pres.find("q:response_str", Q)
            assert rs.get("ident") == "response1" and rs.get("rcardinality") == "Single"
            assert rs.find("q:render_fib", Q).get("fibtype") == "Decimal"
            assert rs.find("q:render_fib/q:response_label", Q) is not None
            _check_equation_images(pres.find("q:material/q:mattext", Q).text, man, code)
            rp = item.find("q:resprocessing", Q)
            assert rp.find("q:outcomes/q:decvar", Q).get("varname") == "SCORE"
            (cond,) = rp.findall("q:respcondition", Q)
            assert cond.find("q:setvar", Q).text == "100" and cond.find("q:setvar", Q).get("varname") == "SCORE"
            got = canvas_numeric(cond.find("q:conditionvar", Q), Q)
            assert got["type"] == "exact_answer"
            assert (got["exact"], got["margin"]) == (Decimal(repr(e["expected"])), Decimal(repr(e["tolerance"])))
            lower = Decimal(cond.find("q:conditionvar/q:or/q:and/q:vargte", Q).text)
            assert got["exact"] - lower == got["margin"]
            seen.add((code, qn, ask))
    assert per_question == points
    assert seen == {k for k, (e, _, _) in cells.items() if e["expected"] is not None}

    meta = ET.fromstring(files[meta_href])
    cn = {"c": "http://canvas.instructure.com/xsd/cccv1p0"}
    assert meta.find("c:title", cn).text == man["title"]
    assert Decimal(meta.find("c:points_possible", cn).text) == total == sum(points.values())
    assert meta.find("c:assignment/c:points_possible", cn).text == meta.find("c:points_possible", cn).text
    assert meta.find("c:quiz_type", cn).text == "assignment" and meta.find("c:allowed_attempts", cn).text == "1"


def _given(man, code):
    """The given matrices of a variant as the page model has them (the worksheet shows the same)."""
    from worked.render import view

    v = next(v for v in man["variants"] if v["variant"] == code)
    return view.problem_page(Problem.from_dict(v["problem"])).given


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


@needs_node
@pytest.mark.parametrize("spec", SPECS)
def test_gift_as_gift_pegjs_reads_it(batch, spec):
    """gift-pegjs parses the file; every question is Numerical with the answer at the places asked and a
    tolerance covering the manifest's, the mistakes as 0 % answers with their feedback, and the idnumber."""
    man, cells = _manifest(batch, spec)
    text = (batch / spec / "quiz.gift.txt").read_text()
    parsed = gift_parse(text)
    cats = [p["title"] for p in parsed if p["type"] == "Category"]
    lines = [ln for ln in text.splitlines() if ln.startswith("$CATEGORY:")]
    assert len(cats) == len(lines) == len(man["variants"])
    assert [moodle_category_levels(moodle_gift_category(ln)) for ln in lines] == [
        ["$course$", "top", f"{man['title']} (seed {man['seed']})", f"Variant {v['variant']}"] for v in man["variants"]]
    seen, ids = set(), []
    for p in parsed:
        if p["type"] == "Category":
            continue
        assert p["type"] == "Numerical" and p["stem"]["format"] == "html"
        code, qname, ask = p["title"].split(" ", 2)
        e, q, places = cells[(code, qname, ask)]
        right = [c for c in p["choices"] if c["weight"] is None]
        wrong = p["choices"][len(right):]
        for c in right:
            assert c["isCorrect"] and c["feedback"]["text"] == "Correct." and c["text"]["type"] == "range"
        _check_right([(repr(c["text"]["number"]), repr(c["text"]["range"])) for c in right], e, places)
        assert [(w["weight"], w["text"]["number"], w["text"]["range"], w["feedback"]["text"]) for w in wrong] == [
            (0, m["value"], e["tolerance"], m["feedback"]) for m in e["mistakes"]]
        # the matrices' LaTeX row breaks survive: \\ in the parsed text
        assert r"\begin{bmatrix}" in p["stem"]["text"] and r" \\ " in p["stem"]["text"]
        ids.append(p["id"])
        seen.add((code, qname, ask))
    assert seen == {k for k, (e, _, _) in cells.items() if e["expected"] is not None}
    assert len(ids) == len(set(ids)) and None not in ids


def test_exports_are_deterministic(tmp_path):
    """The same spec and seed give byte-identical LMS files."""
    a = run(PROBLEMS / "quiz-1.toml", count=2, outdir=tmp_path / "a", formats="moodle,qti,gift", jobs=1, quiet=True)[0]
    b = run(PROBLEMS / "quiz-1.toml", count=2, outdir=tmp_path / "b", formats="moodle,qti,gift", jobs=2, quiet=True)[0]
    for f in ("moodle.xml", "canvas-qti.zip", "quiz.gift.txt", "manifest.json", "manifest.csv"):
        assert (a / f).read_bytes() == (b / f).read_bytes()


def test_idnumbers_stable_when_the_roster_grows(tmp_path):
    """A variant's idnumbers depend on its student (via the code) and the question, not on its place."""
    r1 = tmp_path / "r1.csv"
    r2 = tmp_path / "r2.csv"
    r1.write_text("id,name\ns1,Ann\ns2,Bo\n")
    r2.write_text("id,name\ns0,Cy\ns2,Bo\ns1,Ann\n")
    ids = []
    for r in (r1, r2):
        out = run(PROBLEMS / "quiz-1.toml", roster=r, outdir=tmp_path / r.stem, formats="moodle", jobs=1, quiet=True)[0]
        ids.append({q.find("idnumber").text for q in ET.parse(out / "moodle.xml").getroot().findall("question")
                    if q.get("type") != "category"})
    assert ids[0] < ids[1]


def _first_match(answers, x):
    """Moodle's numerical grading: the fraction of the first answer with |x − answer| ≤ tolerance (0 if none)."""
    for frac, a, t in answers:
        if abs(x - Decimal(a)) <= Decimal(t):
            return frac
    return 0


def _moodle_xml_answers(path):
    """{(code, question name, ask): [(fraction, answer, tolerance)]} as Moodle reads moodle.xml."""
    out = {}
    for q in ET.parse(path).getroot().findall("question"):
        if q.get("type") == "numerical":
            code, qname, ask = q.find("name/text").text.split(" ", 2)
            out[(code, qname, ask)] = [(float(a.get("fraction")) / 100, a.find("text").text, a.find("tolerance").text)
                                       for a in q.findall("answer")]
        elif q.get("type") == "cloze":
            code, qname, _ = q.find("name/text").text.split(" ", 2)
            _, subs, stored = moodle_cloze(q.find("questiontext/text").text)
            asks = re.findall(r"<tr><td>([^<]+)</td><td>\{#\d+\}</td></tr>", stored)
            for ask, sub in zip(asks, subs):
                out[(code, qname, ask)] = [(f, a, t) for f, a, t, _ in sub["answers"]]
    return out


def _gift_answers(text):
    out = {}
    for p in gift_parse(text):
        if p["type"] == "Category":
            continue
        code, qname, ask = p["title"].split(" ", 2)
        out[(code, qname, ask)] = [(1.0 if c["weight"] is None else c["weight"] / 100, repr(c["text"]["number"]),
                                    repr(c["text"]["range"])) for c in p["choices"]]
    return out


def _qti_answers(zbytes):
    z = zipfile.ZipFile(io.BytesIO(zbytes))
    (name,) = [n for n in z.namelist() if n.endswith(".xml") and "/" in n and not n.endswith("assessment_meta.xml")]
    out = {}
    for item in ET.fromstring(z.read(name)).iter("{%s}item" % Q["q"]):
        code, qn, ask = item.get("title").split(" ", 2)
        got = canvas_numeric(item.find("q:resprocessing/q:respcondition/q:conditionvar", Q), Q)
        assert got["type"] == "exact_answer"
        out[(code, qn, ask)] = [(1.0, got["exact"], got["margin"])]   # Canvas: within margin of exact
    return out


@needs_node
def test_every_lms_accepts_exactly_the_spec_window(tmp_path):
    """Issue 25: for every asked cell of quiz-1 -n 10, Moodle XML, GIFT and Canvas give full marks to exactly
    [exact − tol, exact + tol]: exact ± 0.999 tol accepted and exact ± 1.001 tol refused, on each side (the
    rounded value alone with tol + |exact − r| accepted up to tol + 2|exact − r| on one side)."""
    out = run(PROBLEMS / "quiz-1.toml", count=10, outdir=tmp_path / "q", formats="moodle,qti,gift", jobs=1,
              quiet=True)[0]
    man, cells = _manifest(out.parent, out.name)
    asked_cells = {k: e for k, (e, _, _) in cells.items() if e["expected"] is not None}
    assert len(asked_cells) == 100
    readers = {"moodle.xml": _moodle_xml_answers(out / "moodle.xml"),
               "quiz.gift.txt": _gift_answers((out / "quiz.gift.txt").read_text()),
               "canvas-qti.zip": _qti_answers((out / "canvas-qti.zip").read_bytes())}
    for fname, answers in readers.items():
        assert set(answers) == set(asked_cells), fname
        for key, e in asked_cells.items():
            v, t = Decimal(repr(e["expected"])), Decimal(repr(e["tolerance"]))
            for side in (-1, 1):
                inside, outside = v + side * Decimal("0.999") * t, v + side * Decimal("1.001") * t
                assert _first_match(answers[key], inside) == 1.0, (fname, key, inside)
                assert _first_match(answers[key], outside) != 1.0, (fname, key, outside)
            assert _first_match(answers[key], v) == 1.0
