"""Reading a response body with a cap on its decoded size: whole (read_capped) or as SSE `data:` payloads (_read_sse).

Split from endpoint.py, which sends; these only read what came back.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import AsyncIterator
from typing import Any

from verifier import textmemory
from verifier.jsonsafe import TooDeep, loads_bounded
from verifier.surfaces.registry import REFERENCE_MODE, surface_for


class TooLarge(Exception):
    """The decoded response passed its size cap."""


MAX_STREAM_EVENTS = 250_000
"""Default cap on the `data:` lines of one stream (`--max-stream-events`). The byte cap alone lets 64 MiB of
`data:{}` through as 8 M events, each a Python string and a list slot (~60 bytes of overhead on 8 bytes of wire):
0.75 GB for one request. A long real generation is one event per token, well under this."""

TOO_MANY_EVENTS = "stream_too_many_events"
"""The error class of a stream cut at the event cap: not retried, and judged as a contract finding (scoring)."""


async def _bytes(resp: Any, limit: int) -> AsyncIterator[bytes]:
    """Decoded body bytes of an aiohttp response, counted as they inflate: a bomb stops at `limit`, not at the end
    of memory (aiohttp inflates a compressed body in bounded pieces as it is read, and gives them as they come)."""
    total = 0
    async for b in resp.content.iter_any():
        total += len(b)
        if total > limit:
            raise TooLarge(f"response over {limit} bytes")
        yield b


class UnknownCharset(ValueError):
    """The Content-Type names a charset Python has no codec for."""


def _charset(resp: Any, strict: bool) -> str:
    """The text encoding the Content-Type declares (UTF-8 when none); one Python has no text codec for is unknown."""
    ct = resp.headers.get("content-type", "").lower()
    plain = "charset" not in ct or ct.replace(" ", "").endswith(("charset=utf-8", 'charset="utf-8"'))
    if plain:
        return "utf-8"
    declared = ct.split("charset=", 1)[-1].split(";")[0].strip().strip('"').strip()[:40]
    try:
        # LookupError for a name Python does not know, or one that is no text encoding (base64); not on b"", which
        # returns "" before looking the codec up.
        b"\0\0\0\0".decode(declared, errors="replace")
    except (LookupError, ValueError):
        if strict:
            raise UnknownCharset(f"unknown charset {declared!r} in Content-Type") from None
        return "utf-8"  # as the SDK's client decodes it: a declared codec nobody has is read as UTF-8
    return codecs.lookup(declared).name


async def read_capped(resp: Any, limit: int, strict_charset: bool = False) -> str:
    """The decoded body, at most `limit` bytes (TooLarge past it). An unknown charset is read as UTF-8 with
    replacement characters, or with `strict_charset` raises UnknownCharset (server info, where a guess is worse)."""
    charset = _charset(resp, strict_charset)
    buf = bytearray()  # one buffer, decoded in place: a list of pieces joined then decoded held the body three times
    async for b in _bytes(resp, limit):
        buf += b
    if charset == "utf-8":
        check_text_memory(buf, limit)  # before decoding: a body of wide characters is never held as a string
    text = buf.decode(charset, errors="replace")
    del buf
    if charset != "utf-8" and sys.getsizeof(text) > TEXT_MEMORY_FACTOR * limit:
        raise TooLarge(f"response of {sys.getsizeof(text)} bytes as a string, over {TEXT_MEMORY_FACTOR} x {limit}")
    return text


TEXT_MEMORY_FACTOR = 2
"""A body's text may take at most this many times the byte cap (`--max-response-mb`) as Python strings: the body
and what JSON parsed from it can hold (textmemory.TextSize.parsed). Text whose widest character is at most U+FFFF
(any script, curly quotes, the replacement character) takes at most 2 bytes a character, so it is never refused
below the byte cap; a body holding a character beyond U+FFFF (an emoji: 4 bytes a character for the whole string)
is refused from half the byte cap, as `response_too_large`. Kept so, the journal line of any body the cap admits
is within layout.MAX_LINE_MEMORY at the default cap, and every copy of it is at most 128 MiB."""


def check_text_memory(data: bytes | bytearray, limit: int) -> None:
    """TooLarge when the UTF-8 text `data` would take more than TEXT_MEMORY_FACTOR x `limit` as strings."""
    if len(data) * 4 <= TEXT_MEMORY_FACTOR * limit:
        return  # 4 bytes a character at most: cannot pass
    size = textmemory.measure(data)
    if size.parsed > TEXT_MEMORY_FACTOR * limit:
        raise TooLarge(f"response of {size.characters} characters at {size.parsed_width} bytes each, over "
                       f"{TEXT_MEMORY_FACTOR} x {limit} bytes as a string")


STREAM_ERROR = "stream_error"
STREAM_REFUSED = "stream_refused"
"""A mid-stream error event whose code is a client error (4xx but 408/429): the request was refused after the 200
and the headers had gone out (vLLM validates some structured-output requests only once the stream has begun).
A refusal, judged like an HTTP 4xx and never retried; any other error event is `stream_error`, an infra failure."""


TRANSIENT_CLIENT_CODES = frozenset({408, 429})
"""The 4xx codes that say "not now" (request timeout, rate limit), not "not this request": retried as infra."""


def is_refusal(code: int) -> bool:
    """The one rule for both ways a server refuses (an HTTP status, or an error event's code inside a 200 stream):
    a 4xx other than the transient ones. A refusal is judged `unsupported` and never retried."""
    return 400 <= code < 500 and code not in TRANSIENT_CLIENT_CODES


def _client_error_code(err: Any) -> bool:
    code = err.get("code") if isinstance(err, dict) else None
    if isinstance(code, str) and code.isdigit():
        code = int(code)
    return isinstance(code, int) and not isinstance(code, bool) and is_refusal(code)


def _stream_error(payload: str) -> str | None:
    """A mid-stream `data: {"error": ...}` event (what overloaded servers send instead of a status code): its error
    class, `stream_refused` when the event names a client-error code, else `stream_error`; None for any other payload."""
    if '"error"' not in payload:
        return None
    try:
        d = loads_bounded(payload)
    except (ValueError, TooDeep):
        return None
    if not isinstance(d, dict) or d.get("error") is None or d.get("choices"):
        return None
    return STREAM_REFUSED if _client_error_code(d["error"]) else STREAM_ERROR


class TooManyEvents(Exception):
    """The stream passed its event cap."""


class _Events:
    """SSE lines -> `data:` payloads, appended to `chunks`.

    A one-line JSON object (or `[DONE]`) is a payload as soon as its line ends: every server we know sends those,
    and a stream whose events are not separated by blank lines still reads line by line. Any other `data:` line
    waits for the blank line that ends its event, and the event's lines are joined with newlines, as the SSE spec
    and the openai SDK's decoder do: valid JSON spread over several `data:` lines is one payload, not bad chunks.
    Comment lines and `event:`/`id:`/`retry:` fields carry no payload.
    """

    def __init__(self, chunks: list[str], max_events: int = MAX_STREAM_EVENTS):
        self.chunks = chunks
        self.pending: list[str] = []
        self.lines, self.max_events = 0, max_events

    def line(self, line: str) -> str | None:
        """Feed one line (without its line end); the error class when it completed a mid-stream error event.
        Raises TooManyEvents at the event cap (every `data:` line counts, joined or not: each costs memory)."""
        if line.startswith("data:"):
            self.lines += 1
            if self.lines > self.max_events:
                raise TooManyEvents(f"more than {self.max_events} stream events")
            value = line[5:].strip()
            if not self.pending and (value == "[DONE]" or (value.startswith("{") and value.endswith("}"))):
                return self._emit(value)
            self.pending.append(value)
        elif not line and self.pending:
            value, self.pending = "\n".join(self.pending), []
            return self._emit(value)
        return None

    def end(self, mode: str) -> str | None:
        """The stream is over: "stream_truncated" unless it reached its surface's terminal event."""
        if self.pending:  # an event the stream ended inside: kept, as it came
            self._emit("\n".join(self.pending))
            self.pending = []
        return None if surface_for(mode).stream_complete(self.chunks) else "stream_truncated"

    def _emit(self, value: str) -> str | None:
        self.chunks.append(value)
        return _stream_error(value)


def sse_text(text: str, chunks: list[str], mode: str = REFERENCE_MODE, max_events: int = MAX_STREAM_EVENTS) -> str | None:
    """`_read_sse` for a whole SSE body already read (a stream served under a JSON Content-Type)."""
    ev = _Events(chunks, max_events)
    try:
        for line in text.split("\n"):
            if err := ev.line(line.rstrip("\r")):
                return err
    except TooManyEvents:
        return TOO_MANY_EVENTS
    return ev.end(mode)


async def _read_sse(resp: Any, limit: int, chunks: list[str], mode: str = REFERENCE_MODE, max_events: int = MAX_STREAM_EVENTS) -> str | None:
    """SSE `data:` payloads into `chunks` (kept on failure); an error class or None."""
    try:
        return await _read_sse_events(resp, limit, _Events(chunks, max_events), mode)
    except TooManyEvents:
        return TOO_MANY_EVENTS


async def _read_sse_events(resp: Any, limit: int, ev: _Events, mode: str) -> str | None:
    buf = bytearray()  # amortized appends: a 60 MB line without a newline must not cost quadratic copying
    async for b in _bytes(resp, limit):
        buf += b
        if b"\n" not in b:
            continue
        *lines, rest = bytes(buf).split(b"\n")
        buf = bytearray(rest)
        for raw in lines:
            if err := ev.line(raw.decode("utf-8", errors="replace").rstrip("\r")):
                return err
    if err := ev.line(buf.decode("utf-8", errors="replace").rstrip("\r")):
        return err
    return ev.end(mode)
