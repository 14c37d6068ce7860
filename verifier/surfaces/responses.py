"""The OpenAI Responses surface: `responses`, `responses-stream` on `/responses`. Pure; no network.

Request: `instructions` from leading system messages, `input` items (`input_text`, `input_image`, `reasoning`,
`function_call`, `function_call_output`), flat function tools, `text.format` for json_schema,
`max_output_tokens`. Response: `output` items, or the event stream reassembled by `output_index`;
`response.completed` (or `.incomplete`) carries status and usage. What the chat shape cannot show (a
function_call without `call_id`, usage missing from the final event) goes into `Parsed.extra` for
judge/contract_surfaces.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from verifier.jsonsafe import stream_objects
from verifier.surfaces.base import (Mode, SurfaceMalformed, call, events, int_or_zero, load, load_or_none, split_system,
                                    TranslatedSurface, text_of, url_of)
from verifier.types import Exchange, Parsed, WireFacts

INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}
"""Responses `incomplete_details.reason` -> chat finish_reason."""
TERMINAL = ("response.completed", "response.incomplete", "response.failed")
REASONING_EVENTS = ("response.reasoning_text.delta", "response.reasoning_summary_text.delta", "response.reasoning.delta")

# Chat keys with a same-named field on the surface; anything else a suite or --extra-body adds that the
# surface does not know is dropped rather than sent (a strict server would 400 on it).
_KEEP = ("model", "temperature", "top_p", "parallel_tool_calls", "metadata", "store", "reasoning",
         "truncation", "user", "service_tier", "top_logprobs")
_PING = {"input": "ping", "max_output_tokens": 16}


# ---------------------------------------------------------------- request


def _content(role: object, content: Any) -> Any:
    if not isinstance(content, list):
        return content if content is not None else ""
    text_type = "output_text" if role == "assistant" else "input_text"
    parts = []
    for p in content:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            parts.append({"type": text_type, "text": p.get("text", "")})
        elif p.get("type") == "image_url":
            img = {"type": "input_image", "image_url": url_of(p)}
            if isinstance(p.get("image_url"), dict) and p["image_url"].get("detail"):
                img["detail"] = p["image_url"]["detail"]
            parts.append(img)
        else:
            parts.append(p)
    return parts


def responses_items(m: dict[str, Any]) -> list[dict[str, Any]]:
    """One chat message -> Responses input items (an assistant turn may give reasoning + message + calls)."""
    role = m.get("role")
    if role == "tool":
        return [{"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": text_of(m.get("content"))}]
    # An explicit `type: message` on every message item: the spec makes it optional, but llama-server (b11434)
    # refuses an assistant item without it ("Cannot determine type of 'item'"), which would drop every few-shot prompt.
    if role != "assistant":
        return [{"type": "message", "role": role, "content": _content(role, m.get("content"))}]
    items: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content", m.get("reasoning"))
    if isinstance(reasoning, str) and reasoning:
        items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]})
    if m.get("content"):
        items.append({"type": "message", "role": "assistant", "content": _content("assistant", m["content"])})
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments", "")})
    return items


def _tool(t: dict[str, Any]) -> dict[str, Any]:
    if t.get("type") != "function":
        return t
    fn = t.get("function") or {}
    out = {"type": "function", "name": fn.get("name")}
    for k in ("description", "parameters", "strict"):
        if k in fn:
            out[k] = fn[k]
    return out


def _tool_choice(tc: Any) -> Any:
    if isinstance(tc, dict) and tc.get("type") == "function":
        return {"type": "function", "name": (tc.get("function") or {}).get("name")}
    return tc


def to_responses(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: body[k] for k in _KEEP if k in body}
    instructions, rest = split_system(body.get("messages") or [])
    if instructions is not None:
        out["instructions"] = instructions
    out["input"] = [item for m in rest for item in responses_items(m)]
    if body.get("tools"):
        out["tools"] = [_tool(t) for t in body["tools"]]
    if "tool_choice" in body:
        out["tool_choice"] = _tool_choice(body["tool_choice"])
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    if limit is not None:
        out["max_output_tokens"] = limit
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        out["text"] = {"format": {"type": "json_schema", **{k: js[k] for k in ("name", "schema", "strict", "description") if k in js}}}
    elif isinstance(rf, dict) and rf.get("type") == "json_object":
        out["text"] = {"format": {"type": "json_object"}}
    if body.get("logprobs") and "top_logprobs" not in out:
        out["top_logprobs"] = 0
    if body.get("logprobs"):
        out["include"] = ["message.output_text.logprobs"]
    return out


# ---------------------------------------------------------------- response


def responses_usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    pt, ct = u.get("input_tokens"), u.get("output_tokens")
    out: dict[str, Any] = {"prompt_tokens": pt, "completion_tokens": ct,
                           "total_tokens": u.get("total_tokens", int_or_zero(pt) + int_or_zero(ct)), "surface": u}
    cached = (u.get("input_tokens_details") or {}).get("cached_tokens") if isinstance(u.get("input_tokens_details"), dict) else None
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def _finish(resp: dict[str, Any], has_calls: bool) -> str | None:
    status = resp.get("status")
    if status == "completed":
        return "tool_calls" if has_calls else "stop"
    if status == "incomplete":
        details = resp.get("incomplete_details")
        reason: Any = details.get("reason") if isinstance(details, dict) else None  # the server's JSON value
        return INCOMPLETE.get(reason, "length")
    return status if isinstance(status, str) else None


def _output(output: list[Any], extra: WireFacts) -> tuple[list[str], list[str], list[dict[str, Any]], list[dict[str, Any]]]:
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
                extra.function_call_without_call_id = (extra.function_call_without_call_id or 0) + 1
            calls.append(call(item.get("call_id"), item.get("name"), item.get("arguments")))
    return text, reasoning, calls, logprobs


def parse_responses_body(text: str | None) -> Parsed:
    data = load(text)
    if not isinstance(data, dict) or not isinstance(data.get("output"), list):
        raise SurfaceMalformed("no output list in Responses body")
    extra = WireFacts(surface_status=data.get("status"))
    texts, reasoning, calls, logprobs = _output(data["output"], extra)
    return Parsed(content="".join(texts) if texts else None, reasoning="".join(reasoning) if reasoning else None,
                  tool_calls=calls or None, finish_reason=_finish(data, bool(calls)),
                  usage=responses_usage(data.get("usage")), logprobs=logprobs or None, extra=extra)


class _Stream:
    """Reassembles the Responses event sequence by output_index, as chat streams are by tool-call index."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.logprobs: list[dict[str, Any]] = []
        self.items: dict[int, dict[str, Any]] = {}
        self.item_ids: dict[int, set[str]] = {}
        self.final: dict[str, Any] | None = None
        self.extra = WireFacts()
        self.saw_text = self.saw_reasoning = False

    def feed(self, ev: dict[str, Any]) -> None:
        t = ev.get("type")
        idx = ev.get("output_index", 0)
        if t == "response.output_item.added" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            self.item_ids.setdefault(idx, set()).add(str(item.get("id") or item.get("call_id") or len(self.item_ids.get(idx, ()))))
            if item.get("type") == "function_call":
                slot = self.items.setdefault(idx, call(item.get("call_id"), "", ""))
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
            self.items.setdefault(idx, call(None, "", ""))["function"]["arguments"] += ev["delta"]
        elif t == "response.output_item.done" and isinstance(ev.get("item"), dict):
            item = ev["item"]
            if item.get("type") == "function_call" and idx in self.items:
                slot = self.items[idx]
                slot["id"] = slot["id"] or item.get("call_id")
                if not slot["function"]["arguments"] and isinstance(item.get("arguments"), str):
                    slot["function"]["arguments"] = item["arguments"]
        elif t in TERMINAL and isinstance(ev.get("response"), dict):
            self.final = ev["response"]
        elif t == "error":
            self.extra.stream_error_event = str(ev.get("message") or ev.get("code"))[:120]

    def parsed(self) -> Parsed:
        final = self.final or {}
        extra = dataclasses.replace(self.extra)
        if self.final is None:
            extra.terminal_event_missing = "response.completed"
        elif not isinstance(final.get("usage"), dict):
            extra.usage_missing_in = "response.completed"
        extra.surface_status = final.get("status")
        collided = sorted(i for i, ids in self.item_ids.items() if len(ids) > 1)
        if collided:
            extra.index_collisions = collided
        text, reasoning, logprobs = self.text, self.reasoning, self.logprobs
        if not self.saw_text and not self.saw_reasoning and isinstance(final.get("output"), list):
            text, reasoning, _, logprobs = _output(final["output"], WireFacts())  # a server that sends no deltas
        calls = [self.items[i] for i in sorted(self.items)]
        missing = sum(1 for c in calls if not c["id"])
        if missing:
            extra.function_call_without_call_id = missing
        return Parsed(content="".join(text) if (text or self.saw_text) else None,
                      reasoning="".join(reasoning) if (reasoning or self.saw_reasoning) else None,
                      tool_calls=calls or None, finish_reason=_finish(final, bool(calls)),
                      usage=responses_usage(final.get("usage")), logprobs=logprobs or None, extra=extra)


def parse_responses_events(chunks: list[str]) -> Parsed:
    """SSE `data:` payloads of a Responses stream -> Parsed (bad payloads counted in extra)."""
    acc = _Stream()
    extra = WireFacts()
    for ev in stream_objects(chunks, extra):
        acc.feed(ev)
    p = acc.parsed()
    p.extra.merge(extra)
    return p


class Responses(TranslatedSurface):
    name = "responses"
    modes = (Mode("responses", "/responses", False, _PING), Mode("responses-stream", "/responses", True, _PING))
    error_shape = '{"error": {"message", ...}}'
    no_logprobs = None
    terminal_events = TERMINAL

    def headers(self, cfg: Any) -> dict[str, str]:
        return {}

    def to_surface(self, body: dict[str, Any]) -> dict[str, Any]:
        return to_responses(body)

    def parse_body(self, text: str | None) -> Parsed:
        return parse_responses_body(text)

    def parse_stream(self, chunks: list[str]) -> Parsed:
        return parse_responses_events(chunks)

    def error_ok(self, data: Any) -> bool:
        return isinstance(data, dict) and isinstance(data.get("error"), dict) and isinstance(data["error"].get("message"), str)

    def text_deltas(self, event: dict[str, Any]) -> list[str]:
        if event.get("type") == "response.output_text.delta" and isinstance(event.get("delta"), str):
            return [event["delta"]]
        return []

    def assistant_turn(self, ex: Exchange, parsed: Callable[[], Parsed]) -> list[dict[str, Any]]:
        """The `output` items as the server emitted them (a stream's from its terminal event)."""
        if ex.chunks is not None and ex.body is None:
            final: dict[str, Any] = next((e["response"] for e in reversed(events(ex.chunks or [])) if e.get("type") in TERMINAL
                          and isinstance(e.get("response"), dict)), {})
            return list(final.get("output") or [])
        return list((load_or_none(ex.body) or {}).get("output") or [])

    def tool_results(self, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
        return [{"type": "function_call_output", "call_id": cid, "output": out} for cid, out in results]

    def extend(self, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
        return {**body, "input": list(body.get("input") or []) + entries}


SURFACE = Responses()
