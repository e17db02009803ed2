"""Part 9 ("cats chase mice"): every intermediate matrix matches the page, exactly where the page is
exact and to 2 decimals where it rounds; and the page's one arithmetic slip is not repeated."""
import json

import sympy as sp

import worked
from decimal import Decimal

from worked import eq, printers
from worked.audit import audit, audit_rel

from conftest import PROBLEMS


def _exact(m):
    return [[m.exact[i][j] for j in range(m.shape[1])] for i in range(m.shape[0])]


def _dec(m, places=2):
    return [["−∞" if m.is_neg_inf(i, j) else printers.text(m.fixed(i, j, places)) for j in range(m.shape[1])] for i in range(m.shape[0])]


def test_part9_matches_page():
    """Q, K, V and the scores are exact integers as printed; scaled, A and Z match to 2 decimals."""
    sol = worked.solve(worked.load())
    m = sol.matrices()
    assert _exact(m["Q"]) == [[2, 0], [0, 3], [1, 1]]
    assert _exact(m["K"]) == [[1, 1], [2, 1], [1, 1]]
    assert _exact(m["V"]) == [[2, 1], [0, 2], [1, 1]]
    assert _exact(m["scores"]) == [[2, 4, 2], [3, 3, 3], [2, 3, 2]]
    assert _dec(m["scaled"]) == [["1.41", "2.83", "1.41"], ["2.12", "2.12", "2.12"], ["1.41", "2.12", "1.41"]]
    assert _dec(m["weights"]) == [["0.16", "0.67", "0.16"], ["0.33", "0.33", "0.33"], ["0.25", "0.50", "0.25"]]
    assert _dec(m["Z"]) == [["0.49", "1.67"], ["1.00", "1.33"], ["0.74", "1.50"]]


def test_part9_exact_forms():
    """Scaling and softmax give the exact forms a teacher writes: 4/√2 = 2√2, e^{√2}/(2 + e^{√2}), 1/3."""
    sol = worked.solve(worked.load())
    m = sol.matrices()
    r2 = sp.sqrt(2)
    assert m["scaled"].exact[0][1] == 2 * r2
    assert sp.simplify(m["weights"].exact[0][1] - sp.exp(r2) / (2 + sp.exp(r2))) == 0
    assert m["weights"].exact[1][0] == sp.Rational(1, 3)
    texts = [printers.text(ln.eq) for s in sol.steps for ln in s.lines]
    assert "scaled[cats, chase] = 4/√2 = 2√2 ≈ 2.8284" in texts
    assert any(t.startswith("A[cats, chase] = ") and "e^(√2)/(2 + e^(√2))" in t for t in texts)
    assert "Q[cats, 1] = x_cats·W_Q[:, 1] = [1, 0, 1, 0]·[1, 0, 1, 0] = 1·1 + 0·0 + 1·1 + 0·0 = 2" in texts


def _d(s):
    return eq.dec(Decimal(s))


def _vec(*xs):
    return eq.Vec(tuple(x if isinstance(x, eq.Node) else eq.num(x) for x in xs))


def test_part9_z_line_holds_by_hand():
    """z_cats is shown from weights carried to 4 places, with ≈ where rounding enters (the page's 0.49 slip)."""
    sol = worked.solve(worked.load())
    z = next(s for s in sol.steps if s.id == "Z")
    line = next(ln for ln in z.lines if printers.text(ln.eq).startswith("z_cats ≈"))
    assert printers.text(line.eq) == "z_cats ≈ 0.1636·[2, 1] + 0.6728·[0, 2] + 0.1636·[1, 1] = [0.4908, 1.6728] ≈ [0.49, 1.67]"
    assert audit_rel(line.eq) == []
    # the page's own line fails the auditor: with the weights as displayed the sum is [0.48, 1.66], not "="
    terms = eq.Add((eq.Mul((_d("0.16"), _vec(2, 1))), eq.Mul((_d("0.67"), _vec(0, 2))), eq.Mul((_d("0.16"), _vec(1, 1)))))
    page = eq.Rel((eq.Sym("z", sub="cats"), terms, _vec(_d("0.49"), _d("1.67"))), (eq.EQ, eq.EQ))
    assert audit_rel(page)
    # and a sum shown as exact must be exact
    wrong = eq.Rel((terms, _vec(_d("0.49"), _d("1.66"))), (eq.EQ,))
    assert audit_rel(wrong)


def test_auditor_passes_on_every_shipped_problem():
    """Every displayed line of every shipped problem holds, at every --checks level."""
    for path in sorted(PROBLEMS.glob("*.toml")):
        if path.name.startswith("quiz"):
            continue
        try:
            problem = worked.Problem.from_file(path)
        except worked.ProblemError:
            continue  # not a problem file (e.g. a quiz spec)
        for checks in ("one", "row", "all"):
            sol = worked.solve(problem, checks=checks)
            assert audit(sol) == [], path


def test_checks_levels_show_more_expansions():
    """--checks one shows one expansion per product, row a full row, all every entry."""
    p = worked.load()
    counts = {}
    for checks in ("one", "row", "all"):
        sol = worked.solve(p, checks=checks)
        counts[checks] = sum(len(s.lines) for s in sol.steps if s.id in ("Q", "K", "V", "scores"))
    assert counts == {"one": 4, "row": 2 + 2 + 2 + 3, "all": 6 + 6 + 6 + 9}


def test_builtin_example_is_the_shipped_problem_file():
    """The built-in example and problems/cats-chase-mice.toml are the same problem."""
    assert worked.load() == worked.Problem.from_file(PROBLEMS / "cats-chase-mice.toml")


def test_json_format(cli):
    """`worked solve --format json` has the documented keys; masked scores are "-oo" and null."""
    code, out, err = cli("solve", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert set(d) >= {"title", "tokens", "heads", "Z", "steps"}
    h = d["heads"][0]
    assert set(h) == {"Q", "K", "V", "scores", "scaled", "weights", "Z"}
    assert h["scores"]["exact"][0] == ["2", "4", "2"]
    assert h["scaled"]["exact"][0][1] == "2*sqrt(2)"
    assert h["weights"]["shape"] == [3, 3]
    assert abs(d["Z"]["value"][0][0] - 0.4907) < 1e-3
    for step in d["steps"]:
        assert set(step) >= {"title", "text", "latex"}
        assert len(step["text"]) == len(step["latex"])
        for latex in step["latex"]:
            assert latex.isascii(), latex
    code, out, err = cli("solve", str(PROBLEMS / "causal-mask.toml"), "--format", "json")
    d = json.loads(out)
    assert d["heads"][0]["scores"]["exact"][0][1] == "-oo"
    assert d["heads"][0]["scores"]["value"][0][1] is None
    assert d["heads"][0]["weights"]["exact"][0][1] == "0"


def test_text_and_markdown_output(cli):
    """Text output labels matrices with tokens and uses √ · ≈ Kᵀ; Markdown has $$ LaTeX and tables."""
    code, out, _ = cli("solve")
    assert code == 0
    assert "Q·Kᵀ" in out and "2√2 ≈ 2.8284" in out and "cats" in out
    code, out, _ = cli("solve", "--format", "markdown")
    assert code == 0 and "$$" in out and "| **cats** |" in out


def test_version_and_help(cli):
    """`worked --version`, `worked --help` and help on every subcommand work."""
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("worked ")
    code, out, _ = cli("--help")
    assert code == 0 and "solve" in out
    from worked.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        code, out, err = cli(name, "--help")
        assert code == 0 and "usage:" in out, (name, err)
