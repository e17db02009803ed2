"""The language a page is shown in: its words (gettext catalogues) and its numbers (Babel's locale data).

The core is locale-free: solutions, the model and the JSON hold English words and neutral numbers. The words
are translated where they are shown. A :class:`Locale` is a small object: its gettext translations (the
catalogue ``worked/locale/<lang>/LC_MESSAGES/worked.mo``, compiled from its ``.po``) and its decimal mark (from
``babel.Locale(lang).number_symbols``, never a table of ours). The printers, the page model, the templates and
the report writers read :func:`current`, set for a piece of work by :func:`using`::

    with i18n.using("de"):
        html = sheet.render(...)

A sentence with math in it is declared once, in English, as a whole sentence with named placeholders:
``eq.say(N_("Divide the scores by {root}."), root=tree)`` (:func:`worked.eq.say`); the printers translate it
in the current language and put the math (printed as math) where its placeholder stands. ``N_`` marks a string
for ``pybabel extract`` and returns it unchanged; ``_`` translates now (for the words a printer, a template or a
report writes itself).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import gettext
import re
from pathlib import Path

__all__ = ["Locale", "UnknownLanguage", "N_", "Msg", "tr", "ngettext", "current", "using", "get", "languages", "localize",
           "joined", "LOCALE_DIR"]

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "worked"
SOURCE = "en"


class UnknownLanguage(ValueError):
    """A language with no catalogue: the message names the languages there are."""


def N_(msgid: str) -> str:
    """Mark *msgid* for extraction; it stays English here and is translated where it is shown."""
    return msgid


@functools.lru_cache(maxsize=1)
def languages() -> tuple[str, ...]:
    """The languages shipped: English (the source) and every catalogue under worked/locale."""
    found = sorted(p.parent.parent.name for p in LOCALE_DIR.glob(f"*/LC_MESSAGES/{DOMAIN}.mo"))
    return (SOURCE, *found)


def _normal(lang: str) -> str:
    """``pt-BR``, ``pt_br`` → ``pt_BR``; ``DE`` → ``de``."""
    lang = lang.strip().replace("-", "_")
    base, _, region = lang.partition("_")
    return base.lower() + ("_" + region.upper() if region else "")


def canonical(lang: str) -> str:
    """The shipped language *lang* names (``de-DE`` is ``de``, ``pt-br`` is ``pt_BR``); :class:`UnknownLanguage`
    otherwise."""
    have = languages()
    n = _normal(lang)
    if n in have:
        return n
    base = n.partition("_")[0]
    if base in have:
        return base
    raise UnknownLanguage(Msg("unknown language {lang}: the languages there are {languages}", lang=repr(lang),
                              languages=", ".join(have)))


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Locale:
    """One language: ``gettext``, ``ngettext``, the decimal mark, the separator of a vector's entries, and
    the names the output formats use for it (HTML ``lang``, Typst's ``lang``/``region``, LaTeX babel's)."""

    def __init__(self, lang: str, translations: gettext.NullTranslations, decimal: str):
        self.lang = lang
        self.translations = translations
        self.decimal = decimal
        #: between the entries of a vector or a row: ``;`` where the decimal mark is a comma ([0,49; 1,67])
        self.sep = ";" if decimal == "," else ","

    def __repr__(self):
        return f"Locale({self.lang!r})"

    @property
    def is_source(self) -> bool:
        return self.lang == SOURCE

    def gettext(self, msgid: str) -> str:
        return self.translations.gettext(msgid)

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.translations.ngettext(singular, plural, n)

    def number(self, digits: str) -> str:
        """ASCII digits with a ``.`` (``-0.49``) in this language's decimal mark (``-0,49``)."""
        return digits if self.decimal == "." else digits.replace(".", self.decimal)

    def format(self, msgid: str, **args) -> str:
        """*msgid* translated, its ``{name}`` placeholders filled with the strings *args* (no other formatting:
        a translation may not run code, and a brace that is no placeholder stays as it is)."""
        return _PLACEHOLDER.sub(lambda m: str(args[m[1]]) if m[1] in args else m[0], self.gettext(msgid))

    def pieces(self, msgid: str, args: dict) -> list:
        """*msgid* translated and cut at its placeholders: text and the values of *args* in the translation's
        order (a translation may move a placeholder; one it drops is dropped)."""
        out: list = []
        text = self.gettext(msgid)
        at = 0
        for m in _PLACEHOLDER.finditer(text):
            if m[1] not in args:
                continue
            out.append(text[at:m.start()])
            out.append(args[m[1]])
            at = m.end()
        out.append(text[at:])
        return out

    # -- the names of the language in each output format
    @property
    def html_lang(self) -> str:
        return self.lang.replace("_", "-")

    @property
    def typst(self) -> tuple[str, str | None]:
        """Typst's ``lang`` and ``region`` (ISO 639-1 and ISO 3166-1 alpha-2, lower case)."""
        base, _, region = self.lang.partition("_")
        return base, (region.lower() or None)

    @property
    def babel_name(self) -> str:
        """The LaTeX babel option (its language-definition file): from Babel's English name of the language."""
        return _BABEL_LATEX.get(self.lang) or _BABEL_LATEX.get(self.lang.partition("_")[0], "english")


# LaTeX babel's option names differ from the ISO codes and from CLDR's names (ngerman, brazil): the one table of
# names we keep, for the LaTeX preamble only
_BABEL_LATEX = {"en": "english", "de": "ngerman", "fr": "french", "es": "spanish", "pt_BR": "brazil", "pt": "portuguese",
                "it": "italian", "nl": "dutch"}


@functools.lru_cache(maxsize=None)
def get(lang: str | None = None) -> Locale:
    """The :class:`Locale` of *lang* (a shipped language; English when None)."""
    lang = SOURCE if lang is None else canonical(lang)
    if lang == SOURCE:     # the source: its words and its ASCII digits as they are (no catalogue, no Babel to load)
        return Locale(lang, gettext.NullTranslations(), ".")
    import babel

    translations = gettext.translation(DOMAIN, str(LOCALE_DIR), languages=[lang])
    return Locale(lang, translations, babel.Locale.parse(lang).number_symbols["latn"]["decimal"])


_CURRENT: contextvars.ContextVar[Locale | None] = contextvars.ContextVar("worked_locale", default=None)


def current() -> Locale:
    """The language of the work under way: the innermost :func:`using`, else English."""
    loc = _CURRENT.get()
    return loc if loc is not None else get()


@contextlib.contextmanager
def using(lang):
    """Show what is made inside the block in *lang* (a language name, a :class:`Locale`, or None for English)."""
    loc = lang if isinstance(lang, Locale) else get(lang)
    token = _CURRENT.set(loc)
    try:
        yield loc
    finally:
        _CURRENT.reset(token)


def tr(msgid: str, **args) -> str:
    """*msgid* in the current language, its ``{name}`` placeholders filled with *args* (modules import it as ``_``:
    ``from .i18n import tr as _``, the name pybabel extracts)."""
    return current().format(msgid, **args) if args else current().gettext(msgid)


def translate(text: str) -> str:
    """*text*, an English msgid marked where it is declared (``N_``), in the current language (a name pybabel does not
    extract: the text is no literal here)."""
    return current().gettext(text)


def ngettext(singular: str, plural: str, n: int, **args) -> str:
    """The form for *n* of a message in the current language (``"{n} mistake"``, ``"{n} mistakes"``), its
    placeholders filled with *args* and ``n``."""
    text = current().ngettext(singular, plural, n)
    return _PLACEHOLDER.sub(lambda m: str({"n": n, **args}[m[1]]) if m[1] in {"n", *args} else m[0], text)


class Msg(str):
    """A sentence for the user (an error, a warning, a progress line), declared in English as a whole sentence with
    named placeholders and translated where it is shown: ``raise ProblemError("X", Msg("expected {n} rows, got
    {m}", n=3, m=len(rows)))``. It *is* its English text (a ``str``: the core, ``str(exc)`` and every JSON stay
    English); :meth:`localized` gives it in a language. A value may itself be a :class:`Msg` (translated with it);
    any other value is put in as ``str(value)`` (file names, field names, what the user wrote: never translated)."""

    def __new__(cls, msgid: str, **args):
        self = super().__new__(cls, _PLACEHOLDER.sub(lambda m: str(args[m[1]]) if m[1] in args else m[0], msgid))
        self.msgid = msgid
        self.args = args
        return self

    def __reduce__(self):      # pickled (a worker's error) as what it is
        return (_msg, (self.msgid, self.args))

    def localized(self, loc: "Locale | None" = None) -> str:
        """The sentence in *loc* (the current language when None)."""
        loc = loc or current()
        if loc.is_source:
            return str.__str__(self)
        return loc.format(self.msgid, **{k: v.localized(loc) if isinstance(v, Msg) else v for k, v in self.args.items()})


def _msg(msgid, args):
    return Msg(msgid, **args)


def joined(sep: str, items) -> Msg:
    """*items* (sentences or parts of one, each translated where shown) joined by *sep*, as one :class:`Msg`: a list,
    not a sentence of its own (its msgid, ``{i0}, {i1}``, is in no catalogue and stays as it is)."""
    items = list(items)
    return Msg(sep.join("{i%d}" % k for k in range(len(items))), **{f"i{k}": v for k, v in enumerate(items)})


def localized_text(text, loc: "Locale | None" = None) -> str:
    """*text* in *loc*: a :class:`Msg`'s translation, any other string as it is."""
    return text.localized(loc) if isinstance(text, Msg) else str(text)


def localize(node, loc: Locale | None = None):
    """*node* with every sentence in it (a :class:`worked.eq.Said`, itself or a part of a Prose) in *loc* (the current
    language when None): its ``localized``. Other nodes are returned as they are (math has no words)."""
    method = getattr(node, "localized", None)
    return method(loc or current()) if method is not None else node
