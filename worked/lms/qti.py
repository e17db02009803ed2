"""Canvas: a QTI 1.2 zip that Canvas's "QTI .zip" import reads: ``imsmanifest.xml``, the assessment XML and
Canvas's ``assessment_meta.xml`` (title, points and settings, in the namespace of Canvas's own exporter).

Canvas converts the QTI with instructure's QTIMigrationTool and reads the result with its own
``Qti::NumericInteraction``; what they do, as read in their code:

- A ``<section>`` whose ``<selection_ordering>`` selects 1 item becomes a *question group* that draws one
  of its items per student; a section without it is flattened into the quiz. So every answered cell of
  every asked question is one group holding that cell's item of every variant (Canvas has no numerical
  question with several blanks): each student gets one variant of each, and each item carries its
  variant's own matrices. The group's ``points_per_item`` is the cell's share of the question's points,
  in hundredths that add up to the question's points (:func:`worked.lms.split_points`).
- Each item is a ``numerical_question``: ``response_str`` with ``render_fib fibtype="Decimal"``, scored by
  one ``respcondition`` whose ``conditionvar`` is ``<or>`` of ``varequal`` (the answer) and ``vargte``/
  ``varlte`` (answer ∓ tolerance), setting SCORE to 100. Canvas reads it as an ``exact_answer`` with the
  ``varequal`` value and a margin of ``varlte`` minus that value, in decimal arithmetic: both are
  written as exact decimals (``vargt`` would be read as a precision answer; it is not used). The answer is
  the exact value (12 significant digits) and the margin the spec's tolerance, so Canvas accepts exactly
  [exact ± tol] (a margin round a rounded value would have to be wider on one side).

A choice question (``type = "choice"``) is a ``multiple_choice_question`` in its group as a numerical one is
(one item per variant): ``response_lid``/``render_choice`` with the options as lettered on the sheet, the right
one scored 100, and each option's feedback (its mistake's words) as an ``itemfeedback``.

Formulas are Canvas equation images (see :func:`equation_image`). The zip is deterministic (fixed
timestamps, sorted entries, identifiers from SHA-256 of the title, seed and names).
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from decimal import Decimal
from html import escape
from urllib.parse import quote
from xml.sax.saxutils import escape as xesc, quoteattr

from ..i18n import tr as _
from . import sections, is_choice, option_feedback, asked, fmt_num, matrix_latex, matrix_mathml, one_line, split_points, stem_html, window

NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"
CANVAS_NS = "http://canvas.instructure.com/xsd/cccv1p0"


def _dec(x) -> str:
    s = fmt_num(x)
    return s if "." in s else s + ".0"


def equation_image(m: dict) -> str:
    """A given matrix as Canvas's rich-content editor writes an equation, so a teacher can edit it there:
    ``<img class="equation_image">`` whose LaTeX (from the LaTeX printer) is in ``data-equation-content`` and,
    twice URL-encoded, in the path of the Canvas site's own ``/equation_images/`` renderer; ``data-mathml``
    carries the MathML printer's form for screen readers."""
    latex = matrix_latex(m)
    src = "/equation_images/" + quote(quote(latex, safe=""), safe="")
    return (f"<img class={quoteattr('equation_image')} title={quoteattr(latex)} src={quoteattr(src)} "
            f"alt={quoteattr('LaTeX: ' + latex)} data-equation-content={quoteattr(latex)} "
            f"data-mathml={quoteattr(matrix_mathml(m))}>")


def _ident(*parts) -> str:
    return "i" + hashlib.sha256("\x00".join(map(str, parts)).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _item(ident: str, title: str, text: str, points: Decimal, value: Decimal, tol: Decimal) -> str:
    return f"""          <item ident="{ident}" title={quoteattr(title)}>
            <itemmetadata>
              <qtimetadata>
                <qtimetadatafield><fieldlabel>question_type</fieldlabel><fieldentry>numerical_question</fieldentry></qtimetadatafield>
                <qtimetadatafield><fieldlabel>points_possible</fieldlabel><fieldentry>{_dec(points)}</fieldentry></qtimetadatafield>
              </qtimetadata>
            </itemmetadata>
            <presentation>
              <material><mattext texttype="text/html">{xesc(text)}</mattext></material>
              <response_str ident="response1" rcardinality="Single">
                <render_fib fibtype="Decimal"><response_label ident="answer1"/></render_fib>
              </response_str>
            </presentation>
            <resprocessing>
              <outcomes><decvar maxvalue="100" minvalue="0" varname="SCORE" vartype="Decimal"/></outcomes>
              <respcondition continue="No">
                <conditionvar>
                  <or>
                    <varequal respident="response1">{_dec(value)}</varequal>
                    <and>
                      <vargte respident="response1">{_dec(value - tol)}</vargte>
                      <varlte respident="response1">{_dec(value + tol)}</varlte>
                    </and>
                  </or>
                </conditionvar>
                <setvar action="Set" varname="SCORE">100</setvar>
              </respcondition>
            </resprocessing>
          </item>
"""


def _choice_item(ident: str, title: str, text: str, points: Decimal, options: list[dict]) -> str:
    """A ``multiple_choice_question``: ``response_lid`` with one ``response_label`` per option, a
    ``respcondition`` per option showing its feedback (``displayfeedback`` → ``itemfeedback``), and one that sets
    SCORE to 100 for the right option (Canvas's own exporter's form, which QTIMigrationTool reads)."""
    labels = "".join(f"""                  <response_label ident="{ident}_{o['letter']}">
                    <material><mattext texttype="text/plain">{xesc(o['value'])}</mattext></material>
                  </response_label>
""" for o in options)
    shows = "".join(f"""              <respcondition continue="Yes">
                <conditionvar><varequal respident="response1">{ident}_{o['letter']}</varequal></conditionvar>
                <displayfeedback feedbacktype="Response" linkrefid="{ident}_{o['letter']}_fb"/>
              </respcondition>
""" for o in options)
    right = next(o for o in options if o["right"])
    feedback = "".join(f"""          <itemfeedback ident="{ident}_{o['letter']}_fb">
            <flow_mat><material><mattext texttype="text/plain">{xesc(option_feedback(o))}</mattext></material></flow_mat>
          </itemfeedback>
""" for o in options)
    return f"""          <item ident="{ident}" title={quoteattr(title)}>
            <itemmetadata>
              <qtimetadata>
                <qtimetadatafield><fieldlabel>question_type</fieldlabel><fieldentry>multiple_choice_question</fieldentry></qtimetadatafield>
                <qtimetadatafield><fieldlabel>points_possible</fieldlabel><fieldentry>{_dec(points)}</fieldentry></qtimetadatafield>
                <qtimetadatafield><fieldlabel>original_answer_ids</fieldlabel><fieldentry>{",".join(f"{ident}_{o['letter']}" for o in options)}</fieldentry></qtimetadatafield>
              </qtimetadata>
            </itemmetadata>
            <presentation>
              <material><mattext texttype="text/html">{xesc(text)}</mattext></material>
              <response_lid ident="response1" rcardinality="Single">
                <render_choice>
{labels}                </render_choice>
              </response_lid>
            </presentation>
            <resprocessing>
              <outcomes><decvar maxvalue="100" minvalue="0" varname="SCORE" vartype="Decimal"/></outcomes>
{shows}              <respcondition continue="No">
                <conditionvar><varequal respident="response1">{ident}_{right['letter']}</varequal></conditionvar>
                <setvar action="Set" varname="SCORE">100</setvar>
              </respcondition>
            </resprocessing>
{feedback}          </item>
"""


def groups(manifest: dict) -> list[dict]:
    """The question groups, in question and cell order: {"title", "points", "items": [(variant, q, entry)]}.
    One per answered cell of each asked question (the cells of the first variant: all have the same)."""
    out = []
    if not manifest["variants"]:
        return out
    first = manifest["variants"][0]
    # (part, question) of the first variant: a quiz with [[parts]] has a group per question of every part
    for p, k, q0 in [(p, k, q) for p, sv in enumerate(sections(first)) for k, q in enumerate(sv["questions"])]:
        cells = asked(q0)
        for c, (e0, pts) in enumerate(zip(cells, split_points(q0["points"], len(cells)))):
            items = []
            for v in manifest["variants"]:
                sv = sections(v)[p]
                q = sv["questions"][k]
                e = next(x for x in q["entries"] if (x["row"], x["col"]) == (e0["row"], e0["col"]))
                items.append((sv, q, e))
            title = f"{q0['name']} {q0['ask']}" + (f" — {e0['ask']}" if len(q0["entries"]) > 1 else "")
            out.append({"title": title, "points": pts, "items": items, "key": (q0["name"], e0["ask"])})
    return out


def assessment_xml(manifest: dict, ident: str) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           f'<questestinterop xmlns="{NS}">\n',
           f"  <assessment ident=\"{ident}\" title={quoteattr(one_line(manifest['title']))}>\n",
           "    <qtimetadata>\n"
           "      <qtimetadatafield><fieldlabel>cc_maxattempts</fieldlabel><fieldentry>1</fieldentry></qtimetadatafield>\n"
           "    </qtimetadata>\n",
           '    <section ident="root_section">\n']
    stems = {(v["variant"], v.get("part_title")): stem_html(v, equation_image)
             for v0 in manifest["variants"] for v in sections(v0)}
    for g in groups(manifest):
        out.append(f"      <section ident=\"{_ident(ident, *g['key'])}\" title={quoteattr(g['title'])}>\n"
                   "        <selection_ordering>\n          <selection>\n"
                   "            <selection_number>1</selection_number>\n"
                   f"            <selection_extension><points_per_item>{_dec(g['points'])}</points_per_item></selection_extension>\n"
                   "          </selection>\n        </selection_ordering>\n")
        for v, q, e in g["items"]:
            if is_choice(q):
                text = stems[v["variant"], v.get("part_title")] + "<p>" + _("Which is {ask}? Choose one.",
                                                                             ask=f"<b>{escape(q['ask'])}</b>") + "</p>"
                out.append(_choice_item(_ident(ident, v["variant"], q["name"], e["ask"]), f"{v['variant']} {q['name']} "
                                        f"{q['ask']}", text, g["points"], q["options"]))
                continue
            give = _("Give {ask} (part of {question}).", ask=f"<b>{escape(e['ask'])}</b>", question=escape(q["ask"])) \
                if len(q["entries"]) > 1 else _("Give {ask}.", ask=f"<b>{escape(e['ask'])}</b>")
            text = stems[v["variant"], v.get("part_title")] + f"<p>{give}</p>"
            value, tol = window(e)
            title = f"{v['variant']} {q['name']} {e['ask']}"
            out.append(_item(_ident(ident, v["variant"], q["name"], e["ask"]), title, text, g["points"], value, tol))
        out.append("      </section>\n")
    out.append("    </section>\n  </assessment>\n</questestinterop>\n")
    return "".join(out)


def total_points(manifest: dict) -> Decimal:
    """The quiz's points: one cell of each group each, which add up to the asked questions' points."""
    return sum((g["points"] for g in groups(manifest)), Decimal(0))


def assessment_meta_xml(manifest: dict, ident: str) -> str:
    """Canvas's quiz settings: title, points, an unpublished graded quiz, one attempt, answers shown after it."""
    title = xesc(one_line(manifest["title"]))
    desc = xesc("<p>" + _("{title}: generated by worked quiz, seed {seed}; {count} variants, one drawn per student for "
                          "each answer.", title=escape(one_line(manifest["title"]), quote=False), seed=manifest["seed"],
                          count=len(manifest["variants"])) + "</p>")
    pts = _dec(total_points(manifest))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<quiz identifier="{ident}" xmlns="{CANVAS_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="{CANVAS_NS} https://canvas.instructure.com/xsd/cccv1p0.xsd">
  <title>{title}</title>
  <description>{desc}</description>
  <shuffle_answers>false</shuffle_answers>
  <scoring_policy>keep_highest</scoring_policy>
  <hide_results></hide_results>
  <quiz_type>assignment</quiz_type>
  <points_possible>{pts}</points_possible>
  <require_lockdown_browser>false</require_lockdown_browser>
  <require_lockdown_browser_for_results>false</require_lockdown_browser_for_results>
  <require_lockdown_browser_monitor>false</require_lockdown_browser_monitor>
  <lockdown_browser_monitor_data/>
  <show_correct_answers>true</show_correct_answers>
  <anonymous_submissions>false</anonymous_submissions>
  <could_be_locked>false</could_be_locked>
  <allowed_attempts>1</allowed_attempts>
  <one_question_at_a_time>false</one_question_at_a_time>
  <cant_go_back>false</cant_go_back>
  <available>false</available>
  <one_time_results>false</one_time_results>
  <show_correct_answers_last_attempt>false</show_correct_answers_last_attempt>
  <only_visible_to_overrides>false</only_visible_to_overrides>
  <module_locked>false</module_locked>
  <assignment identifier="{_ident(ident, 'assignment')}">
    <title>{title}</title>
    <due_at/>
    <lock_at/>
    <unlock_at/>
    <module_locked>false</module_locked>
    <workflow_state>unpublished</workflow_state>
    <quiz_identifierref>{ident}</quiz_identifierref>
    <points_possible>{pts}</points_possible>
    <grading_type>points</grading_type>
    <submission_types>online_quiz</submission_types>
  </assignment>
  <assignment_group_identifierref>{_ident(ident, 'assignment group')}</assignment_group_identifierref>
</quiz>
"""


def manifest_xml(ident: str) -> str:
    meta = _ident(ident, "meta")
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<manifest identifier="m{ident}" xmlns="http://www.imsglobal.org/xsd/imsccv1p1/imscp_v1p1">
  <metadata>
    <schema>IMS Content</schema>
    <schemaversion>1.1.3</schemaversion>
  </metadata>
  <organizations/>
  <resources>
    <resource identifier="{ident}" type="imsqti_xmlv1p2">
      <file href="{ident}/{ident}.xml"/>
      <dependency identifierref="{meta}"/>
    </resource>
    <resource identifier="{meta}" type="associatedcontent/imscc_xmlv1p1/learning-application-resource" href="{ident}/assessment_meta.xml">
      <file href="{ident}/assessment_meta.xml"/>
    </resource>
  </resources>
</manifest>
"""


def export(manifest: dict) -> bytes:
    ident = _ident("worked-quiz", manifest["title"], manifest["seed"])
    files = {
        "imsmanifest.xml": manifest_xml(ident),
        f"{ident}/{ident}.xml": assessment_xml(manifest, ident),
        f"{ident}/assessment_meta.xml": assessment_meta_xml(manifest, ident),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name].encode("utf-8"))
    return buf.getvalue()
