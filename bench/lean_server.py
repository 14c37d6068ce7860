"""A fixed-latency OpenAI-style server with nothing else in it, for the latency benchmark only.

    python bench/lean_server.py PORT DELAY_SECONDS

One asyncio protocol: HTTP/1.1 keep-alive, a request framed by Content-Length, one fixed chat completion sent
`DELAY_SECONDS` after the request arrived, and a fixed /models list for the start-up probe. No parsing of the
body, no sampling, no faults: the project's test server (verifier.testbed.server) does all of that and costs CPU
per request, which the 200 ms benchmark would otherwise charge to the client under test.
"""

from __future__ import annotations

import asyncio
import json
import sys

_CHAT = json.dumps({"id": "chatcmpl-lean", "object": "chat.completion", "created": 0, "model": "lean",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "The answer is 4."},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 8, "completion_tokens": 5, "total_tokens": 13}}).encode()
_MODELS = json.dumps({"object": "list", "data": [{"id": "lean", "object": "model"}]}).encode()
_MAX_HEAD = 64 * 1024


def _reply(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


CHAT, MODELS = _reply(_CHAT), _reply(_MODELS)
BAD = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


class Lean(asyncio.Protocol):
    def __init__(self, delay: float):
        self.delay, self.buf, self.transport = delay, b"", None

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
            self.buf = self.buf[end + 4 + length:]
            if head.startswith(b"get") and b"/models" in head.split(b"\r\n", 1)[0]:
                self.transport.write(MODELS)
            elif head.startswith(b"post"):
                asyncio.get_running_loop().call_later(self.delay, self._send, CHAT)
            else:
                self.transport.write(BAD)
                self.transport.close()
                return
        if len(self.buf) > _MAX_HEAD:
            self.transport.close()

    def _send(self, data: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(data)


async def serve(port: int, delay: float) -> None:
    server = await asyncio.get_running_loop().create_server(lambda: Lean(delay), "127.0.0.1", port)
    await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(serve(int(sys.argv[1]), float(sys.argv[2])))
