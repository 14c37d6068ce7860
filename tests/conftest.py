import contextlib
import os
import tempfile
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from verifier.testbed.server import Reply, Script, TestServer, arithmetic
from verifier import safewrite as _safewrite

# Every comparison document the suite writes through verifier/safewrite.py is read back as the typed Comparison first: its
# to_dict() must give the same document, key order included (issue 23: the typed documents keep today's bytes).
# Installed at import, so session- and module-scoped fixtures' gates are checked too.
_write_json = _safewrite.write_json
COMPARISON_ROUND_TRIPS = [0]


def _round_tripped_write_json(path, obj):
    import json

    if isinstance(obj, dict) and {"status", "suites", "frontend", "quantization"} <= set(obj):
        from verifier.attribution.document import Comparison

        back = Comparison.from_dict(obj).to_dict()
        assert json.dumps(back) == json.dumps(obj), f"Comparison.from_dict(d).to_dict() != d for {path}"
        COMPARISON_ROUND_TRIPS[0] += 1
    _write_json(path, obj)


_safewrite.write_json = _round_tripped_write_json


def pytest_unconfigure(config):
    # The process ends next and its objects go with it: without this the collector walks the whole heap (every test's
    # leftovers) while the interpreter shuts down, as `verifier` itself avoids (cli/main.py `entry`).
    import gc

    gc.freeze()


def pytest_terminal_summary(terminalreporter):
    if COMPARISON_ROUND_TRIPS[0]:
        terminalreporter.write_line(f"comparison documents round-tripped through Comparison: {COMPARISON_ROUND_TRIPS[0]}")

ROOT = Path(__file__).resolve().parent.parent
# Every error line any test provokes is checked: a hint naming a flag its command lacks fails loudly (cli/parser.py).
os.environ.setdefault("VERIFIER_CHECK_HINTS", "1")
# Compiled lm-eval tasks (suites/lm_eval_compiled.py) go to a cache of the test session's own, never the user's.
os.environ.setdefault("VERIFIER_CACHE_DIR", tempfile.mkdtemp(prefix="verifier-test-cache-"))
os.environ.setdefault("VERIFIER_CONFIG_DIR", tempfile.mkdtemp(prefix="verifier-test-config-"))  # the seal key (verifier/seal.py)
SHARED = Path(os.environ.get("VERIFIER_SHARED_DATA", ROOT.parent / "shared" / "data"))


# Start-up of a `verifier` subprocess takes 4-9 s on a loaded 2-core machine: waits are generous deadlines on a
# polled condition, never a fixed sleep, so a busy machine is slower but not red.
READY_DEADLINE_S = 60.0


def wait_until(cond: Callable[[], bool], what: str, deadline_s: float = READY_DEADLINE_S,
               proc: subprocess.Popen | None = None, interval_s: float = 0.05) -> None:
    """Poll `cond` until true; fail with `what` at the deadline, or as soon as `proc` has exited."""
    end = time.monotonic() + deadline_s
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"{what}: the process exited with {proc.returncode} first")
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {deadline_s:g} s")
        time.sleep(interval_s)


def http_ready(url: str, proc: subprocess.Popen | None = None, deadline_s: float = READY_DEADLINE_S) -> None:
    """Wait until GET `url` gets any HTTP answer (a server in another process has started)."""
    import httpx

    def up() -> bool:
        try:
            httpx.get(url, timeout=2.0, trust_env=False)
            return True
        except httpx.HTTPError:
            return False

    wait_until(up, f"{url} did not answer", deadline_s, proc)


@pytest.fixture(autouse=True)
def _fresh_secrets():
    """Each test starts as a new process would. CLI commands hold their own secrets (scrub.command()); this empties
    the process fallback that tests calling the application directly (outside any command) register into."""
    from verifier import scrub

    scrub.reset()
    yield
    scrub.reset()


@pytest.fixture
def server():
    with TestServer(Script(arithmetic)) as srv:
        yield srv


@pytest.fixture
def shared_data():
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set VERIFIER_SHARED_DATA)")
    return SHARED


@pytest.fixture
def cli(monkeypatch, capsys):
    """Drive the real `verifier` command in-process; returns (exit_code, stdout, stderr)."""
    from verifier.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


# The run flags every calibrated-golden test uses: smoke, both stream modes, logprobs for the drift signal.
SMOKE_RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-retries", "0"]


def reference_reply(req):
    """The healthy reference endpoint: the right sum, nothing else."""
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return Reply(content=str(int(m.group(1)) + int(m.group(2))))


def build_calibrated_golden(tmp: Path) -> dict[str, Path]:
    """Three reference runs, the first blessed into tmp/goldens/smoke-ref and calibrated with the other two."""
    from verifier.cli import main

    with TestServer(Script(reference_reply)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *SMOKE_RUN, "--base-url", srv.url, "--out", str(tmp / name)]) == 0
    golden = tmp / "goldens" / "smoke-ref"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return {"golden": golden, "ref": tmp / "ref", "r2": tmp / "r2", "r3": tmp / "r3"}


def zero_margins(golden: Path) -> None:
    """Margins calibrated from the golden's own observations against themselves: every margin 0 (a test's golden
    made on a deterministic test server, where any difference is the fault under test)."""
    from verifier.attribution import compare
    from verifier.golden import store
    from verifier.golden.model import margins_from_json

    rows = store.load(golden).observations
    store.save_margins(golden, margins_from_json(compare.calibrate_margins([rows, rows], {"method": "test", "k": 2})))


@pytest.fixture(scope="session")
def calibrated_golden(tmp_path_factory):
    """Built once per session and shared by every module: treat it as read-only (copy it before changing it)."""
    return build_calibrated_golden(tmp_path_factory.mktemp("calibrated"))


def require_engine(model: str = "smollm2") -> None:
    """The e2e tier's precondition: llama-server and the packaged `model`. Skips locally; under CI=true a missing
    engine fails, so a broken install can never pass as a skipped tier."""
    from verifier.testbed import engines

    try:
        engines.binary("llama-server")
        engines.base_model(model)
    except engines.EngineError as e:
        if os.environ.get("CI"):
            pytest.fail(f"e2e tier needs the engine and model: {e}")
        pytest.skip(str(e))


@contextlib.contextmanager
def engine_server(tmp_path_factory, model: str = "smollm2", **kw):
    """The e2e tier's llama-server for `model` (require_engine first), its log in a fresh temp directory."""
    from verifier.testbed import engines

    require_engine(model)
    with engines.Server(model, log_path=tmp_path_factory.mktemp("engine") / "llama-server.log", **kw) as srv:
        yield srv


def require_vllm(model: str = "qwen0.5b") -> None:
    """The vLLM e2e precondition: vLLM's own venv (docs/engines.md) and the packaged `model`. Skips locally; fails under CI."""
    from verifier.testbed import engines, vllm_engine

    try:
        vllm_engine.vllm_python()
        engines.base_model(model)
    except engines.EngineError as e:
        if os.environ.get("CI"):
            pytest.fail(f"vLLM e2e tests need vLLM and the model: {e}")
        pytest.skip(str(e))


@contextlib.contextmanager
def vllm_server(tmp_path_factory, model: str = "qwen0.5b", **kw):
    """The e2e tier's vLLM server for `model` (require_vllm first), its log in a fresh temp directory.

    Small by default to bound CI: a 2048-token context and 1 GiB of KV cache."""
    from verifier.testbed import vllm_engine

    require_vllm(model)
    kw = {"max_model_len": 2048, "kv_cache_space_gib": 1, **kw}
    with vllm_engine.VllmServer(model, log_path=tmp_path_factory.mktemp("vllm") / "vllm.log", **kw) as srv:
        print(f"vLLM {srv.name} ready in {srv.startup_s} s", file=sys.stderr)
        yield srv
