"""The command line: ``worked solve|sheet|new|quiz|check|grade|serve``. Imports only what a command needs."""
from __future__ import annotations

import argparse
import sys

from . import __version__


def _add_solve(sub):
    p = sub.add_parser("solve", help="print an exact, step-by-step worked solution",
                       description="Solve a problem file exactly and print the worked steps. "
                                   "With no PROBLEM, solves the built-in Part 9 example (cats chase mice).")
    p.add_argument("problem", nargs="?", help="problem file (.toml or .json); default: the built-in example")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text", help="output format (default: text)")
    p.add_argument("--checks", choices=("one", "row", "all"), default="one",
                   help="dot-product expansions shown: one entry per product (default), one full row, or every entry")
    p.set_defaults(func=cmd_solve)


def cmd_solve(args) -> int:
    from .problem import load
    from .solver import solve

    problem = load(args.problem)
    sol = solve(problem, checks=args.checks)
    if args.format == "json":
        import json

        out = json.dumps(sol.to_dict(), indent=2, ensure_ascii=False) + "\n"
    elif args.format == "markdown":
        from .writers import markdown

        out = markdown.render(sol)
    else:
        out = sol.text()
    sys.stdout.write(out)
    return 0


def _add_check(sub):
    p = sub.add_parser("check", help="check a student's answers: which entries, which step, which mistake",
                       description="Check answers to a problem: a verdict per entry (correct, wrong, not answered), "
                                   "error carried forward from the student's own earlier answers, and named "
                                   "misconceptions with the worked step to re-read. Exit status: 0 when every answered "
                                   "entry is correct, 1 otherwise, 2 when a file cannot be read.")
    p.add_argument("problem", help="problem file (.toml or .json)")
    p.add_argument("answers", help="answers file (.toml or .json): matrices by name (Q, K, V, scores, scaled, weights, Z; "
                                   "head1.Q, …, concat, Z with several heads); blank entries are \"\" or \"?\"")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--tolerance", metavar="T", default=None,
                   help="accept answers within T of the exact value (0.01), or T%% of it (2%%); default: any answer a "
                        "careful student gets by rounding to the problem's decimals, also at intermediate steps")
    p.add_argument("--reveal", action="store_true", help="also show the expected values of wrong entries")
    p.set_defaults(func=cmd_check)


def cmd_check(args) -> int:
    from .check import Tolerance, check_answers, read_answers
    from .problem import load

    problem = load(args.problem)
    tol = Tolerance.parse(args.tolerance)
    answers = read_answers(args.answers)
    report = check_answers(problem, answers, tolerance=tol, reveal=args.reveal)
    if args.format == "json":
        import json

        out = json.dumps(report.to_dict(), indent=2, ensure_ascii=False) + "\n"
    else:
        out = report.text()
    sys.stdout.write(out)
    s = report.summary()
    return 0 if not (s["wrong"] or s["invalid"] or report.errors) else 1


def _add_grade(sub):
    p = sub.add_parser("grade", help="grade a class from a quiz manifest and a CSV of responses",
                       description="Grade a quiz: read QUIZDIR/manifest.json (written by `worked quiz`) and a CSV with "
                                   "a row per student and a column per question (or Moodle's Responses report); write "
                                   "gradebook.csv and a self-contained class report, report.html.")
    p.add_argument("quizdir", help="the quiz folder holding manifest.json (or the manifest file itself)")
    p.add_argument("responses", help="CSV of responses: an id column and a column per question, e.g. scores[2,3]")
    p.add_argument("-o", "--output", metavar="DIR", default=None, help="output folder (default: QUIZDIR/grades)")
    p.set_defaults(func=cmd_grade)


def cmd_grade(args) -> int:
    from .grade import grade

    res = grade(args.quizdir, args.responses, args.output)
    for w in res["warnings"]:
        print(f"warning: {w}", file=sys.stderr)
    results = [r for r in res["results"] if r.responded]
    mean = sum(r.total for r in results) / len(results) if results else 0.0
    print(f"graded {len(results)} of {len(res['results'])} students (mean {mean:.2f}); "
          f"wrote {res['gradebook']} and {res['report']}")
    return 0


def _add_serve(sub):
    p = sub.add_parser("serve", help="run the web page for students and teachers",
                       description="Serve the web page: students pick a problem (or type a quiz variant code), fill "
                                   "in the matrices and get feedback step by step; teachers build or draw a problem "
                                   "and download its worksheet and key. Binds to 127.0.0.1 unless --host says "
                                   "otherwise (use --host 0.0.0.0 to serve a class on your network).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    p.add_argument("--problems", metavar="DIR", default=None,
                   help="folder of problem files offered by name (default: problems/ if it exists, else the "
                        "built-in example); a quiz folder from `worked quiz` (with manifest.json) offers its "
                        "variants by code instead")
    p.add_argument("--no-solutions", action="store_true",
                   help="never send solutions, expected values or answer keys (for quizzes): only verdicts and "
                        "diagnoses")
    p.add_argument("--workers", type=int, default=1, help="server processes (default: 1; use more to serve a class)")
    p.add_argument("--timeout", type=float, default=20.0, help="seconds allowed for solving or checking (default: 20)")
    p.set_defaults(func=cmd_serve)


def cmd_serve(args) -> int:
    import os
    import socket
    from pathlib import Path

    from .errors import WorkedError

    if not 0 < args.port < 65536:
        raise WorkedError(f"--port: expected a port number from 1 to 65535, got {args.port}")
    if not 1 <= args.workers <= 64:
        raise WorkedError(f"--workers: expected 1 to 64, got {args.workers}")
    if not 0 < args.timeout <= 600:
        raise WorkedError(f"--timeout: expected seconds from 0 to 600, got {args.timeout}")
    if args.problems is not None:
        root = Path(args.problems)
        if not root.is_dir():
            raise WorkedError(f"{args.problems}: no such folder (--problems expects a folder of problem files or a quiz folder)")
    else:
        root = Path("problems") if Path("problems").is_dir() else None
    try:  # fail early, in one line, when the port is taken
        with socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((args.host, args.port))
    except OSError as exc:
        raise WorkedError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}"
                          f"{'; try another --port' if exc.errno == 98 else ''}") from None

    import uvicorn

    from .server.app import Config, create_app

    cfg = Config(problems_dir=root.resolve() if root else None, no_solutions=args.no_solutions,
                 solve_timeout=args.timeout)
    where = f"http://{'[' + args.host + ']' if ':' in args.host else args.host}:{args.port}/"
    what = f"problems from {root}" if root else "the built-in example"
    print(f"worked serve: {where}  ({what}{', no solutions' if args.no_solutions else ''}); Ctrl+C stops",
          file=sys.stderr)
    if args.workers > 1:
        os.environ["WORKED_SERVE_CONFIG"] = cfg.to_env()
        uvicorn.run("worked.server.app:create_app_from_env", factory=True, host=args.host, port=args.port,
                    workers=args.workers, log_level="warning", limit_concurrency=2000, timeout_keep_alive=10)
    else:
        uvicorn.run(create_app(cfg), host=args.host, port=args.port, log_level="warning",
                    limit_concurrency=2000, timeout_keep_alive=10)
    return 0


REGISTRY = [_add_solve]
REGISTRY.append(_add_check)
REGISTRY.append(_add_grade)
REGISTRY.append(_add_serve)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="worked",
        description="Exact, step-by-step worked examples of self-attention: solutions, worksheets, quizzes, checking.")
    parser.add_argument("--version", action="version", version=f"worked {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in REGISTRY:
        add(sub)
    return parser


def main(argv=None) -> int:
    from .errors import WorkedError

    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args) or 0
    except WorkedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
