"""The package's layout shows its architecture (issue 11, item 7):

- every module imports on its own, first, in a fresh interpreter (no circular imports, whatever the order);
- the import graph, imports inside functions counted, has no cycle (an import moved into a function to dodge a
  cycle is still one);
- no module reads another module's private (underscore) names;
- dependencies point one way: the core (problem → solution → printers) imports no consumer of it;
- every library the package imports is one it declares.

The scans read the source with :mod:`ast`, so imports inside functions count as well.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "worked"

CORE = ("eq", "printers", "numfmt", "exact", "problem", "attention", "mistakes", "solver", "audit", "model", "errors",
        "stages", "lines", "steps")
CONSUMERS = ("render", "writers", "server", "lms", "quiz", "check", "grade", "cli", "generate", "exporters")

# Violations in files other helpers are editing while this test was written (issue 11). Each entry is
# (importing module, what it reads). The lead empties these lists after merging; a fixed entry that
# is still listed fails test_allow_lists_hold_only_live_violations, so the lists only shrink.
PRIVATE_NAMES_TO_FIX: set[tuple[str, str]] = set()
# Kept on purpose: a Solution's three conveniences of the Python API (README: "Python API") import their writer
# inside the method, at call time (as pandas' DataFrame.plot imports matplotlib); no module-level import of the
# core names a consumer, the model prints nothing itself, and these writers import nothing that imports the
# model (test_the_import_graph_has_no_cycle holds them to it).
CORE_IMPORTS_OF_CONSUMERS_TO_FIX: set[tuple[str, str]] = {
    ("worked.model", "worked.render"),          # Solution._repr_html_ renders the key (Jupyter, Colab)
    ("worked.model", "worked.writers.text"),    # Solution.text() writes the text
    ("worked.model", "worked.writers.json"),    # Solution.to_dict() writes the JSON form
}
# Libraries imported directly but only installed as another dependency's dependency (sympy → mpmath,
# jinja2 → markupsafe, weasyprint → fonttools): pyproject.toml should name them.
UNDECLARED_TO_FIX: set[str] = set()


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (packages by their ``__init__``)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _resolve(module: str, node: ast.ImportFrom) -> str:
    """The absolute module a ``from … import`` names."""
    if not node.level:
        return node.module or ""
    base = module.split(".") if _is_package(module) else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str):
    """(line, imported module, name or None) for every import in *module*; a name that is itself a
    module of the package (``from . import view``) is given as that module with name None."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name, None
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for a in node.names:
                sub = f"{target}.{a.name}"
                if sub in MODULES:
                    yield node.lineno, sub, None
                else:
                    yield node.lineno, target, a.name


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _module_aliases(module: str, tree: ast.AST) -> dict[str, str]:
    """Local names bound to modules of the package: ``from .. import numfmt as F`` → {"F": "worked.numfmt"};
    ``import worked.render`` → {"worked": "worked"}."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "worked":
                    if a.asname:
                        out[a.asname] = a.name
                    else:
                        out["worked"] = "worked"
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            for a in node.names:
                if f"{target}.{a.name}" in MODULES:
                    out[a.asname or a.name] = f"{target}.{a.name}"
    return out


def _dotted(node: ast.AST) -> list[str] | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id] + parts[::-1]
    return None


def private_reads() -> set[tuple[str, str]]:
    """(module, other module's private name) for ``from X import _name`` and ``X._name`` where X is another
    module of the package. A module's own names and dunder names are fine."""
    found = set()
    for module, path in MODULES.items():
        for _, target, name in _imports(module):
            if name and _private(name) and target.startswith("worked") and target != module:
                found.add((module, f"{target}.{name}"))
        tree = ast.parse(path.read_text(encoding="utf-8"))
        aliases = _module_aliases(module, tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain = _dotted(node)
            if not chain or chain[0] not in aliases:
                continue
            mod = aliases[chain[0]]
            for part in chain[1:]:                    # walk down submodules: worked.render.sheet._x
                if _private(part):
                    if mod != module:
                        found.add((module, f"{mod}.{part}"))
                    break
                if f"{mod}.{part}" not in MODULES:
                    break
                mod = f"{mod}.{part}"
    return found


def import_graph() -> dict[str, set[str]]:
    """Module → the package's modules it imports, anywhere in its source (inside functions too)."""
    return {m: {t for _, t, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of *graph*: each strongly connected component of more than one module, as one cycle through it
    (``[a, b, …, a]``), found without recursion (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    comps = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(set(comp))
    return [_cycle_in(graph, comp) for comp in comps]


def _cycle_in(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """One cycle through the strongly connected *comp*: from its first module, a shortest way back to it."""
    start = min(comp)
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & comp):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return path[::-1] + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    raise AssertionError(f"not strongly connected: {sorted(comp)}")


def _layer(module: str, names) -> bool:
    parts = module.split(".")
    return len(parts) > 1 and parts[1] in names


def core_imports_of_consumers() -> set[tuple[str, str]]:
    found = set()
    for module in MODULES:
        if not _layer(module, CORE):
            continue
        for _, target, _name in _imports(module):
            if target.startswith("worked.") and _layer(target, CONSUMERS):
                found.add((module, target))
    return found


# ---------------------------------------------------------------------------------------------- the tests

IMPORTABLE = [m for m in MODULES if m != "worked.__main__"]   # __main__ runs the command line when imported


def test_every_module_imports_first_in_a_fresh_interpreter():
    """``python -c "import worked.x"`` works for every module: none needs another to be imported first,
    so no import cycle is hidden by the order the package happens to use."""

    def run(name):
        proc = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True, text=True,
                              cwd=ROOT, timeout=300)
        return name, proc.returncode, proc.stderr.strip().splitlines()[-1:] if proc.returncode else []

    with ThreadPoolExecutor(max_workers=2) as pool:
        failed = [(n, err) for n, code, err in pool.map(run, IMPORTABLE) if code]
    assert len(IMPORTABLE) > 30
    assert not failed, failed


def test_the_import_graph_has_no_cycle():
    """No module imports, even inside a function, a module that imports it back, directly or through others: each
    layer (core, page model, writers, server) uses the ones below it only. A function-level import stays only
    to put off a heavy library (sympy's printers, WeasyPrint, Typst) until it is needed, never to dodge a cycle."""
    cycles = import_cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c) for c in cycles)


def test_the_cycle_finder_finds_cycles():
    """The cycle finder sees a cycle through a function-level import, and a longer one (a check that cannot fail
    checks nothing)."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"f"}, "f": {"e"}, "g": {"a"}}
    found = import_cycles(graph)
    assert sorted(found) == [["a", "b", "c", "a"], ["e", "f", "e"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_the_graph_counts_imports_in_functions(tmp_path, monkeypatch):
    fake = tmp_path / "fake.py"
    fake.write_text("def f():\n    from .render import view\n", encoding="utf-8")
    monkeypatch.setitem(MODULES, "worked.numfmt", fake)
    assert "worked.render.view" in import_graph()["worked.numfmt"]


#: the core modules that know no format: they hold and compute trees and numbers, and each consumer prints them
FORMAT_FREE = ("worked.model", "worked.numfmt", "worked.solver")


def printer_imports() -> set[tuple[str, str]]:
    """(module, printer module) for every import of :mod:`worked.printers` (or one of its modules, or sympy's
    printers) by a module of :data:`FORMAT_FREE`, inside functions too."""
    return {(m, t) for m in FORMAT_FREE for _, t, _ in _imports(m)
            if t == "worked.printers" or t.startswith(("worked.printers.", "sympy.printing"))}


def test_the_model_numfmt_and_the_solver_import_no_printer():
    """A new format is a printer and a writer: the model, the number formatting and the solver import no printer
    (the model's lines, titles and symbols are trees; numfmt writes only the plain digits the printers use)."""
    found = printer_imports()
    assert not found, "printers imported by format-free modules: " + "; ".join(f"{m} imports {t}" for m, t in sorted(found))


def test_no_module_reads_another_module_s_private_names():
    found = private_reads()
    new = sorted(found - PRIVATE_NAMES_TO_FIX)
    assert not new, "modules reading another module's private names (make the name public or move the code): " \
                    + "; ".join(f"{m} reads {n}" for m, n in new)


def test_the_core_imports_no_consumer():
    """problem → solution (steps as trees) → printers are the core; writers, the page model, the server,
    LMS exports, quiz, check and grade consume it. Dependencies point from consumers to the core only."""
    found = core_imports_of_consumers()
    new = sorted(found - CORE_IMPORTS_OF_CONSUMERS_TO_FIX)
    assert not new, "core modules importing consumers: " + "; ".join(f"{m} imports {t}" for m, t in new)


def test_allow_lists_hold_only_live_violations():
    """An entry of the lists above that is fixed must leave the list (the lists only shrink)."""
    assert PRIVATE_NAMES_TO_FIX <= private_reads(), sorted(PRIVATE_NAMES_TO_FIX - private_reads())
    assert CORE_IMPORTS_OF_CONSUMERS_TO_FIX <= core_imports_of_consumers(), sorted(
        CORE_IMPORTS_OF_CONSUMERS_TO_FIX - core_imports_of_consumers())


def _declared() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    proj = data["project"]
    reqs = list(proj.get("dependencies", []))
    for extra in proj.get("optional-dependencies", {}).values():
        reqs += extra
    return {re.split(r"[\s<>=!~;\[(]", r, maxsplit=1)[0].lower().replace("_", "-") for r in reqs}


def test_every_library_imported_is_declared():
    """Each third-party module the package imports belongs to a distribution named in pyproject.toml
    (so a dropped dependency such as latex2mathml cannot still be imported somewhere)."""
    dists = metadata.packages_distributions()
    declared = _declared()
    missing = set()
    for module in MODULES:
        for line, target, _ in _imports(module):
            top = target.split(".")[0]
            if not top or top == "worked" or top in sys.stdlib_module_names:
                continue
            owners = {d.lower().replace("_", "-") for d in dists.get(top, [])}
            if not owners & declared and top not in UNDECLARED_TO_FIX:
                missing.add((module, line, top, tuple(sorted(owners))))
    assert not missing, sorted(missing)
    assert not any(name.lower() in declared for name in UNDECLARED_TO_FIX), "declared now: empty UNDECLARED_TO_FIX"


@pytest.mark.parametrize("scan", [private_reads, core_imports_of_consumers, printer_imports])
def test_the_scans_see_what_they_look_for(scan, tmp_path, monkeypatch):
    """The scanners find a planted violation (a check that cannot fail checks nothing)."""
    plant = {
        private_reads: ("worked.lms.gift", "from ..render.view import _cell\nfrom .. import numfmt as F\nF._x\n",
                        {("worked.lms.gift", "worked.render.view._cell"), ("worked.lms.gift", "worked.numfmt._x")}),
        core_imports_of_consumers: ("worked.numfmt", "def f():\n    from .render import view\n",
                                    {("worked.numfmt", "worked.render.view")}),
        printer_imports: ("worked.model", "from . import printers\ndef f():\n    from .printers.base import Printer\n",
                          {("worked.model", "worked.printers"), ("worked.model", "worked.printers.base")}),
    }[scan]
    module, source, expected = plant
    fake = tmp_path / "fake.py"
    fake.write_text(source, encoding="utf-8")
    monkeypatch.setitem(MODULES, module, fake)
    assert expected <= scan()


def test_every_folder_that_ships_is_a_package():
    """pyproject.toml lists every folder of worked/ as a package (worked/templates is the top-level templates/
    folder, linked) and each of its files as a module or as package data: a non-editable `pip install .`
    installs them all, and setuptools has no folder to warn about."""
    import fnmatch
    import os

    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed, data = set(cfg["packages"]), cfg["package-data"]
    assert (PKG / "templates").resolve() == ROOT / "templates"
    seen = set()
    for here, dirs, files in os.walk(PKG, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        parts = Path(here).relative_to(ROOT).parts
        name = ".".join(parts)
        seen.add(name)
        # a folder of data only (the catalogues: worked/locale/de/LC_MESSAGES) is its parent package's data, by a
        # glob with its path (*/LC_MESSAGES/*.mo); any other folder is a package
        owner = next((k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in listed), None)
        assert owner == len(parts) or (owner and not any(f.endswith(".py") for f in files)), \
            f"{name}: a folder that is not in pyproject.toml's packages"
        pkg, sub = ".".join(parts[:owner]), "/".join(parts[owner:])
        for f in files:
            if not f.endswith((".py", ".pyc")):
                rel = f"{sub}/{f}" if sub else f
                assert any(fnmatch.fnmatch(rel, g) for g in data.get(pkg, [])), f"{here}/{f}: in no package-data"
    assert listed <= seen, listed - seen
    assert {"worked.templates.sheet", "worked.render.assets.fonts", "worked.data"} <= seen



# ------------------------------------------------------------------ stage ids live in the stage definitions only

#: the modules that declare the stages (their ids, computations, grids, words) and the stages' mistakes
#: and their worked steps (worked/steps/: titles, lines, NumPy code)
STAGE_DEFINITIONS = ("worked/stages.py", "worked/slips.py", "worked/steps/attention.py", "worked/steps/heads.py",
                     "worked/steps/train.py", "worked/steps/block.py", "worked/steps/block_train.py")
#: string literals equal to a stage id that are not one: (file, literal) → what the literal is
STAGE_IDS_ALLOWED = {
    ("worked/problem.py", "loss"): "the [train] table's field naming the loss function (loss = \"mse\")",
    ("worked/problem.py", "scaled"): "LIMITS' key of the largest |scaled score| (solver.py reads it by that key)",
    ("worked/attention.py", "scaled"): "LIMITS' key of the largest |scaled score|, checked after the update",
    ("worked/solver.py", "scaled"): "LIMITS' key of the largest |scaled score|, checked before any e^x",
    ("worked/writers/notebook.py", "weights"): "the id of the notebook cell of the weight matrices W_Q, W_K, W_V",
    ("worked/grade.py", "scores"): "the class report template's points of a student per question",
    ("worked/generate.py", "Q"): "the search's cells of W_Q (which weight matrix a drawn entry belongs to)",
    ("worked/generate.py", "K"): "the search's cells of W_K",
    ("worked/generate.py", "loss"): "the [train] table's field naming the loss function (loss = \"mse\")",
    ("worked/server/warm.py", "Q"): "the answers of the server's warm-up check (an example request)",
    ("worked/render/view.py", "loss"): "the page model's key of the loss formula (the templates' doc.training.loss)",
    ("worked/cli.py", "H"): "the metavar of --heads (a number of heads), not the block's output H",
}
#: calls whose string argument is math notation in an equation tree (eq.Sym("Q")), not a stage id
MATH_CALLS = {"Sym", "matrix_sym", "head_sym"}


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def stage_id_literals(modules: dict | None = None) -> set[tuple[str, str, int]]:
    """(file, literal, line) for every string constant equal to a stage id of :mod:`worked.stages` (of every
    architecture) outside the stage definitions: docstrings and math symbols (:data:`MATH_CALLS`) do not count."""
    from worked import stages

    ids = {s.id for s in stages.every()}
    found = set()
    for path in (modules or MODULES).values():
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        if rel in STAGE_DEFINITIONS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)) in MATH_CALLS:
                    skip.update(id(a) for a in node.args)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value in ids and id(node) not in skip:
                found.add((rel, node.value, node.lineno))
    return found


def test_stage_ids_live_in_the_stage_definitions_only():
    """The solver, checker, grader, quiz, LMS exports, page model, server and notebook iterate the stages and
    hold no code for any particular one: a stage id ("scores", "weights", "dS" …) written as a string outside
    the stage definitions is a consumer that knows a stage by name (issue 26). Adding a stage is then its
    declaration and its words, no edit in the consumers."""
    found = {(f, lit, line) for f, lit, line in stage_id_literals() if (f, lit) not in STAGE_IDS_ALLOWED}
    assert not found, "stage ids named outside the stage definitions (read what the stage declares instead): " \
        + "; ".join(f"{f}:{line} {lit!r}" for f, lit, line in sorted(found))


def test_the_stage_id_allow_list_holds_only_live_entries():
    """An allowed literal that is gone must leave the list, and the files being moved must still exist."""
    live = {(f, lit) for f, lit, _ in stage_id_literals()}
    assert set(STAGE_IDS_ALLOWED) <= live, sorted(set(STAGE_IDS_ALLOWED) - live)
    assert all((ROOT / f).exists() for f in STAGE_DEFINITIONS)


def test_the_stage_id_scan_sees_what_it_looks_for(tmp_path):
    """The scan finds a planted stage id, and skips docstrings and math symbols."""
    fake = tmp_path / "fake.py"
    fake.write_text('"""The scores."""\nfrom . import eq\n\n\ndef f(run):\n    """weights"""\n'
                    '    return run["weights"], eq.Sym("Q"), eq.matrix_sym("dS", 2), {"scaled": 1}\n', encoding="utf-8")
    assert {(lit, line) for _, lit, line in stage_id_literals({"worked.fake": fake})} == {("weights", 7), ("scaled", 7)}


def test_every_mistake_is_declared_by_its_stage():
    """Each mistake of :mod:`worked.slips` is listed by one stage of an architecture (its owner, the matrix where it
    first shows: a block's first layer norm is H1 in post-LN, N1 in pre-LN), and the registry holds them all, in
    the order of ``slips.ALL``, each with the stage of the first architecture that declares it."""
    from worked import slips, stages
    from worked.mistakes import MISTAKES

    first = {}
    for arch in stages.ARCHS.values():
        owners = {}
        for s in stages.every(arch):
            for m in s.mistakes:
                owners.setdefault(m.id, set()).add(s.id)
        assert all(len(o) == 1 for o in owners.values()), (arch.name, owners)
        for mid, o in owners.items():
            first.setdefault(mid, o)
    assert list(MISTAKES) == [m.id for m in slips.ALL]
    assert all(MISTAKES[m].stage in first[m] for m in MISTAKES), first
