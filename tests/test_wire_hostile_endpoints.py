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
from verifier.judge import contract
from verifier.wire import dualpath
from verifier.execution import journal
from verifier.attribution.numerics import logprob_drift
from verifier.wire.endpoint import Endpoint, EndpointConfig
from verifier.jsonsafe import TooDeep, dumps_strict, loads_bounded
from verifier.judge.parse import parse_body, parse_chunks
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
from verifier.wire.endpoint import Endpoint, EndpointConfig
async def go(url, n):
    ep = Endpoint(EndpointConfig(url, "m", max_retries=0))
    try:
        rs = await asyncio.gather(*(ep.send("chat", {"model": "m", "messages": []}) for _ in range(n)))
    finally:
        await ep.aclose()
    return [r.error for r in rs]
errors = asyncio.run(go(sys.argv[1], 1)) + asyncio.run(go(sys.argv[2], 4))
print(json.dumps({"errors": errors, "rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))
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
    from verifier.judge.parse import parse_exchange
    from verifier.types import Exchange

    with HostileServer("sse_multiline") as srv:
        r = send(EndpointConfig(srv.url, "m"), "chat-stream")
    assert r.error is None and r.chunks[-1] == "[DONE]" and len(r.chunks) == 4, r.chunks
    p = parse_exchange(Exchange("smoke", "s", 0, "chat-stream", {}, r.status, None, r.chunks, None, 1.0, 1))
    assert p.content == "42" and p.finish_reason == "stop" and p.usage["completion_tokens"] == 2
    assert p.extra.bad_chunks is None


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
    from verifier.attribution.diagnosis import TABLE

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
    assert logprob_drift(nan, nan) is None  # not measurable, not "no drift"
    assert logprob_drift([["ok", -1.0]], [["ok", -1.5]]) == (1, 0.5, 1)


def test_dumps_strict_never_writes_bare_nan():
    s = dumps_strict({"a": float("nan"), "b": [float("inf"), 1.5], "c": -math.inf})
    assert json.loads(s) == {"a": None, "b": [None, 1.5], "c": None}


# --- 12. a mid-stream error event is retried, then infra ---------------------------------------------

def test_mid_stream_error_event_is_retried_then_infra(tmp_path):
    from suites import BUILTIN as SUITES
    from verifier.execution.scoring import judge

    with HostileServer("stream_error") as srv:
        r = send(EndpointConfig(srv.url, "m", max_retries=2), "chat-stream")
        posts = [x for x in srv.requests if x["method"] == "POST"]
    assert r.error == "stream_error" and r.attempts == 3 and len(posts) == 3
    suite = SUITES["smoke"]
    sample = suite.load(None, True)[0]
    ex = Exchange("smoke", sample.id, 0, "chat-stream", {}, r.status, r.body, r.chunks, r.error, r.latency_ms, r.attempts)
    v = judge(suite, sample, ex)
    assert v.outcome == "infra" and v.reason == "stream_error"


def test_an_error_event_with_a_client_error_code_is_a_refusal_never_retried():
    """vLLM refuses some structured-output requests inside a 200 stream (an error event with code 400). That is the
    server's answer to the request as sent: unsupported like the non-streamed 400 of the same request, not an infra
    failure retried and charged to the infra budget (which made a gate `incomplete` instead of naming the refusal)."""
    from suites import BUILTIN as SUITES
    from verifier.execution.scoring import judge

    suite = SUITES["smoke"]
    sample = suite.load(None, True)[0]
    with HostileServer("stream_refused") as srv:
        verdicts = {}
        for mode in ("chat-stream", "chat"):
            r = send(EndpointConfig(srv.url, "m", max_retries=2), mode)
            ex = Exchange("smoke", sample.id, 0, mode, {}, r.status, r.body, r.chunks, r.error, r.latency_ms, r.attempts)
            verdicts[mode] = (r.attempts, judge(suite, sample, ex))
        posts = [x for x in srv.requests if x["method"] == "POST"]
    assert len(posts) == 2  # one request per mode: a refusal is not retried
    attempts, v = verdicts["chat-stream"]
    assert attempts == 1 and v.outcome == "unsupported" and v.reason == "stream_refused"
    attempts, v = verdicts["chat"]
    assert attempts == 1 and v.outcome == "unsupported" and v.reason == "http_400"


@pytest.mark.parametrize("code", [500, 503, 429, 408, "overloaded", None, True])
def test_an_error_event_without_a_client_error_code_stays_infra(code):
    from verifier.wire.bodyread import sse_text

    err = {"message": "busy", "code": code}
    assert sse_text(f"data: {json.dumps({'error': err})}\n\n", []) == "stream_error"
    assert sse_text(f"data: {json.dumps({'error': {**err, 'code': 404}})}\n\n", []) == "stream_refused"
    assert sse_text(f"data: {json.dumps({'error': {**err, 'code': '422'}})}\n\n", []) == "stream_refused"


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


# =====================================================================================================
# Issue #22: every limit on every path, and no secret reassembled on disk. One test (or more) per item.
# =====================================================================================================

def _cli_rss(*args, env=None, timeout=600):
    """`verifier ARGS` in a fresh interpreter: (exit code, peak RSS in MB, stdout, stderr)."""
    script = ("import json, resource, sys\nfrom verifier.cli import main\ncode = main(sys.argv[1:])\n"
              "print(json.dumps({'code': code, 'rss_mb': int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))")
    p = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env=env or {**os.environ, "PYTHONPATH": str(ROOT)})
    last = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"code": None, "rss_mb": None}
    return last["code"], last["rss_mb"], p.stdout, p.stderr


MEM22_SCRIPT = """
import asyncio, json, resource, sys
from verifier.wire.endpoint import Endpoint, EndpointConfig
async def go(models_url, events_url, body_url):
    out = {}
    ep = Endpoint(EndpointConfig(models_url, "m", max_retries=0))
    try:
        out["unreachable"] = await ep.unreachable()
        out["models_status"] = (await ep.get(models_url + "/models"))[0]
        out["info"] = sorted(await ep.server_info())
    finally:
        await ep.aclose()
    for name, url, mode in (("events", events_url, "chat-stream"), ("bodies", body_url, "chat")):
        ep = Endpoint(EndpointConfig(url, "m", max_retries=0, concurrency=4))
        try:
            rs = await asyncio.gather(*(ep.send(mode, {"model": "m", "messages": [], "stream": mode != "chat"}) for _ in range(4)))
            out[name] = [[r.error, len(r.chunks or []), len(r.body or "")] for r in rs]
            del rs
        finally:
            await ep.aclose()
    return out
out = asyncio.run(go(*sys.argv[1:4]))
print(json.dumps({**out, "rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))
"""


def test_22_1_3_every_read_path_stays_under_500_mb():
    """Items 1 and 3 and the 62 MB bodies, one child process, its peak RSS: a 1 GiB gzip bomb on GET /models
    (reachability, preflight and server info), 4 concurrent streams of 8 M `data:{}` events, and 4 concurrent
    bodies of 62 MB (just under the 64 MiB cap, so each is read whole)."""
    with HostileServer("models_bomb") as bomb, HostileServer("tiny_events") as events, HostileServer("padded") as bodies:
        p = subprocess.run([sys.executable, "-c", MEM22_SCRIPT, bomb.url, events.url, bodies.url], capture_output=True,
                           text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["unreachable"] is None and doc["models_status"] is None  # the bomb's listing is refused at its cap
    assert doc["info"] == ["props", "version"]  # /models dropped, the others kept
    assert doc["events"] == [["stream_too_many_events", 250_000, 0]] * 4  # cut at the event cap, what came is kept
    assert all(e is None and n > 62 * 2**20 for e, _, n in doc["bodies"]), doc["bodies"]
    assert doc["rss_mb"] < 500, doc


def test_22_1_models_bomb_through_the_cli_run(tmp_path):
    """The issue's reproduction: `verifier run` against a 1 GiB gzip body on /models (it peaked at 2.17 GB)."""
    with HostileServer("models_bomb") as srv:
        code, rss, out, err = _cli_rss("run", "--suite", "smoke", "--smoke", "--limit", "1", "--base-url", srv.url,
                                       "--model", "m", "--quiet", "--out", tmp_path / "r")
    assert code == 0, err[-2000:]
    assert rss < 500, rss
    hdr = json.loads((tmp_path / "r" / "run.json").read_text())
    assert "models" not in hdr["server_info"]  # not allow-listed from a body that was never read whole


def test_22_2_a_dripping_models_listing_is_bounded_by_the_info_deadline(tmp_path, cli):
    """One byte every 2 s on /models: every read is within --timeout, the whole call is not. It stalled 97 s."""
    with HostileServer("models_drip") as srv:
        t0 = time.monotonic()
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "1", "--base-url", srv.url, "--model", "m",
                           "--quiet", "--out", tmp_path / "r", "--timeout", "3", "--request-deadline", "5", "--info-deadline", "2")
        took = time.monotonic() - t0
    assert code == 0, err
    # unreachable reads only the status line; preflight and server info give up at --info-deadline each (2 s).
    assert took < 60, took  # the server drips for 120 s: a run that waited for it would take that long
    assert "models" not in json.loads((tmp_path / "r" / "run.json").read_text())["server_info"]


def test_22_3_millions_of_tiny_events_are_a_contract_finding(tmp_path, cli):
    with HostileServer("tiny_events") as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", srv.url, "--model", "m",
                           "--quiet", "--out", tmp_path / "r", "--mode", "chat-stream", "--max-stream-events", "1000")
        posts = [r for r in srv.requests if r["method"] == "POST"]
    assert code == 0, err
    assert len(posts) == 2  # not retried: the same server sends the same stream
    vs = list(journal.read_jsonl(tmp_path / "r" / "verdicts.jsonl"))
    assert {(v["outcome"], v["reason"]) for v in vs} == {("contract", "stream_too_many_events")}
    recs = list(journal.read_jsonl(tmp_path / "r" / "responses.jsonl"))
    assert all(r["error"] == "stream_too_many_events" and len(r["chunks"]) == 1000 for r in recs)
    from verifier.attribution.diagnosis import TABLE

    assert TABLE["stream_too_many_events"][0] == "stream assembly"
    assert contract.blocking([contract.Finding("stream_too_many_events", "")])


@pytest.mark.parametrize("where,mode,reason", [("body", "chat", "malformed_body"), ("chunk", "chat-stream", None),
                                               ("tool_args", "chat", "tool_args_invalid_json"), ("content", "chat", None)])
def test_22_4_huge_integers_are_findings_in_run_score_gate_and_report(where, mode, reason, tmp_path, cli):
    """A 5,000-digit integer in a body, a stream chunk, tool arguments or the probe's JSON answer: a contract finding
    (or a failed probe), never `internal error: ValueError: Exceeds the limit (4300 digits)`."""
    run = ["--suite", "smoke", "--smoke", "--limit", "2", "--model", "m", "--quiet", "--mode", mode, "--probes", "--max-retries", "0"]
    with HostileServer("huge_int", deep_where=where) as srv:
        code, _, err = cli("run", *run, "--base-url", srv.url, "--out", tmp_path / "r")
        assert code == 0, err
        vs = list(journal.read_jsonl(tmp_path / "r" / "verdicts.jsonl"))
        codes = {f["code"] for v in vs for f in v["findings"]}
        if reason:
            assert {(v["outcome"], v["reason"]) for v in vs} == {("contract", reason)}, vs
        elif where == "chunk":
            assert "stream_chunk_invalid_json" in codes, vs
        else:
            probes = json.loads((tmp_path / "r" / "probes.json").read_text())
            assert probes["response_format_honoured@chat"]["passed"] is False  # keyed probe@surface
        assert cli("score", tmp_path / "r")[0] == 0
        assert cli("bless", tmp_path / "r", "--to", tmp_path / "g")[0] == 0
        assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "r", tmp_path / "r")[0] == 0
        code, _, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "gate",
                           "--quiet", "--max-retries", "0")
        assert code in (0, 10, 20, 30) and "internal error" not in err, err
    code, _, err = cli("report", tmp_path / "gate", "--golden", tmp_path / "g", "-o", tmp_path / "rep.html")
    assert code == 0, err


def test_22_4_every_json_load_boundary_treats_a_huge_integer_as_bad_json(tmp_path, cli, server):
    from verifier import jsonsafe
    from verifier.jsonsafe import NumberTooLong

    with pytest.raises(json.JSONDecodeError, match="4300 digits"):
        jsonsafe.loads('{"n": ' + "9" * 5000 + "}")
    assert issubclass(NumberTooLong, json.JSONDecodeError)
    assert parse_chunks([delta_huge := '{"choices": [{"delta": {"content": "x"}}], "n": ' + "9" * 5000 + "}", "[DONE]"]).extra.bad_chunks == 1
    assert delta_huge
    # A journal or a golden edited (or corrupted) into one: a usage error naming the file and line, not a crash.
    out = tmp_path / "r"
    assert cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", server.url, "--model", "m", "--quiet",
               "--out", out)[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    lines[0] = lines[0].replace('"epoch":0', '"epoch":' + "9" * 5000, 1)
    (out / "responses.jsonl").write_text("".join(lines))
    code, _, err = cli("score", out)
    assert code == 2 and "line 1" in err and err.count("\n") == 1, err


def _evil_requests(path):
    """Two --requests bodies whose ids hold terminal escapes, a carriage return, a bell and a C0 control."""
    rows = [{"id": f"evil{i}\x1b[2J\x1b[H\rstatus: pass\x07\x01", "messages": [{"role": "user", "content": f"What is {i} + 1?"}]}
            for i in range(2)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def evil_golden(tmp_path, cli):
    req = _evil_requests(tmp_path / "evil.jsonl")
    with HostileServer("fine") as srv:
        code, _, err = cli("run", "--requests", req, "--base-url", srv.url, "--model", "m", "--quiet", "--out", tmp_path / "ref",
                           "--logprobs", "1")
        assert code == 0, err
    assert cli("bless", tmp_path / "ref", "--to", tmp_path / "g")[0] == 0
    assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "ref", tmp_path / "ref")[0] == 0
    return {"golden": tmp_path / "g", "requests": req}


def test_22_8_control_characters_from_the_endpoint_never_reach_the_console(tmp_path, cli, evil_golden):
    # Model ids from /v1/models, printed by the preflight's hint.
    with HostileServer("models_ansi") as srv:
        code, out, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "1", "--base-url", srv.url, "--model", "other",
                             "--quiet", "--out", tmp_path / "r")
    assert code == 2 and "is not in GET" in err and "/v1/models" in err and err.count("\n") == 1, err
    assert "\\x1b[2J" in err and "\\u202e" in err
    # --requests ids, printed by the gate summary (diagnosis examples, evidence).
    with HostileServer("nan") as srv:
        code, out, err = cli("gate", "--golden", evil_golden["golden"], "--data", evil_golden["requests"], "--base-url", srv.url,
                             "--model", "m", "--out", tmp_path / "gate", "--max-retries", "0")
    assert code != 1 and "evil0" in out, (out, err)
    assert "\\x1b[2J" in out + err
    for text in (out, err):
        assert not any(c in text for c in "\x1b\r\x07\x01\u202e"), repr(text)


def test_22_9_junit_xml_stays_valid_with_control_characters_in_sample_ids(tmp_path, cli, evil_golden):
    import xml.etree.ElementTree as ET

    with HostileServer("nan") as srv:
        code, _, err = cli("gate", "--golden", evil_golden["golden"], "--data", evil_golden["requests"], "--base-url", srv.url,
                           "--model", "m", "--out", tmp_path / "gate", "--quiet", "--max-retries", "0")
    assert code in (10, 12, 20), err
    root = ET.parse(tmp_path / "gate" / "junit.xml").getroot()  # raised ParseError on \x01 before
    text = ET.tostring(root, encoding="unicode")
    assert int(root.get("failures")) >= 1 and "evil0" in text and "\\x01" in text, text[:2000]


def test_22_10_argument_errors_never_echo_a_secret(tmp_path, cli):
    secret = "sk-argSECRET-0123456789abcdef"
    for args in (["--header", f"Bearer {secret}"], ["--header", f"{secret}"], ["--base-url", f"http://127.0.0.1:{secret}/v1"],
                 ["--base-url", f"http://127.0.0.1:8080{secret}/v1"]):
        base = ["run", "--suite", "smoke", "--smoke", "--model", "m", "--quiet", "--out", tmp_path / "r"]
        if args[0] != "--base-url":
            base += ["--base-url", "http://127.0.0.1:9/v1"]
        code, out, err = cli(*base, *args)
        assert code == 2 and err.count("\n") == 1, (args, err)
        assert not any(piece in out + err for piece in (secret, secret[:12], secret[-12:], "argSECRET")), (args, err)
        assert not (tmp_path / "r").exists()


def test_22_11_bad_input_is_exit_2_with_one_line(tmp_path, cli, monkeypatch, server):
    # An unknown charset on /models.
    with HostileServer("models_charset") as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "1", "--base-url", srv.url, "--model", "m",
                           "--quiet", "--out", tmp_path / "a")
    assert code == 2 and err.count("\n") == 1 and "charset" in err and "internal error" not in err, err
    # A lone surrogate in a --requests body (it cannot be encoded as UTF-8 to be sent).
    req = tmp_path / "req.jsonl"
    req.write_text('{"id": "s1", "messages": [{"role": "user", "content": "bad \\ud800 here"}]}\n')
    code, _, err = cli("run", "--requests", req, "--base-url", server.url, "--model", "m", "--quiet", "--out", tmp_path / "b")
    assert code == 2 and err.count("\n") == 1 and "lone surrogate" in err and "line 1" in err, err
    assert server.script.requests == []
    # A key with a trailing newline (it would be a header with a line break).
    monkeypatch.setenv("OPENAI_API_KEY", KEY + "\n")
    code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "1", "--base-url", server.url, "--model", "m",
                       "--quiet", "--out", tmp_path / "c")
    assert code == 2 and err.count("\n") == 1 and "OPENAI_API_KEY" in err and KEY not in err and "internal error" not in err, err
    assert not (tmp_path / "c").exists() and server.script.requests == []


SPLIT_FORMS = [("split_choice", "chat-stream"), ("split_messages", "messages-stream"), ("split_responses", "responses-stream")]


def _halves(*secrets):
    return {h for s in secrets for h in (s[: len(s) // 2], s[len(s) // 2:])}


@pytest.mark.parametrize("behaviour,mode", SPLIT_FORMS)
def test_22_5_canary_a_secret_split_where_the_parser_rejoins_it_reaches_no_file(behaviour, mode, tmp_path, cli, monkeypatch):
    """The server echoes the env key and the --header value in halves that only the parser joins (a second chat
    choice with index 0; Messages content_block_start.text then text_delta; Responses output_text.delta of another
    output_index). Every file every command writes is grepped, including those that report, bless, calibrate,
    compare and matrix write later in a process that holds neither secret (scrub.reset + no key in the env)."""
    from verifier import scrub

    scrub.reset()
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "step-summary.md"))
    runs = ["--suite", "smoke", "--smoke", "--limit", "2", "--model", "m", "--quiet", "--mode", mode, "--max-retries", "0",
            "--header", f"X-Api-Key: {HDR}"]
    with HostileServer(behaviour) as srv:
        for name in ("ref", "cand"):
            code, _, err = cli("run", *runs, "--base-url", srv.url, "--out", tmp_path / name)
            assert code == 0, err
        sent = [r for r in srv.requests if r["method"] == "POST"]
        assert sent and all(r["headers"].get("x-api-key") == HDR and KEY in r["headers"].get("authorization", "") for r in sent)
        # The run's own journal, written by the process that holds both secrets: joined where the parser joins.
        from verifier.judge.parse import parse_exchange
        from verifier.types import Exchange

        for rec in journal.read_jsonl(tmp_path / "ref" / "responses.jsonl"):
            p = parse_exchange(Exchange.from_json(rec))
            assert "***" in (p.content or ""), (rec["chunks"], p.content)
        # Offline, in a process that never held the secrets.
        scrub.reset()
        monkeypatch.delenv("OPENAI_API_KEY")
        g = tmp_path / "goldens" / "g"
        assert cli("score", tmp_path / "ref")[0] == 0
        assert cli("bless", tmp_path / "ref", "--to", g)[0] == 0
        assert cli("calibrate", g, "--runs", tmp_path / "ref", tmp_path / "cand")[0] == 0
        scrub.reset()
        assert cli("compare", tmp_path / "cand", "--golden", g)[0] in (0, 10, 20)
        scrub.reset()
        code, _, err = cli("report", tmp_path / "cand", "--golden", g, "-o", tmp_path / "rep" / "r.html", "--csv", tmp_path / "rep" / "s.csv")
        assert code == 0, err
        scrub.reset()
        code, _, err = cli("matrix", "--golden", g, "--out", tmp_path / "matrix", f"A={tmp_path / 'cand'}", f"B={tmp_path / 'ref'}")
        assert code in (0, 10, 20), err
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"run.json", "responses.jsonl", "verdicts.jsonl", "golden.json", "samples.jsonl", "comparison.json", "r.html",
            "s.csv", "matrix.html", "matrix.md", "matrix.json"} <= names, names
    forms = secret_forms(KEY, HDR) | _halves(KEY, HDR)
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        leaked = [f for f in forms if f in text]
        assert not leaked, f"{p.relative_to(tmp_path)} holds {leaked}"
    page = (tmp_path / "matrix" / "matrix.html").read_text()
    assert "'sha256-" in page and "'***" not in page  # offline token-like masking spares our own CSP hashes
    hdr = json.loads((tmp_path / "ref" / "run.json").read_text())["endpoint"]
    assert hdr["header_names"] == ["X-Api-Key"] and hdr["api_key_sent"] is True  # that auth was used, never the values


def test_22_5_offline_commands_mask_token_like_strings_of_a_secret_bearing_run(tmp_path, cli, monkeypatch):
    """Defence in depth: a journal that still holds a credential (here written in by hand, as a server could re-encode
    one past the redactor) is masked token-wise by an offline report when run.json says a --header was sent."""
    from verifier import scrub

    scrub.reset()
    with HostileServer("fine") as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", srv.url, "--model", "m", "--quiet",
                           "--out", tmp_path / "r", "--header", f"X-Api-Key: {HDR}")
        assert code == 0, err
    planted = "sk-plantedTOKEN-Z9y8X7w6V5u4"
    lines = (tmp_path / "r" / "responses.jsonl").read_text().replace('\\"content\\": \\"ok\\"', f'\\"content\\": \\"ok {planted}\\"')
    assert planted in lines
    (tmp_path / "r" / "responses.jsonl").write_text(lines)
    scrub.reset()  # a new process: it never saw the --header
    assert cli("report", tmp_path / "r", "-o", tmp_path / "rep.html")[0] == 0
    html = (tmp_path / "rep.html").read_text()
    assert planted not in html and "planted" not in html and "***" in html
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert len(summary["responses_digest"]["sha256"]) == 64  # rescored offline, the digest was not masked


KILL_BLESS = """
import os, signal, sys
from verifier.golden import store as golden
if sys.argv[1] == "renames":
    golden._exchange = lambda a, b: False  # a system without an atomic exchange: two renames
real = os.rename
def rename(src, dst):
    real(src, dst)
    if str(src).endswith("/g"):  # the old golden was just moved aside: killed before the new one goes in
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
from verifier.cli import main
sys.exit(main(["bless", sys.argv[2], "--to", sys.argv[3], "--force"]))
"""


@pytest.mark.parametrize("path", ["exchange", "renames"])
def test_22_6_a_kill_during_bless_force_never_loses_the_golden(path, tmp_path, cli, calibrated_golden):
    """SIGKILL between bless --force's renames left no golden at the target ("not a golden" ever after). With the
    atomic exchange there is no such moment; with two renames the next command that looks puts the old one back."""
    import shutil

    g = tmp_path / "g"
    shutil.copytree(calibrated_golden["golden"], g)
    before = (g / "golden.json").read_bytes()
    p = subprocess.run([sys.executable, "-c", KILL_BLESS, path, str(calibrated_golden["r2"]), str(g)], capture_output=True,
                       text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    if path == "exchange":
        assert p.returncode == 0, p.stderr  # one atomic swap: no rename of the golden, nothing to kill it between
        assert json.loads((g / "golden.json").read_text())["source"]["run_id"] == "r2"
    else:
        assert p.returncode == -9, p.stderr
        assert not g.exists() and list(tmp_path.glob(".g.old-*"))  # the state the issue found
        code, _, err = cli("compare", calibrated_golden["r3"], "--golden", g, "--out", tmp_path / "c.json")
        assert code in (0, 20), err  # recovered, not "not a golden"
        assert (g / "golden.json").read_bytes() == before and not list(tmp_path.glob(".g.old-*"))
    assert cli("bless", calibrated_golden["r2"], "--to", g, "--force")[0] == 0
    assert sorted(x.name for x in tmp_path.iterdir() if x.name.startswith(".g")) == []


def test_22_7_a_planted_temp_symlink_is_never_followed(tmp_path, cli, server):
    out = tmp_path / "r"
    assert cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", server.url, "--model", "m", "--quiet",
               "--out", out)[0] == 0
    victim = tmp_path / "victim"
    victim.write_text("precious")
    for name in ("rep.html.tmp", ".rep.html.tmp", "summary.json.tmp", "verdicts.jsonl.tmp"):
        (out / name).symlink_to(victim)
    assert cli("report", out, "-o", out / "rep.html")[0] == 0
    assert cli("score", out)[0] == 0
    assert victim.read_text() == "precious"
    assert (out / "rep.html").is_file() and not (out / "rep.html").is_symlink()
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp") and not p.is_symlink()]  # no temp file left behind
    # The lock and the journal are opened O_NOFOLLOW too: a symlinked responses.jsonl is refused, not appended through.
    from verifier import safewrite
    from verifier.execution import journal as j

    (out / "responses.jsonl").unlink()
    (out / "responses.jsonl").symlink_to(victim)
    with pytest.raises(OSError):
        j.Journal(out)
    assert victim.read_text() == "precious"
    # One helper creates every new file: O_EXCL|O_NOFOLLOW refuses an existing path or symlink.
    with pytest.raises(FileExistsError):
        safewrite.create_new(out / "rep.html.tmp")


PROXY_RSS = """
import json, resource, sys, httpx
from verifier.testbed.proxy import Proxy
with Proxy(sys.argv[1], ["usage_dropped"], seed=0) as proxy:
    n = 0
    with httpx.stream("POST", proxy.url + "/chat/completions", json={"model": "m", "messages": []}, timeout=120) as r:
        for b in r.iter_raw():
            n += len(b)
print(json.dumps({"bytes": n, "status": r.status_code, "rss_mb": int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))
"""


def test_22_12_the_proxy_passes_a_400_mb_body_without_buffering_it():
    """`--fault usage_dropped` (a response fault) in front of a 400 MB body peaked at 1.68 GB: past the cap the
    body is forwarded as it comes, unmutated. Proxy and client in one child process: its peak RSS."""
    with HostileServer("big_json") as srv:
        p = subprocess.run([sys.executable, "-c", PROXY_RSS, srv.url], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    doc = json.loads(p.stdout)
    assert doc["status"] == 200 and doc["bytes"] > 400 * 2**20, doc  # all of it, as it came
    assert doc["rss_mb"] < 500, doc


def test_22_12_the_proxy_still_mutates_bodies_under_its_cap():
    import httpx

    from verifier.testbed.proxy import Proxy

    with HostileServer("padded", pad_mb=2) as srv:
        with Proxy(srv.url, ["usage_dropped"], seed=0, max_response_bytes=4 * 2**20) as proxy:
            small = httpx.post(proxy.url + "/chat/completions", json={"model": "m", "messages": []}, timeout=60).json()
        with Proxy(srv.url, ["usage_dropped"], seed=0, max_response_bytes=2**20) as proxy:
            big = httpx.post(proxy.url + "/chat/completions", json={"model": "m", "messages": []}, timeout=60).json()
    assert "usage" not in small and "usage" in big  # rewritten under the cap; over it, passed on unmutated


def test_22_14_extra_body_credentials_are_secrets(tmp_path, cli):
    cred = "gw-extraSECRET-13579bdfhjlnp"
    extra = json.dumps({"api_key": cred, "gateway": {"Authorization": "Bearer " + cred + "2"}, "max_tokens": 5,
                        "chat_template_kwargs": {"enable_thinking": False}})
    with HostileServer("echo") as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", srv.url, "--model", "m", "--quiet",
                           "--out", tmp_path / "r", "--extra-body", extra, "--probes")
        assert code == 0, err
        sent = [r["body"] for r in srv.requests if r["method"] == "POST"]
        # The server got the real values, probes included (run.json's masked copy is never what is sent).
        assert sent and all(b["api_key"] == cred and b["gateway"]["Authorization"] == "Bearer " + cred + "2" for b in sent)
        hdr = json.loads((tmp_path / "r" / "run.json").read_text())
        assert hdr["extra_body"] == {"api_key": "***", "gateway": {"Authorization": "***"}, "max_tokens": 5,
                                     "chat_template_kwargs": {"enable_thinking": False}}
        # A resume needs the real values back: refused without --extra-body, accepted with it.
        (tmp_path / "r" / "responses.jsonl").write_text("")
        code, _, err = cli("run", "--resume", tmp_path / "r", "--base-url", srv.url, "--quiet")
        assert code == 2 and "--extra-body" in err and cred not in err, err
        code, _, err = cli("run", "--resume", tmp_path / "r", "--base-url", srv.url, "--quiet", "--extra-body", extra)
        assert code == 0, err
    # The server answered every sample echoing the credential (whole, bare, split across chunks, escaped): no file
    # holds it all the same.
    records = [json.loads(line) for line in (tmp_path / "r" / "responses.jsonl").read_text().splitlines()]
    assert records and all(r["status"] == 200 for r in records), records
    for p in (tmp_path / "r").iterdir():
        if p.is_file():
            assert "extraSECRET" not in p.read_text(errors="replace"), p.name


def test_22_15_gate_checks_every_output_path_before_the_first_request(tmp_path, cli, calibrated_golden):
    with HostileServer("fine") as srv:
        for flag in ("--report", "--junit", "--markdown"):
            code, _, err = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m", "--quiet",
                               "--out", tmp_path / f"gate{flag}", flag, "/proc/verifier-out.file")
            assert code == 2 and err.count("\n") == 1 and "/proc/verifier-out.file" in err, (flag, err)
        code, _, err = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m", "--quiet",
                           "--out", "/proc/verifier-gate-dir")
        assert code == 2 and err.count("\n") == 1, err
        assert srv.requests == []  # not one request: no preflight, no /models, no sample
