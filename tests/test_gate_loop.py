"""Goldens, calibration, compare and gate against real HTTP servers with scripted regressions."""

import json
import re
import shutil

import pytest

from verifier.testbed.server import Reply, Script, TestServer, arithmetic, prompt_tokens


def answer(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return int(m.group(1)) + int(m.group(2))


def reference(req):
    return Reply(content=str(answer(req)))


def answer_in_reasoning(req):
    return Reply(content="", reasoning_content=f"The sum is {answer(req)}")


def requantized(req):
    # Numerics changed: most answers off by one, and the logprobs of the same tokens moved.
    a = answer(req)
    return Reply(content=str(a + 1 if a % 5 else a), logprob_shift=0.3)


def sampling_ignored(req):
    # Wrong answers, but the same tokens keep their logprobs: not the weights.
    a = answer(req)
    return Reply(content=str(a + 1 if a % 5 else a))


def template_drops_system(req):
    pt = prompt_tokens(req) - 7
    return Reply(content=str(answer(req)), usage={"prompt_tokens": pt, "completion_tokens": 1, "total_tokens": pt + 1})


RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-retries", "0"]


@pytest.fixture
def golden(calibrated_golden):
    return calibrated_golden["golden"]  # one per session (conftest), built with the same RUN flags and reference


def gate(cli, golden, responder, out, *extra):
    if responder is None:  # the caller passes its own --base-url
        code, stdout, err = cli("gate", "--golden", golden, "--model", "m", "--out", out, "--quiet", *extra)
    else:
        with TestServer(Script(responder)) as srv:
            code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", *extra)
    doc = json.loads((out / "comparison.json").read_text()) if (out / "comparison.json").exists() else None
    return code, doc, stdout + err


def test_golden_is_small_diffable_text(golden):
    g = json.loads((golden / "golden.json").read_text())
    assert g["margins"]["smoke/accuracy"]["source"] == "calibrate"
    assert g["margins"]["smoke/accuracy"]["k"] == 3
    lines = (golden / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 40
    o = json.loads(lines[0])
    assert o["answer"] is not None and o["prompt_tokens"] > 0 and o["logprobs"]


def test_rerun_passes(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, reference, tmp_path / "c")
    assert code == 0, out
    assert doc["status"] == "pass" and doc["frontend"]["verdict"] == "pass" and doc["quantization"]["verdict"] == "pass"
    m = doc["suites"]["smoke"]["metrics"]["accuracy"]
    assert m["delta"] == 0 and m["verdict"] == "pass" and m["n"] == 20


def test_answer_in_reasoning_is_frontend(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, answer_in_reasoning, tmp_path / "c")
    assert code == 10, out
    assert doc["status"] == "frontend_regression"
    ev = {e["signal"]: e for e in doc["frontend"]["evidence"]}
    assert ev["new_findings"]["verdict"] == "fail"
    assert doc["suites"]["smoke"]["findings"]["answer_in_reasoning"] == {"golden": 0, "candidate": 20}
    assert doc["quantization"]["verdict"] != "fail"


def test_requantized_is_quantization(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, requantized, tmp_path / "c")
    assert code == 11, out
    assert doc["frontend"]["verdict"] == "pass"
    s = doc["suites"]["smoke"]
    assert s["metrics"]["accuracy"]["verdict"] == "fail" and s["metrics"]["accuracy"]["p_value"] < 0.05
    assert s["drift"]["state"] == "fired" and s["drift"]["mean_abs_delta"] == pytest.approx(0.3)
    assert len(s["flips"]["regressed"]) >= 10 and s["flips"]["improved"] == []


def test_quality_drop_without_logprob_drift_is_not_blamed_on_weights(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, sampling_ignored, tmp_path / "c")
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["verdict"] == "fail"
    assert doc["suites"]["smoke"]["drift"]["state"] == "clean"
    # Not the weights (no drift), and not nothing either: a significant drop nothing attributes fails as
    # regression_unattributed (13), which --allow-inconclusive does not turn into a pass.
    assert doc["quantization"]["verdict"] == "inconclusive" and code == 13 and doc["status"] == "regression_unattributed", out
    assert "drift 0 at the noise floor" in doc["reason"]


def test_template_bug_found_by_prompt_token_fingerprint(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, template_drops_system, tmp_path / "c")
    assert code == 10, out
    sig = doc["suites"]["smoke"]["signals"]["prompt_tokens_mismatch"]
    assert sig["verdict"] == "fail" and sig["count"] == 20


def test_infra_over_budget_is_incomplete(golden, tmp_path, cli):
    def flaky(req):
        return Reply(status=503) if answer(req) % 3 == 0 else reference(req)

    code, doc, out = gate(cli, golden, flaky, tmp_path / "c")
    assert code == 30, out
    assert doc["status"] == "incomplete" and doc["infra"]["count"] > 0


def test_bad_goldens_exit_2_and_overwrite_nothing(golden, tmp_path, cli):
    with TestServer(Script(reference)) as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / "run")[0] == 0
    run = tmp_path / "run"
    # another suite version
    g2 = tmp_path / "g2"
    shutil.copytree(golden, g2)
    gj = json.loads((g2 / "golden.json").read_text())
    gj["suites"]["smoke"]["version"] = "0"
    (g2 / "golden.json").write_text(json.dumps(gj))
    code, _, err = cli("compare", run, "--golden", g2)
    assert code == 2 and "version" in err and err.count("\n") == 1
    # corrupt
    g3 = tmp_path / "g3"
    shutil.copytree(golden, g3)
    (g3 / "golden.json").write_text('{"golden_format": 1, "suites": ')
    code, _, err = cli("compare", run, "--golden", g3)
    assert code == 2 and "corrupt" in err
    # missing margins
    g4 = tmp_path / "g4"
    shutil.copytree(golden, g4)
    gj = json.loads((g4 / "golden.json").read_text())
    gj["margins"] = None
    (g4 / "golden.json").write_text(json.dumps(gj))
    code, _, err = cli("compare", run, "--golden", g4)
    assert code == 2 and "no margins" in err
    # no overlapping sample ids
    g5 = tmp_path / "g5"
    shutil.copytree(golden, g5)
    lines = [json.loads(l) for l in (g5 / "samples.jsonl").read_text().splitlines()]
    (g5 / "samples.jsonl").write_text("".join(json.dumps({**o, "sample_id": "other-" + o["sample_id"]}) + "\n" for o in lines))
    # a consistent golden of other samples (its inputs renamed too, so no recorded dataset hash to match)
    inputs = [json.loads(l) for l in (g5 / "inputs.jsonl").read_text().splitlines()]
    (g5 / "inputs.jsonl").write_text("".join(json.dumps({**x, "id": "other-" + x["id"]}) + "\n" for x in inputs))
    gj = json.loads((g5 / "golden.json").read_text())
    for info in gj["suites"].values():
        info.pop("dataset_sha256", None)
    (g5 / "golden.json").write_text(json.dumps(gj))
    code, _, err = cli("compare", run, "--golden", g5)
    assert code == 2 and "share no sample ids" in err
    assert not (run / "comparison.json").exists()
    # bless refuses to overwrite
    code, _, err = cli("bless", run, "--to", golden)
    assert code == 2 and "already holds a golden" in err


def test_compare_is_deterministic(golden, tmp_path, cli):
    with TestServer(Script(requantized)) as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / "run")[0] == 0
    assert cli("compare", tmp_path / "run", "--golden", golden, "--out", tmp_path / "a.json")[0] == 11
    assert cli("compare", tmp_path / "run", "--golden", golden, "--out", tmp_path / "b.json")[0] == 11
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_probes_catch_ignored_sampling_params(tmp_path, cli):
    """drop_sampling_params changes no envelope and no prompt token; the determinism probe catches it."""
    from verifier.testbed.proxy import Proxy

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        for name in ("ref", "r2", "r3"):
            assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / name, "--probes")[0] == 0
        probes = json.loads((tmp_path / "ref" / "probes.json").read_text())
        # The scripted server honours every option a probe sends (tests/test_probes_catalogue.py), on the run's one surface.
        assert all(p["passed"] for p in probes.values()) and all(k.endswith("@chat") for k in probes), probes
        g = tmp_path / "golden"
        assert cli("bless", tmp_path / "ref", "--to", g)[0] == 0
        assert cli("calibrate", g, "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
        assert json.loads((g / "golden.json").read_text())["probes"] == probes
        with Proxy(srv.url, ["drop_sampling_params"]) as px:
            code, doc, out = gate(cli, g, None, tmp_path / "c", "--base-url", px.url)
    assert code == 10, out
    ev = {e["signal"]: e for e in doc["frontend"]["evidence"] if e["signal"].startswith("probe:")}
    assert ev["probe:temperature_0_deterministic"]["verdict"] == "fail"
    # The fault strips the invalid value too, so the refusal probe fails as well: both are real symptoms.
    assert ev["probe:rejects_negative_temperature"]["verdict"] == "fail"
    assert ev["probe:max_tokens_honoured"]["verdict"] == "pass"


def test_sequential_stops_early_on_a_large_regression(golden, tmp_path, cli):
    code, doc, out = gate(cli, golden, answer_in_reasoning, tmp_path / "c", "--sequential", "--looks", "4")
    assert code == 10, out
    seq = doc["sequential"]
    assert seq["total_samples"] == 20 and seq["used_samples"] == 5 and seq["saved_samples"] == 15
    assert seq["looks"][0]["status"] == "frontend_regression"
    sent = {json.loads(l)["sample_id"] for l in (tmp_path / "c" / "responses.jsonl").read_text().splitlines()}
    assert len(sent) == 5
    # compared again (its gate record says sequential): the decided regression, not `incomplete` for the 15 not sent
    code, out, err = cli("compare", tmp_path / "c", "--golden", golden, "--out", tmp_path / "again.json")
    assert code == 10 and json.loads((tmp_path / "again.json").read_text())["status"] == "frontend_regression", out + err


def test_sequential_runs_everything_when_nothing_regresses(golden, tmp_path, cli, monkeypatch):
    from verifier.execution import scoring

    journals = []  # the journal is never scored again at a look: the looks read the live scorer's verdicts
    real = scoring.score_journal
    monkeypatch.setattr(scoring, "score_journal", lambda *a, **k: journals.append(a) or real(*a, **k))
    code, doc, out = gate(cli, golden, reference, tmp_path / "c", "--sequential", "--looks", "4")
    assert code == 0, out
    assert doc["sequential"]["used_samples"] == 20 and len(doc["sequential"]["looks"]) == 4
    assert [look["status"] for look in doc["sequential"]["looks"]] == ["pass"] * 4
    assert journals == []


def test_dual_path_separates_chat_frontend_from_the_model(tmp_path, cli):
    """Chat path broken (answer stranded in reasoning), raw completions of the rendered template fine."""
    from verifier.testbed.proxy import Proxy

    dual = list(RUN)
    dual[dual.index("chat,chat-stream")] = "chat,completions"
    with TestServer(Script(arithmetic)) as srv:
        for name in ("ref", "r2", "r3"):
            assert cli("run", *dual, "--base-url", srv.url, "--out", tmp_path / name)[0] == 0
        recs = [json.loads(l) for l in (tmp_path / "ref" / "responses.jsonl").read_text().splitlines()]
        comp = [r for r in recs if r["mode"] == "completions"]
        assert len(comp) == 20 and comp[0]["request"]["prompt"].endswith("<|im_start|>assistant\n")
        assert "messages" not in comp[0]["request"] and "logprobs" not in comp[0]["request"]
        assert json.loads((tmp_path / "ref" / "summary.json").read_text())["suites"]["smoke"]["outcomes"] == {"content": 40}
        g = tmp_path / "golden"
        assert cli("bless", tmp_path / "ref", "--to", g)[0] == 0
        assert cli("calibrate", g, "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
        with Proxy(srv.url, ["answer_in_reasoning"]) as px:  # faults touch chat completions only
            code, doc, out = gate(cli, g, None, tmp_path / "c", "--base-url", px.url)
    assert code == 10, out
    sig = doc["suites"]["smoke"]["signals"]["dual_path_mismatch"]
    assert sig["verdict"] == "fail" and sig["count"] == 20


def test_completions_mode_without_a_template_is_a_usage_error(tmp_path, cli):
    with TestServer(Script(arithmetic)) as srv:
        bad = tmp_path / "t.jinja"
        bad.write_text("{{ raise_exception('no') }}")
        code, _, err = cli("run", "--suite", "smoke", "--base-url", srv.url, "--model", "m", "--quiet",
                           "--mode", "completions", "--chat-template", bad, "--out", tmp_path / "r")
    assert code == 2 and "chat template failed to render" in err
    assert not (tmp_path / "r").exists()


def test_goldens_keep_no_machine_paths():
    from verifier.golden.store import portable

    info = {"props": {"model_path": "/srv/models/qwen.gguf", "chat_template": "{{ a / b }}"}, "models": {"data": [{"id": "/m/x.gguf"}]}}
    assert portable(info) == {"props": {"model_path": "qwen.gguf", "chat_template": "{{ a / b }}"}, "models": {"data": [{"id": "x.gguf"}]}}
    from pathlib import Path

    for g in Path(__file__).resolve().parent.parent.joinpath("goldens").glob("*/golden.json"):
        text = g.read_text()
        assert '"/work/' not in text and '"/root/' not in text and '"/home/' not in text and '"/tmp/' not in text, g


def test_a_suite_the_reference_refuses_is_not_inconclusive(tmp_path, cli):
    """Both sides reject the feature (llama-server and images): nothing regressed, so no exit 20."""
    refuse = lambda req: Reply(status=400, body='{"error": {"message": "unsupported"}}')  # noqa: E731
    with TestServer(Script(refuse)) as srv:
        for name in ("ref", "r2", "r3"):
            assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / name)[0] == 0
        g = tmp_path / "golden"
        assert cli("bless", tmp_path / "ref", "--to", g)[0] == 0
        assert cli("calibrate", g, "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
    code, doc, out = gate(cli, g, refuse, tmp_path / "c")
    assert code == 0, out
    assert doc["suites"]["smoke"]["signals"]["new_unsupported"]["count"] == 0
    code, doc, out = gate(cli, g, reference, tmp_path / "d")  # now it answers: no regression either
    assert doc["frontend"]["verdict"] == "pass", out


def test_limit_gates_the_first_samples_the_reference_sent_and_still_catches_a_fault(golden, tmp_path, cli):
    """`gate --limit N`: a quick PR gate on the golden's first N samples (inputs.jsonl order), every mode of each."""
    first = [json.loads(l)["id"] for l in (golden / "inputs.jsonl").read_text().splitlines()][:3]
    code, doc, out = gate(cli, golden, reference, tmp_path / "c", "--limit", "3")
    assert code == 0 and doc["status"] == "pass", out
    sent = [json.loads(l) for l in (tmp_path / "c" / "responses.jsonl").read_text().splitlines()]
    assert sorted({r["sample_id"] for r in sent}) == sorted(first) and len(sent) == 6
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["n"] == 3
    assert doc["limited"] == {"limit": 3, "golden_records": 20, "gated_records": 3, "probes_left_out": False}
    code, doc, out = gate(cli, golden, answer_in_reasoning, tmp_path / "f", "--limit", "3")
    assert code == 10 and doc["status"] == "frontend_regression", out


def test_limit_must_be_a_positive_whole_number(golden, capsys):
    from verifier.cli import main

    with pytest.raises(SystemExit) as e:
        main(["gate", "--golden", str(golden), "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--limit", "0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--limit" in err and len(err.strip().splitlines()) == 1, err


def test_no_probes_gates_the_samples_of_a_golden_with_probes(tmp_path, cli):
    """A golden with probes gated with --no-probes: no probe is sent, coverage is not incomplete for the missing
    probes, and comparison.json says they were left out."""
    from verifier.testbed.server import arithmetic

    with TestServer(Script(arithmetic)) as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--probes", "--out", tmp_path / "ref")[0] == 0
        assert cli("bless", tmp_path / "ref", "--to", tmp_path / "g")[0] == 0
        for i in (2, 3):
            assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / f"r{i}")[0] == 0
        assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "r2", tmp_path / "r3")[0] == 0
        code, stdout, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--out",
                                tmp_path / "c", "--no-probes")
    doc = json.loads((tmp_path / "c" / "comparison.json").read_text())
    assert code == 0 and doc["status"] == "pass", stdout + err
    assert not (tmp_path / "c" / "probes.json").exists() and doc["limited"]["probes_left_out"] is True
    assert "its probes left out" in stdout
