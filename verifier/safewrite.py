"""Files written whole and scrubbed: the one JSON encoding and the one atomic writer, beside `safeio.py`'s reads.

Every file a command writes goes through here: the journal's run header and samples, scoring's verdicts and summary,
the golden store, the report, the sweep. A file is written into a new temp file beside its target (an unpredictable
name, created O_EXCL|O_NOFOLLOW) and renamed over it, so a reader never sees half a file and a crash keeps the old
one; its content is scrubbed of this command's secrets (`verifier/scrub.py`) first. This module sits on the base
floor and imports nothing above it, so the report and the golden store write without importing the run package.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
from pathlib import Path
from typing import IO, Any, Iterable, Iterator, Protocol

from verifier import jsonsafe, scrub
from verifier.errors import UsageError
from verifier.jsonsafe import dumps_strict

# One encoder for every record: `json.dumps(obj, **options)` builds a new one per call (~5 us of a ~35 us record).
# Records keep their keys in the order they have: a request body, a sample's response_format or tools are journaled
# as they went on the wire, because order is behaviour there (a JSON-schema grammar emits properties in the order the
# schema lists them; sorted keys in a golden's inputs.jsonl made its gates send other requests than its reference did).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _nested_dataclass(o: Any) -> Any:
    """A dataclass met inside a row written with `write_jsonl(..., nested_dataclasses=True)`: what dataclasses.asdict
    would have made of it before the row was encoded (scrubbed as write_jsonl scrubs a row; a non-finite number
    in it null, as dumps writes one)."""
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return jsonsafe.finite(scrub.obj(dataclasses.asdict(o)))
    raise TypeError(f"Object of type {type(o).__name__} is not JSON serializable")


# Rows given as their objects' fields, not as asdict's deep copy of them (Verdict.fields): the same bytes, since
# a copy encodes as its original does and a nested dataclass is converted here as asdict converts it.
_ROWS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=_nested_dataclass)


def dumps(obj: Any, encoder: json.JSONEncoder = _ENCODER) -> str:
    """The one JSON encoding used for every record we write: stable bytes for stable inputs, keys in their order."""
    try:
        return encoder.encode(obj)
    except ValueError:  # a non-finite number: the strict path writes it as null
        return dumps_strict(obj, ensure_ascii=False, separators=(",", ":"), default=encoder.default)


def canonical(obj: Any) -> str:
    """Key-order-free encoding, for hashes that identify content (dataset_sha256, merge checks): a record's key order
    does not make it another sample."""
    try:
        return _CANONICAL.encode(obj)
    except ValueError:
        return dumps_strict(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def create_new(path: Path, mode: int = 0o666) -> int:
    """A file descriptor for a file that did not exist: O_EXCL|O_NOFOLLOW, so a planted file or symlink at
    `path` is an error, never followed into a file of someone else's choosing."""
    return os.open(path, _NEW_FILE, mode)


@contextlib.contextmanager
def atomic_write(path: Path, binary: bool = False) -> Iterator[IO[Any]]:
    """The one way a file is written whole: into a new temp file beside `path` with an unpredictable name,
    created O_EXCL|O_NOFOLLOW (a planted `path.tmp` symlink is never followed), then renamed over `path`.
    A reader never sees half a file and a crash keeps the old one; an unwritable target is a usage error."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    tmp = None
    try:
        for _ in range(100):
            tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
            try:
                fd = create_new(tmp)
                break
            except FileExistsError:
                continue
        else:
            raise UsageError(f"cannot write {path}: no free temp name beside it")
        # backslashreplace: a lone surrogate (a server's "\\ud800", parsed) is written as that same JSON escape,
        # not a UnicodeEncodeError halfway through a file.
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="")) as f:
            yield f
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UsageError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def check_writable(path: Path, directory: bool = False) -> None:
    """Before any request: `path` (a file, or with `directory` a directory) can be written where it is named.
    The nearest existing ancestor must take a new file (a probe with an unpredictable name, removed at once):
    a read-only target is a usage error now, not after every request has been sent."""
    path = Path(path)
    what = f"output directory {path} is not writable" if directory else f"cannot write {path}"
    if not directory and path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    if directory and path.exists() and not path.is_dir():
        raise UsageError(f"{what}: it is not a directory")
    place = path if directory and path.is_dir() else path.parent
    while not place.exists() and place != place.parent:
        place = place.parent
    if not place.is_dir():
        raise UsageError(f"{what}: {place} is not a directory")
    probe = place / f".verifier-probe-{secrets.token_hex(8)}"
    try:
        os.close(create_new(probe))
        os.unlink(probe)
    except OSError as e:
        raise UsageError(f"{what}: {e.strerror or e}") from None


def write_json(path: Path, obj: Any) -> None:
    """Atomic: a reader never sees half a file, and a crash keeps the old one. Scrubbed of this process's secrets."""
    obj = scrub.obj(obj)
    with atomic_write(path) as f:
        f.write(dumps_strict(obj, sort_keys=True, indent=1, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: Iterable[Any], nested_dataclasses: bool = False) -> None:
    """One JSON line per row, scrubbed. `nested_dataclasses`: a dataclass inside a row is written as asdict writes it."""
    encoder = _ROWS if nested_dataclasses else _ENCODER
    with atomic_write(path) as f:
        for r in rows:
            f.write(scrubbed_line(r, encoder) + "\n")


def as_written(row: Any, nested_dataclasses: bool = False) -> Any:
    """`row` as `write_jsonl` writes it and a reader reads it back (scrubbed, encoded, decoded): what a command that
    must not write a file (compare --out over a run it leaves as it is) uses in place of reading the file back."""
    return jsonsafe.loads(scrubbed_line(row, _ROWS if nested_dataclasses else _ENCODER))


def write_text(path: Path, text: str) -> None:
    """Reports, CSV, JUnit, Markdown: atomic and scrubbed like every JSON file."""
    with atomic_write(path) as f:
        f.write(scrub.text(text))


def append_text(path: str | Path, text: str) -> None:
    """Append to a file another program owns and reads ($GITHUB_STEP_SUMMARY): scrubbed like every file, UTF-8 with
    any string JSON can carry (a lone surrogate is written as its `\\ud800` escape, as `write_text` writes it)."""
    with open(path, "a", encoding="utf-8", errors="backslashreplace", newline="") as f:
        f.write(scrub.text(text))


class Scrubber(Protocol):
    """What `scrubbed` scrubs with: this command's `scrub.Secrets`, or a journal's own `redact.Redactor`."""

    def untouched(self, line: str) -> bool: ...

    def obj(self, o: Any) -> Any: ...


def scrubbed_line(row: Any, encoder: json.JSONEncoder = _ENCODER) -> str:
    """`dumps(scrub.obj(row))` with the current command's secrets (see `scrubbed`)."""
    return scrubbed(scrub.current(), row, encoder)[1]


def scrubbed(secrets: Scrubber, row: Any, encoder: json.JSONEncoder = _ENCODER) -> tuple[Any, str]:
    """(`secrets.obj(row)`, its line): the row is encoded once, and walked for secrets (then encoded again) only when a
    scan of that line cannot show the walk would change nothing."""
    line = dumps(row, encoder)
    if secrets.untouched(line):
        return row, line
    row = secrets.obj(row)
    return row, dumps(row, encoder)
