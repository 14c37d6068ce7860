"""A context limit for the scripted server (a responder wrapper): prompts beyond N tokens are silently cut, or refused with a 400.

Cutting keeps the end of the prompt (left truncation, what an engine with a too-small
context and truncation on does): the question survives, the facts at the start do not,
and `usage.prompt_tokens` reports the cut prompt. Refusing answers the way llama-server
does (`exceed_context_size_error`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable

MODES = ("truncate", "reject")


@dataclass(frozen=True)
class ContextLimit:
    """The server's context: prompts over `tokens` (the server's own count) are cut or refused."""

    tokens: int
    """Largest prompt served as is."""
    mode: str = "truncate"
    """truncate (silently, from the start) | reject (HTTP 400)."""

    @staticmethod
    def parse(text: str) -> "ContextLimit":
        """`N` or `N:truncate` or `N:reject`."""
        n, _, mode = text.partition(":")
        if not n.isdigit() or int(n) < 1 or (mode or "truncate") not in MODES:
            raise ValueError(f"--context-limit: want N[:{'|'.join(MODES)}], got {text!r}")
        return ContextLimit(int(n), mode or "truncate")


def _pieces(text: str) -> list[str]:
    return re.findall(r"\s*(?:\w+|[^\w\s])\s*", text)


def apply(limit: ContextLimit, req: dict[str, Any], count: Any) -> dict[str, Any] | str:
    """The request as the server sees it after its context limit; a str is the 400 error message.

    `count` is the server's token counter for a whole request.
    """
    n = count(req)
    if n <= limit.tokens:
        return req
    if limit.mode == "reject":
        return f"request ({n} tokens) exceeds the available context size ({limit.tokens} tokens)"
    msgs = [dict(m) for m in req.get("messages") or []]
    last = next((m for m in reversed(msgs) if m.get("role") == "user" and isinstance(m.get("content"), str)), None)
    if last is None:
        return req
    pieces = _pieces(last["content"])
    keep = max(1, len(pieces) - (n - limit.tokens))
    last["content"] = "".join(pieces[-keep:])
    return {**req, "messages": msgs}


def error_body(message: str) -> str:
    return json.dumps({"error": {"code": 400, "message": message, "type": "exceed_context_size_error"}})


def limited(responder: Callable[[dict[str, Any]], Any], limit: ContextLimit) -> Callable[[dict[str, Any]], Any]:
    """A scripted-server responder behind a context limit: `Script(limited(responder, ContextLimit(2048)))`.

    The responder sees the cut request, and `usage.prompt_tokens` counts it, as a real engine's would;
    in reject mode an over-long prompt gets llama-server's 400 instead.
    """
    from .server import Reply, prompt_tokens

    def reply(req: dict[str, Any]) -> Any:
        seen = apply(limit, req, prompt_tokens)
        if isinstance(seen, str):
            return Reply(status=400, body=error_body(seen))
        r = responder(seen)
        if r.usage == "auto" and seen is not req:
            pt = prompt_tokens(seen)
            ct = len(re.findall(r"\w+|[^\w\s]", r.content or ""))
            r = Reply(**{**r.__dict__, "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}})
        return r

    return reply
