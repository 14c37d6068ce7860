"""Past runs and gates, found from their own files: run.json (when, endpoint, model, suites) and, for a compared
run, comparison.json (status, exit code, golden). Nothing is indexed or cached: a run directory is the record."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping

from verifier.errors import UsageError
from verifier.execution.layout import NotARunDir, RefusedFile
from verifier.execution.rundir import RunDir
from verifier.types import owner_ids
from verifier.surfaces.registry import REFERENCE_MODE

if TYPE_CHECKING:
    from verifier.attribution.document import Comparison
    from verifier.golden.model import Golden

MAX_DEPTH = 3  # runs/<id>, runs/<gate-matrix>/<provider>, runs/<demo>/<healthy>


@dataclass(frozen=True)
class RunsQuery:
    """Which runs to list."""

    root: Path = Path("runs")
    """Where to look."""
    statuses: tuple[str, ...] = ()
    """Only these statuses (`run` for runs never compared, `interrupted` for a run that never finished or a gate
    that never compared); empty: all."""
    model: str | None = None
    """Only runs of this model."""
    suite: str | None = None
    """Only runs that include this suite."""
    since: str | None = None
    """ISO date/time, or an age such as 30m, 6h, 2d."""
    limit: int | None = None
    """At most this many, newest first."""


@dataclass(frozen=True)
class RunRow:
    """One line of `verifier runs`, from a run directory's own files (`--json` prints `to_json()`, one per line)."""

    run_dir: str
    run_id: str | None
    started: Any
    """run.json's `started` as written (ISO-8601; a foreign header's value is shown, never trusted to parse)."""
    finished: Any
    endpoint: Any
    """The endpoint's (redacted) base URL."""
    model: Any
    suites: list[str]
    modes: list[str]
    kind: str
    """`gate` (compared, or made by a gate) or `run`."""
    status: str
    """The comparison's status; else `run` (finished, never compared) or `interrupted`."""
    exit_code: Any
    golden: Any
    """The golden it was compared with (or gated against)."""
    scored: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _run_dirs(root: Path, depth: int = 0) -> Iterator[Path]:
    if RunDir(root).is_run():
        yield root
    if depth >= MAX_DEPTH:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for p in children:
        yield from _run_dirs(p, depth + 1)


def since_cutoff(text: str, now: dt.datetime | None = None) -> dt.datetime:
    """`2026-12-01`, `2026-12-01T10:00` (UTC unless it says otherwise) or an age `30m`/`6h`/`2d` -> an aware datetime."""
    now = now or dt.datetime.now(dt.timezone.utc)
    m = re.fullmatch(r"(\d+)([mhdw])", text.strip())
    if m:
        unit = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}[m.group(2)]
        return now - dt.timedelta(**{unit: int(m.group(1))})
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise UsageError(f"--since {text!r}: give an ISO date or time (2026-12-01, 2026-12-01T10:00) or an age (30m, 6h, 2d)") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def _started(row: RunRow) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(row.started)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def describe(run_dir: Path) -> RunRow | None:
    """One row from a run directory's own headers; None when run.json is not a run header or is corrupt JSON.
    A planted special file or a symlink out of the directory is refused (UsageError naming it), never read."""
    rd = RunDir(run_dir)
    try:
        hdr = rd.header()
    except RefusedFile as e:
        raise UsageError(str(e)) from None
    except NotARunDir:
        return None
    ep = hdr.endpoint if isinstance(hdr.endpoint, dict) else {}
    try:
        # read leniently (any writer's, any age: the listing shows what it says)
        cmp = rd.comparison_glance()
    except RefusedFile as e:
        raise UsageError(str(e)) from None
    except NotARunDir:
        cmp = None  # corrupt: listed as a run never compared, as before
    return RunRow(
        run_dir=str(run_dir), run_id=hdr.run_id or None, started=hdr.started, finished=hdr.finished,
        endpoint=ep.get("base_url"), model=ep.get("model"), suites=sorted(hdr.suites),
        modes=hdr.modes or [REFERENCE_MODE], kind="gate" if cmp or hdr.gate_of else "run",
        status=cmp.status if cmp else "run" if hdr.finished and not hdr.gate_of else "interrupted",
        exit_code=cmp.exit_code if cmp else None,
        golden=(cmp.golden_name if cmp else None) or hdr.gate_of, scored=rd.scored(),
    )


def list_runs(q: RunsQuery) -> list[RunRow]:
    """Rows for every run directory under q.root that matches, newest first."""
    if not q.root.is_dir():
        raise UsageError(f"{q.root} is not a directory")
    cutoff = since_cutoff(q.since) if q.since else None
    rows = [r for r in (describe(d) for d in _run_dirs(q.root)) if r is not None]
    if q.statuses:
        rows = [r for r in rows if r.status in q.statuses]
    if q.model:
        rows = [r for r in rows if r.model == q.model]
    if q.suite:
        rows = [r for r in rows if q.suite in r.suites]
    if cutoff is not None:
        rows = [r for r in rows if (_started(r) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)) >= cutoff]
    rows.sort(key=lambda r: (_started(r) or dt.datetime.min.replace(tzinfo=dt.timezone.utc), r.run_dir), reverse=True)
    return rows[: q.limit] if q.limit else rows


def recompare(run_dir: Path, golden_path: str | Path, loaded: "Golden", recorded: "Comparison") -> "Comparison":
    """The comparison the run's own evidence gives against this golden, narrowed as the gate that wrote `recorded`
    was (the samples the run planned and its modes, probes left out when it left them out; its infra budget; an
    early sequential stop judges what was sent). Nothing is written. What the matrix checks a run's
    comparison.json against: a document edited by hand does not survive it."""
    import dataclasses

    from verifier.app.gate import compare_run
    from verifier.app.spec import CompareSpec

    rd = RunDir(run_dir)
    hdr = rd.header()
    planned = set(rd.samples())
    h = loaded.header
    limited = recorded.limited
    probes_left_out = isinstance(limited, Mapping) and bool(limited.get("probes_left_out"))
    narrowed = dataclasses.replace(
        loaded,
        header=dataclasses.replace(h, suites={k: v for k, v in h.suites.items() if k in hdr.suites},
                                   modes=tuple(m for m in h.modes if m in hdr.modes),
                                   probes=None if probes_left_out else h.probes),
        observations=tuple(o for o in loaded.observations if o.mode in hdr.modes and o.suite in hdr.suites
                           and any((o.suite, sid) in planned for sid in owner_ids(o.sample_id))))
    infra = recorded.infra
    budget = infra.get("budget") if isinstance(infra, Mapping) else None
    # The recorded budget (a document without one: the default, CompareSpec.budget).
    spec = CompareSpec(golden_path, float(budget) if isinstance(budget, (int, float)) else None,
                       allow_subset=bool(recorded.sequential), write=False, as_gated=False)
    return compare_run(Path(run_dir), spec, narrowed)


def believed(run_dir: Path, golden_path: str | Path, loaded: "Golden", recorded: "Comparison") -> tuple["Comparison", str | None]:
    """A run's recorded comparison.json as far as the run's own evidence backs it (docs/security.md, a run
    directory): the recorded document when `recompare` gives the same status and exit code, else the comparison
    made now, with the reason naming the file, what it says and what the evidence says. What `matrix` and `report`
    show of a run compared before; the reason (None when believed) is also the caller's to print."""
    made = recompare(run_dir, golden_path, loaded, recorded)
    if (recorded.status, recorded.exit_code) == (made.status, made.exit_code):
        return recorded, None
    why = (f"unverified {run_dir}/comparison.json: it says {recorded.status}, the run's own evidence "
           f"says {made.status}; shown as compared now")
    return dataclasses.replace(made, reasons=[why, *(made.reasons or [])], reason=why), why
