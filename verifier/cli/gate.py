"""`verifier gate --golden G --base-url ...` (or `--config gate.toml`): run + compare + report, CI exit code."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verifier.types import DEFAULT_INFRA_BUDGET

from verifier.surfaces.registry import MODES as MODE_NAMES

from .args import add_endpoint_args, add_resend_arg, add_teacher_forcing_args
from .types import CommaList, fraction, positive_int

if TYPE_CHECKING:
    from verifier.app.spec import GateOptions
    from verifier.attribution.document import Comparison
    from verifier.golden.model import Golden


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser("gate", help="run the golden's samples against an endpoint, compare, report; CI exit code")
    p.add_argument("--config", metavar="GATE.toml", help="gate file (see docs/ci.md, 'Gate files'); flags given here override it")
    p.add_argument("--golden", help="golden directory, or the name of a packaged golden (verifier list-goldens)")
    p.add_argument("--suite", action=CommaList, help="comma-separated: gate only these of the golden's suites (default all)")
    p.add_argument("--mode", action=CommaList, help=f"comma-separated: gate only these of the golden's wire modes ({', '.join(MODE_NAMES)}; default all)")
    p.add_argument("--limit", type=positive_int, help="gate only the first N samples of each of the golden's suites, in the order the reference sent them (a quick PR gate; the margins stay the golden's)")
    p.add_argument("--margin", action="append", metavar="KEY=VALUE:reason", help="margin over the golden's, e.g. smoke/accuracy=0.05:why (repeatable)")
    p.add_argument("--data", help="reload the samples from this dataset instead of the golden's own inputs.jsonl (rarely needed)")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-gate)")
    p.add_argument("--force", action="store_true", help="write the run into --out even when it is a golden directory")
    p.add_argument("--infra-budget", type=fraction, help=f"infra error rate above which the run is incomplete (default {DEFAULT_INFRA_BUDGET})")
    p.add_argument("--allow-inconclusive", action="store_true", default=None, help="exit 0 instead of 20 when inconclusive (never for 13, a significant quality drop of unattributed cause)")
    p.add_argument("--report", help="HTML report path (default RUN_DIR/report.html)")
    p.add_argument("--junit", help="JUnit XML path (default RUN_DIR/junit.xml)")
    p.add_argument("--markdown", help="Markdown summary path (default RUN_DIR/summary.md; also appended to $GITHUB_STEP_SUMMARY)")
    p.add_argument("--matrix", metavar="DIR", help="gate files with several endpoints: where matrix.html and matrix.md go (default OUT/matrix)")
    p.add_argument("--quiet", action="store_true", default=None)
    p.add_argument("--probes", action="store_true", default=None, help="run the parameter-contract probes and compare them (default: exactly the golden's probes, when it has them)")
    p.add_argument("--no-probes", action="store_true", default=None, help="leave the golden's probes out: judge its samples only (comparison.json says so)")
    p.add_argument("--sequential", action="store_true", default=None, help="send samples in batches and stop once a regression is decided (reports samples saved)")
    p.add_argument("--looks", type=positive_int, help="with --sequential: number of batches / interim looks (default 5)")
    add_teacher_forcing_args(p)
    add_resend_arg(p)
    # No defaults and no environment here: the flags are merged over the gate file and the environment as values.
    add_endpoint_args(p, required=False, unset=True)
    p.set_defaults(fn=handle, check=check)


def check(ap: argparse.ArgumentParser, a: argparse.Namespace) -> None:
    if a.probes and a.no_probes:
        ap.error("--probes and --no-probes contradict each other: give one")


def options_from_flags(a: argparse.Namespace) -> "GateOptions":
    """The command line's door: what the flags given say, None for every flag not given."""
    from verifier.app.spec import GateOptions, Probes, margin_from_flag, names, sampling
    from .args import parse_extra_body, parse_headers

    probes = Probes.ON if a.probes else Probes.OFF if a.no_probes else None
    return GateOptions(
        golden=a.golden, suites=names(a.suite, "--suite") if a.suite else None,
        modes=names(a.mode, "--mode") if a.mode else None, limit=a.limit, data=a.data,
        margins=tuple(margin_from_flag(m, "gate") for m in a.margin) if a.margin else None, probes=probes,
        sequential=a.sequential, looks=a.looks, teacher_forcing=a.teacher_forcing, forced_positions=a.forced_positions,
        resend=a.resend, infra_budget=a.infra_budget, allow_inconclusive=a.allow_inconclusive,
        quiet=a.quiet, base_url=a.base_url, model=a.model, api_key_env=a.api_key_env,
        headers=parse_headers(a.header) if a.header else None, concurrency=a.concurrency, timeout_s=a.timeout,
        max_retries=a.max_retries, max_response_bytes=int(a.max_response_mb * 2**20) if a.max_response_mb else None,
        max_stream_events=a.max_stream_events, request_deadline_s=a.request_deadline, info_deadline_s=a.info_deadline,
        model_check=a.model_check, serving_adapter=a.serving_adapter, sampling=sampling(a.temperature, a.top_p, a.max_tokens, a.seed, a.logprobs) or None,
        extra_body=parse_extra_body(a.extra_body) if a.extra_body else None, out=a.out, report=a.report,
        junit=a.junit, markdown=a.markdown, matrix=a.matrix)


def handle(a: argparse.Namespace) -> int:
    from .args import exit_code, options_from_env

    flags, env = options_from_flags(a), options_from_env()
    endpoints: list[tuple[str, Any]] = []
    merged = flags
    if a.config:
        import verifier.cli.gatefile as gatefile
        from verifier.app.collect import default_run_dir

        file_opts, endpoints = gatefile.options(gatefile.read(a.config), Path(a.config))
        if len(endpoints) == 1:
            file_opts = endpoints[0][1].over(file_opts)
        out = flags.out or file_opts.out or str(default_run_dir("gate" if len(endpoints) <= 1 else "gate-matrix"))
        file_opts = gatefile.resolve_outputs(file_opts, out, Path(a.config))
        if len(endpoints) > 1:
            return gate_many(flags, file_opts, endpoints, env)
        merged = flags.over(file_opts)
    opts = merged.over(env)
    spec = opts.spec()
    if a.force:  # --force names the intent to write into a golden directory (RunDir.claim_for_write)
        import dataclasses

        spec = dataclasses.replace(spec, force=True)
    from verifier.safewrite import check_writable

    for path in (opts.report, opts.junit, opts.markdown):  # every output checked before the first request
        if path:
            check_writable(Path(path))
    from verifier.errors import Interrupted

    try:
        doc = run_gate(spec, html=opts.report, junit=opts.junit, markdown=opts.markdown)
    except Interrupted as e:  # the way on: finish the run, then compare it as the gate would have
        if e.run_dir is not None:
            import shlex

            from .run import resume_command

            # The run directory records what this gate was asked (run.json's `gate`), so compare narrows the golden
            # and takes the infra budget as the gate would have; only the exit mapping is the command line's.
            compare = f"verifier compare {shlex.quote(str(e.run_dir))} --golden {shlex.quote(str(opts.golden))} --ci-outputs"
            e.next_steps = (resume_command(e.run_dir, argparse.Namespace(base_url=opts.base_url, api_key_env=opts.api_key_env, header=opts.headers)),
                            compare + (" --allow-inconclusive" if opts.allow_inconclusive else ""))
        raise
    return exit_code(doc, bool(opts.allow_inconclusive))


def run_gate(spec: Any, html: str | None = None, junit: str | None = None, markdown: str | None = None,
             echo: bool = True) -> Comparison:
    """app.gate, then what a person and a CI job read: the text summary and the report files."""
    from verifier.app import gate as app_gate
    from verifier.cli.text import print_comparison

    golden = app_gate.gate_golden(spec)  # loaded once: the gate compares with it, the report shows it
    for line in app_gate.floor_warnings(golden.header.summary, golden.suites):
        print(f"verifier: warning: {line}", file=sys.stderr)
    doc = app_gate.gate(spec, golden)
    run_dir = doc.run_dir
    # Files first: a reader that stops early (`verifier gate | head`) must not cost the report.
    paths = write_ci_outputs(run_dir, doc, html, junit, markdown, golden)
    if echo and spec.quiet:  # the status, the first cause and where the report is: the rest is in the report
        from verifier.cli.text import print_quiet
        from verifier.execution.rundir import RunDir

        print_quiet(doc)
        print(f"report: {paths['html']}" if paths else f"comparison: {RunDir(run_dir).comparison_path()}")
        return doc
    if echo:
        print_limited(doc)
    seq = doc.sequential
    if seq and echo:
        used, total = seq["used_samples"], seq["total_samples"]
        print(f"sequential: decided after {used}/{total} samples ({total - used} not sent)")
    if echo:
        print_comparison(doc)
        print_outputs(run_dir, paths)
    return doc


def print_limited(doc: Comparison) -> None:
    """The line that says a gate judged part of its golden, and which part."""
    lim = doc.limited
    if lim:
        part = f"the golden's first {lim['limit']} samples per suite" if lim["limit"] else "the golden's samples"
        probes = ", its probes left out" if lim["probes_left_out"] else ""
        print(f"limited: {part} ({lim['gated_records']} of its {lim['golden_records']} samples){probes}")


def print_outputs(run_dir: Path, paths: dict[str, Path] | None, comparison: Path | None = None) -> None:
    """Where the report went: the last lines a person (or a CI log) reads. `comparison`: where comparison.json went,
    when not into the run."""
    from verifier.execution.rundir import RunDir

    comparison = comparison or RunDir(run_dir).comparison_path()
    print(f"report: {paths['html']}" if paths else f"comparison: {comparison}")
    if paths:
        print(f"  junit {paths['junit']}, summary {paths['markdown']}, samples {paths['csv']}, comparison {comparison}")


def write_ci_outputs(run_dir: Path, doc: Comparison, html: str | Path | None, junit: str | Path | None,
                     markdown: str | Path | None, golden: Golden | None = None, csv: str | Path | None = None,
                     write_run: bool = True) -> dict[str, Path] | None:
    """HTML report, JUnit XML, Markdown summary and samples CSV, where the report module offers them; their paths.
    `write_run` False: the run is read, never written (report_files.write_all)."""
    try:
        from verifier.app import report_files as report
    except ImportError:
        return None
    return report.write_all(run_dir, doc, html=html, junit=junit, markdown=markdown, csv=csv, golden=golden,
                            write_run=write_run)


def gate_many(flags: Any, file_opts: Any, endpoints: list[tuple[str, Any]], env: Any) -> int:
    """Gate every endpoint of a gate file concurrently (one thread each, quiet), then write the matrix."""
    import dataclasses
    from concurrent.futures import ThreadPoolExecutor

    from verifier import scrub
    from verifier.app.collect import default_run_dir
    from verifier.execution.rundir import RunDir
    from ..errors import UsageError
    from .matrix import finish

    if flags.report or flags.junit or flags.markdown or file_opts.report or file_opts.junit or file_opts.markdown:
        raise UsageError("with several endpoints, reports go into each OUT/<name>/; use [outputs] matrix for the summary")
    root = Path(flags.out or file_opts.out or default_run_dir("gate-matrix"))
    specs = {}
    for name, ep in endpoints:  # every endpoint checked before anything is sent
        opts = flags.over(ep.over(file_opts)).over(env)
        specs[name] = dataclasses.replace(opts.spec(), out=root / name, quiet=True)
    matrix = flags.matrix or file_opts.matrix

    def one(name: str) -> tuple[Path, Comparison, scrub.Secrets]:
        with scrub.command() as secrets:  # each gate's secrets its own: no thread writes with another's
            doc = run_gate(specs[name], echo=False)
            run_dir = doc.run_dir
            print(f"{name}: {doc.status} (exit {doc.exit_code}); report: {RunDir(run_dir).report_html()}", file=sys.stderr)
        return run_dir, doc, secrets

    with ThreadPoolExecutor(max_workers=len(specs)) as pool:
        futures = {name: pool.submit(one, name) for name in specs}
        done = {name: f.result() for name, f in futures.items()}
    for _, _, secrets in done.values():
        scrub.current().adopt(secrets)  # the matrix holds every gate's documents: scrubbed of every gate's secrets
    docs = {name: (run_dir, doc) for name, (run_dir, doc, _) in done.items()}
    allow = flags.allow_inconclusive if flags.allow_inconclusive is not None else file_opts.allow_inconclusive
    return finish(docs, Path(matrix) if matrix else root / "matrix", bool(allow))
