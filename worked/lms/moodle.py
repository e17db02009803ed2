"""Moodle XML: one numerical question per single-entry ask, one Cloze (embedded answers) question per row,
column or whole-matrix ask; known mistakes are extra 0 % answers whose feedback names the mistake.

Format (Moodle docs, "Moodle XML format"): ``<question type="numerical">`` with ``<answer fraction="100">``,
``<tolerance>`` (absolute, ±) and ``<feedback>``; Cloze sub-questions ``{1:NUMERICAL:=value:tol#feedback~%0%value:tol#feedback}``.
Question texts use LaTeX in ``\\( … \\)`` (Moodle's MathJax filter). Categories: one per variant.
"""
from __future__ import annotations

from html import escape
from xml.sax.saxutils import escape as xesc

from . import fmt_num, matrix_latex, stem_html, variant_label

CORRECT = "Correct."


def _math(m: dict) -> str:
    return "\\(" + escape(matrix_latex(m), quote=False) + "\\)"


def _cdata(s: str) -> str:
    return "<![CDATA[" + s.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def _cloze_escape(s: str) -> str:
    for c in "\\}#~/\"":
        s = s.replace(c, "\\" + c)
    return s


def _cloze(e: dict) -> str:
    parts = [f"={fmt_num(e['expected'])}:{fmt_num(e['tolerance'])}#{_cloze_escape(CORRECT)}"]
    for m in e["mistakes"]:
        parts.append(f"%0%{fmt_num(m['value'])}:{fmt_num(e['tolerance'])}#{_cloze_escape(m['feedback'])}")
    return "{1:NUMERICAL:" + "~".join(parts) + "}"


def _answer(fraction: int, value: float, tol: float, feedback: str) -> str:
    return (f'    <answer fraction="{fraction}" format="moodle_auto_format">\n'
            f"      <text>{fmt_num(value)}</text>\n"
            f"      <tolerance>{fmt_num(tol)}</tolerance>\n"
            f'      <feedback format="html"><text>{xesc(feedback)}</text></feedback>\n'
            f"    </answer>\n")


def export(manifest: dict) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n', "<quiz>\n"]
    title = manifest["title"]
    for v in manifest["variants"]:
        cat = f"$course$/top/{title}/{variant_label(v)}"
        out.append(f'  <question type="category">\n    <category><text>{xesc(cat)}</text></category>\n  </question>\n')
        stem = stem_html(v, _math)
        for q in v["questions"]:
            entries = [e for e in q["entries"] if e["expected"] is not None]
            name = f"{v['variant']} {q['name']} {q['ask']}"
            single = len(q["entries"]) == 1
            if single:
                e = entries[0]
                text = stem + f"<p>Give <b>{escape(q['ask'])}</b>.</p>"
                out.append('  <question type="numerical">\n')
                out.append(f"    <name><text>{xesc(name)}</text></name>\n")
                out.append(f'    <questiontext format="html"><text>{_cdata(text)}</text></questiontext>\n')
                out.append(f'    <generalfeedback format="html"><text>{_cdata("Expected: " + fmt_num(e["expected"]) + " (exact: " + escape(e["exact"]) + ")")}</text></generalfeedback>\n')
                out.append(f"    <defaultgrade>{q['points']:g}</defaultgrade>\n    <penalty>0</penalty>\n    <hidden>0</hidden>\n")
                out.append(f"    <idnumber>{xesc(v['variant'] + '-' + q['name'])}</idnumber>\n")
                out.append(_answer(100, e["expected"], e["tolerance"], CORRECT))
                for m in e["mistakes"]:
                    out.append(_answer(0, m["value"], e["tolerance"], m["feedback"]))
                out.append("    <unitgradingtype>0</unitgradingtype>\n    <unitpenalty>0.1</unitpenalty>\n"
                           "    <showunits>3</showunits>\n    <unitsleft>0</unitsleft>\n  </question>\n")
            else:
                rows = []
                for e in q["entries"]:
                    cell = "−∞ (masked)" if e["expected"] is None else _cloze(e)
                    rows.append(f"<tr><td>{escape(e['ask'])}</td><td>{cell}</td></tr>")
                text = (stem + f"<p>Give every entry of <b>{escape(q['ask'])}</b>.</p>"
                        f"<table>{''.join(rows)}</table>")
                out.append('  <question type="cloze">\n')
                out.append(f"    <name><text>{xesc(name)}</text></name>\n")
                out.append(f'    <questiontext format="html"><text>{_cdata(text)}</text></questiontext>\n')
                out.append('    <generalfeedback format="html"><text></text></generalfeedback>\n')
                out.append(f"    <defaultgrade>{q['points']:g}</defaultgrade>\n    <penalty>0</penalty>\n    <hidden>0</hidden>\n")
                out.append(f"    <idnumber>{xesc(v['variant'] + '-' + q['name'])}</idnumber>\n  </question>\n")
    out.append("</quiz>\n")
    return "".join(out)
