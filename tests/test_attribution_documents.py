"""The typed documents (issue 23): comparison.json as `Comparison` and its parts, and run.json as `RunHeader`.

`to_dict()` gives back the document exactly, key order included; the file written from it is the same bytes.
(tests/conftest.py also round-trips every comparison document any test writes through the journal.)"""

from __future__ import annotations

import dataclasses
import json

import pytest

from verifier.golden.model import GoldenHeader
from verifier.attribution import compare, explain, signals
from verifier.attribution.document import ABSENT, Check, Comparison, DiagnosisEntry, MetricResult, SideCounts, SignalResult
from verifier import safewrite
from verifier.execution import journal
from verifier.execution.rundir import RunDir
from verifier.types import Evidence, Observation, RunHeader, RunSuite, Verdict


def obs(sid: str, mode: str = "chat", score: float = 1.0, **kw: object) -> Observation:
    return Observation(suite="s", sample_id=sid, epoch=0, mode=mode, outcome="content", score=score,  # type: ignore[arg-type]
                       metrics={"accuracy": score}, answer=4 if score else 5, prompt_tokens=10, **kw)


GOLDEN = [obs(f"x{i}", m) for i in range(12) for m in ("chat", "chat-stream")]


def meta(margins: dict[str, float]) -> GoldenHeader:
    return GoldenHeader.from_json({"suites": {"s": {"version": "1"}}, "margins": margins})


def same(a: object, b: object) -> bool:
    """Equal, and in the same key order."""
    return json.dumps(a) == json.dumps(b)


def documents() -> list[dict[str, object]]:
    """Comparisons of different shapes: a pass, a frontend regression, a quality drop, uncalibrated margins."""
    full = {f"s/signal:{n}": 0.0 for n in signals.names()} | {"s/accuracy": 0.0, "s/drift": 0.0}
    broken = [obs(f"x{i}", m, findings=("usage_missing",) if m == "chat-stream" else ()) for i in range(12)
              for m in ("chat", "chat-stream")]
    wrong = [obs(f"x{i}", m, score=0.0) for i in range(12) for m in ("chat", "chat-stream")]
    return [compare.compare(meta(full), GOLDEN, GOLDEN).to_dict(), compare.compare(meta(full), GOLDEN, broken).to_dict(),
            compare.compare(meta(full), GOLDEN, wrong).to_dict(), compare.compare(meta({"s/accuracy": 0.1}), GOLDEN, broken).to_dict(),
            compare.compare(meta({}), GOLDEN, wrong).to_dict()]


@pytest.mark.parametrize("i", range(5))
def test_a_comparison_round_trips_in_key_order_and_in_file_bytes(i, tmp_path):
    doc = documents()[i]
    c = Comparison.from_dict(doc)
    assert same(c.to_dict(), doc)
    assert not c.extra and all(not s.extra for s in c.suites.values())  # every key is named by a field
    safewrite.write_json(tmp_path / "a.json", doc)
    safewrite.write_json(tmp_path / "b.json", c.to_dict())
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    back = Comparison.read(tmp_path / "a.json")
    assert back == c and back.to_dict() == doc  # read from the sorted file: same fields, same values


def test_fields_read_what_the_keys_held():
    doc = documents()[1]
    c = Comparison.from_dict(doc)
    assert c.status == doc["status"] == "frontend_regression" and c.exit_code == 10
    assert c.suites["s"].signals["new_findings"].count == doc["suites"]["s"]["signals"]["new_findings"]["count"]
    assert c.diagnosis and c.diagnosis[0].component == doc["diagnosis"][0]["component"]
    assert [ch.name for ch in c.checks or ()] == [ch["name"] for ch in doc["checks"]]
    assert [e.to_dict() for e in c.evidence] == doc["frontend"]["evidence"] + doc["quantization"]["evidence"]
    assert explain.reasons(c) == doc["reasons"]


def test_optional_keys_absent_and_null_are_kept_apart():
    base = {"golden": 0.5, "candidate": 0.4, "delta": -0.1, "ci": [-0.2, 0.0], "margin": 0.0, "p_value": 0.5, "n": 10,
            "verdict": "inconclusive"}
    assert MetricResult.from_dict(base).samples_needed is ABSENT and "samples_needed" not in MetricResult.from_dict(base).to_dict()
    assert same(MetricResult.from_dict({**base, "samples_needed": None}).to_dict(), {**base, "samples_needed": None})
    # a numerics signal judged uncalibrated: the paired keys, then the note, then the samples
    ev = {"rate": 0.5, "ci": [0.2, 0.8], "count": 5, "n": 10, "margin": None, "verdict": "inconclusive", "golden_count": 1,
          "p_value": 0.2, "test": "mcnemar_exact", "note": "golden not calibrated", "samples": ["a"]}
    assert same(SignalResult.from_dict(ev).to_dict(), ev)
    unmeasured = {"name": "s: x", "class": "verifier.frontend", "verdict": "not_measured", "summary": "not measured"}
    assert same(Check.from_dict(unmeasured).to_dict(), unmeasured) and Check.from_dict(unmeasured).samples is None


def test_a_key_no_field_names_is_kept_and_written_back_last():
    d = {"component": "c", "findings": ["f"], "counts": {"f": 1}, "suites": ["s"], "modes": [], "examples": [],
         "explanation": "e", "where": "w", "future_key": 1}
    assert same(DiagnosisEntry.from_dict(d).to_dict(), d)
    with pytest.raises(ValueError, match="unknown keys"):
        Evidence.from_dict({"signal": "x", "suite": "s", "verdict": "pass", "summary": "", "new": 1})


def test_read_refuses_what_is_not_a_comparison(tmp_path):
    (tmp_path / "c.json").write_text("{}")
    with pytest.raises(ValueError, match="not a comparison document"):
        Comparison.read(tmp_path / "c.json")
    (tmp_path / "c.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        Comparison.read(tmp_path / "c.json")


def test_run_header_reads_back_what_run_header_wrote(tmp_path):
    hdr = journal.run_header("r1", endpoint={"base_url": "http://x/v1", "model": "m"}, suites={"smoke": {"version": "3"}},
                             sampling={}, extra_body={}, epochs=1, modes=["chat"], started=None, selection={"limit": 2})
    journal.write_header(tmp_path, hdr)
    typed = RunDir(tmp_path).header()
    assert typed == hdr and typed.to_json() == json.loads((tmp_path / journal.HEADER).read_text())
    assert typed.extra == {"selection": {"limit": 2}}
    assert typed.suite_version("smoke") == "3" and typed.suite_version("other") is None and typed.model == "m"
    assert RunHeader.from_dict({"suites": {}}).format == 0  # a header from before `format`
    # Written back (a resume completing an older run), it keeps the keys it had: none is added but what is set.
    old = {"run_id": "r0", "suites": {"smoke": {"version": "3"}}, "modes": ["chat"], "epochs": 1}
    completed = dataclasses.replace(RunHeader.from_dict(old), finished="2026-01-01T00:00:00+00:00")
    journal.write_header(tmp_path, completed, leave_out=journal.absent_keys(old))
    assert json.loads((tmp_path / journal.HEADER).read_text()) == {**old, "finished": "2026-01-01T00:00:00+00:00"}


def test_blocks_that_stay_mappings_read_as_typed_values():
    """Issue 45: a comparison's {"golden", "candidate"} pairs and new-finding details are read as SideCounts and
    NewFinding, with the same values the keys hold; the document is unchanged by reading it."""
    doc = documents()[1]  # usage_missing on the candidate's streams only
    c = Comparison.from_dict(doc)
    s = c.suites["s"]
    counts = s.finding_counts()
    assert {code: (n.golden, n.candidate) for code, n in counts.items()} == \
        {code: (n["golden"], n["candidate"]) for code, n in doc["suites"]["s"]["findings"].items()}
    assert counts["usage_missing"] == SideCounts(golden=0, candidate=12)
    new = s.new_findings()["usage_missing"]
    assert new.samples == doc["suites"]["s"]["new_finding_detail"]["usage_missing"]["samples"] and new.modes == ["chat-stream"]
    assert new.completion_tokens is None and new.requested_max_tokens is None
    lp = s.drift.logprob_counts
    assert lp is None if not doc["suites"]["s"]["drift"].get("logprobs") else \
        (lp.golden, lp.candidate, lp.of) == tuple(doc["suites"]["s"]["drift"]["logprobs"][k] for k in ("golden", "candidate", "of"))
    assert SideCounts.from_dict(None) == SideCounts(None, None) and SideCounts.from_dict({"golden": 0.5}).candidate is None
    assert same(c.to_dict(), doc)
    # the models each side was made with, as the gate recorded them (absent: None)
    assert (c.run_model, c.golden_model) == (None, None)
    recorded = dataclasses.replace(c, run={"run_dir": "r", "endpoint": {"model": "a"}}, golden={"endpoint": {"model": "b"}})
    assert (recorded.run_model, recorded.golden_model) == ("a", "b")


def test_tool_call_line_reads_the_pairs_it_prints():
    tc = {"trigger_f1": {"golden": 1.0, "candidate": 0.5}, "schema_accuracy": {"golden": 0.9, "candidate": 0.8, "candidate_calls": 7}}
    assert explain.tool_call_line(tc) == ("tool calls: trigger F1 0.500 (golden 1.000); schema accuracy 0.800 "
                                          "(golden 0.900, 7 calls)")
    assert explain.tool_call_line({"schema_accuracy": {}}) == "tool calls: schema accuracy – (golden –)"


def test_run_header_reads_its_suites_and_optional_blocks_typed():
    hdr = RunHeader.from_dict({"suites": {"b": {"version": "2", "dataset_sha256": "ab", "samples": 5, "requests": 10},
                                          "a": {"version": "1"}, "c": "not an object"},
                               "teacher_forcing": {"method": "echo"}, "shard_set": ["not", "an", "object"]})
    infos = hdr.suite_infos()
    assert list(infos) == ["a", "b", "c"]
    assert infos["b"] == RunSuite(version="2", dataset_sha256="ab", samples=5, requests=10)
    assert infos["a"] == RunSuite("1", None, None, None) and infos["c"] == RunSuite(None, None, None, None)
    assert hdr.teacher_forcing == {"method": "echo"} and hdr.shard_set is None
    assert RunHeader.from_dict({"suites": {}}).teacher_forcing is None


def test_a_verdicts_latency_reads_its_signal():
    v = Verdict(suite="s", sample_id="x", epoch=0, mode="chat", outcome="content", signals={"latency_ms": 12.5})
    assert v.latency_ms == 12.5 and dataclasses.replace(v, signals={}).latency_ms == 0.0
