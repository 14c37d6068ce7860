"""`verifier gate --golden G --base-url ...` (or `--config gate.toml`): run + compare + report, CI exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .args import MODE_NAMES, add_endpoint_args
from .types import fraction, positive_int

if TYPE_CHECKING:
    from verifier.attribution.document import Comparison


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="run the golden's samples against an endpoint, compare, report; CI exit code")
    p.add_argument("--config", metavar="GATE.toml", help="gate file (see README 'Gate files'); flags given here override it")
    p.add_argument("--golden", help="golden directory, or the name of a packaged golden (verifier list-goldens)")
    p.add_argument("--suite", help="comma-separated: gate only these of the golden's suites (default all)")
    p.add_argument("--mode", help=f"comma-separated: gate only these of the golden's wire modes ({', '.join(MODE_NAMES)}; default all)")
    p.add_argument("--limit", type=positive_int, help="gate only the first N samples of each of the golden's suites, in the order the reference sent them (a quick PR gate; the margins stay the golden's)")
    p.add_argument("--margin", action="append", metavar="KEY=VALUE:reason", help="margin over the golden's, e.g. smoke/accuracy=0.05:why (repeatable)")
    p.add_argument("--data", help="reload the samples from this dataset instead of the golden's own inputs.jsonl (rarely needed)")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-gate)")
    p.add_argument("--force", action="store_true", help="write the run into --out even when it is a golden directory")
    p.add_argument("--infra-budget", type=fraction, default=0.02)
    p.add_argument("--allow-inconclusive", action="store_true", help="exit 0 instead of 20 when inconclusive (never for 13, a significant quality drop of unattributed cause)")
    p.add_argument("--report", help="HTML report path (default RUN_DIR/report.html)")
    p.add_argument("--junit", help="JUnit XML path (default RUN_DIR/junit.xml)")
    p.add_argument("--markdown", help="Markdown summary path (default RUN_DIR/summary.md; also appended to $GITHUB_STEP_SUMMARY)")
    p.add_argument("--matrix", metavar="DIR", help="gate files with several endpoints: where matrix.html and matrix.md go (default OUT/matrix)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--probes", action="store_true", help="run the parameter-contract probes (default: when the golden has them)")
    p.add_argument("--no-probes", action="store_true", help="leave the golden's probes out: judge its samples only (comparison.json says so)")
    p.add_argument("--sequential", action="store_true", help="send samples in batches and stop once a regression is decided (reports samples saved)")
    p.add_argument("--looks", type=positive_int, default=5, help="with --sequential: number of batches / interim looks (default 5)")
    add_endpoint_args(p, required=False)
    p.set_defaults(fn=handle, check=check)


def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if a.config:
        return  # the file may supply them; checked after merging
    if a.probes and a.no_probes:
        raise UsageError("--probes and --no-probes contradict each other: give one")
    missing = [f for f, v in (("--golden", a.golden), ("--base-url", a.base_url), ("--model", a.model)) if not v]
    if missing:
        ap.error(f"the following arguments are required: {', '.join(missing)} (or --config GATE.toml)")


def handle(a: argparse.Namespace) -> int:
    from .args import exit_code

    endpoints: list[argparse.Namespace] = []
    if a.config:
        a, endpoints = merge_config(a)
    if len(endpoints) > 1:
        return gate_many(a, endpoints)
    spec = spec_from_args(a)
    from verifier.run.journal import check_writable

    for path in (a.report, a.junit, a.markdown):  # every output checked before the first request
        if path:
            check_writable(Path(path))
    doc = run_gate(spec, html=a.report, junit=a.junit, markdown=a.markdown)
    return exit_code(doc, a.allow_inconclusive)


def merge_config(a: argparse.Namespace) -> tuple[argparse.Namespace, list[argparse.Namespace]]:
    """Flags over the gate file over the environment: the merged flags, and with several [[endpoints]] one
    merged namespace per endpoint (its `name` in `.endpoint_name`)."""
    import verifier.cli.gatefile as gatefile

    from verifier.app.collect import default_run_dir

    flags, endpoints = gatefile.translate(gatefile.read(a.config))
    sub = gatefile.subparser(a.parser, "gate")
    given = gatefile.explicit_dests(a.parser, a.argv, "gate")
    out = a.out if "out" in given else flags.get("out") or str(default_run_dir("gate" if len(endpoints) <= 1 else "gate-matrix"))
    flags = gatefile.resolve_outputs(flags, out)
    if len(endpoints) == 1:
        flags.update({k: v for k, v in endpoints[0].items() if k != "name"})
    merged = gatefile.apply(a, flags, given, sub)
    per_endpoint = []
    if len(endpoints) > 1:
        for ep in endpoints:
            ns = gatefile.apply(merged, {k: v for k, v in ep.items() if k != "name"}, given, sub)
            ns.endpoint_name = ep["name"]
            per_endpoint.append(ns)
    return merged, per_endpoint


def spec_from_args(a: argparse.Namespace):  # -> app_gate.GateSpec
    from verifier.app.gate import GateSpec
    from ..errors import UsageError
    from .args import endpoint_from_args, names, overrides_from_args, parse_extra_body

    if a.probes and a.no_probes:
        raise UsageError("--probes and --no-probes contradict each other: give one")
    missing = [f for f, v in (("--golden", a.golden), ("--base-url", a.base_url), ("--model", a.model)) if not v]
    if missing:
        raise UsageError(f"gate needs {', '.join(missing)} (on the command line or in the gate file)")
    return GateSpec(
        golden=Path(a.golden), endpoint=endpoint_from_args(a), overrides=overrides_from_args(a),
        extra_body=parse_extra_body(a.extra_body) if a.extra_body else None, data=a.data,
        out=Path(a.out) if a.out else None, infra_budget=a.infra_budget, sequential=a.sequential, looks=a.looks,
        probes=a.probes, quiet=a.quiet, suites=names(a.suite), modes=names(a.mode), margins=tuple(a.margin or ()),
        limit=a.limit, skip_probes=a.no_probes, force=bool(getattr(a, "force", False)),
    )


def run_gate(spec: Any, html: str | None = None, junit: str | None = None, markdown: str | None = None,
             echo: bool = True) -> Comparison:
    """app.gate, then what a person and a CI job read: the text summary and the report files."""
    from verifier.app import gate as app_gate
    from verifier.cli.text import print_comparison

    doc = app_gate.gate(spec)
    run_dir = Path((doc.run or {})["run_dir"])  # compare_run always records it
    narrowed = None
    if spec.narrows:  # the report shows the golden this gate compared with
        narrowed = app_gate.narrow(app_gate.load_golden(spec.golden), spec)
    # Files first: a reader that stops early (`verifier gate | head`) must not cost the report.
    paths = write_ci_outputs(run_dir, doc, html, junit, markdown, narrowed)
    lim = doc.limited
    if lim and echo:
        part = f"the golden's first {lim['limit']} samples per suite" if lim["limit"] else "the golden's samples"
        probes = ", its probes left out" if lim["probes_left_out"] else ""
        print(f"limited: {part} ({lim['gated_records']} of its {lim['golden_records']} records){probes}")
    seq = doc.sequential
    if seq and echo:
        used, total = seq["used_samples"], seq["total_samples"]
        print(f"sequential: decided after {used}/{total} samples ({total - used} not sent)")
    if echo:
        print_comparison(doc)
        print_outputs(run_dir, paths)
    return doc


def print_outputs(run_dir: Path, paths: dict[str, Path] | None) -> None:
    """Where the report went: the last lines a person (or a CI log) reads."""
    from verifier.run.rundir import RunDir

    print(f"report: {paths['html']}" if paths else f"comparison: {RunDir(run_dir).comparison_path()}")
    if paths:
        print(f"  junit {paths['junit']}, summary {paths['markdown']}, samples {paths['csv']}, "
              f"comparison {RunDir(run_dir).comparison_path()}")


def write_ci_outputs(run_dir: Path, doc: Comparison, html: str | None, junit: str | None, markdown: str | None,
                     golden: tuple[dict[str, Any], list[dict[str, Any]]] | None = None) -> dict[str, Path] | None:
    """HTML report, JUnit XML and Markdown summary, where the report module offers them; their paths."""
    try:
        from verifier.app import report_files as report
    except ImportError:
        return None
    data = report.GoldenData.of(*golden) if golden is not None else None
    return report.write_all(run_dir, doc, html=html, junit=junit, markdown=markdown, golden=data)


def gate_many(a: argparse.Namespace, endpoints: list[argparse.Namespace]) -> int:
    """Gate every endpoint of a gate file concurrently (one thread each, quiet), then write the matrix."""
    from concurrent.futures import ThreadPoolExecutor

    from verifier import scrub
    from verifier.app.collect import default_run_dir
    from verifier.run.rundir import RunDir
    from ..errors import UsageError
    from .matrix import finish

    root = Path(a.out) if a.out else default_run_dir("gate-matrix")
    specs = {}
    for ns in endpoints:
        ns.out, ns.quiet = str(root / ns.endpoint_name), True
        specs[ns.endpoint_name] = spec_from_args(ns)  # every endpoint checked before anything is sent
    if a.report or a.junit or a.markdown:
        raise UsageError("with several endpoints, reports go into each OUT/<name>/; use [outputs] matrix for the summary")

    def one(name: str) -> tuple[Path, Comparison, scrub.Secrets]:
        with scrub.command() as secrets:  # each gate's secrets its own: no thread writes with another's
            doc = run_gate(specs[name], echo=False)
            run_dir = Path((doc.run or {})["run_dir"])  # compare_run always records it
            print(f"{name}: {doc.status} (exit {doc.exit_code}); report: {RunDir(run_dir).report_html()}", file=sys.stderr)
        return run_dir, doc, secrets

    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        futures = {name: pool.submit(one, name) for name in specs}
        done = {name: f.result() for name, f in futures.items()}
    for _, _, secrets in done.values():
        scrub.current().adopt(secrets)  # the matrix holds every gate's documents: scrubbed of every gate's secrets
    docs = {name: (run_dir, doc) for name, (run_dir, doc, _) in done.items()}
    return finish(docs, Path(a.matrix) if a.matrix else root / "matrix", a.allow_inconclusive)
