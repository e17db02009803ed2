"""Hostile text in a quiz's title, tokens and roster: every LMS export stays well-formed and shows the text
as typed (read the way Moodle, Canvas and gift-pegjs read it), student names and ids never reach an LMS
file, and a roster that no file can show is refused with one line naming the file, the line and what was
expected (exit 2)."""
import html
import io
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
import zipfile

import pytest

from worked.quiz import run

from lms_readers import gift_parse, moodle_category_levels, moodle_cloze, moodle_gift_category, needs_node

TITLE = "Quiz #3: {x} = ~y / A=B \\alpha // ]]> <script>alert(1)</script>\nline two\u0001 & &amp; \\\\ end/"
WORDS = ["]]>", "<script>x</script>", "{1:NM:=1}", "\\(x\\)", "a/b\u0007", "#~=:\\"]
SHOWN_WORDS = [w.replace("\u0007", "\u2407") for w in WORDS]   # the bell as its control picture
NAMES = ["Eve ]]> <i>x</i>", "{}=~#: \\beta / Bob", "Zoë & Ann"]
SPEC = f"""
title = {json.dumps(TITLE)}
seed = 7

[family]
words = {json.dumps(WORDS)}
d_model = 3
d_k = 2
range = [-2, 2]

[[questions]]
ask = "scores[2,3]"
points = 1
tolerance = 0.01

[[questions]]
ask = "weights[1,*]"
points = 6
tolerance = 0.01

[[questions]]
ask = "Z[2,*]"
points = 1.5
tolerance = 0.02
"""
# the title as a one-line field shows it: whitespace runs as one space, other controls as control pictures
SHOWN = "Quiz #3: {x} = ~y / A=B \\alpha // ]]> <script>alert(1)</script> line two\u2401 & &amp; \\\\ end/"


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("hostile")
    (d / "spec.toml").write_text(SPEC, encoding="utf-8")
    roster = d / "roster.csv"
    with roster.open("w", encoding="utf-8", newline="") as f:
        f.write("id,name\n" + "".join(f's/{k}<b>,"{n.replace(chr(34), chr(34) * 2)}"\n' for k, n in enumerate(NAMES)))
    return run(d / "spec.toml", roster=roster, outdir=d / "out", formats="moodle,qti,gift", jobs=1, quiet=True)[0]


def _shown(fragment: str) -> str:
    """What a browser shows of HTML: tags dropped, references decoded."""
    return html.unescape(re.sub(r"<[^>]*>", "", fragment))


def _tokens_shown(text: str) -> list[str]:
    m = re.search(r"the tokens (.*?) \(one row of X each\)", text)
    return [_shown(t) for t in re.findall(r'<span class="tex2jax_ignore">(.*?)</span>', m.group(1))]


def test_moodle_xml_well_formed_and_literal(out):
    root = ET.parse(out / "moodle.xml").getroot()
    cats = [q.find("category/text").text for q in root.findall("question") if q.get("type") == "category"]
    assert cats and all(moodle_category_levels(c)[2] == SHOWN + " (seed 7)" for c in cats)
    for q in root.findall("question"):
        if q.get("type") == "category":
            continue
        text = q.find("questiontext/text").text
        if q.get("type") == "cloze":
            _, subs, text = moodle_cloze(text)
            assert len(subs) == text.count("<tr>")   # the "{1:NM:=1}" token is no sub-question
        assert _tokens_shown(text) == SHOWN_WORDS


def test_qti_well_formed_and_literal(out):
    z = zipfile.ZipFile(io.BytesIO((out / "canvas-qti.zip").read_bytes()))
    docs = {n: ET.fromstring(z.read(n)) for n in z.namelist()}
    q = {"q": "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"}
    (assessment,) = [d.find("q:assessment", q) for d in docs.values() if d.find("q:assessment", q) is not None]
    assert assessment.get("title") == SHOWN
    (meta,) = [d for d in docs.values() if d.tag.endswith("}quiz")]
    assert meta.find("{http://canvas.instructure.com/xsd/cccv1p0}title").text == SHOWN
    for item in assessment.iter("{%s}item" % q["q"]):
        assert _tokens_shown(item.find("q:presentation/q:material/q:mattext", q).text) == SHOWN_WORDS


@needs_node
def test_gift_parses_and_literal(out):
    text = (out / "quiz.gift.txt").read_text(encoding="utf-8")
    parsed = gift_parse(text)
    lines = [ln for ln in text.splitlines() if ln.startswith("$CATEGORY:")]
    assert lines and all(moodle_category_levels(moodle_gift_category(ln))[2] == SHOWN + " (seed 7)" for ln in lines)
    questions = [p for p in parsed if p["type"] != "Category"]
    assert questions and all(p["type"] == "Numerical" for p in questions)
    assert len([p for p in parsed if p["type"] == "Category"]) == len(lines)
    for p in questions:
        assert _tokens_shown(p["stem"]["text"]) == SHOWN_WORDS


def test_no_student_names_or_ids_in_lms_files(out):
    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [v["student"]["name"] for v in man["variants"]] == NAMES   # the manifest keeps them
    z = zipfile.ZipFile(io.BytesIO((out / "canvas-qti.zip").read_bytes()))
    texts = {"moodle.xml": (out / "moodle.xml").read_text(encoding="utf-8"),
             "quiz.gift.txt": (out / "quiz.gift.txt").read_text(encoding="utf-8")}
    texts |= {n: z.read(n).decode() for n in z.namelist()}
    for name, t in texts.items():
        for v in man["variants"]:
            for s in (v["student"]["name"], v["student"]["id"]):
                for form in {s, html.escape(s), html.escape(s, quote=False), html.escape(html.escape(s))}:
                    assert form not in t, (name, s)
    for t in (texts["moodle.xml"], texts["quiz.gift.txt"], "".join(texts.values())):
        assert all(v["variant"] in t for v in man["variants"])   # variants are named by code


@pytest.mark.parametrize("row, why", [
    ('s1,"Ann\nBo"', "name contains the control character U+000A; expected printable text on one line"),
    ("s1,Ann\x07", "name contains the control character U+0007; expected printable text"),
    ("s\x1b1,Ann", "id contains the control character U+001B; expected printable text"),
    ("s1,A\x85nn", "name contains the control character U+0085; expected printable text"),
])
def test_roster_with_control_characters_is_refused(tmp_path, row, why):
    roster = tmp_path / "roster.csv"
    roster.write_bytes(("id,name\ns0,Cy\n" + row + "\n").encode("utf-8"))
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", "problems/quiz-1.toml", "--roster", str(roster),
                        "-o", str(tmp_path / "out"), "--format", "gift"], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: {roster}: line 3: {why}"]
    assert not (tmp_path / "out").exists()


def test_roster_not_utf8_names_the_line(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_bytes(b"id,name\ns0,Cy\ns1,B\xed\xa0\x80o\n")   # a lone surrogate's bytes are not UTF-8
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", "problems/quiz-1.toml", "--roster", str(roster),
                        "-o", str(tmp_path / "out")], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == f"error: {roster}: line 3: byte 0xED is not UTF-8; expected a UTF-8 CSV roster"


def test_exports_of_a_manifest_with_a_lone_surrogate_and_nul(out):
    """A manifest is ours, but the exporters do not trust it: a title with a lone surrogate, NUL and DEL still
    gives well-formed files."""
    from worked.lms import gift, moodle, qti

    man = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    man["title"] = "a\ud800b\x00c\x7fd"
    ET.fromstring(moodle.export(man).encode("utf-8"))
    z = zipfile.ZipFile(io.BytesIO(qti.export(man)))
    for n in z.namelist():
        ET.fromstring(z.read(n))
    text = gift.export(man)
    assert text.splitlines()[0].startswith("// a\ufffdb\u2400c\u2421d — ")
    text.encode("utf-8")


LONG_TITLE = ("&/<" * 67)[:200]   # 200 characters that escape to 467 (&amp; // &lt;)
HUGE_SEED = 10 ** 100 - 1        # the largest seed a spec may have: 100 digits


def _long_spec(tmp_path, seed):
    spec = tmp_path / "long.toml"
    body = SPEC.replace(f"title = {json.dumps(TITLE)}", f"title = {json.dumps(LONG_TITLE)}")
    spec.write_text(body.replace("seed = 7", f"seed = {seed}"), encoding="utf-8")
    return spec


@pytest.mark.parametrize("seed", [7, HUGE_SEED])
def test_category_names_fit_in_255_characters(tmp_path, seed):
    """Issue 25: Moodle's category names are varchar(255) after escaping (PostgreSQL refuses a longer one and
    Moodle imports nothing). A 200-character title of ``&/<`` (and the largest seed) gives a quiz category of at
    most 255 characters as written, in moodle.xml and GIFT: the title cut between escapes, then ``…``, then the
    whole seed; the variant level keeps its code."""
    out = run(_long_spec(tmp_path, seed), count=2, outdir=tmp_path / "out", formats="moodle,gift", jobs=1,
              quiet=True)[0]
    man = json.loads((out / "manifest.json").read_text())
    xml_paths = [q.find("category/text").text for q in ET.parse(out / "moodle.xml").getroot().findall("question")
                 if q.get("type") == "category"]
    gift_paths = [moodle_gift_category(ln) for ln in (out / "quiz.gift.txt").read_text().splitlines()
                  if ln.startswith("$CATEGORY:")]
    for paths in (xml_paths, gift_paths):
        assert len(paths) == len(man["variants"])
        for path, v in zip(paths, man["variants"]):
            raw = re.split(r"(?<!/)/(?!/)", path)          # the levels as Moodle splits them, still escaped
            assert len(raw) == 4 and all(len(r) <= 255 for r in raw), [len(r) for r in raw]
            assert re.fullmatch(r"(&amp;|//|&lt;)+…", raw[2].removesuffix(f" (seed {seed})").strip())
            levels = moodle_category_levels(path)
            assert levels[2].endswith(f"… (seed {seed})") and LONG_TITLE.startswith(levels[2].split("…")[0])
            assert levels[3] == f"Variant {v['variant']}"
    assert xml_paths == [p.replace("\\\\", "\\") for p in xml_paths]


def test_seed_too_large_for_a_category_is_refused(tmp_path):
    """A seed of more than 100 digits cannot be kept in a 255-character category with the title: refused when
    the spec is loaded (and as --seed), one line naming the file and field, exit 2."""
    spec = _long_spec(tmp_path, 10 ** 100)
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(spec), "-n", "1", "-o", str(tmp_path / "o"),
                        "--format", "moodle"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith(f"error: {spec}: ") and "100 digits" in r.stderr   # the TOML reader's own limit
    from worked.errors import WorkedError
    from worked.quiz import spec_from_dict
    with pytest.raises(WorkedError, match=r"seed.*at most 100 digits"):
        spec_from_dict({"seed": 10 ** 100, "family": {}, "questions": []}, "spec.toml")
    r = subprocess.run([sys.executable, "-m", "worked", "quiz", "problems/quiz-1.toml", "-n", "1", "--seed",
                        str(10 ** 150), "-o", str(tmp_path / "o"), "--format", "moodle"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "error: --seed: expected a whole number of at most 100 digits (it names the quiz's LMS category, "
        "at most 255 characters), got a longer one"]
    assert not (tmp_path / "o").exists()
