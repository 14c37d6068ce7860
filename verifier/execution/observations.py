"""observations.jsonl: each scored record as compare, bless and the report read it, parsed once, by scoring.

RUN_DIR/observations.jsonl is written by `verifier score` beside verdicts.jsonl (execution/scoring.write_scores), from
the same walk of the journal that judged it: the exchange is parsed once, and what later steps used to parse the
journal again for is kept here.

    line 1     {"observations": FORMAT, "responses": <digest of responses.jsonl>, "verdicts": <digest of verdicts.jsonl>,
                "summary": <digest of summary.json>}
    line 2...  one row per verdict, in verdicts.jsonl's order: the golden's observation row (types.Observation,
               key for key; content, logprobs and top_logprobs cut as a golden keeps them), plus `shown` when an
               exchange with the record's key exists and parses: what the report shows beyond the row
               (`tool_calls`, the flip card's text of them; `lp`, the logprobs past the row's, up to SHOWN_LOGPROBS, for token
               diffs; `skip`, positions whose entry was not an object).
    last line  {"sealed": <this user's HMAC-SHA256 of every line before it (verifier/seal.py)>, "rows": <count>}

A pure function of the journal and this user's seal key: the same journal gives the same bytes on one machine. It
is trusted only while the three digests match the files beside it and its lines carry this user's seal (`read`);
otherwise (a resume, a merge or an older verifier rewrote a file, a row was edited after scoring, the run was scored
before this file existed, or it was scored, or forged, anywhere without this user's key: a CI shard, a download)
the reader re-scores the run (app.scored.observed): there is no second way to parse the journal. The seal
binds each row, the verdicts and the summary to the journal they were scored from: a forger who rewrites verdicts,
summary, this file and its seal alike, without the key, is not believed. Whoever holds the key (this user) can
still forge; the journal itself is evidence, not authenticated.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path
from typing import Any, Callable, Iterable

from verifier.judge.parse import MalformedBody, parse_exchange
from verifier import safeio
from verifier import seal as sealing
from verifier import safewrite
from verifier.execution import journal, layout
from verifier.types import JUDGED, Exchange, Observation, Parsed, Verdict

from verifier.execution.layout import OBSERVATIONS as OBSERVATIONS
FORMAT = 3
"""2: the file ends in a seal line (the sha256 of every line before it): a row edited after scoring is not trusted.
3: the seal is an HMAC under this user's key and the header binds summary.json too: a consistent forgery is not
trusted."""
SEAL = "sealed"
MAX_CONTENT = 4000
MAX_LOGPROBS = 512
MAX_TOP = 5
"""Alternatives kept per token (top_logprobs), on greedy records: enough to see the reference's token at a parting."""
SHOWN_LOGPROBS = MAX_LOGPROBS + 48
"""Candidate logprobs the report's token diff reads: the golden's (at most MAX_LOGPROBS) plus 4 x
report.pictures.TOKEN_CONTEXT (checked by tests/test_run_observations.py)."""

Key = tuple[str, str, int, str]


class Once:
    """One exchange, parsed at most once: scoring's judge, the observation row and the report's extras share it."""

    def __init__(self, ex: Exchange, parsed: tuple[Parsed | None, BaseException | None] | None = None):
        """`parsed`: what parse_exchange already returned (or raised) for this very exchange (execution/live.py)."""
        self.ex = ex
        self._done = parsed is not None
        self._parsed, self._error = parsed if parsed is not None else (None, None)

    def __call__(self) -> Parsed:
        if not self._done:
            self._done = True
            try:
                self._parsed = parse_exchange(self.ex)
            except Exception as e:  # noqa: BLE001 - kept and raised again to every caller, as parsing again would
                self._error = e
        if self._error is not None:
            raise self._error
        assert self._parsed is not None
        return self._parsed


def _entry(t: Any) -> list[Any]:
    t = t if isinstance(t, dict) else {}
    return [t.get("token"), t.get("logprob")]


def cut(parse: Callable[[], Parsed], ex: Exchange) -> tuple[Any, Any, Any]:
    """(content, logprobs, top_logprobs) of a judged record, cut as a golden keeps them; Nones when the body is malformed."""
    content = logprobs = top = None
    try:
        p = parse()
        content = (p.content or "")[:MAX_CONTENT]
        if p.logprobs:
            entries = [t if isinstance(t, dict) else {} for t in p.logprobs[:MAX_LOGPROBS]]
            logprobs = [[t.get("token"), t.get("logprob")] for t in entries]
            if ex.request.get("temperature") == 0:
                top = _alternatives(entries)
    except MalformedBody:
        pass
    return content, logprobs, top


def _alternatives(entries: list[dict[str, Any]]) -> list[list[list[Any]]] | None:
    """Each token's returned top_logprobs as [[token, logprob], ...]; None when the server returned none."""
    top = [[[a.get("token"), a.get("logprob")] for a in (t.get("top_logprobs") or [])[:MAX_TOP] if isinstance(a, dict)]
           if isinstance(t.get("top_logprobs"), list) else [] for t in entries]
    return top if any(top) else None


def shown(parse: Callable[[], Parsed], judged: bool) -> dict[str, Any] | None:
    """What the report shows of a record beyond its row, or None when the body does not parse.

    The report used to parse only MalformedBody-free bodies and skip the rest; a record that is not judged (an
    error body) is parsed here only for this, so any failure to parse it means "nothing to show"."""
    try:
        p = parse()
    except MalformedBody:
        return None
    except Exception:  # noqa: BLE001 - see above: only for records scoring never parsed
        if judged:
            raise
        return None
    out: dict[str, Any] = {}
    if p.tool_calls:  # as the flip card prints them: the file's keys are sorted, the card keeps the server's order
        out["tool_calls"] = json.dumps(p.tool_calls, indent=1, ensure_ascii=False)
    lps = p.logprobs or []
    if lps:
        head = lps[:SHOWN_LOGPROBS]
        start = min(len(head), MAX_LOGPROBS) if judged else 0  # a judged row already holds the first MAX_LOGPROBS
        if head[start:]:
            out["lp"] = [_entry(t) for t in head[start:]]
        skip = [i for i, t in enumerate(head) if not isinstance(t, dict)]
        if skip:
            out["skip"] = skip
    return out


class Collector:
    """Scoring's side of the file: the cut text and the report's extras of the latest exchange per key."""

    def __init__(self) -> None:
        self.texts: dict[Key, tuple[Any, Any, Any]] = {}
        self.extras: dict[Key, dict[str, Any]] = {}

    def add(self, ex: Exchange, parse: Callable[[], Parsed], judged: bool) -> None:
        """The latest exchange of its key (a later one replaces what an earlier one left)."""
        self.texts.pop(ex.key, None)
        self.extras.pop(ex.key, None)
        if judged:
            self.texts[ex.key] = cut(parse, ex)
        extra = shown(parse, judged)
        if extra is not None:
            self.extras[ex.key] = extra

    def rows(self, verdicts: Iterable[Verdict]) -> Iterable[dict[str, Any]]:
        for v in verdicts:
            key = (v.suite, v.sample_id, v.epoch, v.mode)
            row = Observation.from_verdict(v, *self.texts.get(key, (None, None, None))).to_dict()
            if key in self.extras:
                row["shown"] = self.extras[key]
            yield row


def header(run_dir: Path, responses: dict[str, Any] | None = None) -> dict[str, Any]:
    """The first line: the files this one was made from, as they are now on disk (`responses`: the journal's
    digest, when the caller has just taken it)."""
    return {"observations": FORMAT,
            "responses": responses if responses is not None else journal.file_digest(Path(run_dir) / journal.RESPONSES),
            "verdicts": journal.file_digest(Path(run_dir) / journal.VERDICTS),
            "summary": journal.file_digest(Path(run_dir) / journal.SUMMARY)}


def write(run_dir: Path, collected: Collector, responses: dict[str, Any] | None = None) -> None:
    """After verdicts.jsonl and summary.json are written: rows from the verdicts as read back (what bless used to start from),
    between the header and the seal. `responses`: the journal's digest, taken by the caller after the journal's last
    write (not hashed twice)."""
    verdicts = (Verdict.from_json(d) for d in journal.read_jsonl(Path(run_dir) / journal.VERDICTS))
    with safewrite.atomic_write(Path(run_dir) / OBSERVATIONS) as f:
        seal = sealing.sealer()
        n = 0
        for i, row in enumerate(_with_header(header(run_dir, responses), collected.rows(verdicts))):
            line = safewrite.scrubbed_line(row) + "\n"
            seal.update(line.encode("utf-8", "backslashreplace"))
            f.write(line)
            n += i > 0
        f.write(safewrite.dumps({SEAL: seal.hexdigest(), "rows": n}) + "\n")


def _with_header(head: dict[str, Any], rows: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    yield head
    yield from rows


def discard(run_dir: Path) -> None:
    """Scores written without observations (e.g. an imported lm-eval run): no older file may outlive them."""
    try:
        (Path(run_dir) / OBSERVATIONS).unlink()
    except FileNotFoundError:
        pass


Take = Callable[[Observation, "dict[str, Any] | None"], None]
"""What `each` hands each row to: the row as an Observation, and its `shown` block (None when the file has none)."""


def read(run_dir: Path) -> list[Observation] | None:
    """The one reader of a run's observation rows (RunDir.observations): the rows as Observations, or None when the
    file is absent, unreadable, not made from the journal and the verdicts beside it, or its lines do not hash to
    its seal (a row edited after scoring): the caller then scores the run again (app/scored.ensure_scored). A special
    file or a symlink out of the run is refused (NotARunDir), never read."""
    rows: list[Observation] = []
    return rows if each(run_dir, lambda o, _shown: rows.append(o)) else None


def each(run_dir: Path, take: Take) -> bool:
    """`read`, one row at a time (the report keeps a little of each, never the whole list): each row goes to `take`
    with its `shown` block as it is read. False when `read` would return None; `take` may then have seen rows of a
    file that is not sealed, and the caller drops what it kept of them."""
    return read_each(run_dir, lambda row: take(Observation.from_dict(golden_row(row)), _shown_of(row)))


def _shown_of(row: dict[str, Any]) -> dict[str, Any] | None:
    shown = row.get("shown")
    return shown if isinstance(shown, dict) else None


def read_each(run_dir: Path, take: Callable[[dict[str, Any]], None]) -> bool:
    """The file's rows as written (dicts, `shown` included), one at a time: `each`'s file-level half, for the
    tests that forge rows. Each row is handed to `take` as it is read (memory follows what `take` keeps,
    not the file). False when `read` would return None; `take` may then have seen rows of a file that is not
    sealed, and the caller drops what it kept of them."""
    path = Path(run_dir) / OBSERVATIONS
    if not path.exists() and not path.is_symlink():
        return False
    try:
        f = safeio.open_regular(path, max_bytes=layout.MAX_JSONL, within=Path(run_dir))
    except safeio.UnsafeFile as e:
        raise layout.RefusedFile(str(e)) from None
    seal = sealing.sealer()
    head: Any = None
    held: Any = None  # the latest line's record: a row, unless it is the last line (the seal)
    rows = 0
    prev = b""
    with f:
        n = 0
        while True:
            raw = safeio.read_line(f, layout.MAX_LINE)  # an over-long line is measured, never held
            if raw is None:
                return False  # over-long: not the file scoring wrote
            if not raw:
                break
            n += 1
            if not raw.endswith(b"\n"):
                return False  # torn: not the file scoring wrote
            if n > 1:  # every line before the last (the seal) is sealed
                seal.update(prev)
            try:
                rec = layout.decode_line(raw, path, n)
            except journal.CorruptFile:
                return False
            if n == 1:
                head = rec
                if head != header(run_dir):
                    return False
            elif held is not None:
                take(held)
                rows += 1
            held = rec if n > 1 else None
            prev = raw
    return (n >= 2 and isinstance(held, dict) and set(held) == {SEAL, "rows"} and held["rows"] == rows
            and isinstance(held[SEAL], str) and hmac.compare_digest(held[SEAL], seal.hexdigest()))


_ROW_KEYS = tuple(Observation.__dataclass_fields__)


def golden_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row as golden.observations returns it: Observation.to_dict's keys in its order, without the report's extras."""
    return {k: row[k] for k in _ROW_KEYS if k in row}


def judged(v: Verdict) -> bool:
    return v.outcome in JUDGED
