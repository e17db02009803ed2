"""What the LMS importers read from our files, as their code reads it (not a reader of our own design):

- Moodle 4.5: ``question/format.php`` (``split_category_path``), ``question/format/gift/format.php``
  (``escapedchar_pre``/``escapedchar_post``), ``question/type/multianswer/questiontype.php``
  (``ANSWER_REGEX``, ``qtype_multianswer_extract_question``: the mark is the sum of the weights, feedback is
  HTML-decoded once and only ``\\}`` and ``\\#`` unescaped);
- Canvas: ``Qti::NumericInteraction#get_canvas_answers`` (exact answer = the ``stringMatch`` value that
  QTIMigrationTool makes of ``varequal``, margin = ``varlte`` − exact in BigDecimal);
- GIFT: the npm parser gift-pegjs, run with node (``tests/gift_parse.js``).
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
GIFT_PARSER = TESTS / "node_modules" / "gift-pegjs"


def strip_tags(s: str) -> str:
    """PHP's strip_tags on text without comments: every ``<`` that starts a tag up to its ``>``."""
    return re.sub(r"<[A-Za-z/!?][^>]*>?", "", s)


def moodle_category_levels(path: str) -> list[str]:
    """``split_category_path`` + ``clean_param(…, PARAM_TEXT)``, then the name as a browser shows it (Moodle
    prints category names as HTML with format_string)."""
    raw = re.split(r"(?<!/)/(?!/)", path)
    return [html.unescape(strip_tags(r.replace("//", "/").strip())) for r in raw]


_GIFT_ESC = {"\\:": "&&058;", "\\#": "&&035;", "\\=": "&&061;", "\\{": "&&123;", "\\}": "&&125;",
             "\\~": "&&126;", "\\n": "&&010"}


def moodle_gift_category(line: str) -> str:
    """What Moodle's GIFT reader keeps of a ``$CATEGORY:`` line: the text after ``escapedchar_pre`` (escapes
    become placeholders, which are not put back for a category; ``\\\\`` becomes ``\\``)."""
    s = line.replace("\\\\", "&&092;")
    for k, v in _GIFT_ESC.items():
        s = s.replace(k, v)
    s = s.replace("&&092;", "\\")
    assert s.startswith("$CATEGORY:")
    return s[len("$CATEGORY:"):].strip()


# question/type/multianswer/questiontype.php, as Python regexes (PCRE's lookbehind with alternatives of
# different lengths is three lookbehinds here)
_FRACTION = r"=|%(-?[0-9]+(?:[.,][0-9]*)?)%"
_ANSWER = r".+?(?<!\\)(?<!&)(?<!&amp;)(?=[~#}]|$)"
_FEEDBACK = r".*?(?<!\\)(?=[~}]|$)"
_ALT = f"({_FRACTION})?({_ANSWER})(#({_FEEDBACK}))?"
_TYPES = (r"(NUMERICAL|NM)|(MULTICHOICE|MC)|(MULTICHOICE_V|MCV)|(MULTICHOICE_H|MCH)|(SHORTANSWER|SA|MW)|"
          r"(SHORTANSWER_C|SAC|MWC)|(MULTICHOICE_S|MCS)|(MULTICHOICE_VS|MCVS)|(MULTICHOICE_HS|MCHS)|"
          r"(MULTIRESPONSE|MR)|(MULTIRESPONSE_H|MRH)|(MULTIRESPONSE_S|MRS)|(MULTIRESPONSE_HS|MRHS)")
_ANSWER_REGEX = re.compile(r"\{([0-9]*):(" + _TYPES + "):(" + _ALT + "(~" + _ALT + r")*)\}", re.S)
_ALT_REGEX = re.compile("~?" + _ALT, re.S)
_NUMBER = r"-?(([0-9]+[.,]?[0-9]*|[.,][0-9]+)([eE][-+]?[0-9]+)?)"
_NUMERICAL = re.compile(f"^({_NUMBER})(:{_NUMBER})?$", re.S)


def moodle_cloze(text: str) -> tuple[int, list[dict], str]:
    """``qtype_multianswer_extract_question``: (the question's mark, its sub-questions, the question text as
    stored, each sub-question replaced by ``{#n}``), each sub-question
    {"weight", "type", "answers": [(fraction, answer, tolerance, feedback HTML)]}; feedback as stored (decoded
    once, ``\\}``/``\\#`` unescaped), to show as HTML."""
    mark, subs = 0, []
    while m := _ANSWER_REGEX.search(text):
        weight = int(m.group(1)) if m.group(1) != "" else 1
        numerical = bool(m.group(3))
        alts, answers = m.group(16), []
        while a := _ALT_REGEX.match(alts):
            frac = 1.0 if a.group(1) == "=" else (0.01 * float(a.group(2).replace(",", ".")) if a.group(2) else 0.0)
            fb = a.group(5) or ""
            fb = html.unescape(fb).replace("\\}", "}").replace("\\#", "#")
            num = _NUMERICAL.match(a.group(3)) if numerical else None
            assert num, f"not a NUMERICAL answer: {a.group(3)!r}"
            answers.append((frac, num.group(1), num.group(6) or "0", fb))
            alts = alts.split(a.group(0), 1)[1]
        subs.append({"weight": weight, "numerical": numerical, "answers": answers})
        mark += weight
        text = text.replace(m.group(0), "{#%d}" % len(subs), 1)
    return mark, subs, text


def canvas_numeric(conditionvar, ns) -> dict:
    """``get_canvas_answers`` on what QTIMigrationTool makes of our ``<or>``: the ``varequal`` text becomes the
    stringMatch value (exact), the ``varlte`` text the upper bound; margin = upper − exact in BigDecimal."""
    exact = conditionvar.find("q:or/q:varequal", ns).text
    upper = conditionvar.find("q:or/q:and/q:varlte", ns).text
    precision = conditionvar.find("q:or/q:and/q:vargt", ns) is not None   # read as a precision answer
    return {"type": "precision_answer" if precision else "exact_answer",
            "exact": Decimal(exact), "margin": Decimal(upper) - Decimal(exact)}


def rounded(expected: float, places: int) -> Decimal:
    return Decimal(repr(expected)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def node() -> str | None:
    return shutil.which("node") or shutil.which("nodejs")


def _gift_parser_missing() -> str | None:
    if node() is None:
        return "node is not installed (Debian: nodejs npm; then `make test` installs gift-pegjs)"
    if not GIFT_PARSER.is_dir():
        return "gift-pegjs is not installed: npm ci --prefix tests (`make test` does it where npm is installed)"
    return None


# skipped only on a developer's machine; in CI (CI=true) a missing node or gift-pegjs fails the test
needs_node = pytest.mark.skipif(_gift_parser_missing() is not None and not os.environ.get("CI"),
                                reason=_gift_parser_missing() or "")


def gift_parse(text: str) -> list[dict]:
    """gift-pegjs's parse of *text* (raises AssertionError with its message when it refuses the file)."""
    assert node() and GIFT_PARSER.is_dir(), "gift-pegjs is not installed: npm ci --prefix tests"
    r = subprocess.run([node(), str(TESTS / "gift_parse.js")], input=text.encode(), capture_output=True,
                       cwd=TESTS, timeout=120)
    assert r.returncode == 0, "gift-pegjs refused the file: " + r.stderr.decode()
    return json.loads(r.stdout)
