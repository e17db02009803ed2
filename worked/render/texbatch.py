"""Many LaTeX sheets in one pdflatex run, split back into one PDF per sheet.

A pdflatex run has a fixed cost (loading the format, embedding the fonts) of about 0.25 s, as much
as typesetting a whole answer key; a quiz batch compiles two sheets per student. Here several
sheets that share a preamble are typeset in one document (each part starts on a new page, with its
own page numbers and "page N of M"), and the PDF is cut into one file per part
(:mod:`worked.render.pdfpages`).

Each file must be exactly what that sheet would give alone, so that a variant's PDFs do not depend on
which other sheets shared its run (``worked quiz --variant CODE`` rebuilds them alone; ``--jobs``
changes nothing). What a part's bytes could borrow from its neighbours is the fonts: pdfTeX embeds
one subset per font holding the glyphs used anywhere in the run, and names fonts in the page
content by the order they were loaded. So every run, batched or alone, starts with a *prelude*
that loads the fonts our sheets use, in a fixed order, and puts a fixed set of characters in each
subset (``\\pdfincludechars``): printable ASCII in the text fonts (names and tokens are text) and
whatever the templates set in the math fonts (:data:`FONT_CODES`, from :func:`survey`). When every
glyph a part uses is in those sets, the subsets are the same whatever the neighbours were.

That is checked after each batched run: the fonts embedded (name and glyph list) must be exactly
those of the prelude alone (:func:`_reference_fonts`, compiled once and cached). Anything else (a
font or glyph the prelude does not hold, say a token with an accented letter) means the batch is
thrown away and its sheets are compiled one at a time: slower, never different.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import re
from collections import Counter

from . import pdfpages
from .pdf import LAST_PAGE, _preloaded_format, _split_preamble, compile_source, require_pdflatex, tex_env

# Characters put in every text font's subset: printable ASCII (without the visible space at 32), the
# f-ligatures (27-31), quotes and dashes (16, 17, 21, 22) of the T1 encoding.
_TEXT = tuple(sorted({16, 17, 21, 22, *range(27, 32), *range(33, 127)}))
_DIGITS = tuple(range(48, 58))   # and all ten digits in the math roman fonts
# Students' names and ids are set in small bold (ec-lmbx9): its subset also holds every accented letter
# of T1 (128-255), so a class of Zoës and Núñezes still shares runs (20 kB more per PDF). The same for
# the fonts of the title and instructions would cost 70 kB more: an accented title or instructions
# (the same on every sheet) mean one run per sheet instead, as slow as before batching, same bytes.
_ACCENTED = ("ec-lmbx9",)
_LATIN = tuple(range(128, 256))

# tfm name -> character codes (besides _TEXT in the T1 "ec-" fonts and _DIGITS in the OT1 "rm-" ones),
# from :func:`survey` over the example problems, the example quizzes and generated families (one and
# two heads, masks, scalings). The survey cannot tell T1 from OT1 when a font set only ASCII, so it
# also named ec-lmr5, ec-lmr6 and ec-lmri7; batching the same sheets without them showed that they are
# not used, and they were left out (a font the prelude lacks costs a fallback, never a wrong byte).
FONT_CODES: dict[str, tuple[int, ...]] = {
    "ec-lmbx10": (),
    "ec-lmbx9": (),
    "ec-lmr10": (),
    "ec-lmr5": (),
    "ec-lmr6": (),
    "ec-lmr7": (),
    "ec-lmr9": (),
    "ec-lmri10": (),
    "ec-lmri7": (),
    "ec-lmri9": (),
    "ec-lmss8": (),
    "ec-lmssbx10": (),
    "ec-lmtt10": (),
    "lmex10": (20, 21, 34, 35, 50, 51, 52, 53, 54, 55, 80, 104, 105, 112),
    "lmmi10": (58, 59, 65, 75, 81, 86, 87, 88, 90, 100, 101, 107, 113, 118, 120, 122),
    "lmmi5": (58, 61),
    "lmmi7": (58, 59, 61, 75, 79, 81, 86, 101, 106, 107, 120),
    "lmmi9": (58,),
    "lmsy10": (0, 1, 6, 25, 49, 112),
    "lmsy5": (112,),
    "lmsy7": (0, 1, 33, 35, 49, 62, 112),
    "lmsy9": (0, 1, 2, 25, 33, 49, 112),
    "rm-lmr10": (11, 37, 40, 41, 42, 43, 44, 45, 46, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 61, 65, 66, 67, 68, 69, 71, 73, 75, 77, 80, 81, 82, 83, 84, 86, 87, 88, 90, 91, 93, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 124, 190),
    "rm-lmr5": (48, 49, 50, 51, 52, 53),
    "rm-lmr6": (100, 101, 107, 108, 109, 111, 118),
    "rm-lmr7": (11, 40, 41, 43, 44, 45, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 65, 73, 75, 79, 81, 83, 84, 86, 87, 97, 98, 99, 100, 101, 102, 103, 104, 105, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 119, 120, 121, 122, 124),
    "rm-lmr9": (11, 34, 40, 41, 44, 46, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 61, 68, 69, 70, 71, 73, 78, 84, 86, 87, 92, 97, 98, 99, 100, 101, 102, 103, 104, 105, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121),
    "rm-lmri10": (34, 40, 41, 44, 46, 47, 48, 49, 50, 51, 52, 58, 61, 65, 67, 73, 77, 84, 87, 92, 97, 98, 99, 100, 101, 102, 103, 104, 105, 107, 108, 109, 110, 111, 112, 114, 115, 116, 117, 118, 119, 120, 121),
    "rm-lmri7": (11, 49, 50, 51, 52, 73, 97, 98, 99, 100, 101, 102, 103, 104, 105, 107, 108, 109, 110, 111, 114, 115, 116, 119, 120),
    "rm-lmri9": (11, 12, 40, 41, 46, 49, 50, 51, 52, 59, 73, 79, 97, 98, 99, 100, 101, 102, 103, 104, 105, 107, 108, 109, 110, 111, 114, 115, 116, 117, 119, 120, 121),
    "ts1-lmr10": (39, 44, 46),
    "ts1-lmri10": (39, 44, 46),
}

# no object streams: the PDF is then read and cut by worked.render.pdfpages without parsing its objects
_PLAIN_OBJECTS = "\\pdfobjcompresslevel=0\n"

STATS: Counter = Counter()   # "batched" and "alone" runs, "fell back" batches (for tests and benchmarks)

_BEGIN = "\\begin{document}\n"
_END = "\\end{document}"
_LABEL = "{" + LAST_PAGE + "}"


def prelude() -> str:
    """TeX that loads our fonts in a fixed order with fixed character sets (after ``\\begin{document}``)."""
    out = ["\\makeatletter\n"]
    for n, (tfm, extra) in enumerate(FONT_CODES.items()):
        codes = set(extra)
        if tfm.startswith("ec-"):
            codes |= set(_TEXT)
        if tfm.startswith("rm-"):
            codes |= set(_DIGITS)
        if tfm in _ACCENTED:
            codes |= set(_LATIN)
        codes = sorted(codes)
        cs = "\\wk@font@" + _letters(n)
        out.append(f"\\font{cs}={tfm}\\relax\n")
        out.append(_include(cs, codes))
    out.append(_TOTAL)
    out.append("\\makeatother\n")
    return "".join(out)


# "page N of M" in one pass. The footer's M is a PDF form XObject, /WkTotal in the page's resources,
# drawn where the number goes (\wktotalpages reserves the width of \wk@digits digits, digits being
# all of one width); the form's content, M set in the footer's font, is written when the sheet ends
# and M is known. A sheet whose M has another number of digits than reserved is typeset again.
_TOTAL = r"""\newcount\wk@total@obj
\def\wk@sheet#1{\pdfobj reserveobjnum \global\wk@total@obj=\pdflastobj
  \edef\@tempa{/XObject<</WkTotal \the\wk@total@obj\space 0 R>>}%
  \global\pdfpageresources\expandafter{\@tempa}\gdef\wk@digits{#1}%
  \global\let\wk@font@name\@empty}
\DeclareRobustCommand\wktotalpages{\xdef\wk@font@name{\pdffontname\font}%
  \xdef\wk@font@obj{\pdffontobjnum\font}\xdef\wk@font@size{\f@size}%
  \hbox to \dimexpr\fontcharwd\font`0*\wk@digits\relax{\pdfliteral{/WkTotal Do}\hss}}
\def\wk@endsheet{\count@=\c@page \advance\count@\m@ne
  \ifx\wk@font@name\@empty \immediate\pdfobj useobjnum \wk@total@obj {null}\else
  \dimen@=\wk@font@size pt \dimen@=0.99626\dimen@
  \immediate\pdfobj useobjnum \wk@total@obj stream attr{/Type/XObject/Subtype/Form/BBox[-1 -5 60 15]
    /Resources<</Font<</F\wk@font@name\space\wk@font@obj\space 0 R>>>>}{BT /F\wk@font@name\space
    \strip@pt\dimen@\space Tf (\the\count@) Tj ET}\fi}
"""


def _letters(n: int) -> str:
    s = ""
    while True:
        s = chr(97 + n % 26) + s
        n //= 26
        if not n:
            return s


_SLOTS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _include(cs: str, codes: list[int]) -> str:
    r"""``\pdfincludechars`` for arbitrary character codes, written in ASCII.

    Letters are mapped to the codes with ``\lccode`` and ``\lowercase`` (which changes character
    codes and keeps category codes), so braces, ``%`` or control characters need no escaping. Code 0
    cannot be made that way (an ``\lccode`` of 0 means "unchanged"): it gets ``^^@`` as an "other"
    character instead.
    """
    out = []
    if 0 in codes:
        out.append(f"\\begingroup\\catcode0=12 \\pdfincludechars{cs}{{^^@}}\\endgroup\n")
    rest = [c for c in codes if c]
    for i in range(0, len(rest), len(_SLOTS)):
        part = rest[i:i + len(_SLOTS)]
        lc = "".join(f"\\lccode`{_SLOTS[j]}={c} " for j, c in enumerate(part))
        out.append(f"\\begingroup{lc}\\lowercase{{\\endgroup\\pdfincludechars{cs}{{{_SLOTS[:len(part)]}}}}}%\n")
    return "".join(out)


def _parts(tex: str):
    """(packages, preamble, body) of one of our sheets, or None if it is not shaped like one."""
    packages, rest = _split_preamble(tex)
    if not packages or rest.count(_BEGIN) != 1 or rest.count(_LABEL) < 1:
        return None
    pre, body = rest.split(_BEGIN)
    k = body.rfind(_END)
    if k < 0 or body[k + len(_END):].strip():
        return None
    return packages, pre, body[:k]


def _source(pre: str, bodies: list[str], digits: list[int] | None = None) -> str:
    """One document: the prelude, then each sheet on fresh pages with its own page numbers."""
    parts = []
    for k, body in enumerate(bodies):
        if k:
            parts.append("\\clearpage\\setcounter{page}{1}%\n")
        parts.append("\\makeatletter\\wk@sheet{%d}\\makeatother\n" % (digits[k] if digits else 1))
        body = body.replace("\\pageref" + _LABEL, "\\wktotalpages{}")
        parts.append(body.replace(_LABEL, "{%s-%d}" % (LAST_PAGE, k)))
        parts.append("\\clearpage\\makeatletter\\wk@endsheet\\makeatother\n")
    return _PLAIN_OBJECTS + pre + _BEGIN + prelude() + "".join(parts) + _END + "\n"


_COUNTS: dict[str, Counter] = {}   # hint key -> page counts seen


def _digits(key: str | None) -> int:
    seen = _COUNTS.get(key) if key else None
    return len(str(seen.most_common(1)[0][0])) if seen else 1


def compile_sheets(texs: list[str], hints: list[str | None] | None = None,
                   known: list[int | None] | None = None, _depth: int = 0) -> list[bytes]:
    """One PDF per LaTeX sheet, typeset in as few pdflatex runs as the sheets allow; see the module doc.

    One pass: "page N of M" is drawn when each sheet ends (see _TOTAL), in a space as wide as the
    digits expected for M (the most frequent count so far for the sheet's *hints* key, or its *known*
    count, or one digit). A sheet whose M needs more or fewer digits is typeset once more.
    """
    if not texs:
        return []
    hints = list(hints) if hints is not None else [None] * len(texs)
    known = list(known) if known is not None else [None] * len(texs)
    parsed = [_parts(t) for t in texs]
    if len(texs) > 1 and (any(p is None for p in parsed) or len({p[:2] for p in parsed}) != 1):
        return [compile_sheets([t], [h], [n])[0] for t, h, n in zip(texs, hints, known)]
    if parsed[0] is None:   # not one of our sheets: compiled as it is
        from .pdf import tex_to_pdf

        return [tex_to_pdf(texs[0], hint=hints[0])]
    exe = require_pdflatex()
    packages, pre, _ = parsed[0]
    labels = [f"{LAST_PAGE}-{k}" for k in range(len(texs))]
    digits = [len(str(n)) if n else _digits(h) for n, h in zip(known, hints)]
    pdf, pages = compile_source(exe, packages, _source(pre, [p[2] for p in parsed], digits), rerun=False)
    counts = [pages.get(label) for label in labels]
    doc = pdfpages.read(pdf)
    if doc is None:
        from ..errors import WorkedError

        raise WorkedError("pdflatex wrote a PDF that worked cannot cut into sheets (object streams?)")
    if None in counts or sum(counts) != len(doc.pages):
        _raise_unexpected(counts, len(doc.pages))
    for h, n in zip(hints, counts):
        if h:
            _COUNTS.setdefault(h, Counter())[n] += 1
    STATS["batched" if len(texs) > 1 else "alone"] += 1
    if len(texs) > 1 and pdfpages.fonts(doc) != _reference_fonts(exe, packages, pre):
        # a font or glyph outside the prelude: the parts would not be what they are alone
        STATS["fell back"] += 1
        return [compile_sheets([t], [h], [n])[0] for t, h, n in zip(texs, hints, counts)]
    out: list[bytes | None] = []
    start = 0
    for tex, n, d in zip(texs, counts, digits):
        out.append(pdfpages.write([(doc, p) for p in doc.pages[start:start + n]], producer="worked (pdfTeX)",
                                  ident=hashlib.md5(tex.encode("ascii")).digest()) if len(str(n)) == d else None)
        start += n
    again = [k for k, b in enumerate(out) if b is None]
    if again and _depth:   # typeset with its true page count, a sheet came out longer or shorter
        from ..errors import WorkedError

        raise WorkedError("pdflatex: a sheet's page count changed between two runs of the same source")
    if again:
        STATS["again"] += len(again)
        redone = compile_sheets([texs[k] for k in again], [None] * len(again), [counts[k] for k in again], 1)
        for k, b in zip(again, redone):
            out[k] = b
    return out


def _raise_unexpected(counts, total):
    from ..errors import WorkedError

    raise WorkedError(f"pdflatex: could not find where each sheet ends (pages {counts}, {total} in all); "
                      "a template must keep \\label{wk-last-page} at the end of the document")


_REFERENCE: dict[str, list[tuple[str, str]]] = {}


def _reference_fonts(exe: str, packages: str, pre: str) -> list[tuple[str, str]]:
    """The fonts of the prelude alone (an empty page), cached in memory and beside the pdfTeX formats."""
    key = hashlib.sha256((packages + "\0" + pre + "\0" + prelude() + "\0v2").encode("ascii")).hexdigest()[:24]
    if key in _REFERENCE:
        return _REFERENCE[key]
    from .pdf import _format_dir

    d = _format_dir()
    path = d / f"worked-fonts-{key}.json" if d is not None else None
    fonts = None
    if path is not None and path.exists():
        try:
            fonts = [tuple(x) for x in json.loads(path.read_text(encoding="utf-8"))]
        except (OSError, ValueError, TypeError):
            fonts = None
    if fonts is None:
        pdf, _ = compile_source(exe, packages, _PLAIN_OBJECTS + pre + _BEGIN + prelude() + "\\null\n" + _END + "\n",
                                rerun=False)
        fonts = pdfpages.fonts(pdfpages.read(pdf))
        if path is not None:
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            try:
                tmp.write_text(json.dumps(fonts), encoding="utf-8")
                tmp.replace(path)
            except OSError:
                pass
    _REFERENCE[key] = fonts
    return fonts


def warm_up(tex: str) -> None:
    """Build the format and the prelude's reference fonts for sheets like *tex* (before forking workers)."""
    parsed = _parts(tex)
    if parsed is None:
        return
    exe = require_pdflatex()
    _preloaded_format(exe, parsed[0], tex_env())
    _reference_fonts(exe, parsed[0], parsed[1])


# ---------------------------------------------------------------- the survey behind FONT_CODES

def survey(texs: list[str]) -> dict[str, list[int]]:
    """tfm name -> character codes that *texs* use, found by compiling them without a prelude.

    ``python -m worked.render.texbatch`` runs it over our examples and prints :data:`FONT_CODES`.
    """
    import subprocess

    from pypdf import PdfReader

    exe = require_pdflatex()
    mapfile = subprocess.run(["kpsewhich", "pdftex.map"], capture_output=True, text=True).stdout.strip()
    by_font: dict[tuple[str, str | None], str] = {}
    for line in open(mapfile, encoding="latin-1"):
        f = line.split()
        if len(f) >= 2 and not line.startswith("%"):
            enc = next((x[1:] for x in f if x.startswith("<") and x.endswith(".enc")), None)
            by_font.setdefault((f[1], enc), f[0])
    encs: dict[str, list[str]] = {}
    used: dict[str, set[int]] = {}
    saved = dict(FONT_CODES)
    FONT_CODES.clear()
    try:
        groups: dict[tuple[str, str], list[str]] = {}
        for t in texs:
            p = _parts(t)
            if p is not None:
                groups.setdefault(p[:2], []).append(p[2])
        for (packages, pre), bodies in groups.items():
            for i in range(0, len(bodies), 40):
                pdf, _ = compile_source(exe, packages, _source(pre, bodies[i:i + 40]))
                reader = PdfReader(io.BytesIO(pdf))
                for page in reader.pages:
                    for font in page["/Resources"].get("/Font", {}).values():
                        font = font.get_object()
                        name = str(font["/BaseFont"]).split("+")[-1]
                        desc = font["/FontDescriptor"].get_object()
                        glyphs = set(str(desc.get("/CharSet", "")).split("/")[1:])
                        for tfm, vector in _candidates(font, name, by_font, encs):
                            used.setdefault(tfm, set()).update(c for c, g in enumerate(vector) if g in glyphs)
    finally:
        FONT_CODES.update(saved)
    return {tfm: sorted(codes) for tfm, codes in sorted(used.items())}


_ENCODINGS = ("lm-ec.enc", "lm-rm.enc", "lm-ts1.enc", "lm-mathit.enc", "lm-mathsy.enc", "lm-mathex.enc")


def _candidates(font, name, by_font, encs):
    """[(tfm, its 256 glyph names)] that a pdfTeX font dict may come from.

    pdfTeX writes only the used glyphs into ``/Differences``, so a font that used ASCII only fits
    both T1 and OT1: every encoding that fits is returned (a few extra characters in the prelude).
    """
    import subprocess

    diffs = font.get("/Encoding")
    if diffs is None:   # built-in encoding (the AMS fonts): read it from the font program
        tfm = by_font.get((name, None))
        if tfm is None:
            return []
        if tfm not in encs:
            pfb = subprocess.run(["kpsewhich", tfm + ".pfb"], capture_output=True, text=True).stdout.strip()
            vec = [".notdef"] * 256
            if pfb:
                for m in re.finditer(rb"dup (\d+) */(\S+) put", open(pfb, "rb").read()[:20000]):
                    vec[int(m.group(1))] = m.group(2).decode("latin-1")
            encs[tfm] = vec
        return [(tfm, encs[tfm])]
    vec = [None] * 256
    k = 0
    for x in diffs.get_object().get("/Differences", []):
        if isinstance(x, int):
            k = int(x)
        else:
            if k < 256:
                vec[k] = str(x)[1:]
            k += 1
    out = []
    for enc in _ENCODINGS:
        tfm = by_font.get((name, enc))
        if tfm is None:
            continue
        if enc not in encs:
            path = subprocess.run(["kpsewhich", enc], capture_output=True, text=True).stdout.strip()
            text = re.sub(r"%[^\n]*", "", open(path, encoding="latin-1").read()) if path else ""
            body = text[text.find("[") + 1:text.rfind("]")]
            encs[enc] = ([g[1:] for g in body.split()] + [".notdef"] * 256)[:256]
        ev = encs[enc]
        if all(g is None or g == ev[i] for i, g in enumerate(vec)):
            out.append((tfm, ev))
    return out


def _corpus() -> list[str]:
    """LaTeX sheets for the survey: the example problems, two example quizzes, generated families."""
    from pathlib import Path

    from ..generate import Family, generate
    from ..problem import load
    from ..quiz import build_variant, load_spec, plan
    from ..solver import solve
    from .tex import render_tex

    root = Path(__file__).resolve().parents[2]
    out = []
    for p in sorted((root / "problems").glob("*.toml")):
        if p.name.startswith("quiz"):
            continue
        sol = solve(load(p))
        out += [render_tex(k, sol) for k in ("worksheet", "answer-key")]
    for name in ("quiz-1.toml", "quiz-2-causal.toml"):
        spec = load_spec(root / "problems" / name)
        for v in plan(spec.seed, count=12):
            files = build_variant(spec, v, ("tex",))["files"]
            out += [b.decode("ascii") for k, b in sorted(files.items()) if k.endswith(".tex")]
    for i, fam in enumerate([Family(tokens=2, d_model=3, d_k=2), Family(tokens=4, d_model=4, d_k=4),
                             Family(tokens=3, d_model=4, d_k=2, mask="causal", heads=2),
                             Family(tokens=3, d_model=2, d_k=2, scale="none")]):
        for seed in range(4):
            sol = solve(generate(fam, 100 * i + seed))
            out += [render_tex(k, sol) for k in ("worksheet", "answer-key")]
    return out


if __name__ == "__main__":  # pragma: no cover - a maintenance tool
    found = survey(_corpus())
    print("FONT_CODES: dict[str, tuple[int, ...]] = {")
    for tfm, codes in found.items():
        extra = [c for c in codes if not (tfm.startswith("ec-") and c in _TEXT)]
        print(f'    "{tfm}": ({", ".join(map(str, extra))}{"," if len(extra) == 1 else ""}),')
    print("}")
    total = Counter(len(c) for c in found.values())
    print(f"# {len(found)} fonts")
