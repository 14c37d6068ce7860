"""Issue #37: a golden, a requests file, a run directory and an endpoint are untrusted input. What they carry can
neither fetch nor read (JSON Schema `$ref`), nor hang the scorer (regex backtracking, simulator calls), nor change
what is measured (identity keys), nor outlive the sweep (engines); and shards, sweeps and URLs keep their identity.
Real servers on 127.0.0.1 throughout (the test server, tests/hostile_server.py, a plain HTTP server counting hits)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from conftest import SHARED, wait_until
from suites import bfcl_checker as chk
from suites import replay
from suites import structured as st
from suites.bfcl_sims import execute as ex
from verifier.judge import schemacheck
from verifier import safewrite
from verifier.execution import journal
from verifier.testbed.server import Reply, Script, TestServer
from verifier.types import Parsed, Sample

ROOT = Path(__file__).resolve().parent.parent
EVIL = "^(a+)+$"
EVIL_TEXT = "a" * 40 + "!"
"""Python's `re` needs about 2**40 steps to refuse this (20 characters took 0.46 s, doubling per character)."""
HANG_BOUND_S = 10.0
"""Not a speed measurement (bench/ does those): a hang detector. Backtracking would take days; RE2 takes microseconds."""


class CountingServer:
    """A plain HTTP server on 127.0.0.1 that counts every request and answers a JSON Schema (what a `$ref` fetch
    would want). Any hit is a failure: nothing a schema says may reach the network."""

    def __init__(self) -> None:
        hits = self.hits = []

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                hits.append(self.path)
                body = b'{"type": "integer"}'
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_a) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def counting():
    srv = CountingServer()
    yield srv
    srv.close()


def strict_sample(schema: dict, sid: str = "golden/x/strict") -> Sample:
    """A structured sample as a golden's inputs.jsonl carries it: the schema inside response_format."""
    return Sample(id=sid, messages=[{"role": "user", "content": "x"}], meta={"variant": "strict"},
                  response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}})


def parsed(content: str | None = None, calls: list[tuple[str, str]] | None = None) -> Parsed:
    tool_calls = [{"id": f"c{i}", "type": "function", "function": {"name": n, "arguments": a}}
                  for i, (n, a) in enumerate(calls or [])] or None
    return Parsed(content=content, reasoning=None, tool_calls=tool_calls, finish_reason="tool_calls" if tool_calls else "stop",
                  usage=None)


# --- 1. $ref resolves inside the document only ----------------------------------------------------------------


def test_a_ref_never_fetches_nor_reads_and_is_a_finding_on_the_sample(counting, tmp_path):
    canary = tmp_path / "canary.json"
    canary.write_text('{"type": "string", "description": "CANARY-FILE-CONTENT"}')
    schemas = {
        "http": {"type": "object", "properties": {"a": {"$ref": counting.url + "/x.json"}}},
        "file": {"type": "object", "properties": {"a": {"$ref": canary.as_uri()}}},
        "relative to a remote $id": {"$id": counting.url + "/root.json", "properties": {"a": {"$ref": "other.json"}}},
        "dangling": {"type": "object", "properties": {"a": {"$ref": "#/nope"}}},
        "unknown anchor": {"type": "object", "properties": {"a": {"$ref": "#nowhere"}}},
    }
    for why, schema in schemas.items():
        v = st.score(strict_sample(schema), parsed('{"a": 1}'))
        assert [f.code for f in v.findings] == ["schema_not_checkable"], why
        assert "schema_compliance" not in v.metrics and v.outcome == "content", why  # n/a, never against the endpoint
        assert "CANARY" not in json.dumps(v.findings[0].detail), why
        assert st.unusable(schema), why  # and skipped when a dataset holds it
    # The registry itself refuses any URI it is asked for.
    with pytest.raises(Exception):
        schemacheck.REGISTRY.get_or_retrieve(counting.url + "/y.json")
    assert counting.hits == []
    # In-document references still work, in every draft's spelling.
    local = {"$defs": {"p": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/p"}}}
    assert st.compliance(local, {"a": 1}) == (True, "") and st.compliance(local, {"a": "x"})[0] is False
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "id": counting.url + "/d4.json#",
              "definitions": {"p": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/p"}}}
    assert st.compliance(draft4, {"a": "x"})[0] is False
    assert counting.hits == []


def test_a_requests_tool_with_a_remote_ref_is_a_finding_and_sends_nothing(counting, tmp_path, cli):
    """`--requests` replay: the declared tool's parameter schema `$ref`s a server; the call is not counted as valid
    or invalid, the sample says why, and the server is never asked."""
    body = {"messages": [{"role": "user", "content": "weather"}],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {
                "type": "object", "properties": {"city": {"$ref": counting.url + "/city.json"}}}}}]}
    reqs = tmp_path / "reqs.jsonl"
    reqs.write_text(json.dumps(body) + "\n")
    script = Script()
    script.rule("weather", Reply(content=None, tool_calls=[{"name": "w", "arguments": '{"city": "Oslo"}'}]))
    with TestServer(script) as srv:
        code, _, err = cli("run", "--requests", reqs, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet")
    assert code == 0, err
    vs = [json.loads(x) for x in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    assert [f["code"] for f in vs[0]["findings"]] == ["schema_not_checkable"]
    assert "schema_accuracy" not in vs[0]["metrics"] and vs[0]["signals"]["n_schema_unchecked"] == 1
    extra = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["replay"]["extra"]
    assert extra["schema_accuracy"] == {"value": None, "valid": 0, "calls": 0}
    assert counting.hits == []


# --- 2. regexes run in linear time -----------------------------------------------------------------------------


def test_backtracking_patterns_in_a_golden_schema_and_a_tool_parameter_finish_with_a_verdict():
    t0 = time.monotonic()
    v = st.score(strict_sample({"type": "object", "properties": {"v": {"type": "string", "pattern": EVIL}}}),
                 parsed(json.dumps({"v": EVIL_TEXT})))
    assert v.outcome == "contract" and v.reason == "schema_violation" and v.metrics["schema_compliance"] == 0.0
    ok = st.score(strict_sample({"type": "object", "patternProperties": {EVIL: {"type": "integer"}},
                                 "additionalProperties": False}), parsed(json.dumps({EVIL_TEXT: 1})))
    assert ok.metrics["schema_compliance"] == 0.0  # the key matches no pattern: an additional property
    tool = {"messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {
                "type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}}}}]}
    r = replay.score(replay.make_sample(1, tool), parsed(calls=[("f", json.dumps({"s": EVIL_TEXT}))]))
    assert r.metrics["schema_accuracy"] == 0.0 and r.signals["n_schema_valid"] == 0
    assert time.monotonic() - t0 < HANG_BOUND_S


def test_a_real_jsonschemabench_url_pattern_is_matched_in_linear_time():
    path = SHARED / "jsonschemabench" / "Github_medium" / "o82647.json"
    if not path.is_file():
        pytest.skip("JSONSchemaBench not in the shared data")
    schema = json.loads(path.read_text())
    assert "([\\/\\w \\.-]*)*" in schema["properties"]["fallback_src_url"]["pattern"]  # nested quantifiers
    assert st.unusable(schema) is None
    t0 = time.monotonic()
    v = st.score(strict_sample(schema), parsed(json.dumps({"fallback_src_url": "http://a.bc/" + EVIL_TEXT})))
    assert v.metrics["schema_compliance"] == 0.0 and "fallback_src_url" in v.findings[0].detail
    good = st.score(strict_sample(schema), parsed(json.dumps({"node_ref": "a:b", "fallback_src_url": "http://example.com/a/b"})))
    assert good.metrics["schema_compliance"] == 1.0
    assert time.monotonic() - t0 < HANG_BOUND_S


def test_unique_items_over_an_endpoints_many_distinct_objects_is_linear():
    """jsonschema compares unsortable items pairwise: 50,000 distinct objects were 1.25e9 comparisons."""
    schema = {"type": "object", "properties": {"v": {"type": "array", "uniqueItems": True}}}
    t0 = time.monotonic()
    v = st.score(strict_sample(schema), parsed(json.dumps({"v": [{"a": i} for i in range(50_000)]})))
    assert v.metrics["schema_compliance"] == 1.0 and time.monotonic() - t0 < HANG_BOUND_S
    assert st.compliance(schema, {"v": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]})[0] is False  # key order is no difference
    assert st.compliance(schema, {"v": [1, 1.0]})[0] is False and st.compliance(schema, {"v": [1, True]})[0] is True


def test_a_pattern_without_a_linear_time_matcher_is_not_checkable():
    for pattern in (r"(a)\1", "(?=a)a", "a{2000}", "(((a{100}){100}){100})"):
        v = st.score(strict_sample({"type": "string", "pattern": pattern}), parsed('"a"'))
        assert [f.code for f in v.findings] == ["schema_not_checkable"] and "linear time" in v.findings[0].detail, pattern
    # ECMA escapes RE2 spells differently still work.
    assert st.compliance({"type": "string", "pattern": "^\\u00e9$"}, "é") == (True, "")


def test_a_run_whose_scorer_meets_backtracking_patterns_sends_every_request(tmp_path, cli):
    """JSONSchemaBench layout with hostile schemas, scored as the run goes: every request is sent and answered, the
    run ends, each sample has its verdict."""
    bench = tmp_path / "bench" / "Hostile"
    bench.mkdir(parents=True)
    (bench / "nested.json").write_text(json.dumps({"type": "object", "properties": {"v": {"type": "string", "pattern": EVIL}}}))
    (bench / "keys.json").write_text(json.dumps({"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False}))
    o82647 = SHARED / "jsonschemabench" / "Github_medium" / "o82647.json"
    if o82647.is_file():
        shutil.copy(o82647, bench / "o82647.json")

    def answer(req):
        return Reply(content=json.dumps({"v": EVIL_TEXT, EVIL_TEXT: 1, "fallback_src_url": "http://a.bc/" + EVIL_TEXT}))

    t0 = time.monotonic()
    with TestServer(Script(answer)) as srv:
        code, _, err = cli("run", "--suite", "structured", "--data", tmp_path / "bench", "--base-url", srv.url,
                           "--model", "m", "--out", tmp_path / "r", "--quiet", "--request-deadline", "30")
        sent = len(srv.script.requests)
    assert code == 0, err
    vs = [json.loads(x) for x in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    samples = journal.read_jsonl(tmp_path / "r" / journal.SAMPLES)
    assert sent == len(vs) == sum(1 for _ in samples) > 0
    hostile = [v for v in vs if v["sample_id"].startswith("Hostile/")]
    assert len(hostile) == 2 * len(list(bench.iterdir()))
    assert all(v["metrics"].get("schema_compliance") == 0.0 for v in hostile)
    assert time.monotonic() - t0 < 120  # a hang detector: backtracking would not end today


def test_a_requests_run_with_a_backtracking_tool_pattern_ends_with_verdicts(tmp_path, cli):
    body = {"messages": [{"role": "user", "content": "call f"}], "tools": [{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}}}}]}
    reqs = tmp_path / "reqs.jsonl"
    reqs.write_text("".join(json.dumps({**body, "id": f"r{i}"}) + "\n" for i in range(4)))
    script = Script()
    script.rule("call f", Reply(content=None, tool_calls=[{"name": "f", "arguments": json.dumps({"s": EVIL_TEXT})}]))
    t0 = time.monotonic()
    with TestServer(script) as srv:
        code, _, err = cli("run", "--requests", reqs, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r",
                           "--quiet", "--mode", "chat,chat-stream", "--request-deadline", "30")
        sent = len(srv.script.requests)
    assert code == 0, err
    assert sent == 8
    extra = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["replay"]["extra"]
    assert extra["schema_accuracy"] == {"value": 0.0, "valid": 0, "calls": 8}
    assert time.monotonic() - t0 < 120  # a hang detector


# --- 3. simulators run bounded calls ----------------------------------------------------------------------------


SIM_SCRIPT = r"""
import json, sys, time
from suites.bfcl_sims import execute as ex
entry = {"id": "multi_turn_base_0", "involved_classes": ["MathAPI", "MessageAPI"],
         "initial_config": {"MessageAPI": {"generated_ids": list(range(10000, 100000)), "current_user": "USR001"}}}
inst = ex.instances_for(entry)
out = [ex.execute(inst, "round_number", {"number": 5, "decimal_places": -1e9}),
       ex.execute(inst, "round_number", {"number": 5, "decimal_places": -1000000000}),
       ex.execute(inst, "round_number", {"number": 10 ** 15, "decimal_places": -400}),
       ex.execute(inst, "send_message", {"receiver_id": "USR002", "message": "hi"}),
       ex.execute(inst, "power", {"base": 3, "exponent": 10 ** 30}),
       ex.execute(inst, "round_number", {"number": 2.5, "decimal_places": 0})]
# VmHWM: this process's own peak (ru_maxrss would carry the forking pytest process's peak across exec)
hwm = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"out": out, "rss_kb": hwm}))
"""


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads its peak RSS from /proc")
@pytest.mark.parametrize("docs", [True, False], ids=["with-docs", "signature-only"])
def test_absurd_simulator_calls_are_error_results_in_bounded_time_and_memory(docs, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if not docs:  # no BFCL data dir: arguments are checked against the method signatures only
        env["VERIFIER_SHARED_DATA"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    exp, big, ok_big, msg, power, fine = doc["out"]
    assert "error" in exp and "error" in big and "decimal_places" in big["error"]
    assert ok_big == {"result": 0}  # a large number rounded within the bound is still answered
    assert msg == {"error": "No message id left: every id of the workspace is taken."}
    assert "error" in power and fine == {"result": 2.0}
    assert doc["rss_kb"] < 300_000  # 10**(10**9) alone would take 415 MB


def test_the_id_draw_still_finds_the_last_free_id():
    from suites.bfcl_sims.message import MessageAPI

    m = MessageAPI()
    m.load_scenario({"generated_ids": [i for i in range(10000, 100000) if i != 54321], "current_user": "USR001"})
    assert m.send_message("USR002", "hi")["message_id"] == {"new_id": 54321}


def test_arguments_out_of_bounds_are_refused_at_the_execute_boundary():
    inst = ex.instances_for({"id": "multi_turn_base_1", "involved_classes": ["GorillaFileSystem", "MathAPI"],
                             "initial_config": {}})
    deep: dict = {}
    cur = deep
    for _ in range(40):
        cur["x"] = {}
        cur = cur["x"]
    assert "nested deeper" in ex.execute(inst, "mean", {"numbers": [deep]})["error"]
    assert "out of range" in ex.execute(inst, "add", {"a": 2 ** 70, "b": 1})["error"]
    assert "longer than" in ex.execute(inst, "echo", {"content": "x" * (ex.MAX_ARG_CHARS + 1), "file_name": "f"})["error"]
    assert ex.execute(inst, "add", {"a": 2, "b": 3}) == {"result": 5}


def test_a_malformed_scenario_is_a_data_error_naming_the_class():
    tree: dict = {"type": "directory", "contents": {}}
    cur = tree
    for _ in range(100):
        cur["contents"]["d"] = {"type": "directory", "contents": {}}
        cur = cur["contents"]["d"]
    for cls, cfg in (("GorillaFileSystem", {"root": {"top": tree}}), ("MessageAPI", {"generated_ids": [{}]})):
        with pytest.raises(ValueError, match=f"initial_config for {cls} is malformed"):
            ex.instances_for({"id": "x", "involved_classes": [cls], "initial_config": {cls: cfg}})


# --- 4. a golden cannot change what is measured ----------------------------------------------------------------


def hostile_golden(tmp_path: Path) -> Path:
    """The demo golden, rewritten as a hostile sender would: `model` and `stream` in its extra_body, `model` in its
    sampling overrides and in one input's params (the inputs' dataset_sha256 recomputed, as a forger would)."""
    g = tmp_path / "golden"
    shutil.copytree(ROOT / "verifier" / "goldens" / "demo-smoke", g)
    doc = json.loads((g / "golden.json").read_text())
    doc["source"]["extra_body"] = {"model": "golden-model", "stream": True, "messages": []}
    doc["source"]["sampling"]["overrides"]["model"] = "overrides-model"
    rows = [json.loads(x) for x in (g / "inputs.jsonl").read_text().splitlines()]
    rows[0]["params"] = {"model": "params-model", "stream": True}
    (g / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    h = hashlib.sha256()
    for r in rows:
        h.update(safewrite.canonical({k: v for k, v in r.items() if k != "suite"}).encode())
        h.update(b"\n")
    doc["suites"]["smoke"]["dataset_sha256"] = h.hexdigest()
    (g / "golden.json").write_text(json.dumps(doc))
    return g


def test_a_golden_never_overrides_the_model_the_stream_mode_or_the_prompt(tmp_path, cli):
    from conftest import reference_reply

    golden = hostile_golden(tmp_path)
    with TestServer(Script(reference_reply)) as srv:
        code, _, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "g",
                           "--quiet", "--max-retries", "0")
        sent = list(srv.script.requests)
    assert code in (0, 10, 20), err  # the verdict is not the point here: what was sent is
    assert "warning: ignored" in err and "extra_body.model" in err and "params.model" in err and "sampling.model" in err
    resent = len((tmp_path / "g" / "resends.jsonl").read_text().splitlines())  # the resend step's (chat) requests
    assert len(sent) == 40 + resent and {r["model"] for r in sent} == {"m"}
    assert sorted(bool(r.get("stream")) for r in sent) == [False] * (20 + resent) + [True] * 20  # chat and chat-stream, as the modes say
    assert all(r["messages"] for r in sent)
    hdr = json.loads((tmp_path / "g" / "run.json").read_text())
    assert hdr["endpoint"]["model"] == "m"
    assert "model" not in hdr["extra_body"] and "stream" not in hdr["extra_body"]
    assert "model" not in hdr["sampling"]["overrides"]


def test_extra_body_cannot_replace_a_replayed_bodys_tools_or_model(tmp_path, cli):
    body = {"model": "requests-model", "messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    reqs = tmp_path / "reqs.jsonl"
    reqs.write_text(json.dumps(body) + "\n")
    with TestServer(Script()) as srv:
        code, _, err = cli("run", "--requests", reqs, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r",
                           "--quiet", "--extra-body", json.dumps({"model": "x", "tools": [], "top_k": 3}))
        sent = list(srv.script.requests)
    assert code == 0, err
    assert sent[0]["model"] == "m" and sent[0]["tools"] == body["tools"] and sent[0]["top_k"] == 3
    assert "extra_body.model" in err and "extra_body.tools" in err


# --- 5. engines die with the sweep ------------------------------------------------------------------------------


STAND_IN = r"""
import sys, time, httpx
from pathlib import Path
from verifier.testbed.engines import Server, free_port

class StandIn(Server):
    '''The test server in the engine's place: the real Server.start and its Popen, another command.'''
    def command(self):
        return [sys.executable, "-m", "verifier", "testbed", "serve", "--port", str(self.port)]
    def _wait_healthy(self):
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/models", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        raise RuntimeError("stand-in never answered")

srv = StandIn(model_file=sys.argv[1], port=free_port(), log_path=sys.argv[2]).start()
print(srv.proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_an_engine_dies_when_the_process_that_started_it_is_killed(tmp_path):
    model = tmp_path / "stand-in.gguf"
    model.write_bytes(b"GGUF")
    parent = subprocess.Popen([sys.executable, "-c", STAND_IN, str(model), str(tmp_path / "engine.log")], cwd=ROOT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True)
    engine = 0
    try:
        engine = int(parent.stdout.readline().strip() or 0)
        assert engine and _alive(engine), "the stand-in engine never started"
        parent.send_signal(signal.SIGKILL)  # what no handler can catch
        parent.wait(10)
        wait_until(lambda: not _alive(engine), "the engine to die with its parent", 20)
    finally:
        parent.kill()
        if engine and _alive(engine):
            os.kill(engine, signal.SIGKILL)


def test_sighup_unwinds_the_sweep_like_sigterm(tmp_path, calibrated_golden):
    from test_sweep import _sweep_file, healthy

    def slow(req):
        return Reply(content=healthy(req).content, delay_s=3.0)

    with TestServer(Script(slow)) as srv:
        f = _sweep_file(tmp_path, calibrated_golden["golden"], [("slow", srv.url, False)])
        p = subprocess.Popen([sys.executable, "-m", "verifier", "sweep", str(f), "--out", str(tmp_path / "sw"), "--quiet"],
                             env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            wait_until(lambda: bool(srv.script.requests) or p.poll() is not None, "the sweep to reach the endpoint", 60)
            assert srv.script.requests, p.stderr.read()
            p.send_signal(signal.SIGHUP)
            code = p.wait(30)
        finally:
            p.kill()
    assert code == 128 + signal.SIGHUP


# --- 6. shards, sweeps and URLs keep their identity -------------------------------------------------------------


def test_shards_from_endpoints_serving_different_models_do_not_merge(tmp_path, cli):
    from conftest import SMOKE_RUN

    with TestServer(Script(models=("m",), listed=())) as a, TestServer(Script(listed=("other",))) as b:
        assert cli("run", *SMOKE_RUN, "--shard", "1/2", "--base-url", a.url, "--out", tmp_path / "s1")[0] == 0
        assert cli("run", *SMOKE_RUN, "--shard", "2/2", "--base-url", b.url, "--out", tmp_path / "s2",
                   "--no-model-check")[0] == 0
    code, _, err = cli("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m")
    assert code == 2 and "served models" in err and not (tmp_path / "m" / "run.json").exists()


def test_shards_of_one_model_on_two_ports_merge_and_say_so(tmp_path, cli):
    from conftest import SMOKE_RUN

    with TestServer(Script()) as a, TestServer(Script()) as b:
        assert cli("run", *SMOKE_RUN, "--shard", "1/2", "--base-url", a.url, "--out", tmp_path / "s1")[0] == 0
        assert cli("run", *SMOKE_RUN, "--shard", "2/2", "--base-url", b.url, "--out", tmp_path / "s2")[0] == 0
    code, _, err = cli("merge", tmp_path / "s1", tmp_path / "s2", "--out", tmp_path / "m")
    assert code == 0, err
    assert json.loads((tmp_path / "m" / "run.json").read_text())["endpoints"] == sorted([a.url, b.url])


def test_sweep_combine_refuses_configurations_of_different_goldens(tmp_path, cli):
    from verifier.attribution import compare
    from verifier.golden.model import GoldenHeader
    from verifier.types import Observation

    rows = [Observation(suite="s", sample_id="x", epoch=0, mode="chat", outcome="content", score=1.0, metrics={}, answer=4)]
    for name, golden in (("a", "golden-one"), ("b", "golden-two")):
        d = tmp_path / name
        (d / "gate").mkdir(parents=True)
        (d / "config.json").write_text(json.dumps({"format": 1, "name": name, "golden": f"/g/{golden}"}))
        doc = compare.compare(GoldenHeader.from_json({"suites": {"s": {}}, "margins": {}}), rows, rows).to_dict()
        doc["golden"] = {"name": golden, "source_run": "ref"}  # a whole comparison (sweep reads it typed), two goldens
        (d / "gate" / "comparison.json").write_text(json.dumps(doc))
    code, _, err = cli("sweep", "--combine", tmp_path / "a", tmp_path / "b", "--out", tmp_path / "all")
    assert code == 2 and "different goldens" in err and not (tmp_path / "all" / "sweep.json").exists()


@pytest.mark.parametrize("config", [
    {"format": 1, "golden": "/g/x"},                                   # no configuration name
    {"format": 1, "name": ["a"], "golden": "/g/x"},                     # a name that is not a string
    {"format": 1, "name": "a", "describe": "engine=llama", "golden": "/g/x"},
    {"format": 1, "name": "a", "endpoint": ["http://127.0.0.1:9/v1"], "golden": "/g/x"},
    {"format": 1, "name": "a", "error": {"why": 1}, "golden": "/g/x"},
])
def test_sweep_combine_refuses_a_config_json_it_cannot_read(tmp_path, cli, config):
    """config.json is read typed (app/sweep.ConfigRecord): a field of the wrong type is one line naming the file,
    exit 2, nothing written (a missing name was a traceback)."""
    d = tmp_path / "a"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    code, _, err = cli("sweep", "--combine", d, "--out", tmp_path / "all")
    assert code == 2 and "config.json: not a sweep configuration this verifier reads" in err, err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "all").exists()


class QueryEchoServer:
    """An OpenAI-compatible server that routes on the URL's path (its query apart, as real servers do), records
    every request line, and echoes the whole request line (query and key included) into each answer."""

    def __init__(self) -> None:
        from hostile_server import completion

        lines = self.lines = []

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, code: int, doc: dict) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:  # noqa: N802
                lines.append(self.path)
                if urlsplit(self.path).path == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": "m", "echo": self.path}]})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def do_POST(self) -> None:  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                lines.append(self.path)
                if urlsplit(self.path).path == "/v1/chat/completions":
                    self._send(200, completion(f"you asked {self.path}"))
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}"}})

            def log_message(self, *_a) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_key_in_the_base_url_query_reaches_models_and_never_the_journal(tmp_path, cli):
    key = "qk-canaryQUERY-0123456789abcdef"
    srv = QueryEchoServer()
    try:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--model", "m", "--quiet",
                           "--base-url", f"{srv.url}?api_key={key}", "--out", tmp_path / "r", "--max-retries", "0")
    finally:
        srv.close()
    assert code in (0, 10), err
    assert f"/v1/models?api_key={key}" in srv.lines  # the query after the path, not `/v1?api_key=.../models`
    chats = [p for p in srv.lines if p.startswith("/v1/chat/completions")]
    assert chats and all(p == f"/v1/chat/completions?api_key={key}" for p in chats)
    for f in (tmp_path / "r").iterdir():
        if f.is_file():
            assert key not in f.read_text(errors="replace"), f.name
    answers = [json.loads(x) for x in (tmp_path / "r" / journal.RESPONSES).read_text().splitlines()]
    assert answers and "api_key=***" in json.dumps(answers)  # the echo was there, and masked


# --- no scoring path reaches the network or a file: a gate under a guard ----------------------------------------


GUARDED = r"""
import json, sys
canary, port = sys.argv[1], int(sys.argv[2])
seen = []

def guard(event, args):
    if event == "open" and args and str(args[0]) == canary:
        seen.append("open " + str(args[0]))
    if event == "socket.connect" and len(args) > 1 and isinstance(args[1], tuple) and len(args[1]) > 1 and args[1][1] == port:
        seen.append("connect " + str(args[1]))

sys.addaudithook(guard)
from verifier.cli import main
code = main(sys.argv[3:])
print(json.dumps({"code": code, "seen": seen}))
"""


def structured_answer(req):
    """A valid instance of each built-in schema, whatever is asked (the defs_ref schema's shape fits both)."""
    return Reply(content=json.dumps({"start": {"x": 0, "y": 0}, "end": {"x": 1, "y": 2}, "ok": True,
                                     "level": "mid", "score": 1, "tags": []}))


def test_a_gate_with_a_hostile_structured_golden_opens_no_file_and_no_socket(tmp_path, cli, counting):
    canary = tmp_path / "canary.json"
    canary.write_text('{"type": "object", "description": "CANARY-FILE-CONTENT"}')
    with TestServer(Script(structured_answer)) as srv:
        run = ["--suite", "structured", "--smoke", "--model", "m", "--quiet", "--base-url", srv.url]
        for name in ("ref", "r2", "r3"):
            assert cli("run", *run, "--out", tmp_path / name)[0] == 0
        golden = tmp_path / "golden"
        assert cli("bless", tmp_path / "ref", "--to", golden)[0] == 0
        assert cli("calibrate", golden, "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
        # The hostile edit: the $defs references of the defs_ref schema now point at a server and at a file.
        rows = [json.loads(x) for x in (golden / "inputs.jsonl").read_text().splitlines()]
        for r in rows:
            if r["id"] == "builtin/defs_ref/strict":
                r["response_format"]["json_schema"]["schema"]["properties"]["start"]["$ref"] = counting.url + "/point.json"
            if r["id"] == "builtin/defs_ref/nonstrict":
                r["response_format"]["json_schema"]["schema"]["properties"]["start"]["$ref"] = canary.as_uri()
        (golden / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        doc = json.loads((golden / "golden.json").read_text())
        h = hashlib.sha256()
        for r in rows:
            h.update(safewrite.canonical({k: v for k, v in r.items() if k != "suite"}).encode())
            h.update(b"\n")
        doc["suites"]["structured"]["dataset_sha256"] = h.hexdigest()
        (golden / "golden.json").write_text(json.dumps(doc))
        out = tmp_path / "gate"
        r = subprocess.run([sys.executable, "-c", GUARDED, str(canary), str(counting.httpd.server_address[1]),
                            "gate", "--golden", str(golden), "--base-url", srv.url, "--model", "m", "--out", str(out), "--quiet"],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode in (0, 10, 20), r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["seen"] == [] and counting.hits == []
    vs = {v["sample_id"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    for sid in ("builtin/defs_ref/strict", "builtin/defs_ref/nonstrict"):
        assert [f["code"] for f in vs[sid]["findings"]] == ["schema_not_checkable"] and "schema_compliance" not in vs[sid]["metrics"]
    for f in out.rglob("*"):
        if f.is_file():
            assert "CANARY" not in f.read_text(errors="replace"), f


# Every suite's gate under the guard: nothing opened outside the code, the interpreter, the system's libraries and
# the gate's own run and golden directories; no connection but to the endpoint.
STRICT_GUARD = r"""
import json, os, sys, tempfile
allowed = [os.path.realpath(p) for p in json.loads(sys.argv[1])]
tempfile.gettempdir()  # the standard library's one-time probe of the temp directory (a random name it creates)
endpoint_port = int(sys.argv[2])
seen = []

def outside(path):
    try:
        p = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False  # a file descriptor, not a path
    return not any(p == a or p.startswith(a + os.sep) for a in allowed)

def guard(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)) and outside(args[0]):
        seen.append("open " + os.fsdecode(args[0]))
    if event == "socket.connect" and len(args) > 1 and isinstance(args[1], tuple) and len(args[1]) > 1 \
            and args[1][1] != endpoint_port:
        seen.append("connect " + str(args[1]))

sys.addaudithook(guard)
from verifier.cli import main
code = main(sys.argv[3:])
print(json.dumps({"code": code, "seen": seen}))
"""

SUITE_RUNS = {  # suite -> the run flags of its reference and calibration runs (smoke sets; no dataset beyond them)
    "structured": ["--suite", "structured", "--smoke"],
    "bfcl": ["--suite", "bfcl", "--smoke"],
    "bfcl-multi-turn": ["--suite", "bfcl-multi-turn", "--data", str(SHARED / "bfcl" / "BFCL_v4_multi_turn_base.json"),
                        "--limit", "4", "--sample-seed", "5"],
    "vision": ["--suite", "vision", "--smoke"],
    "gsm8k": ["--suite", "gsm8k", "--smoke"],
}


@pytest.mark.parametrize("suite", sorted(SUITE_RUNS))
def test_every_suites_gate_opens_nothing_beyond_its_directories_and_connects_only_to_the_endpoint(suite, tmp_path, cli):
    import site
    import sysconfig

    if suite == "bfcl-multi-turn" and not (SHARED / "bfcl" / "BFCL_v4_multi_turn_base.json").is_file():
        pytest.skip("BFCL multi-turn data not in the shared data")
    with TestServer(Script(structured_answer)) as srv:
        run = [*SUITE_RUNS[suite], "--model", "m", "--quiet", "--max-retries", "0", "--base-url", srv.url]
        for name in ("ref", "r2", "r3"):
            code, _, err = cli("run", *run, "--out", tmp_path / name)
            assert code == 0, err
        golden = tmp_path / "golden"
        assert cli("bless", tmp_path / "ref", "--to", golden)[0] == 0
        assert cli("calibrate", golden, "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
        out = tmp_path / "outs" / "gate"
        out.parent.mkdir()
        # The code, the interpreter and its libraries, the system's shared libraries and devices, and the gate's
        # own directories. Not the shared data directory (datasets, BFCL docs), not the rest of tmp_path.
        allowed = [str(ROOT), sys.prefix, sys.base_prefix, *site.getsitepackages(), site.getusersitepackages(),
                   sysconfig.get_paths()["stdlib"], "/usr", "/lib", "/lib64", "/etc", "/proc", "/sys", "/dev",
                   str(golden), str(out.parent),  # out's parent: the gate checks it may write there
                   os.environ["VERIFIER_CACHE_DIR"],  # compiled lm-eval tasks (suites/lm_eval_compiled.py), sealed
                   os.environ["VERIFIER_CONFIG_DIR"]]  # the seal key (verifier/seal.py)
        r = subprocess.run([sys.executable, "-c", STRICT_GUARD, json.dumps(allowed), str(urlsplit(srv.url).port),
                            "gate", "--golden", str(golden), "--base-url", srv.url, "--model", "m", "--out", str(out),
                            "--quiet", "--max-retries", "0"],
                           # A BFCL data dir is known: scoring must still read nothing there (the sample carries its docs)
                           env={**os.environ, "PYTHONPATH": str(ROOT), "VERIFIER_BFCL_DATA": str(SHARED / "bfcl")},
                           capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.stdout.strip(), r.stderr[-2000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["code"] in (0, 10, 20), r.stderr[-2000:]
    assert (out / "verdicts.jsonl").stat().st_size > 0
    assert result["seen"] == [], result["seen"][:10]
