"""Canvas's own converter on our QTI zip: instructure's QTIMigrationTool (what Canvas runs on a QTI 1.2 import),
then what Canvas's ``Qti::NumericInteraction#get_canvas_answers`` reads from its output, compared with the
manifest. The tool is not a package (a GitHub repository, Python 3 + lxml): set WORKED_QTIMIGRATIONTOOL to a
checkout (and WORKED_QTIMIGRATIONTOOL_PYTHON to a Python that has lxml, default python3) to run it. CI checks
the same structure point by point in test_lms_exports.py."""
import io
import json
import os
import subprocess
import xml.etree.ElementTree as ET
import zipfile
from decimal import Decimal
from pathlib import Path

import pytest

from worked.quiz import run

from conftest import PROBLEMS

TOOL = os.environ.get("WORKED_QTIMIGRATIONTOOL")
pytestmark = pytest.mark.skipif(not TOOL, reason="set WORKED_QTIMIGRATIONTOOL to a checkout of "
                                                  "instructure/QTIMigrationTool to run Canvas's converter")
NS = {"t": "http://www.imsglobal.org/xsd/imsqti_v2p1"}


def _canvas_answers(item: ET.Element) -> list[dict]:
    """get_canvas_answers: for each responseIf with an <or>, the stringMatch value is the exact answer and
    varlte's value minus it the margin (BigDecimal); a vargt lower bound ending in 5 would make it a precision
    answer."""
    out = []
    for r_if in item.iter("{%s}responseIf" % NS["t"]):
        or_node = r_if.find("t:or", NS)
        if or_node is None:
            continue
        exact = or_node.find("t:stringMatch/t:baseValue", NS).text
        ops = {c.get("class"): c.find("t:baseValue", NS).text for c in or_node.iter("{%s}customOperator" % NS["t"])}
        assert "vargt" not in ops
        out.append({"exact": Decimal(exact), "margin": Decimal(ops["varlte"]) - Decimal(exact),
                    "low": Decimal(ops["vargte"]), "high": Decimal(ops["varlte"])})
    return out


@pytest.mark.parametrize("spec", ["quiz-1.toml", "quiz-2-causal.toml", "quiz-6-mixed.toml"])
def test_qtimigrationtool_output_as_canvas_reads_it(tmp_path, spec):
    """Every value question's window as Canvas reads it, and every question's points (a quiz with [[parts]]: every
    part's; its choice questions' options are checked in the test below)."""
    from worked.lms import all_questions

    man, test = _convert(tmp_path, spec, 3)
    cells = {(v["variant"], q["name"], e["ask"]): e for v in man["variants"] for q in all_questions(v)
             if q.get("type") != "choice" for e in q["entries"] if e["expected"] is not None}
    choices = {(v["variant"], q["name"]) for v in man["variants"] for q in all_questions(v) if q.get("type") == "choice"}
    troot = ET.parse(test).getroot()
    sections = troot.findall("t:testPart/t:assessmentSection/t:assessmentSection", NS)
    points = {q["name"]: Decimal(repr(q["points"])) for q in all_questions(man["variants"][0])}
    got_points: dict[str, Decimal] = {}
    seen = set()
    for sec in sections:
        sel = sec.find("t:selection", NS)
        assert sel.get("select") == "1"                                   # a question group drawing one item
        ppi = Decimal(sel.find("t:selectionExtension/t:points_per_item", NS).text)
        refs = sec.findall("t:assessmentItemRef", NS)
        assert len(refs) == len(man["variants"])
        for ref in refs:
            item = ET.parse(test.parent / ref.get("href")).getroot()
            code, qname, ask = item.get("title").split(" ", 2)
            fields = {f.get("name"): f.get("value") for f in item.iter("{%s}instructureField" % NS["t"])}
            assert Decimal(fields["points_possible"]) == ppi
            if (code, qname) in choices:
                assert fields["question_type"] == "multiple_choice_question"
                seen.add((code, qname))
                continue
            assert fields["question_type"] == "numerical_question"
            e = cells[(code, qname, ask)]
            (a,) = _canvas_answers(item)
            exact, tol = Decimal(repr(e["expected"])), Decimal(repr(e["tolerance"]))
            # the spec's window as the converter kept it (vargte/varlte), and as Canvas reads it: an exact answer
            # at the exact value with margin tol, so Canvas accepts exactly [exact − tol, exact + tol]
            assert (a["low"], a["high"]) == (exact - tol, exact + tol)
            assert a["exact"] == exact and a["margin"] == tol
            seen.add((code, qname, ask))
        got_points[qname] = got_points.get(qname, 0) + ppi
    assert seen == set(cells) | choices and got_points == points
    assert Path(test).read_text().count("<assessmentSection") == len(sections) + 1


def _convert(tmp_path, spec, count):
    out = run(PROBLEMS / spec, count=count, outdir=tmp_path / "q", formats="qti", jobs=1, quiet=True)[0]
    src = tmp_path / "in"
    zipfile.ZipFile(io.BytesIO((out / "canvas-qti.zip").read_bytes())).extractall(src)
    dest = tmp_path / "converted"
    py = os.environ.get("WORKED_QTIMIGRATIONTOOL_PYTHON", "python3")
    r = subprocess.run([py, "migrate.py", "--ucvars", "--nogui", "--overwrite", f"--cpout={dest}", str(src)],
                       cwd=TOOL, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    (test,) = (dest / "assessmentTests").iterdir()
    return json.loads((out / "manifest.json").read_text()), test


def _text(el) -> str:
    return "".join(el.itertext()).strip()


@pytest.mark.parametrize("spec", ["quiz-5-choice.toml", "quiz-6-mixed.toml"])
def test_qtimigrationtool_reads_the_choice_questions(tmp_path, spec):
    """What Canvas's ``Qti::ChoiceInteraction`` reads from the converter's output: the simpleChoice texts are the
    options in their order, the one a responseIf gives SCORE 100 is the right one, each option's modalFeedback
    is its feedback (the mistake's words); every question group (of every part) draws one item per student."""
    from worked.lms import all_questions, sections

    man, test = _convert(tmp_path, spec, 3)
    options = {(v["variant"], q["name"]): q["options"] for v in man["variants"] for q in all_questions(v)
               if q.get("type") == "choice"}
    troot = ET.parse(test).getroot()
    groups = troot.findall("t:testPart/t:assessmentSection/t:assessmentSection", NS)
    assert len(groups) == sum(len(q["entries"]) for s in sections(man["variants"][0]) for q in s["questions"])
    seen = set()
    for sec in groups:
        assert sec.find("t:selection", NS).get("select") == "1"
        for ref in sec.findall("t:assessmentItemRef", NS):
            item = ET.parse(test.parent / ref.get("href")).getroot()
            code, qname, _ = item.get("title").split(" ", 2)
            fields = {f.get("name"): f.get("value") for f in item.iter("{%s}instructureField" % NS["t"])}
            if (code, qname) not in options:
                assert fields["question_type"] == "numerical_question"
                continue
            assert fields["question_type"] == "multiple_choice_question"
            opts = options[(code, qname)]
            choices = item.findall(".//t:choiceInteraction/t:simpleChoice", NS)
            assert [_text(c) for c in choices] == [o["value"] for o in opts]
            ident = {c.get("identifier"): o for c, o in zip(choices, opts)}
            scored = [r_if.find("t:match/t:baseValue", NS).text for r_if in item.iter("{%s}responseIf" % NS["t"])
                      if any(s.get("identifier") == "SCORE" and _text(s) == "100" for s in r_if.findall("t:setOutcomeValue", NS))
                      and r_if.find("t:match", NS) is not None]
            assert [ident[s]["right"] for s in scored] == [True]
            fb = {m.get("identifier"): _text(m) for m in item.findall("t:modalFeedback", NS)}
            for i, o in ident.items():
                assert fb[i + "_fb"] == ("Correct." if o["right"] else o["feedback"])
            seen.add((code, qname))
    assert seen == set(options)
