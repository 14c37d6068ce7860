"""A chat stream that ends without `data: [DONE]` after its finish chunk (HF `transformers serve`): a frontend
finding with its component (stream assembly), never infra, never retried; a stream cut before its finish chunk
stays `stream_truncated` infra. Through the fault proxy's `stream_done_dropped` on the test server."""

import json
import shutil

from conftest import zero_margins
from verifier.golden import store

from verifier.execution import journal
from verifier.surfaces.chat import SURFACE as CHAT
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic, stream_chunks
from verifier.testbed.wire_faults import DoneDropped
from verifier.testbed.mutation import run_stream
from verifier.wire import bodyread

GOLDEN = "demo-smoke"


def test_the_end_rule_reads_the_finish_chunk():
    chunks = stream_chunks(Reply(content="one two"), {"model": "m", "stream_options": {"include_usage": True}})
    assert chunks[-1] == "[DONE]" and CHAT.stream_complete(chunks)
    dropped = run_stream([DoneDropped()], chunks)
    assert dropped == chunks[:-1] and CHAT.stream_complete(dropped)  # whole: finish and usage arrived
    finish = next(i for i, c in enumerate(chunks) if '"finish_reason": "stop"' in c)
    assert not CHAT.stream_complete(chunks[:finish])  # cut before its finish chunk: truncated
    assert not CHAT.stream_complete([*chunks[:-1], '{"choices": [{"delta": {"cont'])  # ends inside a payload
    body = "".join(f"data: {c}\n\n" for c in dropped)
    assert bodyread.sse_text(body, []) is None
    assert bodyread.sse_text("".join(f"data: {c}\n\n" for c in chunks[:finish]), []) == "stream_truncated"


def test_a_chat_stream_without_done_is_a_stream_assembly_finding_not_infra(tmp_path, cli):
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["stream_done_dropped"]) as px:
        code, out, err = cli("gate", "--golden", GOLDEN, "--base-url", px.url, "--model", "m", "--out", tmp_path / "g",
                             "--quiet", "--max-retries", "3")
    assert code == 10, (out, err)
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert doc["status"] == "frontend_regression" and doc["infra"]["count"] == 0, doc["infra"]
    first = doc["diagnosis"][0]
    assert first["component"] == "stream assembly" and "stream_done_missing" in first["findings"], doc["diagnosis"]
    assert first["modes"] == ["chat-stream"], first["modes"]
    records = list(journal.read_jsonl(tmp_path / "g" / "responses.jsonl"))
    streamed = [r for r in records if r["mode"] == "chat-stream"]
    assert streamed and all(r["error"] is None and r["attempts"] == 1 and r["chunks"][-1] != "[DONE]" for r in streamed)
    verdicts = [v for v in journal.read_jsonl(tmp_path / "g" / "verdicts.jsonl") if v["mode"] == "chat-stream"]
    assert all(v["outcome"] == "content" and v["score"] == 1.0 for v in verdicts), verdicts  # scored on what it says


def test_dropped_logprobs_remove_only_the_drift_and_quality_is_still_compared(tmp_path, cli):
    """A gateway that drops `logprobs` (and, with it, a stream end without [DONE]): each is a frontend finding with
    its component, nothing is infra, and the quality metric is still judged on every clean sample (a missing
    logprob removes the drift, not the sample)."""
    golden = tmp_path / "golden"
    shutil.copytree(store.resolve(GOLDEN), golden)
    zero_margins(golden)  # the shipped golden predates logprobs_dropped's margin: calibrated here (test server: no spread)
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["logprobs_dropped", "stream_done_dropped"]) as px:
        code, out, err = cli("gate", "--golden", golden, "--base-url", px.url, "--model", "m", "--out", tmp_path / "g",
                             "--quiet")
    assert code == 10, (out, err)
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert doc["infra"]["count"] == 0 and doc["status"] == "frontend_regression"
    components = {d["component"] for d in doc["diagnosis"]}
    assert {"stream assembly", "API validation"} <= components, doc["diagnosis"]
    smoke = doc["suites"]["smoke"]
    assert smoke["metrics"]["accuracy"]["n"] == 20 and smoke["metrics"]["accuracy"]["verdict"] == "pass", smoke["metrics"]
    assert smoke["drift"]["state"] == "unavailable" and smoke["drift"]["logprobs"]["candidate"] == 0
    assert not any("clean envelope" in r for r in doc["reasons"]), doc["reasons"]
    assert doc["quantization"]["verdict"] != "fail"


def test_a_server_that_drops_done_ignores_tool_choice_and_returns_no_logprobs_is_named_frontend_on_each(tmp_path, cli):
    """Issue 50's acceptance line, the HF `transformers serve` wire on the test bed: chat streams end without [DONE],
    tool_choice "required" is ignored (the model then writes its calls as bare JSON text) and logprobs are dropped. The
    gate names each as a frontend difference with its component: nothing is infra, and the missing logprobs do not
    leave it inconclusive (quality is still compared on every sample)."""
    from verifier.testbed.tool_answers import DEFAULT as TOOL_ANSWERS

    def grammar_forced(req):
        """An engine whose calls are parsed only when tool_choice forces them (vLLM's grammar); else bare JSON."""
        fields = TOOL_ANSWERS.reply_fields(req)
        if fields is None or not fields.get("tool_calls") or req.get("tool_choice") == "required":
            return arithmetic(req)
        return Reply(content=" ".join(json.dumps({"name": c["name"], "arguments": json.loads(c["arguments"])})
                                      for c in fields["tool_calls"]))

    golden = tmp_path / "golden"
    with TestServer(Script(grammar_forced)) as srv:
        assert cli("run", "--suite", "smoke,bfcl", "--smoke", "--mode", "chat,chat-stream", "--logprobs", "2",
                   "--extra-body", '{"tool_choice": "required"}', "--base-url", srv.url, "--model", "m",
                   "--out", tmp_path / "ref", "--quiet", "--max-retries", "0")[0] == 0
        assert cli("bless", tmp_path / "ref", "--to", golden)[0] == 0
        zero_margins(golden)
        faults = ["stream_done_dropped", "tool_choice_required_ignored", "logprobs_dropped"]
        with Proxy(srv.url, faults) as px:
            code, out, err = cli("gate", "--golden", golden, "--base-url", px.url, "--model", "m", "--out", tmp_path / "g",
                                 "--quiet")
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert code == 10 and doc["status"] == "frontend_regression", (out, err)
    assert doc["infra"]["count"] == 0 and doc["infra"]["total"] == 84, doc["infra"]
    records = list(journal.read_jsonl(tmp_path / "g" / "responses.jsonl"))
    assert all(r["error"] is None and r["attempts"] == 1 for r in records)  # no stream retried as a cut one
    named = {d["component"]: d for d in doc["diagnosis"]}
    assert named["stream assembly"]["counts"] == {"stream_done_missing": 42} and named["stream assembly"]["modes"] == ["chat-stream"]
    assert named["API validation"]["counts"]["logprobs_dropped"] == 42  # every record, both suites, both modes
    assert named["API validation"]["counts"]["tool_choice_unmet"] == 18  # each call the golden made, as text
    assert named["tool-call parser"]["counts"] == {"tool_calls_as_text": 18}
    # Missing logprobs remove the drift only: quality is judged on every clean sample, and nothing is held
    # inconclusive for want of logprobs (bfcl's calls were all lost: their envelopes are the frontend's finding).
    smoke = doc["suites"]["smoke"]["metrics"]["accuracy"]
    assert (smoke["n"], smoke["verdict"]) == (20, "pass"), smoke
    held = [e["summary"] for e in doc["quantization"]["evidence"] if e["verdict"] == "inconclusive"]
    assert not any("logprob" in summary for summary in held), held
    assert doc["quantization"]["verdict"] != "fail"
