"""The lean request path: one prepared request per body, sent through aiohttp's ClientSession and nothing above it.

It must still send what a full client would: the configured headers, the same bytes on every retry, a cookie the
server set (sticky sessions behind a load balancer), through the proxy the environment names.
"""

import asyncio
import json

import pytest

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


RUN_IMPORTS = """
import json, sys
from verifier.cli import main
code = main(["run", "--suite", "smoke", "--smoke", "--base-url", sys.argv[1], "--model", "m", "--out", sys.argv[2], "--quiet"])
print(json.dumps({"code": code, "modules": sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[3].split(","))}))
"""


def test_a_run_imports_no_httpx_layer(server, tmp_path):
    """`verifier run` talks through aiohttp alone: none of httpx, httpx2, httpcore2 or httpx-aiohttp is imported
    (their imports cost ~0.1 s of CPU per process, and their Request/Response layer CPU on every request)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    watched = "httpx,httpx2,httpcore,httpcore2,httpx_aiohttp,openai,aiohttp"
    p = subprocess.run([sys.executable, "-c", RUN_IMPORTS, server.url, str(tmp_path / "r"), watched], capture_output=True,
                       text=True, timeout=300, cwd=root, env={**os.environ, "PYTHONPATH": str(root)})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["code"] == 0 and server.script.requests  # the run did send, through aiohttp
    assert {m.split(".")[0] for m in doc["modules"]} == {"aiohttp"}, doc["modules"]


def test_the_proxy_the_environment_names_is_used_and_no_proxy_honoured(server, monkeypatch):
    """HTTP_PROXY carries the request to the proxy (here the test server, which answers it as an origin would);
    a host NO_PROXY lists is connected to directly (here it does not resolve)."""
    root = server.url.removesuffix("/v1")
    monkeypatch.setenv("HTTP_PROXY", root)
    monkeypatch.setenv("NO_PROXY", "direct.invalid")
    for k in ("http_proxy", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(k, raising=False)
    (proxied,) = send_all(EndpointConfig("http://upstream.invalid/v1", "m", max_retries=0), [BODY])
    assert proxied.error is None and json.loads(proxied.body)["choices"][0]["message"]["content"] == "5"
    (direct,) = send_all(EndpointConfig("http://direct.invalid/v1", "m", max_retries=0), [BODY])
    assert direct.error == "dns_error"


def test_a_declared_charset_that_is_no_text_codec_is_unknown():
    """`charset=base64` names a codec Python has, but not one text decodes with: read as UTF-8, or refused where strict."""
    from verifier.wire.bodyread import UnknownCharset, _charset

    class Resp:
        def __init__(self, ct):
            self.headers = {"content-type": ct}

    assert _charset(Resp("application/json"), True) == "utf-8"
    assert _charset(Resp("application/json; charset=ISO-8859-1"), True) == "iso8859-1"
    assert _charset(Resp('text/plain; charset="utf-16"'), True) == "utf-16"
    for bad in ("base64", "x-no-such-codec", "rot13", ""):
        assert _charset(Resp(f"application/json; charset={bad}"), False) == "utf-8"
        with pytest.raises(UnknownCharset):
            _charset(Resp(f"application/json; charset={bad}"), True)
