"""`verifier gate --golden G --base-url ...`: run + compare + report, CI exit code."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .args import add_endpoint_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="run the golden's samples against an endpoint, compare, report; CI exit code")
    p.add_argument("--golden", required=True)
    p.add_argument("--data", help="local dataset path, when the golden's suites need one")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-gate)")
    p.add_argument("--infra-budget", type=float, default=0.02)
    p.add_argument("--allow-inconclusive", action="store_true", help="exit 0 instead of 20 when inconclusive")
    p.add_argument("--report", help="HTML report path (default RUN_DIR/report.html)")
    p.add_argument("--junit", help="JUnit XML path (default RUN_DIR/junit.xml)")
    p.add_argument("--markdown", help="Markdown summary path (default RUN_DIR/summary.md; also appended to $GITHUB_STEP_SUMMARY)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--probes", action="store_true", help="run the parameter-contract probes (default: when the golden has them)")
    p.add_argument("--sequential", action="store_true", help="send samples in batches and stop once a regression is decided (reports samples saved)")
    p.add_argument("--looks", type=int, default=5, help="with --sequential: number of batches / interim looks (default 5)")
    add_endpoint_args(p)
    p.set_defaults(fn=handle)


def handle(a: argparse.Namespace) -> int:
    from ..app_gate import GateSpec
    from .args import endpoint_from_args, exit_code, overrides_from_args, parse_extra_body

    spec = GateSpec(
        golden=Path(a.golden), endpoint=endpoint_from_args(a), overrides=overrides_from_args(a),
        extra_body=parse_extra_body(a.extra_body) if a.extra_body else None, data=a.data,
        out=Path(a.out) if a.out else None, infra_budget=a.infra_budget, sequential=a.sequential, looks=a.looks,
        probes=a.probes, quiet=a.quiet,
    )
    doc = run_gate(spec, html=a.report, junit=a.junit, markdown=a.markdown)
    return exit_code(doc, a.allow_inconclusive)


def run_gate(spec: Any, html: str | None = None, junit: str | None = None, markdown: str | None = None) -> dict[str, Any]:
    """app.gate, then what a person and a CI job read: the text summary and the report files."""
    from .. import app_gate
    from ..app_text import print_comparison

    doc = app_gate.gate(spec)
    seq = doc.get("sequential")
    if seq:
        used, total = seq["used_samples"], seq["total_samples"]
        print(f"sequential: decided after {used}/{total} samples ({total - used} not sent)")
    print_comparison(doc)
    write_ci_outputs(Path(doc["run"]["run_dir"]), doc, html, junit, markdown)
    return doc


def write_ci_outputs(run_dir: Path, doc: dict[str, Any], html: str | None, junit: str | None, markdown: str | None) -> None:
    """HTML report, JUnit XML and Markdown summary, where the report module offers them."""
    try:
        from .. import report
    except ImportError:
        return
    report.write_all(run_dir, doc, html=html, junit=junit, markdown=markdown)
