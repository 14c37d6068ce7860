"""Acceptance rows: one candidate gated and recorded, every recorded gate re-judged offline, and the results table (bench/results/acceptance.md).

Each gate run directory gets a sidecar (`acceptance.json`: the row's label, the golden it was gated against, what
the fault proxy changed), so `--recompare` can re-judge any row kind from the journal alone.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SIDECAR = "acceptance.json"


@dataclass(frozen=True)
class Row:
    """One table row's identity: which candidate, against which golden, shown how."""

    label: str
    """The candidate column; labels starting with "rerun" are summarised above the table instead."""
    suite: str
    """The suite inside the golden (where the comparison's per-suite numbers live)."""
    golden: str
    """The golden directory gated against."""
    model: str
    """The model name sent in every request."""
    shown: str = ""
    """The suite column (default: suite), e.g. "bfcl (tool prefill)"."""
    note: str = ""
    """Why the row reads as it does when the evidence alone cannot say (e.g. a fault that had nothing to change)."""
    gate_args: tuple[str, ...] = ()
    """Extra `verifier gate` arguments (e.g. --data for a replay suite, --suite to gate one of the golden's suites)."""


def verifier(*args: str) -> int:
    return subprocess.run([sys.executable, "-m", "verifier", *args]).returncode


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "._" else "_" for c in text)


def gate(work: Path, row: Row, url: str, results: Path, concurrency: int = 2, proxy: Any = None) -> dict:
    """Gate the candidate at `url` against row.golden; record the row (with what `proxy` changed, if given)."""
    out = work / f"gate-{slug(row.label)}-{slug(row.shown or row.suite)}-{time.time_ns()}"
    t0 = time.time()
    code = verifier("gate", "--golden", row.golden, "--base-url", url, "--model", row.model,
                    "--concurrency", str(concurrency), "--out", str(out), "--quiet", *row.gate_args)
    side = {**asdict(row), "seconds": round(time.time() - t0), "ts": time.time_ns()}
    if proxy is not None:
        side["mutated"] = len({m["request"] for m in proxy.mutations})
        side["requests"] = proxy.requests
    out.mkdir(parents=True, exist_ok=True)
    (out / SIDECAR).write_text(json.dumps(side, indent=1) + "\n")
    return record(out, side, code, results)


def _evidence(doc: dict, side: dict) -> list[str]:
    """The deciding signals (at most three), then what the fault proxy changed: a no-op fault reads as one."""
    fired = [e["summary"] if e["summary"].startswith(e["signal"]) else f"{e['signal']}: {e['summary']}"
             for part in ("frontend", "quantization") for e in doc.get(part, {}).get("evidence", [])
             if e["verdict"] != "pass" or e["signal"] == "context_truncated"][:3]
    if "mutated" in side:
        fired.append(f"the fault proxy changed {side['mutated']} of {side['requests']} responses")
        if side["mutated"] == 0 and side.get("note"):
            fired.append(side["note"])
    return fired


def record(out: Path, side: dict, code: int, results: Path) -> dict:
    doc = json.loads((out / "comparison.json").read_text()) if (out / "comparison.json").exists() else {}
    s = doc.get("suites", {}).get(side["suite"], {})
    row = {"candidate": side["label"], "suite": side.get("shown") or side["suite"], "exit": code, "status": doc.get("status"),
           "frontend": doc.get("frontend", {}).get("verdict"), "quantization": doc.get("quantization", {}).get("verdict"),
           "samples": s.get("paired"), "evidence": _evidence(doc, side), "drift": s.get("drift"),
           "seconds": side.get("seconds"), "run_dir": out.name,
           "metrics": {m: {k: v.get(k) for k in ("golden", "candidate", "delta", "p_value", "verdict")}
                       for m, v in s.get("metrics", {}).items()}}
    with results.open("a") as f:
        f.write(json.dumps(row) + "\n")
    print(f"[{row['candidate']} / {row['suite']}] exit {code} {row['status']} frontend={row['frontend']} "
          f"quant={row['quantization']} ({row['seconds']} s)", flush=True)
    return row


def _sidecar(d: Path, goldens: Path, model: str) -> dict | None:
    if (d / SIDECAR).exists():
        return json.loads((d / SIDECAR).read_text())
    try:  # a run from before the sidecar: gate-<label>-<suite>-<seconds>, gated against goldens/<model>-<suite>
        label, suite, ts = d.name.removeprefix("gate-").rsplit("-", 2)
        return {"label": label.replace("_", " "), "suite": suite, "golden": str(goldens / f"{model}-{suite}"),
                "model": model, "ts": int(ts) * 10**9}
    except ValueError:
        return None


def recompare(work: Path, results: Path, goldens: Path, model: str) -> None:
    """Offline: compare every recorded gate run again with the current code (the journal is the truth)."""
    latest: dict[tuple[str, str], tuple[dict, Path]] = {}
    for d in work.glob("gate-*"):
        side = _sidecar(d, goldens, model)
        if side is None:
            continue
        key = (side["label"], side.get("shown") or side["suite"])
        if key not in latest or latest[key][0]["ts"] < side["ts"]:  # a candidate gated again: its newest run counts
            latest[key] = (side, d)
    results.unlink(missing_ok=True)
    for side, d in sorted(latest.values(), key=lambda x: x[0]["ts"]):
        verifier("score", str(d))  # scorers and contract checks may have improved since the run
        # A gate that chose its suites (`--suite`) compared a subset of the golden on purpose; so does its recompare.
        subset = ["--allow-subset"] if "--suite" in (side.get("gate_args") or []) else []
        record(d, side, verifier("compare", str(d), "--golden", side["golden"], *subset), results)


def _rerun_lines(rows: list[dict]) -> list[str]:
    out = []
    for suite in sorted({r["suite"] for r in rows}):
        rs = [r for r in rows if r["suite"] == suite]
        both = sum(r["frontend"] == "pass" and r["quantization"] == "pass" for r in rs)
        no_alarm = sum(r["frontend"] != "fail" and r["quantization"] != "fail" for r in rs)
        n = max((r["samples"] or 0 for r in rs), default=0)
        out.append(f"- **Same engine, rerun**, {suite} ({n} samples): pass on both verdicts in **{both} of {len(rs)}** reruns; "
                   f"no fail verdict in {no_alarm} of {len(rs)}.")
    return out


def table(results: Path) -> str:
    """The rerun lines and table of bench/results/acceptance.md, from results.jsonl."""
    rows = [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    reruns = [r for r in rows if r["candidate"].startswith("rerun")]
    out = _rerun_lines(reruns)
    out += ["", "| candidate | suite | samples | exit | status | frontend | quantization | deciding evidence |",
            "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r in reruns:
            continue
        ev = "; ".join(e.replace("|", "/") for e in r["evidence"]) or "no signal fired"
        out.append(f"| {r['candidate']} | {r['suite']} | {r['samples']} | {r['exit']} | {r['status']} | {r['frontend']} "
                   f"| {r['quantization']} | {ev} |")
    return "\n".join(out)
