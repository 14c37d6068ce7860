"""The test server answers BFCL requests with real tool calls, and every tool-call fault fails a gate on them.

The golden is a bfcl smoke run on the clean test server (default responder, no flags) over every surface, streamed
and not; each tool-call fault of the proxy (and the test server's own index-0 streaming bug) is gated against it
and must exit 10 with the component that owns the bug named first.
"""

from __future__ import annotations

import json
import re

import pytest


from conftest import zero_margins
from verifier.judge.parse import parse_exchange
from verifier.execution import journal
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic
from verifier.testbed.wire import raw_call_text

MODES = "chat,chat-stream,responses,responses-stream,messages,messages-stream"
RUN = ["--suite", "bfcl", "--smoke", "--model", "m", "--quiet", "--mode", MODES, "--logprobs", "1", "--max-retries", "0"]

# fault -> the component the diagnosis must name first
FAULTS = {
    "tool_markup_in_content": "tool-call parser",
    "tool_args_invalid_json": "tool-call parser",
    "tool_args_double_encoded": "tool-call parser",
    "tool_args_truncated": "tool-call parser",
    "tool_call_ids_rewritten": "tool-call parser",
    "stream_index_zero": "stream assembly",  # the parser's output is right; the streamed deltas are merged
    "finish_reason_wrong": "response formatting & usage",
    "finish_reason_missing": "response formatting & usage",
}

@pytest.fixture(scope="module")
def bfcl_golden(tmp_path_factory):
    from verifier.cli import main

    root = tmp_path_factory.mktemp("bfcl-golden")
    with TestServer(Script(arithmetic)) as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(root / "ref")]) == 0
    g = root / "golden"
    assert main(["bless", str(root / "ref"), "--to", str(g)]) == 0
    zero_margins(g)
    return root / "ref", g


def test_the_clean_server_answers_bfcl_with_parsed_tool_calls_on_every_mode(bfcl_golden):
    ref, _ = bfcl_golden
    by_mode: dict[str, int] = {}
    for key, ex in journal.read_exchanges(ref).items():
        p = parse_exchange(ex)
        if p.tool_calls:
            by_mode[ex.mode] = by_mode.get(ex.mode, 0) + 1
            for c in p.tool_calls:
                assert isinstance(json.loads(c["function"]["arguments"]), dict)
            assert "<tool_call>" not in (p.content or "")
    assert set(by_mode) == set(MODES.split(",")) and min(by_mode.values()) >= 15, by_mode
    summary = json.loads((ref / "summary.json").read_text())["suites"]["bfcl"]
    assert summary["metrics"]["accuracy"]["value"] == 1.0  # the ground truth's own calls
    assert summary["extra"]["trigger"]["tool_triggered"] >= 15 * 6


def test_chat_logprobs_spell_the_raw_call_text(server):
    import httpx

    from suites import bfcl

    s = next(x for x in bfcl.load(smoke=True) if x.meta["category"] == "parallel")
    body = {**bfcl.request(s), "model": "m", "logprobs": True}
    r = httpx.post(server.url + "/chat/completions", json=body, timeout=10, trust_env=False).json()
    calls = r["choices"][0]["message"]["tool_calls"]
    assert len(calls) >= 2
    spelled = "".join(e["token"] for e in r["choices"][0]["logprobs"]["content"])
    assert spelled == "\n".join(raw_call_text(c["function"]["name"], c["function"]["arguments"]) for c in calls)
    # streamed: the same tokens, each call's on its opening delta
    with httpx.stream("POST", server.url + "/chat/completions", json={**body, "stream": True}, timeout=10, trust_env=False) as resp:
        chunks = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: {")]
    streamed = "".join(e["token"] for c in chunks for ch in c["choices"] for e in ((ch.get("logprobs") or {}).get("content") or []))
    assert streamed == spelled


def test_unknown_tool_requests_fall_back_to_the_text_answer(server):
    import httpx

    body = {"model": "m", "messages": [{"role": "user", "content": "What is 2 + 3?"}],
            "tools": [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]}
    msg = httpx.post(server.url + "/chat/completions", json=body, timeout=10, trust_env=False).json()["choices"][0]["message"]
    assert msg["content"] == "5" and not msg.get("tool_calls")


def _gate(cli, golden, url, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_a_rerun_on_the_clean_server_passes(bfcl_golden, tmp_path, cli):
    _, g = bfcl_golden
    with TestServer(Script(arithmetic)) as srv:
        code, doc, out = _gate(cli, g, srv.url, tmp_path / "rerun")
    assert code == 0 and doc["frontend"]["verdict"] == "pass", out


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_each_tool_call_fault_of_the_proxy_fails_naming_its_component(fault, bfcl_golden, tmp_path, cli):
    _, g = bfcl_golden
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, [fault]) as px:
        code, doc, out = _gate(cli, g, px.url, tmp_path / fault)
    assert code == 10, out
    named = [d["component"] for d in doc["diagnosis"]]
    assert FAULTS[fault] in named, doc["diagnosis"]
    # tool_args_double_encoded also makes Messages and chat disagree (the string is the `input` itself there), so
    # surface parity is named too; the sample-level parser finding ranks first on the tie (attribution/diagnosis.py).
    assert named[0] == FAULTS[fault], named
    assert re.search(rf"diagnosis: {re.escape(named[0])}:", out), out


def test_the_servers_own_index_zero_stream_bug_fails_naming_stream_assembly(bfcl_golden, tmp_path, cli):
    _, g = bfcl_golden

    def index_zero(req):
        return Reply(**{**arithmetic(req).__dict__, "stream_index_zero": True})

    with TestServer(Script(index_zero)) as srv:
        code, doc, out = _gate(cli, g, srv.url, tmp_path / "server-index-zero")
    assert code == 10 and doc["diagnosis"][0]["component"] == "stream assembly", (doc["diagnosis"], out)


def test_multi_turn_is_replayed_from_the_data_dir_given_to_the_server(shared_data, tmp_path, cli):
    """`verifier testbed serve --bfcl-data DIR` (the server's config): every turn's ground-truth calls, on every surface."""
    from verifier.testbed.server import ServerConfig, long_running_script

    data = shared_data / "bfcl"
    if not (data / "BFCL_v4_multi_turn_base.json").is_file():
        pytest.skip("no BFCL multi-turn data in the shared data")
    with TestServer(long_running_script(ServerConfig(port=0, bfcl_data=str(data)))) as srv:
        code, out, err = cli("run", "--suite", "bfcl-multi-turn", "--data", data, "--limit", "2", "--model", "m", "--quiet",
                             "--mode", "chat,responses-stream,messages-stream", "--base-url", srv.url, "--out", tmp_path / "mt")
    assert code == 0, err
    s = json.loads((tmp_path / "mt" / "summary.json").read_text())["suites"]["bfcl-multi-turn"]
    assert s["metrics"]["entry_accuracy"]["value"] == 1.0 and s["metrics"]["turn_accuracy"]["n"] >= 4, s["metrics"]


def test_a_bfcl_data_dir_that_is_not_one_is_a_usage_error(cli, tmp_path):
    code, _, err = cli("testbed", "serve", "--port", "0", "--bfcl-data", tmp_path / "nope")
    assert code == 2 and "--bfcl-data" in err and err.count("\n") == 1
