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

from verifier import jsonsafe, safeio, textmemory

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
MAX_LINE_MEMORY = 384 * safeio.MIB
"""Cap on what reading one JSONL line holds (`line_memory`), checked on its bytes before it is decoded, and by the
journal writer before it writes a record (execution/journal.Journal.append: a record over it is written as
`response_too_large` instead). With the interpreter and the scorer beside it, a record read within this cap keeps
`verifier score` under 500 MB (bench/perf/journal_line_memory.py)."""
MAX_LINE = MAX_LINE_MEMORY // 3
"""Cap on one JSONL line's bytes (128 MiB), measured before the line is read (safeio.read_line): a longer line
always costs more than MAX_LINE_MEMORY (`line_memory` counts a line of plain text three times), so it is refused
after holding one safeio.SCAN_CHUNK of it. Journals written before this cap (400 MiB then) with a longer line are
refused naming it."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"')
"""A JSON string in a line's bytes. Possessive: a planted line with a string never closed is scanned once, in linear
time (`(?:[^"\\]+|\\.)*` backtracks exponentially there: 26 bytes took 22 s)."""
MAX_STRINGS_MEASURED = 300_000
"""`line_memory` measures the strings of a line one by one only up to this many (a stream record holds one per event,
at most 250,000 by default: wire/bodyread.MAX_STREAM_EVENTS); a line of more is judged by the simpler bound."""


def line_memory(raw: bytes) -> int:
    """What reading the line `raw` holds at its peak, from its bytes (verifier/textmemory.py), in three stages: the
    bytes and the string they decode to; that string and the record's strings parsed from it; the record's strings,
    the pieces the parser takes out of them (a stream's deltas: at most as much again) and the answer it joins (at
    most the line's characters, at the widest width JSON can give them). A 64 MiB answer of plain text: 192 MiB;
    the same ending in one emoji, whose every copy then takes 4 bytes a character: 768 MiB.

    The record's strings are first bounded as the line's characters at that widest width. When that bound alone
    passes MAX_LINE_MEMORY, each string of the line is measured at its own width (up to MAX_STRINGS_MEASURED of
    them): a stream record is thousands of strings, and one emoji among its logprobs widens the line's decoded
    string and the answer, not every event's string (32,768 events of 20 top logprobs, 61 MiB: 366 MiB)."""
    m = textmemory.measure(raw)
    strings = m.parsed
    if _peak(m, strings) > MAX_LINE_MEMORY:
        strings = _strings_memory(raw, m.parsed)
    return _peak(m, strings)


def _peak(m: textmemory.TextSize, strings: int) -> int:
    return max(m.size + m.decoded, m.decoded + strings, 2 * strings + m.parsed)


def _strings_memory(raw: bytes, bound: int) -> int:
    """The strings of the JSON line `raw`, each measured at its own widest width (escapes included); `bound` when
    there are more than MAX_STRINGS_MEASURED of them, or one is never closed (no JSON: the simpler bound judges it).
    Each string is matched from the quote that opens it, so every byte is scanned once (a search restarting at every
    quote inside an unclosed string would be quadratic)."""
    total, pos = 0, 0
    for _ in range(MAX_STRINGS_MEASURED):
        start = raw.find(b'"', pos)
        if start < 0:
            return min(total, bound)
        m = _JSON_STRING.match(raw, start)
        if m is None:
            return bound
        total += textmemory.measure(m.group()).parsed
        pos = m.end()
    return bound if raw.find(b'"', pos) >= 0 else min(total, bound)


def over_line_memory(raw: bytes) -> int | None:
    """`line_memory(raw)` when it is over MAX_LINE_MEMORY, else None. A line of at most a twelfth of the cap cannot
    pass it (4 bytes a character three times), so nearly every line is not measured at all."""
    if 12 * len(raw) <= MAX_LINE_MEMORY:
        return None
    cost = line_memory(raw)
    return cost if cost > MAX_LINE_MEMORY else None


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
            text = line_text(raw, path, n)
            raw = b""  # the bytes go before the string is parsed: the line is never held three times
            rec = record_of(text, path, n)
            text = ""  # only the record is kept while it is in use
            yield n, rec
            rec = {}


_OPENS_OBJECT = re.compile(rb"[ \t\r\n]*\{")


def decode_line(raw: bytes, path: Path, n: int) -> dict[str, Any]:
    """One complete, non-blank line of a JSONL file as read_jsonl reads it (execution/live.py follows the journal
    with it, so a record scored live is the record `verifier score` reads)."""
    return record_of(line_text(raw, path, n), path, n)


def line_text(raw: bytes, path: Path, n: int) -> str:
    """The line decoded, once it is known to open a JSON object and to cost at most MAX_LINE_MEMORY (line_memory):
    both checked on the bytes, so a planted line of NULs or of wide characters costs no decoded copy."""
    if not _OPENS_OBJECT.match(raw):
        raise CorruptFile(f"{path}: line {n} is not a JSON object")
    cost = over_line_memory(raw)
    if cost is not None:
        raise CorruptFile(f"{path}: line {n} would take {cost} bytes of memory to read, over the cap of "
                          f"{MAX_LINE_MEMORY} (its {len(raw)} bytes, decoded at up to 4 bytes a character)")
    try:
        return raw.decode("utf-8", "surrogatepass")  # as json.loads decodes bytes; a lone surrogate's escape stays one
    except UnicodeDecodeError as e:
        raise CorruptFile(f"{path}: line {n} is not valid JSON ({e.reason})") from None


def record_of(text: str, path: Path, n: int) -> dict[str, Any]:
    """A line's text (line_text) parsed into the record it holds, or CorruptFile naming the line."""
    try:
        rec = jsonsafe.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:
        why = getattr(e, "msg", None) or "nested too deep"
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
