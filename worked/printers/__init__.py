"""One printer per format, each a class with a ``_print_<Node>`` method for every node of :mod:`worked.eq`.

    >>> from worked import eq, printers
    >>> line = eq.Rel((eq.Exp(eq.Sqrt(eq.num(2))), eq.dec(Decimal("4.1133"))), (eq.APPROX,))
    >>> printers.text(line), printers.latex(line)
    ('e^(√2) ≈ 4.1133', 'e^{\\sqrt{2}} \\approx 4.1133')

The module functions print in the current language (:func:`worked.i18n.current`: its words and its decimal
mark) and remember what they printed, by value (trees are immutable) and language, in one bounded
``functools.lru_cache`` each: eviction only means printing again. A format's module
(``<format>_printer.py``) is imported when the format is first printed or its class first named: a
text solution loads the text printer only.
"""
from __future__ import annotations

import functools
import importlib

from .. import i18n

#: the nodes with words in them (worked.eq's Prose and Said, by name: eq imports this package), translated before
#: they are printed
_WORDS = frozenset({"Prose", "Said"})

__all__ = ["text", "latex", "mathml", "typst", "spoken", "htmlcss", "math_element",
           "TextPrinter", "LatexPrinter", "HtmlCssPrinter", "MathMLPrinter", "TypstPrinter", "SpokenPrinter"]

#: a name of this package → the module (in this package) that defines it
_HOME = {"TextPrinter": "text_printer", "LatexPrinter": "latex_printer", "MathMLPrinter": "mathml_printer",
         "math_element": "mathml_printer", "TypstPrinter": "typst_printer", "SpokenPrinter": "spoken_printer",
         "HtmlCssPrinter": "htmlcss_printer"}


def __getattr__(name: str):
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def load_all() -> None:
    """Import every format's module now: for a process about to fork workers that print them."""
    for name in _HOME:
        __getattr__(name)


def _format(cls: str, doc: str):
    """The printer of class *cls* as a function of the tree, remembered by value (trees are immutable);
    the printer is made at the first call."""
    made = []

    @functools.lru_cache(maxsize=4096)
    def remembered(node, lang: str) -> str:
        if not made:
            made.append(__getattr__(cls)())
        if type(node).__name__ in _WORDS:      # a sentence: in the current language (math has no words)
            node = node.localized(i18n.current())
        return made[0].doprint(node)

    def doprint(node) -> str:
        return remembered(node, i18n.current().lang)

    doprint.__doc__ = doc
    doprint.cache_clear = remembered.cache_clear
    doprint.cache_info = remembered.cache_info
    return doprint


text = _format("TextPrinter", "Unicode text of a tree.")
latex = _format("LatexPrinter", "ASCII LaTeX of a tree.")
mathml = _format("MathMLPrinter", "The MathML body of a tree (no ``<math>`` element: see :func:`math_element`).")
typst = _format("TypstPrinter", "Typst math of a tree (the body of ``$ … $``).")
spoken = _format("SpokenPrinter", "A spoken form of a tree, for alt text and screen readers.")
htmlcss = _format("HtmlCssPrinter", "HTML with CSS classes (fractions, scripts, radicals as text), for WeasyPrint.")
