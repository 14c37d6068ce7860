"""One request translator per surface: a chat-completions body -> an OpenAI Responses or Anthropic Messages body.

Suites write chat bodies (messages, tools, response_format, images); the runner hands the finished body
to `translate(mode, body)`, so a suite never knows which surface it is sent to. Pure; no network.

Surfaces and their wire modes:
    chat       chat, chat-stream, completions   POST /chat/completions (/completions)
    responses  responses, responses-stream      POST /responses
    messages   messages, messages-stream        POST /messages
"""

from __future__ import annotations

import json
from typing import Any

from verifier.surfaces.parse import stream_complete as _complete
from verifier import jsonsafe

SURFACE_MODES = {
    "responses": ("responses", "responses-stream"),
    "messages": ("messages", "messages-stream"),
}
SURFACE_ROUTES: dict[str, tuple[str, bool]] = {m: (f"/{s}", m.endswith("-stream")) for s, ms in SURFACE_MODES.items() for m in ms}
"""endpoint.MODES entries: (path, streamed)."""
ANTHROPIC_VERSION = "2023-06-01"

ANTHROPIC_DEFAULT_MAX_TOKENS = 1024
"""Messages requires `max_tokens`; used only when the chat body set none."""

# Chat keys with a same-named field on the surface; anything else a suite or --extra-body adds that the
# surface does not know is dropped rather than sent (a strict server would 400 on it).
_RESPONSES_KEEP = ("model", "temperature", "top_p", "parallel_tool_calls", "metadata", "store", "reasoning",
                   "truncation", "user", "service_tier", "top_logprobs")
_MESSAGES_KEEP = ("model", "temperature", "top_p", "top_k", "metadata", "thinking", "service_tier")


def surface_of(mode: str) -> str:
    """`chat`, `responses` or `messages` for a wire mode."""
    for surface, modes in SURFACE_MODES.items():
        if mode in modes:
            return surface
    return "chat"


def is_stream(mode: str) -> bool:
    return mode.endswith("-stream")


def stream_complete(mode: str, chunks: list[str]) -> bool:
    """Whether a stream of `mode` reached its surface's terminal event (chat: `[DONE]`)."""
    return _complete(surface_of(mode), chunks)


def surface_headers(mode: str, cfg: Any) -> dict[str, str]:
    """Per-surface headers: Anthropic Messages wants a version header, and takes the key as x-api-key
    (sent only where no Authorization or x-api-key header was configured)."""
    if surface_of(mode) != "messages":
        return {}
    h = {"anthropic-version": ANTHROPIC_VERSION}
    if cfg.api_key and not any(k.lower() in ("authorization", "x-api-key") for k in cfg.headers):
        h["x-api-key"] = cfg.api_key
    return h


def translate(mode: str, body: dict[str, Any]) -> dict[str, Any]:
    """A chat body (as the runner built it, stream flags not yet set) -> the body for `mode`'s surface."""
    surface = surface_of(mode)
    if surface == "responses":
        out = to_responses(body)
    elif surface == "messages":
        out = to_messages(body)
    else:
        return body
    if is_stream(mode):
        out["stream"] = True
    return out


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") in ("text", "input_text"))
    return ""


def _split_system(messages: list[dict[str, Any]]) -> tuple[str | None, list[dict[str, Any]]]:
    """Leading system/developer messages become the surface's system prompt; later ones stay in place."""
    system, i = [], 0
    while i < len(messages) and messages[i].get("role") in ("system", "developer"):
        system.append(_text_of(messages[i].get("content")))
        i += 1
    return ("\n\n".join(system) if system else None), messages[i:]


def _url_of(part: dict[str, Any]) -> str:
    iu = part.get("image_url")
    return iu.get("url", "") if isinstance(iu, dict) else str(iu or "")


# ---------------------------------------------------------------- OpenAI Responses


def _responses_content(role: str, content: Any) -> Any:
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
            img = {"type": "input_image", "image_url": _url_of(p)}
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
        return [{"type": "function_call_output", "call_id": m.get("tool_call_id"), "output": _text_of(m.get("content"))}]
    # An explicit `type: message` on every message item: the spec makes it optional, but llama-server (b11434)
    # refuses an assistant item without it ("Cannot determine type of 'item'"), which would drop every few-shot prompt.
    if role != "assistant":
        return [{"type": "message", "role": role, "content": _responses_content(role, m.get("content"))}]
    items: list[dict[str, Any]] = []
    reasoning = m.get("reasoning_content", m.get("reasoning"))
    if isinstance(reasoning, str) and reasoning:
        items.append({"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": reasoning}]})
    if m.get("content"):
        items.append({"type": "message", "role": "assistant", "content": _responses_content("assistant", m["content"])})
    for c in m.get("tool_calls") or []:
        fn = c.get("function") or {}
        items.append({"type": "function_call", "call_id": c.get("id"), "name": fn.get("name"), "arguments": fn.get("arguments", "")})
    return items


def _responses_tool(t: dict[str, Any]) -> dict[str, Any]:
    if t.get("type") != "function":
        return t
    fn = t.get("function") or {}
    out = {"type": "function", "name": fn.get("name")}
    for k in ("description", "parameters", "strict"):
        if k in fn:
            out[k] = fn[k]
    return out


def _responses_tool_choice(tc: Any) -> Any:
    if isinstance(tc, dict) and tc.get("type") == "function":
        return {"type": "function", "name": (tc.get("function") or {}).get("name")}
    return tc


def to_responses(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: body[k] for k in _RESPONSES_KEEP if k in body}
    instructions, rest = _split_system(body.get("messages") or [])
    if instructions is not None:
        out["instructions"] = instructions
    out["input"] = [item for m in rest for item in responses_items(m)]
    if body.get("tools"):
        out["tools"] = [_responses_tool(t) for t in body["tools"]]
    if "tool_choice" in body:
        out["tool_choice"] = _responses_tool_choice(body["tool_choice"])
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


# ---------------------------------------------------------------- Anthropic Messages


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
            blocks.append(_image_block(_url_of(p)))
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
                                             "content": _text_of(m.get("content"))}]}
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


def _messages_tool(t: dict[str, Any]) -> dict[str, Any]:
    fn = t.get("function") or {}
    out = {"name": fn.get("name"), "input_schema": fn.get("parameters") or {"type": "object", "properties": {}}}
    if fn.get("description"):
        out["description"] = fn["description"]
    return out


def _messages_tool_choice(tc: Any) -> Any:
    if tc == "required":
        return {"type": "any"}
    if tc in ("auto", "none"):
        return {"type": tc}
    if isinstance(tc, dict) and tc.get("type") == "function":
        return {"type": "tool", "name": (tc.get("function") or {}).get("name")}
    return tc


def to_messages(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: body[k] for k in _MESSAGES_KEEP if k in body}
    if out.get("top_p") == 1 and "temperature" in out:
        del out["top_p"]  # the neutral value; newer Anthropic models refuse temperature and top_p together
    system, rest = _split_system(body.get("messages") or [])
    if system is not None:
        out["system"] = system
    out["messages"] = merge_roles([messages_message(m) for m in rest])
    limit = body.get("max_completion_tokens", body.get("max_tokens"))
    out["max_tokens"] = limit if limit is not None else ANTHROPIC_DEFAULT_MAX_TOKENS
    if body.get("tools"):
        out["tools"] = [_messages_tool(t) for t in body["tools"] if t.get("type") == "function"]
    if "tool_choice" in body and body.get("tools"):
        out["tool_choice"] = _messages_tool_choice(body["tool_choice"])
    if body.get("stop"):
        out["stop_sequences"] = body["stop"] if isinstance(body["stop"], list) else [body["stop"]]
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        # Anthropic's structured outputs field; servers without it ignore it, and the strict checks then show it.
        out["output_format"] = {"type": "json_schema", "schema": (rf.get("json_schema") or {}).get("schema", {})}
    return out
