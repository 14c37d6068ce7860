"""The fault catalogue on the Responses and Messages surfaces: every chat fault, unchanged, by translation.

A fault is written once, against chat shapes (faults.py). On another surface the proxy wraps it: the
request is read as the chat request it means, the chat fault edits that, and only the fields the edit
moved are written back in the surface's spelling; a response body or a whole event stream is turned
into chat shape, mutated, and rendered back. So "tool markup in content" becomes markup in
`output_text` / a text block, "index 0 for every call" a reused output_index / content block index,
"usage dropped" a `response.completed` / `message_delta` without usage, and so on.

Not every chat fault has a spelling on every surface: Responses has no finish reason for tool calls
(its `status` is `completed` either way), so `finish_reason_wrong` only shows on Messages; docs/reference/surfaces.md
table lists which checks apply where.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from verifier.surfaces.registry import translate
from . import text_faults
from .mutation import Change, Fault, StreamMutator, run_stream
from .surface_render import body_to_chat, render_body, to_chat_request
from .surface_stream import events_to_chat_chunks, render_events

PATHS = {"/chat/completions": "chat", "/responses": "responses", "/messages": "messages", "/messages/count_tokens": "messages"}
"""POST paths the proxy reads (count_tokens is Messages traffic: a fault on that surface sees it too)."""

# Multi-turn only, so kept out of the catalogue (whose every entry must move a single-turn golden):
# pass it to Proxy as (DROP_REASONING_HISTORY, rate).
DROP_REASONING_HISTORY = Fault(
    "drop_reasoning_history", "request: reasoning of earlier assistant turns removed from the history",
    "SGLang #19257 (thinking dropped on the Messages path); reasoning vs reasoning_content mismatches on replay",
    "prompt_tokens fingerprint on later turns (multiturn suite)", request=text_faults.drop_reasoning_history)


def surface_for(path: str) -> str | None:
    """The surface a POST path speaks, or None for paths the proxy only forwards."""
    p = path.rstrip("/")
    return next((s for suffix, s in sorted(PATHS.items(), key=lambda x: -len(x[0])) if p.endswith(suffix)), None)


def sse_frame(surface: str | None, payload: str) -> bytes:
    """One SSE event; on Responses and Messages with its `event:` line (SDKs dispatch on it), named by its `type`."""
    if surface in ("responses", "messages"):
        try:
            kind = json.loads(payload).get("type")
        except (ValueError, AttributeError):
            kind = None
        if isinstance(kind, str):
            return f"event: {kind}\ndata: {payload}\n\n".encode()
    return f"data: {payload}\n\n".encode()


_VERBATIM = ("stream",)


def _request(fault: Fault, surface: str):
    def edit(body: dict[str, Any]) -> Change | None:
        chat = to_chat_request(surface, body)
        ch = fault.request(chat) if fault.request else None
        if ch is None:
            return None
        before, after = translate(surface, chat), translate(surface, ch.value)
        new = dict(body)
        for k in before:
            if k not in after:
                new.pop(k, None)
            elif after[k] != before[k]:
                new[k] = after[k]
        for k in after.keys() - before.keys():
            new[k] = after[k]
        for k in _VERBATIM:  # spelled alike on every surface, and not carried by `translate`
            if k in ch.value:
                new[k] = ch.value[k]
            elif k in chat:
                new.pop(k, None)
        return Change(new, ch.before, ch.after, ch.count) if new != body else None

    return edit


def _response(fault: Fault, surface: str):
    def edit(body: dict[str, Any]) -> Change | None:
        if "output" not in body and "content" not in body:
            return None  # an error body or something else: not ours to rewrite
        ch = fault.response(body_to_chat(surface, body)) if fault.response else None
        if ch is None:
            return None
        return Change(render_body(surface, ch.value), ch.before, ch.after, ch.count)

    return edit


class SurfaceStream(StreamMutator):
    """Holds a whole surface stream, runs a chat stream mutator over its chat translation, renders it back."""

    def __init__(self, surface: str, inner: StreamMutator) -> None:
        super().__init__()
        self.surface, self.inner = surface, inner
        self.held: list[str] = []
        self.model: Any = None

    @property  # type: ignore[override]
    def changes(self) -> list[tuple[str, str]]:
        return self.inner.changes

    @changes.setter
    def changes(self, _: Any) -> None:
        pass

    def feed(self, payload: str) -> list[str]:
        if self.model is None and ('"message_start"' in payload or '"response.created"' in payload):
            try:
                d = json.loads(payload)
                self.model = (d.get("message") or d.get("response") or {}).get("model")
            except ValueError:
                pass
        self.held.append(payload)
        return []

    def flush(self) -> list[str]:
        if self._ended:
            return []
        self._ended = True
        chat = run_stream([self.inner], events_to_chat_chunks(self.surface, self.held))
        return render_events(self.surface, chat, self.model)


def on_surface(fault: Fault, surface: str) -> Fault:
    """The same fault, acting on `surface` traffic (chat: the fault itself; a native fault only on its own surfaces)."""
    if fault.native:
        return fault if surface in fault.native else replace(fault, request=None, response=None, stream=None)
    if surface == "chat":
        return fault
    inner = fault.stream
    return replace(
        fault,
        request=_request(fault, surface) if fault.request else None,
        response=_response(fault, surface) if fault.response else None,
        stream=(lambda: SurfaceStream(surface, inner())) if inner else None,
    )
