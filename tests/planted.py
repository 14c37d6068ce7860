"""Planted journal records: a run whose first record carries a body an endpoint never sent through this client.
Shared by tests/test_bounded_inputs.py and bench/perf/journal_line_memory.py (which puts tests/ on its path)."""

from __future__ import annotations

import json
from pathlib import Path


def answer_body(text: str) -> str:
    """A chat completion answering `text`, as an endpoint's body (unescaped beyond JSON's own rules)."""
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}]}, ensure_ascii=False)


def planted_record(run: Path, body: str) -> int:
    """`run`'s first journal record now carries `body` (its derived files removed); the line's size in bytes."""
    for name in ("verdicts.jsonl", "observations.jsonl", "summary.json"):
        (run / name).unlink(missing_ok=True)
    lines = (run / "responses.jsonl").read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["body"] = body
    line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
    (run / "responses.jsonl").write_bytes(line + b"".join(lines[1:]))
    return len(line)
