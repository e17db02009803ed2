"""Escaping text for Typst markup: data (titles, tokens, names) always prints literally, and Typst source we wrote
(:class:`Typ`) as it is. The .typ templates print through :func:`finalize` (:mod:`worked.render.env`), and the
Typst writer (:mod:`worked.render.typst`) writes its formulas and matrices as :class:`Typ`."""
from __future__ import annotations

import string

_MARKUP = str.maketrans({c: "\\" + c for c in string.punctuation})


class Typ(str):
    """Typst source that we wrote: printed by templates as it is."""


def esc(s) -> Typ:
    """Text as Typst markup: every ASCII punctuation character escaped (``\\#``, ``\\/``…), so
    nothing in a title or token can start a function, a comment, a list or a URL."""
    return Typ(str(s).translate(_MARKUP).replace("\n", " "))


def lit(s) -> Typ:
    """A Typst string literal (for code: ``title: "…"``, alt text)."""
    return Typ('"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"')


def finalize(v):
    """What a ``{{ … }}`` of a .typ template writes: Typst markup as it is, anything else escaped."""
    if v is None:
        return ""
    return v if isinstance(v, Typ) else esc(v)
