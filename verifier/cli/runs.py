"""`verifier runs [DIR]`: past runs and gates, newest first, from their own headers (run.json, comparison.json)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .types import CommaList, positive_int


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("runs", help="list past runs and gates under DIR (default runs/): when, endpoint, model, suites, status, exit")
    p.add_argument("dir", nargs="?", default="runs", help="where to look (default runs/); run directories up to 3 levels down")
    p.add_argument("--status", action=CommaList, help="only these statuses, comma-separated (pass, frontend_regression, ..., incomplete; "
                                    "`run` for runs never compared, `interrupted` for a run or gate that never finished)")
    p.add_argument("--model", help="only runs of this model")
    p.add_argument("--suite", help="only runs that include this suite")
    p.add_argument("--since", metavar="WHEN", help="only runs started since: an ISO date/time (2026-12-01, 2026-12-01T10:00) "
                                                   "or an age (30m, 6h, 2d)")
    p.add_argument("--limit", type=positive_int, help="at most N rows")
    p.add_argument("--json", action="store_true", help="one JSON object a line instead of the table")
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from verifier.app.runs import RunsQuery, list_runs
    from .args import names

    rows = list_runs(RunsQuery(root=Path(a.dir), statuses=names(a.status), model=a.model, suite=a.suite,
                               since=a.since, limit=a.limit))
    if a.json:
        for r in rows:
            print(json.dumps(r.to_json(), sort_keys=True))
        return 0
    print(f"{'started':<20} {'kind':<5} {'status':<24} {'exit':>4}  {'model':<14} {'suites':<18} {'endpoint':<28} run")
    for r in rows:
        code = "" if r.exit_code is None else str(r.exit_code)
        print(f"{(r.started or '?')[:19]:<20} {r.kind:<5} {r.status:<24} {code:>4}  {str(r.model)[:14]:<14} "
              f"{','.join(r.suites)[:18]:<18} {str(r.endpoint)[:28]:<28} {r.run_dir}")
    if not rows:
        print(f"(no runs under {a.dir})")
    return 0
