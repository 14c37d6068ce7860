"""Bounded work and memory on inputs within their caps (issue 49): schema checks with a step budget, JSON answers and
arguments parsed within a node budget, any string JSON can carry written by every writer, big goldens and journals
read in proportion to what is used, special files refused as data, template rendering bounded, and the timeout
message. Memory is asserted as the peak RSS of a child process, time with a deadline (a hang detector, not a speed
measurement: bench/ measures speed)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_server import HostileServer
from planted import answer_body, planted_record

from suites import replay
from suites import structured as st
from verifier.judge import schemacheck
from verifier.testbed.server import Reply, Script, TestServer
from verifier.types import Parsed, Sample

ROOT = Path(__file__).resolve().parent.parent
HANG_BOUND_S = 60.0
"""A hang detector, not a speed measurement: the 2**40 schema would take days; its budget ends each check in about
1.5 s on an idle machine (ten times that on a loaded 2-core CI runner)."""


def exploding_schema(levels: int = 40, under: str | None = None) -> dict:
    """2 KB of `$defs` a0..a<levels>, each an `allOf` of two refs to the one before: 2**levels subschemas, at the
    root or (`under`) only for an answer that has that property (so the schema passes the checks made at load)."""
    defs: dict = {"a0": {"type": "object"}}
    for i in range(1, levels + 1):
        defs[f"a{i}"] = {"allOf": [{"$ref": f"#/$defs/a{i - 1}"}, {"$ref": f"#/$defs/a{i - 1}"}]}
    top = f"#/$defs/a{levels}"
    if under:
        return {"type": "object", "$defs": defs, "properties": {under: {"$ref": top}}}
    return {"type": "object", "$defs": defs, "$ref": top}


def strict_sample(schema: dict, sid: str = "golden/x/strict") -> Sample:
    return Sample(id=sid, messages=[{"role": "user", "content": "x"}], meta={"variant": "strict"},
                  response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}})


def tool_parsed(arguments: str) -> Parsed:
    return Parsed(content=None, reasoning=None, finish_reason="tool_calls", usage=None,
                  tool_calls=[{"id": "c0", "type": "function", "function": {"name": "f", "arguments": arguments}}])


# --- 1. schema checks have a step budget ------------------------------------------------------------------------


def test_an_exploding_ref_schema_is_not_checkable_within_a_deadline_and_honest_checks_still_run():
    schema = exploding_schema()
    assert len(json.dumps(schema)) < 4096
    t0 = time.monotonic()
    v = st.score(strict_sample(schema), Parsed(content="{}", reasoning=None, tool_calls=None, finish_reason="stop", usage=None))
    assert [f.code for f in v.findings] == ["schema_not_checkable"] and "steps" in v.findings[0].detail
    assert "schema_compliance" not in v.metrics and v.outcome == "content"  # n/a, never against the endpoint
    tool = {"messages": [{"role": "user", "content": "x"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    r = replay.score(replay.make_sample(1, tool), tool_parsed("{}"))
    assert [f.code for f in r.findings] == ["schema_not_checkable"] and "f: checking needs more than" in r.findings[0].detail
    assert "schema_accuracy" not in r.metrics and r.signals["n_schema_unchecked"] == 1
    assert time.monotonic() - t0 < 2 * HANG_BOUND_S  # two checks, each to its budget
    # The budget grows with the instance: a large honest answer is still checked in full, valid and invalid.
    items = {"type": "array", "items": {"type": "object", "properties": {"a": {"type": "integer"}}}}
    big = [{"a": i} for i in range(20_000)]
    assert schemacheck.first_error(items, big) is None
    assert schemacheck.first_error(items, big + [{"a": "x"}]) is not None
    # Ten levels (1,024 leaves) are within the budget and checked as usual.
    assert schemacheck.first_error(exploding_schema(10), {}) is None
    assert schemacheck.first_error(exploding_schema(10), []) is not None


def test_a_requests_run_with_an_exploding_tool_schema_ends_with_verdicts(tmp_path, cli):
    """As a `--requests` tool: the request is sent and answered, and the sample says why its call is not checked.
    The explosion is under a property the call has, so the schema passes the checks made when it is read."""
    schema = exploding_schema(under="v")
    assert st.unusable(schema) is None
    body = {"messages": [{"role": "user", "content": "call f"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    reqs = tmp_path / "reqs.jsonl"
    reqs.write_text(json.dumps(body) + "\n")
    script = Script()
    script.rule("call f", Reply(content=None, tool_calls=[{"name": "f", "arguments": '{"v": {}}'}]))
    t0 = time.monotonic()
    with TestServer(script) as srv:
        code, _, err = cli("run", "--requests", reqs, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r",
                           "--quiet", "--request-deadline", "30")
        assert code == 0, err
        assert len(srv.script.requests) == 1
    assert time.monotonic() - t0 < HANG_BOUND_S
    vs = [json.loads(x) for x in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    assert [f["code"] for f in vs[0]["findings"]] == ["schema_not_checkable"] and "steps" in vs[0]["findings"][0]["detail"]
    assert vs[0]["signals"]["n_schema_unchecked"] == 1 and "schema_accuracy" not in vs[0]["metrics"]


def test_a_gate_against_a_golden_with_an_exploding_schema_sends_every_request_and_ends(tmp_path, cli):
    """The issue's reproduction: a golden's structured sample whose schema expands 2**40 times; the gate sent all its
    requests and was still scoring at 150 s. Now each such sample is `schema_not_checkable` and the gate ends."""
    from conftest import zero_margins

    bench = tmp_path / "bench" / "Hostile"
    bench.mkdir(parents=True)
    (bench / "refs.json").write_text(json.dumps(exploding_schema(under="v")))
    with TestServer(Script(lambda req: Reply(content='{"v": {}}'))) as srv:
        code, _, err = cli("run", "--suite", "structured", "--data", tmp_path / "bench", "--mode", "chat", "--base-url",
                           srv.url, "--model", "m", "--out", tmp_path / "ref", "--quiet")
        assert code == 0, err
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "golden")[0] == 0
        zero_margins(tmp_path / "golden")
        sent = len(srv.script.requests)
        t0 = time.monotonic()
        code, _, err = cli("gate", "--golden", tmp_path / "golden", "--base-url", srv.url, "--model", "m",
                           "--out", tmp_path / "gate", "--quiet")
        took = time.monotonic() - t0
        assert len(srv.script.requests) == 2 * sent
    assert code == 0, err
    assert took < 2 * HANG_BOUND_S
    vs = [json.loads(x) for x in (tmp_path / "gate" / "verdicts.jsonl").read_text().splitlines()]
    hostile = [v for v in vs if v["sample_id"].startswith("Hostile/")]
    assert len(hostile) == 2 and all([f["code"] for f in v["findings"]] == ["schema_not_checkable"] for v in hostile)


# --- 2. JSON answers and arguments are parsed into objects within a value budget --------------------------------

RSS_SCRIPT = ("import json, sys\nfrom verifier.cli import main\ncode = main(sys.argv[1:])\n"
              "print(json.dumps({'code': code, 'rss_mb': int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))")
"""`verifier ARGS` in a fresh interpreter, then its own peak RSS (VmHWM: ru_maxrss would carry pytest's peak across exec)."""


def cli_rss(*args, timeout: float = 300) -> tuple[int | None, float | None, str]:
    """(exit code, peak RSS in MB, stderr) of `verifier ARGS` in a child process; the timeout is the deadline."""
    p = subprocess.run([sys.executable, "-c", RSS_SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = json.loads(p.stdout.strip().splitlines()[-1]) if p.stdout.strip() else {"code": None, "rss_mb": None}
    return last["code"], last["rss_mb"], p.stderr


def test_a_60_mib_structured_answer_of_empty_objects_is_a_finding_under_500_mb(tmp_path):
    """The issue's reproduction: 60 MiB of `[{},{},...]` answering a structured sample (within the 64 MiB body cap)
    took 148 s and 3,286 MB. Now the answer is the finding `json_too_large` on its sample, and the run goes on."""
    t0 = time.monotonic()
    with HostileServer("many_values", deep_where="content", pad_mb=60) as srv:
        code, rss, err = cli_rss("run", "--suite", "structured", "--smoke", "--limit", "2", "--base-url", srv.url,
                                 "--model", "m", "--out", tmp_path / "r", "--quiet")
    took = time.monotonic() - t0
    assert code == 0, err[-2000:]
    vs = [json.loads(x) for x in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    assert len(vs) == 2
    for v in vs:
        assert v["outcome"] == "contract" and v["metrics"]["valid_json"] == 0.0, v  # the answer is not parsed
        assert v["findings"][0] == {"code": "json_too_large", "detail": "content"}
    assert rss < 500, rss
    assert took < 240, took


def test_a_20_mib_tool_call_arguments_is_a_finding_under_500_mb(tmp_path):
    """20 MiB of tool-call `arguments` took 21.5 s and 1,190 MB; streamed and not."""
    body = {"messages": [{"role": "user", "content": "call f"}],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]}
    reqs = tmp_path / "reqs.jsonl"
    reqs.write_text(json.dumps(body) + "\n")
    t0 = time.monotonic()
    with HostileServer("many_values", deep_where="tool_args", pad_mb=20) as srv:
        code, rss, err = cli_rss("run", "--requests", reqs, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r",
                                 "--quiet", "--mode", "chat,chat-stream")
    took = time.monotonic() - t0
    assert code == 0, err[-2000:]
    vs = [json.loads(x) for x in (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines()]
    assert len(vs) == 2
    for v in vs:
        assert v["outcome"] == "contract" and v["reason"] == "json_too_large", v
        assert v["findings"][0] == {"code": "json_too_large", "detail": "tool arguments"}
    assert rss < 500, rss
    assert took < 240, took


# --- 3. every writer takes any string JSON can carry ------------------------------------------------------------

SURROGATE_SERVER = """
import sys, time
from verifier.testbed.server import Reply, Script, TestServer
with TestServer(Script(lambda req: Reply(content="\\ud800 4 \\udfff"))) as srv:
    print(srv.url, flush=True)
    time.sleep(600)
"""


def test_lone_surrogates_in_answers_and_a_goldens_name_and_content_reach_every_output(tmp_path, calibrated_golden):
    """`"\\ud800"` is valid JSON: in an endpoint's answers, a golden's name and its recorded content. gate (a real
    process, its real stdout and stderr), report, bless and list-goldens complete with every output; JSON files keep
    the escape, so the string reads back as it was."""
    golden = tmp_path / "goldens" / "sur"
    shutil.copytree(calibrated_golden["golden"], golden)
    header = json.loads((golden / "golden.json").read_text())
    (golden / "golden.json").write_text(json.dumps({**header, "name": "smoke\ud800"}, indent=1))
    rows = [json.loads(x) for x in (golden / "samples.jsonl").read_text().splitlines()]
    (golden / "samples.jsonl").write_text("".join(json.dumps({**r, "content": r["content"] + "\udfff"}) + "\n" for r in rows))
    srv = subprocess.Popen([sys.executable, "-c", SURROGATE_SERVER], stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        url = srv.stdout.readline().strip()
        out = tmp_path / "gate"
        p = subprocess.run([sys.executable, "-m", "verifier", "gate", "--golden", golden, "--base-url", url, "--model", "m",
                            "--out", out, "--report", tmp_path / "r.html", "--junit", tmp_path / "j.xml",
                            "--markdown", tmp_path / "s.md"], capture_output=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"})
    finally:
        srv.kill()
        srv.wait()
    stdout, stderr = p.stdout.decode(), p.stderr.decode()
    assert p.returncode == 13, stderr[-2000:]  # quality dropped to 0: a verdict, not an internal error
    assert "UnicodeEncodeError" not in stderr + stdout
    for f in (tmp_path / "r.html", tmp_path / "j.xml", tmp_path / "s.md", out / "samples.csv", out / "comparison.json",
              out / "observations.jsonl", out / "verdicts.jsonl", out / "responses.jsonl"):
        assert f.is_file() and f.stat().st_size > 0, f
        f.read_bytes().decode("utf-8")  # strict UTF-8 on disk
    import xml.dom.minidom
    xml.dom.minidom.parse(str(tmp_path / "j.xml"))
    observed = [json.loads(x) for x in (out / "observations.jsonl").read_text().splitlines()[1:-1]]
    assert any(r.get("content") == "\ud800 4 \udfff" for r in observed)  # read back exactly as answered
    assert "\\ud800" in (tmp_path / "r.html").read_text()
    from verifier.cli.main import main
    assert main(["report", str(out), "--golden", str(golden), "-o", str(tmp_path / "again")]) == 0
    assert main(["bless", str(out), "--to", str(tmp_path / "goldens" / "blessed")]) == 0
    blessed = [json.loads(x) for x in (tmp_path / "goldens" / "blessed" / "samples.jsonl").read_text().splitlines()]
    assert any(r.get("content") == "\ud800 4 \udfff" for r in blessed)
    p = subprocess.run([sys.executable, "-m", "verifier", "list-goldens", tmp_path / "goldens"], capture_output=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"})
    assert p.returncode == 0 and b"sur" in p.stdout, p.stderr


def surrogate_golden(where: Path, calibrated: Path) -> Path:
    """The calibrated golden with a lone surrogate in its name and in every recorded content."""
    shutil.copytree(calibrated, where)
    header = json.loads((where / "golden.json").read_text())
    (where / "golden.json").write_text(json.dumps({**header, "name": "smoke\ud800"}, indent=1))
    rows = [json.loads(x) for x in (where / "samples.jsonl").read_text().splitlines()]
    (where / "samples.jsonl").write_text("".join(json.dumps({**r, "content": r["content"] + "\udfff"}) + "\n" for r in rows))
    return where


def strict_utf8(*paths: Path) -> None:
    for f in paths:
        assert f.is_file() and f.stat().st_size > 0, f
        f.read_bytes().decode("utf-8")  # strict: a lone surrogate is on disk as its escape, never as bytes


def test_lone_surrogates_reach_the_step_summary_the_matrix_and_the_sweep(tmp_path, calibrated_golden):
    """The writers the first surrogate test does not reach: $GITHUB_STEP_SUMMARY (appended by gate), `matrix` and
    `sweep` (json, html, md), each a real process with strict UTF-8 stdout, over a golden whose name and content
    hold lone surrogates and an endpoint answering with them. Each exits as documented (13: a quality drop of
    unattributed cause; sweep 0: no configuration failed to run), never UnicodeEncodeError."""
    golden = surrogate_golden(tmp_path / "goldens" / "sur", calibrated_golden["golden"])
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONIOENCODING": "utf-8"}
    step = tmp_path / "step.md"
    step.write_text("earlier step\n")
    srv = subprocess.Popen([sys.executable, "-c", SURROGATE_SERVER], stdout=subprocess.PIPE, text=True, env=env)
    try:
        url = srv.stdout.readline().strip()
        gate = subprocess.run([sys.executable, "-m", "verifier", "gate", "--golden", golden, "--base-url", url,
                               "--model", "m", "--out", tmp_path / "gate", "--quiet"], capture_output=True, timeout=300,
                              env={**env, "GITHUB_STEP_SUMMARY": str(step)})
        (tmp_path / "sweep.toml").write_text(
            f'golden = "{golden.as_posix()}"\n[gate]\nconcurrency = 4\nmax_retries = 0\n[perf]\nconcurrency = [1]\n'
            f'prompt_tokens = [16]\noutput_tokens = 8\nrequests = 2\nrepeats = 1\nwarmup = 0\n'
            f'[[config]]\nname = "sur"\nbase_url = "{url}"\nmodel = "m"\nlossless = true\n')
        sweep = subprocess.run([sys.executable, "-m", "verifier", "sweep", tmp_path / "sweep.toml", "--out",
                                tmp_path / "sw", "--quiet"], capture_output=True, timeout=300, env=env)
    finally:
        srv.kill()
        srv.wait()
    matrix = subprocess.run([sys.executable, "-m", "verifier", "matrix", "--golden", golden, "--out", tmp_path / "mx",
                             f"sur={tmp_path / 'gate'}"], capture_output=True, timeout=300, env=env)
    for p in (gate, sweep, matrix):
        out = p.stdout.decode("utf-8") + p.stderr.decode("utf-8")
        assert "UnicodeEncodeError" not in out and "Traceback" not in out, out[-2000:]
    assert gate.returncode == 13, gate.stderr[-2000:]
    text = step.read_text(encoding="utf-8")
    assert text.startswith("earlier step\n") and len(text) > len("earlier step\n") + 100
    strict_utf8(step)
    assert matrix.returncode == 13, matrix.stderr[-2000:]
    strict_utf8(*(tmp_path / "mx" / name for name in ("matrix.json", "matrix.html", "matrix.md")))
    shown = json.loads((tmp_path / "mx" / "matrix.json").read_text())
    assert shown["golden"] == "smoke\ud800" and [r["status"] for r in shown["rows"]] == ["regression_unattributed"]
    assert "\\ud800" in (tmp_path / "mx" / "matrix.html").read_text() + (tmp_path / "mx" / "matrix.md").read_text()
    assert sweep.returncode == 0, sweep.stderr[-2000:]
    strict_utf8(*(tmp_path / "sw" / name for name in ("sweep.json", "sweep.html", "sweep.md")))
    rows = json.loads((tmp_path / "sw" / "sweep.json").read_text())["rows"]
    assert [(r["name"], r["status"]) for r in rows] == [("sur", "regression_unattributed")]


def test_the_console_escapes_lone_surrogates():
    from verifier.cli.console import printable

    assert printable("a\ud800b\udfff\x1b") == "a\\ud800b\\udfff\\x1b"
    printable("\ud800").encode("utf-8")


# --- 15. special files as data are refused ----------------------------------------------------------------------


def test_special_files_as_data_are_refused_in_one_line_before_anything_is_sent(tmp_path, cli, server):
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    for data in ("/dev/zero", str(fifo), f"gsm8k={fifo}"):
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "verifier", "run", "--suite", "gsm8k", "--data", data, "--base-url",
                            server.url, "--model", "m", "--out", tmp_path / "r", "--quiet"],
                           capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert p.returncode == 2, (data, p.stderr[-2000:])
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and "refused" in lines[0] and ("FIFO" in lines[0] or "character device" in lines[0]), lines
        assert time.monotonic() - t0 < 60
    assert server.script.requests == [] and not (tmp_path / "r").exists()
    # A gate file's `data` too.
    golden = ROOT / "goldens" / "demo-smoke"
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "{golden}"\ndata = "/dev/zero"\n[endpoint]\nbase_url = "{server.url}"\nmodel = "m"\n'
                   f'[outputs]\ndir = "{tmp_path / "g"}"\n')
    code, _, err = cli("gate", "--config", cfg, "--quiet")
    assert code == 2 and "/dev/zero: refused, a character device" in err and len(err.strip().splitlines()) == 1, err
    assert server.script.requests == []


# --- 16. a timeout says which limit fired and what had arrived --------------------------------------------------


def test_a_timeout_says_whether_the_stream_was_sending_and_which_limit_fired(tmp_path, cli):
    from verifier.wire.endpoint import TIMEOUTS

    flags = ["--suite", "smoke", "--smoke", "--limit", "1", "--mode", "chat-stream", "--model", "m", "--max-retries", "0"]
    cases = (("endless", ["--timeout", "1", "--request-deadline", "2"], TIMEOUTS["deadline_streaming"]),
             ("stall", ["--timeout", "1", "--request-deadline", "30"], TIMEOUTS["stalled"]))
    for behaviour, limits, said in cases:
        t0 = time.monotonic()
        with HostileServer(behaviour) as srv:
            code, _, err = cli("run", *flags, *limits, "--base-url", srv.url, "--out", tmp_path / behaviour)
        assert time.monotonic() - t0 < 30
        assert code == 0, err
        assert f"1 x timeout: {said}" in err and "sent nothing" not in err, err
        ex = json.loads((tmp_path / behaviour / "responses.jsonl").read_text().splitlines()[0])
        assert ex["error"] == "timeout" and ex["chunks"]  # the journal's class is unchanged; what arrived is kept
    # Nothing arrived within a read's --timeout: still "sent nothing" (tests/test_wire_transport_errors.py's silent server).
    from verifier.wire.endpoint import describe_error, timed_out

    assert timed_out(False, []) == "nothing" and timed_out(True, None) == "deadline"
    assert describe_error("timeout/nothing") == describe_error("timeout") == f"timeout: {TIMEOUTS['nothing']}"
    assert "--request-deadline" in describe_error("timeout/deadline")


# --- 10. cached templates render within bounds ------------------------------------------------------------------

HOSTILE_TEMPLATES = (
    "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",  # the issue's: 10**10 steps
    "{% for i in xs %}{% for j in xs %}{% for k in xs %}{{ k }}{% endfor %}{% endfor %}{% endfor %}",  # a doc's own list
    "{{ 'x' * 1500000000 }}", "{{ '%0999999999d' % 1 }}", "{{ 10 ** 1000000 }}", "{{ 'x'.ljust(1000000000) }}",
    "{{ 'x'|center(1000000000) }}", "{{ range(100000)|join('y' * 1000) }}", "{{ question|replace('', 'z' * 100000) }}",
    "{% for i in range(30000) %}{{ 'x' * 200 }}{% endfor %}",  # 6 M characters of output
)


def test_a_cached_template_renders_within_bounds_or_fails_fast_with_one_clear_line():
    from suites import lm_eval_compiled as compiled
    from suites.bounded_jinja import MAX_STEPS, TemplateBudget
    from verifier.errors import UsageError

    doc = {"question": "What is 2 + 2?" * 10, "xs": list(range(1000)), "answer": "x #### 4"}
    for source in HOSTILE_TEMPLATES:
        t0 = time.monotonic()
        try:
            compiled.render(source, doc)
        except TemplateBudget as e:
            assert isinstance(e, UsageError) and "\n" not in str(e) and "cache" in str(e), source
        else:
            raise AssertionError(f"rendered without a bound: {source}")
        assert time.monotonic() - t0 < 5, source
    # The budget is per render: honest templates render as lm-eval renders them, loops and all, again and again.
    honest = "Q: {{question[:14]}}\n{% for x in xs[:3] %}{{loop.index}}. {{x}}\n{% endfor %}A: {{ answer.split('####')[-1].strip() }}"
    for _ in range(3):
        assert compiled.render(honest, doc) == "Q: What is 2 + 2?\n1. 0\n2. 1\n3. 2\nA: 4"
    assert compiled.render("{% for i in range(" + str(MAX_STEPS // 2 - 1) + ") %}{% endfor %}ok", doc) == "ok"
    assert compiled.render("{{ 'a'.center(5) }}|{{ ['a','b']|join(',') }}|{{ '%3d'|format(7) }}|{{ '%s!' % 'hi' }}", doc) == "  a  |a,b|  7|hi!"


# --- 7. big goldens and long lines within the caps --------------------------------------------------------------


def big_golden(where: Path, samples: int, pad: int = 3000) -> Path:
    """A demo-smoke golden grown to `samples` arithmetic samples (two modes each), each row padded with `pad`
    characters of recorded content: tens of MB written in about a second, every invariant kept (dataset_sha256)."""
    from verifier.execution.runner import dataset_sha256
    from verifier.types import Sample

    src = ROOT / "goldens" / "demo-smoke"
    where.mkdir(parents=True)
    header = json.loads((src / "golden.json").read_text())
    row = json.loads((src / "samples.jsonl").read_text().splitlines()[0])
    inputs, rows = [], []
    for i in range(samples):
        a, b = i % 97, i // 97
        inputs.append({"suite": "smoke", "id": f"big-{i:06d}",
                       "messages": [{"role": "user", "content": f"What is {a} + {b}? Reply with just the number."}],
                       "tools": None, "response_format": None, "target": str(a + b), "meta": {}, "params": {}})
        for mode in ("chat", "chat-stream"):
            rows.append(json.dumps({**row, "sample_id": f"big-{i:06d}", "mode": mode, "answer": str(a + b),
                                    "content": str(a + b) + " " * pad}) + "\n")
    (where / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in inputs))
    (where / "samples.jsonl").write_text("".join(rows))
    digest = dataset_sha256([Sample.from_json({k: v for k, v in r.items() if k != "suite"}) for r in inputs])
    header["suites"]["smoke"].update(dataset_sha256=digest, samples=samples, requests=2 * samples)
    (where / "golden.json").write_text(json.dumps(header))
    return where


LOAD_SCRIPT = """
import json, sys, time
from verifier.golden import store
t0 = time.monotonic()
g = store.load(sys.argv[1], int(sys.argv[2]))
hwm = int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024
print(json.dumps({"rows": len(g.observations), "records": g.whole_records, "s": time.monotonic() - t0, "rss_mb": hwm}))
"""


def test_a_big_golden_is_listed_from_its_header_and_gated_with_limit_in_memory_of_what_is_gated(tmp_path, server):
    """A 10,000-sample golden (20,000 rows, 70 MB): list-goldens read all of it (the issue's 100,000 rows: 104 s,
    1,030 MB), and so did `gate --limit 5` to send 10 requests. Listing reads golden.json only; a limit keeps and
    checks only the rows it gates (here the whole load takes ~40 s of schema checks and 120 MB)."""
    golden = big_golden(tmp_path / "goldens" / "big", 10_000)
    size = (golden / "samples.jsonl").stat().st_size
    assert size > 60 * 2**20
    t0 = time.monotonic()
    code, rss, err = cli_rss("list-goldens", tmp_path / "goldens")
    assert code == 0 and rss < 100 and time.monotonic() - t0 < 30, (code, rss, err)
    p = subprocess.run([sys.executable, "-c", LOAD_SCRIPT, golden, "5"], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    loaded = json.loads(p.stdout)
    assert loaded["rows"] == 10 and loaded["records"] == 10_000, loaded
    assert loaded["rss_mb"] * 2**20 < size, loaded  # less than the rows' own text: they were streamed, not held
    t0 = time.monotonic()
    code, rss, err = cli_rss("gate", "--golden", golden, "--base-url", server.url, "--model", "m", "--limit", "5",
                             "--out", tmp_path / "g", "--quiet")
    assert code == 0, err[-2000:]
    # the 10 gated records, and the resend step's few requests sent again (issue 47: its own journal, resends.jsonl)
    resent = len((tmp_path / "g" / "resends.jsonl").read_text().splitlines())
    assert 0 < resent <= 4 and len(server.script.requests) == 10 + resent
    assert time.monotonic() - t0 < 120 and rss < 250, rss
    limited = json.loads((tmp_path / "g" / "comparison.json").read_text())["limited"]
    assert limited["golden_records"] == 10_000 and limited["gated_records"] == 5


def test_one_line_over_its_cap_is_refused_naming_the_line_before_it_is_parsed(tmp_path, cli, calibrated_golden):
    from verifier.execution import layout
    from verifier.golden.schema import MAX_SAMPLES_LINE

    golden = tmp_path / "g"
    shutil.copytree(calibrated_golden["golden"], golden)
    with open(golden / "samples.jsonl", "r+b") as f:  # a 500 MB line of NULs, sparse: nothing but the cap reads it
        f.truncate(0)
        f.truncate(500 * 2**20)
    t0 = time.monotonic()
    code, rss, err = cli_rss("list-goldens", tmp_path)
    assert code == 0
    code, rss, err = cli_rss("compare", calibrated_golden["r2"], "--golden", golden, "--out", tmp_path / "c.json")
    assert code == 2 and f"line 1 is longer than the cap of {MAX_SAMPLES_LINE} bytes" in err and len(err.strip().splitlines()) == 1, err
    assert rss < 200 and time.monotonic() - t0 < 60, rss
    # A journal line over its cap: exit 2 naming the file and the line, never an internal error.
    run = tmp_path / "run"
    shutil.copytree(calibrated_golden["r2"], run)
    with open(run / "responses.jsonl", "ab") as f:
        f.truncate(f.tell() + layout.MAX_LINE + 2**20)
    code, _, err = cli("score", run)
    lines = sum(1 for _ in open(calibrated_golden["r2"] / "responses.jsonl", "rb"))
    assert code == 2 and f"line {lines + 1} is longer than {layout.MAX_LINE} bytes" in err and "internal" not in err, err


def plant_long_line(path: Path, size: int, at: int = 2) -> None:
    """Line `at` of a JSONL file becomes `size` NUL bytes, written as a hole (sparse: no time, no disk)."""
    lines = path.read_bytes().splitlines(keepends=True)
    with open(path, "wb") as f:
        f.writelines(lines[:at - 1])
        f.seek(size, os.SEEK_CUR)
        f.write(b"\n")
        f.writelines(lines[at - 1:])


@pytest.mark.parametrize("name,cmd", [("responses.jsonl", "compare"), ("responses.jsonl", "report"),
                                      ("observations.jsonl", "compare"), ("verdicts.jsonl", "report")])
def test_a_run_line_over_its_cap_is_refused_holding_one_piece_of_it(tmp_path, calibrated_golden, name, cmd):
    """A line over the line cap (layout.MAX_LINE, 128 MiB; the issue's reproduction was 401 MiB over the 400 MiB cap
    of then) was read whole before it was refused (847 MB peak for
    compare, 926 MB for report). It is measured a piece at a time and refused holding one piece: the journal's is
    exit 2 naming file and line; a derived file's (observations, verdicts) is not the one scoring wrote, so the run
    is scored again from its journal (in place by `report`, which replaces the file; in memory by `compare --out`)."""
    from verifier.execution import layout

    run = tmp_path / "run"
    shutil.copytree(calibrated_golden["ref"], run)
    assert cli_rss("compare", run, "--golden", calibrated_golden["golden"])[0] == 0  # scored: every file present
    plant_long_line(run / name, layout.MAX_LINE + 2**20)
    args = {"compare": ["compare", run, "--golden", calibrated_golden["golden"], "--out", tmp_path / "c.json"],
            "report": ["report", run]}[cmd]
    t0 = time.monotonic()
    code, rss, err = cli_rss(*args, timeout=120)
    assert rss is not None and rss < 200, f"peak RSS {rss} MB"
    assert time.monotonic() - t0 < 60
    if name == layout.RESPONSES:
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1, err
        assert lines[0] == f"verifier: error: {run / name}: line 2 is longer than {layout.MAX_LINE} bytes (the cap on one line)"
    else:
        assert code == 0, err
        if cmd == "compare":  # with --out: scored again in memory, the run left as it is
            assert json.loads((tmp_path / "c.json").read_text())["status"] == "pass"
            assert (run / name).stat().st_size > layout.MAX_LINE
        else:
            assert (run / name).stat().st_size < 2**20  # written again from the journal


def test_a_line_is_measured_before_it_is_read(tmp_path, monkeypatch):
    """safeio.read_line at the edges of its cap and of its measuring piece (a piece of 4 bytes here)."""
    from verifier import safeio

    monkeypatch.setattr(safeio, "SCAN_CHUNK", 4)
    p = tmp_path / "f"
    p.write_bytes(b"ab\n" + b"x" * 9 + b"\n" + b"y" * 10 + b"\n" + b"z" * 7)
    with open(p, "rb") as f:
        assert safeio.read_line(f, 10) == b"ab\n"
        assert safeio.read_line(f, 10) == b"x" * 9 + b"\n"  # exactly the cap, newline included, past several pieces
        assert safeio.read_line(f, 10) is None  # one byte over
    with open(p, "rb") as f:
        assert [safeio.read_line(f, 11) for _ in range(5)] == [b"ab\n", b"x" * 9 + b"\n", b"y" * 10 + b"\n", b"z" * 7, b""]
    with open(p, "rb") as f:
        assert safeio.read_line(f, 2) is None  # shorter than one piece, over a small cap
    p.write_bytes(b"z" * 12)  # a last line without its newline, over the cap
    with open(p, "rb") as f:
        assert safeio.read_line(f, 11) is None


def test_the_tool_calls_of_one_response_share_one_step_budget():
    """Fifty calls of a tool whose schema expands 2**40 times cost one budget, not fifty."""
    from suites import bfcl_checker as chk

    tools = [{"type": "function", "function": {"name": "f", "parameters": exploding_schema(under="v")}}]
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": '{"v": {}}'}} for i in range(50)]
    t0 = time.monotonic()
    checks = chk.call_checks(tools, calls)
    assert len(checks) == 50 and all(isinstance(c, str) and "steps" in c for c in checks)
    assert time.monotonic() - t0 < HANG_BOUND_S
    ok = [{"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}}]
    assert chk.call_checks(ok, [{"function": {"name": "g", "arguments": '{"n": 1}'}}, {"function": {"name": "g", "arguments": '{"n": "x"}'}}]) == [True, False]


# --- the live follower measures an unfinished record before it reads it -----------------------------------------

FOLLOW_SCRIPT = """
import json, os, sys
from pathlib import Path
from verifier.app.catalog import get_suites
from verifier.execution import journal, layout, live
run, complete, offset = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
path = run / journal.RESPONSES
def hwm():
    return int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024
out = {}
f = live.Follower(run, get_suites())
out["waits"] = f.step(float("inf"))  # the unfinished record, within the cap: nothing judged, nothing held
out["lines"], out["offset_ok"] = f.lines, f.offset == offset
out["rss_waiting"] = hwm()
with open(path, "r+b") as j:  # the record grows past the line cap, still without its newline
    j.truncate(f.offset + layout.MAX_LINE + 2**20)
try:
    f.step(float("inf"))
    out["refused"] = None
except journal.CorruptFile as e:
    out["refused"] = str(e)
out["rss"] = hwm()
f.close()
print(json.dumps(out))
"""


def test_the_live_follower_measures_an_unfinished_record_without_holding_it(tmp_path, calibrated_golden):
    """`run` judges the journal while it is written (execution/live.py). A record not yet ended (or a resumed run's
    torn tail before the writer cuts it) was read whole at every step, growing to the file's end: a 300 MiB one held
    300 MiB, and one past the line cap held all of it (here one just under the cap, then past it). Now it is measured a piece at a time and read only once it is
    complete and within layout.MAX_LINE; past the cap the follower stops naming the line (the run is then scored
    afresh, which refuses that line as `score` does)."""
    from verifier.execution import journal, layout

    run = tmp_path / "run"
    shutil.copytree(calibrated_golden["ref"], run)
    path = run / journal.RESPONSES
    complete, offset = len(path.read_bytes().splitlines()), path.stat().st_size
    with open(path, "ab") as f:  # an unfinished record just under the line cap (120 MiB): a hole, no time, no disk
        f.write(b'{"suite": "smoke", ')
        f.truncate(f.tell() + layout.MAX_LINE - 8 * 2**20)
    p = subprocess.run([sys.executable, "-c", FOLLOW_SCRIPT, run, str(complete), str(offset)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["waits"] is True and out["lines"] == complete and out["offset_ok"], out
    assert out["rss_waiting"] < 150, out  # 300 MiB were read whole before
    assert out["refused"] == f"{path}: line {complete + 1} is longer than {layout.MAX_LINE} bytes (the cap on one line)", out
    assert out["rss"] < 150, out


# --- 7. what one journal record costs to read, within its caps ---------------------------------------------------

MIB = 2**20
EMOJI = "\U0001F600"


@pytest.mark.parametrize("text", ["", "plain", "caf\u00e9", "\u4e2d\u6587 and ascii", "ends in " + EMOJI, "\u00ff" * 5,
                                  "\u0100", "\ufffd\u2019", "\ud800 lone", "\x01\x02 controls"])
def test_text_memory_is_measured_on_the_bytes_as_python_stores_the_string(text):
    """textmemory.measure, on the UTF-8 bytes, gives the characters and the width CPython stores the decoded string
    at (1, 2 or 4 bytes a character: its `sys.getsizeof` grows by that per character), and the widest string JSON
    can parse from a line holding it escaped, as the journal writer escapes it."""
    from verifier.textmemory import measure

    raw = text.encode("utf-8", "surrogatepass")  # as `layout.line_text` decodes a line back
    m = measure(raw)
    assert m.size == len(raw) and m.characters >= len(text)
    assert m.characters == len(text) or "\ud800" in text  # a surrogate's 3 bytes count 3: never under
    if text:
        assert m.width == sys.getsizeof(text + "x") - sys.getsizeof(text), text  # one character more: one width more
    line = json.dumps({"t": text}, ensure_ascii=False).encode("utf-8", "backslashreplace")
    value = json.loads(line)["t"]
    assert measure(line).parsed >= len(value) * (sys.getsizeof(value + "x") - sys.getsizeof(value))


def test_json_escapes_count_at_the_width_they_parse_to():
    """An ASCII line whose escapes parse to wide strings is counted at their width: `\\ud83d\\ude00` (a character
    beyond U+FFFF) at 4 bytes a character for every character of the line, `\\u4e2d` at 2; `\\u00e9` stays 1. An
    escaped backslash before `u` (literal text) is counted as an escape too: an upper bound, never less."""
    from verifier.textmemory import measure

    for line, width in ((b'{"t":"a\\ud83d\\ude00"}', 4), (b'{"t":"\\u4e2d"}', 2), (b'{"t":"\\u00e9"}', 1),
                        (b'{"t":"\\\\u4e2d"}', 2), (b'{"t":"plain"}', 1)):
        m = measure(line)
        assert (m.width, m.parsed_width) == (1, width), line
        assert m.parsed == len(line) * width


def small_caps(monkeypatch, memory: int = 4 * MIB) -> None:
    """The line caps at a small scale (the rule is the same; the sizes are a 96th of the real ones)."""
    from verifier.execution import layout

    monkeypatch.setattr(layout, "MAX_LINE_MEMORY", memory)
    monkeypatch.setattr(layout, "MAX_LINE", memory // 2)


@pytest.mark.parametrize("key", [None, "sk-journal-test-0123456789abcdef"])
def test_a_record_too_costly_to_read_back_is_journaled_as_response_too_large(tmp_path, monkeypatch, key):
    """The writer measures each record's line as a reader would (layout.line_memory) and writes one over the cap as
    the infra error `response_too_large`, without its body or chunks; the records before and after it are written as
    they came and the run goes on. The reader refuses the very line the writer did not write, naming it, and takes
    every line the writer writes: one rule, both sides. With a key (the writer then rejoins a stream's text to look
    for it) the record is measured before that work."""
    from verifier.execution import journal, layout
    from verifier.types import Exchange

    small_caps(monkeypatch)
    chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

    def ex(sid: str, body: str | None = None, chunks: list[str] | None = None) -> Exchange:
        return Exchange("smoke", sid, 0, "chat-stream" if chunks else "chat", chat, 200, body, chunks)

    plain = answer_body("a" * (1 * MIB))  # 1 MiB of text: 2 MiB to read back, within the 4 MiB cap
    wide = answer_body("a" * (1 * MIB) + EMOJI)  # the same ending in one emoji: every copy 4 bytes a character
    stream = [json.dumps({"choices": [{"index": 0, "delta": {"content": "a" * 60000}}]})] * 18 + [
        json.dumps({"choices": [{"index": 0, "delta": {"content": EMOJI}}]}, ensure_ascii=False)]
    jr = journal.Journal(tmp_path, scrub=[key] if key else [])
    written = [jr.append(ex("a", plain)), jr.append(ex("b", wide)), jr.append(ex("c", chunks=stream)),
               jr.append(ex("d", plain))]
    jr.close()
    assert [w.error for w in written] == [None, "response_too_large", "response_too_large", None]
    assert written[1].body is None and written[1].status is None and written[2].chunks is None
    back = list(journal.iter_exchanges(tmp_path))
    assert [(b.sample_id, b.error, b.body is not None) for b in back] == [
        ("a", None, True), ("b", "response_too_large", False), ("c", "response_too_large", False), ("d", None, True)]
    assert back[0].body == plain and back[0].request == chat
    # The lines it refused, planted by hand, are refused by the reader naming the line; what it wrote is read.
    for refused in (ex("b", wide), ex("c", chunks=stream)):
        line = json.dumps(refused.to_json(), ensure_ascii=False).encode()
        assert layout.line_memory(line) > layout.MAX_LINE_MEMORY
        with pytest.raises(layout.CorruptFile, match=r"line 7 would take \d+ bytes of memory to read, over the cap"):
            layout.line_text(line, tmp_path / "responses.jsonl", 7)
    for raw in (tmp_path / "responses.jsonl").read_bytes().splitlines(keepends=True):
        assert layout.line_memory(raw) <= layout.MAX_LINE_MEMORY


@pytest.fixture(scope="module")
def one_record_run(tmp_path_factory):
    """A scored one-record chat run of the smoke suite, and `score`'s peak RSS on it (the interpreter's own)."""
    run = tmp_path_factory.mktemp("one-record") / "run"
    with TestServer(Script(lambda req: Reply(content="4"))) as srv:
        code, _, err = cli_rss("run", "--suite", "smoke", "--smoke", "--limit", "1", "--mode", "chat", "--base-url",
                               srv.url, "--model", "m", "--out", run, "--quiet")
    assert code == 0, err[-2000:]
    code, base, err = cli_rss("score", run)
    assert code == 0 and base is not None, err[-2000:]
    return run, base


@pytest.mark.parametrize("what,body", [
    ("a 64 MiB answer ending in one emoji", lambda: answer_body("a" * (64 * MIB) + EMOJI)),
    ("56 MiB of ASCII escaping a character beyond U+FFFF", lambda: answer_body("a" * (56 * MIB)).replace(
        '"content": "', '"content": "\\ud83d\\ude00', 1)),
])
def test_a_planted_record_too_costly_to_read_is_refused_before_it_is_decoded(tmp_path, one_record_run, what, body):
    """A journal record within the byte cap on a line whose reading would pass layout.MAX_LINE_MEMORY (its copies
    4 bytes a character: 605 MB for `score` before) is refused in one line naming the file and the line, exit 2,
    before it is decoded (95 MB measured)."""
    from verifier.execution import layout

    run = tmp_path / "run"
    shutil.copytree(one_record_run[0], run)
    size = planted_record(run, body())
    assert size <= layout.MAX_LINE
    code, rss, err = cli_rss("score", run, timeout=120)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err[-2000:]
    assert f"{run / 'responses.jsonl'}: line 1 would take" in lines[0] and "over the cap of" in lines[0], lines
    assert rss is not None and rss < 200, f"peak RSS {rss} MB"


def test_an_admitted_record_costs_at_most_what_the_line_cap_counts(tmp_path, one_record_run):
    """What reading a record within the caps costs is bounded by what layout.line_memory counts for it, and the cap
    on that (384 MiB) keeps `score` under 500 MB. Here at three quarters of the cap, to stay fast: a 24 MiB answer
    ending in one emoji (counted 288 MiB; 605 MB was the 64 MiB case before). The full sizes (the longest text line the
    caps admit, 286 MB; 32 MiB ending in an emoji, 221 MB) are bench/perf/journal_line_memory.py's rows."""
    from verifier.execution import layout

    run, base = one_record_run
    mine = tmp_path / "run"
    shutil.copytree(run, mine)
    planted_record(mine, answer_body("a" * (24 * MIB) + EMOJI))
    line = (mine / "responses.jsonl").read_bytes().splitlines()[0]
    counted = layout.line_memory(line) / 1e6
    assert 190 < counted <= layout.MAX_LINE_MEMORY / 1e6
    code, rss, err = cli_rss("score", mine, timeout=120)
    assert code == 0, err[-2000:]
    assert rss is not None and rss - base <= counted + 20, (rss, base, counted)
    assert base + layout.MAX_LINE_MEMORY / 1e6 + 20 < 500  # so at the cap itself: under 500 MB
    v = json.loads((mine / "verdicts.jsonl").read_text().splitlines()[0])
    assert v["outcome"] != "infra", v  # recorded and scored: an answer, not an error


def test_an_answer_too_wide_for_the_body_cap_is_response_too_large_at_receive_and_the_run_goes_on(tmp_path):
    """A 64 MiB answer ending in one emoji is within the 64 MiB byte cap, but as a string every character takes 4
    bytes (256 MiB, and the journal, scoring and the report each held a copy: 605 MB for `score`). The body's text
    is counted on its bytes before it is decoded and refused past twice the byte cap: the sample is the infra error
    `response_too_large` (not retried), the other sample is answered, and `run` stays far under 500 MB (107 MB
    measured). Text up to U+FFFF is never refused within the byte cap, and wide text up to half of it is kept."""
    replies = iter([Reply(content="a" * (64 * MIB - 512) + EMOJI), Reply(content="4")])
    with TestServer(Script(lambda req: next(replies))) as srv:
        code, rss, err = cli_rss("run", "--suite", "smoke", "--smoke", "--limit", "2", "--mode", "chat", "--base-url",
                                 srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet", "--max-retries", "2")
    assert code == 0, err[-2000:]
    recs = [json.loads(x) for x in (tmp_path / "r" / "responses.jsonl").read_bytes().splitlines()]
    assert sorted((r["error"] or "", r["attempts"]) for r in recs) == [("", 1), ("response_too_large", 1)], [
        (r["error"], r["attempts"]) for r in recs]
    assert "response_too_large" in err  # the console names the class
    assert rss is not None and rss < 500, f"peak RSS {rss} MB"
    # The rule at an eighth of the scale (--max-response-mb 8: 16 MiB of string): wide text from half the cap refused,
    # under it kept; text of 2-byte characters kept up to the byte cap.
    texts = ["a" * (4 * MIB + 4096) + EMOJI, "a" * (4 * MIB - 4096) + EMOJI, "\u4e2d" * (8 * MIB // 3 - 4096)]
    replies = iter(Reply(body=answer_body(t)) for t in texts)  # UTF-8 as sent, not the test server's \u escapes
    with TestServer(Script(lambda req: next(replies))) as srv:
        code, _, err = cli_rss("run", "--suite", "smoke", "--smoke", "--limit", "3", "--mode", "chat", "--base-url",
                               srv.url, "--model", "m", "--out", tmp_path / "small", "--quiet", "--concurrency", "1",
                               "--max-response-mb", "8")
    assert code == 0, err[-2000:]
    recs = [json.loads(x) for x in (tmp_path / "small" / "responses.jsonl").read_bytes().splitlines()]
    assert [r["error"] for r in recs] == ["response_too_large", None, None], [r["error"] for r in recs]
    assert json.loads(recs[1]["body"])["choices"][0]["message"]["content"] == texts[1]


def test_a_long_real_stream_with_logprobs_and_an_emoji_is_within_the_line_cap():
    """What a real endpoint sends for a long answer stays recorded and scored: a 32k-token stream with 20 top
    logprobs a token (61 MiB as a journal line) in which one alternative is an emoji. Counted as one string at the
    emoji's width it would pass the cap (8 x 61 MiB); each event's string is measured at its own width, and it is
    within (366 MiB). The whole `run` and `score` of it are bench/perf/journal_line_memory.py's rows (about 440 and
    390 MB); here the rule, on the record's line."""
    from verifier.execution import layout

    def event(i: int) -> str:
        alts = [{"token": EMOJI if (i, k) == (16384, 7) else f" alt{k}", "logprob": -1.5 - k,
                 "bytes": list((EMOJI if (i, k) == (16384, 7) else f" alt{k}").encode())} for k in range(20)]
        w = f" w{i % 997}"
        return json.dumps({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                           "choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None, "logprobs": {
                               "content": [{"token": w, "logprob": -0.125, "bytes": list(w.encode()), "top_logprobs": alts}]}}]},
                          ensure_ascii=False)

    rec = {"suite": "smoke", "sample_id": "s", "epoch": 0, "mode": "chat-stream", "request": {"stream": True},
           "status": 200, "body": None, "chunks": [event(i) for i in range(32768)] + ["[DONE]"], "error": None}
    line = json.dumps(rec, ensure_ascii=False).encode()
    assert len(line) > 60 * MIB and EMOJI.encode() in line
    assert 8 * len(line) > layout.MAX_LINE_MEMORY  # the line's string alone is 4 bytes a character
    assert layout.line_memory(line) <= layout.MAX_LINE_MEMORY
    assert layout.line_text(line, Path("responses.jsonl"), 1)  # read, not refused


def test_measuring_a_planted_line_of_unclosed_strings_takes_linear_time(monkeypatch):
    """The strings of a line are measured one by one before it is decoded: a planted line that is no JSON (a string
    never closed, a run of quotes, backslashes) is scanned in linear time, never backtracked over (a nested
    repetition took 22 s for 26 bytes), then refused."""
    from verifier.execution import layout

    small_caps(monkeypatch)
    for line in (b'{"a": "' + b"a" * MIB + EMOJI.encode(), b'{"' + b'"' * MIB + EMOJI.encode(),
                 b'{"' + b"\\" * MIB + EMOJI.encode() + b"\n", b'{"' + b'a\\"' * (MIB // 3) + EMOJI.encode()):
        t0 = time.monotonic()
        with pytest.raises(layout.CorruptFile):
            layout.line_text(line, Path("responses.jsonl"), 1)
        assert time.monotonic() - t0 < 10, line[:20]
