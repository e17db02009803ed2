"""worked.render.pdfpages: pages of simple PDFs copied as bytes, every shared object written once, the
result depending only on the pages given; anything unusual is left to pypdf."""
import io
import shutil

import pytest

from worked.render import pdfpages as P


def _pdf(objects: dict[int, bytes], root: int = 1) -> bytes:
    """A PDF with a classic cross-reference table from {number: object text (with stream)}."""
    out = bytearray(b"%PDF-1.5\n")
    offsets = {}
    for n in sorted(objects):
        offsets[n] = len(out)
        out += b"%d 0 obj\n%s\nendobj\n" % (n, objects[n])
    size = max(objects) + 1
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % size
    for n in range(1, size):
        out += b"%010d 00000 n \n" % offsets[n] if n in offsets else b"0000000000 00000 f \n"
    out += b"trailer\n<< /Size %d /Root %d 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, xref)
    return bytes(out)


def _stream(data: bytes, extra: bytes = b"") -> bytes:
    return b"<< /Length %d %s>>\nstream\n%s\nendstream" % (len(data), extra, data)


def _doc(text: bytes, font: bytes = b"/F1 4 0 R") -> bytes:
    return _pdf({
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Count 1 /Kids [3 0 R] >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Resources << /Font << " + font
           + b" >> >> /Contents 5 0 R /PieceInfo 6 0 R >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        5: _stream(b"BT /F1 12 Tf 10 50 Td (" + text + b") Tj ET"),
        6: b"<< /Note [1 (a string with 7 0 R and \\) and (nested) parens) 2] >>",
    })


def test_identical_objects_are_written_once_and_pages_keep_their_text():
    """Two one-page PDFs with the same font give a two-page PDF with one font object; pypdf reads the
    pages back with their text, and a reference-looking string (with escaped and nested parentheses)
    is left alone."""
    from pypdf import PdfReader

    a, b = P.read(_doc(b"first page")), P.read(_doc(b"second page"))
    out = P.write([(a, a.pages[0]), (b, b.pages[0])], ident=b"\x01" * 16)
    r = PdfReader(io.BytesIO(out))
    assert [p.extract_text() for p in r.pages] == ["first page", "second page"]
    assert out.count(b"/BaseFont /Helvetica") == 1
    assert b"[1 (a string with 7 0 R and \\) and (nested) parens) 2]" in out and out.count(b"/Note") == 1
    fonts = [p["/Resources"]["/Font"].raw_get("/F1").idnum for p in r.pages]
    assert fonts[0] == fonts[1]


def test_the_result_depends_only_on_the_pages():
    """The same pages from one two-page file or from two one-page files give the same bytes."""
    two = P.read(_pdf({
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Count 2 /Kids [3 0 R 7 0 R] >>",
        3: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Resources << /Font << /F1 4 0 R >> >> "
           b"/Contents 5 0 R /PieceInfo 6 0 R >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        5: _stream(b"BT /F1 12 Tf 10 50 Td (first page) Tj ET"),
        6: b"<< /Note [1 (a string with 7 0 R and \\) and (nested) parens) 2] >>",
        7: b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 100] /Resources << /Font << /F1 4 0 R >> >> "
           b"/Contents 8 0 R /PieceInfo 6 0 R >>",
        8: _stream(b"BT /F1 12 Tf 10 50 Td (second page) Tj ET"),
    }))
    a, b = P.read(_doc(b"first page")), P.read(_doc(b"second page"))
    ident = b"\x02" * 16
    assert P.write([(two, p) for p in two.pages], ident=ident) == P.write([(a, a.pages[0]), (b, b.pages[0])], ident=ident)


@pytest.mark.parametrize("change", [
    (b"xref\n", b"XREF\n"),                                              # not a classic table
    (b"/Root 1 0 R", b"/Root 1 0 R /Encrypt 9 0 R"),                    # encrypted
    (b"/Type /Pages /Count 1", b"/Type /Pages /MediaBox [0 0 1 1] /Count 1"),   # inherited attribute
])
def test_what_it_does_not_handle_is_refused(change):
    """A cross-reference stream, encryption or an attribute inherited from the page tree: read() gives None."""
    data = _doc(b"x").replace(*change)
    assert P.read(data) is None


def test_a_page_pointed_at_from_its_content_is_refused_and_merge_falls_back_to_pypdf():
    """An annotation that points back at its page (a cycle) cannot be copied as bytes; merge_pdfs then
    uses pypdf and still gives both pages."""
    from pypdf import PdfReader

    from worked.quiz import merge_pdfs

    looped = _doc(b"x").replace(b"/PieceInfo 6 0 R >>", b"/PieceInfo 6 0 R /Annots [7 0 R] >>")
    assert b"/Annots" in looped
    looped = _pdf({**{n: o for n, o in _objects(looped).items()},
                   7: b"<< /Type /Annot /Subtype /Text /Rect [0 0 1 1] /P 3 0 R >>"})
    assert P.read(looped) is None
    merged = merge_pdfs([looped, _doc(b"y")])
    assert len(PdfReader(io.BytesIO(merged)).pages) == 2


def _objects(data: bytes) -> dict[int, bytes]:
    import re

    return {int(m.group(1)): m.group(2) for m in re.finditer(rb"(\d+) 0 obj\n(.*?)\nendobj", data, re.S)}


@pytest.mark.skipif(shutil.which("pdflatex") is None, reason="pdflatex is not installed")
def test_class_pdf_of_latex_sheets_shares_fonts_and_draws_the_same_pages(tmp_path):
    """The class PDF of three variants' keys (latex engine) holds each font once and draws every page as
    the variant's own PDF does (100 dpi, pixel for pixel)."""
    import subprocess

    import numpy as np
    from PIL import Image

    from worked.quiz import build_variant, load_spec, merge_pdfs, plan
    from worked.render.texbatch import compile_sheets

    from conftest import PROBLEMS

    spec = load_spec(PROBLEMS / "quiz-1.toml")
    texs = []
    for v in plan(spec.seed, count=3):
        files = build_variant(spec, v, ("tex",))["files"]
        texs.append(files[f"variants/{v.code}/answer-key.tex"].decode("ascii"))
    keys = compile_sheets(texs, ["answer-key"] * 3)
    merged = merge_pdfs(keys)
    assert len(merged) < 0.5 * sum(len(k) for k in keys)
    docs = [P.read(k) for k in keys]
    assert all(d is not None for d in docs)
    mine = P.fonts(P.read(merged))
    assert len(mine) == len(set(mine)) == len(set().union(*(P.fonts(d) for d in docs)))

    def png(data, page, name):
        (tmp_path / f"{name}.pdf").write_bytes(data)
        subprocess.run(["pdftoppm", "-r", "100", "-f", str(page), "-l", str(page), "-png", "-singlefile",
                        tmp_path / f"{name}.pdf", tmp_path / name], check=True)
        return np.asarray(Image.open(tmp_path / f"{name}.png").convert("L"))

    first_of_second = len(docs[0].pages) + 1
    assert np.array_equal(png(merged, first_of_second, "m"), png(keys[1], 1, "k"))
