"""Connection refused, an unknown host and a silent server are three different problems with three different fixes:
each has its own error class (journal and console) and hint, never one ConnectTimeout for all (issue #25)."""

import asyncio
import socket

import pytest

from verifier.wire.endpoint import TRANSPORT_HINTS, Endpoint, EndpointConfig


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now: a connect is refused at once
    return port


def send(url: str, **cfg) -> str | None:
    async def go():
        ep = Endpoint(EndpointConfig(url, "m", max_retries=0, **cfg))
        try:
            return (await ep.send("chat", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})).error
        finally:
            await ep.aclose()

    return asyncio.run(go())


def test_refused_dns_and_timeout_are_told_apart():
    assert send(f"http://127.0.0.1:{closed_port()}/v1") == "connect_refused"
    assert send("http://no-such-host.invalid/v1") == "dns_error"
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # the kernel completes the handshake; nobody ever answers
    try:
        assert send(f"http://127.0.0.1:{silent.getsockname()[1]}/v1", timeout_s=0.5) == "timeout"
    finally:
        silent.close()


@pytest.mark.parametrize("url, cls", [(None, "connect_refused"), ("http://no-such-host.invalid/v1", "dns_error")])
def test_the_console_names_the_class_and_its_hint(url, cls, tmp_path, cli):
    url = url or f"http://127.0.0.1:{closed_port()}/v1"
    for cmd in (["run", "--suite", "smoke", "--smoke"], ["gate", "--golden", "demo-smoke"]):
        code, _, err = cli(*cmd, "--base-url", url, "--model", "m", "--out", tmp_path / cmd[0], "--quiet")
        assert code == 2 and err.count("\n") == 1, err
        assert f"{cls}: {TRANSPORT_HINTS[cls]}" in err and "ConnectTimeout" not in err
        assert not (tmp_path / cmd[0] / "responses.jsonl").exists()
