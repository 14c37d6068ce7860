"""Issue #16 item 17: a tampered golden is refused on load (exit 2, naming the field), never half-used.

Each case copies goldens/demo-smoke, changes one thing, and runs `verifier compare` with it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest

from verifier.golden import store as golden_mod
from verifier.golden.schema import GOLDEN, OBSERVATION, SCHEMA_VERSION

DEMO = Path(__file__).resolve().parent.parent / "goldens" / "demo-smoke"
NAN = float("nan")


def _g(f: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    return lambda g, obs: f(g)


def _o(f: Callable[[dict[str, Any]], None], i: int = 3) -> Callable[[dict[str, Any], list[dict[str, Any]]], None]:
    return lambda g, obs: f(obs[i])


def _set(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


def _drop(key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.pop(key)


def _margin(value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda g: g["margins"]["smoke/accuracy"].__setitem__("value", value)


TAMPERED = {
    "bogus outcome": (_o(_set("outcome", "bogus")), "outcome"),
    "string prompt_tokens": (_o(_set("prompt_tokens", "32")), "prompt_tokens"),
    "negative prompt_tokens": (_o(_set("prompt_tokens", -1)), "prompt_tokens"),
    "negative margin": (_g(_margin(-0.1)), "margins.smoke/accuracy.value"),
    "NaN margin": (_g(_margin(NAN)), "margins.smoke/accuracy.value"),
    "string margin": (_g(_margin("0.1")), "margins.smoke/accuracy"),
    "margins not an object": (_g(_set("margins", [0.1])), "margins"),
    "missing suites": (_g(_drop("suites")), "suites"),
    "missing sample_id": (_o(_drop("sample_id")), "sample_id"),
    "missing outcome": (_o(_drop("outcome")), "outcome"),
    "string epoch": (_o(_set("epoch", "0")), "epoch"),
    "negative epoch": (_o(_set("epoch", -1)), "epoch"),
    "suite version not a string": (_g(lambda g: g["suites"]["smoke"].__setitem__("version", 1)), "suites.smoke.version"),
    "modes a string": (_g(_set("modes", "chat")), "modes"),
    "zero epochs": (_g(_set("epochs", 0)), "epochs"),
    "string metric": (_o(_set("metrics", {"accuracy": "1"})), "metrics.accuracy"),
    "bad logprob": (_o(_set("logprobs", [["7", "x"]])), "logprobs"),
    "findings a string": (_o(_set("findings", "none")), "findings"),
    "probe passed not a bool": (_g(_set("probes", {"max_tokens_honoured": {"passed": "yes"}})), "probes.max_tokens_honoured.passed"),
    "infinite latency": (_o(_set("latency_ms", float("inf"))), "latency_ms"),
    "NaN score": (_o(_set("score", NAN)), "score"),
    "sample of an unknown suite": (_o(_set("suite", "other")), "suite"),
    "sample of an unknown mode": (_o(_set("mode", "smoke-signal")), "mode"),
    "duplicate sample": (lambda g, obs: obs.append(dict(obs[0])), "duplicate"),
    "unknown golden_format": (_g(_set("golden_format", 99)), "golden_format"),
}


def _write(dst: Path, g: Any, obs: list[Any]) -> None:
    # Plain json.dumps on purpose: it writes NaN/Infinity, as a hand edit or a foreign tool might.
    (dst / "golden.json").write_text(json.dumps(g, indent=1))
    (dst / "samples.jsonl").write_text("".join(json.dumps(o) + "\n" for o in obs))


@pytest.fixture(scope="module")
def candidate(tmp_path_factory, calibrated_golden):
    """A scored run of the smoke suite to compare tampered goldens with (copied: the shared one is read-only)."""
    dst = tmp_path_factory.mktemp("cand") / "r"
    shutil.copytree(calibrated_golden["r2"], dst)
    return dst


def test_the_shipped_goldens_match_the_schema():
    for d in sorted(DEMO.parent.iterdir()):
        if (d / "golden.json").exists():
            g = golden_mod.load(d)
            assert g.header.document["golden_format"] == SCHEMA_VERSION and g.observations


def test_the_schema_is_versioned():
    assert GOLDEN["$id"].endswith(f"/golden/{SCHEMA_VERSION}") and OBSERVATION["$id"].endswith(f"/{SCHEMA_VERSION}")
    assert golden_mod.FORMAT == SCHEMA_VERSION


def test_the_untampered_copy_is_accepted(tmp_path, cli, candidate):
    g = tmp_path / "g"
    shutil.copytree(DEMO, g)
    code, _, err = cli("compare", candidate, "--golden", g, "--out", tmp_path / "c.json")
    assert code in (0, 20), err


@pytest.mark.parametrize("name", sorted(TAMPERED))
def test_a_tampered_golden_exits_2_naming_the_field(name, tmp_path, cli, candidate):
    change, field = TAMPERED[name]
    g = json.loads((DEMO / "golden.json").read_text())
    obs = [json.loads(line) for line in (DEMO / "samples.jsonl").read_text().splitlines()]
    change(g, obs)
    dst = tmp_path / "g"
    dst.mkdir()
    _write(dst, g, obs)
    code, out, err = cli("compare", candidate, "--golden", dst, "--out", tmp_path / "c.json")
    assert code == 2, (name, out, err)
    assert field in err and "internal error" not in err and err.count("\n") == 1, (name, err)
    assert not (tmp_path / "c.json").exists()


def test_a_corrupt_samples_line_names_its_line(tmp_path, cli, candidate):
    dst = tmp_path / "g"
    shutil.copytree(DEMO, dst)
    lines = (dst / "samples.jsonl").read_text().splitlines(keepends=True)
    lines[4] = "{not json\n"
    (dst / "samples.jsonl").write_text("".join(lines))
    code, _, err = cli("compare", candidate, "--golden", dst)
    assert code == 2 and "samples.jsonl" in err and "line 5" in err and "internal error" not in err


def test_gate_and_calibrate_refuse_a_tampered_golden_before_any_request(tmp_path, cli, server):
    dst = tmp_path / "g"
    shutil.copytree(DEMO, dst)
    g = json.loads((dst / "golden.json").read_text())
    g["margins"]["smoke/accuracy"]["value"] = -1
    (dst / "golden.json").write_text(json.dumps(g))
    code, _, err = cli("gate", "--golden", dst, "--base-url", server.url, "--model", "m", "--out", tmp_path / "run", "--quiet")
    assert code == 2 and "margins" in err and server.script.requests == [] and not (tmp_path / "run").exists()
    code, _, err = cli("calibrate", dst, "--runs", tmp_path / "nope")
    assert code == 2 and "margins" in err


@pytest.mark.parametrize("text, field", [
    ("[1, 2]", "golden_format"),
    ("[" * 100000 + "]" * 100000, "corrupt"),
    ('{"golden_format": 2, "suites": {"smoke": {"version": "1"}}, "source": {}, "summary": {}, "margins": {"smoke/accuracy": NaN}}',
     "margins.smoke/accuracy"),
])
def test_a_golden_json_of_the_wrong_shape_exits_2(text, field, tmp_path, cli, candidate):
    dst = tmp_path / "g"
    shutil.copytree(DEMO, dst)
    (dst / "golden.json").write_text(text)
    code, _, err = cli("compare", candidate, "--golden", dst, "--out", tmp_path / "c.json")
    assert code == 2 and field in err and "internal error" not in err and err.count("\n") == 1, err
