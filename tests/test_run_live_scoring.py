"""`verifier run` scores as it goes (execution/live.py): each record is judged as soon as it is journaled, and the files the
run writes (verdicts, observations, summary) are the bytes `verifier score` writes on the same directory afterwards:
new runs, resumed runs (a torn tail, infra errors, a SIGKILL), follow-ups, conversations, and a follower that fails."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import SHARED, http_ready, wait_until
from verifier.app.catalog import get_suites
from verifier import safewrite
from verifier.execution import journal, live, observations as observe, scoring
from verifier.testbed.server import Reply, Script, TestServer

SCORED = (scoring.VERDICTS, observe.OBSERVATIONS, scoring.SUMMARY)


def mixed(req):
    """Every kind of record: right and wrong answers (with logprobs), a tool call, a refusal, an infra error."""
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    a = int(m.group(1)) + int(m.group(2))
    if a == 7:
        return Reply(content=None, tool_calls=[{"name": "add", "arguments": '{"a": 3, "b": 4}'}])
    if a == 42:
        return Reply(status=400, body='{"error": {"message": "no", "type": "invalid_request_error"}}')
    if a == 15:
        return Reply(status=503)
    return Reply(content=str(a + 1 if a % 5 == 0 else a), logprob_shift=0.3 if a % 2 else 0.0)


@contextlib.contextmanager
def scored_as_it_goes(monkeypatch) -> Iterator[None]:
    """Inside: the journal may not be scored afresh (the run's scores must be the follower's)."""
    def refuse(*_a, **_k):
        raise AssertionError("the run scored its journal afresh instead of as it went")

    with monkeypatch.context() as m:
        m.setattr(scoring, "score_journal", refuse)
        yield


def same_as_score(run: Path, cli) -> dict[str, bytes]:
    """The run's scored files, after checking they are byte for byte what `verifier score` writes on the run."""
    written = {f: (run / f).read_bytes() for f in SCORED}
    for f in SCORED:
        (run / f).unlink()
    code, _, err = cli("score", run)
    assert code == 0, err
    assert {f: (run / f).read_bytes() for f in SCORED} == written
    return written


def run_args(url: str, out: Path, *extra: str) -> list:
    return ["run", "--suite", "smoke", "--base-url", url, "--model", "m", "--out", out, "--quiet", "--max-retries", "0", *extra]


def test_run_writes_what_score_writes_without_scoring_afresh(tmp_path, cli, monkeypatch):
    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv, scored_as_it_goes(monkeypatch):
        code, _, err = cli(*run_args(srv.url, out, "--mode", "chat,chat-stream", "--logprobs", "2", "--epochs", "2"))
    assert code == 0, err
    files = same_as_score(out, cli)
    summary = json.loads(files[scoring.SUMMARY])["suites"]["smoke"]
    assert summary["recorded"] == 80 and summary["missing"] == 0
    assert {"content", "infra", "unsupported"} <= set(summary["outcomes"])
    rows = [json.loads(line) for line in files[observe.OBSERVATIONS].splitlines()[1:]]
    assert any("tool_calls" in (r.get("shown") or {}) for r in rows) and any(r.get("logprobs") for r in rows)


def test_resume_after_a_torn_tail_scores_old_and_new_records_like_score(tmp_path, cli, monkeypatch):
    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv:
        assert cli(*run_args(srv.url, out))[0] == 0
    lines = (out / journal.RESPONSES).read_text().splitlines(keepends=True)
    # Drop the last 5 records and tear the one before them, as a SIGKILL mid-write would.
    (out / journal.RESPONSES).write_text("".join(lines[:14]) + lines[14][: len(lines[14]) // 2])
    with TestServer(Script(mixed)) as srv, scored_as_it_goes(monkeypatch):
        srv.script.rule(r"What is 7 \+ 8", Reply(content="15"))  # the infra error of the first run is answered now
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet", "--max-retries", "0")
        resent = len(srv.script.requests)
    assert code == 0, err
    assert resent >= 6  # the 6 lost records (and the infra one if it was kept)
    summary = json.loads(same_as_score(out, cli)[scoring.SUMMARY])["suites"]["smoke"]
    assert summary["recorded"] == 20 and "infra" not in summary["outcomes"]


def test_a_killed_run_resumed_scores_like_score(tmp_path, cli, monkeypatch):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    srv = subprocess.Popen([sys.executable, "-m", "verifier.testbed.server", "--port", str(port), "--responder",
                            "arithmetic", "--delay", "0.1"])
    try:
        base = f"http://127.0.0.1:{port}/v1"
        http_ready(base + "/models", srv)
        out = tmp_path / "r"
        p = subprocess.Popen([sys.executable, "-m", "verifier", *map(str, run_args(base, out, "--concurrency", "2", "--epochs", "2"))])
        f = out / journal.RESPONSES
        wait_until(lambda: f.exists() and f.read_bytes().count(b"\n") >= 8, "8 journal lines", proc=p)
        p.send_signal(signal.SIGKILL)
        p.wait()
        assert not (out / scoring.VERDICTS).exists()
        with scored_as_it_goes(monkeypatch):
            code, _, err = cli("run", "--resume", out, "--base-url", base, "--quiet")
        assert code == 0, err
    finally:
        srv.terminate()
        srv.wait()
    summary = json.loads(same_as_score(out, cli)[scoring.SUMMARY])["suites"]["smoke"]
    assert summary["recorded"] == 40 and summary["outcomes"] == {"content": 40}


def test_follow_ups_are_scored_as_they_go(tmp_path, cli, monkeypatch):
    from test_suite_multiturn import MODES, kimi_like

    out = tmp_path / "mt"
    with TestServer(Script(kimi_like)) as srv, scored_as_it_goes(monkeypatch):
        code, _, err = cli("run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", out,
                           "--quiet", "--mode", MODES, "--max-retries", "0")
    assert code == 0, err
    verdicts = same_as_score(out, cli)[scoring.VERDICTS].splitlines()
    assert len(verdicts) > 6 and all(json.loads(v)["outcome"] == "content" for v in verdicts)


@pytest.mark.skipif(not (SHARED / "bfcl" / "BFCL_v4_multi_turn_base.json").is_file(), reason="BFCL data not found")
def test_conversations_are_judged_whole_at_the_end_like_score(tmp_path, cli, monkeypatch):
    from bfcl_mt_helpers import gt_table, replayer
    from suites import bfcl_multi_turn as mt

    data = SHARED / "bfcl" / "BFCL_v4_multi_turn_base.json"
    samples = mt.SUITE.load(str(data), False)[:2]
    out = tmp_path / "bfcl"
    with TestServer(Script(replayer(gt_table(samples)))) as srv, scored_as_it_goes(monkeypatch):
        code, _, err = cli("run", "--suite", "bfcl-multi-turn", "--data", data, "--limit", "2", "--base-url", srv.url,
                           "--model", "m", "--out", out, "--quiet", "--max-retries", "0")
    assert code == 0, err
    verdicts = [json.loads(v) for v in same_as_score(out, cli)[scoring.VERDICTS].splitlines()]
    assert len(verdicts) == sum(s.meta["turns"] for s in samples)  # one per turn record, not per request


def test_a_follower_that_fails_leaves_the_run_to_a_fresh_score(tmp_path, cli, monkeypatch):
    calls = {"step": 0, "score": 0}
    real_step, real_score = live.Follower.step, scoring.score_journal

    def failing_step(self, budget_s):
        calls["step"] += 1
        done = real_step(self, budget_s)
        if self.scorer.records and "failed" not in calls:  # once some records are judged, in whichever slice
            calls["failed"] = calls["step"]
            raise RuntimeError("a scorer's bug")
        return done

    def counted(*a, **k):
        calls["score"] += 1
        return real_score(*a, **k)

    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv, monkeypatch.context() as m:
        m.setattr(live.Follower, "step", failing_step)
        m.setattr(scoring, "score_journal", counted)
        code, _, err = cli(*run_args(srv.url, out, "--mode", "chat,chat-stream"))
    assert code == 0, err
    assert calls["failed"] >= 1 and calls["score"] == 1
    same_as_score(out, cli)


def test_the_follower_never_reads_a_torn_tail_the_writer_cuts(tmp_path, cli):
    """A resumed journal ends in half a record: the follower waits for a newline, and the journal writer cuts the
    torn part and writes whole records over it; the follower sees exactly what `score` reads."""
    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv:
        assert cli(*run_args(srv.url, out, "--logprobs", "2"))[0] == 0
    path = out / journal.RESPONSES
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:10]) + lines[10][:40])
    follower = live.Follower(out, get_suites())
    assert follower.step(float("inf")) and follower.lines == 10 and follower.offset == len(b"".join(lines[:10]))
    journal.Journal(out).close()  # heals the torn tail, as a resume does before it sends anything
    assert path.read_bytes() == b"".join(lines[:10])
    with path.open("ab") as f:  # the records the resume then journals
        f.write(b"".join(lines[10:]))
    verdicts, summary, observed = follower.result()
    expected = scoring.score_journal(out, get_suites())
    assert [v.to_json() for v in verdicts] == [v.to_json() for v in expected[0]] and summary.to_json() == expected[1].to_json()
    assert observed.texts == expected[2].texts and observed.extras == expected[2].extras
    assert len(verdicts) == 20


def test_a_record_longer_than_a_read_is_judged_once_it_ends(tmp_path, cli):
    """A record longer than the follower's 4 MiB read, written in two parts: while it is unfinished the follower
    judges what came before it and waits (measuring it, keeping nothing); once its newline is in, it is read whole
    and judged as `score` judges it."""
    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv:
        assert cli(*run_args(srv.url, out))[0] == 0
    path = out / journal.RESPONSES
    lines = path.read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[3])
    assert rec["error"] is None and rec["body"]
    rec["body"] += " " * (live.CHUNK + 2**20)  # JSON may end in whitespace: the same answer, a longer line
    long_line = (json.dumps(rec) + "\n").encode()
    assert len(long_line) > live.CHUNK
    path.write_bytes(b"".join(lines[:3]) + long_line[:live.CHUNK + 100])
    follower = live.Follower(out, get_suites())
    assert follower.step(float("inf")) and follower.lines == 3 and follower.offset == len(b"".join(lines[:3]))
    with path.open("ab") as f:
        f.write(long_line[live.CHUNK + 100:] + b"".join(lines[4:]))
    verdicts, summary, observed = follower.result()
    assert follower.lines == len(lines)
    expected = scoring.score_journal(out, get_suites())
    assert [v.to_json() for v in verdicts] == [v.to_json() for v in expected[0]] and summary.to_json() == expected[1].to_json()
    assert observed.texts == expected[2].texts


def test_verdicts_are_written_from_their_fields_as_to_json_writes_them(tmp_path):
    """write_scores writes Verdict.fields (no deep copy) with the encoder that turns a nested dataclass into what
    asdict makes of it: the same bytes as to_json, tuples, a nested dataclass and a non-finite number included."""
    from verifier.types import Finding, Verdict

    vs = [Verdict("s", "a", 0, "chat", "content", 1.0, {"calls": ({"name": "f"},), "x": float("nan")}, "correct",
                  (Finding("usage_missing", "no usage"),), {"m": 1.0}, {"latency_ms": 3.5, "styles": ("openai",)}),
          Verdict("s", "b", 1, "chat", "contract", None, Finding("nested", "a dataclass as the answer"), "bad",
                  signals={"inner": [Finding("deep", "x")], "inf": float("inf")}),
          Verdict("s", "c", 0, "chat", "infra", reason="http_503")]
    safewrite.write_jsonl(tmp_path / "old.jsonl", (v.to_json() for v in vs))
    safewrite.write_jsonl(tmp_path / "new.jsonl", (v.fields() for v in vs), nested_dataclasses=True)
    assert (tmp_path / "new.jsonl").read_bytes() == (tmp_path / "old.jsonl").read_bytes()
    assert b"NaN" not in (tmp_path / "new.jsonl").read_bytes() and b'"answer":{"code":"nested"' in (tmp_path / "new.jsonl").read_bytes()
    with pytest.raises(TypeError):
        safewrite.write_jsonl(tmp_path / "bad.jsonl", [{"x": object()}], nested_dataclasses=True)


def test_a_slow_scorer_never_stops_the_requests_or_their_deadline(tmp_path, cli, monkeypatch):
    """Judging runs off the event loop's thread: while a scorer spends seconds in Python code on the first record,
    the other requests go out, and a request the server holds is cut at --request-deadline, not after the scorer."""
    import time

    busy: dict[str, float] = {}
    real_judge = scoring.judge

    def slow_judge(*a, **k):
        if "start" not in busy:
            busy["start"] = time.monotonic()
            while time.monotonic() - busy["start"] < 3.0:  # Python code, as a runaway scorer or simulator would be
                pass
            busy["end"] = time.monotonic()
        return real_judge(*a, **k)

    arrivals: list[float] = []

    def held(req):
        arrivals.append(time.monotonic())
        a, b = map(int, re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"]).groups())
        return Reply(content=str(a + b), delay_s=5.0 if a + b == 15 else 0.05 if len(arrivals) > 1 else 0.0)

    out = tmp_path / "r"
    monkeypatch.setattr(scoring, "judge", slow_judge)
    with TestServer(Script(held)) as srv:
        code, _, err = cli(*run_args(srv.url, out, "--concurrency", "2", "--request-deadline", "1"))
    assert code == 0, err
    assert busy["end"] - busy["start"] >= 3.0
    during = [t for t in arrivals if busy["start"] < t < busy["end"]]
    assert len(during) >= 10, (len(during), len(arrivals))  # 20 smoke requests: most of them sent while it judged
    held_rec = next(json.loads(line) for line in (out / journal.RESPONSES).read_text().splitlines()
                    if json.loads(line)["error"] == "timeout")
    assert held_rec["latency_ms"] < 2500  # the deadline fired at ~1 s, inside the scorer's 3 s
    same_as_score(out, cli)


def test_each_exchange_is_parsed_once_with_a_key_set(tmp_path, cli, monkeypatch):
    """With a key, the journal writer parses each record for its leak check; the scorer uses that parse for the line
    it wrote instead of parsing the same bytes again (execution/live.Follower.offer): one parse per exchange."""
    from verifier.judge import parse

    calls = [0]
    real = parse.parse_exchange

    def counting(ex):
        calls[0] += 1
        return real(ex)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-scoring-test-key-0123")
    monkeypatch.setattr(parse, "parse_exchange", counting)
    monkeypatch.setattr(observe, "parse_exchange", counting)
    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv, scored_as_it_goes(monkeypatch):
        code, _, err = cli(*run_args(srv.url, out, "--mode", "chat,chat-stream", "--logprobs", "2"))
    assert code == 0, err
    records = (out / journal.RESPONSES).read_text().splitlines()
    assert len(records) == 40 and calls[0] == len(records)
    same_as_score(out, cli)


def test_two_threads_stepping_one_follower_judge_each_record_once(tmp_path, cli):
    """A sequential gate's look catches up on the loop's thread while the scoring thread may be inside its own
    slice: both step the same follower, and every record is judged once, at its own bytes, as `score` judges it."""
    import threading

    out = tmp_path / "r"
    with TestServer(Script(mixed)) as srv:
        assert cli(*run_args(srv.url, out, "--logprobs", "2"))[0] == 0
    expected = scoring.score_journal(out, get_suites())
    for _ in range(5):
        follower = live.Follower(out, get_suites())
        raised: list[BaseException] = []

        def judge() -> None:
            try:
                for _ in range(200):
                    follower.step(0.0)
            except BaseException as e:  # noqa: BLE001 - asserted below
                raised.append(e)

        threads = [threading.Thread(target=judge) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert raised == []
        verdicts, summary, _ = follower.result()
        assert [v.to_json() for v in verdicts] == [v.to_json() for v in expected[0]] and summary.to_json() == expected[1].to_json()
