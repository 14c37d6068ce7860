""""Score again if stale": the explicit step of the commands that read what scoring wrote (compare, bless,
calibrate, report, matrix). Reading a run directory never scores it (execution/rundir.RunDir refuses a stale
observations.jsonl with None); a command that needs the rows calls `ensure_scored` (the report: rows read again
afterwards, one at a time) or `observed` (compare, bless, calibrate: the rows kept) first."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from verifier import safewrite, scrub
from verifier.app.catalog import get_suites
from verifier.app.collect import score
from verifier.errors import UsageError
from verifier.execution import journal, scoring
from verifier.execution import observations as observe
from verifier.execution.layout import OBSERVATIONS
from verifier.execution.rundir import RunDir
from verifier.types import Observation, RunSummary, Verdict


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


def observed_in_memory(run_dir: Path) -> tuple[list[Observation], RunSummary | None]:
    """`observed`'s rows, and the summary they were counted in, leaving the run directory as it is (compare --out,
    a colleague's run this user cannot write): the files on disk when they are fresh and sealed with this user's
    key, else the run scored again from its journal in memory, each verdict and row taken as writing it and reading
    it back would give (scrubbed, encoded, decoded), so the rows are those `observed` would leave on disk."""
    rows: list[Observation] = []
    summary, _verdicts = scored_in_memory(run_dir, lambda o, _shown: rows.append(o), rows.clear)
    return rows, summary


def observed_where_allowed(run_dir: Path) -> tuple[list[Observation], RunSummary | None]:
    """The rows and summary of a run as bless reads them: scored again in place when stale if this user may write
    the run (`observed`, as compare without --out), else in memory, the run left as it is (`observed_in_memory`)."""
    if not RunDir(run_dir).writable():
        return observed_in_memory(run_dir)
    rows = observed(run_dir)
    return rows, RunDir(run_dir).summary()


def scored_in_memory(run_dir: Path, take: Callable[[Observation, "dict[str, Any] | None"], None],
                     drop: Callable[[], None]) -> tuple[RunSummary | None, list[Verdict] | None]:
    """Each observation row of the run with its `shown` block, to `take`, without writing into the run: read from
    disk when fresh and sealed with this user's key (then the verdicts are None: verdicts.jsonl is bound to that
    file), else from the journal scored again in memory, each verdict and row as writing and reading it back would
    give. Returns the summary and, when scored here, the verdicts."""
    rd = RunDir(run_dir)
    try:
        scrub.register_run(rd.header().endpoint)
        if not rd.stale() and rd.each_observation(take):
            return rd.summary(), None
        drop()
        verdicts, summary, collected = scoring.score_journal(run_dir, get_suites())
        digest = journal.file_digest(Path(run_dir) / journal.RESPONSES)  # summary.json records it (scoring.write_scores)
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    except KeyError as e:
        raise UsageError(f"{run_dir}: journal names unknown suite or sample {e}") from None
    read_back = [Verdict.from_json(safewrite.as_written(v.fields(), nested_dataclasses=True)) for v in verdicts]
    for r in collected.rows(read_back):
        row = safewrite.as_written(r)
        shown = row.get("shown")
        take(Observation.from_dict(observe.golden_row(row)), shown if isinstance(shown, dict) else None)
    return RunSummary.from_dict(safewrite.as_written({**summary.to_json(), "responses_digest": digest})), read_back
