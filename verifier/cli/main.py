"""Parser and exit codes. Exit codes: 0 pass, 10/11/12 regressions, 20 inconclusive, 30 incomplete, 2 usage, 1 internal.

Each command module registers its subparser cheaply and imports what it needs inside its handler, so
`verifier --help` and every `verifier CMD --help` load neither the openai SDK nor pandas, aiohttp or lm-eval.
"""

from __future__ import annotations

import argparse
import os
import sys

from .. import __version__
from ..errors import UsageError
# By full name: `from . import x` reads as an import of the package, which itself imports this module.
import verifier.cli.bless as bless
import verifier.cli.calibrate as calibrate
import verifier.cli.compare as compare
import verifier.cli.demo as demo
import verifier.cli.engine as engine
import verifier.cli.gate as gate
import verifier.cli.lm_eval as lm_eval
import verifier.cli.list_suites as list_suites
import verifier.cli.matrix as matrix
import verifier.cli.merge as merge
import verifier.cli.proxy as proxy
import verifier.cli.report as report
import verifier.cli.run as run
import verifier.cli.score as score
import verifier.cli.testbed as testbed

# Order of `verifier --help`.
COMMANDS = (run, score, list_suites, bless, calibrate, compare, gate, matrix, lm_eval, report, merge, engine, proxy, testbed,
            demo)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="verifier", description="Vendor-verifier harness for OpenAI-compatible endpoints.")
    ap.add_argument("--version", action="version", version=f"verifier {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)
    for cmd in COMMANDS:
        cmd.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    # gate --config tells flags given on the command line from defaults by parsing them again.
    a.argv, a.parser = list(sys.argv[1:] if argv is None else argv), ap
    check = getattr(a, "check", None)
    if check is not None:
        check(ap, a)  # argparse-level errors (exit 2 with usage), as argparse itself reports them
    try:
        return a.fn(a)
    except UsageError as e:
        print(f"verifier: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("verifier: interrupted; resume with --resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the contract is one line and exit 1
        from ..journal import NotARunDir

        if isinstance(e, NotARunDir):
            print(f"verifier: error: {e}", file=sys.stderr)
            return 2
        if os.environ.get("VERIFIER_DEBUG"):
            raise
        print(f"verifier: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())
