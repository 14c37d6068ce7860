"""Serving adapters: a request rewrite a deployment is served behind, recorded with the run and the golden.

Some engines return parsed tool calls from a small model only with help in front of them (docs/engines.md, "Tool
calls"): llama-server parses a Hermes `<tool_call>` that an assistant prefill opened, vLLM enforces
`tool_choice: "required"` by grammar. A golden recorded behind such a rewrite is compared only with candidates
served behind the same one: `run` and `gate` take `--serving-adapter NAME`, the client applies it to every
chat-completions request it sends (after the journal recorded the request as the suite built it, as a proxy in
front of the endpoint would), run.json's `endpoint.serving_adapter` records it, `bless` carries it to the golden,
and `gate` refuses a candidate served otherwise (app/gate.check_serving_adapter).

`ADAPTERS` is the whole catalogue, a plain dict. Each rewrite is pure: it returns a new body, or None when the
request is not one it changes. The test bed's proxy adapters (testbed/engine_tools.py) are these same rewrites.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

TOOL_CALL_OPENING = '<tool_call>\n{"name": "'
"""The assistant prefill that opens a Hermes tool call (llama-server continues it and parses the whole call)."""

CHAT_PATH = "/chat/completions"
"""Adapters rewrite chat-completions requests only (the route every tool-call golden of this project was recorded on)."""


def _declares_tools(body: dict[str, Any]) -> bool:
    return bool(body.get("tools"))


def _messages(body: dict[str, Any]) -> list[Any] | None:
    msgs = body.get("messages")
    return msgs if isinstance(msgs, list) else None


def prefill_tool_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """With tools declared and no assistant message last: the body with an assistant message opening a call."""
    msgs = _messages(body)
    if not _declares_tools(body) or msgs is None or (msgs and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant"):
        return None
    return {**body, "messages": [*copy.deepcopy(msgs), {"role": "assistant", "content": TOOL_CALL_OPENING}]}


def prefill_turn_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """With tools declared and a user message last (the first request of a user turn): the same prefill. After
    tool results the model answers freely, so a conversation can end its turn."""
    msgs = _messages(body)
    if not _declares_tools(body) or not msgs or not isinstance(msgs[-1], dict) or msgs[-1].get("role") != "user":
        return None
    return {**body, "messages": [*copy.deepcopy(msgs), {"role": "assistant", "content": TOOL_CALL_OPENING}]}


def require_tool_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """With tools declared and tool_choice "auto" (or unset): the body with tool_choice "required"."""
    if not _declares_tools(body) or body.get("tool_choice") not in (None, "auto"):
        return None
    return {**copy.deepcopy(body), "tool_choice": "required"}


def require_turn_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """tool_choice "required" on the first request of each user turn only (a user message last)."""
    msgs = _messages(body)
    if not msgs or not isinstance(msgs[-1], dict) or msgs[-1].get("role") != "user":
        return None
    return require_tool_call(body)


@dataclass(frozen=True)
class ServingAdapter:
    """One entry of the catalogue: its name (what run.json and golden.json record), what it does, for which engine."""

    name: str
    description: str
    engine: str
    """The engine it was made for, and why (a reader choosing one)."""
    rewrite: Callable[[dict[str, Any]], dict[str, Any] | None]


ADAPTERS: dict[str, ServingAdapter] = {a.name: a for a in (
    ServingAdapter("tool-call-prefill", f"with tools declared, an assistant message {TOOL_CALL_OPENING!r} is appended",
                   "llama-server: a 0.5B model writes bare JSON; it continues the prefill, and the Hermes parser parses the call",
                   prefill_tool_call),
    ServingAdapter("turn-call-prefill", "the same prefill, only when a user message is last (free after tool results)",
                   "llama-server, multi-turn conversations", prefill_turn_call),
    ServingAdapter("tool-choice-required", 'with tools declared, tool_choice "auto" (or unset) becomes "required"',
                   "vLLM: its grammar backend enforces the call (a prefill is not parsed there)", require_tool_call),
    ServingAdapter("turn-call-required", 'tool_choice "required" only when a user message is last (free after tool results)',
                   "vLLM, multi-turn conversations", require_turn_call),
)}


def adapter_named(name: str) -> ServingAdapter:
    """The adapter called `name`; ValueError naming the catalogue otherwise."""
    try:
        return ADAPTERS[name]
    except KeyError:
        raise ValueError(f"unknown serving adapter {name!r}; known: {', '.join(ADAPTERS)}") from None


def apply(name: str | None, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body to send on `path` behind the adapter `name` (None: no adapter, the body as it is)."""
    if name is None or path != CHAT_PATH:
        return body
    return adapter_named(name).rewrite(body) or body
