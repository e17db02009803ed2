"""The latex2mathml speed-ups of worked.render.mathconv change no byte of the MathML."""
from __future__ import annotations

from pathlib import Path

import pytest

from worked.problem import load
from worked.render import mathconv
from worked.solver import solve

ROOT = Path(__file__).resolve().parents[1]

# LaTeX the shipped problems do not write, to exercise the other paths of the replaced code
# (comments, dimensions, \verb, \math fonts, \operatorname, environments, escaping, attributes).
EXTRA = [
    r"\frac12 + \frac{a}{b} - \tfrac{1}{2}", r"\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}",
    r"\begin{pmatrix} a \\ b \end{pmatrix}", r"\begin{array}{c|l} x & y \\ \hline z & w \end{array}",
    r"\begin{cases} 1 & x > 0 \\ 0 & \text{else} \end{cases}", r"\begin{align} a &= b \\ c &= d \end{align}",
    r"\mathbb{R}^{n}", r"\mathrm{ab}", r"\mathbf{A} \mathcal{L} \mathit{x}", r"\verb|x_1|", r"x % a comment",
    r"x % comment" "\n" r"+ y", r"\hspace{1em} a \kern 3pt b \mskip 2mu c", r"\operatorname{softmax}(x)",
    r"\operatorname*{arg\,max}_x f", r"\text{a < b & c > d}", r"a<b>c&d", r"\left( \frac{1}{2} \right)",
    r"\left\{ x \middle| y \right.", r"\sum_{j} e^{x_j} \prod_{i=1}^{n} \int_0^1", r"\dot{x} \hat{y} \vec{v} \bar{z}",
    r"\binom{n}{k} \dbinom{a}{b}", r"\sqrt[3]{x}", r"x_1^2 x^2_1 x'' f'(x)", r"\overbrace{x}^{a} \underbrace{y}_{b}",
    r"\color{red}{x} \textcolor{blue}{y}", r"\href{http://a?b&c=\"d\"}{x}", r".5 + 1.25 - 3.", r"\;\,\!\quad\qquad ~",
    r"\mathrm{scores}_{\text{x1},\cdot} \approx \left[0.0000,\ 1.4142\right]", r"{\textstyle\sum_j} A_{ij}",
    r"\lim_{x \to 0} \sin x \log y \det A \gcd", r"\xrightarrow[a]{b} \Rightarrow \leq \neq \infty",
    r"\rule{1em}{2pt} \phantom{x} \hphantom{y} \vphantom{z}", r"\mbox{a $b$ c} \hbox{d}", r"\unicode{x2200}",
    r"\boxed{1} \fbox{2} \cancel{3}", r"\displaystyle \frac{1}{2} \scriptstyle x", r"\cfrac{1}{1 + \cfrac{1}{2}}",
    r"\mathring{a} \mathbin{+} \mathrel{=}", r"\LaTeX \TeX", r"\not= \not\in", r"\sideset{_a}{^b}\sum",
    r"\pmod{3} \bmod 4 \mod 5", r"\bra{x} \ket{y} \braket{x|y}", r"a \\ b", r"\{ \} \| |x|", r"a \cdot b \times c",
]


def _recorded(solutions) -> list[tuple[str, bool]]:
    """Every (formula, display) the worksheet and key of *solutions* convert to MathML, without repeats."""
    from worked.render import html as H

    seen = []
    real = mathconv.mathml

    def record(latex, display=False):
        seen.append((latex, display))
        return ""

    mathconv.mathml = record
    try:
        for sol in solutions:
            for kind in ("worksheet", "answer-key"):
                H.render_html(kind, sol)
    finally:
        mathconv.mathml = real
    return list(dict.fromkeys(seen))


def _sheet_formulas() -> list[tuple[str, bool]]:
    """Every (formula, display) the worksheet and key of each shipped problem convert to MathML."""
    return _recorded(solve(load(str(path)), checks="row") for path in sorted((ROOT / "problems").glob("*.toml"))
                     if not path.name.startswith("quiz"))


def _quiz_formulas(count=6) -> list[tuple[str, bool]]:
    from worked import quiz

    def solutions():
        for name in ("quiz-1.toml", "quiz-2-causal.toml"):
            spec = quiz.load_spec(ROOT / "problems" / name)
            for v in quiz.plan(spec.seed, count=count):
                yield quiz.draw_problem(spec, v)[1]

    return _recorded(solutions())


def test_latex2mathml_speed_up_leaves_mathml_unchanged():
    """latex2mathml gives byte-identical MathML with and without our speed-ups, on many formulas."""
    import latex2mathml.converter as l2m

    items = _sheet_formulas() + _quiz_formulas() + [(s, d) for s in EXTRA for d in (False, True)]
    items += [(s, d) for s in _chains(items) for d in (False, True)]
    mathconv._speed_up_latex2mathml()
    if not mathconv._L2M_ORIGINALS:
        pytest.skip("latex2mathml version not patched")

    def run():
        out = []
        for s, d in items:
            mode = "block" if d else "inline"
            try:   # as mathconv.mathml converts (side by side when it can), without its cache
                got = mathconv._by_relations(s, mode) if mathconv._GRAMMAR else None
                out.append(got if got is not None else l2m.convert(s, display=mode))
            except Exception as exc:  # the same error either way
                out.append(f"{type(exc).__name__}: {exc}")
        return out

    patched = run()
    mathconv._unpatch_latex2mathml()
    try:
        plain = run()
    finally:
        mathconv._speed_up_latex2mathml()
    assert len(items) > 400
    assert patched == plain
    for (s, _), p, q in zip(items, patched, plain):
        assert p == q, s


def test_latex2mathml_tokens_unchanged():
    """The replaced tokenizer yields the same tokens as latex2mathml's, comments kept or skipped."""
    from latex2mathml import tokenizer, walker

    mathconv._speed_up_latex2mathml()
    if not mathconv._L2M_ORIGINALS:
        pytest.skip("latex2mathml version not patched")
    fast = walker.tokenize
    assert fast is not tokenizer.tokenize
    for s in EXTRA + [s for s, _ in _quiz_formulas(2)]:
        for skip in (True, False):
            try:
                want = list(tokenizer.tokenize(s, skip))
            except Exception as exc:
                with pytest.raises(type(exc)):
                    list(fast(s, skip))
                continue
            assert list(fast(s, skip)) == want, s


def _chains(items):
    """Longer chains made of our formulas and the extra LaTeX, joined by the relations we split at."""
    sides = [s for s, _ in items[:200]] + EXTRA
    out = []
    for k in range(0, len(sides) - 2, 3):
        out.append(f"{sides[k]} = {sides[k + 1]} \\approx {sides[k + 2]}")
        out.append(f"{sides[k + 2]} \\approx {sides[k]} = x")
    out += [r"\textstyle\sum_j A_{1,j} = \frac{1}{2} = 1", r"{\textstyle\sum_j} A_{1,j} = 1", r"x = ^2",
            r"x^ = 2", r"\frac{1} = {2}", r"\sqrt = 2", r"\left( a = b \right)", r"{a = b} = c", r"\text{a = b} = c",
            r"a = b % c = d", r"\mathrm{x} = \mathrm{xy} = \mathbb{R}", r"x' = y'' = {}'", r"\sqrt[3]{x} = 2",
            r"a = b = ", r" = a = b", r"a =  b = c", r"\sum_{i=1}^{n} i = \frac{n(n+1)}{2}", r"x \approx \approx y",
            r"\left[1,\ 2\right] \cdot \left[3,\ 4\right] = 11", r"a\ = b", r"\frac 1 2 = \frac12 = 0.5",
            r"e^{\sqrt{2}} \approx 4.1133", r"a_1_2 = 3", r"\rm x = y", r"\color{red} x = y", r"x \over y = z"]
    return out


def test_relation_chains_convert_as_whole_formulas():
    """A formula converted side by side (remembered sides) is byte for byte what latex2mathml gives for the whole."""
    import latex2mathml.converter as l2m

    mathconv._speed_up_latex2mathml()
    if not mathconv._GRAMMAR:
        pytest.skip("latex2mathml version not patched")
    items = _sheet_formulas() + _quiz_formulas()
    chains = [s for s, _ in items] + _chains(items)
    split = 0
    for s in chains:
        for mode in ("inline", "block"):
            for _ in range(2):   # the second time from remembered sides
                got = mathconv._by_relations(s, mode)
                if got is None:
                    continue
                split += 1
                assert got == l2m.convert(s, display=mode), s
    assert split > 1000
    # our quiz formulas go this way
    quiz = [s for s, _ in _quiz_formulas(2) if " = " in s]
    assert sum(mathconv._by_relations(s, "block") is not None for s in quiz) > 0.8 * len(quiz)
