"""samples x epochs x modes -> requests -> journal, with progress. The only phase that talks to the network."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Sequence, TextIO, cast

from verifier import safewrite
from verifier.execution import journal
from verifier import scrub
from verifier.surfaces.registry import mode_of, surface_for
if TYPE_CHECKING:  # the endpoint module loads the openai SDK (~1 s): only when a request is sent
    from verifier.wire.endpoint import Endpoint, EndpointConfig
from verifier.types import Exchange, RunHeader, Sample, Suite

# The run's defaults: greedy and reproducible, so run-to-run spread is the server's, not ours.
DEFAULT_SAMPLING = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 1024, "seed": 1234}
MAX_CONVERSATION_STEPS = 1000
"""Requests one conversation may send, whatever its suite's own bounds: a guard against a runaway loop."""


now = journal.now
git_commit = journal.git_commit


def dataset_sha256(samples: Sequence[Sample]) -> str:
    h = hashlib.sha256()
    for s in samples:
        h.update(safewrite.canonical(journal.sample_fields(s)).encode())
        h.update(b"\n")
    return h.hexdigest()


IDENTITY_KEYS = frozenset({"model", "stream", "messages", "input", "prompt", "instructions", "system", "previous_response_id"})
"""Keys only the spec sets: which model is measured (`--model`), the transport (`stream`: the wire mode) and the
prompt itself, in each surface's spelling (chat `messages`, Responses `input`/`instructions`/`previous_response_id`,
Messages `system`, completions `prompt`). A golden's `source.extra_body`, an input's `params`, `--extra-body` or a `--requests` body never
override them, nor the suite's content keys (CONTENT_KEYS) when the suite's request (or a replayed body) sets them."""
CONTENT_KEYS = frozenset({"tools", "response_format"})
"""What a suite measures with: the declared tools, the structured-output schema."""


def _owned(body: dict[str, Any]) -> set[str]:
    raw = body.get("_raw")
    if not isinstance(raw, dict):
        raw = {}
    return set(IDENTITY_KEYS) | ((set(body) | set(raw)) & CONTENT_KEYS)


def without_identity(extra_body: dict[str, Any]) -> dict[str, Any]:
    """The extra body without IDENTITY_KEYS: what the probes send and run.json records."""
    return {k: v for k, v in extra_body.items() if k not in IDENTITY_KEYS}


def identity_overrides(suite: Suite, sample: Sample, extra_body: dict[str, Any],
                       sampling_overrides: dict[str, Any]) -> list[str]:
    """`where.key` for each key of the sample's params or the extra body that would override the spec or the suite
    (what build_request drops): the app warns once about them."""
    owned = _owned(dict(suite.request(sample)))
    return ([f"params.{k}" for k in sorted(set(sample.params) & owned)]
            + [f"extra_body.{k}" for k in sorted(set(extra_body) & owned)]
            + [f"sampling.{k}" for k in sorted(set(sampling_overrides) & owned)])


def build_request(suite: Suite, sample: Sample, model: str, sampling: dict[str, Any], extra_body: dict[str, Any], mode: str,
                  template: str | None = None) -> dict[str, Any]:
    """Precedence, low to high: run defaults < suite defaults < sample params < user overrides < extra body; but
    the model, the transport, the prompt and what the suite sets are the spec's (IDENTITY_KEYS)."""
    body = dict(suite.request(sample))
    owned = _owned(body)
    extra_body = {k: v for k, v in extra_body.items() if k not in owned}
    if body.get("_raw"):
        # Raw replay: the vendor's body is sent as-is, except model and stream mode.
        body = dict(body["_raw"])
        body["model"] = model
    else:
        body["model"] = model
        params = {k: v for k, v in sample.params.items() if k not in owned}
        overrides = {k: v for k, v in sampling["overrides"].items() if k not in owned}
        for k, v in {**DEFAULT_SAMPLING, **suite.defaults, **params, **overrides}.items():
            if v is not None:
                body[k] = v
    body.update(extra_body)
    body.pop("stream", None)
    m = mode_of(mode)
    if m.dual_path:
        from verifier.wire.dualpath import completion_body

        if not template:
            raise ValueError(f"the {mode} (dual path) mode needs the chat template the server reports in /props")
        return completion_body(body, template)
    return surface_for(mode).request(m, body, extra_body)


class Progress:
    """done/total, errors and req/s on stderr; silent with --quiet.

    On a terminal: one bar redrawn in place with `\r`. Elsewhere (CI logs, files) `\r` would pile up into one
    endless line, so it writes a plain line at most every `interval` seconds (VERIFIER_PROGRESS_INTERVAL,
    default 10) and one at the end.
    """

    def __init__(self, total: int, quiet: bool, stream: TextIO | None = None, interval: float | None = None):
        self.total, self.quiet = total, quiet
        # The bar's own `\r` must reach the terminal: past the CLI's control-character escaping (cli/console.py).
        self.stream: TextIO = stream or cast(TextIO, getattr(sys.stderr, "raw", sys.stderr))
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval if interval is not None else (0.2 if self.tty else _env_interval())
        self.done = self.errors = 0
        self.t0 = time.perf_counter()
        self._last = self.t0 if not self.tty else 0.0

    def tick(self, error: bool) -> None:
        self.done += 1
        self.errors += error
        t = time.perf_counter()
        if self.quiet or not (t - self._last >= self.interval or self.done == self.total):
            return
        self._last = t
        rate = self.done / max(t - self.t0, 1e-9)
        if self.tty:
            bar = "#" * int(30 * self.done / max(self.total, 1))
            self.stream.write(f"\r[{bar:<30}] {self.done}/{self.total} errors={self.errors} {rate:.1f} req/s")
            if self.done == self.total:
                self.stream.write("\n")
        else:
            self.stream.write(f"progress: {self.done}/{self.total} errors={self.errors} {rate:.1f} req/s\n")
        self.stream.flush()


def _env_interval() -> float:
    try:
        return max(0.0, float(os.environ.get("VERIFIER_PROGRESS_INTERVAL", "10")))
    except ValueError:
        return 10.0


class SendOrder:
    """The run's send sequence (Exchange.sent): each request is numbered as the runner hands it to the client, one
    counter for every worker and every batch of the run, continuing after the highest number a resumed journal holds.
    Numbered at hand-off, so two requests in flight together are ordered as they were started, which is the order they
    leave this process in (one event loop)."""

    def __init__(self, after: int | None = None):
        self._next = 0 if after is None else after + 1

    @staticmethod
    def after_journal(exchanges: "Iterable[Exchange]") -> "SendOrder":
        """The sequence continuing a journal's records (numbers after its highest; from 0 when it has none)."""
        return SendOrder(max((ex.sent for ex in exchanges if ex.sent is not None), default=None))

    def take(self) -> int:
        n = self._next
        self._next += 1
        return n


@contextlib.contextmanager
def lean_gc(gen0: int = 20_000) -> Iterator[None]:
    """Fewer, cheaper garbage collections while requests fly.

    The planned work (every request body) and the imported modules are long-lived: `gc.freeze()` takes them
    out of every collection, and a larger first-generation threshold stops the collector from running every
    ~10 requests. At concurrency 256 the default settings spent a sixth of the client's CPU in the collector.
    """
    old = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(gen0, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
        gc.unfreeze()


async def execute(
    run_dir: Path,
    work: list[tuple[Suite, Sample, int, str, dict[str, Any]]],
    cfg: EndpointConfig,
    quiet: bool = False,
    endpoint: Endpoint | None = None,
    journaled: dict[tuple[str, str, int, str], Exchange] | None = None,
    written: Callable[[bytes, Any], None] | None = None,
    order: SendOrder | None = None,
) -> dict[str, Any]:
    """Send every (suite, sample, epoch, mode, body) and journal each Exchange as it completes.

    `journaled`: the answered records of the run being resumed; a conversation replays them instead of
    re-sending (Suite.conversation), so only its missing steps go out. `written`: journal.Journal's hook, called
    with each line written (execution/live.Follower.offer). `order`: the run's send sequence (one for all its
    batches); None: one continuing `journaled`."""
    from verifier.wire.endpoint import Endpoint

    ep = endpoint or Endpoint(cfg)
    jr = journal.Journal(run_dir, scrub=[cfg.api_key or "", *cfg.headers.values(), *scrub.secrets()], written=written)
    progress = Progress(sum(len(w[0].conversation.records(w[1])) if w[0].conversation else 1 for w in work), quiet)
    classes: dict[str, int] = {}
    journaled = journaled or {}
    order = order or SendOrder.after_journal(journaled.values())

    def record(ex: Exchange, timed_out: str | None = None) -> Exchange:
        """Journal one exchange, count it in the progress and, when it failed, in its error class (a timeout as
        `timeout/<which limit, what had arrived>`, for the console: wire/endpoint.TIMEOUTS). The exchange as the
        journal holds it (a record too costly to read back is journaled as `response_too_large`)."""
        ex = jr.append(ex)  # as written: a record too costly to read back is response_too_large
        progress.tick(ex.error is not None)
        if ex.error is not None:
            cls = f"{ex.error}/{timed_out}" if timed_out else ex.error
            classes[cls] = classes.get(cls, 0) + 1
        return ex

    async def converse(suite: Suite, sample: Sample, epoch: int, mode: str, first: dict[str, Any]) -> None:
        """One conversation, step by step: each request is built from the answers before it (pure), so a
        journaled step whose body is rebuilt bit for bit is reused, and sending resumes at the first gap."""
        steps: list[Exchange] = []
        for _ in range(MAX_CONVERSATION_STEPS):
            assert suite.conversation is not None  # converse is called for conversations only
            nxt = suite.conversation.step(sample, first, steps)
            if nxt is None:
                return
            step_id, body = nxt
            old = journaled.get((suite.name, step_id, epoch, mode))
            if old is not None and old.request == body:
                ex = old
            else:
                sent = order.take()
                r = await ep.send(mode, body)
                ex = record(Exchange(suite.name, step_id, epoch, mode, body, r.status, r.body, r.chunks, r.error,
                                     r.latency_ms, r.attempts, sent), r.timed_out)
            steps.append(ex)
            if ex.error is not None or ex.status is None or ex.status >= 400:
                return  # no answer to build on: scoring reports the rest of the conversation as not reached

    async def one(suite: Suite, sample: Sample, epoch: int, mode: str, body: dict[str, Any]) -> None:
        sent = order.take()
        r = await ep.send(mode, body)
        record(Exchange(suite.name, sample.id, epoch, mode, body, r.status, r.body, r.chunks, r.error, r.latency_ms, r.attempts,
                        sent), r.timed_out)

    async def worker(queue: Iterator[tuple[Suite, Sample, int, str, dict[str, Any]]]) -> None:
        for w in queue:
            await (converse(*w) if w[0].conversation else one(*w))

    # A fixed pool of workers pulling from one iterator, not one task per request parked on the semaphore:
    # a worker sends its next request as soon as its answer is journaled, with no wake-up hand-off through the
    # loop, and a run of 10,000 requests holds `concurrency` tasks instead of 10,000.
    queue = iter(work)
    try:
        with lean_gc():
            await asyncio.gather(*(worker(queue) for _ in range(max(1, min(cfg.concurrency, len(work))))))
    finally:
        jr.close()
        if endpoint is None:
            await ep.aclose()
    return {"sent": progress.done, "errors": progress.errors, "error_classes": classes}


def plan(
    suites: list[tuple[Suite, Sequence[Sample]]],
    model: str,
    sampling: dict[str, Any],
    extra_body: dict[str, Any],
    epochs: int,
    modes: list[str],
    done: set[tuple[str, str, int, str]] | frozenset[tuple[str, str, int, str]] = frozenset(),
    template: str | None = None,
) -> list[tuple[Suite, Sample, int, str, dict[str, Any]]]:
    work = []
    for suite, samples in suites:
        for s in samples:
            if suite.conversation:
                # Every conversation goes to the runner: it replays what the journal holds and sends the rest.
                work += [(suite, s, e, m, build_request(suite, s, model, sampling, extra_body, m, template))
                         for e in range(epochs) for m in modes]
                continue
            for e in range(epochs):
                for m in modes:
                    if (suite.name, s.id, e, m) not in done:
                        work.append((suite, s, e, m, build_request(suite, s, model, sampling, extra_body, m, template)))
    return work


def records(suite: Suite, samples: Sequence[Sample]) -> int:
    """How many scored records a suite's samples make per epoch and mode (a conversation makes several)."""
    if suite.conversation:
        return sum(len(suite.conversation.records(s)) for s in samples)
    return len(samples)


def header(run_id: str, cfg: EndpointConfig, suites: list[tuple[Suite, Sequence[Sample]]], sampling: dict[str, Any],
           extra_body: dict[str, Any], epochs: int, modes: list[str], api_key_env: str | None) -> RunHeader:
    from verifier.wire.endpoint import redact_url
    from verifier.redact import mask_credentials

    return journal.run_header(
        run_id,
        endpoint={"base_url": redact_url(cfg.base_url), "model": cfg.model, "api_key_env": api_key_env, "header_names": sorted(cfg.headers),
                  # that a credential was sent, never its value: offline commands then mask what looks like one
                  "api_key_sent": bool(cfg.api_key) and not any(k.lower() == "authorization" for k in cfg.headers),
                  # batching changes some engines' greedy outputs: a resume and a golden's rerun reuse it
                  "concurrency": cfg.concurrency,
                  # the request rewrite the endpoint was served behind (wire/serving_adapters.py); bless carries it
                  **({"serving_adapter": cfg.serving_adapter} if cfg.serving_adapter else {})},
        sampling=sampling, extra_body=mask_credentials(extra_body), epochs=epochs, modes=modes, started=now(),
        suites={
            s.name: {
                "version": s.version,
                "dataset_sha256": dataset_sha256(samples),
                "samples": len(samples),
                "requests": records(s, samples) * epochs * len(modes),
            }
            for s, samples in suites
        },
    )
