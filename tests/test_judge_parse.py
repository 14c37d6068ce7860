import json

import pytest

from verifier.judge import contract
from verifier.judge.parse import parse_body, parse_chunks
from verifier.testbed.server import Reply, stream_chunks


def chunk(delta=None, finish=None, usage=None, choices=True):
    d = {"id": "x", "object": "chat.completion.chunk"}
    d["choices"] = [{"index": 0, "delta": delta or {}, "finish_reason": finish}] if choices else []
    if usage:
        d["usage"] = usage
    return json.dumps(d)


def test_parallel_tool_calls_split_arguments_and_usage_chunk():
    chunks = [
        chunk({"role": "assistant"}),
        chunk({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "get_", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "weather", "arguments": '{"city":'}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz"'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": ': "UTC"}'}}]}),
        chunk({}, "tool_calls"),
        chunk(usage={"prompt_tokens": 11, "completion_tokens": 7}, choices=False),
        "[DONE]",
    ]
    p = parse_chunks(chunks)
    assert [c["function"]["name"] for c in p.tool_calls] == ["get_weather", "get_time"]
    assert json.loads(p.tool_calls[0]["function"]["arguments"]) == {"city": "Paris"}
    assert json.loads(p.tool_calls[1]["function"]["arguments"]) == {"tz": "UTC"}
    assert [c["id"] for c in p.tool_calls] == ["a", "b"]
    assert p.finish_reason == "tool_calls"
    assert p.usage == {"prompt_tokens": 11, "completion_tokens": 7}
    assert p.content is None
    req = {"tools": [{"type": "function", "function": {"name": n}} for n in ("get_weather", "get_time")]}
    assert contract.check(req, p, "chat-stream") == []


def test_missing_finish_reason_is_a_finding_not_stop():
    p = parse_chunks([chunk({"content": "4"}), chunk(usage={"prompt_tokens": 1, "completion_tokens": 1}, choices=False), "[DONE]"])
    assert p.finish_reason is None
    assert p.content == "4"
    codes = [f.code for f in contract.check({}, p, "chat-stream")]
    assert codes == ["finish_reason_missing"]


def test_all_parallel_calls_at_index_zero_is_detected():
    reply = Reply(content=None, tool_calls=[{"name": "w", "arguments": '{"path":"a"}'}, {"name": "w", "arguments": '{"path":"b"}'}], stream_index_zero=True)
    p = parse_chunks(stream_chunks(reply, {"stream_options": {"include_usage": True}}))
    assert len(p.tool_calls) == 1 and p.tool_calls[0]["function"]["name"] == "ww"
    codes = {f.code for f in contract.check({"tools": [{"function": {"name": "w"}}]}, p, "chat-stream")}
    assert "stream_index_collision" in codes and "tool_args_invalid_json" in codes


def test_stream_and_body_reassemble_to_same_shape():
    reply = Reply(content="The answer is 42", reasoning_content="think hard", tool_calls=None)
    req = {"stream_options": {"include_usage": True}}
    from verifier.testbed.server import completion_body

    a = parse_body(json.dumps(completion_body(reply, req)))
    b = parse_chunks(stream_chunks(reply, req))
    assert (a.content, a.reasoning, a.finish_reason, a.usage) == (b.content, b.reasoning, b.finish_reason, b.usage)


def test_extra_fields_and_unknown_finish_reason_survive():
    body = {"choices": [{"message": {"content": "", "reasoning_content": "x = 4"}, "finish_reason": "eos_token", "vendor": 1}], "usage": {"prompt_tokens": 3}}
    p = parse_body(json.dumps(body))
    # a synonym (TGI's eos_token) reads as chat's own value; the wire value is kept
    assert p.finish_reason == "stop" and p.extra.finish_reason_wire == "eos_token" and p.reasoning == "x = 4"
    body["choices"][0]["finish_reason"] = "vendor_specific_reason"
    assert parse_body(json.dumps(body)).finish_reason == "vendor_specific_reason"
    assert "answer_in_reasoning" in {f.code for f in contract.check({}, p, "chat")}


def test_contract_findings_on_broken_tool_calls():
    body = {"choices": [{"message": {"content": "<tool_call>{}</tool_call>", "tool_calls": [
        {"id": "c", "function": {"name": "nope", "arguments": '{"a": 1'}},
        {"id": "c", "function": {"name": "f", "arguments": '"{\\"a\\": 1}"'}},
    ]}, "finish_reason": "stop"}]}
    p = parse_body(json.dumps(body))
    codes = [f.code for f in contract.check({"tools": [{"function": {"name": "f"}}]}, p, "chat")]
    for c in ("tool_args_invalid_json", "tool_name_undeclared", "tool_call_id_duplicate", "tool_args_not_object",
              "finish_reason_mismatch", "tool_markup_in_content", "usage_missing"):
        assert c in codes, c
    assert contract.blocking(contract.check({"tools": [{"function": {"name": "f"}}]}, p, "chat"))


def test_finish_reason_tool_calls_without_calls():
    p = parse_body(json.dumps({"choices": [{"message": {"content": None, "tool_calls": []}, "finish_reason": "tool_calls"}], "usage": {}}))
    assert "finish_reason_tool_calls_without_calls" in {f.code for f in contract.check({}, p, "chat")}


def test_non_greedy_token_at_temperature_0_is_a_finding():
    lp = {"content": [{"token": "4", "logprob": -0.1, "top_logprobs": [{"token": "4", "logprob": -0.1}]},
                      {"token": "2", "logprob": -2.5, "top_logprobs": [{"token": "!", "logprob": -0.2}]}]}
    body = {"choices": [{"message": {"content": "42"}, "finish_reason": "stop", "logprobs": lp}], "usage": {"prompt_tokens": 1}}
    p = parse_body(json.dumps(body))
    assert [f.code for f in contract.check({"temperature": 0}, p, "chat")] == ["non_greedy_token"]
    assert contract.check({"temperature": 0.7}, p, "chat") == []


def test_stream_parity_ignores_paths_whose_tokens_diverged():
    from verifier.attribution.compare import paired_signals

    from verifier.types import Observation

    def obs(mode, answer, toks):
        return Observation(suite="s", sample_id="a", epoch=0, mode=mode, outcome="content", answer=answer,
                           logprobs=[[t, -0.1] for t in toks] if toks else None)

    golden = [obs("chat", "7", ["7"]), obs("chat-stream", "7", ["7"])]
    decoding = [obs("chat", "7", ["7"]), obs("chat-stream", "8", ["8"])]  # different tokens: decoding, not assembly
    assembly = [obs("chat", "7", ["7", ""]), obs("chat-stream", "77", ["7"])]  # same tokens (EOS aside), different text
    stopped = [obs("chat", "7", ["7"]), obs("chat-stream", "7 8", ["7", " 8"])]  # one path went on: decoding
    assert paired_signals(golden, stopped)["s"].events["stream_parity_mismatch"] == []
    assert paired_signals(golden, decoding)["s"].events["stream_parity_mismatch"] == []
    assert paired_signals(golden, assembly)["s"].events["stream_parity_mismatch"] == ["a"]


def test_deep_json_and_non_finite_usage_become_wire_facts_not_crashes():
    deep = "[" * 1000 + "]" * 1000
    assert parse_body(deep).extra.to_dict() == {"json_too_deep": "body"}
    assert parse_chunks([deep, "[DONE]"]).extra.to_dict() == {"json_too_deep": "1 stream chunk(s)"}
    body = json.dumps({"choices": [{"message": {"content": deep}, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": float("inf"), "completion_tokens": 3}})
    p = parse_body(body)
    assert p.content is None and p.extra.json_too_deep == "content"
    assert p.usage == {"completion_tokens": 3} and p.extra.usage_non_finite == "prompt_tokens"
    ok = parse_body(json.dumps({"choices": [{"message": {"content": "[[1]]"}, "finish_reason": "stop"}]}))
    assert ok.content == "[[1]]" and ok.extra.to_dict() == {}


def test_the_depth_bound_is_exact_whether_or_not_the_bracket_count_spares_the_walk():
    from verifier import jsonsafe

    limit = jsonsafe.MAX_JSON_DEPTH
    wide = json.dumps({"logprobs": [{"top_logprobs": [], "bytes": [1]} for _ in range(300)]})  # 900 brackets, depth 4
    assert jsonsafe.loads_bounded(wide) == json.loads(wide) and jsonsafe.depth(json.loads(wide)) == 4
    at = "[" * limit + "]" * limit
    assert jsonsafe.loads_bounded(at) == json.loads(at)  # at the limit: under the bracket count, no walk
    for past in ("[" * (limit + 1) + "]" * (limit + 1), json.dumps({"a": [{}] * 3, "b": json.loads(at)})):
        with pytest.raises(jsonsafe.TooDeep):
            jsonsafe.loads_bounded(past)
        with pytest.raises(jsonsafe.TooDeep):
            jsonsafe.loads_bounded(past.encode())
    # Brackets inside strings only ever raise the count: a shallow value under it is still walked and accepted.
    quoted = json.dumps({"text": "[" * 500})
    assert jsonsafe.loads_bounded(quoted) == {"text": "[" * 500}
    assert [jsonsafe.depth(v) for v in (1, [], {}, [[]], {"a": [1, {"b": []}]})] == [0, 1, 1, 2, 4]
    assert jsonsafe.depth(json.loads(at), limit=10) == 11  # stops once past the limit
