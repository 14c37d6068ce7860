import asyncio

import pytest

from verifier.wire.endpoint import Endpoint, EndpointConfig, parse_retry_after
from verifier.testbed.server import Reply, Script, TestServer


def send(srv, mode="chat", body=None, max_retries=3, timeout=10.0, sleeps=None):
    async def fake_sleep(s):
        if sleeps is not None:
            sleeps.append(s)

    async def go():
        ep = Endpoint(EndpointConfig(srv.url, "m", max_retries=max_retries, timeout_s=timeout), sleep=fake_sleep)
        try:
            b = body or {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            if mode == "chat-stream":
                b = {**b, "stream": True, "stream_options": {"include_usage": True}}
            return await ep.send(mode, b)
        finally:
            await ep.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["chat", "chat-stream"])
def test_retries_5xx_then_succeeds_and_honours_retry_after(mode):
    with TestServer() as srv:
        srv.script.enqueue(Reply(status=503, headers={"Retry-After": "7"}), Reply(status=429, headers={"Retry-After": "2"}))
        sleeps = []
        r = send(srv, mode, sleeps=sleeps)
        assert r.error is None and r.status == 200 and r.attempts == 3
        assert sleeps == [7.0, 2.0]
        assert len(srv.script.requests) == 3


def test_retries_are_bounded_and_end_as_infra():
    with TestServer() as srv:
        srv.script.enqueue(*[Reply(status=502)] * 10)
        r = send(srv, max_retries=2, sleeps=[])
        assert r.error == "http_502" and r.attempts == 3
        assert len(srv.script.requests) == 3


def test_other_4xx_is_a_result_not_retried():
    with TestServer() as srv:
        srv.script.enqueue(Reply(status=400, body='{"error": {"message": "bad temperature"}}'))
        r = send(srv, sleeps=[])
        assert r.status == 400 and r.error is None and r.attempts == 1
        assert "bad temperature" in r.body


@pytest.mark.parametrize("mode", ["chat", "chat-stream"])
def test_a_408_is_not_now_in_both_places_a_server_can_say_it(mode):
    """HTTP 408 is retried and, if it persists, ends as infra: the same rule as an error event with code 408 inside a
    200 stream (tests/test_wire_hostile_endpoints.py), so "request timeout" is never judged a refusal of the request."""
    from verifier.wire.bodyread import is_refusal

    with TestServer() as srv:
        srv.script.enqueue(*[Reply(status=408)] * 5)
        r = send(srv, mode, max_retries=2, sleeps=[])
        assert r.error == "http_408" and r.attempts == 3 and len(srv.script.requests) == 3
    assert not is_refusal(408) and not is_refusal(429) and is_refusal(400) and is_refusal(422) and not is_refusal(500)


def test_dropped_connection_is_retried():
    with TestServer() as srv:
        srv.script.enqueue(Reply(drop=True))
        r = send(srv, sleeps=[])
        assert r.error is None and r.attempts == 2


def test_truncated_stream_is_infra_and_keeps_chunks():
    with TestServer() as srv:
        srv.script.enqueue(*[Reply(content="a b c d", truncate_after=2)] * 5)
        r = send(srv, "chat-stream", max_retries=1, sleeps=[])
        assert r.error in ("read_error", "stream_truncated")
        assert r.attempts == 2
        assert r.chunks and len(r.chunks) <= 2


def test_timeout_is_infra():
    with TestServer() as srv:
        srv.script.enqueue(*[Reply(delay_s=1.0)] * 3)
        r = send(srv, timeout=0.2, max_retries=1, sleeps=[])
        assert r.error == "timeout" and r.attempts == 2


def test_raw_body_keeps_unknown_fields():
    with TestServer() as srv:
        srv.script.enqueue(Reply(body='{"choices":[{"message":{"content":"x","reasoning_content":"r"},"finish_reason":"weird"}],"vendor_field":1}'))
        r = send(srv, sleeps=[])
        assert '"vendor_field":1' in r.body and '"finish_reason":"weird"' in r.body


def test_parse_retry_after_forms():
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
