"""`verifier matrix`: N candidate runs (one per provider) against one golden -> one HTML page + one Markdown table.

`finish` is also the back half of `verifier gate --config` with several [[endpoints]] (cli/gate.py gates each
concurrently into OUT/<name>, then calls it). Exit code: the worst of the providers' (0 only when all pass).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("matrix", help="N candidate runs (one per provider) vs one golden -> matrix.html + matrix.md")
    p.add_argument("runs", nargs="+", metavar="[NAME=]RUN_DIR", help="candidate run directories; NAME= sets the provider name (default: the directory name)")
    p.add_argument("--golden", required=True, help="the golden every run is compared with")
    p.add_argument("--out", required=True, metavar="DIR", help="where matrix.html, matrix.md and matrix.json go")
    p.add_argument("--infra-budget", type=float, default=0.02)
    p.add_argument("--allow-inconclusive", action="store_true", help="inconclusive providers count as passing for the exit code (regression_unattributed, 13, never does)")
    p.set_defaults(fn=handle)


def parse_runs(items: list[str]) -> list[tuple[str, Path]]:
    from ..errors import UsageError

    out = []
    for item in items:
        name, _, path = item.rpartition("=") if "=" in item else ("", "", item)
        out.append((name or Path(path).name, Path(path)))
    names = [n for n, _ in out]
    if len(set(names)) != len(names):
        raise UsageError(f"provider names must be unique (name them NAME=RUN_DIR): {', '.join(names)}")
    return out


def handle(a: argparse.Namespace) -> int:
    from .. import app_gate

    docs = {}
    for name, run_dir in parse_runs(a.runs):
        doc = app_gate.compare_run(run_dir, a.golden, None, a.infra_budget)
        write_report(run_dir, doc)
        docs[name] = (run_dir, doc)
    return finish(docs, Path(a.out), a.allow_inconclusive)


def write_report(run_dir: Path, doc: dict[str, Any]) -> None:
    """The full report each row links to (RUN_DIR/report.html), where the report module offers it."""
    try:
        from .. import report
    except ImportError:
        return
    report.write_all(run_dir, doc, html=None, junit=None, markdown=None)


def finish(docs: dict[str, tuple[Path, dict[str, Any]]], out: Path, allow_inconclusive: bool) -> int:
    """Write the matrix of compared runs; print the Markdown table; the worst exit code."""
    from .. import matrix
    from ..errors import UsageError
    from .args import exit_code

    try:
        entries = [matrix.read_entry(name, run_dir) for name, (run_dir, _) in docs.items()]
    except ValueError as e:
        raise UsageError(str(e)) from None
    m = matrix.build(entries, out)
    paths = matrix.write(m, out)
    print(matrix.markdown(m))
    print(f"matrix: {paths['matrix.html']}  {paths['matrix.md']}", file=sys.stderr)
    return max(exit_code(doc, allow_inconclusive) for _, doc in docs.values())
