"""Chat SSE chunks <-> Responses / Messages event sequences, for the test server and the fault proxy.

`render_events` turns a chat stream (as the test server builds it, or as a chat fault left it) into the
surface's events, one event per chat delta, so per-delta faults (duplicated characters, index 0 for
every call) survive the translation: a chat index collision becomes a reused `output_index` or content
block index. `events_to_chat_chunks` is the way back, for the proxy. Pure; no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from .surface_render import FINISH_TO_STOP, SIGNATURE, _status, _usage_on


def _chunks(chunks: list[str]) -> tuple[list[dict[str, Any]], str | None, dict[str, Any] | None, bool]:
    """Chat chunks -> ([(kind, index, id, name, text)] deltas, finish_reason, usage, saw_finish)."""
    deltas, finish, usage, saw = [], None, None, False
    for raw in chunks:
        if raw == "[DONE]":
            continue
        try:
            d = json.loads(raw)
        except ValueError:
            continue
        if isinstance(d.get("usage"), dict):
            usage = d["usage"]
        for ch in d.get("choices") or []:
            delta = ch.get("delta") or {}
            r = delta.get("reasoning_content", delta.get("reasoning"))
            if isinstance(r, str) and r:
                deltas.append({"kind": "reasoning", "text": r})
            if isinstance(delta.get("content"), str) and delta["content"]:
                lp = (ch.get("logprobs") or {}).get("content") if isinstance(ch.get("logprobs"), dict) else None
                deltas.append({"kind": "text", "text": delta["content"], "logprobs": lp or []})
            for tc in delta.get("tool_calls") or []:
                fn = tc.get("function") or {}
                deltas.append({"kind": "call", "index": tc.get("index", 0), "id": tc.get("id"), "name": fn.get("name"),
                               "text": fn.get("arguments") or ""})
            if "finish_reason" in ch and ch["finish_reason"] is not None:
                finish, saw = ch["finish_reason"], True
    return deltas, finish, usage, saw


def _responses_events(deltas: list[dict[str, Any]], finish: str | None, usage: Any, model: Any, cached: int) -> list[dict[str, Any]]:
    ev: list[dict[str, Any]] = [{"type": "response.created", "response": {"id": "resp_test", "status": "in_progress", "model": model}}]
    items: dict[str, dict[str, Any]] = {}  # open items by key: "reasoning", "text", "call:<index>"
    order: list[tuple[int, dict[str, Any]]] = []
    nxt = 0

    def open_item(key: str, item: dict[str, Any], index: int | None = None) -> dict[str, Any]:
        nonlocal nxt
        oi = nxt if index is None else index
        nxt = max(nxt, oi + 1)
        slot = {"output_index": oi, "item": item}
        items[key] = slot
        order.append((oi, item))
        ev.append({"type": "response.output_item.added", "output_index": oi, "item": dict(item)})
        return slot

    call_base = None
    for d in deltas:
        if d["kind"] == "reasoning":
            s = items.get("reasoning") or open_item("reasoning", {"type": "reasoning", "id": "rs_0", "summary": [], "content": [{"type": "reasoning_text", "text": ""}]})
            s["item"]["content"][0]["text"] += d["text"]
            ev.append({"type": "response.reasoning_text.delta", "output_index": s["output_index"], "item_id": "rs_0", "delta": d["text"]})
        elif d["kind"] == "text":
            s = items.get("text") or open_item("text", {"type": "message", "id": "msg_0", "role": "assistant", "content": [{"type": "output_text", "text": "", "annotations": []}]})
            s["item"]["content"][0]["text"] += d["text"]
            ev.append({"type": "response.output_text.delta", "output_index": s["output_index"], "item_id": "msg_0",
                       "content_index": 0, "delta": d["text"], "logprobs": d["logprobs"]})
        else:
            call_base = nxt if call_base is None else call_base
            oi = call_base + d["index"]
            key = f"call:{d['index']}:{d['id']}" if d["id"] else None
            if key and key not in items:  # a new call (an id repeated at one index opens a second item there)
                items[f"call:{d['index']}"] = open_item(key, {"type": "function_call", "id": f"fc_{len(items)}", "call_id": d["id"],
                                                               "name": d["name"] or "", "arguments": ""}, oi)
            s = items.get(f"call:{d['index']}")
            if s is None:
                continue
            if d["text"]:
                s["item"]["arguments"] += d["text"]
                ev.append({"type": "response.function_call_arguments.delta", "output_index": s["output_index"],
                           "item_id": s["item"]["id"], "delta": d["text"]})
    for oi, item in order:
        ev.append({"type": "response.output_item.done", "output_index": oi, "item": item})
    final: dict[str, Any] = {"id": "resp_test", "object": "response", "model": model, "output": [i for _, i in order], **_status(finish)}
    u = _usage_on("responses", usage, cached)
    if u is not None:
        final["usage"] = u
    kind = "response.incomplete" if final.get("status") == "incomplete" else "response.completed"
    ev.append({"type": kind, "response": final})
    return ev


def _messages_events(deltas: list[dict[str, Any]], finish: str | None, usage: Any, model: Any, cached: int) -> list[dict[str, Any]]:
    u = _usage_on("messages", usage, cached)
    start: dict[str, Any] = {"id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": [],
                             "stop_reason": None, "stop_sequence": None}
    if u is not None:
        start["usage"] = {**u, "output_tokens": 1}
    ev: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    cur: tuple[str, Any] | None = None  # the open block: (kind, chat index or None)
    blk, call_base = -1, None

    def close() -> None:
        if cur and cur[0] == "thinking":
            ev.append({"type": "content_block_delta", "index": blk, "delta": {"type": "signature_delta", "signature": SIGNATURE}})
        if cur:
            ev.append({"type": "content_block_stop", "index": blk})

    for d in deltas:
        kind = {"reasoning": "thinking", "text": "text", "call": "tool_use"}[d["kind"]]
        if kind == "tool_use" and d["id"]:
            close()
            call_base = blk + 1 if call_base is None else call_base
            blk, cur = call_base + d["index"], ("tool_use", d["index"])
            ev.append({"type": "content_block_start", "index": blk, "content_block": {"type": "tool_use", "id": d["id"], "name": d["name"] or "", "input": {}}})
        elif kind != "tool_use" and (cur is None or cur[0] != kind):
            close()
            blk, cur = blk + 1, (kind, None)
            ev.append({"type": "content_block_start", "index": blk, "content_block": {"type": kind, kind if kind == "text" else "thinking": ""}})
        if not d["text"] or cur is None:
            continue
        delta = {"thinking": {"type": "thinking_delta", "thinking": d["text"]}, "text": {"type": "text_delta", "text": d["text"]},
                 "tool_use": {"type": "input_json_delta", "partial_json": d["text"]}}[kind]
        ev.append({"type": "content_block_delta", "index": blk, "delta": delta})
    close()
    md: dict[str, Any] = {"type": "message_delta", "delta": {"stop_reason": FINISH_TO_STOP.get(finish, finish), "stop_sequence": None}}
    if u is not None:
        md["usage"] = {"output_tokens": u.get("output_tokens", 0)}
    ev += [md, {"type": "message_stop"}]
    return ev


def render_events(surface: str, chunks: list[str], model: Any = None, cached: int = 0) -> list[str]:
    """Chat `data:` payloads -> the surface's `data:` payloads (each carries its own `type`)."""
    deltas, finish, usage, _ = _chunks(chunks)
    build = _responses_events if surface == "responses" else _messages_events
    return [json.dumps(e, ensure_ascii=False) for e in build(deltas, finish, usage, model, cached)]


def _chat_chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> str:
    return json.dumps({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]})


def events_to_chat_chunks(surface: str, payloads: list[str]) -> list[str]:
    """A surface stream -> chat chunks, delta for delta (the proxy runs chat faults on these)."""
    from verifier.surfaces.registry import by_name

    whole = by_name(surface).parse_stream(payloads)  # finish reason, usage and call ids as the surface said them
    out, call_index, seen = [], {}, 0
    for raw in payloads:
        try:
            e = json.loads(raw)
        except ValueError:
            continue
        t = e.get("type")
        if t in ("response.output_text.delta",) or (t == "content_block_delta" and (e.get("delta") or {}).get("type") == "text_delta"):
            text = e.get("delta") if t.startswith("response") else e["delta"].get("text")
            lp = {"logprobs": {"content": e["logprobs"]}} if e.get("logprobs") else {}
            out.append(_chat_chunk({"content": text}, **lp))
        elif (t or "").startswith("response.reasoning") and t.endswith(".delta") or (t == "content_block_delta" and (e.get("delta") or {}).get("type") == "thinking_delta"):
            out.append(_chat_chunk({"reasoning_content": e.get("delta") if t.startswith("response") else e["delta"].get("thinking")}))
        elif t == "response.output_item.added" and (e.get("item") or {}).get("type") == "function_call" or \
                t == "content_block_start" and (e.get("content_block") or {}).get("type") == "tool_use":
            it = e.get("item") or e.get("content_block")
            key = e.get("output_index", e.get("index"))
            call_index[key] = seen
            out.append(_chat_chunk({"tool_calls": [{"index": seen, "id": it.get("call_id", it.get("id")), "type": "function",
                                                    "function": {"name": it.get("name"), "arguments": ""}}]}))
            seen += 1
        elif t == "response.function_call_arguments.delta" or (t == "content_block_delta" and (e.get("delta") or {}).get("type") == "input_json_delta"):
            idx = call_index.get(e.get("output_index", e.get("index")), 0)
            text = e.get("delta") if t.startswith("response") else e["delta"].get("partial_json")
            out.append(_chat_chunk({"tool_calls": [{"index": idx, "function": {"arguments": text}}]}))
    out.append(_chat_chunk({}, whole.finish_reason))
    if whole.usage is not None:
        out.append(json.dumps({"object": "chat.completion.chunk", "choices": [], "usage": whole.usage}))
    return out + ["[DONE]"]


__all__ = ["events_to_chat_chunks", "render_events"]
