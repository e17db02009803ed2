"""Chained attention blocks (``[[blocks]]``): the Part 11 decoder layer as composition.

A problem file with ``[[blocks]]`` is a :class:`Chain`: the shared top-level fields (title, tokens, X,
tokens_enc, X_enc, scale, decimals, display) and one table per block (``attention``, ``mask`` and its weights,
``W_Q``/``W_K``/``W_V`` or ``[[blocks.heads]]`` with ``W_O``). Each block is an ordinary
:class:`worked.problem.Problem`, solved by the ordinary :func:`worked.solver.solve`: block k+1's X is block k's
output **as the key shows it**, the output rounded to ``decimals`` places (half away from zero, the project's
one rounding rule), as exact decimal Fractions. That is what a hand carries on, and it keeps every block exact.

Names: a chain's matrices are its blocks' with the prefix ``block1.``, ``block2.`` … (``sol["block2.weights"]``,
``sol["block1.head2.Q"]``), and ``sol["Z"]`` is the last block's output.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple

from .errors import ProblemError
from .model import Matrices, Mat
from .problem import LIMITS, Problem, _frac_text, _matrix, _tokens, work

#: what a problem with [[blocks]] may have at its top level (the rest goes in each block)
CHAIN_TOP_KEYS = {"title", "tokens", "X", "tokens_enc", "X_enc", "scale", "decimals", "display", "blocks"}
#: what goes in a block
BLOCK_KEYS = {"attention", "mask", "W_Q", "W_K", "W_V", "heads", "W_O"}
MAX_BLOCKS = 4


def is_chain(obj) -> bool:
    """True for a :class:`Chain` or a :class:`ChainSolution` (what the commands dispatch on)."""
    return isinstance(obj, (Chain, ChainSolution))


class Block(NamedTuple):
    """One block's own table: its attention ("self" or "cross"), mask, heads (W_Q, W_K, W_V as given) and W_O."""

    attention: str
    mask: str
    W_Q: Any
    W_K: Any
    W_V: Any
    heads: Any
    W_O: Any


def block_name(p: Problem) -> str:
    """What a block does, in words: "masked self-attention", "cross-attention to the encoder", "(2 heads)"."""
    if p.cross:
        what = "cross-attention to the encoder"
    else:
        what = ("masked " if p.mask == "causal" else "") + "self-attention"
    return what + (f" ({len(p.heads)} heads)" if p.multihead else "")


def block_title(p: Problem, k: int) -> str:
    return f"Block {k}: {block_name(p)}"


def carried_from(k: int, decimals: int) -> str:
    """The sentence where block *k* (≥ 2) starts: where its X comes from."""
    return (f"X for block {k} is block {k - 1}'s output Z, rounded to {decimals} place{'s' if decimals != 1 else ''} "
            "as in the key.")


def _remap(exc: ProblemError, k: int) -> ProblemError:
    """A block's ProblemError with its field named in the file: ``W_Q`` → ``blocks[2].W_Q``."""
    field = exc.field or ""
    head = field.split(".")[0].split("[")[0]
    if head in BLOCK_KEYS:
        field = f"blocks[{k}].{field}"
    return ProblemError(field, exc.message)


class Chain:
    """A problem of chained attention blocks (``[[blocks]]``), exact and validated. :meth:`problem` gives
    block k's :class:`Problem` for an X; :func:`solve_chain` solves them in turn."""

    def __init__(self, X, blocks, *, tokens=None, title="", scale="sqrt", decimals=2, display="auto",
                 X_enc=None, tokens_enc=None, source=None, _places_limit=LIMITS["places"]):
        try:
            self._init(X, blocks, tokens, title, scale, decimals, display, X_enc, tokens_enc, _places_limit)
        except ProblemError as exc:
            raise (exc.with_source(source) if source else exc) from None
        self.source = source

    def _init(self, X, blocks, tokens, title, scale, decimals, display, X_enc, tokens_enc, places):
        if not isinstance(blocks, (list, tuple)) or not blocks:
            raise ProblemError("blocks", "expected a list of tables ([[blocks]]), each with attention, mask and its weights")
        if len(blocks) > MAX_BLOCKS:
            raise ProblemError("blocks", f"{len(blocks)} blocks is more than a hand exercise allows (at most {MAX_BLOCKS})")
        specs = []
        for k, b in enumerate(blocks, 1):
            if isinstance(b, Block):
                specs.append(b)
                continue
            if not isinstance(b, dict):
                raise ProblemError(f"blocks[{k}]", "expected a table with attention, mask and W_Q, W_K, W_V (or heads and W_O)")
            unknown = sorted(set(b) - BLOCK_KEYS)
            if unknown:
                raise ProblemError(f"blocks[{k}].{unknown[0]}", f"unknown key (a block has some of: {', '.join(sorted(BLOCK_KEYS))})")
            specs.append(Block(b.get("attention", "self"), b.get("mask", "none"), b.get("W_Q"), b.get("W_K"), b.get("W_V"),
                               b.get("heads"), b.get("W_O")))
        crosses = [k for k, b in enumerate(specs, 1) if b.attention == "cross"]
        if crosses and X_enc is None:
            raise ProblemError("X_enc", f'missing: blocks[{crosses[0]}] has attention = "cross", so the encoder side X_enc '
                               "(one row per encoder token; its keys and values come from it) is required")
        if not crosses:
            for key, v in (("X_enc", X_enc), ("tokens_enc", tokens_enc)):
                if v is not None:
                    raise ProblemError(key, f'{key} is only used when a block has attention = "cross"')
        if X is None:
            raise ProblemError("X", "missing: the input matrix X of block 1 (one row per token) is required")
        self.blocks = tuple(specs)
        self.title, self.scale, self.decimals, self.display_option = title, scale, decimals, display
        # block 1 is read with the file's limits; its fields are the chain's own
        first = self._build(1, X, X_enc, tokens, tokens_enc, places, display)
        self.X, self.tokens, self.X_enc, self.tokens_enc = first.X, first.tokens, None, None
        if crosses:
            self.X_enc = _matrix("X_enc", X_enc, places)
            self.tokens_enc = _tokens("tokens_enc", tokens_enc, len(self.X_enc), "X_enc", "e")
        self.title, self.scale, self.decimals = first.title, first.scale, first.decimals
        width, prev = _out_width(first), first
        for k in range(2, len(specs) + 1):
            b = specs[k - 1]
            rows = _weight_rows(b)
            if rows is not None and rows != width:
                w = "heads[1].W_Q" if b.heads is not None else "W_Q"
                raise ProblemError(f"blocks[{k}].{w}", f"expected {width} rows (block {k}'s input is block {k - 1}'s output Z, "
                                   f"which has {width} columns: its d_model), got {rows}")
            if b.attention == "cross" and len(self.X_enc[0]) != width:
                raise ProblemError("X_enc", f"expected {width} columns (block {k}'s d_model: block {k - 1}'s output Z has "
                                   f"{width} columns), got {len(self.X_enc[0])}")
            zeros = [[0] * width for _ in range(prev.n)]      # the shapes only: its X comes from block k−1's answer
            prev = self._build(k, zeros, None, None, None, places, display)
            width = _out_width(prev)
        self.first = first
        w = work(self)
        if w.worst > LIMITS["work"]:
            raise ProblemError("blocks", f"{len(specs)} blocks are more work than a command may take (about "
                               f"{w.worst / 1000:.0f} s, at most {LIMITS['work'] / 1000:.0f} s): use fewer or smaller blocks")

    def _build(self, k: int, X, X_enc, tokens, tokens_enc, places, display) -> Problem:
        b = self.blocks[k - 1]
        cross = b.attention == "cross"
        if k > 1:
            tokens = self.tokens
            X_enc, tokens_enc = (self.X_enc, self.tokens_enc) if cross else (None, None)
        try:
            return Problem(X, b.W_Q, b.W_K, b.W_V, heads=b.heads, W_O=b.W_O, tokens=tokens, title=self.title,
                           scale=self.scale, mask=b.mask, decimals=self.decimals, display=display,
                           attention=b.attention, X_enc=X_enc if cross else None,
                           tokens_enc=tokens_enc if cross else None, _places_limit=places)
        except ProblemError as exc:
            if k == 1 and not cross and exc.field in ("X_enc", "tokens_enc"):
                raise                         # block 1 self-attention: an encoder side is read by the chain
            raise _remap(exc, k) from None

    def solve_blocks(self, solve, checks: str = "one", display: str | None = None) -> "ChainSolution":
        """The chain solved by *solve* (:func:`worked.solver.solve`), block by block: see :func:`solve_chain`."""
        return solve_chain(self, solve, checks, display)

    def problem(self, k: int, X=None) -> Problem:
        """Block *k*'s problem (1-based): block 1 with the chain's X; a later block with *X* (the previous block's
        output as the key shows it). A later block is worked in decimals unless the file says "exact"."""
        if k == 1:
            return self._build(1, self.X, self.X_enc, self.tokens, self.tokens_enc, None, self.display_option)
        if X is None:
            raise ValueError(f"block {k} needs its X: block {k - 1}'s output")
        display = self.display_option if self.display_option != "auto" else "decimal"
        return self._build(k, X, None, None, None, None, display)

    def block_problems(self) -> list[Problem]:
        """Every block's problem for its shapes and weights (block 1's is the true one; a later block's X is
        zeros of its shape: its values come from the block before's answer)."""
        return [self._build(k, *self._shape_args(k)) for k in range(1, len(self.blocks) + 1)]

    block_name = staticmethod(block_name)
    block_title = staticmethod(block_title)

    # -- what commands read of a problem
    @property
    def n(self) -> int:
        return len(self.X)

    @property
    def d_model(self) -> int:
        return len(self.X[0])

    @property
    def cross(self) -> bool:
        return self.X_enc is not None

    @property
    def precision(self):
        return self.first.precision

    @property
    def display(self) -> str:
        return self.first.display

    @property
    def slug(self) -> str:
        return Problem.slug.fget(self)

    def __repr__(self):
        return f"<Chain{' ' + repr(self.title) if self.title else ''}: {len(self.blocks)} blocks>"

    # -- reading and writing
    @classmethod
    def from_dict(cls, data: dict, source: str | None = None) -> "Chain":
        for key in ("W_Q", "W_K", "W_V", "heads", "W_O", "attention", "mask"):
            if key in data:
                raise ProblemError(key, f"with [[blocks]], {key} goes in each block (blocks[1].{key}, …), not at the top "
                                   "level", source)
        if "train" in data:
            raise ProblemError("train", "a training step through [[blocks]] is not supported: leave out [train], or "
                               "train one block as a problem of its own", source)
        unknown = sorted(set(data) - CHAIN_TOP_KEYS)
        if unknown:
            raise ProblemError(unknown[0], f"unknown key (with [[blocks]], expected some of: {', '.join(sorted(CHAIN_TOP_KEYS))})",
                               source)
        return cls(data.get("X"), data.get("blocks"), tokens=data.get("tokens"), title=data.get("title", ""),
                   scale=data.get("scale", "sqrt"), decimals=data.get("decimals", 2), display=data.get("display", "auto"),
                   X_enc=data.get("X_enc"), tokens_enc=data.get("tokens_enc"), source=source)

    def to_dict(self) -> dict:
        mat = lambda m: [[_frac_text(x) for x in row] for row in m]  # noqa: E731
        d: dict[str, Any] = {"title": self.title, "tokens": list(self.tokens), "X": mat(self.X)}
        if self.cross:
            d.update(tokens_enc=list(self.tokens_enc), X_enc=mat(self.X_enc))
        d["scale"] = self.scale if isinstance(self.scale, str) else _frac_text(self.scale)
        d["decimals"] = self.decimals
        if self.display_option != "auto":
            d["display"] = self.display_option
        blocks = []
        for k in range(1, len(self.blocks) + 1):
            p = self._build(k, *self._shape_args(k))
            b: dict[str, Any] = {"attention": p.attention, "mask": p.mask}
            if p.multihead:
                b["heads"] = [{"W_Q": mat(h.W_Q), "W_K": mat(h.W_K), "W_V": mat(h.W_V)} for h in p.heads]
                b["W_O"] = mat(p.W_O)
            else:
                h = p.heads[0]
                b.update(W_Q=mat(h.W_Q), W_K=mat(h.W_K), W_V=mat(h.W_V))
            blocks.append(b)
        d["blocks"] = blocks
        return d

    def _shape_args(self, k: int):
        if k == 1:
            return self.X, self.X_enc, self.tokens, self.tokens_enc, None, self.display_option
        rows = _weight_rows(self.blocks[k - 1])
        return [[0] * rows for _ in range(self.n)], None, None, None, None, self.display_option

    def __eq__(self, other):
        return type(other) is Chain and self.to_dict() == other.to_dict()

    def __hash__(self):
        import json

        return hash(json.dumps(self.to_dict(), sort_keys=True))


def _weight_rows(b: Block) -> int | None:
    """The rows of a block's W_Q as given (its d_model), None when it cannot be told (left to the Problem)."""
    w = b.W_Q
    if b.heads is not None and isinstance(b.heads, (list, tuple)) and b.heads:
        h = b.heads[0]
        w = h.get("W_Q") if isinstance(h, dict) else h[0] if isinstance(h, (list, tuple)) and h else None
    try:
        return len(w)
    except TypeError:
        return None


def _out_width(p: Problem) -> int:
    return len(p.W_O[0]) if p.multihead else p.d_v


def rounded_output(m: Mat, decimals: int) -> tuple[tuple[Fraction, ...], ...]:
    """The output as the key shows it: every entry rounded to *decimals* places (half away from zero, the
    project's rounding, :func:`worked.numfmt.round_decimal`), as exact Fractions."""
    return tuple(tuple(Fraction(m.rounded(i, j, decimals)) for j in range(m.shape[1])) for i in range(m.shape[0]))


class ChainSolution:
    """The blocks' solutions (:class:`worked.model.Solution`), in order; ``inputs[k]`` is block k+1's X."""

    def __init__(self, chain: Chain, blocks: list, checks: str, display: str | None):
        self.problem = chain
        self.blocks = blocks
        self.checks = checks
        self.display = display or chain.display

    def __repr__(self):
        t = self.problem.title
        return f"<ChainSolution{' of ' + repr(t) if t else ''}: {len(self.blocks)} blocks; .text() prints it>"

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
        out["Z"] = self.output
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
            raise _remap(exc, k).with_source(chain.source) if chain.source else _remap(exc, k) from None
        sols.append(s)
        X = rounded_output(s.output, chain.decimals)
    return ChainSolution(chain, sols, checks, display)
