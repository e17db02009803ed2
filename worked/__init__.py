"""worked: exact, step-by-step worked examples of self-attention.

The public namespace is thin; the work happens in private-ish modules imported on first use,
so ``import worked`` stays cheap:

    >>> import worked
    >>> sol = worked.solve(worked.Problem.from_file("problems/cats-chase-mice.toml"))
    >>> from worked import printers
    >>> printers.text(sol.Z.fixed(0, 0, 2))      # the entry to 2 places, as the text printer writes it
    '0.49'
"""
from __future__ import annotations

__version__ = "0.1.0"
__all__ = ["Problem", "Solution", "solve", "load", "audit", "WorkedError", "ProblemError", "__version__"]


def __getattr__(name):
    if name in ("Problem", "load"):
        from . import problem

        return getattr(problem, name)
    if name == "solve":
        from .solver import solve

        return solve
    if name == "Solution":
        from .model import Solution

        return Solution
    if name == "audit":
        from .audit import audit

        return audit
    if name in ("WorkedError", "ProblemError"):
        from . import errors

        return getattr(errors, name)
    raise AttributeError(f"module 'worked' has no attribute {name!r}")
