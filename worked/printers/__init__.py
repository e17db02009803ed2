"""One printer per format, each a class with a ``_print_<Node>`` method for every node of :mod:`worked.eq`.

    >>> from worked import eq, printers
    >>> line = eq.Rel((eq.Exp(eq.Sqrt(eq.num(2))), eq.dec(Decimal("4.1133"))), (eq.APPROX,))
    >>> printers.text(line), printers.latex(line)
    ('e^(√2) ≈ 4.1133', 'e^{\\sqrt{2}} \\approx 4.1133')

The module functions remember what they printed, by value (trees are immutable), in one bounded
``functools.lru_cache`` each: eviction only means printing again.
"""
from __future__ import annotations

import functools

from .htmlcss import HtmlCssPrinter
from .latex import LatexPrinter
from .mathml import MathMLPrinter, math_element
from .spoken import SpokenPrinter
from .text import TextPrinter
from .typst import TypstPrinter

__all__ = ["text", "latex", "mathml", "typst", "spoken", "htmlcss", "math_element",
           "TextPrinter", "LatexPrinter", "HtmlCssPrinter", "MathMLPrinter", "TypstPrinter", "SpokenPrinter"]

def _cached(printer, doc: str):
    """The printer as a function of the tree, remembered by value (trees are immutable)."""
    fn = functools.lru_cache(maxsize=4096)(printer.doprint)
    fn.__doc__ = doc
    return fn


text = _cached(TextPrinter(), "Unicode text of a tree.")
latex = _cached(LatexPrinter(), "ASCII LaTeX of a tree.")
mathml = _cached(MathMLPrinter(), "The MathML body of a tree (no ``<math>`` element: see :func:`math_element`).")
typst = _cached(TypstPrinter(), "Typst math of a tree (the body of ``$ … $``).")
spoken = _cached(SpokenPrinter(), "A spoken form of a tree, for alt text and screen readers.")
htmlcss = _cached(HtmlCssPrinter(), "HTML with CSS classes (fractions, scripts, radicals as text), for WeasyPrint.")
