"""bench/release/acceptance.py's bookkeeping, offline: the results table from results.jsonl, gate sidecars, argument checks."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "release"
sys.path.append(str(BENCH))  # appended: bench/release/engines.py must not shadow anything

import acceptance  # noqa: E402
import acceptance_rows as rows  # noqa: E402


def _row(candidate, suite="bfcl", frontend="pass", quant="pass", evidence=(), samples=22, status="pass", exit_code=0):
    return {"candidate": candidate, "suite": suite, "exit": exit_code, "status": status, "frontend": frontend,
            "quantization": quant, "samples": samples, "evidence": list(evidence)}


def test_the_table_has_the_readme_columns_and_summarises_reruns(tmp_path):
    results = tmp_path / "results.jsonl"
    lines = [_row("rerun 1"), _row("rerun 2", quant="inconclusive"),
             _row("proxy stream index zero", "bfcl (tool prefill)", evidence=["the fault proxy changed 0 of 30 responses", "no-op: why"]),
             _row("proxy tool args truncated", "bfcl (tool prefill)", "fail", "inconclusive", ["new_findings: 4/4 | x"], 4,
                  "frontend_regression", 10)]
    results.write_text("".join(json.dumps(r) + "\n" for r in lines))
    text = rows.table(results)
    assert "- **Same engine, rerun**, bfcl (22 samples): pass on both verdicts in **1 of 2** reruns; no fail verdict in 2 of 2." in text
    assert "| candidate | suite | samples | exit | status | frontend | quantization | deciding evidence |" in text
    assert "| proxy stream index zero | bfcl (tool prefill) | 22 | 0 | pass | pass | pass | the fault proxy changed 0 of 30 responses; no-op: why |" in text
    assert "| proxy tool args truncated | bfcl (tool prefill) | 4 | 10 | frontend_regression | fail | inconclusive | new_findings: 4/4 / x |" in text
    assert "rerun 1 |" not in text


def test_evidence_names_what_the_fault_proxy_changed_and_keeps_the_context_verdict():
    doc = {"frontend": {"evidence": [
        {"signal": "context_truncated", "verdict": "pass", "summary": "context_truncated: none; refused from 4000"},
        {"signal": "new_findings", "verdict": "pass", "summary": "quiet"}]}}
    ev = rows._evidence(doc, {"mutated": 0, "requests": 12, "note": "no-op: one call per response"})
    assert ev == ["context_truncated: none; refused from 4000",
                  "the fault proxy changed 0 of 12 responses", "no-op: one call per response"]
    assert rows._evidence(doc, {"mutated": 3, "requests": 12, "note": "unused"})[-1] == "the fault proxy changed 3 of 12 responses"


def test_a_gate_dir_from_before_sidecars_is_still_recompared_against_its_suites_golden(tmp_path):
    d = tmp_path / "gate-proxy_usage_dropped-smoke-1764500000"
    d.mkdir()
    side = rows._sidecar(d, Path("goldens"), "qwen0.5b")
    assert side == {"label": "proxy usage dropped", "suite": "smoke", "golden": str(Path("goldens") / "qwen0.5b-smoke"),
                    "model": "qwen0.5b", "ts": 1764500000 * 10**9}
    new = tmp_path / "gate-x-bfcl_tool_prefill_-1"
    new.mkdir()
    (new / rows.SIDECAR).write_text(json.dumps({"label": "x", "suite": "bfcl", "golden": "g", "model": "m", "ts": 5}))
    assert rows._sidecar(new, Path("goldens"), "qwen0.5b")["golden"] == "g"


@pytest.mark.parametrize("argv, message", [
    (["--stages", "goldens,nope"], "unknown stage(s) nope"),
    (["--limit", "2"], "--limit makes partial goldens"),
])
def test_bad_arguments_exit_2_with_one_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        acceptance.parse(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_every_stage_is_known_and_limit_elsewhere_is_accepted(tmp_path):
    a = acceptance.parse(["--limit", "2", "--sample-seed", "7", "--goldens", str(tmp_path / "g"), "--stages", ",".join(acceptance.STAGES)])
    assert acceptance.Bench(a).run_args() == ["--limit", "2", "--sample-seed", "7"]
    assert set(acceptance.TOOL_FAULTS) | set(acceptance.FAULT_SUITE) <= set(__import__("verifier.testbed.faults", fromlist=["FAULTS"]).FAULTS)
