"""A scripted OpenAI-compatible server on 127.0.0.1, for tests, the demo and benchmarks.

It answers from a script: queued one-shot replies first (for fault injection: status codes, latency,
Retry-After, dropped connections, truncated streams), then regex rules on the last user message, then a
responder function. Every reply can be served plain or as an SSE stream built the way vLLM and llama.cpp
build theirs (role chunk, content pieces, tool-call deltas split by index, finish chunk, usage chunk,
[DONE]); /v1/responses and /v1/messages answer from the same script (surface_server.py).

    verifier testbed serve [--port 8080] [--responder arithmetic|echo] [--script script.json] [--fault NAME[:RATE]]
    python -m verifier.testbed.server --port 8080 [--script script.json] [--responder arithmetic]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from aiohttp import web

from .sampling import apply_sampling, delay_or_drop  # noqa: F401  (public names)
from .wire import call_token_counts, logprobs_of as _logprobs, prompt_tokens, usage_of as _usage  # noqa: F401  (public names)
from .request_options import engine_reply, n_choices, scripted_text, with_server_defaults
from .surface_server import add_routes
from .tool_answers import DEFAULT as DEFAULT_TOOL_ANSWERS, ToolAnswers
from . import teacher as teaching


@dataclass
class Reply:
    """What the server does for one request. Defaults give a well-formed 200."""

    content: str | None = "ok"
    reasoning_content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    """[{"name": ..., "arguments": "<json string>", "id": optional}]"""
    finish_reason: str | None = "auto"
    """"auto": tool_calls when there are calls, else stop. None: omitted (a fault)."""
    usage: dict[str, Any] | None | str = "auto"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    """Streams only: pause between SSE events (a scripted inter-token latency)."""
    drop: bool = False
    """Close the connection without answering."""
    truncate_after: int | None = None
    """Streams only: abort the connection after this many chunks."""
    body: str | None = None
    """Raw body override (non-stream): served verbatim."""
    stream_index_zero: bool = False
    """Streams only: give every parallel tool call index 0 (a real assembly bug)."""
    logprobs: bool = False
    logprob_shift: float = 0.0
    """Added to every token logprob: a stand-in for changed numerics."""
    stop_sequence: str | None = None  # the stop string that ended the reply (vLLM's choice `stop_reason`)
    logprob_entries: list[dict[str, Any]] | None = None
    """Verbatim `logprobs.content` entries (token, logprob, top_logprobs) instead of ones made from the content."""
    stream_usage: dict[str, Any] | None | str = "auto"
    """Streams only: the usage chunk ("auto": the same as `usage`), for a usage bug that only streams have."""

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Reply":
        return Reply(**d)


# What /props reports, like llama-server: a ChatML template the dual path renders client-side.
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def last_user_text(req: dict[str, Any]) -> str:
    for m in reversed(req.get("messages") or []):
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                return " ".join(p.get("text", "") for p in c if isinstance(p, dict))
            return c or ""
    return ""


def tool_calling(answers: ToolAnswers, fallback: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """A responder that answers known BFCL requests with their ground-truth tool calls (tool_answers.py), and
    everything else with `fallback`."""

    def respond(req: dict[str, Any]) -> Reply:
        fields = answers.reply_fields(req)
        return Reply(**fields) if fields is not None else fallback(req)

    return respond


def needs_tool_call_prefill(answers: ToolAnswers, fallback: Callable[[dict[str, Any]], Reply]) -> Callable[[dict[str, Any]], Reply]:
    """An engine like llama-server with a 0.5B model (engine_tools.py): a known BFCL request gets its ground-truth
    calls as parsed `tool_calls` only when it ends with the assistant message that opens a Hermes call (the serving
    adapter `tool-call-prefill`); without it the model writes the call as bare JSON text, finish_reason stop."""
    from verifier.wire.serving_adapters import TOOL_CALL_OPENING

    def respond(req: dict[str, Any]) -> Reply:
        fields = answers.reply_fields(req)
        if fields is None:
            return fallback(req)
        msgs = req.get("messages") or []
        prefilled = bool(msgs) and isinstance(msgs[-1], dict) and msgs[-1].get("role") == "assistant" \
            and msgs[-1].get("content") == TOOL_CALL_OPENING
        calls = fields.get("tool_calls")
        if prefilled or not calls:
            return Reply(**fields)
        return Reply(content=" ".join(json.dumps({"name": c["name"], "arguments": json.loads(c["arguments"])}) for c in calls))

    return respond


def arithmetic(req: dict[str, Any]) -> Reply:
    """Answers 'What is A + B?' correctly: the embedded default behind `verifier demo` (and counts, for the probes);
    a request of a known BFCL sample gets that sample's ground-truth tool calls (tool_answers.DEFAULT)."""
    fields = DEFAULT_TOOL_ANSWERS.reply_fields(req)
    if fields is not None:
        return Reply(**fields)
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
    return Reply(content=str(int(m.group(1)) + int(m.group(2))) if m else scripted_text(last_user_text(req)) or "I don't know.")


def echo(req: dict[str, Any]) -> Reply:
    return Reply(content=last_user_text(req)[:200] or "ok")


RESPONDERS: dict[str, Callable[[dict[str, Any]], Reply]] = {"arithmetic": arithmetic, "echo": echo}


class Script:
    def __init__(self, responder: Callable[[dict[str, Any]], Reply] = echo, honour_sampling: bool = False,
                 models: tuple[str, ...] | None = None, listed: tuple[str, ...] = (),
                 generation_defaults: dict[str, Any] | None = None, models_status: int = 200,
                 teacher: teaching.Teacher | None = None):
        self.models_status = models_status
        """The status GET /v1/models answers with (HF `transformers serve` 5.19 answers 500): not 200, an error body."""
        self.teacher = teacher
        """The model's distributions (teacher.py): top_logprobs that mean something, and the teacher-forcing methods
        it offers (prompt logprobs, echo, prefill) with its numerics knob. None: neither, as before."""
        self.models = models  # like vLLM: only these names (others 404); None: any name, like llama-server
        self.listed = listed  # with models=None: what /v1/models lists while any name is served (a llama-server alias)
        self.preflight: list[dict[str, Any]] = []  # the verifier's preflight pings, kept out of `requests`
        self.honour_sampling = honour_sampling
        """Behave like a real engine about sampling: 400 on out-of-range temperature/top_p, truncate at
        max_tokens, sample (add noise) unless temperature is 0 (default 0.8), honour request options (request_options.py)."""
        self.generation_defaults = generation_defaults
        """A fault of the server itself, on every surface (with honour_sampling): penalties it applies where the request
        sets none, like an engine reading the model's generation config (e.g. {"repetition_penalty": 1.1})."""
        self.queue: deque[Reply] = deque()
        self.rules: list[tuple[re.Pattern, Reply]] = []
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.stream_times: list[dict[str, Any]] = []
        """Chat streams: {"arrival": t, "frames": [t, ...]} in time.perf_counter seconds, one per request."""
        self._lock = threading.Lock()

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.queue.extend(replies)

    def rule(self, pattern: str, reply: Reply) -> None:
        self.rules.append((re.compile(pattern), reply))

    def answer_text(self, req: dict[str, Any]) -> str:
        """What the model would generate for `req` (rules, then the responder; the queue is left alone): the text
        a teacher-forced request's tokens are the model's own continuation of."""
        text = last_user_text(req)
        reply = next((r for pat, r in self.rules if pat.search(text)), None) or self.responder(req)
        from .wire import generated_text

        return generated_text(reply)

    def next(self, req: dict[str, Any]) -> Reply:
        with self._lock:
            if self.queue:
                return self.queue.popleft()
        text = last_user_text(req)
        for pat, reply in self.rules:
            if pat.search(text):
                return reply
        return self.responder(req)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Script":
        s = Script(RESPONDERS[d.get("responder", "echo")], honour_sampling=bool(d.get("honour_sampling")))
        for r in d.get("rules", []):
            s.rule(r["match"], Reply.from_json(r["reply"]))
        s.enqueue(*(Reply.from_json(r) for r in d.get("queue", [])))
        return s


def _tool_calls(reply: Reply) -> list[dict[str, Any]]:
    return [
        {"id": c.get("id", f"call_{i}"), "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
        for i, c in enumerate(reply.tool_calls or [])
    ]


def _finish(reply: Reply) -> str | None:
    if reply.finish_reason == "auto":
        return "tool_calls" if reply.tool_calls else "stop"
    return reply.finish_reason


def completion_body(reply: Reply, req: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.reasoning_content is not None:
        msg["reasoning_content"] = reply.reasoning_content
    if reply.tool_calls:
        msg["tool_calls"] = _tool_calls(reply)
    choice: dict[str, Any] = {"index": 0, "message": msg, "finish_reason": _finish(reply),
                              **({"stop_reason": reply.stop_sequence} if reply.stop_sequence is not None else {})}
    if reply.logprobs or req.get("logprobs"):
        choice["logprobs"] = _logprobs(reply)
    choices = [choice] + [{**choice, "index": i} for i in range(1, n_choices(req))]  # n > 1: that many (greedy: alike)
    body = {"id": "chatcmpl-test", "object": "chat.completion", "created": 0, "model": req.get("model", "test"), "choices": choices}
    usage = _usage(reply, req)
    if usage is not None:
        body["usage"] = usage
    return body


def stream_chunks(reply: Reply, req: dict[str, Any]) -> list[str]:
    base = {"id": "chatcmpl-test", "object": "chat.completion.chunk", "created": 0, "model": req.get("model", "test")}

    def chunk(delta: dict[str, Any], finish: Any = None, **extra: Any) -> str:
        return json.dumps({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]})

    out = [chunk({"role": "assistant", "content": ""})]
    if reply.reasoning_content:
        for piece in re.findall(r"\S*\s*", reply.reasoning_content):
            if piece:
                out.append(chunk({"reasoning_content": piece}))
    want_lp = reply.logprobs or req.get("logprobs")
    lp = _logprobs(reply)["content"] if want_lp else None
    per_call = call_token_counts(reply) if reply.logprob_entries is None else [0] * len(reply.tool_calls or [])
    content_end = len(lp) - sum(per_call) if lp else 0  # the calls' raw-text tokens come last
    if reply.content:
        pieces = re.findall(r"\s*\S+", reply.content) or [reply.content]
        for i, piece in enumerate(pieces):  # one entry per piece, the rest (a listed stop token) on the last one
            mine = (lp[i:i + 1] if i < len(pieces) - 1 else lp[i:content_end]) if lp else None
            out.append(chunk({"content": piece}, **({"logprobs": {"content": mine}} if mine else {})))
    start = content_end
    for i, c in enumerate(_tool_calls(reply)):
        idx = 0 if reply.stream_index_zero else i
        fn = c["function"]
        mine = lp[start:start + per_call[i]] if lp else None  # the tokens of this call's raw text, on its opening delta
        start += per_call[i]
        out.append(chunk({"tool_calls": [{"index": idx, "id": c["id"], "type": "function", "function": {"name": fn["name"], "arguments": ""}}]},
                         **({"logprobs": {"content": mine}} if mine else {})))
        args = fn["arguments"]
        half = len(args) // 2
        for part in (args[:half], args[half:]):  # arguments split across deltas, as real servers do
            if part:
                out.append(chunk({"tool_calls": [{"index": idx, "function": {"arguments": part}}]}))
    fin = _finish(reply)
    out.append(chunk({}, fin) if fin is not None else chunk({}))
    usage = _usage(reply, req, stream=True)
    if usage is not None and (req.get("stream_options") or {}).get("include_usage"):
        out.append(json.dumps({**base, "choices": [], "usage": usage}))
    out.append("[DONE]")
    return out


def _frames(reply: Reply, req: dict[str, Any]) -> Iterable[str]:
    return (f"data: {c}\n\n" for c in stream_chunks(reply, req))


async def write_sse(request: web.Request, reply: Reply, frames: Iterable[str], times: list[float] | None = None) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache", **reply.headers})
    await resp.prepare(request)
    for i, frame in enumerate(frames):
        if reply.truncate_after is not None and i >= reply.truncate_after:  # a dropped stream, on every surface
            request.transport.abort()
            return resp
        if reply.chunk_delay_s and i:
            await asyncio.sleep(reply.chunk_delay_s)
        await resp.write(frame.encode())
        if times is not None:  # when each event left, for tests of client-side timing (perf probe)
            times.append(time.perf_counter())
    await resp.write_eof()
    return resp


async def _gatekeep(script: Script, request: web.Request, req: dict[str, Any], raw: bool = False) -> web.StreamResponse | None:
    """An unknown model (404, as vLLM) or a preflight ping (a default reply, outside the script); None: the script's."""
    if script.models is not None and req.get("model") not in script.models:
        return web.json_response({"error": {"message": f"The model `{req.get('model')}` does not exist.", "type": "NotFoundError",
                                            "code": 404}}, status=404)
    if not request.headers.get("X-Verifier-Preflight"):
        return None
    script.preflight.append(req)
    if raw:
        return web.json_response({"object": "text_completion", "choices": [{"index": 0, "text": "pong", "finish_reason": "stop"}]})
    return await write_sse(request, Reply(content="pong"), _frames(Reply(content="pong"), req)) if req.get("stream") else web.json_response(completion_body(Reply(content="pong"), req))


def make_app(script: Script) -> web.Application:
    async def chat(request: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        try:
            req = await request.json()
        except (json.JSONDecodeError, RecursionError):
            return web.json_response({"error": {"message": "invalid JSON", "type": "invalid_request_error"}}, status=400)
        if (early := await _gatekeep(script, request, req)) is not None:
            return early
        script.requests.append(req)
        script.headers.append(dict(request.headers))
        if script.teacher is not None and not req.get("stream"):
            forced = teaching.chat_answer(script.teacher, req, script.answer_text, prompt_tokens)
            if forced is not None:
                return web.json_response(forced)
        reply = script.next(req)
        if script.honour_sampling and reply.status == 200 and reply.body is None:
            # request options and sampling, as a real engine applies them (its own defaults where the request is silent)
            sampled = engine_reply(reply, with_server_defaults(req, script.generation_defaults))
            if isinstance(sampled, str):
                return web.json_response({"error": {"message": sampled, "type": "invalid_request_error"}}, status=400)
            reply = sampled
        await delay_or_drop(reply, request)
        if script.teacher is not None and script.teacher.batch_noise and reply.content and not reply.tool_calls:
            reply = dataclasses.replace(reply, content=script.teacher.decoded(
                script.teacher.context(req.get("messages") or []), reply.content))
        if script.teacher is not None and req.get("logprobs") and not reply.tool_calls and reply.logprob_entries is None:
            from .wire import generated_text

            k = req.get("top_logprobs") if isinstance(req.get("top_logprobs"), int) else 0
            entries = script.teacher.entries(script.teacher.context(req.get("messages") or []), generated_text(reply), min(max(k, 0), 20))
            reply = dataclasses.replace(reply, logprob_entries=entries)
        if script.teacher is not None and script.teacher.preamble and reply.usage == "auto":
            usage = _usage(reply, req)
            usage = {**usage, "prompt_tokens": usage["prompt_tokens"] + script.teacher.preamble_tokens,
                     "total_tokens": usage["total_tokens"] + script.teacher.preamble_tokens}
            reply = dataclasses.replace(reply, usage=usage)
        if reply.status != 200:
            body = reply.body or json.dumps({"error": {"message": f"scripted {reply.status}", "type": "server_error", "code": reply.status}})
            return web.Response(status=reply.status, text=body, headers=reply.headers, content_type="application/json")
        if not req.get("stream"):
            text = reply.body if reply.body is not None else json.dumps(completion_body(reply, req))
            return web.Response(text=text, headers=reply.headers, content_type="application/json")
        times: list[float] = []
        resp = await write_sse(request, reply, _frames(reply, req), times)
        script.stream_times.append({"arrival": arrival, "frames": times})
        return resp

    async def completions(request: web.Request) -> web.Response:
        """Raw-prompt completions (the dual path): the responder sees the prompt as the user's text."""
        req = await request.json()
        if (early := await _gatekeep(script, request, req, raw=True)) is not None:
            return early
        script.requests.append(req)
        script.headers.append(dict(request.headers))
        if script.teacher is not None:
            echoed = teaching.echo_answer(script.teacher, req, script.answer_text)
            if echoed is not None:
                return web.json_response(echoed)
        reply = script.next({**req, "messages": [{"role": "user", "content": req.get("prompt", "")}]})
        if reply.status != 200:
            return web.Response(status=reply.status, text=reply.body or "{}", content_type="application/json")
        text = reply.content or ""
        pt = max(1, len(re.findall(r"\w+|[^\w\s]", req.get("prompt", ""))))
        ct = len(re.findall(r"\w+|[^\w\s]", text))
        return web.json_response({"id": "cmpl-test", "object": "text_completion", "model": req.get("model", "test"),
                                  "choices": [{"index": 0, "text": text, "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct}})

    async def props(request: web.Request) -> web.Response:
        return web.json_response({"chat_template": CHATML, "total_slots": 1})

    async def models(request: web.Request) -> web.Response:
        if script.models_status != 200:
            return web.json_response({"error": {"message": "internal error", "type": "server_error"}}, status=script.models_status)
        ids = script.models if script.models is not None else script.listed
        return web.json_response({"object": "list", "data": [{"id": i, "object": "model", "owned_by": "verifier-testserver"} for i in ids]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/props", props)
    add_routes(app, script)  # /v1/responses and /v1/messages, from the same script
    return app


class TestServer:
    """Runs the app on its own thread and event loop; use as a context manager."""

    __test__ = False  # not a pytest class

    def __init__(self, script: Script | None = None, port: int = 0):
        self.script = script or Script()
        self._port = port
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def _start(self) -> None:
        self._runner = web.AppRunner(make_app(self.script), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def start(self) -> "TestServer":
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        if self._runner:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def __enter__(self) -> "TestServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@dataclass(frozen=True)
class ServerConfig:
    """What `python -m verifier.testbed.server` serves, for callers that start it without argv."""

    port: int = 8080
    script: str | None = None
    """JSON file: {responder, rules: [{match, reply}], queue: [reply...]}; overrides responder and honour_sampling."""
    responder: str = "arithmetic"
    """`arithmetic` answers "What is A + B?" right (the smoke suite passes); `echo` repeats the question."""
    delay: float = 0.0
    """Latency added to every reply, seconds."""
    honour_sampling: bool = False
    bfcl_data: str | None = None
    """BFCL data directory whose samples get their ground-truth tool calls (default: $VERIFIER_BFCL_DATA and the
    built-in bfcl smoke subset)."""


def add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 = any free port)")
    ap.add_argument("--script", help="JSON file: {responder, rules: [{match, reply}], queue: [reply...]}")
    ap.add_argument("--responder", choices=sorted(RESPONDERS), default="arithmetic",
                    help="arithmetic (default: right answers to the smoke suite) or echo")
    ap.add_argument("--delay", type=float, default=0.0, help="latency added to every reply, seconds")
    ap.add_argument("--honour-sampling", action="store_true", help="validate and apply temperature/top_p/max_tokens and honour request options like a real engine")
    ap.add_argument("--bfcl-data", metavar="DIR", help="BFCL data dir whose samples (single- and multi-turn) are answered with their "
                    "ground-truth tool calls (default: $VERIFIER_BFCL_DATA, and always the built-in bfcl smoke subset)")


def long_running_script(config: ServerConfig) -> Script:
    """The script a standalone server answers from; it keeps no request log (it would grow without bound)."""
    if config.script:
        with open(config.script, encoding="utf-8") as f:
            script = Script.from_json(json.load(f))
    else:
        script = Script(RESPONDERS[config.responder], honour_sampling=config.honour_sampling)
    if config.bfcl_data:
        if not Path(config.bfcl_data).is_dir():
            raise ValueError(f"--bfcl-data {config.bfcl_data}: not a directory")
        script.responder = tool_calling(ToolAnswers(config.bfcl_data), script.responder)
    if config.delay:
        inner, delay = script.responder, config.delay
        script.responder = lambda req: Reply(**{**inner(req).__dict__, "delay_s": delay})
    script.requests = _Discard()
    script.headers = _Discard()
    return script


def serve(config: ServerConfig) -> None:
    """Serve in the foreground until interrupted."""
    web.run_app(make_app(long_running_script(config)), host="127.0.0.1", port=config.port, access_log=None, print=None)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m verifier.testbed.server", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(ap)
    a = ap.parse_args(argv)
    serve(ServerConfig(port=a.port, script=a.script, responder=a.responder, delay=a.delay, honour_sampling=a.honour_sampling,
                       bfcl_data=a.bfcl_data))


class _Discard(list):
    def append(self, _: Any) -> None:
        pass


if __name__ == "__main__":
    main()
