"""`/v1/responses` and `/v1/messages` on the scripted test server, answered by the same script as chat.

A surface request is turned back into the chat request it means, the script's `Reply` is built exactly
as for chat (so a rule or a queued fault fires on every surface alike), and the chat body or chunks are
rendered on the surface. Messages reports a repeated prompt's tokens as cached, the way llama-server
does (input_tokens 1 + cache_read_input_tokens N-1), so the verifier's usage normalization is exercised.
Errors use each surface's own error shape.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from aiohttp import web

from .sampling import delay_or_drop
from .surface_render import render_body, to_chat_request
from .surface_stream import render_events

MAX_STORED = 1000
"""Stored Responses kept for previous_response_id; the oldest go first (a long-running server stays bounded)."""


def error_body(surface: str, status: int, message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    if surface == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    return {"error": {"message": message, "type": kind, "code": status}}


def add_routes(app: web.Application, script: Any) -> None:
    """Register both surfaces on `app`, answering from `script` (a server.Script). The chat renderers are
    found through the script's own module, so server.py (which calls this) and this module never import each other."""
    server = next(m for m in (sys.modules[c.__module__] for c in type(script).__mro__) if hasattr(m, "completion_body"))
    seen: set[int] = set()
    stored: dict[str, list[dict[str, Any]]] = {}  # Responses kept for previous_response_id (unless store: false)
    ids = iter(range(1, 1 << 62))

    def cached_for(chat_req: dict[str, Any]) -> int:
        key = hash(json.dumps(chat_req.get("messages"), sort_keys=True))
        pt = server.prompt_tokens(chat_req)
        hit = key in seen
        seen.add(key)
        return pt - 1 if hit else 0

    def handler(surface: str):
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                req = await request.json()
            except json.JSONDecodeError:
                return web.json_response(error_body(surface, 400, "invalid JSON"), status=400)
            if not isinstance(req, dict) or (surface == "messages" and not isinstance(req.get("max_tokens"), int)):
                return web.json_response(error_body(surface, 400, "max_tokens: field required"), status=400)
            script.requests.append(req)
            script.headers.append(dict(request.headers))
            chat_req = to_chat_request(surface, req)
            prev = req.get("previous_response_id") if surface == "responses" else None
            if prev is not None:
                if prev not in stored:
                    return web.json_response(error_body(surface, 400, f"Previous response with id '{prev}' not found."), status=400)
                chat_req["messages"] = stored[prev] + [m for m in chat_req["messages"] if m.get("role") != "system"]
            reply = script.next(chat_req)
            if script.honour_sampling and reply.status == 200 and reply.body is None:
                sampled = server.engine_reply(reply, server.with_server_defaults(chat_req, script.generation_defaults))
                if isinstance(sampled, str):
                    return web.json_response(error_body(surface, 400, sampled), status=400)
                reply = sampled
            await delay_or_drop(reply, request)
            if reply.status != 200:
                text = reply.body or json.dumps(error_body(surface, reply.status, f"scripted {reply.status}", "api_error"))
                return web.Response(status=reply.status, text=text, headers=reply.headers, content_type="application/json")
            cached = cached_for(chat_req) if surface == "messages" else 0
            rid = keep(surface, req, chat_req, reply)
            if not req.get("stream"):
                text = reply.body if reply.body is not None else json.dumps(render_body(surface, server.completion_body(reply, chat_req), cached))
                return web.Response(text=text.replace('"resp_test"', f'"{rid}"', 1) if rid else text, headers=reply.headers,
                                    content_type="application/json")
            events = render_events(surface, server.stream_chunks(reply, chat_req), chat_req.get("model"), cached)
            events = [e.replace('"resp_test"', f'"{rid}"') for e in events] if rid else events
            return await server.write_sse(request, reply, (f"event: {json.loads(e)['type']}\ndata: {e}\n\n" for e in events))

        return handle

    def keep(surface: str, req: dict[str, Any], chat_req: dict[str, Any], reply: Any) -> str | None:
        """A fresh Responses id, and the conversation kept under it unless the request said `store: false`."""
        if surface != "responses":
            return None
        rid = f"resp_{next(ids)}"
        if req.get("store") is not False:
            answer = {"role": "assistant", "content": reply.content}
            if reply.tool_calls:
                answer["tool_calls"] = [{"id": c.get("id"), "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                                        for c in reply.tool_calls]
            stored[rid] = chat_req["messages"] + [answer]
            while len(stored) > MAX_STORED:
                stored.pop(next(iter(stored)))
        return rid

    async def count_tokens(request: web.Request) -> web.Response:
        """Anthropic's /v1/messages/count_tokens: the prompt's tokens, counted as a Messages request would be."""
        try:
            req = await request.json()
        except json.JSONDecodeError:
            return web.json_response(error_body("messages", 400, "invalid JSON"), status=400)
        if not isinstance(req, dict) or not isinstance(req.get("messages"), list):
            return web.json_response(error_body("messages", 400, "messages: field required"), status=400)
        return web.json_response({"input_tokens": server.prompt_tokens(to_chat_request("messages", req))})

    app.router.add_post("/v1/responses", handler("responses"))
    app.router.add_post("/v1/messages", handler("messages"))
    app.router.add_post("/v1/messages/count_tokens", count_tokens)
