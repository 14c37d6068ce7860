"""Scoring while a run is collected: `verifier run` judges each record as soon as it is journaled, so that when the
last answer arrives only the aggregation (conversations, the summary, the files) is left.

The follower reads responses.jsonl itself, complete line by complete line, with the reader `verifier score` uses
(journal.decode_line), and feeds the same scoring.Scorer that `verifier score` feeds from journal.iter_exchanges:
the same records in the same order, whatever wrote them (this run, the run it resumes, a torn tail healed by the
journal writer), so the files it writes are the bytes `verifier score` writes on the same directory afterwards.
It never buffers a partial line: the journal writer may cut a torn tail (journal._heal_torn_tail) and write over it.

The judging runs in a thread of its own, never on the event loop's thread, one slice at a time handed over by the
loop (`follow`): a slow scorer (a schema's pattern, a simulator call) cannot stop the requests or keep `--timeout`
and `--request-deadline` from firing, since Python code in that thread gives the GIL to the loop every switch
interval (5 ms) while the loop goes on. What a thread cannot do is interrupt one long call into C code that holds
the GIL (Python's `re` matching a backtracking pattern does): such a call must be bounded where it is made (a
linear-time regex engine). No process hop: the records are judged where they are read.

Each exchange is parsed once: when the journal writer parsed a record (its leak check, with a key set), it hands
the parse over with the line's bytes (`offer`), and the follower uses it for the line that has exactly those bytes.
"""

from __future__ import annotations

import asyncio
import collections
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from verifier import safeio
from verifier.execution import journal, layout, observations as observe, scoring
from verifier.types import RunSummary, Sample, Suite, Verdict

CHUNK = 1 << 22
"""Bytes read at a time: a resumed 300 MB journal is followed in pieces, as score streams it. A record longer than
this is measured before it is read (`_fill`)."""
SLICE_S = 0.0005
"""Judging time of one slice (at least one record): the answers that arrive meanwhile wait for the GIL at most about
this long. Measured on full gsm8k against bench/perf/lean_server.py (68 ms, concurrency 32) when the slices ran inside the
loop, the request phase took 2.97-3.03 s without scoring, 3.01-3.08 s with 0.5 ms slices, 3.06-3.11 s with 2 ms
and 3.10-3.16 s with 10 ms."""
IDLE_S = 0.02
"""Pause when every journaled record is judged."""
OFFERED_MAX = 4096
OFFERED_BYTES = 32 * 2**20
"""Parses handed over by the journal writer and not yet used: past either bound a line is parsed again instead."""


def _resolve(done: "asyncio.Future[bool]", finished: bool) -> None:
    if not done.done():
        done.set_result(finished)


class Follower:
    """The journal's records, judged in journal order as they are appended."""

    def __init__(self, run_dir: Path, suites: dict[str, Suite]):
        self.path = Path(run_dir) / journal.RESPONSES
        # samples.jsonl is read back as `score` reads it, a slice at a time like the records (a gsm8k run's 7 MB
        # take ~50 ms: read at once they would hold the first answers back); the records wait for it.
        self._samples: dict[tuple[str, str], Sample] = {}
        self._loading: Iterator[tuple[tuple[str, str], Sample]] | None = journal.iter_samples(run_dir)
        self.scorer = scoring.Scorer(run_dir, suites, self._samples)
        self.offset = 0
        """Bytes of the journal read so far: always just past a newline."""
        self.lines = 0
        self.failed: BaseException | None = None
        """What stopped the following (a corrupt line, a scorer's exception): the run is then scored afresh."""
        self._fd: int | None = None
        self._buf = b""
        self._pos = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._slices: queue.SimpleQueue[asyncio.Future[bool] | None] = queue.SimpleQueue()
        """Slices handed to the scoring thread (`follow`), each a future the thread resolves; None ends it."""
        self._offered: collections.deque[tuple[bytes, tuple[Any, BaseException | None]]] = collections.deque()
        self._offered_bytes = 0
        self._offer_lock = threading.Lock()
        self._step_lock = threading.Lock()
        """One `step` at a time: a sequential gate's look catches up on the loop's thread (app/collect.py
        _interim_scores) while the scoring thread may be inside its slice; both move the same read position, and
        two at once sliced records at the wrong bytes (a look failed on a "line is not valid JSON" that was not)."""

    def offer(self, line: bytes, parsed: tuple[Any, BaseException | None] | None) -> None:
        """journal.Journal's `written`: the parse the writer made of the line it wrote (None: it made none)."""
        if parsed is None:
            return
        with self._offer_lock:
            if len(self._offered) >= OFFERED_MAX or self._offered_bytes + len(line) > OFFERED_BYTES:
                return  # the follower is far behind: it parses this line itself
            self._offered.append((line, parsed))
            self._offered_bytes += len(line)

    def _taken(self, raw: bytes) -> tuple[Any, BaseException | None] | None:
        """The writer's parse of the line `raw` (its newline included), when the next one offered has its very bytes."""
        if not self._offered:
            return None
        line, parsed = self._offered[0]
        if len(raw) != len(line) + 1 or not raw.startswith(line):
            return None  # a record this process did not write (a resumed run's), or one not offered
        with self._offer_lock:
            self._offered.popleft()
            self._offered_bytes -= len(line)
        return parsed

    def _fill(self) -> bool:
        """Read the complete lines appended since the last read; False when there is none yet. A record longer than a
        chunk is measured before it is read, as `score` reads it (safeio.read_line): its unfinished part is scanned a
        piece at a time and nothing of it kept, and it is read in one piece once its newline is in and it is within
        layout.MAX_LINE. A line over that cap, finished or not, is a CorruptFile naming it: the follower stops and the
        run is scored afresh, which refuses such a line as `score` does (a torn tail that long, left by a killed run,
        would be cut by the journal writer; scoring afresh reads what it leaves)."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return False  # a new run: the journal is created with the first request
        avail = os.fstat(self._fd).st_size - self.offset
        if avail <= 0:
            return False
        buf = os.pread(self._fd, min(avail, CHUNK), self.offset)
        end = buf.rfind(b"\n") + 1
        if end:
            self._buf, self._pos = (buf if end == len(buf) else buf[:end]), 0
            self.offset += end
            return True
        if len(buf) < CHUNK:
            return False  # a record being written (or a torn tail the writer will cut)
        length = self._measure(self._fd, len(buf))
        if length is None:
            return False
        self._buf, self._pos = os.pread(self._fd, length, self.offset), 0  # one allocation of the line's size
        if not self._buf.endswith(b"\n"):
            self._buf = b""
            return False  # the file was cut meanwhile (the writer healed a torn tail): measured again next time
        self.offset += length
        return True

    def _measure(self, fd: int, scanned: int) -> int | None:
        """The length of the line at `offset` whose first `scanned` bytes hold no newline, newline included; None
        while it is unfinished and within its cap (nothing is kept: pieces of safeio.SCAN_CHUNK are read and dropped)."""
        length = scanned
        while length <= layout.MAX_LINE:
            piece = os.pread(fd, safeio.SCAN_CHUNK, self.offset + length)
            if not piece:
                return None
            newline = piece.find(b"\n")
            if newline >= 0:
                length += newline + 1
                break
            length += len(piece)
        if length > layout.MAX_LINE:
            raise layout.CorruptFile(f"{self.path}: line {self.lines + 1} is longer than {layout.MAX_LINE} bytes "
                                     "(the cap on one line)")
        return length

    def step(self, budget_s: float) -> bool:
        """Judge journaled records for about `budget_s` (at least one); True when every complete one is judged."""
        with self._step_lock:
            return self._step(budget_s)

    def _step(self, budget_s: float) -> bool:
        end = time.perf_counter() + budget_s
        while self._loading is not None:
            item = next(self._loading, None)
            if item is None:
                self._loading = None
            else:
                self._samples[item[0]] = item[1]
                if time.perf_counter() >= end:
                    return False
        while True:
            if self._pos >= len(self._buf) and not self._fill():
                return True
            i = self._buf.index(b"\n", self._pos)
            raw = self._buf[self._pos:i + 1]
            self._pos = i + 1
            self.lines += 1
            if raw.isspace():
                continue
            taken = self._taken(raw)
            text = layout.line_text(raw, self.path, self.lines)  # as `score` reads it (layout.read_numbered_jsonl)
            raw = b""
            if self._pos >= len(self._buf):
                self._buf = b""  # a long line read on its own is not held beside its string
            ex = journal.exchange_of(layout.record_of(text, self.path, self.lines), self.path, self.lines)
            text = ""
            self.scorer.add(ex, taken)
            if time.perf_counter() >= end:
                return False

    async def follow(self) -> None:
        """Beside the requests until `stop`: the loop hands the scoring thread one slice at a time and goes on with
        its own work meanwhile; the next slice is handed over once the loop has had its turn. Judging never runs on
        the loop's thread, yet it takes the GIL only in slices between the loop's turns, as when it ran inside the
        loop: a thread left to judge freely held the GIL whenever the loop woke up (a bfcl run's request phase took
        60% longer on a loaded 2-core machine)."""
        loop = asyncio.get_running_loop()
        slices = self._slices

        def judge_slices() -> None:
            while (done := slices.get()) is not None:
                try:
                    finished = self.step(SLICE_S)
                except BaseException as e:  # noqa: BLE001 - kept: the run is scored afresh, which reports it as `score` would
                    self.failed, finished = e, True
                try:
                    loop.call_soon_threadsafe(_resolve, done, finished)
                except RuntimeError:  # the loop is closed: nobody waits
                    return

        thread = self._thread = threading.Thread(target=judge_slices, name="verifier-live-scoring", daemon=True)
        thread.start()
        try:
            while not self._stop.is_set() and self.failed is None and thread.is_alive():
                done: asyncio.Future[bool] = loop.create_future()
                slices.put(done)
                finished = await asyncio.shield(done)
                await asyncio.sleep(IDLE_S if finished else 0)
        finally:
            slices.put(None)  # the thread ends after the slice it is in

    def stop(self) -> None:
        self._stop.set()

    def _join(self, timeout_s: float | None = None) -> bool:
        """End the scoring thread and wait for it; False if it is still inside a record after `timeout_s`."""
        self._stop.set()
        self._slices.put(None)  # it ends after the slice it is in
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True

    def result(self) -> tuple[list[Verdict], RunSummary, observe.Collector]:
        """Once nothing more is appended: the records left (in this thread, the scoring thread ended), then the
        scorer's result."""
        try:
            self._join()
            if self.failed is not None:
                raise self.failed
            self.step(float("inf"))
            return self.scorer.result()
        finally:
            self.close()

    def close(self) -> None:
        """Nothing more is judged. The descriptor is closed once the scoring thread is out of its record (a scorer
        still busy after a second keeps it: the process is ending, and a closed number could be reused under it)."""
        if not self._join(1.0):
            return
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
