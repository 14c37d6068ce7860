"""The run directory: `run.json` header, `samples.jsonl`, append-only `responses.jsonl`.

`samples.jsonl` freezes the samples a run used, so scoring is offline and
pure even for datasets that came from the hub.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import __version__
from .errors import UsageError
from .jsonsafe import dumps_strict
from .redact import Redactor
from .types import Exchange, RunHeader, Sample

HEADER = "run.json"
SAMPLES = "samples.jsonl"
RESPONSES = "responses.jsonl"


class NotARunDir(ValueError):
    """Not a (scored) run directory: the CLI reports it as a usage error, exit 2."""


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def git_commit() -> str | None:
    try:
        r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=5)
        return r.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def run_header(run_id: str, *, endpoint: dict[str, Any], suites: dict[str, Any], sampling: dict[str, Any],
               extra_body: dict[str, Any], epochs: int, modes: list[str], started: str | None,
               finished: str | None = None, harness: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The one builder of `run.json` (run, merge and the lm-eval importer): same keys as ever, plus `format`.

    `harness` defaults to this harness; a merge passes the shards' own. `extra` carries the optional keys.
    """
    hdr = RunHeader(
        run_id=run_id, harness=harness or {"name": "verifier", "version": __version__, "git_commit": git_commit()},
        endpoint=endpoint, sampling=sampling, extra_body=extra_body, epochs=epochs, modes=list(modes), suites=suites,
        started=started, finished=finished, extra=extra,
    )
    return hdr.to_json()


def dumps(obj: Any) -> str:
    """The one JSON encoding used for everything we write: stable bytes for stable inputs."""
    return dumps_strict(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader never sees half a file, and a crash keeps the old one."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(dumps_strict(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(dumps(r) + "\n")
    os.replace(tmp, path)


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yields complete records; a torn last line (killed mid-write) is skipped."""
    if not path.exists():
        return
    with path.open("r", encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return  # torn tail
            line = line.strip()
            if line:
                yield json.loads(line)


def ensure_writable_new_dir(path: Path) -> None:
    """Refuse to overwrite a run, and find an unwritable place before any request is sent."""
    if (path / HEADER).exists():
        raise UsageError(f"{path} already holds a run; use --resume {path} or another --out")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {path} is not writable: {e.strerror}") from None


def check_run_dir(run_dir: Path) -> dict[str, Any]:
    p = Path(run_dir) / HEADER
    if not p.is_file():
        raise NotARunDir(f"{run_dir} is not a run directory (no {HEADER})")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise NotARunDir(f"{p} is corrupt: {e.msg}") from None


def read_samples(run_dir: Path) -> dict[tuple[str, str], Sample]:
    out = {}
    for d in read_jsonl(Path(run_dir) / SAMPLES):
        suite = d.pop("suite")
        s = Sample.from_json(d)
        out[(suite, s.id)] = s
    return out


def write_samples(run_dir: Path, pairs: Iterable[tuple[str, Sample]]) -> None:
    write_jsonl(Path(run_dir) / SAMPLES, ({"suite": suite, **s.to_json()} for suite, s in pairs))


def read_exchanges(run_dir: Path) -> dict[tuple[str, str, int, str], Exchange]:
    """The latest record per (suite, sample, epoch, mode): a resumed retry supersedes an infra error."""
    out: dict[tuple[str, str, int, str], Exchange] = {}
    for d in read_jsonl(Path(run_dir) / RESPONSES):
        ex = Exchange.from_json(d)
        out[ex.key] = ex
    return out


class Journal:
    """Append-only writer, flushed per record so a SIGKILL loses at most the line being written."""

    def __init__(self, run_dir: Path, scrub: Iterable[str] = ()):
        self.path = Path(run_dir) / RESPONSES
        self._heal_torn_tail()
        self._f = self.path.open("a", encoding="utf-8")
        # Secrets never reach disk, even if a server echoes them back (split, escaped or bare).
        self._redact = Redactor(scrub)

    def _heal_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            keep = data.rfind(b"\n") + 1
            with self.path.open("r+b") as f:
                f.truncate(keep)

    def append(self, ex: Exchange) -> None:
        line = dumps(self._redact.record(ex.to_json()))
        self._f.write(line + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()
