"""Teacher forcing (#46): the candidate's distribution on the golden's own tokens, by prompt logprobs, echo or prefill,
calibrated on the reference's reruns, as the numerics verdict's primary evidence. The test server plays each method
(testbed/teacher.py) with a numerics knob; the statistics are checked as pure functions first."""

from __future__ import annotations

import json
import math
import re
import shutil

import pytest

from verifier import stats
from verifier.attribution import teacher_forced as tf
from verifier.execution import teacher_forcing as forcing
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.testbed.teacher import Teacher

RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "5", "--max-retries", "0"]
METHODS = ("prompt_logprobs", "echo", "prefill")


# --------------------------------------------------------------------------- pure parts


def test_kl_is_zero_on_identical_lists_and_positive_when_they_move():
    g = (("a", math.log(0.7)), ("b", math.log(0.2)))
    assert tf.position_kl(g, g) == 0.0
    moved = (("a", math.log(0.5)), ("b", math.log(0.4)))
    assert tf.position_kl(g, moved) > 0.05


def test_kl_merges_one_sided_tokens_into_the_rest_and_is_a_lower_bound():
    # golden lists a, b; the candidate lists a, c: b and c join the rest bucket on both sides
    g = (("a", math.log(0.6)), ("b", math.log(0.3)))
    c = (("a", math.log(0.6)), ("c", math.log(0.3)))
    assert tf.position_kl(g, c) == pytest.approx(0.0, abs=1e-12)
    # the full distributions (b and c each 0.3 on one side, ~0.05 on the other) are far apart: the figure bounds below
    full = 0.6 * 0 + 0.3 * math.log(0.3 / 0.05) + 0.1 * math.log(0.1 / 0.05)
    assert tf.position_kl(g, c) <= full
    # a two-bucket KL (a golden blessed with top_logprobs 1): the chosen token's probability against the rest
    assert tf.position_kl((("a", math.log(0.9)),), (("a", math.log(0.6)),)) == pytest.approx(
        0.9 * math.log(0.9 / 0.6) + 0.1 * math.log(0.1 / 0.4))


def test_mann_whitney_one_sided():
    assert stats.mann_whitney_greater([0.0] * 20, [0.0] * 20) == 1.0  # every value tied: no evidence
    assert stats.mann_whitney_greater([0.0] * 20, [0.1] * 20) < 1e-6
    assert stats.mann_whitney_greater([0.1] * 20, [0.0] * 20) > 0.99  # smaller is never "greater"
    same = [i / 10 for i in range(10)]
    assert 0.3 < stats.mann_whitney_greater(same, same) < 0.7
    assert stats.mann_whitney_greater([], [1.0]) == 1.0
    # Few samples or many ties: exact, where the normal approximation is far off both ways (measured on
    # llama-server: one sample above 20 reruns' values is p = 1/21, not 0.058; one above 10 tied zeros is 1/11).
    assert stats.mann_whitney_greater([i / 10 for i in range(20)], [5.0]) == pytest.approx(1 / 21)
    assert stats.mann_whitney_greater([0.0] * 10, [1.0]) == pytest.approx(1 / 11)
    assert stats.mann_whitney_greater([0.0] * 10, [1.0, 2.0]) == pytest.approx(1 / math.comb(12, 2))
    assert tf.least_p([0.0] * 10, 1) >= tf.ALPHA > tf.least_p([0.0] * 20, 1)


def test_prefill_positions_spread_over_the_output():
    assert forcing.prefill_positions(3, 4) == [1, 2]
    assert forcing.prefill_positions(10, 4) == [1, 4, 6, 9]
    assert forcing.prefill_positions(10, 1) == [9]
    assert forcing.prefill_positions(1, 4) == []  # a one-token output has no non-empty prefix


def test_prompt_logprobs_alignment_is_checked_on_token_strings():
    entries = [None, {"1": {"logprob": -1.0, "rank": 1, "decoded_token": "x"}},
               {"7": {"logprob": -0.1, "rank": 1, "decoded_token": "The"}},
               {"8": {"logprob": -0.2, "rank": 1, "decoded_token": " answer"}}]
    tops, bad = forcing.read_prompt_logprobs({"prompt_logprobs": entries}, ["The", " answer"])
    assert bad is None and tops[0] == (("The", -0.1),)
    _, bad = forcing.read_prompt_logprobs({"prompt_logprobs": entries}, ["The", " ans"])
    assert bad == 1  # never realigned: the first position where the tokens differ
    assert forcing.read_prompt_logprobs({"choices": []}, ["The"]) is None  # not offered


def test_prefill_alignment_reads_the_prompt_token_counts():
    def ex(pt):
        body = {"choices": [{"logprobs": {"content": [{"token": "a", "logprob": -0.1, "top_logprobs": [{"token": "a", "logprob": -0.1}]}]}}],
                "usage": {"prompt_tokens": pt}}
        return {"status": 200, "error": None, "body": json.dumps(body)}

    row = {"suite": "s", "sample_id": "1", "method": "prefill", "positions": [0, 2, 4], "exchanges": [ex(10), ex(12), ex(14)]}
    assert forcing.forced_of(row, ["a"] * 5).aligned
    row["exchanges"][2] = ex(15)  # the prefix of position 4 took one token more than the golden's: tokenization changed
    f = forcing.forced_of(row, ["a"] * 5)
    assert not f.aligned and f.misaligned_at == 4


# --------------------------------------------------------------------------- gates on the test server


def answer(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
    return Reply(content=f"The answer is {int(m.group(1)) + int(m.group(2))}" if m else "I don't know")


def serve(methods=METHODS, **kw):
    return TestServer(Script(answer, teacher=Teacher(methods=methods, **kw)))


@pytest.fixture(scope="module", params=METHODS)
def forced_golden(request, tmp_path_factory):
    """A golden blessed on a server offering only `method`, calibrated with two reruns that made the pass."""
    from verifier.cli import main

    method = request.param
    tmp = tmp_path_factory.mktemp(f"tf-{method}")
    with serve((method,)) as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp / "ref")]) == 0
        assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "golden")]) == 0
        assert main(["calibrate", str(tmp / "golden"), "--base-url", srv.url, "--model", "m", "-k", "2",
                     "--out-prefix", str(tmp / "cal"), "--quiet"]) == 0
    return method, tmp


def _gate(cli, golden, srv, out, *extra):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", *extra)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_calibration_stores_the_reruns_distance(forced_golden):
    method, tmp = forced_golden
    margins = json.loads((tmp / "golden" / "golden.json").read_text())["margins"]
    m = margins["smoke/teacher_forced_kl"]
    assert m["value"] == 0.0 and len(m["reference_per_sample"]) == 40  # 2 reruns x 20 samples, bit-stable server
    assert m["teacher_forced_runs"] == [f"cal-1:{method}", f"cal-2:{method}"]
    assert margins["smoke/signal:teacher_forced_tokens"]["value"] == 0.0
    run = json.loads((tmp / "cal-1" / "run.json").read_text())["teacher_forcing"]
    assert run["method"] == method and run["state"] == "measured" and run["records"] == 20 and run["errors"] == 0


def test_healthy_candidate_passes_with_the_figures_measured(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,)) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "c")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert code == 0, out
    assert t["state"] == "measured" and t["method"] == method and t["verdict"] == "pass"
    assert t["positions"] >= 20 and t["kl_mean"] == 0.0 and t["top1_agreement"] == 1.0 and t["misaligned"] == 0
    assert {"kl_p50", "kl_p99", "kl_p999", "margin", "reference_kl_mean"} <= set(t)
    # `gate --quiet` prints the status, the first cause and the report path only: the line per suite is in
    # summary.md, and on the terminal where the comparison is printed whole (compare).
    assert f"teacher-forced KL ({method})" in (tmp_path / "c" / "summary.md").read_text()
    code, stdout, err = cli("compare", tmp_path / "c", "--golden", tmp / "golden", "--out", tmp_path / "again.json")
    assert code == 0 and f"teacher-forced KL ({method})" in stdout + err, stdout + err


def test_numerics_knob_is_a_quantization_regression_named_by_teacher_forced_kl(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,), numerics=1.0) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "n")
    assert code == 11 and doc["status"] == "quantization_regression", out
    ev = {e["signal"]: e for e in doc["quantization"]["evidence"]}
    assert ev["teacher_forced_kl"]["verdict"] == "fail" and method in ev["teacher_forced_kl"]["summary"]
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert t["kl_mean"] > t["margin"] and t["p_value"] < 0.05
    # the answers did not move: a numerics change that costs nothing measurable, said so
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["verdict"] == "pass"
    assert doc["quantization"]["impact"] == "no_measurable_quality_cost"
    assert doc["frontend"]["verdict"] == "pass"


def test_template_change_is_frontend_and_leaves_the_figures_unused(forced_golden, tmp_path, cli):
    """A wrong template changes the context: the distributions move (KL > 0 if they were read), but the prompt-token
    fingerprint differs, so the figures are not used for the numerics verdict and the comparison says why."""
    method, tmp = forced_golden
    with serve((method,), preamble="You are a pirate.\n") as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "t")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert doc["frontend"]["verdict"] == "fail" and code == 10, out
    assert doc["quantization"]["verdict"] != "fail"
    assert t["state"] == "not_used" and "fingerprint" in t["reason"] and t["context_changed"] == 20
    assert not any(e["signal"] == "teacher_forced_kl" for e in doc["quantization"]["evidence"])


def test_endpoint_offering_no_method_is_unavailable_and_the_old_signals_decide(tmp_path, cli):
    from verifier.cli import main

    with serve(()) as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp_path / "ref")]) == 0
        assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
        assert main(["calibrate", str(tmp_path / "g"), "--base-url", srv.url, "--model", "m", "-k", "2",
                     "--out-prefix", str(tmp_path / "cal"), "--quiet"]) == 0
        assert "smoke/teacher_forced_kl" not in json.loads((tmp_path / "g" / "golden.json").read_text())["margins"]
        code, doc, out = _gate(cli, tmp_path / "g", srv, tmp_path / "c", "--teacher-forcing", "on")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert code == 0 and t["state"] == "unavailable", out
    assert "prompt_logprobs:" in t["reason"] and "echo:" in t["reason"] and "prefill:" in t["reason"]
    run = json.loads((tmp_path / "c" / "run.json").read_text())["teacher_forcing"]
    assert run["state"] == "unavailable" and run["method"] is None and run["requests"] <= 1 + 1 + forcing.DEFAULT_POSITIONS


def short_answer(req):
    """As a small real model answers smoke ("Reply with just the number"): a one-token reply where the sum has one
    digit (the suite's first sample, 3 + 4), a few tokens elsewhere."""
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
    total = int(m.group(1)) + int(m.group(2)) if m else None
    return Reply(content=str(total) if total is not None and 0 <= total < 10 else f"The answer is {total}")


def test_detection_is_not_decided_on_a_one_token_answer(tmp_path, cli):
    """Found on llama-server (Qwen2.5-Coder-0.5B answers smoke's first sample with "7"): detection probed the first
    record, whose one-token output has no prefill position, and found every method unavailable. It probes the longest
    output, and every record is still forced (a one-token one measures nothing, as before)."""
    from verifier.cli import main

    with TestServer(Script(short_answer, teacher=Teacher(methods=("prefill",)))) as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp_path / "ref")]) == 0
        assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
        assert main(["calibrate", str(tmp_path / "g"), "--base-url", srv.url, "--model", "m", "-k", "2",
                     "--out-prefix", str(tmp_path / "cal"), "--quiet"]) == 0
        code, doc, out = _gate(cli, tmp_path / "g", srv, tmp_path / "c")
    run = json.loads((tmp_path / "cal-1" / "run.json").read_text())["teacher_forcing"]
    assert run["state"] == "measured" and run["method"] == "prefill" and run["records"] == 20, run
    assert "smoke/teacher_forced_kl" in json.loads((tmp_path / "g" / "golden.json").read_text())["margins"]
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert code == 0 and t["state"] == "measured" and t["verdict"] == "pass", out
    one_token = [r for r in forcing.read(tmp_path / "c") if r["sample_id"] == "add-00"]
    assert len(one_token) == 1 and one_token[0]["positions"] == [] and one_token[0]["exchanges"] == []
    assert t["samples"] == 20 - len([1 for r in forcing.read(tmp_path / "c") if r["positions"] == []])


def test_a_distance_above_the_margin_on_too_few_samples_is_undecided_not_a_pass(tmp_path, cli):
    """Found on llama-server (Q2_K, `gate --limit 2`: one measurable sample, KL 300x the margin, p = 0.057, judged
    pass, gate exit 0): one sample against a handful of reruns' values cannot reach p < 0.05 however far apart, so a
    distance above the margin there is inconclusive; with enough samples the same server fails."""
    from verifier.cli import main

    with serve(("prefill",)) as srv:
        assert main(["run", *RUN, "--limit", "5", "--base-url", srv.url, "--out", str(tmp_path / "ref")]) == 0
    assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
    with serve(("prefill",), numerics=0.05) as srv:  # reruns that spread (a real engine's are never all at 0)
        assert main(["calibrate", str(tmp_path / "g"), "--base-url", srv.url, "--model", "m", "-k", "2",
                     "--out-prefix", str(tmp_path / "cal"), "--quiet"]) == 0
    reference = json.loads((tmp_path / "g" / "golden.json").read_text())["margins"]["smoke/teacher_forced_kl"]
    assert len(reference["reference_per_sample"]) == 10 and tf.least_p(reference["reference_per_sample"], 1) >= tf.ALPHA
    with serve(("prefill",), numerics=1.0) as srv:
        code, one, out = _gate(cli, tmp_path / "g", srv, tmp_path / "one", "--limit", "1")
        code5, five, out5 = _gate(cli, tmp_path / "g", srv, tmp_path / "five")
    t = one["suites"]["smoke"]["teacher_forced"]
    assert t["samples"] == 1 and t["kl_mean"] > 10 * t["margin"] and t["p_value"] >= tf.ALPHA, t
    assert t["verdict"] == "inconclusive" and "too few samples" in t["note"], t
    ev = {e["signal"]: e for e in one["quantization"]["evidence"]}["teacher_forced_kl"]
    assert ev["verdict"] == "inconclusive" and "too few samples" in ev["summary"]
    assert code != 0 and one["quantization"]["verdict"] != "pass", out
    t5 = five["suites"]["smoke"]["teacher_forced"]
    assert code5 == 11 and t5["samples"] == 5 and t5["verdict"] == "fail" and "note" not in t5, out5


def test_uncalibrated_golden_is_inconclusive_where_the_distance_fired(forced_golden, tmp_path, cli):
    """A golden calibrated before the pass existed (its margins without teacher_forced_kl): a gate skips the pass
    by default; asked to measure (`--teacher-forcing on`), it is judged against 0."""
    method, tmp = forced_golden
    g = tmp_path / "old"
    shutil.copytree(tmp / "golden", g)
    doc = json.loads((g / "golden.json").read_text())
    doc["margins"] = {k: v for k, v in doc["margins"].items() if "teacher_forced" not in k}
    (g / "golden.json").write_text(json.dumps(doc))
    with serve((method,)) as srv:
        code, skipped, out = _gate(cli, g, srv, tmp_path / "s")  # auto: nothing sent, the comparison as before
        assert code == 0 and "teacher_forced" not in skipped["suites"]["smoke"], out
        run = json.loads((tmp_path / "s" / "run.json").read_text())["teacher_forcing"]
        assert run["state"] == "skipped" and run["requests"] == 0 and "calibrate" in run["reason"]
        assert not (tmp_path / "s" / forcing.FILE).exists()
        code, healthy, out = _gate(cli, g, srv, tmp_path / "h", "--teacher-forcing", "on")
    assert code == 0 and healthy["suites"]["smoke"]["teacher_forced"]["verdict"] == "pass", out
    with serve((method,), numerics=1.0) as srv:
        code, moved, out = _gate(cli, g, srv, tmp_path / "m", "--teacher-forcing", "on")
    ev = {e["signal"]: e for e in moved["quantization"]["evidence"]}["teacher_forced_kl"]
    assert ev["verdict"] == "inconclusive" and ev["qualifier"] == "uncalibrated"
    assert "golden not calibrated for smoke/teacher_forced_kl" in ev["summary"]
    assert moved["quantization"]["verdict"] != "fail"


def test_forced_exchanges_are_journaled_and_off_skips_the_pass(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,)) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "off", "--teacher-forcing", "off")
        assert code == 0 and "teacher_forced" not in doc["suites"]["smoke"], out
        assert "teacher_forcing" not in json.loads((tmp_path / "off" / "run.json").read_text())
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "on")
    rows = [json.loads(line) for line in (tmp_path / "on" / forcing.FILE).read_text().splitlines()]
    assert len(rows) == 20 and all(r["method"] == method and r["exchanges"] for r in rows)
    assert all(e["status"] == 200 and e["request"]["max_tokens"] == 1 for r in rows for e in r["exchanges"])


def test_report_draws_reruns_against_candidate(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,), numerics=1.0) as srv:
        _gate(cli, tmp / "golden", srv, tmp_path / "r")
    html = (tmp_path / "r" / "report.html").read_text()
    assert 'id="teacher-forced"' in html and 'class="plot forced-plot"' in html and 'class="plot forced-along"' in html
    assert f"smoke ({method})" in html


def test_sweep_kl_front_trades_distance_against_throughput():
    from verifier.app import sweep

    from verifier.report.sweep import SweepRow

    def row(name, kl, agg):
        return SweepRow(name=name, status="quantization_regression", teacher_forced_kl=kl,
                        perf={"aggregate_tokens_per_s": {"mean": agg, "ci": [agg - 1, agg + 1], "n": 3}})

    rows = [row("bf16", 0.0, 50), row("q8", 0.001, 80), row("q4", 0.02, 120), row("q4-slow", 0.03, 60),
            row("unmeasured", None, 500)]
    # q4-slow is beaten on both axes by q8; the others each trade one axis for the other; unmeasured is not on it
    assert {r.name for r in sweep.pareto(rows) if r.kl_front} == {"bf16", "q8", "q4"}


def test_reason_and_checks_name_the_teacher_forced_distance(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,), numerics=1.0) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "x")
    assert doc["reason"].startswith("numerics: smoke: on the golden's own tokens"), doc["reason"]
    assert "no measurable quality cost" in doc["reason"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["smoke: teacher_forced_kl"]["verdict"] == "fail" and checks["smoke: teacher_forced_tokens"]["verdict"] == "pass"
    junit = (tmp_path / "x" / "junit.xml").read_text()
    assert "smoke: teacher_forced_kl" in junit


def test_changed_tokenizer_is_frontend_evidence_never_realigned(forced_golden, tmp_path, cli):
    method, tmp = forced_golden
    with serve((method,), split_words=True) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "tok")
    t = doc["suites"]["smoke"]["teacher_forced"]
    assert t["misaligned"] == 20 and t["state"] == "not_used", t
    fe = {e["signal"]: e for e in doc["frontend"]["evidence"]}
    assert fe["teacher_forced_tokens"]["verdict"] == "fail" and "20/20" in fe["teacher_forced_tokens"]["summary"]
    assert any(d["component"] == "chat template & tokenization" for d in doc["diagnosis"])
    assert code == 10 and doc["quantization"]["verdict"] != "fail", out


def test_per_sample_rows_are_bounded_the_furthest_half_kept():
    samples = tuple(tf.SampleMeasure(str(i), (i / 1000,), 1, ()) for i in range(1000))
    pics = tf.SuiteMeasure("prefill", samples).pictures()
    rows = pics["per_sample"]
    assert len(rows) == tf.PER_SAMPLE_MAX and rows[-1]["id"] == "999"
    assert sum(1 for r in rows if int(r["id"]) >= 800) == 200  # the furthest half, all kept
    assert pics["furthest_sample"]["id"] == "999"


def test_tool_call_span_is_measured_apart_from_prose():
    from verifier.types import Observation

    base = Observation.from_dict({"suite": "s", "sample_id": "1", "epoch": 0, "mode": "chat", "outcome": "content",
                                  "score": 1.0, "answer": [{"name": "f", "arguments": {}}], "findings": [], "metrics": {},
                                  "content": "Hi", "logprobs": [["Hi", -0.1], ["<tool_call>", -0.2], ["{}", -0.3]]})
    forced = forcing.Forced("s", "1", "prompt_logprobs", (0, 1, 2),
                            ((("Hi", -0.1),), (("<tool_call>", -0.9),), (("{}", -0.3),)))
    m = tf.measure_sample(base, forced)
    assert m.in_call == (False, True, True)
    spans = tf.SuiteMeasure("prompt_logprobs", (m,)).figures()["spans"]
    assert spans["prose"]["positions"] == 1 and spans["prose"]["kl_mean"] == 0.0
    assert spans["tool_calls"]["positions"] == 2 and spans["tool_calls"]["kl_mean"] > 0


def test_a_row_forced_on_another_goldens_tokens_is_left_out_not_misaligned():
    from verifier.types import Observation

    g = Observation.from_dict({"suite": "s", "sample_id": "1", "epoch": 0, "mode": "chat", "outcome": "content", "score": 1.0,
                               "answer": "5", "findings": [], "metrics": {}, "prompt_tokens": 9,
                               "content": "It is 5", "logprobs": [["It", -0.1], [" is", -0.1], [" 5", -0.1]]})
    row = {"suite": "s", "sample_id": "1", "method": "prompt_logprobs", "tokens_sha256": forcing.tokens_digest(["The", " sum"]),
           "exchanges": [{"status": 200, "error": None, "body": "{}"}]}
    assert tf.measure([g], [g], [row], "prompt_logprobs") == {}
    row["tokens_sha256"] = forcing.tokens_digest(["It", " is", " 5"])
    assert tf.measure([g], [g], [row], "prompt_logprobs")["s"].records == 1


def test_quality_decides_what_the_numerics_change_cost(forced_golden, tmp_path, cli):
    """The same distance with wrong answers: a numerics regression users see (impact quality_regressed)."""
    method, tmp = forced_golden

    def wrong(req):
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
        return Reply(content=f"The answer is {int(m.group(1)) + int(m.group(2)) + 1}" if m else "I don't know")

    with TestServer(Script(wrong, teacher=Teacher(methods=(method,), numerics=1.0))) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "w")
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["verdict"] == "fail"
    assert code == 11 and doc["quantization"]["impact"] == "quality_regressed", out


def test_batch_shape_noise_passes_where_teacher_forcing_holds_the_distribution(forced_golden, tmp_path, cli):
    """The batching-noise bench's case (a 4-slot llama-server at concurrency 4 against a 1-slot golden): the decode
    moves (a near tie flips, the shared prefix drifts), so drift and parting both fire, while the distribution on the
    golden's own tokens is the reference's. Teacher forcing decides the suite: numerics pass, the two reported as
    corroboration that did not hold. Without the forced pass the old rule decides, and fails as before."""
    method, tmp = forced_golden
    with serve((method,), batch_noise=0.05) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "b")
        code_off, off, out_off = _gate(cli, tmp / "golden", srv, tmp_path / "off", "--teacher-forcing", "off")
    s = doc["suites"]["smoke"]
    assert s["drift"]["state"] == "fired" and s["drift"]["numerics_changed"] and s["divergence"]["verdict"] == "fail", s["drift"]
    assert s["teacher_forced"]["verdict"] == "pass" and s["teacher_forced"]["kl_mean"] == 0.0
    assert s["metrics"]["accuracy"]["verdict"] == "pass"
    assert code == 0 and doc["status"] == "pass" and doc["quantization"]["verdict"] == "pass", out
    ev = {e["signal"]: e for e in doc["quantization"]["evidence"]}
    for name in ("logprob_drift", "greedy_divergence"):
        assert ev[name]["verdict"] == "pass" and ev[name]["qualifier"] == "outweighed", ev[name]
        assert "corroboration that did not hold" in ev[name]["summary"]
    assert ev["teacher_forced_kl"]["verdict"] == "pass"
    assert any("corroboration that did not hold" in r and "teacher-forced KL" in r for r in doc["reasons"]), doc["reasons"]
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["smoke: logprob_drift"]["verdict"] == "pass" and checks["smoke: greedy_divergence"]["verdict"] == "pass"
    # the same endpoint gated without the pass: drift and parting agree, today's rule fails the numerics
    assert "teacher_forced" not in off["suites"]["smoke"]
    assert code_off == 11 and off["quantization"]["verdict"] == "fail", out_off


def test_forced_failure_under_batch_noise_is_a_regression_named_by_teacher_forced_kl(forced_golden, tmp_path, cli):
    """Moved numerics with the decode moving too: the teacher-forced distance fails, and it is the evidence; drift and
    parting stay as they were (they corroborate)."""
    method, tmp = forced_golden
    with serve((method,), numerics=1.0, batch_noise=0.05) as srv:
        code, doc, out = _gate(cli, tmp / "golden", srv, tmp_path / "nb")
    assert code == 11 and doc["status"] == "quantization_regression", out
    ev = {e["signal"]: e for e in doc["quantization"]["evidence"]}
    assert ev["teacher_forced_kl"]["verdict"] == "fail" and ev["logprob_drift"].get("qualifier") != "outweighed"
    assert doc["quantization"]["impact"] == "no_measurable_quality_cost"
    assert doc["reason"].startswith("numerics: smoke: on the golden's own tokens"), doc["reason"]


def test_each_suite_is_decided_by_its_own_numerics_evidence():
    """A forced pass on one suite settles that suite only: drift firing on a suite without a forced measure still
    leaves the numerics undecided, and both drift and parting there still fail them (compare._decide)."""
    from verifier.attribution.compare import SuiteNumerics, _decide
    from verifier.types import Evidence

    quality = [Evidence("quality", s, "pass", "", metric="accuracy") for s in ("a", "b")]
    held = SuiteNumerics("fired", True, "pass")
    assert _decide([], quality, {"a": held}, False) == ("pass", "pass", "pass")
    assert _decide([], quality, {"a": held, "b": SuiteNumerics("fired", False, None)}, False)[2] == "inconclusive"
    assert _decide([], quality, {"a": held, "b": SuiteNumerics("fired", True, None)}, False)[2] == "fail"
    assert _decide([], quality, {"a": SuiteNumerics("clean", False, "fail")}, False)[0] == "quantization_regression"
    # a quality drop is not put on the weights by drift where the forced distance held, and is then unattributed
    dropped = [Evidence("quality", "a", "fail", "", metric="accuracy")]
    assert _decide([], dropped, {"a": held}, False)[0] == "regression_unattributed"
    assert _decide([], dropped, {"a": SuiteNumerics("fired", False, None)}, False)[0] == "quantization_regression"


def test_a_gate_interrupted_before_its_teacher_forcing_pass_continues_to_the_verdict_the_whole_gate_gives(forced_golden, tmp_path):
    """The pass comes after the samples, so an interrupted gate had not made it. run.json records the pass asked
    (`teacher_forcing_asked`: method, positions, the golden's directory and source run); the printed resume makes it
    over the run's own records, and the printed compare ends with the uninterrupted gate's verdict (here a numerics
    change that only teacher forcing names)."""
    import os
    import shlex
    import signal
    import subprocess
    import sys

    from conftest import ROOT, wait_until
    from verifier.cli import main

    method, tmp = forced_golden
    if method != "prompt_logprobs":
        pytest.skip("one method is enough: the resume's pass is the gate's pass")
    golden, out, whole = tmp / "golden", tmp_path / "g", tmp_path / "whole"

    def slow(req):
        return Reply(**{**answer(req).__dict__, "delay_s": 0.05})

    with TestServer(Script(answer, teacher=Teacher(methods=(method,), numerics=1.0))) as srv:
        code = main(["gate", "--golden", str(golden), "--base-url", srv.url, "--model", "m", "--quiet", "--out", str(whole)])
    with TestServer(Script(slow, teacher=Teacher(methods=(method,), numerics=1.0))) as srv:
        p = subprocess.Popen([sys.executable, "-m", "verifier", "gate", "--golden", str(golden), "--base-url", srv.url,
                              "--model", "m", "--quiet", "--out", str(out), "--concurrency", "1"], cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        journal = out / "responses.jsonl"
        wait_until(lambda: journal.exists() and journal.read_text().count("\n") >= 3, "3 journal lines", proc=p)
        p.send_signal(signal.SIGTERM)
        _, stderr = p.communicate(timeout=60)
        assert p.returncode == 143, stderr
        header = json.loads((out / "run.json").read_text())
        assert "teacher_forcing" not in header
        asked = header["teacher_forcing_asked"]
        assert (asked["method"], asked["golden"], asked["calibrated"]) == ("auto", str(golden.resolve()), True), asked
        steps = [line.split(": ", 1)[1] for line in stderr.splitlines() if line.startswith(("  continue with: ", "  then: "))]
        assert len(steps) == 2, stderr
        codes = [main(shlex.split(step)[1:]) for step in steps]
    assert json.loads((out / "run.json").read_text())["teacher_forcing"]["state"] == "measured"
    cont, doc = (json.loads((d / "comparison.json").read_text()) for d in (out, whole))
    assert code == 11 and codes == [0, code], (code, codes)
    assert cont["status"] == doc["status"] == "quantization_regression"
    forced = [d["suites"]["smoke"]["teacher_forced"] for d in (cont, doc)]
    assert forced[0]["verdict"] == forced[1]["verdict"] == "fail" and forced[0]["positions"] == forced[1]["positions"], forced
