"""Issue #16, the run-directory, golden and CLI half: no secret in any file written, resume refuses another
run's flags, one writer per run directory, no stale verdicts or mixed goldens, validated CLI values, a
closed stdout and a corrupt journal line handled. Every test drives the real command against 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from aiohttp import web

from conftest import SMOKE_RUN, reference_reply
from verifier.golden import store as golden_mod
from verifier import safewrite
from verifier.execution import journal
from verifier import scrub
from verifier.testbed.server import Reply, Script, TestServer, arithmetic, make_app

ROOT = Path(__file__).resolve().parent.parent
ENV_KEY = "sk-canary-ENVKEY-0123456789abcdef"
HDR_TOKEN = "hk-canary-HDR-24680acegikmoq"


@pytest.fixture(autouse=True)
def _forget_secrets():
    scrub.reset()
    yield
    scrub.reset()


@web.middleware
async def _echo(request: web.Request, handler):
    """A careless server: request headers echoed in server info and chat bodies, a bare token in a 401."""
    headers = dict(request.headers)
    if request.path == "/version":
        bare = headers.get("X-Api-Key", "").split()[-1]
        return web.json_response({"error": {"message": f"Incorrect API key provided: {bare}"}}, status=401)
    resp = await handler(request)
    if not isinstance(resp, web.Response) or resp.content_type != "application/json" or resp.text is None:
        return resp
    body = json.loads(resp.text)
    if isinstance(body, dict):  # server info and chat bodies alike
        body["echo"] = headers
        body["system_fingerprint"] = f"fp {headers.get('X-Api-Key')} {headers.get('Authorization')}"
    return web.json_response(body, status=resp.status)


async def _version(request: web.Request) -> web.Response:
    return web.json_response({})  # answered by _echo


class EchoServer(TestServer):
    __test__ = False

    async def _start(self) -> None:
        app = make_app(self.script)
        app.middlewares.append(_echo)
        app.router.add_get("/version", _version)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self._port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


def test_canary_secret_reaches_no_file(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("CANARY_KEY", ENV_KEY)
    step_summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step_summary))
    secret_flags = ["--api-key-env", "CANARY_KEY", "--header", f"X-Api-Key: Bearer {HDR_TOKEN}"]
    printed = []

    def run(*args):
        code, out, err = cli(*args)
        printed.append(out + err)
        return code, err

    script = Script(arithmetic)
    # A 401 whose message carries the bare token, for one sample.
    script.rule(r"What is 3 \+ 4", Reply(status=401, body=json.dumps({"error": {"message": f"Incorrect API key provided: {HDR_TOKEN}"}})))
    # The probes' prompt gets the key back in its content: probes.json quotes the start of that text.
    script.rule(r"Count from 1 to 30", Reply(content=f"{ENV_KEY} Bearer {HDR_TOKEN} 1 2 3"))
    with EchoServer(script) as srv:
        for name in ("ref", "r2", "r3"):
            code, err = run("run", *SMOKE_RUN, "--probes", "--base-url", srv.url, "--out", tmp_path / name, *secret_flags)
            assert code == 0, err
        g = tmp_path / "goldens" / "g"
        scrub.reset()  # offline commands run in processes that never saw a --header
        assert run("score", tmp_path / "ref")[0] == 0
        assert run("bless", tmp_path / "ref", "--to", g)[0] == 0
        code, err = run("calibrate", g, "--runs", tmp_path / "r2", "--base-url", srv.url, "--model", "m", "-k", "1",
                        "--out-prefix", tmp_path / "cal", "--quiet", *secret_flags)
        assert code == 0, err
        scrub.reset()
        assert run("compare", tmp_path / "r3", "--golden", g)[0] in (0, 20)
        code, err = run("gate", "--golden", g, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "gate", "--quiet", *secret_flags)
        assert code in (0, 20), err
        scrub.reset()
        code, err = run("report", tmp_path / "r3", "--golden", g, "-o", tmp_path / "rep" / "r.html", "--csv", tmp_path / "rep" / "s.csv")
        assert code == 0, err
        sent = json.dumps(script.headers)
    assert ENV_KEY in sent and HDR_TOKEN in sent  # the server did see (and echo) both secrets
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"run.json", "probes.json", "responses.jsonl", "golden.json", "samples.jsonl", "comparison.json",
            "report.html", "junit.xml", "summary.md", "samples.csv", "r.html", "s.csv", "step-summary.md"} <= names
    # Distinctive pieces of each secret (the tmp path itself holds the test's name).
    pieces = [ENV_KEY[-16:].encode(), HDR_TOKEN[-14:].encode(), b"ENVKEY", b"canary-HDR"]
    for p in files:
        data = p.read_bytes()
        assert not [x for x in pieces if x in data], p
    assert "***" in (tmp_path / "ref" / "responses.jsonl").read_text()  # the echo was there, and was masked
    assert "***" in (tmp_path / "ref" / "probes.json").read_text()
    assert not any(x.decode() in t for x in pieces for t in printed)


def test_proxy_log_carries_no_credential(tmp_path, cli):
    from verifier.testbed.proxy import Proxy

    log = tmp_path / "mutations.jsonl"
    with TestServer(Script(arithmetic)) as srv:
        # An upstream that echoes the client's key into the text a fault then moves (and the log quotes).
        srv.script.rule(r"What is 3 \+ 4", Reply(content=f"7, key Bearer {HDR_TOKEN}"))
        with Proxy(srv.url, ["answer_in_reasoning"], seed=0, log=log) as proxy:
            code, _, err = cli(*_small_run(proxy, tmp_path / "r", "--mode", "chat,chat-stream"),
                               "--header", f"X-Api-Key: Bearer {HDR_TOKEN}")
        assert code == 0, err
    text = log.read_text()
    assert len(text.splitlines()) == 8 and "7, key" in text and "***" in text  # the echo was logged, masked
    assert HDR_TOKEN not in text and "canary" not in text


def test_proxy_passes_a_body_nested_100k_deep_on_without_a_traceback(capfd):
    import httpx

    from verifier.testbed.proxy import Proxy

    deep = '{"model": "m", "messages": ' + "[" * 100000 + "]" * 100000 + "}"
    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["answer_in_reasoning"], seed=0) as proxy:
        r = httpx.post(proxy.url + "/chat/completions", content=deep, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400 and "invalid JSON" in r.text  # the upstream's answer, not a proxy 500
    assert "Traceback" not in capfd.readouterr().err


# ----------------------------------------------------------------------------- 14: resume mismatches

def _small_run(srv, out, *extra):
    return ["run", "--suite", "smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", "--limit", "4", *extra]


@pytest.mark.parametrize("flags, field", [
    (["--model", "other"], "--model"),
    (["--mode", "chat"], "--mode"),
    (["--suite", "smoke,bfcl"], "--suite"),
    (["--extra-body", '{"x": 1}'], "--extra-body"),
    (["--temperature", "0.7"], "--temperature"),
    (["--top-p", "0.5"], "--top-p"),
    (["--logprobs", "3"], "--logprobs"),
    (["--epochs", "3"], "--epochs"),
    (["--limit", "2"], "--limit"),
])
def test_resume_refuses_a_flag_that_differs(tmp_path, cli, flags, field):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        assert cli(*_small_run(srv, out, "--mode", "chat-stream"))[0] == 0
        before = (out / "responses.jsonl").read_bytes()
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet", *flags)
    assert code == 2 and field in err and "internal error" not in err and err.count("\n") == 1, err
    assert (out / "responses.jsonl").read_bytes() == before


def test_resume_refuses_another_host(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        assert cli(*_small_run(srv, out))[0] == 0
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url.replace("127.0.0.1", "localhost"), "--quiet")
    assert code == 2 and "--base-url" in err


def test_resume_refuses_a_server_that_serves_other_models(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic, listed=("m", "test-model"))) as srv:
        assert cli(*_small_run(srv, out))[0] == 0
    hdr = json.loads((out / "run.json").read_text())
    hdr["server_info"]["models"]["data"] = [{"id": "model-A"}]
    (out / "run.json").write_text(json.dumps(hdr))
    with TestServer(Script(arithmetic, listed=("m", "test-model"))) as srv:
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
    assert code == 2 and "model-A" in err and "test-model" in err


def test_resume_without_flags_takes_the_runs_own(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        assert cli(*_small_run(srv, out, "--mode", "chat-stream", "--temperature", "0.3", "--extra-body", '{"x": 1}'))[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    (out / "responses.jsonl").write_text("".join(lines[:2]))
    with TestServer(Script(arithmetic)) as srv:
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet", "--model", "m", "--temperature", "0.3")
        assert code == 0, err
        resent = srv.script.requests
    assert len(resent) == 2
    assert all(r["stream"] and r["temperature"] == 0.3 and r["x"] == 1 and r["model"] == "m" for r in resent)


# ----------------------------------------------------------------------------- 15: one writer

def test_a_second_writer_is_refused(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        assert cli(*_small_run(srv, out))[0] == 0
        (out / "responses.jsonl").write_text("")
        with journal.locked(out):  # another verifier process holds the run
            code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
            assert code == 2 and "in use by another verifier process" in err
            assert srv.script.requests[4:] == []  # nothing was sent twice
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
        assert code == 0, err  # released: the lock never outlives its holder


def test_two_concurrent_resumes_send_each_request_once(tmp_path, cli):
    import dataclasses
    import time

    out = tmp_path / "r"
    with TestServer(Script(lambda req: dataclasses.replace(arithmetic(req), delay_s=0.2))) as srv:
        assert cli(*_small_run(srv, out, "--limit", "6"))[0] == 0
        (out / "responses.jsonl").write_text("")
        sent_before = len(srv.script.requests)
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        first = subprocess.Popen([sys.executable, "-m", "verifier", "run", "--resume", str(out), "--base-url", srv.url,
                                  "--quiet", "--concurrency", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        deadline = time.monotonic() + 60
        while not (out / "responses.jsonl").read_text() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)  # polling for the first record: the first resume is now mid-run, holding the lock
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
        assert code == 2 and "in use by another verifier process" in err
        assert first.wait(timeout=60) == 0, first.stderr.read().decode()
        sent = len(srv.script.requests) - sent_before
    ids = [json.loads(line)["sample_id"] for line in (out / "responses.jsonl").read_text().splitlines()]
    assert sent == 6 and len(ids) == 6 == len(set(ids))


# ----------------------------------------------------------------------------- 16: stale verdicts, atomic bless

def test_compare_rescores_a_journal_changed_since_scoring(calibrated_golden, tmp_path, cli):
    with TestServer(Script(reference_reply)) as srv:
        srv.script.rule(r"What is 3 \+ 4", Reply(status=503))
        assert cli("run", *SMOKE_RUN, "--base-url", srv.url, "--out", tmp_path / "a")[0] == 0
    assert any(json.loads(l)["outcome"] == "infra" for l in (tmp_path / "a" / "verdicts.jsonl").read_text().splitlines())
    # A resume re-sent the failed request, then was killed before scoring: the journal is newer than the verdicts.
    shutil.copy(calibrated_golden["r2"] / "responses.jsonl", tmp_path / "a" / "responses.jsonl")
    code, _, err = cli("compare", tmp_path / "a", "--golden", calibrated_golden["golden"])
    assert code == 0, err
    verdicts = [json.loads(l) for l in (tmp_path / "a" / "verdicts.jsonl").read_text().splitlines()]
    assert verdicts and all(v["outcome"] == "content" for v in verdicts)
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["responses_digest"] == journal.file_digest(tmp_path / "a" / "responses.jsonl")


def test_bless_never_leaves_a_mixed_golden(calibrated_golden, tmp_path, cli, monkeypatch):
    g = tmp_path / "g"
    shutil.copytree(calibrated_golden["golden"], g)
    (g / "NOTES.md").write_text("why this golden")
    before = {p.name: p.read_bytes() for p in g.iterdir()}
    real = safewrite.write_json

    def killed(path, obj):
        if Path(path).name == golden_mod.GOLDEN:
            raise KeyboardInterrupt  # a kill between bless's two file writes
        real(path, obj)

    monkeypatch.setattr(golden_mod.safewrite, "write_json", killed)
    assert cli("bless", calibrated_golden["r2"], "--to", g, "--force")[0] == 130
    assert {p.name: p.read_bytes() for p in g.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]  # no half-built directory left beside it
    monkeypatch.setattr(golden_mod.safewrite, "write_json", real)
    assert cli("bless", calibrated_golden["r2"], "--to", g, "--force")[0] == 0
    gj = json.loads((g / "golden.json").read_text())
    assert gj["source"]["run_id"] == "r2" and (g / "NOTES.md").read_text() == "why this golden"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g"]


# ----------------------------------------------------------------------------- 18: CLI values

BAD_VALUES = [
    (["--limit", "0"], "--limit"), (["--limit", "-1"], "--limit"), (["--epochs", "0"], "--epochs"),
    (["--timeout", "0"], "--timeout"), (["--timeout", "-1"], "--timeout"), (["--timeout", "inf"], "--timeout"),
    (["--temperature", "nan"], "--temperature"), (["--top-p", "inf"], "--top-p"),
    (["--concurrency", "0"], "--concurrency"), (["--max-retries", "-1"], "--max-retries"),
    (["--max-tokens", "0"], "--max-tokens"), (["--concurrency", "two"], "--concurrency"),
]


@pytest.mark.parametrize("flags, field", BAD_VALUES)
def test_meaningless_values_are_refused_before_anything_runs(tmp_path, cli, capsys, flags, field):
    with TestServer(Script(arithmetic)) as srv:
        with pytest.raises(SystemExit) as e:
            cli(*_small_run(srv, tmp_path / "r"), *flags)
        assert srv.script.requests == []
    err = capsys.readouterr().err
    assert e.value.code == 2 and field in err and not (tmp_path / "r").exists()


@pytest.mark.parametrize("url, why", [("http://user:pw@127.0.0.1:9/v1", "credentials"),
                                      ("http://127.0.0.1:99999/v1", "valid URL"), ("ftp://127.0.0.1/v1", "http")])
def test_bad_base_urls_exit_2_with_one_line(tmp_path, cli, url, why):
    for args in (("run", "--suite", "smoke", "--out", tmp_path / "r"),
                 ("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--out", tmp_path / "g")):
        code, _, err = cli(*args, "--base-url", url, "--model", "m", "--quiet")
        assert code == 2 and why in err and err.count("\n") == 1 and "pw@" not in err, err
        assert not (tmp_path / "r").exists() and not (tmp_path / "g").exists()


def test_gate_and_compare_values(tmp_path, cli, capsys):
    for args, field in ((["gate", "--golden", "g", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--looks", "0"], "--looks"),
                        (["compare", "r", "--golden", "g", "--infra-budget", "1.5"], "--infra-budget"),
                        (["gate", "--golden", "g", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--infra-budget", "nan"], "--infra-budget"),
                        (["calibrate", "g", "-k", "0"], "-k")):
        with pytest.raises(SystemExit) as e:
            cli(*args)
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"argument {field}" in err, (args, err)


def test_gate_file_values_are_validated_like_flags(tmp_path, cli):
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "{ROOT / "goldens" / "demo-smoke"}"\n[endpoint]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\ntimeout = 0\n')
    code, _, err = cli("gate", "--config", cfg)
    assert code == 2 and "timeout = 0" in err and "internal error" not in err, err


def test_proxy_bad_port_exits_2(cli):
    code, _, err = cli("proxy", "--upstream", "http://127.0.0.1:9/v1", "--port", "70000")
    assert code == 2 and "--port" in err and "internal error" not in err


def test_merge_refuses_the_same_run_twice(server, tmp_path, cli):
    assert cli(*_small_run(server, tmp_path / "a"))[0] == 0
    code, _, err = cli("merge", tmp_path / "a", tmp_path / "a", "--out", tmp_path / "m")
    assert code == 2 and "same run" in err and not (tmp_path / "m").exists()
    shutil.copytree(tmp_path / "a", tmp_path / "copy")
    code, _, err = cli("merge", tmp_path / "a", tmp_path / "copy", "--out", tmp_path / "m")
    assert code == 2 and "same run" in err


def test_unwritable_targets_exit_2_with_one_line(server, tmp_path, cli):
    assert cli(*_small_run(server, tmp_path / "a"))[0] == 0
    (tmp_path / "file").write_text("x")
    (tmp_path / "dir").mkdir()
    cases = [
        ("report", tmp_path / "a", "-o", tmp_path / "dir"),                          # report -o DIR
        ("report", tmp_path / "a", "-o", tmp_path / "file" / "r.html"),              # parent is a file
        ("report", tmp_path / "a", "--csv", tmp_path / "dir"),
        ("bless", tmp_path / "a", "--to", tmp_path / "file" / "g"),
        ("compare", tmp_path / "a", "--golden", ROOT / "goldens" / "demo-smoke", "--out", tmp_path / "dir"),
        ("run", "--suite", "smoke", "--base-url", server.url, "--model", "m", "--out", tmp_path / "file" / "r", "--quiet"),
        # Read-only even for root: procfs refuses new files.
        ("report", tmp_path / "a", "-o", "/proc/verifier-report.html"),
        ("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--base-url", server.url, "--model", "m", "--out", "/proc/verifier-gate", "--quiet"),
    ]
    for args in cases:
        code, _, err = cli(*args)
        assert code == 2 and err.count("\n") == 1 and "internal error" not in err, (args, err)


# ----------------------------------------------------------------------------- 19: closed stdout, corrupt journal

def test_gate_into_a_closed_pipe_still_writes_its_report(calibrated_golden, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with TestServer(Script(reference_reply)) as srv:
        p = subprocess.Popen([sys.executable, "-m", "verifier", "gate", "--golden", str(calibrated_golden["golden"]),
                              "--base-url", srv.url, "--model", "m", "--out", str(tmp_path / "gate"), "--quiet",
                              "--logprobs", "1", "--max-retries", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        p.stdout.close()  # `| head` that has already gone
        err = p.stderr.read().decode()
        code = p.wait(timeout=120)
    assert code == 0, err
    assert "Traceback" not in err and "BrokenPipe" not in err
    for name in ("report.html", "junit.xml", "summary.md", "samples.csv", "comparison.json"):
        assert (tmp_path / "gate" / name).is_file(), name


def test_a_corrupt_line_in_the_middle_of_a_journal_names_file_and_line(server, tmp_path, cli):
    out = tmp_path / "r"
    assert cli(*_small_run(server, out))[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    lines[1] = lines[1][: len(lines[1]) // 2] + "\n"
    (out / "responses.jsonl").write_text("".join(lines))
    for args in (("score", out), ("report", out), ("run", "--resume", out, "--base-url", server.url, "--quiet")):
        code, _, err = cli(*args)
        assert code == 2 and "responses.jsonl" in err and "line 2" in err and err.count("\n") == 1, (args, err)
    # A torn last line (killed mid-write) is still not corruption.
    (out / "responses.jsonl").write_text("".join(lines[:1]) + lines[2][:10])
    assert cli("score", out)[0] == 0


@pytest.mark.parametrize("edit", ["unknown key", "object sample_id", "string epoch", "no request", "chunk not text"])
def test_a_journal_record_of_the_wrong_shape_exits_2_naming_the_line(server, tmp_path, cli, edit):
    """Issue 49 item 14: a record with a key no writer makes, or an object where the sample id goes, is bad input
    (exit 2, one line naming file, line and field), never an internal error (exit 1)."""
    out = tmp_path / "r"
    assert cli(*_small_run(server, out))[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    rec = json.loads(lines[1])
    if edit == "unknown key":
        rec["surprise"] = 1
        field = "surprise"
    elif edit == "object sample_id":
        rec["sample_id"] = {"x": 1}
        field = "$.sample_id"
    elif edit == "string epoch":
        rec["epoch"] = "0"
        field = "$.epoch"
    elif edit == "no request":
        del rec["request"]
        field = "request"
    else:
        rec["chunks"] = ["data", {"x": 1}]
        field = "$.chunks"
    lines[1] = json.dumps(rec) + "\n"
    (out / "responses.jsonl").write_text("".join(lines))
    for args in (("score", out), ("report", out)):
        code, _, err = cli(*args)
        assert code == 2 and "responses.jsonl" in err and "line 2" in err and field in err, (args, err)
        assert err.count("\n") == 1 and "Traceback" not in err, err


def test_a_samples_row_of_the_wrong_shape_exits_2_naming_the_line(server, tmp_path, cli):
    out = tmp_path / "r"
    assert cli(*_small_run(server, out))[0] == 0
    lines = (out / "samples.jsonl").read_text().splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["id"] = {"x": 1}
    lines[0] = json.dumps(rec) + "\n"
    (out / "samples.jsonl").write_text("".join(lines))
    code, _, err = cli("score", out)
    assert code == 2 and "samples.jsonl" in err and "line 1" in err and "$.id" in err and err.count("\n") == 1, err


SPLIT_KEY = "sk-proj-Zq81xWv2LmN0pR7sT4uY6bC3dE5fG9hJ"


def _spelling_server(req):
    """A server that echoes the key: spelled by the top_logprobs of successive tokens (rank 0 on one sample, rank 1
    on another, the chosen tokens on a third) while the text says something else; its first 20 characters as a
    tool's name; and as a 16-character prefix in the content."""
    import re as _re

    m = _re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    a = int(m.group(1)) + int(m.group(2))
    pieces = [SPLIT_KEY[i:i + 3] for i in range(0, len(SPLIT_KEY), 3)]
    if a % 4 == 0:
        rank = a % 8 // 4  # rank 0 or 1
        entries = [{"token": "ok", "logprob": -0.1,
                    "top_logprobs": [{"token": "x", "logprob": -0.5}] * rank + [{"token": p, "logprob": -0.2}]}
                   for p in pieces]
        return Reply(content="ok" * len(pieces), logprobs=True, logprob_entries=entries)
    if a % 4 == 1:
        entries = [{"token": p, "logprob": -0.1, "top_logprobs": []} for p in pieces]
        return Reply(content=str(a), logprobs=True, logprob_entries=entries)
    if a % 4 == 2:
        return Reply(content=None, tool_calls=[{"name": SPLIT_KEY[:20], "arguments": "{}"}])
    return Reply(content=f"the answer is {a}; my key begins {SPLIT_KEY[:16]}...")


def test_a_key_spelled_across_tokens_or_as_a_long_prefix_reaches_no_file(tmp_path, cli, monkeypatch):
    """Issue 49 item 9: with logprobs on, an endpoint that spells the key across the top_logprobs of successive tokens
    (or across the chosen tokens) leaves the key in no file, read in any rank's order; nor does a tool name holding
    the key's first 20 characters, or a 16-character prefix in the text (PREFIX_MIN = 12 in verifier/redact.py)."""
    monkeypatch.setenv("SPLIT_KEY", SPLIT_KEY)
    run = tmp_path / "run"
    with TestServer(Script(_spelling_server)) as srv:
        code, _, err = cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream",
                           "--logprobs", "2", "--max-retries", "0", "--api-key-env", "SPLIT_KEY",
                           "--base-url", srv.url, "--out", run)
    assert code == 0, err
    scrub.reset()
    assert cli("score", run)[0] == 0
    assert cli("bless", run, "--to", tmp_path / "g")[0] == 0
    code, _, err = cli("report", run, "-o", tmp_path / "rep" / "r.html", "--csv", tmp_path / "rep" / "s.csv")
    assert code == 0, err
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert {"responses.jsonl", "observations.jsonl", "samples.jsonl", "r.html", "s.csv"} <= {p.name for p in files}
    windows = {SPLIT_KEY[i:i + 12] for i in range(0, 20 - 12 + 1)}  # every 12 characters of the 20 given away

    def spelled(o, acc):
        """Token strings of every logprob entry, per rank, in document order (as a reader would join them)."""
        if isinstance(o, dict):
            if isinstance(o.get("token"), str):
                acc.setdefault("chosen", []).append(o["token"])
            for r, alt in enumerate(o.get("top_logprobs") or [] if isinstance(o.get("top_logprobs"), list) else []):
                if isinstance(alt, dict) and isinstance(alt.get("token"), str):
                    acc.setdefault(r, []).append(alt["token"])
            for v in o.values():
                if not (isinstance(v, dict) and "token" in v):
                    spelled(v, acc)
        elif isinstance(o, list):
            if o and all(isinstance(x, list) and len(x) == 2 for x in o):  # observations: [[token, logprob], ...]
                acc.setdefault("pairs", []).append("".join(x[0] for x in o if isinstance(x[0], str)))
            for v in o:
                spelled(v, acc)
        elif isinstance(o, str) and o[:1] in "{[":
            try:
                spelled(json.loads(o), acc)
            except ValueError:
                pass
        return acc

    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        assert not [w for w in windows if w in text], p
        if p.suffix == ".jsonl":
            for line in text.splitlines():
                joined = {k: "".join(v) for k, v in spelled(json.loads(line), {}).items()}
                assert not [k for k, v in joined.items() if SPLIT_KEY[8:20] in v], (p, joined)
    assert "***" in (run / "responses.jsonl").read_text()


def test_prefixes_and_token_splits_in_the_redactor():
    from verifier.redact import PREFIX_MIN, Redactor

    r = Redactor([SPLIT_KEY])
    assert r.text(f"name {SPLIT_KEY[:20]} end") == "name *** end"
    assert r.text(f"{SPLIT_KEY[:PREFIX_MIN]}") == "***"
    assert r.text(f"{SPLIT_KEY[:PREFIX_MIN - 1]}") == SPLIT_KEY[:PREFIX_MIN - 1]  # too short to matter: kept
    assert r.text(f"{SPLIT_KEY[:16]}!! and {SPLIT_KEY}") == "***!! and ***"
    body = json.dumps({"choices": [{"index": 0, "message": {"content": "ok"}, "logprobs": {"content": [
        {"token": "ok", "logprob": -1, "top_logprobs": [{"token": SPLIT_KEY[i:i + 5], "logprob": -2}]}
        for i in range(0, len(SPLIT_KEY), 5)]}}]})
    out = r.record({"body": body, "chunks": None})
    tops = "".join(t["top_logprobs"][0]["token"] for t in json.loads(out["body"])["choices"][0]["logprobs"]["content"])
    assert SPLIT_KEY[:PREFIX_MIN] not in tops and "***" in tops
