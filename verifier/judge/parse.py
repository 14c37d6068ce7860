"""Raw wire bytes -> `Parsed`. Pure; no network.

A stream is reassembled into the same shape as a non-streamed response so one
scorer serves both modes. Wire facts that the reassembled shape cannot show
(index collisions, a missing finish_reason) go into `Parsed.extra`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from typing import Any

from verifier.jsonsafe import MAX_JSON_DEPTH, TooDeep, loads_bounded, stream_objects
from verifier.surfaces.translate import is_stream
from verifier.types import Exchange, Parsed

TOO_DEEP = "[json_too_deep]"
"""Stands in for a tool-argument string nested past the limit: scorers that parse it see invalid JSON, not a RecursionError."""
_JSONISH = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class MalformedBody(ValueError):
    """The body is not a chat completion at all."""


def _reasoning(msg: dict[str, Any]) -> str | None:
    # vLLM/SGLang/llama.cpp use reasoning_content; some newer servers use reasoning.
    r = msg.get("reasoning_content")
    if r is None:
        r = msg.get("reasoning")
    return r if isinstance(r, str) else None


def text_too_deep(text: str, max_depth: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON-looking text nests brackets past `max_depth` (outside strings). Cheap when it cannot."""
    if text.count("[") + text.count("{") <= max_depth:
        return False
    d = 0
    for m in _JSONISH.finditer(text):
        c = m.group(0)
        if c in "[{":
            d += 1
            if d > max_depth:
                return True
        elif c in "]}":
            d = max(0, d - 1)
    return False


def _finite_usage(p: Parsed) -> Parsed:
    """NaN/Infinity in `usage` (bare NaN is accepted by Python's parser) are dropped and reported as
    `usage_non_finite`: downstream arithmetic and strict JSON writers never see them."""
    u = p.usage
    if not u:
        return p
    bad = sorted(k for k, v in u.items() if isinstance(v, float) and not math.isfinite(v))
    if not bad:
        return p
    return dataclasses.replace(p, usage={k: v for k, v in u.items() if k not in bad},
                               extra={**p.extra, "usage_non_finite": ", ".join(bad)})


# finish_reason spellings other engines use for the same event (TGI, Anthropic-style gateways, legacy OpenAI):
# benign differences, read as the canonical chat value (the wire value is kept in `extra`).
FINISH_SYNONYMS = {"eos": "stop", "eos_token": "stop", "end_turn": "stop", "stop_sequence": "stop", "end": "stop",
                   "max_tokens": "length", "max_length": "length", "model_length": "length",
                   "tool_use": "tool_calls", "function_call": "tool_calls"}


def _canonical_finish(p: Parsed) -> Parsed:
    fr = p.finish_reason
    if not isinstance(fr, str) or fr not in FINISH_SYNONYMS:
        return p
    return dataclasses.replace(p, finish_reason=FINISH_SYNONYMS[fr], extra={**p.extra, "finish_reason_wire": fr})


def _guard_depth(p: Parsed) -> Parsed:
    """Neutralize text a scorer would parse (structured-output content, tool arguments) when it nests past
    the limit, and say so in `extra` (contract finding `json_too_deep`): never a RecursionError downstream."""
    where = []
    content = p.content
    if content and text_too_deep(content):
        content, where = None, ["content"]
    calls = p.tool_calls
    if isinstance(calls, list):
        fixed = []
        for c in calls:
            fn = c.get("function") if isinstance(c, dict) else None
            if isinstance(fn, dict) and isinstance(fn.get("arguments"), str) and text_too_deep(fn["arguments"]):
                c = {**c, "function": {**fn, "arguments": TOO_DEEP}}
                where.append("tool arguments")
            fixed.append(c)
        calls = fixed
    if not where:
        return p
    return dataclasses.replace(p, content=content, tool_calls=calls, extra={**p.extra, "json_too_deep": ", ".join(sorted(set(where)))})


def parse_body(text: str | None) -> Parsed:
    return _canonical_finish(_finite_usage(_guard_depth(_parse_body(text))))


def _parse_body(text: str | None) -> Parsed:
    try:
        data = loads_bounded(text or "")
    except TooDeep:
        return Parsed(content=None, reasoning=None, tool_calls=None, finish_reason=None, usage=None, logprobs=None,
                      extra={"json_too_deep": "body"})
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
    return _canonical_finish(_finite_usage(_guard_depth(_parse_chunks(chunks))))


class _Stream:
    """What a chat-completions stream has said so far, reassembled by choice delta and tool-call index."""

    def __init__(self) -> None:
        self.content: list[str] = []
        self.reasoning: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.ids_per_index: dict[int, set[str]] = {}
        self.logprobs: list[dict[str, Any]] = []
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.saw_content = self.saw_reasoning = False

    def add_choice(self, choice: dict[str, Any]) -> None:
        delta = choice.get("delta") or {}
        if isinstance(delta.get("content"), str):
            self.content.append(delta["content"])
            self.saw_content = True
        r = _reasoning(delta)
        if r is not None:
            self.reasoning.append(r)
            self.saw_reasoning = True
        for tc in delta.get("tool_calls") or []:
            self.add_tool_call(tc)
        lp = choice.get("logprobs")
        if isinstance(lp, dict) and isinstance(lp.get("content"), list):
            self.logprobs.extend(lp["content"])
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]

    def add_tool_call(self, tc: dict[str, Any]) -> None:
        # Parallel calls are told apart by index; names and arguments arrive in pieces to concatenate.
        idx = tc.get("index", 0)
        slot = self.calls.setdefault(idx, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        if tc.get("id"):
            self.ids_per_index.setdefault(idx, set()).add(tc["id"])
            slot["id"] = slot["id"] or tc["id"]
        fn = tc.get("function") or {}
        if fn.get("name"):
            slot["function"]["name"] += fn["name"]
        if fn.get("arguments"):
            slot["function"]["arguments"] += fn["arguments"]


def _parse_chunks(chunks: list[str]) -> Parsed:
    st = _Stream()
    extra: dict[str, Any] = {}
    for data in stream_objects(chunks, extra):
        if isinstance(data.get("usage"), dict):
            st.usage = data["usage"]
        for choice in data.get("choices") or []:
            st.add_choice(choice)
    collided = sorted(i for i, ids in st.ids_per_index.items() if len(ids) > 1)
    if collided:
        extra["index_collisions"] = collided
    return Parsed(
        content="".join(st.content) if st.saw_content else None,
        reasoning="".join(st.reasoning) if st.saw_reasoning else None,
        tool_calls=[st.calls[i] for i in sorted(st.calls)] or None,
        finish_reason=st.finish_reason,
        usage=st.usage,
        logprobs=st.logprobs or None,
        extra=extra,
    )


def parse_surface(mode: str, body: str | None, chunks: list[str] | None) -> Parsed:
    """A Responses or Messages exchange -> Parsed, through the same depth and finiteness guards as chat."""
    from verifier.surfaces.translate import surface_of
    from verifier.surfaces.parse import SurfaceMalformed, parse_events, parse_messages_body, parse_responses_body

    surface = surface_of(mode)
    try:
        if chunks is not None and body is None:
            p = parse_events(surface, chunks)
        else:
            p = (parse_responses_body if surface == "responses" else parse_messages_body)(body)
    except TooDeep:
        p = Parsed(content=None, reasoning=None, tool_calls=None, finish_reason=None, usage=None, logprobs=None,
                   extra={"json_too_deep": "body"})
    except SurfaceMalformed as e:
        raise MalformedBody(str(e)) from None
    return _canonical_finish(_finite_usage(_guard_depth(p)))


def parse_exchange(ex: Exchange) -> Parsed:
    if ex.mode.startswith(("responses", "messages")):
        p = parse_surface(ex.mode, ex.body, ex.chunks)
    elif ex.chunks is not None and ex.body is None:
        return parse_chunks(ex.chunks)
    else:
        p = parse_body(ex.body)
    if is_stream(ex.mode) and ex.chunks is None and ex.body is not None and ex.status is not None and 200 <= ex.status < 300:
        # A stream was asked for and one JSON body came back: a streaming client (the SDK's iterator) gets nothing.
        p.extra["stream_ignored"] = "stream requested; the server answered with one JSON body"
    return p
