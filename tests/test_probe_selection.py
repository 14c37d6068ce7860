"""A gate reruns exactly the golden's probes by default (run/probes.py `selection`, `wanted`)."""

import asyncio

from verifier.run import probe_results
from verifier.run.probes import run_probes, selection, wanted
from verifier.testbed.server import Script, TestServer, arithmetic
from verifier.wire.endpoint import Endpoint, EndpointConfig


def test_selection_is_the_golden_s_recorded_results():
    golden = {"stop_honoured@chat": {"passed": True, "detail": ""}, "n_honoured": {"passed": True, "detail": ""},
              "stream_terminal_event@messages": {"passed": False, "detail": "x"}, "junk": "not a result"}
    assert selection(golden) == {"stop_honoured@chat", "n_honoured@chat", "stream_terminal_event@messages"}
    assert selection(None) == frozenset()
    assert wanted(None, "x", "chat") and wanted({"x"}, "x", "messages") and wanted({"x@chat"}, "x", "chat")
    assert not wanted({"x@chat"}, "x", "messages") and not wanted(frozenset(), "x", "chat")


def test_only_the_selected_probes_are_sent():
    golden = {"stop_honoured@chat": {"passed": True, "detail": ""}, "stream_terminal_event@messages": {"passed": True, "detail": ""}}

    async def go(url):
        ep = Endpoint(EndpointConfig(base_url=url, model="m", max_retries=0))
        try:
            return await run_probes(ep, "m", {}, ("chat", "responses", "messages"), only=selection(golden))
        finally:
            await ep.aclose()

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        res = asyncio.run(go(srv.url))
        sent = len(srv.script.requests)
    assert set(res) == set(golden) and all(v["passed"] for v in res.values()), res
    assert sent == 3  # stop_honoured: 2 requests; stream_terminal_event: 1
    assert probe_results.split("stream_terminal_event@messages") == ("stream_terminal_event", "messages")
