"""OpenAI Responses and Anthropic Messages wire bytes -> the one `Parsed` form. Pure; no network.

Bodies and event streams of both surfaces land in the chat shape (content, reasoning, tool calls with
JSON-string arguments, finish_reason, usage, logprobs), so every scorer and most contract checks work
unchanged. What the chat shape cannot show (a function_call without `call_id`, a tool `input` that is
not an object, a thinking block without signature, usage missing from the final event) goes into
`Parsed.extra` for contract_surfaces.py.

Usage is normalized so the prompt-token fingerprint compares like with like: Anthropic's `input_tokens`
excludes cached tokens (llama-server with SmolLM2: a 32-token prompt sent twice reports input_tokens 1 +
cache_read_input_tokens 31), so prompt_tokens = input + cache_read + cache_creation. The surface's own
usage object is kept under `usage["surface"]`.
"""

from __future__ import annotations

import json
from typing import Any

from verifier.jsonsafe import TooDeep, loads_bounded, stream_objects
from verifier.types import Parsed

STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                "refusal": "content_filter", "pause_turn": "pause_turn", "model_context_window_exceeded": "length"}
"""Anthropic stop_reason -> chat finish_reason; unknown values pass through as they came."""
INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
"""Responses `incomplete_details.reason` -> chat finish_reason."""
RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
REASONING_EVENTS = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta", "response.reasoning.delta")


class SurfaceMalformed(ValueError):
    """The body is not a response of the surface it was sent to."""


def _load(text: str | None) -> Any:
    try:
        return loads_bounded(text or "")
    except TooDeep:
        raise
    except json.JSONDecodeError as e:
        raise SurfaceMalformed(f"body is not JSON: {e.msg}") from None


def _int(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


def responses_usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    pt, ct = u.get("input_tokens"), u.get("output_tokens")
    out: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct,
                           "total_tokens": u.get("total_tokens", _int(pt) + _int(ct)), "surface": u}
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens") if isinstance(u.get("input_tokens_details"), dict) else None
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def messages_usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    cache_read, cache_new = _int(u.get("cache_read_input_tokens")), _int(u.get("cache_creation_input_tokens"))
    pt = u.get("input_tokens")
    prompt = pt + cache_read + cache_new if isinstance(pt, int) else pt
    ct = u.get("output_tokens")
    return {"prompt_tokens": prompt, "completion_tokens": ct, "total_tokens": _int(prompt) + _int(ct),
            "prompt_tokens_details": {"cached_tokens": cache_read}, "surface": u}


def _call(call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# ---------------------------------------------------------------- Responses


def _responses_finish(resp: dict[str, Any], has_calls: bool) -> str | None:
    status = resp.get("status")
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    if status == "incomplete":
        reason = (resp.get("incomplete_details") or {}).get("reason") if isinstance(resp.get("incomplete_details"), dict) else None
        return INCOMPLETE.get(reason, "length")
    return status if isinstance(status, str) else None


def _responses_output(output: list[Any], extra: dict[str, Any]) -> tuple[list[str], list[str], list[dict], list[dict]]:
    text, reasoning, calls, logprobs = [], [], [], []
    for item in output:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("type") in ("output_text", "refusal"):
                    text.append(part.get("text") or part.get("refusal") or "")
                    if isinstance(part.get("logprobs"), list):
                        logprobs.extend(part["logprobs"])
        elif kind == "reasoning":
            for part in (item.get("content") or []) + (item.get("summary") or []):
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    reasoning.append(part["text"])
        elif kind == "function_call":
            if not item.get("call_id"):
                extra["function_call_without_call_id"] = extra.get("function_call_without_call_id", 0) + 1
            calls.append(_call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return text, reasoning, calls, logprobs


def parse_responses_body(text: str | None) -> Parsed:
    data = _load(text)
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise SurfaceMalformed("no output list in Responses body")
    extra: dict[str, Any] = {"surface_status": data.get("status")}
    texts, reasoning, calls, logprobs = _responses_output(data["output"], extra)
    return Parsed(content="".join(texts) if texts else None, reasoning="".join(reasoning) if reasoning else None,
                  tool_calls=calls or None, finish_reason=_responses_finish(data, bool(calls)),
                  usage=responses_usage(data.get("usage")), logprobs=logprobs or None, extra=extra)


class _ResponsesStream:
    """Reassembles the Responses event sequence by output_index, as chat streams are by tool-call index."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.logprobs: list[dict] = []
        self.items: dict[int, dict[str, Any]] = {}
        self.item_ids: dict[int, set[str]] = {}
        self.final: dict[str, Any] | None = None
        self.extra: dict[str, Any] = {}
        self.saw_text = self.saw_reasoning = False

    def feed(self, ev: dict[str, Any]) -> None:
        t = ev.get("type")
        idx = ev.get("output_index", 0)
        if t == "response.output_item.added" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            self.item_ids.setdefault(idx, set()).add(str(item.get("id") or item.get("call_id") or len(self.item_ids.get(idx, ()))))
            if item.get("type") == "function_call":
                slot = self.items.setdefault(idx, _call(item.get("call_id"), "", ""))
                slot["id"] = slot["id"] or item.get("call_id")
                slot["function"]["name"] += item.get("name") or ""
                slot["function"]["arguments"] += item.get("arguments") or ""
        elif t == "response.output_text.delta" and isinstance(ev.get("delta"), str):
            self.text.append(ev["delta"])
            self.saw_text = True
            if isinstance(ev.get("logprobs"), list):
                self.logprobs.extend(ev["logprobs"])
        elif t in REASONING_EVENTS and isinstance(ev.get("delta"), str):
            self.reasoning.append(ev["delta"])
            self.saw_reasoning = True
        elif t == "response.function_call_arguments.delta" and isinstance(ev.get("delta"), str):
            self.items.setdefault(idx, _call(None, "", ""))["function"]["arguments"] += ev["delta"]
        elif t == "response.output_item.done" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if item.get("type") == "function_call" and idx in self.items:
                slot = self.items[idx]
                slot["id"] = slot["id"] or item.get("call_id")
                if not slot["function"]["arguments"] and isinstance(item.get("arguments"), str):
                    slot["function"]["arguments"] = item["arguments"]
        elif t in RESPONSES_TERMINAL and isinstance(ev.get("response"), dict):
            self.final = ev["response"]
        elif t == "error":
            self.extra["stream_error_event"] = str(ev.get("message") or ev.get("code"))[:120]

    def parsed(self) -> Parsed:
        final = self.final or {}
        extra = dict(self.extra)
        if self.final is None:
            extra["terminal_event_missing"] = "response.completed"
        elif not isinstance(final.get("usage"), dict):
            extra["usage_missing_in"] = "response.completed"
        extra["surface_status"] = final.get("status")
        collided = sorted(i for i, ids in self.item_ids.items() if len(ids) > 1)
        if collided:
            extra["index_collisions"] = collided
        text, reasoning, logprobs = self.text, self.reasoning, self.logprobs
        if not self.saw_text and not self.saw_reasoning and isinstance(final.get("output"), list):
            text, reasoning, _, logprobs = _responses_output(final["output"], {})  # a server that sends no deltas
        calls = [self.items[i] for i in sorted(self.items)]
        missing = sum(1 for c in calls if not c["id"])
        if missing:
            extra["function_call_without_call_id"] = missing
        return Parsed(content="".join(text) if (text or self.saw_text) else None,
                      reasoning="".join(reasoning) if (reasoning or self.saw_reasoning) else None,
                      tool_calls=calls or None, finish_reason=_responses_finish(final, bool(calls)),
                      usage=responses_usage(final.get("usage")), logprobs=logprobs or None, extra=extra)


# ---------------------------------------------------------------- Anthropic Messages


def _tool_input(block: dict[str, Any], extra: dict[str, Any]) -> str:
    val = block.get("input")
    if isinstance(val, dict):
        return json.dumps(val, ensure_ascii=False)
    extra["tool_input_not_object"] = f"{block.get('name')}: {type(val).__name__}"
    return val if isinstance(val, str) else json.dumps(val)


def _map_stop(stop: Any, extra: dict[str, Any]) -> str | None:
    extra["stop_reason"] = stop
    return STOP_REASONS.get(stop, stop) if isinstance(stop, str) else None


def parse_messages_body(text: str | None) -> Parsed:
    data = _load(text)
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise SurfaceMalformed("no content list in Messages body")
    extra: dict[str, Any] = {}
    texts, thinking, calls = [], [], []
    unsigned = 0
    for b in data["content"]:
        if not isinstance(b, dict):
            continue
        if b.get("type") == "text":
            texts.append(b.get("text") or "")
        elif b.get("type") == "thinking":
            thinking.append(b.get("thinking") or "")
            unsigned += not b.get("signature")
        elif b.get("type") == "tool_use":
            calls.append(_call(b.get("id"), b.get("name"), _tool_input(b, extra)))
    if unsigned:
        extra["thinking_without_signature"] = unsigned
    return Parsed(content="".join(texts) if texts else None, reasoning="".join(thinking) if thinking else None,
                  tool_calls=calls or None, finish_reason=_map_stop(data.get("stop_reason"), extra),
                  usage=messages_usage(data.get("usage")), extra=extra)


class _MessagesStream:
    """Reassembles message_start / content_block_* / message_delta by block index."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.order: list[int] = []
        self.collisions: set[int] = set()
        self.usage: dict[str, Any] = {}
        self.stop: Any = None
        self.extra: dict[str, Any] = {}
        self.saw_delta_usage = self.saw_delta = self.saw_stop_event = False

    def feed(self, ev: dict[str, Any]) -> None:
        t = ev.get("type")
        idx = ev.get("index", 0)
        if t == "message_start" and isinstance(ev.get("message"), dict):
            if isinstance(ev["message"].get("usage"), dict):
                self.usage.update(ev["message"]["usage"])
        elif t == "content_block_start" and isinstance(ev.get("content_block"), dict):
            cb = ev["content_block"]
            if idx in self.blocks:
                self.collisions.add(idx)
            kind = cb.get("type")
            self.blocks[idx] = {"type": kind, "text": cb.get("text") or cb.get("thinking") or "", "id": cb.get("id"),
                                "name": cb.get("name"), "json": "", "start_input": cb.get("input"),
                                "signature": cb.get("signature") or ""}
            self.order.append(idx)
        elif t == "content_block_delta" and isinstance(ev.get("delta"), dict):
            d = ev["delta"]
            b = self.blocks.setdefault(idx, {"type": None, "text": "", "id": None, "name": None, "json": "", "start_input": None, "signature": ""})
            if d.get("type") == "text_delta":
                b["text"] += d.get("text") or ""
            elif d.get("type") == "thinking_delta":
                b["text"] += d.get("thinking") or ""
            elif d.get("type") == "input_json_delta":
                b["json"] += d.get("partial_json") or ""
            elif d.get("type") == "signature_delta":
                b["signature"] += d.get("signature") or ""
        elif t == "message_delta":
            self.saw_delta = True
            if isinstance(ev.get("delta"), dict) and ev["delta"].get("stop_reason") is not None:
                self.stop = ev["delta"]["stop_reason"]
            if isinstance(ev.get("usage"), dict):
                self.saw_delta_usage = True
                self.usage.update({k: v for k, v in ev["usage"].items() if v is not None})
        elif t == "message_stop":
            self.saw_stop_event = True
        elif t == "error":
            err = ev.get("error") if isinstance(ev.get("error"), dict) else {}
            self.extra["stream_error_event"] = str(err.get("message") or err.get("type"))[:120]

    def parsed(self) -> Parsed:
        extra = dict(self.extra)
        texts, thinking, calls = [], [], []
        unsigned = 0
        seen: set[int] = set()
        for idx in self.order:
            if idx in seen:
                continue  # a reused index: the blocks were merged on the wire; collisions says so
            seen.add(idx)
            b = self.blocks[idx]
            if b["type"] == "text":
                texts.append(b["text"])
            elif b["type"] == "thinking":
                thinking.append(b["text"])
                unsigned += not b["signature"]
            elif b["type"] == "tool_use":
                if b["json"] or not isinstance(b["start_input"], dict) or not b["start_input"]:
                    args = b["json"] if b["json"] else "{}"
                else:
                    args = json.dumps(b["start_input"], ensure_ascii=False)
                calls.append(_call(b["id"], b["name"] or "", args))
        if unsigned:
            extra["thinking_without_signature"] = unsigned
        if self.collisions:
            extra["index_collisions"] = sorted(self.collisions)
        if not self.saw_stop_event:
            extra["terminal_event_missing"] = "message_stop"
        if not self.saw_delta_usage:
            extra["usage_missing_in"] = "message_delta"
        return Parsed(content="".join(texts) if texts else None, reasoning="".join(thinking) if thinking else None,
                      tool_calls=calls or None, finish_reason=_map_stop(self.stop, extra),
                      usage=messages_usage(self.usage) if self.usage else None, extra=extra)


def parse_events(surface: str, chunks: list[str]) -> Parsed:
    """SSE `data:` payloads of a Responses or Messages stream -> Parsed (bad payloads counted in extra)."""
    acc: _ResponsesStream | _MessagesStream = _ResponsesStream() if surface == "responses" else _MessagesStream()
    extra: dict[str, Any] = {}
    for ev in stream_objects(chunks, extra):
        acc.feed(ev)
    p = acc.parsed()
    p.extra.update(extra)
    return p


def stream_complete(surface: str, chunks: list[str]) -> bool:
    """Whether a stream reached its surface's terminal event (chat: `[DONE]`)."""
    if not chunks:
        return False
    if surface == "chat" or chunks[-1] == "[DONE]":
        return chunks[-1] == "[DONE]"
    want = ('"message_stop"',) if surface == "messages" else tuple(f'"{t}"' for t in RESPONSES_TERMINAL)
    return any(w in c for c in chunks[-3:] for w in want)
