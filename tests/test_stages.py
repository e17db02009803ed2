"""The stages declared once (worked.stages): what they say of a problem's matrices is what the solver computes."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]



def test_the_stages_declare_every_matrix_of_a_solution():
    """worked.stages declares each stage once (id, inputs, shape, words): its matrices, in order and shape,
    are those of the solver's solution, for one and several heads, with and without a training step."""
    from worked import generate, stages
    from worked.problem import load
    from worked.solver import solve

    problems = [load(p) for p in sorted((ROOT / "problems").glob("*.toml")) if "quiz" not in p.name]
    for kw in (dict(heads=2, train=True, tokens=3, d_model=4, d_k=2), dict(heads=3, tokens=3, d_model=4, d_k=2)):
        fam = generate.Family.from_dict(kw)
        p = next(generate.generate(fam, seed) for seed in range(1, 40) if _draws(fam, seed))
        assert stages.matrices(stages.Dims.of_family(fam)) == stages.matrices(stages.Dims.of_problem(p))
        problems.append(p)
    for p in problems:
        sol = solve(p)
        for b in getattr(sol, "blocks", None) or [sol]:     # a chain of blocks ([[blocks]]): each block's
            got = [(k, m.shape) for k, m in b.matrices().items()]
            assert list(stages.matrices(stages.Dims.of_problem(b.problem)).items()) == got, p.source


def _draws(fam, seed) -> bool:
    from worked import generate
    from worked.errors import WorkedError

    try:
        generate.generate(fam, seed)
    except WorkedError:
        return False
    return True
