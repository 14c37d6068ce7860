"""The machinery of the fault catalogue: pure edits of parsed bodies and SSE payloads.

A fault has up to three mutations: `request(body)` / `response(body)` return a `Change`
or None (nothing to mutate); `stream()` makes a `StreamMutator` that maps one `data:`
payload string to zero or more payload strings. No I/O anywhere here: the proxy
(proxy.py) moves the bytes, these functions only decide what the bytes become.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterator

SUMMARY_CHARS = 120


def _short(x: Any) -> str:
    s = x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)
    return s if len(s) <= SUMMARY_CHARS else s[: SUMMARY_CHARS - 1] + "…"


@dataclass(frozen=True)
class Change:
    """A mutation that happened: the new value plus a short before/after for the log."""

    value: Any
    before: str
    after: str
    count: int = 1


Pairs = list[tuple[Any, Any]]


def pure_edit(fn: Callable[[dict[str, Any]], Pairs]) -> Callable[[dict[str, Any]], Change | None]:
    """Wrap an in-place editor into a pure function: it edits a deep copy and reports what moved."""

    def wrapped(body: dict[str, Any]) -> Change | None:
        new = copy.deepcopy(body)
        pairs = fn(new)
        if not pairs:
            return None
        return Change(new, _short(pairs[0][0]), _short(pairs[0][1]), len(pairs))

    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def choices_of(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for c in body.get("choices") or []:
        if isinstance(c, dict):
            yield c


def messages_of(body: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for c in choices_of(body):
        if isinstance(c.get("message"), dict):
            yield c["message"]


def deltas_of(chunk: dict[str, Any]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for c in choices_of(chunk):
        if isinstance(c.get("delta"), dict):
            yield c, c["delta"]


def reasoning_key(d: dict[str, Any]) -> str:
    # vLLM/llama.cpp say reasoning_content; some newer servers say reasoning. Keep the server's dialect.
    return "reasoning" if "reasoning" in d and "reasoning_content" not in d else "reasoning_content"


class StreamMutator:
    """Rewrites a stream's `data:` payloads one at a time. Pure: no I/O, only this object's state.

    `feed` returns the payloads to send now (possibly none, when held back), `flush`
    what is still held when the stream ends. `changes` records (before, after) summaries.
    Subclasses implement `chunk` (None = pass the payload through byte for byte) and `end`.
    """

    def __init__(self) -> None:
        self.changes: list[tuple[str, str]] = []
        self._ended = False

    def feed(self, payload: str) -> list[str]:
        if payload.strip() == "[DONE]":
            return self.flush() + [payload]
        try:
            d = json.loads(payload)
        except json.JSONDecodeError:
            return [payload]  # not ours to fix; the verifier's bad-chunk check should see it as sent
        if not isinstance(d, dict):
            return [payload]
        out = self.chunk(d)
        return [payload] if out is None else [json.dumps(x, ensure_ascii=False) for x in out]

    def flush(self) -> list[str]:
        if self._ended:
            return []
        self._ended = True
        return [json.dumps(x, ensure_ascii=False) for x in self.end()]

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        return None

    def end(self) -> list[dict[str, Any]]:
        return []

    def note(self, before: Any, after: Any) -> None:
        self.changes.append((_short(before), _short(after)))


class _PerChunk(StreamMutator):
    """A stateless per-chunk edit: `edit(chunk)` changes the chunk in place and returns (before, after) pairs."""

    def __init__(self, edit: Callable[[dict[str, Any]], Pairs]) -> None:
        super().__init__()
        self._edit = edit

    def chunk(self, d: dict[str, Any]) -> list[dict[str, Any]] | None:
        pairs = self._edit(d)
        for b, a in pairs:
            self.note(b, a)
        return [d] if pairs else None


def per_chunk(edit: Callable[[dict[str, Any]], Pairs]) -> Callable[[], StreamMutator]:
    return lambda: _PerChunk(edit)


def run_stream(mutators: list[StreamMutator], payloads: list[str]) -> list[str]:
    """Push a whole stream through a chain of mutators (tests and offline use)."""
    chain = Chain(mutators)
    out = [x for p in payloads for x in chain.feed(p)]
    return out + chain.flush()


class Chain:
    """Several stream mutators in order: each one's output is the next one's input."""

    def __init__(self, mutators: list[StreamMutator]) -> None:
        self.mutators = mutators

    def feed(self, payload: str) -> list[str]:
        payloads = [payload]
        for m in self.mutators:
            payloads = [y for x in payloads for y in m.feed(x)]
        return payloads

    def flush(self) -> list[str]:
        # What mutator i still holds must still pass through mutators i+1.., which then flush in turn.
        pending: list[str] = []
        for m in self.mutators:
            pending = [y for x in pending for y in m.feed(x)] + m.flush()
        return pending


@dataclass(frozen=True)
class Fault:
    """One entry of the catalogue: a real frontend bug, as up to three pure mutations."""

    name: str
    description: str
    """What the proxy does to the traffic."""
    mimics: str
    """The real bug it reproduces (the public reports it was modelled on; docs/frontend-bugs.md)."""
    catches: str
    """The verifier signal that should flag it (a contract finding code, or a compare signal)."""
    request: Callable[[dict[str, Any]], Change | None] | None = None
    """Edits the request body before it is forwarded."""
    response: Callable[[dict[str, Any]], Change | None] | None = None
    """Edits a non-streamed JSON response body."""
    stream: Callable[[], StreamMutator] | None = None
    """Makes a fresh mutator for one SSE stream."""
    native: tuple[str, ...] = ()
    """Surfaces whose own request/response shapes the mutations edit (no chat translation); it acts on no other
    surface. Empty: written against chat shapes and translated onto every surface."""
    when: Callable[[dict[str, Any]], bool] | None = None
    """Which requests it acts on, read from the request as chat spells it (the proxy translates a Responses or
    Messages request first): a bug that shows only for some requests (a forcing tool_choice, reasoning on). None:
    every request."""
    on_repeat: bool = False
    """Acts only on the second and later sends of the same prompt (messages and tools, whatever the mode, the
    surface or the transport), never on the first: a bug of engine state (a prefix cache, speculative decoding)
    that shows once the engine has seen the prompt."""
    with_shared_prefix: bool = False
    """Acts only on an answer whose request was in flight at the same time as another request with the same first
    message and another prompt (the proxy holds each request a batch window, BATCH_WINDOW_S, so requests sent at once
    meet): a bug of batched shared-prefix state (a prefix block shared across a batch, a cascade-attention kernel)
    that shows only under concurrency. Requests responses, not request edits: it is decided once the batch is known."""

    @property
    def kinds(self) -> list[str]:
        return [k for k in ("request", "response", "stream") if getattr(self, k) is not None]
