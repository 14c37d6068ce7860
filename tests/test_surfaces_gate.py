"""Every surface end to end: run, score, bless, calibrate and gate on chat, Responses and Messages, with
the proxy breaking one surface at a time (the frontend verdict fails and its evidence names that surface)."""

import json

import pytest

from suites import bfcl, gsm8k, structured
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.surfaces import registry

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path
SUITES = "bfcl,gsm8k,structured"


def oracle():
    """Answers each smoke sample of the three suites plausibly: tool calls (two when two tools are declared,
    so streams carry parallel calls), the gsm8k target, a schema-shaped JSON object."""
    table = {}
    for s in gsm8k.SUITE.load(None, True):
        table[last_user_text({"messages": s.messages})] = Reply(content=f"Let me think. The final answer is {s.target}",
                                                                reasoning_content="adding up")
    for s in structured.SUITE.load(None, True):
        good = s.target if s.target is not None else structured.BUILTIN[s.id.split("/")[1]]["example"]
        table[last_user_text({"messages": s.messages})] = Reply(content=json.dumps(good))

    def answer(req):
        reply = table.get(last_user_text(req))
        if reply is not None:
            return reply
        tools = req.get("tools") or []
        if not tools:
            return Reply(content="I cannot help with that.")
        names = [t["function"]["name"] for t in tools][:2]
        return Reply(content=None, tool_calls=[{"name": n, "arguments": json.dumps({"x": i}), "id": f"functions.{n}:{i}"}
                                               for i, n in enumerate(names)])

    return answer


def run(cli, url, out, modes=MODES, suites=SUITES):
    code, _, err = cli("run", "--suite", suites, "--smoke", "--base-url", url, "--model", "m", "--out", out, "--quiet",
                       "--mode", modes, "--max-retries", "0")
    assert code == 0, err


@pytest.fixture(scope="module")
def surface_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("surfaces")
    with TestServer(Script(oracle())) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", "--suite", SUITES, "--smoke", "--base-url", srv.url, "--model", "m", "--out", str(tmp / name),
                         "--quiet", "--mode", MODES, "--max-retries", "0"]) == 0
    golden = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return tmp


def test_every_mode_is_journaled_scored_and_reported(surface_golden, tmp_path, cli):
    ref = surface_golden / "ref"
    code, _, err = cli("report", ref, "-o", tmp_path / "r.html")
    html = (tmp_path / "r.html").read_text()
    assert code == 0 and all(m in html for m in MODES.split(",")), err
    lines = [json.loads(x) for x in (ref / "responses.jsonl").read_text().splitlines()]
    by_mode = {}
    for ex in lines:
        by_mode.setdefault(ex["mode"], []).append(ex)
    assert set(by_mode) == set(MODES.split(","))
    for ex in by_mode["responses-stream"][:3]:
        assert ex["chunks"] and json.loads(ex["chunks"][-1])["type"] == "response.completed" and "input" in ex["request"]
    for ex in by_mode["messages-stream"][:3]:
        assert json.loads(ex["chunks"][-1])["type"] == "message_stop" and ex["request"]["max_tokens"]
    summary = json.loads((ref / "summary.json").read_text())["suites"]
    verdicts = [json.loads(x) for x in (ref / "verdicts.jsonl").read_text().splitlines()]
    assert {v["mode"] for v in verdicts} == set(MODES.split(","))
    # Same answers on every surface: each sample scores the same whatever the mode, and no surface adds findings.
    scores = {}
    for v in verdicts:
        scores.setdefault((v["suite"], v["sample_id"]), set()).add((v["score"], v["outcome"], tuple(sorted(f["code"] for f in v["findings"]))))
    assert all(len(s) == 1 for s in scores.values()), [k for k, s in scores.items() if len(s) > 1][:3]
    assert summary["gsm8k"]["metrics"]["strict_match"]["value"] == 1.0
    # The Messages usage was normalized: a repeated prompt is reported as cache reads, the prompt count is unchanged.
    pts = {}
    for v in verdicts:
        pts.setdefault((v["suite"], v["sample_id"]), set()).add(v["signals"]["prompt_tokens"])
    assert all(len(p) == 1 for p in pts.values())


def test_a_golden_on_every_surface_passes_against_the_same_server(surface_golden, tmp_path, cli):
    with TestServer(Script(oracle())) as srv:
        code, out, err = cli("gate", "--golden", surface_golden / "golden", "--base-url", srv.url, "--model", "m",
                             "--out", tmp_path / "g", "--quiet")
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert code == 0 and doc["status"] == "pass", out + err
    parity = [e for e in doc["frontend"]["evidence"] if e["signal"] == "surface_parity_mismatch"]
    assert parity and all(e["verdict"] == "pass" and e["summary"].startswith("surface_parity_mismatch: 0/") for e in parity)


FAULTS_ON_ONE_SURFACE = [
    ("tool_markup_in_content", "responses", "bfcl"),
    ("tool_args_invalid_json", "messages", "bfcl"),
    ("answer_in_reasoning", "messages", "gsm8k"),
    ("finish_reason_wrong", "messages", "bfcl"),
    ("usage_dropped", "responses", "gsm8k"),
    ("stream_index_zero", "responses", "bfcl"),
    ("tool_call_ids_rewritten", "messages", "bfcl"),
    ("drop_system_prompt", "responses", "bfcl"),
    ("stream_duplicate_chars", "responses", "gsm8k"),  # streams only: surface parity names responses-stream
    ("stream_ignored", "messages", "gsm8k"),  # a JSON body for `stream: true`: only messages-stream changes
]


@pytest.mark.parametrize("fault,surface,suite", FAULTS_ON_ONE_SURFACE)
def test_a_fault_on_one_surface_fails_the_frontend_and_names_it(surface_golden, tmp_path, cli, fault, surface, suite):
    with TestServer(Script(oracle())) as srv, Proxy(srv.url, [fault], surfaces={surface}) as px:
        code, out, err = cli("gate", "--golden", surface_golden / "golden", "--base-url", px.url, "--model", "m",
                             "--out", tmp_path / "g", "--quiet")
    doc = json.loads((tmp_path / "g" / "comparison.json").read_text())
    assert doc["frontend"]["verdict"] == "fail", out + err
    failed = [e for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"]
    assert failed and any(e["suite"] == suite for e in failed)
    for e in failed:
        assert e.get("modes") and all(m.startswith(surface) for m in e["modes"]), e
        assert f" on {surface}" in e["summary"]
    if fault == "stream_ignored":  # the answers agree; the finding is on the stream mode alone
        assert all(set(e["modes"]) == {f"{surface}-stream"} for e in failed) and "stream_ignored" in json.dumps(doc["diagnosis"])
    elif fault.startswith("stream_"):
        assert any(e["signal"] == "surface_parity_mismatch" and set(e["modes"]) == {f"{surface}-stream"} for e in failed)
