"""Issue 47: the serving bugs filed in 2026. Each fault of serving_faults.py, put by the proxy between the gate and the
clean test server, fails the gate (exit 10) on each suite it acts on, with the component to fix named first; the clean
server still passes with every new check measured."""

import dataclasses
import json

import pytest

from suites import gsm8k, structured
from conftest import zero_margins
from verifier.attribution.diagnosis import COMPONENTS
from verifier.testbed.faults import ALL_FAULTS, SERVING_FAULTS
from verifier.testbed.mutation import Fault
from verifier.testbed.proxy import Proxy
from verifier.testbed.serving_faults import CallsAsJsonTextStream, calls_as_json_text
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.testbed.wire import usage_of
from verifier.surfaces import registry

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path
STREAMED = {m for m in MODES.split(",") if registry.mode_of(m).stream}

# What each golden is recorded with beyond the defaults: bfcl asks for a call (tool_choice required), structured turns
# reasoning on (on chat's modes: the test bed's Responses and Messages servers take no chat_template_kwargs);
# bfcl-auto is bfcl as the suite sends it.
GOLDENS = {
    "gsm8k": ("gsm8k", {}, MODES),
    "bfcl": ("bfcl", {"tool_choice": "required"}, MODES),
    "bfcl-auto": ("bfcl", {}, MODES),
    "structured": ("structured", {"chat_template_kwargs": {"enable_thinking": True}}, "chat,chat-stream"),
}


def oracle():
    """A plausible model on the smoke samples: gsm8k answered in a sentence, tool calls whose string values hold
    several words, underscores and case (two calls where two tools are declared), and structured answers in prose,
    which only the grammar of a response_format (the server honours it) turns into the schema's JSON."""
    table = {}
    for s in gsm8k.SUITE.load(None, True):
        table[last_user_text({"messages": s.messages})] = Reply(
            content=f"Let me work through this one step by step, carefully. The final answer is {s.target}")
    for s in structured.SUITE.load(None, True):
        table[last_user_text({"messages": s.messages})] = Reply(content="Here is the record you asked for, in words.")

    def answer(req):
        reply = table.get(last_user_text(req))
        if reply is not None:
            return reply
        tools = req.get("tools") or []
        if not tools:
            return Reply(content="I cannot help with that request, sorry.")
        names = [(t.get("function") or t)["name"] for t in tools][:2]
        return Reply(content=None, tool_calls=[
            {"name": n, "arguments": json.dumps({"city_name": "San Francisco, CA", "unit_id": "123_456", "count": i + 3}),
             "id": f"call_{i}"} for i, n in enumerate(names)])

    return answer


def reports_cached(answer):
    """The responder's usage with `prompt_tokens_details.cached_tokens`, as llama-server reports it on every answer
    (0 here: the figure's presence is what the gate holds a candidate to, not how much a cache held)."""
    def respond(req):
        reply = answer(req)
        usage = usage_of(reply, req)
        return dataclasses.replace(reply, usage={**usage, "prompt_tokens_details": {"cached_tokens": 0}}) if usage else reply

    return respond


def server():
    return TestServer(Script(reports_cached(oracle()), honour_sampling=True))


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    """One reference per golden on all six modes with logprobs, blessed, margins from the reference against itself."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("serving")
    out = {}
    with server() as srv:
        for name, (suite, extra, modes) in GOLDENS.items():
            args = ["run", "--suite", suite, "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / name),
                    "--quiet", "--mode", modes, "--logprobs", "2", "--max-retries", "0"]
            if extra:
                args += ["--extra-body", json.dumps(extra)]
            assert main(args) == 0
            g = tmp / "goldens" / name
            assert main(["bless", str(tmp / name), "--to", str(g)]) == 0
            zero_margins(g)
            out[name] = g
    return out


def gate(cli, golden, url, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet")
    assert (out / "comparison.json").exists(), stdout + err
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


# (fault, golden) -> (the component the diagnosis must name first, the finding or signal it leads with)
EXPECTED = {
    ("state_dependent_answers", "gsm8k"): ("engine state", "repeats_disagree"),
    ("state_dependent_answers", "bfcl"): ("engine state", "repeats_disagree"),
    ("stream_multi_token_args_lost", "bfcl"): ("tool-call parser", "stream_tool_args_changed"),
    ("tool_args_values_mangled", "bfcl"): ("tool-call parser", "tool_args_values_changed"),
    ("tool_choice_forced_as_text", "bfcl"): ("API validation", "tool_choice_unmet"),
    ("cached_tokens_overcounted", "gsm8k"): ("response formatting & usage", None),
    ("cached_tokens_dropped", "gsm8k"): ("response formatting & usage", "cached_tokens_dropped"),
    ("cached_tokens_dropped", "bfcl"): ("response formatting & usage", "cached_tokens_dropped"),
    ("response_format_dropped_with_reasoning", "structured"): ("structured-output backend", None),
}


# Faults a probe catches rather than the suites' samples: their gate test is the probe catalogue's
# (tests/test_probes_catalogue.py, BREAKS). State shared across a batch breaks every concurrent sample alike, so the
# samples alone show greedy outputs parted with zero drift (decoding_changed); the concurrent probe names engine state,
# first, as their explanation (tests/test_engine_state_order.py).
BY_PROBE = {"shared_prefix_batch_state": "state_repeat_under_concurrency"}


def test_every_serving_fault_has_a_gate_test():
    from test_probes_catalogue import BREAKS

    assert {f for f, _ in EXPECTED} | set(BY_PROBE) == set(SERVING_FAULTS) and set(SERVING_FAULTS) <= set(ALL_FAULTS)
    assert all(BREAKS[probe] == fault and f"probe:{probe}" in SERVING_FAULTS[fault].catches for fault, probe in BY_PROBE.items())


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_the_clean_server_passes_with_every_new_check(goldens, tmp_path, cli, name):
    with server() as srv:
        code, doc, out = gate(cli, goldens[name], srv.url, tmp_path / "g")
    assert code == 0 and doc["status"] == "pass", out
    names = {e["signal"] for e in doc["frontend"]["evidence"]}
    assert {"repeats_disagree", "tool_args_values_changed", "stream_tool_args_changed", "tool_calls_as_text"} & names, names
    assert "cached_tokens_dropped" in names  # measured: the golden's records reported cached tokens


@pytest.mark.parametrize("fault,golden", sorted(EXPECTED))
def test_each_serving_fault_fails_the_gate_and_names_its_component(goldens, tmp_path, cli, fault, golden):
    component, lead = EXPECTED[(fault, golden)]
    with server() as srv, Proxy(srv.url, [fault]) as px:
        code, doc, out = gate(cli, goldens[golden], px.url, tmp_path / "g")
    assert px.mutations, "the fault never acted"
    assert code == 10 and doc["status"] == "frontend_regression" and doc["frontend"]["verdict"] == "fail", out
    first = doc["diagnosis"][0]
    assert first["component"] == component, doc["diagnosis"]
    assert first["where"] == COMPONENTS[component] and GOLDENS[golden][0] in first["suites"]
    if lead is not None:
        assert first["findings"][0] == lead, first
    if fault == "stream_multi_token_args_lost":  # the streaming path only
        assert first["modes"] and set(first["modes"]) <= STREAMED, first["modes"]


def test_a_parsed_call_that_comes_back_as_text_is_the_tool_call_parser(goldens, tmp_path, cli):
    """Issue 50, 4b: the golden's calls come back as text at temperature 0 with tool_choice auto (a parser that did not
    run, or a forcing adapter the gate cannot see): a frontend event naming the tool-call parser, never inconclusive."""
    as_text = Fault("calls_as_text", "tool calls as bare JSON text", "a tool-call parser that did not run", "tool_calls_as_text",
                    response=calls_as_json_text, stream=CallsAsJsonTextStream)
    with server() as srv, Proxy(srv.url, [(as_text, 1.0)]) as px:
        code, doc, out = gate(cli, goldens["bfcl-auto"], px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "tool-call parser" and "tool_calls_as_text" in first["findings"], doc["diagnosis"]


# ----------------------------------------------------------------------------- the mechanisms, pure

from verifier.attribution import signals  # noqa: E402
from verifier.execution import probe_checks as pc  # noqa: E402
from verifier.judge import contract  # noqa: E402
from verifier.surfaces.chat import usage_split  # noqa: E402
from verifier.types import Observation, Parsed, WireFacts  # noqa: E402

SURE, TIE = -0.01, -0.69  # probability 0.99; a near-tie (0.50)


def rec(mode, tokens, epoch=0, prompt_tokens=10, answer=None, content=None, **kw):
    return Observation(suite="s", sample_id="a", epoch=epoch, mode=mode, outcome="content", prompt_tokens=prompt_tokens,
                       answer=answer, content=content if content is not None else "".join(t for t, _ in tokens),
                       logprobs=[list(x) for x in tokens], **kw)


ANSWER = [("The", SURE), (" answer", SURE), (" is", SURE), (" 18", SURE)]
WRONG = [("The", SURE), (" answer", SURE), (" is", SURE), (" 29", SURE)]
FLIPPED = [("The", SURE), (" answer", SURE), (" is", SURE), (" 19", TIE)]
ANSWER_TIE = [("The", SURE), (" answer", SURE), (" is", SURE), (" 18", TIE)]


def test_repeats_disagree_reads_repeats_of_one_request_against_the_golden():
    golden = [rec("chat", ANSWER), rec("chat-stream", ANSWER)]
    # the first send is the golden's, the repeat parts at a token the model was sure of: engine state
    assert signals.repeats_modes(golden, [rec("chat", ANSWER), rec("chat-stream", WRONG)]) == {"chat-stream"}
    assert signals.repeats_modes(golden, [rec("chat", ANSWER, epoch=0), rec("chat", WRONG, epoch=1)]) == {"chat"}
    # a near-tie flipped by batch shape is no evidence
    assert signals.repeats_disagree([rec("chat", ANSWER_TIE), rec("chat-stream", ANSWER_TIE)],
                                    [rec("chat", ANSWER_TIE), rec("chat-stream", FLIPPED)]) is False
    # every record left the golden's generation, and they agree: the weights' doing
    assert signals.repeats_disagree(golden, [rec("chat", WRONG), rec("chat-stream", WRONG)]) is False
    # the golden's own repeats disagreed: nothing to hold the candidate to
    assert signals.repeats_disagree([rec("chat", ANSWER), rec("chat-stream", WRONG)], [rec("chat", ANSWER), rec("chat-stream", WRONG)]) is None
    # two surfaces are two requests (surface parity's), and another prompt is another request
    assert signals.repeats_disagree(golden + [rec("responses", ANSWER)], [rec("chat", ANSWER), rec("responses", WRONG)]) is False
    assert signals.repeats_disagree(golden, [rec("chat", ANSWER), rec("chat-stream", WRONG, prompt_tokens=11)]) is False
    # one record, or no logprobs: not measurable
    assert signals.repeats_disagree(golden, [rec("chat", ANSWER)]) is None


def test_repeats_disagree_is_not_an_event_sent_twice():
    dup = ANSWER[:2] + [ANSWER[1]] + ANSWER[2:]  # a delta repeated in transit, its logprob with it
    golden = [rec("chat", ANSWER), rec("chat-stream", ANSWER)]
    assert signals.repeats_disagree(golden, [rec("chat", ANSWER), rec("chat-stream", dup)]) is False


def call(name, **args):
    return {"name": name, "arguments": args}


def test_tool_args_values_changed_is_formatting_only():
    g = [rec("chat", ANSWER, answer=[call("f", unit_id="123_456", city="New York", n=3)])]
    assert signals.tool_args_values_changed(g, [rec("chat", ANSWER, answer=[call("f", unit_id="123456", city="NewYork", n=3.0)])])
    assert signals.tool_args_values_changed(g, [rec("chat", ANSWER, answer=[call("f", unit_id="123_456", city="new york", n=3)])])
    assert signals.tool_args_values_changed(g, [rec("chat", ANSWER, answer=[call("f", unit_id="123_456", city="New York", n=3)])]) is False
    assert signals.tool_args_values_changed(g, [rec("chat", ANSWER, answer=[call("f", unit_id="999", city="Paris", n=3)])]) is False
    # a type change alone is tool_args_types_changed's
    assert signals.tool_args_values_changed(g, [rec("chat", ANSWER, answer=[call("f", unit_id="123_456", city="New York", n="3")])]) is None


def test_stream_tool_args_changed_needs_the_text_channel_intact():
    full, cut = [call("f", city="San Francisco, CA")], [call("f", city="San")]
    g = [rec("chat", ANSWER, answer=full, content=""), rec("chat-stream", ANSWER, answer=full, content="")]
    assert signals.stream_args_modes(g, [rec("chat", ANSWER, answer=full, content=""),
                                         rec("chat-stream", ANSWER, answer=cut, content="")]) == {"chat-stream"}
    # the text moved too: the stream's assembly, not the parser's
    assert not signals.stream_args_modes(g, [rec("chat", ANSWER, answer=full, content=""),
                                             rec("chat-stream", ANSWER, answer=cut, content="xx")])


def test_tool_calls_as_text_wants_the_golden_calls_in_the_text():
    g = [rec("chat", ANSWER, answer=[call("get_weather", city="Paris")])]
    text = 'Sure: {"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert signals.tool_calls_as_text(g, [rec("chat", ANSWER, answer=[], content=text)])
    assert signals.tool_calls_as_text(g, [rec("chat", ANSWER, answer=[], content="It is sunny in Paris.")]) is False
    assert signals.tool_calls_as_text(g, [rec("chat", ANSWER, answer=[], content='{"name": "get_weather", "arguments": {"city": "Lyon"}}')]) is False
    hostile = "{" * 5000 + '{"name": "get_weather", "arguments": {"city": "Paris"}}'
    assert signals.tool_calls_as_text(g, [rec("chat", ANSWER, answer=[], content=hostile)]) is False  # bounded: gave up


def parsed(**kw):
    base = dict(content="ok", reasoning=None, tool_calls=None, finish_reason="stop", usage={"prompt_tokens": 5, "completion_tokens": 1},
                logprobs=None, extra=WireFacts())
    base.update(kw)
    return Parsed(**base)


def codes(request, p, mode="chat"):
    return {f.code for f in contract.check(request, p, mode)}


def test_a_forcing_tool_choice_answered_without_a_call_is_blocking():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    for choice in ("required", {"type": "function", "function": {"name": "f"}}, {"type": "any"}, {"type": "tool", "name": "f"}):
        assert "tool_choice_unmet" in codes({"tools": tools, "tool_choice": choice}, parsed())
    assert "tool_choice_unmet" not in codes({"tools": tools, "tool_choice": "auto"}, parsed())
    assert "tool_choice_unmet" not in codes({"tools": tools, "tool_choice": "required"}, parsed(finish_reason="length"))
    assert contract.blocking([contract.Finding("tool_choice_unmet")])
    # The call was generated in the model's markup and left in the text: the parser's failure, named once, by the
    # parser's finding (a grammar-forced call that the proxy's fault turned into `<tool_call>` text, on vLLM).
    marked = parsed(content='<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>')
    assert codes({"tools": tools, "tool_choice": "required"}, marked) >= {"tool_markup_in_content"}
    assert "tool_choice_unmet" not in codes({"tools": tools, "tool_choice": "required"}, marked)


def test_tool_markup_is_searched_once_per_text_and_read_by_both_checks(monkeypatch):
    """The markup search is done once per response (content and reasoning, each once): the text findings name what
    it found, and the same result silences tool_choice_unmet (a review finding: the forced-call check searched again)."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    searched: list[str] = []
    real = contract.MARKUP

    class Counting:
        def search(self, text: str):
            searched.append(text)
            return real.search(text)

    monkeypatch.setattr(contract, "MARKUP", Counting())
    marked = parsed(content="I will call it.", reasoning='<tool_call>{"name": "f"}</tool_call>')
    found = contract.check({"tools": tools, "tool_choice": "required"}, marked, "chat")
    assert searched == ["I will call it.", '<tool_call>{"name": "f"}</tool_call>']
    assert [x.detail for x in found if x.code == "tool_markup_in_content"] == ["reasoning: <tool_call>"]
    assert "tool_choice_unmet" not in {x.code for x in found}
    assert contract.tool_markup(marked) == {"reasoning": "<tool_call>"}
    assert contract.tool_markup(parsed(content="no markup")) == {}


def test_cached_tokens_and_split_usage_are_findings():
    over = {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 12}}
    assert "cached_tokens_exceed_prompt" in codes({}, parsed(usage=over))
    assert "cached_tokens_exceed_prompt" not in codes({}, parsed(usage={**over, "prompt_tokens_details": {"cached_tokens": 5}}))
    assert "cached_tokens_exceed_prompt" in codes({}, parsed(usage={"input_tokens": 5, "input_tokens_details": {"cached_tokens": 6}}), "responses")
    u = {"prompt_tokens": 5, "completion_tokens": 1}
    assert usage_split([u]) is None and usage_split([u, dict(u)]) is None
    assert usage_split([u, {**u, "completion_tokens": 4}]) is None  # running output counts may grow
    assert "prompt_tokens_details" in usage_split([u, {**u, "prompt_tokens_details": {"cached_tokens": 3}}])
    assert "usage_split_across_chunks" in codes({}, parsed(extra=WireFacts(usage_split="usage chunk 2 of 2 differs")))


def answer_of(content, tokens):
    return pc.Answer(200, None, None, None, "chat", parsed(content=content, logprobs=[{"token": t, "logprob": v} for t, v in tokens]))


def test_the_state_probe_tells_a_near_tie_from_a_sure_token():
    b = answer_of("84", [("84", SURE)])
    assert pc.cold_equals_warm([answer_of("42", [("42", SURE)]), b, answer_of("42", [("42", SURE)])]).passed
    assert not pc.cold_equals_warm([answer_of("42", [("42", SURE)]), b, answer_of("53", [("53", SURE)])]).passed
    assert pc.cold_equals_warm([answer_of("42", [("42", TIE)]), b, answer_of("41", [("41", TIE)])]).passed
    assert not pc.cold_equals_warm([answer_of("42", []), b, answer_of("41", [])]).passed  # no tokens to tell


def test_the_cached_tokens_probe():
    def a(pt, cached):
        return pc.Answer(200, None, None, None, "chat", parsed(usage={"prompt_tokens": pt, "completion_tokens": 1,
                                                                      "prompt_tokens_details": {"cached_tokens": cached}}))
    seen = pc.cached_tokens_counted([a(50, 0), a(50, 48)])
    assert seen.passed and seen.value == 48
    assert not pc.cached_tokens_counted([a(50, 0), a(50, 57)]).passed
    assert pc.cached_where_reference_cached(48, 48)[0] and not pc.cached_where_reference_cached(None, 48)[0]
    assert pc.cached_where_reference_cached(None, None)[0]  # the reference's engine reported none: nothing expected


def test_the_serving_faults_edit_only_what_they_name():
    from verifier.testbed import serving_faults as sf

    body = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"content": "It is 19 or 90.", "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps({"n": 9, "s": "San Francisco, CA", "u": "1_2"})}}]},
        "logprobs": {"content": [{"token": " 19", "logprob": -0.1, "top_logprobs": [{"token": " 19", "logprob": -0.1}]}]}}]}
    shifted = sf.SERVING_FAULTS["state_dependent_answers"].response(body).value
    msg = shifted["choices"][0]["message"]
    assert msg["content"] == "It is 21 or 11." and json.loads(msg["tool_calls"][0]["function"]["arguments"])["n"] == 1
    assert shifted["choices"][0]["logprobs"]["content"][0]["token"] == " 21" and shifted["choices"][0]["logprobs"]["content"][0]["logprob"] == -0.1
    assert json.loads(sf.mangle_values(json.dumps({"u": "123_456", "c": "New York", "n": 3}))) == {"u": "123456", "c": "NewYork", "n": 3.0}
    assert json.loads(sf.first_token_of_strings(json.dumps({"c": "San Francisco, CA", "n": 3}))) == {"c": "San", "n": 3}
    assert sf.first_token_of_strings(json.dumps({"c": "Paris"})) is None  # nothing to lose
    assert sf.forces_a_call({"tool_choice": "required"}) and not sf.forces_a_call({"tool_choice": "auto"})
    assert sf.reasoning_on({"chat_template_kwargs": {"enable_thinking": True}}) and not sf.reasoning_on({})
    usage = {"usage": {"prompt_tokens": 5, "completion_tokens": 1}}
    assert sf.overcount_cached(usage).value["usage"]["prompt_tokens_details"]["cached_tokens"] == 5 + sf.CACHED_EXCESS
    split = sf.SplitUsageStream().feed(json.dumps({"choices": [], **usage}))
    assert len(split) == 2 and "prompt_tokens_details" not in json.loads(split[0])["usage"]
    assert sf.calls_as_json_text({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}) is None


def test_repeats_disagree_wants_other_answers_not_only_other_tokens():
    long = [(f" w{i}", SURE) for i in range(16)]
    skipped = long[:4] + long[10:]  # a stream's logprobs skipping six accepted draft tokens, its text the same
    golden = [rec("chat", long), rec("chat-stream", long)]
    text = "".join(t for t, _ in long)
    assert signals.repeats_disagree(golden, [rec("chat", long), rec("chat-stream", skipped, content=text)]) is False
    assert signals.repeats_disagree(golden, [rec("chat", long), rec("chat-stream", skipped)]) is True  # other text too


def test_without_tokens_only_a_loss_counts_and_values_are_not_measured():
    """Measured on the shipped goldens (llama.cpp's bfcl-tools against vLLM's bfcl-required): a path that parted at a
    near-tie writes "Go for shopping" where the other wrote "go for shopping"; without logprobs that is no evidence."""
    def bare(mode, answer):
        return Observation(suite="s", sample_id="a", epoch=0, mode=mode, outcome="content", answer=answer, content="")

    full = [call("todo_add", content="go for shopping at 9 pm")]
    g = [bare("chat", full), bare("chat-stream", full)]
    case = [call("todo_add", content="Go for shopping at 9 pm")]
    assert not signals.stream_args_modes(g, [bare("chat", full), bare("chat-stream", case)])
    assert signals.stream_args_modes(g, [bare("chat", full), bare("chat-stream", [call("todo_add", content="go")])]) == {"chat-stream"}
    assert signals.tool_args_values_changed(g, [bare("chat", case), bare("chat-stream", case)]) is None
