"""Numerics decided, not just suspected: logprob drift beyond the calibrated noise AND greedy outputs that part
from the golden's more often than the reference's own reruns do give a quantization regression, even when the
metric cannot move significantly at this n. Either measure alone stays undecided."""

import json
import re

from verifier.testbed.server import Reply, Script, TestServer


def _answer(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return int(m.group(1)) + int(m.group(2))


def numerics_moved(req):
    # Same first token (so the shared prefix carries the drift), then the output parts: right answers still.
    return Reply(content=f"{_answer(req)} is the sum", logprob_shift=0.3)


def drift_only(req):
    return Reply(content=str(_answer(req)), logprob_shift=0.3)


def parted_only(req):
    return Reply(content=f"{_answer(req)} is the sum")


def _gate(cli, golden, responder, out):
    with TestServer(Script(responder)) as srv:
        code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", out, "--quiet")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_golden_calibration_records_the_reruns_divergence_rate(calibrated_golden):
    margins = json.loads((calibrated_golden["golden"] / "golden.json").read_text())["margins"]
    assert margins["smoke/divergence"]["value"] == 0.0 and margins["smoke/divergence"]["k"] == 3


def test_drift_and_divergence_together_are_a_quantization_regression(calibrated_golden, tmp_path, cli):
    code, doc, out = _gate(cli, calibrated_golden["golden"], numerics_moved, tmp_path / "c")
    s = doc["suites"]["smoke"]
    assert code == 11 and doc["status"] == "quantization_regression", out
    assert doc["frontend"]["verdict"] == "pass" and doc["quantization"]["verdict"] == "fail"
    assert s["metrics"]["accuracy"]["verdict"] == "pass"  # the metric alone would never have said so
    assert s["drift"]["state"] == "fired" and s["drift"]["numerics_changed"] is True
    assert s["divergence"]["verdict"] == "fail" and s["divergence"]["count"] == s["divergence"]["n"] == 20
    ev = {e["signal"]: e for e in doc["quantization"]["evidence"]}
    assert ev["greedy_divergence"]["verdict"] == "fail" and "20/20" in ev["greedy_divergence"]["summary"]
    assert any("greedy outputs part" in r for r in doc["reasons"]), doc["reasons"]


def test_either_measure_alone_is_not_decisive(calibrated_golden, tmp_path, cli):
    code, doc, out = _gate(cli, calibrated_golden["golden"], drift_only, tmp_path / "d")
    assert doc["suites"]["smoke"]["divergence"]["count"] == 0 and doc["suites"]["smoke"]["drift"]["state"] == "fired"
    assert doc["quantization"]["verdict"] == "inconclusive" and code == 20, out
    code, doc, out = _gate(cli, calibrated_golden["golden"], parted_only, tmp_path / "p")
    assert doc["suites"]["smoke"]["divergence"]["verdict"] == "fail" and doc["suites"]["smoke"]["drift"]["state"] == "clean"
    assert doc["quantization"]["verdict"] != "fail" and code != 11, out


def test_reference_rerun_neither_drifts_nor_parts(calibrated_golden, tmp_path, cli):
    from conftest import reference_reply

    code, doc, out = _gate(cli, calibrated_golden["golden"], reference_reply, tmp_path / "r")
    s = doc["suites"]["smoke"]
    assert code == 0 and s["divergence"]["count"] == 0 and s["divergence"]["verdict"] == "pass", out


def test_a_quality_line_on_a_non_binary_metric_prints_no_p_none_and_says_its_scope():
    """Issue 50, low: `p=None` appeared in the KV banner (no paired test on a non-binary metric), and a metric judged on
    part of the paired samples did not say so (accuracy 1 -> 1 beside a schema accuracy of 0 read as a contradiction)."""
    import dataclasses

    from verifier.attribution import compare
    from verifier.attribution.numerics import PairedMetric
    from verifier.golden.model import Margin

    suite = compare.PairedSuite(**{f.name: None for f in dataclasses.fields(compare.PairedSuite)})
    graded = PairedMetric(golden=[0.5, 0.75, 0.25, 1.0], candidate=[0.5, 0.5, 0.25, 1.0], ids=["a", "b", "c", "d"])
    binary = PairedMetric(golden=[1.0, 1.0, 0.0], candidate=[1.0, 1.0, 0.0], ids=["a", "b", "c"])
    suite = dataclasses.replace(suite, paired=4, golden_clean=4, clean_paired=4, metrics={"f1": graded, "accuracy": binary})
    margins = {k: Margin(k, 0.5, "test", "calibrated") for k in ("s/f1", "s/accuracy")}
    mets, ev = compare._quality("s", suite, margins)
    lines = {e.metric: e.summary for e in ev}
    assert mets["f1"].p_value is None and "p=None" not in lines["f1"] and "p=" not in lines["f1"], lines
    assert "on the" not in lines["f1"]  # all 4 paired samples judged
    assert "p=" in lines["accuracy"] and "; on the 3 of 4 paired samples both sides answered cleanly" in lines["accuracy"], lines
