"""Issue 47, item 7: three faults the diagnosis named wrong, reproduced on the test bed through the proxy, and named by
general mechanisms (no rule for one fault):
- a duplicated SSE event where only the probes' streams carry text (bfcl: the samples are tool calls) named the probes'
  own components; a probe request whose streamed greedy text moved while no non-streamed probe text did is the stream's
  doing (stream assembly);
- generation-config defaults (a penalty the request did not set) moved what the model wrote on many probes, each
  naming its own component; once a probe that shows the server changing outputs by itself fails, the probes whose
  evidence is what the model wrote are explained there (API validation);
- rescaled logprobs on vision's one-word answers passed: too few values per sample to measure a transform; the
  values pooled over the suite's short answers show it (response formatting & usage)."""

import dataclasses
import json

import pytest

from conftest import zero_margins
from test_attribution_wire import clean_reference
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Script, TestServer

MODES = "chat,chat-stream"


def penalised():
    """The clean reference, but a penalty on repeated tokens changes its outputs, as it does a real model's (one space
    doubled and a word added): what a server applying generation-config defaults does to every greedy text."""
    inner = clean_reference().responder

    def respond(req):
        reply = inner(req)
        if req.get("repetition_penalty", 1.0) != 1.0 and reply.content:
            return dataclasses.replace(reply, content=reply.content.replace(" ", "  ", 1) + " Done")
        return reply

    return Script(respond, honour_sampling=True)


def golden_of(root, suite, *flags):
    from verifier.cli import main

    with TestServer(penalised()) as srv:
        assert main(["run", "--suite", suite, "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(root / "ref"),
                     "--quiet", "--mode", MODES, "--logprobs", "2", "--max-retries", "0", *flags]) == 0
    assert main(["bless", str(root / "ref"), "--to", str(root / "g")]) == 0
    zero_margins(root / "g")
    return root / "g"


@pytest.fixture(scope="module")
def bfcl_probes(tmp_path_factory):
    return golden_of(tmp_path_factory.mktemp("bfcl"), "bfcl", "--probes")


def gate(cli, golden, fault, out):
    with TestServer(penalised()) as srv, Proxy(srv.url, [fault]) as px:
        code, stdout, err = cli("gate", "--golden", golden, "--base-url", px.url, "--model", "m", "--out", out, "--quiet")
    assert px.mutations, "the fault never acted"
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_a_duplicated_event_seen_only_on_probe_streams_is_stream_assembly(bfcl_probes, tmp_path, cli):
    code, doc, out = gate(cli, bfcl_probes, "stream_duplicate_event", tmp_path / "g")
    assert code == 10, out
    assert [d["component"] for d in doc["diagnosis"]] == ["stream assembly"], doc["diagnosis"]
    moved = [r for r in doc["conformance"] if r.get("evidence_code") == "stream_text_mismatch"]
    assert moved and all(r["probe"] in ("stream_packet_sizes", "stream_usage_last_chunk") for r in moved), moved


def test_generation_config_defaults_explain_the_probes_that_read_the_output(bfcl_probes, tmp_path, cli):
    code, doc, out = gate(cli, bfcl_probes, "generation_config_defaults", tmp_path / "g")
    assert code == 10, out
    assert [d["component"] for d in doc["diagnosis"]] == ["API validation"], doc["diagnosis"]
    first = doc["diagnosis"][0]
    assert {"probe:neutral_sampling_defaults", "probe:neutral_defaults_on_repeats"} <= set(first["findings"]), first
    held = {e["signal"]: e for e in doc["frontend"]["evidence"] if e["verdict"] == "inconclusive"}
    kept = held["probe:thinking_kept_across_turns"]  # its own check failed: turn 2 replays a penalised turn 1
    assert "changes what the model writes by itself" in kept["summary"] and "neutral_sampling_defaults" in kept["summary"]


def test_the_clean_server_gates_clean_with_the_penalty_responder(bfcl_probes, tmp_path, cli):
    with TestServer(penalised()) as srv:
        code, stdout, err = cli("gate", "--golden", bfcl_probes, "--base-url", srv.url, "--model", "m", "--out",
                                tmp_path / "g", "--quiet")
    assert code == 0, stdout + err


def test_rescaled_logprobs_on_one_word_answers_are_named_by_the_pooled_values(tmp_path, cli):
    golden = golden_of(tmp_path, "vision")
    code, doc, out = gate(cli, golden, "logprobs_scaled", tmp_path / "gate")
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert doc["diagnosis"][0]["component"] == "response formatting & usage", doc["diagnosis"]
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "logprobs_transformed" and e["verdict"] == "fail")
    assert "pooled" in ev["summary"]
    assert doc["suites"]["vision"]["signals"]["logprobs_transformed"]["n"] == 0  # no answer long enough alone


def test_pooled_values_need_one_transform_over_every_value():
    from verifier.attribution import signals

    scaled = [(-0.2, -0.26), (-0.5, -0.65), (-1.0, -1.3)]
    assert signals.one_transform(scaled) is True
    assert signals.one_transform(scaled[:2]) is None  # two values tell nothing
    # numerics: each value moved by its own amount
    assert signals.one_transform([(-0.2, -0.25), (-0.5, -0.71), (-1.0, -1.12)]) is False
    assert signals.one_transform([(-0.2, -0.2001), (-0.5, -0.5002), (-1.0, -1.0)]) is False  # batch noise
