"""Moodle XML: one numerical question per single-entry ask, one Cloze (embedded answers) question per row,
column or whole-matrix ask; known mistakes are extra 0 % answers whose feedback names the mistake. A choice
question (``type = "choice"``) is a single-answer ``multichoice`` with shuffled answers: the right option at
100 %, each wrong one (a named mistake's value) at 0 % with that mistake's feedback.

Format (Moodle docs, "Moodle XML format"; read in Moodle 4.5's ``question/format/xml/format.php`` and
``question/type/multianswer/questiontype.php``): ``<question type="numerical">`` with
``<answer fraction="100">``, ``<tolerance>`` (absolute, ±), ``<feedback>`` and ``<defaultgrade>`` (its
mark); Cloze sub-questions ``{w:NUMERICAL:=value:tol#feedback~%0%value:tol#feedback}``, where the
question's mark is the sum of the weights *w*, which must be whole numbers (``{([0-9]*):``), and
``<defaultgrade>`` is ignored on import.

Right answers (:func:`worked.lms.right_answers`): the value at the places asked with the tolerance left after
the rounding, then the exact value with the spec's tolerance; Moodle takes the first answer that matches, so
full marks go to exactly [exact ± tol] and the first is the correct answer Moodle shows.

Marks (:func:`mark_scale`): every question's mark is *K* × its points, *K* the smallest whole number that
makes every cell's weight whole: 1 when the points allow it (2 points over 2 cells), 6 for quiz-1 (2 points
over 3 cells, 3 over 6). Moodle scales a quiz's total of marks to its maximum grade, so with the maximum
grade set to the quiz's points every grade is exact; each variant category's description says so.

Question texts use LaTeX in ``\\( … \\)`` (Moodle's MathJax filter). Categories: one per variant, under
one per quiz named with its title and seed. Idnumbers: variant code and question name.
"""
from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from html import escape
from math import lcm
from xml.sax.saxutils import escape as xesc

from ..i18n import current
from ..i18n import tr as _
from . import all_questions, sections, is_choice, option_feedback, asked, category, clean, correct, dec, feedback, fmt_num, idnumber, matrix_latex, one_line, places, right_answers, rounded, stem_html

def _math(m: dict) -> str:
    return "\\(" + escape(matrix_latex(m), quote=False) + "\\)"


def cloze_text(s: str) -> str:
    """Plain text as a Cloze answer's feedback. Moodle cuts a sub-question at ``~`` or ``}`` (unless after a
    backslash), then HTML-decodes the feedback once and unescapes only ``\\}`` and ``\\#``: so the text is
    HTML-escaped twice (once for the HTML it becomes, once for that decoding), and ``~ { } \\`` are
    character references, which the decoding turns back into the characters."""
    h = escape(escape(clean(s), quote=False), quote=False)
    return h.replace("\\", "&#92;").replace("~", "&#126;").replace("{", "&#123;").replace("}", "&#125;")


def _cloze(e: dict, weight: int, nplaces: int) -> str:
    parts = [f"={fmt_num(value)}:{fmt_num(tol)}#{cloze_text(correct())}" for value, tol in right_answers(e, nplaces)]
    for m in e["mistakes"]:
        parts.append(f"%0%{fmt_num(m['value'])}:{fmt_num(e['tolerance'])}#{cloze_text(feedback(m['feedback']))}")
    return "{" + f"{weight}:NUMERICAL:" + "~".join(parts) + "}"


def _text(tag: str, html: str) -> str:
    return f'    <{tag} format="html"><text>{xesc(html)}</text></{tag}>\n'


def _answer(fraction: int, value, tol, feedback: str) -> str:
    return (f'    <answer fraction="{fraction}" format="moodle_auto_format">\n'
            f"      <text>{fmt_num(value)}</text>\n"
            f"      <tolerance>{fmt_num(tol)}</tolerance>\n"
            f'      <feedback format="html"><text>{xesc(escape(feedback, quote=False))}</text></feedback>\n'
            f"    </answer>\n")


def _numerical(name: str, ident: str, text: str, points: Decimal, e: dict, nplaces: int) -> str:
    value = rounded(e, nplaces)
    out = ['  <question type="numerical">\n',
           f"    <name><text>{xesc(name)}</text></name>\n",
           _text("questiontext", text),
           _text("generalfeedback", _("Expected: {value} (exact: {exact})", value=current().number(fmt_num(value)),
                                      exact=escape(e["exact"]))),
           f"    <defaultgrade>{fmt_num(points)}</defaultgrade>\n    <penalty>0</penalty>\n    <hidden>0</hidden>\n",
           f"    <idnumber>{xesc(ident)}</idnumber>\n",
           *(_answer(100, a, tol, correct()) for a, tol in right_answers(e, nplaces))]
    for m in e["mistakes"]:
        out.append(_answer(0, m["value"], e["tolerance"], feedback(m["feedback"])))
    out.append("    <unitgradingtype>0</unitgradingtype>\n    <unitpenalty>0.1</unitpenalty>\n"
               "    <showunits>3</showunits>\n    <unitsleft>0</unitsleft>\n  </question>\n")
    return "".join(out)


def _multichoice(name: str, ident: str, text: str, points: Decimal, q: dict) -> str:
    """A single-answer ``multichoice`` question: the options as the sheet letters them (Moodle shuffles them
    again), the right one at 100 %, each wrong one at 0 % with its mistake's feedback."""
    right = next(o for o in q["options"] if o["right"])
    out = ['  <question type="multichoice">\n',
           f"    <name><text>{xesc(name)}</text></name>\n",
           _text("questiontext", text),
           _text("generalfeedback", _("Expected: {value} (exact: {exact})", value=escape(current().number(right["value"])),
                                      exact=escape(q["entries"][0]["exact"]))),
           f"    <defaultgrade>{fmt_num(points)}</defaultgrade>\n    <penalty>0</penalty>\n    <hidden>0</hidden>\n",
           f"    <idnumber>{xesc(ident)}</idnumber>\n",
           "    <single>true</single>\n    <shuffleanswers>true</shuffleanswers>\n"
           "    <answernumbering>ABCD</answernumbering>\n    <showstandardinstruction>0</showstandardinstruction>\n",
           # no combined feedback: Moodle shows it under the chosen option's own ("Correct." or the mistake's),
           # which would say "Correct." twice (as GIFT's import leaves it, blank)
           _text("correctfeedback", ""), _text("partiallycorrectfeedback", ""), _text("incorrectfeedback", "")]
    for o in q["options"]:
        out.append(f'    <answer fraction="{100 if o["right"] else 0}" format="html">\n'
                   f"      <text>{xesc(escape(o['value'], quote=False))}</text>\n"
                   f'      <feedback format="html"><text>{xesc(escape(option_feedback(o), quote=False))}</text></feedback>\n'
                   f"    </answer>\n")
    out.append("  </question>\n")
    return "".join(out)


def mark_scale(manifest: dict) -> int:
    """*K*: the smallest whole number for which K × points / cells is a whole number for every multi-cell ask."""
    k = 1
    for q in all_questions(manifest["variants"][0]) if manifest["variants"] else []:
        if len(q["entries"]) > 1:
            k = lcm(k, (Fraction(dec(q["points"])) / len(asked(q))).denominator)
    return k


def export(manifest: dict) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n', "<quiz>\n"]
    k = mark_scale(manifest)
    total = sum((dec(q["points"]) for q in all_questions(manifest["variants"][0])), Decimal(0)) if manifest["variants"] else 0
    scale = ("" if k == 1 else
             _(" Marks are {k} × the points (Moodle's Cloze weights are whole numbers): set the quiz's maximum grade to "
               "{total}.", k=k, total=current().number(fmt_num(total))))
    info = "<p>" + _("Imported from {worked}: {title}, seed {seed}.", worked="<i>worked quiz</i>",
                     title=escape(one_line(manifest["title"]), quote=False), seed=manifest["seed"]) + f"{scale}</p>"
    for v in manifest["variants"]:
        out.append('  <question type="category">\n'
                   f"    <category><text>{xesc(category(manifest, v))}</text></category>\n"
                   + _text("info", info) +
                   "  </question>\n")
        for sv in sections(v):      # a quiz with [[parts]]: every part's questions in the variant's category
            _questions(out, sv, k)
    out.append("</quiz>\n")
    return "".join(out)


def _questions(out: list, v: dict, k: int) -> None:
    """The questions of a variant (or of one part of it) about its problem, appended to *out*."""
    stem = stem_html(v, _math)
    nplaces = places(v)
    for q in v["questions"]:
        entries = asked(q)
        name = f"{v['variant']} {q['name']} {q['ask']}"
        mark = k * dec(q["points"])
        if is_choice(q):
            text = stem + "<p>" + _("Which is {ask}? Choose one.", ask=f"<b>{escape(q['ask'])}</b>") + "</p>"
            out.append(_multichoice(name, idnumber(v, q), text, mark, q))
            continue
        if len(q["entries"]) == 1:
            text = stem + "<p>" + _("Give {ask}.", ask=f"<b>{escape(q['ask'])}</b>") + "</p>"
            out.append(_numerical(name, idnumber(v, q), text, mark, entries[0], nplaces))
            continue
        w = mark / len(entries)   # whole: see mark_scale
        rows = []
        for e in q["entries"]:
            cell = _("−∞ (masked)") if e["expected"] is None else _cloze(e, int(w), nplaces)
            rows.append(f"<tr><td>{escape(e['ask'])}</td><td>{cell}</td></tr>")
        text = (stem + "<p>" + _("Give every entry of {ask}.", ask=f"<b>{escape(q['ask'])}</b>") + "</p>"
                f"<table>{''.join(rows)}</table>")
        out.append('  <question type="cloze">\n')
        out.append(f"    <name><text>{xesc(name)}</text></name>\n")
        out.append(_text("questiontext", text))
        out.append('    <generalfeedback format="html"><text></text></generalfeedback>\n')
        out.append(f"    <defaultgrade>{fmt_num(mark)}</defaultgrade>\n    <penalty>0</penalty>\n    <hidden>0</hidden>\n")
        out.append(f"    <idnumber>{xesc(idnumber(v, q))}</idnumber>\n  </question>\n")
