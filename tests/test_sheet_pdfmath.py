"""The fast PDF path for formulas: glyphs as shared form XObjects, drawn as WeasyPrint would draw the SVG."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from worked.problem import load
from worked.render import html as H
from worked.render import html_to_pdf, mathconv, pdfmath
from worked.solver import solve


def _key_html():
    return H.render_html("answer-key", solve(load(None)), for_pdf=True)


def test_every_formula_of_a_key_takes_the_fast_path():
    """Each formula SVG of the Part 9 key is in the subset pdfmath draws (none falls back)."""
    html = _key_html()
    urls = re.findall(r'src="(data:image/svg\+xml;base64,[^"]+)"', html)
    assert len(urls) > 50
    assert all(pdfmath.parse(mathconv._FORMULAS[u]) is not None for u in urls)


def test_outside_the_subset_falls_back():
    """Anything pdfmath does not understand is left to WeasyPrint: relative commands, other elements, colours."""
    head = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" viewBox="0 0 10 10">'
    assert pdfmath.parse(head + '<path d="M 0 0 L 1 1 Z" /></svg>') is not None
    assert pdfmath.parse(head + '<path d="m 0 0 l 1 1 z" /></svg>') is None
    assert pdfmath.parse(head + '<circle r="1" /></svg>') is None
    assert pdfmath.parse(head + '<path fill="red" d="M 0 0 L 1 1 Z" /></svg>') is None
    assert pdfmath.parse(head + '<path d="M 0 0 A 1 1 0 0 0 2 2 Z" /></svg>') is None
    assert pdfmath.parse("<svg><path/></svg>") is None


def test_quadratic_segments_become_the_equal_cubic():
    """Q (quadratic Bézier) becomes the cubic with control points two thirds of the way to the quadratic's."""
    g = pdfmath.glyph("M 0 0 Q 3 3 6 0 Z")
    assert g.ops.decode().split("\n") == ["0 0 m", "2 2 4 2 6 0 c", "h", "f"]
    assert g.bbox == (0.0, 0.0, 6.0, 3.0)


def test_glyph_names_do_not_depend_on_order():
    """A glyph's XObject name is a hash of its outline, so PDFs do not depend on which glyph came first."""
    a = pdfmath.Glyph(b"0 0 m\n1 1 l\nh\nf", (0, 0, 1, 1))
    b = pdfmath.Glyph(b"0 0 m\n1 1 l\nh\nf", (0, 0, 1, 1))
    assert a.id == b.id and a.id.startswith("g")


def test_each_glyph_is_stored_once():
    """The key's PDF holds each distinct glyph once as a form XObject and draws it with Do."""
    pdf = html_to_pdf(_key_html())
    forms = len(re.findall(rb"/Subtype /Form", pdf))
    with pdfmath.disabled():
        slow = html_to_pdf(_key_html())
    assert 20 < forms < 400
    assert len(pdf) < len(slow) * 0.7


@pytest.mark.skipif(shutil.which("pdftoppm") is None, reason="pdftoppm (poppler-utils) is not installed")
def test_drawing_matches_weasyprints_own(tmp_path):
    """Rasterised at 100 dpi, the fast path and WeasyPrint's own SVG drawing give the same page."""
    import numpy as np
    from PIL import Image

    latex = [r"\frac{e^{\sqrt{2}}}{2e^{\sqrt{2}} + e^{2\sqrt{2}}} = \frac{1}{2 + e^{\sqrt{2}}} \approx 0.1636",
             r"Q = {\begin{bmatrix} 1 & 0 \\ -2 & \frac{3}{2} \end{bmatrix}}^{\top}",
             r"\sum_{j} A_{\text{cats},j} = 1", r"\sqrt{d_k} = \sqrt{2} \approx 1.4142"]
    html = "".join(f"<p>{mathconv.svg_img(s, True)}</p>" for s in latex)
    (tmp_path / "fast.pdf").write_bytes(html_to_pdf(html))
    with pdfmath.disabled():
        (tmp_path / "slow.pdf").write_bytes(html_to_pdf(html))
    for name in ("fast", "slow"):
        subprocess.run(["pdftoppm", "-r", "100", "-gray", "-singlefile", "-png", f"{name}.pdf", name],
                       cwd=tmp_path, check=True)
    a = np.asarray(Image.open(tmp_path / "fast.png").convert("L"), dtype=int)
    b = np.asarray(Image.open(tmp_path / "slow.png").convert("L"), dtype=int)
    assert a.shape == b.shape
    diff = np.abs(a - b)
    assert diff.max() < 96          # anti-aliasing only
    assert (diff > 48).sum() < 20
    assert a.min() < 64             # something was drawn


def test_two_processes_give_the_same_bytes_as_one(tmp_path, monkeypatch):
    """write_sheet lays out the PDFs in two worker processes where it can; the files are the same as in one."""
    import os

    from worked.render import write_sheet

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")
    sol = solve(load(None))
    forked = {p.name: p.read_bytes() for p in write_sheet(sol, tmp_path / "a", formats=("html", "pdf"))}
    monkeypatch.setenv("WORKED_NO_FORK", "1")
    single = {p.name: p.read_bytes() for p in write_sheet(sol, tmp_path / "b", formats=("html", "pdf"))}
    assert forked == single and len(forked) == 4


def test_a_failing_child_is_a_clean_error(tmp_path, monkeypatch):
    """If a layout worker fails, the parent raises a WorkedError with its message and writes nothing."""
    import os

    from worked.errors import WorkedError
    from worked.render import pdf as P
    from worked.render import sheet

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")

    def boom(*args, **kwargs):
        raise WorkedError("layout failed")

    monkeypatch.setattr(P, "html_to_pdf", boom)   # the forked workers inherit it
    with pytest.raises(WorkedError, match="layout failed"):
        sheet.write_sheet(solve(load(None)), tmp_path / "o", formats=("pdf",))
    assert not (tmp_path / "o").exists()


def test_cli_layout_server_gives_the_same_files(tmp_path):
    """`worked sheet` lays out its PDFs in a WeasyPrint process started before solving; same bytes as one process."""
    import os
    import subprocess
    import sys

    if not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        pytest.skip("needs fork and two cores")
    outs = []
    for name, extra in (("served", {}), ("single", {"WORKED_NO_FORK": "1"})):
        env = dict(os.environ, **extra)
        r = subprocess.run([sys.executable, "-m", "worked", "sheet", "-o", str(tmp_path / name)], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        folder = tmp_path / name / "cats-chase-mice"
        outs.append({p.name: p.read_bytes() for p in folder.iterdir()})
    assert outs[0] == outs[1] and len(outs[0]) >= 6


def test_cli_bad_problem_with_layout_server_is_one_line(tmp_path):
    """A bad problem file still gives one line on stderr, exit 2 and nothing written, with the server started."""
    import subprocess
    import sys

    bad = tmp_path / "bad.toml"
    bad.write_text('title = "x"\ntokens = ["a"]\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "worked", "sheet", str(bad), "-o", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()


def test_array_types_shortcut_gives_the_same_pdf():
    """Making WeasyPrint's hb_codepoint_t[N] arrays as hb_codepoint_t[] changes no byte of the PDF."""
    import weasyprint.pdf.fonts as wfonts

    html = H.render_html("worksheet", solve(load(None)), for_pdf=True)
    mathconv.speed_up_weasyprint()
    assert isinstance(wfonts.ffi, pdfmath._ArrayFFI)
    fast = html_to_pdf(html)
    shortcut = wfonts.ffi
    wfonts.ffi = shortcut._real
    try:
        plain = html_to_pdf(html)
    finally:
        wfonts.ffi = shortcut
    assert fast == plain
    arr = shortcut.new("hb_codepoint_t[3]", [5, 6, 7])
    assert list(arr) == [5, 6, 7] and len(arr) == 3
