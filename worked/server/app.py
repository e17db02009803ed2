"""``worked serve``: the web page for students and teachers, as a Starlette (ASGI) app run by uvicorn.

Routes (all JSON unless noted; errors are ``{"error": message}`` with a 4xx/5xx status, never a trace):

``GET /``                                   the page (static HTML, CSS, JS and the math font; no CDN)
``GET /api/info``                           mode, problem list, features, limits
``GET /api/problems/{name}``                a problem of the ``--problems`` folder, with what the page shows
``GET /api/variants/{code}``                a quiz variant by its code (when the folder holds a quiz)
``POST /api/view``     ``{"problem"}``      a problem checked and laid out for the page (teacher view)
``POST /api/solve``    ``{"problem"}``      the JSON of ``worked solve --format json`` (``?view=1`` adds MathML)
``POST /api/check``    ``{"problem", "answers"[, "tolerance"]}``  the JSON of ``worked check --format json`` (``?view=1``
                                            adds the diagnoses' math as MathML); ``{"variant", "answers"}``: a quiz variant, marked as
                                            ``worked grade`` marks it (a mixed quiz's: ``answers`` a list, a table per part)
``POST /api/new``      ``{options of worked new, "seed"}``        a random problem
``POST /api/download`` ``{"problem", "document", "format"}``      worksheet / answer-key as pdf, html or tex;
                                            notebook / exercise as ipynb
``POST /api/quiz``     ``{"spec", "seed", "count" | "roster", "formats"}``  the teacher's quiz builder: ``worked quiz``
                                            on the spec (TOML text) → one zip (its manifest.json the command's)
``POST /api/quiz-form`` ``{"spec"}``          the quiz builder's form (the spec's tables) → its TOML, the matrices
                                            for the ask picker and each question's error (``spec`` of /api/quiz may
                                            be those tables too: the server writes the TOML)
``GET /api/quiz-specs/{name}``              a quiz spec of the folder as TOML text and as its tables (the builder
                                            starts from it)
``GET /download/problems/{name}/{document}.{format}``, ``GET /download/variants/{code}/{document}.{format}``
(also ``notebook.ipynb`` and ``exercise.ipynb``: the Jupyter/Colab notebook, with the answers or as an exercise)

With ``no_solutions=True`` nothing that holds an expected value leaves the server: ``/api/solve``,
answer-key and notebook downloads answer 403, and check reports keep only verdicts and diagnoses.

Safety: request bodies are limited (``max_body``), problems go through the same validation and
limits as files, solving, checking, laying out pages and rendering run in worker processes (:class:`Engine`:
two bounded lanes, a problem sent to the worker that keeps its work, a worker killed when its job passes the
deadline, 503 with Retry-After when a lane is full), a request must arrive within ``read_timeout`` and one
address holds at most ``client_connections`` connections (:mod:`worked.server.connections`),
the Host header is checked (``allowed_hosts``), names and codes are looked up in a table built from the folder listing (never joined into a path), and the page
inserts user text with ``textContent`` only (MathML is printed from the equation trees of
:mod:`worked.eq` by :mod:`worked.printers` and allow-listed).

What the page shows is the page model of the worksheets and keys (:mod:`worked.render.view`):
``problem_page`` for a problem (given matrices, facts, answer grids) and ``build`` for a worked
solution; this module only prints its trees as text and MathML.
"""
from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import functools
import json
import logging
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pebble import ProcessExpired
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .. import __version__, i18n
from ..errors import WorkedError
from ..exporters import EXPORTERS, of_scope, words
from ..i18n import Msg
from ..problem import LIMITS, Chain, Problem, builtin_path, work
from . import connections, jobs
from .views import points as _points

log = logging.getLogger("worked.server")

STATIC = Path(__file__).with_name("static")
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,79}")
CODE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,39}")
DOCUMENTS = ("worksheet", "answer-key")
NOTEBOOKS = ("notebook", "exercise")      # as .ipynb: with the answers, or the exercise (checks kept)
NOTEBOOK_TYPE = EXPORTERS["ipynb"].media_type
FORMATS = {e.name: e.media_type for e in of_scope("sheet")}   # pdf, html, tex: a sheet's formats and media types

CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
       "font-src 'self' data:; connect-src 'self'; frame-src 'self' blob: about:; object-src 'none'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'self'")


@dataclass
class Config:
    """How the server behaves. ``problems_dir`` None means only the built-in Part 9 example."""

    problems_dir: Path | None = None
    no_solutions: bool = False
    solve_timeout: float = 20.0     # seconds for solving or checking one request; then its worker is killed
    render_timeout: float = 90.0    # seconds for one worksheet or key (PDF takes the longest)
    max_body: int = 256 * 1024      # bytes in a request body
    quick_workers: int = 2          # worker processes for small problems (cost ≤ quick_cost)
    heavy_workers: int = 1          # worker processes for large problems and rendered files
    quick_cost: int = 1100          # largest cost() on the quick lane: predicted ms (Part 9 470, with [train] 1,080)
    quick_queue: int = 512          # quick jobs queued or running before the server answers 503
    heavy_queue: int = 8            # heavy jobs queued or running before the server answers 503
    max_tasks: int = 200            # jobs a worker runs before a fresh one replaces it (bounds its memory)
    cache_bytes: int = 32 * 2**20   # bytes of answers (JSON, files) kept to answer repeated requests
    check_rate: int = 60            # with no_solutions: checks per client address per minute
    allowed_hosts: list | None = None   # Host header values accepted (None: any; the CLI always sets it)
    read_timeout: float = 5.0       # seconds a client has to send a whole request, head and body (connections.py)
    client_connections: int = 256   # connections open at once from one client address (connections.py)
    lang: str | None = None         # the page's language when the browser asks for none we have (None: English)

    def to_env(self) -> str:
        d = {k: (str(v) if isinstance(v, Path) else v) for k, v in self.__dict__.items()}
        return json.dumps(d)

    @classmethod
    def from_env(cls, text: str) -> "Config":
        d = json.loads(text)
        if d.get("problems_dir"):
            d["problems_dir"] = Path(d["problems_dir"])
        return cls(**d)


# a full lane's answer: a whole sentence for each lane (its name is a word of the sentence)
BUSY = {"quick": lambda n: Msg("the server is busy ({n} quick jobs waiting); try again in a moment", n=n),
        "heavy": lambda n: Msg("the server is busy ({n} heavy jobs waiting); try again in a moment", n=n)}


class ApiError(Exception):
    """An answer other than 200: *message* a :class:`worked.i18n.Msg` (or a :class:`WorkedError`), said in the
    request's language (:func:`_said`); *limit*: at most this many characters of it; *rename*: (a server path, the
    name the client knows it by)."""

    def __init__(self, status: int, message, *, limit: int | None = None, rename: tuple | None = None, **extra):
        super().__init__(str(message))
        self.status = status
        self.message = message
        self.limit = limit
        self.rename = rename
        self.extra = extra


def _said(message, lang: str | None, limit: int | None = None, rename: tuple | None = None) -> str:
    """*message* (a :class:`worked.i18n.Msg`, a :class:`WorkedError` or a plain string) in *lang* (None: English),
    a server path in it named as the client knows it (*rename*), cut at *limit* characters."""
    loc = i18n.get(lang)
    text = message.localized(loc) if isinstance(message, WorkedError) else i18n.localized_text(message, loc)
    text = text.replace(*rename) if rename else text
    return text[:limit] if limit else text


def _error(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"error": message, **extra}, status_code=status)


def problem_key(problem: Problem) -> str:
    return json.dumps(problem.to_dict(), sort_keys=True, ensure_ascii=False)


LANG_COOKIE = "worked_lang"


def request_lang(request: Request) -> str | None:
    """The language a request is answered in: ``?lang=de``, else the page's choice (the ``worked_lang`` cookie its
    selector sets), else the browser's Accept-Language (Babel's negotiation over the shipped languages), else the
    server's ``--lang``; None for English."""
    from .. import i18n

    for given in (request.query_params.get("lang"), request.cookies.get(LANG_COOKIE)):
        if given:
            try:
                lang = i18n.canonical(given[:20])
            except i18n.UnknownLanguage:
                continue
            return None if lang == i18n.SOURCE else lang
    header = request.headers.get("accept-language", "")[:500]
    if header:
        from babel.core import negotiate_locale

        prefs = []
        for k, part in enumerate(header.split(",")):
            tag, _, q = part.strip().partition(";q=")
            try:
                weight = float(q) if q else 1.0
            except ValueError:
                continue
            if tag and tag != "*" and weight > 0:
                prefs.append((-weight, k, tag.replace("-", "_")))
        shipped = list(i18n.languages())
        by_language = {code.partition("_")[0]: code for code in shipped}
        lang = None
        for _w, _k, tag in sorted(prefs):       # in the browser's order: the language itself, else the one the page
            lang = negotiate_locale([tag], shipped) or by_language.get(tag.partition("_")[0].lower())
            if lang:                           # has in another region's form (pt, pt-PT: pt_BR)
                break
        if lang:
            lang = i18n.canonical(lang)
            return None if lang == i18n.SOURCE else lang
    return getattr(request.app.state, "lang", None)


@functools.lru_cache(maxsize=1)
def _index_page():
    """static/index.html as a Jinja template (its words through ``_``; autoescaped)."""
    import jinja2

    from ..render.env import template_globals

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(STATIC)), autoescape=True, keep_trailing_newline=True)
    env.globals.update(template_globals("html"))
    return env.get_template("index.html")


@functools.lru_cache(maxsize=1)
def _js_msgids() -> tuple[str, ...]:
    """The words of static/app.js: its ``_t("…")`` strings, read with Babel's JavaScript extractor (as
    ``make extract`` reads them into worked.pot)."""
    from babel.messages.extract import extract

    with open(STATIC / "app.js", "rb") as f:
        return tuple(dict.fromkeys(m[1] for m in extract("javascript", f, keywords={"_t": None})
                                   if isinstance(m[1], str)))


def _js_catalogue():
    """The translations of app.js's words in the current language, as JSON for the page's ``<script id="i18n">``
    (``<`` written ``\\u003c``: the JSON cannot end the element)."""
    from markupsafe import Markup

    from .. import i18n

    loc = i18n.current()
    table = {} if loc.is_source else {m: loc.gettext(m) for m in _js_msgids() if loc.gettext(m) != m}
    return Markup(json.dumps(table, ensure_ascii=False, sort_keys=True).replace("<", "\\u003c"))


def _language_names() -> list[tuple[str, str]]:
    """The shipped languages, each named in itself (Babel's CLDR names): ("de", "Deutsch") …"""
    import babel

    from .. import i18n

    return [(code, babel.Locale.parse(code).get_display_name(code)) for code in i18n.languages()]


def _digest(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


def cost(problem: Problem) -> int:
    """The predicted milliseconds of the slowest request a lane runs for *problem*: solving it (with its JSON
    and page view) or checking answers to it (:func:`worked.problem.work`, the model the problem's own limit on
    work uses: it counts tokens, d_model, d_k, d_v, heads, W_O, a [train] step and the entries' digits). Part 9
    costs 470, with a training step 1,080; the largest problem allowed at most 10,000."""
    w = work(problem)
    return max(w.answer, w.check)


# ------------------------------------------------------------------ the worker processes, with deadlines

class Lane:
    """Worker processes with a bounded queue: one pebble process pool of one worker per worker, so a problem can
    go to the same worker each time (``affinity``: its problem's key), where its work is kept (:func:`jobs.checker`):
    a class checking one problem, or the checks after the variants' pages were opened, then cost only the
    answers' work. A job goes to its key's own worker unless that one has :attr:`SLACK` more jobs than the least
    busy, which then takes it (and keeps that problem's work too): a class on one problem uses every worker.
    A job without a key goes to the least busy worker.

    A job that passes its deadline is cancelled: pebble terminates the worker running it (and starts a new one),
    so the CPU it used is free again. When ``limit`` jobs are queued or running, a new one is refused with 503
    and ``Retry-After``."""

    SLACK = 2

    def __init__(self, name: str, workers: int, limit: int, max_tasks: int):
        self.name, self.workers, self.limit, self.max_tasks = name, workers, limit, max_tasks
        self.pools: list = []
        self.queued = [0] * workers    # jobs queued or running, per worker

    @property
    def pending(self) -> int:
        return sum(self.queued)

    def start(self):
        if not self.pools:
            import multiprocessing

            from pebble import ProcessPool

            from ..workers import die_with_parent

            # workers fork from a clean, single-threaded server process that has imported the solver,
            # not from this multi-threaded one
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["worked.server.warm"])
            # a worker's parent is the forkserver, which exits when this process does (even on kill -9)
            self.pools = [ProcessPool(max_workers=1, max_tasks=self.max_tasks, context=ctx, initializer=die_with_parent)
                          for _ in range(self.workers)]
        return self.pools

    def pick(self, affinity: str | None) -> int:
        least = min(range(self.workers), key=self.queued.__getitem__)
        if affinity is None:
            return least
        home = int(hashlib.sha256(affinity.encode()).hexdigest()[:8], 16) % self.workers
        return home if self.queued[home] <= self.queued[least] + self.SLACK else least

    async def run(self, fn: Callable, *args, timeout: float, what: str, affinity: str | None = None):
        if self.pending >= self.limit:
            raise ApiError(503, BUSY[self.name](self.pending), retry_after=max(1, round(timeout / 4)))
        pools = self.start()
        k = self.pick(affinity)
        self.queued[k] += 1
        fut = pools[k].schedule(fn, args=args, timeout=timeout)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            raise ApiError(504, Msg("{what} took longer than {s} s and was stopped; try a smaller problem", what=what,
                                    s=f"{timeout:g}")) from None
        except ProcessExpired:
            raise ApiError(500, Msg("{what} failed: the worker process ended (out of memory?)", what=what)) from None
        finally:
            fut.cancel()    # a job still queued is dropped, a job still running has its worker killed
            self.queued[k] -= 1

    def stop(self):
        for pool in self.pools:
            pool.stop()
        for pool in self.pools:
            pool.join(5)
        self.pools = []


class Engine:
    """Runs every solve, check, view and render in worker processes, on two lanes: small problems (a
    quiz's) on ``quick``, large problems and rendered files on ``heavy``, so a cheap request never waits
    behind an expensive one. What it answers is kept as bytes in one LRU cache bounded by its size in
    bytes (``cache_bytes``)."""

    def __init__(self, cfg: Config):
        from cachetools import LRUCache

        self.cfg = cfg
        self.quick = Lane("quick", cfg.quick_workers, cfg.quick_queue, cfg.max_tasks)
        self.heavy = Lane("heavy", cfg.heavy_workers, cfg.heavy_queue, cfg.max_tasks)
        self.cache = LRUCache(maxsize=cfg.cache_bytes, getsizeof=lambda v: len(v[1]) + 64)

    def lane(self, problem: Problem | None) -> Lane:
        return self.quick if problem is not None and cost(problem) <= self.cfg.quick_cost else self.heavy

    def family_lane(self, family: dict) -> Lane:
        """The lane for drawing a problem of *family* (the options of ``worked new``): by the cost of the
        problems it draws (an invalid family goes to the quick lane, whose worker answers its error at once)."""
        from .. import generate

        try:
            fam = generate.Family.from_dict(family, source="random problem", prefix="")
        except (WorkedError, TypeError, ValueError, RecursionError):
            return self.quick
        w = generate.family_work(fam)
        return self.quick if max(w.answer, w.check) <= self.cfg.quick_cost else self.heavy

    async def run(self, key: str | None, lane: Lane, fn: Callable, *args, timeout: float | None = None,
                  what: str = Msg("the request"), affinity: str | None = None, lang: str | None = None) -> Response:
        """*affinity*: the key of the problem the job works on (:func:`problem_key`), so it goes to the worker
        that keeps that problem's work; by default the first argument's, when it is a problem. *lang*: the language
        of the answer's words (:func:`request_lang`; None: English), part of its cache key."""
        if lang is not None:
            key = _digest(key, "lang", lang) if key is not None else None
        hit = self.cache.get(key) if key is not None else None
        if hit is None:
            if affinity is None and lane.workers > 1 and args and isinstance(args[0], (Problem, Chain)):
                affinity = problem_key(args[0])
            if lang is not None:
                fn, args = jobs.in_lang, (lang, fn, *args)
            hit = await lane.run(fn, *args, timeout=timeout or self.cfg.solve_timeout, what=what, affinity=affinity)
            if key is not None and hit[0] == 200 and len(hit[1]) + 64 <= self.cache.maxsize:
                self.cache[key] = hit
        status, body, media = hit
        return Response(body, status_code=status, media_type=media)

    def start(self):
        self.quick.start()
        self.heavy.start()

    def stop(self):
        self.quick.stop()
        self.heavy.stop()


class RateLimit:
    """At most ``per_minute`` requests per client address in any minute (a sliding window of the times
    of its last requests); the table forgets clients idle for a minute."""

    def __init__(self, per_minute: int):
        self.per_minute = per_minute
        self.seen: dict[str, collections.deque] = {}

    def check(self, client: str) -> None:
        now = time.monotonic()
        if len(self.seen) > 10_000:
            self.seen = {k: q for k, q in self.seen.items() if q and now - q[-1] < 60}
        q = self.seen.setdefault(client, collections.deque())
        while q and now - q[0] >= 60:
            q.popleft()
        if len(q) >= self.per_minute:
            raise ApiError(429, Msg("at most {n} checks a minute; try again in a moment", n=self.per_minute),
                           retry_after=max(1, int(60 - (now - q[0])) + 1))
        q.append(now)


# ------------------------------------------------------------------ the problems folder and quiz manifests

@dataclass
class Variant:
    code: str
    problem: dict
    title: str = ""
    questions: list = field(default_factory=list)   # [{"ask": "scores[2,3]", "name": "q1", "points": 1,
                                                    #   "tolerance": {"abs": 0.01, "rel": 0}}] (no expected values)
    parts: list | None = None   # a quiz that mixes families ([[parts]]): a Variant per part (its problem, title and
    #                             questions), in order; then *problem* is None and *questions* empty

    def problems(self) -> list:
        """The variant's problems (one per part, or its one problem) as :class:`Problem`; 422 when one is not."""
        out = []
        for k, v in enumerate(self.parts or [self], 1):
            try:
                out.append(Problem.from_dict(v.problem, source=f"variant {self.code}" + (f" part {k}" if self.parts else "")))
            except WorkedError as exc:
                raise ApiError(422, exc) from None
        return out


@dataclass
class Library:
    """Problem files of a folder by name, and quiz variants by code. Names and codes are keys of a
    table built from the listing; a name from a request is never joined into a path.

    A file that is a symbolic link to a file outside the folder (``week1.toml -> /home/me/secret.toml``) is
    not served: the folder is what the teacher chose to publish, and a link could publish anything the server
    may read. It is left out of the listing, and said in one line of the server's log the first time the
    folder is listed (when the server starts). A link to a file inside the folder is served as that file."""

    root: Path | None
    _cache: dict = field(default_factory=dict)
    _told: set = field(default_factory=set)

    def problems(self) -> dict[str, Path]:
        out: dict[str, Path] = {}
        if self.root is None or not self.root.is_dir():
            out["cats-chase-mice"] = builtin_path()
            return out
        for p in sorted(self.root.iterdir()):
            if p.suffix.lower() in (".toml", ".json") and NAME_RE.fullmatch(p.stem) and p.name != "manifest.json" \
                    and self._inside(p) and p.is_file() and not self._is_spec(p):
                out.setdefault(p.stem, p)
        return out

    def quiz_specs(self) -> dict[str, Path]:
        """The quiz specs of the folder by name (the teacher's quiz builder starts from one)."""
        if self.root is None or not self.root.is_dir():
            return {}
        return {p.stem: p for p in sorted(self.root.iterdir())
                if p.suffix.lower() == ".toml" and NAME_RE.fullmatch(p.stem) and self._inside(p) and p.is_file()
                and self._is_spec(p)}

    def _inside(self, p: Path) -> bool:
        """False (and said once in the log) for a symbolic link to a file outside the folder."""
        if not _links_outside(self.root, p):
            return True
        if p.name not in self._told:
            self._told.add(p.name)
            log.warning("worked serve: %s", _outside_message(p))
        return False

    def _is_spec(self, p: Path) -> bool:
        try:
            st = p.stat()
        except OSError:
            return True
        key = ("spec", str(p), st.st_mtime_ns, st.st_size)
        if key not in self._cache:
            self._cache[key] = _looks_like_spec(p)
        return self._cache[key]

    def problem(self, name: str) -> Problem:
        if not NAME_RE.fullmatch(name or ""):
            raise ApiError(404, Msg("no such problem"))
        path = self.problems().get(name)
        if path is None:
            raise ApiError(404, Msg("no problem named {name} in the problems folder", name=repr(name)))
        try:
            stat = path.stat()
        except OSError:
            raise ApiError(404, Msg("no problem named {name} in the problems folder", name=repr(name))) from None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        hit = self._cache.get(key)
        if hit is None:
            try:
                hit = Problem.from_file(path)
            except WorkedError as exc:
                # name the file by its name only, not the server's path
                raise ApiError(422, exc, rename=(str(path), path.name)) from None
            self._cache[key] = hit
        return hit

    # -- quizzes
    def manifest_path(self) -> Path | None:
        if self.root is None:
            return None
        p = self.root / "manifest.json"
        return p if self._inside(p) and p.is_file() else None

    def quiz(self) -> dict | None:
        p = self.manifest_path()
        if p is None:
            return None
        stat = p.stat()
        key = ("manifest", str(p), stat.st_mtime_ns, stat.st_size)
        hit = self._cache.get(key)
        if hit is None:
            hit = _read_manifest(p)
            self._cache[key] = hit
        return hit

    def variant(self, code: str) -> Variant:
        q = self.quiz()
        if q is None:
            raise ApiError(404, Msg("this server has no quiz: start it with --problems QUIZDIR"))
        norm = _norm_code(code or "")
        if not CODE_RE.fullmatch(norm):
            raise ApiError(404, Msg("no variant with that code"))
        v = q["variants"].get(norm)
        if v is None:
            raise ApiError(404, Msg("no variant with the code {code}; check the code on your sheet", code=repr(code.strip())))
        return v

    def variant_file(self, v: Variant, document: str, fmt: str) -> Path | None:
        """The sheet ``worked quiz`` wrote for this variant (it carries the graded questions), if any."""
        if self.root is None or document not in DOCUMENTS or fmt not in FORMATS or not CODE_RE.fullmatch(v.code):
            return None
        p = self.root / "variants" / v.code / f"{document}.{fmt}"
        try:
            inside = p.resolve().is_relative_to(self.root.resolve())
        except OSError:
            return None
        return p if inside and p.is_file() else None


def _links_outside(root: Path, p: Path) -> bool:
    """Is *p* (in folder *root*) a symbolic link, or a chain of them, to something outside *root*?"""
    try:
        return p.is_symlink() and not p.resolve().is_relative_to(root.resolve())
    except (OSError, RuntimeError):     # a loop of links, or unreadable: not served either
        return True


def _outside_message(p: Path) -> str:
    return f"{p}: not served: it is a link to a file outside the problems folder (copy the file into the folder instead)"


def _norm_code(code: str) -> str:
    return re.sub(r"[\s]+", "", code).upper()


def _looks_like_spec(p: Path) -> bool:
    """Quiz specs (TOML with a [family] table, or [[parts]] each with its own) live in problems/ too; they are not
    problems."""
    if p.suffix.lower() != ".toml":
        return False
    try:
        head = p.read_text(encoding="utf-8", errors="replace")[:20000]
    except OSError:
        return True
    return bool(re.search(r"^\s*\[family\]|^\s*\[\[questions\]\]|^\s*\[\[parts\]\]", head, re.M))


def _read_manifest(path: Path) -> dict:
    """Read a quiz manifest written by ``worked quiz``: variants by code. Tolerant of the layout:
    a top-level list or a ``variants``/``students`` list of objects with a code and a problem."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_float=str)
    except (OSError, ValueError) as exc:
        log.error("cannot read quiz manifest %s: %s", path, exc)
        return {"title": "", "variants": {}}
    items = data if isinstance(data, list) else next(
        (data[k] for k in ("variants", "students", "entries") if isinstance(data.get(k), list)), [])
    variants: dict[str, Variant] = {}

    def questions(it):
        return [{"ask": q["ask"][:60], "points": _points(q.get("points")),
                 "name": q["name"][:40] if isinstance(q.get("name"), str) else "",
                 "tolerance": q.get("tolerance") if isinstance(q.get("tolerance"), (dict, str, int)) else None,
                 # a choice question's options (letter, value, right, mistake): worked.server.views reads them
                 "options": q["options"][:8] if q.get("type") == "choice" and isinstance(q.get("options"), list) else None}
                for q in it.get("questions") or [] if isinstance(q, dict) and isinstance(q.get("ask"), str)]

    for it in items:
        if not isinstance(it, dict):
            continue
        code = next((it[k] for k in ("code", "variant", "variant_code") if isinstance(it.get(k), str)), None)
        prob = it.get("problem")
        if code is None:
            continue
        norm = _norm_code(code)
        if not CODE_RE.fullmatch(norm):
            continue
        if prob is None and isinstance(it.get("parts"), list):   # a quiz with [[parts]]: a problem per part
            parts = [Variant(code=norm, problem=p["problem"], title=str(p.get("title") or p["problem"].get("title", "")),
                             questions=questions(p))
                     for p in it["parts"][:20] if isinstance(p, dict) and isinstance(p.get("problem"), dict)]
            if parts and len(parts) == len(it["parts"]):
                variants.setdefault(norm, Variant(code=norm, problem=None, title=str(title_of(data)), parts=parts))
            continue
        if isinstance(prob, dict):
            variants.setdefault(norm, Variant(code=norm, problem=prob, title=str(prob.get("title", "")),
                                              questions=questions(it)))
    title = title_of(data)
    return {"title": title, "variants": variants}


def title_of(data) -> str:
    title = data.get("title", "") if isinstance(data, dict) else ""
    return title if isinstance(title, str) else ""


# ------------------------------------------------------------------ what the page shows (MathML, grids)

# ------------------------------------------------------------------ reading requests

async def read_json(request: Request, cfg: Config, parse_float=str) -> dict:
    """The request's JSON object, its decimals as strings (exact), or as floats with *parse_float* float (a quiz
    spec's tables: the floats its TOML holds)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, Msg("send the request body as JSON (Content-Type: application/json)"))
    length = request.headers.get("content-length")
    if length is not None and (not length.isdigit() or int(length) > cfg.max_body):
        raise ApiError(413, Msg("request body is larger than {n} bytes", n=cfg.max_body))
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > cfg.max_body:
                raise ApiError(413, Msg("request body is larger than {n} bytes", n=cfg.max_body))
    except ClientDisconnect:
        # the client went away, or its body did not arrive within the read deadline (connections.py) and the
        # connection was closed: nobody is left to answer
        raise ApiError(400, Msg("the request body did not arrive")) from None
    from ..readfile import InputError, loads_json

    try:
        data = loads_json(body.decode("utf-8"), "", parse_float=parse_float)
    except UnicodeDecodeError:
        raise ApiError(400, Msg("request body is not UTF-8")) from None
    except InputError as exc:
        raise ApiError(400, exc, limit=300) from None
    if not isinstance(data, dict):
        raise ApiError(400, Msg("expected a JSON object"))
    return data


def _problem_from(data: dict) -> Problem:
    """The request's problem; its error (a 422 whose ``error`` is in the request's language, its ``field`` as the file
    names it)."""
    if "problem" not in data:
        raise ApiError(400, Msg('missing "problem": send {"problem": {...the keys of a problem file...}}'))
    try:
        return Problem.from_dict(data["problem"], source="problem")
    except (WorkedError, RecursionError, TypeError, ValueError) as exc:
        raise ApiError(422, exc if isinstance(exc, WorkedError) else Msg("problem: not a valid problem"), limit=500,
                       field=getattr(exc, "field", None)) from None


# ------------------------------------------------------------------ the app

def create_app(cfg: Config | None = None) -> Starlette:
    cfg = cfg or Config()
    engine = Engine(cfg)
    limiter = RateLimit(cfg.check_rate)
    lib = Library(cfg.problems_dir)

    def features() -> dict:
        return {"check": _has("worked.check", "check_answers"), "render": _has("worked.render", "answer_key_html"),
                "random": _has("worked.generate", None)}

    async def index(request: Request):
        """The page, its words in the request's language (:func:`request_lang`); ``?lang=`` is remembered in a cookie,
        which the page's later requests (its API calls, its downloads) carry."""
        from .. import i18n

        lang = request_lang(request)
        with i18n.using(lang):
            html = _index_page().render(languages=_language_names(), js_catalogue=_js_catalogue())
        out = Response(html, media_type="text/html; charset=utf-8", headers={"Cache-Control": "no-cache",
                                                                             "Vary": "Accept-Language, Cookie"})
        if request.query_params.get("lang"):
            out.set_cookie(LANG_COOKIE, lang or i18n.SOURCE, max_age=365 * 86400, samesite="lax")
        return out

    async def math_font(request: Request):
        try:
            from ..render.fonts import MATH_FONT
        except ImportError:
            raise ApiError(404, Msg("no math font")) from None
        if not MATH_FONT.is_file():
            raise ApiError(404, Msg("no math font"))
        return FileResponse(MATH_FONT, media_type="font/woff2", headers={"Cache-Control": "max-age=86400"})

    async def info(request: Request):
        quiz = lib.quiz()
        return JSONResponse({
            "name": "worked", "version": __version__, "no_solutions": cfg.no_solutions,
            "mode": "quiz" if quiz is not None else "problems",
            "quiz": {"title": quiz["title"], "variants": len(quiz["variants"])} if quiz is not None else None,
            "problems": [] if quiz is not None else [
                {"name": name, "title": _title_of(lib, name)} for name in lib.problems()],
            "features": features(),
            "quiz_specs": [] if quiz is not None or cfg.no_solutions else list(lib.quiz_specs()),
            "limits": {k: LIMITS[k] for k in ("tokens", "dim", "heads", "entry", "places", "decimals", "title", "token")},
        })

    # the page of a problem or a variant is laid out (and a variant's questions resolved, which solves it) in a
    # worker, not on the event loop: a class opening its 200 variants at once kept the loop busy 5 s (27 ms of
    # CPU each); the worker keeps the problem's work for the checks that follow
    async def get_problem(request: Request):
        name = request.path_params["name"]
        problem = lib.problem(name)
        pkey = problem_key(problem)
        return await engine.run(_digest("page", name, pkey), engine.lane(problem), jobs.problem_json, name, problem,
                                what=Msg("laying out the problem"), affinity=pkey, lang=request_lang(request))

    async def get_variant(request: Request):
        v = lib.variant(request.path_params["code"])
        if v.parts:     # a quiz that mixes families: every part's problem, view and questions, in order
            problems = v.problems()
            return await engine.run(_digest("mixed-page", v.code, [problem_key(p) for p in problems],
                                            [x.questions for x in v.parts]),
                                    _lane_of(engine, problems), jobs.mixed_variant_json, problems, v,
                                    what=Msg("laying out the variant"), affinity=_digest([problem_key(p) for p in problems]))
        problem, = v.problems()
        pkey = problem_key(problem)
        return await engine.run(_digest("variant-page", v.code, pkey, v.questions), engine.lane(problem),
                                jobs.variant_json, problem, v, what=Msg("laying out the variant"), affinity=pkey,
                                lang=request_lang(request))

    async def view(request: Request):
        problem = _problem_from(await read_json(request, cfg))
        pkey = problem_key(problem)
        return await engine.run(_digest("view", pkey), engine.lane(problem), jobs.view_json, problem,
                                what=Msg("laying out the problem"), affinity=pkey, lang=request_lang(request))

    async def api_solve(request: Request):
        if cfg.no_solutions:
            raise ApiError(403, Msg("solutions are turned off on this server (--no-solutions)"))
        problem = _problem_from(await read_json(request, cfg))
        want_view = request.query_params.get("view") in ("1", "true", "yes")
        pkey = problem_key(problem)
        return await engine.run(_digest("solve", pkey, want_view), engine.lane(problem),
                                jobs.solve_json, problem, want_view, what=Msg("solving this problem"), affinity=pkey,
                                lang=request_lang(request))

    async def api_check(request: Request):
        data = await read_json(request, cfg)
        code = data.get("variant")
        variant = None
        if code is not None:
            # a quiz variant: its own problem and its questions' tolerances and points, from the manifest
            if not isinstance(code, str):
                raise ApiError(400, Msg('"variant": expected the variant code printed on the sheet'))
            variant = lib.variant(code)
            problem = None if variant.parts else variant.problems()[0]
        else:
            problem = _problem_from(data)
        answers = data.get("answers")
        if variant is not None and variant.parts:
            # a quiz that mixes families: the answers to each part, in order, checked against that part's problem
            if not (isinstance(answers, list) and len(answers) == len(variant.parts)
                    and all(isinstance(a, dict) for a in answers)):
                raise ApiError(400, Msg('"answers": expected a list of {n} tables, the answers to each part of the variant '
                                        'in order ({example})', n=len(variant.parts), example='[{"Q": [[...]]}, ...]'))
            if cfg.no_solutions:
                limiter.check(request.client.host if request.client else "?")
            reveal = bool(data.get("reveal")) and not cfg.no_solutions
            want_view = request.query_params.get("view") in ("1", "true", "yes")
            problems = variant.problems()
            keys = [problem_key(p) for p in problems]
            return await engine.run(_digest("check-mixed", variant.code, keys, answers, reveal, cfg.no_solutions, want_view),
                                    _lane_of(engine, problems), jobs.check_mixed_json, problems, answers, variant,
                                    reveal, cfg.no_solutions, want_view, what=Msg("checking"), affinity=_digest(keys))
        if not isinstance(answers, dict):
            raise ApiError(400, Msg('missing "answers": send {"problem": {...}, "answers": {"Q": [[...]], ...}}'))
        tolerance = data.get("tolerance")
        if cfg.no_solutions:
            # the server's tolerance, never the client's: "tolerance": 1000 would mark everything correct,
            # and the verdicts would then give the expected values away by trial
            tolerance = None
            limiter.check(request.client.host if request.client else "?")
        elif tolerance is not None and not isinstance(tolerance, (str, int)) or isinstance(tolerance, bool) \
                or isinstance(tolerance, str) and len(tolerance) > 60:
            raise ApiError(400, Msg('"tolerance": expected a number such as 0.01 or a percentage such as "2%"'))
        reveal = bool(data.get("reveal")) and not cfg.no_solutions
        pkey = problem_key(problem)
        # ?view=1: the diagnoses' math as MathML too (message_math, the step's title_math), as /api/solve?view=1
        want_view = request.query_params.get("view") in ("1", "true", "yes")
        if variant is not None:
            key = _digest("check-variant", variant.code, pkey, answers, reveal, cfg.no_solutions, want_view)
            return await engine.run(key, engine.lane(problem), jobs.check_variant_json, problem, answers, variant,
                                    reveal, cfg.no_solutions, want_view, what=Msg("checking"), affinity=pkey,
                                    lang=request_lang(request))
        key = _digest("check", pkey, answers, str(tolerance), reveal, cfg.no_solutions, want_view)
        return await engine.run(key, engine.lane(problem), jobs.check_json, problem, answers, tolerance, reveal,
                                cfg.no_solutions, want_view, what=Msg("checking"), affinity=pkey, lang=request_lang(request))

    async def api_new(request: Request):
        data = await read_json(request, cfg)
        family = data.get("family", {})
        seed = data.get("seed", 1)
        if isinstance(seed, str) and seed.strip().isdigit() and len(seed.strip()) < 20:
            seed = int(seed.strip())
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise ApiError(400, Msg("seed: expected a whole number ≥ 0"))
        if not isinstance(family, dict):
            raise ApiError(400, Msg('"family": expected a table of options such as {"tokens": 3, "d_k": 2}'))
        return await engine.run(_digest("new", family, seed), engine.family_lane(family), jobs.generate_json, family, seed,
                                what=Msg("drawing a random problem"), lang=request_lang(request))

    async def api_quiz(request: Request):
        """The teacher's quiz builder: a spec (TOML text, as `worked quiz` reads), a seed, a count or a roster
        (CSV text), formats → one zip of what `worked quiz` writes."""
        if cfg.no_solutions:
            raise ApiError(403, Msg("the quiz builder is turned off on this server (--no-solutions): a quiz holds its keys"))
        data = await read_json(request, cfg, parse_float=float)
        spec = data.get("spec")
        if not (isinstance(spec, str) and spec.strip() or isinstance(spec, dict) and spec):
            raise ApiError(400, Msg('"spec": expected the quiz spec as TOML text (title, seed, [family], [[questions]]) '
                                    'or as its tables (the builder\'s form)'))
        seed, count = data.get("seed"), data.get("count")
        for name, v in (("seed", seed), ("count", count)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
                raise ApiError(400, Msg("{field}: expected a whole number ≥ 0", field=name))
        roster = data.get("roster")
        if roster is not None and not isinstance(roster, str):
            raise ApiError(400, Msg('"roster": expected the CSV text of a roster (id,name columns)'))
        formats = data.get("formats", "html,moodle,qti,gift")
        if not isinstance(formats, str) or len(formats) > 100:
            raise ApiError(400, Msg('"formats": expected a comma-separated list such as "pdf,html,moodle,qti,gift"'))
        out = await engine.run(_digest("quiz", spec, seed, count, roster, formats), engine.heavy, jobs.quiz_zip, spec,
                               seed, count, roster or None, formats, timeout=cfg.render_timeout * 4,
                               what=Msg("making the quiz"), lang=request_lang(request))
        if out.status_code == 200:
            out.headers["Content-Disposition"] = 'attachment; filename="quiz.zip"'
            out.headers["Cache-Control"] = "no-store"
        return out

    async def api_quiz_form(request: Request):
        """The quiz builder's form as it is typed: ``{"spec": its tables}`` → its TOML, its first error and, per
        part, the matrices for the ask picker and each question's error (:func:`worked.server.quizform.form`)."""
        if cfg.no_solutions:
            raise ApiError(403, Msg("the quiz builder is turned off on this server (--no-solutions)"))
        spec = (await read_json(request, cfg, parse_float=float)).get("spec")
        if not isinstance(spec, dict):
            raise ApiError(400, Msg('"spec": expected the quiz spec\'s tables (title, seed, family, questions or parts)'))
        return await engine.run(_digest("quiz-form", spec), engine.quick, jobs.quiz_form_json, spec,
                                what=Msg("reading the quiz spec"), lang=request_lang(request))

    async def get_quiz_spec(request: Request):
        """A quiz spec of the folder as its TOML text (the quiz builder's starting point)."""
        if cfg.no_solutions:
            raise ApiError(403, Msg("the quiz builder is turned off on this server (--no-solutions)"))
        path = lib.quiz_specs().get(request.path_params["name"])
        if path is None:
            raise ApiError(404, Msg("no such quiz spec"))
        from ..readfile import InputError, loads_toml, read_text

        try:
            text = read_text(path, expected=Msg("a TOML quiz spec"))
        except InputError as exc:
            raise ApiError(422, exc.message) from None
        try:    # its tables too, for the builder's form (None: the form cannot show it, the text can)
            spec = json.loads(json.dumps(loads_toml(text, path.name, parse_float=float), allow_nan=False))
        except (InputError, TypeError, ValueError):
            spec = None
        return JSONResponse({"name": path.stem, "text": text, "spec": spec})

    async def _document(problem: Problem, document: str, fmt: str, student: dict | None, paper: str = "a4",
                        lang: str | None = None):
        if fmt == "ipynb":
            if document not in NOTEBOOKS:
                raise ApiError(404, Msg("no notebook {name}: expected notebook or exercise", name=repr(document[:40])))
            if cfg.no_solutions:   # both hold the key's values (the exercise in its checks)
                raise ApiError(403, Msg("notebooks are turned off on this server (--no-solutions): they hold the key's values"))
        elif document == "problem" and fmt == "toml":
            return Response(problem.to_toml(), media_type="application/toml; charset=utf-8", headers={
                "Content-Disposition": f'attachment; filename="{problem.slug}.toml"', "Cache-Control": "no-store"})
        else:
            if document not in DOCUMENTS:
                raise ApiError(404, Msg("no document {name}: expected worksheet or answer-key (or problem as toml)",
                                        name=repr(document[:40])))
            if fmt not in FORMATS:
                raise ApiError(404, Msg("no format {name}: expected {formats}", name=repr(fmt[:20]), formats=words(FORMATS)))
            if paper not in ("a4", "letter"):
                raise ApiError(400, Msg("no paper size {name}: expected a4 or letter", name=repr(paper[:20])))
            if document == "answer-key" and cfg.no_solutions:
                raise ApiError(403, Msg("answer keys are turned off on this server (--no-solutions)"))
        key = _digest("file", problem_key(problem), document, fmt, paper, student)
        out = await engine.run(key, engine.heavy, jobs.render, problem, document, fmt, student, paper,
                               timeout=cfg.render_timeout, what=Msg("making the {document} {format}", document=document,
                                                                    format=fmt.upper()),
                               affinity=problem_key(problem), lang=lang)
        if out.status_code == 200:
            out.headers["Content-Disposition"] = f'attachment; filename="{problem.slug}-{document}.{fmt}"'
            out.headers["Cache-Control"] = "no-store"
        return out

    async def api_download(request: Request):
        data = await read_json(request, cfg)
        problem = _problem_from(data)
        return await _document(problem, str(data.get("document", "")), str(data.get("format", "")), None,
                               str(data.get("paper", "a4")), request_lang(request))

    async def download_problem(request: Request):
        p = request.path_params
        problem = lib.problem(p["name"])
        return await _document(problem, p["document"], p["format"], None, lang=request_lang(request))

    async def download_variant(request: Request):
        p = request.path_params
        v = lib.variant(p["code"])
        if v.parts:     # its sheets are one per part, as worked quiz wrote them (worksheet-part1.html, …)
            raise ApiError(404, Msg("variant {code} has {n} parts: print the sheets worked quiz wrote for each part "
                                    "(worksheet-part1, …)", code=v.code, n=len(v.parts)))
        problem, = v.problems()
        if p["document"] == "answer-key" and cfg.no_solutions:
            raise ApiError(403, Msg("answer keys are turned off on this server (--no-solutions)"))
        ready = lib.variant_file(v, p["document"], p["format"])
        if ready is not None:
            return FileResponse(ready, media_type=FORMATS[p["format"]], headers={
                "Content-Disposition": f'attachment; filename="{v.code}-{p["document"]}.{p["format"]}"',
                "Cache-Control": "no-store"})
        return await _document(problem, p["document"], p["format"], {"variant": v.code}, lang=request_lang(request))

    async def api_error(request: Request, exc: ApiError):
        extra = {k: v for k, v in exc.extra.items() if v is not None and k != "retry_after"}
        out = _error(exc.status, _said(exc.message, request_lang(request), exc.limit, exc.rename), **extra)
        if exc.extra.get("retry_after"):
            out.headers["Retry-After"] = str(exc.extra["retry_after"])
        return out

    async def http_error(request: Request, exc: HTTPException):
        msg = {404: Msg("not found"), 405: Msg("method not allowed")}.get(exc.status_code, str(exc.detail))
        return _error(exc.status_code, _said(msg, request_lang(request)))

    async def worked_error(request: Request, exc: WorkedError):
        return _error(422, _said(exc, request_lang(request), 500))

    async def server_error(request: Request, exc: Exception):
        log.exception("internal error on %s %s", request.method, request.url.path)
        return _error(500, _said(jobs.INTERNAL, request_lang(request)))

    routes = [
        Route("/", index),
        Route("/static/fonts/worked-math.woff2", math_font),
        Route("/favicon.ico", lambda request: FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")),
        Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        Route("/api/info", info),
        Route("/api/problems/{name}", get_problem),
        Route("/api/variants/{code}", get_variant),
        Route("/api/view", view, methods=["POST"]),
        Route("/api/solve", api_solve, methods=["POST"]),
        Route("/api/check", api_check, methods=["POST"]),
        Route("/api/new", api_new, methods=["POST"]),
        Route("/api/download", api_download, methods=["POST"]),
        Route("/api/quiz", api_quiz, methods=["POST"]),
        Route("/api/quiz-form", api_quiz_form, methods=["POST"]),
        Route("/api/quiz-specs/{name}", get_quiz_spec),
        Route("/download/problems/{name}/{document}.{format}", download_problem),
        Route("/download/variants/{code}/{document}.{format}", download_variant),
    ]
    @contextlib.asynccontextmanager
    async def lifespan(app):
        engine.start()      # the workers start while the server begins listening, not on a first request
        lib.problems()      # a file the folder does not serve (a link outside it) is said now, not on a first request
        lib.manifest_path()
        try:
            # the ASGI lifespan state: uvicorn hands it to each connection (worked.server.connections.Protocol)
            yield {connections.STATE_KEY: {"read_timeout": cfg.read_timeout, "per_client": cfg.client_connections}}
        finally:
            engine.stop()

    middleware = [Middleware(SecurityHeaders)]
    if cfg.allowed_hosts is not None:
        # DNS rebinding: a page on evil.example that resolves to 127.0.0.1 sends Host: evil.example
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=list(cfg.allowed_hosts),
                                        www_redirect=False))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={ApiError: api_error, HTTPException: http_error, WorkedError: worked_error,
                            Exception: server_error},
    )
    app.state.config = cfg
    app.state.lang = cfg.lang
    app.state.engine = engine
    return app


def _lane_of(engine: Engine, problems: list) -> Lane:
    """The lane for the work on several problems at once (a mixed variant's parts): the heavy one if any needs it."""
    return engine.heavy if any(engine.lane(p) is engine.heavy for p in problems) else engine.quick


def _title_of(lib: Library, name: str) -> str:
    try:
        return lib.problem(name).title
    except ApiError:
        return ""


def _has(module: str, attr: str | None) -> bool:
    import importlib

    try:
        m = importlib.import_module(module)
    except ImportError:
        return False
    except Exception:  # noqa: BLE001 - a half-written module counts as missing
        return False
    return attr is None or hasattr(m, attr)


class SecurityHeaders:
    """Pure ASGI middleware: adds CSP and friends to every response."""

    HEADERS = [
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"no-referrer"),
        (b"x-frame-options", b"SAMEORIGIN"),
    ]

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + self.HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app_from_env() -> Starlette:
    """App factory for ``uvicorn --factory`` with several workers: the config comes from WORKED_SERVE_CONFIG."""
    return create_app(Config.from_env(os.environ.get("WORKED_SERVE_CONFIG", "{}")))
