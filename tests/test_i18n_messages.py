"""The messages of a quiz spec, of `worked grade`, of the output folders, the CLI's progress lines and the server's
API errors in the user's language (issue 28): each is an :class:`worked.i18n.Msg`, English byte for byte as before,
and in German, French or Spanish no English sentence is left; an error still names its file and field."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from worked import i18n
from worked.errors import ProblemError, WorkedError
from worked.output import write_file
from worked.quiz import load_roster, spec_from_dict

ROOT = Path(__file__).resolve().parents[1]
#: English words of these messages that none of their translations has (field names and values put in a message are
#: named below so that they do not count)
ENGLISH = re.compile(r"\b(the|of|and|is|are|with|each|every|expected|got|missing|unknown|cannot|wrote|graded|already|"
                     r"exists|folder|line|rows?|columns?|students?|tries|use|give|not|found|server|request|"
                     r"response|scored|warning|note|entry|question|masked|matrix|one of)\b")


def english(text: str, *allowed: str) -> list[str]:
    """The English words left in *text*, past the *allowed* parts (file names, fields, what the user wrote)."""
    for a in allowed:
        text = text.replace(a, " ")
    return sorted(set(ENGLISH.findall(text)))


SPEC = {"title": "Quiz", "seed": 1, "family": {"tokens": 3, "d_model": 4, "d_k": 2},
        "questions": [{"ask": "scores[2,3]"}]}


def bad_spec(**change):
    spec = json.loads(json.dumps(SPEC))
    for path, value in change.items():
        where = spec
        *head, last = path.split("__")
        for k in head:
            where = where[int(k)] if k.isdigit() else where[k]
        where[last] = value
    return spec


# (what is changed, the field the error names, its English text: the same as before the messages were declared)
CASES = [
    ({"colour": "red"}, "colour", "unknown key (expected some of: title, seed, count, paper, instructions, lang, family, "
                                  "problem, questions, parts)"),
    ({"seed": -1}, "seed", "expected a whole number ≥ 0, got -1"),
    ({"questions__0__ask": "nope[1,1]"}, "questions[1].ask",
     "unknown matrix 'nope' (expected one of: Q, K, V, scores, scaled, weights, Z)"),
    ({"questions__0__ask": "scores[5,1]"}, "questions[1].ask", "row 5 is outside scores (3×3; rows are 1..3)"),
    ({"questions__0__tolerance": 0}, "questions[1].tolerance",
     "is zero: decimal answers could never match; give e.g. tolerance = 0.01"),
    ({"family__mask": "sideways"}, "family.mask", "expected \"none\" or \"causal\", got 'sideways'"),
    ({"family__max_weight": 0.2}, "family.max_weight",
     "0.2 is impossible: a row of 3 weights always has one of at least 1/3 (exactly 1/3 only in a tie)"),
]


@pytest.mark.parametrize("change, field, text", CASES)
def test_a_quiz_spec_error_in_english_is_as_it_was(change, field, text):
    with pytest.raises(ProblemError) as e:
        spec_from_dict(bad_spec(**change), "quiz.toml")
    assert str(e.value) == f"quiz.toml: {field}: {text}"
    assert e.value.localized(i18n.get("en")) == str(e.value)


@pytest.mark.parametrize("lang", ["de", "fr", "es", "pt_BR"])
@pytest.mark.parametrize("change, field, text", CASES)
def test_a_quiz_spec_error_in_the_language(change, field, text, lang):
    """The error's one line in the language: it still starts with the file and the field, and the values (what the
    user wrote) are put in as they are."""
    with pytest.raises(ProblemError) as e:
        spec_from_dict(bad_spec(**change), "quiz.toml")
    shown = e.value.localized(i18n.get(lang))
    assert shown.startswith(f"quiz.toml: {field}: ") and shown != str(e.value)
    keys = "title, seed, count, paper, instructions, lang, family, problem, questions, parts"
    assert english(shown, "quiz.toml", field, keys, "'nope'", "scores, scaled, weights", "'sideways'", "tolerance = 0.01",
                   '"none"', '"causal"') == []


def test_a_roster_error_names_the_file_and_line_in_the_language(tmp_path):
    roster = tmp_path / "roster.csv"
    roster.write_text("id,name\ns1,Ada\ns1,Ben\n", encoding="utf-8")
    with pytest.raises(WorkedError) as e:
        load_roster(roster)
    assert str(e.value) == f"{roster}: line 3: duplicate student id 's1' (also on line 2)"
    shown = e.value.localized(i18n.get("de"))
    assert shown == f"{roster}: Zeile 3: doppelte Kennung 's1' (auch in Zeile 2)"


def test_an_option_error_of_worked_new_in_the_language():
    from argparse import Namespace

    from worked.generate import family_from_args

    args = Namespace(tokens="3", d_model=None, d_k=0, d_v=None, heads=None, range=None, weight_range=None, mask=None,
                     scale=None, decimals=None, max_weight=None, min_weight=None, max_score=None, title=None)
    with pytest.raises(WorkedError) as e:
        family_from_args(args)
    assert str(e.value) == "--d-k: expected a whole number from 1 to 12, got 0"
    assert e.value.localized(i18n.get("es")) == "--d-k: se esperaba un número entero de 1 a 12, se recibió 0"


def test_refusing_to_overwrite_in_the_language(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text("x")
    with pytest.raises(WorkedError) as e:
        write_file(path, "y", force=False)
    assert str(e.value) == f"{path}: already exists (use --force to overwrite)"
    fr = e.value.localized(i18n.get("fr"))
    assert fr == f"{path}: existe déjà (utilisez --force pour l’écraser)" and english(fr, str(path), "--force") == []


def test_a_list_of_messages_is_each_in_the_language():
    items = [i18n.Msg("no tied top score"), i18n.Msg("every weight ≥ {w}", w="0.01")]
    both = i18n.joined(", ", items)
    assert both == "no tied top score, every weight ≥ 0.01"
    assert both.localized(i18n.get("de")) == "kein Gleichstand beim höchsten Score, jedes Gewicht ≥ 0.01"


# ------------------------------------------------------------------ the command line

@pytest.fixture(scope="module")
def quiz_dir(tmp_path_factory):
    """Two variants of quiz-1 (HTML only), written in German: (folder, stderr of the run)."""
    from worked.cli import main

    out = tmp_path_factory.mktemp("quiz") / "q"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["quiz", str(ROOT / "problems" / "quiz-1.toml"), "-n", "2", "--format", "html", "--jobs", "1",
                     "-o", str(out), "--lang", "de"]) == 0
    return out, err.getvalue()


def test_quiz_progress_line_in_german(quiz_dir):
    out, err = quiz_dir
    assert err.strip().splitlines()[-1] == f"2 Varianten nach {out} geschrieben"


def test_sheet_progress_line_in_french_and_english(tmp_path, cli):
    problem = ROOT / "problems" / "cats-chase-mice.toml"
    code, out, err = cli("sheet", problem, "--format", "html", "-o", tmp_path / "fr", "--lang", "fr")
    assert code == 0, err
    assert out.splitlines()[0] == f"2 fichiers écrits dans {tmp_path / 'fr' / 'cats-chase-mice'}/"
    code, out, err = cli("sheet", problem, "--format", "html", "-o", tmp_path / "en")
    assert out.splitlines()[0] == f"wrote 2 files to {tmp_path / 'en' / 'cats-chase-mice'}/"


def test_a_bad_quiz_spec_is_one_line_exit_2(tmp_path, cli):
    spec = tmp_path / "quiz.toml"
    spec.write_text('title = "Q"\nseed = -1\n[family]\ntokens = 3\n[[questions]]\nask = "Z"\n', encoding="utf-8")
    code, out, err = cli("quiz", spec, "-o", tmp_path / "out", "--lang", "de")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{spec}: seed: " in err


@pytest.mark.parametrize("lang", ["de", "es"])
def test_grade_warnings_in_the_terminal_and_the_report(quiz_dir, tmp_path, cli, lang):
    """A student with no response, a question with no column and a row that is no student's: the warnings in the
    language on the terminal and in the report; the gradebook (data) is the same in English."""
    out, _ = quiz_dir
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    code = manifest["variants"][0]["variant"] if "variants" in manifest else manifest["students"][0]["variant"]
    responses = tmp_path / "responses.csv"
    responses.write_text(f"variant,scores[2,3],weights[1,*]\n{code},0.5,\"0.2, 0.3, 0.5\"\nZZZZZZ,1,1\n", encoding="utf-8")
    code_, stdout, err = cli("grade", out, responses, "-o", tmp_path / "g", "--allow-unmatched", "--lang", lang)
    assert code_ == 0, err
    warnings = [w for w in err.splitlines() if w]
    assert len(warnings) == 3, err
    word = {"de": "Warnung: ", "es": "aviso: "}[lang]
    assert all(w.startswith(word) for w in warnings)
    assert english(err, "'Z'", "ZZZZZZ", "'ZZZZZZ'", code) == []
    assert english(stdout, str(tmp_path / "g" / "gradebook.csv"), str(tmp_path / "g" / "report.html"), "'variant'",
                   "scores[2,3]", "weights[1,*]", "'scores[2,3]'", "'weights[1,*]'") == []
    report = (tmp_path / "g" / "report.html").read_text(encoding="utf-8")
    for w in warnings:
        assert w.removeprefix(word).replace("'", "&#39;") in report
    code_, stdout_en, err_en = cli("grade", out, responses, "-o", tmp_path / "en", "--allow-unmatched")
    assert "warning: no column for question 'Z': it scores 0 for everyone" in err_en
    assert "warning: not graded: line 3 ('ZZZZZZ'): not a student of this quiz" in err_en
    assert stdout_en.startswith("read columns: scores[2,3] ← 'scores[2,3]'; weights[1,*] ← 'weights[1,*]'; students by 'variant'")
    assert (tmp_path / "en" / "gradebook.csv").read_bytes() == (tmp_path / "g" / "gradebook.csv").read_bytes()


# ------------------------------------------------------------------ the server

@pytest.fixture(scope="module")
def web():
    from starlette.testclient import TestClient

    from worked.server.app import Config, create_app

    with TestClient(create_app(Config(problems_dir=ROOT / "problems")), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_quiz_builder_says_a_question_error_in_the_page_language(web):
    spec = bad_spec(questions__0__ask="nope[1,1]")
    de = web.post("/api/quiz-form?lang=de", json={"spec": spec}).json()
    en = web.post("/api/quiz-form", json={"spec": spec}, headers={"Accept-Language": "en"}).json()
    web.cookies.clear()
    q_de, q_en = de["parts"][0]["questions"][0]["error"], en["parts"][0]["questions"][0]["error"]
    assert q_en["message"] == ("quiz spec: questions[1].ask: unknown matrix 'nope' (expected one of: Q, K, V, scores, "
                               "scaled, weights, Z)")
    assert q_de["field"] == q_en["field"] == "ask"
    assert q_de["message"].startswith("Test-Spezifikation: questions[1].ask: unbekannte Matrix 'nope'")
    assert de["error"]["message"].startswith("Test-Spezifikation: questions[1].ask: ")
    assert english(q_de["message"], "questions[1].ask", "'nope'", "scores, scaled, weights") == []


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("lang, url, body, words", [
    ("fr", "/api/problems/no-such-thing", None, "pas de problème nommé 'no-such-thing' dans le dossier des problèmes"),
    ("es", "/api/solve", b"x", "envía el cuerpo de la solicitud como JSON (Content-Type: application/json)"),
    ("de", "/api/new", {"family": {"tokens": 99}}, "Zufallsaufgabe: tokens: erwartet wird eine ganze Zahl von 2 bis"),
])
def test_api_errors_in_the_request_language(web, lang, url, body, words):
    if body is None:
        r = web.get(url, headers={"Accept-Language": lang})
    elif isinstance(body, bytes):
        r = web.post(url, content=body, headers={"Accept-Language": lang, "Content-Type": "text/plain"})
    else:
        r = web.post(url, json=body, headers={"Accept-Language": lang})
    msg = r.json()["error"]
    assert r.status_code >= 400 and words in msg
    assert english(msg, "'no-such-thing'", "Content-Type: application/json", "tokens") == []
    en = web.get(url) if body is None else (web.post(url, content=body, headers={"Content-Type": "text/plain"})
                                            if isinstance(body, bytes) else web.post(url, json=body))
    assert en.json()["error"] != msg and en.status_code == r.status_code


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_quiz_builder_zip_is_the_same_in_every_request_language(web):
    """The page's quiz is what `worked quiz` writes (in the spec's language, its manifest English): the request's
    language changes its errors only."""
    spec = (ROOT / "problems" / "quiz-1.toml").read_text(encoding="utf-8")
    body = {"spec": spec, "count": 2, "formats": "html,moodle,gift"}
    de = web.post("/api/quiz", json=body, headers={"Accept-Language": "de"})
    en = web.post("/api/quiz", json=body, headers={"Accept-Language": "en"})
    assert de.status_code == en.status_code == 200 and de.content == en.content
    bad = web.post("/api/quiz", json={**body, "spec": spec.replace("seed = 2026", "seed = -5")},
                   headers={"Accept-Language": "de"}).json()["error"]
    assert bad == "Test-Spezifikation: seed: erwartet wird eine ganze Zahl ≥ 0, angegeben war -5"


@pytest.mark.parametrize("lang, wrote, title", [
    ("de", "{path} geschrieben (Seed 7)", "Zufällige Attention-Aufgabe (Seed 7)"),
    ("fr", "{path} écrit (graine 7)", "Problème d’attention aléatoire (graine 7)"),
    (None, "wrote {path} (seed 7)", "Random attention problem (seed 7)"),
])
def test_worked_new_says_what_it_wrote_and_titles_the_problem_in_the_language(tmp_path, cli, lang, wrote, title):
    path = tmp_path / "p.toml"
    code, out, err = cli("new", "--seed", "7", "-o", path, *(["--lang", lang] if lang else []))
    assert code == 0, err
    assert err.strip() == wrote.format(path=path)
    assert f"title = {json.dumps(title, ensure_ascii=False)}" in path.read_text(encoding="utf-8")
    code, out, err = cli("new", "--seed", "7", "--block", "post-ln", *(["--lang", lang] if lang else []))
    assert code == 0, err
    assert ("Random Transformer block (seed 7)" in out) == (lang is None)
