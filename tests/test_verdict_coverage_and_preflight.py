"""A verdict you can trust outside the lab (issue #10): coverage, preflight, bless refusals, reasons, stable names."""

import json

from verifier.golden.model import GoldenHeader
import re
import xml.etree.ElementTree as ET

from conftest import SMOKE_RUN, reference_reply
from verifier.testbed.server import Reply, Script, TestServer, prompt_tokens


def comparison(path):
    return json.loads((path / "comparison.json").read_text())


# ----------------------------------------------------------------------------- coverage


def test_one_shard_of_two_is_incomplete_and_names_the_missing_samples(calibrated_golden, tmp_path, cli):
    golden = calibrated_golden["golden"]
    with TestServer(Script(reference_reply)) as srv:
        assert cli("run", *SMOKE_RUN, "--base-url", srv.url, "--shard", "1/2", "--out", tmp_path / "s1")[0] == 0
    # merge refuses the incomplete set ...
    code, _, err = cli("merge", tmp_path / "s1", "--out", tmp_path / "m")
    assert code == 2 and "missing 2/2" in err and err.count("\n") == 1
    assert not (tmp_path / "m").exists()
    # ... unless asked, and records the set; compare still reports the gap
    code, out, err = cli("merge", tmp_path / "s1", "--out", tmp_path / "m", "--allow-partial", "--quiet")
    assert code == 0 and "missing 2/2" in out
    assert json.loads((tmp_path / "m" / "run.json").read_text())["shard_set"] == {
        "inputs": ["1/2"], "n": 2, "missing": ["2/2"], "complete": False}
    for run in (tmp_path / "s1", tmp_path / "m"):
        code, out, _ = cli("compare", run, "--golden", golden)
        doc = comparison(run)
        assert code == 30 and doc["status"] == "incomplete", out
        cov = doc["coverage"]
        assert cov["missing_sample_count"] == 10 and cov["missing"] == 20 and cov["expected"] == 40
        assert {m["sample_id"] for m in cov["missing_samples"]} == {f"add-{i:02d}" for i in range(1, 20, 2)}
        assert "missing coverage 20/40" in doc["reason"] and "smoke/add-01" in out and "smoke/add-01" in doc["reason"]


def test_chat_only_run_against_chat_and_stream_golden_is_incomplete(calibrated_golden, tmp_path, cli):
    run = list(SMOKE_RUN)
    run[run.index("chat,chat-stream")] = "chat"
    with TestServer(Script(reference_reply)) as srv:
        assert cli("run", *run, "--base-url", srv.url, "--out", tmp_path / "r")[0] == 0
    code, out, _ = cli("compare", tmp_path / "r", "--golden", calibrated_golden["golden"])
    doc = comparison(tmp_path / "r")
    assert code == 30 and doc["coverage"]["missing_modes"] == ["chat-stream"], out
    assert "chat-stream" in doc["reason"]


def test_a_subset_only_when_asked_and_reported_as_such(calibrated_golden, tmp_path, cli):
    with TestServer(Script(reference_reply)) as srv:
        assert cli("run", *SMOKE_RUN, "--base-url", srv.url, "--limit", "12", "--out", tmp_path / "r")[0] == 0
    assert cli("compare", tmp_path / "r", "--golden", calibrated_golden["golden"])[0] == 30
    code, out, _ = cli("compare", tmp_path / "r", "--golden", calibrated_golden["golden"], "--allow-subset")
    doc = comparison(tmp_path / "r")
    assert code == 0, out
    assert doc["coverage"]["subset"] is True and doc["coverage"]["subset_skipped_samples"] == 8
    assert any("subset" in r for r in doc["reasons"]) and "subset" in out


# ----------------------------------------------------------------------------- preflight


def test_base_url_without_v1_exits_2_before_any_sample_is_sent(calibrated_golden, tmp_path, cli):
    with TestServer(Script(reference_reply)) as srv:
        bare = srv.url[: -len("/v1")]
        code, _, err = cli("run", *SMOKE_RUN, "--base-url", bare, "--out", tmp_path / "r")
        assert code == 2 and err.count("\n") == 1, err
        assert "HTTP 404" in err and f"{bare}/chat/completions" in err and "does the base URL end in /v1?" in err
        code, _, err = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", bare, "--model", "m",
                           "--out", tmp_path / "g", "--quiet")
        assert code == 2 and "does the base URL end in /v1?" in err
        assert srv.script.requests == [] and srv.script.preflight == []
    assert not (tmp_path / "r").exists() and not (tmp_path / "g").exists()


def test_unknown_model_exits_2_naming_the_served_ones(tmp_path, cli):
    with TestServer(Script(reference_reply, models=("qwen", "llama"))) as srv:
        code, _, err = cli("run", *SMOKE_RUN, "--base-url", srv.url, "--out", tmp_path / "r")
        assert code == 2 and "model 'm' is not in GET" in err and "/v1/models: qwen, llama" in err and err.count("\n") == 1
        assert srv.script.requests == []
        # the served name passes the preflight, which never reaches the script's log
        args = list(SMOKE_RUN)
        args[args.index("m")] = "qwen"
        assert cli("run", *args, "--base-url", srv.url, "--out", tmp_path / "ok")[0] == 0
        assert len(srv.script.requests) == 40 and len(srv.script.preflight) == 2


def test_an_all_404_run_cannot_be_blessed(tmp_path, cli):
    with TestServer(Script(lambda req: Reply(status=404))) as srv:
        assert cli("run", *SMOKE_RUN, "--base-url", srv.url, "--out", tmp_path / "r")[0] == 0
    code, _, err = cli("bless", tmp_path / "r", "--to", tmp_path / "g")
    assert code == 2 and "40/40 records" in err and not (tmp_path / "g").exists()
    assert cli("bless", tmp_path / "r", "--to", tmp_path / "g", "--force")[0] == 0


def test_probes_against_a_golden_without_probes_is_a_usage_error(calibrated_golden, tmp_path, cli):
    with TestServer(Script(reference_reply)) as srv:
        code, _, err = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m",
                           "--out", tmp_path / "g", "--quiet", "--probes")
        assert code == 2 and "no probe results" in err
        assert srv.script.requests == []


# ----------------------------------------------------------------------------- inconclusive says why


def _answer(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return int(m.group(1)) + int(m.group(2))


def test_three_inconclusive_causes_give_three_messages(calibrated_golden, tmp_path, cli):
    golden = calibrated_golden["golden"]
    half_wrong = lambda req: Reply(content=str(_answer(req) + (1 if _answer(req) % 2 else 0)))  # noqa: E731
    drifted = lambda req: Reply(content=str(_answer(req)), logprob_shift=0.2)  # noqa: E731
    no_lp = [a for a in SMOKE_RUN if a not in ("--logprobs", "1")]
    msgs = {}
    with TestServer(Script(half_wrong)) as srv:
        assert cli("run", *no_lp, "--base-url", srv.url, "--out", tmp_path / "a")[0] == 0
    with TestServer(Script(drifted)) as srv:
        assert cli("run", *SMOKE_RUN, "--base-url", srv.url, "--out", tmp_path / "b")[0] == 0
    # A significant drop that nothing attributes is not "inconclusive": it fails as regression_unattributed (13),
    # and the advice to add logprobs comes only because this candidate returned none.
    for name, want in (("a", 13), ("b", 20)):
        code, out, _ = cli("compare", tmp_path / name, "--golden", golden, "--allow-inconclusive")
        assert code == (want if want == 13 else 0), out
        msgs[name] = comparison(tmp_path / name)["reason"]
    assert "the candidate returned no logprobs on 20 samples: rerun with `verifier gate --logprobs 5`" in msgs["a"]
    assert re.search(r"drift 0\.2 above floor 0\.01\d* but no quality change", msgs["b"]), msgs["b"]
    # a wide interval: samples needed from a power calculation
    from verifier.attribution import compare

    g = json.loads((golden / "golden.json").read_text())
    gobs = [json.loads(x) for x in (golden / "samples.jsonl").read_text().splitlines()]
    cobs = [{**o, "score": 0.0, "metrics": {"accuracy": 0.0}, "answer": "x"} if o["sample_id"] == "add-03" else o for o in gobs]
    from verifier.types import Observation

    doc = compare.compare(GoldenHeader.from_json({**g, "margins": {**g["margins"], "smoke/accuracy": {"value": 0.02}}}),
                          [Observation.from_dict(o) for o in gobs], [Observation.from_dict(o) for o in cobs]).to_dict()
    assert doc["status"] == "inconclusive"
    assert re.search(r"n=20 too small for margin 0\.02 .*about \d+ samples needed", doc["reason"]), doc["reason"]
    assert len({msgs["a"], msgs["b"], doc["reason"]}) == 3


# ----------------------------------------------------------------------------- attribution


def test_wrong_template_that_makes_the_model_repeat_is_frontend_only(calibrated_golden, tmp_path, cli):
    """Template change: every prompt moves, and on one sample the model loops. Not the weights."""
    def wrong_template(req):
        a = _answer(req)
        text = str(a) if a != 7 else "7 " + "foo " * 40
        pt = prompt_tokens(req) + 5
        return Reply(content=text, usage={"prompt_tokens": pt, "completion_tokens": 3, "total_tokens": pt + 3})

    with TestServer(Script(wrong_template)) as srv:
        code, out, _ = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m",
                           "--out", tmp_path / "c", "--quiet")
    doc = comparison(tmp_path / "c")
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert doc["quantization"]["verdict"] != "fail"
    assert doc["suites"]["smoke"]["signals"]["repetition"]["n"] == 0  # every sample was touched by the frontend
    assert doc["diagnosis"][0]["component"] == "chat template & tokenization"


def test_one_repetition_in_twenty_is_not_a_numerics_failure():
    from verifier.attribution.numerics import paired_event_verdict

    assert paired_event_verdict(1, 0, 22, 0.0).verdict == "pass"
    assert paired_event_verdict(8, 0, 22, 0.0).verdict == "fail"
    assert paired_event_verdict(3, 2, 22, 0.0).verdict != "fail"


# ----------------------------------------------------------------------------- flips and JUnit names


def test_streamed_only_answer_change_is_a_flip_per_mode(calibrated_golden, tmp_path, cli):
    def stream_doubles(req):
        a = str(_answer(req))
        return Reply(content=a + a if req.get("stream") else a)

    with TestServer(Script(stream_doubles)) as srv:
        code, out, _ = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m",
                           "--out", tmp_path / "c", "--quiet")
    s = comparison(tmp_path / "c")["suites"]["smoke"]
    assert len(s["flips_by_mode"]["chat-stream"]["regressed"]) == 20 and "chat" not in s["flips_by_mode"], out
    md = (tmp_path / "c" / "summary.md").read_text()
    assert "chat-stream: 20 regressed" in md


def _junit_names(path):
    return [(c.get("classname"), c.get("name")) for c in ET.parse(path).getroot().iter("testcase")]


def test_junit_names_are_identical_across_a_pass_and_a_fail(calibrated_golden, tmp_path, cli):
    answer_in_reasoning = lambda req: Reply(content="", reasoning_content=f"The sum is {_answer(req)}")  # noqa: E731
    for name, responder, want in (("pass", reference_reply, 0), ("fail", answer_in_reasoning, 10)):
        with TestServer(Script(responder)) as srv:
            code, out, _ = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m",
                               "--out", tmp_path / name, "--quiet")
        assert code == want, out
    a, b = _junit_names(tmp_path / "pass" / "junit.xml"), _junit_names(tmp_path / "fail" / "junit.xml")
    assert a == b and ("verifier.quantization", "smoke: quality/accuracy") in a and ("verifier.quantization", "smoke: logprob_drift") in a
    root = ET.parse(tmp_path / "fail" / "junit.xml").getroot()
    first = next(root.iter("testcase"))
    assert first.get("name") == "diagnosis" and first.find("failure").get("message").startswith("diagnosis: reasoning parser")


# ----------------------------------------------------------------------------- detokenization and preflight hints


def test_logprob_tokens_must_spell_the_content():
    from verifier.judge.contract import detokenize_mismatch
    from verifier.types import Parsed

    def parsed(content, toks, **kw):
        return Parsed(content=content, reasoning=None, tool_calls=None, finish_reason="stop", usage={},
                      logprobs=[{"token": t, "logprob": -0.1} for t in toks], **kw)

    assert detokenize_mismatch(parsed("The answer is 7", ["The", " answer", " is", " 7", ""])) is None
    assert detokenize_mismatch(parsed("7", ["<think>", "hm", "</think>", "7"])) is None  # reasoning tokens first
    assert detokenize_mismatch(parsed("7 ", ["7"])) is None
    assert detokenize_mismatch(parsed("é", ["\ufffd", "\ufffd"])) is None  # byte tokens: not judged
    assert "at char 5" in detokenize_mismatch(parsed("The aanswer", ["The", " answer"]))
    assert detokenize_mismatch(parsed("77", ["7"])) is not None


def test_stream_only_detokenizer_fault_is_stream_assembly_non_stream_is_tokenization():
    from verifier.attribution.diagnosis import diagnose
    from verifier.attribution.document import Comparison, Drift, Side, SignalResult, SuiteResult

    def doc(modes):
        fired = SignalResult(rate=1.0, ci=[0.44, 1.0], count=3, n=3, margin=0.0, verdict="fail")
        drift = Drift(tokens=0, mean_abs_delta=None, first_divergence_median=None, samples=0, logprobs=None,
                      parted_at_token_0=None, per_sample=None, margin=0.01, state="unavailable")
        block = SuiteResult(paired=3, golden_only=0, candidate_only=0, metrics={}, signals={"new_findings": fired},
                            drift=drift, divergence=None, flips={}, findings={}, flips_by_mode={},
                            new_finding_detail={"detokenize_mismatch": {"samples": ["a", "b", "c"], "modes": modes}},
                            signal_modes={}, tool_trigger=None, answer_agreement=None)
        return Comparison(status="frontend_regression", exit_code=10, meaning="", infra={}, frontend=Side("fail", ()),
                          quantization=Side("pass", ()), suites={"s": block}, coverage={})

    assert diagnose(doc(["chat-stream"]))[0].component == "stream assembly"
    assert diagnose(doc(["chat", "chat-stream"]))[0].component == "tokenization"


def test_preflight_hints():
    from verifier.wire.preflight import hint, ping_body

    assert "does the base URL end in /v1?" in hint(404, "m", [], "", None)
    assert hint(404, "m", ["a", "b"], "", None) == "model 'm' not in /v1/models: a, b"
    assert hint(400, "m", ["a"], '{"error": {"message": "model m does not exist"}}', None) == "model 'm' not in /v1/models: a"
    # the flag is named, never the value given to it (it may be a key pasted in its place)
    assert "--api-key-env" in hint(401, "m", [], "", "KEY_ENV") and "KEY_ENV" not in hint(401, "m", [], "", "KEY_ENV")
    assert "OPENAI_API_KEY" in hint(403, "m", [], "", None)
    assert hint(500, "m", [], "", None) is None and hint(400, "m", [], "bad temperature", None) is None
    assert ping_body("chat-stream", "m")["stream"] is True and "prompt" in ping_body("completions", "m")


def test_infra_the_golden_shared_is_reported_not_counted(tmp_path, cli):
    """A sample the reference itself always fails (a parser answering that output with a 500) is no evidence on
    either side: a candidate failing it too is not incomplete; failing another sample still is."""
    import re as _re

    def server(broken: str):
        def reply(req):
            a, b = map(int, _re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"]).groups())
            if f"{a} + {b}" == broken:
                return Reply(status=500, content='{"error": {"message": "output does not match the expected format"}}')
            return Reply(content=str(a + b))
        return reply

    run = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat", "--max-retries", "0"]
    from suites import BUILTIN as SUITES

    def question(i: int) -> str:  # "A + B" of the smoke suite's i-th sample
        return _re.search(r"What is (-?\d+ \+ -?\d+)", SUITES["smoke"].load(None, True)[i].messages[-1]["content"]).group(1)

    ref = server(question(0))
    with TestServer(Script(ref)) as srv:
        for name in ("a", "b", "c"):
            assert cli("run", *run, "--base-url", srv.url, "--out", tmp_path / name)[0] == 0
    assert cli("bless", tmp_path / "a", "--to", tmp_path / "g", "--force")[0] == 0
    assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "b", tmp_path / "c")[0] == 0
    with TestServer(Script(ref)) as srv:
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "same", "--max-retries", "0")
    doc = json.loads((tmp_path / "same" / "comparison.json").read_text())
    assert code == 0 and doc["infra"]["count"] == 0 and doc["infra"]["reference_also_failed"] == 1, out + err
    assert "1 more where the golden failed too" in out + err
    with TestServer(Script(server(question(1)))) as srv:
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "other", "--max-retries", "0")
    doc = json.loads((tmp_path / "other" / "comparison.json").read_text())
    assert code == 30 and doc["status"] == "incomplete" and doc["infra"]["count"] == 1, out + err


def test_a_sample_the_reference_failed_in_one_mode_is_no_evidence_in_another(tmp_path, cli):
    """The modes of a sample are one prompt. A reference whose server failed its chat record but parsed its stream
    sits on an output that server cannot always serve: a rerun failing the stream instead is reported, not counted
    (measured on llama-server, 2 slots); an error on a sample the reference answered every time still counts."""
    import re as _re
    from suites import BUILTIN as SUITES

    first = _re.search(r"What is (-?\d+ \+ -?\d+)", SUITES["smoke"].load(None, True)[0].messages[-1]["content"]).group(1)
    second = _re.search(r"What is (-?\d+ \+ -?\d+)", SUITES["smoke"].load(None, True)[1].messages[-1]["content"]).group(1)

    def server(broken: str, streamed: bool):
        def reply(req):
            a, b = map(int, _re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"]).groups())
            if f"{a} + {b}" == broken and bool(req.get("stream")) == streamed:
                return Reply(status=500, content='{"error": {"message": "output does not match the expected format"}}')
            return Reply(content=str(a + b))
        return reply

    run = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--max-retries", "0"]
    ref = server(first, streamed=False)
    with TestServer(Script(ref)) as srv:
        for name in ("a", "b", "c"):
            assert cli("run", *run, "--base-url", srv.url, "--out", tmp_path / name)[0] == 0
    assert cli("bless", tmp_path / "a", "--to", tmp_path / "g", "--force")[0] == 0
    assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "b", tmp_path / "c")[0] == 0
    gate = ["--golden", tmp_path / "g", "--model", "m", "--max-retries", "0", "--quiet"]
    with TestServer(Script(server(first, streamed=True))) as srv:
        code, out, err = cli("gate", *gate, "--base-url", srv.url, "--out", tmp_path / "stream")
    doc = json.loads((tmp_path / "stream" / "comparison.json").read_text())
    assert code == 0 and doc["infra"] == {**doc["infra"], "count": 0, "reference_also_failed": 1}, out + err
    with TestServer(Script(server(second, streamed=True))) as srv:
        code, out, err = cli("gate", *gate, "--base-url", srv.url, "--out", tmp_path / "other")
    doc = json.loads((tmp_path / "other" / "comparison.json").read_text())
    assert code == 30 and doc["infra"]["count"] == 1 and doc["infra"]["reference_also_failed"] == 0, out + err
