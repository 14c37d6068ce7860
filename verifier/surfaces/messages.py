"""The Anthropic Messages surface: `messages`, `messages-stream` on `/messages`. Pure; no network.

Request: `system`, content blocks (base64 `image` blocks, `thinking` with signature, `tool_use`, `tool_result`
in user turns), `input_schema` tools, required `max_tokens`, `output_format` for json_schema; the key also as
`x-api-key` and an `anthropic-version` header. Response: content blocks, or `content_block_start/delta/stop`
reassembled by block index; `message_delta` carries `stop_reason` and usage; the stream ends at `message_stop`.

Usage is normalized so the prompt-token fingerprint compares like with like: Anthropic's `input_tokens`
excludes cached tokens (llama-server with SmolLM2: a 32-token prompt sent twice reports input_tokens 1 +
cache_read_input_tokens 31), so prompt_tokens = input + cache_read + cache_creation. The surface's own
usage object is kept under `usage["surface"]`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from verifier import jsonsafe
from verifier.jsonsafe import stream_objects
from verifier.surfaces.base import (Mode, SurfaceMalformed, call, events, int_or_zero, load, load_or_none, split_system,
                                    TranslatedSurface, text_of, url_of)
from verifier.types import Exchange, Parsed, WireFacts

ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_DEFAULT_MAX_TOKENS = 1024
"""Messages requires `max_tokens`; used only when the chat body set none."""
STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length",
                "refusal": "content_filter", "pause_turn": "pause_turn", "model_context_window_exceeded": "length"}
"""Anthropic stop_reason -> chat finish_reason; unknown values pass through as they came."""
TERMINAL = ("message_stop",)

# Chat keys with a same-named field on the surface; anything else is dropped rather than sent.
_KEEP = ("model", "temperature", "top_p", "top_k", "metadata", "thinking", "service_tier")
_PING = {"messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}


# ---------------------------------------------------------------- request


def _image_block(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks = []
    for p in content or []:
        if not isinstance(p, dict):
            continue
        if p.get("type") == "text":
            blocks.append({"type": "text", "text": p.get("text", "")})
        elif p.get("type") == "image_url":
            blocks.append(_image_block(url_of(p)))
        else:
            blocks.append(p)
    return blocks


def _arguments_object(args: Any) -> Any:
    """Chat arguments are a JSON string; Anthropic `input` is the object itself."""
    if not isinstance(args, str):
        return args
    try:
        return jsonsafe.loads(args) if args.strip() else {}
    except ValueError:
        return args  # sent as it was: a server that rejects it is showing its contract, not ours


def messages_message(m: dict[str, Any]) -> dict[str, Any]:
    """One non-system chat message -> one Anthropic message (tool results become user tool_result blocks)."""
    role = m.get("role")
    if role == "tool":
        return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": m.get("tool_call_id"),
                                             "content": text_of(m.get("content"))}]}
    if role != "assistant":
        c = m.get("content")
        return {"role": "user", "content": c if isinstance(c, str) else _blocks(c)}
    blocks: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content", m.get("reasoning"))
    if isinstance(reasoning, str) and reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": m.get("reasoning_signature", "")})
    blocks += _blocks(m.get("content"))
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name"), "input": _arguments_object(fn.get("arguments"))})
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return {"role": "assistant", "content": blocks[0]["text"]}
    return {"role": "assistant", "content": blocks}


def merge_roles(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic wants alternating roles: consecutive same-role messages (parallel tool results) become one."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            prev = out[-1]
            a = prev["content"] if isinstance(prev["content"], list) else _blocks(prev["content"])
            b = m["content"] if isinstance(m["content"], list) else _blocks(m["content"])
            out[-1] = {"role": m["role"], "content": a + b}
        else:
            out.append(m)
    return out


def _tool(t: dict[str, Any]) -> dict[str, Any]:
    fn = t.get("function") or {}
    out = {"name": fn.get("name"), "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def _tool_choice(tc: Any) -> Any:
    if tc == "required":
        return {"type": "any"}
    if tc in ("auto", "none"):
        return {"type": tc}
    if isinstance(tc, dict) and tc.get("type") == "function":
        return {"type": "tool", "name": (tc.get("function") or {}).get("name")}
    return tc


def to_messages(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: body[k] for k in _KEEP if k in body}
    if out.get("top_p") == 1 and "temperature" in out:
        del out["top_p"]  # the neutral value; newer Anthropic models refuse temperature and top_p together
    system, rest = split_system(body.get("messages") or [])
    if system is not None:
        out["system"] = system
    out["messages"] = merge_roles([messages_message(m) for m in rest])
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    out["max_tokens"] = limit if limit is not None else ANTHROPIC_DEFAULT_MAX_TOKENS
    if body.get("tools"):
        out["tools"] = [_tool(t) for t in body["tools"] if t.get("type") == "function"]
    if "tool_choice" in body and body.get("tools"):
        out["tool_choice"] = _tool_choice(body["tool_choice"])
    if body.get("stop"):
        out["stop_sequences"] = body["stop"] if isinstance(body["stop"], list) else [body["stop"]]
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        # Anthropic's structured outputs field; servers without it ignore it, and the strict checks then show it.
        out["output_format"] = {"type": "json_schema", "schema": (rf.get("json_schema") or {}).get("schema", {})}
    return out


# ---------------------------------------------------------------- response


def messages_usage(u: Any) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    cache_read, cache_new = int_or_zero(u.get("cache_read_input_tokens")), int_or_zero(u.get("cache_creation_input_tokens"))
    pt = u.get("input_tokens")
    prompt = pt + cache_read + cache_new if isinstance(pt, int) else pt
    ct = u.get("output_tokens")
    out: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": ct, "total_tokens": int_or_zero(prompt) + int_or_zero(ct)}
    if isinstance(u.get("cache_read_input_tokens"), int):  # only where the server reported its cache reads: a usage
        out["prompt_tokens_details"] = {"cached_tokens": cache_read}  # without them is not one that read 0 tokens
    out["surface"] = u
    return out


def _tool_input(block: dict[str, Any], extra: WireFacts) -> str:
    val = block.get("input")
    if isinstance(val, dict):
        return json.dumps(val, ensure_ascii=False)
    extra.tool_input_not_object = f"{block.get('name')}: {type(val).__name__}"
    return val if isinstance(val, str) else json.dumps(val)


def _map_stop(stop: Any, extra: WireFacts) -> str | None:
    extra.stop_reason = stop
    return STOP_REASONS.get(stop, stop) if isinstance(stop, str) else None


def parse_messages_body(text: str | None) -> Parsed:
    data = load(text)
    if not isinstance(data, dict) or not isinstance(data.get("content"), list):
        raise SurfaceMalformed("no content list in Messages body")
    extra = WireFacts()
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
            calls.append(call(b.get("id"), b.get("name"), _tool_input(b, extra)))
    if unsigned:
        extra.thinking_without_signature = unsigned
    return Parsed(content="".join(texts) if texts else None, reasoning="".join(thinking) if thinking else None,
                  tool_calls=calls or None, finish_reason=_map_stop(data.get("stop_reason"), extra),
                  usage=messages_usage(data.get("usage")), extra=extra)


class _Stream:
    """Reassembles message_start / content_block_* / message_delta by block index."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.order: list[int] = []
        self.collisions: set[int] = set()
        self.usage: dict[str, Any] = {}
        self.stop: Any = None
        self.extra = WireFacts()
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
            error = ev.get("error")
            err: dict[str, Any] = error if isinstance(error, dict) else {}
            self.extra.stream_error_event = str(err.get("message") or err.get("type"))[:120]

    def parsed(self) -> Parsed:
        extra = dataclasses.replace(self.extra)
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
                calls.append(call(b["id"], b["name"] or "", args))
        if unsigned:
            extra.thinking_without_signature = unsigned
        if self.collisions:
            extra.index_collisions = sorted(self.collisions)
        if not self.saw_stop_event:
            extra.terminal_event_missing = "message_stop"
        if not self.saw_delta_usage:
            extra.usage_missing_in = "message_delta"
        return Parsed(content="".join(texts) if texts else None, reasoning="".join(thinking) if thinking else None,
                      tool_calls=calls or None, finish_reason=_map_stop(self.stop, extra),
                      usage=messages_usage(self.usage) if self.usage else None, extra=extra)


def parse_messages_events(chunks: list[str]) -> Parsed:
    """SSE `data:` payloads of a Messages stream -> Parsed (bad payloads counted in extra)."""
    acc = _Stream()
    extra = WireFacts()
    for ev in stream_objects(chunks, extra):
        acc.feed(ev)
    p = acc.parsed()
    p.extra.merge(extra)
    return p


def _stream_blocks(chunks: list[str]) -> list[dict[str, Any]]:
    """The content blocks of a stream as the server emitted them, signatures included (for history replay)."""
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for e in events(chunks):
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


class Messages(TranslatedSurface):
    name = "messages"
    modes = (Mode("messages", "/messages", False, _PING), Mode("messages-stream", "/messages", True, _PING))
    error_shape = '{"type": "error", "error": {"type", "message"}}'
    no_logprobs = "the Messages API returns no logprobs"
    terminal_events = TERMINAL

    def headers(self, cfg: Any) -> dict[str, str]:
        """Anthropic Messages wants a version header, and takes the key as x-api-key (sent only where no
        Authorization or x-api-key header was configured)."""
        h = {"anthropic-version": ANTHROPIC_VERSION}
        if cfg.api_key and not any(k.lower() in ("authorization", "x-api-key") for k in cfg.headers):
            h["x-api-key"] = cfg.api_key
        return h

    def to_surface(self, body: dict[str, Any]) -> dict[str, Any]:
        return to_messages(body)

    def parse_body(self, text: str | None) -> Parsed:
        return parse_messages_body(text)

    def parse_stream(self, chunks: list[str]) -> Parsed:
        return parse_messages_events(chunks)

    def error_ok(self, data: Any) -> bool:
        return isinstance(data, dict) and data.get("type") == "error" and isinstance(data.get("error"), dict) \
            and isinstance(data["error"].get("type"), str) and isinstance(data["error"].get("message"), str)

    def text_deltas(self, event: dict[str, Any]) -> list[str]:
        if event.get("type") == "content_block_delta" and (event.get("delta") or {}).get("type") == "text_delta":
            return [event["delta"].get("text") or ""]
        return []

    def assistant_turn(self, ex: Exchange, parsed: Callable[[], Parsed]) -> list[dict[str, Any]]:
        """The content blocks with their thinking signatures, as the server emitted them."""
        streamed = ex.chunks is not None and ex.body is None
        blocks = _stream_blocks(ex.chunks or []) if streamed else list((load_or_none(ex.body) or {}).get("content") or [])
        return [{"role": "assistant", "content": blocks}]

    def tool_results(self, results: list[tuple[str | None, str]]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": cid, "content": out} for cid, out in results]}] if results else []

    def extend(self, body: dict[str, Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
        history = list(body.get("messages") or [])
        for e in entries:
            # Messages wants alternating roles: a user turn right after tool results joins their user message.
            if history and history[-1].get("role") == e.get("role") == "user":
                a, b = history[-1]["content"], e["content"]
                a = a if isinstance(a, list) else [{"type": "text", "text": a}]
                b = b if isinstance(b, list) else [{"type": "text", "text": b}]
                history[-1] = {"role": "user", "content": a + b}
            else:
                history.append(e)
        return {**body, "messages": history}


SURFACE = Messages()
