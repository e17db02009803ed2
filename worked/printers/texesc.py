"""Escaping text for LaTeX: data (titles, tokens, names) always prints literally; output is ASCII."""
from __future__ import annotations

import unicodedata

_SPECIAL = {
    "\\": r"\textbackslash{}", "{": r"\{", "}": r"\}", "$": r"\$", "&": r"\&", "#": r"\#", "%": r"\%",
    "_": r"\_", "^": r"\textasciicircum{}", "~": r"\textasciitilde{}", "<": r"\textless{}",
    ">": r"\textgreater{}", "|": r"\textbar{}", '"': r"\textquotedbl{}", "'": r"\textquotesingle{}",
    "`": r"\textasciigrave{}", "-": "-{}", "\n": " ", "\r": " ", "\t": " ",
}
_UNICODE = {
    "·": r"\ensuremath{\cdot}", "−": r"\ensuremath{-}", "√": r"\ensuremath{\surd}", "≈": r"\ensuremath{\approx}",
    "→": r"\ensuremath{\to}", "×": r"\ensuremath{\times}", "∞": r"\ensuremath{\infty}", "ᵀ": r"\textsuperscript{T}",
    "…": r"\dots{}", "–": "--", "—": "---", "‘": "`", "’": "'", "“": "``", "”": "''", "\u00a0": r"\nobreakspace{}",
    # the quotation marks of other languages (T1 has them): German „…“ and ‚…‘, French « … » and ‹ … ›
    "„": r"\quotedblbase{}", "‚": r"\quotesinglbase{}", "«": r"\guillemotleft{}", "»": r"\guillemotright{}",
    "‹": r"\guilsinglleft{}", "›": r"\guilsinglright{}",
    "≤": r"\ensuremath{\le}", "≥": r"\ensuremath{\ge}", "±": r"\ensuremath{\pm}", "÷": r"\ensuremath{\div}",
    "✓": r"\ensuremath{\checkmark}", "½": r"\textonehalf{}", "¼": r"\textonequarter{}", "¾": r"\textthreequarters{}", "°": r"\textdegree{}", "⁽": r"\textsuperscript{(}", "⁾": r"\textsuperscript{)}",
    # a Transformer block's words (its layer norm's μ, σ, ε, γ, β; ⊙ entry by entry)
    "μ": r"\ensuremath{\mu}", "σ": r"\ensuremath{\sigma}", "ε": r"\ensuremath{\varepsilon}", "γ": r"\ensuremath{\gamma}",
    "β": r"\ensuremath{\beta}", "⊙": r"\ensuremath{\odot}", "Σ": r"\ensuremath{\Sigma}", "′": r"\ensuremath{'}",
}
#: letters with a combining accent that no precomposed character has (a layer norm's normalised row x̂)
_MATH_ACCENTS = {"x\u0302": r"\ensuremath{\hat{x}}"}
_SUPERSCRIPTS = dict(zip("⁰¹²³⁴⁵⁶⁷⁸⁹", "0123456789"))
_SUBSCRIPTS = dict(zip("₀₁₂₃₄₅₆₇₈₉", "0123456789"))
_ACCENTS = {"\u0301": "'", "\u0300": "`", "\u0302": "^", "\u0308": '"', "\u0303": "~", "\u0304": "=",
            "\u0327": "c", "\u030c": "v", "\u0306": "u", "\u030a": "r", "\u0328": "k", "\u0307": "."}
_LETTERS = {"ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "ø": r"\o{}", "Ø": r"\O{}", "œ": r"\oe{}",
            "Œ": r"\OE{}", "å": r"\aa{}", "Å": r"\AA{}", "ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}"}


class TexRaw(str):
    """LaTeX source that must not be escaped (our own markup and the core's ASCII math)."""


def _char(c: str) -> str:
    if c in _SPECIAL:
        return _SPECIAL[c]
    if " " <= c <= "~":
        return c
    if c in _UNICODE:
        return _UNICODE[c]
    if c in _SUPERSCRIPTS:
        return r"\textsuperscript{" + _SUPERSCRIPTS[c] + "}"
    if c in _SUBSCRIPTS:
        return r"\textsubscript{" + _SUBSCRIPTS[c] + "}"
    if c in _LETTERS:
        return _LETTERS[c]
    d = unicodedata.normalize("NFD", c)
    if len(d) == 2 and " " <= d[0] <= "~" and d[1] in _ACCENTS:
        base = d[0] if d[0] not in "ij" else "\\" + d[0]
        return "\\" + _ACCENTS[d[1]] + "{" + base + "}"
    # anything else pdflatex cannot set: show its code point, never the raw character
    return r"{\footnotesize[U+%04X]}" % ord(c)


def tex_escape(s) -> str:
    """*s* as LaTeX text that prints literally, ASCII only."""
    s = str(s)
    for seq, tex in _MATH_ACCENTS.items():
        if seq in s:
            return tex.join(tex_escape(part) for part in s.split(seq))
    return "".join(_char(c) for c in s)


def finalize(value):
    """Jinja ``finalize``: everything printed is escaped unless it is :class:`TexRaw`."""
    if value is None:
        return ""
    if isinstance(value, TexRaw):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return tex_escape(value)
