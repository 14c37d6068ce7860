""""Score again if stale": the explicit step of the commands that read what scoring wrote (compare, bless,
calibrate, report, matrix). Reading a run directory never scores it (execution/rundir.RunDir refuses a stale
observations.jsonl with None); a command that needs the rows calls `ensure_scored` (the report: rows read again
afterwards, one at a time) or `observed` (compare, bless, calibrate: the rows kept) first."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from verifier import scrub
from verifier.app.collect import score
from verifier.errors import UsageError
from verifier.execution import journal
from verifier.execution.layout import OBSERVATIONS
from verifier.execution.rundir import RunDir
from verifier.types import Observation


def ensure_scored(run_dir: Path) -> None:
    """"Score again if stale", the explicit step of the commands that read what scoring wrote (compare, bless,
    calibrate, report): a run not scored, scored from another journal, or whose observations.jsonl is missing or
    does not match its seal (a row edited after scoring) is scored again, rebuilding the files from the journal.
    Reading never scores: the readers (RunDir.observations, the report's read_run) refuse a run this step did not
    leave fresh. Nothing is kept of the rows (the report reads them again one at a time). UsageError (exit 2) when
    it is not a run, or its suite cannot score it again."""
    _scored(run_dir, lambda _o, _shown: None, lambda: None)


def observed(run_dir: Path) -> list[Observation]:
    """The run's observation rows, scored again first when stale (as `ensure_scored`, in the same one read): what
    compare, bless and calibrate read. The one reader is RunDir.observations; this is the step that makes it answer."""
    rows: list[Observation] = []
    _scored(run_dir, lambda o, _shown: rows.append(o), rows.clear)
    return rows


def _scored(run_dir: Path, take: Callable[[Observation, "dict[str, Any] | None"], None], drop: Callable[[], None]) -> None:
    rd = RunDir(run_dir)
    try:
        scrub.register_run(rd.header().endpoint)  # what the caller writes from these rows is scrubbed of the run's key
        if not rd.stale() and rd.each_observation(take):
            return
        drop()
        score(run_dir)
        if rd.each_observation(take):
            return
        drop()
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    raise UsageError(f"{run_dir}: scoring wrote no {OBSERVATIONS} (a run its suite cannot score again?)")
