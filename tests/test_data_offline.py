"""Datasets that are neither local nor fetchable: exit 2 within seconds, one line with the way out.

Offline is simulated, never the network: HF_ENDPOINT points at a closed 127.0.0.1 port.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens here now: a connect is refused at once
    return port


def offline_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"))}
    env.update(HF_ENDPOINT=f"http://127.0.0.1:{closed_port()}", PYTHONPATH=str(ROOT))
    return env


def verifier(*args, env):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "verifier", *map(str, args)], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=60)
    return p, time.monotonic() - t0


@pytest.mark.parametrize("suite,name", [("gsm8k", "openai/gsm8k"), ("structured", "epfl-dlab/JSONSchemaBench")])
def test_hub_dataset_offline_is_a_usage_error(server, tmp_path, suite, name):
    extra = ["--limit", "200"] if suite == "structured" else ["--limit", "5"]  # structured: past the built-in items
    p, took = verifier("run", "--suite", suite, *extra, "--base-url", server.url, "--model", "m", "--quiet",
                       "--out", tmp_path / "run", env=offline_env())
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert name in lines[0] and "127.0.0.1" in lines[0] and "--data" in lines[0] and "--smoke" in lines[0]
    assert "internal error" not in p.stderr and "Retrying" not in p.stderr
    # Bounded by the 3 s connect probe, not a 30-40 s retry loop; a loaded CI machine adds start-up time, so the
    # bound here is loose and the figure itself (about 3 s) is a measurement, not timed in a test.
    assert took < 20, f"took {took:.1f}s"
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_hub_offline_mode_cache_miss_is_a_usage_error(server, tmp_path):
    """HF_HUB_OFFLINE=1 and no cached copy: no probe, the same one-line error, fast."""
    env = offline_env()
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", HF_HOME=str(tmp_path / "hf"))
    p, took = verifier("run", "--suite", "gsm8k", "--limit", "5", "--base-url", server.url, "--model", "m", "--quiet",
                       "--out", tmp_path / "run", env=env)
    assert p.returncode == 2, p.stderr
    assert "openai/gsm8k" in p.stderr and "--data PATH" in p.stderr and len(p.stderr.strip().splitlines()) == 1
    # Bounded by the 3 s connect probe, not a 30-40 s retry loop; a loaded CI machine adds start-up time, so the
    # bound here is loose and the figure itself (about 3 s) is a measurement, not timed in a test.
    assert took < 20, f"took {took:.1f}s"


def test_lm_eval_task_offline_is_a_usage_error(server, tmp_path):
    p, took = verifier("lm-eval", "--task", "gsm8k", "--limit", "2", "--base-url", server.url, "--model", "m",
                       "--out", tmp_path / "run", env=offline_env())
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert "lm-eval task gsm8k" in line and "--data PATH" in line and "--import-samples" in line
    assert "--smoke" not in line  # lm-eval has no --smoke: the hint would be false
    assert "internal error" not in p.stderr
    # Bounded by the 3 s connect probe, not a 30-40 s retry loop; a loaded CI machine adds start-up time, so the
    # bound here is loose and the figure itself (about 3 s) is a measurement, not timed in a test.
    assert took < 20, f"took {took:.1f}s"


def test_probe_names_reachable_and_unreachable(server, monkeypatch):
    from suites import hub

    monkeypatch.setenv("HF_ENDPOINT", server.url.rsplit("/v1", 1)[0])
    assert hub.probe() is None
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert hub.probe()  # refused
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub.offline_mode()


def test_only_hub_failures_are_reported_as_the_hubs(monkeypatch):
    """lm-eval's call also talks to the endpoint under test: its connection errors stay what they are."""
    from suites import hub

    monkeypatch.setenv("HF_ENDPOINT", "https://huggingface.co")
    assert hub._from_the_hub(ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)"))
    assert hub._from_the_hub(OSError("HTTPSConnectionPool(host='huggingface.co', port=443): Max retries exceeded"))
    assert not hub._from_the_hub(ConnectionError("Cannot connect to host 127.0.0.1:8080"))
    assert not hub._from_the_hub(ValueError("Dataset 'x/y' doesn't exist on the Hub"))

    def endpoint_down():
        raise ConnectionError("Cannot connect to host 127.0.0.1:8080")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConnectionError):
        hub.load("lm-eval task t", endpoint_down)


def test_probe_goes_to_the_proxy_a_download_would_use(monkeypatch):
    from suites import hub

    for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "HF_ENDPOINT"):
        monkeypatch.delenv(k, raising=False)
    assert hub._probe_target() == ("huggingface.co", 443)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    assert hub._probe_target() == ("proxy.corp", 3128)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a plain-http mirror is reached directly
    assert hub._probe_target() == ("127.0.0.1", 9)
