"""What every API surface provides (`Surface`), its wire modes (`Mode`) and the helpers the surfaces share.

The core (wire, judge, run, attribution, report, app, cli) never branches on a surface or mode name: it looks
the mode up in the registry (registry.py) and asks the adapter. Imports only the base modules (types, jsonsafe).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from verifier.jsonsafe import TooDeep, loads_bounded
from verifier.types import Exchange, Parsed


@dataclass(frozen=True)
class Mode:
    """One wire mode: a route on a surface, streamed or not."""

    name: str
    path: str
    """The route under the base URL, e.g. `/chat/completions`."""
    stream: bool
    ping: dict[str, Any] = field(default_factory=dict)
    """The smallest valid body on this route (without `model` and `stream`), for the preflight."""
    dual_path: bool = False
    """The chat template rendered client-side and sent as a raw prompt (verifier/wire/dualpath.py): needs the
    template the server reports."""


class SurfaceMalformed(ValueError):
    """The body is not a response of the surface it was sent to."""


class Surface(Protocol):
    """One API surface. Request side: `translate` (a suite's chat body -> this surface's body), `request` (the
    runner's rule), `headers`. Response side: `parse_body`, `parse_stream` (raw bytes / SSE payloads -> the one
    `Parsed` form; raise SurfaceMalformed or TooDeep), `stream_complete` (the terminal-event rule),
    `error_shape` / `error_ok` (the surface's error body), `text_deltas` (content pieces as sent). History:
    `assistant_turn`, `tool_results`, `extend` (replaying an answer for the next turn of a conversation)."""

    # The constants are read-only members (properties here, class attributes in a surface), so a surface whose
    # value is narrower (`no_logprobs = None`, two modes) still has this protocol.
    @property
    def name(self) -> str: ...

    @property
    def modes(self) -> tuple[Mode, ...]: ...

    @property
    def error_shape(self) -> str | None:
        """The error body this surface's clients parse (for the `error_shape_wrong` finding); None: not checked."""

    @property
    def no_logprobs(self) -> str | None:
        """Why this surface's answers carry no logprobs (said where drift cannot be measured); None: they can."""

    @property
    def terminal_events(self) -> tuple[str, ...]:
        """The `type`s of the events that end a stream (chat has none: it ends at `[DONE]`)."""

    def headers(self, cfg: Any) -> dict[str, str]: ...

    def translate(self, mode: Mode, body: dict[str, Any]) -> dict[str, Any]: ...

    def request(self, mode: Mode, body: dict[str, Any], extra_body: dict[str, Any]) -> dict[str, Any]: ...

    def parse_body(self, text: str | None) -> Parsed: ...

    def parse_stream(self, chunks: list[str]) -> Parsed: ...

    def stream_complete(self, chunks: list[str]) -> bool: ...

    def error_ok(self, data: Any) -> bool: ...

    def text_deltas(self, event: dict[str, Any]) -> list[str]: ...

    def assistant_turn(self, ex: Exchange, parsed: Callable[[], Parsed]) -> list[dict[str, Any]]: ...

    def tool_results(self, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]: ...

    def extend(self, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]: ...


# ---------------------------------------------------------------- shared helpers


def load(text: str | None) -> Any:
    """A body as JSON; TooDeep passes through, anything else that is not JSON is SurfaceMalformed."""
    try:
        return loads_bounded(text or "")
    except TooDeep:
        raise
    except json.JSONDecodeError as e:
        raise SurfaceMalformed(f"body is not JSON: {e.msg}") from None


def load_or_none(text: str | None) -> Any:
    try:
        return loads_bounded(text or "")
    except (ValueError, TooDeep):
        return None


def events(chunks: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of an SSE stream (`[DONE]` and bad payloads skipped)."""
    out = []
    for c in chunks:
        d = load_or_none(c) if c != "[DONE]" else None
        if isinstance(d, dict):
            out.append(d)
    return out


def terminal_in_tail(chunks: list[str], events_: tuple[str, ...]) -> bool:
    """Whether a stream ends at one of `events_` (looked for in its last three payloads); `[DONE]` last also ends it."""
    if not chunks:
        return False
    if chunks[-1] == "[DONE]":
        return True
    want = tuple(f'"{t}"' for t in events_)
    return any(w in c for c in chunks[-3:] for w in want)


def translated_request(surface: Surface, mode: Mode, body: dict[str, Any], extra_body: dict[str, Any]) -> dict[str, Any]:
    """The runner's rule for a translated surface: extra body is the user's word for this server, in its
    spelling, so it is kept through the translation."""
    return {**surface.translate(mode, {k: v for k, v in body.items() if k not in extra_body}), **extra_body}


class TranslatedSurface:
    """The shared half of a surface reached by translating the suite's chat body (Responses, Messages): the
    translation marks a streaming mode, the runner keeps the extra body through it, and a stream is complete when one
    of `terminal_events` ends it. A subclass gives `to_surface` (chat body -> its body) and `terminal_events`."""

    terminal_events: tuple[str, ...] = ()

    def to_surface(self, body: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def translate(self, mode: Mode, body: dict[str, Any]) -> dict[str, Any]:
        out = self.to_surface(body)
        if mode.stream:
            out["stream"] = True
        return out

    def request(self, mode: Mode, body: dict[str, Any], extra_body: dict[str, Any]) -> dict[str, Any]:
        return translated_request(self, mode, body, extra_body)  # type: ignore[arg-type]

    def stream_complete(self, chunks: list[str]) -> bool:
        return terminal_in_tail(chunks, self.terminal_events)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return ""


def split_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Leading system/developer messages become the surface's system prompt; later ones stay in place."""
    system, i = [], 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        system.append(text_of(messages[i].get("content")))
        i += 1
    return ("\n\n".join(system) if system else None), messages[i:]


def url_of(part: dict[str, Any]) -> str:
    iu = part.get("image_url")
    return iu.get("url", "") if isinstance(iu, dict) else str(iu or "")


def int_or_zero(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
