"""Every proxy fault's comparison names the frontend component to fix, and the Markdown and JUnit lead with it."""

import json
import re
import xml.etree.ElementTree as ET

import pytest

import suites.structured as st
from conftest import zero_margins
from verifier.attribution.diagnosis import COMPONENTS, TABLE
from verifier.testbed.faults import FAULTS
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic, last_user_text

# fault -> (golden, the component its comparison must name first)
EXPECTED = {
    "tool_markup_in_content": ("tools", "tool-call parser"),
    "tool_args_invalid_json": ("tools", "tool-call parser"),
    "tool_args_double_encoded": ("tools", "tool-call parser"),
    "tool_args_truncated": ("tools", "tool-call parser"),
    "tool_call_ids_rewritten": ("tools", "tool-call parser"),
    "stream_index_zero": ("tools", "stream assembly"),
    "drop_tools": ("tools", "chat template & tokenization"),
    "drop_system_prompt": ("tools", "chat template & tokenization"),
    "finish_reason_wrong": ("text", "response formatting & usage"),
    "finish_reason_missing": ("text", "response formatting & usage"),
    "usage_dropped": ("text", "response formatting & usage"),
    "reasoning_in_content": ("text", "reasoning parser"),
    "answer_in_reasoning": ("text", "reasoning parser"),
    "stream_duplicate_chars": ("text", "stream assembly"),
    "stream_garble": ("text", "stream assembly"),
    "stream_ignored": ("text", "stream assembly"),
    "drop_response_format": ("structured", "structured-output backend"),
    "drop_sampling_params": ("probes", "API validation"),
    "prompt_front_truncated": ("context", "context handling"),
    # one per feature-contract probe (tests/test_probes_catalogue.py breaks each on each surface)
    "sampling_params_clamped": ("probes", "API validation"),
    "max_tokens_floored": ("probes", "API validation"),
    "max_completion_tokens_ignored": ("probes", "API validation"),
    "temperature_zero_ignored": ("probes", "API validation"),
    "generation_config_defaults": ("probes", "API validation"),
    "stop_ignored": ("probes", "API validation"),
    "n_ignored": ("probes", "API validation"),
    "seed_ignored": ("probes", "API validation"),
    "logit_bias_ignored": ("probes", "API validation"),
    "tool_choice_none_ignored": ("probes", "API validation"),
    "tool_choice_required_ignored": ("probes", "API validation"),
    "tool_choice_named_ignored": ("probes", "API validation"),
    "parallel_tool_calls_ignored": ("probes", "API validation"),
    # the parser leaks `functions.<name>`, a name the request never declared: contract finding tool_name_undeclared on
    # every probe request that makes a call (tool_choice_required, _named, parallel_tool_calls_false, the round trip),
    # whose own checks mostly pass. (It was "API validation" when only tool_choice_named and no_undeclared_tool were
    # read: a tie of one probe each, broken by name.)
    "tool_names_prefixed": ("probes", "tool-call parser"),
    "json_schema_ignored": ("probes", "structured-output backend"),
    "json_object_ignored": ("probes", "structured-output backend"),
    "json_keys_sorted": ("probes", "structured-output backend"),
    "usage_every_chunk": ("probes", "response formatting & usage"),
    "reasoning_content_same_delta": ("probes", "reasoning parser"),
    "stream_coalesced": ("probes", "stream assembly"),
    # thinking_on_honoured fails, and turn 2 of thinking_kept_across_turns replays no reasoning: a tie, by name
    "thinking_kwargs_dropped": ("probes", "chat template & tokenization"),
    "reasoning_effort_ignored": ("probes", "reasoning parser"),
    "reasoning_history_dropped": ("probes", "chat template & tokenization"),
    "prompt_tokens_skewed": ("probes", "chat template & tokenization"),
    "tool_results_dropped": ("probes", "surface translation"),
    "system_blocks_dropped": ("surfaces", "surface translation"),
    "count_tokens_skewed": ("surfaces", "surface translation"),
    "previous_response_ignored": ("surfaces", "surface translation"),
    "store_false_ignored": ("surfaces", "surface translation"),
    # the stream's last event carried status and usage: their loss ties with the missing terminal event, by name
    "terminal_event_as_done": ("surfaces", "response formatting & usage"),
}
BASE = ["--model", "m", "--quiet", "--mode", "chat,chat-stream", "--max-retries", "0"]


def thinking(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
    return Reply(content=str(int(m.group(1)) + int(m.group(2))), reasoning_content="Adding the two numbers.")


def tool_caller(req):
    if not req.get("tools"):
        return Reply(content="It is sunny.")
    name = req["tools"][0]["function"]["name"]
    return Reply(content=None, tool_calls=[{"name": name, "arguments": json.dumps({"city": c}), "id": f"call_{i}"}
                                           for i, c in enumerate(("Paris", "Lyon"))])


def structured(req):
    """Valid JSON under response_format; without it, prose around broken JSON (a grammar that did not run)."""
    by_msgs = {json.dumps(s.messages, sort_keys=True): s for s in st.load(None, smoke=True)}
    s = by_msgs[json.dumps(req["messages"], sort_keys=True)]
    if not req.get("response_format"):
        return Reply(content="Sure! Here it is: {\"oops\": ")
    return Reply(content=json.dumps(s.target if s.target is not None else st.BUILTIN[s.id.split("/")[1]]["example"]))


def recaller(req):
    """The smoke suite's sums, and the context probe's code word from the prompt it was given."""
    m = re.search(r"secret code word is (\w+)", last_user_text(req))
    return Reply(content=m.group(1)) if m else arithmetic(req)


GOLDENS = {
    "text": (lambda: Script(thinking), ["--suite", "smoke", "--logprobs", "1"]),
    "tools": (lambda: Script(tool_caller), ["--suite", "replay", "--smoke"]),
    "structured": (lambda: Script(structured), ["--suite", "structured", "--smoke"]),
    "probes": (lambda: Script(arithmetic, honour_sampling=True), ["--suite", "smoke", "--probes"]),
    "context": (lambda: Script(recaller), ["--suite", "smoke", "--context-probe"]),
    "surfaces": (lambda: Script(arithmetic, honour_sampling=True),
                 ["--suite", "smoke", "--limit", "2", "--probes", "--mode", "responses,responses-stream,messages,messages-stream"]),
}


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    """One reference run per kind, blessed, with zero margins (a reference compared with itself)."""
    from verifier.cli import main

    root = tmp_path_factory.mktemp("diag")
    out = {}
    for kind, (script, args) in GOLDENS.items():
        with TestServer(script()) as srv:
            assert main(["run", *BASE, *args, "--base-url", srv.url, "--out", str(root / kind)]) == 0
        g = root / "goldens" / kind
        assert main(["bless", str(root / kind), "--to", str(g)]) == 0
        zero_margins(g)
        out[kind] = g
    return out


def test_every_fault_has_an_expected_component_in_the_table():
    assert set(EXPECTED) == set(FAULTS)
    assert {comp for _, comp in EXPECTED.values()} <= set(COMPONENTS)
    assert {comp for comp, _ in TABLE.values()} <= set(COMPONENTS)


@pytest.mark.parametrize("fault", sorted(EXPECTED))
def test_each_fault_names_its_component(fault, goldens, tmp_path, cli):
    kind, component = EXPECTED[fault]
    script, args = GOLDENS[kind]
    extra = ["--probes"] if kind in ("probes", "surfaces") else []
    with TestServer(script()) as srv, Proxy(srv.url, [fault]) as px:
        code, out, err = cli("gate", "--golden", goldens[kind], "--base-url", px.url, "--model", "m",
                             "--out", tmp_path / "c", "--quiet", *extra)
    doc = json.loads((tmp_path / "c" / "comparison.json").read_text())
    assert code == 10 and doc["diagnosis"], out + err
    first = doc["diagnosis"][0]
    assert first["component"] == component, doc["diagnosis"]
    assert first["explanation"] and first["where"] == COMPONENTS[component] and first["findings"]
    if kind not in ("probes", "context", "surfaces"):  # run-wide probes name no sample
        assert first["examples"] and first["suites"] and first["modes"]
    # the console, summary.md and the JUnit failure message lead with it
    assert out.splitlines()[1].startswith(f"  diagnosis: {component}:"), out
    md = [line for line in (tmp_path / "c" / "summary.md").read_text().splitlines() if line.strip()]
    assert md[1].startswith(f"- **{component.replace('&', '&amp;')}**: "), md[:3]
    case = next(ET.parse(tmp_path / "c" / "junit.xml").getroot().iter("testcase"))
    assert case.get("name") == "diagnosis" and case.find("failure").get("message").startswith(f"diagnosis: {component}:")
    html = (tmp_path / "c" / "report.html").read_text()
    assert html.index('id="diagnosis-1"') < html.index('id="metrics"') and component.replace("&", "&amp;") in html
