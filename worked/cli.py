"""The command line: ``worked solve|sheet|new|quiz|check|grade|serve``. Imports only what a command needs."""
from __future__ import annotations

import argparse
import sys

from . import __version__
from .exporters import PDF_ENGINES, sheet_formats

#: the commands, in the order ``worked --help`` lists them: name → (add_parser's keywords, what adds its options)
COMMANDS: dict[str, tuple[dict, object]] = {}
ORDER = ("solve", "check", "grade", "new", "notebook", "quiz", "serve", "sheet")


def _lang_option(p) -> None:
    p.add_argument("--lang", default=None, metavar="LANG",
                   help="the language of the words and numbers shown (en, de, …; default: the problem's lang, else en)")


def _language(args, problem=None):
    """The language chosen: --lang, else the problem's ``lang`` (None: English); a one-line error naming --lang
    and the languages there are for one with no catalogue. The language found is remembered for the command's
    error line (:func:`_error_language`)."""
    from . import i18n
    from .errors import WorkedError

    lang = getattr(args, "lang", None)
    if lang is None:
        lang = getattr(problem, "lang", None)
        args._shown_lang = lang
        return lang
    try:
        args._shown_lang = i18n.canonical(lang)
    except i18n.UnknownLanguage as exc:
        raise WorkedError(i18n.Msg("--lang: {reason}", reason=exc.args[0])) from None
    return args._shown_lang


def _error_language(args, exc):
    """The language of a command's error line: --lang (when it names a shipped language), else the problem's or
    the spec's ``lang`` where the command read it (or the file was read far enough to tell it: the error's own
    ``lang``), else English (None)."""
    from . import i18n

    given = getattr(args, "lang", None)
    if isinstance(given, str):
        try:
            return i18n.canonical(given)
        except i18n.UnknownLanguage:
            return None
    return getattr(args, "_shown_lang", None) or getattr(exc, "lang", None)


def _say(lang, msg, file=None) -> None:
    """Print a progress line (a :class:`worked.i18n.Msg`) in *lang* (None: English)."""
    from . import i18n

    print(msg.localized(i18n.get(lang)), file=file)


def command(name: str, **kw):
    """Register the function that adds a command's options (``kw``: its help line and description)."""
    def register(add_options):
        COMMANDS[name] = (kw, add_options)
        return add_options
    return register


@command("solve", help="print an exact, step-by-step worked solution",
         description="Solve a problem file exactly and print the worked steps. "
                     "With no PROBLEM, solves the built-in Part 9 example (cats chase mice).")
def _solve_options(p):
    p.add_argument("problem", nargs="?", help="problem file (.toml or .json); default: the built-in example")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format (default: text)")
    p.add_argument("--checks", choices=("one", "row", "all"), default="one",
                   help="dot-product expansions shown: one entry per product (default), one full row, or every entry")
    p.add_argument("--display", choices=("exact", "decimal"), default=None,
                   help="work the problem with exact forms (√2, e^(√2)) or in decimals (Part 10 style); "
                        "default: the problem's display (decimal when its entries are decimals)")
    p.set_defaults(func=cmd_solve)


def cmd_solve(args) -> int:
    from .problem import load
    from .solver import solve

    problem = load(args.problem)
    sol = solve(problem, checks=args.checks, display=args.display)
    if args.format == "json":
        import json

        from .writers import json as json_writer

        out = json.dumps(json_writer.solution(sol), indent=2, ensure_ascii=False) + "\n"
    elif args.format == "markdown":
        from .writers import markdown

        out = markdown.render(sol)
    else:
        from .writers import text

        out = text.render(sol)
    sys.stdout.write(out)
    return 0


@command("check", help="check a student's answers: which entries, which step, which mistake",
         description="Check answers to a problem: a verdict per entry (correct, wrong, not answered), "
                     "error carried forward from the student's own earlier answers, and named "
                     "misconceptions with the worked step to re-read. Exit status: 0 when every answered "
                     "entry is correct, 1 otherwise, 2 when a file cannot be read.")
def _check_options(p):
    p.add_argument("problem", help="problem file (.toml or .json)")
    p.add_argument("answers", help="answers file (.toml or .json): matrices by name (Q, K, V, scores, scaled, weights, Z; "
                                   "head1.Q, …, concat, Z with several heads); blank entries are \"\" or \"?\"")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--tolerance", metavar="T", default=None,
                   help="accept answers within T of the exact value (0.01), or T%% of it (2%%); default: any answer a "
                        "careful student gets by rounding to the problem's decimals, also at intermediate steps")
    p.add_argument("--reveal", action="store_true", help="also show the expected values of wrong entries")
    _lang_option(p)
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from .check import Tolerance, check_answers, read_answers
    from .problem import load

    problem = load(args.problem)
    lang = _language(args, problem)     # also the language of an error in the answers file
    tol = Tolerance.parse(args.tolerance)
    answers = read_answers(args.answers)
    report = check_answers(problem, answers, tolerance=tol, reveal=args.reveal)
    if args.format == "json":       # locale-free data
        import json

        out = json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    else:
        from . import i18n

        with i18n.using(lang):
            out = report.text()
    sys.stdout.write(out)
    s = report.summary()
    return 0 if not (s["wrong"] or s["invalid"] or report.errors) else 1


@command(
    "new", help="write a good random problem file",
    description="Draw a random problem worth doing by hand: small integers, no all-zero rows, a softmax that "
                "does not saturate (largest weight per row ≤ --max-weight, none rounding to 0), no tied top "
                "score. The same options and --seed give the same file on any machine. Write negative "
                "ranges with '=': --range=-2..3.")
def _new_options(p):
    p.add_argument("--tokens", default=None, metavar="N|WORDS",
                   help="number of tokens (default 3), or comma-separated words such as cats,chase,mice")
    p.add_argument("--d-model", type=int, default=None, metavar="D", help="columns of X (default 4)")
    p.add_argument("--d-k", type=int, default=None, metavar="D", help="query/key length (default 2; 4 makes √d_k = 2)")
    p.add_argument("--d-v", type=int, default=None, metavar="D", help="value length (default d_k)")
    p.add_argument("--heads", type=int, default=None, metavar="H", help="attention heads (default 1; >1 adds W_O)")
    p.add_argument("--range", default=None, metavar="LO..HI", help="integer entries (default -2..3)")
    p.add_argument("--weight-range", default=None, metavar="LO..HI",
                   help="entries of W_Q, W_K, W_V, W_O when different from --range (e.g. 0..1)")
    p.add_argument("--mask", choices=("none", "causal"), default=None, help="default none")
    p.add_argument("--attention", choices=("self", "cross"), default=None,
                   help="cross: queries from X, keys and values from an encoder side X_enc (default self)")
    p.add_argument("--tokens-enc", default=None, metavar="N|WORDS", dest="tokens_enc",
                   help="with --attention cross: the encoder side's tokens, a count or comma-separated words "
                        "(default: as many as --tokens)")
    p.add_argument("--blocks", default=None, metavar="KINDS",
                   help="a chain of blocks, comma-separated among self, self-causal, cross (a decoder layer: "
                        "self-causal,cross); block k+1's X is block k's output Z, rounded")
    p.add_argument("--block", choices=("post-ln", "pre-ln"), default=None,
                   help="a whole Transformer block around the attention: layer norm after each residual add (post-ln) "
                        "or before each sublayer (pre-ln), with a feed-forward (one head has its W_O)")
    p.add_argument("--positional", choices=("none", "sinusoidal"), default=None,
                   help="with --block: sinusoidal positions added to X (default none)")
    p.add_argument("--d-ff", type=int, default=None, metavar="N", help="with --block: the feed-forward's width (default d_model)")
    p.add_argument("--vocab", type=int, default=None, metavar="N",
                   help="with --block: an output layer W_out over N words, with the next token at each position as "
                        "targets (mean cross-entropy)")
    p.add_argument("--eps", default=None, metavar="NUMBER", help="with --block: layer norm's ε, exact (default 0)")
    p.add_argument("--scale", default=None, metavar="sqrt|none|NUMBER", help="divide the scores by √d_k (default), 1, or NUMBER")
    p.add_argument("--decimals", type=int, default=None, help="decimal places shown (default 2)")
    p.add_argument("--max-weight", type=float, default=None, metavar="W", help="largest weight allowed per row (default 0.9)")
    p.add_argument("--min-weight", type=float, default=None, metavar="W",
                   help="smallest weight allowed (default one unit of the last decimal: 0.01)")
    p.add_argument("--max-score", type=float, default=None, metavar="S",
                   help="largest |scaled score| allowed, so e^x stays readable (default 5; 0 = no limit)")
    p.add_argument("--ties", action="store_true", help="allow a tie for the largest score in a row")
    p.add_argument("--train", action="store_true",
                   help="add a [train] table: an integer target near Z (MSE) for one gradient step, gradients kept hand-sized")
    p.add_argument("--lr", default=None, help="learning rate of --train, exact (default 1/10)")
    p.add_argument("--title", default=None, help="problem title")
    p.add_argument("--seed", type=int, default=None, help="seed (default: a fresh random one, recorded in the file)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write here (default: standard output)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--lang", default=None, metavar="LANG",
                   help="the language of the messages and of the default title (en, de, …; default: en)")
    p.set_defaults(func=cmd_new)


RANGE_OPTIONS = ("--range", "--weight-range")


def _join_negative_ranges(argv: list[str]) -> list[str]:
    """``--range -2..3`` as ``--range=-2..3``: argparse would read a value that starts with ``-`` as an option."""
    import re

    out, it = [], iter(argv)
    for a in it:
        if a in RANGE_OPTIONS:
            nxt = next(it, None)
            if nxt is not None and re.fullmatch(r"-\d+(\.\.-?\d+)?", nxt):
                out.append(f"{a}={nxt}")
                continue
            out.append(a)
            if nxt is not None:
                out.append(nxt)
            continue
        out.append(a)
    return out


def cmd_new(args) -> int:
    from . import i18n
    from .generate import family_from_args, generate, header_comment
    from .errors import WorkedError
    from .i18n import Msg

    lang = _language(args)
    fam = family_from_args(args)
    seed = args.seed
    if seed is None:
        import secrets

        seed = secrets.randbelow(10**9)
    elif seed < 0:
        raise WorkedError(Msg("--seed: expected a whole number ≥ 0, got {got}", got=seed))
    title = fam.title or (Msg("Random Transformer block (seed {seed})", seed=seed) if fam.block
                          else Msg("Random attention problem (seed {seed})", seed=seed)).localized(i18n.get(lang))
    problem = generate(fam, seed, title=title)
    text = header_comment(fam, seed) + problem.to_toml()
    if args.output in (None, "-"):
        sys.stdout.write(text)
        return 0
    from .output import write_file

    out = write_file(args.output, text, force=args.force)
    _say(lang, Msg("wrote {path} (seed {seed})", path=out, seed=seed), file=sys.stderr)
    return 0


@command("grade", help="grade a class from a quiz manifest and a CSV of responses",
         description="Grade a quiz: read QUIZDIR/manifest.json (written by `worked quiz`) and a CSV with "
                     "a row per student and a column per question (or Moodle's Responses report); write "
                     "gradebook.csv and a self-contained class report, report.html.")
def _grade_options(p):
    p.add_argument("quizdir", help="the quiz folder holding manifest.json (or the manifest file itself)")
    p.add_argument("responses", help="CSV of responses: an id column and a column per question, e.g. scores[2,3]")
    p.add_argument("-o", "--output", metavar="DIR", default=None, help="output folder (default: QUIZDIR/grades)")
    p.add_argument("--force", action="store_true",
                   help="replace gradebook.csv and report.html if they exist (other files are never touched)")
    p.add_argument("--allow-unmatched", action="store_true",
                   help="grade the rows that match a student even when some match none or several (those are "
                        "listed in the report); without it such a row stops the run and nothing is written")
    _lang_option(p)
    p.set_defaults(func=cmd_grade)


def cmd_grade(args) -> int:
    from . import i18n
    from .grade import grade
    from .i18n import Msg

    lang = _language(args)
    res = grade(args.quizdir, args.responses, args.output, force=args.force, allow_unmatched=args.allow_unmatched,
                lang=lang)
    _say(lang, res["columns"])
    for w in res["warnings"]:
        _say(lang, Msg("warning: {warning}", warning=w), file=sys.stderr)
    if res["note"]:
        _say(lang, Msg("note: {note}", note=res["note"]), file=sys.stderr)
    results = [r for r in res["results"] if r.responded]
    mean = sum(r.total for r in results) / len(results) if results else 0.0
    with i18n.using(lang):
        print(i18n.ngettext("graded {graded} of {n} student (mean {mean}); wrote {gradebook} and {report}",
                            "graded {graded} of {n} students (mean {mean}); wrote {gradebook} and {report}",
                            len(res["results"]), graded=len(results), mean=i18n.current().number(f"{mean:.2f}"),
                            gradebook=res["gradebook"], report=res["report"]))
    return 0


@command("serve", help="run the web page for students and teachers",
         description="Serve the web page: students pick a problem (or type a quiz variant code), fill "
                     "in the matrices and get feedback step by step; teachers build or draw a problem "
                     "and download its worksheet and key. Binds to 127.0.0.1 unless --host says "
                     "otherwise (use --host 0.0.0.0 to serve a class on your network).")
def _serve_options(p):
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--problems", metavar="DIR", default=None,
                   help="folder of problem files offered by name (default: problems/ if it exists, else the "
                        "built-in example); a quiz folder from `worked quiz` (with manifest.json) offers its "
                        "variants by code instead; a file that is a link to a file outside the folder is not served "
                        "(the server says so when it starts)")
    p.add_argument("--no-solutions", action="store_true",
                   help="never send solutions, expected values or answer keys (for quizzes): only verdicts and "
                        "diagnoses")
    p.add_argument("--workers", type=int, default=1, help="server processes (default: 1; use more to serve a class)")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="seconds allowed for solving or checking; then the work is stopped and the answer is 504 "
                        "(default: 20)")
    p.add_argument("--read-timeout", type=float, default=5.0, metavar="S",
                   help="seconds a client has to send a whole request (head and body); a connection that sends "
                        "nothing, or too slowly, is then closed (default: 5)")
    p.add_argument("--connections-per-client", type=int, default=256, metavar="N",
                   help="connections one client address may hold open at once; more are answered 503 and closed "
                        "(default: 256; behind a reverse proxy every client has the proxy's address: raise it)")
    p.add_argument("--allowed-host", action="append", default=None, metavar="NAME",
                   help="a Host name the page may be reached by, e.g. the name a reverse proxy forwards "
                        "(repeatable; default: the --host address, and localhost when it is a loopback address; "
                        "with --host 0.0.0.0 any name unless given)")
    p.add_argument("--lang", default=None, metavar="LANG",
                   help="the page's language when the browser asks for none of ours (its Accept-Language, or the "
                        "page's language selector, comes first; default: en)")
    p.set_defaults(func=cmd_serve)


def _allowed_hosts(host: str, extra: list[str] | None) -> list[str] | None:
    """Host header values the server accepts (Starlette's TrustedHostMiddleware), against DNS rebinding."""
    import ipaddress

    names = list(extra or [])
    if host in ("0.0.0.0", "::", ""):
        return names or None        # every address of the machine: its names cannot be known here
    names.append(host)
    try:
        if ipaddress.ip_address(host).is_loopback:
            names += ["localhost", "127.0.0.1", "::1"]
    except ValueError:
        pass
    return sorted(set(names))


def _raise_open_files_limit() -> int | None:
    """Idle connections each hold a file descriptor: let the server use all the system allows. Returns the
    limit now in force (None when it cannot be known)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard if hard != resource.RLIM_INFINITY else max(soft, 65536), hard))
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        return None if soft == resource.RLIM_INFINITY else soft
    except (ImportError, ValueError, OSError):
        return None


def _backlog(open_files: int | None) -> int:
    """The listen backlog: 511 (nginx's), less under a small open-files limit. asyncio accepts up to this many
    connections in one pass of its loop, and a connection is looked at (and closed, when its address is over
    the per-client cap) only two passes later, so about three passes' worth must fit in the open-files limit:
    else accept() fails with EMFILE, once for each connection left in the pass, each failure a logged error."""
    if open_files is None:
        return 511
    return max(64, min(511, (open_files - 512) // 4))


def cmd_serve(args) -> int:
    import os
    import socket
    from pathlib import Path

    from .errors import WorkedError
    from .i18n import Msg

    if not 0 < args.port < 65536:
        raise WorkedError(Msg("--port: expected a port number from 1 to 65535, got {got}", got=args.port))
    if not 1 <= args.workers <= 64:
        raise WorkedError(Msg("--workers: expected 1 to 64, got {got}", got=args.workers))
    if not 0 < args.timeout <= 600:
        raise WorkedError(Msg("--timeout: expected seconds from 0 to 600, got {got}", got=args.timeout))
    if not 0 < args.read_timeout <= 600:
        raise WorkedError(Msg("--read-timeout: expected seconds from 0 to 600, got {got}", got=args.read_timeout))
    if not 1 <= args.connections_per_client <= 100_000:
        raise WorkedError(Msg("--connections-per-client: expected 1 to 100000, got {got}", got=args.connections_per_client))
    if args.problems is not None:
        root = Path(args.problems)
        if not root.is_dir():
            raise WorkedError(Msg("{folder}: no such folder (--problems expects a folder of problem files or a quiz "
                                  "folder)", folder=args.problems))
    else:
        root = Path("problems") if Path("problems").is_dir() else None
    try:  # fail early, in one line, when the port is taken
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((args.host, args.port))
    except OSError as exc:
        where, why = f"{args.host}:{args.port}", exc.strerror or exc
        raise WorkedError(Msg("cannot listen on {address}: {reason}; try another --port", address=where, reason=why)
                          if exc.errno == 98 else Msg("cannot listen on {address}: {reason}", address=where,
                                                      reason=why)) from None

    import uvicorn

    from .server.app import Config, create_app
    from .server.connections import Protocol

    cfg = Config(problems_dir=root.resolve() if root else None, no_solutions=args.no_solutions,
                 solve_timeout=args.timeout, allowed_hosts=_allowed_hosts(args.host, args.allowed_host),
                 read_timeout=args.read_timeout, client_connections=args.connections_per_client,
                 lang=_language(args))
    open_files = _raise_open_files_limit()
    # Connections: uvicorn's h11 protocol with a read deadline per request and a cap per client address
    # (worked.server.connections: why that and not another server); idle keep-alive connections are closed
    # after 5 s. There is no server-wide connection cap (uvicorn's limit_concurrency answers 503 to everyone
    # once that many sockets are open, idle or not); overload is answered per job by the worker lanes (503
    # with Retry-After).
    server_opts = dict(host=args.host, port=args.port, log_level="warning", timeout_keep_alive=5,
                       backlog=_backlog(open_files), h11_max_incomplete_event_size=64 * 1024, http=Protocol)
    where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/"
    if root and args.no_solutions:
        line = Msg("worked serve: {url}  (problems from {path}, no solutions); Ctrl+C stops", url=where, path=root)
    elif root:
        line = Msg("worked serve: {url}  (problems from {path}); Ctrl+C stops", url=where, path=root)
    elif args.no_solutions:
        line = Msg("worked serve: {url}  (the built-in example, no solutions); Ctrl+C stops", url=where)
    else:
        line = Msg("worked serve: {url}  (the built-in example); Ctrl+C stops", url=where)
    _say(cfg.lang, line, file=sys.stderr)
    if args.workers > 1:
        os.environ["WORKED_SERVE_CONFIG"] = cfg.to_env()
        uvicorn.run("worked.server.app:create_app_from_env", factory=True, workers=args.workers, **server_opts)
    else:
        uvicorn.run(create_app(cfg), **server_opts)
    return 0


@command("sheet", help="write a worksheet and a worked answer key (HTML, LaTeX, PDF)",
         description="Write DIR/<problem-slug>/worksheet.{html,tex,pdf} and answer-key.{html,tex,pdf}. "
                     "With no PROBLEM, uses the built-in Part 9 example (cats chase mice). Refuses to "
                     "write into a folder it did not create unless --force is given.")
def _sheet_options(p):
    p.add_argument("problem", nargs="?", help="problem file (.toml or .json); default: the built-in example")
    p.add_argument("-o", "--output", default="output", metavar="DIR", help="output folder (default: output/)")
    p.add_argument("--format", default=",".join(sheet_formats()), metavar="LIST",
                   help=f"comma-separated formats among {', '.join(sheet_formats())} (default: all three)")
    p.add_argument("--checks", choices=("one", "row", "all"), default="one",
                   help="dot-product expansions worked in the key and asked on the worksheet (default: one)")
    p.add_argument("--display", choices=("exact", "decimal"), default=None,
                   help="work the problem with exact forms (√2, e^(√2)) or in decimals (Part 10 style); "
                        "default: the problem's display (decimal when its entries are decimals)")
    p.add_argument("--paper", choices=("a4", "letter"), default="a4", help="paper size (default: a4)")
    p.add_argument("--pdf-engine", choices=tuple(PDF_ENGINES), default="typst",
                   help="typst (default): tagged PDF/UA with the fonts built into Typst, the same bytes on every "
                        "machine; weasyprint: the HTML sheet printed (for customised HTML templates), in fonts bundled with "
                        "worked (needs Pango: Debian libpangoft2-1.0-0); latex: the .tex compiled by pdflatex")
    p.add_argument("--template-dir", metavar="DIR",
                   help="folder searched before ours: a template with the same name overrides ours")
    p.add_argument("--force", action="store_true", help="write into an existing folder not made by worked")
    _lang_option(p)
    p.set_defaults(func=cmd_sheet)


def cmd_sheet(args) -> int:
    from .problem import load
    from .render.sheet import write_sheet
    from .solver import solve

    formats = [f.strip().lower() for f in args.format.split(",") if f.strip()]
    from . import i18n

    problem = load(args.problem)
    lang = _language(args, problem)
    sol = solve(problem, checks=args.checks, display=args.display)
    with i18n.using(lang):
        paths = write_sheet(sol, args.output, formats=formats, paper=args.paper, pdf_engine=args.pdf_engine,
                            template_dir=args.template_dir, force=args.force)
    folder = paths[0].parent if paths else None
    with i18n.using(lang):
        print(i18n.ngettext("wrote {n} file to {folder}/", "wrote {n} files to {folder}/", len(paths), folder=folder))
    for p in paths:
        print(f"  {p}")
    return 0


@command(
    "quiz", help="a different, equally fair variant per student: sheets, keys, manifest, LMS exports",
    description="Build a quiz batch from a TOML spec (title, seed, [family] = options of `worked new`, "
                "[[questions]] with ask, points, tolerance): per variant a worksheet and an answer key, one "
                "combined class PDF and key, manifest.json/.csv, Moodle XML, Canvas QTI zip and GIFT. "
                "Same spec and seed give the same bytes whatever --jobs is.")
def _quiz_options(p):
    p.add_argument("spec", help="quiz spec (.toml), e.g. problems/quiz-1.toml")
    g = p.add_mutually_exclusive_group()
    g.add_argument("-n", "--count", type=int, default=None, help="numbered variants (default: the spec's count, or 1)")
    g.add_argument("--roster", default=None, metavar="CSV", help="one variant per student (CSV with id,name columns)")
    p.add_argument("--seed", type=int, default=None, help="overrides the spec's seed")
    p.add_argument("-o", "--output", default=None, metavar="DIR", help="output folder (default output/<spec name>)")
    p.add_argument("--format", default=None, metavar="LIST",
                   help="comma-separated: pdf,html,tex,moodle,qti,gift,ipynb (default pdf,html,moodle,qti,gift; "
                        "ipynb: an exercise notebook per variant)")
    p.add_argument("--jobs", type=int, default=None, metavar="J", help="parallel processes (default: all cores)")
    p.add_argument("--variant", default=None, metavar="CODE", help="regenerate exactly this variant into DIR/variants/CODE")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--force", action="store_true", help="replace DIR even if `worked quiz` did not write it")
    p.add_argument("--pdf-engine", choices=tuple(PDF_ENGINES), default="typst",
                   help="typst (default): tagged PDF/UA, fonts built in, same bytes on every machine; weasyprint: the "
                        "HTML sheets printed in bundled fonts (needs Pango); latex: the .tex compiled by pdflatex, one document per run")
    _lang_option(p)
    p.set_defaults(func=cmd_quiz)


def cmd_quiz(args) -> int:
    from . import i18n
    from .i18n import Msg
    from .quiz import load_spec, run

    lang = _language(args)
    out, entries = run(args.spec, count=args.count, roster=args.roster, seed=args.seed, outdir=args.output,
                       formats=args.format, jobs=args.jobs, variant=args.variant, quiet=args.quiet, force=args.force,
                       pdf_engine=args.pdf_engine, lang=lang)
    if not args.quiet:
        lang = lang or load_spec(args.spec).lang      # the spec's language, as the sheets have it
        if args.variant:
            code = entries[0]["variant"]
            _say(lang, Msg("wrote variant {code} to {path}", code=code, path=f"{out}/variants/{code}"), file=sys.stderr)
        else:
            with i18n.using(lang):
                print(i18n.ngettext("wrote {n} variant to {path}", "wrote {n} variants to {path}", len(entries), path=out),
                      file=sys.stderr)
    return 0


@command("notebook", help="write a Jupyter/Colab notebook: the problem in NumPy, each step checked",
         description="Write a notebook (nbformat v4) that walks the problem the way Part 10 does, in "
                     "NumPy: one cell per step, each followed by a check against the worked key. "
                     "With no PROBLEM, the built-in Part 9 example. Opens in Jupyter or Google Colab "
                     "(File → Upload notebook); it needs only numpy.")
def _notebook_options(p):
    p.add_argument("problem", nargs="?", help="problem file (.toml or .json); default: the built-in example")
    p.add_argument("-o", "--output", default=None, metavar="FILE.ipynb",
                   help="write here, atomically (default: standard output)")
    p.add_argument("--execute", action="store_true",
                   help="run it with nbclient and store the outputs (needs the notebook extra: nbclient, ipykernel)")
    p.add_argument("--answers-hidden", action="store_true",
                   help="an exercise: the step cells are left for the student (# your code here), the checks kept")
    _lang_option(p)
    p.set_defaults(func=cmd_notebook)


def cmd_notebook(args) -> int:
    from .errors import WorkedError
    from .i18n import Msg

    out = args.output if args.output not in (None, "-") else None
    if out is not None and not out.endswith(".ipynb"):
        raise WorkedError(Msg("{file}: expected a file name ending in .ipynb", file=out))
    if args.execute and args.answers_hidden:
        raise WorkedError(Msg("--execute with --answers-hidden: an exercise notebook has no answers to run"))
    from .problem import load
    from .solver import solve
    from .writers import notebook as nbw

    if args.execute:
        nbw.require_execute()
    from . import i18n

    problem = load(args.problem)
    lang = _language(args, problem)
    with i18n.using(lang):      # the markdown in the language; the code stays Python's
        nb = nbw.build(solve(problem), answers_hidden=args.answers_hidden)
    if args.execute:
        nbw.execute_checked(nb)
    if out is None:
        sys.stdout.write(nbw.dumps(nb))
        return 0
    nbw.write(nb, out)
    _say(lang, Msg("wrote {path}", path=out), file=sys.stderr)
    return 0


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or, when *argv* names a command, of that command alone (a word that
    names none gets the full parser, whose error lists the commands; ``worked --help`` lists them by
    their help lines, which need no options)."""
    parser = argparse.ArgumentParser(
        prog="worked",
        description="Exact, step-by-step worked examples of self-attention: solutions, worksheets, quizzes, checking.")
    parser.add_argument("--version", action="version", version=f"worked {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    named = None if argv is None else next((a for a in argv if not a.startswith("-")), None)
    for name in (named,) if named in COMMANDS else ORDER:
        kw, add_options = COMMANDS[name]
        p = sub.add_parser(name, **kw)
        if argv is None or name == named:
            add_options(p)
    return parser


def main(argv=None) -> int:
    from .errors import WorkedError

    argv = _join_negative_ranges(sys.argv[1:] if argv is None else list(argv))
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if getattr(args, "pdf_engine", None) == "weasyprint":
        import logging

        # what this program shows its user: WeasyPrint's errors (a formula or asset it could not load),
        # not its warnings about the machine's fonts and libraries
        logging.getLogger("weasyprint").setLevel(logging.ERROR)
    from . import i18n
    from .i18n import tr as _

    try:
        return args.func(args) or 0
    except WorkedError as exc:      # in the language of --lang, else of the problem or spec read (English: as it was)
        with i18n.using(_error_language(args, exc)):
            print(_("error: {message}", message=exc.localized()), file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except OSError as exc:   # a full disk, a read-only folder… that no command turned into its own message
        with i18n.using(_error_language(args, exc)):
            why = exc.strerror or exc      # the system's own words
            line = _("error: {file}: {reason}", file=exc.filename, reason=why) if exc.filename else _("error: {reason}",
                                                                                                      reason=why)
            print(line, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        with i18n.using(_error_language(args, None)):
            print(_("error: interrupted"), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
