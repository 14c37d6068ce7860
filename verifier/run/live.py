"""Scoring while a run is collected: `verifier run` judges each record as soon as it is journaled, so that when the
last answer arrives only the aggregation (conversations, the summary, the files) is left.

The follower reads responses.jsonl itself, complete line by complete line, with the reader `verifier score` uses
(journal.decode_line), and feeds the same scoring.Scorer that `verifier score` feeds from journal.iter_exchanges:
the same records in the same order, whatever wrote them (this run, the run it resumes, a torn tail healed by the
journal writer), so the files it writes are the bytes `verifier score` writes on the same directory afterwards.
It never buffers a partial line: the journal writer may cut a torn tail (journal._heal_torn_tail) and write over it.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any, Iterator

from verifier.run import journal, observations as observe, scoring
from verifier.types import Exchange, Sample, Suite, Verdict

CHUNK = 1 << 22
"""Bytes read at a time: a resumed 300 MB journal is followed in pieces, as score streams it."""
SLICE_S = 0.0005
"""Judging time between two returns to the event loop (at least one record; a gsm8k record takes ~0.6 ms): the
answers that arrive meanwhile wait at most about this long. Measured on full gsm8k against bench/lean_server.py
(68 ms, concurrency 32), the request phase took 2.97-3.03 s without scoring, 3.01-3.08 s with 0.5 ms slices,
3.06-3.11 s with 2 ms and 3.10-3.16 s with 10 ms (a worker thread instead: as 2 ms; the GIL hands over every 5 ms)."""
IDLE_S = 0.02
"""Pause when every journaled record is judged."""


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
        self._stop = False

    def _fill(self) -> bool:
        """Read the complete lines appended since the last read; False when there is none yet."""
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
            except FileNotFoundError:
                return False  # a new run: the journal is created with the first request
        avail = os.fstat(self._fd).st_size - self.offset
        want = min(avail, CHUNK)
        while want > 0:
            buf = os.pread(self._fd, want, self.offset)
            end = buf.rfind(b"\n") + 1
            if end:
                self._buf, self._pos = buf[:end], 0
                self.offset += end
                return True
            if want >= avail:
                return False  # a record being written (or a torn tail the writer will cut)
            want = min(avail, want * 2)  # one record longer than a chunk
        return False

    def step(self, budget_s: float) -> bool:
        """Judge journaled records for about `budget_s` (at least one); True when every complete one is judged."""
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
            self.scorer.add(Exchange.from_json(journal.decode_line(raw, self.path, self.lines)))
            if time.perf_counter() >= end:
                return False

    async def follow(self) -> None:
        """In the run's event loop, beside the requests: a slice of judging, then the loop's turn."""
        try:
            while not self._stop:
                done = self.step(SLICE_S)
                await asyncio.sleep(IDLE_S if done else 0)
        except Exception as e:  # noqa: BLE001 - kept: the run is scored afresh, which reports it as `score` would
            self.failed = e

    def stop(self) -> None:
        self._stop = True

    def result(self) -> tuple[list[Verdict], dict[str, Any], observe.Collector]:
        """Once nothing more is appended: the records left, then the scorer's result."""
        try:
            if self.failed is not None:
                raise self.failed
            self.step(float("inf"))
            return self.scorer.result()
        finally:
            self.close()

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
