"""Escaping text for LaTeX: see :mod:`worked.printers.texesc` (the LaTeX printer sets prose with it)."""
from ..printers.texesc import TexRaw, finalize, tex_escape  # noqa: F401
