"""User-facing errors: each prints as one line and exits with status 2."""
from __future__ import annotations

from .i18n import Msg, localized_text


class WorkedError(Exception):
    """An error caused by the user's input. The CLI prints ``error: <message>`` and exits 2."""

    exit_code = 2
    #: the language of the file being read, where it was read far enough to tell (its ``lang``): the CLI shows the
    #: error in it when no --lang is given (None: not known)
    lang = None

    def localized(self, loc=None) -> str:
        """The message in *loc* (the current language when None): the parts declared as :class:`worked.i18n.Msg`
        translated, the rest (file names, fields, what the user wrote) as it is."""
        return ": ".join(localized_text(a, loc) for a in self.args) if self.args else ""


class ProblemError(WorkedError):
    """A problem file or problem data is invalid. ``str()`` names the source, the field and what was expected."""

    def __init__(self, field: str, message: str, source: str | None = None):
        self.field = field
        self.message = message
        self.source = source
        super().__init__(self._text())

    def _text(self) -> str:
        return ": ".join([p for p in (self.source, self.field) if p] + [self.message])

    def localized(self, loc=None) -> str:
        """:meth:`_text` with the message in *loc* (the source and the field as the file names them)."""
        return ": ".join([p for p in (self.source, self.field) if p] + [localized_text(self.message, loc)])

    def with_source(self, source: str) -> "ProblemError":
        out = ProblemError(self.field, self.message, source)
        out.lang = self.lang
        return out


class ExpressionError(WorkedError):
    """An answer entry or expression could not be read by the grammar of :mod:`worked.exprs`."""


def reason(exc: Exception) -> str:
    """*exc*'s message for our user: without Python's advice to the programmer
    (``sys.set_int_max_str_digits``, "decode using utf-8-sig"), saying what to do instead (a :class:`Msg` when it is
    ours or we reword it; a library's own text as it is)."""
    if exc.args and isinstance(exc.args[0], Msg):
        return exc.args[0]
    text = str(exc)
    if "integer string conversion" in text:
        import re

        m = re.search(r"limit \((\d+) digits\)", text)
        if m:
            return Msg("a whole number has more than {limit} digits; write numbers of ordinary size", limit=m[1])
        return Msg("a whole number has more than the allowed digits; write numbers of ordinary size")
    if "UTF-8 BOM" in text:
        return Msg("the file starts with a byte-order mark (BOM); save it as UTF-8 without BOM")
    return text
