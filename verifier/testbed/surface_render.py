"""Chat-shaped replies <-> Responses / Messages wire shapes, for the test server and the fault proxy.

The test server answers every surface from the same responders: it turns a surface request back into a
chat request (`to_chat_request`), builds the chat reply it always builds, and renders that reply on the
surface (`render_body`, `render_events`). The proxy goes the other way for its faults: a surface
response becomes chat chunks (`events_to_chat_chunks`, `body_to_chat`), the chat fault runs unchanged,
and the result is rendered back. Pure; no I/O.
"""

from __future__ import annotations

import json
from typing import Any

from verifier.surfaces.responses import INCOMPLETE

FINISH_TO_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens", "content_filter": "refusal"}
SIGNATURE = "sig-testbed"


# ---------------------------------------------------------------- surface request -> chat request


def _chat_content(content: Any) -> Any:
    if not isinstance(content, list):
        return content
    parts = []
    for p in content:
        if not isinstance(p, dict):
            continue
        t = p.get("type")
        if t in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": p.get("text", "")})
        elif t == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": p.get("image_url", "")}})
        elif t == "image":
            src = p.get("source") or {}
            url = f"data:{src.get('media_type')};base64,{src.get('data')}" if src.get("type") == "base64" else src.get("url", "")
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _responses_messages(req: dict[str, Any]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    if req.get("instructions"):
        msgs.append({"role": "system", "content": req["instructions"]})
    items = req.get("input")
    if isinstance(items, str):
        return msgs + [{"role": "user", "content": items}]
    pending: dict[str, Any] | None = None  # the assistant turn being rebuilt from reasoning/message/call items
    for it in items or []:
        kind = it.get("type", "message")
        if kind in ("reasoning", "function_call") or (kind == "message" and it.get("role") == "assistant"):
            if pending is None:
                pending = {"role": "assistant", "content": None}
                msgs.append(pending)
            if kind == "reasoning":
                pending["reasoning_content"] = "".join(p.get("text", "") for p in (it.get("content") or []) + (it.get("summary") or []))
            elif kind == "function_call":
                pending.setdefault("tool_calls", []).append(
                    {"id": it.get("call_id"), "type": "function", "function": {"name": it.get("name"), "arguments": it.get("arguments")}})
            else:
                c = _chat_content(it.get("content"))
                pending["content"] = c if isinstance(c, str) else "".join(p.get("text", "") for p in c)
            continue
        pending = None
        if kind == "function_call_output":
            msgs.append({"role": "tool", "tool_call_id": it.get("call_id"), "content": it.get("output")})
        else:
            msgs.append({"role": it.get("role"), "content": _chat_content(it.get("content"))})
    return msgs


def _messages_messages(req: dict[str, Any]) -> list[dict[str, Any]]:
    msgs: list[dict[str, Any]] = []
    system = req.get("system")
    if system:
        msgs.append({"role": "system", "content": system if isinstance(system, str) else "".join(b.get("text", "") for b in system)})
    for m in req.get("messages") or []:
        c = m.get("content")
        if isinstance(c, str):
            msgs.append({"role": m.get("role"), "content": c})
            continue
        if m.get("role") == "assistant":
            a: dict[str, Any] = {"role": "assistant", "content": None}
            for b in c or []:
                if b.get("type") == "thinking":
                    a["reasoning_content"] = b.get("thinking")
                elif b.get("type") == "text":
                    a["content"] = (a["content"] or "") + b.get("text", "")
                elif b.get("type") == "tool_use":
                    args = b.get("input")
                    a.setdefault("tool_calls", []).append({"id": b.get("id"), "type": "function", "function": {
                        "name": b.get("name"), "arguments": json.dumps(args) if isinstance(args, dict) else args}})
            msgs.append(a)
            continue
        rest = [b for b in c or [] if b.get("type") != "tool_result"]
        for b in c or []:
            if b.get("type") == "tool_result":
                out = b.get("content")
                out = out if isinstance(out, str) else "".join(x.get("text", "") for x in out or [])
                msgs.append({"role": "tool", "tool_call_id": b.get("tool_use_id"), "content": out})
        if rest:
            only_text = len(rest) == 1 and rest[0].get("type") == "text"
            msgs.append({"role": "user", "content": rest[0]["text"] if only_text else _chat_content(rest)})
    return msgs


def _options(surface: str, req: dict[str, Any]) -> dict[str, Any]:
    """The request options the surface spells its own way, in chat's spelling (tool choice, stop, thinking, JSON mode)."""
    out: dict[str, Any] = {}
    tc = req.get("tool_choice")
    if surface == "responses":
        if isinstance(tc, dict) and tc.get("type") == "function":
            out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
        elif tc is not None:
            out["tool_choice"] = tc
        if "parallel_tool_calls" in req:
            out["parallel_tool_calls"] = req["parallel_tool_calls"]
        effort = (req.get("reasoning") or {}).get("effort") if isinstance(req.get("reasoning"), dict) else None
        if effort:
            out["reasoning_effort"] = effort
        fmt = (req.get("text") or {}).get("format") if isinstance(req.get("text"), dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_object":
            out["response_format"] = {"type": "json_object"}
        return out
    if isinstance(tc, dict):
        kind = tc.get("type")
        if kind in ("none", "auto"):
            out["tool_choice"] = kind
        elif kind == "any":
            out["tool_choice"] = "required"
        elif kind == "tool":
            out["tool_choice"] = {"type": "function", "function": {"name": tc.get("name")}}
        if tc.get("disable_parallel_tool_use") is True:
            out["parallel_tool_calls"] = False
    if isinstance(req.get("stop_sequences"), list):
        out["stop"] = req["stop_sequences"]
    thinking = req.get("thinking")
    if isinstance(thinking, dict) and thinking.get("type") in ("enabled", "disabled"):
        out["chat_template_kwargs"] = {"enable_thinking": thinking["type"] == "enabled"}
    return out


def to_chat_request(surface: str, req: dict[str, Any]) -> dict[str, Any]:
    """A surface request -> the chat request it means, so the same responders answer it."""
    out: dict[str, Any] = {k: req[k] for k in ("model", "temperature", "top_p", "stream") if k in req}
    if surface == "responses":
        out["messages"] = _responses_messages(req)
        tools = [{"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}}
                 for t in req.get("tools") or [] if t.get("type") == "function"]
        limit = req.get("max_output_tokens")
        fmt = (req.get("text") or {}).get("format") if isinstance(req.get("text"), dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            out["response_format"] = {"type": "json_schema", "json_schema": {k: v for k, v in fmt.items() if k != "type"}}
        if "message.output_text.logprobs" in (req.get("include") or []):  # Responses asks for logprobs this way
            out["logprobs"] = True
    else:
        out["messages"] = _messages_messages(req)
        tools = [{"type": "function", "function": {"name": t.get("name"), **({"description": t["description"]} if "description" in t else {}),
                                                   "parameters": t.get("input_schema")}} for t in req.get("tools") or []]
        limit = req.get("max_tokens")
        if isinstance(req.get("output_format"), dict):
            out["response_format"] = {"type": "json_schema", "json_schema": {"schema": req["output_format"].get("schema")}}
    if tools:
        out["tools"] = tools
    if limit is not None:
        out["max_tokens"] = limit
    out.update(_options(surface, req))
    if out.get("stream"):
        out["stream_options"] = {"include_usage": True}
    return out


# ---------------------------------------------------------------- chat body <-> surface body


def _usage_on(surface: str, u: dict[str, Any] | None, cached: int = 0) -> dict[str, Any] | None:
    if not isinstance(u, dict):
        return None
    if isinstance(u.get("surface"), dict):
        return u["surface"]
    pt, ct = u.get("prompt_tokens", 0), u.get("completion_tokens", 0)
    if surface == "responses":
        return {"input_tokens": pt, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": ct,
                "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": pt + ct}
    # Anthropic: cached tokens are not input tokens.
    return {"input_tokens": pt - cached, "cache_read_input_tokens": cached, "cache_creation_input_tokens": 0, "output_tokens": ct}


def _args_input(args: Any) -> Any:
    try:
        v = json.loads(args) if isinstance(args, str) and args.strip() else {}
    except ValueError:
        return args  # a broken arguments string stays a string: the `input` that is not an object
    return v


def render_body(surface: str, chat: dict[str, Any], cached: int = 0) -> dict[str, Any]:
    """A chat completion body -> the same answer as a Responses or Messages body."""
    choice = (chat.get("choices") or [{}])[0]
    msg = choice.get("message") or {}
    finish = choice.get("finish_reason")
    reasoning = msg.get("reasoning_content", msg.get("reasoning"))
    usage = _usage_on(surface, chat.get("usage"), cached)
    calls = msg.get("tool_calls") or []
    if surface == "responses":
        out: list[dict[str, Any]] = []
        if reasoning:
            out.append({"type": "reasoning", "id": "rs_0", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]})
        if msg.get("content") is not None:
            part: dict[str, Any] = {"type": "output_text", "text": msg["content"], "annotations": []}
            if isinstance(choice.get("logprobs"), dict):
                part["logprobs"] = choice["logprobs"].get("content") or []
            out.append({"type": "message", "id": "msg_0", "role": "assistant", "status": "completed", "content": [part]})
        for i, c in enumerate(calls):
            fn = c.get("function") or {}
            out.append({"type": "function_call", "id": f"fc_{i}", "call_id": c.get("id"), "name": fn.get("name"),
                        "arguments": fn.get("arguments"), "status": "completed"})
        body = {"id": _own_id(chat, "resp_"), "object": "response", "model": chat.get("model"), "output": out, **_status(finish)}
        if usage is not None:
            body["usage"] = usage
        return body
    blocks: list[dict[str, Any]] = []
    if reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": SIGNATURE})
    if msg.get("content"):
        blocks.append({"type": "text", "text": msg["content"]})
    for c in calls:
        fn = c.get("function") or {}
        blocks.append({"type": "tool_use", "id": c.get("id"), "name": fn.get("name"), "input": _args_input(fn.get("arguments"))})
    stopped_by = choice.get("stop_reason") if isinstance(choice.get("stop_reason"), str) else None  # vLLM's matched stop string
    body = {"id": _own_id(chat, "msg_"), "type": "message", "role": "assistant", "model": chat.get("model"), "content": blocks,
            "stop_reason": "stop_sequence" if stopped_by and finish == "stop" else FINISH_TO_STOP.get(finish, finish),
            "stop_sequence": stopped_by}
    if usage is not None:
        body["usage"] = usage
    return body


def _own_id(chat: dict[str, Any], prefix: str) -> str:
    """The surface body's id: kept when the chat body came from one (the proxy re-rendering a fault), so a stored
    response can still be chained with previous_response_id."""
    rid = chat.get("id")
    return rid if isinstance(rid, str) and rid.startswith(prefix) else f"{prefix}test"


def _status(finish: str | None) -> dict[str, Any]:
    if finish is None:
        return {}  # no status: the Responses spelling of a missing finish_reason
    if finish in ("length", "content_filter"):
        reason = next(k for k, v in INCOMPLETE.items() if v == finish)
        return {"status": "incomplete", "incomplete_details": {"reason": reason}}
    return {"status": "completed"}


def body_to_chat(surface: str, body: dict[str, Any]) -> dict[str, Any]:
    """A surface body -> a chat body, for the proxy's chat-shaped faults (surface usage kept under `surface`)."""
    from verifier.surfaces.messages import parse_messages_body
    from verifier.surfaces.responses import parse_responses_body

    p = (parse_responses_body if surface == "responses" else parse_messages_body)(json.dumps(body))
    msg: dict[str, Any] = {"role": "assistant", "content": p.content}
    if p.reasoning is not None:
        msg["reasoning_content"] = p.reasoning
    if p.tool_calls:
        msg["tool_calls"] = p.tool_calls
    choice: dict[str, Any] = {"index": 0, "message": msg, "finish_reason": p.finish_reason}
    if p.logprobs:
        choice["logprobs"] = {"content": p.logprobs}
    out = {"id": body.get("id"), "object": "chat.completion", "model": body.get("model"), "choices": [choice]}
    if p.usage is not None:
        out["usage"] = p.usage
    return out


__all__ = ["body_to_chat", "render_body", "to_chat_request"]
