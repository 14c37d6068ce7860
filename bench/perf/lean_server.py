"""A fixed-latency OpenAI-style server with nothing else in it, for the latency and client-CPU benchmarks only.

    python bench/perf/lean_server.py PORT DELAY_SECONDS [--reply fixed|tool|json] [--logprobs N]

One asyncio protocol: HTTP/1.1 keep-alive, a request framed by Content-Length, one chat completion sent
`DELAY_SECONDS` after the request arrived, and a fixed /models list for the start-up probe. No sampling, no
faults: the project's test server (verifier.testbed.server) does all of that and costs CPU per request, which
the benchmarks would otherwise charge to the client under test. It is outside the package on purpose: a client
measured against its own test bed could be tuned to it.

- `fixed` (default): one fixed completion ("The answer is 4."), the body not even parsed.
- `tool`: a call of the request's first tool, its required parameters filled with a value of their type (a
  bfcl run then goes through the tool-call checker, not only its "no call" branch).
- `json`: an instance of the request's `response_format` schema built from its `type`, `properties`,
  `required`, `enum`, `const` and `items` (a structured run then validates real objects).
- `--logprobs N`: a `logprobs.content` entry per token of the answer (about 4 characters each) with N
  `top_logprobs`, as a server answering `logprobs: true, top_logprobs: N` sends them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

_MODELS = json.dumps({"object": "list", "data": [{"id": "lean", "object": "model"}]}).encode()
_MAX_HEAD = 64 * 1024
FIXED_TEXT = "The answer is 4."


def _reply(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def completion(content: str | None, tool_calls: list[dict[str, Any]] | None = None, logprobs: int = 0) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
    if logprobs:
        text = content if content is not None else "".join(c["function"]["arguments"] for c in tool_calls or [])
        tokens = [text[i:i + 4] for i in range(0, len(text), 4)] or [""]
        choice["logprobs"] = {"content": [
            {"token": t, "logprob": -0.01 * (i % 7), "bytes": list(t.encode()),
             "top_logprobs": [{"token": t if k == 0 else f"{t}~{k}", "logprob": -0.01 * (i % 7) - k, "bytes": None}
                              for k in range(logprobs)]}
            for i, t in enumerate(tokens)]}
    return _reply(json.dumps({"id": "chatcmpl-lean", "object": "chat.completion", "created": 0, "model": "lean",
                              "choices": [choice],
                              "usage": {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13}}).encode())


def instance(schema: Any, depth: int = 0) -> Any:
    """A small value the schema's common keywords allow (not a validator: a wrong one is a fine answer too)."""
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return instance(schema[key][0], depth + 1)
    t = schema.get("type")
    t = t[0] if isinstance(t, list) and t else t
    if t == "object" or isinstance(schema.get("properties"), dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
        required = schema.get("required") if isinstance(schema.get("required"), list) else list(props)[:3]
        return {k: instance(props.get(k), depth + 1) for k in required if isinstance(k, str)}
    if t == "array":
        return [instance(schema.get("items"), depth + 1)] if schema.get("minItems") else []
    return {"string": "lean", "integer": 1, "number": 1.5, "boolean": True, "null": None}.get(t, "lean")


def answer(body: bytes, reply: str, logprobs: int) -> bytes:
    try:
        req = json.loads(body)
    except ValueError:
        return completion(FIXED_TEXT, logprobs=logprobs)
    if reply == "tool" and req.get("tools"):
        fn = req["tools"][0].get("function") or {}
        args = instance({**(fn.get("parameters") or {}), "type": "object"})
        call = {"id": "call_lean0", "type": "function",
                "function": {"name": fn.get("name", "f"), "arguments": json.dumps(args)}}
        return completion(None, [call], logprobs)
    if reply == "json":
        rf = req.get("response_format") or {}
        schema = (rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else {"type": "object"}
        return completion(json.dumps(instance(schema)), logprobs=logprobs)
    return completion(FIXED_TEXT, logprobs=logprobs)


MODELS = _reply(_MODELS)
BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Lean(asyncio.Protocol):
    def __init__(self, delay: float, reply: str, logprobs: int):
        self.delay, self.reply, self.logprobs, self.buf, self.transport = delay, reply, logprobs, b"", None
        self.fixed = completion(FIXED_TEXT, logprobs=logprobs)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (end := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:end].lower()
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.startswith(b"content-length:"):
                    length = int(line[15:])
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4:end + 4 + length]
            self.buf = self.buf[end + 4 + length:]
            if head.startswith(b"get") and b"/models" in head.split(b"\r\n", 1)[0]:
                self.transport.write(MODELS)
            elif head.startswith(b"post"):
                out = self.fixed if self.reply == "fixed" else answer(body, self.reply, self.logprobs)
                asyncio.get_running_loop().call_later(self.delay, self._send, out)
            else:
                self.transport.write(BAD)
                self.transport.close()
                return
        if len(self.buf) > _MAX_HEAD:
            self.transport.close()

    def _send(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)


async def serve(port: int, delay: float, reply: str = "fixed", logprobs: int = 0) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Lean(delay, reply, logprobs), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("delay", type=float)
    ap.add_argument("--reply", choices=("fixed", "tool", "json"), default="fixed")
    ap.add_argument("--logprobs", type=int, default=0)
    a = ap.parse_args()
    asyncio.run(serve(a.port, a.delay, a.reply, a.logprobs))
