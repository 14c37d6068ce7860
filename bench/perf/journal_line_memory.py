"""Peak RSS and wall time of `verifier score` on a run whose journal holds one long chat record, and of `verifier run`
receiving such an answer (issue #49), each in a fresh process: what a record costs within the caps on one journal
line (layout.MAX_LINE_MEMORY, layout.MAX_LINE) and on a body's text (wire/bodyread.TEXT_MEMORY_FACTOR).

    python bench/perf/journal_line_memory.py

`score` rows: a journal record planted by hand (derived files removed): a 64 MiB text answer (the body cap), the
same ending in one emoji (a string holding it takes 4 bytes a character), a body of 64 MiB of control bytes (each
escaped in six), a 399 MiB text answer (under the old 400 MiB line cap), and the longest text line the caps admit.
`run` rows: the test server answers one request, then the run is scored again (`score`): a 64 MiB answer ending in
one emoji (refused at receive), the widest answer the caps admit (32 MiB ending in one emoji), a stream of 62 MiB
of text deltas ending in one emoji (within the line cap: each event's string is narrow, the answer joined from them
takes 4 bytes a character), the same sent with an API key (the journal writer then parses the record to look for a split key), a
32k-token stream with 20 top logprobs a token and one emoji among them (54 MiB of SSE, what a real long answer
sends: recorded and scored), the same with an API key, and a 120 MiB answer under `--max-response-mb 128`. Exits 1
when a command fails unexpectedly or a peak reaches 500 MB, except the rows with an API key and with
`--max-response-mb` above its default (docs/security.md says what those cost).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

from verifier.execution import layout  # noqa: E402
from verifier.testbed.server import Reply, Script, TestServer  # noqa: E402
from planted import answer_body, planted_record  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hostile_memory import cli  # noqa: E402  (one child process measuring its own peak RSS, as there)

MIB = 2**20


def planted(base: Path, where: Path, body: str) -> float:
    """A copy of `base` whose chat record carries `body`, its derived files removed; the line's size in MiB."""
    shutil.copytree(base, where)
    return planted_record(where, body) / MIB


def logprob_stream() -> Reply:
    """32,768 tokens, each with 20 alternatives (one of them, once, an emoji): about 40 MB of SSE."""
    words = [f" w{i % 997}" for i in range(32768)]
    entries = [{"token": w, "logprob": -0.125, "bytes": list(w.encode()),
                "top_logprobs": [{"token": f" alt{k}" if (i, k) != (16384, 7) else "\U0001F600", "logprob": -1.5 - k,
                                  "bytes": list((f" alt{k}" if (i, k) != (16384, 7) else "\U0001F600").encode())}
                                 for k in range(20)]} for i, w in enumerate(words)]
    return Reply(content="".join(words), logprobs=True, logprob_entries=entries)


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="journal-line-memory-"))
    base = ["run", "--suite", "smoke", "--smoke", "--limit", "1", "--model", "m", "--quiet", "--max-retries", "0"]
    with TestServer(Script(lambda req: Reply(content="4"))) as srv:
        code, _, _ = cli(*base, "--mode", "chat", "--base-url", srv.url, "--out", tmp / "base")
    if code != 0:
        return 1
    planted_cases = [("a 64 MiB text answer (the body cap)", answer_body("a" * (64 * MIB - 200)), 0),
                     ("the same ending in one emoji", answer_body("a" * (64 * MIB - 200) + "\U0001F600"), 2),
                     ("64 MiB of control bytes (escaped in six)", "\x01" * (64 * MIB), 2),
                     ("a 399 MiB text answer", answer_body("a" * (399 * MIB - 200)), 2),
                     ("the longest text line the caps admit", answer_body("a" * (layout.MAX_LINE - 4096)), 0)]
    ok = True
    for i, (what, body, expected) in enumerate(planted_cases):
        size = planted(tmp / "base", tmp / f"p{i}", body)
        del body
        code, rss, wall = cli("score", tmp / f"p{i}")
        ok &= code == expected and rss < 500
        print(f"score, planted: {what:<42} line {size:5.0f} MiB  exit {code}  peak RSS {rss:6.0f} MB  {wall:5.1f} s")
        shutil.rmtree(tmp / f"p{i}")
    run_cases = [("a 64 MiB answer ending in one emoji", "chat", Reply(content="a" * (64 * MIB - 300) + "\U0001F600")),
                 ("32 MiB ending in one emoji (the widest admitted)", "chat", Reply(content="a" * (32 * MIB - 4096) + "\U0001F600")),
                 ("a stream of 64 MiB of text ending in one emoji", "chat-stream",
                  Reply(content=" ".join(["a" * 65000] * 1000) + "\U0001F600")),
                 ("the same stream, sent with an API key", "chat-stream",
                  Reply(content=" ".join(["a" * 65000] * 1000) + "\U0001F600")),
                 ("32k tokens, top-20 logprobs, one emoji (stream)", "chat-stream", logprob_stream()),
                 ("the same stream, sent with an API key", "chat-stream", logprob_stream()),
                 ("--max-response-mb 128: a 120 MiB text answer", "chat", Reply(content="a" * (120 * MIB)))]
    os.environ["JOURNAL_LINE_MEMORY_KEY"] = "sk-journal-line-memory-0123456789"  # the redactor then rejoins streams
    for i, (what, mode, reply) in enumerate(run_cases):
        key = ["--api-key-env", "JOURNAL_LINE_MEMORY_KEY"] if "API key" in what else []
        key += ["--max-response-mb", "128"] if what.startswith("--max-response-mb") else []
        with TestServer(Script(lambda req, reply=reply: reply)) as srv:
            code, rss, wall = cli(*base, *key, "--mode", mode, "--base-url", srv.url, "--out", tmp / f"r{i}")
        del reply
        rec = json.loads((tmp / f"r{i}" / "responses.jsonl").read_bytes().splitlines()[0])
        size = (tmp / f"r{i}" / "responses.jsonl").stat().st_size / MIB
        ok &= code in (0, 10, 12, 13, 20, 30) and (rss < 500 or "API key" in what or "--max-response-mb" in what)
        print(f"run:   {what:<51} line {size:5.0f} MiB  exit {code}  peak RSS {rss:6.0f} MB  {wall:5.1f} s  "
              f"journaled {rec.get('error') or 'the answer'}")
        for name in ("verdicts.jsonl", "observations.jsonl", "summary.json"):
            (tmp / f"r{i}" / name).unlink(missing_ok=True)
        code, rss, wall = cli("score", tmp / f"r{i}")
        ok &= code == 0 and rss < 500
        print(f"score: {what:<51} {'':>14}  exit {code}  peak RSS {rss:6.0f} MB  {wall:5.1f} s")
        shutil.rmtree(tmp / f"r{i}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record, benchlib
    from record import recorded  # noqa: E402

    with recorded("journal_line_memory"):  # the figures go to bench/results/journal_line_memory.md
        sys.exit(main())
