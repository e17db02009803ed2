"""LMS exports of a quiz batch, built from its manifest (``manifest.json``): Moodle XML, Canvas QTI 1.2, GIFT.

Each exporter is a pure function of the manifest dict, so ``worked quiz`` and the tests use the same
data the grader reads. Every variant's question text carries the variant's own matrices, the given
matrices of the page model (:func:`worked.render.view.problem_page`) printed from their trees: LaTeX in
``\\( … \\)`` for Moodle and GIFT (Moodle's MathJax filter renders it), Canvas's equation images for Canvas.

What the three readers do with text, as read in their code (Moodle 4.5's ``qformat_xml``, ``qformat_gift``
and ``qtype_multianswer``; instructure's QTIMigrationTool and Canvas's ``Qti::NumericInteraction``), and
what this module does about it:

- Variants are named by their code only: student names and ids stay in the PDFs and the manifest
  (question banks are shared, and a random question would show another student's name).
- XML 1.0 cannot carry C0 control characters, not even as references: :func:`clean` shows them as
  their Unicode control pictures (U+0001 → ␁), so a title never makes a file ill-formed.
- Text we did not write (the title, the tokens) is HTML-escaped, its braces written as character
  references (a Cloze question would read ``{1:NM:…}`` in a token as a sub-question), and wrapped in
  ``<span class="tex2jax_ignore">`` so MathJax leaves a ``\\(`` in a token alone: :func:`literal`.
- Moodle category names (:func:`category`): ``/`` separates levels and ``//`` is a literal slash, tags
  are stripped (``PARAM_TEXT``), a line ends a GIFT ``$CATEGORY``: so one line, ``//`` for ``/``, and
  ``<``/``>``/``&`` as HTML references (Moodle prints category names as HTML, so they show as typed).
- Every LMS accepts exactly the spec's [exact − tol, exact + tol] (:func:`window`). Moodle and GIFT: a
  first 100 % answer at the value at the places asked (:func:`rounded`, what Moodle shows as "the correct
  answer") with the tolerance left after the rounding, then one at the exact value with tol
  (:func:`right_answers`). Canvas: an exact answer at the exact value with margin tol.
- Points: Moodle's Cloze weights are whole numbers (``[0-9]*``): see :func:`worked.lms.moodle.mark_scale`.
  Canvas adds points per item, so an ask worth *P* points over *n* cells gets per-cell points in
  hundredths that add up to *P* exactly (:func:`split_points`).
"""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal
from html import escape

from .. import eq, printers
from ..errors import WorkedError
from ..i18n import current
from ..i18n import tr as _
from ..problem import Problem
from ..render import view


def fmt_num(x) -> str:
    """A plain decimal for an LMS answer field, no exponent: a Decimal as it is, a manifest float as the
    decimal it was written as (12 significant digits)."""
    s = format(dec(x).normalize(), "f")
    return "0" if s == "-0" else s


def dec(x) -> Decimal:
    """A manifest number (a float written with 12 significant digits) as the Decimal it was written as."""
    return Decimal(repr(x)) if isinstance(x, float) else Decimal(x)


def rounded(e: dict, places: int) -> Decimal:
    """A manifest entry's answer: its exact value rounded to *places* by the problem's one rule
    (:class:`worked.problem.Precision`), as the key shows it; what Moodle and Canvas show as the correct answer.
    A manifest written before entries carried ``answer``: its 12-digit value rounded half away from zero."""
    if e.get("answer") is not None:
        return Decimal(e["answer"])
    return dec(e["expected"]).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP)


def window(e: dict) -> tuple[Decimal, Decimal]:
    """(exact, tolerance) of a manifest entry: the spec accepts exactly [exact − tolerance, exact + tolerance],
    the exact value as the manifest writes it (12 significant digits)."""
    return dec(e["expected"]), dec(e["tolerance"])


def right_answers(e: dict, places: int) -> list[tuple[Decimal, Decimal]]:
    """The 100 % answers (value, tolerance) of a Moodle or GIFT numerical answer, in order, whose windows' union
    is exactly the spec's [exact ± tol]: first the rounded value *r* with tolerance tol − |exact − r| (when that
    is not negative; Moodle shows the first 100 % answer as the right one), then the exact value with tol (Moodle
    takes the first answer that matches, and the first lies inside the second). One answer when r is exact."""
    v, t = window(e)
    r = rounded(e, places)
    if r == v:
        return [(r, t)]
    first = [(r, t - abs(v - r))] if t >= abs(v - r) else []
    return first + [(v, t)]


def split_points(points, n: int) -> list[Decimal]:
    """*points* over *n* cells, in hundredths (or finer, when *points* has more places or is smaller than
    n hundredths) that add up to *points* exactly; the first cells get the odd units."""
    p = dec(points)
    unit = Decimal("0.01")
    if p.as_tuple().exponent < -2:
        unit = Decimal(1).scaleb(p.as_tuple().exponent)
    while p / unit < n:
        unit /= 10
    units = int(p / unit)
    base, extra = divmod(units, n)
    return [(base + (1 if k < extra else 0)) * unit for k in range(n)]


_PICTURES = {c: chr(0x2400 + c) for c in range(0x20)} | {0x7F: "\u2421"}


def clean(s: str) -> str:
    """*s* with what XML 1.0 cannot carry made visible: C0 controls (tab, newline and return too) as their
    control pictures, C1 controls, lone surrogates and U+FFFE/U+FFFF as U+FFFD."""
    out = []
    for c in s:
        o = ord(c)
        if o in _PICTURES:
            out.append(_PICTURES[o])
        elif 0x80 <= o <= 0x9F or 0xD800 <= o <= 0xDFFF or o in (0xFFFE, 0xFFFF):
            out.append("\ufffd")
        else:
            out.append(c)
    return "".join(out)


def one_line(s: str) -> str:
    """*s* on one line: runs of whitespace (newlines too) become one space, other controls are :func:`clean`ed."""
    return clean(re.sub(r"[\s\x85\u2028\u2029]+", " ", s).strip())


def literal(s: str) -> str:
    """Text we did not write, as HTML that shows it as typed: escaped, braces as references, out of MathJax's
    reach (``tex2jax_ignore``, MathJax 2's default ignore class, which Moodle's filter keeps)."""
    h = escape(clean(s), quote=False).replace("{", "&#123;").replace("}", "&#125;")
    return f'<span class="tex2jax_ignore">{h}</span>'


def category_part(s: str) -> str:
    """One level of a Moodle category path: one line, a literal ``/`` as ``//`` (Moodle splits on a lone
    ``/``), ``& < >`` as HTML references (Moodle strips tags from category names and prints them as HTML).
    A part that starts or ends with ``/`` is padded with a space, which Moodle trims."""
    s = escape(one_line(s), quote=False).replace("/", "//")
    if s.startswith("/"):
        s = " " + s
    if s.endswith("/"):
        s += " "
    return s or "-"


CATEGORY_MAX = 255   # Moodle's question_categories.name is varchar(255)


def _category_chars(s: str) -> list[str]:
    """*s* (on one line) as :func:`category_part` writes it, one escaped piece per character: ``&`` → ``&amp;``,
    ``/`` → ``//``, so a cut between pieces is never inside an escape."""
    return [escape(c, quote=False).replace("/", "//") for c in s]


def quiz_category(manifest: dict) -> str:
    """The quiz's own category, named with its title and seed (a fresh one for every import of a new seed), in at
    most :data:`CATEGORY_MAX` characters as written (escapes counted, ``//`` as two): a title that would not fit
    is cut on a character boundary, between escapes, and ends with ``…``; the seed is always kept (the spec's
    seed has at most 100 digits: :data:`worked.quiz.MAX_SEED_DIGITS`)."""
    tail = f" (seed {manifest['seed']})"
    title = one_line(manifest["title"])
    name = category_part(title + tail)
    if len(name) <= CATEGORY_MAX:
        return name
    budget = CATEGORY_MAX - len(tail) - 2   # the ellipsis, and a space that pads a title starting with "/"
    keep, n = [], 0
    for piece in _category_chars(title):
        if n + len(piece) > budget:
            break
        keep.append(piece)
        n += len(piece)
    cut = title[:len(keep)].rstrip()
    name = category_part(cut + "…" + tail if cut else tail.lstrip())
    if len(name) > CATEGORY_MAX:
        raise WorkedError(f"manifest: seed: expected a whole number of at most 100 digits (the quiz's Moodle "
                          f"category keeps it, in at most {CATEGORY_MAX} characters), got a longer one")
    return name


def category(manifest: dict, v: dict) -> str:
    """Moodle category path of a variant's questions: ``$course$/top/<title> (seed S)/Variant CODE``."""
    return f"$course$/top/{quiz_category(manifest)}/Variant {v['variant']}"


def idnumber(v: dict, q: dict, e: dict | None = None) -> str:
    """A stable id of a question: variant code, question name (and the cell), the same on every export."""
    base = f"{v['variant']}-{q['name']}"
    return base if e is None else f"{base}-{e['row']}-{e['col']}"


def matrix_latex(m: dict) -> str:
    """A matrix of the page model as LaTeX: ``X = \\begin{bmatrix} … \\end{bmatrix}`` (``X \\approx`` when
    its entries are shown rounded), every piece printed from its tree."""
    rows = [" & ".join(c["tex"] for c in row) for row in m["cells"]]
    return printers.latex(m["head"]) + r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


def matrix_mathml(m: dict) -> str:
    """The same matrix as one ``<math>`` element: the symbol and relation, then a bracketed ``<mtable>`` of
    the printed entries; its alt text is the spoken symbol and relation."""
    table = "".join("<mtr>" + "".join(f"<mtd>{printers.mathml(c['node'])}</mtd>" for c in row) + "</mtr>"
                    for row in m["cells"])
    body = (f"<mrow>{printers.mathml(m['symbol'])}{printers.MathMLPrinter.OPS[m['rel']]}"
            f"<mrow><mo>[</mo><mtable>{table}</mtable><mo>]</mo></mrow></mrow>")
    alt = f"{printers.spoken(m['symbol'])} {'equals' if m['rel'] == eq.EQ else 'is about'} a {m['shape']} matrix"
    return printers.math_element(body, alt=alt)


def variant_label(v: dict) -> str:
    """How an export names a variant: by its code only."""
    return _("Variant {code}", code=v["variant"])


def places(v: dict) -> int:
    return Problem.from_dict(v["problem"], source=f"variant {v['variant']}").decimals


def stem_html(v: dict, math) -> str:
    """The shared part of every question of a variant: its code, the tokens, the options and the given matrices.

    *math(m)* returns the markup of one given matrix *m* of the page model (LaTeX in delimiters, or an
    equation image).
    """
    problem = Problem.from_dict(v["problem"], source=f"variant {v['variant']}")
    page = view.problem_page(problem)
    if v.get("part_title"):     # a part of a quiz that mixes families: its title, then its problem
        return (f"<p><b>{escape(variant_label(v))}</b> — {literal(v['part_title'])}</p>"
                + stem_html({k: x for k, x in v.items() if k != "part_title"}, math).split("</p>", 1)[1])
    toks = ", ".join(literal(t) for t in page.tokens)
    if hasattr(problem, "block_problems"):      # a chain of blocks: the shared inputs, then each block's weights
        blocks = problem.block_problems()
        mats = " ".join(math(m) for m in page.given if "." not in m["key"])
        for k, p in enumerate(blocks, 1):
            mats += "</p><p>" + escape(_("Block {k} ({name}; mask: {mask}): ", k=k, name=problem.block_name(p),
                                           mask=view.mask_text(p))) + " ".join(
                math(m) for m in page.given if m["key"].startswith(f"block{k}."))
        return (f"<p><b>{escape(variant_label(v))}</b></p>"
                "<p>" + _("{count} attention blocks in a chain on the tokens {tokens}: each block's X is the output Z of "
                          "the block before, rounded to {places} places. Scaling: {scaling}. Indices are 1-based (row, "
                          "column). Give decimals to {places} places.", count=len(blocks), tokens=toks,
                          places=page.places, scaling=escape(view.scale_text(blocks[0]))) + "</p>"
                f"<p>{mats}</p>")
    mats = " ".join(math(m) for m in page.given)
    return (f"<p><b>{escape(variant_label(v))}</b></p>"
            "<p>" + _("Self-attention on the tokens {tokens} (one row of X each). Scaling: {scaling}; mask: {mask}. "
                      "Indices are 1-based (row, column). Give decimals to {places} places.", tokens=toks,
                      scaling=escape(view.scale_text(problem)), mask=escape(view.mask_text(problem)),
                      places=page.places) + "</p>"
            f"<p>{mats}</p>")


def asked(q: dict) -> list[dict]:
    """The entries of a question that take an answer (a causal mask's −∞ entries do not)."""
    return [e for e in q["entries"] if e["expected"] is not None]


def is_choice(q: dict) -> bool:
    """Is a manifest question a multiple-choice one (``type = "choice"``: its ``options``)?"""
    return q.get("type") == "choice" and bool(q.get("options"))


def option_feedback(o: dict) -> str:
    """An option's feedback as plain text: "Correct." for the right one, its mistake's words otherwise (in the
    current language: :func:`feedback`)."""
    if o["right"]:
        return _("Correct.")
    return feedback(o.get("feedback") or "")


def correct() -> str:
    """The feedback of a right answer, in the current language."""
    return _("Correct.")


_MISTAKE_ID = re.compile(r" \[([A-Za-z0-9_-]+)\]$")


def feedback(text: str) -> str:
    """A mistake's feedback as the manifest holds it (English, ending with its id: ``… [no-scaling]``), in the current
    language: the mistake's words again, from the registry (the manifest is locale-free)."""
    m = _MISTAKE_ID.search(text)
    if current().is_source or m is None:
        return text
    from ..mistakes import MISTAKES

    mistake = MISTAKES.get(m.group(1))
    return mistake.answer_feedback if mistake is not None and mistake.answer is not None else text


def sections(v: dict) -> list[dict]:
    """A manifest variant as the problems it asks about: itself, or (a quiz with [[parts]]) one dict per part,
    the variant's code and student with the part's ``problem``, ``questions`` and ``part_title``."""
    if isinstance(v.get("parts"), list):
        return [dict(v, problem=p["problem"], questions=p["questions"], part_title=p.get("title") or _("Part {k}", k=k))
                for k, p in enumerate(v["parts"], 1)]
    return [v]


def all_questions(v: dict) -> list[dict]:
    """Every question of a manifest variant, the parts' in order."""
    return [q for s in sections(v) for q in s["questions"]]
