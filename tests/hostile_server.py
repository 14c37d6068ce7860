"""A hostile OpenAI-compatible server on 127.0.0.1 for the hardening tests (issue #16).

One behaviour per server instance (`HostileServer("echo")`); every request is recorded with its
headers so tests can assert what the client sent. Behaviours are the ones seen from broken or
malicious endpoints: echoing credentials (whole, bare, split across stream chunks, `\\u002d`-escaped),
redirects, gzip bombs, huge bodies, endless or dripping streams, mid-stream error events, JSON nested
1,000 deep, NaN logprobs and Infinity usage. Issue #22 adds: a bomb or a drip on `GET /models`, control characters
and unknown charsets there, millions of tiny SSE events, integers past Python's int-str limit, secrets split where
only the parser rejoins them (chat, Responses, Messages streams), and bodies just under the client's cap.
"""

from __future__ import annotations

import json
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEEP = "[" * 1000 + "]" * 1000
HUGE = "9" * 5000  # past Python's 4,300-digit int-str limit: json.loads raises ValueError, not JSONDecodeError
_BOMB: bytes | None = None


def gzip_bomb(total: int = 2**30) -> bytes:
    """`total` zero bytes, gzip-compressed (about 1 MB on the wire for 1 GiB), built in well under a second:
    after a full flush the compressor starts afresh, so one compressed MiB repeats verbatim."""
    global _BOMB
    if _BOMB is None:
        block = b"\0" * 2**20
        c = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
        one = c.compress(block) + c.flush(zlib.Z_FULL_FLUSH)
        n = total // len(block)
        crc = 0
        for _ in range(n):
            crc = zlib.crc32(block, crc)
        _BOMB = (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff" + one * n + c.flush(zlib.Z_FINISH)
                 + struct.pack("<II", crc, (n * len(block)) & 0xFFFFFFFF))
    return _BOMB


def completion(content: str | None = "ok", **extra_choice: Any) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop", **extra_choice}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}


def delta(content: str) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": None}]})


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, *_: Any) -> None:
        pass

    def _send(self, status: int, body: bytes | str, headers: dict[str, str] | None = None) -> None:
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", "Content-Length": str(len(data)), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _sse_head(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()

    def _events(self, payloads: list[str]) -> None:
        self._sse_head()
        for p in payloads:
            self.wfile.write(f"data: {p}\n\n".encode())
            self.wfile.flush()
        self.close_connection = True

    def _record(self, body: Any = None) -> None:
        self.server.requests.append({"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "body": body})

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._record()
        echo = {k: v for k, v in self.headers.items()}
        b = self.server.behaviour
        if b == "slow_info" and not self.path.endswith("/models"):
            t_end = time.monotonic() + 30  # the server is slow; the client's start-up deadline must not wait for it
            while time.monotonic() < t_end and not self.server.stopping:
                time.sleep(0.05)
        if self.path.endswith("/models") and b in MODELS_BEHAVIOURS:
            MODELS_BEHAVIOURS[b](self)
        elif self.path.endswith("/models"):
            self._send(200, json.dumps({"object": "list", "data": [{"id": "m", "owned_by": "me", "echo": echo}], "headers": echo}))
        elif self.path.endswith("/props"):
            self._send(200, json.dumps({"chat_template": "{{ messages[0].content }}", "build_info": "b1", "request_headers": echo,
                                        "default_generation_settings": {"n_ctx": 4096, "temperature": 0.8, "api_key": echo.get("Authorization")}}))
        elif self.path.endswith("/version"):
            self._send(200, json.dumps({"version": "0.0.1", "echo": echo}))
        elif self.path.endswith("/chat/completions"):  # the target of a redirect: a GET without the body
            self._send(200, json.dumps(completion("answer from the other host")))
        else:
            self._send(404, "{}")

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        stream = isinstance(body, dict) and body.get("stream")
        if self.server.behaviour == "models_ansi":  # a 404 for the model: the preflight then lists the served ids
            return self._send(404, json.dumps({"error": {"message": "model not found"}}))
        if self.headers.get("X-Verifier-Preflight"):
            # The verifier's preflight ping: a plain answer, unrecorded; the behaviour is for the run's samples.
            return self.b_fine(stream, body)
        self._record(body)
        if self.server.behaviour in MODELS_BEHAVIOURS:
            return self.b_fine(stream, body)  # these misbehave on GET /models only
        getattr(self, "b_" + self.server.behaviour.replace("-", "_"))(stream, body)

    # --- behaviours -------------------------------------------------------------------------
    def _tokens(self, body: Any = None) -> list[str]:
        """The credentials this request carries: its headers', else its body's `api_key` (an --extra-body credential)."""
        auth = self.headers.get("Authorization", "")
        found = [v for v in (auth, auth.split(" ", 1)[-1], self.headers.get("X-Api-Key", "")) if v]
        if not found and isinstance(body, dict) and isinstance(body.get("api_key"), str):
            found = ["Bearer " + body["api_key"], body["api_key"]]
        return found

    def b_echo(self, stream: bool, body: Any) -> None:
        """Echo credentials every way: whole, bare, split across chunks, escaped."""
        toks = self._tokens(body)
        bare = toks[1] if len(toks) > 1 else toks[0]
        escaped = json.dumps(bare).replace("-", "\\u002d")[1:-1]
        if stream:
            half = len(bare) // 2
            chunks = [delta("key: " + bare[:half]), delta(bare[half:] + " and "), delta(" ".join(toks))]
            last = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                               "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
            raw_escaped = '{"choices":[{"index":0,"delta":{"content":"esc ' + escaped + '"},"finish_reason":null}]}'
            self._events(chunks + [raw_escaped, last, "[DONE]"])
        else:
            text = json.dumps(completion("echo " + " | ".join(toks)))
            text = text[:-1] + ', "escaped": "' + escaped + '"}'
            self._send(200, text)

    def b_unauthorized(self, stream: bool, body: Any) -> None:
        bare = self._tokens()[1]
        self._send(401, json.dumps({"error": {"message": f"Incorrect API key provided: {bare}. You can find your key at ..."}}))

    def b_redirect(self, stream: bool, body: Any) -> None:
        self._send(301, "", {"Location": self.server.redirect_to + "/v1/chat/completions"})

    def b_gzip_bomb(self, stream: bool, body: Any) -> None:
        self._send(200, gzip_bomb(), {"Content-Encoding": "gzip"})

    def b_big(self, stream: bool, body: Any) -> None:
        size = 100 * 2**20
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        block = b" " * 2**20
        try:
            for _ in range(size // len(block)):
                self.wfile.write(block)
        except OSError:
            pass  # the client hung up at its cap

    def b_big_stream(self, stream: bool, body: Any) -> None:
        """100 MB of one SSE line that never ends."""
        self._sse_head()
        block = b"data: " + b"x" * 2**20
        try:
            for _ in range(100):
                self.wfile.write(block)
                block = b"x" * 2**20
        except OSError:
            pass
        self.close_connection = True

    def b_endless(self, stream: bool, body: Any) -> None:
        self._sse_head()
        try:
            while not self.server.stopping:
                self.wfile.write(f"data: {delta('la ')}\n\n".encode())
                self.wfile.flush()
                time.sleep(0.05)
        except OSError:
            pass
        self.close_connection = True

    def b_stall(self, stream: bool, body: Any) -> None:
        """A stream that sends two events, then nothing more until the server stops."""
        self._sse_head()
        try:
            for piece in ("la ", "la "):
                self.wfile.write(f"data: {delta(piece)}\n\n".encode())
                self.wfile.flush()
            while not self.server.stopping:
                time.sleep(0.05)
        except OSError:
            pass
        self.close_connection = True

    def b_drip(self, stream: bool, body: Any) -> None:
        text = json.dumps(completion("slow")).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(text)))
        self.end_headers()
        try:
            for i in range(len(text)):
                if self.server.stopping:
                    return
                self.wfile.write(text[i:i + 1])
                self.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    def b_stream_error(self, stream: bool, body: Any) -> None:
        self._events([delta("partial "), json.dumps({"error": {"message": "server overloaded", "type": "overloaded"}})])

    def b_stream_refused(self, stream: bool, body: Any) -> None:
        """vLLM's shape when its structured-output backend rejects the request after the stream began: a 200, then
        one error event with a client-error code (measured: outlines and response_format json_object)."""
        err = {"message": "Outlines structured outputs backend does not support json_object specifications",
               "type": "BadRequestError", "param": None, "code": 400}
        if stream:
            self._events([json.dumps({"error": err})])
        else:
            self._send(400, json.dumps({"error": err}))

    def b_deep(self, stream: bool, body: Any) -> None:
        """1,000-deep JSON, by request: `deep_where` in the request body picks the place."""
        where = (body or {}).get("metadata", {}).get("deep_where") or self.server.deep_where
        if where == "body":
            self._send(200, '{"choices": ' + DEEP + "}")
        elif where == "chunk":
            self._events([delta("x"), DEEP, "[DONE]"])
        elif where == "content":
            self._send(200, json.dumps(completion(DEEP)))
        else:
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": DEEP}}]}
            self._send(200, json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}))

    def b_many_values(self, stream: bool, body: Any) -> None:
        """`pad_mb` MiB of `[{},{},...]` (valid JSON, millions of values) as the content (`deep_where` "content") or as
        a tool call's arguments (else), in a non-streamed body or (stream) one SSE event."""
        many = "[" + "{}," * (self.server.pad_mb * 2**20 // 3) + "{}]"
        if self.server.deep_where == "content":
            msg: dict[str, Any] = {"role": "assistant", "content": many}
            finish = "stop"
        else:
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"v": ' + many + "}"}}]}
            finish = "tool_calls"
        usage = {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}
        if stream:
            first = {"choices": [{"index": 0, "delta": {**msg, "tool_calls": [{"index": 0, **c} for c in msg.get("tool_calls") or []]
                                                       } if "tool_calls" in msg else msg, "finish_reason": None}]}
            self._events([json.dumps(first), json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}],
                                                         "usage": usage}), "[DONE]"])
        else:
            self._send(200, json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage}))

    def b_fine(self, stream: bool, body: Any) -> None:
        """The same answer as `nan`, with finite numbers: a reference for it."""
        self._send(200, json.dumps(completion("ok", logprobs={"content": [{"token": "ok", "logprob": -0.1, "top_logprobs": []}]})))

    def b_nan(self, stream: bool, body: Any) -> None:
        lp = {"content": [{"token": "ok", "logprob": float("nan"), "top_logprobs": []}]}
        d = completion("ok", logprobs=lp)
        d["usage"] = {"prompt_tokens": float("inf"), "completion_tokens": float("nan"), "total_tokens": 6}
        self._send(200, json.dumps(d))  # Python writes bare NaN/Infinity, as such servers do

    def b_stream_ignored(self, stream: bool, body: Any) -> None:
        """`stream: true` ignored: one JSON completion whatever was asked."""
        self._send(200, json.dumps(completion("ok")))

    def b_sse_as_json(self, stream: bool, body: Any) -> None:
        """A correct stream under the wrong header (Content-Type: application/json), as some gateways relabel it."""
        if not stream:
            return self.b_fine(stream, body)
        last = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}})
        self._send(200, f"data: {delta('ok')}\n\ndata: {last}\n\ndata: [DONE]\n\n")

    def b_sse_multiline(self, stream: bool, body: Any) -> None:
        """Valid SSE that only a spec-reading client assembles: CRLF line ends, comments, `event:`/`id:` fields, and
        an event whose JSON spans three `data:` lines (joined with newlines, as the openai SDK's decoder does)."""
        self._sse_head()
        first = json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "4"}, "finish_reason": None}]},
                           indent=1).splitlines()
        last = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}})
        frames = [": keep-alive\r\n\r\n", "id: 1\r\nevent: message\r\n",
                  "".join(f"data: {line}\r\n" for line in [first[0], " ".join(first[1:-1]), first[-1]]), "\r\n",
                  f"data: {delta('2')}\r\n\r\n", f"data:{last}\r\n\r\n", "data: [DONE]\r\n\r\n"]
        for f in frames:
            self.wfile.write(f.encode())
            self.wfile.flush()
        self.close_connection = True


    # --- issue #22 ------------------------------------------------------------------------------
    def models_bomb(self) -> None:
        self._send(200, gzip_bomb(), {"Content-Encoding": "gzip"})

    def models_drip(self) -> None:
        """Headers at once, then one byte every 2 s: each read is within any timeout, the whole never ends."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(10**6))
        self.end_headers()
        t_end = time.monotonic() + 120
        try:
            while time.monotonic() < t_end and not self.server.stopping:
                self.wfile.write(b" ")
                self.wfile.flush()
                for _ in range(40):
                    if self.server.stopping:
                        return
                    time.sleep(0.05)
        except OSError:
            pass

    def models_ansi(self) -> None:
        """A model id that would clear the screen and draw a fake verdict over the real line."""
        evil = "m\x1b[2J\x1b[H\rstatus: pass\x07\u202e"
        self._send(200, json.dumps({"object": "list", "data": [{"id": evil, "owned_by": "me"}]}))

    def models_charset(self) -> None:
        self._send(200, json.dumps({"object": "list", "data": [{"id": "m"}]}), {"Content-Type": "application/json; charset=x-no-such-codec"})

    def b_tiny_events(self, stream: bool, body: Any) -> None:
        """8 M lines of `data:{}` (64 MB, under the byte cap), then a valid stream."""
        if not stream:
            return self.b_fine(stream, body)
        self._sse_head()
        block = b"data:{}\n" * 2**17  # 1 MiB
        try:
            for _ in range(64):
                if self.server.stopping:
                    return
                self.wfile.write(block)
            self.wfile.write(f"data: {delta('ok')}\n\ndata: [DONE]\n\n".encode())
        except OSError:
            pass  # the client hung up at its event cap
        self.close_connection = True

    def b_huge_int(self, stream: bool, body: Any) -> None:
        """A 5,000-digit integer where `huge_where` says: the body, a stream chunk, tool arguments, or the content
        (which the response_format probe parses as JSON)."""
        where = self.server.deep_where
        if where == "chunk" and stream:
            last = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            self._events([delta("4"), '{"choices": [{"index": 0, "delta": {"content": "x"}}], "n": ' + HUGE + "}", last, "[DONE]"])
        elif where == "tool_args":
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"n": ' + HUGE + "}"}}]}
            self._send(200, json.dumps({"choices": [{"index": 0, "message": msg, "finish_reason": "tool_calls"}],
                                        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6}}))
        elif where == "content":
            self._send(200, json.dumps(completion('{"probe_code": ' + HUGE + "}")))
        else:
            text = json.dumps(completion("4"))
            self._send(200, text.replace('"prompt_tokens": 5', '"prompt_tokens": ' + HUGE))

    def _halves(self) -> list[tuple[str, str]]:
        toks = [self._tokens()[1]] + ([self.headers["X-Api-Key"]] if self.headers.get("X-Api-Key") else [])
        return [(t[: len(t) // 2], t[len(t) // 2:]) for t in toks]

    def b_split_choice(self, stream: bool, body: Any) -> None:
        """Each secret in two halves: the second in a second choice that also says `index: 0`. The parser appends every
        choice's delta to the one answer, so it spells the secret; a redactor that keys pieces by choice position does not."""
        if not stream:
            return self.b_fine(stream, body)
        chunks = []
        for a, b in self._halves():
            chunks.append(json.dumps({"choices": [{"index": 0, "delta": {"content": " key " + a}, "finish_reason": None}]}))
            chunks.append(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": None},
                                                  {"index": 0, "delta": {"content": b}, "finish_reason": None}]}))
        last = json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
        self._events(chunks + [last, "[DONE]"])

    def b_split_messages(self, stream: bool, body: Any) -> None:
        """Messages stream: a secret's first half in `content_block_start.text`, the second in a `text_delta`."""
        if not stream:
            return self._send(200, json.dumps({"type": "message", "role": "assistant", "content": [{"type": "text", "text": "ok"}],
                                               "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 1}}))
        evs = [{"type": "message_start", "message": {"id": "msg_1", "role": "assistant", "usage": {"input_tokens": 5, "output_tokens": 0}}}]
        for i, (a, b) in enumerate(self._halves()):
            evs += [{"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": " key " + a}},
                    {"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": b}},
                    {"type": "content_block_stop", "index": i}]
        evs += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
                {"type": "message_stop"}]
        self._events([json.dumps(e) for e in evs])

    def b_split_responses(self, stream: bool, body: Any) -> None:
        """Responses stream: a secret's halves in `output_text.delta` events of different `output_index`."""
        usage = {"input_tokens": 5, "output_tokens": 3, "total_tokens": 8}
        if not stream:
            return self._send(200, json.dumps({"object": "response", "status": "completed", "usage": usage, "output": [
                {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]}]}))
        evs: list[dict[str, Any]] = [{"type": "response.created", "response": {"status": "in_progress"}}]
        for i, (a, b) in enumerate(self._halves()):
            evs += [{"type": "response.output_text.delta", "output_index": 2 * i, "content_index": 0, "delta": " key " + a},
                    {"type": "response.output_text.delta", "output_index": 2 * i + 1, "content_index": 0, "delta": b}]
        evs.append({"type": "response.completed", "response": {"status": "completed", "usage": usage, "output": []}})
        self._events([json.dumps(e) for e in evs])

    def b_padded(self, stream: bool, body: Any) -> None:
        """A valid completion of `pad_mb` MiB (default 62: just under the client's 64 MiB cap, so it is read whole)."""
        n = self.server.pad_mb
        head = json.dumps(completion("4"))[:-1].encode() + b', "pad": "'
        tail = b'"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(head) + n * 2**20 + len(tail)))
        self.end_headers()
        block = b" " * 2**20
        try:
            self.wfile.write(head)
            for _ in range(n):
                self.wfile.write(block)
            self.wfile.write(tail)
        except OSError:
            pass

    def b_big_json(self, stream: bool, body: Any) -> None:
        """A 400 MB JSON completion (whitespace inside): what a response fault in the proxy must not buffer whole."""
        head = json.dumps(completion("4"))[:-1].encode() + b', "pad": "'
        tail = b'"}'
        size = 400 * 2**20
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(head) + size + len(tail)))
        self.end_headers()
        block = b" " * 2**20
        try:
            self.wfile.write(head)
            for _ in range(400):
                self.wfile.write(block)
            self.wfile.write(tail)
        except OSError:
            pass


MODELS_BEHAVIOURS = {"models_bomb": _Handler.models_bomb, "models_drip": _Handler.models_drip,
                     "models_ansi": _Handler.models_ansi, "models_charset": _Handler.models_charset}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-body is the expected outcome here, not news


class HostileServer:
    """`with HostileServer("echo") as srv:` then `srv.url` (ends in /v1) and `srv.requests`."""

    def __init__(self, behaviour: str, redirect_to: str = "", deep_where: str = "tool_args", pad_mb: int = 62):
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.behaviour = behaviour  # type: ignore[attr-defined]
        self.httpd.requests = []  # type: ignore[attr-defined]
        self.httpd.redirect_to = redirect_to  # type: ignore[attr-defined]
        self.httpd.deep_where = deep_where  # type: ignore[attr-defined]
        self.httpd.pad_mb = pad_mb  # type: ignore[attr-defined]
        self.httpd.stopping = False  # type: ignore[attr-defined]
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = self.base + "/v1"
        self._t = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def requests(self) -> list[dict[str, Any]]:
        return self.httpd.requests  # type: ignore[attr-defined]

    def __enter__(self) -> "HostileServer":
        self._t.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.stopping = True  # type: ignore[attr-defined]
        self.httpd.shutdown()
        self.httpd.server_close()
