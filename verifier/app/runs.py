"""Past runs and gates, found from their own files: run.json (when, endpoint, model, suites) and, for a compared
run, comparison.json (status, exit code, golden). Nothing is indexed or cached: a run directory is the record."""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from verifier.errors import UsageError

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


def _run_dirs(root: Path, depth: int = 0) -> Iterator[Path]:
    if (root / "run.json").is_file():
        yield root
    if depth >= MAX_DEPTH:
        return
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return
    for p in children:
        yield from _run_dirs(p, depth + 1)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


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


def _started(row: dict[str, Any]) -> dt.datetime | None:
    try:
        when = dt.datetime.fromisoformat(row["started"])
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def describe(run_dir: Path) -> dict[str, Any] | None:
    """One row from a run directory's own headers; None when run.json is unreadable."""
    hdr = _read(run_dir / "run.json")
    if hdr is None or not isinstance(hdr.get("suites"), dict):
        return None
    ep = hdr.get("endpoint") if isinstance(hdr.get("endpoint"), dict) else {}
    cmp = _read(run_dir / "comparison.json")
    golden = (cmp or {}).get("golden") if isinstance((cmp or {}).get("golden"), dict) else {}
    return {
        "run_dir": str(run_dir), "run_id": hdr.get("run_id"), "started": hdr.get("started"), "finished": hdr.get("finished"),
        "endpoint": ep.get("base_url"), "model": ep.get("model"), "suites": sorted(hdr["suites"]),
        "modes": hdr.get("modes") or ["chat"], "kind": "gate" if cmp or hdr.get("gate_of") else "run",
        "status": str(cmp.get("status")) if cmp else "run" if hdr.get("finished") and not hdr.get("gate_of") else "interrupted",
        "exit_code": cmp.get("exit_code") if cmp else None,
        "golden": golden.get("name") or hdr.get("gate_of"), "scored": (run_dir / "summary.json").is_file(),
    }


def list_runs(q: RunsQuery) -> list[dict[str, Any]]:
    """Rows for every run directory under q.root that matches, newest first."""
    if not q.root.is_dir():
        raise UsageError(f"{q.root} is not a directory")
    cutoff = since_cutoff(q.since) if q.since else None
    rows = [r for r in (describe(d) for d in _run_dirs(q.root)) if r is not None]
    if q.statuses:
        rows = [r for r in rows if r["status"] in q.statuses]
    if q.model:
        rows = [r for r in rows if r["model"] == q.model]
    if q.suite:
        rows = [r for r in rows if q.suite in r["suites"]]
    if cutoff is not None:
        rows = [r for r in rows if (_started(r) or dt.datetime.min.replace(tzinfo=dt.timezone.utc)) >= cutoff]
    rows.sort(key=lambda r: (_started(r) or dt.datetime.min.replace(tzinfo=dt.timezone.utc), r["run_dir"]), reverse=True)
    return rows[: q.limit] if q.limit else rows
