"""The last English words of issue 28: the server's full-lane answer, the notebook's errors, what a file was
expected to be, and an unknown language; then a sweep over every problem's German worksheet, key and notebook
(their text, the notebooks' markdown, comments and printed strings) and every quiz spec's German output (pages,
LaTeX, Moodle XML, GIFT, Canvas QTI, notebooks) and the commands' lines: no English sentence is left. English
stays as it was, byte for byte."""
from __future__ import annotations

import asyncio
import io
import json
import re
import tokenize
import zipfile
from pathlib import Path

import pytest

from worked import i18n
from worked.errors import WorkedError

from test_i18n_messages import english

ROOT = Path(__file__).resolve().parents[1]
PROBLEMS = sorted(p for p in (ROOT / "problems").glob("*.toml") if not p.stem.startswith("quiz"))
SPECS = sorted((ROOT / "problems").glob("quiz-*.toml"))


# ------------------------------------------------------------------ the messages wired here

@pytest.mark.parametrize("name", ["quick", "heavy"])
def test_a_full_lane_says_so_in_the_language(name):
    from worked.server.app import ApiError, Lane

    lane = Lane(name, 1, 0, 10)
    with pytest.raises(ApiError) as e:
        asyncio.run(lane.run(print, timeout=1, what=i18n.Msg("checking")))
    msg = e.value.message
    assert e.value.status == 503 and e.value.extra["retry_after"] == 1
    assert str(msg) == f"the server is busy (0 {name} jobs waiting); try again in a moment"
    de, es = msg.localized(i18n.get("de")), msg.localized(i18n.get("es"))
    assert de.startswith("der Server ist ausgelastet (0 ") and es.startswith("el servidor está ocupado (0 ")
    assert english(de) == english(es) == [] and name not in de + es


@pytest.mark.parametrize("error, detail, en", [
    ("NameError", "name 'x' is not defined", "the notebook did not run: NameError: name 'x' is not defined"),
    ("DeadKernelError", "", "the notebook did not run: DeadKernelError"),
])
def test_a_notebook_that_did_not_run_in_the_language(error, detail, en):
    from worked.writers.notebook import _not_run

    msg = _not_run(error, detail)
    assert str(msg) == en
    de = msg.localized(i18n.get("de"))
    assert de == "das Notebook ließ sich nicht ausführen: " + en.partition("run: ")[2]
    fr = msg.localized(i18n.get("fr"))
    assert fr.startswith("le notebook n’a pas pu s’exécuter\u00a0: " + error)
    assert english(de, detail) == english(fr, detail) == []


def test_a_notebook_written_onto_a_folder_is_one_line_exit_2(tmp_path, cli):
    problem = ROOT / "problems" / "cats-chase-mice.toml"
    folder = tmp_path / "nb.ipynb"
    folder.mkdir()
    code, out, err = cli("notebook", problem, "-o", folder, "--lang", "de")
    assert code == 2 and "Traceback" not in err
    assert err == f"Fehler: {folder}: ist ein Ordner, erwartet wird der Dateiname eines Notebooks\n"
    code, out, err = cli("notebook", problem, "-o", folder)
    assert err == f"error: {folder}: is a folder, expected a notebook file name\n"


def test_execute_needs_its_packages_in_the_language():
    msg = i18n.Msg("--execute needs {a} and {b}: pip install {package}", a="nbclient", b="ipykernel",
                   package="'worked[notebook]'")
    assert str(msg) == "--execute needs nbclient and ipykernel: pip install 'worked[notebook]'"
    assert msg.localized(i18n.get("pt_BR")) == "--execute precisa de nbclient e ipykernel: pip install 'worked[notebook]'"


def test_what_a_quiz_spec_was_expected_to_be_is_in_the_language(tmp_path, cli):
    """A quiz spec that is a folder: the line says what was expected in the language too."""
    spec = tmp_path / "spec.toml"
    spec.mkdir()
    code, out, err = cli("quiz", spec, "-o", tmp_path / "out", "--lang", "de")
    assert code == 2 and "Traceback" not in err and len(err.splitlines()) == 1
    assert str(spec) in err and "Test-Spezifikation in TOML" in err and english(err, str(spec)) == []
    code, out, err = cli("quiz", spec, "-o", tmp_path / "out")
    assert err == f"error: {spec}: is a directory, expected a TOML quiz spec\n"


def test_an_unknown_language_is_said_in_english_and_a_known_one_is_honoured(tmp_path, cli):
    """--lang xx: the line is English (the language asked for has no words) and lists the languages there are; a
    problem whose lang is unknown, run with --lang de, is told so in German."""
    problem = ROOT / "problems" / "cats-chase-mice.toml"
    code, out, err = cli("sheet", problem, "--lang", "xx", "-o", tmp_path)
    assert code == 2 and err == "error: --lang: unknown language 'xx': the languages there are en, de, es, fr, pt_BR\n"
    bad = tmp_path / "xx.toml"
    bad.write_text('lang = "xx"\n' + problem.read_text(encoding="utf-8"), encoding="utf-8")
    code, out, err = cli("sheet", bad, "--lang", "de", "-o", tmp_path / "out")
    assert code == 2 and err == f"Fehler: {bad}: lang: unbekannte Sprache 'xx': Verfügbar sind en, de, es, fr, pt_BR\n"
    code, out, err = cli("sheet", bad, "--lang", "fr", "-o", tmp_path / "out")
    assert code == 2 and err.startswith("erreur\u00a0: ") and "'xx'" in err


# ------------------------------------------------------------------ the sweep

#: English words no German sentence has (whole words). Allowed, and taken out of a text before it is searched:
#: file names and paths, the problem's own words (its title, tokens and vocabulary, as the problem file has them),
#: code identifiers (a notebook's code is searched in its comments and its string literals only, LaTeX without its
#: commands and comments), a mistake's id in an LMS feedback ([column-softmax]: what grading reads) and the words
#: German uses as they are (Score, Softmax, Token, Notebook, Feed-Forward, ReLU, Gradient).
ENGLISH = re.compile(r"\b(the|of|and|is|are|with|each|every|Step|Task|Multiply|Compute|Divide|wrong|correct|"
                     r"answers?|places|row|column|weights?|exact|Worked solution|Answer key|Worksheet|expected|got|"
                     r"missing|unknown|cannot|wrote|graded|already|exists|folder|line|students?|tries|use|give|not|"
                     r"found|server|request|scored|warning|note|entry|question|matrix|your code here|Updated|"
                     r"Loss|Queries|Keys|Values|Output|Random|sum|rowsum|colsum|LNback)\b")


def _visible(html: str) -> str:
    html = re.sub(r"<(style|script|math)\b.*?</\1>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


def _code_words(src: str) -> str:
    """A code cell's words: its comments and string literals (identifiers and NumPy stay English)."""
    out = []
    try:
        for t in tokenize.generate_tokens(io.StringIO(src).readline):
            if t.type == tokenize.COMMENT or t.type == tokenize.STRING:
                out.append(t.string)
    except (tokenize.TokenError, IndentationError):
        return src
    return "\n".join(out)


def _notebook_words(path: Path) -> str:
    nb = json.loads(path.read_text(encoding="utf-8"))
    return "\n".join("".join(c["source"]) if c["cell_type"] == "markdown" else _code_words("".join(c["source"]))
                     for c in nb["cells"])


def _own_words(path: Path) -> list[str]:
    """What a problem file (or a quiz spec) names itself: strings in it (title, tokens, words, vocab)."""
    text = path.read_text(encoding="utf-8")
    return sorted({w for s in re.findall(r'"([^"\n]*)"', text) for w in re.findall(r"[\w']+", s)}, key=len, reverse=True)


def _stray(text: str, own: list[str]) -> list[str]:
    text = re.sub(r"\S*/\S*", " ", text)                        # paths and file names
    text = re.sub(r"`[^`\n]*`", " ", text)                      # code in markdown
    text = re.sub(r"\[[a-z0-9]+(-[a-z0-9]+)+\]", " ", text)       # a mistake's id, [column-softmax] (what grading reads)
    found = set()
    for m in ENGLISH.finditer(text):
        if m.group(0) not in own:
            found.add(text[max(0, m.start() - 40): m.end() + 40].replace("\n", " "))
    return sorted(found)


def _file_words(f: Path) -> str | None:
    if f.suffix == ".html":
        return _visible(f.read_text(encoding="utf-8"))
    if f.suffix in (".tex", ".gift", ".txt"):
        text = re.sub(r"(?<!\\)%.*", " ", f.read_text(encoding="utf-8"))     # a LaTeX comment is the template's code
        return re.sub(r"\\[A-Za-z]+", " ", text)                              # and so are its commands
    if f.suffix == ".xml":
        return _visible(re.sub(r"<!\[CDATA\[(.*?)\]\]>", r"\1", f.read_text(encoding="utf-8"), flags=re.S))
    if f.suffix == ".ipynb":
        return _notebook_words(f)
    if f.suffix == ".zip":
        with zipfile.ZipFile(f) as z:
            return "\n".join(_visible(z.read(n).decode("utf-8")) for n in z.namelist() if n.endswith((".xml", ".html")))
    return None


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.stem)
def test_a_german_problem_has_no_english_sentence(problem, tmp_path, cli):
    """`worked sheet` (HTML and LaTeX, worksheet and key) and `worked notebook` in German: their lines, the files'
    text and the notebook's words."""
    own = _own_words(problem)
    code, out, err = cli("sheet", problem, "--format", "html,tex", "-o", tmp_path / "s", "--lang", "de")
    assert code == 0, err
    found = _stray(out + err, own)
    code, out, err = cli("notebook", problem, "-o", tmp_path / "n.ipynb", "--lang", "de")
    assert code == 0, err
    found += _stray(out + err, own) + _stray(_notebook_words(tmp_path / "n.ipynb"), own)
    for f in sorted((tmp_path / "s").rglob("*")):
        words = _file_words(f)
        found += [f"{f.name}: {s}" for s in _stray(words, own)] if words is not None else []
    assert found == []


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_a_german_quiz_has_no_english_sentence(spec, tmp_path, cli):
    """`worked quiz` in German, one variant in every text format (pages, LaTeX, Moodle XML, Canvas QTI, GIFT and the
    exercise notebooks): the command's lines and every file's text. manifest.json/.csv are data (English)."""
    own = _own_words(spec)
    out_dir = tmp_path / "q"
    code, out, err = cli("quiz", spec, "-n", "1", "--format", "html,tex,moodle,qti,gift,ipynb", "--jobs", "1",
                         "-o", out_dir, "--lang", "de")
    assert code == 0, err
    found = _stray(out + err, own)
    for f in sorted(out_dir.rglob("*")):
        words = _file_words(f)
        found += [f"{f.name}: {s}" for s in _stray(words, own)] if words is not None else []
    assert found == []


def test_the_sweep_finds_english_in_english(tmp_path, cli):
    """The same search over the English sheet and notebook finds English words (the sweep above is not empty by
    construction)."""
    problem = ROOT / "problems" / "cats-chase-mice.toml"
    own = _own_words(problem)
    code, out, err = cli("sheet", problem, "--format", "html,tex", "-o", tmp_path / "s")
    assert code == 0, err
    assert _stray(_file_words(tmp_path / "s" / "cats-chase-mice" / "answer-key.html"), own)
    assert _stray(_file_words(tmp_path / "s" / "cats-chase-mice" / "worksheet.tex"), own)
    code, out, err = cli("notebook", problem, "-o", tmp_path / "n.ipynb")
    assert code == 0 and _stray(_notebook_words(tmp_path / "n.ipynb"), own)


def test_the_attention_training_steps_gradient_labels_are_sentences_with_their_symbol():
    """``Gradient dW_Q`` … of an attention training step are declared as a block's are (``stages.gradient_label``):
    the same text in English, the symbol set as math where a writer sets it (LaTeX here)."""
    from worked import eq, printers, stages
    from worked.render import view

    grids = {**stages._TRAIN_GRIDS, **stages._CROSS_DW}
    for sid in ("dZ", "dconcat", "dV", "dA", "dQ", "dK", "dW_Q", "dW_K", "dW_V"):
        label = grids[sid].label
        assert isinstance(label, eq.Said) and printers.text(label) == f"Gradient {sid}"
        assert "$" in printers.latex(label)
    with i18n.using("es"):
        assert printers.text(stages._TRAIN_GRIDS["dW_Q"].label) == "Gradiente dW_Q"
    problem = __import__("worked").Problem.from_file(str(ROOT / "problems" / "cats-chase-mice-train.toml"))
    assert "Gradient dW_Q" in [g["label"] for g in view.answer_grids(problem)]
