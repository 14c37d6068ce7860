"""Serving adapters (issue 50 item 4): a golden says what request rewrite its reference was served behind, `run` and
`gate --serving-adapter NAME` apply it in front of --base-url, and a gate served otherwise is refused before any
request. The engine is the test server playing llama-server with a 0.5B model: it returns parsed tool calls only
after the `tool-call-prefill` adapter's assistant prefill, and writes them as text otherwise."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, zero_margins
from verifier.testbed.server import Script, TestServer, echo, needs_tool_call_prefill
from verifier.testbed.tool_answers import DEFAULT as TOOL_ANSWERS
from verifier.wire import serving_adapters as sa

BFCL_RUN = ["--suite", "bfcl", "--smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--max-retries", "0"]
TOOLS_BODY = {"model": "m", "messages": [{"role": "user", "content": "weather?"}], "tools": [{"type": "function", "function": {"name": "f"}}]}


@pytest.fixture
def prefill_engine():
    with TestServer(Script(needs_tool_call_prefill(TOOL_ANSWERS, echo))) as srv:
        yield srv


@pytest.fixture(scope="module")
def adapter_golden(tmp_path_factory):
    """A bfcl smoke golden recorded behind tool-call-prefill on the prefill engine, through the CLI (run, bless)."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("adapter-golden")
    with TestServer(Script(needs_tool_call_prefill(TOOL_ANSWERS, echo))) as srv:
        assert main(["run", *BFCL_RUN, "--base-url", srv.url, "--serving-adapter", "tool-call-prefill", "--out", str(tmp / "ref")]) == 0
    golden = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    zero_margins(golden)
    return {"ref": tmp / "ref", "golden": golden}


def test_the_rewrites_are_pure_and_act_on_chat_completions_only():
    before = json.dumps(TOOLS_BODY, sort_keys=True)
    new = sa.apply("tool-call-prefill", "/chat/completions", TOOLS_BODY)
    assert new["messages"][-1] == {"role": "assistant", "content": sa.TOOL_CALL_OPENING}
    assert json.dumps(TOOLS_BODY, sort_keys=True) == before  # the caller's body (the journal's) is untouched
    assert sa.apply("tool-call-prefill", "/responses", TOOLS_BODY) is TOOLS_BODY
    assert sa.apply(None, "/chat/completions", TOOLS_BODY) is TOOLS_BODY
    assert sa.apply("tool-choice-required", "/chat/completions", TOOLS_BODY)["tool_choice"] == "required"
    no_tools = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert all(sa.apply(name, "/chat/completions", no_tools) is no_tools for name in sa.ADAPTERS)
    with pytest.raises(ValueError, match="known: "):
        sa.adapter_named("tool-call-prefil")


def test_the_test_beds_proxy_adapters_are_the_same_rewrites():
    from verifier.testbed.engine_tools import TOOL_CALL_PREFILL, TOOL_CHOICE_REQUIRED, TURN_CALL_PREFILL, TURN_CALL_REQUIRED

    for fault, name in ((TOOL_CALL_PREFILL, "tool-call-prefill"), (TOOL_CHOICE_REQUIRED, "tool-choice-required"),
                        (TURN_CALL_PREFILL, "turn-call-prefill"), (TURN_CALL_REQUIRED, "turn-call-required")):
        assert fault.request is not None
        change = fault.request(TOOLS_BODY)
        assert change is not None and change.value == sa.ADAPTERS[name].rewrite(TOOLS_BODY)


def test_run_applies_the_adapter_and_records_it_and_bless_carries_it(adapter_golden, cli, prefill_engine, tmp_path):
    ref = adapter_golden["ref"]
    assert json.loads((ref / "run.json").read_text())["endpoint"]["serving_adapter"] == "tool-call-prefill"
    summary = json.loads((ref / "summary.json").read_text())["suites"]["bfcl"]
    assert "tool_call_as_text" not in summary["findings"] and summary["metrics"]["accuracy"]["value"] > 0.9
    # The journal keeps the request as the suite built it; the engine received it behind the prefill.
    first = json.loads((ref / "responses.jsonl").read_text().splitlines()[0])
    assert first["request"]["messages"][-1]["role"] != "assistant"
    golden = json.loads((adapter_golden["golden"] / "golden.json").read_text())
    assert golden["source"]["endpoint"]["serving_adapter"] == "tool-call-prefill"
    # Without the adapter the same engine writes its calls as text: what the adapter changes is real.
    code, _, _ = cli("run", *BFCL_RUN, "--base-url", prefill_engine.url, "--out", tmp_path / "bare")
    bare = json.loads((tmp_path / "bare" / "summary.json").read_text())["suites"]["bfcl"]
    assert code == 0 and bare["findings"].get("tool_call_as_text", 0) > 10
    assert "serving_adapter" not in json.loads((tmp_path / "bare" / "run.json").read_text())["endpoint"]
    tools_requests = [r for r in prefill_engine.script.requests if r.get("tools")]
    assert tools_requests and not any(r["messages"][-1].get("role") == "assistant" for r in tools_requests)


def test_gate_with_the_flag_applies_the_golden_adapter_and_passes(adapter_golden, cli, prefill_engine, tmp_path):
    code, out, err = cli("gate", "--golden", adapter_golden["golden"], "--base-url", prefill_engine.url, "--model", "m",
                         "--serving-adapter", "tool-call-prefill", "--out", tmp_path / "g", "--quiet")
    assert code == 0, out + err
    assert json.loads((tmp_path / "g" / "run.json").read_text())["endpoint"]["serving_adapter"] == "tool-call-prefill"
    tools_requests = [r for r in prefill_engine.script.requests if r.get("tools")]
    assert tools_requests and all(r["messages"][-1] == {"role": "assistant", "content": sa.TOOL_CALL_OPENING} for r in tools_requests)


@pytest.mark.parametrize("flags", [[], ["--serving-adapter", "tool-choice-required"]], ids=["no-flag", "another-adapter"])
def test_gate_refuses_a_golden_adapter_it_was_not_given_before_any_request(adapter_golden, cli, prefill_engine, tmp_path, flags):
    code, out, err = cli("gate", "--golden", adapter_golden["golden"], "--base-url", prefill_engine.url, "--model", "m",
                         *flags, "--out", tmp_path / "g", "--quiet")
    assert code == 2, out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "--serving-adapter tool-call-prefill" in lines[0], err
    assert prefill_engine.script.requests == [] and prefill_engine.script.preflight == []
    assert not (tmp_path / "g" / "run.json").exists()


def test_the_shipped_tools_golden_names_its_adapter_and_gate_refuses_without_it(cli, prefill_engine, tmp_path):
    code, out, err = cli("gate", "--golden", "qwen0.5b-bfcl-tools", "--base-url", prefill_engine.url, "--model", "qwen0.5b",
                         "--limit", "2", "--out", tmp_path / "g", "--quiet")
    assert code == 2 and "--serving-adapter tool-call-prefill" in err and len(err.strip().splitlines()) == 1, out + err
    assert prefill_engine.script.requests == []


def test_gate_refuses_an_adapter_on_a_golden_recorded_without_one(cli, prefill_engine, tmp_path):
    code, out, err = cli("gate", "--golden", "demo-bfcl", "--base-url", prefill_engine.url, "--model", "demo",
                         "--serving-adapter", "tool-call-prefill", "--out", tmp_path / "g", "--quiet")
    assert code == 2 and "no serving adapter" in err and "--serving-adapter" in err, out + err
    assert prefill_engine.script.requests == []


def test_an_unknown_adapter_is_a_usage_error_naming_the_catalogue(cli, prefill_engine, tmp_path):
    with pytest.raises(SystemExit) as e:
        cli("run", *BFCL_RUN, "--base-url", prefill_engine.url, "--serving-adapter", "prefill", "--out", tmp_path / "r")
    assert e.value.code == 2


def test_a_resume_applies_the_runs_own_adapter_and_refuses_another(adapter_golden, cli, prefill_engine, tmp_path):
    run = tmp_path / "r"
    shutil.copytree(adapter_golden["ref"], run)
    code, out, err = cli("run", "--resume", run, "--base-url", prefill_engine.url, "--serving-adapter", "tool-choice-required")
    assert code == 2 and "tool-call-prefill" in err, out + err
    code, out, err = cli("run", "--resume", run, "--base-url", prefill_engine.url, "--quiet")
    assert code == 0, out + err
    assert json.loads((run / "run.json").read_text())["endpoint"]["serving_adapter"] == "tool-call-prefill"


def test_list_goldens_shows_the_serving_adapter(adapter_golden, cli, tmp_path):
    shutil.copytree(adapter_golden["golden"], tmp_path / "behind-prefill")
    shutil.copytree(ROOT / "verifier" / "goldens" / "demo-smoke", tmp_path / "plain")
    code, out, _ = cli("list-goldens", tmp_path)
    lines = out.splitlines()
    assert code == 0 and "serving adapter" in lines[0]
    col = lines[0].index("serving adapter")
    rows = {line.split()[0]: line[col:].split()[0] for line in lines[1:]}
    assert rows == {"behind-prefill": "tool-call-prefill", "plain": "-"}
    code, out, _ = cli("list-goldens")
    assert code == 0 and any(line.startswith("qwen0.5b-bfcl-tools") and "tool-call-prefill" in line for line in out.splitlines())


def test_a_gate_file_endpoint_names_the_adapter(adapter_golden, cli, prefill_engine, tmp_path):
    gate_file = tmp_path / "gate.toml"
    gate_file.write_text(f'golden = "{adapter_golden["golden"]}"\n[endpoint]\nbase_url = "{prefill_engine.url}"\nmodel = "m"\n'
                         'serving_adapter = "tool-call-prefill"\n')
    code, out, err = cli("gate", "--config", gate_file, "--out", tmp_path / "g", "--quiet")
    assert code == 0, out + err
    gate_file.write_text(gate_file.read_text().replace("tool-call-prefill", "prefill"))
    code, out, err = cli("gate", "--config", gate_file, "--out", tmp_path / "g2", "--quiet")
    assert code == 2 and "serving_adapter" in err, out + err


def test_the_api_gate_takes_the_adapter(adapter_golden, prefill_engine, tmp_path):
    import verifier
    from verifier.errors import UsageError

    with pytest.raises(UsageError, match='serving_adapter = "tool-call-prefill"'):
        verifier.gate(adapter_golden["golden"], base_url=prefill_engine.url, model="m", out=tmp_path / "refused", reports=False)
    doc = verifier.gate(adapter_golden["golden"], base_url=prefill_engine.url, model="m", out=tmp_path / "g", reports=False,
                        serving_adapter="tool-call-prefill")
    assert doc.exit_code == 0


def test_the_shipped_goldens_recorded_behind_an_adapter_name_it():
    """Each shipped golden recorded behind the test bed's proxy form of an adapter says which (bench/release:
    acceptance.py tool-golden, acceptance_vllm.py bfcl-required, bfcl_mt_engine.py --engine vllm); the others none."""
    from verifier.golden import store

    named = {p.name: store.load_header(p).source.serving_adapter for p in store.packaged()}
    assert {k: v for k, v in named.items() if v} == {"qwen0.5b-bfcl-tools": "tool-call-prefill",
                                                     "qwen0.5b-vllm-bfcl-required": "tool-choice-required",
                                                     "qwen0.5b-vllm-bfcl-mt": "turn-call-required"}
    assert all(v is None or v in sa.ADAPTERS for v in named.values())


def test_a_sweep_gate_table_names_the_adapter(adapter_golden, cli, prefill_engine, tmp_path):
    perf = "[perf]\nconcurrency = [1]\nprompt_tokens = [16]\noutput_tokens = 8\nrequests = 1\nrepeats = 1\nwarmup = 0\n"
    config = f'\n[[config]]\nname = "a"\nbase_url = "{prefill_engine.url}"\nmodel = "m"\n'
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'golden = "{adapter_golden["golden"].as_posix()}"\n[gate]\nmax_retries = 0\n{perf}{config}')
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "refused", "--quiet")
    assert code == 2 and 'serving_adapter = "tool-call-prefill"' in err, out + err  # checked before any engine is used
    assert prefill_engine.script.requests == []
    sweep.write_text(f'golden = "{adapter_golden["golden"].as_posix()}"\n[gate]\nmax_retries = 0\n'
                     f'serving_adapter = "tool-call-prefill"\n{perf}{config}')
    code, out, err = cli("sweep", sweep, "--out", tmp_path / "sw", "--quiet")
    assert code == 0, out + err
    assert json.loads(next((tmp_path / "sw").rglob("run.json")).read_text())["endpoint"]["serving_adapter"] == "tool-call-prefill"


def test_calibrate_reruns_are_served_as_the_reference_was(adapter_golden, cli, prefill_engine, tmp_path):
    golden = tmp_path / "g"
    shutil.copytree(adapter_golden["golden"], golden)
    before = (golden / "golden.json").read_bytes()
    code, out, err = cli("calibrate", golden, "--base-url", prefill_engine.url, "--model", "m", "-k", "2", "--out-prefix",
                         tmp_path / "rerun")
    assert code == 2 and "--serving-adapter tool-call-prefill" in err, out + err
    assert prefill_engine.script.requests == [] and (golden / "golden.json").read_bytes() == before


def test_a_golden_naming_an_adapter_this_verifier_does_not_know_is_refused(adapter_golden, cli, prefill_engine, tmp_path):
    golden = tmp_path / "g"
    shutil.copytree(adapter_golden["golden"], golden)
    doc = json.loads((golden / "golden.json").read_text())
    doc["source"]["endpoint"]["serving_adapter"] = "from-the-future"
    (golden / "golden.json").write_text(json.dumps(doc))
    code, out, err = cli("gate", "--golden", golden, "--base-url", prefill_engine.url, "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and "'from-the-future', which this verifier does not know" in err and len(err.strip().splitlines()) == 1, err
    assert prefill_engine.script.requests == []


@pytest.fixture(scope="module")
def plain_pair(adapter_golden, tmp_path_factory):
    """The same engine's run made with no adapter, and a golden blessed from another such run (margins 0)."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("plain")
    with TestServer(Script(needs_tool_call_prefill(TOOL_ANSWERS, echo))) as srv:
        for name in ("bare", "ref"):
            assert main(["run", *BFCL_RUN, "--base-url", srv.url, "--out", str(tmp / name)]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "golden")]) == 0
    zero_margins(tmp / "golden")
    return {"bare": tmp / "bare", "golden": tmp / "golden"}


def test_compare_refuses_a_run_served_otherwise_than_the_golden_as_gate_does(adapter_golden, plain_pair, cli, tmp_path):
    """Offline `compare` holds the gate's rule: a run sent with no adapter against a golden recorded behind one, and a
    run sent behind one against a golden recorded with none, are refused in one line (exit 2), nothing written."""
    bare, behind = tmp_path / "bare", tmp_path / "behind"
    shutil.copytree(plain_pair["bare"], bare)
    shutil.copytree(adapter_golden["ref"], behind)
    for run, golden, sent, kept in ((bare, adapter_golden["golden"], "with no serving adapter", "behind the serving adapter tool-call-prefill"),
                                    (behind, plain_pair["golden"], "behind the serving adapter tool-call-prefill", "with no serving adapter")):
        code, out, err = cli("compare", run, "--golden", golden)
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, out + err
        assert f"run {run} was sent {sent}, and golden {golden} was recorded {kept}" in lines[0], err
        assert not (run / "comparison.json").exists()
    # Served as its reference was, the same run compares (exit 0: the reference's own run against its golden).
    code, out, err = cli("compare", behind, "--golden", adapter_golden["golden"])
    assert code == 0 and (behind / "comparison.json").exists(), out + err


def test_the_api_compare_the_matrix_and_calibrate_runs_hold_the_same_rule(adapter_golden, plain_pair, cli, tmp_path):
    import verifier
    from verifier.errors import UsageError

    with pytest.raises(UsageError, match="was sent with no serving adapter, and golden .* tool-call-prefill"):
        verifier.compare(plain_pair["bare"], adapter_golden["golden"], write=False)
    code, out, err = cli("matrix", "--golden", adapter_golden["golden"], f"plain={plain_pair['bare']}", "--out", tmp_path / "m")
    assert code == 2 and "was sent with no serving adapter" in err and len(err.strip().splitlines()) == 1, out + err
    golden = tmp_path / "g"
    shutil.copytree(adapter_golden["golden"], golden)
    before = (golden / "golden.json").read_bytes()
    code, out, err = cli("calibrate", golden, "--runs", plain_pair["bare"], plain_pair["bare"])
    assert code == 2 and "was sent with no serving adapter" in err, out + err
    assert (golden / "golden.json").read_bytes() == before


@pytest.mark.parametrize("modes", ["chat,responses", "messages-stream", "chat-stream,completions"])
def test_an_adapter_with_a_mode_off_chat_completions_is_refused_before_any_request(adapter_golden, cli, prefill_engine, tmp_path, modes):
    """Adapters rewrite chat-completions bodies only: a Responses, Messages or dual-path mode would go unadapted
    beside adapted chat modes (one run, two deployments), so `run` and `gate` refuse it in one line naming the modes."""
    run = [a if a != "chat,chat-stream" else modes for a in BFCL_RUN]
    code, out, err = cli("run", *run, "--base-url", prefill_engine.url, "--serving-adapter", "tool-call-prefill",
                         "--out", tmp_path / "r")
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "rewrites chat-completions requests only" in lines[0], out + err
    off = [m for m in modes.split(",") if not m.startswith("chat")]
    assert f"mode(s) {', '.join(off)} would be sent unadapted" in lines[0]
    assert prefill_engine.script.requests == [] and prefill_engine.script.preflight == []
    assert not (tmp_path / "r" / "run.json").exists()
    # A golden recorded behind an adapter with such a mode (by hand, or an older verifier) is refused by gate too.
    golden = tmp_path / "g"
    shutil.copytree(adapter_golden["golden"], golden)
    doc = json.loads((golden / "golden.json").read_text())
    doc["modes"] = [*doc["modes"], "responses"]
    (golden / "golden.json").write_text(json.dumps(doc))
    code, out, err = cli("gate", "--golden", golden, "--base-url", prefill_engine.url, "--model", "m",
                         "--serving-adapter", "tool-call-prefill", "--out", tmp_path / "o", "--quiet")
    assert code == 2 and "responses would be sent unadapted" in err and "--mode chat,chat-stream" in err, out + err
    assert prefill_engine.script.requests == []
