"""The run directory: `run.json` header, `samples.jsonl`, append-only `responses.jsonl`.

`samples.jsonl` freezes the samples a run used, so scoring is offline and
pure even for datasets that came from the hub.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import fcntl
import os
import secrets
import stat
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from verifier.version import __version__
from verifier.errors import UsageError
from verifier.redact import Redactor
from verifier import safewrite
from verifier.safewrite import create_new, dumps, scrubbed, write_jsonl
from verifier.types import Exchange, RunHeader, Sample
from verifier.execution import layout

# The names of a run directory's files and their safe readers live in execution/layout.py; the journal re-exports its own.
from verifier.execution.layout import (HEADER as HEADER, SAMPLES as SAMPLES, RESPONSES as RESPONSES, LOCK as LOCK, VERDICTS as VERDICTS, SUMMARY as SUMMARY, CorruptFile as CorruptFile, NotARunDir as NotARunDir, decode_line as decode_line, file_digest as file_digest, read_jsonl as read_jsonl, read_numbered_jsonl as read_numbered_jsonl,
                                  RefusedFile as RefusedFile, read_document)


TOO_LARGE_TO_RECORD = "response_too_large"
"""The error class of a record too costly to read back (Journal.append): the wire's class for a body over its byte
cap (wire/endpoint.FINAL_ERRORS), judged the same way (infra, not retried)."""


KEEP_PARSE_UP_TO = 8 * 2**20
"""A record's line up to this long hands the writer's parse of it to the live follower (execution/live.py), which
then need not parse it again; a longer one is parsed again there, so the writer's parse is not held while the
follower reads the line (a 61 MiB stream of logprobs parses into about 250 MB of objects)."""


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
               finished: str | None = None, harness: dict[str, Any] | None = None, **extra: Any) -> RunHeader:
    """The one builder of `run.json` (run, merge and the lm-eval importer): same keys as ever, plus `format`.

    `harness` defaults to this harness; a merge passes the shards' own. `extra` carries the optional keys.
    """
    return RunHeader(
        run_id=run_id, harness=harness or {"name": "verifier", "version": __version__, "git_commit": git_commit()},
        endpoint=endpoint, sampling=sampling, extra_body=extra_body, epochs=epochs, modes=list(modes), suites=suites,
        started=started, finished=finished, extra=extra,
    )


def write_header(run_dir: Path, header: RunHeader, leave_out: frozenset[str] = frozenset()) -> None:
    """run.json from its typed value, written whole and scrubbed (safewrite.write_json). `leave_out`: named keys a
    resumed run.json was written without (`absent_keys`), so that completing an older run adds only what it adds."""
    doc = header.to_json()
    safewrite.write_json(Path(run_dir) / HEADER, {k: v for k, v in doc.items() if k not in leave_out} if leave_out else doc)


def absent_keys(doc: dict[str, Any]) -> frozenset[str]:
    """The keys RunHeader names that a run.json as read does not hold (a run from before they existed), `finished`
    aside: a resume writes it."""
    return frozenset(f for f in RunHeader.__dataclass_fields__ if f not in ("extra", "finished") and f not in doc)


@contextlib.contextmanager
def locked(run_dir: Path) -> Iterator[None]:
    """One writer per run directory: a second `run`/`--resume` on it is refused, not interleaved.

    flock on RUN_DIR/.lock: the kernel drops it when the holder dies, so a SIGKILLed run never leaves it stale.
    """
    # O_NONBLOCK: a .lock planted as a FIFO fails to open (or is refused below) instead of waiting for a reader.
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(Path(run_dir) / LOCK, flags, 0o666)
    except OSError as e:
        raise UsageError(f"cannot lock run directory {run_dir}: {e.strerror}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UsageError(f"cannot lock run directory {run_dir}: {LOCK} is not a regular file")
    f = os.fdopen(fd, "a")
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
        probe = path / f".write-probe-{secrets.token_hex(8)}"
        os.close(create_new(probe))
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {path} is not writable: {e.strerror}") from None


def read_samples(run_dir: Path, legacy: bool = True) -> dict[tuple[str, str], Sample]:
    return dict(iter_samples(run_dir, legacy))


def iter_samples(run_dir: Path, legacy: bool = True) -> Iterator[tuple[tuple[str, str], Sample]]:
    """samples.jsonl one sample at a time, keyed (suite, sample id). `legacy`: one-sample-per-turn conversations of
    older runs are read as the conversation samples they are now (legacy_turn_samples); bless keeps the rows as
    the run recorded them (its dataset_sha256 hashes those)."""
    path = Path(run_dir) / SAMPLES
    rows = (sample_of(d, path, n) for n, d in read_numbered_jsonl(path, within=Path(run_dir)))
    for suite, s in legacy_turn_samples(rows) if legacy else rows:
        yield (suite, s.id), s


_SAMPLE_TYPES: dict[str, tuple[type, ...]] = {
    "suite": (str,), "id": (str,), "messages": (list,), "tools": (list, type(None)),
    "response_format": (dict, type(None)), "meta": (dict,), "params": (dict,)}  # target: any JSON


def sample_of(rec: dict[str, Any], path: Path, n: int) -> tuple[str, Sample]:
    """A samples.jsonl row as (suite, Sample), or CorruptFile naming the line and the field."""
    for k in rec:
        if k not in _SAMPLE_TYPES and k != "target":
            raise CorruptFile(f"{path}: line {n}: unknown key {str(k)[:64]!r}")
    for k in ("suite", "id", "messages"):
        if k not in rec:
            raise CorruptFile(f"{path}: line {n}: no {k!r}")
    for k, v in rec.items():
        if k in _SAMPLE_TYPES and not isinstance(v, _SAMPLE_TYPES[k]):
            want = " or ".join(_JSON_TYPE[t] for t in _SAMPLE_TYPES[k])
            raise CorruptFile(f"{path}: line {n}: $.{k} is {_JSON_TYPE.get(type(v), type(v).__name__)}, not {want}")
    suite = rec.pop("suite")
    return suite, Sample.from_json(rec)


def _is_turn_row(s: Sample) -> bool:
    return "/" in s.id and (bool(s.meta.get("after")) or (s.meta.get("turn") == 1 and isinstance(s.meta.get("turn_ids"), list)))


def legacy_turn_samples(rows: Iterable[tuple[str, Sample]]) -> Iterator[tuple[str, Sample]]:
    """Samples as the suites make them now, from rows written before multi-turn suites were conversations
    (Suite.conversation): the multiturn suite then wrote one row per turn, `<conversation>/t<k>`, the first with
    `meta.turn_ids`, the later ones with `meta.after`. The turns of one conversation become one sample: the
    first turn's prompt, tools and meta (without `turn`) and the turns' targets in turn order, which is the
    sample the suite builds today, so the journal's records (`<conversation>/t<k>`, bodies unchanged) score as
    they did. Other rows pass through, in order; a conversation whose turn rows are incomplete stays as it was."""
    turns: dict[tuple[str, str], dict[str, Sample]] = {}
    for suite, s in rows:
        if _is_turn_row(s):
            turns.setdefault((suite, s.id.split("/", 1)[0]), {})[s.id] = s
        else:
            yield suite, s
    for (suite, conv), by_id in turns.items():
        first = next((s for s in by_id.values() if not s.meta.get("after")), None)
        ids = first.meta["turn_ids"] if first is not None else []
        if first is None or not all(isinstance(t, str) and t in by_id for t in ids) or len(by_id) != len(ids):
            yield from ((suite, s) for s in by_id.values())
            continue
        meta = {k: v for k, v in first.meta.items() if k != "turn"}
        yield suite, Sample(id=conv, messages=first.messages, tools=first.tools, response_format=first.response_format,
                            target=[by_id[t].target for t in ids], meta=meta, params=first.params)


def sample_fields(s: Sample) -> dict[str, Any]:
    """`s.to_json()` without its deep copy (dataclasses.asdict walks every message: ~1 ms a gsm8k sample).
    Same JSON; the values are shared, so only serialize it."""
    return {name: getattr(s, name) for name in s.__dataclass_fields__}


def write_samples(run_dir: Path, pairs: Iterable[tuple[str, Sample]]) -> None:
    write_jsonl(Path(run_dir) / SAMPLES, ({"suite": suite, **sample_fields(s)} for suite, s in pairs))


_EXCHANGE_TYPES: dict[str, tuple[type, ...]] = {
    "suite": (str,), "sample_id": (str,), "epoch": (int,), "mode": (str,), "request": (dict,),
    "status": (int, type(None)), "body": (str, type(None)), "chunks": (list, type(None)), "error": (str, type(None)),
    "latency_ms": (int, float), "attempts": (int,), "sent": (int, type(None))}
_EXCHANGE_REQUIRED = ("suite", "sample_id", "epoch", "mode", "request", "status")
_JSON_TYPE = {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number",
              bool: "a boolean", type(None): "null"}


def exchange_of(rec: dict[str, Any], path: Path, n: int) -> Exchange:
    """A journal record as an Exchange, or CorruptFile naming the line and the field (an unknown key, a missing
    one, an object where the sample id goes): a record no writer made is bad input (exit 2), not an internal
    error."""
    for k in rec:
        if k not in _EXCHANGE_TYPES:
            raise CorruptFile(f"{path}: line {n}: unknown key {str(k)[:64]!r}")
    for k in _EXCHANGE_REQUIRED:
        if k not in rec:
            raise CorruptFile(f"{path}: line {n}: no {k!r}")
    for k, v in rec.items():
        if not isinstance(v, _EXCHANGE_TYPES[k]) or (isinstance(v, bool) and bool not in _EXCHANGE_TYPES[k]):
            want = " or ".join(_JSON_TYPE[t] for t in _EXCHANGE_TYPES[k])
            raise CorruptFile(f"{path}: line {n}: $.{k} is {_JSON_TYPE.get(type(v), type(v).__name__)}, not {want}")
    chunks = rec.get("chunks")
    if chunks is not None and not all(isinstance(c, str) for c in chunks):
        raise CorruptFile(f"{path}: line {n}: $.chunks holds an item that is not a string")
    return Exchange.from_json(rec)


def iter_exchanges(run_dir: Path, name: str = RESPONSES) -> Iterator[Exchange]:
    """Every record in journal order, one at a time (a later one for the same key supersedes an earlier one):
    what scoring and bless walk, so their memory does not grow with the journal. A record of the wrong shape is
    CorruptFile naming its line (exchange_of). `name`: another journal of the run (the resend step's)."""
    path = Path(run_dir) / name
    for n, d in read_numbered_jsonl(path, within=Path(run_dir)):
        ex = exchange_of(d, path, n)
        del d  # only the exchange is kept while it is in use
        yield ex
        del ex


def read_exchanges(run_dir: Path) -> dict[tuple[str, str, int, str], Exchange]:
    """The latest record per (suite, sample, epoch, mode): a resumed retry supersedes an infra error."""
    return {ex.key: ex for ex in iter_exchanges(run_dir)}


def _heal_torn_tail(fd: int) -> None:
    """Cut a torn last line (a kill mid-write) so the next record starts on its own line."""
    size = os.fstat(fd).st_size
    if not size or os.pread(fd, 1, size - 1) == b"\n":
        return
    pos = size
    while pos > 0:  # backwards in blocks: the journal is never read whole for this
        start = max(0, pos - 2**20)
        i = os.pread(fd, pos - start, start).rfind(b"\n")
        if i >= 0:
            os.ftruncate(fd, start + i + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


class Journal:
    """Append-only writer, flushed per record so a SIGKILL loses at most the line being written.

    `written(line, parsed)`, when given, is called with each record's line as it is about to be written (its bytes
    without the newline) and, when the writer parsed the record for its leak check, `(Parsed or None, exception or None)`:
    execution/live.py judges the line with that parse instead of parsing the same bytes again."""

    def __init__(self, run_dir: Path, scrub: Iterable[str] = (),
                 written: Callable[[bytes, tuple[Any, BaseException | None] | None], None] | None = None,
                 name: str = RESPONSES):
        """`name`: the journal file (responses.jsonl; the resend step's resends.jsonl)."""
        self.path = Path(run_dir) / name
        # O_NOFOLLOW: a responses.jsonl planted as a symlink is refused, not healed or appended through.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            _heal_torn_tail(fd)
        except OSError:
            os.close(fd)
            raise
        self._fd: int | None = fd
        # Secrets never reach disk, even if a server echoes them back (split, escaped or bare).
        self._redact = Redactor(scrub)
        self._written = written

    def append(self, ex: Exchange) -> Exchange:
        """Write `ex`'s record; the exchange as written. A record that reading back would cost more than
        layout.MAX_LINE_MEMORY (a body of wide characters, or escaped many times over) is written as the infra error
        `response_too_large` without its body or chunks, as the wire reader records a body over its byte cap: the
        run goes on, and no reader is ever handed a line it must refuse."""
        data, parsed = b"", None
        if self._redact and _may_be_costly(ex) and _too_costly(dumps(ex.to_json()).encode("utf-8", "backslashreplace")):
            pass  # measured before redaction, which rejoins a stream's text: a record refused costs no copies of it
        else:
            data, parsed = self._line(ex)
        if not data or _too_costly(data):
            del data
            ex = dataclasses.replace(ex, status=None, body=None, chunks=None, error=TOO_LARGE_TO_RECORD)
            data, parsed = self._line(ex)
            if _too_costly(data):  # the request itself
                ex = dataclasses.replace(ex, request={})
                data, parsed = self._line(ex)
        if self._written is not None:  # before the write: a reader of the file must find it offered already
            self._written(data, parsed)
        _write_line(self._fd, data)
        return ex

    def _line(self, ex: Exchange) -> tuple[bytes, tuple[Any, BaseException | None] | None]:
        """The record's line as it is written (scrubbed, encoded) and the writer's parse of it (None without secrets)."""
        # A gsm8k record's request holds 17 messages: walked string by string only when the line scan cannot clear it.
        rec, line = scrubbed(self._redact, self._redact.record_streams(ex.to_json()))
        # backslashreplace: a lone surrogate is written as its JSON escape, as the text file did.
        data = line.encode("utf-8", "backslashreplace")
        del line  # one character beyond U+FFFF makes the whole line's string 4 bytes a character: not kept for the parse
        parsed = None
        if self._redact:
            parsed = self._parse(rec)
            if self._parsed_leak(parsed[0]):
                rec, parsed = self._redact.blank_texts(rec), None
                data = dumps(rec).encode("utf-8", "backslashreplace")
            elif len(data) > KEEP_PARSE_UP_TO:
                parsed = None  # the live follower parses a long record again rather than hold this beside its line
        rec = {}
        return data, parsed

    @staticmethod
    def _parse(rec: dict[str, Any]) -> tuple[Any, BaseException | None]:
        """The record's answer as score, bless and report will parse it: (Parsed, None) or (None, what it raised)."""
        from verifier.judge.parse import parse_exchange

        try:
            return parse_exchange(Exchange.from_json(rec)), None
        except Exception as e:  # noqa: BLE001 - kept for the scorer, which reports it as parsing again would
            return None, e

    def _parsed_leak(self, p: Any) -> bool:
        """Whether the answer parsed from the redacted record (what score, bless and report will show, in processes
        that may not hold the key) still spells a secret: the raw pass missed a split the parser rejoins. A record
        the parser refuses shows no text to anyone."""
        if p is None:
            return False
        texts = [p.content, p.reasoning, dumps(p.tool_calls) if p.tool_calls else None]
        if isinstance(p.logprobs, list):  # the chosen tokens in order, and each rank of the alternatives in order
            entries = [t for t in p.logprobs if isinstance(t, dict)]
            texts.append("".join(t.get("token") or "" for t in entries if isinstance(t.get("token"), str)))
            ranks = max((len(t["top_logprobs"]) for t in entries if isinstance(t.get("top_logprobs"), list)), default=0)
            for r in range(min(ranks, 32)):  # the API allows 20 alternatives; more is read up to 32, bounded
                alts = [t["top_logprobs"][r] for t in entries
                        if isinstance(t.get("top_logprobs"), list) and len(t["top_logprobs"]) > r]
                texts.append("".join(a["token"] for a in alts if isinstance(a, dict) and isinstance(a.get("token"), str)))
        return any(isinstance(t, str) and self._redact.text(t) != t for t in texts)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _may_be_costly(ex: Exchange) -> bool:
    """Whether the record's answer is long enough that its line might pass a cap: at 6 bytes a character escaped,
    then 12 times that read back (layout.over_line_memory), a shorter answer cannot."""
    size = len(ex.body or "") + sum(len(c) for c in ex.chunks or ())
    return 72 * size > layout.MAX_LINE_MEMORY


def _too_costly(data: bytes) -> bool:
    """Whether a record's line is one no reader takes: over layout.MAX_LINE bytes or layout.MAX_LINE_MEMORY to read."""
    return len(data) > layout.MAX_LINE or layout.over_line_memory(data) is not None


def _write_line(fd: int | None, data: bytes) -> None:
    """`data` and its newline in one write to the unbuffered descriptor (not `data + b"\\n"`: a 64 MB body would be
    copied once more); the rest written after a short write."""
    if fd is None:
        raise ValueError("write to a closed journal")
    n = os.writev(fd, (data, b"\n"))
    if n < len(data) + 1:
        rest = memoryview(data + b"\n")[n:]
        while rest:
            rest = rest[os.write(fd, rest):]
