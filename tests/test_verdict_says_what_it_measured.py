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
