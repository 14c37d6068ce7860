"""Ctrl-C and SIGTERM on the real command: the journal stays whole, and the printed commands continue the work."""

import json
import os
import shlex
import signal
import socket
import subprocess
import sys

import pytest

from conftest import ROOT, http_ready, wait_until

ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture
def slow_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-m", "verifier.testbed.server", "--port", str(port), "--delay", "0.2"], env=ENV)
    try:
        base = f"http://127.0.0.1:{port}/v1"
        http_ready(base + "/models", srv)
        yield base
    finally:
        srv.terminate()
        srv.wait(30)


def _sigint_default():
    # A shell without job control starts background jobs with SIGINT ignored, and a child inherits that: Python
    # then installs no KeyboardInterrupt handler and the Ctrl-C this test sends could never arrive.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _interrupt(cmd, out, sig, cwd):
    p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
    f = out / "responses.jsonl"
    wait_until(lambda: f.exists() and f.read_text().count("\n") >= 3, "3 journal lines", proc=p)
    p.send_signal(sig)
    stdout, stderr = p.communicate(timeout=60)
    return p.returncode, stderr


def _steps(stderr):
    return [line.split(": ", 1)[1] for line in stderr.splitlines() if line.startswith(("  continue with: ", "  then: "))]


def _journal_whole(out):
    lines = (out / "responses.jsonl").read_bytes().splitlines(keepends=True)
    assert lines and all(line.endswith(b"\n") for line in lines)
    return [json.loads(line) for line in lines]


@pytest.mark.parametrize("sig,code,word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_run_interrupted_prints_the_real_resume_command_and_it_finishes(sig, code, word, slow_server, tmp_path):
    out = tmp_path / "r"
    cmd = [sys.executable, "-m", "verifier", "run", "--suite", "smoke", "--base-url", slow_server, "--model", "m",
           "--out", str(out), "--quiet", "--concurrency", "1"]
    rc, stderr = _interrupt(cmd, out, sig, tmp_path)
    assert rc == code, stderr
    assert f"verifier: {word}; the journal is consistent:" in stderr and str(out) in stderr, stderr
    n = len(_journal_whole(out))
    assert 3 <= n < 20
    steps = _steps(stderr)
    assert steps == [f"verifier run --resume {out} --base-url {slow_server}"], stderr
    argv = shlex.split(steps[0])
    r = subprocess.run([sys.executable, "-m", *argv, "--quiet"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    keys = [rec["sample_id"] for rec in _journal_whole(out)]
    assert len(keys) == len(set(keys)) == 20
    # ... and ends where the uninterrupted run does: the same scores
    whole = subprocess.run([sys.executable, "-m", *cmd[2:cmd.index("--out")], "--out", str(tmp_path / "whole"), "--quiet",
                            "--concurrency", "4"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert whole.returncode == 0, whole.stderr
    resumed, uninterrupted = ({k: v for k, v in json.loads((d / "summary.json").read_text())["suites"]["smoke"].items()
                               if k != "latency_ms"} for d in (out, tmp_path / "whole"))  # timings differ, scores not
    assert resumed == uninterrupted and resumed["metrics"]


def test_gate_interrupted_prints_resume_then_compare_and_they_finish_the_gate(slow_server, tmp_path):
    out = tmp_path / "g"
    golden = ROOT / "goldens" / "demo-smoke"
    cmd = [sys.executable, "-m", "verifier", "gate", "--golden", str(golden), "--base-url", slow_server, "--model", "m",
           "--out", str(out), "--quiet", "--concurrency", "1"]
    rc, stderr = _interrupt(cmd, out, signal.SIGINT, tmp_path)
    assert rc == 130, stderr
    steps = _steps(stderr)
    assert steps == [f"verifier run --resume {out} --base-url {slow_server}",
                     f"verifier compare {out} --golden {golden} --ci-outputs"], stderr
    listed = subprocess.run([sys.executable, "-m", "verifier", "runs", str(tmp_path), "--json"], env=ENV, capture_output=True,
                            text=True, timeout=120)
    row = json.loads(listed.stdout.splitlines()[0])
    assert (row["kind"], row["status"], row["golden"]) == ("gate", "interrupted", "demo-smoke"), row
    for step in steps:
        r = subprocess.run([sys.executable, "-m", *shlex.split(step)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (step, r.stdout, r.stderr)
    assert json.loads((out / "comparison.json").read_text())["status"] == "pass"
    assert (out / "report.html").exists() and (out / "junit.xml").exists()


def test_an_interrupt_before_any_run_directory_names_none(tmp_path):
    from verifier.cli.main import _interrupted
    from verifier.errors import Interrupted

    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert _interrupted(Interrupted(None), []) == 130
    assert err.getvalue() == "verifier: interrupted\n"


def test_a_limited_gate_terminated_continues_to_the_verdict_the_whole_gate_gives(slow_server, tmp_path):
    """SIGTERM on `gate --limit 8 --margin ... --infra-budget ...`: the printed compare, run exactly, judges what the
    gate was asked (run.json records it), not the whole golden (which was `incomplete`, exit 30, missing coverage)."""
    out, whole = tmp_path / "g", tmp_path / "whole"
    golden = ROOT / "goldens" / "demo-smoke"
    asked = ["--limit", "8", "--mode", "chat", "--margin", "smoke/accuracy=0.5:a test's own margin", "--infra-budget", "0.1"]
    base = [sys.executable, "-m", "verifier", "gate", "--golden", str(golden), "--base-url", slow_server, "--model", "m",
            "--quiet", "--concurrency", "1", *asked]
    rc, stderr = _interrupt([*base, "--out", str(out)], out, signal.SIGTERM, tmp_path)
    assert rc == 143, stderr
    steps = _steps(stderr)
    assert steps[1] == f"verifier compare {out} --golden {golden} --ci-outputs", stderr
    recorded = json.loads((out / "run.json").read_text())["gate"]
    assert (recorded["limit"], recorded["modes"], recorded["infra_budget"]) == (8, ["chat"], 0.1), recorded
    assert recorded["margins"] == {"smoke/accuracy": {"value": 0.5, "reason": "a test's own margin"}}
    for step in steps:
        r = subprocess.run([sys.executable, "-m", *shlex.split(step)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, (step, r.stdout, r.stderr)
    assert "limited: the golden's first 8 samples per suite (8 of its 20 samples)" in r.stdout, r.stdout
    ref = subprocess.run([*base, "--out", str(whole)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    cont, gated = (json.loads((d / "comparison.json").read_text()) for d in (out, whole))
    for key in ("status", "exit_code", "limited", "coverage"):
        assert cont[key] == gated[key], key
    assert cont["infra"]["budget"] == gated["infra"]["budget"] == 0.1
    # The gate's own comparison.json is its verdict of record: a second compare keeps it unless told.
    again = subprocess.run([sys.executable, "-m", "verifier", "compare", str(whole), "--golden", str(golden)], cwd=tmp_path,
                           env=ENV, capture_output=True, text=True, timeout=300)
    assert again.returncode == 2 and "--out FILE" in again.stderr and "--force" in again.stderr, again.stderr
    assert json.loads((whole / "comparison.json").read_text()) == gated


def test_a_gate_terminated_during_its_probes_continues_to_the_verdict_the_whole_gate_gives(tmp_path):
    """Probes run before the samples, so on a slow engine an interrupt lands in them (no record journaled yet). run.json
    records the probes asked (`probes_asked`: the golden's selection); the printed resume runs them, and the printed
    compare ends with the uninterrupted gate's verdict, not `incomplete` with every golden probe `not run`."""
    from conftest import zero_margins
    from verifier.cli import main
    from verifier.testbed.server import Reply, Script, TestServer, arithmetic

    ref, golden, out, whole = tmp_path / "ref", tmp_path / "golden", tmp_path / "g", tmp_path / "whole"
    with TestServer(Script(arithmetic)) as fast:
        assert main(["run", "--suite", "smoke", "--limit", "3", "--probes", "--base-url", fast.url, "--model", "m",
                     "--out", str(ref), "--quiet"]) == 0
        assert main(["bless", str(ref), "--to", str(golden)]) == 0
        zero_margins(golden)
        code = main(["gate", "--golden", str(golden), "--base-url", fast.url, "--model", "m", "--quiet", "--out", str(whole)])
    def slow(req):  # the same answers, each a little late: the interrupt lands while the probes are sent
        return Reply(**{**arithmetic(req).__dict__, "delay_s": 0.05})

    with TestServer(Script(slow)) as srv:
        p = subprocess.Popen([sys.executable, "-m", "verifier", "gate", "--golden", str(golden), "--base-url", srv.url,
                              "--model", "m", "--quiet", "--out", str(out)], cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, preexec_fn=_sigint_default)
        wait_until(lambda: (out / "run.json").exists(), "run.json", proc=p)
        p.send_signal(signal.SIGTERM)
        _, stderr = p.communicate(timeout=60)
        assert p.returncode == 143 and not (out / "probes.json").exists(), stderr
        asked = json.loads((out / "run.json").read_text())["probes_asked"]
        assert asked["only"] == sorted(json.loads((golden / "golden.json").read_text())["probes"]), asked
        steps = _steps(stderr)
        assert len(steps) == 2 and steps[1] == f"verifier compare {out} --golden {golden} --ci-outputs", stderr
        codes = [main(shlex.split(step)[1:]) for step in steps]  # the printed commands, exactly (in this process)
    assert (out / "probes.json").exists()
    cont, doc = (json.loads((d / "comparison.json").read_text()) for d in (out, whole))
    assert codes == [0, code] and code == 0
    for key in ("status", "exit_code", "coverage"):
        assert cont[key] == doc[key], key
    statuses = [{(row["key"], row["status"]) for row in d["conformance"]} for d in (cont, doc)]
    assert statuses[0] == statuses[1] and not any(status == "not_run" for _, status in statuses[0]), statuses


def test_a_sequential_gate_terminated_continues_to_the_verdict_the_whole_sequential_gate_gives(slow_server, tmp_path):
    """`gate --sequential` stops once a regression is decided. Terminated before that, its printed commands (the
    resume sends what is left; compare reads `sequential` from run.json) end with the uninterrupted gate's verdict."""
    from verifier.testbed.proxy import Proxy

    out, whole = tmp_path / "g", tmp_path / "whole"
    golden = ROOT / "goldens" / "demo-smoke"
    with Proxy(slow_server, ["answer_in_reasoning"], seed=0) as bad:
        base = [sys.executable, "-m", "verifier", "gate", "--golden", str(golden), "--base-url", bad.url, "--model", "m",
                "--quiet", "--concurrency", "1", "--sequential", "--looks", "4"]
        rc, stderr = _interrupt([*base, "--out", str(out)], out, signal.SIGTERM, tmp_path)
        assert rc == 143, stderr
        assert json.loads((out / "run.json").read_text())["gate"]["sequential"] is True
        steps = _steps(stderr)
        assert len(steps) == 2 and steps[1] == f"verifier compare {out} --golden {golden} --ci-outputs", stderr
        codes = [subprocess.run([sys.executable, "-m", *shlex.split(step)], cwd=tmp_path, env=ENV, capture_output=True,
                                text=True, timeout=300) for step in steps]
        gated = subprocess.run([*base, "--out", str(whole)], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert codes[0].returncode == 0, codes[0].stderr
    assert gated.returncode == 10, gated.stdout + gated.stderr
    assert codes[1].returncode == gated.returncode, codes[1].stdout + codes[1].stderr
    cont, doc = (json.loads((d / "comparison.json").read_text()) for d in (out, whole))
    for key in ("status", "exit_code"):
        assert cont[key] == doc[key], key
    assert [d["component"] for d in cont["diagnosis"]][:1] == [d["component"] for d in doc["diagnosis"]][:1] == ["reasoning parser"]
    # The uninterrupted gate stopped at a look; the continuation sent the rest and decided the same.
    assert doc["sequential"]["used_samples"] < doc["sequential"]["total_samples"], doc["sequential"]
