"""Raw wire bytes -> `Parsed`. Pure; no network.

A stream is reassembled into the same shape as a non-streamed response so one
scorer serves both modes. Wire facts that the reassembled shape cannot show
(index collisions, a missing finish_reason) go into `Parsed.extra`.
"""

from __future__ import annotations

import json
from typing import Any

from .types import Exchange, Parsed


class MalformedBody(ValueError):
    """The body is not a chat completion at all."""


def _reasoning(msg: dict[str, Any]) -> str | None:
    # vLLM/SGLang/llama.cpp use reasoning_content; some newer servers use reasoning.
    r = msg.get("reasoning_content")
    if r is None:
        r = msg.get("reasoning")
    return r if isinstance(r, str) else None


def parse_body(text: str | None) -> Parsed:
    try:
        data = json.loads(text or "")
    except json.JSONDecodeError as e:
        raise MalformedBody(f"body is not JSON: {e.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise MalformedBody("no choices in body")
    choice = data["choices"][0]
    if not isinstance(choice, dict):
        raise MalformedBody("choice is not an object")
    msg = choice.get("message") or {}
    if "message" not in choice and isinstance(choice.get("text"), str):
        msg = {"content": choice["text"]}  # a /v1/completions response (the dual path)
    lp = choice.get("logprobs")
    return Parsed(
        content=msg.get("content") if isinstance(msg.get("content"), str) else None,
        reasoning=_reasoning(msg),
        tool_calls=msg.get("tool_calls"),
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage") if isinstance(data.get("usage"), dict) else None,
        logprobs=lp.get("content") if isinstance(lp, dict) else None,
    )


def parse_chunks(chunks: list[str]) -> Parsed:
    content: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    ids_per_index: dict[int, set[str]] = {}
    logprobs: list[dict[str, Any]] = []
    finish_reason = None
    usage = None
    saw_content = saw_reasoning = False
    bad_chunks = 0
    for raw in chunks:
        if raw == "[DONE]":
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            bad_chunks += 1
            continue
        if not isinstance(data, dict):
            bad_chunks += 1
            continue
        if isinstance(data.get("usage"), dict):
            usage = data["usage"]
        for choice in data.get("choices") or []:
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                content.append(delta["content"])
                saw_content = True
            r = _reasoning(delta)
            if r is not None:
                reasoning.append(r)
                saw_reasoning = True
            for tc in delta.get("tool_calls") or []:
                idx = tc.get("index", 0)
                slot = calls.setdefault(idx, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if tc.get("id"):
                    ids_per_index.setdefault(idx, set()).add(tc["id"])
                    slot["id"] = slot["id"] or tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    slot["function"]["name"] += fn["name"]
                if fn.get("arguments"):
                    slot["function"]["arguments"] += fn["arguments"]
            lp = choice.get("logprobs")
            if isinstance(lp, dict) and isinstance(lp.get("content"), list):
                logprobs.extend(lp["content"])
            if choice.get("finish_reason"):
                finish_reason = choice["finish_reason"]
    extra: dict[str, Any] = {}
    collided = sorted(i for i, ids in ids_per_index.items() if len(ids) > 1)
    if collided:
        extra["index_collisions"] = collided
    if bad_chunks:
        extra["bad_chunks"] = bad_chunks
    return Parsed(
        content="".join(content) if saw_content else None,
        reasoning="".join(reasoning) if saw_reasoning else None,
        tool_calls=[calls[i] for i in sorted(calls)] or None,
        finish_reason=finish_reason,
        usage=usage,
        logprobs=logprobs or None,
        extra=extra,
    )


def parse_exchange(ex: Exchange) -> Parsed:
    if ex.chunks is not None and ex.body is None:
        return parse_chunks(ex.chunks)
    return parse_body(ex.body)
