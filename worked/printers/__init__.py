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

from .latex import LatexPrinter
from .mathml import MathMLPrinter, math_element
from .spoken import SpokenPrinter
from .text import TextPrinter
from .typst import TypstPrinter

__all__ = ["text", "latex", "mathml", "typst", "spoken", "math_element",
           "TextPrinter", "LatexPrinter", "MathMLPrinter", "TypstPrinter", "SpokenPrinter"]

_TEXT, _LATEX, _MATHML, _TYPST, _SPOKEN = TextPrinter(), LatexPrinter(), MathMLPrinter(), TypstPrinter(), SpokenPrinter()


@functools.lru_cache(maxsize=4096)
def text(node) -> str:
    return _TEXT.doprint(node)


@functools.lru_cache(maxsize=4096)
def latex(node) -> str:
    return _LATEX.doprint(node)


@functools.lru_cache(maxsize=4096)
def mathml(node) -> str:
    """The MathML body (no ``<math>`` element: see :func:`math_element`)."""
    return _MATHML.doprint(node)


@functools.lru_cache(maxsize=4096)
def typst(node) -> str:
    return _TYPST.doprint(node)


@functools.lru_cache(maxsize=4096)
def spoken(node) -> str:
    return _SPOKEN.doprint(node)
