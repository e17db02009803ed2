"""LaTeX → MathML (latex2mathml, for browsers) and LaTeX → SVG (ziamath, for WeasyPrint PDFs).

Both read the same ASCII LaTeX the core writes for every equation. Results are kept per string in a
bounded ``functools.lru_cache`` (a sheet repeats many small formulas; quiz batches repeat more): a
formula drawn again after its entry was dropped is the same string.
"""
from __future__ import annotations

import functools
import re

from ..errors import WorkedError

SVG_SIZE = 16.0          # px size ziamath draws at; the SVG is then sized in em to match the text
_ASCII = re.compile(r"[\x20-\x7e]*")


def _check(latex: str) -> str:
    if not _ASCII.fullmatch(latex):
        raise WorkedError(f"internal: LaTeX for a formula is not ASCII: {latex[:60]!r}")
    return latex


@functools.lru_cache(maxsize=8192)
def mathml(latex: str, display: bool = False) -> str:
    """MathML for *latex* (``display=True`` for a block formula)."""
    import latex2mathml.converter as l2m

    if not _L2M_TRIED:
        _speed_up_latex2mathml()
    mode = "block" if display else "inline"
    _check(latex)
    if _GRAMMAR:
        out = _by_relations(latex, mode)
        if out is not None:
            return out
    return l2m.convert(latex, display=mode)


# ---- a formula converted relation by relation, each side remembered
#
# Our displayed equations are chains ``a = b = c \approx d``, and the sides recur (a row vector, a
# fraction, a label) within a sheet and across the variants of a quiz. latex2mathml turns the top level
# of a formula into one <mrow> whose children are the top-level nodes converted one by one, so a chain
# whose sides are complete on their own converts to the sides' children with the relation between
# them. "Complete" is decided by :func:`_complete` from the tokens, with a small grammar of only what
# our core writes (every other token: the whole formula goes to latex2mathml as before).

_REL = re.compile(r" (=|\\approx) ")
_SIDES: dict = {}          # (side, mode) -> the MathML of its top-level nodes, or None when not complete
_UNITS: dict = {}          # (tokens of a top-level unit, mode) -> its MathML (see _units)
_PLAIN_CHARS = frozenset("+-=,:;()[]|!?./*<>")
_DELIMS = frozenset("()[]|.")
_ENTITY = re.compile(r"&#x[0-9A-Fa-f]+;")   # a letter of a math font, as the tokenizer gives it
_NUMBER = re.compile(r"\d+(?:\.\d+)?|\.\d*")
_ZERO_ARG = (r"\cdot", r"\times", r"\approx", r"\to", r"\infty", r"\sum", r"\prod", r"\ldots", r"\cdots", r"\pm",
             r"\leq", r"\geq", r"\neq", r"\quad", r"\qquad", "\\ ", r"\,", r"\;", r"\!", r"\:")
_GROUP_STYLES = (r"\textstyle", r"\displaystyle")   # they restyle the rest of their group: not at top level
_ARITY = {r"\frac": 2, r"\sqrt": 1, r"\mathrm": 1}
_GRAMMAR: dict = {}        # filled by _speed_up_latex2mathml once latex2mathml is checked to agree


class _Incomplete(Exception):
    pass


def _complete(tokens: list[str]) -> bool:
    """True when *tokens* are whole nodes of our small grammar, so that latex2mathml reads them the same
    way alone as between two relations of a longer formula."""
    return _units(tokens) is not None


def _units(tokens: list[str]) -> list[int] | None:
    """Where the top-level units of *tokens* start (a unit: one node of our small grammar with the
    scripts and primes that follow it), or None when *tokens* are not complete (see :func:`_complete`).

    latex2mathml converts the top level of a formula node by node, a node with its scripts being one
    node of its walk; each unit is complete on its own, so it reads and converts the same alone as
    inside the side (the argument that lets a chain be converted side by side)."""
    zero, styles = _GRAMMAR["zero"], _GRAMMAR["styles"]
    n = len(tokens)
    starts: list[int] = []

    def node(i: int, depth: int, first: bool) -> int:   # index after the node starting at i
        if i >= n:
            raise _Incomplete
        t = tokens[i]
        if t == "{":
            return seq(i + 1, "}", depth + 1)
        if t == r"\left":
            if i + 1 >= n or tokens[i + 1] not in _DELIMS:
                raise _Incomplete
            j = seq(i + 2, r"\right", depth + 1)
            if j >= n or tokens[j] not in _DELIMS:
                raise _Incomplete
            return j + 1
        if t in ("^", "_"):
            if first:
                raise _Incomplete
            return arg(i + 1, depth)
        if t == "'":
            if first:
                raise _Incomplete
            return i + 1
        if t in _ARITY:
            if t == r"\sqrt" and i + 1 < n and tokens[i + 1] == "[":
                raise _Incomplete
            j = i + 1
            for _ in range(_ARITY[t]):
                j = arg(j, depth)
            return j
        if t == r"\text":
            if i + 1 >= n or "{" in tokens[i + 1] or "}" in tokens[i + 1]:
                raise _Incomplete
            return i + 2
        if (t in zero or (len(t) == 1 and (t in _PLAIN_CHARS or t.isascii() and t.isalpha())) or _NUMBER.fullmatch(t)
                or _ENTITY.fullmatch(t)):
            return i + 1
        if t in styles and depth > 0:
            return i + 1
        raise _Incomplete

    def arg(i: int, depth: int) -> int:
        if i >= n or tokens[i] in ("^", "_", "'", "}", r"\right") or tokens[i] in styles:
            raise _Incomplete
        return node(i, depth, True)

    def seq(i: int, end: str | None, depth: int) -> int:   # index after the closing *end*
        first = True
        while i < n:
            if tokens[i] == end:
                return i + 1
            if tokens[i] in ("}", r"\right"):
                raise _Incomplete
            if depth == 0 and tokens[i] not in ("^", "_", "'"):
                starts.append(i)
            i = node(i, depth, first)
            first = False
        if end is not None:
            raise _Incomplete
        return i

    try:
        if n > 0 and seq(0, None, 0) == n:
            return starts
    except _Incomplete:
        pass
    return None


_UNKNOWN = object()
_OPERATOR = re.compile(r" (\+|-|\\cdot) ")


def _pieces(side: str) -> list[str] | None:
    r"""*side* cut before and after its top-level `` + ``, `` - `` and `` \cdot `` (the operators are pieces
    too), or None when there is nothing to cut.

    Cut only where latex2mathml's tokenizer cannot read across the cut: no ``\verb`` or comment in the
    side, and no piece ending in a backslash (``\ `` is one token). A piece whose braces or
    ``\left``/``\right`` do not balance is joined to the next, so the cuts are (mostly) at the top
    level; each piece must then be complete (:func:`_units`) for the cut to be used, and complete
    pieces convert as inside the side (see :func:`_units`)."""
    if "\\verb" in side or "%" in side:
        return None
    parts = _OPERATOR.split(side)
    if len(parts) < 3:
        return None
    out = []
    cur = parts[0]
    for k in range(1, len(parts), 2):
        if (cur and not cur.endswith("\\") and cur.count("{") == cur.count("}")
                and cur.count("\\left") == cur.count("\\right")):
            out += [cur, parts[k]]
            cur = parts[k + 1]
        else:
            cur = f"{cur} {parts[k]} {parts[k + 1]}"
    out.append(cur)
    return out if len(out) >= 3 else None


def _side(side: str, mode: str) -> str | None:
    key = (side, mode)
    out = _SIDES.get(key, _UNKNOWN)
    if out is not _UNKNOWN:
        return out
    out = None
    pieces = _pieces(side)
    if pieces is not None:
        # a sum or product of remembered pieces: no tokenizing (the pieces' tokens are the side's tokens)
        got = [_side(p, mode) for p in pieces]
        if None not in got:
            out = "".join(got)
            if len(_SIDES) >= 16384:
                _SIDES.clear()
            _SIDES[key] = out
            return out
    tokens = list(_GRAMMAR["tokenize"](side))
    starts = _units(tokens)
    if starts is not None:
        # unit by unit, each remembered (numbers, operators, bracketed entries recur across a sheet)
        parts = []
        bounds = starts + [len(tokens)]
        for k in range(len(starts)):
            unit = tuple(tokens[bounds[k]:bounds[k + 1]])
            got = _UNITS.get((unit, mode))
            if got is None:
                got = _by_shape(unit, mode)
                if got is None:
                    got = _convert_tokens(unit, mode)
                if len(_UNITS) >= 16384:
                    _UNITS.clear()
                _UNITS[(unit, mode)] = got
            parts.append(got)
        out = "".join(parts)
    if len(_SIDES) >= 16384:
        _SIDES.clear()
    _SIDES[key] = out
    return out


_PLAIN_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_STAND_IN = "9876543210"                  # a number token put in place of every number of a unit
_STAND_IN_MN = f"<mn>{_STAND_IN}</mn>"
_SHAPES: dict = {}   # (unit with its numbers replaced by the stand-in, mode) -> its MathML cut at each stand-in


def _by_shape(unit: tuple, mode: str) -> str | None:
    r"""A unit's MathML from the remembered conversion of its *shape* (the unit with every number token
    replaced by one stand-in number), the numbers put back in order; None when that cannot be used.

    latex2mathml writes a number token as ``<mn>number</mn>`` whatever its digits, and the nodes of a
    unit without scripts (no ``^`` or ``_``, whose trees reorder their parts) come out in token order:
    a bracketed row or a fraction of numbers has one shape for all its numbers. The shape's MathML must
    hold exactly one plain ``<mn>`` stand-in per number (not so inside ``\text`` or ``\mathrm``,
    which then convert as they are)."""
    numbers = [t for t in unit if _PLAIN_NUMBER.fullmatch(t)]
    if not numbers or "^" in unit or "_" in unit or "\\text" in unit or _STAND_IN in unit:
        return None
    key = (tuple(_STAND_IN if _PLAIN_NUMBER.fullmatch(t) else t for t in unit), mode)
    parts = _SHAPES.get(key)
    if parts is None:
        parts = _convert_tokens(key[0], mode).split(_STAND_IN_MN)
        if len(_SHAPES) >= 4096:
            _SHAPES.clear()
        _SHAPES[key] = parts
    if len(parts) != len(numbers) + 1:
        return None
    out = [parts[0]]
    for number, part in zip(numbers, parts[1:]):
        out += ["<mn>", number, "</mn>", part]
    return "".join(out)


def _convert_tokens(tokens, mode: str) -> str:
    """The MathML of the top-level nodes of complete *tokens* (as Converter.convert_to_element, from tokens)."""
    conv = _GRAMMAR["converter"](display=mode)
    row = _GRAMMAR["element"]("mrow")
    conv._convert_group(iter(_GRAMMAR["walk"](iter(tokens), block=mode == "block", macros=conv.macros)), row)
    return "".join(_GRAMMAR["serialize"](child) for child in row)


def _by_relations(latex: str, mode: str) -> str | None:
    """MathML of a chain of relations from its remembered sides, or None (convert the whole formula)."""
    parts = _REL.split(latex)
    if len(parts) < 3 or "%" in latex:
        return None
    try:
        inner = []
        for part in parts:
            got = _side(part, mode)   # a side, or the relation between two (converted alone: one <mo>)
            if got is None:
                return None
            inner.append(got)
    except Exception:   # latex2mathml's own error, if any, comes from converting the whole formula
        return None
    return ('<math xmlns="http://www.w3.org/1998/Math/MathML" display="%s"><mrow>%s</mrow></math>'
            % (mode, "".join(inner)))


_L2M_TRIED: list = []        # [True] once _speed_up_latex2mathml has run (patched or not)
_L2M_ORIGINALS: list = []    # (owner, name, original) for every attribute _speed_up_latex2mathml replaced
_L2M_VERSIONS = ("3.81.1",)  # the latex2mathml releases whose code the replacements were written against


def _speed_up_latex2mathml() -> None:
    """Make latex2mathml faster on our formulas without changing a byte of its MathML.

    Three hot spots of latex2mathml 3.81, each replaced by code with the same result:

    - ``tokenize`` filtered all 20 groups of every regex match through a lambda; a match of a
      one-group alternative (a letter, a number, a command…) now takes that group directly, and the
      rest of the function is unchanged.
    - every command deep-copied its ``(tag, {attributes})`` template; the templates are checked once
      to be a string and a flat dict of strings, so a copy of the dict is the same deep copy.
    - ``tostring`` + ``unescape``: ElementTree's serializer first walks the tree for namespaces; our
      trees have none (anything unusual goes to ElementTree), so the elements are written directly
      with ElementTree's own escaping, then unescaped as before.

    Then the small grammar of :func:`_complete` is checked against this latex2mathml (each token it
    takes as one node walks as one node), and only then may :func:`mathml` convert chains side by side.

    Only for the releases in ``_L2M_VERSIONS`` (another version runs unpatched). ``tests/test_mathml_speedup.py``
    converts every formula of the shipped problems and many others with and without these changes and
    compares the MathML (:func:`_unpatch_latex2mathml` restores the originals).
    """
    if _L2M_TRIED:
        return
    _L2M_TRIED.append(True)
    try:
        import copy
        import xml.etree.ElementTree as ET

        import latex2mathml
        from latex2mathml import commands, converter, tokenizer, walker

        if getattr(latex2mathml, "__version__", None) not in _L2M_VERSIONS:
            return
        escape_cdata, escape_attrib = ET._escape_cdata, ET._escape_attrib
        unescape = converter.unescape
        pattern, units = tokenizer.PATTERN, tokenizer.UNITS
        original_tokenize = tokenizer.tokenize
        if walker.tokenize is not original_tokenize or converter.copy is not copy:
            return
        VERB, MATH, MATH_NON_FONT = commands.VERB, commands.MATH, commands.MATH_NON_FONT_COMMANDS
        BEGIN_END_OPNAME = (commands.BEGIN, commands.END, commands.OPERATORNAME)
        convert_symbol = tokenizer.convert_symbol
        # the alternatives of PATTERN with one capturing group: match.lastgroup names that group
        single = {"comment", "letter", "dimension", "number", "dot_decimal", "escaped", "begin_end",
                  "operatorname", "command", "char"}
        if not single <= set(pattern.groupindex):
            return
        templates = {}
        for table in (commands.CONVERSION_MAP, commands.DIACRITICS):
            for value in table.values():
                if not (type(value) is tuple and len(value) == 2 and type(value[0]) is str and type(value[1]) is dict
                        and all(type(k) is str and type(v) is str for k, v in value[1].items())):
                    return
                templates[id(value)] = value
    except Exception:  # an unexpected latex2mathml: leave it as it is
        return

    def tokenize(latex_string: str, skip_comments: bool = True):
        # as latex2mathml.tokenizer.tokenize (3.81.1); only the computation of `tokens` differs
        for match in pattern.finditer(latex_string):
            name = match.lastgroup
            if name in single:
                tokens = (match.group(name),)
            else:
                tokens = tuple(x for x in match.groups() if x is not None)
            if tokens[0].startswith(VERB):
                yield VERB
                yield tokens[2]  # verb_content
                continue
            if tokens[0].startswith(MATH) and tokens[0] not in MATH_NON_FONT:
                full_math = "".join(tokens)
                symbol = convert_symbol(full_math)
                if symbol:
                    yield f"&#x{symbol};"
                    continue
            for captured in tokens:
                if skip_comments and captured.startswith("%"):
                    break
                if captured.endswith(units) and captured[0:1].isdigit():
                    yield captured.replace(" ", "")
                    continue
                if captured.startswith(BEGIN_END_OPNAME):
                    yield "".join(captured.split(" "))
                    continue
                yield captured

    class _Copy:
        """Stands in for the ``copy`` module inside latex2mathml.converter (which only calls deepcopy)."""

        def __getattr__(self, name):
            return getattr(copy, name)

        @staticmethod
        def deepcopy(x, memo=None):
            if memo is None and templates.get(id(x)) is x:
                return (x[0], dict(x[1]))
            return copy.deepcopy(x, memo)

    class _Unusual(Exception):
        pass

    def element_xml(el) -> str:
        # as ElementTree.tostring(el, encoding="unicode") for an element without namespaces (else _Unusual)
        out = []
        write = out.append

        def walk(el):
            tag = el.tag
            if type(tag) is not str or tag[:1] == "{":
                raise _Unusual
            write("<" + tag)
            for k, v in el.items():
                if type(k) is not str or k[:1] == "{" or type(v) is not str:
                    raise _Unusual
                write(' %s="%s"' % (k, escape_attrib(v)))
            text = el.text
            if text is not None and type(text) is not str:
                raise _Unusual
            if text or len(el):
                write(">")
                if text:
                    write(escape_cdata(text))
                for child in el:
                    walk(child)
                write("</" + tag + ">")
            else:
                write(" />")
            tail = el.tail
            if tail:
                if type(tail) is not str:
                    raise _Unusual
                write(escape_cdata(tail))

        walk(el)
        return "".join(out)

    def serialize(tree) -> str:
        # as unescape(ElementTree.tostring(tree, encoding="unicode")) for a tree without namespaces
        try:
            return unescape(element_xml(tree))
        except _Unusual:
            return plain_convert(tree)

    plain_convert = converter.Converter.__dict__["_convert"].__func__
    patches = [(walker, "tokenize", tokenize), (converter, "copy", _Copy()),
               (converter.Converter, "_convert", staticmethod(serialize))]
    for owner, name, new in patches:
        _L2M_ORIGINALS.append((owner, name, owner.__dict__[name]))
        setattr(owner, name, new)

    # the grammar of _complete, checked against latex2mathml: each token without arguments is one node
    # that leaves its neighbours alone, the commands with arguments take that many, and a group style
    # is one node of the walk
    _GRAMMAR.clear()
    Node = walker.Node
    try:
        stateful = set(commands.GLOBAL_FONTS) | set(commands.MSTYLE_SIZES) | set(commands.STYLES)
        zero = {t for t in _ZERO_ARG
                if walker.walk(f"x {t} y") == [Node("x"), Node(t), Node("y")] and t not in stateful}
        ok = (converter.Element is ET.Element and callable(getattr(converter.Converter, "_convert_group", None))
              and set(_GROUP_STYLES) <= set(commands.STYLES)
              and all(walker.walk(f"x {c} y") == [Node("x"), Node(c), Node("y")] and c not in stateful
                      for c in _PLAIN_CHARS)
              and all(walker.walk(f"x {t} y") == [Node("x"), Node(t), Node("y")] for t in _GROUP_STYLES)
              and walker.walk(r"\frac a b c") == [Node(r"\frac", (Node("a"), Node("b"))), Node("c")]
              and walker.walk(r"\sqrt a b") == [Node(r"\sqrt", (Node("a"),)), Node("b")]
              and walker.walk(r"\mathrm{ab} c") == [Node(r"\mathrm", (Node(commands.BRACES, (Node("a"), Node("b"))),)),
                                                     Node("c")]
              and walker.walk(r"\mathrm{a} b") == [Node("&#x00061;"), Node("b")]
              and walker.walk(r"\text{a b} c") == [Node(r"\text", text="a b"), Node("c")])
    except Exception:
        ok = False
    if ok:   # a side's elements, as they read inside the whole formula (unescaped, as the whole would be)
        _GRAMMAR.update(zero=frozenset(zero), styles=frozenset(_GROUP_STYLES), tokenize=tokenize,
                        converter=converter.Converter, serialize=lambda el: unescape(element_xml(el)),
                        walk=walker._walk, element=ET.Element)


def _unpatch_latex2mathml() -> None:
    """Restore latex2mathml as it was before :func:`_speed_up_latex2mathml` (for the byte-identity test)."""
    while _L2M_ORIGINALS:
        owner, name, original = _L2M_ORIGINALS.pop()
        setattr(owner, name, original)
    _GRAMMAR.clear()
    _SIDES.clear()
    _UNITS.clear()
    _SHAPES.clear()
    _L2M_TRIED.clear()


_VIEWBOX = re.compile(r'^<svg xmlns="http://www.w3.org/2000/svg" width="([\d.]+)" height="([\d.]+)" '
                      r'viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"')


@functools.lru_cache(maxsize=8192)
def svg_img(latex: str, display: bool = False) -> str:
    """An ``<img>`` with the formula as a ``data:`` SVG, sized in em and aligned on the text baseline.

    An image rather than inline ``<svg>``: WeasyPrint then parses each formula once, apart from
    the HTML, instead of styling thousands of glyph nodes as part of the page.
    """
    import base64

    import ziamath as zm

    try:
        out = zm.Latex(_check(latex), size=SVG_SIZE, inline=not display).svg()
    except WorkedError:
        raise
    except Exception as exc:  # ziamath failing on our own LaTeX is a bug, not a user error
        raise WorkedError(f"internal: could not draw formula {latex[:60]!r}: {exc}") from None
    m = _VIEWBOX.match(out)
    if not m:
        raise WorkedError(f"internal: unexpected SVG from ziamath for {latex[:60]!r}")
    w, h = float(m.group(1)), float(m.group(2))
    y0, vh = float(m.group(4)), float(m.group(6))
    descent = (y0 + vh) / SVG_SIZE
    flat = flatten_svg(out)
    url = "data:image/svg+xml;base64," + base64.b64encode(flat.encode("utf-8")).decode("ascii")
    return (f'<img class="zm" alt="" src="{url}" '
            f'style="width:{w / SVG_SIZE:.3f}em;height:{h / SVG_SIZE:.3f}em;vertical-align:{-descent:.3f}em">')


_SYMBOL = re.compile(r'<symbol id="([^"]+)" viewBox="([-\d.]+) ([-\d.]+) ([-\d.]+) ([-\d.]+)"'
                     r'(?: */>|>(.*?)</symbol>)', re.S)   # an empty glyph (a space) is self-closed
_USE = re.compile(r'<use href="#([^"]+)" x="([-\d.]+)" y="([-\d.]+)" width="([-\d.]+)" height="([-\d.]+)"'
                  r'( fill="[^"]*")? */>')


def flatten_svg(svg: str) -> str:
    """Replace ziamath's ``<symbol>``/``<use>`` glyphs by transformed ``<path>`` elements.

    Same drawing (the symbol's viewBox mapped into the use's box with the default
    ``xMidYMid meet``) in plain SVG, with a third of the nodes for WeasyPrint to walk.
    """
    symbols = {}
    for m in _SYMBOL.finditer(svg):
        symbols[m.group(1)] = (tuple(float(m.group(k)) for k in range(2, 6)), m.group(6) or "")
    if not symbols:
        return svg

    def use(m):
        sym = symbols.get(m.group(1))
        if sym is None:
            return m.group(0)
        (vx, vy, vw, vh), inner = sym
        x, y, w, h = (float(m.group(k)) for k in range(2, 6))
        if vw <= 0 or vh <= 0 or not inner:
            return ""
        sc = min(w / vw, h / vh)
        tx = x + (w - vw * sc) / 2 - vx * sc
        ty = y + (h - vh * sc) / 2 - vy * sc
        fill = m.group(6) or ""
        tr = f' transform="matrix({sc:.5g} 0 0 {sc:.5g} {tx:.4f} {ty:.4f})"{fill}'
        return re.sub(r"<path ", "<path" + tr + " ", inner)

    out = _SYMBOL.sub("", svg)
    return _USE.sub(use, out)
