"""The application's golden-side steps: load a golden, compare a run with it, bless, calibrate, and gate
(collect + compare, with sequential looks)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from verifier.run import journal, runner
from verifier.run.rundir import RunDir
from verifier.app.collect import EndpointSpec, RunSpec, collect, default_run_dir, observations, suite_named
from verifier.attribution.document import Comparison, SuiteResult
from verifier.errors import UsageError, did_you_mean
from verifier import jsonsafe, scrub
from verifier.types import RunHeader
from verifier.types import owner_ids

# Sequential stopping ends a run early only on a decided regression: a large one shows within
# the first batches, while a pass needs every sample (no flips in 20% of them is weak evidence).
DECIDED = {"frontend_regression", "quantization_regression", "both", "regression_unattributed"}


@dataclass(frozen=True)
class GateSpec:
    """Run the golden's samples against an endpoint and compare."""

    golden: Path
    """Golden directory (must have margins)."""
    endpoint: EndpointSpec
    """The candidate endpoint."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """User sampling overrides over the golden's."""
    extra_body: Mapping[str, Any] | None = None
    """Request body extras; None means the golden's."""
    data: str | None = None
    """Dataset path, when the golden's suites need one."""
    out: Path | None = None
    """Run directory (default runs/<timestamp>-gate)."""
    infra_budget: float = 0.02
    """Infra error rate above which the run is incomplete."""
    sequential: bool = False
    """Send in batches and stop once a regression is decided."""
    looks: int = 5
    """With sequential: number of batches."""
    probes: bool = False
    """Run the parameter-contract probes (also when the golden has them)."""
    quiet: bool = False
    """No progress on stderr."""
    suites: tuple[str, ...] = ()
    """Gate only these of the golden's suites (empty: all)."""
    modes: tuple[str, ...] = ()
    """Gate only these of the golden's wire modes (empty: all)."""
    margins: tuple[str, ...] = ()
    """`KEY=VALUE:reason` margins over the golden's, each recorded with its reason."""
    limit: int | None = None
    """Gate only the first N of each suite's samples, in the order the reference sent them (a conversation whole)."""
    skip_probes: bool = False
    """Leave the golden's probes out (samples only)."""
    force: bool = False
    """Write the run into `out` even when it is a golden directory."""

    @property
    def narrows(self) -> bool:
        """Whether this gate sees less of the golden than it holds, or other margins."""
        return bool(self.suites or self.modes or self.margins or self.limit or self.skip_probes)


@dataclass(frozen=True)
class CalibrateSpec:
    """Store the run-to-run spread of k >= 3 reference runs as the golden's margins."""

    golden: Path
    """Golden directory to update."""
    runs: tuple[Path, ...] = ()
    """Existing reference rerun directories."""
    endpoint: EndpointSpec | None = None
    """With an endpoint: make `k` new reruns against it."""
    k: int = 2
    """How many reruns to make (the golden itself counts as one)."""
    out_prefix: str = str(Path("runs") / "calibrate")
    """Run directory prefix for new reruns."""
    manual: tuple[str, ...] = ()
    """`KEY=VALUE:reason` margins, recorded with their reason."""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    """User sampling overrides for new reruns."""
    extra_body: Mapping[str, Any] | None = None
    """Request body extras for new reruns; None means the golden's."""
    data: str | None = None
    """Dataset path for new reruns."""
    quiet: bool = False
    """No progress on stderr."""


@dataclass(frozen=True)
class Calibrated:
    """What calibrate stored."""

    margins: dict[str, Any]
    """The margins written into the golden."""
    runs: int
    """Reference runs they were computed from."""


def gate(spec: GateSpec) -> Comparison:
    """Collect the golden's selection from the endpoint, compare; returns the comparison document, written to
    OUT/comparison.json."""
    whole_g, whole = load_golden(spec.golden)
    loaded = narrow((whole_g, whole), spec)
    g, gobs = loaded
    require_margins(g, spec.golden)
    if spec.probes and not g.get("probes"):
        raise UsageError(f"golden {spec.golden} has no probe results to compare the probes with; bless a reference run "
                         "made with `verifier run --probes`", hints=("drop --probes",))
    out = spec.out or default_run_dir("gate")
    run = RunSpec.for_golden(g, gobs, spec.endpoint, out, overrides=spec.overrides, extra_body=spec.extra_body,
                             data=spec.data, looks=spec.looks, probes=spec.probes, quiet=spec.quiet,
                             inputs=None if spec.data else golden_inputs(spec.golden, g, gobs), force=spec.force)
    looks: list[dict[str, Any]] = []

    def decided(run_dir: Path) -> bool:
        # The live scorer's verdicts (collect wrote them before this look); a stale run is scored by compare_run.
        # An interim look covers part of the golden by design: judge what was sent.
        doc = compare_run(run_dir, spec.golden, None, spec.infra_budget, loaded, allow_subset=True)
        looks.append({"status": doc.status, "samples": sum(s.paired for s in doc.suites.values())})
        return doc.status in DECIDED

    collect(run, stop_check=decided if spec.sequential else None)
    stopped_early = bool(looks) and looks[-1]["status"] in DECIDED
    doc = compare_run(out, spec.golden, None, spec.infra_budget, loaded, allow_subset=stopped_early, write=False)
    if spec.limit or spec.skip_probes:  # a reviewer must see that this gate judged part of the golden, and which part
        doc = dataclasses.replace(doc, limited={
            "limit": spec.limit, "golden_records": len({(o["suite"], o["sample_id"]) for o in whole}),
            "gated_records": len({(o["suite"], o["sample_id"]) for o in gobs}),
            "probes_left_out": bool(spec.skip_probes and whole_g.get("probes"))})
    if spec.sequential:
        total_samples = sum(len(v) for v in (run.only_ids or {}).values())
        used = looks[-1]["samples"] if looks else 0
        doc = dataclasses.replace(doc, sequential={"looks": looks, "used_samples": used, "total_samples": total_samples,
                                                   "saved_samples": total_samples - used})
    RunDir(out).write_comparison(doc.to_dict())
    return doc


def calibrate(spec: CalibrateSpec) -> Calibrated:
    from verifier.attribution import compare
    from verifier.golden import store as golden

    if not Path(spec.golden).is_dir():  # calibrate writes into the golden: never into an installed package by name
        raise UsageError(f"calibrate: {spec.golden} is not a directory; calibrate writes margins into the golden, "
                         "so give its directory (copy a packaged golden out of `verifier list-goldens` first)")
    g, gobs = load_golden(spec.golden)
    inputs = golden_inputs(spec.golden, g, gobs) if spec.endpoint is not None and spec.endpoint.base_url and not spec.data else None
    runs = [gobs]
    names = [g["source"].get("run_id")]
    for r in spec.runs:
        runs.append(observations(Path(r)))
        names.append(Path(r).name)
    if spec.endpoint is not None and spec.endpoint.base_url:
        for i in range(spec.k):
            rd = Path(spec.out_prefix + f"-{i + 1}")
            collect(RunSpec.for_golden(g, gobs, spec.endpoint, rd, overrides=spec.overrides, extra_body=spec.extra_body,
                                       data=spec.data, quiet=spec.quiet, inputs=inputs))
            runs.append(observations(rd))
            names.append(rd.name)
    if len(runs) < 3:
        raise UsageError(f"calibration needs k >= 3 reference runs in all (have {len(runs)}): pass --runs or --base-url with -k")
    margins = compare.calibrate_margins(runs, {"method": "reruns", "k": len(runs), "runs": names, "created": runner.now()})
    for item in spec.manual:
        m = golden.MARGIN_ARG.match(item)
        if not m:
            raise UsageError(f"--margin must look like KEY=VALUE:reason, got {item!r}")
        margins[m["key"]] = {"value": float(m["value"]), "source": "manual", "reason": m["reason"]}
    golden.save_margins(Path(spec.golden), margins)
    return Calibrated(margins, len(runs))


def narrow(loaded: tuple[dict[str, Any], list[dict[str, Any]]], spec: GateSpec) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The golden as this gate sees it: only the chosen suites and modes, with the gate's own margins on top."""
    from verifier.golden import store as golden

    g, gobs = loaded
    if not spec.narrows:
        return loaded
    g = dict(g)
    for what, chosen, have in (("suite", spec.suites, list(g["suites"])), ("mode", spec.modes, list(g.get("modes", ["chat"])))):
        missing = [x for x in chosen if x not in have]
        if missing:
            raise UsageError(f"golden {spec.golden} has no {what} {missing[0]!r}; {did_you_mean(missing[0], have)}it has: {', '.join(have)}")
    if spec.suites:
        g["suites"] = {k: v for k, v in g["suites"].items() if k in spec.suites}
        gobs = [o for o in gobs if o["suite"] in spec.suites]
    if spec.modes:
        g["modes"] = [m for m in g.get("modes", ["chat"]) if m in spec.modes]
        gobs = [o for o in gobs if o["mode"] in spec.modes]
    if spec.limit:
        gobs = first_samples(spec.golden, g, gobs, spec.limit)
    if spec.skip_probes:
        g["probes"] = None
    margins = dict(g.get("margins") or {})
    for item in spec.margins:
        m = golden.MARGIN_ARG.match(item)
        if not m:
            raise UsageError(f"--margin must look like KEY=VALUE:reason, got {item!r}")
        if m["key"] not in margins:
            raise UsageError(f"golden {spec.golden} has no margin {m['key']!r}; known: {', '.join(sorted(margins))}")
        margins[m["key"]] = {"value": float(m["value"]), "source": "gate", "reason": m["reason"]}
    g["margins"] = margins
    return g, gobs


def first_samples(path: str | Path, g: dict[str, Any], gobs: list[dict[str, Any]], limit: int) -> list[dict[str, Any]]:
    """The golden's observations of the first `limit` samples of each suite, in inputs.jsonl order (the order the
    reference sent them). A multi-turn sample's records (`<id>/t<k>`) go with it: a conversation is gated whole."""
    keep: set[tuple[str, str]] = set()
    for suite, samples in golden_inputs(path, g, gobs).items():
        keep.update((suite, x.id) for x in samples[:limit])

    return [o for o in gobs if any((o["suite"], sid) in keep for sid in owner_ids(o["sample_id"]))]


def bless_run(run_dir: Path, to: Path, force: bool = False, epochs_as_reruns: bool = False) -> dict[str, Any]:
    """A scored reference run -> a golden at `to`; returns the golden document."""
    from verifier.golden import store as golden

    if (to / golden.GOLDEN).exists() and not force:
        raise UsageError(f"{to} already holds a golden; pass --force to replace it")
    RunDir(to).claim_for_write(flag="--to", force=force)  # a run directory: its samples.jsonl would be replaced
    refuse_broken_reference(observations(run_dir), run_dir, force)
    margins = margins_from_epochs(run_dir) if epochs_as_reruns else None
    return golden.bless(run_dir, to, margins)


def refuse_broken_reference(obs: list[dict[str, Any]], run_dir: Path, force: bool) -> None:
    """A golden made of errors blesses a misconfigured endpoint: refuse a run whose records are mostly infra
    errors or refusals of the route itself (401/403/404), unless forced. A 400 on a feature the reference
    does not support (images on llama-server) is a real answer and stays blessable."""
    if force or not obs:
        return
    bad = [o for o in obs if o["outcome"] == "infra" or (o["outcome"] == "unsupported" and _route_refused(o))]
    if len(bad) * 2 > len(obs):
        raise UsageError(f"{run_dir}: {len(bad)}/{len(obs)} records are infra errors or 401/403/404 refusals; "
                         "a golden must hold answers (check the base URL, model and key)", hints=("--force to bless anyway",))


def _route_refused(o: dict[str, Any]) -> bool:
    return o.get("reason") in ("http_401", "http_403", "http_404")


def margins_from_epochs(run_dir: Path) -> dict[str, Any]:
    from verifier.attribution import compare

    obs = observations(run_dir)
    epochs = sorted({o["epoch"] for o in obs})
    if len(epochs) < 3:
        raise UsageError(f"{run_dir} has {len(epochs)} epoch(s); calibration from epochs needs at least 3")
    runs = [[{**o, "epoch": 0} for o in obs if o["epoch"] == e] for e in epochs]
    return compare.calibrate_margins(runs, {"method": "epochs", "k": len(epochs), "runs": [run_dir.name], "created": runner.now()})


def load_golden(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A golden directory, or a packaged golden by name (golden.resolve): its header and observations, validated."""
    from verifier.golden import store as golden

    try:
        g, obs = golden.load(golden.resolve(path))
    except golden.BadGolden as e:
        raise UsageError(str(e)) from None
    for name, info in g["suites"].items():
        suite = suite_named(name)
        if suite.name == name and suite.version != info.get("version"):
            raise UsageError(f"golden {path} was made with {name} version {info.get('version')}; this harness has version {suite.version}: re-bless it")
    return g, obs


def describe_goldens(directory: Path | None = None) -> list[dict[str, Any]]:
    """One row per golden in `directory` (default: the packaged ones): what `--golden NAME` would gate."""
    from verifier.golden import store as golden

    paths = golden.packaged() if directory is None else sorted(p for p in Path(directory).iterdir() if (p / golden.GOLDEN).is_file())
    rows = []
    for p in paths:
        row: dict[str, Any] = {"name": p.name, "path": str(p), "suites": [], "model": None, "modes": [], "samples": 0,
                               "probes": False, "context_probe": False, "margins": False}
        try:
            g, obs = golden.load(p)
        except golden.BadGolden as e:
            rows.append({**row, "problem": str(e)})
            continue
        row.update(suites=list(g["suites"]), model=(g["source"].get("endpoint") or {}).get("model"),
                   modes=list(g.get("modes", ["chat"])), samples=len({(o["suite"], o["sample_id"]) for o in obs}),
                   probes=bool(g.get("probes")), context_probe=bool(g.get("context_probe")), margins=bool(g.get("margins")))
        rows.append(row)
    return rows


def golden_inputs(path: str | Path, g: dict[str, Any], gobs: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """The golden's own samples per suite (inputs.jsonl), so a gate needs no dataset and no hub."""
    from verifier.golden import store as golden

    try:
        return golden.load_inputs(golden.resolve(path), g, gobs)
    except golden.BadGolden as e:
        raise UsageError(str(e)) from None


def require_margins(g: dict[str, Any], path: str | Path) -> None:
    if not g.get("margins"):
        raise UsageError(f"golden {path} has no margins; run `verifier calibrate {path} ...` first")


def compare_run(run_dir: Path, golden_path: str | Path, out: Path | None, infra_budget: float,
                loaded: tuple[dict[str, Any], list[dict[str, Any]]] | None = None, allow_subset: bool = False,
                write: bool = True) -> Comparison:
    """Run vs golden -> the comparison document, written to `out` (default RUN_DIR/comparison.json) unless
    `write` is False (the matrix only reads the runs it is given)."""
    from verifier.attribution import compare

    g, gobs = loaded or load_golden(golden_path)
    require_margins(g, golden_path)
    rd = RunDir(run_dir)
    if not rd.is_run():
        raise UsageError(f"{run_dir} is not a run directory (no {journal.HEADER})")
    raw = rd.header_dict()
    scrub.register_run(raw)  # the comparison is scrubbed of the key the run was made with
    hdr = RunHeader.from_dict(raw)
    for name in hdr.suites:
        if name in g["suites"] and hdr.suite_version(name) != g["suites"][name].get("version"):
            raise UsageError(f"run {run_dir} used {name} version {hdr.suite_version(name)}, golden has {g['suites'][name].get('version')}")
    cobs = observations(run_dir)
    ran = RunDir(run_dir).probes()
    probes, table = None, None
    if ran is not None or g.get("probes"):
        from verifier.run import probe_results
        from verifier.run.probes import judge

        # The conformance table: every probe x surface either side ran; a golden probe the run lacks is `not_run`.
        table = judge(ran or {}, g.get("probes"))
        probes = probe_results.evidence(table) if ran is not None else None
    ctx = _context_verdict(run_dir, g)
    if ctx:  # joins the probe evidence under its own signal name, and keeps its details in the document
        probes = {**(probes or {}), "context_truncated": ctx}
    try:
        doc = compare.compare(g, gobs, cobs, infra_budget=infra_budget, probes=probes, allow_subset=allow_subset,
                              probe_table=table)
    except compare.NoOverlap as e:
        raise UsageError(f"{run_dir} vs {golden_path}: {e}") from None
    # A margin the golden lacks is no error: compare judges that signal uncalibrated (compare.uncalibrated).
    doc = dataclasses.replace(
        doc, suites=_with_tool_call_scores(doc, g, run_dir),
        golden={"name": g.get("name"), "path": str(golden_path), "source_run": g["source"].get("run_id"),
                "endpoint": g["source"].get("endpoint"), "margins_provenance": _provenance(g)},
        # (a header without run_id or endpoint, which no writer makes, reads as "" / {}: written as null, as before)
        run={"run_dir": str(run_dir), "run_id": hdr.run_id or None, "endpoint": hdr.endpoint or None},
        context_truncation=ctx or None)
    if write:
        RunDir(run_dir).write_comparison(doc.to_dict(), out)
    return doc


def _with_tool_call_scores(doc: Comparison, g: dict[str, Any], run_dir: Path) -> dict[str, SuiteResult]:
    """The suites with K2VV's trigger F1 and schema accuracy, candidate beside golden, on every tool-calling suite
    (key `tool_calls`)."""
    from verifier.attribution import numerics

    cand = RunDir(run_dir).summary() or {}
    out = dict(doc.suites)
    for suite, block in doc.suites.items():
        scores = numerics.tool_call_scores((((g.get("summary") or {}).get("suites") or {}).get(suite) or {}).get("extra"),
                                           (((cand.get("suites") or {}).get(suite)) or {}).get("extra"), block.tool_trigger)
        if scores:
            out[suite] = dataclasses.replace(block, tool_calls=scores)
    return out


def _context_verdict(run_dir: Path, g: dict[str, Any]) -> dict[str, Any] | None:
    """The context-truncation probe's verdict (context_probe.verdict), when the run has one."""
    from verifier.run import context_probe as cp

    ran = RunDir(run_dir).context()
    return cp.verdict(ran, g.get("context_probe")) if ran is not None else None


def _provenance(g: dict[str, Any]) -> dict[str, Any]:
    srcs: dict[str, int] = {}
    for v in (g.get("margins") or {}).values():
        if isinstance(v, dict):
            key = json.dumps({x: v[x] for x in sorted(v) if x != "value"}, sort_keys=True)
            srcs[key] = srcs.get(key, 0) + 1
    return {"sources": [dict(jsonsafe.loads(k), margins=n) for k, n in srcs.items()]}
