"""Conversation history on every surface: the assistant's turn replayed exactly as the server emitted it.

A multi-turn client (Codex, Claude Code, an agent loop) sends the assistant's previous output back as
history: chat clients the message with the reasoning under the key the server used (`reasoning_content`
or `reasoning`), Responses clients the `output` items, Messages clients the content blocks with their
thinking signatures. Servers break exactly there (ids they do not recognise, reasoning in a shape they
drop), so the replay keeps the server's shape instead of re-encoding it. Pure; no network.
"""

from __future__ import annotations

import json
from typing import Any

from verifier.jsonsafe import TooDeep, loads_bounded
from verifier.judge.parse import parse_exchange
from verifier.surfaces.translate import surface_of
from verifier.surfaces.parse import RESPONSES_TERMINAL
from verifier.types import Exchange
from verifier import jsonsafe

CHAT_MESSAGE_KEYS = ("role", "content", "tool_calls", "reasoning_content", "reasoning")


def _load(text: str | None) -> Any:
    try:
        return loads_bounded(text or "")
    except (ValueError, TooDeep):
        return None


def _events(chunks: list[str]) -> list[dict[str, Any]]:
    out = []
    for c in chunks:
        d = _load(c) if c != "[DONE]" else None
        if isinstance(d, dict):
            out.append(d)
    return out


def _chat_stream_message(ex: Exchange) -> dict[str, Any]:
    p = parse_exchange(ex)
    key = "reasoning" if any('"reasoning":' in c for c in ex.chunks or []) else "reasoning_content"
    msg: dict[str, Any] = {"role": "assistant", "content": p.content}
    if p.reasoning is not None:
        msg[key] = p.reasoning
    if p.tool_calls:
        msg["tool_calls"] = p.tool_calls
    return msg


def _messages_stream_blocks(chunks: list[str]) -> list[dict[str, Any]]:
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for e in _events(chunks):
        i = e.get("index", 0)
        if e.get("type") == "content_block_start" and isinstance(e.get("content_block"), dict):
            blocks[i] = dict(e["content_block"])
        elif e.get("type") == "content_block_delta" and i in blocks and isinstance(e.get("delta"), dict):
            d, b = e["delta"], blocks[i]
            if d.get("type") == "text_delta":
                b["text"] = b.get("text", "") + (d.get("text") or "")
            elif d.get("type") == "thinking_delta":
                b["thinking"] = b.get("thinking", "") + (d.get("thinking") or "")
            elif d.get("type") == "signature_delta":
                b["signature"] = b.get("signature", "") + (d.get("signature") or "")
            elif d.get("type") == "input_json_delta":
                partial[i] = partial.get(i, "") + (d.get("partial_json") or "")
    for i, text in partial.items():
        try:
            blocks[i]["input"] = jsonsafe.loads(text) if text.strip() else {}
        except ValueError:
            blocks[i]["input"] = text  # replayed as broken as it came: the server's own output
    return [blocks[i] for i in sorted(blocks)]


def assistant_turn(ex: Exchange) -> list[dict[str, Any]]:
    """The history entries (messages or items) that replay this exchange's answer in its surface's shape."""
    surface = surface_of(ex.mode)
    streamed = ex.chunks is not None and ex.body is None
    if surface == "chat":
        if streamed:
            return [_chat_stream_message(ex)]
        msg = ((_load(ex.body) or {}).get("choices") or [{}])[0].get("message") or {}
        return [{k: msg[k] for k in CHAT_MESSAGE_KEYS if k in msg}]
    if surface == "responses":
        if streamed:
            final = next((e["response"] for e in reversed(_events(ex.chunks or [])) if e.get("type") in RESPONSES_TERMINAL
                          and isinstance(e.get("response"), dict)), {})
            return list(final.get("output") or [])
        return list((_load(ex.body) or {}).get("output") or [])
    blocks = _messages_stream_blocks(ex.chunks or []) if streamed else list((_load(ex.body) or {}).get("content") or [])
    return [{"role": "assistant", "content": blocks}]


def tool_results(mode: str, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """(call id, output text) pairs -> the history entries that return them to the model."""
    surface = surface_of(mode)
    if surface == "responses":
        return [{"type": "function_call_output", "call_id": cid, "output": out} for cid, out in results]
    if surface == "messages":
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": out} for cid, out in results]}] if results else []
    return [{"role": "tool", "tool_call_id": cid, "content": out} for cid, out in results]


def user_turn(mode: str, text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def extend(mode: str, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of `body` with `entries` appended to its history (`input` on Responses, `messages` elsewhere)."""
    key = "input" if surface_of(mode) == "responses" else "messages"
    history = list(body.get(key) or [])
    for e in entries:
        # Messages wants alternating roles: a user turn right after tool results joins their user message.
        if surface_of(mode) == "messages" and history and history[-1].get("role") == e.get("role") == "user":
            a, b = history[-1]["content"], e["content"]
            a = a if isinstance(a, list) else [{"type": "text", "text": a}]
            b = b if isinstance(b, list) else [{"type": "text", "text": b}]
            history[-1] = {"role": "user", "content": a + b}
        else:
            history.append(e)
    return {**body, key: history}
