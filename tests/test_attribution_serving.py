"""Issue 47: the serving bugs filed in 2026. Each fault of serving_faults.py, put by the proxy between the gate and the
clean test server, fails the gate (exit 10) on each suite it acts on, with the component to fix named first; the clean
server still passes with every new check measured."""

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


def server():
    return TestServer(Script(oracle(), honour_sampling=True))


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
    ("response_format_dropped_with_reasoning", "structured"): ("structured-output backend", None),
}


def test_every_serving_fault_has_a_gate_test():
    assert {f for f, _ in EXPECTED} == set(SERVING_FAULTS) and set(SERVING_FAULTS) <= set(ALL_FAULTS)


@pytest.mark.parametrize("name", sorted(GOLDENS))
def test_the_clean_server_passes_with_every_new_check(goldens, tmp_path, cli, name):
    with server() as srv:
        code, doc, out = gate(cli, goldens[name], srv.url, tmp_path / "g")
    assert code == 0 and doc["status"] == "pass", out
    names = {e["signal"] for e in doc["frontend"]["evidence"]}
    assert {"repeats_disagree", "tool_args_values_changed", "stream_tool_args_changed", "tool_calls_as_text"} & names, names


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
