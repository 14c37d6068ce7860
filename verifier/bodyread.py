"""Reading a response body with a cap on its decoded size: whole (read_capped) or as SSE `data:` payloads (_read_sse).

Split from endpoint.py, which sends; these only read what came back.
"""

from __future__ import annotations

from typing import Any

from .jsonsafe import TooDeep, loads_bounded
from .surfaces import stream_complete


class TooLarge(Exception):
    """The decoded response passed its size cap."""


async def _bytes(resp: Any, limit: int):
    """Decoded body bytes, counted as they inflate: a bomb stops at `limit`, not at the end of memory."""
    total = 0
    # No Content-Encoding: the raw bytes are the decoded bytes, without httpx's decoder and re-chunker.
    chunks = resp.aiter_raw() if "content-encoding" not in resp.headers else resp.aiter_bytes()
    async for b in chunks:
        total += len(b)
        if total > limit:
            raise TooLarge(f"response over {limit} bytes")
        yield b


def _charset(resp: Any) -> str:
    # `resp.encoding` parses Content-Type with the email package (~0.1 ms): only for a charset other than UTF-8.
    ct = resp.headers.get("content-type", "").lower()
    plain = "charset" not in ct or ct.replace(" ", "").endswith(("charset=utf-8", 'charset="utf-8"'))
    return "utf-8" if plain else (resp.encoding or "utf-8")


async def read_capped(resp: Any, limit: int) -> str:
    parts = [b async for b in _bytes(resp, limit)]
    return b"".join(parts).decode(_charset(resp), errors="replace")


def _stream_error(payload: str) -> bool:
    """A mid-stream `data: {"error": ...}` event: what overloaded servers send instead of a status code."""
    if '"error"' not in payload:
        return False
    try:
        d = loads_bounded(payload)
    except (ValueError, TooDeep):
        return False
    return isinstance(d, dict) and d.get("error") is not None and not d.get("choices")


async def _read_sse(resp: Any, limit: int, chunks: list[str], mode: str = "chat") -> str | None:
    """SSE `data:` payloads into `chunks` (kept on failure); an error class or None.

    A one-line JSON object (or `[DONE]`) is a payload as soon as its line ends: every server we know sends those,
    and a stream whose events are not separated by blank lines still reads line by line. Any other `data:` line
    waits for the blank line that ends its event, and the event's lines are joined with newlines, as the SSE spec
    and the openai SDK's decoder do: valid JSON spread over several `data:` lines is one payload, not bad chunks.
    """
    buf = bytearray()  # amortized appends: a 60 MB line without a newline must not cost quadratic copying
    pending: list[str] = []

    def payload(value: str) -> bool:
        chunks.append(value)
        return _stream_error(value)

    async for b in _bytes(resp, limit):
        buf += b
        if b"\n" not in b:
            continue
        *lines, rest = bytes(buf).split(b"\n")
        buf = bytearray(rest)
        for raw in lines:
            line = raw.decode("utf-8", errors="replace").rstrip("\r")
            if line.startswith("data:"):
                value = line[5:].strip()
                if not pending and (value == "[DONE]" or (value.startswith("{") and value.endswith("}"))):
                    if payload(value):
                        return "stream_error"
                else:
                    pending.append(value)
            elif not line and pending:
                value, pending = "\n".join(pending), []
                if payload(value):
                    return "stream_error"
    tail = buf.decode("utf-8", errors="replace").rstrip("\r")
    if tail.startswith("data:"):
        pending.append(tail[5:].strip())
    if pending:  # an event the stream ended inside: kept, as it came
        payload("\n".join(pending))
    if not stream_complete(mode, chunks):
        return "stream_truncated"
    return None
