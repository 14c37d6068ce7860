"""The run directory: `run.json` header, `samples.jsonl`, append-only `responses.jsonl`.

`samples.jsonl` freezes the samples a run used, so scoring is offline and
pure even for datasets that came from the hub.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any, Iterable, Iterator

from . import scrub
from .version import __version__
from .errors import UsageError
from .jsonsafe import dumps_strict
from .redact import Redactor
from .types import Exchange, RunHeader, Sample

HEADER = "run.json"
SAMPLES = "samples.jsonl"
RESPONSES = "responses.jsonl"
LOCK = ".lock"


class NotARunDir(ValueError):
    """Not a (scored) run directory: the CLI reports it as a usage error, exit 2."""


class CorruptFile(NotARunDir):
    """A JSONL file with a bad line before its end (a torn last line is not corrupt: it is skipped)."""


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


# One encoder for every record: `json.dumps(obj, **options)` builds a new one per call (~5 us of a ~35 us record).
_ENCODER = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(obj: Any) -> str:
    """The one JSON encoding used for everything we write: stable bytes for stable inputs."""
    try:
        return _ENCODER.encode(obj)
    except ValueError:  # a non-finite number: the strict path writes it as null
        return dumps_strict(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[Path]:
    """A temp file next to `path`, renamed over it on success; an unwritable target is a usage error, not a crash."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None


def write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader never sees half a file, and a crash keeps the old one. Scrubbed of this process's secrets."""
    obj = scrub.obj(obj)
    with _writing(path) as tmp:
        tmp.write_text(dumps_strict(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def write_jsonl(path: Path, rows: Iterable[Any]) -> None:
    with _writing(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(dumps(scrub.obj(r)) + "\n")


def write_text(path: Path, text: str) -> None:
    """Reports, CSV, JUnit, Markdown: atomic and scrubbed like every JSON file."""
    with _writing(path) as tmp:
        tmp.write_text(scrub.text(text), encoding="utf-8")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yields complete records; a torn last line (killed mid-write) is skipped, a corrupt one before it is refused."""
    if not path.exists():
        return
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.endswith(b"\n"):
                return  # torn tail
            try:
                line = raw.decode("utf-8").strip()
                if not line:
                    continue
                rec = json.loads(line)
            except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
                why = getattr(e, "msg", None) or getattr(e, "reason", None) or "nested too deep"
                raise CorruptFile(f"{path}: line {n} is not valid JSON ({why})") from None
            if not isinstance(rec, dict):
                raise CorruptFile(f"{path}: line {n} is not a JSON object")
            yield rec


def file_digest(path: Path) -> dict[str, Any] | None:
    """Size and sha256 of a file (None when absent): what the verdicts were scored from."""
    path = Path(path)
    if not path.exists():
        return None
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"size": size, "sha256": h.hexdigest()}


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """One writer per run directory: a second `run`/`--resume` on it is refused, not interleaved.

    flock on RUN_DIR/.lock: the kernel drops it when the holder dies, so a SIGKILLed run never leaves it stale.
    """
    try:
        f = (Path(run_dir) / LOCK).open("a")
    except OSError as e:
        raise UsageError(f"cannot lock run directory {run_dir}: {e.strerror}") from None
    try:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"{run_dir} is in use by another verifier process (lock {LOCK}); wait for it",
                             hints=("use another --out", "another --out-prefix")) from None
        yield
    finally:
        f.close()


def ensure_writable_new_dir(path: Path, resumable: bool = True) -> None:
    """Refuse to overwrite a run, and find an unwritable place before any request is sent."""
    if (path / HEADER).exists():
        hints = ((f"use --resume {path}",) if resumable else ()) + ("another --out", "another --out-prefix")
        raise UsageError(f"{path} already holds a run", hints=hints)
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
        hdr = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise NotARunDir(f"{p} is corrupt: {getattr(e, 'msg', None) or e}") from None
    if not isinstance(hdr, dict) or not isinstance(hdr.get("suites"), dict):
        raise NotARunDir(f"{p} is corrupt: not a run header (no suites)")
    # Every reader of a run passes here: an offline bless or report still scrubs the key its run was made with.
    scrub.register_env((hdr.get("endpoint") or {}).get("api_key_env") if isinstance(hdr.get("endpoint"), dict) else None)
    return hdr


def read_samples(run_dir: Path) -> dict[tuple[str, str], Sample]:
    out = {}
    for d in read_jsonl(Path(run_dir) / SAMPLES):
        suite = d.pop("suite")
        s = Sample.from_json(d)
        out[(suite, s.id)] = s
    return out


def sample_fields(s: Sample) -> dict[str, Any]:
    """`s.to_json()` without its deep copy (dataclasses.asdict walks every message: ~1 ms a gsm8k sample).
    Same JSON; the values are shared, so only serialize it."""
    return {name: getattr(s, name) for name in s.__dataclass_fields__}


def write_samples(run_dir: Path, pairs: Iterable[tuple[str, Sample]]) -> None:
    write_jsonl(Path(run_dir) / SAMPLES, ({"suite": suite, **sample_fields(s)} for suite, s in pairs))


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
