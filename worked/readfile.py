"""Reading the user's input files: regular files only, at most a size limit, UTF-8 with or without a BOM,
and TOML/JSON parsed with bounded numbers and nesting. Every failure is one :class:`InputError` line
naming the file and what was expected.

A FIFO, a device (a symlink to ``/dev/zero``) or a directory is refused before anything is read: the file
is opened non-blocking (so opening a FIFO does not wait for a writer) and checked with ``fstat`` on the
open descriptor (so the file checked is the file read), and at most ``limit + 1`` bytes are ever read.
"""
from __future__ import annotations

import os
import stat

from .errors import WorkedError, reason
from .i18n import Msg, localized_text

FILE_LIMIT = 1_000_000        # bytes in a problem file, answers file, quiz spec, roster or responses file
MANIFEST_LIMIT = 64_000_000   # bytes in a quiz manifest (2,000 variants with their problems and keys)
MAX_INT_DIGITS = 100          # digits of an integer in a TOML or JSON file (a hand exercise needs a few)
BOM = "\ufeff"


class InputError(WorkedError):
    """An input file cannot be read or parsed. ``str()`` is ``"<file>: <what>"``; ``.message`` is the part
    after the file."""

    def __init__(self, source: str, message: str):
        self.source = source
        self.message = message
        super().__init__(f"{source}: {message}" if source else message)

    def localized(self, loc=None) -> str:
        text = localized_text(self.message, loc)
        return f"{self.source}: {text}" if self.source else text


def _kind(mode: int) -> Msg:
    if stat.S_ISDIR(mode):
        return Msg("is a directory, expected {expected}")
    if stat.S_ISFIFO(mode):
        return Msg("is a FIFO (named pipe), expected {expected}")
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return Msg("is a device, expected {expected}")
    if stat.S_ISSOCK(mode):
        return Msg("is a socket, expected {expected}")
    return Msg("is not a regular file, expected {expected}")


def read_bytes(path, limit: int = FILE_LIMIT, expected: str = Msg("a file")) -> bytes:
    """The bytes of the regular file *path* (symlinks followed), refusing anything else or anything larger
    than *limit* bytes. *expected* names what the file should be, for the messages."""
    src = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(src, Msg("no such file (expected {expected})", expected=expected)) from None
    except IsADirectoryError:
        raise InputError(src, Msg("is a directory, expected {expected}", expected=expected)) from None
    except OSError as exc:
        raise InputError(src, Msg("cannot read: {reason}", reason=exc.strerror or exc)) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = _kind(st.st_mode)
            raise InputError(src, Msg(kind.msgid, expected=expected))
        if st.st_size > limit:
            raise InputError(src, Msg("file is larger than {limit} bytes (expected {expected})", limit=limit, expected=expected))
        os.set_blocking(fd, True)
        chunks, size = [], 0
        while size <= limit:
            b = os.read(fd, limit + 1 - size)
            if not b:
                break
            chunks.append(b)
            size += len(b)
        if size > limit:
            raise InputError(src, Msg("file is larger than {limit} bytes (expected {expected})", limit=limit, expected=expected))
        return b"".join(chunks)
    except OSError as exc:
        raise InputError(src, Msg("cannot read: {reason}", reason=exc.strerror or exc)) from None
    finally:
        os.close(fd)


def decode(raw: bytes, src: str, expected: str = Msg("UTF-8 text")) -> str:
    """UTF-8 text, a leading BOM (as Windows editors write it) removed; a bad byte is named with its line."""
    try:
        return raw.decode("utf-8").removeprefix(BOM)   # as "utf-8-sig" does, without loading that codec
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise InputError(src, Msg("line {line}: byte {byte} is not UTF-8; expected {expected}", line=line,
                                   byte=f"0x{raw[exc.start]:02X}", expected=expected)) from None


def read_text(path, limit: int = FILE_LIMIT, expected: str = Msg("a UTF-8 text file")) -> str:
    """:func:`read_bytes` then :func:`decode`."""
    return decode(read_bytes(path, limit, expected), str(path), expected)


def _int(text: str) -> int:
    digits = len(text.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise ValueError(_long_int())
    return int(text)


def _long_int() -> Msg:
    return Msg("a whole number has more than {limit} digits; write numbers of ordinary size", limit=MAX_INT_DIGITS)


def _reject_constant(name):
    raise ValueError(Msg("non-finite number {name} is not allowed", name=name))


def loads_json(text: str, src: str, constants: bool = False, parse_float=str):
    """JSON with decimals kept as strings (exact; *parse_float* float: as floats, as a quiz spec reads them),
    integers of at most :data:`MAX_INT_DIGITS` digits, NaN/Infinity refused unless *constants* (then floats, as
    ``-Infinity`` for a masked score in an answers file), and nesting bounded (a RecursionError becomes a one-line
    error)."""
    import json   # here: a TOML problem file (the usual case) needs no JSON parser

    text = text.removeprefix(BOM)
    try:
        return json.loads(text, parse_float=parse_float, parse_int=_int, parse_constant=None if constants else _reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(src, Msg("not valid JSON: {reason} at line {line}, column {column}", reason=exc.msg,
                                   line=exc.lineno, column=exc.colno)) from None
    except RecursionError:
        raise InputError(src, Msg("not valid JSON: nested too deeply")) from None
    except ValueError as exc:
        raise InputError(src, Msg("not valid JSON: {reason}", reason=reason(exc))) from None


def loads_toml(text: str, src: str, parse_float=str):
    """TOML (decimals kept as strings by default), with integer length and nesting bounded."""
    import tomllib

    text = text.removeprefix(BOM)
    try:
        data = tomllib.loads(text, parse_float=parse_float)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(src, Msg("not valid TOML: {reason}", reason=str(exc))) from None
    except RecursionError:
        raise InputError(src, Msg("not valid TOML: nested too deeply")) from None
    except ValueError as exc:   # an integer longer than Python converts
        raise InputError(src, Msg("not valid TOML: {reason}", reason=reason(exc))) from None
    _check_ints(data, src)
    return data


def _check_ints(data, src: str) -> None:
    """tomllib has no parse_int: refuse over-long integers after parsing (iteratively, no recursion)."""
    limit = 10 ** MAX_INT_DIGITS
    stack = [data]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
        elif isinstance(x, int) and not isinstance(x, bool) and abs(x) >= limit:
            raise InputError(src, _long_int())


def csv_rows(text: str, src: str, delimiter: str = ",", expected: str = Msg("a CSV file")) -> list[tuple[int, list[str]]]:
    """``(line, cells)`` for every row of a CSV text, with the line each row starts on. Refuses, in one
    line naming the file and the line: a NUL byte, a quoted field that is never closed (``"Bob`` to the end
    of the file), a stray quote inside a quoted field, and a field longer than the csv module's limit."""
    import csv
    import io

    nul = text.find("\0")
    if nul >= 0:
        raise InputError(src, Msg("line {line}: a NUL byte; expected {expected} (text)", line=text.count(chr(10), 0, nul) + 1,
                                   expected=expected))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter, strict=True)
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for r in reader:
            rows.append((start, r))
            start = reader.line_num + 1
    except csv.Error as exc:
        msg = str(exc)
        if "field limit" in msg:
            msg = Msg("a field is longer than {limit} characters", limit=csv.field_size_limit())
        elif "end of data" in msg:
            msg = Msg('a quoted field that starts on line {line} is never closed (a " is missing)', line=start)
        elif "expected after" in msg:
            msg = Msg('a quote inside a quoted field (write "" for a " inside quotes)')
        else:
            msg = Msg("not valid CSV ({reason})", reason=msg)
        raise InputError(src, Msg("line {line}: {problem}; expected {expected}", line=reader.line_num, problem=msg,
                                  expected=expected)) from None
    return rows
