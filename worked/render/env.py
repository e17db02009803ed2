"""Jinja2 environments for the sheet templates (``html``, ``tex``, ``typ``): our folder, with the user's ``--template-dir`` first."""
from __future__ import annotations

import functools
from pathlib import Path

from ..errors import WorkedError
from .texesc import finalize as tex_finalize
from .typesc import finalize as typ_finalize

# worked/templates: in a checkout a symlink to the top-level templates/ folder, installed its copy
TEMPLATES = Path(__file__).resolve().parents[1] / "templates" / "sheet"


def template_dirs(template_dir=None) -> list[str]:
    dirs = []
    if template_dir is not None:
        d = Path(template_dir)
        if not d.is_dir():
            raise WorkedError(f"{template_dir}: --template-dir is not a folder")
        dirs.append(str(d))
    if not TEMPLATES.is_dir():
        raise WorkedError(f"sheet templates not found at {TEMPLATES}")
    dirs.append(str(TEMPLATES))
    return dirs


def user_cache_dir(sub: str) -> Path | None:
    """``~/.cache/worked/<sub>`` (or ``$WORKED_CACHE_DIR/<sub>``), private to the user; None if unusable."""
    import os

    base = os.environ.get("WORKED_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "worked")
    d = Path(base) / sub
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        st = d.stat()
    except OSError:
        return None
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return None
    return d if os.access(d, os.W_OK) else None


def _bytecode_cache():
    """Compiled templates kept between runs (Jinja checks each template's source before using it)."""
    import os

    import jinja2

    if os.environ.get("WORKED_NO_TEMPLATE_CACHE"):
        return None
    d = user_cache_dir("jinja")
    return jinja2.FileSystemBytecodeCache(str(d)) if d is not None else None


@functools.lru_cache(maxsize=16)
def _env(kind: str, dirs: tuple[str, ...]):
    import jinja2

    loader = jinja2.FileSystemLoader(list(dirs))
    cache = _bytecode_cache()
    if kind == "html":
        return jinja2.Environment(loader=loader, autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  keep_trailing_newline=True, bytecode_cache=cache)
    if kind == "typ":
        return jinja2.Environment(loader=loader, autoescape=False, finalize=typ_finalize, trim_blocks=True,
                                  lstrip_blocks=True, keep_trailing_newline=True, bytecode_cache=cache)
    return jinja2.Environment(
        loader=loader, autoescape=False, finalize=tex_finalize, bytecode_cache=cache,
        block_start_string="((*", block_end_string="*))",
        variable_start_string="(((", variable_end_string=")))",
        comment_start_string="((#", comment_end_string="#))",
        line_comment_prefix="%#", trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _gettext(msgid: str, **args) -> str:
    """The templates' ``_("Task {n}", n=s.number)``: *msgid* in the current language, its ``{name}``
    placeholders filled (the value is then escaped as any other by the format's autoescape or finalize)."""
    from .. import i18n

    return i18n.current().format(msgid, **args) if args else i18n.current().gettext(msgid)


def _gettext_markup(kind: str):
    """The templates' ``_markup("page {page} of {pages}", page=<markup>, …)``: the translation's text escaped for the
    format, the values (the format's own markup, such as ``\\thepage``) put in as they are."""
    def tr(msgid: str, **markup):
        from .. import i18n

        if kind == "tex":
            from .texesc import TexRaw as raw, tex_escape as escape
        elif kind == "typ":
            from .typesc import Typ as raw, esc as escape
        else:       # HTML text: an apostrophe stays one (as _ writes it)
            import html

            from markupsafe import Markup as raw

            def escape(s):
                return html.escape(s, quote=False)
        pieces = i18n.current().pieces(msgid, markup)
        return raw("".join(str(x) if k % 2 else str(escape(x)) for k, x in enumerate(pieces)))
    return tr


class _CurrentLocale:
    """The templates' ``locale``: the current language's :class:`worked.i18n.Locale` (``locale.lang``,
    ``locale.is_source``, ``locale.html_lang``, ``locale.typst``, ``locale.babel_name``)."""

    def __getattr__(self, name):
        from .. import i18n

        return getattr(i18n.current(), name)


def _gettext_html(msgid: str, **args):
    """HTML's ``_``: the translation's own text escaped as text (an apostrophe stays one: ``student's``), the values
    put in escaped as autoescape escapes them; for text content, not attributes."""
    import html

    from markupsafe import Markup, escape

    from .. import i18n

    pieces = i18n.current().pieces(msgid, args)
    return Markup("".join(str(escape(x)) if k % 2 else html.escape(x, quote=False) for k, x in enumerate(pieces)))


def _css_page_of():
    """The HTML sheets' page footer as a CSS ``content`` value, in the current language:
    ``"page " counter(page) " of " counter(pages)``."""
    from markupsafe import Markup

    from .. import i18n

    counters = {"page": "counter(page)", "pages": "counter(pages)"}
    pieces = i18n.current().pieces("page {page} of {pages}", counters)
    out = [x if k % 2 else '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"' for k, x in enumerate(pieces)
           if k % 2 or x]
    return Markup(" ".join(out))


def template_globals(kind: str) -> dict:
    """What every template of *kind* (``html``, ``tex``, ``typ``) may call for its words: ``_``, ``_markup`` and
    ``locale`` (the current language)."""
    extra = {"css_page_of": _css_page_of} if kind == "html" else {}
    return dict(_=_gettext_html if kind == "html" else _gettext, _markup=_gettext_markup(kind), locale=_CurrentLocale(),
                **extra)


def env(kind: str, template_dir=None):
    e = _env(kind, tuple(template_dirs(template_dir)))
    if "_" not in e.globals:
        e.globals.update(template_globals(kind))
    return e


def render(kind: str, name: str, template_dir=None, **ctx) -> str:
    import jinja2

    try:
        return env(kind, template_dir).get_template(name).render(**ctx)
    except jinja2.TemplateNotFound as exc:
        raise WorkedError(f"template not found: {exc.name}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise WorkedError(f"{exc.filename or exc.name}:{exc.lineno}: template error: {exc.message}") from None
    except jinja2.UndefinedError as exc:
        raise WorkedError(f"template {name}: {exc.message}") from None
