"""Each signal of the table on two tiny lists (the golden's and the candidate's records of one sample)."""

from __future__ import annotations

import json

from verifier.attribution import compare, signals
from verifier.types import Evidence, Observation


def obs(mode="chat", outcome="content", epoch=0, **kw) -> Observation:
    return Observation(suite="s", sample_id="a", epoch=epoch, mode=mode, outcome=outcome, **kw)


def test_table_names_are_the_margin_keys_and_evidence_order():
    assert signals.FRONTEND_EVENTS == ("new_findings", "prompt_tokens_mismatch", "stream_parity_mismatch", "new_unsupported",
                                       "tool_call_id_format_changed", "dual_path_mismatch", "surface_parity_mismatch",
                                       "decoding_changed", "history_tokens_mismatch", "followup_divergence",
                                       "tool_args_types_changed", "stream_text_mismatch", "stream_tool_calls_dropped",
                                       "logprobs_transformed", "logprobs_dropped", "output_cut_short", "stop_reason_changed",
                                       "tool_args_values_changed", "stream_tool_args_changed", "tool_calls_as_text",
                                       "cached_tokens_dropped", "repeats_disagree")
    assert signals.NUMERICS_EVENTS == ("repetition",)
    assert set(signals.evaluate([obs()], [obs()])) == set(signals.EVENTS)


def test_new_findings():
    f = signals.new_findings
    assert f([obs()], [obs(findings=("tool_args_invalid_json",))]) is True
    assert f([obs(findings=("tool_args_invalid_json",))], [obs(findings=("tool_args_invalid_json",))]) is False
    assert f([obs(outcome="infra")], [obs(findings=("usage_missing",))]) is None  # golden never judged


def test_new_findings_ignores_model_behaviour():
    assert signals.new_findings([obs()], [obs(findings=("json_fenced",))]) is False


def test_prompt_tokens_mismatch():
    f = signals.prompt_tokens_mismatch
    assert f([obs(prompt_tokens=10)], [obs(prompt_tokens=11)]) is True
    assert f([obs(prompt_tokens=10)], [obs(prompt_tokens=10), obs(mode="chat-stream", prompt_tokens=10)]) is False
    assert f([obs(prompt_tokens=10)], [obs()]) is None


def test_stream_parity_mismatch():
    f = signals.stream_parity_mismatch
    same_tokens = [["4", -0.1]]
    assert f([], [obs(answer=4, logprobs=same_tokens), obs(mode="chat-stream", answer=44, logprobs=same_tokens)]) is True
    assert f([], [obs(answer=4), obs(mode="chat-stream", answer=4)]) is False
    # different tokens generated: decoding nondeterminism, not assembly
    assert f([], [obs(answer=4, logprobs=[["4", 0.0]]), obs(mode="chat-stream", answer=5, logprobs=[["5", 0.0]])]) is False
    assert f([], [obs(answer=4)]) is None


def test_dual_path_mismatch():
    f = signals.dual_path_mismatch
    assert f([], [obs(answer=1), obs(mode="completions", answer=2)]) is True
    assert f([], [obs(answer=1), obs(mode="completions", answer=1)]) is False
    assert f([], [obs(answer=1), obs(mode="chat-stream", answer=2)]) is None


def test_new_unsupported():
    f = signals.new_unsupported
    assert f([obs()], [obs(outcome="unsupported")]) is True
    assert f([obs(outcome="unsupported")], [obs(outcome="unsupported")]) is False
    assert f([obs()], [obs()]) is False


def test_tool_call_id_format_changed():
    f = signals.tool_call_id_format_changed
    assert f([obs(tool_call_id_style=["call_*"])], [obs(tool_call_id_style=["functions.NAME:IDX"])]) is True
    assert f([obs(tool_call_id_style=["call_*"])], [obs(tool_call_id_style=["call_*"])]) is False
    assert f([obs()], [obs(tool_call_id_style=["call_*"])]) is None


def test_repetition():
    f = signals.repetition
    loop = "The answer is " + "foss " * 30
    assert f([obs(content="42")], [obs(content=loop)]) is True
    assert f([obs(content=loop)], [obs(content=loop)]) is False
    assert f([obs(content="42")], [obs(outcome="infra")]) is None


def test_a_fired_frontend_signal_keeps_the_sample_out_of_numerics():
    g = [obs(prompt_tokens=10, score=1.0, metrics={"accuracy": 1.0}, answer=4)]
    c = [obs(prompt_tokens=11, score=0.0, metrics={"accuracy": 0.0}, answer=5)]
    s = compare.paired_signals(g, c)["s"]
    assert s.events["prompt_tokens_mismatch"] == ["a"] and s.metrics == {} and s.flips["regressed"] == []
    c = [obs(prompt_tokens=10, score=0.0, metrics={"accuracy": 0.0}, answer=5)]
    s = compare.paired_signals(g, c)["s"]
    assert s.metrics["accuracy"].candidate == [0.0] and s.flips["regressed"] == ["a"]


def test_observation_round_trips_a_golden_row_byte_for_byte():
    row = {"suite": "s", "sample_id": "a", "epoch": 0, "mode": "chat", "outcome": "content", "score": 1.0,
           "metrics": {"accuracy": 1.0}, "answer": 7, "reason": "correct", "findings": ["usage_missing"],
           "prompt_tokens": 12, "completion_tokens": 3, "finish_reason": "stop", "tool_triggered": None,
           "tool_call_id_style": None, "latency_ms": 5.0, "content": "7", "logprobs": [["7", -0.01]]}
    o = Observation.from_dict(row)
    assert o.findings == ("usage_missing",) and o.judged and o.clean and o.tokens == ["7"]
    assert json.dumps(o.to_dict()) == json.dumps(row)
    assert Observation.from_dict({"suite": "s", "sample_id": "a", "epoch": 0, "mode": "chat", "outcome": "infra"}).score is None


def test_evidence_keeps_the_historical_key_order():
    assert list(Evidence("quality", "s", "pass", "x", metric="accuracy").to_dict()) == ["signal", "suite", "metric", "verdict", "summary"]
    assert list(Evidence("new_findings", "s", "fail", "x", samples=("a",)).to_dict()) == ["signal", "suite", "verdict", "summary", "samples"]
