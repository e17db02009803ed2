"""Canvas: a QTI 1.2 zip (``imsmanifest.xml`` + one assessment XML) that Canvas's "QTI .zip" import reads.

Every answer entry is a ``numerical_question`` item: ``response_str`` with ``render_fib fibtype="Decimal"``,
scored by one ``respcondition`` whose ``conditionvar`` accepts the exact value (``varequal``) or the range
``vargte``/``varlte`` (value ± tolerance), setting SCORE to 100. Each variant is a section. Formulas are
Canvas equation images (see :func:`equation_image`). The zip is deterministic (fixed timestamps, sorted entries).
"""
from __future__ import annotations

import hashlib
import io
import zipfile
from html import escape
from urllib.parse import quote
from xml.sax.saxutils import escape as xesc, quoteattr

from . import fmt_num, matrix_latex, matrix_mathml, stem_html, variant_label

NS = "http://www.imsglobal.org/xsd/ims_qtiasiv1p2"


def _dec(x: float) -> str:
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
    return "i" + hashlib.sha256("\x00".join(map(str, parts)).encode()).hexdigest()[:24]


def _item(ident: str, title: str, text: str, points: float, value: float, tol: float) -> str:
    lo, hi = value - tol, value + tol
    return f"""        <item ident="{ident}" title={quoteattr(title)}>
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
                    <vargte respident="response1">{_dec(lo)}</vargte>
                    <varlte respident="response1">{_dec(hi)}</varlte>
                  </and>
                </or>
              </conditionvar>
              <setvar action="Set" varname="SCORE">100</setvar>
            </respcondition>
          </resprocessing>
        </item>
"""


def assessment_xml(manifest: dict, ident: str) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n',
           f'<questestinterop xmlns="{NS}">\n',
           f"  <assessment ident=\"{ident}\" title={quoteattr(manifest['title'])}>\n",
           '    <section ident="root_section">\n']
    for v in manifest["variants"]:
        out.append(f"      <section ident=\"{_ident(ident, v['variant'])}\" title={quoteattr(variant_label(v))}>\n")
        stem = stem_html(v, equation_image)
        for q in v["questions"]:
            live = [e for e in q["entries"] if e["expected"] is not None]
            for e in live:
                text = stem + f"<p>Give <b>{escape(e['ask'])}</b> (part of {escape(q['ask'])}).</p>"
                title = f"{v['variant']} {q['name']} {e['ask']}"
                out.append(_item(_ident(ident, v["variant"], q["name"], e["ask"]), title, text,
                                 q["points"] / len(live), e["expected"], e["tolerance"]))
        out.append("      </section>\n")
    out.append("    </section>\n  </assessment>\n</questestinterop>\n")
    return "".join(out)


def manifest_xml(title: str, ident: str) -> str:
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
    </resource>
  </resources>
</manifest>
"""


def export(manifest: dict) -> bytes:
    ident = _ident("worked-quiz", manifest["title"], manifest["seed"])
    files = {
        "imsmanifest.xml": manifest_xml(manifest["title"], ident),
        f"{ident}/{ident}.xml": assessment_xml(manifest, ident),
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for name in sorted(files):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            z.writestr(info, files[name].encode("utf-8"))
    return buf.getvalue()
