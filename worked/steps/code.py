"""The words in the notebook's code: its comments and what its cells print, in the current language.

A student reads them as they read the markdown around them, so they go through the catalogues as every other word
does (``_("…")``, called when the notebook is written, inside its ``i18n.using``); the Python identifiers, NumPy's
names and the code itself stay as they are. In English the code is byte for byte what it was."""
from __future__ import annotations

import re

from ..i18n import tr as _

# Python's repr escapes the spaces that are not ASCII's (\xa0, the no-break space French sets before a colon)
_ESCAPED_SPACE = re.compile(r"(?<!\\)((?:\\\\)*)\\(xa0|u202f|u2009)")


def literal(text: str) -> str:
    """*text* as a Python string literal in double quotes, as the notebook's code writes its strings (Python's own
    ``repr`` where the text holds a double quote, a backslash or a line break)."""
    if any(c in text for c in '"\\\n\r'):
        return python_repr(text)
    return f'"{text}"'


def python_repr(text: str) -> str:
    """``repr(text)``, Python's literal of *text*, with a no-break or thin space written as itself, as the reader
    sees it printed (repr writes ``\\xa0``)."""
    return _ESCAPED_SPACE.sub(lambda m: m[1] + chr(int(m[2][1:], 16)), repr(text))


def quoted(text: str) -> str:
    """*text* as a Python string literal in single quotes (an apostrophe escaped), as the chain's checks write theirs."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


def docstring(text: str, indent: str = "    ") -> str:
    """*text* as a docstring at *indent*, its lines indented alike (Python's ``repr`` when a translation holds what a
    triple-quoted string could not)."""
    if '"""' in text or text.endswith(('"', "\\")):
        return indent + python_repr(text) + "\n"
    return indent + '"""' + text.replace("\n", "\n" + indent) + '"""\n'


def print_shape(v: str, shape: str | None = None) -> str:
    """``print("Q shape:", Q.shape)``: the line that prints a matrix's shape (*shape*: its code, ``Q.shape`` by
    default)."""
    return "print(" + literal(_("{name} shape:", name=v)) + ", " + (shape or v + ".shape") + ")"


def show(v: str, shape: str | None = None) -> str:
    """A step's two printing lines: its shape, then its table (``show``)."""
    return print_shape(v, shape) + f"\nshow({v})"


def row_sums(v: str) -> str:
    """``print("row sums:", A.sum(axis=1))``: a softmax's rows, each summing to 1."""
    return "print(" + literal(_("row sums:")) + f", {v}.sum(axis=1))"


def softmax_code() -> str:
    """The notebook's ``softmax`` (defined by the first step that uses it)."""
    return ("def softmax(z):                         # " + _('turn each row into a "pie"') + "\n"
            "    e = np.exp(z)\n"
            "    return e / e.sum(axis=1, keepdims=True)\n\n")
