"""`verifier sweep`: which serving configurations are both faithful and fast.

For each named configuration in turn: start it (when the harness owns the engine), gate it against one golden
(verdict, diagnosis, numerics evidence), run the performance probe (perf.py), stop it. Every configuration writes
its own directory, so a sweep shards across CI jobs (one configuration per job, `--only NAME`) and `combine` joins
any set of configuration directories into one table and one page.

    OUT/<config>/config.json    name, endpoint (no secrets), engine description, lossless claim, error if any
    OUT/<config>/gate/          the gate's run directory (comparison.json, report.html, ...)
    OUT/<config>/perf.json      the probe's ladder
    OUT/sweep.json|.md|.html    the combined table (rows, Pareto front, lossless checks)

The application takes specs: an engine configuration arrives as a callable that starts the engine and yields its
(base URL, model), built by the CLI from the test bed, so this module never imports the test bed.
"""

from __future__ import annotations

import contextlib
import sys
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, ContextManager, Iterator, Mapping, Sequence

from verifier import safewrite
from verifier.attribution.document import Comparison
from verifier.execution import perf
from verifier.execution.layout import COMPARISON, NotARunDir, read_document
from verifier.execution.rundir import RunDir
from verifier.app.collect import EndpointSpec
from verifier.app.spec import GateOptions, GateSpec
from verifier.errors import UsageError
from verifier.golden.model import Golden
from verifier.report.sweep import Lossless, Parting, SweepRow, SweepTable

Launcher = Callable[[], ContextManager[tuple[str, str]]]
"""Starts an engine and yields (base URL, model name); leaving the context stops it."""

FORMAT = 1


@dataclass(frozen=True)
class SweepConfig:
    """One configuration of a sweep."""

    name: str
    """Directory-safe name, unique in the sweep."""
    endpoint: EndpointSpec
    """How to reach it; with a launcher, base_url and model come from the started engine."""
    launcher: Launcher | None = None
    """Starts and stops the engine this configuration is (None: an endpoint someone else runs)."""
    describe: Mapping[str, Any] = field(default_factory=dict)
    """What the page shows of the configuration (engine and flags); never secrets."""
    lossless: bool = False
    """Claimed output-invariant at temperature 0: held to the reference reruns' parting rate."""


@dataclass(frozen=True)
class SweepSpec:
    golden: Path
    """The golden every configuration is gated against."""
    configs: tuple[SweepConfig, ...]
    """In the order they run."""
    out: Path
    """The sweep directory."""
    perf: perf.PerfSpec = perf.PerfSpec()
    """The performance probe's ladder."""
    gate: GateOptions = GateOptions()
    """What every configuration's gate shares (suites, modes, limit, probes, infra budget, margins, sampling...):
    the sweep file's [gate] table, merged under each configuration's endpoint (`gate_spec`)."""
    quiet: bool = False


@dataclass(frozen=True)
class ConfigRecord:
    """OUT/<config>/config.json: what a configuration was and whether it ran (the table's row source)."""

    name: str
    describe: Mapping[str, Any] = field(default_factory=dict)
    """The engine and its flags, or the endpoint: never secrets."""
    lossless: bool = False
    golden: str | None = None
    """The golden's path as the sweep named it."""
    error: str | None = None
    """Why the configuration could not be gated or probed, if it could not."""
    endpoint: Mapping[str, Any] | None = None
    """The endpoint as started (`_public_endpoint`); None (absent from the file) when it never started."""
    format: int = FORMAT

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"format": self.format, "name": self.name, "describe": dict(self.describe),
                               "lossless": self.lossless, "golden": self.golden, "error": self.error}
        if self.endpoint is not None:
            out["endpoint"] = dict(self.endpoint)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ConfigRecord:
        """A config.json as read (its format already checked); ValueError when a field has the wrong type."""
        name, describe, endpoint, error, golden = d.get("name"), d.get("describe"), d.get("endpoint"), d.get("error"), d.get("golden")
        if not isinstance(name, str) or not name:
            raise ValueError("no configuration name")
        if describe is not None and not isinstance(describe, Mapping):
            raise ValueError("describe is not an object")
        if endpoint is not None and not isinstance(endpoint, Mapping):
            raise ValueError("endpoint is not an object")
        if error is not None and not isinstance(error, str):
            raise ValueError("error is not a string")
        return cls(name=name, describe=describe or {}, lossless=bool(d.get("lossless")),
                   golden=golden if golden is None else str(golden), error=error, endpoint=endpoint,
                   format=int(d.get("format") or FORMAT))


def _public_endpoint(ep: EndpointSpec) -> dict[str, Any]:
    from verifier.wire.endpoint import redact_url

    return {"base_url": redact_url(ep.base_url) if ep.base_url else None, "model": ep.model,
            "api_key_env": ep.api_key_env, "headers": sorted(ep.headers)}


@contextlib.contextmanager
def _started(cfg: SweepConfig) -> Iterator[EndpointSpec]:
    if cfg.launcher is None:
        yield cfg.endpoint
        return
    with cfg.launcher() as (url, model):
        yield replace(cfg.endpoint, base_url=url, model=model)


def gate_spec(spec: SweepSpec, ep: EndpointSpec, out: Path) -> GateSpec:
    """One configuration's gate: the sweep's shared [gate] options against this (started) endpoint."""
    return replace(spec.gate.over(GateOptions(golden=str(spec.golden), base_url=ep.base_url, model=ep.model,
                                              out=str(out), quiet=spec.quiet)).spec(), endpoint=ep)


def run_config(spec: SweepSpec, cfg: SweepConfig, log: Callable[[str], None], golden: Golden | None = None) -> ConfigRecord:
    """Gate and probe one configuration into OUT/<name>/; returns its row source (config.json).
    Whatever stops this configuration (an engine that does not start, an unreachable endpoint, a failing probe)
    is recorded as its error; what would stop every configuration (the golden) is checked before the first.
    `golden`: the sweep's golden, loaded once for every configuration."""
    from verifier.app.gate import gate, gate_golden

    d = spec.out / cfg.name
    d.mkdir(parents=True, exist_ok=True)
    info = ConfigRecord(name=cfg.name, describe=dict(cfg.describe), lossless=cfg.lossless, golden=str(spec.golden))
    try:
        with _started(cfg) as ep:
            info = replace(info, endpoint=_public_endpoint(ep))
            log(f"sweep: {cfg.name}: gating against {spec.golden}")
            _set_aside_interrupted(d / "gate", log)
            gspec = gate_spec(spec, ep, d / "gate")
            gate(gspec, gate_golden(gspec, golden))
            log(f"sweep: {cfg.name}: performance probe")
            assert ep.base_url and ep.model
            safewrite.write_json(d / "perf.json", perf.probe(ep.base_url, ep.model, spec.perf, ep.api_key_env, ep.headers))
    except Exception as e:  # noqa: BLE001 - one configuration that cannot run (unreachable, engine crash) must not cost the others
        info = replace(info, error=f"{type(e).__name__}: {e}"[:500])
        if not spec.quiet:
            traceback.print_exc(limit=3, file=sys.stderr)
    safewrite.write_json(d / "config.json", info.to_json())
    return info


def _set_aside_interrupted(gate_dir: Path, log: Callable[[str], None]) -> None:
    """A gate an interrupted sweep left unfinished (a run, no comparison) is kept, renamed, and this configuration
    gated afresh: the engine it measured is gone, and a fresh gate is what the uninterrupted sweep would have run."""
    rd = RunDir(gate_dir)
    if not rd.is_run() or rd.has(COMPARISON):
        return  # nothing there, or a finished gate (refused by the gate itself, as before)
    n = 1
    while (aside := gate_dir.with_name(f"{gate_dir.name}.interrupted{'' if n == 1 else f'-{n}'}")).exists():
        n += 1
    gate_dir.rename(aside)
    log(f"sweep: {gate_dir.parent.name}: an interrupted gate was kept as {aside.name}; gating afresh")


def run(spec: SweepSpec, only: Sequence[str] = (), log: Callable[[str], None] | None = None) -> SweepTable:
    """Run the chosen configurations (all by default) and write the combined table over every configuration
    directory now in OUT (so shards run into one OUT, or combined later, give the same page)."""
    names = [c.name for c in spec.configs]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise UsageError(f"--only: no configuration {unknown[0]!r} in the sweep file; it has: {', '.join(names)}")
    from verifier.app.gate import gate_golden, load_golden

    golden = load_golden(spec.golden)
    # A bad golden or a [gate] table it cannot satisfy (no such suite, no margins) stops the sweep before anything starts.
    gate_golden(spec.gate.over(GateOptions(golden=str(spec.golden))).spec(endpoint_required=False), golden)
    say = log or (lambda s: None)
    for cfg in spec.configs:
        if not only or cfg.name in only:
            run_config(spec, cfg, say, golden)
    return combine([spec.out / n for n in names if (spec.out / n / "config.json").exists()], spec.out)


# ----------------------------------------------------------------------------------------------- the table

def _read(path: Path) -> Any:
    """A JSON file of a configuration directory (None when absent), through safeio like every run file."""
    try:
        return read_document(path, within=path.parent)
    except NotARunDir as e:
        raise UsageError(f"{e}") from None
    except OSError as e:
        raise UsageError(f"{path}: not readable JSON ({type(e).__name__})") from None


def _comparison(gate_dir: Path) -> Comparison | None:
    """A configuration's gate comparison (None when it was never compared), read through RunDir, typed. One this
    verifier cannot read as a comparison is refused, naming it (it would otherwise be half read into the table)."""
    rd = RunDir(gate_dir)
    try:
        doc = rd.comparison()
    except NotARunDir as e:
        raise UsageError(str(e)) from None
    if doc is None:
        return None
    try:
        return Comparison.from_dict(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise UsageError(f"{rd.comparison_path()}: not a comparison this verifier reads ({type(e).__name__}: {e})") from None


def _parting(comparison: Comparison) -> Parting:
    """Greedy parting rate over every suite (count/n) and the reference reruns' calibrated rate (the largest)."""
    count = n = 0
    ref: float | None = None
    for s in comparison.suites.values():
        dv = s.divergence
        if dv is not None and dv.n:
            count += dv.count or 0
            n += dv.n
            if dv.margin is not None:
                ref = max(ref or 0.0, float(dv.margin))
    return Parting(count=count, n=n, rate=round(count / n, 6) if n else None, reference_rate=ref)


def _drift(comparison: Comparison) -> float | None:
    vals = [s.drift.mean_abs_delta for s in comparison.suites.values() if s.drift.mean_abs_delta is not None]
    return max(vals) if vals else None


def _teacher_forced_kl(comparison: Comparison) -> float | None:
    """The largest suite's teacher-forced mean KL (the correctness axis of the KL x tokens/s front); None unmeasured."""
    vals = [t["kl_mean"] for s in comparison.suites.values()
            if isinstance(t := s.teacher_forced, Mapping) and t.get("state") == "measured" and isinstance(t.get("kl_mean"), (int, float))]
    return max(vals) if vals else None


def config_record(config_dir: Path) -> ConfigRecord:
    """A configuration directory's config.json, typed; one this verifier did not write is refused, naming it."""
    info = _read(config_dir / "config.json")
    if not isinstance(info, dict) or info.get("format") != FORMAT:
        raise UsageError(f"{config_dir} is not a sweep configuration directory (no config.json of format {FORMAT})")
    try:
        return ConfigRecord.from_dict(info)
    except ValueError as e:
        raise UsageError(f"{config_dir / 'config.json'}: not a sweep configuration this verifier reads ({e})") from None


def row(config_dir: Path, info: ConfigRecord | None = None) -> SweepRow:
    """One configuration's row, from its files only (`info`: its config.json, when already read)."""
    info = info if info is not None else config_record(config_dir)
    comp = _comparison(config_dir / "gate")
    perf_doc = _read(config_dir / "perf.json") or {}
    diag = (comp.diagnosis if comp is not None else None) or ()
    parting = _parting(comp) if comp is not None else Parting()
    lossless: Lossless | None = None
    if info.lossless:
        if parting.rate is None:
            lossless = Lossless(held=None, why="not measured: no greedy parting evidence (logprobs off, or no gate)")
        else:
            limit = max(parting.reference_rate or 0.0, 0.0)
            lossless = Lossless(held=parting.rate <= limit,
                                why=f"greedy output parts from the golden's on {parting.count}/{parting.n} samples "
                                    f"(rate {parting.rate}) vs the reference reruns' {limit}")
    status = (comp.status if comp is not None else None) or ("error" if info.error else "incomplete")
    return SweepRow(
        name=info.name, describe=info.describe, endpoint=info.endpoint,
        status=status, exit_code=comp.exit_code if comp is not None else None, error=info.error,
        diagnosis=diag[0].component if diag else None,
        reason=comp.reason if comp is not None else None, drift=_drift(comp) if comp is not None else None,
        parting=parting, teacher_forced_kl=_teacher_forced_kl(comp) if comp is not None else None,
        lossless=lossless, perf=perf.headline(perf_doc), warnings=list(perf_doc.get("warnings") or []),
        dir=config_dir.name,
    )


# Objectives of the speed front: (figure, larger is better).
OBJECTIVES = (("aggregate_tokens_per_s", True), ("request_tokens_per_s", True), ("ttft_p50_s", False))


def _better(a: Mapping[str, Any], b: Mapping[str, Any], larger: bool) -> int:
    """+1 when a is better than b beyond both intervals, -1 when worse, 0 when the intervals cannot tell
    (overlap, or a figure without an interval: one round decides nothing)."""
    if not a or not b or not a.get("ci") or not b.get("ci"):
        return 0
    (alo, ahi), (blo, bhi) = a["ci"], b["ci"]
    if alo > bhi:
        return 1 if larger else -1
    if ahi < blo:
        return -1 if larger else 1
    return 0


def dominates(a: SweepRow, b: SweepRow) -> bool:
    """a is no worse than b on every speed objective and better on one, each judged by intervals."""
    cmp = [_better(a.perf.get(k) or {}, b.perf.get(k) or {}, larger) for k, larger in OBJECTIVES]
    return all(c >= 0 for c in cmp) and any(c > 0 for c in cmp)


def pareto(rows: Sequence[SweepRow]) -> list[SweepRow]:
    """The rows with `front` marked on those that pass the gate and that no other passing row dominates on speed, and
    `kl_front` on those no other row beats on both the teacher-forced KL (lower) and aggregate tokens/s (by
    intervals): what a quantization engineer trades, pass or not."""
    eligible = [r for r in rows if r.status == "pass" and r.perf]
    measured = [r for r in rows if r.teacher_forced_kl is not None and r.perf]
    return [replace(r, front=any(r is o for o in eligible) and not any(dominates(o, r) for o in eligible if o is not r),
                    kl_front=any(r is o for o in measured) and not any(_kl_dominates(o, r) for o in measured if o is not r))
            for r in rows]


def _kl_dominates(a: SweepRow, b: SweepRow) -> bool:
    assert a.teacher_forced_kl is not None and b.teacher_forced_kl is not None  # pareto's `measured` rows only
    speed = _better(a.perf.get("aggregate_tokens_per_s") or {}, b.perf.get("aggregate_tokens_per_s") or {}, True)
    return a.teacher_forced_kl <= b.teacher_forced_kl and speed >= 0 and (a.teacher_forced_kl < b.teacher_forced_kl or speed > 0)


def combine(config_dirs: Sequence[Path], out: Path) -> SweepTable:
    """The sweep table over configuration directories (from one run or from many CI jobs): sweep.json, .md, .html."""
    from verifier.report import sweep as page

    if not config_dirs:
        raise UsageError("no sweep configuration directories to combine")
    records, rows = [], []
    for d in config_dirs:  # each directory whole before the next: the first bad one is the one named
        records.append(config_record(Path(d)))
        rows.append(row(Path(d), records[-1]))
    names = [r.name for r in rows]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        raise UsageError(f"two configuration directories are both named {dup!r}")
    gated = {(str(g.get("name")), str(g.get("source_run"))): d for d in config_dirs
             if (c := _comparison(Path(d) / "gate")) is not None and isinstance(g := c.golden, Mapping)}
    if len(gated) > 1:  # one Pareto front across goldens would compare what was measured against different references
        (a, da), (b, db) = sorted(gated.items())[:2]
        raise UsageError(f"{da} and {db} were gated against different goldens ({a[0]} from run {a[1]}, "
                         f"{b[0]} from run {b[1]}): combine configurations of one golden only")
    goldens = sorted({str(info.golden) for info in records})
    table = SweepTable(format=FORMAT, golden=goldens[0] if len(goldens) == 1 else goldens, rows=tuple(pareto(rows)))
    out.mkdir(parents=True, exist_ok=True)
    safewrite.write_json(out / "sweep.json", table.to_json())
    safewrite.write_text(out / "sweep.md", page.markdown(table))
    safewrite.write_text(out / "sweep.html", page.html(table))
    return table
