"""HTML writer: one self-contained page per document (CSS inline, no external URL).

For browsers and notebooks every formula is MathML (from the MathML printer) and the math font is embedded.
For WeasyPrint (``for_pdf=True``), which cannot lay out MathML, every formula is HTML from the HTML/CSS
printer instead (:mod:`worked.printers.htmlcss_printer`, styled by ``style.css``): text and CSS boxes, so
formulas, like the prose and the tables, stay text in the PDF.
"""
from __future__ import annotations

import functools

from markupsafe import Markup, escape

from .. import eq, printers
from .env import render
from .view import chain as view_chain


def _math(for_pdf: bool):
    """The templates' ``math(tree)``: MathML from the MathML printer (with its spoken form as alt text),
    or for WeasyPrint the HTML/CSS printer's output (with the spoken form as its label)."""
    def math(node, display: bool = False, alt: str | None = None):
        if node is None:
            return Markup("")
        node = getattr(node, "eq", node)   # a Line or a tree
        alt = printers.spoken(node) if alt is None else alt
        if for_pdf:
            body = printers.htmlcss(node)
            if display:      # an inline table of one cell (its first line is its baseline): style.css
                return Markup(f'<span class="m d" role="math" aria-label="{escape(alt)}"><span class="m-l">'
                              f'{body}</span></span>')
            return Markup(f'<span class="m" role="math" aria-label="{escape(alt)}">{body}</span>')
        return Markup(printers.math_element(printers.mathml(node), display=display, alt=alt))
    return math


def _chain(math):
    """The templates' ``chain(tree)``: a relation chain as its head and its continuations (``= b``, ``≈ c``),
    each a display formula of its own in a wrapping row (``.chain`` in style.css): on one line when it
    fits, else broken at its relation signs, further lines aligned under the first sign. The head is
    labelled with the whole chain; the continuations are hidden from assistive technology."""
    def chain(node):
        node = getattr(node, "eq", node)
        head, segs = view_chain(node)
        if not segs:
            return Markup(f'<div class="fr"><span class="f" tabindex="0">{math(node, display=True)}</span></div>')
        first = math(head, display=True, alt=printers.spoken(node))
        rest = "".join(f'<span class="f">{math(x, display=True)}</span>' for x in segs)
        return Markup(f'<div class="fr chain"><span class="f" tabindex="0">{first}</span>'
                      f'<span class="cont" aria-hidden="true">{rest}</span></div>')
    return chain


def _rich(for_pdf: bool):
    """The templates' ``rich(prose)``: a :class:`worked.eq.Prose` (or plain text) as escaped HTML with its
    math from the MathML printer (inline ``<math>`` with alt text), or for WeasyPrint from the HTML/CSS printer."""
    def rich(prose) -> Markup:
        pr = printers.htmlcss if for_pdf else printers.mathml
        return Markup(pr(eq.prose(prose)))
    return rich


rich_html = _rich(False)


@functools.lru_cache(maxsize=1)
def font_url():
    """The embedded math font's ``data:`` URL, marked safe when escaping leaves it as it is (base64 has
    nothing to escape): the template then does not scan its 180 kB for every page."""
    from .fonts import math_font_data_url

    url = math_font_data_url()
    return Markup(url) if str(escape(url)) == url else url


def render_html(page, *, for_pdf: bool = False, template_dir=None, paper: str = "a4") -> str:
    """The page (a :class:`worked.render.view.Page`) through ``<kind>.html``."""
    from .fonts import FAMILY

    name = f"{page.kind}.html"
    math = _math(for_pdf)
    ctx = dict(doc=page, for_pdf=for_pdf, paper=paper, math=math, chain=_chain(math), rich=_rich(for_pdf),
               math_font_family=FAMILY, math_font_url=(None if for_pdf else font_url()))
    return render("html", name, template_dir, **ctx)
