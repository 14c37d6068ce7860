"""The resend step: a few of the run's own greedy requests sent again, one at a time, after the run (issue 47).

Engine state (a prefix cache serving stale blocks, a speculative decoder, state shared across a batch) answers one
request two ways; weights and kernels compute the same thing every time. A run whose golden sends every request once
(one mode, one epoch) holds no repeat to read that from, so a gate sends a bounded subset again itself: per suite
the first `samples` greedy requests of the run (in its send order) after its first `concurrency` sends, each alone
(nothing else in flight) once every sample is in. Each answer is journaled in resends.jsonl like any exchange (the
request as sent, the raw answer, its number in the run's one send sequence), so the comparison reads both orders of
the journal: "first right, later wrong" (the resend parts from the run's record, which was the golden's) and "alone
right, in the run wrong" (the resend alone is the golden's, the run's record, sent warm or under load, parted).

The run's first `concurrency` sends are not resent: they went to a cold engine (llama.cpp answers its first requests
otherwise at temperature 0 before its prompt cache is warm), which is no state a correct engine should not have.

run.json records what was asked (`resend_asked`: `{"samples": N}`) before the first request, and the step's result
(`resend`: state, samples, requests, errors) when it is done, so a resume makes a step an interrupt left undone.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Collection, Iterable, Mapping

from verifier import scrub
from verifier.execution import journal
from verifier.execution.layout import RESENDS, CorruptFile
from verifier.surfaces.registry import REFERENCE_SURFACE, mode_of, surface_for
from verifier.types import Exchange, Observation, Suite

if TYPE_CHECKING:
    from verifier.execution.runner import SendOrder
    from verifier.wire.endpoint import Endpoint

DEFAULT_SAMPLES = 4
"""Requests resent per suite by default: a gate's cost is this many requests per suite (sent one at a time)."""
MAX_SAMPLES = 64
"""The most a run may ask per suite (`--resend N`)."""
MAX_RECORDS = 4096
"""The most records a resends.jsonl is read for: more than any run writes (MAX_SAMPLES per suite); a planted file is
refused past it, naming the file."""

Target = tuple[str, str, int, str]
"""(suite, sample id, epoch, mode): the journaled record whose request is sent again."""


def _mode_rank(modes: list[str], mode: str) -> tuple[bool, bool, int]:
    """A non-streamed mode before a streamed one, chat before the other surfaces (Messages returns no logprobs), then
    the run's own order: one request per sample, the plainest."""
    return mode_of(mode).stream, surface_for(mode).name != REFERENCE_SURFACE, modes.index(mode) if mode in modes else len(modes)


def targets(exchanges: Iterable[Exchange], per_suite: int, cold: int, modes: list[str],
            skip_suites: Collection[str] = ()) -> list[Target]:
    """The records to send again: per suite, the samples of the first `per_suite` answered greedy records (temperature
    0, epoch 0, a mode the server renders itself: not the dual path) in send order, each sample's plainest mode,
    leaving out the run's first `cold` sends and `skip_suites` (conversations: a step's request replays answers).
    Only keys and send numbers are kept while the journal is walked (its memory does not grow with the run)."""
    best: dict[tuple[str, str], tuple[tuple[bool, bool, int], int, Target]] = {}
    for ex in exchanges:
        if ex.suite in skip_suites or ex.epoch != 0 or ex.error is not None or ex.status != 200 or ex.sent is None:
            continue
        if ex.sent < cold or mode_of(ex.mode).dual_path or ex.request.get("temperature") != 0:
            continue
        key, rank = (ex.suite, ex.sample_id), _mode_rank(modes, ex.mode)
        old = best.get(key)
        if old is None or rank < old[0]:
            best[key] = (rank, ex.sent, ex.key)
    out: list[Target] = []
    taken: dict[str, int] = {}
    for _, _, target in sorted(best.values(), key=lambda b: (b[2][0], b[1])):
        if taken.get(target[0], 0) < per_suite:
            taken[target[0]] = taken.get(target[0], 0) + 1
            out.append(target)
    return out


def requests_of(exchanges: Iterable[Exchange], chosen: Collection[Target]) -> dict[Target, dict[str, Any]]:
    """The request bodies of the chosen records, as the run sent them (the latest answered record of each key)."""
    return {ex.key: ex.request for ex in exchanges if ex.key in chosen and ex.error is None}


def read(run_dir: Path) -> list[Exchange]:
    """resends.jsonl's records (none where the file is absent), at most MAX_RECORDS (CorruptFile past it)."""
    out: list[Exchange] = []
    for ex in journal.iter_exchanges(run_dir, RESENDS):
        if len(out) >= MAX_RECORDS:
            raise CorruptFile(f"{Path(run_dir) / RESENDS}: more than {MAX_RECORDS} records (a resend step writes at most "
                              f"{MAX_SAMPLES} per suite)")
        out.append(ex)
    return out


async def run(ep: "Endpoint", run_dir: Path, per_suite: int, cold: int, modes: list[str], order: "SendOrder",
              skip_suites: Collection[str] = (), secrets: Iterable[str] = ()) -> dict[str, Any]:
    """Send the targets again, one at a time, journaling each in resends.jsonl; returns run.json's `resend` block.
    A resume sends only the targets resends.jsonl has no answer for."""
    chosen = targets(journal.iter_exchanges(run_dir), per_suite, cold, modes, skip_suites)
    bodies = requests_of(journal.iter_exchanges(run_dir), set(chosen))
    done = {ex.key for ex in read(run_dir) if ex.error is None}
    # `resent`: the requests chosen; `requests`, `errors`: what resends.jsonl holds once the step is done (a resumed
    # step's earlier sends included), and of those the infra errors
    block: dict[str, Any] = {"state": "done", "samples": per_suite, "requests": 0, "errors": 0, "resent": len(chosen)}
    if not chosen:
        return {**block, "state": "skipped", "reason": "no greedy request of the run to send again (temperature 0, "
                "epoch 0, sent after the run's first concurrent batch)"}
    jr = journal.Journal(run_dir, scrub=[*secrets, *scrub.secrets()], name=RESENDS)
    try:
        for key in chosen:
            if key in done:
                continue
            suite, sample_id, epoch, mode = key
            sent = order.take()
            r = await ep.send(mode, bodies[key])
            jr.append(Exchange(suite, sample_id, epoch, mode, bodies[key], r.status, r.body, r.chunks, r.error,
                               r.latency_ms, r.attempts, sent))
    finally:
        jr.close()
    latest = {x.key: x for x in read(run_dir)}
    return {**block, "requests": len(latest), "errors": sum(x.error is not None for x in latest.values())}


def observations(run_dir: Path, suites: Mapping[str, Suite]) -> list[Observation]:
    """The resend step's records as observations (`resent`: True), judged as scoring judges the run's records
    (scoring.judge), the latest per key; none where the run made no resend step. A record of a sample or suite the
    run does not hold is refused (a file no writer made)."""
    import dataclasses

    from verifier.execution import observations as observe
    from verifier.execution.scoring import judge

    if not (Path(run_dir) / RESENDS).exists():
        return []
    samples = journal.read_samples(run_dir)

    latest = {ex.key: ex for ex in read(run_dir)}
    out = []
    for key in sorted(latest):
        ex = latest[key]
        suite, sample = suites.get(ex.suite) or suites.get(ex.suite.split(":", 1)[0]), samples.get((ex.suite, ex.sample_id))
        if suite is None or sample is None:
            raise CorruptFile(f"{Path(run_dir) / RESENDS}: a record of {ex.suite}/{ex.sample_id[:80]}, which the run does not hold")
        once = observe.Once(ex)
        v = judge(suite, sample, ex, once)
        content, logprobs, top = observe.cut(once, ex) if observe.judged(v) else (None, None, None)
        out.append(dataclasses.replace(Observation.from_verdict(v, content, logprobs, top), resent=True))
    return out


def say(block: Mapping[str, Any], quiet: bool) -> None:
    """The step's infra errors said on stderr even when quiet (a resend that met one measures nothing), a skipped
    step's reason unless quiet; both are in run.json's `resend` too."""
    if block.get("errors"):
        print(f"resend: {block['errors']} of {block.get('requests')} resent request(s) met an infra error: engine state is "
              "not read on those samples (run.json resend)", file=sys.stderr)
    elif block.get("state") == "skipped" and not quiet:
        print(f"resend: skipped: {block.get('reason')}", file=sys.stderr)
