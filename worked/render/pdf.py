"""PDF from the HTML sheet with WeasyPrint, or from the .tex sheet with pdflatex: one document per call,
as it is, deterministic bytes.

WeasyPrint lays out text with Pango, which picks fonts through fontconfig from the fonts installed on the
machine: a machine with other fonts would give other bytes and page counts, and one without any font
crashes inside Pango. So the WeasyPrint PDFs are set in fonts shipped with worked (``assets/fonts``:
TeX Gyre Termes and Heros, the fonts ``style.css`` names first, unmodified, under the GUST Font License;
and ``assets/worked-math.woff2`` for the few symbols they lack, such as the prime), loaded by ``@font-face``
under names no installed font has ("Worked Serif", "Worked Sans", "Worked Math"): the same fonts, the
same layout and the same bytes on every machine with the same WeasyPrint. Text in a script these fonts
do not cover (a Chinese token, say) still falls back to an installed font.

Before WeasyPrint is imported, :func:`weasyprint_problem` checks that the system libraries it loads
(Pango, HarfBuzz, fontconfig, GLib) can be loaded and that the bundled fonts are there, so a machine
without them gets one line saying what to install instead of a traceback or a crash in Pango.
"""
from __future__ import annotations

import ctypes
import functools
import os
import shutil
import subprocess
import tempfile
import warnings
from pathlib import Path

from ..errors import WorkedError

PAGE_SIZES = {"a4": "A4", "letter": "letter"}

ASSETS = Path(__file__).with_name("assets")
# (CSS family, weight, style, file under ASSETS)
FONT_FACES = tuple(
    [(family, weight, style, f"fonts/texgyre{name}-{face}.otf")
     for family, name in (("Worked Serif", "termes"), ("Worked Sans", "heros"))
     for weight, style, face in ((400, "normal", "regular"), (700, "normal", "bold"),
                                 (400, "italic", "italic"), (700, "italic", "bolditalic"))]
    + [("Worked Math", 400, "normal", "worked-math.woff2")])
FONT_SCHEME = "worked-font"   # url(worked-font:fonts/texgyretermes-regular.otf): a bundled font, by its file name
# The families every WeasyPrint PDF is set in (style.css sets its text in var(--serif) and var(--sans));
# nothing else, so that no installed font is picked for a character the bundled fonts have.
PDF_FONTS_CSS = (':root { --serif: "Worked Serif", "Worked Math" !important; '
                 '--sans: "Worked Sans", "Worked Math" !important; }')

# The shared libraries WeasyPrint loads (weasyprint/text/ffi.py), as the dynamic loader names them, and the
# Debian package of each. HarfBuzz's subsetter is optional to WeasyPrint, not to us: without it the fonts are
# subset by fontTools instead, into other bytes.
LIBRARIES = (
    ("libgobject-2.0.so.0", "libglib2.0-0"),
    ("libfontconfig.so.1", "libfontconfig1"),
    ("libharfbuzz.so.0", "libharfbuzz0b"),
    ("libharfbuzz-subset.so.0", "libharfbuzz-subset0"),
    ("libpango-1.0.so.0", "libpango-1.0-0"),
    ("libpangoft2-1.0.so.0", "libpangoft2-1.0-0"),
)
# The seam for tests (and packagers): "soname=package,…" replaces LIBRARIES, e.g. a soname that does not
# exist to see the message of a machine without Pango.
LIBRARIES_ENV = "WORKED_WEASYPRINT_LIBS"


def _libraries() -> tuple[tuple[str, str], ...]:
    spec = os.environ.get(LIBRARIES_ENV)
    if not spec:
        return LIBRARIES
    return tuple((s.partition("=")[0].strip(), s.partition("=")[2].strip() or s.strip())
                 for s in spec.split(",") if s.strip())


def _loadable(soname: str) -> bool:
    """Whether the dynamic loader finds and loads *soname* (none of its functions is called)."""
    try:
        ctypes.CDLL(soname)
    except OSError:
        return False
    return True


def weasyprint_problem(libraries=None, fonts=None, loadable=_loadable) -> str | None:
    """Why ``--pdf-engine weasyprint`` cannot run on this machine, in one line, or None when it can.

    Checks, without importing WeasyPrint (whose import fails with a traceback where a library is missing,
    and whose layout crashes in Pango where no font is found), that every library of *libraries*
    (default :data:`LIBRARIES`, or :data:`LIBRARIES_ENV`) loads and every font file of *fonts* (default
    the bundled ones) is there. The answer is kept for the process (see :func:`_problem`).
    """
    libraries = _libraries() if libraries is None else libraries
    fonts = [ASSETS / f for *_, f in FONT_FACES] if fonts is None else fonts
    missing = [(so, pkg) for so, pkg in libraries if not loadable(so)]
    if missing:
        names = ", ".join(so for so, _ in missing)
        pkgs = " ".join(dict.fromkeys(pkg for _, pkg in missing))
        return (f"--pdf-engine weasyprint needs Pango (with HarfBuzz, fontconfig and GLib), and this machine lacks "
                f"{names}: install {'it' if len(missing) == 1 else 'them'} (Debian: apt-get install {pkgs}), "
                "or use --pdf-engine typst")
    absent = [Path(f) for f in fonts if not Path(f).is_file()]
    if absent:
        return (f"--pdf-engine weasyprint: the bundled font {absent[0]} is missing (worked is installed without "
                "its data files): reinstall worked, or use --pdf-engine typst")
    return None


@functools.lru_cache(maxsize=1)
def _problem() -> str | None:
    return weasyprint_problem()


def require_weasyprint() -> None:
    """Raise WorkedError (one line: what to install) unless WeasyPrint can run here; call before importing it."""
    problem = _problem()
    if problem:
        raise WorkedError(problem)


def load_weasyprint():
    """``import weasyprint``, after :func:`require_weasyprint` (so a machine without Pango gets one line).

    WeasyPrint warns at import when the machine has no fonts ("Expect ugly output"); our PDFs use only
    the bundled fonts, so that warning, and only it, is not shown."""
    require_weasyprint()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No fonts configured in FontConfig", category=UserWarning)
        warnings.filterwarnings("ignore", message="FontConfig cannot load default config", category=UserWarning)
        import weasyprint
    return weasyprint


def font_face_css() -> str:
    """The ``@font-face`` rules of the bundled fonts (their ``worked-font:`` URLs are served by :func:`_fetcher`)."""
    rules = [f'@font-face {{ font-family: "{family}"; font-weight: {weight}; font-style: {style}; '
             f'src: url("{FONT_SCHEME}:{file}"); }}' for family, weight, style, file in FONT_FACES]
    return "\n".join(rules)


@functools.lru_cache(maxsize=None)
def _font_bytes(file: str) -> bytes:
    return (ASSETS / file).read_bytes()


def _fetcher():
    from weasyprint.urls import URLFetcher, URLFetcherResponse

    bundled = {file for *_, file in FONT_FACES}

    class OwnAssetsOnly(URLFetcher):
        """Refuse every URL except ``data:`` URLs and our bundled fonts: our pages carry their own assets inline."""

        def fetch(self, url, headers=None):
            if url.startswith(FONT_SCHEME + ":") and url[len(FONT_SCHEME) + 1:] in bundled:
                return URLFetcherResponse(url, body=_font_bytes(url[len(FONT_SCHEME) + 1:]))
            if not url.startswith("data:"):
                raise ValueError(f"refused to fetch {url[:80]!r}: sheets use no external resources")
            return super().fetch(url, headers)

    return OwnAssetsOnly(allowed_protocols=("data",), timeout=1)


def html_to_pdf(html: str, *, paper: str = "a4") -> bytes:
    if paper not in PAGE_SIZES:
        raise WorkedError(f"--paper: expected a4 or letter, got {paper!r}")
    weasyprint = load_weasyprint()
    from weasyprint.text.fonts import FontConfiguration

    fetcher = _fetcher()
    fonts = FontConfiguration()   # one per document: the bytes do not depend on what this process printed before
    size = PAGE_SIZES[paper]
    css = weasyprint.CSS(string=f"{font_face_css()}\n{PDF_FONTS_CSS}\n@page {{ size: {size}; }}",
                         url_fetcher=fetcher, font_config=fonts)
    doc = weasyprint.HTML(string=html, base_url="data:,", url_fetcher=fetcher)
    # no dates (the page has no dcterms.created/modified), a fixed identifier: the same HTML gives the same bytes
    return doc.write_pdf(stylesheets=[css], font_config=fonts, pdf_identifier=b"worked-sheet",
                         uncompressed_pdf=False)


def pdflatex_path() -> str | None:
    return shutil.which("pdflatex")


def require_pdflatex() -> str:
    exe = pdflatex_path()
    if exe is None:
        raise WorkedError("pdflatex is not installed (Debian: apt-get install texlive-latex-base "
                          "texlive-latex-recommended texlive-fonts-recommended lmodern); use another --pdf-engine")
    return exe


def tex_env() -> dict:
    """pdfTeX's environment for reproducible output: no dates from the clock (``SOURCE_DATE_EPOCH``
    with ``FORCE_SOURCE_DATE`` also fixes ``\\today`` and the time stamps pdfTeX writes)."""
    return dict(os.environ, SOURCE_DATE_EPOCH="0", FORCE_SOURCE_DATE="1", TZ="UTC")


_RERUN = ("Rerun to get", "Label(s) may have changed")
MAX_PASSES = 4


def tex_to_pdf(tex: str) -> bytes:
    """Compile *tex* with pdflatex, as it is, into PDF bytes.

    pdflatex runs again while its log asks for it (our footers print "page N of M", which needs
    the page count of a previous pass), as latexmk would, at most :data:`MAX_PASSES` times.
    The bytes depend on nothing but *tex* (and the TeX installation): the clock is fixed by
    :func:`tex_env`, and our templates turn off the document ID and the pdfTeX banner.
    """
    exe = require_pdflatex()
    with tempfile.TemporaryDirectory(prefix="worked-tex-") as d:
        (Path(d) / "sheet.tex").write_text(tex, encoding="ascii")
        for _ in range(MAX_PASSES):
            log = _run(exe, d)
            if not any(m in log for m in _RERUN):
                break
        return (Path(d) / "sheet.pdf").read_bytes()


def _run(exe: str, d: str) -> str:
    """One pdflatex pass in *d*; its log."""
    try:
        r = subprocess.run([exe, "-interaction=nonstopmode", "-halt-on-error", "-no-shell-escape", "sheet.tex"],
                           cwd=d, env=tex_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    except subprocess.TimeoutExpired:
        raise WorkedError("pdflatex took longer than 120 s") from None
    path = Path(d) / "sheet.log"
    log = path.read_text(encoding="latin-1") if path.exists() else ""
    if r.returncode != 0:
        err = next((ln for ln in log.splitlines() if ln.startswith("!")), None)
        raise WorkedError(f"pdflatex failed: {err or 'see the log'}")
    return log
