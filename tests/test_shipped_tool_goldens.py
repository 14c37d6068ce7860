"""The shipped goldens documented for tool-call parsing hold real parsed tool calls on every mode they recorded.

A tool-call fault can only fail a gate where the golden's records carry calls the server's parser produced: a golden of
calls written as text (`tool_call_as_text`) or of refusals gives the tool-call signals nothing to compare. One per
engine (docs/reference/suites.md): the test server, llama.cpp (behind the tool-call prefill), vLLM (tool_choice "required").
"""

from __future__ import annotations

from collections import Counter

import pytest

from verifier.golden import store

TOOL_GOLDENS = {  # name -> the modes it must hold calls on
    "demo-bfcl": ("chat", "chat-stream"),
    "qwen0.5b-bfcl-tools": ("chat", "chat-stream"),
    "qwen0.5b-vllm-bfcl-required": ("chat", "chat-stream"),
}


@pytest.mark.parametrize("name", sorted(TOOL_GOLDENS))
def test_a_tool_call_golden_holds_parsed_calls_on_every_mode(name):
    g = store.load(store.resolve(name))
    assert tuple(g.header.modes) == TOOL_GOLDENS[name]
    called = Counter(o.mode for o in g.observations
                     if o.outcome == "content" and o.finish_reason == "tool_calls" and o.tool_triggered and o.answer)
    by_mode = Counter(o.mode for o in g.observations)
    for mode in TOOL_GOLDENS[name]:
        # Most records of each mode: bfcl's irrelevance items may rightly answer in text where the model is free to.
        assert called[mode] >= by_mode[mode] * 3 // 4 and called[mode] >= 10, (mode, called, by_mode)
    # Calibrated on reruns (bless + calibrate), so a rerun of the reference is judged against a measured noise floor.
    assert any(m.get("method") == "reruns" for m in g.header.to_json().get("margins", {}).values())


def test_the_text_only_llama_golden_is_not_one_of_them():
    """qwen0.5b-bfcl (llama.cpp without the prefill) is the engine as it is: calls written as JSON text, streams refused."""
    g = store.load(store.resolve("qwen0.5b-bfcl"))
    assert not any(o.finish_reason == "tool_calls" for o in g.observations)
    assert {o.outcome for o in g.observations if o.mode == "chat-stream"} == {"unsupported"}
