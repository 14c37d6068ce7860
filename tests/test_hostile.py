"""Hardening against hostile endpoints (issue #16, wire-level items 3-9, 11-13), against a real hostile
HTTP server on 127.0.0.1 (tests/hostile_server.py)."""

import asyncio
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hostile_server import DEEP, HostileServer
from verifier import contract, dualpath, journal
from verifier.compare import _drift
from verifier.endpoint import Endpoint, EndpointConfig
from verifier.jsonsafe import TooDeep, dumps_strict, loads_bounded
from verifier.parse import parse_body, parse_chunks
from verifier.redact import Redactor
from verifier.types import Exchange

ROOT = Path(__file__).resolve().parent.parent
KEY = "sk-canaryKEY-0123456789abcdef"
HDR = "xk-canaryHDR-9876543210fedcba"


def send(cfg, mode="chat", body=None):
    async def go():
        ep = Endpoint(cfg, sleep=lambda s: asyncio.sleep(0))
        try:
            b = body or {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
            if mode == "chat-stream":
                b = {**b, "stream": True}
            return await ep.send(mode, b)
        finally:
            await ep.aclose()

    return asyncio.run(go())


def server_info(cfg):
    async def go():
        ep = Endpoint(cfg)
        try:
            return await ep.server_info()
        finally:
            await ep.aclose()

    return asyncio.run(go())


def secret_forms(*secrets):
    """Every way a secret could sit in a file: whole, and each token-like part literal or JSON-escaped."""
    forms = set()
    for s in secrets:
        for p in {s, s.split("-")[-1]}:
            forms |= {p, json.dumps(p)[1:-1].replace("-", "\\u002d"), p.replace("-", "\\\\u002d")}
    return forms


# --- 3. redaction -------------------------------------------------------------------------------

def test_redactor_scrubs_whole_bare_escaped_and_split_tokens():
    r = Redactor([KEY, "Bearer " + HDR, "ab"])
    assert r.text(f"Incorrect API key provided: {KEY}.") == "Incorrect API key provided: ***."
    assert HDR not in r.text(f"auth was Bearer {HDR}") and "Bearer" not in r.text(f"Bearer {HDR}")
    esc = KEY.replace("-", "\\u002d")
    assert r.text(f'{{"m": "{esc}"}}') == '{"m": "***"}'
    assert r.text(KEY.replace("-", "\\\\u002D")) == "***"  # escaped twice (a body inside a JSON record)
    assert r.text("ab cab") == "ab cab"  # values too short to scrub safely are left alone
    half = len(KEY) // 2
    chunks = [json.dumps({"choices": [{"delta": {"content": "key " + KEY[:half]}}]}),
              json.dumps({"choices": [{"delta": {"content": KEY[half:] + " end"}}]}), "[DONE]"]
    out = r.chunks(chunks)
    assert parse_chunks(out).content == "key *** end"
    assert not any(KEY[:half] in c or KEY[half:] in c for c in out)
    assert r.obj({"a": [{"b": KEY}], KEY: 1}) == {"a": [{"b": "***"}], "***": 1}
    # Logprob tokens carry the text in pieces, in a body as in a stream.
    body = json.dumps({"choices": [{"message": {"content": "x"}, "logprobs": {"content": [
        {"token": KEY[:4]}, {"token": KEY[4:12]}, {"token": KEY[12:]}, {"token": "ok"}]}}]})
    toks = [t["token"] for t in json.loads(r.record({"body": body})["body"])["choices"][0]["logprobs"]["content"]]
    assert toks == ["***", "", "", "ok"]


def test_journal_record_is_scrubbed_and_strict_json(tmp_path):
    jr = journal.Journal(tmp_path, scrub=[KEY])
    half = len(KEY) // 2
    jr.append(Exchange("s", "1", 0, "chat-stream", {"temperature": float("nan")}, 200, None,
                       [json.dumps({"choices": [{"delta": {"content": KEY[:half]}}]}),
                        json.dumps({"choices": [{"delta": {"content": KEY[half:]}}]}), "[DONE]"]))
    jr.append(Exchange("s", "2", 0, "chat", {}, 401, json.dumps({"error": f"bad key {KEY}"}).replace("-", "\\u002d")))
    jr.close()
    text = (tmp_path / journal.RESPONSES).read_text()
    assert not any(f in text for f in secret_forms(KEY))
    for line in text.splitlines():
        json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in journal"))
    assert '"temperature":null' in text


# --- 3 + 1 (server-info half): the canary: nothing a run writes holds a secret --------------------

@pytest.mark.parametrize("behaviour", ["echo", "unauthorized"])
def test_canary_secret_reaches_no_file(behaviour, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    out = tmp_path / "r"
    with HostileServer(behaviour) as srv:
        code, _, err = cli("run", "--suite", "smoke", "--limit", "3", "--base-url", srv.url, "--model", "m",
                           "--header", f"X-Api-Key: {HDR}", "--mode", "chat,chat-stream", "--out", out, "--quiet")
        assert code == 0, err
        sent = [r for r in srv.requests if r["method"] == "POST"]
        assert sent and all(r["headers"]["x-api-key"] == HDR and r["headers"]["authorization"] == f"Bearer {KEY}" for r in sent)
    assert cli("report", out, "-o", tmp_path / "report.html")[0] == 0
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"run.json", "responses.jsonl", "verdicts.jsonl", "summary.json", "report.html"} <= {p.name for p in files}
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        leaked = [f for f in secret_forms(KEY, HDR) if f in text]
        assert not leaked, f"{p.name} holds {leaked}"
    recs = list(journal.read_jsonl(out / journal.RESPONSES))
    if behaviour == "echo":
        assert any("***" in (r["body"] or "") + "".join(r["chunks"] or []) for r in recs)
    else:
        assert all(r["status"] == 401 and "Incorrect API key provided: ***" in r["body"] for r in recs)


def test_server_info_is_allow_listed(tmp_path):
    with HostileServer("echo") as srv:
        info = server_info(EndpointConfig(srv.url, "m", api_key=KEY, headers={"X-Api-Key": HDR}))
    assert info["models"]["data"] == [{"id": "m", "owned_by": "me"}]
    assert set(info["props"]) == {"chat_template", "build_info", "default_generation_settings"}
    assert info["props"]["default_generation_settings"] == {"n_ctx": 4096, "temperature": 0.8}
    assert info["version"] == {"version": "0.0.1"}
    assert not any(f in json.dumps(info) for f in secret_forms(KEY, HDR))


# --- 4. the env key goes only where configured ------------------------------------------------------

def test_env_key_not_sent_when_an_authorization_header_is_configured():
    with HostileServer("echo") as srv:
        cfg = EndpointConfig(srv.url, "m", api_key=KEY, headers={"authorization": "Bearer X-configured"})
        server_info(cfg)
        send(cfg)
        assert len(srv.requests) == 4  # /models, /props, /version, one chat
        for r in srv.requests:
            auth = [v for k, v in r["headers"].items() if k.lower() == "authorization"]
            assert auth == ["Bearer X-configured"], r["path"]
            assert KEY not in json.dumps(r["headers"])


# --- 5. redirects are recorded, never followed --------------------------------------------------------

def test_redirect_is_recorded_not_followed():
    with HostileServer("echo") as other, HostileServer("redirect", redirect_to=other.base) as srv:
        r = send(EndpointConfig(srv.url, "m", api_key=KEY, headers={"X-Api-Key": HDR}))
        assert r.status == 301 and r.error == "redirect_301" and r.attempts == 1
        assert other.requests == []  # neither the body nor our headers went to the other host


# --- 6. bounded response size, measured as peak RSS in a child process -----------------------------

RSS_SCRIPT = """
import asyncio, json, resource, sys
from verifier.endpoint import Endpoint, EndpointConfig
async def go(url, n):
    ep = Endpoint(EndpointConfig(url, "m", max_retries=0))
    try:
        rs = await asyncio.gather(*(ep.send("chat", {"model": "m", "messages": []}) for _ in range(n)))
    finally:
        await ep.aclose()
    return [r.error for r in rs]
errors = asyncio.run(go(sys.argv[1], 1)) + asyncio.run(go(sys.argv[2], 4))
print(json.dumps({"errors": errors, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def test_gzip_bomb_and_huge_bodies_stay_under_500_mb():
    with HostileServer("gzip_bomb") as bomb, HostileServer("big") as big:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        p = subprocess.run([sys.executable, "-c", RSS_SCRIPT, bomb.url, big.url], capture_output=True, text=True,
                           timeout=300, env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["errors"] == ["response_too_large"] * 5
    assert doc["rss_mb"] < 500, doc


def test_endless_sse_line_stops_at_the_cap_in_linear_time():
    with HostileServer("big_stream") as srv:
        t0 = time.monotonic()
        r = send(EndpointConfig(srv.url, "m", max_response_bytes=16 * 2**20), "chat-stream")
    assert r.error == "response_too_large" and r.attempts == 1 and time.monotonic() - t0 < 20


def test_multi_line_sse_events_are_assembled_as_the_spec_and_the_sdk_do():
    """One JSON event over three `data:` lines, CRLF, comments and `event:`/`id:` fields: one payload, no bad chunk."""
    from verifier.parse import parse_exchange
    from verifier.types import Exchange

    with HostileServer("sse_multiline") as srv:
        r = send(EndpointConfig(srv.url, "m"), "chat-stream")
    assert r.error is None and r.chunks[-1] == "[DONE]" and len(r.chunks) == 4, r.chunks
    p = parse_exchange(Exchange("smoke", "s", 0, "chat-stream", {}, r.status, None, r.chunks, None, 1.0, 1))
    assert p.content == "42" and p.finish_reason == "stop" and p.usage["completion_tokens"] == 2
    assert "bad_chunks" not in p.extra


def test_a_json_answer_to_a_stream_request_is_a_frontend_finding_not_infra(tmp_path, cli):
    """A server that ignores `stream: true`: no retry, no `stream_truncated` infra; a blocking `stream_ignored`
    finding on the stream mode only, which the diagnosis puts in stream assembly."""
    with HostileServer("stream_ignored") as srv:
        r = send(EndpointConfig(srv.url, "m"), "chat-stream")
        assert r.error is None and r.attempts == 1 and r.chunks is None and json.loads(r.body)["choices"]
        out = tmp_path / "r"
        code, _, err = cli("run", "--suite", "smoke", "--limit", "2", "--base-url", srv.url, "--model", "m", "--out", out,
                           "--quiet", "--mode", "chat,chat-stream")
    assert code == 0, err
    vs = list(journal.read_jsonl(out / "verdicts.jsonl"))
    by_mode = {m: [v for v in vs if v["mode"] == m] for m in ("chat", "chat-stream")}
    assert all(v["outcome"] == "contract" and v["reason"] == "stream_ignored" for v in by_mode["chat-stream"]), vs
    assert all(v["outcome"] != "infra" and "stream_ignored" not in str(v["findings"]) for v in by_mode["chat"]), vs
    from verifier.diagnosis import TABLE

    assert TABLE["stream_ignored"][0] == "stream assembly"


def test_a_stream_under_a_json_content_type_is_read_as_sse():
    """The header is wrong, the stream is right: read as the SDK reads it, no finding, no infra."""
    with HostileServer("sse_as_json") as srv:
        r = send(EndpointConfig(srv.url, "m"), "chat-stream")
    assert r.error is None and r.body is None and len(r.chunks) == 3 and r.chunks[-1] == "[DONE]", r


# --- 7. a total deadline per request; a start-up deadline for server info ---------------------------

@pytest.mark.parametrize("behaviour,mode", [("endless", "chat-stream"), ("drip", "chat")])
def test_deadline_ends_endless_and_dripping_responses(behaviour, mode):
    with HostileServer(behaviour) as srv:
        t0 = time.monotonic()
        r = send(EndpointConfig(srv.url, "m", timeout_s=5.0, request_deadline_s=1.5), mode)
        took = time.monotonic() - t0
    assert r.error == "timeout" and took < 4.5
    if mode == "chat-stream":
        assert r.chunks  # what arrived before the deadline is kept for the journal


def test_default_deadline_follows_timeout():
    assert EndpointConfig("u", "m", timeout_s=5.0).deadline_s == 50.0
    assert EndpointConfig("u", "m", timeout_s=5.0, request_deadline_s=7.0).deadline_s == 7.0


def test_slow_server_info_is_bounded_by_the_startup_deadline():
    with HostileServer("slow_info") as srv:
        t0 = time.monotonic()
        info = server_info(EndpointConfig(srv.url, "m", info_deadline_s=1.0))
        took = time.monotonic() - t0
    assert took < 4.0 and set(info) == {"models"}


# --- 8. JSON nested 1,000 deep is a contract finding, never a RecursionError -------------------------

@pytest.mark.parametrize("where", ["body", "chunk", "content", "tool_args"])
def test_deep_json_is_a_contract_finding(where):
    with HostileServer("deep", deep_where=where) as srv:
        mode = "chat-stream" if where == "chunk" else "chat"
        r = send(EndpointConfig(srv.url, "m"), mode)
    p = parse_chunks(r.chunks) if mode == "chat-stream" else parse_body(r.body)
    req = {"tools": [{"type": "function", "function": {"name": "f"}}]}
    f = contract.check(req, p, mode)
    assert f[0].code == "json_too_deep" and contract.blocking(f)
    dumps_strict(p.tool_calls)  # what scorers get is shallow
    with pytest.raises(TooDeep):
        loads_bounded(DEEP)


def test_deep_json_end_to_end_score_compare_report(tmp_path, cli):
    runs = []
    for where in ("tool_args", "content"):
        out = tmp_path / where
        with HostileServer("deep", deep_where=where) as srv:
            code, _, err = cli("run", "--suite", "smoke", "--limit", "3", "--base-url", srv.url, "--model", "m",
                               "--out", out, "--quiet")
        assert code == 0, err
        runs.append(out)
    verdicts = [json.loads(x) for x in (runs[0] / "verdicts.jsonl").read_text().splitlines()]
    assert {v["outcome"] for v in verdicts} == {"contract"} and {v["reason"] for v in verdicts} == {"json_too_deep"}
    assert cli("score", runs[1])[0] == 0
    assert cli("bless", runs[0], "--to", tmp_path / "golden")[0] == 0
    assert cli("calibrate", tmp_path / "golden", "--runs", runs[0], runs[1])[0] == 0
    code, _, err = cli("compare", runs[1], "--golden", tmp_path / "golden")
    assert code in (0, 10, 11, 12, 20, 30), err
    assert cli("report", runs[1], "--golden", tmp_path / "golden", "-o", tmp_path / "r.html")[0] == 0


# --- 9. a server-supplied chat template is rendered with time and size limits ------------------------

def test_template_bombs_are_refused(monkeypatch):
    monkeypatch.setattr(dualpath, "RENDER_TIMEOUT_S", 1.5)
    t0 = time.monotonic()
    with pytest.raises(dualpath.TemplateUnavailable, match="too large"):
        dualpath.render("{{ 'x' * 1500000000 }}", [])
    with pytest.raises(dualpath.TemplateUnavailable, match="longer than"):
        dualpath.render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", [])
    with pytest.raises(dualpath.TemplateUnavailable):
        dualpath.render('{% set ns = namespace(x="xxxxxxxxxxxxxxxx") %}{% for i in range(40) %}'
                        '{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x }}', [])
    assert time.monotonic() - t0 < 20
    # The worker is replaced: a good template renders afterwards.
    assert dualpath.render("{{ messages[0].content }}", [{"role": "user", "content": "hi"}]) == "hi"


# --- 11 + 13. non-finite numbers: findings, never clean drift, never bare NaN on disk ---------------

def test_nan_logprobs_and_infinite_usage():
    with HostileServer("nan") as srv:
        r = send(EndpointConfig(srv.url, "m"))
    p = parse_body(r.body)
    codes = {f.code for f in contract.check({}, p, "chat")}
    assert {"logprobs_non_finite", "usage_non_finite"} <= codes
    assert p.prompt_tokens is None and p.completion_tokens is None
    nan = [["ok", float("nan")], ["x", float("nan")]]
    assert _drift({"logprobs": nan}, {"logprobs": nan}) is None  # not measurable, not "no drift"
    assert _drift({"logprobs": [["ok", -1.0]]}, {"logprobs": [["ok", -1.5]]}) == (1, 0.5, 1)


def test_dumps_strict_never_writes_bare_nan():
    s = dumps_strict({"a": float("nan"), "b": [float("inf"), 1.5], "c": -math.inf})
    assert json.loads(s) == {"a": None, "b": [None, 1.5], "c": None}


# --- 12. a mid-stream error event is retried, then infra ---------------------------------------------

def test_mid_stream_error_event_is_retried_then_infra(tmp_path):
    from suites import SUITES
    from verifier.scoring import judge

    with HostileServer("stream_error") as srv:
        r = send(EndpointConfig(srv.url, "m", max_retries=2), "chat-stream")
        posts = [x for x in srv.requests if x["method"] == "POST"]
    assert r.error == "stream_error" and r.attempts == 3 and len(posts) == 3
    suite = SUITES["smoke"]
    sample = suite.load(None, True)[0]
    ex = Exchange("smoke", sample.id, 0, "chat-stream", {}, r.status, r.body, r.chunks, r.error, r.latency_ms, r.attempts)
    v = judge(suite, sample, ex)
    assert v.outcome == "infra" and v.reason == "stream_error"


def test_nan_end_to_end_is_a_frontend_finding_with_strict_json_outputs(tmp_path, cli):
    """A golden with real logprobs, then a candidate that sends NaN logprobs and Infinity usage: compare
    sees a new contract finding (never clean drift), and every JSON file written parses as strict JSON."""
    for name in ("fine", "nan"):
        with HostileServer(name) as srv:
            code, _, err = cli("run", "--suite", "smoke", "--limit", "3", "--base-url", srv.url, "--model", "m",
                               "--logprobs", "1", "--out", tmp_path / name, "--quiet")
            assert code == 0, err
    v = [json.loads(x) for x in (tmp_path / "nan" / "verdicts.jsonl").read_text().splitlines()]
    assert all({"logprobs_non_finite", "usage_non_finite"} <= {f["code"] for f in x["findings"]} for x in v)
    assert cli("bless", tmp_path / "fine", "--to", tmp_path / "g")[0] == 0
    assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "fine", tmp_path / "fine")[0] == 0
    code, _, err = cli("compare", tmp_path / "nan", "--golden", tmp_path / "g")
    doc = json.loads((tmp_path / "nan" / "comparison.json").read_text())
    assert code != 0 and doc["frontend"]["verdict"] != "pass", err
    assert doc["suites"]["smoke"]["drift"]["state"] == "unavailable"  # NaN is not measurable, never "clean"
    assert cli("report", tmp_path / "nan", "--golden", tmp_path / "g", "-o", tmp_path / "r.html")[0] == 0
    for p in tmp_path.rglob("*.json*"):
        for line in ([p.read_text()] if p.suffix == ".json" else p.read_text().splitlines()):
            json.loads(line, parse_constant=lambda c: pytest.fail(f"bare {c} in {p.name}"))
