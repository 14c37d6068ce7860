"""What a verdict rests on is said, never left out: a pass without numerics evidence says so; a golden mode made
of infra errors is not blessed; probe infra is its own account; a /v1/models that fails is one line and recorded.
Real test servers on 127.0.0.1 and the real command."""

import json

from conftest import zero_margins
from verifier.testbed.server import Script, TestServer, arithmetic


def test_a_pass_without_logprobs_says_no_drift_or_parting_was_measured(tmp_path, cli):
    with TestServer(Script(arithmetic)) as srv:
        assert cli("run", "--suite", "smoke", "--smoke", "--mode", "chat", "--base-url", srv.url, "--model", "m",
                   "--out", tmp_path / "ref", "--quiet")[0] == 0
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "golden")[0] == 0
        zero_margins(tmp_path / "golden")
        code, out, err = cli("gate", "--golden", tmp_path / "golden", "--base-url", srv.url, "--model", "m",
                             "--out", tmp_path / "g", "--quiet")
    assert code == 0, (out, err)
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert doc["status"] == "pass" and doc["suites"]["smoke"]["drift"]["state"] == "unavailable"
    line = next(r for r in doc["reasons"] if r.startswith("numerics not measured"))
    assert "on smoke: no logprob drift and no greedy parting (no logprobs from the golden or the run)" in line, line
    assert line in out


def test_bless_refuses_a_mode_whose_records_are_all_infra(tmp_path, cli):
    """Every stream cut (half the records: under the whole-run check) must not become a golden mode of errors."""
    import dataclasses

    def streams_cut(req):
        reply = arithmetic(req)
        return dataclasses.replace(reply, truncate_after=1) if req.get("stream") else reply

    with TestServer(Script(streams_cut)) as srv:
        assert cli("run", "--suite", "smoke", "--smoke", "--mode", "chat,chat-stream", "--base-url", srv.url, "--model", "m",
                   "--out", tmp_path / "ref", "--quiet", "--max-retries", "0")[0] == 0
    code, out, err = cli("bless", tmp_path / "ref", "--to", tmp_path / "golden")
    assert code == 2 and "every smoke record on mode chat-stream is an infra error" in err and "--force" in err, err
    assert err.count("\n") == 1 and not (tmp_path / "golden" / "golden.json").exists()
    assert cli("bless", tmp_path / "ref", "--to", tmp_path / "golden", "--force")[0] == 0  # said, and allowed when meant


def test_one_probe_infra_error_is_its_own_account_and_the_exit_does_not_depend_on_limit(tmp_path, cli):
    """A 500 on one probe's request: that probe is not judged (inconclusive, exit 20, named), with 3 samples or 20
    (it used to count against the samples' 2% budget: incomplete at --limit 3, inconclusive on the whole golden)."""
    from verifier.testbed.server import Reply

    def stop_probe_fails(req):
        return Reply(status=500) if req.get("stop") else arithmetic(req)

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        assert cli("run", "--suite", "smoke", "--smoke", "--probes", "--model", "m", "--quiet", "--max-retries", "0",
                   "--base-url", srv.url, "--out", tmp_path / "ref")[0] == 0
    assert cli("bless", tmp_path / "ref", "--to", tmp_path / "g")[0] == 0
    zero_margins(tmp_path / "g")
    exits = {}
    with TestServer(Script(stop_probe_fails, honour_sampling=True)) as srv:
        for name, extra in (("limited", ["--limit", "3"]), ("whole", [])):
            code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--quiet",
                                 "--max-retries", "0", "--out", tmp_path / name, *extra)
            doc = json.loads((tmp_path / name / "comparison.json").read_text())
            exits[name] = code
            assert doc["coverage"]["probe_infra"]["count"] >= 1 and doc["coverage"]["rate"] == 0.0, doc["coverage"]
            ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "probe_infra")
            assert ev["verdict"] == "inconclusive" and "stop_honoured@chat" in ev["summary"], ev
            assert "stop_honoured@chat" in out
    assert exits == {"limited": 20, "whole": 20}, exits


def test_a_500_on_models_is_one_line_and_recorded(tmp_path, cli):
    with TestServer(Script(arithmetic, models_status=500)) as srv:
        code, out, err = cli("run", "--suite", "smoke", "--limit", "2", "--base-url", srv.url, "--model", "m",
                             "--out", tmp_path / "r", "--quiet")
    assert code == 0, err
    lines = [x for x in err.splitlines() if "/models" in x]
    assert len(lines) == 1 and "HTTP 500" in lines[0] and "server_info.models_error" in lines[0], err
    assert json.loads((tmp_path / "r" / "run.json").read_text())["server_info"]["models_error"] == "HTTP 500"


def test_a_mode_refused_whole_is_said_with_the_logprobs_it_asked_for(tmp_path, cli):
    """llama-server answers logprobs on a stream with tools with HTTP 400: a whole mode `unsupported`, now said."""
    from verifier.testbed.server import Reply

    def no_logprobs_on_streams(req):
        if req.get("stream") and req.get("logprobs"):
            return Reply(status=400, body='{"error": {"message": "logprobs is not supported with tools + stream"}}')
        return arithmetic(req)

    with TestServer(Script(no_logprobs_on_streams)) as srv:
        code, out, err = cli("run", "--suite", "smoke", "--limit", "3", "--mode", "chat,chat-stream", "--logprobs", "1",
                             "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet", "--max-retries", "0")
    assert code == 0, err
    lines = [x for x in err.splitlines() if x.startswith("warning: the server refused every record")]
    assert len(lines) == 1 and "smoke on chat-stream (http_400)" in lines[0] and "asked for logprobs" in lines[0], err
    assert "smoke on chat " not in lines[0]


def test_a_gate_record_is_checked_at_the_edge(tmp_path, cli):
    """run.json's `gate` comes from whoever made the directory: a malformed one is one line, exit 2, never applied."""
    with TestServer(Script(arithmetic)) as srv:
        code, out, err = cli("gate", "--golden", "demo-smoke", "--limit", "2", "--base-url", srv.url, "--model", "m",
                             "--out", tmp_path / "g", "--quiet")
    assert code == 0, err
    hdr = json.loads((tmp_path / "g" / "run.json").read_text())
    assert hdr["gate"]["limit"] == 2 and hdr["gate"]["golden"] == "demo-smoke"
    hdr["gate"]["limit"] = "all"
    (tmp_path / "g" / "run.json").write_text(json.dumps(hdr))
    code, out, err = cli("compare", tmp_path / "g", "--golden", "demo-smoke", "--out", tmp_path / "c.json")
    assert code == 2 and "`gate.limit` is not what a gate records" in err and err.count("\n") == 1, err
