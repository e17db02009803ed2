"""Good random problems: small integers, a softmax that does not saturate, no ties, same seed → same file.

A :class:`Family` holds the options of ``worked new`` (and of a quiz spec's ``[family]`` table);
:func:`generate` draws one :class:`~worked.problem.Problem` from it, deterministically from an integer
seed. Random does not mean arbitrary. By default every problem drawn has

* integer entries in ``range`` (default −2..3), and no all-zero row in X or in any weight matrix;
* a softmax that does not saturate: in every row of the attention weights the largest weight is at
  most ``max_weight`` (0.9) and every weight is at least ``min_weight`` (one unit of the last shown
  decimal, 0.01 for 2 decimals, so no weight rounds to 0.00);
* no tie for the largest score in a row (``ties = true`` allows them);
* every scaled score within ±``max_score`` (5), so each e^x of the worked softmax stays readable
  (e^−5 ≈ 0.0067, e^5 ≈ 148); ``max_score = 0`` lifts the limit.

Rows that the causal mask leaves with a single token (the first row) have weight 1 by definition and
are exempt from the softmax rules.

How: entries are drawn with ``random.Random(seed)`` (integer draws only: the stream is the same on
every machine and Python 3 version); then a bounded local search changes one entry of X, W_Q or W_K at
a time, keeping a change when it does not make the constraint violation worse, until every constraint
holds. The violation is measured in floats rounded to 1e-9 before comparing, so platform libm
differences in the last bit do not change the path. A quick feasibility check (:func:`check_feasible`)
rejects constraints that can never be met, and the search gives up with a one-line error after a
fixed number of steps, so an impossible family fails fast instead of looping forever.
"""
from __future__ import annotations

import functools
import math
import random
from operator import mul
from dataclasses import dataclass, field, fields
from decimal import Decimal
from fractions import Fraction
from typing import Any

from . import numfmt as F
from .attention import Approx, Float, Hand, block_forward, forward, loss_of
from .errors import ProblemError, WorkedError
from .exact import EntryError, to_fraction
from .i18n import Msg, joined
from .problem import LIMITS, POSITIONALS, TBLOCKS, Chain, Problem, Work, work_of

# keys of a [family] table / options of `worked new`
FAMILY_KEYS = ("attention", "blocks", "tokens", "words", "tokens_enc", "words_enc", "d_model", "d_k", "d_v", "heads", "range", "weight_range", "mask", "scale",
               "decimals", "max_weight", "min_weight", "max_score", "ties", "title", "train", "lr", "block", "positional",
               "d_ff", "vocab", "eps")
#: a Transformer block family's own keys (used only with ``block``)
TBLOCK_FAMILY_KEYS = ("positional", "d_ff", "vocab", "eps")

MAX_TWIN_DRAWS = 25     # good draws refused for two equal rows of X; then (a family whose other rules leave no room
                        # for distinct rows, such as 4 tokens in d_model 2 over 0..2) twins are taken
MAX_ENTRY = 99          # |entry| bound for generated problems (hand exercises)
STEPS_PER_START = 400   # local-search steps without progress before a fresh start
BLOCK_KINDS = ("self", "self-causal", "cross")   # a chain family's blocks ([family] blocks = [...])
MAX_CHAIN = 4
CHAIN_TRIES = 6          # draws of a whole chain before giving up
MAX_STEPS = 40_000      # total steps before giving up (about a second)


@dataclass(frozen=True)
class Family:
    """The options that describe a family of random problems (see module docstring)."""

    tokens: int = 3
    words: tuple[str, ...] | None = None
    d_model: int = 4
    d_k: int = 2
    d_v: int | None = None          # default: d_k
    heads: int = 1
    range: tuple[int, int] = (-2, 3)
    weight_range: tuple[int, int] | None = None  # default: range
    mask: str = "none"
    scale: Any = "sqrt"            # "sqrt", "none" or a positive Fraction
    decimals: int = 2
    max_weight: float = 0.9
    min_weight: float | None = None  # default: 10**-decimals
    max_score: float = 5.0          # largest |scaled score| (keeps e^x readable by hand); 0 = no limit
    ties: bool = False
    title: str = ""
    train: bool = False             # add a [train] table: an integer target T near Z, MSE, learning rate lr
    lr: Fraction | None = None      # None: the largest of 1/10, 1/20, 1/50, 1/100 that lowers the loss
    attention: str = "self"         # "cross": queries from X, keys and values from an encoder side X_enc
    tokens_enc: int | None = None   # cross: the encoder side's tokens (default: as many as the decoder's)
    words_enc: tuple[str, ...] | None = None
    blocks: tuple[str, ...] | None = None   # a chain of blocks ([[blocks]]): each "self", "self-causal" or "cross"
    block: str | None = None        # a whole Transformer block (issue 27): "post-ln" or "pre-ln"
    positional: str = "none"        # a block's positions: "none" or "sinusoidal"
    d_ff: int | None = None         # a block's feed-forward width (default: d_model)
    vocab: int = 0                  # a block's output layer: |vocab| columns of W_out, with next-token targets (0: none)
    eps: Fraction = Fraction(0)     # a block's layer norms' ε
    source: str | None = field(default=None, compare=False)

    # -- derived
    @property
    def n(self) -> int:
        return len(self.words) if self.words else self.tokens

    @property
    def n_enc(self) -> int:
        """The tokens the keys and values come from (the encoder side's in cross-attention)."""
        if self.attention != "cross":
            return self.n
        return len(self.words_enc) if self.words_enc else self.tokens_enc or self.n

    @property
    def dv(self) -> int:
        return self.d_v if self.d_v is not None else self.d_k

    @property
    def dff(self) -> int:
        return self.d_ff if self.d_ff is not None else self.d_model

    @property
    def wrange(self) -> tuple[int, int]:
        return self.weight_range if self.weight_range is not None else self.range

    @property
    def min_w(self) -> float:
        return self.min_weight if self.min_weight is not None else 10.0 ** -self.decimals

    @property
    def divisor(self) -> float:
        if self.scale == "sqrt":
            return math.sqrt(self.d_k)
        if self.scale == "none":
            return 1.0
        return float(self.scale)

    def to_dict(self) -> dict:
        """The family as a [family] table (only the keys that differ from the defaults, plus the shape)."""
        d: dict[str, Any] = {}
        base = Family()
        for f in fields(self):
            if f.name == "source":
                continue
            v = getattr(self, f.name)
            if f.name == "tokens" and self.words or f.name == "tokens_enc" and self.words_enc:
                continue
            if f.name == "mask" and self.blocks:       # each block's mask comes from its kind (self-causal)
                continue
            if f.name in ("tokens", "d_model", "d_k", "range", "mask") or v != getattr(base, f.name):
                if isinstance(v, tuple):
                    v = list(v)
                if isinstance(v, Fraction):
                    v = str(v)
                d[f.name] = v
        return d

    # -- reading
    @classmethod
    def from_dict(cls, data: dict, source: str | None = None, prefix: str = "family.") -> "Family":
        """Read and validate a [family] table (or the options of ``worked new``); raise ProblemError."""
        def err(key, msg):
            return ProblemError(prefix + key if key else prefix.rstrip("."), msg, source)

        if not isinstance(data, dict):
            raise err("", Msg("expected a table of options (tokens, d_model, d_k, range, …)"))
        unknown = sorted(set(data) - set(FAMILY_KEYS))
        if unknown:
            raise err(unknown[0], Msg("unknown key (expected some of: {keys})", keys=", ".join(FAMILY_KEYS)))
        kw: dict[str, Any] = {}

        def whole(key, lo, hi):
            v = data[key]
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise err(key, Msg("expected a whole number from {lo} to {hi}, got {got}", lo=lo, hi=hi, got=repr(v)))
            return v

        if "tokens" in data:
            v = data["tokens"]
            if isinstance(v, list):
                if "words" in data:
                    raise err("tokens", Msg("give either tokens (a count or a list of words) or words, not both"))
                kw["words"] = _words(v, err, "tokens")
            else:
                kw["tokens"] = whole("tokens", 2, LIMITS["tokens"])
        if "words" in data:
            kw["words"] = _words(data["words"], err, "words")
            if "tokens" in kw and kw["tokens"] != len(kw["words"]):
                raise err("tokens", Msg("is {n} but words has {m} entries", n=kw["tokens"], m=len(kw["words"])))
            kw.pop("tokens", None)
        for key in ("d_model", "d_k", "d_v"):
            if key in data:
                kw[key] = whole(key, 1, LIMITS["dim"])
        if "heads" in data:
            kw["heads"] = whole("heads", 1, LIMITS["heads"])
        for key in ("range", "weight_range"):
            if key in data:
                kw[key] = parse_range(data[key], lambda m, k=key: err(k, m))
        if "mask" in data:
            if data["mask"] not in ("none", "causal"):
                raise err("mask", Msg('expected "none" or "causal", got {got}', got=repr(data["mask"])))
            kw["mask"] = data["mask"]
        if "attention" in data:
            if data["attention"] not in ("self", "cross"):
                raise err("attention", Msg('expected "self" or "cross", got {got}', got=repr(data["attention"])))
            kw["attention"] = data["attention"]
        if "blocks" in data:
            v = data["blocks"]
            if not isinstance(v, list) or not 1 <= len(v) <= MAX_CHAIN or any(x not in BLOCK_KINDS for x in v):
                raise err("blocks", Msg("expected a list of 1 to {n} blocks among {kinds}, such as {example}", n=MAX_CHAIN,
                                        kinds=", ".join(repr(k) for k in BLOCK_KINDS), example='["self-causal", "cross"]'))
            for key in ("attention", "mask", "heads", "train"):
                if key in data:
                    raise err(key, Msg("with blocks, {key} is not a family option: each block's attention and mask come "
                                       "from blocks (\"self\", \"self-causal\", \"cross\"), one head each, no training step",
                                       key=key))
            kw["blocks"] = tuple(v)
        cross = kw.get("attention") == "cross" or "cross" in kw.get("blocks", ())
        for key in ("tokens_enc", "words_enc"):
            if key in data and not cross:
                raise err(key, Msg('{key} is only used with attention = "cross" (the encoder side)', key=key))
        if "tokens_enc" in data:
            v = data["tokens_enc"]
            if isinstance(v, list):
                kw["words_enc"] = _words(v, err, "tokens_enc")
            else:
                kw["tokens_enc"] = whole("tokens_enc", 2, LIMITS["tokens"])
        if "words_enc" in data:
            kw["words_enc"] = _words(data["words_enc"], err, "words_enc")
            kw.pop("tokens_enc", None)
        if cross and kw.get("mask") == "causal":
            raise err("mask", Msg('a causal mask is not used with attention = "cross": every decoder token may attend to '
                                  'every encoder token (use mask = "none")'))
        if "scale" in data:
            kw["scale"] = parse_scale(data["scale"], lambda m: err("scale", m))
        if "decimals" in data:
            kw["decimals"] = whole("decimals", 1, LIMITS["decimals"])
        if "max_score" in data:
            v = data["max_score"]
            if isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise err("max_score", Msg("expected a number ≥ 0 (0 = no limit), got {got}", got=repr(v)))
            try:
                f = float(v)
            except ValueError:
                f = -1.0
            if not 0 <= f <= 1000:
                raise err("max_score", Msg("expected a number from 0 (no limit) to {hi}, got {got}", hi=1000, got=repr(v)))
            kw["max_score"] = f
        for key in ("max_weight", "min_weight"):
            if key in data:
                v = data[key]
                try:
                    f = float(v) if not isinstance(v, bool) else None
                except (TypeError, ValueError):
                    f = None
                if f is None or not 0 <= f <= 1 or math.isnan(f):
                    raise err(key, Msg("expected a number from 0 to 1, got {got}", got=repr(v)))
                kw[key] = f
        if "ties" in data:
            if not isinstance(data["ties"], bool):
                raise err("ties", Msg("expected true or false, got {got}", got=repr(data["ties"])))
            kw["ties"] = data["ties"]
        if "train" in data:
            if not isinstance(data["train"], bool):
                raise err("train", Msg("expected true or false, got {got}", got=repr(data["train"])))
            kw["train"] = data["train"]
        if "lr" in data:
            try:
                f, _ = to_fraction(data["lr"]) if not isinstance(data["lr"], bool) else (None, 0)
            except EntryError:
                f = None
            if f is None or not 0 < f <= LIMITS["lr"]:
                raise err("lr", Msg('expected a positive number of at most {most} such as "1/10", got {got}', most=LIMITS["lr"],
                                    got=repr(data["lr"])))
            kw["lr"] = f
        if "block" in data:
            if data["block"] not in TBLOCKS:
                raise err("block", Msg('expected "post-ln" or "pre-ln", got {got}', got=repr(data["block"])))
            for key in ("attention", "blocks"):
                if key in data:
                    raise err(key, Msg("with block, {key} is not a family option: a Transformer block's attention is "
                                       "self-attention (its mask from mask)", key=key))
            kw["block"] = data["block"]
        for key in TBLOCK_FAMILY_KEYS:
            if key in data and "block" not in data:
                raise err(key, Msg('{key} is only used in a Transformer block: add block = "post-ln" or "pre-ln"', key=key))
        if "positional" in data:
            if data["positional"] not in POSITIONALS:
                raise err("positional", Msg('expected "none" or "sinusoidal", got {got}', got=repr(data["positional"])))
            kw["positional"] = data["positional"]
        if "d_ff" in data:
            kw["d_ff"] = whole("d_ff", 1, LIMITS["dim"])
        if "vocab" in data:
            kw["vocab"] = whole("vocab", 2, LIMITS["dim"])
        if "eps" in data:
            try:
                f, _ = to_fraction(data["eps"]) if not isinstance(data["eps"], bool) else (None, 0)
            except EntryError:
                f = None
            if f is None or not 0 <= f <= 1:
                raise err("eps", Msg('expected a number from 0 to 1 (layer norm\'s ε) such as "0" or "1/100", got {got}',
                                     got=repr(data["eps"])))
            kw["eps"] = f
        if "title" in data:
            if not isinstance(data["title"], str) or len(data["title"]) > LIMITS["title"]:
                raise err("title", Msg("expected a string of at most {n} characters", n=LIMITS["title"]))
            kw["title"] = data["title"]
        fam = cls(**kw, source=source)
        check_feasible(fam, prefix=prefix)
        return fam


def _words(v, err, key) -> tuple[str, ...]:
    if not isinstance(v, list) or not all(isinstance(t, str) and t.strip() for t in v):
        raise err(key, Msg("expected a list of non-empty words, one per token"))
    if not 2 <= len(v) <= LIMITS["tokens"]:
        raise err(key, Msg("expected 2 to {n} words, got {got}", n=LIMITS["tokens"], got=len(v)))
    if any(len(t) > LIMITS["token"] for t in v):
        raise err(key, Msg("a word is longer than {n} characters", n=LIMITS["token"]))
    return tuple(v)


def parse_range(v, err) -> tuple[int, int]:
    """``[lo, hi]`` or ``"lo..hi"`` → (lo, hi), whole numbers, lo ≤ hi; *err(msg)* builds the exception."""
    lo = hi = None
    if isinstance(v, str):
        parts = v.replace("−", "-").split("..")
        if len(parts) == 2:
            try:
                lo, hi = int(parts[0]), int(parts[1])
            except ValueError:
                pass
    elif isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        lo, hi = v
    if lo is None:
        raise err(Msg("expected two whole numbers LO..HI (e.g. -2..3 or [-2, 3]), got {got}", got=repr(v)))
    if lo > hi:
        raise err(Msg("the low end {lo} is above the high end {hi}", lo=lo, hi=hi))
    if max(abs(lo), abs(hi)) > MAX_ENTRY:
        raise err(Msg("entries of a hand exercise stay within -{most}..{most}, got {lo}..{hi}", most=MAX_ENTRY, lo=lo, hi=hi))
    if lo == hi == 0:
        raise err(Msg("0..0 leaves only zero entries (rows must not be all zero)"))
    return (lo, hi)


def parse_scale(v, err):
    if v in ("sqrt", "none"):
        return v
    from .exact import EntryError, to_fraction

    try:
        f, _ = to_fraction(v)
    except EntryError:
        raise err(Msg('expected "sqrt", "none" or a positive number, got {got}', got=repr(v))) from None
    if f <= 0 or f > LIMITS["entry"]:
        raise err(Msg("expected a positive number (at most {most}), got {got}", most=LIMITS["entry"], got=repr(v)))
    return f


def _row_sizes(fam: Family) -> list[int]:
    """How many weights each row of the softmax has (the causal mask leaves row i with i)."""
    n = fam.n
    return [i + 1 for i in range(n)] if fam.mask == "causal" else [fam.n_enc] * n


def check_feasible(fam: Family, prefix: str = "family.") -> None:
    """Raise ProblemError at once when the constraints can never all hold."""
    src = fam.source

    def err(key, msg):
        return ProblemError(prefix + key, msg, src)

    if fam.blocks:
        bfs = block_families(fam)
        widths = {bf.d_model for bf in bfs if bf.attention == "cross"}
        if len(widths) > 1:
            raise err("blocks", Msg("the cross blocks would need encoder sides of {widths} columns (each block's d_model): "
                                    "one X_enc serves them all; use d_v = d_model",
                                    widths=functools.reduce(lambda a, b: Msg("{a} and {b}", a=a, b=b), sorted(widths))))
        for bf in bfs:
            check_feasible(bf, prefix)
        return
    if fam.block:
        if fam.attention == "cross" or fam.blocks:
            raise err("block", Msg("a Transformer block's attention is self-attention: leave out attention and blocks"))
        if fam.train and not fam.vocab:
            raise err("train", Msg("a block's training step needs its output layer and targets: give vocab too"))
        if fam.vocab and (fam.min_w >= 1 / fam.vocab or fam.max_weight <= 1 / fam.vocab):
            raise err("vocab", Msg("{n} words leave no output softmax row within the weights {lo} to {hi} (a row of {n} has "
                                   "one of at least and one of at most 1/{n})", n=fam.vocab, lo=f"{fam.min_w:g}",
                                   hi=f"{fam.max_weight:g}"))
    if fam.min_w > fam.max_weight:
        raise err("min_weight", Msg("{lo} is above max_weight {hi}: no row can meet both", lo=f"{fam.min_w:g}",
                                    hi=f"{fam.max_weight:g}"))
    sizes = [k for k in _row_sizes(fam) if k >= 2]
    if not sizes:
        raise err("tokens", Msg("with one token the softmax is always 1; use at least 2 tokens"))
    k_small, k_big = min(sizes), max(sizes)
    # the largest of k weights is at least 1/k (equal only when all k are equal: a tie)
    if fam.max_weight < 1 / k_small or (not fam.ties and fam.max_weight <= 1 / k_small):
        at = dict(w=f"{fam.max_weight:g}", k=k_small)
        raise err("max_weight", Msg("{w} is impossible: a row of {k} weights always has one of at least 1/{k}", **at)
                  if fam.ties else Msg("{w} is impossible: a row of {k} weights always has one of at least 1/{k} "
                                       "(exactly 1/{k} only in a tie)", **at))
    if fam.min_w > 1 / k_big or (not fam.ties and fam.min_w >= 1 / k_big):
        raise err("min_weight", Msg("{w} is impossible: a row of {k} weights always has one of at most 1/{k}",
                                    w=f"{fam.min_w:g}", k=k_big))
    for key in ("range", "weight_range"):
        r = getattr(fam, key)
        if r is not None and r[0] == r[1] and not fam.ties:
            raise err(key, Msg("{lo}..{hi} has one value: every score in a row would tie (set ties = true or widen it)",
                               lo=r[0], hi=r[1]))
    w = family_work(fam)
    if w.worst > LIMITS["work"]:
        at = dict(n=fam.n, d_model=fam.d_model, d_k=fam.d_k, d_v=fam.dv, heads=fam.heads, s=f"{w.worst / 1000:.0f}",
                  most=f"{LIMITS['work'] / 1000:.0f}")
        raise err("train" if fam.train else "tokens",
                  Msg("{n} tokens, d_model {d_model}, d_k {d_k}, d_v {d_v}, {heads} head(s) with a training step is more work "
                      "than a command may take (about {s} s, at most {most} s; see the README's limits): use fewer tokens "
                      "or smaller widths", **at) if fam.train else
                  Msg("{n} tokens, d_model {d_model}, d_k {d_k}, d_v {d_v}, {heads} head(s) is more work than a command may "
                      "take (about {s} s, at most {most} s; see the README's limits): use fewer tokens or smaller widths",
                      **at))


def family_work(fam: Family):
    """The predicted :class:`~worked.problem.Work` of the family's problems (their shape is the family's; a chain's,
    the sum of its blocks')."""
    if fam.blocks:
        return Work(*(sum(w) for w in zip(*(family_work(bf) for bf in block_families(fam)))))
    digits = max(len(str(abs(x))) for r in (fam.range, fam.wrange) for x in r)
    return work_of(max(fam.n, fam.n_enc), fam.d_model, fam.d_k, fam.dv, fam.heads, fam.d_model, fam.train, digits=digits)


# ---------------------------------------------------------------- the search

def _draw_matrix(rng: random.Random, rows: int, cols: int, lo: int, hi: int, sparse: bool = False) -> list[list[int]]:
    """Rows of integers in lo..hi, none all zero. *sparse*: about half the entries 0 (when 0 is in range)."""
    out = []
    zero = sparse and lo <= 0 <= hi
    for _ in range(rows):
        while True:
            row = [0 if zero and rng.randrange(2) else rng.randint(lo, hi) for _ in range(cols)]
            if any(row):
                break
        out.append(row)
    return out


def _matmul(A, B):
    Bt = list(zip(*B))
    return [[sum(a * b for a, b in zip(r, c)) for c in Bt] for r in A]


def _row_penalty(fam: Family, s: list, lmax: float, lmin: float, div: float | None = None, ties: bool | None = None) -> float:
    """How far one row of integer scores is from the softmax rules (0 when they hold); *div*: what divides them
    (the family's divisor), *ties*: whether a tie for the top is allowed (the family's rule)."""
    if len(s) < 2:
        return 0.0
    m = max(s)
    # a tie for the top (within 1e-9: a block's scores are floats, equal ones may differ in the last bit)
    bad = 1.0 if (not (fam.ties if ties is None else ties) and sorted(s)[-2] >= m - 1e-9) else 0.0
    div = fam.divisor if div is None else div
    if fam.max_score:
        for x in s:
            over = abs(x) / div - fam.max_score
            if over > 0:
                bad += over
    z = [(x - m) / div for x in s]
    lse = math.log(sum(map(math.exp, z)))  # log of the softmax denominator, ≥ 0
    if -lse > lmax:                # log of the largest weight
        bad += -lse - lmax
    if min(z) - lse < lmin:        # log of the smallest weight
        bad += lmin - (min(z) - lse)
    return bad


def _logs(fam: Family) -> tuple[float, float]:
    return (math.log(fam.max_weight) if fam.max_weight > 0 else -math.inf,
            math.log(fam.min_w) if fam.min_w > 0 else -math.inf)


class _Search:
    """X, W_Q, W_K with Q, K and the integer scores kept up to date one entry change at a time."""

    def __init__(self, fam: Family, X, WQs, WKs, Xk=None):
        self.fam, self.X, self.WQ, self.WK = fam, X, WQs, WKs
        self.Xk = X if Xk is None else Xk      # the keys' side: X_enc in cross-attention
        self.lmax, self.lmin = _logs(fam)
        self.causal = fam.mask == "causal"
        self.Q = [_matmul(X, w) for w in WQs]
        self.K = [_matmul(self.Xk, w) for w in WKs]
        self.S = [_matmul(q, list(zip(*k))) for q, k in zip(self.Q, self.K)]
        self._pens: dict[tuple[int, ...], float] = {}
        self.pen = [[self._pen(h, i) for i in range(len(X))] for h in range(len(WQs))]

    def _pen(self, h: int, i: int) -> float:
        # a row's penalty depends only on its scores: remembered, since a rejected change is undone
        # (and most changes leave most rows as they were)
        row = self.S[h][i]
        key = tuple(row[: i + 1] if self.causal else row)
        hit = self._pens.get(key)
        if hit is None:
            hit = _row_penalty(self.fam, list(key), self.lmax, self.lmin)
            if len(self._pens) >= 100_000:
                self._pens.clear()
            self._pens[key] = hit
        return hit

    def total(self) -> float:
        return round(sum(sum(p) for p in self.pen), 9)

    def change(self, which: str, h: int, r: int, c: int, d: int) -> None:
        """Add *d* to entry (r, c) of X (which="X"), of X_enc ("E": cross-attention), W_Q or W_K of head h,
        updating Q, K and the scores."""
        X, n, Xk, m = self.X, len(self.X), self.Xk, len(self.Xk)
        if which in ("X", "E") and Xk is not X:      # cross-attention: X moves the queries, X_enc the keys
            M = X if which == "X" else Xk
            M[r][c] += d
            for g in range(len(self.WQ)):
                Q, K, S = self.Q[g], self.K[g], self.S[g]
                if which == "X":
                    Q[r] = [a + d * b for a, b in zip(Q[r], self.WQ[g][c])]
                    S[r] = [sum(map(mul, Q[r], k)) for k in K]
                    self.pen[g][r] = self._pen(g, r)
                else:
                    K[r] = [a + d * b for a, b in zip(K[r], self.WK[g][c])]
                    for i in range(n):
                        S[i][r] = sum(map(mul, Q[i], K[r]))
                    self.pen[g] = [self._pen(g, i) for i in range(n)]
            return
        if which == "X":
            X[r][c] += d
            for g in range(len(self.WQ)):
                Q, K, S = self.Q[g], self.K[g], self.S[g]
                Q[r] = [a + d * b for a, b in zip(Q[r], self.WQ[g][c])]
                K[r] = [a + d * b for a, b in zip(K[r], self.WK[g][c])]
                qr, kr = Q[r], K[r]
                S[r] = [sum(map(mul, qr, k)) for k in K]   # integers: exact in any order
                for i in range(n):
                    S[i][r] = sum(map(mul, Q[i], kr))
                self.pen[g] = [self._pen(g, i) for i in range(n)]
            return
        Q, K, S = self.Q[h], self.K[h], self.S[h]
        if which == "Q":
            self.WQ[h][r][c] += d
            for i in range(n):
                f = d * X[i][r]
                if f:
                    Q[i][c] += f
                    S[i] = [s + f * k[c] for s, k in zip(S[i], K)]
                    self.pen[h][i] = self._pen(h, i)
        else:
            self.WK[h][r][c] += d
            for j in range(m):
                f = d * Xk[j][r]
                if f:
                    K[j][c] += f
                    for i in range(n):
                        S[i][j] += f * Q[i][c]
            self.pen[h] = [self._pen(h, i) for i in range(n)]


def generate(fam: Family, seed: int, *, title: str | None = None, X=None, X_enc=None, with_hand: bool = False):
    """One problem of the family, the same for the same (family, seed) on every machine (with ``blocks``, a
    :class:`~worked.problem.Chain`: :func:`generate_chain`). *X*, *X_enc*: given inputs (a chain's later block),
    only the weights drawn for them. With *with_hand*, ``(problem, hand)``: *hand* the hand pass at the problem's
    carried places that accepted it (:func:`_by_hand`), for :func:`worked.solver.solve` to show rather than make
    again (None for a chain, a Transformer block or a [train] problem)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise WorkedError(Msg("seed: expected a whole number ≥ 0, got {got}", got=repr(seed)))
    if fam.blocks:
        chain = generate_chain(fam, seed, title=title)
        return (chain, None) if with_hand else chain
    if fam.block:
        block = generate_block(fam, seed, title=title)
        return (block, None) if with_hand else block
    check_feasible(fam)
    X_fixed, Xe_fixed = X, X_enc
    rng = random.Random(seed)
    n, dm, dk, dv, H = fam.n, fam.d_model, fam.d_k, fam.dv, fam.heads
    xlo, xhi = fam.range
    wlo, whi = fam.wrange
    # W_V and W_O do not affect the softmax: draw them once, first, so they do not depend on the search
    WV = [_draw_matrix(rng, dm, dv, wlo, whi) for _ in range(H)]
    WO = _draw_matrix(rng, H * dv, dm, wlo, whi) if H > 1 else None

    steps = twins = 0
    while steps < MAX_STEPS:
        X = [list(r) for r in X_fixed] if X_fixed is not None else _draw_matrix(rng, n, dm, xlo, xhi)
        Xe = None
        if fam.attention == "cross":
            Xe = [list(r) for r in Xe_fixed] if Xe_fixed is not None else _draw_matrix(rng, fam.n_enc, dm, xlo, xhi)
        WQs, WKs = [], []
        for _ in range(H):
            # start sparse: small scores, so the search starts near an unsaturated softmax
            WQs.append(_draw_matrix(rng, dm, dk, wlo, whi, sparse=True))
            WKs.append(_draw_matrix(rng, dm, dk, wlo, whi, sparse=True))
        st = _Search(fam, X, WQs, WKs, Xe)
        # every changeable cell: (which, head, row, col, lo, hi)
        cells = [("X", 0, i, j, xlo, xhi) for i in range(n) for j in range(dm)] if X_fixed is None else []
        if Xe is not None and Xe_fixed is None:
            cells += [("E", 0, i, j, xlo, xhi) for i in range(fam.n_enc) for j in range(dm)]
        cells += [(w, h, i, j, wlo, whi) for h in range(H) for w in ("Q", "K") for i in range(dm) for j in range(dk)]
        bad = st.total()
        stale = 0
        while bad > 0 and stale < STEPS_PER_START and steps < MAX_STEPS:
            steps += 1
            stale += 1
            which, h, i, j, lo, hi = cells[rng.randrange(len(cells))]
            m = X if which == "X" else Xe if which == "E" else (WQs if which == "Q" else WKs)[h]
            old = m[i][j]
            new = _move(rng, m[i], j, lo, hi)
            if new is None:
                continue
            st.change(which, h, i, j, new - old)
            b = st.total()
            if b <= bad:
                if b < bad:
                    stale = 0
                bad = b
            else:
                st.change(which, h, i, j, old - new)
        if bad == 0 and twins < MAX_TWIN_DRAWS and (X_fixed is None and _twin_rows(X, xlo, xhi)
                                                    or Xe_fixed is None and Xe is not None and _twin_rows(Xe, xlo, xhi)):
            steps += 1        # two tokens with the same row would be one token twice: draw again
            twins += 1
            continue
        if bad == 0:
            heads = [(WQs[h], WKs[h], WV[h]) for h in range(H)]
            p = _problem(fam, X, heads, WO, title, X_enc=Xe)
            if not fam.train:
                hand = _by_hand(p)
                if hand is not None:
                    return (p, hand) if with_hand else p
                steps += 1
                continue
            p = _with_target(fam, p, rng)
            if p is not None:
                return (p, None) if with_hand else p
    met = [Msg("largest weight ≤ {w}", w=f"{fam.max_weight:g}"), Msg("every weight ≥ {w}", w=f"{fam.min_w:g}")]
    met += [Msg("|scaled score| ≤ {s}", s=f"{fam.max_score:g}")] if fam.max_score else []
    met += [] if fam.ties else [Msg("no tied top score")]
    at = dict(tries=MAX_STEPS, constraints=joined(", ", met), g=f"{MAX_GRAD:g}")
    raise _not_drawn(fam, Msg("no problem of this family met the constraints in {tries} tries ({constraints}); use a "
                              "smaller range, a scale, a larger max_weight or max_score, or a smaller min_weight; with "
                              "--train also a target whose gradients stay within ±{g} and whose step lowers the loss (a "
                              "smaller range or lr helps)", **at) if fam.train else
                     Msg("no problem of this family met the constraints in {tries} tries ({constraints}); use a "
                         "smaller range, a scale, a larger max_weight or max_score, or a smaller min_weight", **at))


def _not_drawn(fam: Family, msg: Msg) -> WorkedError:
    """The one-line error of a family no draw could satisfy: *msg*, after the family's file when it has one."""
    return WorkedError(Msg("{file}: {message}", file=fam.source, message=msg) if fam.source else msg)


def _move(rng: random.Random, row: list, j: int, lo: int, hi: int) -> int | None:
    """A new value for entry *j* of *row* in the search: a small step (keeps what is good about the current draw)
    or a jump anywhere in lo..hi; None when the draw gives none (out of range, the same value, or an all-zero
    row)."""
    old = row[j]
    if rng.randrange(2):
        new = old + (1 if rng.randrange(2) else -1)
        if not lo <= new <= hi:
            return None
    else:
        new = rng.randint(lo, hi - 1) if hi > lo else lo
        if new >= old and hi > lo:
            new += 1
        if new == old:
            return None
    if new == 0 and not any(x for k, x in enumerate(row) if k != j):
        return None
    return new


def _twin_rows(X, lo: int, hi: int) -> bool:
    """Do two rows of X repeat each other, where the range has room for all of them to differ (rows of X are not
    all zero, so a range of k values gives k**d_model - 1 rows when it holds 0)?"""
    room = (hi - lo + 1) ** len(X[0]) - (1 if lo <= 0 <= hi else 0)
    return len(X) <= room and len({tuple(r) for r in X}) < len(X)


def block_families(fam: Family) -> list[Family]:
    """A chain family's blocks as families of one block: block k+1's d_model is block k's d_v."""
    from dataclasses import replace

    out, dm = [], fam.d_model
    for kind in fam.blocks:
        cross = kind == "cross"
        out.append(replace(fam, blocks=None, attention="cross" if cross else "self",
                           mask="causal" if kind == "self-causal" else "none", d_model=dm,
                           tokens_enc=fam.tokens_enc if cross else None, words_enc=fam.words_enc if cross else None))
        dm = out[-1].dv
    return out


def generate_chain(fam: Family, seed: int, *, title: str | None = None) -> Chain:
    """A chain of blocks drawn block by block: block 1 as a problem of its own; block k+1's weights (and the encoder
    side, at the first cross block) drawn for the X block k gives, its output rounded as the key carries it on."""
    from .chain import rounded_output
    from .solver import solve

    rng = random.Random(seed)
    for _ in range(CHAIN_TRIES):      # a block's X with no good weights (rows that tie whatever W_Q): draw again
        X = X_enc = tokens_enc = None
        blocks, first = [], None
        try:
            for k, bf in enumerate(block_families(fam), 1):
                s = rng.randrange(2 ** 32)
                p = generate(bf, s, title=title, X=X, X_enc=X_enc if bf.attention == "cross" else None)
                first = first or p
                if p.cross and X_enc is None:
                    X_enc, tokens_enc = p.X_enc, p.tokens_enc
                h = p.heads[0]
                blocks.append({"attention": p.attention, "mask": p.mask, "W_Q": h.W_Q, "W_K": h.W_K, "W_V": h.W_V})
                X = rounded_output(solve(p).output, fam.decimals)
        except WorkedError:
            continue
        break
    else:
        raise _not_drawn(fam, Msg("no chain of these blocks met the constraints in {n} draws: use a smaller range, a "
                                  "larger max_weight or max_score, or fewer blocks", n=CHAIN_TRIES))
    data = {"title": first.title, "tokens": list(first.tokens), "X": first.X, "scale": first.scale,
            "decimals": fam.decimals, "blocks": blocks}
    if X_enc is not None:
        data.update(tokens_enc=list(tokens_enc), X_enc=X_enc)
    return Chain.from_dict(data)


# ---------------------------------------------------------------- a whole Transformer block (issue 27)

MAX_BLOCK_STEPS = 8000   # search steps for a block (each a float pass of the whole block) before giving up
MIN_VAR = 0.05           # the smallest variance of a row a block's layer norm takes (none near 0: no division by ~0)
#: the rules of a good block, beyond its entries' ranges: what :func:`violations` names
BLOCK_RULES = ("softmax rule broken", "layer norm of a row with (nearly) no variance", "ReLU cuts no entry or every entry",
               "output softmax rule broken")


KINK = 0.05     # with a training step, every entry of ReLU's input U at least this far from 0


def _block_rules(fam: Family, p: Problem, weights: dict | None = None) -> dict[str, float]:
    """How far a block problem is from each rule of a good block (0 where it holds), in floats: the heads' softmax
    rows as the family's (largest weight, smallest weight, |scaled score|, ties), every row a layer norm takes with
    variance at least MIN_VAR, ReLU cutting some but not all entries of its input (with a training step, no column
    all: dW_1 would have a column of 0s; and no entry within KINK of 0, where its slope turns), and each row of the
    output's softmax within the same weights (its logits within ±max_score; a tie there is allowed). *weights*: the block's weights in floats, instead of *p*'s
    (:func:`_float_weights`)."""
    from . import stages
    from .attention import block_forward

    out = dict.fromkeys(BLOCK_RULES, 0.0)
    try:
        run = block_forward(p, Float(), weights=weights)
    except ProblemError:        # a row of variance 0 with ε = 0: layer norm is not defined
        out[BLOCK_RULES[1]] = 1.0
        return out
    lmax, lmin = _logs(fam)
    for hp in run.heads:
        for i in range(p.n):
            out[BLOCK_RULES[0]] += _row_penalty(fam, [hp.raw_scores[i][j] for j in range(p.n) if (i, j) not in hp.masked],
                                                lmax, lmin)
    kind = stages.BLOCK_KINDS[p.block.kind]
    for s in kind["before"] + kind["after"]:
        src = run.shown.get(s.inputs[0]) if s.id in run.shown and s.inputs else None
        if src is None:
            continue
        if stages.computes(s) == "layer norm":
            for row in src:
                mu = math.fsum(row) / len(row)
                out[BLOCK_RULES[1]] += max(0.0, MIN_VAR - math.fsum((x - mu) ** 2 for x in row) / len(row))
        elif stages.computes(s) == "relu":
            U = [x for row in src for x in row]
            if min(U) > 0:
                out[BLOCK_RULES[2]] += min(U) + 0.1
            elif max(U) <= 0:
                out[BLOCK_RULES[2]] += 0.1 - max(U)
            if fam.train:       # a training step: no column all cut (its W_1 gradient column would be all 0),
                out[BLOCK_RULES[2]] += sum(0.1 - max(col) for col in zip(*src) if max(col) <= 0)
                # and no entry at ReLU's kink (a hand's rounding, or the certified pass, could not tell its slope)
                out[BLOCK_RULES[2]] += sum(KINK - abs(x) for x in U if abs(x) < KINK)
        elif stages.computes(s) == "softmax":
            for row in src:
                out[BLOCK_RULES[3]] += _row_penalty(fam, row, lmax, lmin, div=1.0, ties=True)
    return {k: round(v, 9) for k, v in out.items()}


def _block_step(fam: Family, p: Problem) -> Problem | None:
    """The block *p* with a [train] table (cross-entropy; the family's lr, or the largest of LRS that does: *p*'s own
    where it has one) whose step keeps every gradient hand-sized (|entry| ≤ MAX_GRAD) and lowers the loss; None when
    no lr does."""
    from .attention import block_forward

    lrs = [p.train.lr] if p.train is not None else [fam.lr] if fam.lr is not None else LRS
    for lr in lrs:
        q = Problem.from_dict({**p.to_dict(), "train": {"loss": "cross-entropy", "lr": str(lr)}}, p.source)
        run = block_forward(q, Float())
        grads = [x for k in run.shown if k.rpartition(".")[2].startswith("d") for row in run.shown[k] for x in row]
        if max(map(abs, grads)) > MAX_GRAD:
            return None
        if run.loss_after < run.loss:
            return q
    return None


def _block_problem(fam: Family, m: dict, vocab: list | None, targets: list | None, title) -> Problem:
    """The block problem of the search's integer matrices *m* (``X``, ``W_Q1``…, ``W_O``, ``W_1``, ``b_1``…)."""
    block = {"block": fam.block, "positional": fam.positional, "W_1": m["W_1"], "b_1": m["b_1"][0], "W_2": m["W_2"],
             "b_2": m["b_2"][0], "eps": str(fam.eps)}
    if vocab:
        block.update(W_out=m["W_out"], vocab=vocab, targets=targets)
    heads = [(m[f"W_Q{h}"], m[f"W_K{h}"], m[f"W_V{h}"]) for h in range(1, fam.heads + 1)]
    return _problem(fam, m["X"], heads, m["W_O"], title, block=block)


def _float_weights(fam: Family, m: dict) -> dict:
    """The search's integer weights *m* (all but X) as :func:`worked.attention.block_forward`'s *weights* in the
    Float backend's numbers (the floats a problem of them gives): a move of a weight is tried without building
    its problem."""
    fl = lambda M: [[float(x) for x in row] for row in M]  # noqa: E731
    out = {"heads": [tuple(fl(m[f"W_{w}{h}"]) for w in "QKV") for h in range(1, fam.heads + 1)], "W_O": fl(m["W_O"]),
           "W_1": fl(m["W_1"]), "b_1": fl(m["b_1"])[0], "W_2": fl(m["W_2"]), "b_2": fl(m["b_2"])[0]}
    if "W_out" in m:
        out["W_out"] = fl(m["W_out"])
    return out


def _vocab(fam: Family, rng: random.Random) -> tuple[list, list]:
    """The output layer's vocabulary (the problem's tokens first, then ``v1``, ``v2``, …) and the next-token
    targets: each position's next token where the vocabulary has it, else a word drawn from it."""
    tokens = list(fam.words) if fam.words else [f"x{i}" for i in range(1, fam.n + 1)]
    vocab = list(dict.fromkeys(tokens))[:fam.vocab]
    k = 1
    while len(vocab) < fam.vocab:
        if f"v{k}" not in vocab:
            vocab.append(f"v{k}")
        k += 1
    nxt = tokens[1:] + [None]
    return vocab, [t if t in vocab else vocab[rng.randrange(len(vocab))] for t in nxt]


def _heads_input(p: Problem):
    """A function of a block's integer X (rows of the problem *p*'s shape) giving what its heads take, in the Float
    backend's numbers: the block's stages before the heads (X0 = X + P, and pre-LN's LN_1) run on it as
    :func:`worked.attention.block_forward` runs them; None where a layer norm there is not defined (a row of
    variance 0 with ε = 0)."""
    from . import stages
    from .slips import Transform

    b = Float()
    arch, run = stages.of(p), stages.BlockRun(p, b, Transform())
    env = stages.block_inputs(p, b)

    def of(X):
        e = {**env, "X": [[b.entry(x) for x in row] for row in X]}
        try:
            for s in arch.before:
                e[s.id] = s.forward(run, *(e[k] for k in s.inputs))
        except ProblemError:
            return None
        return e[arch.attends]
    return of


def generate_block(fam: Family, seed: int, *, title: str | None = None) -> Problem:
    """A Transformer block worth doing by hand (``worked new --block``): integer entries in the family's ranges
    (no all-zero row), drawn with ``random.Random(seed)`` and then changed one entry at a time, a change kept when
    it does not make the rules' violation worse, until every rule holds and a hand carrying two (else three) more
    places gets every answer right; the same problem for the same seed.

    In two parts. First the heads' softmax rule, the one a draw meets last: X, W_Q and W_K moved against the
    heads' scores alone (:class:`_Search` on what the heads take, X0 = X + P or pre-LN's LN_1(X0); a move of W_Q
    or W_K updates the scores it changes, one of X runs the stages before the heads again), no pass of the whole
    block. Then the other rules (:func:`_block_rules`: the layer norms' variance, ReLU cutting some but not all
    entries, the output's softmax), each move of the other weights judged by a float pass of the whole block (with
    the moved weights, :func:`worked.attention.block_forward`); the heads' rule is judged there too, by that pass:
    where its floats do not meet it as the scores alone did, X, W_Q and W_K move in that part as well."""
    check_feasible(fam)
    rng = random.Random(seed)
    n, dm, dk, dv, H, dff = fam.n, fam.d_model, fam.d_k, fam.dv, fam.heads, fam.dff
    (xlo, xhi), (wlo, whi) = fam.range, fam.wrange
    shapes = {"X": (n, dm, xlo, xhi, False)}
    for h in range(1, H + 1):
        shapes.update({f"W_Q{h}": (dm, dk, wlo, whi, True), f"W_K{h}": (dm, dk, wlo, whi, True),
                       f"W_V{h}": (dm, dv, wlo, whi, False)})
    shapes.update({"W_O": (H * dv, dm, wlo, whi, False), "W_1": (dm, dff, wlo, whi, False), "b_1": (1, dff, wlo, whi, True),
                   "W_2": (dff, dm, wlo, whi, False), "b_2": (1, dm, wlo, whi, True)})
    if fam.vocab:
        shapes["W_out"] = (dm, fam.vocab, wlo, whi, True)
    cells = [(k, i, j, lo, hi) for k, (r, c, lo, hi, _) in shapes.items() for i in range(r) for j in range(c)]
    heads_cells = [c for c in cells if c[0] == "X" or c[0][:3] in ("W_Q", "W_K")]      # what the heads' scores take
    rest_cells = [c for c in cells if c not in heads_cells]
    steps = moves = 0
    heads_in = None
    while steps < MAX_BLOCK_STEPS and moves < MAX_STEPS:
        m = {k: _draw_matrix(rng, r, c, lo, hi, sparse=sp) for k, (r, c, lo, hi, sp) in shapes.items()}
        vocab, targets = _vocab(fam, rng) if fam.vocab else (None, None)
        steps += 1
        # the heads' softmax rule, on the scores alone (what the heads take depends on X and the family only)
        heads_in = heads_in or _heads_input(_block_problem(fam, m, vocab, targets, title))
        x0 = heads_in(m["X"])
        if x0 is None:
            continue
        WQs, WKs = [m[f"W_Q{h}"] for h in range(1, H + 1)], [m[f"W_K{h}"] for h in range(1, H + 1)]
        st = _Search(fam, x0, WQs, WKs)         # moves W_Q and W_K (m's own) in place
        bad, stale = st.total(), 0
        while bad > 0 and stale < STEPS_PER_START and moves < MAX_STEPS:
            moves += 1
            stale += 1
            k, i, j, lo, hi = heads_cells[rng.randrange(len(heads_cells))]
            old = m[k][i][j]
            new = _move(rng, m[k][i], j, lo, hi)
            if new is None:
                continue
            if k == "X":
                m[k][i][j] = new
                x0 = heads_in(m["X"])
                moved = _Search(fam, x0, WQs, WKs) if x0 is not None else None
                b = moved.total() if moved is not None else math.inf
            else:
                st.change(k[2], int(k[3:]) - 1, i, j, new - old)
                b = st.total()
            if b <= bad:
                stale = 0 if b < bad else stale
                bad = b
                st = moved if k == "X" else st
            elif k == "X":
                m[k][i][j] = old
            else:
                st.change(k[2], int(k[3:]) - 1, i, j, old - new)
        if bad > 0:
            continue
        # the whole block's rules, on float passes of the whole block
        base = _block_problem(fam, m, vocab, targets, title)     # its X is m's: a weight's move keeps it
        rules = _block_rules(fam, base)
        bad, stale = sum(rules.values()), 0
        while bad > 0 and stale < STEPS_PER_START and steps < MAX_BLOCK_STEPS:
            steps += 1
            stale += 1
            some = rest_cells if rules[BLOCK_RULES[0]] == 0 else cells
            k, i, j, lo, hi = some[rng.randrange(len(some))]
            old = m[k][i][j]
            new = _move(rng, m[k][i], j, lo, hi)
            if new is None:
                continue
            m[k][i][j] = new
            if k == "X":        # the problem's own input: a new problem
                moved = _block_problem(fam, m, vocab, targets, title)
                r = _block_rules(fam, moved)
            else:               # a weight: the same problem with the moved weights
                r = _block_rules(fam, base, _float_weights(fam, m))
            b = sum(r.values())
            if b <= bad:
                stale = 0 if b < bad else stale
                bad, rules = b, r
                base = moved if k == "X" else base
            else:
                m[k][i][j] = old
        if bad == 0 and not _twin_rows(m["X"], xlo, xhi):
            p = _block_problem(fam, m, vocab, targets, title)
            true = block_forward(p, Float(), backward=False)        # the one float pass both hands are held to
            if _by_hand(p, true) or _by_hand(p, true, extra=3):     # a deep block's key may carry one more place (it
                                                                    # says so)
                p = _block_step(fam, p) if fam.train else p
                if p is not None:
                    return p
    raise _not_drawn(fam, Msg(
        "no block of this family met the constraints in {n} tries (the heads' and the output's softmax rows: largest "
        "weight ≤ {hi}, every weight ≥ {lo}; every layer norm's row of variance ≥ {var}; ReLU cutting some but not all "
        "entries; every answer right by hand): use a smaller range, a larger max_weight or max_score, or a smaller "
        "min_weight", n=MAX_BLOCK_STEPS, hi=f"{fam.max_weight:g}", lo=f"{fam.min_w:g}", var=f"{MIN_VAR:g}"))


MAX_GRAD = 10.0    # largest |entry| of a generated training problem's gradients (hand-sized)
TARGET_TRIES = 30
LRS = (Fraction(1, 10), Fraction(1, 20), Fraction(1, 50), Fraction(1, 100))


def _with_target(fam: Family, p: Problem, rng: random.Random) -> Problem | None:
    """*p* with a [train] table: an integer target within 1 of each output entry (not all equal to Z rounded),
    drawn until the gradients stay hand-sized (every |entry| ≤ MAX_GRAD), the step lowers the loss (with the
    family's lr, or the largest of LRS that does) and the key's numerical check agrees (floats); None when
    no target does."""
    Z = forward(p, Float(), backward=False).output
    if _by_hand(p) is None:
        return None     # the forward pass alone already needs another place: no target helps
    # two heads: the backward pass through W_O and both heads carries its errors far enough that a key at
    # decimals + 2 places is rarely right everywhere; such a problem may carry one more place (it says so)
    extra = 3 if fam.heads > 1 else 2
    for _ in range(TARGET_TRIES):
        T = [[round(z) + rng.choice((-1, 0, 0, 0, 1)) for z in row] for row in Z]
        if all(t == round(z) for tr, zr in zip(T, Z) for t, z in zip(tr, zr)):
            continue
        for lr in ([fam.lr] if fam.lr is not None else LRS):
            q = _problem(fam, p.X, [(h.W_Q, h.W_K, h.W_V) for h in p.heads], p.W_O, p.title,
                         train={"target": T, "loss": "mse", "lr": lr}, X_enc=p.X_enc)
            try:
                run = forward(q, Float())
            except ProblemError:
                break       # the step makes a scaled score too large: this target's gradients are not hand-sized
            big = max(abs(x) for k, m in run.shown.items() if k.rpartition(".")[2].startswith("d") for row in m for x in row)
            if big > MAX_GRAD:
                break
            if run.loss_after < run.loss:
                extra_q = (2 if _by_hand(q, run) is not None else
                           extra if extra > 2 and _by_hand(q, run, extra) is not None else None)
                if extra_q and _checks_by_hand(q, run, q.decimals + extra_q):
                    return q
                break
    return None


def _by_hand(p: Problem, true=None, extra: int = 2):
    """Does a hand that carries decimals + *extra* places get every answer of *p* right (each carried value
    rounds to the true value's answer)? A problem where it would not is not drawn: its key would need one more
    place. *true*: the Float pass of *p*, when already computed; a true value within 1e-6 of a half (where a
    float cannot tell) is decided by the 50-digit pass (:func:`worked.solver.hand_pass`). Returns that hand
    pass when it does (the pass a solution of *p* shows, when *extra* is 2), None when it does not."""
    from .attention import block_forward

    dec = p.decimals
    if p.block is not None:     # a block is worked in decimals (its pages do); its forward pass (of the training
        run = lambda p, b: block_forward(p, b, backward=False)  # noqa: E731   step: the sizes of generate_block)
    else:
        run = forward
    hand = run(p, Hand(p, "decimal" if p.block is not None else p.display, dec + extra))
    true = true if true is not None else run(p, Float())
    unit = 10 ** dec
    for key, grid in hand.shown.items():
        t = true.shown.get(key)
        if t is None:
            continue
        for hrow, trow in zip(grid, t):
            for h, x in zip(hrow, trow):
                if type(h) is not Approx:
                    continue
                y = abs(x) * unit
                if abs(y - math.floor(y) - 0.5) < 1e-6:
                    if p.block is not None:
                        return None      # too near a half for floats to tell: another draw
                    from .solver import hand_pass

                    places, shown, off, _ = hand_pass(p, p.display)
                    return shown if places <= dec + extra and not off else None
                mine = F.round_decimal(Fraction(h), None, dec)
                if mine != Decimal(math.copysign(math.floor(y + 0.5), x) if x else 0).scaleb(-dec):
                    return None
    return hand


def _checks_by_hand(q: Problem, run, places: int | None = None) -> bool:
    """Does the key's numerical check (a central difference of losses carried to decimals + 2 places, h = 1/10,
    1/20 or 1/40) agree with the largest entry of dW_Q to the problem's places? (floats, with a margin)"""
    g = run.grads[0].dW["W_Q"]
    r, c = max(((i, j) for i in range(len(g)) for j in range(len(g[0]))), key=lambda ij: abs(g[ij[0]][ij[1]]))
    P, unit = places or q.precision.carried, 10.0 ** -q.decimals
    for h in (Fraction(1, 10), Fraction(1, 20), Fraction(1, 40)):
        ls = []
        for d in (h, -h):
            ws = [[[[float(x) for x in row] for row in m] for m in (hd.W_Q, hd.W_K, hd.W_V)] for hd in q.heads]
            ws[0][0][r][c] = float(q.heads[0].W_Q[r][c] + d)
            ls.append(round(loss_of(q, Float(), forward(q, Float(), weights=ws, backward=False)), P))
        fd = (ls[0] - ls[1]) / (2 * float(h))
        if abs(fd - g[r][c]) < 0.4 * unit and round(fd / unit) == round(g[r][c] / unit) \
                and abs(abs(g[r][c] / unit) % 1 - 0.5) > 0.05:
            return True
    return False


def _problem(fam: Family, X, heads, WO, title, train=None, X_enc=None, block=None) -> Problem:
    kw = dict(tokens=list(fam.words) if fam.words else None, title=title if title is not None else fam.title,
              scale=fam.scale, mask=fam.mask, decimals=fam.decimals, train=train)
    if fam.attention == "cross":
        kw.update(attention="cross", X_enc=X_enc, tokens_enc=list(fam.words_enc) if fam.words_enc else None)
    if block is not None:       # one head with its W_O, or [[heads]]
        kw["block"] = block
        if fam.heads == 1:
            return Problem(X, *heads[0], W_O=WO, **kw)
    if fam.heads == 1:
        WQ, WK, WV = heads[0]
        return Problem(X, WQ, WK, WV, **kw)
    return Problem(X, heads=[{"W_Q": q, "W_K": k, "W_V": v} for q, k, v in heads], W_O=WO, **kw)


# ---------------------------------------------------------------- checking a problem against the rules

def violations(fam: Family, problem: Problem) -> list[str]:
    """The rules a problem breaks (empty when it is a good member of the family). Used by the tests. A block's
    own matrices and vectors are in the weight range too, and its rules are :func:`_block_rules`."""
    b = problem.block
    out = []
    lo, hi = fam.range
    wlo, whi = fam.wrange
    if any(not lo <= x <= hi or x.denominator != 1 for row in problem.X for x in row):
        out.append("X entry outside range")
    if problem.cross and any(not lo <= x <= hi or x.denominator != 1 for row in problem.X_enc for x in row):
        out.append("X_enc entry outside range")
    mats = [("X", problem.X)] + ([("X_enc", problem.X_enc)] if problem.cross else []) + [(f"head{h}.{k}", getattr(hd, k)) for h, hd in enumerate(problem.heads, 1)
                                  for k in ("W_Q", "W_K", "W_V")]
    if problem.W_O is not None:
        mats.append(("W_O", problem.W_O))
    if b is not None:
        mats += [("W_1", b.W_1), ("W_2", b.W_2)] + ([("W_out", b.W_out)] if b.W_out is not None else [])
    for name, m in mats:
        if any(not any(row) for row in m):
            out.append(f"{name} has an all-zero row")
        if not name.startswith("X") and any(not wlo <= x <= whi or x.denominator != 1 for row in m for x in row):
            out.append(f"{name} entry outside weight range")
    if b is not None:
        for name, v in (("b_1", b.b_1), ("b_2", b.b_2)):
            if any(not wlo <= x <= whi or x.denominator != 1 for x in v):
                out.append(f"{name} entry outside weight range")
        if (b.kind, b.positional, b.d_ff, len(b.vocab or ()), b.eps) != (fam.block, fam.positional, fam.dff, fam.vocab, fam.eps):
            out.append("not the family's block")
        if fam.train != (problem.train is not None):
            out.append("a [train] table where the family has none, or none where it has one")
        elif fam.train and _block_step(fam, problem) is None:
            out.append("the training step's gradients are not hand-sized or it does not lower the loss")
        return out + [k for k, v in _block_rules(fam, problem).items() if v > 0]
    if _softmax_broken(fam, problem):
        out.append("softmax rule broken")
    return out


def _softmax_broken(fam: Family, problem: Problem, eps: float = 1e-9) -> bool:
    """Does a softmax row break a rule? Computed through the forward pass (floats); a rule holds within
    *eps* (relative for the weights), as in the search, which compares its violations rounded to 1e-9."""
    for hp in forward(problem, Float()).heads:
        for i in range(problem.n):
            live = [j for j in range(problem.n_kv) if (i, j) not in hp.masked]
            if len(live) < 2:
                continue   # the causal mask's first row: weight 1 by definition
            scores = [hp.raw_scores[i][j] for j in live]
            weights = [hp.weights[i][j] for j in live]
            if not fam.ties and scores.count(max(scores)) > 1:
                return True
            if fam.max_score and max(abs(hp.scaled[i][j]) for j in live) > fam.max_score + eps:
                return True
            if max(weights) > fam.max_weight * (1 + eps) or min(weights) < fam.min_w * (1 - eps):
                return True
    return False


def header_comment(fam: Family, seed: int) -> str:
    """Comment lines for a generated problem file: how to make it again."""
    opts = []
    d = fam.to_dict()
    for k, v in d.items():
        if k in ("title",):
            continue
        if k in ("range", "weight_range"):
            v = f"{v[0]}..{v[1]}"
        elif k in ("words", "words_enc"):
            k, v = "tokens" if k == "words" else "tokens_enc", ",".join(v)
        elif k == "blocks":
            v = ",".join(v)
        elif isinstance(v, bool):
            if v:
                opts.append(f"--{k.replace('_', '-')}")
            continue
        opts.append(f"--{k.replace('_', '-')} {v}")
    return (f"# Generated by `worked new {' '.join(opts)} --seed {seed}`.\n"
            f"# Constraints met: integer entries, no all-zero rows; in every softmax row the largest weight ≤ "
            f"{fam.max_weight:g} and every weight ≥ {fam.min_w:g}"
            f"{f'; every scaled score within ±{fam.max_score:g}' if fam.max_score else ''}"
            f"{'' if fam.ties else '; no tie for the top score'}"
            + (f"; every row a layer norm takes has variance ≥ {MIN_VAR:g}; ReLU cuts some entries but not all"
               + ("; the output's softmax rows keep the same weights" if fam.vocab else "")
               + (f"; a training step (cross-entropy) whose gradients stay within ±{MAX_GRAD:g} and which lowers the loss"
                  if fam.train else "") if fam.block else "")
            + ".\n")


def family_from_args(args, source: str = "option") -> Family:
    """A Family from the options of ``worked new`` (argparse namespace); option errors name the option."""
    d: dict[str, Any] = {}
    if args.tokens is not None:
        t = args.tokens.strip()
        if t.isdigit():
            d["tokens"] = int(t)
        else:
            d["words"] = [w.strip() for w in t.split(",")]
    if getattr(args, "tokens_enc", None) is not None:
        t = args.tokens_enc.strip()
        d["tokens_enc" if t.isdigit() else "words_enc"] = int(t) if t.isdigit() else [w.strip() for w in t.split(",")]
    for key in ("attention", "d_model", "d_k", "d_v", "heads", "range", "weight_range", "mask", "scale", "decimals",
                "max_weight", "min_weight", "max_score", "title", "block", "positional", "d_ff", "vocab", "eps"):
        v = getattr(args, key, None)
        if v is not None:
            d[key] = v
    if getattr(args, "blocks", None) is not None:
        d["blocks"] = [b.strip() for b in args.blocks.split(",")]
    if getattr(args, "ties", False):
        d["ties"] = True
    if getattr(args, "train", False):
        d["train"] = True
    if getattr(args, "lr", None) is not None:
        d["lr"] = args.lr
    try:
        return Family.from_dict(d, prefix="--")
    except ProblemError as exc:
        raise WorkedError(Msg("{option}: {message}", option=exc.field.replace("_", "-"), message=exc.message)) from None
