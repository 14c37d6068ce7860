"""The lean request path: one prepared request per body, sent straight to the SDK's transport.

It must still send what the client's own `send` would: the configured headers, the same bytes on every
retry, and a cookie the server set (sticky sessions behind a load balancer).
"""

import asyncio
import json

from verifier.wire.endpoint import Endpoint, EndpointConfig
from verifier.testbed.server import Reply, Script, TestServer, arithmetic

BODY = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}], "temperature": 0.0}


def send_all(cfg, bodies, mode="chat"):
    async def go():
        ep = Endpoint(cfg, sleep=lambda s: asyncio.sleep(0))
        try:
            return [await ep.send(mode, b) for b in bodies]
        finally:
            await ep.aclose()

    return asyncio.run(go())


def test_retry_resends_identical_bytes_and_headers():
    with TestServer(Script(arithmetic)) as srv:
        srv.script.enqueue(Reply(status=503))
        (r,) = send_all(EndpointConfig(srv.url, "m", api_key="sk-test-123456789", headers={"X-Team": "eval"}), [BODY])
        assert r.error is None and r.attempts == 2
        assert srv.script.requests[0] == srv.script.requests[1] == BODY
        for raw in srv.script.headers[-2:]:
            h = {k.lower(): v for k, v in raw.items()}
            assert h["authorization"] == "Bearer sk-test-123456789" and h["x-team"] == "eval"
            assert h["content-type"] == "application/json" and "user-agent" in h


def test_cookie_set_by_the_server_comes_back():
    with TestServer(Script(arithmetic)) as srv:
        srv.script.enqueue(Reply(headers={"Set-Cookie": "lb=node-7; Path=/"}))
        first, second = send_all(EndpointConfig(srv.url, "m"), [BODY, BODY])
        assert first.error is None and second.error is None
        sent = [{k.lower(): v for k, v in h.items()} for h in srv.script.headers]
        assert "cookie" not in sent[0] and sent[1]["cookie"] == "lb=node-7"


def test_stream_and_body_read_through_the_prepared_path():
    with TestServer(Script(arithmetic)) as srv:
        (chat,) = send_all(EndpointConfig(srv.url, "m"), [BODY])
        (stream,) = send_all(EndpointConfig(srv.url, "m"), [{**BODY, "stream": True}], mode="chat-stream")
    assert json.loads(chat.body)["choices"][0]["message"]["content"] == "5"
    assert stream.error is None and stream.chunks[-1] == "[DONE]"
