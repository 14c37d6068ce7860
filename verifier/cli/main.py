"""Parser and exit codes. Exit codes: 0 pass, 10/11/12 regressions, 13 regression of unattributed cause, 20 inconclusive, 30 incomplete, 2 usage, 1 internal.

Each command module registers its subparser cheaply and imports what it needs inside its handler, so
`verifier --help` and every `verifier CMD --help` load neither the openai SDK nor pandas, aiohttp or lm-eval.
"""

from __future__ import annotations

import argparse
import errno
import signal
import threading
import os
import sys
from typing import Any, TextIO

from ..version import __version__
from .. import scrub
from ..errors import UsageError
from .parser import Parser, check_line, command_parser, render
# By full name: `from . import x` reads as an import of the package, which itself imports this module.
import verifier.cli.bless as bless
import verifier.cli.calibrate as calibrate
import verifier.cli.compare as compare
import verifier.cli.demo as demo
import verifier.cli.engine as engine
import verifier.cli.gate as gate
import verifier.cli.lm_eval as lm_eval
import verifier.cli.list_goldens as list_goldens
import verifier.cli.list_suites as list_suites
import verifier.cli.matrix as matrix
import verifier.cli.merge as merge
import verifier.cli.proxy as proxy
import verifier.cli.report as report
import verifier.cli.run as run
import verifier.cli.runs as runs
import verifier.cli.score as score
import verifier.cli.sweep as sweep
import verifier.cli.testbed as testbed

# Order of `verifier --help`.
COMMANDS = (run, score, list_suites, list_goldens, bless, calibrate, compare, gate, matrix, sweep, lm_eval, report, merge, runs,
            engine, proxy, testbed, demo)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="verifier", description="Vendor-verifier harness for OpenAI-compatible endpoints.")
    ap.add_argument("--version", action="version", version=f"verifier {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, parser_class=Parser)
    for cmd in COMMANDS:
        cmd.register(sub)
    return ap


# An OSError about a file the user named (read-only target, `-o DIR`, missing parent) is bad input, not a bug.
USER_FILE_ERRORS = (PermissionError, IsADirectoryError, NotADirectoryError, FileNotFoundError, FileExistsError)
USER_FILE_ERRNOS = {errno.EROFS, errno.ENOSPC, errno.EACCES, errno.ENAMETOOLONG}


class _PipeSafe:
    """stdout that survives its reader going away (`verifier gate | head`): the command still writes its
    files and returns its own exit code; what it prints after the pipe closed goes nowhere."""

    def __init__(self, stream: TextIO):
        self._stream, self._gone = stream, False

    def write(self, text: str) -> int:
        if not self._gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self._close()
        return len(text)

    def flush(self) -> None:
        if not self._gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self._close()

    def _close(self) -> None:
        self._gone = True
        try:  # so the interpreter's own flush at exit does not raise again
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a, extra = ap.parse_known_args(argv)
    cmd = command_parser(ap, a)
    if extra:  # reported by the command's own parser, so "did you mean" knows its flags
        cmd.error(f"unrecognized arguments: {' '.join(extra)}")
    # The error line names only flags this command has (cli/parser.py render / check_line).
    a.parser, a.command_parser = ap, cmd
    check = getattr(a, "check", None)
    if check is not None:
        check(cmd, a)  # argparse-level errors (exit 2, one line), as argparse itself reports them
    from .console import Printable

    stdout, stderr = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = Printable(_PipeSafe(stdout)), Printable(stderr)
    try:
        with scrub.command():  # this command's secrets: registered while it runs, gone when it returns
            return _run(a)
    finally:
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at interpreter exit
        sys.stdout, sys.stderr = stdout, stderr


def _error(a: argparse.Namespace, message: str, hints: tuple[str, ...] = ()) -> None:
    """One line on stderr: the message and the hints true for this command (cli/parser.py)."""
    line = render(scrub.text(message), hints, a.command_parser)
    if os.environ.get("VERIFIER_CHECK_HINTS"):
        check_line(line, a.command_parser, a.parser)
    print(f"verifier: error: {line}", file=sys.stderr)


def _run(a: argparse.Namespace) -> int:
    # SIGTERM (a cancelled CI job) ends the command as Ctrl-C does: the run's tasks are cancelled, its journal files
    # closed, and the way on printed; exit 143 as a process killed by SIGTERM.
    terminated: list[bool] = []
    previous = None
    if threading.current_thread() is threading.main_thread():
        def on_sigterm(signum: int, frame: Any) -> None:
            terminated.append(True)
            handler = signal.getsignal(signal.SIGINT)  # asyncio's while a run collects: it cancels the run's task
            if callable(handler):
                handler(signal.SIGINT, frame)
            else:
                raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        code: int = a.fn(a)  # the command's handler (set_defaults(fn=...)): its exit code
        return code
    except UsageError as e:
        _error(a, str(e), e.hints)
        return 2
    except OSError as e:
        if isinstance(e, USER_FILE_ERRORS) or e.errno in USER_FILE_ERRNOS:
            where = f": {e.filename}" if e.filename else ""
            print(f"verifier: error: {e.strerror or e}{where}", file=sys.stderr)
            return 2
        return _internal(e)
    except KeyboardInterrupt as e:
        return _interrupted(e, terminated)
    except Exception as e:  # noqa: BLE001 - the contract is one line and exit 1
        from verifier.execution.journal import NotARunDir

        if isinstance(e, NotARunDir):
            _error(a, str(e))
            return 2
        return _internal(e)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _interrupted(e: KeyboardInterrupt, terminated: list[bool]) -> int:
    """Where an interrupt left things and the real commands that continue (cli/run.py, cli/gate.py fill them in)."""
    what = "terminated (SIGTERM)" if terminated else "interrupted"
    run_dir = getattr(e, "run_dir", None)
    if run_dir is None:
        print(f"verifier: {what}", file=sys.stderr)
    else:
        from .run import journal_state

        print(f"verifier: {what}; {journal_state(run_dir)} in {run_dir}", file=sys.stderr)
    for i, step in enumerate(getattr(e, "next_steps", ()) or ()):
        print(f"  {'continue with' if i == 0 else 'then'}: {step}", file=sys.stderr)
    return 143 if terminated else 130


def _internal(e: Exception) -> int:
    if os.environ.get("VERIFIER_DEBUG"):
        raise e
    print(f"verifier: internal error: {type(e).__name__}: {scrub.text(str(e))}", file=sys.stderr)
    return 1


def entry() -> None:
    code = main()
    # The process ends here and its objects go with it: the collector's walks of the whole heap while the
    # interpreter shuts down cost ~0.3 s after a full gsm8k run (measured: 0.30 s from here to exit, 0.03 s frozen).
    # Every file is written and closed by now; stdout and stderr are flushed at exit as ever.
    import gc

    gc.freeze()
    sys.exit(code)
