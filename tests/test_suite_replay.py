"""Raw-request replay suite: loading formats, raw sending, K2VV metrics, and the CLI end to end."""

import json

import pytest

from suites import BUILTIN as SUITES, replay
from verifier.execution.runner import build_request
from verifier.testbed.server import Reply, Script, TestServer
from verifier.types import Parsed

WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


def body(text, tools=True, **extra):
    b = {"messages": [{"role": "user", "content": text}], "temperature": 0.6, **extra}
    if tools:
        b["tools"] = [WEATHER_TOOL]
    return b


def parsed(calls=None, content=None, finish=None):
    tc = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}} for i, (n, a) in enumerate(calls or [])]
    return Parsed(content=content, reasoning=None, tool_calls=tc or None, finish_reason=finish or ("tool_calls" if tc else "stop"), usage={})


def test_load_jsonl_ids_and_batch_lines(tmp_path):
    f = tmp_path / "reqs.jsonl"
    lines = [body("a"), body("b", custom_id=7), {"custom_id": "batch-1", "method": "POST", "body": body("c")}, body("d", request_id="r-9")]
    f.write_text("\n".join(json.dumps(x) for x in lines[:2]) + "\n\n" + "\n".join(json.dumps(x) for x in lines[2:]) + "\n")
    ss = replay.load(str(f))
    assert [s.id for s in ss] == ["line-1", "7", "batch-1", "r-9"]
    assert ss[2].meta["body"] == lines[2]["body"] and ss[2].messages == lines[2]["body"]["messages"]
    assert ss[0].tools == [WEATHER_TOOL]
    assert [s.id for s in replay.load(str(f))] == [s.id for s in ss]


def test_load_single_object_and_list(tmp_path):
    one = tmp_path / "one.json"
    one.write_text(json.dumps(body("x"), indent=2))
    assert [s.id for s in replay.load(str(one))] == ["line-1"]
    many = tmp_path / "many.json"
    many.write_text(json.dumps([body("x"), body("y")]))
    assert [s.id for s in replay.load(str(many))] == ["line-1", "line-2"]


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="replay needs a file") as e:
        replay.load()
    assert "pass --data FILE.jsonl" in e.value.hints  # a hint, printed by the commands that have --data
    with pytest.raises(FileNotFoundError):
        replay.load(str(tmp_path / "nope.jsonl"))
    dup = tmp_path / "dup.jsonl"
    dup.write_text(json.dumps(body("a", id="x")) + "\n" + json.dumps(body("b", id="x")) + "\n")
    with pytest.raises(ValueError, match="duplicate"):
        replay.load(str(dup))
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(body("a")) + "\n{oops\n")
    with pytest.raises(ValueError, match=":2"):
        replay.load(str(bad))
    nomsg = tmp_path / "nomsg.jsonl"
    nomsg.write_text('{"prompt": "hi"}\n')
    with pytest.raises(ValueError, match="messages"):
        replay.load(str(nomsg))


def test_smoke_is_builtin_and_raw():
    ss = replay.load(smoke=True)
    assert 2 <= len(ss) <= 3 and len({s.id for s in ss}) == len(ss)
    assert replay.request(ss[0]) == {"_raw": ss[0].meta["body"]}
    sampling = {"defaults": {}, "overrides": {"temperature": 0.9}}
    req = build_request(replay.SUITE, ss[0], "m", sampling, {}, "chat-stream")
    assert req["model"] == "m" and req["temperature"] == ss[0].meta["body"]["temperature"] and req["stream"] is True
    assert req["tools"] == ss[0].meta["body"]["tools"]


def test_score_metrics():
    s = replay.make_sample(1, body("weather in Oslo"))
    v = replay.score(s, parsed([("get_weather", '{"city": "Oslo"}'), ("get_weather", '{"city": 3}')]))
    assert v.outcome == "content" and v.score is None and v.reason == "tool_called"
    assert v.metrics == {"schema_accuracy": 0.5} and v.signals == {"tool_triggered": True, "n_calls": 2, "n_schema_valid": 1}
    assert v.answer == [{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_weather", "arguments": {"city": 3}}]
    v = replay.score(s, parsed(content="It is sunny."))
    assert v.metrics == {} and v.reason == "no_call" and v.signals["tool_triggered"] is False and v.findings == ()
    v = replay.score(s, parsed(content='{"name": "get_weather", "arguments": {"city": "Oslo"}}'))
    assert [f.code for f in v.findings] == ["tool_call_as_text"]
    plain = replay.make_sample(2, body("hello", tools=False))
    v = replay.score(plain, parsed(content='{"name": "get_weather"}'))
    assert v.reason == "no_tools" and v.metrics == {} and v.findings == () and v.answer == '{"name": "get_weather"}'


def test_cli_replays_k2vv_example(tmp_path, cli, shared_data):
    src = shared_data / "k2vv" / "format_example.json"
    original = json.loads(src.read_text())
    script = Script()
    script.rule("get_weather", Reply(content=None, tool_calls=[{"name": "get_weather", "arguments": json.dumps({"city": "北京"}, ensure_ascii=False)}]))
    with TestServer(script) as srv:
        code, _, err = cli("run", "--suite", "replay", "--data", src, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet", "--mode", "chat,chat-stream")
        sent = list(srv.script.requests)
    assert code == 0, err
    assert len(sent) == 2
    for req in sent:
        assert req["model"] == "m" and req["messages"] == original["messages"] and req["tools"] == original["tools"]
        assert req["temperature"] == 1 and req["top_p"] == 0.95 and req["max_tokens"] == 1280 and req["tool_choice"] == "auto"
    assert sorted(bool(r.get("stream")) for r in sent) == [False, True]
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["replay"]
    assert s["outcomes"] == {"content": 2} and s["metrics"]["schema_accuracy"]["value"] == 1.0
    assert s["extra"]["schema_accuracy"] == {"value": 1.0, "valid": 2, "calls": 2}
    assert s["extra"]["trigger"]["tool_triggered"] == 2
    vs = [json.loads(line) for line in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    assert {v["sample_id"] for v in vs} == {"line-1"} and all(v["answer"] == [{"name": "get_weather", "arguments": {"city": "北京"}}] for v in vs)


def test_cli_smoke_with_faults(tmp_path, cli):
    script = Script()
    script.rule("weather in Paris", Reply(content='<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'))
    script.rule("100 USD", Reply(content=None, tool_calls=[
        {"name": "convert_currency", "arguments": '{"amount": "100", "from": "USD", "to": "EUR"}'},
        {"name": "get_time", "arguments": '{"city": "Tokyo"}'},
    ]))
    script.rule("hello", Reply(content="Hello"))
    with TestServer(script) as srv:
        code, _, err = cli("run", "--suite", "replay", "--smoke", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet", "--mode", "chat,chat-stream")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["replay"]
    # Markup in content is a blocking contract finding; the call-as-text finding is recorded beside it.
    assert s["outcomes"] == {"content": 4, "contract": 2}
    assert s["findings"]["tool_markup_in_content"] == 2 and s["findings"]["tool_call_as_text"] == 2
    assert s["extra"]["schema_accuracy"] == {"value": 0.5, "valid": 2, "calls": 4}
    assert s["extra"]["trigger"] == {"judged": 4, "tool_triggered": 2, "finish_reasons": {"stop": 2, "tool_calls": 2}}
    assert s["reasons"] == {"no_tools": 2, "tool_called": 2, "tool_markup_in_content": 2}


def test_registered():
    assert SUITES["replay"] is replay.SUITE


def test_a_replay_without_tool_calls_gates_on_its_signals(tmp_path, cli):
    """Recorded requests with no tools have no quality metric; a rerun must pass, not sit at `inconclusive`."""
    src = tmp_path / "reqs.jsonl"
    src.write_text("\n".join(json.dumps(body(f"say {w}", tools=False)) for w in ("one", "two", "three", "four")) + "\n")
    run = ["--suite", "replay", "--data", src, "--model", "m", "--quiet", "--mode", "chat,chat-stream"]
    with TestServer(Script(lambda req: Reply(content="ok"))) as srv:
        for name in ("a", "b", "c"):
            assert cli("run", *run, "--base-url", srv.url, "--out", tmp_path / name)[0] == 0
        assert cli("bless", tmp_path / "a", "--to", tmp_path / "g")[0] == 0
        assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "b", tmp_path / "c")[0] == 0
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--data", src, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "gate", "--quiet")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "gate" / "comparison.json").read_text())
    assert doc["status"] == "pass", doc["reasons"]
    q = [e for e in doc["quantization"]["evidence"] if e["signal"] == "quality"]
    assert q and q[0]["verdict"] == "pass" and "no quality metric" in q[0]["summary"]
