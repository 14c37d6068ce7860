"""`verifier testbed serve`: the documented test endpoint, driven as a user would, in a subprocess."""

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def start(*args):
    """The real command; returns (process, base URL) once the URL line appears (deadline 30 s)."""
    p = subprocess.Popen([sys.executable, "-m", "verifier", "testbed", "serve", "--port", "0", *args], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True).start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            return p, lines.get(timeout=0.2).strip()
        except queue.Empty:
            assert p.poll() is None, p.stderr.read()
    p.kill()
    raise AssertionError("no URL line within 30 s")


def stop(p):
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=15) == 0
    return p.stderr.read()


def test_serve_prints_url_and_answers_the_smoke_suite(tmp_path, cli):
    p, url = start()
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(url + "/models", timeout=10) as r:
            assert json.load(r)["object"] == "list"  # it serves any model name and lists none
        code, out, _ = cli("run", "--suite", "smoke", "--smoke", "--base-url", url, "--model", "test", "--quiet",
                           "--out", tmp_path / "run")
        assert code == 0
        summary = json.loads((tmp_path / "run" / "summary.json").read_text())
        assert summary["suites"]["smoke"]["metrics"]["accuracy"]["value"] == 1.0  # arithmetic by default
        # The shipped demo golden gates it clean.
        code, _, _ = cli("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--base-url", url, "--model", "test",
                         "--quiet", "--out", tmp_path / "gate")
        assert code == 0
    finally:
        err = stop(p)
    assert "verifier run --suite smoke" in err  # the hint a new user reads


def test_serve_with_fault_goes_through_the_proxy(tmp_path, cli):
    p, url = start("--fault", "answer_in_reasoning")
    try:
        code, _, _ = cli("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--base-url", url, "--model", "test",
                         "--quiet", "--out", tmp_path / "gate")
        assert code == 10  # frontend regression, as in `verifier demo`
    finally:
        stop(p)


def test_serve_with_fault_listens_on_the_port_asked_for(tmp_path, cli):
    """`--port P --fault F`: P is the faulty endpoint (a gate on P fails), the healthy server takes another port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = subprocess.Popen([sys.executable, "-m", "verifier", "testbed", "serve", "--port", str(port), "--fault", "answer_in_reasoning"],
                         cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url = p.stdout.readline().strip()
        assert url == f"http://127.0.0.1:{port}/v1", p.stderr.read() if p.poll() is not None else url
        code, _, _ = cli("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--base-url", url, "--model", "test",
                         "--quiet", "--out", tmp_path / "gate")
        assert code == 10
    finally:
        err = stop(p)
    healthy = [w for w in err.split() if w.startswith("http://127.0.0.1:") and w != f"http://127.0.0.1:{port}/v1"]
    assert healthy and "the healthy server behind it" in err, err


def test_serve_bad_port_is_a_usage_error():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run([sys.executable, "-m", "verifier", "testbed", "serve", "--port", str(port)], cwd=ROOT,
                           capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 2 and "--port" in r.stderr and r.stdout == ""


def test_serve_flags_match_the_server_module():
    import argparse

    from verifier.cli import testbed
    from verifier.testbed import server

    def options(add):
        p = argparse.ArgumentParser()
        add(p)
        return sorted((tuple(a.option_strings), a.dest, a.default, tuple(a.choices or ())) for a in p._actions)

    assert options(testbed.add_arguments) == options(server.add_arguments)
    assert testbed.RESPONDER_NAMES == tuple(sorted(server.RESPONDERS))
