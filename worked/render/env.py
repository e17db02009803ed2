"""Jinja2 environments for the sheet templates: our folder, with the user's ``--template-dir`` first."""
from __future__ import annotations

import functools
from pathlib import Path

from ..errors import WorkedError

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "sheet"
if not TEMPLATES.is_dir():  # installed as a wheel: templates/ ships as worked/templates
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


@functools.lru_cache(maxsize=16)
def _env(kind: str, dirs: tuple[str, ...]):
    import jinja2

    loader = jinja2.FileSystemLoader(list(dirs))
    if kind == "html":
        return jinja2.Environment(loader=loader, autoescape=True, trim_blocks=True, lstrip_blocks=True,
                                  keep_trailing_newline=True)
    from .texesc import finalize

    return jinja2.Environment(
        loader=loader, autoescape=False, finalize=finalize,
        block_start_string="((*", block_end_string="*))",
        variable_start_string="(((", variable_end_string=")))",
        comment_start_string="((#", comment_end_string="#))",
        line_comment_prefix="%#", trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def env(kind: str, template_dir=None):
    return _env(kind, tuple(template_dirs(template_dir)))


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
