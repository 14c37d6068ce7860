"""`RunDir`: a run directory as one object. Every reader in the app, the report and the CLI goes through it.

It knows every file of a run directory (the names are spelled in execution/layout.py) and returns each as a checked
value: `header()` a RunHeader, `summary()` a RunSummary, `probes()`, `context()` and `comparison()` JSON objects,
`observations()` the rows scoring wrote as Observations, `each_observation` the same one row at a time (None / False
when missing, stale or forged: the command scores the run again first, app/scored.ensure_scored; there is no second
way to parse the journal). Every file is read through `verifier.safeio` (see execution/layout.py), so a planted
FIFO, device, oversized file or symlink out of the directory is a `NotARunDir` naming it (exit 2, one line),
never a hang, a MemoryError or a file from elsewhere.

Writing: `claim_for_write` refuses to write into a directory that holds a golden, or a run this command did not
make, unless the caller says it means to (`--force`).

The typed Comparison document lives above this floor (attribution/document.py): `comparison()` returns the checked
JSON object, and the app wraps it (`Comparison.from_dict`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from verifier.errors import UsageError
from verifier import safewrite
from verifier.execution import journal, layout
from verifier.execution import observations as observe
from verifier.types import Exchange, Observation, RunHeader, RunSummary, Sample, Verdict

GOLDEN_MARK = "golden.json"
"""The file that makes a directory a golden (golden/store.GOLDEN; spelled here because run/ is below golden/)."""


def check_run_dir(run_dir: Path) -> dict[str, Any]:
    """run.json as a dict, checked: present, a regular file inside the directory, JSON, with a `suites` object. For a
    writer that needs the document as written (which keys an older run.json lacks); readers take `RunDir.header()`."""
    p = Path(run_dir) / layout.HEADER
    if not p.exists() and not p.is_symlink():
        raise layout.NotARunDir(f"{run_dir} is not a run directory (no {layout.HEADER})")
    hdr = layout.read_document(p, within=Path(run_dir))
    if not isinstance(hdr, dict) or not isinstance(hdr.get("suites"), dict):
        raise layout.NotARunDir(f"{p} is corrupt: not a run header (no suites)")
    # Reading registers nothing (scrub.py): a command that writes from this run calls scrub.register_run itself.
    return hdr


@dataclass(frozen=True)
class ComparisonGlance:
    """What a listing of runs shows of a comparison.json: read leniently, any writer's and any age (the typed
    Comparison, above this floor, is for documents this verifier compares or renders)."""

    status: str
    exit_code: Any
    """As written (not checked: the listing shows what the file says)."""
    golden_name: Any
    """`golden.name` as written, or None."""

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> ComparisonGlance:
        made = doc.get("golden")
        return cls(status=str(doc.get("status")), exit_code=doc.get("exit_code"),
                   golden_name=made.get("name") if isinstance(made, dict) else None)


@dataclass(frozen=True)
class RunDir:
    """A run directory on disk (it need not exist yet: `claim_for_write` makes one)."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def file(self, name: str) -> Path:
        """The path of one of its files (a name from execution/layout.py)."""
        return self.path / name

    # ------------------------------------------------------------------ what it is
    def is_run(self) -> bool:
        """Whether it holds a run header (cheap: nothing is read; a planted special file counts, and is refused
        when read)."""
        return self.has(layout.HEADER)

    def is_golden(self) -> bool:
        return (self.path / GOLDEN_MARK).is_file()

    def scored(self) -> bool:
        return self.file(layout.SUMMARY).is_file()

    def writable(self) -> bool:
        """Whether this user may write into the directory (a colleague's run, a read-only mount: not)."""
        return os.access(self.path, os.W_OK)

    def has(self, name: str) -> bool:
        return self.file(name).exists() or self.file(name).is_symlink()

    def stale(self) -> bool:
        """No verdicts yet, or verdicts scored from another responses.jsonl (e.g. a resume killed before scoring):
        compare, gate, calibrate and bless then re-score instead of using them."""
        if not self.file(layout.VERDICTS).exists():
            return True
        try:
            summary = layout.read_document(self.file(layout.SUMMARY), within=self.path)
        except layout.RefusedFile:
            raise  # planted (a FIFO, a device, a symlink out): refused, not scored over
        except layout.NotARunDir:
            return True
        if not isinstance(summary, dict):
            return True
        if "responses_digest" not in summary:
            return False  # scored before digests were recorded: trusted as before (it may be a read-only checkout)
        return bool(summary["responses_digest"] != layout.file_digest(self.file(layout.RESPONSES)))

    # ------------------------------------------------------------------ readers
    def header(self) -> RunHeader:
        """run.json, checked (NotARunDir when absent, unsafe or not a run header), typed. The scrubber registers a run
        by its `endpoint`; a writer that needs the document as written (which keys an older run.json lacks) reads it
        with check_run_dir."""
        return RunHeader.from_dict(check_run_dir(self.path))

    def _document(self, name: str) -> dict[str, Any] | None:
        doc = layout.read_document(self.file(name), within=self.path)
        if doc is None:
            return None
        if not isinstance(doc, dict):
            raise layout.NotARunDir(f"{self.file(name)} is corrupt: not a JSON object")
        return doc

    def summary(self) -> RunSummary | None:
        """summary.json, typed (None before scoring; NotARunDir naming the key when its shape is not a summary's)."""
        doc = self._document(layout.SUMMARY)
        if doc is None:
            return None
        try:
            return RunSummary.from_dict(doc)
        except ValueError as e:
            raise layout.NotARunDir(f"{self.file(layout.SUMMARY)} is corrupt: {e}") from None

    def probes(self) -> dict[str, Any] | None:
        """probes.json: the parameter-contract probes' results (None when the run ran none)."""
        return self._document(layout.PROBES)

    def context(self) -> dict[str, Any] | None:
        """context.json: the context-truncation probe's results (None when it did not run)."""
        return self._document(layout.CONTEXT)

    def comparison(self) -> dict[str, Any] | None:
        """comparison.json as a JSON object whose `status`, when present, is a string (None when the run was never
        compared). What it says is the writer's claim: the matrix re-compares before it shows it (cli/matrix.py)."""
        doc = self._document(layout.COMPARISON)
        if doc is not None and "status" in doc and not isinstance(doc["status"], str):
            raise layout.NotARunDir(f"{self.file(layout.COMPARISON)} is corrupt: its status is not a string")
        return doc

    def comparison_glance(self) -> ComparisonGlance | None:
        """`comparison`, as a listing shows it (None when the run was never compared, or the document is empty)."""
        doc = self.comparison()
        return ComparisonGlance.from_dict(doc) if doc else None

    def samples(self) -> dict[tuple[str, str], Sample]:
        return journal.read_samples(self.path)

    def iter_exchanges(self) -> Iterator[Exchange]:
        return journal.iter_exchanges(self.path)

    def exchanges(self) -> dict[tuple[str, str, int, str], Exchange]:
        return journal.read_exchanges(self.path)

    def iter_verdicts(self) -> Iterator[Verdict]:
        return (Verdict.from_json(d) for d in journal.read_jsonl(self.file(layout.VERDICTS), within=self.path))

    def verdicts(self) -> list[Verdict]:
        return list(self.iter_verdicts())

    def observations(self) -> list[Observation] | None:
        """observations.jsonl's rows, or None when the file is absent, stale, or does not match its seal: the
        command then scores the run again (app/scored.observed, app/scored.ensure_scored)."""
        return observe.read(self.path)

    def each_observation(self, take: observe.Take) -> bool:
        """`observations`, one row at a time with its `shown` block (the report's bounded memory): False when
        `observations` would be None (`take` may have seen rows of the unsealed file: drop them)."""
        return observe.each(self.path, take)

    # ------------------------------------------------------------------ outputs
    def report_paths(self, html: str | Path | None = None, junit: str | Path | None = None,
                     markdown: str | Path | None = None, csv: str | Path | None = None) -> dict[str, Path]:
        """Where a gate's CI outputs go: the given paths, else the run's own report.html, junit.xml, summary.md,
        samples.csv."""
        return {"html": Path(html) if html else self.file(layout.REPORT_HTML),
                "junit": Path(junit) if junit else self.file(layout.JUNIT),
                "markdown": Path(markdown) if markdown else self.file(layout.SUMMARY_MD),
                "csv": Path(csv) if csv else self.file(layout.SAMPLES_CSV)}

    def report_html(self) -> Path:
        return self.file(layout.REPORT_HTML)

    def comparison_path(self) -> Path:
        return self.file(layout.COMPARISON)

    def write_comparison(self, doc: dict[str, Any], out: Path | None = None) -> Path:
        """comparison.json (or `out`), written whole and scrubbed."""
        target = Path(out) if out is not None else self.comparison_path()
        if out is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
        safewrite.write_json(target, doc)
        return target

    # ------------------------------------------------------------------ writing into it
    def claim_for_write(self, *, flag: str, force: bool = False, own_run: bool = False) -> None:
        """Refuse to write into a directory that is a golden, or that holds a run `own_run` does not cover (a
        run this command did not make), unless `force`: a one-line UsageError (exit 2) naming the directory and
        --force. `flag` is the option that named the directory (e.g. `--out`)."""
        if force:
            return
        if self.is_golden():
            raise UsageError(f"{flag} {self.path} is a golden directory: writing there would replace it "
                             f"(pass --force if that is what you mean)", hints=("another " + flag,))
        if self.is_run() and not own_run:
            raise UsageError(f"{flag} {self.path} already holds a run this command did not make: writing there would "
                             f"replace its files (pass --force if that is what you mean)", hints=("another " + flag,))
