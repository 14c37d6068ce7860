"""Surfaces without sockets: request translation, parsing into Parsed, usage normalization, surface contract checks;
and one raw round trip per surface through the real endpoint client and test server."""

import asyncio
import json

from verifier.judge import contract
from verifier.judge.contract_surfaces import error_findings
from verifier.wire.endpoint import Endpoint, EndpointConfig
from verifier.judge.parse import parse_surface
from verifier.surfaces.registry import translate
from verifier.testbed.server import Reply, Script, TestServer

PNG = "data:image/png;base64,iVBORw0KGgo="
CHAT = {
    "model": "m", "temperature": 0, "max_tokens": 64, "seed": 1, "tool_choice": "auto",
    "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": PNG}}]},
        {"role": "assistant", "content": None, "reasoning_content": "look it up",
         "tool_calls": [{"id": "functions.lookup:0", "type": "function", "function": {"name": "lookup", "arguments": "{\"q\": \"png\"}"}}]},
        {"role": "tool", "tool_call_id": "functions.lookup:0", "content": "a tiny image"},
        {"role": "user", "content": "and now?"},
    ],
    "tools": [{"type": "function", "function": {"name": "lookup", "description": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}],
    "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "object"}, "strict": True}},
}


def test_chat_body_to_responses():
    r = translate("responses-stream", CHAT)
    assert r["instructions"] == "be brief" and r["stream"] is True and r["max_output_tokens"] == 64
    assert "seed" not in r and "messages" not in r and "tool_choice" in r
    assert r["tools"] == [{"type": "function", "name": "lookup", "description": "search", "parameters": CHAT["tools"][0]["function"]["parameters"]}]
    assert r["text"] == {"format": {"type": "json_schema", "name": "a", "schema": {"type": "object"}, "strict": True}}
    user, reasoning, call, out, user2 = r["input"]
    assert user["content"][1] == {"type": "input_image", "image_url": PNG} and user["content"][0]["type"] == "input_text"
    assert reasoning["type"] == "reasoning" and reasoning["content"][0]["text"] == "look it up"
    assert call == {"type": "function_call", "call_id": "functions.lookup:0", "name": "lookup", "arguments": "{\"q\": \"png\"}"}
    assert out == {"type": "function_call_output", "call_id": "functions.lookup:0", "output": "a tiny image"}
    assert user2 == {"type": "message", "role": "user", "content": "and now?"}


def test_chat_body_to_messages():
    m = translate("messages", CHAT)
    assert m["system"] == "be brief" and m["max_tokens"] == 64 and "stream" not in m and m["tool_choice"] == {"type": "auto"}
    assert m["tools"] == [{"name": "lookup", "description": "search", "input_schema": CHAT["tools"][0]["function"]["parameters"]}]
    user, asst, result = m["messages"]  # the tool result and the next user turn merge into one user message
    assert user["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert [b["type"] for b in asst["content"]] == ["thinking", "tool_use"] and asst["content"][1]["input"] == {"q": "png"}
    assert result["content"][0] == {"type": "tool_result", "tool_use_id": "functions.lookup:0", "content": "a tiny image"}
    assert result["content"][1] == {"type": "text", "text": "and now?"}
    assert translate("messages", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})["max_tokens"] == 1024
    assert "top_p" not in translate("messages", {**CHAT, "top_p": 1.0}) and translate("messages", {**CHAT, "top_p": 0.9})["top_p"] == 0.9


def ev(*events):
    return [json.dumps(e) for e in events]


RESPONSES_STREAM = ev(
    {"type": "response.created", "response": {"id": "r", "status": "in_progress"}},
    {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs"}},
    {"type": "response.reasoning_text.delta", "output_index": 0, "delta": "hmm"},
    {"type": "response.output_item.added", "output_index": 1, "item": {"type": "message", "id": "m"}},
    {"type": "response.output_text.delta", "output_index": 1, "delta": "Hel", "logprobs": [{"token": "Hel", "logprob": -0.1}]},
    {"type": "response.output_text.delta", "output_index": 1, "delta": "lo"},
    {"type": "response.output_item.added", "output_index": 2, "item": {"type": "function_call", "id": "fc", "call_id": "call_1", "name": "f", "arguments": ""}},
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": "{\"a\":"},
    {"type": "response.function_call_arguments.delta", "output_index": 2, "delta": " 1}"},
    {"type": "response.completed", "response": {"status": "completed", "output": [], "usage": {"input_tokens": 32, "input_tokens_details": {"cached_tokens": 31}, "output_tokens": 5, "total_tokens": 37}}},
)
MESSAGES_STREAM = ev(
    {"type": "message_start", "message": {"id": "x", "content": [], "usage": {"input_tokens": 1, "cache_read_input_tokens": 31, "output_tokens": 1}}},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "sig"}},
    {"type": "content_block_stop", "index": 0},
    {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Hello"}},
    {"type": "content_block_stop", "index": 1},
    {"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}},
    {"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": " 1}"}},
    {"type": "content_block_stop", "index": 2},
    {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}},
    {"type": "message_stop"},
)


def test_streams_reassemble_into_the_chat_shape_with_like_for_like_usage():
    r = parse_surface("responses-stream", None, RESPONSES_STREAM)
    m = parse_surface("messages-stream", None, MESSAGES_STREAM)
    for p in (r, m):
        assert (p.content, p.reasoning, p.finish_reason, p.prompt_tokens) == ("Hello", "hmm", "tool_calls", 32)
        assert p.tool_calls[0]["function"] == {"name": "f", "arguments": "{\"a\": 1}"}
    assert r.logprobs == [{"token": "Hel", "logprob": -0.1}] and r.completion_tokens == 5
    assert m.usage["surface"]["input_tokens"] == 1 and m.usage["prompt_tokens_details"]["cached_tokens"] == 31
    assert contract.check({"tools": [{"name": "f"}]}, r, "responses-stream") == []
    assert contract.check({"tools": [{"name": "f"}], "thinking": {"type": "enabled"}}, m, "messages-stream") == []


def codes(mode, body=None, chunks=None, request=None):
    p = parse_surface(mode, body, chunks)
    return {f.code for f in contract.check(request or {}, p, mode)}


def test_surface_contract_findings():
    tool_use_without_block = json.dumps({"content": [{"type": "text", "text": "x"}], "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert {"stop_reason_tool_use_without_block", "finish_reason_tool_calls_without_calls"} <= codes("messages", tool_use_without_block)
    input_string = json.dumps({"content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{\"a\": 1}"}], "stop_reason": "tool_use", "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert "tool_input_not_object" in codes("messages", input_string)
    no_call_id = json.dumps({"status": "completed", "output": [{"type": "function_call", "name": "f", "arguments": "{}"}], "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert {"function_call_without_call_id", "tool_call_id_missing"} <= codes("responses", no_call_id)
    markup = json.dumps({"status": "completed", "output": [{"type": "message", "content": [{"type": "output_text", "text": "<tool_call>{}</tool_call>"}]}], "usage": {"input_tokens": 1, "output_tokens": 1}})
    assert "tool_markup_in_content" in codes("responses", markup)
    no_usage = RESPONSES_STREAM[:-1] + ev({"type": "response.completed", "response": {"status": "completed"}})
    assert "usage_missing" in codes("responses-stream", chunks=no_usage)
    delta_without_usage = [c for c in MESSAGES_STREAM if '"message_delta"' not in c] + ev({"type": "message_delta", "delta": {"stop_reason": "tool_use"}})
    assert "usage_missing" in codes("messages-stream", chunks=delta_without_usage)
    unsigned = [c for c in MESSAGES_STREAM if "signature_delta" not in c]
    assert "thinking_signature_missing" in codes("messages-stream", chunks=unsigned, request={"thinking": {"type": "enabled", "budget_tokens": 64}})
    assert "thinking_signature_missing" not in codes("messages-stream", chunks=unsigned)
    assert "stream_terminal_event_missing" in codes("messages-stream", chunks=MESSAGES_STREAM[:-1])
    incomplete = json.dumps({"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": [], "usage": {"input_tokens": 1, "output_tokens": 64}})
    assert parse_surface("responses", incomplete, None).finish_reason == "length"
    completed_at_limit = json.dumps({"status": "completed", "output": [], "usage": {"input_tokens": 1, "output_tokens": 64}})
    assert "finish_reason_mismatch" in codes("responses", completed_at_limit, request={"max_output_tokens": 64})


def test_error_shapes():
    assert error_findings("messages", 400, json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": "x"}})) == []
    assert [f.code for f in error_findings("messages", 400, json.dumps({"error": {"message": "x"}}))] == ["error_shape_wrong"]
    assert error_findings("responses", 400, json.dumps({"error": {"message": "x", "type": "t"}})) == []
    assert [f.code for f in error_findings("responses-stream", 404, "not json")] == ["error_shape_wrong"]
    assert error_findings("chat", 400, "not json") == []


def test_raw_bodies_and_events_go_through_the_client_and_server():
    script = Script(lambda req: Reply(content="four", reasoning_content="2+2"))
    body = {"model": "m", "messages": [{"role": "user", "content": "2+2?"}], "max_tokens": 8}

    async def go(url):
        ep = Endpoint(EndpointConfig(url, "m", api_key="k-secret", max_retries=0))
        try:
            return {mode: await ep.send(mode, translate(mode, body)) for mode in ("responses", "responses-stream", "messages", "messages-stream")}
        finally:
            await ep.aclose()

    with TestServer(script) as srv:
        res = asyncio.run(go(srv.url))
        headers = list(srv.script.headers)
    for mode, r in res.items():
        assert r.error is None and r.status == 200
        p = parse_surface(mode, r.body, r.chunks)
        assert (p.content, p.reasoning, p.finish_reason) == ("four", "2+2", "stop")
    assert json.loads(res["messages-stream"].chunks[-1]) == {"type": "message_stop"}
    assert json.loads(res["responses-stream"].chunks[-1])["type"] == "response.completed"
    anthropic = [h for h in headers if h.get("anthropic-version")]
    assert len(anthropic) == 2 and all(h["x-api-key"] == "k-secret" for h in anthropic)


def test_a_secret_split_across_surface_deltas_is_redacted():
    from verifier.redact import Redactor

    r = Redactor(["sk-abcdef123456"])
    resp = ev({"type": "response.output_text.delta", "output_index": 0, "delta": "key sk-abc"},
              {"type": "response.output_text.delta", "output_index": 0, "delta": "def123456 end"})
    msg = ev({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "sk-abcdef"}},
             {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "123456"}})
    for chunks in (resp, msg):
        out = r.chunks(chunks)
        assert "abcdef" not in "".join(out) and "123456" not in "".join(out) and "***" in "".join(out)


def test_surface_parity_names_the_mode_that_moved():
    from verifier.attribution.signals import surface_parity_mismatch
    from verifier.attribution.surface_signals import parity_modes
    from verifier.types import Observation

    def obs(**answers):
        return [Observation("s", "x", 0, m.replace("_", "-"), "content", answer=a, prompt_tokens=10) for m, a in answers.items()]

    golden = obs(chat=1, chat_stream=1, responses=1, messages=1)
    assert parity_modes(golden, golden) == set() and surface_parity_mismatch(golden, golden) is False
    assert parity_modes(golden, obs(chat=1, chat_stream=1, responses=1, messages=2)) == {"messages"}
    assert parity_modes(golden, obs(chat=2, chat_stream=1, responses=1, messages=1)) == {"chat"}
    assert parity_modes(golden, obs(chat=2, chat_stream=2, responses=2, messages=2)) == set()  # all moved together: the model
    # A surface that already differed in the golden is not an event when it still differs.
    assert parity_modes(obs(chat=1, messages=3), obs(chat=1, messages=4)) == set()
    assert parity_modes(obs(chat=1, chat_stream=1), obs(chat=1, chat_stream=2)) is None
    assert surface_parity_mismatch(obs(chat=1, chat_stream=1), obs(chat=1, chat_stream=2)) is None
