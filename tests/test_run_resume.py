"""A resume, and a gate's rerun of a golden, take the recorded concurrency unless told otherwise, and say when
they differ; sampling comes from run.json on resume."""

import json

from verifier.app import collect
from verifier.testbed.server import Script, TestServer, arithmetic


def _spy(monkeypatch):
    used = []
    real = collect.endpoint_config

    def spy(ep, model=None):
        cfg = real(ep, model)
        used.append(cfg.concurrency)
        return cfg

    monkeypatch.setattr(collect, "endpoint_config", spy)
    return used


def _cut(out, keep):
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    (out / "responses.jsonl").write_text("".join(lines[:keep]))


def test_run_json_records_concurrency_and_a_resume_reuses_it(tmp_path, cli, monkeypatch):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        assert cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--concurrency", "1", "--temperature", "0.3",
                   "--base-url", srv.url, "--out", out)[0] == 0
        hdr = json.loads((out / "run.json").read_text())
        assert hdr["endpoint"]["concurrency"] == 1 and hdr["sampling"]["overrides"]["temperature"] == 0.3
        _cut(out, 10)
        used = _spy(monkeypatch)
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
        assert code == 0 and used == [1] and "differs" not in err, (used, err)
        assert all(r.get("temperature") == 0.3 for r in srv.script.requests)  # the run's sampling, not the default
        _cut(out, 10)
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet", "--concurrency", "4")
    assert code == 0 and used[-1] == 4
    assert "--concurrency 4 differs from the recorded 1" in err, err


def test_a_gate_reruns_the_golden_at_its_recorded_concurrency(tmp_path, cli, monkeypatch):
    with TestServer(Script(arithmetic)) as srv:
        assert cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--concurrency", "2", "--base-url", srv.url,
                   "--out", tmp_path / "ref")[0] == 0
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "g")[0] == 0
        assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "ref", tmp_path / "ref")[0] == 0
        used = _spy(monkeypatch)
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--quiet",
                             "--out", tmp_path / "gate")
        assert code == 0 and used and used[0] == 2 and "differs" not in err, (used, out, err)
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--quiet",
                             "--out", tmp_path / "gate3", "--concurrency", "3")
    assert code == 0 and used[-1] == 3
    assert "the golden's rerun: --concurrency 3 differs from the recorded 2" in err, err
