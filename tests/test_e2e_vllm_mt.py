"""bfcl-multi-turn on a real engine: the shipped vLLM multi-turn golden travels, and a history fault fails on its turn.

Marked e2e, in the vLLM tier (.ci/run). Its own vLLM server (the golden's configuration, recorded by
bench/release/bfcl_mt_engine.py --engine vllm: float32, eager, a 16K context for the 32 function docs and the growing
conversation), behind the serving adapter `turn-call-required` the golden names (tool_choice "required" on the
first request of each user turn, "auto" after tool results), applied by the gate's --serving-adapter. The golden holds its samples (inputs.jsonl), so no BFCL
data is needed. The gates take the golden's first two conversations: on vLLM's CPU backend an entry's first request
prefills ~4.4K prompt tokens in about a minute.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifier.testbed.proxy import Proxy

from conftest import vllm_server

pytestmark = pytest.mark.e2e

GOLDEN = "qwen0.5b-vllm-bfcl-mt"
SUITE = "bfcl-multi-turn"
QUICK = ["--quiet", "--concurrency", "4", "--limit", "2", "--no-probes", "--serving-adapter", "turn-call-required"]


@pytest.fixture(scope="module")
def vllm_mt(tmp_path_factory):
    with vllm_server(tmp_path_factory, "qwen0.5b", enforce_eager=True, max_model_len=16384, kv_cache_space_gib=2) as srv:
        yield srv


def gate(cli, url: str, model: str, out: Path) -> tuple[int, dict, str]:
    code, stdout, err = cli("gate", "--golden", GOLDEN, "--base-url", url, "--model", model, "--out", out, *QUICK)
    assert (out / "comparison.json").exists(), (code, stdout + err)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_the_multi_turn_golden_travels_and_a_dropped_tool_result_fails_on_the_first_follow_up(vllm_mt, tmp_path, cli):
    code, doc, out = gate(cli, vllm_mt.url, vllm_mt.name, tmp_path / "rerun")
    s = doc["suites"][SUITE]
    # Real conversations: every request answered, tool calls parsed and executed, turns compared one by one.
    assert doc["infra"]["count"] == 0 and s["paired"] >= 4, out
    assert code == 0 and doc["status"] == "pass", out
    assert all(m["diverged"] == 0 for m in s["turn_diff"]["by_mode"].values()), s["turn_diff"]
    # The fault sits where a serving frontend's bug would: between the turn rule (the client's serving adapter) and
    # the engine.
    with Proxy(vllm_mt.url, ["tool_result_dropped"]) as bad:
        code, doc, out = gate(cli, bad.url, vllm_mt.name, tmp_path / "dropped")
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert doc["diagnosis"][0]["component"] == "conversation history", doc["diagnosis"]
    s = doc["suites"][SUITE]
    assert s["signals"]["history_tokens_mismatch"]["verdict"] == "fail", s["signals"]["history_tokens_mismatch"]
    # Caught on the first request that carries a tool result: turn 1's follow-up step, never the opening request.
    firsts = [e for m in s["turn_diff"]["by_mode"].values() for e in m["examples"]]
    assert firsts and all(e["turn"] > 1 or e["step"] >= 1 for e in firsts), firsts
