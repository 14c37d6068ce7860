"""`verifier report` reads the journal streaming (issue 37): it keeps what it draws (the per-sample table, and the
flip cards' records cut as a card shows them), never every record's raw body, and observations.jsonl is read a row
at a time. Before, `report` held the whole journal: 290-310 MB for a 20,000-record run, about 14 KB per record.

Peak RSS of whole commands in fresh interpreters. The report's floor (pandas, jinja, numpy imported: ~110 MB,
where `score` imports none of them) is measured on a 10-record run of the same shape; the bounds are on what
the report adds over that floor, which is what grows with the run:
- a run whose journal dwarfs what is drawn (5,000 records of 64 KB bodies, a 316 MB journal): the report adds
  less than an eighth of the journal (it added the whole journal, ~340 MB, when it held the records);
- 20,000 records of 4 KB bodies: at most 6 KB per record (the table row, its Observation and the HTML table's
  text: ~4 KB measured; holding the journal made it ~11 KB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from verifier import safewrite
from verifier.execution import layout
from verifier.types import Exchange

ROOT = Path(__file__).resolve().parents[1]

# VmHWM: this process's own peak (ru_maxrss would carry the forking pytest process's peak across exec)
SCRIPT = ("import json, sys\nfrom verifier.cli import main\ncode = main(sys.argv[1:])\n"
          "hwm = next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:'))\n"
          "print(json.dumps({'code': code, 'rss_mb': hwm / 1024}))")


def cli_rss(*args: object) -> float:
    p = subprocess.run([sys.executable, "-c", SCRIPT, *map(str, args)], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT)
    assert p.stdout.strip(), p.stderr[-2000:]
    doc = json.loads(p.stdout.strip().splitlines()[-1])
    assert doc["code"] == 0, p.stderr[-2000:]
    return doc["rss_mb"]


def make_run(run: Path, n: int, pad: int) -> None:
    """A run of n smoke records (a third answered wrong) whose bodies carry `pad` bytes beyond their answer."""
    run.mkdir()
    suites = {"smoke": {"version": "1", "dataset_sha256": "0" * 64, "samples": n, "requests": n}}
    safewrite.write_json(run / layout.HEADER, {
        "run_id": "big", "harness": {"name": "verifier", "version": "test", "git_commit": None},
        "endpoint": {"base_url": "http://127.0.0.1:1/v1", "model": "m", "api_key_env": None, "header_names": []},
        "sampling": {"defaults": {}, "overrides": {}}, "extra_body": {}, "epochs": 1, "modes": ["chat"], "suites": suites,
        "started": "2025-01-01T00:00:00+00:00", "finished": "2025-01-01T00:20:00+00:00", "server_info": {}})
    padding = "p" * pad  # what a server may send beyond its answer (a fingerprint, a trace): journalled, never drawn
    samples, exchanges = [], []
    for i in range(n):
        msgs = [{"role": "user", "content": f"What is {i} + 1? Reply with just the number."}]
        samples.append({"suite": "smoke", "id": f"s{i:05d}", "messages": msgs, "target": str(i + 1), "tools": None,
                        "response_format": None, "meta": {}, "params": {}})
        body = json.dumps({"id": "x", "object": "chat.completion", "model": "m", "padding": padding,
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": str(i + 1 + (i % 3 == 0))},
                                        "finish_reason": "stop"}],
                           "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}})
        exchanges.append(Exchange("smoke", f"s{i:05d}", 0, "chat", {"model": "m", "messages": msgs}, 200, body,
                                  None, None, 100.0 + i % 50, 1).to_json())
    safewrite.write_jsonl(run / layout.SAMPLES, samples)
    safewrite.write_jsonl(run / layout.RESPONSES, exchanges)


def report_rss(tmp_path: Path, name: str, n: int, pad: int) -> tuple[float, float]:
    """(peak RSS of `report`, journal size), both in MB, for a freshly made and scored run."""
    run = tmp_path / name
    make_run(run, n, pad)
    cli_rss("score", run)
    out = tmp_path / f"{name}.html"
    mb = cli_rss("report", run, "--out", out)
    assert f"s{n - 1:05d}" in out.read_text(encoding="utf-8")  # the last sample is in the report's table
    return mb, (run / layout.RESPONSES).stat().st_size / 2**20


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads its peak RSS from /proc")
def test_report_memory_follows_what_it_draws_not_the_journal(tmp_path):
    floor_big_bodies, _ = report_rss(tmp_path, "floor64k", 10, 65536)
    big_bodies, journal_mb = report_rss(tmp_path, "big64k", 5_000, 65536)
    assert journal_mb > 300
    assert big_bodies - floor_big_bodies < journal_mb / 8, (big_bodies, floor_big_bodies, journal_mb)

    floor_many, _ = report_rss(tmp_path, "floor4k", 10, 4096)
    many, _ = report_rss(tmp_path, "many4k", 20_000, 4096)
    per_record_kb = (many - floor_many) * 1024 / 20_000
    assert per_record_kb <= 6, (many, floor_many, per_record_kb)
