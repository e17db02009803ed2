"""The problem: input matrices and options, held as exact Fractions, validated with clear messages."""
from __future__ import annotations

import math
import re
from fractions import Fraction
from pathlib import Path
from collections import namedtuple
from typing import Any

from .errors import ProblemError
from .exact import EntryError, shown, to_fraction
from .i18n import Msg

# Limits: a problem must stay a hand exercise. Documented in the README.
LIMITS = {
    "tokens": 12,          # rows of X
    "dim": 12,             # d_model, d_k, d_v and W_O columns
    "heads": 4,
    "entry": 1000,         # largest |entry|
    "places": 4,           # decimal places written in a file entry
    "decimals": 6,         # decimal places shown
    "title": 200,          # characters
    "token": 40,           # characters per token
    "file_bytes": 1_000_000,
    "lr": 10,              # largest learning rate ([train] lr)
    "scaled": 300,         # largest |scaled score| (checked when solving, also after a [train] step)
    "work": 10_000,        # predicted milliseconds of the slowest command on the problem (see work())
}

TOP_KEYS = {"title", "attention", "tokens", "X", "tokens_enc", "X_enc", "W_Q", "W_K", "W_V", "heads", "W_O", "scale",
            "mask", "decimals", "display", "train", "lang"}
#: a Transformer block's keys (issue 27): ``block`` says which order; the rest are read only with it
TBLOCK_KEYS = ("block", "positional", "W_1", "b_1", "W_2", "b_2", "activation", "eps", "gamma_1", "beta_1", "gamma_2",
               "beta_2", "gamma_f", "beta_f", "W_out", "vocab", "targets")
TOP_KEYS |= set(TBLOCK_KEYS)
TBLOCKS = ("post-ln", "pre-ln")
POSITIONALS = ("none", "sinusoidal")
ACTIVATIONS = ("relu",)
ATTENTIONS = ("self", "cross")   # queries, keys and values from X; or queries from X, keys and values from X_enc
TRAIN_KEYS = {"target", "loss", "lr"}
LOSSES = ("mse",)
BLOCK_LOSSES = ("cross-entropy",)     # a block's [train]: the mean cross-entropy of its output layer's targets
DISPLAYS = ("auto", "exact", "decimal")
HEAD_KEYS = {"W_Q", "W_K", "W_V"}

Matrix = tuple[tuple[Fraction, ...], ...]


class Head(namedtuple("Head", (
        "W_Q",              # Matrix
        "W_K",              # Matrix
        "W_V",              # Matrix
))):
    __slots__ = ()


class Train(namedtuple("Train", (
        "target",           # Matrix | None
        "loss",             # str
        "lr",               # Fraction
))):
    """The ``[train]`` table: one gradient step. ``target`` T has the shape of the output Z; ``loss`` is
    "mse" (L = ½ Σ (Z − T)²); ``lr`` the learning rate, exact and positive. In a Transformer block the loss is
    "cross-entropy" (the block's own, against its ``targets``) and there is no target T (None)."""

    __slots__ = ()


Vector = tuple[Fraction, ...]


class TBlock(namedtuple("TBlock", (
        "kind",             # str
        "positional",       # str
        "W_1",              # Matrix
        "b_1",              # Vector
        "W_2",              # Matrix
        "b_2",              # Vector
        "activation",       # str
        "eps",              # Fraction
        "gamma_1",          # Vector
        "beta_1",           # Vector
        "gamma_2",          # Vector
        "beta_2",           # Vector
        "gamma_f",          # Vector | None
        "beta_f",           # Vector | None
        "W_out",            # Matrix | None
        "vocab",            # tuple[str, ...] | None
        "targets",          # tuple[int, ...] | None
))):
    """A whole Transformer block around the attention (issue 27), exact: ``kind`` "post-ln" (LN after each
    residual add, Vaswani et al. 2017) or "pre-ln" (LN before each sublayer, GPT-2); ``positional`` "none" or
    "sinusoidal" (added to X before the block); the feed-forward ``W_1`` (d_model × d_ff), ``b_1`` (d_ff),
    ``W_2`` (d_ff × d_model), ``b_2`` (d_model) and its ``activation``; the layer norms' ``eps`` and their γ and β
    (d_model each; ``gamma_f``/``beta_f`` the final LN of a pre-LN block with an output layer, else None); the
    optional output layer ``W_out`` (d_model × |vocab|) with its ``vocab`` and the next-token ``targets`` (indices
    into vocab, one per position; None without them)."""

    __slots__ = ()

    @property
    def d_ff(self) -> int:
        return len(self.W_1[0])

    def to_dict(self) -> dict:
        """Its keys as a problem file writes them."""
        mat = lambda m: [[_frac_text(x) for x in row] for row in m]  # noqa: E731
        vec = lambda v: [_frac_text(x) for x in v]  # noqa: E731
        d: dict[str, Any] = {"block": self.kind, "positional": self.positional, "W_1": mat(self.W_1), "b_1": vec(self.b_1),
                             "W_2": mat(self.W_2), "b_2": vec(self.b_2), "activation": self.activation,
                             "eps": exact_text(self.eps)}
        for k in ("gamma_1", "beta_1", "gamma_2", "beta_2", "gamma_f", "beta_f"):
            if getattr(self, k) is not None:
                d[k] = vec(getattr(self, k))
        if self.W_out is not None:
            d["W_out"] = mat(self.W_out)
            d["vocab"] = list(self.vocab)
            if self.targets is not None:
                d["targets"] = [self.vocab[t] for t in self.targets]
        return d


def _vector(name: str, value: Any, size: int, places, what: str) -> Vector:
    """A vector (a list of numbers) of *size* entries, exact; errors name *name* and say what it is."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist()
    if not isinstance(value, (list, tuple)) or not value or any(isinstance(x, (list, tuple, dict)) for x in value):
        raise ProblemError(name, Msg("expected a list of {size} numbers ({what}), got {got}", size=size, what=what,
                                     got=shown(value)))
    row = _matrix(name, [value], places)[0]
    if len(row) != size:
        raise ProblemError(name, Msg("expected {size} numbers ({what}), got {got}", size=size, what=what, got=len(row)))
    return row


def _tblock(data: dict, n: int, d_model: int, places) -> TBlock:
    """The block's keys of *data* (a problem file's table, or the keyword arguments), validated against the
    attention's shapes: X is n × d_model."""
    kind = data.get("block")
    if kind not in TBLOCKS:
        raise ProblemError("block", Msg('expected "post-ln" or "pre-ln", got {got}', got=shown(kind)))
    positional = data.get("positional", "none")
    if positional not in POSITIONALS:
        raise ProblemError("positional", Msg('expected "none" or "sinusoidal", got {got}', got=shown(positional)))
    activation = data.get("activation", "relu")
    if activation not in ACTIVATIONS:
        raise ProblemError("activation", Msg('expected "relu", got {got}', got=shown(activation)))
    raw = data.get("eps", "0")
    try:
        eps, eps_places = to_fraction(raw)
    except EntryError:
        raise ProblemError("eps", Msg('expected an exact number of at least 0 such as "0" or "1/100", got {got}',
                                       got=shown(raw))) from None
    if eps < 0 or eps > LIMITS["entry"]:
        raise ProblemError("eps", Msg("expected a number from 0 to {limit} (layer norm's ε), got {got}", limit=LIMITS['entry'],
                                   got=shown(raw)))
    if places is not None and eps_places > places:
        raise ProblemError("eps", _places_msg(raw, eps_places, places))
    if data.get("W_1") is None:
        raise ProblemError("W_1", Msg("missing: in a block, the feed-forward's first weights W_1 (d_model = {d_model} rows, "
                                   "d_ff columns) are required", d_model=d_model))
    W_1 = _matrix("W_1", data["W_1"], places)
    if len(W_1) != d_model:
        raise ProblemError("W_1", Msg("expected {d_model} rows (d_model), got {got}", d_model=d_model, got=len(W_1)))
    d_ff = len(W_1[0])
    _check_dim("W_1", d_ff, Msg("d_ff (columns of W_1)"))
    if data.get("W_2") is None:
        raise ProblemError("W_2", Msg("missing: in a block, the feed-forward's second weights W_2 ({d_ff}×{d_model}: d_ff × "
                                   "d_model) are required", d_ff=d_ff, d_model=d_model))
    W_2 = _matrix("W_2", data["W_2"], places)
    if _shape(W_2) != (d_ff, d_model):
        raise ProblemError("W_2", Msg("expected {d_ff}×{d_model} (d_ff × d_model), got {rows}×{cols}", d_ff=d_ff,
                                   d_model=d_model, rows=len(W_2), cols=len(W_2[0])))
    vec = lambda k, size, what, default: (  # noqa: E731
        _vector(k, data[k], size, places, what) if data.get(k) is not None else tuple(Fraction(default) for _ in range(size)))
    b_1 = vec("b_1", d_ff, Msg("the feed-forward's first bias: d_ff = {d_ff}", d_ff=d_ff), 0)
    b_2 = vec("b_2", d_model, Msg("the feed-forward's second bias: d_model = {d_model}", d_model=d_model), 0)
    norms = {}
    for k in ("gamma_1", "gamma_2", "beta_1", "beta_2"):
        norms[k] = vec(k, d_model, Msg("layer norm's {param}, one per column: d_model = {d_model}",
                                       param="γ" if k[0] == "g" else "β", d_model=d_model), 1 if k[0] == "g" else 0)
    W_out = vocab = targets = None
    if data.get("W_out") is not None:
        W_out = _matrix("W_out", data["W_out"], places)
        if len(W_out) != d_model:
            raise ProblemError("W_out", Msg("expected {d_model} rows (d_model), got {got}", d_model=d_model, got=len(W_out)))
        _check_dim("W_out", len(W_out[0]), Msg("the vocabulary (columns of W_out)"))
        if data.get("vocab") is None:
            raise ProblemError("vocab", Msg("missing: with W_out, the vocabulary (a list of {n} tokens, one per "
                                       "column of W_out) is required", n=len(W_out[0])))
        vocab = _tokens("vocab", data["vocab"], len(W_out[0]), Msg("W_out's columns"))
        if len(set(vocab)) != len(vocab):
            raise ProblemError("vocab", Msg("token {token} is there twice",
                                       token=repr(next(t for t in vocab if vocab.count(t) > 1))))
        if data.get("targets") is not None:
            t = data["targets"]
            if not isinstance(t, (list, tuple)) or not all(isinstance(x, str) for x in t):
                raise ProblemError("targets", Msg("expected a list of {n} tokens of vocab (the next token at each position)", n=n))
            if len(t) != n:
                raise ProblemError("targets", Msg("expected {n} tokens (one per position: X has {n} rows), got {got}", n=n,
                                             got=len(t)))
            for x in t:
                if x not in vocab:
                    raise ProblemError("targets", Msg("{token} is not in vocab ({vocab})", token=repr(x), vocab=", ".join(vocab)))
            targets = tuple(vocab.index(x) for x in t)
    else:
        for k in ("vocab", "targets"):
            if data.get(k) is not None:
                raise ProblemError(k, Msg("{key} is only used with an output layer W_out (d_model × |vocab|)", key=k))
    gamma_f = beta_f = None
    final = kind == "pre-ln" and W_out is not None
    for k in ("gamma_f", "beta_f"):
        if data.get(k) is not None and not final:
            raise ProblemError(k, Msg('the final layer norm (gamma_f, beta_f) is only used with block = "pre-ln" and an '
                                   "output layer W_out"))
    if final:
        gamma_f = vec("gamma_f", d_model, Msg("the final layer norm's γ: d_model = {d_model}", d_model=d_model), 1)
        beta_f = vec("beta_f", d_model, Msg("the final layer norm's β: d_model = {d_model}", d_model=d_model), 0)
    return TBlock(kind, positional, W_1, b_1, W_2, b_2, activation, eps, norms["gamma_1"], norms["beta_1"],
                  norms["gamma_2"], norms["beta_2"], gamma_f, beta_f, W_out, vocab, targets)


def _train(value, n: int, width: int, places, block: "TBlock | None" = None) -> Train:
    if isinstance(value, Train):
        value = {"target": value.target, "loss": value.loss, "lr": value.lr}
    if not isinstance(value, dict):
        raise ProblemError("train", Msg("expected a table with loss and lr") if block is not None else
                           Msg("expected a table with target, loss and lr"))
    unknown = sorted(set(value) - TRAIN_KEYS)
    if unknown:
        raise ProblemError(f"train.{unknown[0]}", Msg("unknown key (expected some of: {keys})",
                                                       keys=", ".join(sorted(TRAIN_KEYS))))
    if block is not None:       # a block's step: its own loss, the cross-entropy of its output layer's targets
        if block.targets is None:
            raise ProblemError("train", Msg("a block's training step needs its output layer and targets (W_out, vocab, "
                                       "targets): its loss is their mean cross-entropy"))
        if value.get("target") is not None:
            raise ProblemError("train.target", Msg("a block has no target T: its loss is the cross-entropy of its targets"))
        if value.get("loss", "cross-entropy") not in BLOCK_LOSSES:
            raise ProblemError("train.loss", Msg('expected "cross-entropy" in a block (the mean of −ln p of each target), '
                                            "got {got}", got=shown(value.get('loss'))))
        return Train(None, "cross-entropy", _lr(value, places))
    if value.get("target") is None:
        raise ProblemError("train.target", Msg("missing: the target T, a {n}×{width} matrix like the output Z", n=n,
                                                width=width))
    T = _matrix("train.target", value["target"], places)
    if _shape(T) != (n, width):
        raise ProblemError("train.target", Msg("expected {n}×{width} (the shape of the output Z), got {rows}×{cols}", n=n,
                                                width=width, rows=len(T), cols=len(T[0])))
    loss = value.get("loss", "mse")
    if loss not in LOSSES:
        raise ProblemError("train.loss", Msg('expected "mse" (L = ½ Σ (Z − T)²), got {got}', got=repr(loss)))
    return Train(T, loss, _lr(value, places))


def _lr(value: dict, places) -> Fraction:
    """The [train] table's learning rate, exact and positive."""
    if "lr" not in value:
        raise ProblemError("train.lr", Msg('missing: the learning rate, an exact positive number such as "1/10"'))
    raw = value["lr"]
    try:
        lr, lr_places = to_fraction(raw)
    except EntryError:
        raise ProblemError("train.lr", Msg('expected a positive number such as "1/10" or 0.1, got {got}', got=repr(raw))) from None
    if not 0 < lr <= LIMITS["lr"]:
        raise ProblemError("train.lr", Msg("expected a positive number of at most {limit}, got {got}", limit=LIMITS['lr'],
                                            got=repr(raw)))
    if places is not None and lr_places > places:
        raise ProblemError("train.lr", _places_msg(raw, lr_places, places))
    return lr


def _shape(m: Matrix) -> tuple[int, int]:
    return (len(m), len(m[0]) if m else 0)


def _matrix(name: str, value: Any, places_limit: int | None, seen: list | None = None) -> Matrix:
    """Read a matrix (list of lists, tuple or NumPy array) into Fractions, checking every entry."""
    if hasattr(value, "tolist") and not isinstance(value, (list, tuple)):
        value = value.tolist() if getattr(value, "dtype", None) is None or value.dtype.kind in "iu" else [
            [x for x in row] for row in value
        ]
    if not isinstance(value, (list, tuple)) or not value:
        raise ProblemError(name, Msg("expected a matrix: a non-empty list of rows, such as [[1, 0], [0, 1]]"))
    rows = []
    width = None
    for i, row in enumerate(value, 1):
        if hasattr(row, "tolist") and not isinstance(row, (list, tuple)):
            row = list(row)
        if not isinstance(row, (list, tuple)) or not row:
            raise ProblemError(name, Msg("row {i}: expected a non-empty list of numbers, got {got}", i=i, got=shown(row)))
        if width is None:
            width = len(row)
        elif len(row) != width:
            raise ProblemError(name, Msg("ragged rows: row 1 has {width} entries, row {i} has {n}", width=width, i=i, n=len(row)))
        if all(type(x) is int and -LIMITS["entry"] <= x <= LIMITS["entry"] for x in row):
            rows.append(tuple(map(Fraction, row)))      # plain integers within the limit (a drawn problem's): exact
            continue
        out = []
        for j, x in enumerate(row, 1):
            try:
                f, places = to_fraction(x)
            except EntryError as exc:
                raise ProblemError(f"{name}[{i},{j}]", exc.args[0]) from None
            if abs(f.numerator) > LIMITS["entry"] * f.denominator:     # |f| > the limit, in integers
                raise ProblemError(f"{name}[{i},{j}]", Msg("entry {value} is too large for a hand exercise (at most {limit} in size)",
                                                          value=x, limit=LIMITS['entry']))
            if places_limit is not None and places > places_limit:
                raise ProblemError(f"{name}[{i},{j}]", _places_msg(x, places, places_limit))
            if seen is not None and places and f.denominator != 1:
                seen.append(f"{name}[{i},{j}]")
            out.append(f)
        rows.append(tuple(out))
    return tuple(rows)


def _places_msg(value, places: int, limit: int) -> Msg:
    return Msg("{value} has {places} decimal places (at most {limit})", value=value, places=places, limit=limit)


def _check_dim(name: str, n: int, what: Msg):
    if n > LIMITS["dim"]:
        raise ProblemError(name, Msg("{what} is {n}, larger than a hand exercise allows (at most {limit})", what=what, n=n,
                                     limit=LIMITS['dim']))


def _frac_text(f: Fraction) -> int | str:
    """Exact, readable form of an entry for writing back to a problem file."""
    if f.denominator == 1:
        return int(f.numerator)
    d = f.denominator
    while d % 2 == 0:
        d //= 2
    while d % 5 == 0:
        d //= 5
    if d == 1:  # terminating decimal
        from decimal import Decimal

        s = format(Decimal(f.numerator) / Decimal(f.denominator), "f")
        return s
    return f"{f.numerator}/{f.denominator}"


def _tokens(key: str, tokens, n: int, of: str, default: str = "x") -> tuple[str, ...]:
    """The labels of the rows of *of* (``x1``, ``x2``, … when there are none; the encoder's ``e1``, …)."""
    if tokens is None:
        return tuple(f"{default}{i}" for i in range(1, n + 1))
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        raise ProblemError(key, Msg("expected a list of strings, one per row of {of}", of=of))
    if len(tokens) != n:
        raise ProblemError(key, Msg("expected {n} tokens ({of} has {n} rows), got {got}", n=n, of=of, got=len(tokens)))
    for t in tokens:
        if not t.strip():
            raise ProblemError(key, Msg("a token is empty"))
        if len(t) > LIMITS["token"]:
            raise ProblemError(key, Msg("token {token}… is longer than {limit} characters", token=repr(t[:20]),
                                         limit=LIMITS['token']))
    return tuple(tokens)


class Precision(namedtuple("Precision", (
        "answer",           # int
        "carried",          # int
))):
    """How many places a problem's numbers are shown with: ``answer`` places for every answer, ``carried``
    (answer + 2) for the values a worked line carries on. One rounding rule for all of them: half away from
    zero, from the exact value (:func:`worked.numfmt.round_decimal`). A solution that needs one more carried
    place takes :meth:`more` (see :func:`worked.solver.hand_pass`)."""

    __slots__ = ()

    @classmethod
    def of(cls, decimals: int) -> "Precision":
        return cls(decimals, decimals + 2)

    def more(self) -> "Precision":
        return Precision(self.answer, self.carried + 1)



def _lang_or_none(lang):
    """*lang* as a shipped language, None when it is none (for the language of an error: never raises)."""
    try:
        return _lang(lang)
    except ProblemError:
        return None


def _lang(lang):
    """A problem's ``lang`` (the language its sheets are shown in: a shipped catalogue), None when not given."""
    if lang is None:
        return None
    from . import i18n

    if not isinstance(lang, str):
        raise ProblemError("lang", Msg("expected a language name (one of {languages}), got {got}",
                                      languages=", ".join(i18n.languages()), got=shown(lang)))
    try:
        return i18n.canonical(lang)
    except i18n.UnknownLanguage as exc:
        raise ProblemError("lang", exc.args[0]) from None

class Problem:
    """A self-attention exercise, exact. Build it from lists, Fractions or NumPy arrays.

    ``Problem(X, W_Q, W_K, W_V)`` for one head, or ``Problem(X, heads=[(W_Q, W_K, W_V), ...], W_O=W_O)``
    for several. NumPy float entries are read through ``repr`` (their shortest decimal form);
    see :mod:`worked.exact`. ``scale`` is ``"sqrt"`` (divide by √d_k), ``"none"`` or a positive number
    to divide by; ``mask`` is ``"none"`` or ``"causal"``; ``decimals`` is how many places are shown.
    """

    X: Matrix
    heads: tuple[Head, ...]
    W_O: Matrix | None
    tokens: tuple[str, ...]
    title: str
    scale: str | Fraction          # "sqrt", "none" or the divisor
    mask: str
    decimals: int
    multihead: bool
    display_option: str            # as given: "auto", "exact" or "decimal"
    display: str                   # how the solution is worked: "exact" or "decimal" (auto: decimal inputs)
    train: Train | None            # the [train] table: one gradient step (None: forward pass only)
    block: TBlock | None           # a whole Transformer block around the attention (None: attention only)
    attention: str                 # "self" or "cross" (queries from X, keys and values from X_enc)
    X_enc: Matrix | None           # cross-attention: the encoder side (None for self-attention)
    tokens_enc: tuple[str, ...] | None
    source: str | None             # the file it was read from (not part of its value)

    #: what two problems are equal by (the file a problem came from is not part of its value)
    VALUE = ("X", "heads", "W_O", "tokens", "title", "scale", "mask", "decimals", "multihead", "display_option",
             "display", "train", "attention", "X_enc", "tokens_enc", "block")

    def __init__(self, X, W_Q=None, W_K=None, W_V=None, *, heads=None, W_O=None, tokens=None,
                 title="", scale="sqrt", mask="none", decimals=2, display="auto", train=None, source=None,
                 attention="self", X_enc=None, tokens_enc=None, block=None, lang=None, _places_limit=None,
                 _work_limit=True):
        try:
            object.__setattr__(self, "lang", _lang(lang))
            one_head = block is not None and heads is None and W_O is not None
            if block is not None:
                if W_O is None:
                    raise ProblemError("W_O", Msg("missing: in a block, the attention's output projection W_O (heads·d_v rows, "
                                           "d_model columns) is required"))
                if attention == "cross":
                    raise ProblemError("attention", Msg('a block with cross-attention is not supported: use attention = "self" '
                                                 "with block"))
                if one_head:      # one head with its W_O: the heads' combination with one head
                    heads, W_Q, W_K, W_V = [(W_Q, W_K, W_V)], None, None, None
            try:
                self._init(X, W_Q, W_K, W_V, heads, W_O, tokens, title, scale, mask, decimals, display, _places_limit,
                           attention, X_enc, tokens_enc)
            except ProblemError as exc:
                if one_head and exc.field.startswith("heads[1]"):     # named as the file has it: W_Q, not heads[1].W_Q
                    raise ProblemError(exc.field.removeprefix("heads[1]").lstrip(".") or "W_Q", exc.message) from None
                raise
            width = len(self.W_O[0]) if self.multihead else self.d_v
            if block is not None and width != self.d_model:
                raise ProblemError("W_O", Msg("expected {d_model} columns (d_model: the residual adds the attention's "
                                               "output to X), got {got}", d_model=self.d_model, got=width))
            if block is not None and not isinstance(block, TBlock):
                block = _tblock(block, self.n, self.d_model, _places_limit)
            object.__setattr__(self, "block", block)
            object.__setattr__(self, "train", None if train is None else _train(train, self.n, width, _places_limit, block))
            if _work_limit:     # off only to measure problems over the limit (benchmarks/bench_train_limits.py --fit)
                _check_work(self)
        except ProblemError as exc:
            raise (exc.with_source(source) if source else exc) from None
        object.__setattr__(self, "source", source)

    def __setattr__(self, name, value):
        raise AttributeError(f"a Problem cannot be changed (set {name!r}); make another, e.g. with with_weights()")

    def _value(self) -> tuple:
        return tuple(getattr(self, k) for k in self.VALUE)

    def __eq__(self, other):
        return type(other) is Problem and self._value() == other._value()

    def __hash__(self):
        return hash(self._value())

    def __repr__(self):
        what = f"{self.n} tokens, d_model = {self.d_model}, " + (f"{len(self.heads)} heads" if self.multihead else "one head")
        return f"<Problem{' ' + repr(self.title) if self.title else ''}: {what}; .to_toml() writes it>"

    # -- construction and validation
    def _init(self, X, W_Q, W_K, W_V, heads, W_O, tokens, title, scale, mask, decimals, display, places,
              attention="self", X_enc=None, tokens_enc=None):
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        if attention not in ATTENTIONS:
            raise ProblemError("attention", Msg('expected "self" or "cross", got {got}', got=shown(attention)))
        cross = attention == "cross"
        if X is None:
            raise ProblemError("X", Msg("missing: the input matrix X (one row per token of the decoder side) is required")
                                 if cross else Msg("missing: the input matrix X (one row per token) is required"))
        seen: list = []   # entries written as decimals (not integers)
        Xm = _matrix("X", X, places, seen)
        n, d_model = _shape(Xm)
        if n > LIMITS["tokens"]:
            raise ProblemError("X", Msg("{n} tokens is more than a hand exercise allows (at most {limit})", n=n,
                                         limit=LIMITS['tokens']))
        _check_dim("X", d_model, Msg("d_model (columns of X)"))
        Xe = None
        if not cross:
            for k, v in (("X_enc", X_enc), ("tokens_enc", tokens_enc)):
                if v is not None:
                    raise ProblemError(k, Msg('{key} is only used with attention = "cross" (keys and values from the encoder '
                                             "side)", key=k))
        else:
            if X_enc is None:
                raise ProblemError("X_enc", Msg('missing: with attention = "cross", the encoder side X_enc (one row per '
                                             "encoder token; keys and values come from it) is required"))
            Xe = _matrix("X_enc", X_enc, places, seen)
            if len(Xe) > LIMITS["tokens"]:
                raise ProblemError("X_enc", Msg("{n} tokens is more than a hand exercise allows (at most {limit})", n=len(Xe),
                                                 limit=LIMITS['tokens']))
            if len(Xe[0]) != d_model:
                raise ProblemError("X_enc", Msg("expected {d_model} columns like X (the encoder and the decoder side share "
                                             "d_model), got {got}", d_model=d_model, got=len(Xe[0])))
            if mask == "causal":
                raise ProblemError("mask", Msg('a causal mask is not used with attention = "cross": every decoder token may '
                                            'attend to every encoder token (use mask = "none")'))

        multihead = heads is not None
        if multihead:
            if any(w is not None for w in (W_Q, W_K, W_V)):
                raise ProblemError("heads", Msg("give either W_Q/W_K/W_V at the top level or [[heads]], not both"))
            if not isinstance(heads, (list, tuple)) or not heads:
                raise ProblemError("heads", Msg("expected a non-empty list of heads, each with W_Q, W_K and W_V"))
            if len(heads) > LIMITS["heads"]:
                raise ProblemError("heads", Msg("{n} heads is more than a hand exercise allows (at most {limit})", n=len(heads),
                                               limit=LIMITS['heads']))
            raw = []
            for h, head in enumerate(heads, 1):
                if isinstance(head, dict):
                    unknown = sorted(set(head) - HEAD_KEYS)
                    if unknown:
                        raise ProblemError(f"heads[{h}].{unknown[0]}", Msg("unknown key (a head has W_Q, W_K and W_V)"))
                    trip = tuple(head.get(k) for k in ("W_Q", "W_K", "W_V"))
                elif isinstance(head, Head):
                    trip = (head.W_Q, head.W_K, head.W_V)
                elif isinstance(head, (list, tuple)) and len(head) == 3:
                    trip = tuple(head)
                else:
                    raise ProblemError(f"heads[{h}]", Msg("expected a table with W_Q, W_K and W_V"))
                raw.append((f"heads[{h}].", trip))
            if W_O is None:
                raise ProblemError("W_O", Msg("missing: with [[heads]], the output projection W_O is required"))
        else:
            if W_O is not None:
                raise ProblemError("W_O", Msg('W_O is only used with several heads ([[heads]]) or in a block (block = "post-ln" '
                                             'or "pre-ln")'))
            raw = [("", (W_Q, W_K, W_V))]

        built = []
        first_shapes = None
        for prefix, (wq, wk, wv) in raw:
            mats = []
            for name, w in zip(("W_Q", "W_K", "W_V"), (wq, wk, wv)):
                if w is None:
                    raise ProblemError(prefix + name, Msg("missing: expected a matrix with one row per column of X"))
                m = _matrix(prefix + name, w, places, seen)
                if len(m) != d_model:
                    raise ProblemError(prefix + name, Msg("expected {d_model} rows (X has {d_model} columns), got {got}",
                                                         d_model=d_model, got=len(m)))
                _check_dim(prefix + name, len(m[0]), Msg("the number of columns"))
                mats.append(m)
            if len(mats[1][0]) != len(mats[0][0]):
                raise ProblemError(prefix + "W_K", Msg("expected {d_k} columns like W_Q (queries and keys must have the same "
                                                      "length d_k), got {got}", d_k=len(mats[0][0]), got=len(mats[1][0])))
            shapes = tuple(_shape(m) for m in mats)
            if first_shapes is None:
                first_shapes = shapes
            elif shapes != first_shapes:
                raise ProblemError(prefix.rstrip("."), Msg("every head must have the same shapes as head 1 ({first} for "
                                                          "W_Q/W_K/W_V), got {got}",
                                                          first="/".join(f"{r}×{c}" for r, c in first_shapes),
                                                          got="/".join(f"{r}×{c}" for r, c in shapes)))
            built.append(Head(*mats))

        Wo = None
        if multihead:
            Wo = _matrix("W_O", W_O, places, seen)
            need = len(built) * len(built[0].W_V[0])
            if len(Wo) != need:
                raise ProblemError("W_O", Msg("expected {need} rows ({heads} heads × d_v = {d_v}), got {got}", need=need,
                                             heads=len(built), d_v=len(built[0].W_V[0]), got=len(Wo)))
            _check_dim("W_O", len(Wo[0]), Msg("the number of columns"))

        toks = _tokens("tokens", tokens, n, "X")
        toks_enc = _tokens("tokens_enc", tokens_enc, len(Xe), "X_enc", "e") if cross else None

        if not isinstance(title, str):
            raise ProblemError("title", Msg("expected a string, got {got}", got=shown(title)))
        if len(title) > LIMITS["title"]:
            raise ProblemError("title", Msg("longer than {limit} characters", limit=LIMITS['title']))

        if isinstance(scale, str) and scale in ("sqrt", "none"):
            sc = scale
        else:
            if isinstance(scale, str) and scale.strip() in ("sqrt", "none"):
                sc = scale.strip()
            else:
                try:
                    f, _ = to_fraction(scale)
                except EntryError:
                    raise ProblemError("scale", Msg('expected "sqrt", "none" or a positive number, got {got}',
                                                     got=shown(scale))) from None
                if f <= 0 or f > LIMITS["entry"]:
                    raise ProblemError("scale", Msg("expected a positive number (at most {limit}), got {got}",
                                                     limit=LIMITS['entry'], got=shown(scale)))
                sc = f
        if mask not in ("none", "causal"):
            raise ProblemError("mask", Msg('expected "none" or "causal", got {got}', got=shown(mask)))
        if isinstance(decimals, bool) or not isinstance(decimals, int) or not 0 <= decimals <= LIMITS["decimals"]:
            raise ProblemError("decimals", Msg("expected a whole number from 0 to {limit}, got {got}", limit=LIMITS['decimals'],
                                                got=shown(decimals)))

        if display not in DISPLAYS:
            raise ProblemError("display", Msg('expected "auto", "exact" or "decimal", got {got}', got=shown(display)))

        s("X", Xm)
        s("heads", tuple(built))
        s("W_O", Wo)
        s("tokens", toks)
        s("title", title)
        s("scale", sc)
        s("mask", mask)
        s("decimals", decimals)
        s("multihead", multihead)
        s("display_option", display)
        s("display", display if display != "auto" else ("decimal" if seen else "exact"))
        s("attention", attention)
        s("X_enc", Xe)
        s("tokens_enc", toks_enc)

    # -- shapes
    @property
    def n(self) -> int:
        """The tokens of X: the queries' side (the decoder's, in cross-attention)."""
        return len(self.X)

    @property
    def cross(self) -> bool:
        return self.attention == "cross"

    @property
    def n_kv(self) -> int:
        """The tokens the keys and values come from: X_enc's in cross-attention, else X's."""
        return len(self.X_kv)

    @property
    def X_kv(self) -> Matrix:
        """The input the keys and values are computed from: X_enc in cross-attention, else X."""
        return self.X_enc if self.cross else self.X

    @property
    def tokens_kv(self) -> tuple[str, ...]:
        return self.tokens_enc if self.cross else self.tokens

    @property
    def d_model(self) -> int:
        return len(self.X[0])

    @property
    def d_k(self) -> int:
        return len(self.heads[0].W_Q[0])

    @property
    def precision(self) -> Precision:
        """The places of its answers and of the values carried in its worked lines."""
        return Precision.of(self.decimals)

    @property
    def d_v(self) -> int:
        return len(self.heads[0].W_V[0])

    @property
    def slug(self) -> str:
        base = self.title or (Path(self.source).stem if self.source else "problem")
        slug = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")
        return slug[:60] or "problem"

    # -- reading
    @classmethod
    def from_dict(cls, data: dict, source: str | None = None, *, _work_limit: bool = True) -> "Problem":
        """The problem of a problem file's table; with ``[[blocks]]``, a :class:`Chain` of them. An error names the
        file's ``lang`` when it has a valid one (``ProblemError.lang``: the language the CLI shows it in)."""
        if not isinstance(data, dict):
            raise ProblemError("", Msg("expected a table of keys (title, tokens, X, W_Q, …)"), source)
        try:
            return cls._from_dict(data, source, _work_limit)
        except ProblemError as exc:
            if exc.lang is None:
                exc.lang = _lang_or_none(data.get("lang"))
            raise

    @classmethod
    def _from_dict(cls, data: dict, source, _work_limit) -> "Problem":
        if "blocks" in data:        # chained blocks ([[blocks]]): a Chain of problems
            return Chain.from_dict(data, source=source)
        unknown = sorted(set(data) - TOP_KEYS)
        if unknown:
            raise ProblemError(unknown[0], Msg("unknown key (expected some of: {keys})", keys=", ".join(sorted(TOP_KEYS))), source)
        block = {k: data[k] for k in TBLOCK_KEYS if k in data} or None
        if block is not None and "block" not in block:
            k = next(k for k in TBLOCK_KEYS if k in block)
            raise ProblemError(k, Msg('{key} is only used in a Transformer block: add block = "post-ln" or "pre-ln"', key=k),
                               source)
        return cls(
            data.get("X"), data.get("W_Q"), data.get("W_K"), data.get("W_V"),
            heads=data.get("heads"), W_O=data.get("W_O"), tokens=data.get("tokens"),
            title=data.get("title", ""), scale=data.get("scale", "sqrt"), mask=data.get("mask", "none"),
            decimals=data.get("decimals", 2), display=data.get("display", "auto"), train=data.get("train"), source=source,
            attention=data.get("attention", "self"), X_enc=data.get("X_enc"), tokens_enc=data.get("tokens_enc"),
            block=block, lang=data.get("lang"), _places_limit=LIMITS["places"], _work_limit=_work_limit,
        )

    @classmethod
    def from_text(cls, text: str, source: str = "<problem>", fmt: str | None = None) -> "Problem":
        from .readfile import InputError, loads_json, loads_toml

        text = text.removeprefix("\ufeff")   # a BOM, as Windows editors write it
        fmt = fmt or ("json" if source.endswith(".json") or text.lstrip().startswith("{") else "toml")
        try:
            data = loads_json(text, source) if fmt == "json" else loads_toml(text, source)
        except InputError as exc:
            raise ProblemError("", exc.message, source) from None
        return cls.from_dict(data, source=source)

    @classmethod
    def from_file(cls, path) -> "Problem":
        from .readfile import InputError, read_text

        src = str(path)
        try:
            text = read_text(path, LIMITS["file_bytes"], Msg("a .toml or .json problem file"))
        except InputError as exc:
            raise ProblemError("", exc.message, src) from None
        return cls.from_text(text, src, "json" if Path(path).suffix.lower() == ".json" else "toml")

    # -- writing
    def to_dict(self) -> dict:
        """The problem with the same keys as a problem file (exact entries: ints, decimal or fraction strings)."""
        mat = lambda m: [[_frac_text(x) for x in row] for row in m]  # noqa: E731
        d: dict[str, Any] = {"title": self.title, "tokens": list(self.tokens), "X": mat(self.X)}
        if self.cross:
            d = {"title": self.title, "attention": "cross", "tokens": list(self.tokens), "X": mat(self.X),
                 "tokens_enc": list(self.tokens_enc), "X_enc": mat(self.X_enc)}
        d.update(self.weights_dict())
        d["scale"] = self.scale if isinstance(self.scale, str) else _frac_text(self.scale)
        d["mask"] = self.mask
        d["decimals"] = self.decimals
        if self.display_option != "auto":
            d["display"] = self.display_option
        if self.train is not None:
            d["train"] = {"loss": self.train.loss, "lr": exact_text(self.train.lr)}
            if self.train.target is not None:
                d["train"] = {"target": mat(self.train.target), **d["train"]}
        if self.block is not None:
            d.update(self.block.to_dict())
        if self.lang is not None:
            d["lang"] = self.lang
        return d

    def weights_dict(self) -> dict:
        """The weights as a problem file writes them: W_Q, W_K, W_V, or ``heads`` and W_O."""
        mat = lambda m: [[_frac_text(x) for x in row] for row in m]  # noqa: E731
        if self.multihead:
            return {"heads": [{"W_Q": mat(h.W_Q), "W_K": mat(h.W_K), "W_V": mat(h.W_V)} for h in self.heads],
                    "W_O": mat(self.W_O)}
        h = self.heads[0]
        return {"W_Q": mat(h.W_Q), "W_K": mat(h.W_K), "W_V": mat(h.W_V)}

    def with_weights(self, heads) -> "Problem":
        """The same problem with other (exact) weights for each head: *heads* a list of (W_Q, W_K, W_V)."""
        kw = dict(tokens=self.tokens, title=self.title, scale=self.scale, mask=self.mask, decimals=self.decimals,
                  display=self.display_option, train=self.train, source=self.source, attention=self.attention,
                  X_enc=self.X_enc, tokens_enc=self.tokens_enc, block=self.block, lang=self.lang)
        if self.multihead:
            return Problem(self.X, heads=list(heads), W_O=self.W_O, **kw)
        return Problem(self.X, *heads[0], **kw)

    def to_toml(self) -> str:
        """The problem as a TOML problem file."""
        import json

        d = self.to_dict()
        out = []
        q = lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, str) else str(v)  # noqa: E731
        row = lambda r: "[" + ", ".join(q(x) for x in r) + "]"  # noqa: E731
        mat = lambda m: "[" + ", ".join(row(r) for r in m) + "]"  # noqa: E731
        out.append(f"title = {q(d['title'])}")
        if "lang" in d:
            out.append(f"lang = {q(d['lang'])}")
        if "attention" in d:
            out.append(f"attention = {q(d['attention'])}")
        out.append("tokens = [" + ", ".join(q(t) for t in d["tokens"]) + "]")
        if "tokens_enc" in d:
            out.append("tokens_enc = [" + ", ".join(q(t) for t in d["tokens_enc"]) + "]")
        out.append(f"scale = {q(d['scale'])}")
        out.append(f"mask = {q(d['mask'])}")
        out.append(f"decimals = {d['decimals']}")
        if "display" in d:
            out.append(f"display = {q(d['display'])}")
        out.append(f"X = {mat(d['X'])}")
        if "X_enc" in d:
            out.append(f"X_enc = {mat(d['X_enc'])}")
        for k in TBLOCK_KEYS:       # a block's keys: top-level keys, so before any [[heads]] table
            if k in d:
                v = d[k]
                out.append(f"{k} = " + (q(v) if isinstance(v, str) else mat(v) if isinstance(v[0], list) else row(v)))
        if "heads" in d:
            out.append(f"W_O = {mat(d['W_O'])}")
            for h in d["heads"]:
                out.append("")
                out.append("[[heads]]")
                for k in ("W_Q", "W_K", "W_V"):
                    out.append(f"{k} = {mat(h[k])}")
        else:
            for k in ("W_Q", "W_K", "W_V"):
                out.append(f"{k} = {mat(d[k])}")
        if "train" in d:
            out += ["", "[train]"] + ([f"target = {mat(d['train']['target'])}"] if "target" in d["train"] else []) + [
                f"loss = {q(d['train']['loss'])}", f"lr = {q(d['train']['lr'])}"]
        return "\n".join(out) + "\n"


def exact_text(f: Fraction) -> str:
    """A rational as a string a problem file reads back exactly ("1/10", "0.5", "2")."""
    t = _frac_text(f)
    return str(t)


# ---------------------------------------------------------------- a chain of blocks ([[blocks]])

#: what a problem with [[blocks]] may have at its top level (the rest goes in each block)
CHAIN_TOP_KEYS = {"title", "tokens", "X", "tokens_enc", "X_enc", "scale", "decimals", "display", "blocks"}
#: what goes in a block
BLOCK_KEYS = {"attention", "mask", "W_Q", "W_K", "W_V", "heads", "W_O"}
MAX_BLOCKS = 4


class Block(namedtuple("Block", (
        "attention",        # str
        "mask",             # str
        "W_Q",              # Any
        "W_K",              # Any
        "W_V",              # Any
        "heads",            # Any
        "W_O",              # Any
))):
    """One block's own table: its attention ("self" or "cross"), mask, heads (W_Q, W_K, W_V as given) and W_O."""

    __slots__ = ()


def block_name(p: Problem) -> str:
    """What a block does, in words: "masked self-attention", "cross-attention to the encoder", "(2 heads)" (in the
    current language: :mod:`worked.i18n`)."""
    from .i18n import tr as _

    if p.cross:
        what = _("cross-attention to the encoder")
    else:
        what = _("masked self-attention") if p.mask == "causal" else _("self-attention")
    return what + (_(" ({n} heads)", n=len(p.heads)) if p.multihead else "")


def block_title(p: Problem, k: int) -> str:
    from .i18n import tr as _

    return _("Block {k}: {name}", k=k, name=block_name(p))


def carried_from(k: int, decimals: int) -> str:
    """The sentence where block *k* (≥ 2) starts: where its X comes from."""
    from .i18n import ngettext

    return ngettext("X for block {k} is block {before}'s output Z, rounded to {n} place as in the key.",
                    "X for block {k} is block {before}'s output Z, rounded to {n} places as in the key.", decimals,
                    k=k, before=k - 1)


def remap_block_error(exc: ProblemError, k: int) -> ProblemError:
    """A block's ProblemError with its field named in the file: ``W_Q`` → ``blocks[2].W_Q``."""
    field = exc.field or ""
    head = field.split(".")[0].split("[")[0]
    if head in BLOCK_KEYS:
        field = f"blocks[{k}].{field}"
    return ProblemError(field, exc.message)


class Chain:
    """A problem of chained attention blocks (``[[blocks]]``), exact and validated. :meth:`problem` gives
    block k's :class:`Problem` for an X; :func:`worked.chain.solve_chain` solves them in turn."""

    def __init__(self, X, blocks, *, tokens=None, title="", scale="sqrt", decimals=2, display="auto",
                 X_enc=None, tokens_enc=None, source=None, _places_limit=LIMITS["places"]):
        try:
            self._init(X, blocks, tokens, title, scale, decimals, display, X_enc, tokens_enc, _places_limit)
        except ProblemError as exc:
            raise (exc.with_source(source) if source else exc) from None
        self.source = source

    def _init(self, X, blocks, tokens, title, scale, decimals, display, X_enc, tokens_enc, places):
        if not isinstance(blocks, (list, tuple)) or not blocks:
            raise ProblemError("blocks", Msg("expected a list of tables ([[blocks]]), each with attention, mask and its weights"))
        if len(blocks) > MAX_BLOCKS:
            raise ProblemError("blocks", Msg("{n} blocks is more than a hand exercise allows (at most {limit})", n=len(blocks),
                                            limit=MAX_BLOCKS))
        specs = []
        for k, b in enumerate(blocks, 1):
            if isinstance(b, Block):
                specs.append(b)
                continue
            if not isinstance(b, dict):
                raise ProblemError(f"blocks[{k}]", Msg("expected a table with attention, mask and W_Q, W_K, W_V (or heads and W_O)"))
            unknown = sorted(set(b) - BLOCK_KEYS)
            if unknown:
                raise ProblemError(f"blocks[{k}].{unknown[0]}", Msg("unknown key (a block has some of: {keys})",
                                                                   keys=", ".join(sorted(BLOCK_KEYS))))
            if b.get("attention", "self") not in ATTENTIONS:
                raise ProblemError(f"blocks[{k}].attention", Msg('expected "self" or "cross", got {got}', got=shown(b["attention"])))
            specs.append(Block(b.get("attention", "self"), b.get("mask", "none"), b.get("W_Q"), b.get("W_K"), b.get("W_V"),
                               b.get("heads"), b.get("W_O")))
        crosses = [k for k, b in enumerate(specs, 1) if b.attention == "cross"]
        if crosses and X_enc is None:
            raise ProblemError("X_enc", Msg('missing: blocks[{k}] has attention = "cross", so the encoder side X_enc '
                                       "(one row per encoder token; its keys and values come from it) is required",
                                       k=crosses[0]))
        if not crosses:
            for key, v in (("X_enc", X_enc), ("tokens_enc", tokens_enc)):
                if v is not None:
                    raise ProblemError(key, Msg('{key} is only used when a block has attention = "cross"', key=key))
        if X is None:
            raise ProblemError("X", Msg("missing: the input matrix X of block 1 (one row per token) is required"))
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
                raise ProblemError(f"blocks[{k}].{w}", Msg("expected {width} rows (block {k}'s input is block {before}'s output Z, "
                                                          "which has {width} columns: its d_model), got {got}",
                                                          width=width, k=k, before=k - 1, got=rows))
            if b.attention == "cross" and len(self.X_enc[0]) != width:
                raise ProblemError("X_enc", Msg("expected {width} columns (block {k}'s d_model: block {before}'s output Z has "
                                               "{width} columns), got {got}", width=width, k=k, before=k - 1,
                                               got=len(self.X_enc[0])))
            zeros = [[0] * width for _ in range(prev.n)]      # the shapes only: its X comes from block k−1's answer
            prev = self._build(k, zeros, None, None, None, places, display)
            width = _out_width(prev)
        self.first = first
        w = work(self)
        if w.worst > LIMITS["work"]:
            raise ProblemError("blocks", Msg("{n} blocks are more work than a command may take (about {seconds} s, at most "
                                       "{limit} s): use fewer or smaller blocks", n=len(specs),
                                       seconds=f"{w.worst / 1000:.0f}", limit=f"{LIMITS['work'] / 1000:.0f}"))

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
            raise remap_block_error(exc, k) from None

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
    def multihead(self) -> bool:
        """True when some block has several heads."""
        return any(b.heads is not None for b in self.blocks)

    #: a chain has no training step ([train] is refused with [[blocks]])
    train = None

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
                raise ProblemError(key, Msg("with [[blocks]], {key} goes in each block (blocks[1].{key}, …), not at the top "
                                       "level", key=key), source)
        if "train" in data:
            raise ProblemError("train", Msg("a training step through [[blocks]] is not supported: leave out [train], or "
                                       "train one block as a problem of its own"), source)
        unknown = sorted(set(data) - CHAIN_TOP_KEYS)
        if unknown:
            raise ProblemError(unknown[0], Msg("unknown key (with [[blocks]], expected some of: {keys})",
                                              keys=", ".join(sorted(CHAIN_TOP_KEYS))), source)
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
            blocks.append({"attention": p.attention, "mask": p.mask, **p.weights_dict()})
        d["blocks"] = blocks
        return d

    def to_toml(self) -> str:
        """The chain as a TOML problem file (``Chain.from_dict`` of its table reads it back)."""
        import json

        d = self.to_dict()
        q = lambda v: json.dumps(v, ensure_ascii=False) if isinstance(v, str) else str(v)  # noqa: E731
        row = lambda r: "[" + ", ".join(q(x) for x in r) + "]"  # noqa: E731
        mat = lambda m: "[" + ", ".join(row(r) for r in m) + "]"  # noqa: E731
        out = [f"title = {q(d['title'])}", "tokens = " + row(d["tokens"])]
        if "tokens_enc" in d:
            out.append("tokens_enc = " + row(d["tokens_enc"]))
        out += [f"scale = {q(d['scale'])}", f"decimals = {d['decimals']}"]
        if "display" in d:
            out.append(f"display = {q(d['display'])}")
        out.append(f"X = {mat(d['X'])}")
        if "X_enc" in d:
            out.append(f"X_enc = {mat(d['X_enc'])}")
        for b in d["blocks"]:
            out += ["", "[[blocks]]", f"attention = {q(b['attention'])}", f"mask = {q(b['mask'])}"]
            if "heads" in b:
                out.append(f"W_O = {mat(b['W_O'])}")
                for h in b["heads"]:
                    out += ["", "[[blocks.heads]]"] + [f"{k} = {mat(h[k])}" for k in ("W_Q", "W_K", "W_V")]
            else:
                out += [f"{k} = {mat(b[k])}" for k in ("W_Q", "W_K", "W_V")]
        return "\n".join(out) + "\n"

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
    return len(w) if isinstance(w, (list, tuple)) else None


def _out_width(p: Problem) -> int:
    return len(p.W_O[0]) if p.multihead else p.d_v



# ---------------------------------------------------------------- the work of a problem

class Work(namedtuple("Work", (
        "answer",           # int
        "check",            # int
        "sheet",            # int
))):
    """The predicted CPU time, in milliseconds, of each command on a problem, from its shape alone (tokens,
    d_model, d_k, d_v, heads, the columns of W_O, [train]): ``answer`` is solving it with its JSON or the
    page's view (``worked solve``, ``/api/solve``), ``check`` solving it and checking an answer to every
    matrix, every one wrong (``worked check``, ``/api/check``), ``sheet`` its worksheet and key as HTML,
    LaTeX and PDF (``worked sheet``). Each is an upper bound fitted to measurements on a 2-core laptop
    (``benchmarks/bench_train_limits.py``); the entries' digits change them little (exact integers, shown
    with exact forms, are the slowest)."""

    __slots__ = ()

    @property
    def worst(self) -> int:
        return max(self)

    @property
    def slowest(self) -> str:
        return max(self._fields, key=lambda f: getattr(self, f))


def counts(n: int, d_model: int, d_k: int, d_v: int, heads: int = 1, d_out: int | None = None,
           train: bool = False, multihead: bool | None = None) -> dict[str, int]:
    """What the commands' time grows with, counted from the shape: the terms of :data:`_WORK`."""
    h, dm, dk, dv = heads, d_model, d_k, d_v
    multi = heads > 1 if multihead is None else multihead
    do = (d_out if d_out is not None else dm) if multi else dv
    t = 1 if train else 0
    # the passes: products of the forward pass, of the backward pass (and the pass after the update), e^x, the
    # band of each output entry (n² work per entry), the inputs read
    fops = h * (n * dm * (2 * dk + dv) + n * n * (dk + dv)) + (n * h * dv * do if multi else 0)
    bops = t * (h * (n * n * (2 * dk + 2 * dv) + 4 * n * n + dm * n * (2 * dk + dv)) + (2 * n * do * h * dv if multi else 0)
                + fops)
    inputs = n * dm + h * dm * (2 * dk + dv) + (h * dv * do if multi else 0) + t * n * do
    mistakes = 8 + 9 * t + 2 * multi                  # the mistakes a check tries (causal), each a point and a banded pass
    passes = 2 + 2 * mistakes
    stages = h * (7 + 12 * t) + 2 * multi + 4 * t     # the stages of a pass, the steps of a page (each some fixed work)
    # what the pages show: every matrix (a training step adds its gradients and new weights)
    shown = h * (n * (2 * dk + dv) + 3 * n * n + n * dv) + (n * h * dv + n * do if multi else 0)
    if t:
        shown += n * do + (n * h * dv if multi else 0) + h * (n * dv + 4 * n * n + 2 * n * dk + 2 * dm * (2 * dk + dv))
    # the exact forms written out: each weight's row total, each Z entry's sum; with W_O each output entry holds
    # every head's Z
    exact = h * n ** 3 + h * n * n * dv
    return {"a_shown": shown, "a_exact": exact, "a_out": n * do * h * dv * n if multi else 0, "a_ops": fops + bops,
            "c_ops": passes * (fops + bops), "c_exp": passes * h * n * n * (1 + t),
            "c_band": passes * h * n ** 3 * dv * (1 + t), "c_in": passes * inputs, "c_shown": shown,
            "c_stages": passes * stages, "a_stages": stages,
            "s_shown": shown, "s_in": inputs, "s_exact": exact, "s_stages": stages}


ANSWER_TERMS = ("a_shown", "a_exact", "a_out", "a_ops", "a_stages")
CHECK_TERMS = ("c_ops", "c_exp", "c_band", "c_in", "c_shown", "c_stages")
SHEET_TERMS = ("s_shown", "s_in", "s_exact", "s_stages")

# milliseconds per unit of each count (fitted to measurements, then raised so that every measured problem is at
# or below its prediction: `benchmarks/bench_train_limits.py --fit` measures them and prints these)
_WORK = {"a0": 370.0, "a_shown": 0.0, "a_exact": 0.242, "a_out": 0.396, "a_ops": 0.206, "a_stages": 8.85,
         "c0": 40.1, "c_ops": 0.0123, "c_exp": 0.354, "c_band": 0.00165, "c_in": 0.0, "c_shown": 0.0, "c_stages": 0.763,
         "s0": 77.1, "s_shown": 1.53, "s_in": 1.18, "s_exact": 0.64, "s_stages": 61.6}


def digits_factor(digits: int) -> float:
    """How much longer the exact forms and pages get with entries of *digits* digits (numerator and denominator
    together: 1 for 0, ±1, …, 9; 3 for 4/13; 6 for 999/997): 1.15 per digit more (measured 1.5–1.8 for 6)."""
    return 1 + 0.15 * (max(digits, 1) - 1)


def work_of(n: int, d_model: int, d_k: int, d_v: int, heads: int = 1, d_out: int | None = None,
            train: bool = False, multihead: bool | None = None, digits: int = 3) -> Work:
    """The :class:`Work` of a problem of this shape (*d_out*: the columns of W_O; *multihead*: [[heads]] with
    W_O, by default when heads > 1; *digits*: of its longest entry, see :func:`digits_factor`; 3 when unknown)."""
    c, C = counts(n, d_model, d_k, d_v, heads, d_out, train, multihead), _WORK
    f = digits_factor(digits)
    a, ch, sh = (C[m + "0"] + sum(C[k] * c[k] for k in terms)
                 for m, terms in (("a", ANSWER_TERMS), ("c", CHECK_TERMS), ("s", SHEET_TERMS)))
    return Work(math.ceil(a * f), math.ceil(ch), math.ceil(sh * f))


def entry_digits(problem: "Problem") -> int:
    """The digits of the problem's longest input entry (numerator and denominator together)."""
    mats = [problem.X] + ([problem.X_enc] if problem.cross else []) + [m for hd in problem.heads for m in hd] + ([problem.W_O] if problem.multihead else [])
    if problem.train is not None and problem.train.target is not None:
        mats.append(problem.train.target)
    return max(len(str(abs(x.numerator))) + (len(str(x.denominator)) if x.denominator != 1 else 0)
               for m in mats for row in m for x in row)


def work(problem: "Problem") -> Work:
    """The :class:`Work` of *problem* (see :func:`work_of`); of a chain of blocks, the sum of its blocks'."""
    if hasattr(problem, "block_problems"):
        return Work(*(sum(w) for w in zip(*(work(p) for p in problem.block_problems()))))
    return work_of(max(problem.n, problem.n_kv), problem.d_model, problem.d_k, problem.d_v, len(problem.heads),
                   len(problem.W_O[0]) if problem.multihead else None, problem.train is not None, problem.multihead,
                   entry_digits(problem))


_DOING = {"answer": Msg("solving it (worked solve, /api/solve)"),
          "check": Msg("checking answers to it (worked check, /api/check)"),
          "sheet": Msg("its worksheet and key (worked sheet)")}


def _check_work(p: "Problem") -> None:
    """A ProblemError, before any work, when a command on *p* would take longer than the limit allows."""
    w = work(p)
    limit = LIMITS["work"]
    if w.worst <= limit:
        return
    shape = dict(d_model=p.d_model, d_k=p.d_k, d_v=p.d_v, heads=len(p.heads),
                 d_out=len(p.W_O[0]) if p.multihead else None, multihead=p.multihead, digits=entry_digits(p))
    train = p.train is not None
    fits = [k for k in range(p.n - 1, 0, -1) if work_of(k, train=train, **shape).worst <= limit]
    if fits:
        hint = (Msg("with these widths and heads at most {n} tokens fit", n=fits[0]) if p.multihead else
                Msg("with these widths at most {n} tokens fit", n=fits[0]))
    else:
        hint = Msg("use smaller d_model, d_k, d_v or fewer heads") if p.multihead else Msg("use smaller d_model, d_k, d_v")
    dims = dict(n=p.n, d_model=p.d_model, d_k=p.d_k, d_v=p.d_v)
    about = (Msg("{n} tokens, d_model {d_model}, d_k {d_k}, d_v {d_v}, {heads} heads", heads=len(p.heads), **dims)
             if p.multihead else Msg("{n} tokens, d_model {d_model}, d_k {d_k}, d_v {d_v}", **dims))
    need = Msg("{doing} would take about {seconds} s (at most {limit} s, predicted from the shape; see the README's "
               "limits)", doing=_DOING[w.slowest], seconds=f"{w.worst / 1000:.0f}", limit=f"{limit / 1000:.0f}")
    if train and work_of(p.n, **shape).worst <= limit:
        raise ProblemError("train", Msg("a training step on {about} is more work than a command may take: {need}; {hint}, "
                                        "or leave out [train]", about=about, need=need, hint=hint))
    raise ProblemError("heads" if p.multihead else "X",
                       Msg("{about} with a training step is more work than a command may take: {need}; {hint}",
                           about=about, need=need, hint=hint) if train else
                       Msg("{about} is more work than a command may take: {need}; {hint}", about=about, need=need,
                           hint=hint))


def builtin_path() -> Path:
    """The built-in example: Part 9's "cats chase mice"."""
    return Path(__file__).with_name("data") / "cats-chase-mice.toml"


def load(path=None) -> Problem:
    """Load a problem file, or the built-in example when *path* is None."""
    if path is None:
        return Problem.from_file(builtin_path())
    return Problem.from_file(path)
