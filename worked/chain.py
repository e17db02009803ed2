"""Chained attention blocks (``[[blocks]]``): the solution of a :class:`worked.problem.Chain`, block by block.

A problem file with ``[[blocks]]`` is a :class:`worked.problem.Chain`: the shared top-level fields (title, tokens,
X, tokens_enc, X_enc, scale, decimals, display) and one table per block (``attention``, ``mask`` and its weights,
``W_Q``/``W_K``/``W_V`` or ``[[blocks.heads]]`` with ``W_O``). Each block is an ordinary
:class:`worked.problem.Problem`, solved by the ordinary :func:`worked.solver.solve`: block k+1's X is block k's
output **as the key shows it**, the output rounded to ``decimals`` places (half away from zero, the project's
one rounding rule), as exact decimal Fractions. That is what a hand carries on, and it keeps every block exact.

Names: a chain's matrices are its blocks' with the prefix ``block1.``, ``block2.`` … (``sol["block2.weights"]``,
``sol["block1.head2.Q"]``), and ``sol["Z"]`` is the last block's output.
"""
from __future__ import annotations

from fractions import Fraction

from . import stages
from .errors import ProblemError
from .model import Mat, Matrices
from .problem import Chain, block_title, carried_from, remap_block_error

__all__ = ["Chain", "ChainSolution", "rounded_output", "solve_chain"]


def rounded_output(m: Mat, decimals: int) -> tuple[tuple[Fraction, ...], ...]:
    """The output as the key shows it: every entry rounded to *decimals* places (half away from zero, the
    project's rounding, :func:`worked.numfmt.round_decimal`), as exact Fractions."""
    return tuple(tuple(Fraction(m.rounded(i, j, decimals)) for j in range(m.shape[1])) for i in range(m.shape[0]))


class ChainSolution:
    """The blocks' solutions (:class:`worked.model.Solution`), in order (``blocks[k].problem.X`` is block k+1's X:
    block k's output as the key shows it). The commands' writers, page model and checker dispatch on it (a
    ``blocks`` list); ``sol["block2.weights"]``, ``sol["Z"]`` read its matrices."""

    def __init__(self, chain: Chain, blocks: list, checks: str, display: str | None):
        self.problem = chain
        self.blocks = blocks
        self.checks = checks
        self.display = display or chain.display

    def __repr__(self):
        t = self.problem.title
        return f"<ChainSolution{' of ' + repr(t) if t else ''}: {len(self.blocks)} blocks>"

    @property
    def output(self) -> Mat:
        return self.blocks[-1].output

    Z = output

    @property
    def decimals(self) -> int:
        return self.problem.decimals

    @property
    def train(self):
        return None

    def titles(self) -> list[str]:
        return [block_title(s.problem, k) for k, s in enumerate(self.blocks, 1)]

    def audit(self) -> "ChainSolution":
        for s in self.blocks:
            s.audit()
        return self

    def matrices(self) -> Matrices:
        out: dict[str, Mat] = {}
        for k, s in enumerate(self.blocks, 1):
            for key, m in s.matrices().items():
                out[f"block{k}.{key}"] = m
        out[stages.OUTPUT] = self.output
        return Matrices(out)

    def __getitem__(self, name: str) -> Mat:
        return self.matrices()[name]

    def carried_text(self, k: int) -> str:
        """Where block *k* (≥ 2) starts: the sentence saying where its X comes from."""
        return carried_from(k, self.decimals)


def solve_chain(chain: Chain, solve, checks: str = "one", display: str | None = None) -> ChainSolution:
    """Solve block after block with *solve* (:func:`worked.solver.solve`, which calls this for a chain), block
    k+1's X being block k's output rounded to the chain's decimals."""
    sols = []
    X = None
    for k in range(1, len(chain.blocks) + 1):
        p = chain.problem(k, X)
        try:
            s = solve(p, checks=checks, display=display)
        except ProblemError as exc:
            raise remap_block_error(exc, k).with_source(chain.source) if chain.source else remap_block_error(exc, k) from None
        sols.append(s)
        X = rounded_output(s.output, chain.decimals)
    return ChainSolution(chain, sols, checks, display)
