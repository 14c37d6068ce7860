"""The fault-injection proxy: every fault, through real sockets, must trip the verifier's own checks.

Upstream is verifier.testbed.server.TestServer; what a client receives through the proxy is
parsed with verifier.judge.parse and judged with verifier.judge.contract, so each test shows the
fault *and* that the verifier catches it.
"""

import json
import socket
import subprocess
import sys

import httpx
import pytest

from conftest import http_ready
from verifier.judge import contract
from verifier.judge.parse import parse_body, parse_chunks
from verifier.testbed.faults import FAULTS, parse_fault_spec, run_stream, selected
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("get_weather", "get_time")]
CALLS = [{"name": "get_weather", "arguments": '{"city": "Paris"}', "id": "call_a"}, {"name": "get_time", "arguments": '{"tz": "UTC"}', "id": "call_b"}]
SECRET = "sk-proxy-SECRET-424242"
# One pooled client: building an httpx client per call costs ~80 ms (TLS context), which adds up.
HTTP = httpx.Client(timeout=10, trust_env=False)


@pytest.fixture
def upstream():
    with TestServer(Script(arithmetic)) as srv:
        yield srv


def request_body(stream: bool, **extra):
    body = {"model": "m", "messages": [{"role": "user", "content": "What is 3 + 4?"}], **extra}
    if stream:
        body.update(stream=True, stream_options={"include_usage": True})
    return body


def send(base_url: str, body: dict, headers: dict | None = None):
    """One raw round trip: (status, body text or None, chunks or None)."""
    url = base_url + "/chat/completions"
    if not body.get("stream"):
        r = HTTP.post(url, json=body, headers=headers)
        return r.status_code, r.text, None
    with HTTP.stream("POST", url, json=body, headers=headers) as r:
        chunks = [line[5:].strip() for line in r.iter_lines() if line.startswith("data:")]
        return r.status_code, None, chunks


def judge(body: dict, text: str | None, chunks: list[str] | None):
    parsed = parse_chunks(chunks) if chunks is not None else parse_body(text)
    return parsed, {f.code for f in contract.check(body, parsed, "chat-stream" if chunks is not None else "chat")}


# fault, reply, modes, the finding the verifier must raise (None: checked by `extra`)
CASES = [
    ("tool_markup_in_content", dict(content=None, tool_calls=CALLS), (False, True), "tool_markup_in_content"),
    ("tool_args_invalid_json", dict(content=None, tool_calls=CALLS), (False, True), "tool_args_invalid_json"),
    ("tool_args_double_encoded", dict(content=None, tool_calls=CALLS), (False, True), "tool_args_not_object"),
    ("tool_args_truncated", dict(content=None, tool_calls=CALLS), (False, True), "tool_args_invalid_json"),
    ("stream_index_zero", dict(content=None, tool_calls=CALLS), (True,), "stream_index_collision"),
    ("finish_reason_wrong", dict(content=None, tool_calls=CALLS), (False, True), "finish_reason_mismatch"),
    ("finish_reason_wrong", dict(content="7"), (False, True), "finish_reason_tool_calls_without_calls"),
    ("finish_reason_missing", dict(content="7"), (False, True), "finish_reason_missing"),
    ("reasoning_in_content", dict(content="7", reasoning_content="3 plus 4 is 7."), (False, True), "reasoning_in_content"),
    ("answer_in_reasoning", dict(content="7"), (False, True), "answer_in_reasoning"),
    ("answer_in_reasoning", dict(content="7", reasoning_content="Adding."), (False, True), "answer_in_reasoning"),
    ("usage_dropped", dict(content="7"), (False, True), "usage_missing"),
    ("tool_call_ids_rewritten", dict(content=None, tool_calls=CALLS), (False, True), None),
    ("stream_duplicate_chars", dict(content="The answer is 7"), (True,), None),
    ("stream_garble", dict(content="The answer is 7"), (True,), None),
]


@pytest.mark.parametrize("fault,reply,modes,finding", CASES, ids=[f"{c[0]}-{c[3]}" for c in CASES])
def test_every_fault_is_applied_and_caught(upstream, fault, reply, modes, finding):
    for stream in modes:
        body = request_body(stream, tools=TOOLS) if reply.get("tool_calls") else request_body(stream)
        upstream.script.enqueue(Reply(**reply), Reply(**reply), Reply(**reply))
        direct = send(upstream.url, body)
        # Rate 0 is a transparent proxy: byte-identical to talking to the upstream directly.
        with Proxy(upstream.url, [f"{fault}:0"]) as px:
            assert send(px.url, body) == direct
            assert px.mutations == []
        assert judge(body, *direct[1:])[1] == set(), "the unmutated reply must be clean"
        with Proxy(upstream.url, [fault]) as px:
            status, text, chunks = send(px.url, body)
            muts = list(px.mutations)
        assert status == 200 and (text, chunks) != direct[1:]
        parsed, codes = judge(body, text, chunks)
        assert muts and {m["fault"] for m in muts} == {fault} and muts[0]["stream"] is stream
        if finding:
            assert finding in codes, (stream, codes, text or chunks)
        elif fault == "tool_call_ids_rewritten":
            # contract.check has no id-format rule yet: the fault shows on the wire only.
            assert [c["id"][:14] for c in parsed.tool_calls] == ["chatcmpl-tool-"] * 2
            assert codes == set()
        elif fault == "stream_duplicate_chars":
            assert parsed.content == "TThe aanswer iis 77" != parse_body(send(upstream.url, request_body(False))[1]).content
        elif fault == "stream_garble":
            assert "\ufffd" in parsed.content and "7" not in parsed.content


def test_tool_args_faults_keep_stream_shape(upstream):
    """Buffered faults re-split the arguments at the original boundaries: same number of chunks."""
    body = request_body(True, tools=TOOLS)
    upstream.script.enqueue(Reply(content=None, tool_calls=CALLS), Reply(content=None, tool_calls=CALLS))
    _, _, direct = send(upstream.url, body)
    with Proxy(upstream.url, ["tool_args_double_encoded"]) as px:
        _, _, chunks = send(px.url, body)
    assert len(chunks) == len(direct)
    p = parse_chunks(chunks)
    assert [json.loads(json.loads(c["function"]["arguments"])) for c in p.tool_calls] == [{"city": "Paris"}, {"tz": "UTC"}]


def test_faults_chain_in_order(upstream):
    body = request_body(True, tools=TOOLS)
    upstream.script.enqueue(Reply(content=None, tool_calls=CALLS))
    with Proxy(upstream.url, ["tool_args_invalid_json", "stream_index_zero", "usage_dropped"]) as px:
        _, _, chunks = send(px.url, body)
        assert sorted(m["fault"] for m in px.mutations) == ["stream_index_zero", "tool_args_invalid_json", "usage_dropped"]
    _, codes = judge(body, None, chunks)
    assert {"tool_args_invalid_json", "stream_index_collision", "usage_missing"} <= codes


def test_request_faults_reach_the_upstream(upstream):
    body = request_body(
        False, tools=TOOLS, tool_choice="auto", response_format={"type": "json_object"},
        temperature=0.0, top_p=1.0, seed=3, max_tokens=64,
        messages=[{"role": "system", "content": "Be terse."}, {"role": "user", "content": "What is 3 + 4?"}],
    )
    _, text, _ = send(upstream.url, body)
    golden_prompt_tokens = json.loads(text)["usage"]["prompt_tokens"]
    faults = ["drop_response_format", "drop_system_prompt", "drop_tools", "drop_sampling_params"]
    with Proxy(upstream.url, faults) as px:
        _, text, _ = send(px.url, body)
        assert sorted(m["fault"] for m in px.mutations) == sorted(faults)
    seen = upstream.script.requests[-1]
    for k in ("response_format", "tools", "tool_choice", "temperature", "top_p", "seed"):
        assert k not in seen, k
    assert seen["max_tokens"] == 64  # a budget, kept on purpose
    assert [m["role"] for m in seen["messages"]] == ["user"]
    # The prompt-token fingerprint is what the verifier compares against the golden.
    assert json.loads(text)["usage"]["prompt_tokens"] < golden_prompt_tokens


def test_request_fault_with_nothing_to_drop_is_not_logged(upstream):
    body = request_body(False)
    with Proxy(upstream.url, ["drop_tools", "drop_system_prompt", "drop_response_format", "tool_args_invalid_json"]) as px:
        assert send(px.url, body) == send(upstream.url, body)
        assert px.mutations == []
    assert upstream.script.requests[-2] == upstream.script.requests[-1] == body


def test_rate_and_seed_are_deterministic_and_order_free(upstream):
    bodies = [{"model": "m", "messages": [{"role": "user", "content": f"What is {i} + 1?"}]} for i in range(40)]

    def hits(seed, order):
        with Proxy(upstream.url, ["usage_dropped:0.5"], seed=seed) as px:
            return {i for i in order if "usage" not in json.loads(send(px.url, bodies[i])[1])}

    first = hits(1, range(40))
    assert 8 <= len(first) <= 32
    assert hits(1, reversed(range(40))) == first  # selection keys on the body, not on arrival order
    assert hits(2, range(40)) != first
    # Identical bodies are told apart by occurrence, so repeats (epochs) are not all-or-nothing.
    with Proxy(upstream.url, ["usage_dropped:0.5"], seed=1) as px:
        same = ["usage" in json.loads(send(px.url, bodies[0])[1]) for _ in range(20)]
    assert 0 < sum(same) < 20


def test_selected_and_fault_specs():
    assert selected(0, "x", "k", 1.0) and not selected(0, "x", "k", 0.0)
    assert [selected(5, "usage_dropped", f"k{i}", 0.3) for i in range(50)] == [selected(5, "usage_dropped", f"k{i}", 0.3) for i in range(50)]
    assert parse_fault_spec("usage_dropped") == ("usage_dropped", 1.0)
    assert parse_fault_spec("usage_dropped:0.25") == ("usage_dropped", 0.25)
    for bad in ("nope", "usage_dropped:2", "usage_dropped:x"):
        with pytest.raises(ValueError):
            parse_fault_spec(bad)


def test_headers_forwarded_never_logged(upstream, tmp_path):
    log = tmp_path / "mut.jsonl"
    headers = {"Authorization": f"Bearer {SECRET}", "X-Api-Key": SECRET}
    with Proxy(upstream.url, ["answer_in_reasoning", "drop_sampling_params"], log=log) as px:
        for stream in (False, True):
            send(px.url, request_body(stream, temperature=0.0), headers=headers)
        models = HTTP.get(px.url + "/models", headers=headers)
    assert upstream.script.headers[-1]["Authorization"] == f"Bearer {SECRET}"
    assert upstream.script.headers[-1]["X-Api-Key"] == SECRET
    assert models.status_code == 200 and models.json()["object"] == "list"
    text = log.read_text()
    assert SECRET not in text
    recs = [json.loads(line) for line in text.splitlines()]
    assert len(recs) == 4 and {r["fault"] for r in recs} == {"answer_in_reasoning", "drop_sampling_params"}
    assert set(recs[0]) == {"time", "fault", "path", "request", "stream", "changes", "before", "after"}
    assert [r["request"] for r in recs] == [1, 1, 2, 2]


def test_other_paths_and_errors_pass_through(upstream):
    with Proxy(upstream.url, [f.name for f in FAULTS.values()]) as px:
        assert HTTP.get(px.url + "/models").json() == HTTP.get(upstream.url + "/models").json()
        r = HTTP.post(px.url + "/completions", json={"prompt": "x"})
        direct = HTTP.post(upstream.url + "/completions", json={"prompt": "x"})
        assert r.status_code == direct.status_code == 200  # faults touch chat completions only
        assert r.json() == direct.json()
        upstream.script.enqueue(Reply(status=503))
        assert send(px.url, request_body(False))[0] == 503
        assert HTTP.post(px.url + "/chat/completions", content=b"{not json").status_code == 400
    with Proxy("http://127.0.0.1:9/v1", ["usage_dropped"]) as px:
        r = HTTP.post(px.url + "/chat/completions", json=request_body(False))
        assert r.status_code == 502 and r.json()["error"]["type"] == "proxy_error"


# --- pure functions, no sockets ----------------------------------------------------------------

INERT_BODY = {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": None}, "finish_reason": None}]}
INERT_STREAM = [
    json.dumps({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}),
    json.dumps({"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": None}]}),
    "[DONE]",
]


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_pure_functions_leave_inapplicable_input_alone(name):
    f = FAULTS[name]
    assert f.name == name and f.description and f.mimics and f.catches and f.kinds
    if f.request:
        req = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
        assert f.request(req) is None
    if f.response:
        assert f.response(INERT_BODY) is None
    if f.stream:
        m = f.stream()
        assert run_stream([m], INERT_STREAM) == INERT_STREAM and m.changes == []


def test_pure_response_functions_do_not_mutate_their_input():
    body = json.loads(json.dumps({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "ok", "reasoning_content": "hmm",
        "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]}}],
        "usage": {"prompt_tokens": 1}}))
    # Faults whose input is another shape: structured JSON content, a count_tokens answer.
    other = {"json_keys_sorted": {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"b": 1, "a": 2}'}}]},
             "count_tokens_skewed": {"input_tokens": 12}}
    snapshot = json.dumps(body)
    for f in FAULTS.values():
        if f.response:
            given = other.get(f.name, body)
            before = json.dumps(given)
            ch = f.response(given)
            assert ch is not None and ch.value != given and ch.before and ch.after, f.name
            assert json.dumps(given) == before, f.name
    assert json.dumps(body) == snapshot


def test_pure_stream_args_edit_on_interleaved_parallel_calls():
    def c(delta=None, finish=None):
        return json.dumps({"id": "x", "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]})

    stream = [
        c({"role": "assistant"}),
        c({"tool_calls": [{"index": 0, "id": "a", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":'}}]}),
        c({"tool_calls": [{"index": 1, "id": "b", "type": "function", "function": {"name": "get_time", "arguments": '{"tz"'}}]}),
        c({"tool_calls": [{"index": 0, "function": {"arguments": ' "Paris"}'}}]}),
        c({"tool_calls": [{"index": 1, "function": {"arguments": ': "UTC"}'}}]}),
        c({}, "tool_calls"),
        "[DONE]",
    ]
    m = FAULTS["tool_args_invalid_json"].stream()
    assert m.feed(stream[0]) == [stream[0]]
    assert [m.feed(x) for x in stream[1:5]] == [[], [], [], []]  # held until the choice finishes
    out = m.feed(stream[5]) + m.feed(stream[6])
    p = parse_chunks(out)
    assert [t["function"]["arguments"] for t in p.tool_calls] == ['{"city": "Paris"', '{"tz": "UTC"']
    assert out[-1] == "[DONE]" and len(m.changes) == 2
    # A stream cut before its finish chunk still releases what was held.
    m = FAULTS["tool_markup_in_content"].stream()
    out = run_stream([m], stream[:5])
    assert "<tool_call>" in parse_chunks(out).content and parse_chunks(out).tool_calls is None


# --- the CLI -----------------------------------------------------------------------------------


def test_cli_list_faults_and_usage_errors(cli, upstream):
    code, out, _ = cli("proxy", "--list-faults")
    assert code == 0
    for name, f in FAULTS.items():
        assert name in out and f.catches in out
    code, _, err = cli("proxy", "--upstream", upstream.url, "--fault", "no_such_fault")
    assert code == 2 and "unknown fault 'no_such_fault'" in err and err.count("\n") == 1
    code, _, err = cli("proxy", "--upstream", upstream.url, "--fault", "usage_dropped:1.5")
    assert code == 2 and "rate must be in [0, 1]" in err
    code, _, err = cli("proxy", "--fault", "usage_dropped")
    assert code == 2 and "--upstream" in err


def test_cli_proxy_serves_and_logs_without_secrets(upstream, tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "m.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "verifier", "proxy", "--upstream", upstream.url, "--port", str(port),
                          "--fault", "usage_dropped", "--fault", "finish_reason_missing:0", "--seed", "3", "--log", str(log)],
                         stderr=subprocess.PIPE, text=True)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        http_ready(base + "/models", p)  # start-up takes 4-9 s under load: poll with a generous deadline
        _, text, _ = send(base, request_body(False), headers={"Authorization": f"Bearer {SECRET}"})
        assert "usage" not in json.loads(text) and json.loads(text)["choices"][0]["finish_reason"] == "stop"
    finally:
        p.terminate()
        _, err = p.communicate(timeout=60)
    assert upstream.script.headers[-1]["Authorization"] == f"Bearer {SECRET}"
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["fault"], r["request"]) for r in recs] == [("usage_dropped", 1)]
    assert SECRET not in log.read_text() + err and "usage_dropped:1" in err


def test_smoke_run_through_proxy_reports_contract_findings(upstream, tmp_path, cli):
    out = tmp_path / "r"
    with Proxy(upstream.url, ["answer_in_reasoning"]) as px:
        code, _, err = cli("run", "--suite", "smoke", "--base-url", px.url, "--model", "m", "--out", out, "--quiet", "--mode", "chat,chat-stream")
        assert code == 0, err
        assert len(px.mutations) == 40
    s = json.loads((out / "summary.json").read_text())["suites"]["smoke"]
    assert s["outcomes"] == {"contract": 40}
    assert s["findings"]["answer_in_reasoning"] == 40 and s["reasons"] == {"answer_in_reasoning": 40}
    assert s["metrics"] == {}  # a frontend fault is never scored as a wrong answer


def test_cli_proxy_surface_flag(upstream, cli, monkeypatch):
    """--surface limits the faults to the named API surfaces; an unknown name is one line and exit 2, before serving."""
    from verifier.testbed import proxy as proxy_mod

    served = []
    monkeypatch.setattr(proxy_mod, "serve", lambda config: served.append(config) or 0)
    code, _, err = cli("proxy", "--upstream", upstream.url, "--fault", "usage_dropped", "--surface", "responses, messages")
    assert code == 0, err
    assert served[0].surfaces == ("responses", "messages") and served[0].faults == ("usage_dropped",)
    code, _, err = cli("proxy", "--upstream", upstream.url, "--fault", "usage_dropped")
    assert code == 0 and served[1].surfaces is None  # default: every surface
    code, _, err = cli("proxy", "--upstream", upstream.url, "--surface", "chat,completions")
    assert code == 2 and len(served) == 2
    assert err.strip().splitlines() == ["verifier: error: --surface: unknown surface completions; known: chat, messages, responses"]


def test_proxy_surface_filter_leaves_other_surfaces_untouched(upstream):
    with Proxy(upstream.url, ["usage_dropped"], surfaces={"responses"}) as px:
        _, text, _ = send(px.url, request_body(False))
        assert "usage" in json.loads(text) and px.mutations == []
    with Proxy(upstream.url, ["usage_dropped"], surfaces={"chat"}) as px:
        _, text, _ = send(px.url, request_body(False))
        assert "usage" not in json.loads(text) and len(px.mutations) == 1


def test_turn_rules_force_only_the_first_request_of_each_user_turn(upstream):
    """The engine adapters for multi-turn agent loops: the request after a user message is forced to call (prefill on
    llama-server, tool_choice "required" on vLLM); a request after tool results goes as sent, so a turn can end."""
    from verifier.testbed.engine_tools import OPENING, TURN_CALL_PREFILL, TURN_CALL_REQUIRED

    opening = [{"role": "user", "content": "List the files."}]
    follow_up = [*opening, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object", "properties": {}}}}]
    with Proxy(upstream.url, [(TURN_CALL_REQUIRED, 1.0)]) as req, Proxy(upstream.url, [(TURN_CALL_PREFILL, 1.0)]) as pre:
        send(req.url, {"model": "m", "messages": opening, "tools": tools, "tool_choice": "auto"})
        assert upstream.script.requests[-1]["tool_choice"] == "required"
        send(req.url, {"model": "m", "messages": follow_up, "tools": tools, "tool_choice": "auto"})
        assert upstream.script.requests[-1]["tool_choice"] == "auto"
        send(req.url, {"model": "m", "messages": opening, "tools": tools, "tool_choice": "none"})
        assert upstream.script.requests[-1]["tool_choice"] == "none"  # an explicit choice other than auto is kept
        send(req.url, {"model": "m", "messages": opening})
        assert "tool_choice" not in upstream.script.requests[-1]  # no tools, nothing to force
        assert [m["fault"] for m in req.mutations] == ["turn_call_required"]
        send(pre.url, {"model": "m", "messages": opening, "tools": tools})
        assert upstream.script.requests[-1]["messages"][-1] == {"role": "assistant", "content": OPENING}
        send(pre.url, {"model": "m", "messages": follow_up, "tools": tools})
        assert upstream.script.requests[-1]["messages"] == follow_up
        assert [m["fault"] for m in pre.mutations] == ["turn_call_prefill"]
