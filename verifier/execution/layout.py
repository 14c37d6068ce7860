"""The names of a run directory's files and the one way each is read (the floor under `execution/rundir.RunDir`).

Every file name of a run directory is spelled here and nowhere else; `RunDir` (execution/rundir.py) is the object the
rest of the program reads a run through. A run directory may come from someone else (a CI shard, a reviewer's
copy): every read goes through `verifier.safeio` (regular files only, no symlink leading out of the directory, a
size cap, a FIFO never waited on), and any refusal is a `NotARunDir`, which the CLI reports in one line, exit 2.

This module imports nothing of the run package, so the journal writer, scoring and the observation file can all
use these names without an import cycle.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Iterator

from verifier import jsonsafe, safeio

HEADER = "run.json"
SAMPLES = "samples.jsonl"
RESPONSES = "responses.jsonl"
VERDICTS = "verdicts.jsonl"
OBSERVATIONS = "observations.jsonl"
SUMMARY = "summary.json"
PROBES = "probes.json"
CONTEXT = "context.json"
TEACHER_FORCED = "teacher_forced.jsonl"
"""A gate's teacher-forcing pass: one row per forced golden record, its exchanges (execution/teacher_forcing.py)."""
RESENDS = "resends.jsonl"
"""A gate's resend step: a few of the run's greedy requests sent again, alone, after the run (execution/resend.py),
journaled as responses.jsonl's records are."""
COMPARISON = "comparison.json"
REPORT_HTML = "report.html"
JUNIT = "junit.xml"
SUMMARY_MD = "summary.md"
SAMPLES_CSV = "samples.csv"
LOCK = ".lock"

MAX_DOCUMENT = 64 * safeio.MIB
"""Cap on one JSON document of a run (run.json, summary.json, probes.json, context.json, comparison.json): far
above any a run writes, small enough that a planted file cannot exhaust memory."""
MAX_JSONL = 16 * 1024 * safeio.MIB
"""Cap on a whole JSONL file (read a line at a time, so memory follows the longest line, not this)."""
MAX_LINE = 400 * safeio.MIB
"""Cap on one JSONL line, read before the line is parsed: a record holds one response (64 MiB decoded by default)
and its request; JSON-escaped, a body of control characters takes six bytes each (384 MiB). A run made with
--max-response-mb above 64 can write longer lines than this reads back (refused, naming the line, after holding one
safeio.SCAN_CHUNK of it: safeio.read_line)."""


class NotARunDir(ValueError):
    """Not a (scored) run directory, or a file of it that cannot be read safely: the CLI's usage error, exit 2."""


class CorruptFile(NotARunDir):
    """A JSONL file with a bad line before its end (a torn last line is not corrupt: it is skipped)."""


class RefusedFile(NotARunDir):
    """A file safeio refused to read: a FIFO, device or socket, a symlink (out of the directory), over its cap.
    Unlike a corrupt file, never a thing to skip quietly: it was put there."""


def _refused(e: safeio.UnsafeFile) -> RefusedFile:
    return RefusedFile(str(e))


def read_document(path: Path, *, within: Path | None = None) -> Any:
    """A JSON file of a run directory, parsed (None when absent). A special file, a symlink leading out of
    `within`, a file over MAX_DOCUMENT or bad JSON is a NotARunDir naming the file."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = safeio.read_bytes(path, max_bytes=MAX_DOCUMENT, within=within)
    except safeio.UnsafeFile as e:
        raise _refused(e) from None
    try:
        return jsonsafe.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise NotARunDir(f"{path} is corrupt: {getattr(e, 'msg', None) or 'nested too deep'}") from None


def read_jsonl(path: Path, *, within: Path | None = None) -> Iterator[dict[str, Any]]:
    """Yields complete records; a torn last line (killed mid-write) is skipped, a corrupt one before it is refused.
    Absent: nothing. Read through safeio, a line at a time (at most MAX_LINE bytes each)."""
    for _, rec in read_numbered_jsonl(path, within=within):
        yield rec


def read_numbered_jsonl(path: Path, *, within: Path | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """`read_jsonl` with each record's line number (for an error that names the line)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return
    try:
        f = safeio.open_regular(path, max_bytes=MAX_JSONL, within=within)
    except safeio.UnsafeFile as e:
        raise _refused(e) from None
    with f:
        n = 0
        while True:
            raw = safeio.read_line(f, MAX_LINE)  # an over-long line is measured, never held
            if not raw:
                if raw is None:
                    raise CorruptFile(f"{path}: line {n + 1} is longer than {MAX_LINE} bytes (the cap on one line)")
                return
            n += 1
            if not raw.endswith(b"\n"):
                return  # torn tail
            if raw.isspace():
                continue
            rec = decode_line(raw, path, n)
            raw = b""  # only the record is kept while it is in use
            yield n, rec
            rec = {}


_OPENS_OBJECT = re.compile(rb"[ \t\r\n]*\{")


def decode_line(raw: bytes, path: Path, n: int) -> dict[str, Any]:
    """One complete, non-blank line of a JSONL file as read_jsonl reads it (execution/live.py follows the journal
    with it, so a record scored live is the record `verifier score` reads)."""
    if not _OPENS_OBJECT.match(raw):  # refused before decoding: a planted line of NULs costs no decoded copy
        raise CorruptFile(f"{path}: line {n} is not a JSON object")
    try:
        rec = jsonsafe.loads(raw)  # from the bytes: no decoded and stripped copies of a 64 MB line beside it
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        why = getattr(e, "msg", None) or getattr(e, "reason", None) or "nested too deep"
        raise CorruptFile(f"{path}: line {n} is not valid JSON ({why})") from None
    if not isinstance(rec, dict):
        raise CorruptFile(f"{path}: line {n} is not a JSON object")
    return rec


def file_digest(path: Path) -> dict[str, Any] | None:
    """Size and sha256 of a file (None when absent): what the verdicts were scored from. A special file is a
    NotARunDir, never read."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    h = hashlib.sha256()
    size = 0
    try:
        f = safeio.open_regular(path, max_bytes=MAX_JSONL)
    except safeio.UnsafeFile as e:
        raise _refused(e) from None
    with f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"size": size, "sha256": h.hexdigest()}
