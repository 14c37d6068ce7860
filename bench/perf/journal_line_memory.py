"""Peak RSS and wall time of `verifier score` on a run whose journal holds one long chat record (issue #49), each in
a fresh process. What a record within the 400 MiB line cap costs once it is decoded (docs/security.md, a run
directory): not bounded by 500 MB, and this script says by how much.

    python bench/perf/journal_line_memory.py

Rows: a 64 MiB text answer (the body cap), the same ending in one emoji (a string holding it takes 4 bytes a
character), a body of 64 MiB of control bytes (each escaped in six: the longest line the writer makes at the default
body cap), and a planted 399 MiB text answer just under the line cap. A measurement, not a target: it exits 0
whatever the peaks (1 only when a command fails).
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from verifier.testbed.server import Reply, Script, TestServer  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_memory import cli  # noqa: E402  (one child process measuring its own peak RSS, as there)

MIB = 2**20


def answer(text: str) -> str:
    return json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                    "finish_reason": "stop"}]}, ensure_ascii=False)


def planted(base: Path, where: Path, body: str) -> float:
    """A copy of `base` whose chat record carries `body`, its derived files removed; the line's size in MiB."""
    shutil.copytree(base, where)
    for name in ("verdicts.jsonl", "observations.jsonl", "summary.json"):
        (where / name).unlink(missing_ok=True)
    lines = (where / "responses.jsonl").read_bytes().splitlines(keepends=True)
    rec = json.loads(lines[0])
    rec["body"] = body
    line = (json.dumps(rec, ensure_ascii=False) + "\n").encode("utf-8")
    (where / "responses.jsonl").write_bytes(line + b"".join(lines[1:]))
    return len(line) / MIB


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="journal-line-memory-"))
    with TestServer(Script(lambda req: Reply(content="4"))) as srv:
        code, _, _ = cli("run", "--suite", "smoke", "--smoke", "--limit", "1", "--mode", "chat", "--base-url", srv.url,
                         "--model", "m", "--out", tmp / "base", "--quiet")
    if code != 0:
        return 1
    cases = [("a 64 MiB text answer (the body cap)", answer("a" * (64 * MIB - 200))),
             ("the same ending in one emoji", answer("a" * (64 * MIB - 200) + "\U0001F600")),
             ("64 MiB of control bytes (escaped in six)", "\x01" * (64 * MIB)),
             ("planted: a 399 MiB text answer", answer("a" * (399 * MIB - 200)))]
    ok = True
    for i, (what, body) in enumerate(cases):
        size = planted(tmp / "base", tmp / f"r{i}", body)
        del body
        code, rss, wall = cli("score", tmp / f"r{i}")
        ok &= code == 0
        print(f"{what:<45} line {size:5.0f} MiB  exit {code}  peak RSS {rss:6.0f} MB  {wall:5.1f} s")
        shutil.rmtree(tmp / f"r{i}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("journal_line_memory"):  # the figures go to bench/results/journal_line_memory.md
        sys.exit(main())
