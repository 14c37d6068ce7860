"""`verifier sweep`: the performance probe against scripted latencies, the Pareto front, lossless claims, shards,
and the sweep file's schema, all through real test servers on 127.0.0.1 and the real command."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import SMOKE_RUN, reference_reply
from verifier.execution import perf
from verifier.app import sweep
from verifier.report.sweep import SweepRow
from verifier.testbed.server import Reply, Script, TestServer
from verifier.testbed.server import _usage as usage_of

WORDS = 12


def paced(delay_s: float, itl_s: float):
    """A server told to take `delay_s` before answering and `itl_s` between stream events, with WORDS tokens."""
    def reply(req):
        return Reply(content=" ".join(f"w{i}" for i in range(WORDS)), delay_s=delay_s, chunk_delay_s=itl_s)
    return reply


def _median(xs):
    return perf.percentile(xs, 50)


# The 5% accuracy claim is a benchmark (bench/perf/perf_probe.py prints it on a quiet machine); this test holds the
# probe to the same definitions with a tolerance a loaded 2-core CI machine keeps: client and server share this
# process, and a busy scheduler delays either side by tens of milliseconds.
TOLERANCE = 0.3


def test_probe_figures_follow_what_the_server_did():
    """The probe's TTFT, inter-token latency, latency and tokens/s follow the scripted server's own timing (it
    records when each event left: its sleeps overshoot on a loaded machine, so what it did, not only what it was
    told, is the reference); what it was told bounds the probe's figures from below."""
    delay, itl = 0.4, 0.08
    spec = perf.PerfSpec(concurrencies=(1, 2), prompt_tokens=(32,), output_tokens=WORDS, requests=2, repeats=2, warmup=1)
    script = Script(paced(delay, itl))
    with TestServer(script) as srv:
        doc = perf.probe(srv.url, "m", spec)
    assert [(lv["concurrency"], lv["prompt_tokens_target"]) for lv in doc["levels"]] == [(1, 32), (2, 32)]
    # The stream: a role event, WORDS text events, then finish, usage and [DONE]; events after the first are paced.
    # Each level sends one warm-up request, then 2 rounds of 2; with 2 per round a round's p50 is their mean, so
    # every figure of a level is the mean over its 4 measured requests.
    per_level = [script.stream_times[1:5], script.stream_times[6:10]]
    assert len(script.stream_times) == 10 and all(len(t["frames"]) == WORDS + 4 for t in script.stream_times)

    def mean(xs):
        return sum(xs) / len(xs)

    # Output tokens are the server's own count (usage), which the probe divides by: the test server's usage counts
    # the content's words plus its serialized (empty) tool-call list.
    tokens = usage_of(paced(delay, itl)({}), {})["completion_tokens"]
    assert tokens >= WORDS

    for lv, times in zip(doc["levels"], per_level):
        did = {"ttft": mean([t["frames"][1] - t["arrival"] for t in times]),
               "itl": mean([(t["frames"][WORDS] - t["frames"][1]) / (tokens - 1) for t in times]),
               "latency": mean([t["frames"][-1] - t["arrival"] for t in times])}
        assert did["ttft"] >= 0.99 * (delay + itl)  # a sleep may overshoot, never undershoot
        # The server stamps an event after its write returned, so the client may read it a little before the stamp
        # (0.7 ms seen under load): the client's figures are bounded below by what the server did, less that slack.
        slack = 0.01
        assert lv["figures"]["ttft_p50_s"]["mean"] >= did["ttft"] - slack
        assert lv["figures"]["latency_p50_s"]["mean"] >= did["latency"] - slack
        assert lv["failed"] == 0 and lv["ok"] == 4
        f = lv["figures"]
        assert f["ttft_p50_s"]["mean"] == pytest.approx(did["ttft"], rel=TOLERANCE)
        assert f["itl_mean_s"]["mean"] == pytest.approx(did["itl"], rel=TOLERANCE)
        assert f["latency_p50_s"]["mean"] == pytest.approx(did["latency"], rel=TOLERANCE)
        assert f["request_tokens_per_s"]["mean"] == pytest.approx(tokens / did["latency"], rel=TOLERANCE)
        assert f["aggregate_tokens_per_s"]["mean"] == pytest.approx(lv["concurrency"] * tokens / did["latency"], rel=TOLERANCE)
        assert f["ttft_p50_s"]["ci"] is not None and f["ttft_p50_s"]["n"] == 2  # repeats give an interval
        assert lv["output_tokens_mean"] == tokens
        assert lv["client"]["cpu_ms_per_request"] > 0
        # The client's CPU up to the first token is part of its CPU per request, and a small part of the TTFT.
        assert 0 < lv["client"]["ttft_cpu_ms"] < 1000 * lv["figures"]["ttft_p50_s"]["mean"]
    assert doc["levels"][0]["prompt_tokens"] > 20  # the server's own count of the fixed prompt


def test_probe_counts_failures_and_never_reports_them_as_speed():
    def broken(req):
        return Reply(status=500)
    spec = perf.PerfSpec(concurrencies=(1,), prompt_tokens=(16,), output_tokens=4, requests=2, repeats=1, warmup=0)
    with TestServer(Script(broken)) as srv:
        doc = perf.probe(srv.url, "m", spec)
    lv = doc["levels"][0]
    assert lv["ok"] == 0 and lv["failed"] == 2 and lv["errors"] == {"HTTP 500": 2}
    assert lv["figures"]["aggregate_tokens_per_s"]["mean"] is None
    assert any("2/2 requests failed" in w for w in doc["warnings"])


def _row(name, status, agg, ttft, req=None, ci=True):
    def f(m, half):
        return {"mean": m, "ci": [m - half, m + half] if ci else None, "n": 3}
    return SweepRow(name=name, status=status, perf={"aggregate_tokens_per_s": f(agg, 1.0), "ttft_p50_s": f(ttft, 0.001),
                                                    "request_tokens_per_s": f(req if req is not None else agg / 4, 0.25)})


def test_pareto_front_is_the_passing_configurations_no_one_beats_beyond_the_intervals():
    rows = [_row("fast", "pass", 100, 0.05), _row("slow", "pass", 50, 0.20), _row("faster-but-broken", "frontend_regression", 200, 0.01),
            _row("as-fast", "pass", 100.5, 0.0505), _row("low-latency", "pass", 60, 0.01, req=10)]
    front = {r.name for r in sweep.pareto(rows) if r.front}
    # slow is beaten on every figure; the broken one is fast but not faithful; fast and as-fast are within their
    # intervals of each other; low-latency trades throughput for TTFT, so nothing dominates it.
    assert front == {"fast", "as-fast", "low-latency"}
    one_round = [_row("a", "pass", 100, 0.05, ci=False), _row("b", "pass", 50, 0.2, ci=False)]
    assert all(r.front for r in sweep.pareto(one_round))  # without intervals nothing is decided faster


SWEEP_PERF = """
[perf]
concurrency = [1, 2]
prompt_tokens = [16]
output_tokens = 8
requests = 2
repeats = 2
warmup = 0
"""


def _sweep_file(tmp: Path, golden: Path, configs: list[tuple[str, str, bool]]) -> Path:
    text = f'golden = "{golden.as_posix()}"\n[gate]\nconcurrency = 4\nmax_retries = 0\n' + SWEEP_PERF
    for name, url, lossless in configs:
        text += f'\n[[config]]\nname = "{name}"\nbase_url = "{url}"\nmodel = "m"\nlossless = {str(lossless).lower()}\n'
    p = tmp / "sweep.toml"
    p.write_text(text)
    return p


def healthy(req):
    """The calibrated golden's reference: right sums; the probe's word-list prompt gets a word list back."""
    if "What is" in str(req.get("messages")):
        return reference_reply(req)
    return Reply(content=" ".join(f"w{i}" for i in range(8)))


def parted(req):
    """Right answers, but the greedy tokens part from the reference's after the first: not output-invariant."""
    r = healthy(req)
    return Reply(content=r.content + " .")


def test_sweep_gates_probes_and_marks_the_front(cli, tmp_path, calibrated_golden):
    with TestServer(Script(healthy)) as good, TestServer(Script(parted)) as drifting:
        f = _sweep_file(tmp_path, calibrated_golden["golden"],
                        [("healthy", good.url, True), ("parting", drifting.url, True)])
        code, out, err = cli("sweep", str(f), "--out", str(tmp_path / "sw"), "--quiet")
    assert code == 0, err
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    rows = {r["name"]: r for r in doc["rows"]}
    assert rows["healthy"]["status"] == "pass" and rows["healthy"]["front"]
    assert rows["healthy"]["lossless"]["held"] is True
    # The parting configuration answers right but its greedy tokens are not the reference's: the lossless claim fails.
    assert rows["parting"]["lossless"]["held"] is False and "samples" in rows["parting"]["lossless"]["why"]
    assert rows["parting"]["parting"]["count"] == rows["parting"]["parting"]["n"] > 0
    assert rows["healthy"]["perf"]["aggregate_tokens_per_s"]["mean"] > 0
    assert doc["front"] and set(doc["front"]) <= {"healthy", "parting"}
    html = (tmp_path / "sw" / "sweep.html").read_text()
    md = (tmp_path / "sw" / "sweep.md").read_text()
    assert 'data-config="healthy"' in html and "NOT output-invariant" in html and "http" not in re.sub(r"https?://127\.0\.0\.1:\d+/v1|https://json-schema[^\"]*", "", html.split("<table")[1])
    assert "| healthy |" in md and "NOT output-invariant" in md
    assert "sweep.html" in out and (tmp_path / "sw" / "healthy" / "gate" / "comparison.json").is_file()


def test_sweep_shards_combine_into_the_same_table(cli, tmp_path, calibrated_golden):
    with TestServer(Script(healthy)) as a, TestServer(Script(healthy)) as b:
        f = _sweep_file(tmp_path, calibrated_golden["golden"], [("a", a.url, False), ("b", b.url, False)])
        assert cli("sweep", str(f), "--only", "a", "--out", str(tmp_path / "job1"), "--quiet")[0] == 0
        assert cli("sweep", str(f), "--only", "b", "--out", str(tmp_path / "job2"), "--quiet")[0] == 0
    code, out, err = cli("sweep", "--combine", str(tmp_path / "job1" / "a"), str(tmp_path / "job2" / "b"), "--out", str(tmp_path / "all"))
    assert code == 0, err
    doc = json.loads((tmp_path / "all" / "sweep.json").read_text())
    assert [r["name"] for r in doc["rows"]] == ["a", "b"] and all(r["status"] == "pass" for r in doc["rows"])
    job1 = json.loads((tmp_path / "job1" / "sweep.json").read_text())
    assert [r["name"] for r in job1["rows"]] == ["a"]
    code, _, err = cli("sweep", str(f), "--only", "c", "--out", str(tmp_path / "x"))
    assert code == 2 and "no configuration 'c'" in err


def test_a_configuration_that_cannot_run_is_recorded_and_the_sweep_is_incomplete(cli, tmp_path, calibrated_golden):
    from verifier.testbed.engines import free_port

    with TestServer(Script(healthy)) as good:
        f = _sweep_file(tmp_path, calibrated_golden["golden"],
                        [("up", good.url, False), ("down", f"http://127.0.0.1:{free_port()}/v1", False)])
        code, out, err = cli("sweep", str(f), "--out", str(tmp_path / "sw"), "--quiet")
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    rows = {r["name"]: r for r in doc["rows"]}
    assert rows["up"]["status"] == "pass"
    assert rows["down"]["status"] != "pass" and not rows["down"]["front"]
    assert code in (0, 30)
    assert code == (30 if any(r.get("error") for r in doc["rows"]) else 0)


@pytest.mark.parametrize("body, key", [
    ('golden = "g"\n[[config]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\ncolour = "red"\n', "unknown key config.0.colour"),
    ('golden = "g"\n[[config]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\nlossless = "yes"\n', "config.0.lossless"),
    ('golden = "g"\n[perf]\nconcurrency = 4\n[[config]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\n', "perf.concurrency"),
    ('golden = "g"\n[perf]\nrepeats = 0\n[[config]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\n', "perf.repeats"),
    ('golden = "g"\n[[config]]\nname = "a"\nengine = "llama"\nmodel = "qwen0.5b"\noptions = { slots = "4" }\n', "config.0.options.slots"),
    ('golden = "g"\n[[config]]\nname = "a"\nengine = "llama"\nmodel = "qwen0.5b"\nbase_url = "http://x/v1"\n', "config.0"),
    ('golden = "g"\n[[config]]\nname = "a b"\nbase_url = "http://x/v1"\nmodel = "m"\n', "config.0.name"),
    ('golden = "g"\nconfig = []\n', "config"),
    ('golden = "g"\n[[config]]\nname = "a"\nengine = "llama"\nmodel = "qwen0.5b"\noptions = { kv_cache = "q3" }\n', "options.kv_cache 'q3'"),
    ('golden = "g"\nbudget = 1\n[[config]]\nname = "a"\nbase_url = "http://x/v1"\nmodel = "m"\n', "unknown key budget"),
])
def test_sweep_file_errors_name_the_key(cli, tmp_path, body, key):
    f = tmp_path / "bad.toml"
    f.write_text(body)
    code, out, err = cli("sweep", str(f), "--out", str(tmp_path / "o"))
    assert code == 2
    assert err.count("\n") == 1 and key in err, err
    assert not (tmp_path / "o").exists()


def test_combine_refuses_what_is_not_a_configuration_directory(cli, tmp_path):
    (tmp_path / "x").mkdir()
    code, _, err = cli("sweep", "--combine", str(tmp_path / "x"), "--out", str(tmp_path / "o"))
    assert code == 2 and "not a sweep configuration directory" in err


def test_combine_refuses_a_gate_comparison_it_cannot_read_naming_it(cli, tmp_path):
    """The table reads each configuration's comparison typed: a comparison.json that is JSON but not a comparison
    (another tool's, or damaged) is one line naming the file and exit 2, not half a row or a traceback."""
    cfg = tmp_path / "x"
    (cfg / "gate").mkdir(parents=True)
    (cfg / "config.json").write_text(json.dumps({"format": sweep.FORMAT, "name": "x", "golden": "g"}))
    (cfg / "gate" / "comparison.json").write_text(json.dumps({"status": "pass", "suites": {"s": "not a suite"}}))
    code, _, err = cli("sweep", "--combine", str(cfg), "--out", str(tmp_path / "o"))
    assert code == 2 and err.count("\n") == 1 and "comparison.json" in err and "not a comparison" in err, err
    assert not (tmp_path / "o" / "sweep.json").exists()


def test_the_sweep_files_typed_tables_are_the_schemas_keys(tmp_path):
    """SweepFile is read once at the door, right after the schema: each table's fields are exactly its schema keys
    (a key added to one and not the other fails here), and the file's values arrive as attributes."""
    from dataclasses import fields

    from verifier.cli import gatefile, sweep as sweepfile

    props = sweepfile.SCHEMA["properties"]
    assert {f.name for f in fields(sweepfile.SweepFile)} == set(props)
    assert {f.name for f in fields(sweepfile.SweepGateTable)} == set(props["gate"]["properties"])
    assert {f.name for f in fields(gatefile.SamplingTable)} == set(props["gate"]["properties"]["sampling"]["properties"])
    assert {f.name for f in fields(sweepfile.PerfTable)} == set(props["perf"]["properties"])
    assert {f.name for f in fields(sweepfile.ConfigTable)} == set(props["config"]["items"]["properties"])
    f = tmp_path / "sweep.toml"
    f.write_text('golden = "g"\nout = "o"\n[gate]\nsuites = ["smoke"]\nprobes = false\ninfra_budget = 0\n'
                 '[gate.sampling]\nextra_body = {}\n[perf]\nconcurrency = [1, 2]\n'
                 '[[config]]\nname = "a"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\nlossless = true\n')
    doc = sweepfile.read(str(f))
    assert (doc.golden, doc.out, doc.gate.suites, doc.gate.probes, doc.gate.sampling.extra_body) == ("g", "o", ("smoke",), False, {})
    assert doc.perf.concurrency == (1, 2) and doc.perf.requests is None and doc.config[0].lossless is True
    opts = doc.gate.options()
    assert opts.probes is not None and opts.probes.value == "off" and opts.infra_budget == 0.0 and opts.extra_body == {}
    spec = sweepfile.spec_from_file(doc, tmp_path / "out", quiet=True)
    assert spec.perf.concurrencies == (1, 2) and spec.perf.requests == perf.PerfSpec().requests and spec.configs[0].lossless


def test_the_docs_sweep_file_is_valid(tmp_path):
    from verifier.cli import sweep as sweepfile

    root = Path(__file__).resolve().parent.parent
    text = (root / "docs" / "sweeps.md").read_text(encoding="utf-8")
    block = re.search(r"```toml\n(.*?)```", text, re.S).group(1)
    f = tmp_path / "sweep.toml"
    f.write_text(block)
    doc = sweepfile.read(str(f))
    assert (root / doc.golden / "golden.json").exists()
    spec = sweepfile.spec_from_file(doc, tmp_path / "out", quiet=True)
    assert [c.name for c in spec.configs] == ["baseline", "prompt-cache-off", "hosted"]
    assert spec.configs[1].lossless and spec.configs[0].launcher is not None and spec.configs[2].launcher is None
    assert spec.perf.concurrencies == (1, 4, 16) and spec.perf.prompt_tokens == (256, 2048)


def test_sigterm_unwinds_the_sweep(tmp_path, calibrated_golden):
    """A cancelled CI job sends SIGTERM: the sweep unwinds (its engines' context managers run) and exits 143."""
    import os
    import signal
    import subprocess
    import sys
    import time

    def slow(req):
        return Reply(content=healthy(req).content, delay_s=3.0)

    with TestServer(Script(slow)) as srv:
        f = _sweep_file(tmp_path, calibrated_golden["golden"], [("slow", srv.url, False)])
        root = Path(__file__).resolve().parent.parent
        p = subprocess.Popen([sys.executable, "-m", "verifier", "sweep", str(f), "--out", str(tmp_path / "sw"), "--quiet"],
                             env={**os.environ, "PYTHONPATH": str(root)}, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not srv.script.requests and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        assert srv.script.requests, "the sweep never reached the endpoint"
        p.send_signal(signal.SIGTERM)
        try:
            code = p.wait(30)
        finally:
            p.kill()
        assert code == 143, p.stderr.read()


def test_a_vllm_configuration_becomes_a_vllm_server_with_its_flags():
    """The vLLM launcher builds the test bed's real server class (a wrong class name once failed every vLLM row)."""
    from verifier.cli.sweep import _vllm_server
    from verifier.testbed.vllm_engine import VllmServer

    srv = _vllm_server("qwen0.5b", ["--enforce-eager", "--max-num-seqs", "1"])
    assert isinstance(srv, VllmServer) and srv.proc is None
    assert srv.extra_args == ["--enforce-eager", "--max-num-seqs", "1"] and srv.name.startswith("qwen0.5b")


class _ClosingServer:
    """A raw HTTP/1.1 server that answers one streamed chat completion per connection and then closes it without
    saying `Connection: close`, as llama-server does; `answer=False` closes every connection before answering."""

    def __init__(self, answer: bool = True):
        import socket
        import threading

        self.answer, self.connections = answer, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        chunks = [{"choices": [{"index": 0, "delta": {"content": f" w{i}"}}]} for i in range(4)]
        chunks.append({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 4}})
        sse = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(sse), sse)
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        break
                    data += piece
                head, _, rest = data.partition(b"\r\n\r\n")
                length = int(re.search(rb"(?i)content-length:\s*(\d+)", head).group(1)) if head else 0
                while len(rest) < length:
                    rest += conn.recv(65536)
                if self.answer:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + body)

    def close(self):
        self.sock.close()


def test_a_server_that_closes_after_each_stream_loses_no_request():
    """llama-server closes the connection after a stream without `Connection: close`: the kept-alive connection is
    stale at the next request, which must be sent again, not counted as a failed request (half of a real sweep's
    requests were, before)."""
    srv = _ClosingServer()
    try:
        spec = perf.PerfSpec(concurrencies=(1, 2), prompt_tokens=(16,), output_tokens=4, requests=4, repeats=2, warmup=1)
        doc = perf.probe(srv.url, "m", spec)
    finally:
        srv.close()
    for lv in doc["levels"]:
        assert lv["failed"] == 0 and lv["ok"] == 8, lv["errors"]
        assert lv["output_tokens_mean"] == 4 and lv["prompt_tokens"] == 9
    assert sum(lv["reconnects"] for lv in doc["levels"]) > 0  # the stale connections were met, and said
    assert not any("failed" in w for w in doc["warnings"])


def test_a_server_that_never_answers_stays_a_bounded_failure():
    srv = _ClosingServer(answer=False)
    try:
        spec = perf.PerfSpec(concurrencies=(1,), prompt_tokens=(16,), output_tokens=4, requests=2, repeats=1, warmup=0)
        doc = perf.probe(srv.url, "m", spec)
    finally:
        srv.close()
    lv = doc["levels"][0]
    assert lv["ok"] == 0 and lv["failed"] == 2 and sum(lv["errors"].values()) == 2
    assert srv.connections == 2 * (perf.STALE_RETRIES + 1)  # each request re-sent a bounded number of times
    assert any("2/2 requests failed" in w for w in doc["warnings"])


def test_a_row_without_a_component_shows_the_gates_reason():
    from verifier.report.sweep import COLUMNS, cells

    reason = "smoke: drift 0.021 above floor 0.013 but no quality change and greedy outputs part on 0/20 samples"
    row = SweepRow(name="kv-q8_0", status="inconclusive", exit_code=20, reason=reason, diagnosis=None)
    got = dict(zip(COLUMNS, cells(row)))
    assert got["diagnosis"] == reason and got["status"] == "inconclusive (20)"
    assert dict(zip(COLUMNS, cells(replace(row, status="pass", exit_code=0))))["diagnosis"] == "—"
    long = dict(zip(COLUMNS, cells(replace(row, reason="x" * 500))))["diagnosis"]
    assert len(long) <= 140 and long.endswith("…")


def test_the_ttft_warning_reads_the_clients_cpu_before_the_first_token_not_the_whole_stream():
    """A streamed request costs the client CPU at every token (on a VM ~0.1 ms a wake-up even to a raw socket), none
    of it before the first token: a 12 ms/request stream against a 35 ms TTFT is no reason to doubt the TTFT, a client
    that spent 5 ms before the first token is."""
    def level(ttft_cpu_s):
        r = perf._Round(wall_s=4.0)
        r.samples = [perf.Sample(True, ttft_s=0.035, itl_s=0.03, latency_s=1.0, output_tokens=32, ttft_cpu_s=ttft_cpu_s)
                     for _ in range(4)]
        return perf._level(128, 1, 4, [r], cpu_s=4 * 0.012, wall_s=4.0)

    quiet = level(0.0008)
    assert quiet["client"]["cpu_ms_per_request"] == 12.0 and quiet["client"]["ttft_cpu_ms"] == 0.8
    assert quiet["warnings"] == []
    busy = level(0.005)
    assert len(busy["warnings"]) == 1 and "before the first token 5.00 ms" in busy["warnings"][0]


def test_a_terminated_sweep_prints_the_sweep_that_finishes_it(tmp_path, calibrated_golden):
    """SIGTERM while the second configuration gates: the printed command (the configurations not finished, same
    OUT) runs to the table the uninterrupted sweep gives; the half-made gate is kept aside, never mixed in."""
    import os
    import shlex
    import signal
    import subprocess
    import sys
    import time

    state = {"slow": True}

    def slow_then_fast(req):
        return Reply(content=healthy(req).content, delay_s=3.0 if state["slow"] else 0.0)

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = tmp_path / "sw"
    with TestServer(Script(healthy)) as fast, TestServer(Script(slow_then_fast)) as later:
        f = _sweep_file(tmp_path, calibrated_golden["golden"], [("first", fast.url, False), ("second", later.url, False)])
        p = subprocess.Popen([sys.executable, "-m", "verifier", "sweep", str(f), "--out", str(out), "--quiet"],
                             env=env, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not later.script.requests and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.1)
        assert later.script.requests, "the sweep never reached the second configuration"
        p.send_signal(signal.SIGTERM)
        try:
            code, err = p.wait(30), p.stderr.read()
        finally:
            p.kill()
        assert code == 143, err
        assert (out / "first" / "config.json").exists() and not (out / "second" / "config.json").exists()
        steps = [line.split(": ", 1)[1] for line in err.splitlines() if line.startswith("  continue with: ")]
        assert steps == [shlex.join(["verifier", "sweep", str(f), "--out", str(out), "--only", "second"])], err
        state["slow"] = False
        r = subprocess.run([sys.executable, "-m", *shlex.split(steps[0]), "--quiet"], env=env, capture_output=True,
                           text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rows = {row["name"]: row for row in json.loads((out / "sweep.json").read_text())["rows"]}
    assert set(rows) == {"first", "second"} and all(row["status"] == "pass" for row in rows.values()), rows
    assert (out / "second" / "gate.interrupted" / "run.json").exists()
    assert json.loads((out / "second" / "gate" / "comparison.json").read_text())["status"] == "pass"
