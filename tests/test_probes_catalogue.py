"""The feature-contract probe catalogue: the test server (the healthy reference) passes every probe on every surface,
and for each probe one proxy fault breaks exactly that behaviour; the gate then fails the frontend with the probe's
component, on the faulted surface only. Old goldens (bare chat probe names) still gate."""

import asyncio
import json
import re
import xml.etree.ElementTree as ET

import pytest

from conftest import zero_margins
from verifier.execution import probe_results
from verifier.wire.endpoint import Endpoint, EndpointConfig
from verifier.execution.probes import CATALOGUE, PROBES, catalogue_table, run_probes
from verifier.surfaces.registry import surface_for
from verifier.testbed.faults import ALL_FAULTS, FAULTS
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic
from verifier.surfaces import registry

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path

# probe -> the fault that breaks exactly it
BREAKS = {
    "rejects_negative_temperature": "sampling_params_clamped",
    "rejects_top_p_above_1": "sampling_params_clamped",
    "max_tokens_honoured": "max_tokens_floored",
    "max_completion_tokens_honoured": "max_completion_tokens_ignored",
    "temperature_0_deterministic": "temperature_zero_ignored",
    "neutral_sampling_defaults": "generation_config_defaults",
    "neutral_defaults_on_repeats": "generation_config_defaults",
    "stop_honoured": "stop_ignored",
    "n_honoured": "n_ignored",
    "seed_reproducible": "seed_ignored",
    "logit_bias_honoured": "logit_bias_ignored",
    "tool_choice_none": "tool_choice_none_ignored",
    "tool_choice_required": "tool_choice_required_ignored",
    "tool_choice_named": "tool_choice_named_ignored",
    "parallel_tool_calls_false": "parallel_tool_calls_ignored",
    "no_undeclared_tool": "tool_names_prefixed",
    "response_format_honoured": "json_schema_ignored",
    "json_object_honoured": "json_object_ignored",
    "json_key_order_kept": "json_keys_sorted",
    "stream_usage_last_chunk": "usage_every_chunk",
    "reasoning_content_separate": "reasoning_content_same_delta",
    "stream_packet_sizes": "stream_coalesced",
    "thinking_off_honoured": "thinking_kwargs_dropped",
    "thinking_on_honoured": "reasoning_in_content",
    "reasoning_effort_honoured": "reasoning_effort_ignored",
    "thinking_kept_across_turns": "reasoning_history_dropped",
    "prompt_tokens_oracle": "prompt_tokens_skewed",
    "system_prompt_honoured": "drop_system_prompt",
    "messages_system_blocks": "system_blocks_dropped",
    "count_tokens_matches_usage": "count_tokens_skewed",
    "responses_previous_response_id": "previous_response_ignored",
    "responses_store_false": "store_false_ignored",
    "function_call_round_trip": "tool_results_dropped",
    "stream_terminal_event": "terminal_event_as_done",
    "state_repeat_after_shared_prefix": "state_dependent_answers",
    "state_repeat_under_concurrency": "shared_prefix_batch_state",
    "cached_tokens_on_repeat": "cached_tokens_overcounted",
}


def thinker(req):
    """The arithmetic responder of a model that thinks unless told not to (reasoning apart from content)."""
    r = arithmetic(req)
    return Reply(content=r.content, reasoning_content="Working it out.")


def reference():
    return Script(thinker, honour_sampling=True)


async def _probe(url, surfaces):
    ep = Endpoint(EndpointConfig(base_url=url, model="m", max_retries=0))
    try:
        return await run_probes(ep, "m", {}, surfaces)
    finally:
        await ep.aclose()


def test_every_probe_has_a_breaking_fault_that_names_it():
    assert set(BREAKS) == set(PROBES)
    for probe, fault in BREAKS.items():
        assert fault in ALL_FAULTS
        assert f"probe:{probe}" in ALL_FAULTS[fault].catches or fault in ("reasoning_in_content", "drop_system_prompt"), fault
    assert len({p.name for p in CATALOGUE}) == len(CATALOGUE)


def test_the_test_server_passes_every_probe_on_every_surface():
    """The healthy reference: every probe passes where it applies, each result names its surface and component."""
    with TestServer(reference()) as srv:
        res = asyncio.run(_probe(srv.url, registry.SURFACE_NAMES))
    assert set(res) == {probe_results.key(p.name, s) for p in CATALOGUE for s in p.surfaces}
    failed = {k: v["detail"] for k, v in res.items() if not v["passed"]}
    assert not failed, failed
    for k, v in res.items():
        assert probe_results.split(k) == (v["probe"], v["surface"]) and v["component"] == PROBES[v["probe"]].component


def test_probes_run_only_on_the_surfaces_asked_for():
    with TestServer(reference()) as srv:
        res = asyncio.run(_probe(srv.url, ("messages",)))
    assert res and {v["surface"] for v in res.values()} == {"messages"}
    assert "count_tokens_matches_usage@messages" in res and not any(k.startswith("n_honoured") for k in res)


def test_judging_rows_and_old_golden_names():
    cand = {"a@chat": {"passed": False, "detail": "x"}, "b@chat": {"passed": False, "detail": "y"},
            "c@responses": {"passed": False, "detail": "z"}, "d@chat": {"passed": True, "detail": ""},
            "e@chat": {"passed": True, "detail": "", "value": [5]}}
    gold = {"a": {"passed": True, "detail": ""},  # a bare name: a chat result of an old golden
            "b@chat": {"passed": False, "detail": ""}, "d@chat": {"passed": False, "detail": ""},
            "e@chat": {"passed": True, "detail": "", "value": [4]}, "f@messages": {"passed": True, "detail": ""}}
    rows = probe_results.judge(cand, gold, {"a": "API validation"},
                               {"e": lambda c, g: (c == g, f"{c} vs {g}")})
    status = {r["key"]: r["status"] for r in rows}
    assert status == {"a@chat": "regression", "e@chat": "regression", "f@messages": "not_run", "b@chat": "reference_fails",
                      "c@responses": "not_in_golden", "d@chat": "improved"}
    assert [r["status"] for r in rows[:3]] == ["regression", "regression", "not_run"]  # failing rows lead
    ev = probe_results.evidence(rows)
    assert {k: v["verdict"] for k, v in ev.items()} == {"a@chat": "fail", "e@chat": "fail", "b@chat": "pass", "d@chat": "pass"}
    assert "[5] vs [4]" in next(r for r in rows if r["key"] == "e@chat")["candidate_detail"]


def test_infra_on_either_side_is_no_evidence_and_rows_read_typed_results():
    """A probe result is read as a ProbeResult (its check, its infra flag, its component, a measured value); the
    reference's infra makes `reference_infra` whatever the candidate got, the candidate's `infra`; a golden entry whose
    reference met infra (a conformance row's column or a raw result's flag) is no coverage gap (coverage.py)."""
    r = probe_results.ProbeResult.from_dict({"passed": True, "infra": True, "component": "tool-call parser", "value": 0})
    assert (r.passed, r.infra, r.component, r.has_value, r.value, r.detail) == (True, True, "tool-call parser", True, 0, "")
    assert probe_results.ProbeResult.from_dict({"passed": "yes"}).passed is False  # what normalize drops reads as failed
    cand = {"a@chat": {"passed": True, "detail": ""}, "b@chat": {"passed": False, "detail": "", "infra": True}}
    gold = {"a@chat": {"passed": True, "detail": "", "infra": True}, "b@chat": {"passed": True, "detail": "", "component": "X"}}
    rows = {r["key"]: r for r in probe_results.judge(cand, gold)}
    assert (rows["a@chat"]["status"], rows["a@chat"]["reference"], rows["a@chat"]["candidate"]) == ("reference_infra", "infra", "pass")
    assert (rows["b@chat"]["status"], rows["b@chat"]["candidate"], rows["b@chat"]["component"]) == ("infra", "infra", "X")
    assert probe_results.evidence(list(rows.values())) == {}
    assert probe_results.reference_infra(rows["a@chat"]) and not probe_results.reference_infra(rows["b@chat"])
    assert probe_results.reference_infra(gold["a@chat"]) and not probe_results.reference_infra(gold["b@chat"])
    assert not probe_results.reference_infra("not an entry")


@pytest.fixture(scope="module")
def probe_golden(tmp_path_factory):
    """A golden of the test server on every surface, with the whole catalogue and zero margins."""
    from verifier.cli import main

    root = tmp_path_factory.mktemp("probes")
    with TestServer(reference()) as srv:
        assert main(["run", "--suite", "smoke", "--smoke", "--limit", "2", "--model", "m", "--quiet", "--mode", MODES,
                     "--max-retries", "0", "--probes", "--base-url", srv.url, "--out", str(root / "ref")]) == 0
    g = root / "golden"
    assert main(["bless", str(root / "ref"), "--to", str(g)]) == 0
    zero_margins(g)
    return g


def _gate(cli, golden, url, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet",
                            "--max-retries", "0")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_the_reference_gates_clean_against_itself(probe_golden, tmp_path, cli):
    with TestServer(reference()) as srv:
        code, doc, out = _gate(cli, probe_golden, srv.url, tmp_path / "c")
    assert code == 0, out
    rows = doc["conformance"]
    assert len(rows) == sum(len(p.surfaces) for p in CATALOGUE) and {r["status"] for r in rows} == {"pass"}
    assert doc["coverage"]["missing_probes"] == []


CASES = [(p.name, p.surfaces[i % len(p.surfaces)]) for i, p in enumerate(CATALOGUE)]


@pytest.mark.parametrize("probe,surface", CASES, ids=[f"{p}@{s}" for p, s in CASES])
def test_each_fault_fails_its_probe_with_its_component_on_its_surface_only(probe, surface, probe_golden, tmp_path, cli):
    comp = PROBES[probe].component
    with TestServer(reference()) as srv, Proxy(srv.url, [BREAKS[probe]], surfaces={surface}) as px:
        code, doc, out = _gate(cli, probe_golden, px.url, tmp_path / "c")
    assert code == 10 and doc["status"] == "frontend_regression", out
    bad = probe_results.failing(doc["conformance"])
    assert (probe, surface) in {(r["probe"], r["surface"]) for r in bad}, bad
    assert {r["surface"] for r in bad} == {surface}, bad  # the other surfaces stay healthy
    for r in doc["conformance"]:
        if r["probe"] == probe and r["surface"] != surface:
            assert r["status"] == "pass", r
    d = next(d for d in doc["diagnosis"] if d["component"] == comp)
    assert f"probe:{probe}" in d["findings"] and surface in d["modes"]
    for e in doc["frontend"]["evidence"]:  # whatever else fired, fired on the faulted surface
        if e["verdict"] == "fail":
            assert {surface_for(m).name if m not in registry.SURFACE_NAMES else m for m in e.get("modes") or {}} <= {surface}, e


def test_conformance_table_in_summary_junit_and_report(probe_golden, tmp_path, cli):
    with TestServer(reference()) as srv, Proxy(srv.url, ["stop_ignored"], surfaces={"messages"}) as px:
        code, doc, out = _gate(cli, probe_golden, px.url, tmp_path / "c")
    assert code == 10, out
    assert doc["conformance"][0]["key"] == "stop_honoured@messages" and doc["conformance"][0]["status"] == "regression"
    md = (tmp_path / "c" / "summary.md").read_text()
    table = md[md.index("### Probe conformance"):].splitlines()
    assert re.match(r"\| stop_honoured \| messages \| ✅ pass \| ❌ fail \| API validation \| REGRESSION", table[4]), table[:6]
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "c" / "junit.xml").getroot().iter("testcase")}
    fail = cases["messages: probe:stop_honoured"].find("failure")
    assert fail is not None and fail.get("message").startswith("[API validation] stop_honoured on messages: fail")
    assert cases["chat: probe:stop_honoured"].find("failure") is None
    html = (tmp_path / "c" / "report.html").read_text()
    assert 'id="conformance"' in html and html.index("stop_honoured") > html.index('id="conformance"') - 10**6


def test_an_old_golden_with_bare_chat_probes_still_gates(probe_golden, tmp_path, cli):
    """Shipped goldens hold 5 chat probes under bare names: they are judged as chat results; the probes they never
    ran are not sent by default (a gate reruns exactly the golden's probes), so no coverage gap either."""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(probe_golden, old)
    gj = json.loads((old / "golden.json").read_text())
    five = ("rejects_negative_temperature", "rejects_top_p_above_1", "max_tokens_honoured", "temperature_0_deterministic",
            "response_format_honoured")
    gj["probes"] = {n: {"passed": gj["probes"][f"{n}@chat"]["passed"], "detail": gj["probes"][f"{n}@chat"]["detail"]} for n in five}
    (old / "golden.json").write_text(json.dumps(gj))
    with TestServer(reference()) as srv:
        code, doc, out = _gate(cli, old, srv.url, tmp_path / "ok")
    assert code == 0, out
    st = {r["key"]: r["status"] for r in doc["conformance"]}
    assert {st[f"{n}@chat"] for n in five} == {"pass"} and "stop_honoured@messages" not in st
    assert len(st) == len(five), st
    assert doc["coverage"]["missing"] == 0
    with TestServer(reference()) as srv, Proxy(srv.url, ["max_tokens_floored"], surfaces={"chat"}) as px:
        code, doc, out = _gate(cli, old, px.url, tmp_path / "bad")
    assert code == 10, out
    assert [r["key"] for r in probe_results.failing(doc["conformance"])] == ["max_tokens_honoured@chat"]
    st = {r["key"]: r["status"] for r in doc["conformance"]}
    assert "max_tokens_honoured@messages" not in st  # the old golden never ran Messages probes: not sent


def test_a_probe_the_reference_fails_is_reported_not_blamed(tmp_path, cli):
    """A reference without count_tokens and stored responses: the candidate failing those is not a regression."""
    from verifier.cli import main

    with TestServer(reference()) as srv, Proxy(srv.url, ["count_tokens_skewed", "store_false_ignored"]) as ref:
        assert main(["run", "--suite", "smoke", "--smoke", "--limit", "1", "--model", "m", "--quiet", "--mode", "responses,messages",
                     "--max-retries", "0", "--probes", "--base-url", ref.url, "--out", str(tmp_path / "ref")]) == 0
        g = tmp_path / "g"
        assert main(["bless", str(tmp_path / "ref"), "--to", str(g)]) == 0
        zero_margins(g)
        code, doc, out = _gate(cli, g, ref.url, tmp_path / "c")
    assert code == 0, out
    st = {r["key"]: r for r in doc["conformance"]}
    for k in ("count_tokens_matches_usage@messages", "responses_store_false@responses"):
        assert st[k]["status"] == "reference_fails" and st[k]["reference"] == "fail" and st[k]["candidate"] == "fail"
    cases = {c.get("name"): c for c in ET.parse(tmp_path / "c" / "junit.xml").getroot().iter("testcase")}
    skip = cases["messages: probe:count_tokens_matches_usage"].find("skipped")
    assert skip is not None and skip.get("message").startswith("reference fails")


def test_a_gate_without_the_golden_probes_is_incomplete(probe_golden, tmp_path, cli):
    """Probes the golden has and the candidate never ran are missing coverage (exit 30), never a pass."""
    from verifier.execution import probes as probes_mod

    real = probes_mod.run_probes

    async def half(ep, model, extra, surfaces=("chat",), only=None):
        return await real(ep, model, extra, [s for s in surfaces if s != "messages"], only)

    probes_mod.run_probes = half
    try:
        with TestServer(reference()) as srv:
            code, doc, out = _gate(cli, probe_golden, srv.url, tmp_path / "c")
    finally:
        probes_mod.run_probes = real
    assert code == 30, out
    missing = doc["coverage"]["missing_probes"]
    assert missing and all(k.endswith("@messages") for k in missing)
    assert {r["status"] for r in doc["conformance"] if r["surface"] == "messages"} == {"not_run"}


def test_the_probes_page_lists_the_catalogue_as_declared():
    from pathlib import Path

    readme = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "probes.md").read_text(encoding="utf-8")
    rows = [f"| `{n}` | {s} | {se} | {c} | {comp} |" for n, s, se, c, comp in catalogue_table()]
    missing = [r for r in rows if r not in readme]
    assert not missing, missing


def test_an_infra_error_is_no_evidence_and_missing_coverage():
    """A probe whose request timed out (or met a 5xx) is never a failure: status infra, counted missing."""
    gold = {"a@chat": {"passed": True, "detail": ""}, "b@chat": {"passed": True, "detail": ""}}
    cand = {"a@chat": {"passed": False, "infra": "timeout", "detail": "infra error: timeout"}, "b@chat": {"passed": True, "detail": ""}}
    rows = probe_results.judge(cand, gold)
    assert {r["key"]: r["status"] for r in rows} == {"a@chat": "infra", "b@chat": "pass"}
    assert probe_results.evidence(rows)["b@chat"]["verdict"] == "pass" and "a@chat" not in probe_results.evidence(rows)
