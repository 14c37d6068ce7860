"""The golden is validated once, at load (golden/store.load -> golden/model.Golden): a field of the wrong type or
over its maximum is exit 2 in one line naming the field, never an internal error, and nothing is sent."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from verifier.golden import schema, store

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "goldens" / "demo-smoke"


def edited(tmp_path: Path, edit) -> Path:
    g = tmp_path / "g"
    shutil.copytree(DEMO, g)
    doc = json.loads((g / "golden.json").read_text())
    edit(doc)
    (g / "golden.json").write_text(json.dumps(doc))
    return g


@pytest.mark.parametrize("edit,field", [
    (lambda d: d.update(context_probe={"lengths": "ab"}), "$.context_probe.lengths"),
    (lambda d: d.update(context_probe={"lengths": [20_000_000]}), "$.context_probe.lengths[0]"),
    (lambda d: d.update(context_probe={"lengths": list(range(1, 40))}), "$.context_probe.lengths"),
    (lambda d: d.update(epochs=10**9), "$.epochs"),
    (lambda d: d["summary"].update(suites="x"), "$.summary.suites"),
    (lambda d: d["source"]["sampling"].update(overrides="x"), "$.source.sampling.overrides"),
    (lambda d: d.update(modes=["chat", "telnet"]), "$.modes[1]"),
    (lambda d: d.update(name="n" * 100_000), "$.name"),
    (lambda d: d["suites"]["smoke"].update(samples=10**12), "$.suites.smoke.samples"),
    (lambda d: d.update(margins={f"s/m{i}": 0.1 for i in range(schema.MAX_MARGINS + 1)}), "$.margins"),
    (lambda d: d.update(probes={"p": {"passed": True, "detail": "x" * (schema.MAX_TEXT + 1)}}), "$.probes.p.detail"),
])
def test_a_wrong_type_or_an_oversized_field_is_exit_2_naming_it(edit, field, tmp_path, cli):
    g = edited(tmp_path, edit)
    code, out, err = cli("gate", "--golden", g, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and field in err and err.count("\n") == 1 and "internal" not in err, err
    assert not (tmp_path / "o").exists()
    with pytest.raises(store.BadGolden, match=field.replace("$", r"\$").replace("[", r"\[").replace("]", r"\]")):
        store.load(g)


def test_oversized_observation_rows_are_refused(tmp_path):
    g = tmp_path / "g"
    shutil.copytree(DEMO, g)
    rows = [json.loads(x) for x in (g / "samples.jsonl").read_text().splitlines()]
    rows[0]["content"] = "x" * 100_000
    (g / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(store.BadGolden, match=r"samples.jsonl line 1: \$.content"):
        store.load(g)
    rows[0]["content"] = None
    rows[0]["epoch"] = 3  # the golden has one epoch
    (g / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(store.BadGolden, match=r"line 1: \$.epoch"):
        store.load(g)


@pytest.mark.parametrize("name", ["samples.jsonl", "inputs.jsonl", "golden.json"])
def test_special_files_in_a_golden_are_refused_without_waiting(name, tmp_path, cli):
    g = tmp_path / "g"
    shutil.copytree(DEMO, g)
    (g / name).unlink()
    os.mkfifo(g / name)  # no writer: a plain open would wait forever
    with pytest.raises(store.BadGolden, match="FIFO"):
        store.load(g)
    (g / name).unlink()
    (g / name).symlink_to("/dev/zero")
    code, _, err = cli("compare", DEMO, "--golden", g)
    assert code == 2 and name in err and err.count("\n") == 1, err


def test_a_multi_suite_golden_narrows_after_validating_its_whole_inputs():
    from verifier.golden.model import Margin

    whole = store.load(ROOT / "goldens" / "gemma3-270m-smoke")
    assert set(whole.suites) == {"replay", "smoke"}
    one = whole.narrow(suites=["smoke"], modes=["chat"], limit=3, probes=False,
                       margins=[Margin("smoke/accuracy", 0.3, "why", "gate")])
    assert one.suites == ("smoke",) and one.modes == ("chat",) and set(one.inputs) == {"smoke"}
    assert {o.suite for o in one.observations} == {"smoke"} and {o.mode for o in one.observations} == {"chat"}
    assert len({o.sample_id for o in one.observations}) == 3 and one.header.probes is None
    assert one.margins["smoke/accuracy"].value == 0.3 and whole.margins["smoke/accuracy"].value != 0.3  # pure
    assert one.narrowed == {"limit": 3, "golden_records": whole.records(), "gated_records": 3,
                            "probes_left_out": bool(whole.header.probes)}
    with pytest.raises(ValueError, match="no suite 'bfcl'"):
        whole.narrow(suites=["bfcl"])


def test_the_header_round_trips_golden_json():
    for d in sorted((ROOT / "goldens").iterdir()):
        g = store.load(d)
        assert g.header.to_json() == json.loads((d / "golden.json").read_text()), d.name


def test_bless_keeps_the_umask_mode(calibrated_golden, tmp_path, cli):
    old = os.umask(0o022)
    try:
        assert cli("bless", calibrated_golden["ref"], "--to", tmp_path / "goldens" / "g")[0] == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "goldens" / "g").stat().st_mode) == 0o755


CALIBRATED = {"source": "calibrate", "method": "reruns", "k": 3, "runs": ["a", "b", "c"], "created": "2026-01-01T00:00:00+00:00"}


@pytest.mark.parametrize("key,value", [
    ("smoke/accuracy", 1e308), ("smoke/accuracy", 1.5), ("smoke/signal:new_findings", 2.0),
    ("smoke/divergence", 1.000001), ("smoke/drift", 1e308),
])
def test_a_margin_past_what_calibration_can_measure_is_refused(key, value, tmp_path, cli):
    """Issue 49 item 5: a margin of 1e308 (provenance still "calibrate") let an endpoint whose accuracy fell from 1.0
    to 0.0 pass. A change in a rate, or in the mean of a metric whose recorded values lie in [0, 1], is at most 1,
    whatever reruns measured: such a golden is refused at load, naming the margin, and nothing is sent."""
    g = edited(tmp_path, lambda d: d.update(margins={**d["margins"], key: {"value": value, **CALIBRATED}}))
    with pytest.raises(store.BadGolden, match="more than this margin can be") as e:
        store.load(g)
    assert f"$.margins[{key!r}]" in str(e.value)
    code, _, err = cli("gate", "--golden", g, "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and key in err and "more than this margin can be" in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("k", [1, 0, "3", True])
def test_a_calibrated_margin_from_fewer_than_two_runs_is_refused(k, tmp_path):
    g = edited(tmp_path, lambda d: d.update(margins={**d["margins"], "smoke/accuracy": {**CALIBRATED, "value": 0.1, "k": k}}))
    with pytest.raises(store.BadGolden, match="at least 2"):
        store.load(g)


def test_margins_within_their_bounds_load(tmp_path):
    g = edited(tmp_path, lambda d: d.update(margins={**d["margins"], "smoke/accuracy": {"value": 1.0, **CALIBRATED},
                                                     "smoke/signal:new_findings": 1.0, "smoke/drift": 50.0}))
    assert store.load(g).margins["smoke/accuracy"].value == 1.0


def test_a_metric_recorded_outside_0_1_is_bounded_by_its_values():
    from verifier.golden.model import margin_bound

    spans = {"s/bleu": (3.0, 40.0), "s/accuracy": (0.0, 1.0)}
    assert margin_bound("s/bleu", spans)[0] == 80.0
    assert margin_bound("s/accuracy", spans)[0] == 1.0
    assert margin_bound("s/unknown", spans) is None
    assert margin_bound("s/signal:x", {})[0] == 1.0


def wrong(req):
    import re

    from verifier.testbed.server import Reply

    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return Reply(content=str(int(m.group(1)) + int(m.group(2)) + 1))


def test_bless_and_gate_say_when_the_reference_is_at_the_floor(tmp_path, cli):
    """Issue 49 item 5: a golden blessed from a broken reference (its own accuracy 0) passes a broken endpoint; bless
    and gate say so on stderr, and the comparison's reasons say it beside the verdict."""
    from verifier.testbed.server import Script, TestServer

    run, golden = tmp_path / "ref", tmp_path / "golden"
    with TestServer(Script(wrong)) as srv:
        assert cli("run", "--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat", "--base-url", srv.url,
                   "--out", run)[0] == 0
        code, _, err = cli("bless", run, "--to", golden)
        assert code == 0 and "warning: the reference's own quality on smoke is at the floor (accuracy 0" in err, err
        doc = json.loads((golden / "golden.json").read_text())
        doc["margins"] = {"smoke/accuracy": {"value": 0.1, **CALIBRATED}}
        (golden / "golden.json").write_text(json.dumps(doc))
        code, _, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--quiet",
                           "--out", tmp_path / "gate", "--allow-inconclusive")
    assert "warning: the reference's own quality on smoke is at the floor" in err, err
    comparison = json.loads((tmp_path / "gate" / "comparison.json").read_text())
    assert any("at the floor" in r for r in comparison["reasons"]), comparison["reasons"]
    # the floor: every quality metric at most 0.05; a reference that gets some right says nothing of the kind
    from verifier.golden.model import quality_at_floor

    assert quality_at_floor({"suites": {"smoke": {"metrics": {"accuracy": {"value": 0.65, "n": 20}}}}}) == {}
    assert quality_at_floor({"suites": {"s": {"metrics": {"a": {"value": 0.05, "n": 20}, "b": {"value": 0.0}}}}}) == \
        {"s": "a 0.05 (n=20), b 0"}


def test_a_limited_load_bounds_metric_margins_by_every_row(tmp_path, cli):
    """`gate --limit 5` streams the golden past its first samples; the margin bounds still come from every row, so a
    1e308 accuracy margin is refused there too, before anything is sent."""
    g = edited(tmp_path, lambda d: d.update(margins={**d["margins"], "smoke/accuracy": {"value": 1e308, **CALIBRATED}}))
    with pytest.raises(store.BadGolden, match="more than this margin can be"):
        store.load(g, limit=2)
    code, _, err = cli("gate", "--golden", g, "--limit", "2", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                       "--out", tmp_path / "o")
    assert code == 2 and "smoke/accuracy" in err and err.count("\n") == 1, err
    assert not (tmp_path / "o").exists()
