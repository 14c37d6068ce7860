"""Raw-request replay: send recorded chat-completions bodies as-is (K2-Vendor-Verifier style).

Why: a vendor's own traffic (or the K2VV request set) exercises the exact
tools, messages and parameters the vendor serves, which no synthetic suite
reproduces. There is no ground truth, so the scorer reports only the
weight-independent K2VV signals: whether a tool call was triggered and the
share of calls that are schema-valid against the declared tools.

Input: a JSONL file (one request body a line; an OpenAI batch line
`{"custom_id", "body": {...}}` is unwrapped), or one JSON file holding a
single body or a list of bodies. `smoke=True` reads suites/data/replay_smoke.jsonl.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from verifier.types import Finding, Judgement, Parsed, Sample, Suite, Verdict

import suites.bfcl_checker as chk
from verifier import jsonsafe

NAME = "replay"
VERSION = "1"
SMOKE_FILE = Path(__file__).parent / "data" / "replay_smoke.jsonl"
ID_KEYS = ("id", "custom_id", "request_id")


def _bodies(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """(1-based line number, record) pairs; a whole-file JSON object or list counts from 1."""
    text = path.read_text(encoding="utf-8")
    try:
        whole = jsonsafe.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return [(1, whole)]
    if isinstance(whole, list):
        return list(enumerate(whole, 1))
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((n, jsonsafe.loads(line)))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{n}: not JSON ({e.msg})") from None
    return out


def make_sample(n: int, rec: Any) -> Sample:
    if not isinstance(rec, dict):
        raise ValueError(f"line {n}: a request body must be a JSON object")
    sid = next((str(rec[k]) for k in ID_KEYS if rec.get(k) not in (None, "")), f"line-{n}")
    body = rec["body"] if isinstance(rec.get("body"), dict) and "messages" not in rec else rec
    if not isinstance(body.get("messages"), list):
        raise ValueError(f"line {n}: request body has no 'messages' list")
    where = jsonsafe.lone_surrogate(body)
    if where:
        raise ValueError(f"line {n}: {where[:80]} holds a lone surrogate (e.g. \\ud800), which cannot be sent as UTF-8")
    return Sample(id=sid, messages=body["messages"], tools=body.get("tools") or None, meta={"body": body})


def load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    if data is None and not smoke:
        from verifier.errors import hinted

        raise hinted(FileNotFoundError("replay needs a file of chat-completions request bodies, one a line"),
                     "pass --data FILE.jsonl", "--requests FILE.jsonl", "--smoke")
    path = SMOKE_FILE if data is None else Path(data)
    if not path.is_file():
        raise FileNotFoundError(f"replay data {path} is not a file")
    samples = [make_sample(n, rec) for n, rec in _bodies(path)]
    seen: set[str] = set()
    for s in samples:
        if s.id in seen:
            raise ValueError(f"duplicate request id {s.id!r} in {path}")
        seen.add(s.id)
    return samples


def request(sample: Sample) -> dict[str, Any]:
    return {"_raw": sample.meta["body"]}


def score(sample: Sample, parsed: Parsed) -> Judgement:
    """No ground truth: metrics are the K2VV envelope signals only; score stays None."""
    checks = chk.call_checks(sample.tools, parsed.tool_calls)
    sig = chk.k2vv_signals(sample.tools, parsed.tool_calls, parsed.finish_reason, checks)
    metrics: dict[str, float] = {}
    if (accuracy := chk.schema_accuracy(sig)) is not None:
        metrics["schema_accuracy"] = accuracy
    findings: tuple[Finding, ...] = ()
    if sample.tools and not parsed.tool_calls:
        found = chk.calls_as_text(parsed.content, set(chk.tools_by_name(sample.tools)))
        if found:
            findings = (Finding("tool_call_as_text", ", ".join(sorted(set(found)))[:120]),)
    findings += chk.not_checkable_finding(sample.tools, parsed.tool_calls, checks)
    calls = []
    for c in parsed.tool_calls if isinstance(parsed.tool_calls, list) else []:
        fn = (c.get("function") if isinstance(c, dict) else None) or {}
        args = chk.decode_args(fn.get("arguments"))
        calls.append({"name": fn.get("name"), "arguments": fn.get("arguments") if args is None else args})
    reason = "no_tools" if not sample.tools else ("tool_called" if sig["n_calls"] else "no_call")
    return Judgement(
        score=None,
        answer=sorted(calls, key=lambda c: json.dumps(c, sort_keys=True, ensure_ascii=False)) if sample.tools else parsed.content,
        reason=reason, findings=findings, metrics=metrics, signals=sig if sample.tools else {},
    )


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    return chk.k2vv_summary([v for v in verdicts if "n_calls" in v.signals])


SUITE = Suite(
    name=NAME, version=VERSION, load=load, request=request, score=score, summarize=summarize,
    description="replay raw chat-completions bodies (K2VV format); tool trigger + schema accuracy",
)
