"""One declaration per signal (signals.SIGNALS): compare, calibrate, the checks and the diagnosis all read it, so a
new signal is one function plus one declaration and cannot silently drop out of the diagnosis."""

from __future__ import annotations

import pytest

from verifier.golden.model import GoldenHeader
from verifier.attribution import compare, diagnosis, explain, signals
from verifier.attribution.diagnosis import COMPONENTS, TABLE
from verifier.attribution.document import Check, Comparison
from verifier.attribution.signals import Signal
from verifier.types import Observation


def obs(sid: str, mode: str = "chat", **kw: object) -> Observation:
    return Observation(suite="s", sample_id=sid, epoch=0, mode=mode, outcome="content", score=1.0,
                       metrics={"accuracy": 1.0}, answer=4, prompt_tokens=10, **kw)  # type: ignore[arg-type]


GOLDEN = [obs(f"x{i}", m) for i in range(12) for m in ("chat", "chat-stream")]


def meta(margins: dict[str, float]) -> GoldenHeader:
    return GoldenHeader.from_json({"suites": {"s": {"version": "1"}}, "margins": margins})


def test_every_signal_is_declared_once_with_a_known_component():
    names = [s.name for s in signals.SIGNALS]
    assert len(names) == len(set(names))
    assert signals.names() == signals.EVENTS and signals.names("frontend") == signals.FRONTEND_EVENTS
    for s in signals.declared("frontend"):
        assert s.component == signals.BY_FINDING_CODE or s.component in COMPONENTS, s.name
        assert s.name in TABLE or s.component == signals.BY_FINDING_CODE, s.name
    assert {comp for comp, _ in TABLE.values()} <= set(COMPONENTS)
    assert signals.fixed_blame_modes() == {"stream_parity_mismatch": {"chat-stream"}, "dual_path_mismatch": {"completions"}}
    # logprobs_dropped: a missing logprob changes no answer (quality still compared, only the drift is not measured)
    assert signals.STRUCTURAL_ZERO == {"decoding_changed"} and signals.NOT_TOUCHING == {"new_findings", "logprobs_dropped", "cached_tokens_dropped"}


def test_a_frontend_signal_without_a_component_is_refused():
    with pytest.raises(ValueError, match="needs a component"):
        Signal("x", "frontend", None, "m", None, lambda g, c: None)


def test_a_new_declaration_reaches_compare_checks_and_the_diagnosis(monkeypatch):
    """A signal added to the registry (and nowhere else) is measured, judged against its margin, tracked as a check,
    and named in the diagnosis under its own component, with the modes it fired on."""
    def latency_spike(g, c):  # fires on every sample whose candidate carries the marker
        return any(o.reason == "spike" for o in c)

    new = Signal("latency_spike", "frontend", "context handling", "a made-up signal for this test", None, latency_spike)
    monkeypatch.setattr(signals, "SIGNALS", signals.SIGNALS + (new,))
    assert "latency_spike" in TABLE and diagnosis.component_of("latency_spike")[0] == "context handling"
    cand = [obs(f"x{i}", m, reason="spike" if m == "chat-stream" else None) for i in range(12) for m in ("chat", "chat-stream")]
    margins = {f"s/signal:{n}": 0.0 for n in signals.names()} | {"s/accuracy": 0.0, "s/drift": 0.0}
    doc = compare.compare(meta(margins), GOLDEN, cand).to_dict()
    assert doc["status"] == "frontend_regression"
    assert doc["suites"]["s"]["signals"]["latency_spike"]["count"] == 12
    assert doc["suites"]["s"]["signal_modes"]["latency_spike"] == ["chat-stream"]  # asked again per mode
    d = doc["diagnosis"][0]
    assert d["component"] == "context handling" and d["findings"] == ["latency_spike"] and d["modes"] == ["chat-stream"]
    assert "a made-up signal for this test" in d["explanation"]
    assert any(c["name"] == "s: latency_spike" and c["verdict"] == "fail" for c in doc["checks"])
    assert explain.component_line(Comparison.from_dict(doc), Check("s: latency_spike", "verifier.frontend", "fail", "")) == "context handling"
    # calibrate measures it too, under the same margin key
    assert "s/signal:latency_spike" in compare.calibrate_margins([GOLDEN, cand], {"method": "test"})


def test_a_new_path_signal_blames_its_declared_modes(monkeypatch):
    new = Signal("completions_path", "frontend", "chat template & tokenization", "test path signal",
                 frozenset({"completions"}), lambda g, c: True)
    monkeypatch.setattr(signals, "SIGNALS", signals.SIGNALS + (new,))
    cand = [obs(f"x{i}", m) for i in range(12) for m in ("chat", "chat-stream")]
    margins = {f"s/signal:{n}": 0.0 for n in signals.names()} | {"s/accuracy": 0.0, "s/drift": 0.0}
    doc = compare.compare(meta(margins), GOLDEN, cand).to_dict()
    assert doc["suites"]["s"]["signal_modes"]["completions_path"] == ["completions"]
    assert [d["component"] for d in doc["diagnosis"]] == ["chat template & tokenization"]


def test_declared_variants_on_streams_and_surfaces():
    rows = diagnosis.signal_rows()
    assert rows["prompt_tokens_mismatch:stream"][0] == "response formatting & usage"
    assert rows["prompt_tokens_mismatch:surface"][0] == rows["history_tokens_mismatch:surface"][0] == "surface translation"
    assert "new_findings" not in rows and "repetition" not in rows
