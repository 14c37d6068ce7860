"""How the scripted server honours the request options a client relies on, like a healthy engine: tool_choice and
parallel_tool_calls, stop sequences, thinking switches and reasoning effort, penalties, logit_bias, response_format.

The script's responder says what the "model" would answer; `honour_options` then applies what the request asked
for, the way an engine's frontend would (a grammar that forces the schema, a stop string that ends generation).
Each option acts only when the request carries it, so a plain request is answered exactly as scripted; the server
applies them with `--honour-sampling` (Script(honour_sampling=True)), like its sampling contract. Pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

NEUTRAL = {"repetition_penalty": (1, 1.0), "presence_penalty": (0, 0.0), "frequency_penalty": (0, 0.0),
           "top_k": (-1, 0), "min_p": (0, 0.0)}
"""Sampling extensions at the values that change nothing; anything else is applied (and changes the output)."""
PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")


def with_server_defaults(req: dict[str, Any], defaults: dict[str, Any] | None) -> dict[str, Any]:
    """The request as an engine with generation-config defaults serves it: each default applied where the request
    sets no penalty at all (vLLM's --generation-config auto, vLLM #17075; Ollama's repeat_penalty)."""
    if not defaults or any(k in req for k in PENALTIES):
        return req
    return {**req, **defaults}
THINKING = "Let me think about this step by step before I answer."
EFFORT_WORDS = {"minimal": 2, "low": 4, "medium": 12, "high": 32}


def schema_instance(schema: Any, depth: int = 0) -> Any:
    """A value that satisfies a simple JSON schema, properties in the schema's own order (what a grammar emits)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return schema_instance(schema[key][0], depth + 1)
    t = schema.get("type")
    t = t[0] if isinstance(t, list) and t else t
    if t == "object" or "properties" in schema:
        props = schema.get("properties") or {}
        need = schema.get("required")
        keys = [k for k in props if need is None or k in need] if isinstance(props, dict) else []
        return {k: schema_instance(props[k], depth + 1) for k in keys}
    if t == "array":
        return [schema_instance(schema.get("items"), depth + 1)] * int(schema.get("minItems") or 0)
    return {"string": "x", "integer": 0, "number": 0, "boolean": True, "null": None}.get(t, "x")


def _valid(text: str | None, schema: Any) -> bool:
    try:
        value = json.loads(text or "")
    except ValueError:
        return False
    from verifier.judge import schemacheck  # the request's schema: no $ref fetch, no backtracking regex

    try:
        return schemacheck.first_error(schema, value) is None
    except schemacheck.NotCheckable:
        return False


def _last_user(req: dict[str, Any]) -> tuple[str | None, str]:
    """(role of the last message, text of the last user message)."""
    msgs = [m for m in req.get("messages") or [] if isinstance(m, dict)]
    text = ""
    for m in reversed(msgs):
        if m.get("role") == "user":
            c = m.get("content")
            text = c if isinstance(c, str) else " ".join(p.get("text", "") for p in c or [] if isinstance(p, dict))
            break
    return (msgs[-1].get("role") if msgs else None), text


def _declared(req: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for t in req.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            out[fn["name"]] = fn.get("parameters") or {"type": "object"}
    return out


def _call(name: str, params: Any, n: int) -> dict[str, Any]:
    return {"name": name, "arguments": json.dumps(schema_instance(params) or {}), "id": f"call_{name}_{n}"}


def _tools(reply: Any, req: dict[str, Any]) -> Any:
    tools = _declared(req)
    if not tools:
        return reply
    calls = list(reply.tool_calls or [])
    last_role, text = _last_user(req)
    if not calls and last_role == "user":
        # "call get_weather ..." in the user's words: the model calls that declared tool, once per mention.
        for m in re.finditer(r"\bcall (\w+)", text, re.I):
            if m.group(1) in tools:
                calls.append(_call(m.group(1), tools[m.group(1)], len(calls)))
    if not calls and last_role == "tool":
        return replace(reply, content=reply.content or "The tool answered; here is the result.")
    choice = req.get("tool_choice")
    if choice == "none":
        calls = []
    elif choice == "required" and not calls:
        name = next(iter(tools))
        calls = [_call(name, tools[name], 0)]
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        name = choice["function"].get("name")
        if name in tools:
            calls = [_call(name, tools[name], 0)]
    if req.get("parallel_tool_calls") is False:
        calls = calls[:1]
    content = reply.content if not calls or reply.tool_calls else None
    if not calls and not content:
        content = "I can answer that without a tool."
    return replace(reply, tool_calls=calls or None, content=content)


def _thinking(reply: Any, req: dict[str, Any]) -> Any:
    kwargs = req.get("chat_template_kwargs") if isinstance(req.get("chat_template_kwargs"), dict) else {}
    effort = req.get("reasoning_effort")
    if kwargs.get("enable_thinking") is False:
        return replace(reply, reasoning_content=None)
    if isinstance(effort, str) and effort in EFFORT_WORDS:
        words = (THINKING.split() * 8)[:EFFORT_WORDS[effort]]
        return replace(reply, reasoning_content=" ".join(words))
    if kwargs.get("enable_thinking") is True and not reply.reasoning_content:
        return replace(reply, reasoning_content=THINKING)
    return reply


def _penalised(reply: Any, req: dict[str, Any]) -> Any:
    applied = [k for k, neutral in NEUTRAL.items() if k in req and req[k] is not None and req[k] not in neutral]
    if not applied or not isinstance(reply.content, str):
        return reply
    words, out = reply.content.split(" "), []
    for w in words:  # a repetition penalty's visible effect: a word is not repeated right after itself
        if not out or out[-1] != w:
            out.append(w)
    return replace(reply, content=" ".join(out))


def _biased(reply: Any, req: dict[str, Any]) -> Any:
    bias = req.get("logit_bias")
    if not isinstance(bias, dict):
        return reply
    up = [k for k, v in bias.items() if isinstance(v, (int, float)) and v >= 50]
    return replace(reply, content=" ".join(f"<tok{up[0]}>" for _ in range(4))) if up and reply.content is not None else reply


def _formatted(reply: Any, req: dict[str, Any]) -> Any:
    rf = req.get("response_format")
    if not isinstance(rf, dict) or reply.tool_calls:
        return reply
    if rf.get("type") == "json_schema":
        schema = (rf.get("json_schema") or {}).get("schema")
        if isinstance(schema, dict) and not _valid(reply.content, schema):
            return replace(reply, content=json.dumps(schema_instance(schema)))
    elif rf.get("type") == "json_object":
        try:
            ok = isinstance(json.loads(reply.content or ""), dict)
        except ValueError:
            ok = False
        if not ok:
            return replace(reply, content=json.dumps({"answer": reply.content or ""}))
    return reply


def _stopped(reply: Any, req: dict[str, Any]) -> Any:
    stop = req.get("stop")
    stops = [stop] if isinstance(stop, str) else [s for s in stop or [] if isinstance(s, str) and s]
    text = reply.content
    if not stops or not isinstance(text, str):
        return reply
    hits = [(text.find(s), s) for s in stops if s in text]
    if not hits:
        return reply
    at, s = min(hits)
    return replace(reply, content=text[:at], finish_reason="stop", stop_sequence=s)


def honour_options(reply: Any, req: dict[str, Any]) -> Any:
    """The scripted reply as a healthy engine would shape it for this request's options, before sampling."""
    for step in (_tools, _thinking, _penalised, _biased):
        reply = step(reply, req)
    return reply


def finish_options(reply: Any, req: dict[str, Any]) -> Any:
    """What holds whatever the sampler did: a grammar keeps the output in the schema, a stop string ends it."""
    for step in (_formatted, _stopped):
        reply = step(reply, req)
    return reply


def engine_reply(reply: Any, req: dict[str, Any]) -> Any:
    """The request options, then sampling (sampling.py), then what constrains the sampled text; a str is a 400."""
    from .sampling import apply_sampling

    sampled = apply_sampling(honour_options(reply, req), req)
    return sampled if isinstance(sampled, str) else finish_options(sampled, req)


def n_choices(req: dict[str, Any]) -> int:
    """How many choices `n` asks for (1 unless 2..8)."""
    n = req.get("n")
    return n if isinstance(n, int) and not isinstance(n, bool) and 1 < n <= 8 else 1


def scripted_text(text: str) -> str | None:
    """What a model answers to the probes' plain prompts: "Count from 1 to 30", "Repeat the word hello 5 times"."""
    if c := re.search(r"Count from (\d+) to (\d+)", text):
        lo = int(c.group(1))
        return " ".join(str(i) for i in range(lo, min(int(c.group(2)), lo + 200) + 1))
    if w := re.search(r"Write each number from (\d+) to (\d+) twice", text):
        lo = int(w.group(1))
        return " ".join(f"{i} {i}" for i in range(lo, min(int(w.group(2)), lo + 100) + 1))
    if r := re.search(r"Repeat the word (\w+) (\d+) times", text):
        return " ".join([r.group(1)] * min(int(r.group(2)), 50))
    return None
