"""The errors a user reads, in the user's language (issue 28): a problem file's, an answers file's, an answer entry's
and the CLI's own, declared as :class:`worked.i18n.Msg` and shown translated by ``worked … --lang``, a problem's
``lang``, and the server's ``error`` for the request's language. English stays byte for byte what it was; file names,
field names and what the user wrote stay as they are; JSON keys a program reads stay English."""
from __future__ import annotations

import pickle
import re
import tomllib
from pathlib import Path

import pytest
from test_i18n import ENGLISH, SHIPPED, web  # noqa: F401 - web: the server of problems/, as test_i18n's

import worked
from worked import i18n, stages
from worked.check import check_answers, parse_answers_text
from worked.cli import main
from worked.errors import WorkedError

ROOT = Path(__file__).resolve().parents[1]
CATS = ROOT / "problems" / "cats-chase-mice.toml"
BASE = tomllib.loads(CATS.read_text(encoding="utf-8"))
X = BASE["X"]
#: English words that are words of these languages too (fr « nombre exact », es « tokens »)
ALSO_THEIRS = {"tokens", "token", "exact"}
#: more English words of error lines (none a word of de, fr, es or pt_BR)
MORE = re.compile(r"\b(expected|got|missing|unknown|must|cannot|read|numbers?|larger|than|most|entr(?:y|ies)|such|"
                  r"file|rows?|columns?|twice|wrong|shape)\b")
#: the matrices' keys an answers file names (weights, scores): names, not words
MATRICES = {s.id for s in stages.every()}
#: the bad problems and their one line in English, as it was before the messages were declared for translation
CASES = {
    "mask": ({"mask": "x"}, "p.toml: mask: expected \"none\" or \"causal\", got 'x'"),
    "decimals": ({"decimals": 9}, "p.toml: decimals: expected a whole number from 0 to 6, got 9"),
    "X-empty": ({"X": []}, "p.toml: X: expected a matrix: a non-empty list of rows, such as [[1, 0], [0, 1]]"),
    "X-ragged": ({"X": [X[0], X[1][:-1], X[2]]}, "p.toml: X: ragged rows: row 1 has 4 entries, row 2 has 3"),
    "X-entry": ({"X": [["abc"] + X[0][1:], X[1], X[2]]},
                "p.toml: X[1,1]: expected a number such as 2, 0.43, \"0.43\" or \"1/2\", got 'abc'"),
    "X-places": ({"X": [["0.12345"] + X[0][1:], X[1], X[2]]}, "p.toml: X[1,1]: 0.12345 has 5 decimal places (at most 4)"),
    "title": ({"title": 5}, "p.toml: title: expected a string, got 5"),
    "W_K": ({"W_K": [r[:1] for r in BASE["W_K"]]},
            "p.toml: W_K: expected 2 columns like W_Q (queries and keys must have the same length d_k), got 1"),
    "scale": ({"scale": "-1"}, "p.toml: scale: expected a positive number (at most 1000), got '-1'"),
    "lang": ({"lang": "xx"}, "p.toml: lang: unknown language 'xx': the languages there are en, de, es, fr, pt_BR"),
    "train": ({"train": {"loss": "mse", "lr": "1/10"}},
              "p.toml: train.target: missing: the target T, a 3×2 matrix like the output Z"),
    "tokens": ({"tokens": ["a"]}, "p.toml: tokens: expected 3 tokens (X has 3 rows), got 1"),
    "block": ({"block": "x"}, "p.toml: W_O: missing: in a block, the attention's output projection W_O (heads·d_v rows, "
                              "d_model columns) is required"),
    "X-missing": ({"X": None}, "p.toml: X: missing: the input matrix X (one row per token) is required"),
    "work": (None, "p.toml: heads: 12 tokens, d_model 12, d_k 12, d_v 12, 4 heads is more work than a command may take: "
                   "solving it (worked solve, /api/solve) would take about 45 s (at most 10 s, predicted from the shape; see "
                   "the README's limits); with these widths and heads at most 5 tokens fit"),
}


def _data(change):
    if change is None:      # a problem too large for the time a command may take: a sentence of sentences
        ones = [[1] * 12] * 12
        return {"X": ones, "heads": [{"W_Q": ones, "W_K": ones, "W_V": ones}] * 4, "W_O": [[1] * 12] * 48}
    data = dict(BASE)
    for k, v in change.items():
        if v is None:
            data.pop(k, None)
        else:
            data[k] = v
    return data


def _error(change) -> WorkedError:
    with pytest.raises(WorkedError) as info:
        worked.Problem.from_dict(_data(change), source="p.toml")
    return info.value


def english_left(line: str, lang: str) -> list[str]:
    """The English words of *line* past what stays English on purpose: what the user wrote and the values to type
    (quoted), field and matrix names (W_Q, d_model, train.lr), examples in brackets, and a word the language
    shares with English."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"|«[^»]*»", " ", line)
    text = re.sub(r"\b\w+[._\[]\w*[\w.\[\],]*", " ", text)
    text = " ".join(w for w in re.split(r"(\W)", text) if w not in MATRICES)
    return sorted({w for w in ENGLISH.findall(text) + MORE.findall(text) if w not in ALSO_THEIRS or lang == "de"})


@pytest.mark.parametrize("case", CASES)
def test_a_problem_error_is_the_same_english_line(case):
    change, english = CASES[case]
    exc = _error(change)
    assert str(exc) == english
    assert english_left(english, "de")                     # the words the other tests look for are there
    assert exc.localized() == english                       # English: its own text
    with i18n.using("de"):
        assert str(exc) == english                          # str() is English in any language (logs, JSON)


@pytest.mark.parametrize("lang", SHIPPED)
@pytest.mark.parametrize("case", CASES)
def test_a_problem_error_in_the_language(case, lang):
    change, english = CASES[case]
    exc = _error(change)
    line = exc.localized(i18n.get(lang))
    assert line != english
    source, field, _ = english.split(": ", 2)
    assert line.startswith(f"{source}: {field}: ")          # the file and the field as the file names them
    assert english_left(line, lang) == [], line
    for shown in re.findall(r"'[^']*'", english):          # what the user wrote, as written
        assert shown in line


def test_a_message_survives_a_worker():
    """A message sent pickled (from a worker process) keeps its sentence and its values."""
    msg = pickle.loads(pickle.dumps(_error({"mask": "x"}).message))
    assert msg == "expected \"none\" or \"causal\", got 'x'"
    assert msg.localized(i18n.get("de")) == "erwartet wird \"none\" oder \"causal\", angegeben ist 'x'"


def test_a_file_that_cannot_be_read_in_the_language(tmp_path):
    missing = tmp_path / "nope.toml"
    with pytest.raises(WorkedError) as info:
        worked.Problem.from_file(missing)
    assert str(info.value) == f"{missing}: no such file (expected a .toml or .json problem file)"
    assert info.value.localized(i18n.get("fr")) == \
        f"{missing}: fichier introuvable (attendu\u00a0: un fichier de problème .toml ou .json)"
    bad = tmp_path / "bad.toml"
    bad.write_text("X = [[1, 2]\n", encoding="utf-8")
    with pytest.raises(WorkedError) as info:
        worked.Problem.from_file(bad)
    line = info.value.localized(i18n.get("es"))
    assert line.startswith(f"{bad}: TOML no válido: ")      # tomllib's own words follow, as they are
    assert str(info.value).startswith(f"{bad}: not valid TOML: ")


# ------------------------------------------------------------------ the CLI's line

def _run(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_cli_error_in_the_problem_files_language(tmp_path, capsys):
    """No --lang: the problem file's lang, read far enough to tell it; "error:" translated too; exit 2, one line."""
    src = re.sub(r'mask\s*=\s*"none"', 'mask = "x"', CATS.read_text(encoding="utf-8"))
    assert 'mask = "x"' in src
    bad = tmp_path / "bad.toml"
    bad.write_text('lang = "de"\n' + src, encoding="utf-8")
    code, out, err = _run(capsys, "solve", bad)
    assert code == 2 and out == ""
    assert err == f"Fehler: {bad}: mask: erwartet wird \"none\" oder \"causal\", angegeben ist 'x'\n"
    english = tmp_path / "en.toml"
    english.write_text(src, encoding="utf-8")
    code, out, err = _run(capsys, "solve", english)
    assert code == 2 and err == f"error: {english}: mask: expected \"none\" or \"causal\", got 'x'\n"


@pytest.mark.parametrize("lang", SHIPPED)
def test_the_cli_error_in_the_lang_option(lang, tmp_path, capsys):
    """--lang wins over the file's; an unreadable answers file (after the problem was read) in it too."""
    missing = tmp_path / "answers.toml"
    code, out, err = _run(capsys, "check", CATS, missing, "--lang", lang)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    code, _, err_en = _run(capsys, "check", CATS, missing)
    assert err_en == f"error: {missing}: no such file (expected a .toml or .json answers file)\n"
    assert err != err_en and err.startswith(i18n.get(lang).format("error: {message}", message=f"{missing}: "))
    assert english_left(err.replace(str(missing), " "), lang) == [], err


def test_the_cli_option_errors_in_the_language(capsys):
    code, _, err = _run(capsys, "check", CATS, CATS, "--lang", "es", "--tolerance", "abc")
    assert code == 2 and err == ("error: tolerancia: se esperaba un número como 0.01, un porcentaje como 2% o "
                                 "abs=0.01,rel=0.02; se recibió 'abc'\n")
    code, _, err = _run(capsys, "check", CATS, CATS, "--tolerance", "abc")
    assert err == "error: tolerance: expected a number such as 0.01, a percentage such as 2%, or abs=0.01,rel=0.02; got 'abc'\n"


def test_no_traceback_from_a_subprocess(tmp_path, cli):
    bad = tmp_path / "bad.toml"
    bad.write_text('lang = "pt_BR"\nX = [[1, 2]\n', encoding="utf-8")
    code, out, err = cli("solve", bad, "--format", "json")
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert err.startswith(f"error: {bad}: not valid TOML: ")      # a file that is no TOML has no lang to tell
    code, out, err = cli("check", bad, bad, "--lang", "pt_BR")
    assert code == 2 and "Traceback" not in err and err.startswith(f"erro: {bad}: TOML inválido: ")


# ------------------------------------------------------------------ an answer's errors in the check report

ANSWERS = """
Q = [[1, "0.5.5"], ["1,234", "2 3"], ["exp 2", "[1,2]+3"]]
K = [[1, 2]]
V = [[1, 2], [3], [4, 5]]
scores = "x"
foo = [[1]]
weights = [[1, 2, 3], [1, 2, "0.49e"], ["sqrt(-1)", "1/0", "-oo"]]
"""


def _report():
    return check_answers(worked.Problem.from_file(CATS), parse_answers_text(ANSWERS))


def test_an_answers_errors_in_english_as_they_were():
    report = _report()
    assert [e["message"] for e in report.to_dict()["errors"]][:3] == [
        "foo: unknown matrix; expected some of: Q, K, V, scores, scaled, weights, Z",
        "Q[1,2]: cannot read '0.5.5': 0.5.5: two decimal points in one number",
        "Q[2,1]: cannot read '1,234': use a decimal point: 1.234"]
    text = report.text()
    assert "problem: K: wrong shape: expected 3×2 (3 rows of 2 entries), got 1 row\n" in text
    assert "problem: V: wrong shape: expected 3×2; row 2 has 1 entry\n" in text
    assert "  ! weights[3,3]: cannot read '-oo': −∞ is only an answer for masked scores\n" in text


@pytest.mark.parametrize("lang", SHIPPED)
def test_an_answers_errors_in_the_language(lang):
    report = _report()
    with i18n.using(lang):
        text = report.text()
        data = report.to_dict()
    lines = [ln for ln in text.splitlines() if "[" in ln and "]" in ln or ln.strip().startswith("!")]
    errors = [e["message"] for e in data["errors"]]
    assert len(errors) == 13 and all(e["matrix"] for e in data["errors"][:1])
    for line in errors + lines:
        assert english_left(line, lang) == [], line
    assert [e["matrix"] for e in data["errors"]] == [e["matrix"] for e in report.to_dict()["errors"]]


# ------------------------------------------------------------------ the server's error

@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_api_error_in_the_requests_language(web):
    bad = _data({"mask": "x"})
    r = web.post("/api/solve", json={"problem": bad})
    assert r.status_code == 422 and r.json() == {"error": "problem: mask: expected \"none\" or \"causal\", got 'x'",
                                                 "field": "mask"}
    r = web.post("/api/solve", json={"problem": bad}, headers={"Accept-Language": "de-DE,de;q=0.9"})
    assert r.status_code == 422 and r.json() == {
        "error": "problem: mask: erwartet wird \"none\" oder \"causal\", angegeben ist 'x'", "field": "mask"}
    r = web.post("/api/check?lang=fr", json={"problem": bad, "answers": {}})
    assert r.status_code == 422 and r.json()["field"] == "mask" and "attendu" in r.json()["error"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_the_api_checks_unreadable_answers_in_the_requests_language(web):
    answers = {"Q": [[1, "0.5.5"], [1, 2], [3, 4]]}
    en = web.post("/api/check", json={"problem": BASE, "answers": answers}).json()
    es = web.post("/api/check", json={"problem": BASE, "answers": answers}, headers={"Accept-Language": "es"}).json()
    assert en["errors"][0]["message"] == "Q[1,2]: cannot read '0.5.5': 0.5.5: two decimal points in one number"
    assert es["errors"][0]["message"] == "Q[1,2]: no se puede leer '0.5.5': 0.5.5: dos puntos decimales en un mismo número"
    assert {k: v for k, v in es["errors"][0].items() if k != "message"} == \
        {k: v for k, v in en["errors"][0].items() if k != "message"}
