"""`verifier report RUN_DIR [--golden G]`: self-contained HTML report.

The flags live only here; the handler imports verifier.report (which loads pandas) on use, so `--help` stays cheap.
"""

from __future__ import annotations

import argparse


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("report", help="self-contained HTML report of a run, optionally against a golden")
    add_arguments(p)
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("run_dir", help="scored (or scorable) run directory")
    p.add_argument("--golden", help="golden directory: compare against it (uses RUN_DIR/comparison.json when made against it)")
    p.add_argument("-o", "--out", help="HTML file to write (default RUN_DIR/report.html)")
    p.add_argument("--csv", help="also write the per-sample comparison as CSV to this file")


def handle(a: argparse.Namespace) -> int:
    from verifier.app.report_files import write_report

    path, status, records = write_report(a.run_dir, a.golden, a.out, a.csv)
    print(f"report: {path} ({status}, {records} records)")
    return 0
