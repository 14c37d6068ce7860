"""A golden without a calibrated margin for a measured signal (calibrated before the signal existed, or without it):
that signal is uncalibrated, inconclusive where it fired, with the reason in comparison.json and on the terminal,
never a KeyError or a usage error (exit 2). The other signals decide as always."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from verifier.golden.model import GoldenHeader
from verifier.attribution import compare
from verifier.golden import store
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Script, TestServer, arithmetic
from verifier.types import Observation

KEY = "smoke/signal:new_findings"


def golden_without(tmp_path: Path, *keys: str) -> Path:
    """The shipped demo-smoke golden, copied, with these margins deleted."""
    dest = tmp_path / "demo-smoke-old"
    shutil.copytree(store.resolve("demo-smoke"), dest)
    g = json.loads((dest / "golden.json").read_text())
    for k in keys:
        del g["margins"][k]
    (dest / "golden.json").write_text(json.dumps(g, indent=1))
    return dest


def test_gate_with_a_missing_margin_is_inconclusive_for_that_signal_and_says_why(tmp_path, cli):
    golden = golden_without(tmp_path, KEY)
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["answer_in_reasoning"], seed=0) as broken:
        code, out, err = cli("gate", "--golden", golden, "--base-url", broken.url, "--model", "demo", "--out", tmp_path / "run",
                             "--max-retries", "0")
        assert code == 20, (out, err)  # not 2: no "golden has no margin", no KeyError
        doc = json.loads((tmp_path / "run" / "comparison.json").read_text())
        ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "new_findings")
        assert ev["verdict"] == "inconclusive" and ev["qualifier"] == "uncalibrated"
        assert f"golden not calibrated for {KEY}" in ev["summary"]
        assert doc["suites"]["smoke"]["signals"]["new_findings"]["margin"] is None
        assert any("new_findings uncalibrated" in r and KEY in r for r in doc["reasons"])
        assert "new_findings uncalibrated" in out and f"golden not calibrated for {KEY}" in out  # the terminal summary
        assert doc["status"] == "inconclusive" and doc["frontend"]["verdict"] == "inconclusive"
        # the healthy endpoint: the signal did not fire, so the missing margin decides nothing (a rate of 0 clears any)
        code, out, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "demo", "--out", tmp_path / "ok",
                             "--max-retries", "0")
        assert code == 0, (out, err)


def test_compare_after_a_margin_is_deleted_reads_it_as_uncalibrated_not_as_a_usage_error(tmp_path, cli):
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["usage_dropped"], seed=0) as broken:
        assert cli("gate", "--golden", "demo-smoke", "--base-url", broken.url, "--model", "demo", "--out", tmp_path / "run",
                   "--max-retries", "0")[0] == 10
    golden = golden_without(tmp_path, KEY, "smoke/accuracy", "smoke/drift")
    code, out, err = cli("compare", tmp_path / "run", "--golden", golden, "--out", tmp_path / "again.json")  # the gate's is kept
    assert code == 20 and "usage error" not in err.lower() and "has no margin" not in err, (out, err)
    assert f"golden not calibrated for {KEY}" in out


def obs(sid: str, mode: str = "chat", **kw: object) -> Observation:
    base: dict[str, object] = {"score": 1.0, "metrics": {"accuracy": 1.0}, "answer": 4, "prompt_tokens": 10}
    return Observation(suite="s", sample_id=sid, epoch=0, mode=mode, outcome="content", **(base | kw))  # type: ignore[arg-type]


def test_an_uncalibrated_signal_never_hides_a_calibrated_failure():
    """new_findings has no margin and fires (inconclusive), prompt_tokens_mismatch is calibrated and fires: the
    frontend fails on the calibrated one, and the uncalibrated one stays inconclusive beside it."""
    golden = [obs(f"x{i}") for i in range(12)]
    cand = [obs(f"x{i}", findings=("usage_missing",), prompt_tokens=11) for i in range(12)]
    margins = {"s/accuracy": 0.0, "s/drift": 0.0, "s/signal:prompt_tokens_mismatch": 0.0}
    doc = compare.compare(GoldenHeader.from_json({"suites": {"s": {"version": "1"}}, "margins": margins}), golden, cand).to_dict()
    assert doc["status"] == "frontend_regression" and doc["exit_code"] == 10
    sig = doc["suites"]["s"]["signals"]
    assert sig["prompt_tokens_mismatch"]["verdict"] == "fail"
    assert sig["new_findings"]["verdict"] == "inconclusive" and "golden not calibrated for s/signal:new_findings" in sig["new_findings"]["note"]
    assert [d["component"] for d in doc["diagnosis"]] == ["chat template & tokenization"]  # an uncalibrated signal blames nothing


def test_a_missing_metric_margin_is_named_in_the_reasons():
    golden = [obs(f"x{i}") for i in range(12)]
    cand = [obs(f"x{i}", score=0.0 if i < 2 else 1.0, metrics={"accuracy": 0.0 if i < 2 else 1.0}, answer=5 if i < 2 else 4)
            for i in range(12)]
    doc = compare.compare(GoldenHeader.from_json({"suites": {"s": {"version": "1"}}, "margins": {"s/drift": 0.0}}), golden, cand).to_dict()
    assert doc["suites"]["s"]["metrics"]["accuracy"]["margin"] is None
    q = next(e for e in doc["quantization"]["evidence"] if e["signal"] == "quality")
    assert q["qualifier"] == "uncalibrated" and "golden not calibrated for s/accuracy" in q["summary"]
    assert doc["status"] == "inconclusive"
    assert any(r.startswith("s/accuracy:") and "golden not calibrated for s/accuracy" in r for r in doc["reasons"])
