"""The teacher's language (issue 28): gettext catalogues (worked/locale), numbers in the locale's form, --lang and
``lang = "de"``, and pages in every shipped language that say no English sentence and still fit.

The core stays locale-free: the solution, its JSON and the audit are the same in every language; the words and the
decimal mark are the printers'. English output is byte for byte what it was (the golden tests)."""
from __future__ import annotations

import gettext
import json
import re
import shutil
import subprocess
import sys
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest
from babel.messages.pofile import read_po
from sheet_support import PROBLEMS

import worked
from worked import eq, i18n, printers, stages
from worked.chain import ChainSolution
from worked.render import typst as Y
from worked.render import view
from worked.render.html import render_html
from worked.render.sheet import document_pdf
from worked.render.tex import render_tex

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "worked" / "locale"
#: the languages shipped besides English
SHIPPED = [lang for lang in i18n.languages() if lang != "en"]
COMMA = [lang for lang in SHIPPED if i18n.get(lang).decimal == ","]
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def catalog(lang: str):
    with open(LOCALE / lang / "LC_MESSAGES" / "worked.po", "rb") as f:
        return read_po(f, locale=lang)


def template():
    with open(LOCALE / "worked.pot", "rb") as f:
        return read_po(f)


def ids(cat) -> set:
    return {m.id for m in cat if m.id}


# ------------------------------------------------------------------ the catalogues

def test_german_is_shipped():
    assert "de" in SHIPPED and i18n.get("de").decimal == ","


def test_the_template_holds_every_marked_string(tmp_path):
    """worked.pot is what `make extract` writes now: no string marked in the code or the templates is missing from
    it, and none it holds is gone from them."""
    pybabel = Path(sys.executable).with_name("pybabel")
    if not pybabel.exists():
        pytest.skip("pybabel is not installed next to this Python")
    out = tmp_path / "worked.pot"
    subprocess.run([str(pybabel), "-q", "extract", "-F", "babel.cfg", "-k", "say", "-k", "N_", "-k", "Msg", "-k", "tr", "-k", "_markup", "-k", "_t", "--no-location",
                    "--sort-output", "--omit-header", "-o", str(out), "."], cwd=ROOT, check=True, timeout=120)
    with open(out, "rb") as f:
        fresh = ids(read_po(f))
    assert fresh == ids(template()), (sorted(map(str, fresh - ids(template())))[:5],
                                      sorted(map(str, ids(template()) - fresh))[:5])


@pytest.mark.parametrize("lang", SHIPPED)
def test_every_msgid_is_translated(lang):
    """Each shipped catalogue translates every msgid of the template (every plural form), none fuzzy."""
    cat = catalog(lang)
    have = {m.id: m for m in cat if m.id}
    missing = [m.id for m in template() if m.id and (m.id not in have or not all(
        have[m.id].string if isinstance(have[m.id].string, tuple) else (have[m.id].string,)))]
    assert missing == []
    assert [m.id for m in cat if m.id and m.fuzzy] == []


@pytest.mark.parametrize("lang", SHIPPED)
def test_translations_keep_the_placeholders(lang):
    """A translation has exactly the placeholders of its msgid ({formula}, {n} …): math is put in, never lost."""
    bad = []
    for m in catalog(lang):
        if not m.id:
            continue
        src = m.id if isinstance(m.id, tuple) else (m.id,)
        want = set().union(*(set(PLACEHOLDER.findall(s)) for s in src))
        for s in m.string if isinstance(m.string, tuple) else (m.string,):
            got = set(PLACEHOLDER.findall(s))
            if got != want and not (isinstance(m.id, tuple) and got == want - {"n"}):
                bad.append((m.id, s))
    assert bad == []


@pytest.mark.parametrize("lang", SHIPPED)
def test_the_compiled_catalogue_is_the_po_file(lang):
    """The committed .mo (make compile) says what its .po says."""
    with open(LOCALE / lang / "LC_MESSAGES" / "worked.mo", "rb") as f:
        mo = gettext.GNUTranslations(f)
    for m in catalog(lang):
        if not m.id:
            continue
        if isinstance(m.id, tuple):
            for n, form in ((1, m.string[0]), (2, m.string[-1])):
                assert mo.ngettext(m.id[0], m.id[1], n) == form, m.id
        else:
            assert mo.gettext(m.id) == m.string, m.id


def test_an_unknown_language_names_the_ones_there_are():
    with pytest.raises(i18n.UnknownLanguage, match=r"'xx'.*en, de"):
        i18n.get("xx")
    assert i18n.canonical("de-DE") == "de" and i18n.canonical("DE") == "de"


# ------------------------------------------------------------------ numbers

def _dec(s: str):
    return eq.dec(Decimal(s))


def test_decimal_comma_and_semicolons_in_every_printer():
    vec = eq.Vec((_dec("0.49"), _dec("-1.67"), eq.num(2)))
    with i18n.using("de"):
        assert printers.text(vec) == "[0,49; −1,67; 2]"
        assert printers.latex(_dec("0.49")) == "0{,}49" and ";" in printers.latex(vec)
        assert printers.typst(_dec("0.49")) == '0class("normal", ",")49'
        assert "<mn>0,49</mn>" in printers.mathml(vec)
        assert "0,49;" in printers.htmlcss(vec)
        assert printers.spoken(_dec("0.49")) == "0,49"
    assert printers.text(vec) == "[0.49, −1.67, 2]"          # English as before (the cache keys the language)


def test_the_decimal_mark_is_babels():
    import babel

    for lang in SHIPPED:
        assert i18n.get(lang).decimal == babel.Locale.parse(lang).number_symbols["latn"]["decimal"]


# ------------------------------------------------------------------ pages in every language

@lru_cache(maxsize=None)
def solution(name: str):
    return worked.solve(worked.Problem.from_file(str(PROBLEMS_BY_NAME[name])))


PROBLEMS_BY_NAME = {p.stem: p for p in PROBLEMS}
NAMES = sorted(PROBLEMS_BY_NAME)
#: English words that no sentence in another language has (whole words, as a page's text shows them)
ENGLISH = re.compile(r"\b(the|of|and|is|are|with|each|every|Step|Task|Multiply|Compute|Divide|wrong|correct|"
                     r"answers?|places|row|column|weights?|scores are|token.s|exact|Worked solution|Answer key|Worksheet)\b")


def _visible(html: str) -> str:
    """The words of an HTML page a reader sees: no tags, no math (its alt text is the spoken form), no style."""
    html = re.sub(r"<(style|script|math)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def _stray_english(text: str, sol) -> list[str]:
    """The English words left in a page's text, past what the problem itself names (its title and tokens)."""
    p = sol.problem
    own = " ".join([p.title or "", *p.tokens, *(p.tokens_enc or ())])
    return sorted({m for m in ENGLISH.findall(text) if m not in own})


@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", NAMES)
def test_no_english_sentence_on_a_page(name, kind, lang):
    sol = solution(name)
    with i18n.using(lang):
        html = render_html(view.build(sol, kind))
    assert f'<html lang="{i18n.get(lang).html_lang}">' in html
    assert _stray_english(_visible(html), sol) == []


@pytest.mark.parametrize("name", ["decimal-inputs", "block-pre-ln-causal"])
@pytest.mark.parametrize("lang", COMMA)
def test_a_german_key_writes_decimal_commas(lang, name):
    sol = solution(name)
    with i18n.using(lang):
        page = view.build(sol, "answer-key")
        html = render_html(page)
        typ = Y.render_typ(page)
        tex = render_tex(page)
    assert re.search(r"<mn>\d+,\d+</mn>", html) and not re.search(r"<mn>\d+\.\d+</mn>", html)
    assert 'class("normal", ",")' in typ
    assert re.search(r"\d\{,\}\d", tex)
    assert "[U+" not in tex          # every character of the language's words is one LaTeX sets („…“, « … »)
    lt, region = i18n.get(lang).typst
    assert f'#set text(lang: "{lt}"' in typ
    assert f"{i18n.get(lang).babel_name}.ldf" in tex


def test_a_german_block_key_and_its_mistakes_speak_german():
    """A Transformer block's words (its steps, grids and facts) and its mistakes' titles, math and all, in German;
    the title JSON keeps stays English."""
    from worked.mistakes import MISTAKES

    sol = solution("block-pre-ln-causal")
    with i18n.using("de"):
        text = _visible(render_html(view.build(sol, "answer-key")))
        titles = {c: MISTAKES[c].title_text() for c in ("norm-over-columns", "no-residual", "transposed-scores")}
        feedback = MISTAKES["relu-before-bias"].message(sol.problem)
    for words in ("Schichtnormalisierung", "Residualaddition", "Feed-Forward", "Vokabular", "Ziele"):
        assert words in text
    assert titles == {"norm-over-columns": "Schichtnormalisierung über die falsche Achse",
                      "no-residual": "Residualaddition vergessen", "transposed-scores": "K·Qᵀ statt Q·Kᵀ"}
    assert feedback.startswith("ReLU wurde vor der Addition des Bias angewendet: G = relu(")
    assert MISTAKES["transposed-scores"].title == "K·Qᵀ instead of Q·Kᵀ"


@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("name", NAMES)
def test_the_hand_rule_holds_in_every_language(name, lang):
    """The audit reads the trees, which no language changes; and each line shown in the language is the English
    line with its decimal mark and separators swapped: the same digits, so every line still holds by hand."""
    sol = solution(name)
    if isinstance(sol, ChainSolution):
        pytest.skip("a chain of blocks: its blocks are solutions of their own, audited as such")
    sol.audit()
    loc = i18n.get(lang)
    for st in sol.steps:
        for ln in st.lines:
            en = printers.text(ln.eq)
            for w in _words(ln.eq):     # a word set as a symbol (the softmax's "sum") is the language's word
                en = re.sub(rf"(?<![^\W\d_]){w}(?![^\W\d_])", loc.gettext(w), en)
            with i18n.using(lang):
                shown = printers.text(ln.eq)
            if loc.decimal == ",":
                en = re.sub(r"(?<=\d)\.(?=\d)", ",", en.replace(", ", "; ")) if "[" in en else \
                    re.sub(r"(?<=\d)\.(?=\d)", ",", en)
                # a label is no number: concat's column 1.1 (head 1, column 1) keeps its point in an entry's name
                shown = re.sub(r"(?<=\d)\.(?=\d)", ",", shown)
            assert shown.replace("; ", ", ") == en.replace("; ", ", "), (en, shown)


def _words(node) -> set:
    """The words set as symbols in a tree (``eq.Sym(N_("sum"), word=True)``) or as a function's name
    (``eq.Call(eq.COLSUM, …)``: :data:`worked.eq.CALL_WORDS`)."""
    found = {node.name} if (type(node) is eq.Sym and node.word) or \
        (type(node) is eq.Call and node.name in eq.CALL_WORDS) else set()
    for child in node.children():
        found |= _words(child)
    return found


needs_pdftotext = pytest.mark.skipif(shutil.which("pdftotext") is None,
                                     reason="pdftotext not installed (Debian: poppler-utils)")


@needs_pdftotext
@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("kind", ["worksheet", "answer-key"])
@pytest.mark.parametrize("name", NAMES)
def test_pages_fit_in_every_language(name, kind, lang):
    """The page checks of the pages issue on the language's PDF: long words run off no page, over no footer."""
    from test_page_fit import layout_problems

    sol = solution(name)
    with i18n.using(lang):
        pdf = document_pdf(kind, sol)
        footer = i18n.current().format("page {page} of {pages}", page="1", pages="1").split()[0]
    assert layout_problems(pdf, footer) == []


@pytest.mark.parametrize("lang", SHIPPED)
def test_same_bytes_for_the_same_problem_and_language(lang):
    sol = solution("cats-chase-mice")
    with i18n.using(lang):
        a = document_pdf("answer-key", sol)
    with i18n.using(lang):
        b = document_pdf("answer-key", solution("cats-chase-mice"))
    assert a == b
    with i18n.using(None):
        assert document_pdf("answer-key", sol) != a


# ------------------------------------------------------------------ choosing the language

def test_sheet_lang_writes_german(tmp_path, cli):
    code, out, err = cli("sheet", PROBLEMS_BY_NAME["cats-chase-mice"], "--lang", "de", "--format", "html",
                         "-o", tmp_path)
    assert code == 0, err
    html = next(tmp_path.rglob("answer-key.html")).read_text(encoding="utf-8")
    assert '<html lang="de">' in html and "Schritt 1" in html and "Lösungsblatt" in html


def test_an_unknown_lang_is_a_one_line_error(tmp_path, cli):
    code, out, err = cli("sheet", PROBLEMS_BY_NAME["cats-chase-mice"], "--lang", "xx", "-o", tmp_path)
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and "--lang" in err and "de" in err


def test_lang_in_a_problem_file(tmp_path, cli):
    src = PROBLEMS_BY_NAME["cats-chase-mice"].read_text(encoding="utf-8")
    good = tmp_path / "de.toml"
    good.write_text('lang = "de"\n' + src, encoding="utf-8")
    p = worked.Problem.from_file(str(good))
    assert p.lang == "de" and 'lang = "de"' in p.to_toml()
    code, out, err = cli("sheet", good, "--format", "html", "-o", tmp_path / "out")
    assert code == 0, err
    assert '<html lang="de">' in next((tmp_path / "out").rglob("worksheet.html")).read_text(encoding="utf-8")
    bad = tmp_path / "xx.toml"
    bad.write_text('lang = "xx"\n' + src, encoding="utf-8")
    code, out, err = cli("sheet", bad, "-o", tmp_path / "out2")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "lang" in err and "xx" in err and "de" in err and str(bad.name) in err


# ------------------------------------------------------------------ the check report

CHECKS = [("cats-chase-mice", "cats-chase-mice-no-scaling.toml"), ("cats-chase-mice", "cats-chase-mice-column-softmax.json"),
          ("causal-mask", "the-cat-sat-wrong-mask.toml")]


@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("problem,answers", CHECKS)
def test_check_report_in_the_language(problem, answers, lang, cli):
    args = (PROBLEMS_BY_NAME[problem], ROOT / "problems" / "answers" / answers)
    code_en, en, _ = cli("check", *args)
    code, out, err = cli("check", *args, "--lang", lang)
    assert code == code_en and out != en and "Traceback" not in err
    text = re.sub(r"\b[\w-]+-[\w-]+\b", " ", out)          # the mistakes' codes (no-scaling) are names, not words
    ids = {s.id for s in stages.every()}                    # and the matrices' keys (weights, scores) too
    text = " ".join(w for w in re.split(r"(\W)", text) if w not in ids)
    assert _stray_english(text, solution(problem)) == []
    # the JSON is the same data in every language
    assert json.loads(cli("check", *args, "--format", "json", "--lang", lang)[1]) == \
        json.loads(cli("check", *args, "--format", "json")[1])


# ------------------------------------------------------------------ the web page

@pytest.fixture(scope="module")
def web():
    import warnings

    pytest.importorskip("httpx")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient
    from worked.server.app import Config, create_app

    with TestClient(create_app(Config(problems_dir=ROOT / "problems")), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("lang", SHIPPED)
def test_the_web_page_follows_accept_language(web, lang):
    loc = i18n.get(lang)
    page = web.get("/", headers={"Accept-Language": f"{loc.html_lang};q=0.9, en;q=0.5"}).text
    assert f'<html lang="{loc.html_lang}">' in page and f'<option value="{lang}" selected>' in page
    assert _stray_english(_visible(page), solution("cats-chase-mice")) == []
    table = json.loads(re.search(r'<script id="i18n" type="application/json">(.*?)</script>', page, re.S).group(1))
    assert table and all(loc.gettext(k) == v for k, v in table.items())       # the script's words, from the catalogue
    en = web.get("/", headers={"Accept-Language": "en-GB"}).text
    assert '<html lang="en">' in en and '<script id="i18n" type="application/json">{}</script>' in en


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("header, lang", [("pt", "pt-BR"), ("pt-PT, en;q=0.5", "pt-BR"), ("de-AT", "de"),
                                          ("fr-CA;q=0.8, es-MX;q=0.9", "es"), ("nl, en;q=0.1", "en")])
def test_a_regional_form_of_a_shipped_language_gets_that_language(web, header, lang):
    """A browser that asks for Portuguese, or for Portugal's, reads the Brazilian page rather than English (the
    language with another region, when no shipped language matches exactly); a language not shipped gets English."""
    assert f'<html lang="{lang}">' in web.get("/", headers={"Accept-Language": header}).text


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("lang", SHIPPED)
def test_the_selector_wins_and_is_remembered(web, lang):
    r = web.get(f"/?lang={lang}", headers={"Accept-Language": "en"})
    assert f'<html lang="{i18n.get(lang).html_lang}">' in r.text and r.cookies.get("worked_lang") == lang
    r = web.get("/", headers={"Accept-Language": "en"}, cookies={"worked_lang": lang})
    assert f'<html lang="{i18n.get(lang).html_lang}">' in r.text
    web.cookies.clear()


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("lang", SHIPPED)
def test_the_page_checks_in_its_language(web, lang):
    """The page's check answers in the request's language (step titles, mistakes, summary); the same request in
    English is the CLI's JSON, word for word."""
    problem = worked.Problem.from_file(str(PROBLEMS_BY_NAME["cats-chase-mice"])).to_dict()
    answers = {"scaled": [[2, 4, 2], [3, 3, 3], [2, 3, 2]]}
    shown = web.post(f"/api/check?lang={lang}", json={"problem": problem, "answers": answers}).json()
    en = web.post("/api/check", json={"problem": problem, "answers": answers}, headers={"Accept-Language": "en"}).json()
    web.cookies.clear()
    assert shown["summary"] == en["summary"] and shown["matrices"].keys() == en["matrices"].keys()
    d, e = shown["diagnoses"][0], en["diagnoses"][0]
    assert d["code"] == e["code"] == "no-scaling"
    with i18n.using(lang):
        assert d["title"] == i18n.translate(e["title"]) != e["title"]
        assert d["step"]["title"] != e["step"]["title"] and d["message"] != e["message"]
    assert _stray_english(d["message"] + " " + shown["summary_text"], solution("cats-chase-mice")) == []


# ------------------------------------------------------------------ quizzes

@pytest.mark.parametrize("lang", SHIPPED[:1])
def test_a_quiz_in_the_language_has_the_same_manifest(tmp_path, cli, lang):
    """quiz --lang: the LMS exports' question texts and feedback in the language, the manifest (data) the same."""
    spec = ROOT / "problems" / "quiz-5-choice.toml"
    for name, extra in (("en", ()), (lang, ("--lang", lang))):
        code, out, err = cli("quiz", spec, "-n", "1", "--format", "moodle,gift", "--jobs", "1", "--quiet",
                             "-o", tmp_path / name, *extra)
        assert code == 0, err
    assert (tmp_path / "en" / "manifest.json").read_bytes() == (tmp_path / lang / "manifest.json").read_bytes()
    moodle = (tmp_path / lang / "moodle.xml").read_text(encoding="utf-8")
    with i18n.using(lang):
        assert i18n.tr("Correct.") in moodle and "Correct." not in moodle
        assert i18n.tr("Variant {code}", code="") in moodle
