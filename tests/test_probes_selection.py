"""A gate reruns exactly the golden's probes by default (execution/probes.py `selection`, `wanted`)."""

import asyncio

from conftest import zero_margins

from verifier.execution import probe_results
from verifier.execution.probes import run_probes, selection, wanted
from verifier.testbed.server import Script, TestServer, arithmetic
from verifier.wire.endpoint import Endpoint, EndpointConfig


def test_selection_is_the_golden_s_recorded_results():
    golden = {"stop_honoured@chat": {"passed": True, "detail": ""}, "n_honoured": {"passed": True, "detail": ""},
              "stream_terminal_event@messages": {"passed": False, "detail": "x"}, "junk": "not a result"}
    assert selection(golden) == {"stop_honoured@chat", "n_honoured@chat", "stream_terminal_event@messages"}
    assert selection(None) == frozenset()
    assert wanted(None, "x", "chat") and wanted({"x"}, "x", "messages") and wanted({"x@chat"}, "x", "chat")
    assert not wanted({"x@chat"}, "x", "messages") and not wanted(frozenset(), "x", "chat")


def test_only_the_selected_probes_are_sent():
    golden = {"stop_honoured@chat": {"passed": True, "detail": ""}, "stream_terminal_event@messages": {"passed": True, "detail": ""}}

    async def go(url):
        ep = Endpoint(EndpointConfig(base_url=url, model="m", max_retries=0))
        try:
            return await run_probes(ep, "m", {}, ("chat", "responses", "messages"), only=selection(golden))
        finally:
            await ep.aclose()

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        res = asyncio.run(go(srv.url))
        sent = len(srv.script.requests)
    assert set(res) == set(golden) and all(v["passed"] for v in res.values()), res
    assert sent == 3  # stop_honoured: 2 requests; stream_terminal_event: 1
    assert probe_results.split("stream_terminal_event@messages") == ("stream_terminal_event", "messages")


def text_only(req):
    """A text-only server: an image in the prompt is an HTTP 500 (llama-server without a projector)."""
    from verifier.testbed.server import Reply

    for m in req.get("messages") or []:
        if isinstance(m.get("content"), list) and any(isinstance(p, dict) and p.get("type") == "image_url" for p in m["content"]):
            return Reply(status=500)
    return arithmetic(req)


def test_a_golden_recorded_with_probes_on_a_text_only_server_passes_against_itself(tmp_path, cli):
    import json

    with TestServer(Script(text_only, honour_sampling=True)) as srv:
        code, _, err = cli("run", "--suite", "smoke", "--limit", "3", "--probes", "--model", "m", "--quiet", "--max-retries", "0",
                           "--base-url", srv.url, "--out", tmp_path / "ref")
        assert code == 0, err
        probes = json.loads((tmp_path / "ref" / "probes.json").read_text())
        assert probes["prompt_tokens_oracle@chat"].get("infra"), probes["prompt_tokens_oracle@chat"]
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "g")[0] == 0
        zero_margins(tmp_path / "g")  # zero margins: the reference compared with itself
        code, out, err = cli("compare", tmp_path / "ref", "--golden", tmp_path / "g", "--out", tmp_path / "cmp.json")
        assert code == 0, out + err
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--quiet",
                             "--max-retries", "0", "--out", tmp_path / "rerun")
    assert code == 0, out + err
    doc = json.loads((tmp_path / "rerun" / "comparison.json").read_text())
    assert "prompt_tokens_oracle@chat" in doc["coverage"]["probes_reference_infra"] and doc["coverage"]["missing"] == 0
    row = next(r for r in doc["conformance"] if r["key"] == "prompt_tokens_oracle@chat")
    assert row["status"] == "reference_infra"


def test_coverage_says_which_probes_met_an_infra_error_and_which_did_not_run():
    from verifier.attribution import coverage

    rows = {"a@chat": {"reference": "pass", "candidate": "infra"}, "b@chat": {"reference": "pass", "candidate": None},
            "c@chat": {"reference": "infra", "candidate": "infra"}}
    c = coverage.coverage([], [], rows, {}, False)
    assert c["expected"] == 2 and c["missing_probes"] == ["a@chat", "b@chat"] and c["probes_reference_infra"] == ["c@chat"]
    assert c["probe_infra"] == {"count": 1, "of": 2} and c["rate"] == 1.0  # b never ran: 1 gap of the 1 counted
    text = coverage.describe(c)
    assert "probes not run: b@chat" in text and "met an infra error (the reference answered them; not judged, outside the samples' budget): a@chat" in text
    assert "c@chat" not in text


QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def qwen_like(req):
    """Qwen2.5's template: with no system message, a default one (longer than the probe's short system prompt) is
    rendered into the prompt, so prompt_tokens count it."""
    from verifier.testbed.server import Reply
    from verifier.testbed.wire import prompt_tokens

    msgs = req.get("messages") or []
    if not any(m.get("role") == "system" for m in msgs):
        msgs = [{"role": "system", "content": QWEN_DEFAULT_SYSTEM}, *msgs]
    r = arithmetic(req)
    pt = prompt_tokens({**req, "messages": msgs})
    return Reply(content=r.content, usage={"prompt_tokens": pt, "completion_tokens": 1, "total_tokens": pt + 1})


def _system_probe(url):
    async def go():
        ep = Endpoint(EndpointConfig(base_url=url, model="m", max_retries=0))
        try:
            return await run_probes(ep, "m", {}, ("chat", "responses", "messages"), only={"system_prompt_honoured"})
        finally:
            await ep.aclose()

    return asyncio.run(go())


def test_system_prompt_probe_passes_on_a_template_with_a_longer_default_system_prompt():
    from verifier.execution.probes import SYSTEM_TEXT
    from verifier.testbed.wire import prompt_tokens

    hello = [{"role": "user", "content": "Say hello in one word."}]
    # the old comparison (none vs the short one) would fail here: the default counts more than the short prompt
    assert prompt_tokens({"messages": [{"role": "system", "content": QWEN_DEFAULT_SYSTEM}, *hello]}) > \
        prompt_tokens({"messages": [{"role": "system", "content": SYSTEM_TEXT}, *hello]})
    with TestServer(Script(qwen_like)) as srv:
        res = _system_probe(srv.url)
    assert set(res) == {"system_prompt_honoured@chat", "system_prompt_honoured@responses", "system_prompt_honoured@messages"}
    assert all(v["passed"] for v in res.values()), res


def test_system_prompt_probe_fails_when_the_system_prompt_is_really_dropped():
    from verifier.testbed.proxy import Proxy

    with TestServer(Script(qwen_like)) as srv, Proxy(srv.url, ["drop_system_prompt"]) as px:
        res = _system_probe(px.url)
    assert res and not any(v["passed"] for v in res.values()), res
    assert all("never reached the prompt" in v["detail"] for v in res.values()), res
