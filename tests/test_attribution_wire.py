"""Issue 38: the bug classes whose evidence is on the wire. Each fault of wire_faults.py, put by the proxy between the
gate and the clean test server, fails the gate (exit 10) on each suite it acts on, with the component to fix named
first; the clean server still passes."""

import dataclasses
import json
import re

import pytest

from suites import bfcl, gsm8k, structured
from conftest import zero_margins
from verifier.golden.model import GoldenHeader
from verifier.attribution import compare, signals
from verifier.attribution.diagnosis import COMPONENTS, TABLE
from verifier.golden import store as golden_mod
from verifier.judge import contract
from verifier.testbed.faults import ALL_FAULTS, WIRE_FAULTS, run_stream
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, last_user_text, stream_chunks
from verifier.types import Observation, Parsed
from verifier.surfaces import registry

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path
SUITES = "gsm8k,bfcl,structured"


def oracle():
    """A plausible model on the three suites' smoke samples: gsm8k answered in a sentence (longer than the cap),
    tool calls with typed arguments (two calls where two tools are declared), schema-shaped JSON."""
    table = {}
    for s in gsm8k.SUITE.load(None, True):
        table[last_user_text({"messages": s.messages})] = Reply(
            content=f"Let me work through this one step by step, carefully. The final answer is {s.target}")
    for s in structured.SUITE.load(None, True):
        good = s.target if s.target is not None else structured.BUILTIN[s.id.split("/")[1]]["example"]
        table[last_user_text({"messages": s.messages})] = Reply(content=json.dumps(good))

    def answer(req):
        reply = table.get(last_user_text(req))
        if reply is not None:
            return reply
        tools = req.get("tools") or []
        if not tools:
            return Reply(content="I cannot help with that request, sorry.")
        names = [(t.get("function") or t)["name"] for t in tools][:2]
        return Reply(content=None, tool_calls=[{"name": n, "arguments": json.dumps({"x": i + 2, "exact": True}), "id": f"call_{i}"}
                                               for i, n in enumerate(names)])

    return answer


def server():
    return TestServer(Script(oracle(), honour_sampling=True))


@pytest.fixture(scope="module")
def goldens(tmp_path_factory):
    """One reference per suite on all six modes with logprobs, blessed, margins from the reference against itself."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("wire")
    out = {}
    with server() as srv:
        for suite in SUITES.split(","):
            assert main(["run", "--suite", suite, "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / suite),
                         "--quiet", "--mode", MODES, "--logprobs", "2", "--max-retries", "0"]) == 0
            g = tmp / "goldens" / suite
            assert main(["bless", str(tmp / suite), "--to", str(g)]) == 0
            zero_margins(g)
            out[suite] = g
    return out


def gate(cli, golden, url, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet")
    assert (out / "comparison.json").exists(), stdout + err
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


# (fault, suite) -> the component the diagnosis must name first. Every suite where the fault has something to act on:
# bfcl's answers here are tool calls only (no text to stream twice or cut, no content logprobs to rescale).
EXPECTED = {
    ("output_capped", "gsm8k"): "API validation",
    ("output_capped", "structured"): "API validation",
    ("tool_args_types_coerced", "bfcl"): "tool-call parser",
    ("stream_duplicate_event", "gsm8k"): "stream assembly",
    ("stream_duplicate_event", "structured"): "stream assembly",
    ("stream_fffd", "gsm8k"): "stream assembly",
    ("stream_fffd", "structured"): "stream assembly",  # the streamed JSON breaks too: the assembly explains it
    ("stream_first_tool_call_only", "bfcl"): "tool-call parser",
    ("logprobs_scaled", "gsm8k"): "response formatting & usage",
    ("logprobs_scaled", "structured"): "response formatting & usage",
    ("logprobs_as_probs", "gsm8k"): "response formatting & usage",
    ("logprobs_as_probs", "structured"): "response formatting & usage",
    ("logprobs_dropped", "gsm8k"): "API validation",
    ("logprobs_dropped", "structured"): "API validation",
}


@pytest.mark.parametrize("suite", SUITES.split(","))
def test_the_clean_server_passes_with_every_new_check(goldens, tmp_path, cli, suite):
    with server() as srv:
        code, doc, out = gate(cli, goldens[suite], srv.url, tmp_path / "g")
    assert code == 0 and doc["status"] == "pass", out
    names = {e["signal"] for e in doc["frontend"]["evidence"]}
    assert {"tool_args_types_changed", "stream_text_mismatch", "stream_tool_calls_dropped", "logprobs_transformed",
            "logprobs_dropped", "stop_reason_changed", "output_cut_short"} & names


@pytest.mark.parametrize("fault,suite", sorted(EXPECTED))
def test_each_wire_fault_fails_the_gate_and_names_its_component(goldens, tmp_path, cli, fault, suite):
    component = EXPECTED[(fault, suite)]
    with server() as srv, Proxy(srv.url, [fault]) as px:
        code, doc, out = gate(cli, goldens[suite], px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression" and doc["frontend"]["verdict"] == "fail", out
    first = doc["diagnosis"][0]
    assert first["component"] == component, doc["diagnosis"]
    assert first["where"] == COMPONENTS[component] and suite in first["suites"]
    if fault in ("output_capped", "tool_args_types_coerced"):  # streamed and not, on every surface
        assert set(first["modes"]) == set(MODES.split(",")), first["modes"]
    elif fault.startswith("stream_"):  # streams only, on every surface
        assert set(first["modes"]) == {m for m in MODES.split(",") if m.endswith("-stream")}, first["modes"]


def test_the_cap_is_in_the_evidence(goldens, tmp_path, cli):
    with server() as srv, Proxy(srv.url, ["output_capped"]) as px:
        code, doc, out = gate(cli, goldens["gsm8k"], px.url, tmp_path / "g")
    first = doc["diagnosis"][0]
    assert code == 10 and first["findings"][0] == "output_capped", doc["diagnosis"]
    assert re.search(r"every output cut for length ends at \d+ tokens, the run asked for \d+", first["explanation"]), first["explanation"]
    assert set(first["modes"]) == set(MODES.split(","))  # streamed and not, on every surface


def test_the_streamed_tool_parser_is_named_on_streamed_modes_only(goldens, tmp_path, cli):
    with server() as srv, Proxy(srv.url, ["stream_first_tool_call_only"]) as px:
        code, doc, out = gate(cli, goldens["bfcl"], px.url, tmp_path / "g")
    first = doc["diagnosis"][0]
    assert code == 10 and first["findings"][0] == "stream_tool_calls_dropped", doc["diagnosis"]
    assert first["modes"] and all(m.endswith("-stream") for m in first["modes"])


# ---------------------------------------------------------------------------------------------- pure units


def parsed(**kw):
    base = dict(content="x", reasoning=None, tool_calls=None, finish_reason="stop", usage={"prompt_tokens": 1, "completion_tokens": 1})
    return Parsed(**{**base, **kw})


def codes(request, p):
    return {f.code for f in contract.check(request, p, "chat")}


def test_contract_output_capped_and_logprob_range():
    assert "output_capped" in codes({"max_tokens": 256}, parsed(finish_reason="length", usage={"completion_tokens": 8}))
    assert "output_capped" not in codes({"max_tokens": 256}, parsed(finish_reason="length", usage={"completion_tokens": 256}))
    assert "output_capped" not in codes({}, parsed(finish_reason="length", usage={"completion_tokens": 8}))
    lp = [{"token": "a", "logprob": 0.4, "top_logprobs": []}, {"token": "b", "logprob": -0.1, "top_logprobs": []}]
    assert "logprob_positive" in codes({}, parsed(content="ab", logprobs=lp))
    assert "logprob_positive" not in codes({}, parsed(content="ab", logprobs=[{"token": "a", "logprob": 0.0, "top_logprobs": []}]))


def test_argument_errors_reads_types_required_and_enum():
    schema = {"type": "object", "required": ["n", "unit"], "properties": {
        "n": {"type": "integer"}, "exact": {"type": "boolean"}, "unit": {"type": "string", "enum": ["c", "f"]},
        "ratio": {"type": "float"}, "tags": {"type": "array", "items": {"type": "string"}}, "any": {"type": "any"}}}
    assert contract.argument_errors({"n": 3, "exact": True, "unit": "c", "ratio": 2, "tags": ["a"], "any": 1}, schema) == []
    errs = contract.argument_errors({"n": "3", "exact": "true", "unit": "k", "tags": [1]}, schema)
    assert len(errs) == 4 and all(any(k in e for e in errs) for k in ("n:", "exact:", "enum", "tags[0]"))
    assert contract.argument_errors({"unit": "c"}, schema) == ["arguments: required 'n' missing"]
    assert contract.argument_errors({"n": True, "unit": "c"}, schema)  # JSON true is no integer
    call = [{"id": "c", "type": "function", "function": {"name": "f", "arguments": json.dumps({"n": "3", "unit": "c"})}}]
    request = {"tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    found = codes(request, parsed(content=None, tool_calls=call, finish_reason="tool_calls"))
    assert "tool_args_schema_violation" in found and "tool_args_schema_violation" in contract.MODEL_BEHAVIOUR


def obs(mode="chat", **kw):
    return Observation(suite="s", sample_id="a", epoch=0, mode=mode, outcome="content", **kw)


def test_logprobs_transformed_tells_a_transform_from_drift():
    g = [obs(logprobs=[["a", -0.5], ["b", -1.2], ["c", -0.05], ["d", -2.0]])]
    scaled = [obs(logprobs=[[t, lp * 1.7] for t, lp in g[0].logprobs])]
    import math
    probs = [obs(logprobs=[[t, math.exp(lp)] for t, lp in g[0].logprobs])]
    drift = [obs(logprobs=[["a", -0.52], ["b", -1.1], ["c", -0.06], ["d", -2.3]])]
    other_tokens = [obs(logprobs=[["a", -0.9], ["x", -1.2], ["c", -0.05], ["d", -2.0]])]
    assert signals.logprobs_transformed(g, scaled) and signals.logprobs_transformed(g, probs)
    assert signals.logprobs_transformed(g, drift) is False and signals.logprobs_transformed(g, g) is False
    assert signals.logprobs_transformed(g, other_tokens) is None
    noise = [obs(logprobs=[[t, lp * 1.004 + 0.0001] for t, lp in g[0].logprobs])]  # batch noise: not one transform
    assert signals.logprobs_transformed(g, noise) is False


def test_stream_text_mismatch_compares_like_with_like():
    g = [obs("chat", content="abc"), obs("chat-stream", content="abc")]
    assert signals.stream_text_mismatch(g, [obs("chat", content="abc"), obs("chat-stream", content="abbc")]) is True  # short text: its whole tail
    assert signals.stream_text_mismatch(g, g) is False
    # the non-streamed text moved too (a greedy output changed with the batch): not measured
    assert signals.stream_text_mismatch(g, [obs("chat", content="abd"), obs("chat-stream", content="abbd")]) is None
    # a generation that parted from the golden's on the streamed path only (batch shape): it never meets it again
    long_g = [obs("chat", content="The answer is 12 because we add them"), obs("chat-stream", content="The answer is 12 because we add them")]
    parted = [long_g[0], obs("chat-stream", content="The answer is 12 since the two numbers sum to twelve")]
    assert signals.stream_text_mismatch(long_g, parted) is False
    repeated = [long_g[0], obs("chat-stream", content="The answer is 12 because because we add them")]
    assert signals.stream_text_mismatch(long_g, repeated) is True
    # the golden's own paths differed: not measured
    g2 = [obs("chat", content="abc"), obs("chat-stream", content="abx")]
    assert signals.stream_text_mismatch(g2, [obs("chat", content="abc"), obs("chat-stream", content="abbc")]) is None


# Measured on llama-server with 4 slots at concurrency 4 (SmolLM2, gsm8k/0, 96 tokens, both cut for length): the
# streamed generation parted from the golden's at a near-tie and met it again, the non-streamed one did not move.
GOLDEN_0 = ("Jan Janet\u2019s ducks lay 16 eggs per day, so she has 16 x 3 = 42 eggs. She eats three for breakfast every "
            "morning, so she has 42 - 3 = 38 eggs. She bakes muffins for her friends every day with four, so she has "
            "38 x 4 = 180 eggs. She sells the remainder at the farmers\u2019 market daily for $2 per fresh duck")
BATCHED_0 = ("Jan Janet\u2019s ducks lay 16 eggs per day, so she has 16 x 4 = 64 eggs. She eats three for breakfast every "
             "morning, so she has 64 - 3 = 62 eggs. She bakes muffins for her friends every day with four, so she has "
             "62 - 4 = 58 muffins. She sells the remainder at the farmers\u2019 market daily for $2 per fresh duck")


def _toks(text):
    """Word-piece tokens that spell the text (a stand-in for an engine's tokens)."""
    import re as _re
    return [[t, -0.1] for t in _re.findall(r" ?[^ ]+", text)]


def test_stream_text_mismatch_tells_a_regenerated_stream_from_an_edited_one():
    g = [obs("chat", content=GOLDEN_0), obs("chat-stream", content=GOLDEN_0)]
    # a generation that parted and met the golden's again: new words (digits), not an edit of the golden's text
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=BATCHED_0)]) is False
    # the same, with tokens: they part by substitution, the streamed generation moved; like with like fails
    gt = [obs("chat", content=GOLDEN_0, logprobs=_toks(GOLDEN_0)), obs("chat-stream", content=GOLDEN_0, logprobs=_toks(GOLDEN_0))]
    assert signals.stream_text_mismatch(gt, [gt[0], obs("chat-stream", content=BATCHED_0, logprobs=_toks(BATCHED_0))]) is None
    # a duplicated event carries its logprobs twice: the tokens are the golden's with one repeated, then realign
    dup_tokens = _toks(GOLDEN_0)
    dup_tokens.insert(2, dup_tokens[1])
    dup_text = "".join(t for t, _ in dup_tokens)
    assert signals.stream_text_mismatch(gt, [gt[0], obs("chat-stream", content=dup_text, logprobs=dup_tokens)]) is True
    # a dropped event: one token and its text gone, the rest the golden's
    drop_tokens = _toks(GOLDEN_0)
    del drop_tokens[5]
    drop_text = "".join(t for t, _ in drop_tokens)
    assert signals.stream_text_mismatch(gt, [gt[0], obs("chat-stream", content=drop_text, logprobs=drop_tokens)]) is True
    # the same tokens, other text: the stream's text was changed after generation, whatever the change looks like
    fffd = GOLDEN_0.replace("ducks", "d\ufffdcks", 1)
    assert signals.stream_text_mismatch(gt, [gt[0], obs("chat-stream", content=fffd, logprobs=_toks(GOLDEN_0))]) is True
    other = GOLDEN_0.replace("16 x 3", "16 x 7", 1)
    assert signals.stream_text_mismatch(gt, [gt[0], obs("chat-stream", content=other, logprobs=_toks(GOLDEN_0))]) is True
    # without tokens, text alone: a repeated piece, a dropped piece and a garbled character are edits
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=dup_text)]) is True
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=GOLDEN_0.replace("Janet", "Jet", 1))]) is True  # a cut word
    # a whole word missing is what a regenerated output also writes (below): text alone cannot call it an edit
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=drop_text)]) is False
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=fffd)]) is True
    mojibake = GOLDEN_0.replace("\u2019", "\u2019".encode().decode("cp1252"), 1)
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=mojibake)]) is True
    # ...and new words in place of the golden's are a regenerated text, not an edit
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=other)]) is False


def test_stream_text_mismatch_a_skipped_word_at_a_near_tie_is_a_new_generation():
    # Measured (llama-server, 4 slots, concurrency 4, gsm8k/132): the streamed output took ' used' (p=0.195) where
    # the golden's took ' they' (p=0.195), then wrote the golden's words again; the non-streamed output did not part.
    before = [["Each", -0.3], [" of", -0.657], [" tickets", -0.1446]]
    golden_tail = [[" they", -1.634], [" used", -0.0405], [" is", -0.657], [" ", -0.3315], ["1", -0.5357], ["2", -0.0407]]
    cand_tail = [[" used", -1.638], [" is", -0.815], [" ", -0.458], ["1", -0.486], ["2", -0.0379]]
    text = lambda toks: "".join(t for t, _ in toks)
    gs = obs("chat-stream", content=text(before + golden_tail), logprobs=before + golden_tail)
    g = [obs("chat", content=gs.content, logprobs=gs.logprobs), gs]
    regenerated = obs("chat-stream", content=text(before + cand_tail), logprobs=before + cand_tail)
    assert signals.stream_text_mismatch(g, [g[0], regenerated]) is None
    # the same word dropped in transit where the model was sure of it: an edit
    sure = before + [[" they", -0.01]] + golden_tail[1:]
    gs_sure = obs("chat-stream", content=text(sure), logprobs=sure)
    g_sure = [obs("chat", content=gs_sure.content, logprobs=sure), gs_sure]
    dropped = obs("chat-stream", content=text(before + golden_tail[1:]), logprobs=before + golden_tail[1:])
    assert signals.stream_text_mismatch(g_sure, [g_sure[0], dropped]) is True
    # ...unless the candidate's own non-streamed record was unsure of it there: then batch shape may have flipped it
    unsure_own = obs("chat", content=gs_sure.content, logprobs=before + [[" they", -0.9]] + golden_tail[1:])
    assert signals.stream_text_mismatch(g_sure, [unsure_own, dropped]) is None
    # a word written twice by the model has a fresh logprob; an event sent twice repeats its value exactly
    twice_by_model = before + [[" tickets", -2.2]] + golden_tail
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=text(twice_by_model), logprobs=twice_by_model)]) is None


def test_stream_text_mismatch_reads_truncated_token_lists_as_unknown():
    from verifier.golden.store import MAX_LOGPROBS
    words = [f" w{i}" for i in range(MAX_LOGPROBS + 20)]
    long_text = "".join(words)
    stored = _toks(long_text)[:MAX_LOGPROBS]  # rows keep at most MAX_LOGPROBS tokens: past them, tokens cannot tell
    g = [obs("chat", content=long_text, logprobs=stored), obs("chat-stream", content=long_text, logprobs=stored)]
    late_dup = "".join(words[:MAX_LOGPROBS + 5] + words[MAX_LOGPROBS + 4:])  # a repeated event past the stored tokens
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=late_dup, logprobs=stored)]) is True
    late_new = "".join(words[:MAX_LOGPROBS + 5] + [" seven"] + words[MAX_LOGPROBS + 6:])  # new words there: regenerated
    assert signals.stream_text_mismatch(g, [g[0], obs("chat-stream", content=late_new, logprobs=stored)]) is False


def test_tool_args_types_changed_needs_the_same_values():
    call = {"name": "f", "arguments": {"x": 2, "exact": True}}
    g = [obs(answer=[call])]
    assert signals.tool_args_types_changed(g, [obs(answer=[{"name": "f", "arguments": {"x": "2", "exact": "true"}}])]) is True
    assert signals.tool_args_types_changed(g, [obs(answer=[{"name": "f", "arguments": {"x": "3", "exact": "true"}}])]) is False
    assert signals.tool_args_types_changed(g, g) is False
    assert signals.tool_args_types_changed([obs(answer="text")], g) is None


def test_output_cut_short_reads_the_text_where_usage_is_missing():
    g = [obs(content="The final answer is 12", finish_reason="stop")]
    assert signals.output_cut_short(g, [obs(content="The final answer", finish_reason="length")]) is True
    assert signals.output_cut_short(g, g) is False
    assert signals.output_cut_short(g, [obs(content="Another answer", finish_reason="length")]) is False  # not a prefix
    assert signals.output_cut_short([obs(content="x", finish_reason="length")], g) is None


def test_stop_reason_and_logprobs_dropped():
    g = [obs(content="a b c", finish_reason="length", logprobs=[["a", -0.1]])]
    assert signals.stop_reason_changed(g, [obs(content="a b c", finish_reason="stop")]) is True
    assert signals.stop_reason_changed(g, g) is False
    assert signals.logprobs_dropped(g, [obs(content="a b c", finish_reason="length", findings=("logprobs_ignored",))]) is True
    assert signals.logprobs_dropped(g, [obs(content="a b c", finish_reason="length")]) is False  # not asked for
    assert signals.logprobs_dropped(g, g) is False


def test_a_stop_token_suffix_is_not_a_decoding_change():
    g = obs(logprobs=[["5", -0.1]], top_logprobs=[[["5", -0.1]]])
    c = obs(logprobs=[["5<|im_end|>", -0.5]], top_logprobs=[[["5", -0.1], ["5<|im_end|>", -0.5]]])
    assert signals.choice_changed(g, c) is None


def test_the_wire_faults_are_in_the_proxy_catalogue_and_the_table():
    assert set(WIRE_FAULTS) <= set(ALL_FAULTS)
    assert {f for f, _ in EXPECTED} <= set(WIRE_FAULTS)
    for code in ("output_capped", "output_cut_short", "logprob_positive", "tool_args_schema_violation", "stream_text_mismatch",
                 "stream_tool_calls_dropped", "logprobs_transformed", "logprobs_dropped", "stop_reason_changed",
                 "tool_args_types_changed"):
        assert TABLE[code][0] in COMPONENTS


def test_stream_faults_edit_what_they_say():
    reply = Reply(content="one two three", tool_calls=None)
    chunks = stream_chunks(reply, {"model": "m"})
    dup = run_stream([WIRE_FAULTS["stream_duplicate_event"].stream()], chunks)
    text = "".join((json.loads(c)["choices"] or [{}])[0].get("delta", {}).get("content") or "" for c in dup if c != "[DONE]")
    assert text == "one two two three"
    calls = Reply(content=None, tool_calls=[{"name": "f", "arguments": "{\"a\": 1}"}, {"name": "g", "arguments": "{\"b\": 2}"}])
    out = run_stream([WIRE_FAULTS["stream_first_tool_call_only"].stream()], stream_chunks(calls, {"model": "m"}))
    idx = {tc["index"] for c in out if c != "[DONE]" for ch in json.loads(c)["choices"] for tc in ch["delta"].get("tool_calls") or []}
    assert idx == {0} and any('"tool_calls"' in c and '"finish_reason": "tool_calls"' in c for c in out)


@pytest.fixture(scope="module")
def cut_golden(tmp_path_factory):
    """gsm8k answered past a small max_tokens: every reference reply is cut for length, on all six modes."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("cut")
    with server() as srv:
        assert main(["run", "--suite", "gsm8k", "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / "ref"),
                     "--quiet", "--mode", MODES, "--logprobs", "2", "--max-retries", "0", "--max-tokens", "6"]) == 0
    g = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(g)]) == 0
    gobs = golden_mod.load(g).observations
    assert {o.finish_reason for o in gobs} == {"length"}
    zero_margins(g)
    return g


@pytest.mark.parametrize("surfaces,component", [(None, "response formatting & usage"), ({"messages"}, "surface translation")])
def test_a_cut_reply_reported_as_stopped_is_named(cut_golden, tmp_path, cli, surfaces, component):
    """A gateway's translation says end_turn / stop (one token more) where the reference said length, text unchanged:
    on every surface the stop-reason mapping; on Messages only, while chat kept `length`, the surface's translation."""
    with server() as srv:
        code, doc, out = gate(cli, cut_golden, srv.url, tmp_path / "clean")
        assert code == 0, out
        with Proxy(srv.url, ["length_as_stop"], surfaces=surfaces) as px:
            code, doc, out = gate(cli, cut_golden, px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == component and any(f.startswith("stop_reason_changed") for f in first["findings"]), doc["diagnosis"]
    if surfaces:
        assert set(first["modes"]) == {"messages", "messages-stream"}


def test_diagnosis_ties_rank_sample_level_evidence_then_more_findings():
    """A reasoning leak on one sample and one probe, and another probe blaming the template: equal counts; the
    component with evidence on the workload's samples ranks first, not the alphabetically first."""
    g = [Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="content", score=1.0, metrics={"m": 1.0}, answer="1")]
    c = [Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="contract", answer="1", findings=("reasoning_in_content",))]
    probes = {"thinking_off_honoured": {"verdict": "fail", "summary": "reasoning in content", "component": "reasoning parser"},
              "thinking_on_honoured": {"verdict": "fail", "summary": "no reasoning", "component": "chat template & tokenization"}}
    doc = compare.compare(GoldenHeader.from_json({"margins": {"s/signal:new_findings": 0.0, "s/m": 0.0}}), g, c, probes=probes)
    comps = [d.component for d in doc.diagnosis]
    assert comps[:2] == ["reasoning parser", "chat template & tokenization"], comps


def test_bfcl_default_order_draws_every_category(shared_data):
    if not (shared_data / "bfcl").is_dir():
        pytest.skip("BFCL data not found")
    samples = bfcl.load(str(shared_data / "bfcl"))
    first = {s.meta["category"] for s in samples[:len(bfcl.CATEGORIES)]}
    assert first == set(bfcl.CATEGORIES)  # a --limit of 11 already holds parallel and multiple calls
    assert samples == bfcl.load(str(shared_data / "bfcl"))  # fixed: reruns select the same samples


@pytest.fixture(scope="module")
def weak_reference(tmp_path_factory):
    """A reference that fails the tool probes itself (it answers every request with text): those rows are
    `reference_fails`, which alone blames nothing."""
    from verifier.cli import main
    from verifier.testbed.server import arithmetic

    tmp = tmp_path_factory.mktemp("weak")
    with TestServer(Script(arithmetic)) as srv:
        assert main(["run", "--suite", "smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / "ref"), "--quiet",
                     "--mode", "chat,chat-stream", "--max-retries", "0", "--probes"]) == 0
    g = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(g)]) == 0
    zero_margins(g)
    return g


def test_a_probe_the_reference_fails_too_is_still_judged_by_its_exchanges(weak_reference, tmp_path, cli):
    """Tools dropped from the prompt change nothing on the smoke samples (they declare none), and the tool probes
    fail on the reference as on the candidate; their requests' prompt tokens moved against the golden's same requests."""
    from verifier.testbed.server import arithmetic

    with TestServer(Script(arithmetic)) as srv:
        code, doc, out = gate(cli, weak_reference, srv.url, tmp_path / "clean")
        assert code == 0, out
        with Proxy(srv.url, ["drop_tools"]) as px:
            code, doc, out = gate(cli, weak_reference, px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "chat template & tokenization", doc["diagnosis"]
    rows = [r for r in doc["conformance"] if r["status"] == "regression"]
    assert rows and all(r["evidence_code"] == "prompt_tokens_mismatch" for r in rows), rows
    assert any(r["reference"] == "fail" for r in rows) and all("prompt_tokens" in r["candidate_detail"] for r in rows)
    # the probes whose check passed on both sides (tool_choice_none: no call either way) moved too: weak evidence
    assert all(r.get("weak") for r in rows if r["reference"] == "pass" and r["candidate"] == "pass")


@pytest.fixture(scope="module")
def probe_golden(tmp_path_factory):
    from verifier.cli import main
    from verifier.testbed.server import arithmetic

    tmp = tmp_path_factory.mktemp("probes")
    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        assert main(["run", "--suite", "smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / "ref"), "--quiet",
                     "--mode", "chat,messages", "--max-retries", "0", "--probes"]) == 0
    g = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(g)]) == 0
    zero_margins(g)
    return g


@pytest.mark.parametrize("fault,probe", [("max_tokens_floored", "max_tokens_honoured"), ("json_schema_ignored", "response_format_honoured")])
def test_a_probe_failing_off_chat_only_names_the_layer_between(probe_golden, tmp_path, cli, fault, probe):
    """A gateway's Messages path floors max_tokens or drops response_format; chat of the same server is right."""
    from verifier.testbed.server import arithmetic

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv, Proxy(srv.url, [fault], surfaces={"messages"}) as px:
        code, doc, out = gate(cli, probe_golden, px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "surface translation" and f"probe:{probe}:surface" in first["findings"], doc["diagnosis"]
    assert first["modes"] == ["messages"] and "passes on chat" in first["explanation"]


def test_server_side_penalty_defaults_show_on_a_long_repetition(probe_golden, tmp_path, cli):
    """repetition_penalty 1.1 added where the request sets none: the neutral-defaults probe asks for a repetition long
    enough for every penalty to show, with and without explicit neutral values."""
    from verifier.execution.probes import PROBES
    from verifier.testbed.server import arithmetic

    reqs = PROBES["neutral_sampling_defaults"].requests
    asked = int(re.search(r"(\d+) times", reqs[0].body["messages"][0]["content"]).group(1))
    assert asked >= 20 and all(r.body["max_tokens"] >= 2 * asked for r in reqs)
    with TestServer(Script(arithmetic, honour_sampling=True)) as srv, Proxy(srv.url, ["generation_config_defaults"]) as px:
        code, doc, out = gate(cli, probe_golden, px.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "API validation" and "probe:neutral_sampling_defaults" in first["findings"], doc["diagnosis"]


def test_modes_whose_tool_calls_carry_no_logprobs_are_named(tmp_path, cli):
    """A server that returns logprobs for text but none for tool calls (the test server derives them from the calls'
    raw text unless a reply says otherwise), golden and candidate alike: the comparison says so per mode."""
    from verifier.cli import main

    answer = oracle()

    def no_call_logprobs(req):
        reply = answer(req)
        return dataclasses.replace(reply, logprob_entries=[]) if reply.tool_calls else reply

    with TestServer(Script(no_call_logprobs, honour_sampling=True)) as srv:
        assert main(["run", "--suite", "bfcl", "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp_path / "ref"),
                     "--quiet", "--mode", MODES, "--logprobs", "2", "--max-retries", "0"]) == 0
        g = tmp_path / "golden"
        assert main(["bless", str(tmp_path / "ref"), "--to", str(g)]) == 0
        zero_margins(g)
        code, doc, out = gate(cli, g, srv.url, tmp_path / "g")
    assert code == 0, out
    missing = doc["tool_call_logprobs_missing_modes"]
    assert {"chat", "chat-stream"} <= set(missing) and "messages" not in missing  # Messages has no logprobs at all
    assert any("no logprobs on the tool calls of" in r for r in doc["reasons"])


def test_stream_tool_calls_dropped_needs_the_same_generation():
    a, b = {"name": "f", "arguments": {"x": 1}}, {"name": "g", "arguments": {"x": 2}}
    g = [obs("chat", answer=[a, b]), obs("chat-stream", answer=[a, b])]
    assert signals.stream_tool_calls_dropped(g, [obs("chat", answer=[a, b]), obs("chat-stream", answer=[a])]) is True
    assert signals.stream_tool_calls_dropped(g, g) is False
    # the streamed path wrote another call: another generation, not a dropped one
    assert signals.stream_tool_calls_dropped(g, [obs("chat", answer=[a, b]), obs("chat-stream", answer=[b])]) is False
    # their tokens part: not measured
    lp = [obs("chat", answer=[a, b], logprobs=[["x", -0.1], ["y", -0.2]]), obs("chat-stream", answer=[a], logprobs=[["x", -0.1], ["z", -0.2]])]
    assert signals.stream_tool_calls_dropped(g, lp) is None


def _truth_calls(s):
    """A bfcl smoke sample's ground-truth calls, under the tool names the request declared."""
    rev = {v: k for k, v in s.meta["names"].items()}
    out = []
    for call in s.target or []:
        (name, args), = call.items()
        out.append({"name": rev.get(name, name), "arguments": json.dumps({k: v[0] for k, v in args.items() if v and v[0] != ""})})
    return out


def _call_tokens(calls, shift):
    """Logprobs of the generated tool-call tokens (what vLLM returns for the raw text its parser consumed)."""
    toks = re.findall(r"\w+|[^\w\s]", "".join(c["name"] + c["arguments"] for c in calls))
    return [{"token": t, "logprob": round(-0.05 * (i % 5) - shift, 6), "top_logprobs": []} for i, t in enumerate(toks)]


def _caller(changed=False, with_logprobs=True):
    table = {last_user_text({"messages": s.messages}): s for s in bfcl.SUITE.load(None, True)}

    def answer(req):
        s = table.get(last_user_text(req))
        if s is None or not s.tools or not s.target:
            return Reply(content="I cannot help with that request, sorry.")
        calls = _truth_calls(s)
        if changed and sum(map(ord, s.id)) % 3:  # other argument values on two samples in three: changed numerics
            calls = [{**c, "arguments": json.dumps({k: "other" for k in json.loads(c["arguments"])})} for c in calls]
        return Reply(content=None, tool_calls=calls,
                     # without: none at all (the test server otherwise derives them from the calls' raw text)
                     logprob_entries=_call_tokens(calls, 0.3 if changed else 0.0) if with_logprobs else [])

    return answer


@pytest.fixture(scope="module")
def calls_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("calls")
    with TestServer(Script(_caller())) as srv:
        assert main(["run", "--suite", "bfcl", "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / "ref"), "--quiet",
                     "--mode", "chat,chat-stream", "--logprobs", "2", "--max-retries", "0"]) == 0
    g = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(g)]) == 0
    zero_margins(g)
    return g


@pytest.mark.parametrize("with_logprobs,status", [(True, "quantization_regression"), (False, "regression_unattributed")])
def test_numerics_on_a_tool_call_suite_read_the_tool_call_tokens(calls_golden, tmp_path, cli, with_logprobs, status):
    """Other argument values with moved logprobs of the generated tool-call tokens: numerics, measured from those
    tokens (drift and parting); without them the same drop is not separable. The streamed mode (no tool-call logprobs
    on this server) is named."""
    with TestServer(Script(_caller(changed=True, with_logprobs=with_logprobs))) as srv:
        code, doc, out = gate(cli, calls_golden, srv.url, tmp_path / "g")
    assert doc["status"] == status, out
    assert "chat-stream" in (doc.get("tool_call_logprobs_missing_modes") or []) + (doc.get("logprobs_missing_modes") or [])


def test_a_server_default_penalty_fails_the_repeats_probe_on_every_surface(probe_golden, tmp_path, cli):
    """The test server itself applies repetition_penalty 1.1 to every request that sets no penalty (a generation-config
    default, on every surface): the probe whose output must repeat tokens, sent with and without the neutral values,
    differs, and the gate names API validation with it; the clean server passes it."""
    from verifier.execution.probes import PROBES
    from verifier.testbed.server import arithmetic

    first, neutral = PROBES["neutral_defaults_on_repeats"].requests
    assert not any(k in first.body for k in ("repetition_penalty", "presence_penalty", "frequency_penalty"))
    assert neutral.body["repetition_penalty"] == 1.0 and neutral.body["frequency_penalty"] == 0.0
    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        code, doc, out = gate(cli, probe_golden, srv.url, tmp_path / "clean")
    assert code == 0 and doc["status"] == "pass", out
    row = next(r for r in doc["conformance"] if r["key"] == "neutral_defaults_on_repeats@chat")
    assert row["status"] == "pass" and "20 repeated word(s) without the neutral values, 20 with them" in row["candidate_detail"], row
    with TestServer(Script(arithmetic, honour_sampling=True, generation_defaults={"repetition_penalty": 1.1})) as srv:
        code, doc, out = gate(cli, probe_golden, srv.url, tmp_path / "g")
    assert code == 10 and doc["status"] == "frontend_regression", out
    first_d = doc["diagnosis"][0]
    assert first_d["component"] == "API validation" and "probe:neutral_defaults_on_repeats" in first_d["findings"], doc["diagnosis"]
    row = next(r for r in doc["conformance"] if r["key"] == "neutral_defaults_on_repeats@chat")
    assert row["status"] == "regression" and "0 repeated word(s) without the neutral values, 20 with them" in row["candidate_detail"]


def test_probe_exchange_evidence_is_judged_and_ranked():
    """Every probe request against the golden's same request: a new contract finding counts with its component whatever
    the probe's own check said; a passing probe whose prompt tokens or greedy text moved is weak evidence."""
    from verifier.execution import probe_results

    def res(passed, *exchanges):
        return {"passed": passed, "detail": "d", "exchanges": list(exchanges)}

    ex = {"findings": [], "prompt_tokens": 10, "text": "1 2 3", "stream": False}
    gold = {f"{k}@chat": res(True, ex) for k in "abcd"}
    cand = {"a@chat": res(True, {**ex, "findings": ["tool_name_undeclared"]}), "b@chat": res(True, {**ex, "text": "1 2"}),
            "c@chat": res(True, ex), "d@chat": res(False, {**ex, "findings": ["tool_name_undeclared"]})}
    rows = {r["key"]: r for r in probe_results.judge(cand, gold, {k: "API validation" for k in "abcd"})}
    assert rows["a@chat"]["status"] == "regression" and rows["a@chat"]["evidence_code"] == "tool_name_undeclared"
    assert not rows["a@chat"].get("weak")
    assert rows["b@chat"]["status"] == "regression" and rows["b@chat"]["weak"] and "evidence_code" not in rows["b@chat"]
    assert rows["c@chat"]["status"] == "pass"
    assert rows["d@chat"]["exchange_finding"] == "tool_name_undeclared" and "evidence_code" not in rows["d@chat"]
    ev = probe_results.evidence(list(rows.values()))
    assert ev["b@chat"]["verdict"] == "fail" and ev["b@chat"]["qualifier"] == "exchange_text"
    # a streamed request's other prompt-token count, where no non-streamed request moved: the stream's usage report
    sg = {"s@messages": res(True, {**ex, "stream": True}), "n@chat": res(True, ex)}
    sc = {"s@messages": res(True, {**ex, "stream": True, "prompt_tokens": 17}), "n@chat": res(True, ex)}
    srow = next(r for r in probe_results.judge(sc, sg) if r["key"] == "s@messages")
    assert srow["evidence_code"] == "prompt_tokens_mismatch:stream" and srow["weak"]
    sc["n@chat"] = res(True, {**ex, "prompt_tokens": 12})
    srow = next(r for r in probe_results.judge(sc, sg) if r["key"] == "s@messages")
    assert srow["evidence_code"] == "prompt_tokens_mismatch"


def test_a_probe_both_sides_fail_alike_with_only_its_text_moved_is_read_with_the_numerics():
    """Measured on llama-server (tests/test_e2e_engine_kv_recipe.py): `tool_choice_required` fails on the reference
    (not enforced) and on a KV-q4_0 server alike, only the refusal's greedy text moved. That is what the model wrote:
    inconclusive where the numerics moved (it made the recipe's gate exit 12 with API validation named), a fail where
    they did not; a moved prompt-token count on such a probe stays frontend evidence."""
    from verifier.execution import probe_results

    def res(passed, **ex):
        return {"passed": passed, "detail": "no tool call", "exchanges": [{"findings": [], "prompt_tokens": 10, "text": "Hello", "stream": False, **ex}]}

    gold = {"t@chat": res(False), "f@chat": res(False)}
    cand = {"t@chat": res(False, text='{"name": "hello"}'), "f@chat": res(False, prompt_tokens=12)}
    rows = {r["key"]: r for r in probe_results.judge(cand, gold, {"t": "API validation", "f": "API validation"})}
    assert rows["t@chat"]["status"] == "regression" and rows["t@chat"]["text_only"] and not rows["t@chat"].get("weak")
    assert rows["f@chat"]["status"] == "regression" and not rows["f@chat"].get("text_only")
    ev = probe_results.evidence(list(rows.values()))
    assert ev["t@chat"]["qualifier"] == "exchange_text" and "qualifier" not in ev["f@chat"]
    assert "FAILED" in ev["t@chat"]["summary"] and "reference also fails" in ev["t@chat"]["summary"]
    judged = {e.signal: e.verdict for e in compare._probe_evidence(ev, numerics_moved=True)}
    assert judged == {"probe:t": "inconclusive", "probe:f": "fail"}
    assert {e.signal: e.verdict for e in compare._probe_evidence(ev, numerics_moved=False)} == {"probe:t": "fail", "probe:f": "fail"}


def test_a_probes_moved_text_passes_where_teacher_forcing_cleared_the_decodes_moving():
    """The batching-noise bench (4 slots at concurrency 4 against a 1-slot golden), measured: the greedy decode moved
    on gsm8k (drift and parting) while the teacher-forced distance passed, and `state_repeat_after_shared_prefix`'s
    check passed with only its greedy text moved (a near tie flipped): it held the frontend inconclusive (exit 20).
    The same near-tie flips the suites' parting was cleared of: pass, qualified `outweighed`. A probe whose check reads
    what the model wrote and failed stays inconclusive; a moved prompt-token count stays frontend evidence."""
    ev = {"t@chat": {"signal": "probe:t", "surface": "chat", "component": "engine state", "verdict": "fail",
                     "summary": "t on chat: its check passed, but the exchange moved", "qualifier": "exchange_text"},
          "o@chat": {"signal": "probe:o", "surface": "chat", "component": "API validation", "verdict": "fail",
                     "summary": "o on chat: FAILED", "qualifier": "model_output"},
          "f@chat": {"signal": "probe:f", "surface": "chat", "component": "API validation", "verdict": "fail",
                     "summary": "f on chat: its check passed, but the exchange moved"}}
    judged = {e.signal: (e.verdict, e.qualifier) for e in compare._probe_evidence(ev, numerics_moved=True, decode_noise=True)}
    assert judged == {"probe:t": ("pass", "outweighed"), "probe:o": ("inconclusive", "model_output"), "probe:f": ("fail", None)}
    held = {e.signal: e.verdict for e in compare._probe_evidence(ev, numerics_moved=True, decode_noise=False)}
    assert held == {"probe:t": "inconclusive", "probe:o": "inconclusive", "probe:f": "fail"}


def test_a_passing_probes_moved_text_ranks_below_sample_level_evidence():
    g = [Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="content", score=1.0, metrics={"m": 1.0}, answer="1")]
    c = [Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="contract", answer="1", findings=("reasoning_in_content",))]
    table = [{"key": f"p{i}@{s}", "probe": f"p{i}", "surface": s, "component": "API validation", "reference": "pass",
              "candidate": "pass", "status": "regression", "candidate_detail": "text moved", "reference_detail": "", "weak": True}
             for i in range(3) for s in ("chat", "responses", "messages")]
    probes = {r["key"]: {"signal": f"probe:{r['probe']}", "surface": r["surface"], "component": r["component"], "verdict": "fail",
                         "summary": "text moved", "qualifier": "exchange_text"} for r in table}
    doc = compare.compare(GoldenHeader.from_json({"margins": {"s/signal:new_findings": 0.0, "s/m": 0.0}}), g, c, probes=probes, probe_table=table)
    comps = [d.component for d in doc.diagnosis]
    assert comps == ["reasoning parser", "API validation"], comps  # 3 surfaces each, still below one sample's finding


CLEAN_SUITES = ["smoke", "gsm8k", "bfcl", "structured", "vision"]


def clean_reference():
    """The clean test server on every suite: the oracle's answers, the arithmetic responder's (sums, probe prompts,
    BFCL ground truth) for the rest."""
    from verifier.testbed.server import arithmetic

    known = oracle()

    def answer(req):
        reply = known(req)
        if reply.content == "I cannot help with that request, sorry.":
            return arithmetic(req)
        return reply

    return Script(answer, honour_sampling=True)


@pytest.mark.parametrize("suite", CLEAN_SUITES)
def test_no_new_false_alarm_on_the_clean_server(tmp_path, cli, suite):
    """A golden of the clean test server, gated against the same clean server: every suite (its smoke set) on every
    mode, with the probes on every surface, passes; no probe row regresses (no exchange evidence from a healthy
    server)."""
    from verifier.cli import main

    args = ["--suite", suite] + ([] if suite == "smoke" else ["--smoke"])
    with TestServer(clean_reference()) as srv:
        assert main(["run", *args, "--base-url", srv.url, "--model", "m", "--out", str(tmp_path / "ref"), "--quiet",
                     "--mode", MODES, "--logprobs", "2", "--max-retries", "0", "--probes"]) == 0
        g = tmp_path / "golden"
        assert main(["bless", str(tmp_path / "ref"), "--to", str(g)]) == 0
        zero_margins(g)
        code, doc, out = gate(cli, g, srv.url, tmp_path / "gate")
    assert code == 0 and doc["status"] == "pass", out
    rows = doc["conformance"]
    assert rows and {r["surface"] for r in rows} == set(registry.SURFACE_NAMES)
    assert not [r for r in rows if r["status"] in ("regression", "not_run", "infra")], rows
    assert not doc["diagnosis"]


def test_a_passing_probes_moved_text_is_inconclusive_where_the_numerics_moved():
    """Greedy outputs of the workload part from the golden's (other tokens, same answers): a probe's moved greedy text
    is no frontend evidence then; a moved prompt-token count still is."""
    def o(i, tokens):
        return Observation(suite="s", sample_id=f"x{i}", epoch=0, mode="chat", outcome="content", score=1.0,
                           metrics={"m": 1.0}, answer="1", content="".join(tokens), logprobs=[[t, -0.1] for t in tokens])

    g = [o(i, ["The", " answer", " is", " 1"]) for i in range(20)]
    c = [o(i, ["So", " it", " is", " 1"]) for i in range(20)]

    def probes(qualifier):
        return {"p@chat": {"signal": "probe:p", "surface": "chat", "component": "API validation", "verdict": "fail",
                           "summary": "moved", "qualifier": qualifier}}

    table = [{"key": "p@chat", "probe": "p", "surface": "chat", "component": "API validation", "reference": "pass",
              "candidate": "pass", "status": "regression", "candidate_detail": "moved", "reference_detail": "", "weak": True}]
    margins = GoldenHeader.from_json({"margins": {"s/m": 0.0, "s/divergence": 0.0}})
    doc = compare.compare(margins, g, c, probes=probes("exchange_text"), probe_table=table)
    assert doc.suites["s"].divergence is not None and doc.suites["s"].divergence.verdict == "fail"
    ev = next(e for e in doc.frontend.evidence if e.signal == "probe:p")
    assert ev.verdict == "inconclusive" and not any(d.component == "API validation" for d in doc.diagnosis)
    doc = compare.compare(margins, g, c, probes=probes("exchange_fingerprint"), probe_table=table)
    assert next(e for e in doc.frontend.evidence if e.signal == "probe:p").verdict == "fail"
