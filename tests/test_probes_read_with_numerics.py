"""A probe tests the feature, not the model's words (issue 50, item 1). A quantized model that counts otherwise
("1 2 33 ...", no "5") makes stop_honoured's check fail and streams fewer packets: with the sample-level numerics
moved (drift above the noise and greedy outputs parted), that is no frontend evidence, and the gate is the numerics
regression it is; with the numerics the reference's, the same failure still blames the frontend."""

import json
import re

import pytest

from conftest import zero_margins
from verifier.testbed.server import Reply, Script, TestServer, arithmetic

COUNTED_OTHERWISE = "1 2 33 4 6 7 8 9"


def quantized(numerics_moved: bool):
    def reply(req):
        text = " ".join(m.get("content") or "" for m in req.get("messages") or [] if isinstance(m.get("content"), str))
        if "Count from 1 to 30" in text:
            return Reply(content=COUNTED_OTHERWISE)
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", text)
        if m and numerics_moved:  # the same first token, then the output parts; every logprob moved
            return Reply(content=f"{int(m.group(1)) + int(m.group(2))} is the sum", logprob_shift=0.3)
        return arithmetic(req)
    return reply


@pytest.fixture(scope="module")
def probe_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("probe-golden")
    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        assert main(["run", "--suite", "smoke", "--smoke", "--mode", "chat", "--logprobs", "1", "--probes", "--model", "m",
                     "--quiet", "--max-retries", "0", "--base-url", srv.url, "--out", str(tmp / "ref")]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "g")]) == 0
    zero_margins(tmp / "g")
    return tmp / "g"


def _gate(cli, golden, responder, out):
    with TestServer(Script(responder, honour_sampling=True)) as srv:
        code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", out, "--quiet",
                                "--max-retries", "0")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err, stdout


def test_a_probe_that_reads_the_output_is_not_frontend_evidence_when_the_numerics_moved(probe_golden, tmp_path, cli):
    code, doc, out, _ = _gate(cli, probe_golden, quantized(numerics_moved=True), tmp_path / "q")
    assert code == 11 and doc["status"] == "quantization_regression", out
    assert doc["frontend"]["verdict"] != "fail" and not doc["diagnosis"], doc["diagnosis"]
    ev = {e["signal"]: e for e in doc["frontend"]["evidence"] if e.get("modes") == {"chat": 1}}
    stop = ev["probe:stop_honoured"]
    assert stop["verdict"] == "inconclusive" and stop["qualifier"] == "model_output", stop
    assert "the numerics moved too" in stop["summary"] and "FAILED" in stop["summary"]
    packets = ev["probe:stream_packet_sizes"]  # fewer packets of the reference's size: the check passes
    assert packets["verdict"] != "fail" and "its check passed" in packets["summary"], packets


def test_the_same_probe_failure_blames_the_frontend_when_the_numerics_are_the_references(probe_golden, tmp_path, cli):
    code, doc, out, stdout = _gate(cli, probe_golden, quantized(numerics_moved=False), tmp_path / "f")
    assert code == 10 and doc["status"] == "frontend_regression", out
    # Issue 50, item 7: --quiet against a probe-recorded golden printed 40-55 lines; the status, the first cause and
    # the report path now (the probe table is in the report)
    lines = stdout.splitlines()
    assert len(lines) == 3 and lines[0].startswith("status: frontend_regression (exit 10)"), stdout
    assert lines[1].startswith("  diagnosis: ") and lines[2] == f"report: {tmp_path / 'f' / 'report.html'}", stdout
    stop = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "probe:stop_honoured" and e.get("modes") == {"chat": 1})
    assert stop["verdict"] == "fail" and stop["qualifier"] == "model_output", stop
    assert any(d["component"] == "API validation" for d in doc["diagnosis"]), doc["diagnosis"]


def test_a_probe_line_says_what_each_sides_check_said():
    """Issue 50, item 6: a chatml gate printed `max_tokens_honoured on chat: passed (... reference passed)` as a
    failure, and `rejects_negative_temperature ... FAILED (HTTP 200; ... reference passed)` where the golden's
    probes.json said the reference failed too. Each side's own check is said as the results hold it."""
    from verifier.execution.probe_results import evidence

    base = {"surface": "chat", "component": "API validation", "reference_detail": ""}
    rows = [
        {**base, "key": "max_tokens_honoured@chat", "probe": "max_tokens_honoured", "reference": "pass",
         "candidate": "pass", "status": "regression", "weak": True,
         "candidate_detail": "stopped at 8 tokens; but the greedy text moved"},
        {**base, "key": "rejects_negative_temperature@chat", "probe": "rejects_negative_temperature", "reference": "fail",
         "candidate": "fail", "status": "regression", "candidate_detail": "HTTP 200; but the prompt tokens moved"},
        {**base, "key": "stop_honoured@chat", "probe": "stop_honoured", "reference": "pass", "candidate": "fail",
         "status": "regression", "candidate_detail": "'5' in the output"},
        {**base, "key": "seed_reproducible@chat", "probe": "seed_reproducible", "reference": "fail", "candidate": "pass",
         "status": "improved", "candidate_detail": "same text"},
    ]
    said = {k: e["summary"] for k, e in evidence(rows).items()}
    moved = said["max_tokens_honoured@chat"]
    assert "its check passed, but the exchange moved" in moved and "FAILED" not in moved and "reference passed" in moved
    both = said["rejects_negative_temperature@chat"]
    assert "FAILED (HTTP 200" in both and "reference also fails" in both and "reference passed" not in both, both
    assert "FAILED ('5' in the output; reference passed)" in said["stop_honoured@chat"]
    better = said["seed_reproducible@chat"]
    assert "passed (same text; reference failed)" in better, better
