"""Conversation history on every surface: the assistant's turn replayed exactly as the server emitted it.

A multi-turn client (Codex, Claude Code, an agent loop) sends the assistant's previous output back as
history: chat clients the message with the reasoning under the key the server used (`reasoning_content`
or `reasoning`), Responses clients the `output` items, Messages clients the content blocks with their
thinking signatures. Servers break exactly there (ids they do not recognise, reasoning in a shape they
drop), so the replay keeps the server's shape instead of re-encoding it; each surface's adapter
(verifier/surfaces/) knows its shape. Pure; no network.
"""

from __future__ import annotations

from typing import Any

from verifier.judge.parse import parse_exchange
from verifier.surfaces.registry import surface_for
from verifier.types import Exchange


def assistant_turn(ex: Exchange) -> list[dict[str, Any]]:
    """The history entries (messages or items) that replay this exchange's answer in its surface's shape."""
    return surface_for(ex.mode).assistant_turn(ex, lambda: parse_exchange(ex))


def tool_results(mode: str, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """(call id, output text) pairs -> the history entries that return them to the model."""
    return surface_for(mode).tool_results(results)


def user_turn(mode: str, text: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": text}]


def extend(mode: str, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of `body` with `entries` appended to its history (`input` on Responses, `messages` elsewhere)."""
    return surface_for(mode).extend(body, entries)
