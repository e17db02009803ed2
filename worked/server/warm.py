"""Imported once by the forkserver the server's workers fork from (``set_forkserver_preload``): it imports
the solver and checker and solves and checks the built-in example once, so every worker, the first ones and
each one started after a kill or a recycle, begins with its imports done and sympy's caches filled instead
of paying for them on a student's request."""
from __future__ import annotations

from .. import printers
from ..check import check_answers
from ..problem import load
from ..solver import solve
from ..writers import json as json_writer
from . import app, jobs  # noqa: F401 - what the jobs import

printers.load_all()   # the page's MathML and spoken forms, the JSON's LaTeX
_example = load()
json_writer.solution(solve(_example))
check_answers(_example, {"Q": [["1", "0"], ["0", "1"], ["1", "0"]]}).to_dict()
