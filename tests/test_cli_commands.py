import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import http_ready, wait_until
from verifier.execution import journal
from verifier.testbed.server import Reply, Script, TestServer, arithmetic


def run_args(srv, out, *extra):
    return ["run", "--suite", "smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", *extra]


def test_run_and_score_end_to_end(server, tmp_path, cli):
    out = tmp_path / "r"
    code, stdout, err = cli(*run_args(server, out, "--mode", "chat,chat-stream"))
    assert code == 0, err
    summary = json.loads((out / "summary.json").read_text())
    s = summary["suites"]["smoke"]
    assert s["metrics"]["accuracy"]["value"] == 1.0 and s["metrics"]["accuracy"]["n"] == 20
    assert s["outcomes"] == {"content": 40}
    hdr = json.loads((out / "run.json").read_text())
    assert hdr["suites"]["smoke"]["version"] == "1" and len(hdr["suites"]["smoke"]["dataset_sha256"]) == 64
    assert hdr["server_info"]["models"]["data"] == []  # the test server serves any name and lists none
    assert hdr["finished"] and hdr["harness"]["version"]
    # Streams asked for usage.
    streamed = [r for r in server.script.requests if r.get("stream")]
    assert streamed and all(r["stream_options"] == {"include_usage": True} for r in streamed)


def test_a_repeated_list_flag_says_the_last_wins(server, tmp_path, cli):
    """`--mode chat --mode chat-stream` ran chat-stream only without a word (argparse keeps the last occurrence).
    The last still wins (a wrapper's defaults, then the user's override), and stderr says so with the spelling for both."""
    out = tmp_path / "r"
    code, _, err = cli(*run_args(server, out, "--mode", "chat", "--mode", "chat-stream", "--limit", "2"))
    assert code == 0 and json.loads((out / "run.json").read_text())["modes"] == ["chat-stream"]
    assert "--mode given more than once: the last wins (chat-stream)" in err and "--mode chat,chat-stream" in err
    code, _, err = cli(*run_args(server, tmp_path / "once", "--mode", "chat,chat-stream", "--limit", "2"))
    assert code == 0 and "more than once" not in err


def test_no_list_option_of_any_command_drops_values_silently(capsys):
    """Given twice, a list option keeps the last (a wrapper's defaults, then the user's override), never silently:
    a comma-separated one is cli/types.CommaList, one taking several values at once (`calibrate --runs A B`,
    `sweep --combine D E`) is cli/types.SpacedList, each saying so on stderr with the spelling that gives every
    value; a repeatable one appends."""
    import argparse

    from verifier.cli.main import build_parser
    from verifier.cli.types import CommaList, SpacedList

    def commands(p: argparse.ArgumentParser, prefix: str = ""):
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield f"{prefix}{name}", sub
                    yield from commands(sub, f"{prefix}{name} ")

    checked = []
    for name, sub in commands(build_parser()):
        for action in sub._actions:
            if not action.option_strings:
                continue
            takes_several = action.nargs in ("*", "+") or "comma" in (action.help or "").lower()
            if takes_several:
                assert isinstance(action, (CommaList, SpacedList, argparse._AppendAction)), (name, action.option_strings)
                checked.append((name, action.option_strings[0]))
    assert {("calibrate", "--runs"), ("proxy", "--surface"), ("sweep", "--combine"), ("gate", "--mode")} <= set(checked)
    capsys.readouterr()
    for argv, dest, kept, spelling in (
            (["calibrate", "g", "--runs", "a", "b", "--runs", "c"], "runs", ["c"], "--runs a b c"),
            (["sweep", "--combine", "d", "--combine", "e", "--out", "o"], "combine", ["e"], "--combine d e"),
            (["gate", "--golden", "g", "--mode", "chat", "--mode", "chat-stream"], "mode", "chat-stream", "--mode chat,chat-stream"),
            (["proxy", "--surface", "chat", "--surface", "responses"], "surface", "responses", "--surface chat,responses")):
        assert getattr(build_parser().parse_args(argv), dest) == kept
        err = capsys.readouterr().err
        assert "given more than once: the last wins" in err and spelling in err, err
    build_parser().parse_args(["calibrate", "g", "--runs", "a", "b"])
    assert capsys.readouterr().err == ""


def test_the_api_run_reads_a_mode_string_as_the_flag_does(server, tmp_path):
    """`verifier.run(..., modes="chat,chat-stream")` used to be iterated letter by letter ("unknown mode 'c'")."""
    import verifier

    done = verifier.run("smoke", base_url=server.url, model="m", modes="chat,chat-stream", limit=2, out=tmp_path / "r")
    assert json.loads((done.run_dir / "run.json").read_text())["modes"] == ["chat", "chat-stream"]
    done = verifier.run(["smoke"], base_url=server.url, model="m", modes=["chat", "chat"], limit=2, out=tmp_path / "r2")
    assert json.loads((done.run_dir / "run.json").read_text())["modes"] == ["chat"]


def test_calibrate_runs_given_twice_says_which_were_kept(calibrated_golden, tmp_path, cli):
    import shutil

    golden = tmp_path / "g"
    shutil.copytree(calibrated_golden["golden"], golden)
    code, out, err = cli("calibrate", golden, "--runs", calibrated_golden["r2"], "--runs", calibrated_golden["r3"])
    assert f"--runs {calibrated_golden['r2']} {calibrated_golden['r3']}" in err, err  # the spelling that gives both
    assert code == 2 and "calibration needs k >= 3 reference runs in all (have 2)" in err, out + err
    code, out, err = cli("calibrate", golden, "--runs", calibrated_golden["r2"], calibrated_golden["r3"])
    assert code == 0 and "from 3 reference runs" in out and "more than once" not in err, out + err


def test_score_is_byte_identical(server, tmp_path, cli):
    out = tmp_path / "r"
    assert cli(*run_args(server, out))[0] == 0
    first = ((out / "verdicts.jsonl").read_bytes(), (out / "summary.json").read_bytes())
    assert cli("score", out)[0] == 0
    assert ((out / "verdicts.jsonl").read_bytes(), (out / "summary.json").read_bytes()) == first


def test_infra_errors_are_never_wrong_answers(tmp_path, cli):
    with TestServer(Script(arithmetic)) as srv:
        srv.script.rule(r"What is 3 \+ 4", Reply(status=503))
        srv.script.rule(r"What is 12 \+ 30", Reply(content="41"))
        code, _, err = cli(*run_args(srv, tmp_path / "r", "--max-retries", "1"))
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["smoke"]
    assert s["outcomes"] == {"content": 19, "infra": 1}
    assert s["metrics"]["accuracy"]["n"] == 19
    assert s["reasons"]["http_503"] == 1 and s["reasons"]["wrong_answer"] == 1
    vs = [json.loads(l) for l in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    infra = [v for v in vs if v["outcome"] == "infra"]
    assert infra[0]["score"] is None and infra[0]["sample_id"] == "add-00"


def test_api_key_and_header_values_never_written(tmp_path, cli, monkeypatch):
    secret = "sk-test-SECRET-1234567890"
    monkeypatch.setenv("MY_KEY", secret)
    with TestServer(Script(arithmetic)) as srv:
        # A server that echoes the key back must not get it onto disk either.
        srv.script.rule(r"What is 3 \+ 4", Reply(content=f"7 (your key is {secret})"))
        code, out, err = cli(*run_args(srv, tmp_path / "r", "--api-key-env", "MY_KEY", "--header", "X-Token: hdr-SECRET-987", "--mode", "chat,chat-stream"))
        assert code == 0, err
        assert srv.script.headers[0]["Authorization"] == f"Bearer {secret}"
    for p in (tmp_path / "r").rglob("*"):
        if p.is_file():
            data = p.read_text()
            assert secret not in data and "hdr-SECRET-987" not in data, p
    assert secret not in out + err


def test_exit_codes_for_bad_input(server, tmp_path, cli):
    code, _, err = cli("run", "--suite", "nope", "--base-url", server.url, "--model", "m", "--out", tmp_path / "a", "--quiet")
    assert code == 2 and "unknown suite 'nope'" in err and err.count("\n") == 1
    code, _, err = cli(*run_args(server, tmp_path / "b", "--extra-body", "{not json"))
    assert code == 2 and "--extra-body is not valid JSON" in err
    code, _, err = cli(*run_args(server, tmp_path / "c"), "--base-url", "http://127.0.0.1:9/v1")
    assert code == 2 and "cannot reach endpoint" in err
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli(*run_args(server, blocker / "sub"))
    assert code == 2 and "not writable" in err
    code, _, err = cli("score", tmp_path)
    assert code == 2 and "is not a run directory" in err
    code, _, err = cli("run", "--resume", tmp_path, "--base-url", server.url, "--quiet")
    assert code == 2 and "is not a run directory" in err
    for d in ("a", "b", "c"):
        assert not (tmp_path / d).exists()


def test_existing_run_is_not_overwritten(server, tmp_path, cli):
    out = tmp_path / "r"
    assert cli(*run_args(server, out))[0] == 0
    before = (out / "responses.jsonl").read_bytes()
    code, _, err = cli(*run_args(server, out))
    assert code == 2 and "already holds a run" in err
    assert (out / "responses.jsonl").read_bytes() == before


def test_resume_after_torn_line_and_infra_errors(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(arithmetic)) as srv:
        srv.script.rule(r"What is 3 \+ 4", Reply(status=500))
        assert cli(*run_args(srv, out, "--max-retries", "0"))[0] == 0
    lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
    # Lose the last 5 records and tear the one before them, as a SIGKILL mid-write would.
    kept, torn = lines[:14], lines[14][: len(lines[14]) // 2]
    (out / "responses.jsonl").write_text("".join(kept) + torn)
    with TestServer(Script(arithmetic)) as srv:
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
        assert code == 0, err
        resent = len(srv.script.requests)
    recs = [json.loads(l) for l in (out / "responses.jsonl").read_text().splitlines()]
    ok = [r["sample_id"] for r in recs if r["error"] is None]
    assert sorted(ok) == sorted(set(ok)) and len(ok) == 20
    # 6 lost (5 missing + 1 torn) + the infra one, if it was among the kept.
    assert resent in (6, 7)
    s = json.loads((out / "summary.json").read_text())["suites"]["smoke"]
    assert s["outcomes"] == {"content": 20} and s["metrics"]["accuracy"]["value"] == 1.0


def test_sigkill_midway_then_resume_records_each_sample_once(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"responder": "arithmetic"}))
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-m", "verifier.testbed.server", "--port", str(port), "--responder", "arithmetic", "--delay", "0.15"])
    try:
        base = f"http://127.0.0.1:{port}/v1"
        http_ready(base + "/models", srv)
        out = tmp_path / "r"
        cmd = [sys.executable, "-m", "verifier", "run", "--suite", "smoke", "--base-url", base, "--model", "m", "--out", str(out), "--quiet", "--concurrency", "2", "--epochs", "3"]
        p = subprocess.Popen(cmd)
        f = out / "responses.jsonl"
        # Start-up before the first request can take many seconds under load: wait on the journal, not the clock.
        wait_until(lambda: f.exists() and f.read_text().count("\n") >= 10, "10 journal lines", proc=p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        n_before = (out / "responses.jsonl").read_text().count("\n")
        assert 10 <= n_before < 60
        r = subprocess.run([sys.executable, "-m", "verifier", "run", "--resume", str(out), "--base-url", base, "--quiet"], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        keys = [(d["sample_id"], d["epoch"]) for d in journal.read_jsonl(out / "responses.jsonl")]
        assert len(keys) == len(set(keys)) == 60
    finally:
        srv.terminate()
        srv.wait()


def test_list_suites_and_help(cli):
    code, out, _ = cli("list-suites")
    assert code == 0 and "smoke" in out
    assert len({line.index(" builtin ") for line in out.splitlines()}) == 1, out  # aligned, long names included
    with pytest.raises(SystemExit) as e:
        cli("run", "--help")
    assert e.value.code == 0


def test_demo_runs_offline(tmp_path, cli):
    code, out, err = cli("demo", "--out", tmp_path / "demo", "--quiet")
    assert code == 0, err
    assert "demo: healthy endpoint exit 0 (expected 0)" in out
    assert "demo: faulty-frontend endpoint exit 10 (expected 10), blamed on the reasoning parser" in out
    assert "demo: faulty-tool-parser endpoint exit 10 (expected 10), blamed on the tool-call parser" in out
    healthy = json.loads((tmp_path / "demo" / "healthy" / "comparison.json").read_text())
    faulty = json.loads((tmp_path / "demo" / "faulty-frontend" / "comparison.json").read_text())
    tools = json.loads((tmp_path / "demo" / "faulty-tool-parser" / "comparison.json").read_text())
    assert healthy["status"] == "pass"
    assert faulty["status"] == "frontend_regression" and faulty["quantization"]["verdict"] == "inconclusive"
    assert tools["status"] == "frontend_regression" and tools["diagnosis"][0]["component"] == "tool-call parser"


def test_data_can_be_given_per_suite():
    from verifier.cli import data_for

    assert data_for("/d", "bfcl") == "/d"
    assert data_for("bfcl=/b,gsm8k=/g.jsonl", "gsm8k") == "/g.jsonl"
    assert data_for("bfcl=/b", "smoke") is None
    assert data_for(None, "smoke") is None


def test_cli_mode_names_are_the_registry_s():
    """One list of modes: the CLI and the endpoint both read the surface registry."""
    from verifier.cli.args import MODE_NAMES
    from verifier.surfaces.registry import MODES as REGISTRY
    from verifier.wire.endpoint import MODES

    assert MODE_NAMES is REGISTRY and tuple(MODES) == REGISTRY
    from verifier.surfaces.registry import SURFACES

    assert REGISTRY == tuple(m.name for s in SURFACES for m in s.modes) and len(set(REGISTRY)) == len(REGISTRY)


def test_version_and_errors_map_to_exit_codes(tmp_path, cli, monkeypatch):
    from verifier import __version__
    from verifier.app import collect as app
    from verifier.cli import main
    from verifier.execution.journal import NotARunDir

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    # A core error that was not translated still reaches the user as one line and exit 2.
    monkeypatch.setattr(app, "score", lambda run_dir: (_ for _ in ()).throw(NotARunDir(f"{run_dir} is odd")))
    code, _, err = cli("score", tmp_path)
    assert code == 2 and err == f"verifier: error: {tmp_path} is odd\n"
    monkeypatch.setattr(app, "score", lambda run_dir: 1 / 0)
    code, _, err = cli("score", tmp_path)
    assert code == 1 and err.startswith("verifier: internal error: ZeroDivisionError") and __version__


def test_run_header_keeps_its_keys_and_gains_a_format(server, tmp_path, cli):
    from verifier.types import JUDGED, RUN_FORMAT, Outcome

    assert cli(*run_args(server, tmp_path / "r"))[0] == 0
    hdr = json.loads((tmp_path / "r" / "run.json").read_text())
    assert hdr["format"] == RUN_FORMAT == 1
    assert {"run_id", "harness", "endpoint", "sampling", "extra_body", "epochs", "modes", "suites", "started", "finished",
            "server_info", "selection"} <= set(hdr)
    assert "extra" not in hdr and hdr["finished"] is not None
    assert "content" in JUDGED and "contract" in JUDGED and Outcome.INFRA not in JUDGED and Outcome("unsupported") == "unsupported"


def test_gate_spec_reproduces_the_golden_selection(calibrated_golden):
    from verifier.app import collect as app, gate as app_gate

    g = app_gate.load_golden(calibrated_golden["golden"])
    spec = app.RunSpec.for_golden(g, app.EndpointSpec("http://127.0.0.1:9/v1", "m"), Path("out"), overrides={"temperature": 0.5})
    assert spec.suites == ("smoke",) and spec.modes == ("chat", "chat-stream") and spec.epochs == 1
    assert spec.only_ids["smoke"] == frozenset(o.sample_id for o in g.observations) and len(spec.only_ids["smoke"]) == 20
    assert spec.overrides["logprobs"] is True and spec.overrides["temperature"] == 0.5
    assert spec.extra_body == {} and spec.probes is False


def test_one_client_per_run(server, tmp_path, cli, monkeypatch):
    """Reachability, server info, probes and every request share one Endpoint (one connection pool)."""
    from verifier.wire import endpoint

    made = []
    init = endpoint.Endpoint.__init__

    def counting(self, *args, **kwargs):
        made.append(self)
        init(self, *args, **kwargs)

    monkeypatch.setattr(endpoint.Endpoint, "__init__", counting)
    code, _, err = cli(*run_args(server, tmp_path / "r", "--probes"))
    assert code == 0, err
    assert len(made) == 1 and (tmp_path / "r" / "probes.json").exists()


def test_a_model_the_server_does_not_list_is_refused_before_any_sample(tmp_path, cli):
    """llama-server answers any name with its one model: a wrong --model would pass silently without this."""
    from verifier.testbed.server import Script, TestServer, arithmetic

    with TestServer(Script(arithmetic, listed=("test-model",))) as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--base-url", srv.url, "--model", "gpt-4o",
                           "--out", tmp_path / "r", "--quiet")
        assert code == 2 and err.count("\n") == 1, err
        assert "'gpt-4o' is not in GET" in err and "test-model" in err and "--no-model-check" in err
        assert not srv.script.requests and not (tmp_path / "r" / "responses.jsonl").exists()
        code, _, err = cli("gate", "--golden", "demo-smoke", "--base-url", srv.url, "--model", "gpt-4o",
                           "--out", tmp_path / "g", "--quiet")
        assert code == 2 and "test-model" in err, err
        # A gateway that aliases names: the check is skipped on request.
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", srv.url, "--model", "gpt-4o",
                           "--no-model-check", "--out", tmp_path / "r2", "--quiet")
        assert code == 0, err
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", srv.url, "--model", "test-model",
                           "--out", tmp_path / "r3", "--quiet")
        assert code == 0, err
