"""`--pdf-engine weasyprint` (issue 25): the PDFs are set in the fonts bundled with worked and no others, so
the bytes are the same twice in a process, in another process, with `--jobs 1` and `--jobs 2`, and on a
machine without a single font installed (there WeasyPrint used to crash in Pango); where Pango is missing,
one `error:` line says what to install, before WeasyPrint is imported."""
from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from sheet_support import needs_weasyprint
from worked.render.pdf import ASSETS, FONT_FACES, LIBRARIES, LIBRARIES_ENV, weasyprint_problem

ROOT = Path(__file__).resolve().parents[1]
QUIZ = ROOT / "problems" / "quiz-1.toml"
ABSENT = "libworked-absent-pango.so.0"


def no_fonts_env(tmp_path: Path, **extra) -> dict:
    """The environment of a machine without fonts: fontconfig reads a configuration that names no font
    folder (and caches nowhere else), so the process sees no installed font at all."""
    conf = tmp_path / "no-fonts.conf"
    conf.write_text('<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">\n'
                    f"<fontconfig><cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>\n", encoding="utf-8")
    return dict(os.environ, FONTCONFIG_FILE=str(conf), **extra)


def embedded_fonts(pdf: bytes) -> set[str]:
    """The base names of the fonts embedded in *pdf* (without the subset tag), read with pypdf."""
    from pypdf import PdfReader

    out = set()
    for page in PdfReader(io.BytesIO(pdf)).pages:
        fonts = page["/Resources"].get_object().get("/Font") or {}
        for ref in fonts.get_object().values():
            out.add(str(ref.get_object()["/BaseFont"]).split("+", 1)[-1])
    return out


# ---- finding out whether WeasyPrint can run, without importing it

def test_every_library_weasyprint_loads_is_checked():
    """Each library weasyprint/text/ffi.py opens (read as text: not imported) is one that the check loads
    first, by the soname the dynamic loader knows it by, with the Debian package that has it."""
    source = Path(find_spec("weasyprint").submodule_search_locations[0], "text", "ffi.py").read_text()
    opened = set(re.findall(r"'(lib[\w.+-]+\.so\.\d+)'", source))
    assert opened >= {"libpango-1.0.so.0", "libpangoft2-1.0.so.0", "libgobject-2.0.so.0"}
    checked = {so for so, _ in LIBRARIES}
    # harfbuzz-vector is optional (colour emoji); harfbuzz-subset is optional to WeasyPrint but not to the bytes
    assert opened - {"libharfbuzz-vector.so.0"} <= checked, opened - checked
    assert all(pkg and " " not in pkg for _, pkg in LIBRARIES)


def test_a_missing_library_is_named_with_its_package():
    """With Pango absent (the loader's answer given by the check's parameter), the message is one line that
    names the library, the Debian package to install and the engine that needs nothing."""
    msg = weasyprint_problem(loadable=lambda so: so != "libpango-1.0.so.0")
    assert msg is not None and "\n" not in msg
    assert "libpango-1.0.so.0" in msg and "apt-get install libpango-1.0-0)" in msg
    assert "--pdf-engine typst" in msg and "libpangoft2" not in msg
    everything = weasyprint_problem(loadable=lambda so: False)
    assert all(so in everything and pkg in everything for so, pkg in LIBRARIES)


def test_the_loader_is_asked_and_the_fonts_are_looked_for(tmp_path):
    """The real check dlopens the soname (one that does not exist is reported) and looks for the font files."""
    assert ABSENT in weasyprint_problem(libraries=[(ABSENT, "libpango-1.0-0")], fonts=[])
    assert weasyprint_problem(libraries=[], fonts=[]) is None
    gone = tmp_path / "texgyretermes-regular.otf"
    msg = weasyprint_problem(libraries=[], fonts=[gone])
    assert str(gone) in msg and "reinstall worked" in msg
    assert weasyprint_problem(libraries=[], fonts=None) is None     # the bundled fonts are all there
    assert all((ASSETS / f).is_file() for *_, f in FONT_FACES)


RUN_CLI = ("import sys\nfrom worked.cli import main\nrc = main(sys.argv[1:])\n"
           "print('weasyprint imported' if 'weasyprint' in sys.modules else 'weasyprint not imported')\n"
           "sys.exit(rc)\n")


@pytest.mark.parametrize("command", [
    ["sheet", "--pdf-engine", "weasyprint"],
    ["quiz", str(QUIZ), "-n", "2", "--pdf-engine", "weasyprint", "--quiet"],
])
def test_without_pango_the_command_says_what_to_install(tmp_path, command):
    """`worked sheet|quiz --pdf-engine weasyprint` where Pango cannot be loaded (the check's environment seam
    names a library that does not exist): one `error:` line naming the package, exit 2, nothing written,
    and WeasyPrint never imported (its import fails with a traceback, its layout crashes without fonts)."""
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-c", RUN_CLI, *command, "-o", str(out)], capture_output=True, text=True,
                       timeout=300, cwd=ROOT, env=dict(os.environ, **{LIBRARIES_ENV: f"{ABSENT}=libpango-1.0-0"}))
    assert r.returncode == 2, r.stderr
    assert r.stderr == (f"error: --pdf-engine weasyprint needs Pango (with HarfBuzz, fontconfig and GLib), and this "
                        f"machine lacks {ABSENT}: install it (Debian: apt-get install libpango-1.0-0), or use "
                        "--pdf-engine typst\n")
    assert r.stdout.splitlines()[-1] == "weasyprint not imported"
    assert not out.exists()


# ---- the bundled fonts have every character the sheets print

def _text(html: str) -> str:
    """The characters *html* shows: its text outside tags and the ``content:`` strings of its CSS."""
    import html as H

    css = "".join(re.findall(r'content:\s*"([^"]*)"', html))
    body = re.sub(r"<(style|script)\b.*?</\1>", "", html, flags=re.S)
    return H.unescape(re.sub(r"<[^>]+>", "", body)) + css


def test_every_character_the_sheets_print_is_in_a_bundled_font():
    """Every character of the WeasyPrint HTML of both documents of every shipped problem (every check worked)
    and of a quiz's "Graded answers" box is in the bundled serif and sans fonts or in the math font, the
    fallback of both: no installed font is ever asked for one (it would make the bytes the machine's)."""
    from fontTools.ttLib import TTFont

    from sheet_support import PROBLEMS
    from worked.problem import load
    from worked.quiz import build_variant, load_spec, plan
    from worked.render import answer_key_html, worksheet_html
    from worked.solver import solve

    def cmap(file):
        return set(TTFont(str(ASSETS / file), lazy=True).getBestCmap())

    text_fonts = [cmap(f) for fam, _, _, f in FONT_FACES if fam != "Worked Math"]
    math = cmap(next(f for fam, _, _, f in FONT_FACES if fam == "Worked Math"))
    covered = set.intersection(*text_fonts) | math
    shown = set()
    for path in PROBLEMS:
        sol = solve(load(str(path)), checks="all")
        for make in (answer_key_html, worksheet_html):
            shown |= set(_text(make(sol, for_pdf=True)))
    spec = load_spec(QUIZ)
    files = build_variant(spec, plan(spec.seed, count=1)[0], ("html",))["files"]
    (key,) = [v.decode() for k, v in files.items() if k.endswith("answer-key.html")]
    box = re.search(r'<section class="quiz-questions".*?</section>', key, flags=re.S)[0]
    shown |= set(_text(box))
    assert {"√", "≈", "·", "−", "′", "Σ"} & shown and "Graded answers" in _text(box)
    missing = sorted(c for c in shown if ord(c) not in covered and not c.isspace())
    assert missing == [], [f"{c} U+{ord(c):04X}" for c in missing]


# ---- the same bytes everywhere

@needs_weasyprint
def test_same_bytes_twice_in_another_process_and_without_any_font(tmp_path):
    """The Part 9 key twice in this process, then `worked sheet` in a process with another hash seed on a
    machine without fonts: the same bytes, and only the bundled fonts embedded; no warning about the fonts."""
    from worked.problem import load
    from worked.render import answer_key_pdf, worksheet_pdf
    from worked.solver import solve

    sol = solve(load(None))
    key = answer_key_pdf(sol, pdf_engine="weasyprint")
    assert answer_key_pdf(sol, pdf_engine="weasyprint") == key
    assert embedded_fonts(key) <= {f"{fam.replace(' ', '-')}{suffix}" for fam, *_ in FONT_FACES
                                   for suffix in ("", "-Bold", "-Italic", "-Bold-Italic")}
    assert {"Worked-Serif", "Worked-Serif-Italic", "Worked-Sans-Bold"} <= embedded_fonts(key)

    r = subprocess.run([sys.executable, "-m", "worked", "sheet", "--pdf-engine", "weasyprint", "--format", "pdf",
                        "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=600, cwd=ROOT,
                       env=no_fonts_env(tmp_path, PYTHONHASHSEED="12345"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ugly" not in r.stderr and "CRITICAL" not in r.stderr, r.stderr
    (folder,) = (tmp_path / "o").iterdir()
    assert (folder / "answer-key.pdf").read_bytes() == key
    assert (folder / "worksheet.pdf").read_bytes() == worksheet_pdf(sol, pdf_engine="weasyprint")


@needs_weasyprint
def test_quiz_jobs_1_and_2_give_the_same_bytes(tmp_path):
    """`worked quiz --pdf-engine weasyprint`: --jobs 1 here and --jobs 2 on a machine without fonts write
    byte-identical folders (every variant's sheets and the class PDFs), as `quiz --help` promises."""
    folders = []
    for jobs, env in ((1, dict(os.environ)), (2, no_fonts_env(tmp_path))):
        out = tmp_path / f"jobs{jobs}"
        r = subprocess.run([sys.executable, "-m", "worked", "quiz", str(QUIZ), "-n", "2", "--format", "pdf",
                            "--pdf-engine", "weasyprint", "--jobs", str(jobs), "--quiet", "-o", str(out)],
                           capture_output=True, text=True, timeout=900, cwd=ROOT, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        folders.append({str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()})
    one, two = folders
    assert sum(name.endswith(".pdf") for name in one) >= 6     # 2 variants × 2 sheets + the 2 class PDFs
    assert one.keys() == two.keys()
    assert [n for n in one if one[n] != two[n]] == []
