"""`verifier run`: collect responses from an endpoint into a run directory, then score it."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .args import add_endpoint_args, add_selection_args


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("run", help="collect responses from an endpoint into a run directory, then score it")
    add_selection_args(p)
    add_endpoint_args(p, required=False)
    p.add_argument("--out", help="run directory to create (default runs/<timestamp>-<suites>)")
    p.add_argument("--force", action="store_true", help="write the run into --out even when it is a golden directory")
    p.add_argument("--resume", metavar="RUN_DIR", help="re-send only what is missing or ended in an infra error")
    p.add_argument("--requests", metavar="FILE.jsonl", help="replay raw chat-completions request bodies as-is (K2-Vendor-Verifier format); same as --suite replay --data FILE")
    p.add_argument("--quiet", action="store_true", help="no progress bar (for CI)")
    p.add_argument("--probes", action="store_true", help="also run the parameter-contract probes (probes.json)")
    p.add_argument("--context-probe", action="store_true",
                   help="also run the context-truncation probe: one long prompt at growing lengths (context.json)")
    p.set_defaults(fn=handle, check=check)


def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if not a.resume and (not a.base_url or not a.model):
        ap.error("run needs --base-url and --model (or --resume)")


def handle(a: argparse.Namespace) -> int:
    from verifier.app import collect as app
    from verifier.cli.text import print_summary
    from verifier.errors import Interrupted
    from .args import run_spec_from_args

    try:
        print_summary(app.collect(run_spec_from_args(a)).summary)
    except Interrupted as e:
        e.next_steps = (resume_command(e.run_dir, a),) if e.run_dir is not None else ()
        raise
    return 0


def resume_command(run_dir: Any, a: argparse.Namespace) -> str:
    """The command that continues an interrupted run: its real directory and the endpoint flags a resume needs
    (the journal keeps the base URL redacted, and never a header value or a key)."""
    import shlex

    from verifier.wire.endpoint import redact_url

    parts = ["verifier", "run", "--resume", str(run_dir)]
    if getattr(a, "base_url", None):
        parts += ["--base-url", redact_url(a.base_url)]
    if getattr(a, "api_key_env", None) not in (None, "OPENAI_API_KEY"):
        parts += ["--api-key-env", a.api_key_env]
    line = " ".join(shlex.quote(p) for p in parts)
    if getattr(a, "header", None):
        line += " (and your --header flags again)"
    return line


def journal_state(run_dir: Path) -> str:
    """What an interrupt left in the journal: whole records, and whether a torn last line is there (a resume drops it)."""
    from verifier import safeio
    from verifier.execution.layout import RESPONSES

    path = Path(run_dir) / RESPONSES
    if not path.exists():
        return "no record journaled yet"
    whole = torn = 0
    for line in safeio.iter_lines(path, within=run_dir):
        try:
            json.loads(line)
            whole += 1 if line.endswith(b"\n") else 0
            torn += 0 if line.endswith(b"\n") else 1
        except ValueError:
            torn += 1
    return f"the journal is consistent: {whole} whole record(s)" + (f", {torn} torn line(s) a resume drops" if torn else "")
