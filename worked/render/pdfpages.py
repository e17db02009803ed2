"""Pages of simple PDFs, copied into new PDFs with every shared object written once.

The quiz pipeline cuts each batched pdflatex run into one PDF per sheet, and glues every variant's
sheets into the two class PDFs. pypdf does both, but parses every object into Python objects on the
way (half a second per class PDF, most of it in the fonts' width tables). Here objects stay bytes:
a PDF with a classic cross-reference table and no object streams (what pdfTeX writes with
``\\pdfobjcompresslevel=0``, and what this module writes) is read into its objects' source text and
stream data, and references are found by a small scanner that skips strings.

Objects are identified by content: an object's key is a hash of its text with every reference
replaced by the key of the object it points to (a page's ``/Parent`` left out), plus its stream data.
Identical fonts in twenty sheets are therefore written once, and the output depends only on the
pages given, in order: not on which files they came from. Anything this reader does not handle
(object streams, incremental updates, encryption, indirect stream lengths, attributes inherited from
the page tree, reference cycles) makes :func:`read` return None, and the caller uses pypdf.
"""
from __future__ import annotations

import hashlib
import re

_XREF_ROW = re.compile(rb"(\d{10}) (\d{5}) ([nf])[ \r\n]*")
_SUBSECTION = re.compile(rb"(\d+) (\d+)[ \t]*\r?\n")
_OBJ = re.compile(rb"\s*(\d+)\s+(\d+)\s+obj\b")
_TOKEN = re.compile(rb"\(|<<|>>|<[0-9A-Fa-f\s]*>|%[^\r\n]*|(\d+)\s+(\d+)\s+R\b|endobj\b|stream\r?\n")
_LENGTH = re.compile(rb"/Length\s+(\d+)(?!\s+\d+\s+R)\b")
_INHERITED = re.compile(rb"/(Resources|MediaBox|CropBox|Rotate)\b")
_PARENT = re.compile(rb"/Parent\s+\d+\s+\d+\s+R")
_TYPE = re.compile(rb"/Type\s*/(\w+)")


class NotSimple(Exception):
    pass


class Doc:
    """A parsed PDF: objects by number as (text, stream data or None), and its pages in order."""

    def __init__(self, objects: dict[int, tuple[bytes, bytes | None, list]], pages: list[int]):
        self.objects = objects
        self.pages = pages
        self.page_set: set[int] = set()
        self._keys: dict[int, bytes] = {}

    def key(self, num: int, _path: frozenset = frozenset()) -> bytes:
        """The content key of object *num* (see the module doc)."""
        got = self._keys.get(num)
        if got is not None:
            return got
        if num in _path:
            raise NotSimple("a reference cycle")
        text, data, refs = self.objects[num]
        h = hashlib.sha256()
        last = 0
        for start, end, target in refs:
            h.update(text[last:start])
            h.update(b"@" + (self.key(target, _path | {num}) if target in self.objects else b"null") + b"@")
            last = end
        h.update(text[last:])
        if data is not None:
            h.update(b"stream" + data)
        self._keys[num] = out = h.digest()
        return out

    def type_of(self, num: int) -> str | None:
        m = _TYPE.search(self.objects[num][0])
        return m.group(1).decode("latin-1") if m else None


def _scan(data: bytes, pos: int) -> tuple[int, list, int | None]:
    """From *pos* (just after ``obj``): (end of the object text, its references, start of stream data)."""
    refs = []
    depth = 0
    while True:
        m = _TOKEN.search(data, pos)
        if m is None:
            raise NotSimple("an object without endobj")
        tok = m.group(0)
        if tok == b"(":   # a literal string: balanced parentheses, backslash escapes
            i, level = m.end(), 1
            while level:
                c = data[i:i + 1]
                if not c:
                    raise NotSimple("an unterminated string")
                if c == b"\\":
                    i += 2
                    continue
                level += (c == b"(") - (c == b")")
                i += 1
            pos = i
        elif tok == b"<<":
            depth += 1
            pos = m.end()
        elif tok == b">>":
            depth -= 1
            pos = m.end()
        elif m.group(1) is not None:
            refs.append((m.start(), m.end(), int(m.group(1))))
            pos = m.end()
        elif tok == b"endobj":
            return m.start(), refs, None
        elif tok.startswith(b"stream"):
            if depth:
                raise NotSimple("'stream' inside a dictionary")
            return m.start(), refs, m.end()
        else:   # a hex string or a comment
            pos = m.end()


def read(data: bytes) -> Doc | None:
    """The objects and pages of a simple PDF, or None if it is not one (see the module doc)."""
    try:
        return _read(data)
    except (NotSimple, ValueError, IndexError, KeyError):
        return None


def _read(data: bytes) -> Doc:
    k = data.rfind(b"startxref")
    if k < 0:
        raise NotSimple("no startxref")
    xref = int(data[k + 9:k + 40].split()[0])
    if data[xref:xref + 4] != b"xref":
        raise NotSimple("a cross-reference stream")
    t = data.find(b"trailer", xref)
    offsets: dict[int, int] = {}
    pos = xref + 4
    while True:
        while data[pos:pos + 1] in (b" ", b"\r", b"\n"):
            pos += 1
        if pos >= t:
            break
        m = _SUBSECTION.match(data, pos)
        if m is None:
            raise NotSimple("a malformed cross-reference table")
        first, count = int(m.group(1)), int(m.group(2))
        pos = m.end()
        for i in range(count):
            row = _XREF_ROW.match(data, pos)
            if row is None:
                raise NotSimple("a malformed cross-reference row")
            if row.group(3) == b"n":
                offsets[first + i] = int(row.group(1))
            pos = row.end()
    trailer = data[t:k]
    if b"/Prev" in trailer or b"/Encrypt" in trailer:
        raise NotSimple("an incremental update or encryption")
    root = re.search(rb"/Root\s+(\d+)\s+\d+\s+R", trailer)
    if root is None:
        raise NotSimple("no /Root")
    objects: dict[int, tuple[bytes, bytes | None, list]] = {}
    for num, off in offsets.items():
        m = _OBJ.match(data, off)
        if m is None or int(m.group(1)) != num:
            raise NotSimple("a cross-reference offset that points elsewhere")
        end, refs, stream = _scan(data, m.end())
        text = data[m.end():end]
        refs = [(a - m.end(), b - m.end(), n) for a, b, n in refs]
        body = None
        if stream is not None:
            length = _LENGTH.search(text)
            if length is None:
                raise NotSimple("a stream without a direct /Length")
            body = data[stream:stream + int(length.group(1))]
            if not data[stream + len(body):stream + len(body) + 30].lstrip().startswith(b"endstream"):
                raise NotSimple("a stream /Length that does not end at endstream")
            text = text.rstrip()
        objects[num] = (text.strip(), body, _shift(refs, text))
    doc = Doc(objects, [])
    catalog = objects[int(root.group(1))]
    top = re.search(rb"/Pages\s+(\d+)\s+\d+\s+R", catalog[0])
    if top is None:
        raise NotSimple("no page tree")
    _collect(doc, int(top.group(1)), doc.pages, 0)
    doc.page_set = set(doc.pages)
    for p in doc.pages:   # a page's /Parent is left out of its key and rewritten on output
        text, body, refs = objects[p]
        m = _PARENT.search(text)
        if m is not None:
            text = text[:m.start()] + text[m.end():]
            refs = [(a - (m.end() - m.start()) if a > m.start() else a,
                     b - (m.end() - m.start()) if a > m.start() else b, n)
                    for a, b, n in refs if not m.start() <= a < m.end()]
        objects[p] = (text, body, refs)
    for p in doc.pages:
        doc.key(p)   # cycles (an annotation pointing back at its page) are found here
    return doc


def _shift(refs: list, text: bytes) -> list:
    """References re-based on the stripped object text."""
    lead = len(text) - len(text.lstrip())
    return [(a - lead, b - lead, n) for a, b, n in refs]


def _collect(doc: Doc, num: int, out: list[int], depth: int) -> None:
    if depth > 64:
        raise NotSimple("a page tree too deep")
    text = doc.objects[num][0]
    kind = doc.type_of(num)
    if kind == "Page":
        out.append(num)
        return
    if kind != "Pages" or _INHERITED.search(text):
        raise NotSimple("a page tree node with inherited attributes")
    kids = re.search(rb"/Kids\s*\[([^\]]*)\]", text)
    if kids is None:
        raise NotSimple("a page tree node without /Kids")
    for m in re.finditer(rb"(\d+)\s+\d+\s+R", kids.group(1)):
        _collect(doc, int(m.group(1)), out, depth + 1)


def write(pages: list[tuple[Doc, int]], *, ident: bytes, producer: str = "worked") -> bytes:
    """A PDF of *pages* (document, page number) in order; objects with the same content written once."""
    numbers: dict[bytes, int] = {}
    order: list[tuple[Doc, int, int, bool]] = []   # (doc, object number there, number here, is a page)
    kids: list[int] = []
    nxt = 4   # 1 catalog, 2 page tree, 3 info

    def visit(doc: Doc, num: int, is_page: bool = False) -> None:
        nonlocal nxt
        if not is_page:   # a page is never shared, even with an identical one
            key = doc.key(num)
            if key in numbers:
                return
            numbers[key] = nxt
        else:
            kids.append(nxt)
        order.append((doc, num, nxt, is_page))
        nxt += 1
        for _, _, target in doc.objects[num][2]:
            if target in doc.page_set:
                raise NotSimple("an object that points at a page")
            if target in doc.objects:
                visit(doc, target)

    for doc, num in pages:
        visit(doc, num, is_page=True)
    out = bytearray(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n")
    offsets = {}

    def emit(n: int, text: bytes, body: bytes | None = None) -> None:
        offsets[n] = len(out)
        out.extend(b"%d 0 obj\n" % n + text)
        if body is not None:
            out.extend(b"\nstream\n" + body + b"\nendstream")
        out.extend(b"\nendobj\n")

    emit(1, b"<< /Type /Catalog /Pages 2 0 R >>")
    emit(2, b"<< /Type /Pages /Count %d /Kids [%s] >>" % (len(kids), b" ".join(b"%d 0 R" % n for n in kids)))
    emit(3, b"<< /Producer (" + producer.encode("ascii") + b") >>")
    for doc, num, n, is_page in order:
        text, body, refs = doc.objects[num]
        parts, last = [], 0
        for start, end, target in refs:
            parts.append(text[last:start])
            parts.append(b"%d 0 R" % numbers[doc.key(target)] if target in doc.objects else b"null")
            last = end
        parts.append(text[last:])
        text = b"".join(parts)
        if is_page:
            if not text.endswith(b">>"):
                raise NotSimple("a page that is not a dictionary")
            text = text[:-2].rstrip() + b"\n/Parent 2 0 R\n>>"
        emit(n, text, body)
    xref = len(out)
    out.extend(b"xref\n0 %d\n0000000000 65535 f \n" % nxt)
    for n in range(1, nxt):
        out.extend(b"%010d 00000 n \n" % offsets[n])
    hexid = ident.hex().encode("ascii")
    out.extend(b"trailer\n<< /Size %d /Root 1 0 R /Info 3 0 R /ID [<%s> <%s>] >>\nstartxref\n%d\n%%%%EOF\n"
               % (nxt, hexid, hexid, xref))
    return bytes(out)


def fonts(doc: Doc) -> list[tuple[str, str]]:
    """Every font descriptor of *doc* as (font name without the subset tag, glyph list), sorted."""
    out = []
    for num, (text, _, _) in doc.objects.items():
        if doc.type_of(num) == "FontDescriptor":
            name = re.search(rb"/FontName\s*/([^\s/<>\[\]()]+)", text)
            charset = re.search(rb"/CharSet\s*\(([^)]*)\)", text)
            out.append(((name.group(1).decode("latin-1").split("+")[-1] if name else ""),
                        charset.group(1).decode("latin-1") if charset else ""))
    return sorted(out)
