"""The application's golden-side steps: load a golden, compare a run with it, bless, calibrate, and gate
(collect + compare, with sequential looks)."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from verifier.execution import journal, runner
from verifier.execution.rundir import RunDir
from verifier.app.catalog import suite_named
from verifier.app.collect import EndpointSpec, RunSpec, collect, default_run_dir
from verifier.app.scored import observed, observed_in_memory, observed_where_allowed
from verifier.attribution.document import Comparison, SuiteResult
from verifier.app.spec import DEFAULT_INFRA_BUDGET as DEFAULT_INFRA_BUDGET, CalibrateSpec, CompareSpec, GateSpec, Probes
from verifier.errors import UsageError
from verifier.golden.model import Golden, GoldenHeader, Margin, margins_from_json
from verifier import jsonsafe, scrub
from verifier.execution.layout import NotARunDir
from verifier.types import Observation, RunHeader, RunSummary

_MAX_NAMES = 256

# Sequential stopping ends a run early only on a decided regression: a large one shows within
# the first batches, while a pass needs every sample (no flips in 20% of them is weak evidence).
DECIDED = {"frontend_regression", "quantization_regression", "both", "regression_unattributed"}


@dataclass(frozen=True)
class Calibrated:
    """What calibrate stored."""

    margins: dict[str, Any]
    """The margins written into the golden."""
    runs: int
    """Reference runs they were computed from."""


@dataclass(frozen=True)
class GateRequest:
    """What a gate was asked beyond its endpoint, recorded in its run directory (run.json's `gate`) before the first
    request: a later `compare` of that directory (the continuation an interrupted gate prints, a re-compare, the
    report) narrows the golden the same way and uses the same infra budget, so it ends with the gate's verdict."""

    golden: str
    """The golden's name (its header's, else its directory's)."""
    golden_run: str | None
    """The golden's source run id: the record applies only to a comparison with the same golden."""
    suites: tuple[str, ...] = ()
    """`--suite` (empty: all of the golden's)."""
    modes: tuple[str, ...] = ()
    """`--mode` (empty: all of the golden's)."""
    limit: int | None = None
    """`--limit`: the golden's first N samples per suite."""
    probes: Probes = Probes.GOLDEN
    """`--probes` / `--no-probes` / unset."""
    margins: tuple[Margin, ...] = ()
    """`--margin` overrides, each with its reason."""
    infra_budget: float = DEFAULT_INFRA_BUDGET
    """`--infra-budget`."""
    sequential: bool = False
    """`--sequential`: a directory incomplete as a whole is judged on what it sent when that decides a regression,
    as the gate stopped (compare_run)."""

    @staticmethod
    def of(spec: GateSpec, golden: Golden) -> "GateRequest":
        h = golden.header
        return GateRequest(golden=h.name or golden.path.name, golden_run=h.source.run_id or None, suites=tuple(spec.suites),
                           modes=tuple(spec.modes), limit=spec.limit, probes=spec.probes, margins=tuple(spec.margins),
                           infra_budget=spec.infra_budget, sequential=spec.sequential)

    def to_json(self) -> dict[str, Any]:
        return {"golden": self.golden, "golden_run": self.golden_run, "suites": list(self.suites),
                "modes": list(self.modes), "limit": self.limit, "probes": self.probes.value,
                "margins": {m.key: {"value": m.value, "reason": m.reason} for m in self.margins},
                "infra_budget": self.infra_budget, "sequential": self.sequential}

    @staticmethod
    def from_json(raw: Any, where: str) -> "GateRequest":
        """run.json's `gate`, checked at the edge (a run directory may come from anyone): NotARunDir naming it."""
        from verifier.app.spec import margin

        def bad(what: str) -> NotARunDir:
            return NotARunDir(f"{where}: `gate.{what}` is not what a gate records")

        if not isinstance(raw, dict):
            raise bad("*")
        golden, run = raw.get("golden"), raw.get("golden_run")
        if not isinstance(golden, str) or not golden or len(golden) > 4096:
            raise bad("golden")
        if run is not None and (not isinstance(run, str) or len(run) > 4096):
            raise bad("golden_run")
        lists = {}
        for key in ("suites", "modes"):
            v = raw.get(key, [])
            if not isinstance(v, list) or len(v) > _MAX_NAMES or not all(isinstance(x, str) and 0 < len(x) <= 256 for x in v):
                raise bad(key)
            lists[key] = tuple(v)
        limit = raw.get("limit")
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
            raise bad("limit")
        try:
            probes = Probes(raw.get("probes", Probes.GOLDEN.value))
        except ValueError:
            raise bad("probes") from None
        table = raw.get("margins", {})
        if not isinstance(table, dict) or len(table) > _MAX_NAMES:
            raise bad("margins")
        margins = []
        for key, m in table.items():
            if not isinstance(m, dict):
                raise bad("margins")
            try:
                margins.append(margin(key, m.get("value"), m.get("reason"), "gate", f"{where}: gate.margins"))
            except UsageError as e:
                raise NotARunDir(str(e)) from None
        budget = raw.get("infra_budget", DEFAULT_INFRA_BUDGET)
        if isinstance(budget, bool) or not isinstance(budget, (int, float)) or not 0 <= budget <= 1:
            raise bad("infra_budget")
        return GateRequest(golden=golden, golden_run=run, suites=lists["suites"], modes=lists["modes"], limit=limit,
                           probes=probes, margins=tuple(margins), infra_budget=float(budget),
                           sequential=raw.get("sequential") is True)

    def applies_to(self, golden: Golden) -> bool:
        h = golden.header
        return (h.name or golden.path.name) == self.golden and (h.source.run_id or None) == self.golden_run


def gate_request(run_dir: Path, header: RunHeader | None = None) -> GateRequest | None:
    """What the gate that made `run_dir` was asked (None: the run was no gate's, or a gate's from before the record)."""
    hdr = header if header is not None else RunDir(run_dir).header()
    if not hdr.has_gate_request:
        return None
    return GateRequest.from_json(hdr.gate_request, f"{Path(run_dir) / journal.HEADER}")


def gate_golden(spec: GateSpec, loaded: Golden | None = None) -> Golden:
    """The golden as this gate sees it: loaded once (validated against its whole suite list), then narrowed to the
    spec's suites, modes, first samples, probes and margins. Hand it to `gate` and to the report. `loaded`: the
    whole golden, when the caller has it (a sweep loads it once for every configuration)."""
    golden = loaded if loaded is not None else load_golden(spec.golden, spec.limit)
    check_serving_adapter(golden, spec.endpoint.serving_adapter, spec.golden)
    try:
        golden = golden.narrow(suites=spec.suites, modes=spec.modes, limit=spec.limit, probes=spec.probes is not Probes.OFF,
                               margins=spec.margins)
    except ValueError as e:
        raise UsageError(str(e)) from None
    require_margins(golden, spec.golden)
    if spec.probes is Probes.ON and not golden.header.probes:
        raise UsageError(f"golden {spec.golden} has no probe results to compare the probes with; bless a reference run "
                         "made with `verifier run --probes`", hints=("drop --probes",))
    return golden


def check_serving_adapter(golden: Golden, given: str | None, name: Any, run_dir: Path | None = None) -> None:
    """Refuse (UsageError, before any request) a candidate served otherwise than the golden's reference: a golden
    recorded behind a serving adapter (wire/serving_adapters.py) gated without it blames the engine's frontend for
    what the adapter did (a prefilled tool call comes back as text: `tool_call_as_text`), and one gated behind an
    adapter its reference never had is a different deployment. One rule for every door: `given` is the adapter a gate
    or calibration sends behind, or (`run_dir` set) the one a finished run was sent behind (run.json's
    `endpoint.serving_adapter`), which `compare`, the matrix, `report` and calibrate's --runs judge against the golden."""
    from verifier.wire.serving_adapters import ADAPTERS

    recorded = golden.header.source.serving_adapter
    if recorded is not None and recorded not in ADAPTERS:  # a newer verifier's, or a hand-edited golden
        raise UsageError(f"golden {name} was recorded behind the serving adapter {recorded!r}, which this verifier does "
                         f"not know (known: {', '.join(ADAPTERS)})")
    if given == recorded:
        return
    if run_dir is not None:  # a finished run: it cannot be served again, only made again
        sent = f"behind the serving adapter {given}" if given else "with no serving adapter"
        kept = f"behind the serving adapter {recorded}" if recorded else "with no serving adapter"
        raise UsageError(f"run {run_dir} was sent {sent}, and golden {name} was recorded {kept}: compare a run served "
                         "as its reference was (run or gate it again so; docs/engines.md, 'Tool calls behind a serving "
                         "adapter')")
    # The message names no flag (the command line, a gate file, a sweep and the API all reach here); the hint does,
    # and the CLI prints it only where the command has the flag.
    if recorded is None:
        raise UsageError(f"golden {name} was recorded with no serving adapter, and this gate names {given}: serve the "
                         "candidate as its reference was", hints=("drop --serving-adapter",))
    raise UsageError(f"golden {name} was recorded behind the serving adapter {recorded}" + (f", not {given}" if given else "")
                     + f': serve the candidate behind it too (serving_adapter = "{recorded}" in a gate file, a sweep or '
                     "the API; docs/engines.md)", hints=(f"pass --serving-adapter {recorded}",))


def gate(spec: GateSpec, golden: Golden | None = None) -> Comparison:
    """Collect the golden's selection from the endpoint, compare; returns the comparison document, written to
    OUT/comparison.json. `golden`: this gate's golden from `gate_golden(spec)`, when the caller has it (loaded once)."""
    if golden is None:
        golden = gate_golden(spec)
    out = spec.out or default_run_dir("gate")
    run = RunSpec.for_golden(golden, spec.endpoint, out, overrides=spec.overrides, extra_body=spec.extra_body,
                             data=spec.data, looks=spec.looks, probes=spec.probes is Probes.ON, quiet=spec.quiet,
                             force=spec.force, gate_request=GateRequest.of(spec, golden).to_json(),
                             teacher_forcing=spec.teacher_forcing, forced_positions=spec.forced_positions,
                             resend=spec.resend)
    looks: list[dict[str, Any]] = []

    def decided(run_dir: Path) -> bool:
        # The live scorer's verdicts (collect wrote them before this look); a stale run is scored by compare_run.
        # An interim look covers part of the golden by design: judge what was sent.
        # Not written: an interim look is no verdict (an interrupted gate must not leave one behind as comparison.json).
        doc = compare_run(run_dir, CompareSpec(spec.golden, spec.infra_budget, allow_subset=True, write=False,
                                               as_gated=False), golden)
        looks.append({"status": doc.status, "samples": sum(s.paired for s in doc.suites.values())})
        return doc.status in DECIDED

    collect(run, stop_check=decided if spec.sequential else None)
    stopped_early = bool(looks) and looks[-1]["status"] in DECIDED
    doc = compare_run(out, CompareSpec(spec.golden, spec.infra_budget, allow_subset=stopped_early, write=False,
                                       as_gated=False), golden)
    if spec.sequential:
        total_samples = sum(len(v) for v in (run.only_ids or {}).values())
        used = looks[-1]["samples"] if looks else 0
        doc = dataclasses.replace(doc, sequential={"looks": looks, "used_samples": used, "total_samples": total_samples,
                                                   "saved_samples": total_samples - used})
    RunDir(out).write_comparison(doc.to_dict())
    return doc


def calibrate(spec: CalibrateSpec) -> Calibrated:
    from verifier.attribution import compare
    from verifier.golden import store as golden_store

    if not Path(spec.golden).is_dir():  # calibrate writes into the golden: never into an installed package by name
        raise UsageError(f"calibrate: {spec.golden} is not a directory; calibrate writes margins into the golden, "
                         "so give its directory (copy a packaged golden out of `verifier list-goldens` first)")
    from verifier.app.spec import check_resend

    check_resend(spec.resend, "resend")
    golden = load_golden(spec.golden)
    runs: list[Any] = [list(golden.observations)]
    resent: list[list[Observation]] = [[]]  # each run's resend records (the golden keeps none)
    names = [golden.header.source.run_id]
    run_dirs: list[Path] = []
    for r in spec.runs:
        runs.append(observed_where_allowed(Path(r))[0])  # a colleague's run is scored again in memory, left as it is
        resent.append(resent_of(Path(r)))
        # a rerun served otherwise than the reference would widen the margins by what the adapter changes
        check_serving_adapter(golden, RunDir(Path(r)).header().serving_adapter, spec.golden, Path(r))
        names.append(Path(r).name)
        run_dirs.append(Path(r))
    if spec.endpoint is not None and spec.endpoint.base_url:
        check_serving_adapter(golden, spec.endpoint.serving_adapter, spec.golden)  # reruns are served as the reference was
        for i in range(spec.k):
            rd = Path(spec.out_prefix + f"-{i + 1}")
            collect(RunSpec.for_golden(golden, spec.endpoint, rd, overrides=spec.overrides, extra_body=spec.extra_body,
                                       data=spec.data, quiet=spec.quiet, teacher_forcing=spec.teacher_forcing,
                                       forced_positions=spec.forced_positions, resend=spec.resend))
            runs.append(observed(rd))
            resent.append(resent_of(rd))
            names.append(rd.name)
            run_dirs.append(rd)
    if len(runs) < 3:
        raise UsageError(f"calibration needs k >= 3 reference runs in all (have {len(runs)}): pass --runs or --base-url with -k")
    provenance = {"method": "reruns", "k": len(runs), "runs": names, "created": runner.now()}
    margins = margins_from_json({**compare.calibrate_margins(runs, provenance, resent),
                                 **_teacher_forced_margins(golden, run_dirs, provenance)})
    for m in spec.manual:
        margins[m.key] = dataclasses.replace(m, source="manual")
    golden_store.save_margins(Path(spec.golden), margins)
    return Calibrated({k: m.to_json() for k, m in margins.items()}, len(runs))


def _teacher_forced_margins(golden: Golden, run_dirs: list[Path], provenance: dict[str, Any]) -> dict[str, Any]:
    """The teacher-forced margins from the reruns that made a teacher-forcing pass against this golden (calibrate
    --base-url reruns do; a `gate` run given with --runs too): the reruns' own distance from the golden, per sample.
    Reruns without a pass (plain `verifier run`) give none: the golden stays uncalibrated for it."""
    from verifier.attribution import teacher_forced

    measured = []
    used = []
    for rd in run_dirs:
        forced = teacher_forced_measures(rd, RunDir(rd).header(), golden, observed_where_allowed(rd)[0])
        if forced is not None and forced[0].get("state") == "measured":
            measured.append(forced[1])
            used.append(f"{rd.name}:{forced[0].get('method')}")
    if not measured:
        return {}
    return teacher_forced.calibration(measured, {**provenance, "teacher_forced_runs": used})


def bless_run(run_dir: Path, to: Path, force: bool = False, epochs_as_reruns: bool = False) -> GoldenHeader:
    """A scored reference run -> a golden at `to`; returns its header."""
    from verifier.golden import store as golden

    if (to / golden.GOLDEN).exists() and not force:
        raise UsageError(f"{to} already holds a golden; pass --force to replace it")
    RunDir(to).claim_for_write(flag="--to", force=force)  # a run directory: its samples.jsonl would be replaced
    # Scored again when stale: in place if this user may write the run, else in memory, the run left as it is (a
    # colleague's run, a read-only mount); the golden is made from those rows, never from files the journal does
    # not back.
    rows, summary = observed_where_allowed(run_dir)
    refuse_broken_reference(rows, run_dir, force)
    margins = margins_from_json(margins_from_epochs(run_dir, rows)) if epochs_as_reruns else None
    return golden.bless(run_dir, to, margins, scored=(rows, summary))


def floor_warnings(summary: Mapping[str, Any], suites: Iterable[str] | None = None) -> list[str]:
    """What bless and gate say on stderr when the reference's own quality is at the floor (golden.model), for
    `suites` (default: every suite of the summary)."""
    from verifier.golden.model import floor_warning, quality_at_floor

    wanted = None if suites is None else set(suites)
    return [floor_warning(suite, what) for suite, what in quality_at_floor(summary).items()
            if wanted is None or suite in wanted]


def refuse_broken_reference(obs: list[Observation], run_dir: Path, force: bool) -> None:
    """A golden made of errors blesses a misconfigured endpoint: refuse a run whose records are mostly infra
    errors or refusals of the route itself (401/403/404), unless forced. A 400 on a feature the reference
    does not support (images on llama-server) is a real answer and stays blessable."""
    if force or not obs:
        return
    bad = [o for o in obs if o.outcome == "infra" or (o.outcome == "unsupported" and _route_refused(o))]
    if len(bad) * 2 > len(obs):
        raise UsageError(f"{run_dir}: {len(bad)}/{len(obs)} records are infra errors or 401/403/404 refusals; "
                         "a golden must hold answers (check the base URL, model and key)", hints=("--force to bless anyway",))
    # One wire mode made only of infra errors (every stream cut, say) would be a golden mode with nothing to compare:
    # every gate against it would miss that mode's coverage, or judge it against errors.
    per_mode: dict[tuple[str, str], list[int]] = {}
    for o in obs:
        n = per_mode.setdefault((o.suite, o.mode), [0, 0])
        n[0] += o.outcome == "infra"
        n[1] += 1
    empty = sorted(k for k, (infra, total) in per_mode.items() if infra == total)
    if empty:
        suite, mode = empty[0]
        reasons = sorted({str(o.reason) for o in obs if (o.suite, o.mode) == (suite, mode)})
        raise UsageError(f"{run_dir}: every {suite} record on mode {mode} is an infra error ({', '.join(reasons)[:120]}): "
                         f"a golden mode must hold answers; fix the endpoint, or make the reference run again without that mode",
                         hints=("--force to bless anyway",))


def _route_refused(o: Observation) -> bool:
    return o.reason in ("http_401", "http_403", "http_404")


def margins_from_epochs(run_dir: Path, obs: list[Observation]) -> dict[str, Any]:
    """Margins from a run's epochs as reruns: `obs`, its rows (app/scored)."""
    from verifier.attribution import compare

    epochs = sorted({o.epoch for o in obs})
    if len(epochs) < 3:
        raise UsageError(f"{run_dir} has {len(epochs)} epoch(s); calibration from epochs needs at least 3")
    runs = [[dataclasses.replace(o, epoch=0) for o in obs if o.epoch == e] for e in epochs]
    return compare.calibrate_margins(runs, {"method": "epochs", "k": len(epochs), "runs": [run_dir.name], "created": runner.now()})


def load_golden(path: str | Path, limit: int | None = None) -> Golden:
    """A golden directory, or a packaged golden by name (golden.resolve), validated (store.load) and made with the
    suite versions this harness has. `limit`: only the first `limit` samples of each suite are read into memory."""
    from verifier.golden import store as golden

    try:
        loaded = golden.load(golden.resolve(path), limit)
    except golden.BadGolden as e:
        raise UsageError(str(e)) from None
    for name, info in loaded.header.suites.items():
        suite = suite_named(name)
        if suite.name == name and suite.version != info.version:
            raise UsageError(f"golden {path} was made with {name} version {info.version}; this harness has version {suite.version}: re-bless it")
    return loaded


@dataclass(frozen=True)
class GoldenRow:
    """One line of `verifier list-goldens`: what `--golden NAME` would gate, from its golden.json alone."""

    name: str
    path: str
    suites: list[str] = field(default_factory=list)
    model: str | None = None
    modes: list[str] = field(default_factory=list)
    samples: int | str = 0
    """Samples as the reference recorded them, over every suite ("?" when a suite did not say)."""
    probes: bool = False
    context_probe: bool = False
    margins: bool = False
    serving_adapter: str | None = None
    """The serving adapter the reference was recorded behind (gate it with --serving-adapter NAME)."""
    problem: str | None = None
    """Why golden.json could not be read (the other fields then say nothing)."""


def describe_goldens(directory: Path | None = None) -> list[GoldenRow]:
    """One row per golden in `directory` (default: the packaged ones): what `--golden NAME` would gate, from each
    golden.json alone (samples: as the reference recorded them per suite)."""
    from verifier.golden import store as golden

    paths = golden.packaged() if directory is None else sorted(p for p in Path(directory).iterdir() if (p / golden.GOLDEN).is_file())
    rows = []
    for p in paths:
        try:
            h = golden.load_header(p)  # golden.json only: its rows are read when it is gated, not when listed
        except golden.BadGolden as e:
            rows.append(GoldenRow(p.name, str(p), problem=str(e)))
            continue
        counts = [info.samples for info in h.suites.values()]
        rows.append(GoldenRow(p.name, str(p), suites=list(h.suites), model=h.source.model, modes=list(h.modes),
                              samples=sum(c for c in counts if c is not None) if None not in counts else "?",
                              probes=bool(h.probes), context_probe=bool(h.context_probe), margins=bool(h.margins),
                              serving_adapter=h.source.serving_adapter))
    return rows


def holds_gate_comparison(run_dir: Path) -> bool:
    """Whether RUN_DIR/comparison.json is the one its gate wrote: the gate's verdict of record (CI read it, the report
    links it), which `compare` (the command and the API alike) replaces only when told. A run never compared, or
    compared by `compare`, and an interrupted gate's directory (no comparison yet) hold none."""
    from verifier.execution.layout import COMPARISON

    rd = RunDir(run_dir)
    return rd.is_run() and rd.has(COMPARISON) and rd.header().gate_of is not None


def require_margins(golden: Golden, path: str | Path) -> None:
    if not golden.margins:
        raise UsageError(f"golden {path} has no margins; run `verifier calibrate {path} ...` first")


def compare_run(run_dir: Path, spec: CompareSpec, loaded: Golden | None = None) -> Comparison:
    """Run vs golden -> the comparison document, written to `spec.out` (default RUN_DIR/comparison.json) unless
    `spec.write` is False (the matrix only reads the runs it is given). `loaded`: the golden, when the caller has it.
    `spec.as_gated`: a gate's run directory is judged as that gate judged it (its GateRequest: the golden narrowed
    the same way, its infra budget where the spec sets none); the gate itself, which narrowed already, says False.
    The run is scored again first when stale (app/scored.observed, the explicit step): in place, unless the document
    goes to `spec.out` or this user cannot write the run (app/scored.observed_in_memory: the run is left as it is)."""
    golden = loaded or load_golden(spec.golden)
    require_margins(golden, spec.golden)
    rd = RunDir(run_dir)
    if not rd.is_run():
        raise UsageError(f"{run_dir} is not a run directory (no {journal.HEADER})")
    hdr = rd.header()
    check_serving_adapter(golden, hdr.serving_adapter, spec.golden, run_dir)  # as gate refuses: one rule, both doors
    golden, applied = _golden_as_gated(run_dir, hdr, golden, spec)
    infra_budget = spec.budget(applied.infra_budget if applied is not None else None)
    scrub.register_run(hdr.endpoint)  # the comparison is scrubbed of the key the run was made with
    _check_suite_versions(run_dir, hdr, golden.header)
    cobs, cand = _candidate(run_dir, rd, spec)
    probes, table, ctx = _probe_evidence(run_dir, rd, golden.header)
    forced = teacher_forced_measures(run_dir, hdr, golden, cobs)
    doc = _decided(run_dir, spec, golden, cobs, _Evidence(infra_budget, probes, table, forced, resent_of(run_dir)), applied)
    doc = _recorded(doc, run_dir, spec.golden, hdr, golden, cand, ctx)
    if spec.write:
        rd.write_comparison(doc.to_dict(), spec.out)
    return doc


def _golden_as_gated(run_dir: Path, hdr: RunHeader, golden: Golden,
                     spec: CompareSpec) -> tuple[Golden, GateRequest | None]:
    """The golden as the run's own gate judged it, and that gate's request (None: not a gate's run, not asked
    (`spec.as_gated` False), or gated against another golden: then a note says its narrowing is not applied)."""
    asked = gate_request(run_dir, hdr) if spec.as_gated else None
    if asked is not None and asked.applies_to(golden):
        return _narrowed_as_asked(golden, asked, spec.golden), asked
    if asked is not None:
        print(f"note: {run_dir} was gated against {asked.golden}, not this golden: its gate's narrowing is not applied",
              file=sys.stderr)
    return golden, None


def _check_suite_versions(run_dir: Path, hdr: RunHeader, h: GoldenHeader) -> None:
    """A suite both hold must be of the same version (another version asks other questions, or scores otherwise)."""
    for name in hdr.suites:
        if name in h.suites and hdr.suite_version(name) != h.suites[name].version:
            raise UsageError(f"run {run_dir} used {name} version {hdr.suite_version(name)}, golden has {h.suites[name].version}")


def _candidate(run_dir: Path, rd: RunDir, spec: CompareSpec) -> tuple[list[Observation], RunSummary | None]:
    """The run's observations and summary, scored again first when stale. A run is written into (scored again in
    place, comparison.json) only when this user may write it and the document goes there; with --out, or for a
    colleague's run this user cannot write, it is left as it is (scored in memory)."""
    if spec.write and spec.out is None and not rd.writable():
        raise UsageError(f"{run_dir} cannot be written (comparison.json goes there): give --out FILE to write the "
                         "comparison elsewhere; the run is then read, never written")
    if (spec.out is None or not spec.write) and rd.writable():
        return observed(run_dir), rd.summary()
    return observed_in_memory(run_dir)


def _probe_evidence(run_dir: Path, rd: RunDir, h: GoldenHeader) -> tuple[dict[str, Any] | None,
                                                                         list[dict[str, Any]] | None, dict[str, Any] | None]:
    """(evidence items of the probes and the context probe, the probes' conformance table, the context probe's
    verdict): each None where neither side has it."""
    ran = rd.probes()
    probes, table = None, None
    if ran is not None or h.probes:
        from verifier.execution import probe_results
        from verifier.execution.probes import judge

        # The conformance table: every probe x surface either side ran; a golden probe the run lacks is `not_run`.
        table = judge(ran or {}, dict(h.probes) if h.probes else None)
        probes = probe_results.evidence(table) if ran is not None else None
    ctx = _context_verdict(run_dir, h)
    if ctx:  # joins the probe evidence under its own signal name, and keeps its details in the document
        probes = {**(probes or {}), "context_truncated": ctx}
    return probes, table, ctx


@dataclass(frozen=True)
class _Evidence:
    """What compare.compare weighs beside the observations."""

    infra_budget: float
    probes: dict[str, Any] | None
    table: list[dict[str, Any]] | None
    forced: tuple[dict[str, Any], dict[str, Any]] | None
    resent: list[Observation] = field(default_factory=list)
    """The run's resend records (resends.jsonl), read by the signals that read resends."""


def resent_of(run_dir: Path) -> list[Observation]:
    """The run's resend records as observations (execution/resend.observations); none where it made no resend step.
    A resends.jsonl that cannot be read safely is bad input (exit 2), as every other file of a run."""
    from verifier.app.catalog import get_suites
    from verifier.execution import resend

    try:
        return resend.observations(run_dir, get_suites())
    except NotARunDir as e:
        raise UsageError(str(e)) from None


def _decided(run_dir: Path, spec: CompareSpec, golden: Golden, cobs: list[Observation], ev: _Evidence,
             applied: GateRequest | None) -> Comparison:
    """compare.compare's document; a sequential gate's run is judged on what it sent where that decides a regression."""
    from verifier.attribution import compare

    h = golden.header
    try:
        doc = compare.compare(h, golden.observations, cobs, infra_budget=ev.infra_budget, probes=ev.probes,
                              allow_subset=spec.allow_subset, probe_table=ev.table, teacher_forced=ev.forced,
                              resent=ev.resent)
        if applied is not None and applied.sequential and not spec.allow_subset and doc.status == "incomplete":
            # A sequential gate stops once a regression is decided, judging what it sent (gate(): allow_subset);
            # its directory is judged so again, and only when that decides a regression, as the gate did.
            early = compare.compare(h, golden.observations, cobs, infra_budget=ev.infra_budget, probes=ev.probes,
                                    allow_subset=True, probe_table=ev.table, teacher_forced=ev.forced, resent=ev.resent)
            doc = early if early.status in DECIDED else doc
    except compare.NoOverlap as e:
        raise UsageError(f"{run_dir} vs {spec.golden}: {e}") from None
    return doc


def _recorded(doc: Comparison, run_dir: Path, golden_path: str | Path, hdr: RunHeader, golden: Golden,
              cand: RunSummary | None, ctx: dict[str, Any] | None) -> Comparison:
    """The document with what the comparison was of: tool-call scores, the golden and the run, the context probe,
    the part of the golden judged, and the floor notes."""
    h = golden.header
    # A margin the golden lacks is no error: compare judges that signal uncalibrated (compare.uncalibrated).
    doc = dataclasses.replace(
        doc, suites=_with_tool_call_scores(doc, h, cand),
        golden={"name": h.name, "path": str(golden_path), "source_run": h.source.run_id,
                "endpoint": h.source.endpoint, "margins_provenance": _provenance(h)},
        # (a header without run_id or endpoint, which no writer makes, reads as "" / {}: written as null, as before)
        run={"run_dir": str(run_dir), "run_id": hdr.run_id or None, "endpoint": hdr.endpoint or None},
        context_truncation=ctx or None)
    if golden.narrowed:  # a reviewer must see that this gate judged part of the golden, and which part
        doc = dataclasses.replace(doc, limited=dict(golden.narrowed))
    return with_floor_notes(doc, h)


def _narrowed_as_asked(golden: Golden, asked: GateRequest, golden_path: str | Path) -> Golden:
    """The golden as the recorded gate saw it (gate_golden's narrowing, from the record instead of a spec)."""
    try:
        return golden.narrow(suites=asked.suites, modes=asked.modes, limit=asked.limit,
                             probes=asked.probes is not Probes.OFF, margins=asked.margins)
    except ValueError as e:
        raise UsageError(f"{golden_path}: the gate's recorded selection does not fit it: {e}") from None


def teacher_forced_measures(run_dir: Path, header: RunHeader, golden: Golden,
                            cobs: list[Observation]) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """(run.json's `teacher_forcing` block, per-suite measures of its forced records against the golden), or None
    when the run made no teacher-forcing pass (then comparison.json has no `teacher_forced` blocks, as before)."""
    from verifier.attribution import compare, teacher_forced
    from verifier.execution import teacher_forcing

    state = header.teacher_forcing
    if state is None:
        return None
    try:  # the rows are read as they are measured: a refused or corrupt file surfaces here
        rows = teacher_forcing.read(run_dir) if state.get("state") == "measured" else iter(())
        measures = teacher_forced.measure(golden.observations, compare.as_observations(cobs), rows, state.get("method"))
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    return state, measures


def with_floor_notes(doc: Comparison, h: GoldenHeader) -> Comparison:
    """The comparison with a reason for each compared suite whose reference scored at the floor (golden.model.
    quality_at_floor): a pass there says little, and the document says so beside the verdict, never in it."""
    notes = floor_warnings(h.summary, doc.suites)
    if not notes:
        return doc
    reasons = [*(doc.reasons or []), *notes]
    return dataclasses.replace(doc, reasons=reasons, reason=reasons[0])


def _with_tool_call_scores(doc: Comparison, h: GoldenHeader, cand: RunSummary | None) -> dict[str, SuiteResult]:
    """The suites with K2VV's trigger F1 and schema accuracy, candidate (`cand`: the run's summary) beside golden, on
    every tool-calling suite (key `tool_calls`)."""
    from verifier.attribution import numerics

    out = dict(doc.suites)
    for suite, block in doc.suites.items():
        mine = cand.suite(suite) if cand is not None else None
        scores = numerics.tool_call_scores(h.suite_summary(suite).get("extra"), mine.extra if mine is not None else None,
                                           block.tool_trigger)
        if scores:
            out[suite] = dataclasses.replace(block, tool_calls=scores)
    return out


def _context_verdict(run_dir: Path, h: GoldenHeader) -> dict[str, Any] | None:
    """The context-truncation probe's verdict (context_probe.verdict), when the run has one."""
    from verifier.execution import context_probe as cp

    ran = RunDir(run_dir).context()
    return cp.verdict(ran, dict(h.context_probe) if h.context_probe else None) if ran is not None else None


def _provenance(h: GoldenHeader) -> dict[str, Any]:
    srcs: dict[str, int] = {}
    for m in h.margins.values():
        v = m.to_json()
        if isinstance(v, dict):
            key = json.dumps({x: v[x] for x in sorted(v) if x != "value"}, sort_keys=True)
            srcs[key] = srcs.get(key, 0) + 1
    return {"sources": [dict(jsonsafe.loads(k), margins=n) for k, n in srcs.items()]}
