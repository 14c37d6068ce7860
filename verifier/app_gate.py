"""The application's composite steps: bless, calibrate, gate (collect + compare, with sequential looks)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from . import journal, runner
from .app import EndpointSpec, RunSpec, collect, compare_run, default_run_dir, load_golden, observations, require_margins, score
from .errors import UsageError

# Sequential stopping ends a run early only on a decided regression: a large one shows within
# the first batches, while a pass needs every sample (no flips in 20% of them is weak evidence).
DECIDED = {"frontend_regression", "quantization_regression", "both"}


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


def gate(spec: GateSpec) -> dict[str, Any]:
    """Collect the golden's selection from the endpoint, compare; returns the comparison document."""
    loaded = load_golden(spec.golden)
    g, gobs = loaded
    require_margins(g, spec.golden)
    out = spec.out or default_run_dir("gate")
    run = RunSpec.for_golden(g, gobs, spec.endpoint, out, overrides=spec.overrides, extra_body=spec.extra_body,
                             data=spec.data, looks=spec.looks, probes=spec.probes, quiet=spec.quiet)
    looks: list[dict[str, Any]] = []

    def decided(run_dir: Path) -> bool:
        score(run_dir)
        doc = compare_run(run_dir, spec.golden, None, spec.infra_budget, loaded)
        looks.append({"status": doc["status"], "samples": sum(s["paired"] for s in doc["suites"].values())})
        return doc["status"] in DECIDED

    collect(run, stop_check=decided if spec.sequential else None)
    doc = compare_run(out, spec.golden, None, spec.infra_budget, loaded)
    if spec.sequential:
        total_samples = sum(len(v) for v in (run.only_ids or {}).values())
        used = looks[-1]["samples"] if looks else 0
        doc["sequential"] = {"looks": looks, "used_samples": used, "total_samples": total_samples,
                             "saved_samples": total_samples - used}
        journal.write_json(out / "comparison.json", doc)
    return doc


def calibrate(spec: CalibrateSpec) -> Calibrated:
    from . import compare, golden

    g, gobs = load_golden(spec.golden)
    runs = [gobs]
    names = [g["source"].get("run_id")]
    for r in spec.runs:
        runs.append(observations(Path(r)))
        names.append(Path(r).name)
    if spec.endpoint is not None and spec.endpoint.base_url:
        for i in range(spec.k):
            rd = Path(spec.out_prefix + f"-{i + 1}")
            collect(RunSpec.for_golden(g, gobs, spec.endpoint, rd, overrides=spec.overrides, extra_body=spec.extra_body,
                                       data=spec.data, quiet=spec.quiet))
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


def bless_run(run_dir: Path, to: Path, force: bool = False, epochs_as_reruns: bool = False) -> dict[str, Any]:
    """A scored reference run -> a golden at `to`; returns the golden document."""
    from . import golden

    if (to / golden.GOLDEN).exists() and not force:
        raise UsageError(f"{to} already holds a golden; pass --force to replace it")
    observations(run_dir)
    margins = margins_from_epochs(run_dir) if epochs_as_reruns else None
    return golden.bless(run_dir, to, margins)


def margins_from_epochs(run_dir: Path) -> dict[str, Any]:
    from . import compare

    obs = observations(run_dir)
    epochs = sorted({o["epoch"] for o in obs})
    if len(epochs) < 3:
        raise UsageError(f"{run_dir} has {len(epochs)} epoch(s); calibration from epochs needs at least 3")
    runs = [[{**o, "epoch": 0} for o in obs if o["epoch"] == e] for e in epochs]
    return compare.calibrate_margins(runs, {"method": "epochs", "k": len(epochs), "runs": [run_dir.name], "created": runner.now()})
