"""Issue 47: engine state named from the samples alone. A golden that sends every request once (one mode, one epoch)
and holds no state probe has no repeat to read engine state from, so a gate sends a few of the run's greedy requests
again itself, one at a time, after the run (execution/resend.py, resends.jsonl). "First right, later wrong" (the
state fault: later sends of a prompt answered otherwise) and "alone right, in the run wrong" (state shared across a
batch) are both read from the journals' send order, and engine state is named first; the clean server passes, and
the reference's own reruns, resends included, calibrate repeats_disagree's margin at 0."""

import json

import pytest

from conftest import zero_margins
from suites import gsm8k
from verifier.attribution import signals
from verifier.execution import resend
from verifier.testbed.mutation import choices_of
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, arithmetic, last_user_text
from verifier.types import Exchange, Observation

CONCURRENCY = 4
RUN = ["--suite", "gsm8k", "--smoke", "--model", "m", "--quiet", "--mode", "chat", "--logprobs", "2",
       "--max-retries", "0", "--concurrency", str(CONCURRENCY)]


def server():
    """gsm8k's smoke samples answered right in a sentence; anything else (a probe's sum) answered by arithmetic."""
    table = {last_user_text({"messages": s.messages}): s.target for s in gsm8k.SUITE.load(None, True)}

    def answer(req):
        target = table.get(last_user_text(req))
        return Reply(content=f"Working it out step by step, the final answer is {target}") if target else arithmetic(req)

    return TestServer(Script(answer, honour_sampling=True))


def lines(path):
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def text_of(rec):
    return json.loads(rec["body"])["choices"][0]["message"]["content"]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    """One mode, one epoch, logprobs, no probes: every request sent once, no state probe."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("resend")
    with server() as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp / "ref")]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "g")]) == 0
    zero_margins(tmp / "g")
    g = json.loads((tmp / "g" / "golden.json").read_text())
    assert not g.get("probes") and g["modes"] == ["chat"] and g["epochs"] == 1
    return tmp / "g"


def gate(cli, golden, url, out, *extra):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet", *extra)
    assert (out / "comparison.json").exists(), stdout + err
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def golden_texts(golden):
    return {r["sample_id"]: r["content"] for r in lines(golden / "samples.jsonl")}


def test_the_state_fault_without_a_state_probe_is_named_engine_state_from_the_resend(golden, tmp_path, cli):
    """Later sends of a prompt answered otherwise: the run's one send of each sample is right, the gate's resend of a
    few is not. Exit 10, engine state first, leading with repeats_disagree, on the resent samples."""
    with server() as srv, Proxy(srv.url, ["state_dependent_answers"]) as px:
        code, doc, out = gate(cli, golden, px.url, tmp_path / "c")
    assert px.mutations and code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "engine state" and first["findings"][0] == "repeats_disagree", doc["diagnosis"]
    header = json.loads((tmp_path / "c" / "run.json").read_text())
    assert header["resend_asked"] == {"samples": resend.DEFAULT_SAMPLES}
    assert header["resend"]["state"] == "done" and header["resend"]["requests"] == resend.DEFAULT_SAMPLES, header["resend"]
    run, again = lines(tmp_path / "c" / "responses.jsonl"), lines(tmp_path / "c" / "resends.jsonl")
    assert len(again) == resend.DEFAULT_SAMPLES
    # one send sequence: every resend after every record of the run; none of the run's first (cold) batch resent
    assert min(r["sent"] for r in again) > max(r["sent"] for r in run)
    first_sent = {r["sample_id"]: r["sent"] for r in run}
    assert all(first_sent[r["sample_id"]] >= CONCURRENCY for r in again)
    # "first right, later wrong", as the journals hold it
    right = golden_texts(golden)
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "repeats_disagree")
    assert ev["verdict"] == "fail" and sorted(ev["samples"]) == sorted(r["sample_id"] for r in again), ev
    assert f"{len(again)} sample(s) read through the gate's resend step" in ev["summary"], ev
    for r in again:
        assert text_of(next(x for x in run if x["sample_id"] == r["sample_id"])) == right[r["sample_id"]]
        assert text_of(r) != right[r["sample_id"]]


def test_state_shared_across_a_batch_without_a_state_probe_is_named_engine_state(golden, tmp_path, cli):
    """Right alone, wrong beside other prompts sharing the prefix: every concurrent record of the run parts from the
    golden's at unchanged logprobs (decoding_changed, API validation, alone); the resend, alone, is the golden's
    ("alone right, in the run wrong"), so engine state is named first and explains the changed decoding path."""
    with server() as srv, Proxy(srv.url, ["shared_prefix_batch_state"]) as px:
        code, doc, out = gate(cli, golden, px.url, tmp_path / "c")
    assert px.mutations and code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "engine state" and first["findings"] == ["repeats_disagree"], doc["diagnosis"]
    assert first["explains"] == ["API validation"], first
    comps = {d["component"]: d for d in doc["diagnosis"]}
    assert comps["API validation"]["findings"] == ["decoding_changed"]  # the symptom, still shown
    right = golden_texts(golden)
    run = {r["sample_id"]: r for r in lines(tmp_path / "c" / "responses.jsonl")}
    for r in lines(tmp_path / "c" / "resends.jsonl"):
        assert text_of(r) == right[r["sample_id"]] != text_of(run[r["sample_id"]])


def test_a_clean_rerun_passes_with_the_resends_measured(golden, tmp_path, cli):
    with server() as srv:
        code, doc, out = gate(cli, golden, srv.url, tmp_path / "c")
    assert code == 0 and doc["status"] == "pass", out
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "repeats_disagree")
    assert ev["verdict"] == "pass" and f"0/{resend.DEFAULT_SAMPLES} samples" in ev["summary"], ev  # measured, silent
    assert len(lines(tmp_path / "c" / "resends.jsonl")) == resend.DEFAULT_SAMPLES


def test_the_references_own_reruns_with_their_resends_calibrate_no_engine_state_event(golden, tmp_path, cli):
    """calibrate's reruns make the resend step too (a gate reads resends, so its margin must have seen them): on the
    fault-free server none fires, and the margin is 0."""
    import shutil

    g = tmp_path / "g"
    shutil.copytree(golden, g)
    with server() as srv:
        code, out, err = cli("calibrate", g, "--base-url", srv.url, "--model", "m", "-k", "2",
                             "--out-prefix", tmp_path / "rerun", "--quiet")
    assert code == 0, out + err
    for i in (1, 2):
        assert len(lines(tmp_path / f"rerun-{i}" / "resends.jsonl")) == resend.DEFAULT_SAMPLES
    margins = json.loads((g / "golden.json").read_text())["margins"]
    assert margins["gsm8k/signal:repeats_disagree"]["value"] == 0.0


def test_resend_off_sends_nothing_more_and_says_so_nowhere_it_did_not(golden, tmp_path, cli):
    """--resend 0: no resend step (no resends.jsonl, no resend_asked). With every request sent once, the state fault
    then never acts: nothing can read it, which is why the gate resends by default."""
    with server() as srv, Proxy(srv.url, ["state_dependent_answers"]) as px:
        code, doc, out = gate(cli, golden, px.url, tmp_path / "c", "--resend", "0")
    assert not px.mutations and code == 0, out
    header = json.loads((tmp_path / "c" / "run.json").read_text())
    assert "resend_asked" not in header and "resend" not in header
    assert not (tmp_path / "c" / "resends.jsonl").exists()


def test_an_interrupted_resend_step_is_completed_by_a_resume(golden, tmp_path, cli):
    """run.json's resend_asked: a resume of a gate killed during its resend step (two of four sent, no `resend` block)
    sends the other two, numbered after every send of both journals, and compares to the same verdict."""
    out = tmp_path / "c"
    with server() as srv, Proxy(srv.url, ["state_dependent_answers"]) as px:
        code, doc, _ = gate(cli, golden, px.url, out)
        assert code == 10
        kept = (out / "resends.jsonl").read_text().splitlines(keepends=True)[:2]
        (out / "resends.jsonl").write_text("".join(kept))
        header = json.loads((out / "run.json").read_text())
        del header["resend"]
        (out / "run.json").write_text(json.dumps(header))
        (out / "comparison.json").unlink()
        code, stdout, err = cli("run", "--resume", out, "--base-url", px.url, "--quiet")
        assert code == 0, stdout + err
    again = lines(out / "resends.jsonl")
    assert len(again) == resend.DEFAULT_SAMPLES and len({r["sample_id"] for r in again}) == resend.DEFAULT_SAMPLES
    sent = [r["sent"] for r in lines(out / "responses.jsonl") + again]
    assert len(set(sent)) == len(sent)
    assert json.loads((out / "run.json").read_text())["resend"]["requests"] == resend.DEFAULT_SAMPLES
    code, stdout, err = cli("compare", out, "--golden", golden)
    assert code == 10, stdout + err
    assert json.loads((out / "comparison.json").read_text())["diagnosis"][0]["component"] == "engine state"


def test_a_resend_record_of_a_sample_the_run_does_not_hold_is_refused(golden, tmp_path, cli):
    out = tmp_path / "c"
    with server() as srv:
        assert gate(cli, golden, srv.url, out)[0] == 0
    rec = lines(out / "resends.jsonl")[0]
    rec["sample_id"] = "not-a-sample"
    with open(out / "resends.jsonl", "a") as f:
        f.write(json.dumps(rec) + "\n")
    code, stdout, err = cli("compare", out, "--golden", golden, "--out", tmp_path / "x.json")
    assert code == 2 and "resends.jsonl" in err and "not-a-sample" in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "x.json").exists()


# ----------------------------------------------------------------------------- the choice of requests, pure

def ex(sid, sent, mode="chat", suite="s", epoch=0, temperature=0, error=None, status=200):
    return Exchange(suite, sid, epoch, mode, {"temperature": temperature}, status, "{}", error=error, sent=sent)


def test_the_resend_targets_are_bounded_greedy_answered_and_warm():
    modes = ["chat", "chat-stream", "completions"]
    records = [ex("a", 0), ex("b", 1), ex("c", 5, "chat-stream"), ex("c", 6), ex("d", 7, "completions"),
               ex("e", 8, temperature=0.7), ex("f", 9, epoch=1), ex("g", 10, error="timeout"), ex("h", 11, status=500),
               ex("i", 12), ex("j", 13), ex("k", 14), ex("x", 15, suite="conv")]
    chosen = resend.targets(records, 2, 4, modes, skip_suites={"conv"})
    # a, b: the cold first batch; d: the dual path; e: sampled; f: another epoch; g, h: no answer; conv: conversation
    assert [(sid, mode) for _, sid, _, mode in chosen] == [("c", "chat"), ("i", "chat")]  # two per suite, chat before its stream
    assert resend.requests_of(records, chosen) == {("s", "c", 0, "chat"): {"temperature": 0}, ("s", "i", 0, "chat"): {"temperature": 0}}
    assert len(resend.targets(records, 64, 0, modes)) == 7  # a, b, c, i, j, k, and conv's x, when not skipped


# ----------------------------------------------------------------------------- the rule, pure

SURE, TIE = -0.01, -0.69
ANSWER = [("The", SURE), (" answer", SURE), (" is", SURE), (" 18", SURE)]
WRONG = [("The", SURE), (" answer", SURE), (" is", SURE), (" 29", SURE)]
FLIPPED = [("The", SURE), (" answer", SURE), (" is", TIE), (" 19", TIE)]
ANSWER_TIE = [("The", SURE), (" answer", SURE), (" is", SURE), (" 18", TIE)]


def rec(tokens, sent, resent=None):
    return Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="content", prompt_tokens=10,
                       content="".join(t for t, _ in tokens), logprobs=[list(x) for x in tokens], sent=sent, resent=resent)


def test_a_resend_alone_that_is_the_golden_reads_the_runs_parted_record_as_engine_state():
    golden = [rec(ANSWER, 0)]
    # "first right, later wrong": the resend parts from the run's record, which was the golden's
    assert signals.repeats_disagree(golden, [rec(ANSWER, 3), rec(WRONG, 30, resent=True)]) is True
    # "alone right, in the run wrong": the resend alone is the golden's, the run's record (sent before) parted
    assert signals.repeats_disagree(golden, [rec(WRONG, 3), rec(ANSWER, 30, resent=True)]) is True
    # without the resend, a wrong record sent before a right one is no state (a cold first request)
    assert signals.repeats_disagree(golden, [rec(WRONG, 3), rec(ANSWER, 30)]) is False
    # batch shape flips near-ties only: a near tie taken the other way alone or in the run is no state event
    tie = [rec(ANSWER_TIE, 0)]
    assert signals.repeats_disagree(tie, [rec(FLIPPED, 3), rec(ANSWER_TIE, 30, resent=True)]) is False
    assert signals.repeats_disagree(tie, [rec(ANSWER_TIE, 3), rec(FLIPPED, 30, resent=True)]) is False
    # both parted from the golden alike: the weights' doing, not measured as state
    assert signals.repeats_disagree(golden, [rec(WRONG, 3), rec(WRONG, 30, resent=True)]) is False


def test_only_the_signals_declared_to_read_resends_see_them():
    golden = [rec(ANSWER, 0)]
    resent = [rec(WRONG, 30, resent=True)]
    results = signals.evaluate(golden, [rec(ANSWER, 3)], resent)
    assert results["repeats_disagree"] is True
    assert [s.name for s in signals.SIGNALS if s.reads_resends] == ["repeats_disagree"]
    # every other signal measures the run's records alone: as if there were no resend
    alone = signals.evaluate(golden, [rec(ANSWER, 3)])
    assert {k: v for k, v in results.items() if k != "repeats_disagree"} == {k: v for k, v in alone.items() if k != "repeats_disagree"}
    assert "resent" not in rec(ANSWER, 3).to_dict() and Observation.from_dict(rec(ANSWER, 3).to_dict()).resent is None


# ----------------------------------------------------------------------------- with the probes, and an older golden's

@pytest.fixture(scope="module")
def probed_goldens(tmp_path_factory):
    """The same golden blessed with --probes (the state probes in it), and an older golden's probes: the same without
    the state probes (recorded before they existed), whose other probes still repeat prompts."""
    import shutil

    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("probed")
    with server() as srv:
        assert main(["run", *RUN, "--probes", "--base-url", srv.url, "--out", str(tmp / "ref")]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "with")]) == 0
    zero_margins(tmp / "with")
    shutil.copytree(tmp / "with", tmp / "older")
    doc = json.loads((tmp / "older" / "golden.json").read_text())
    assert any(k.startswith("state_") for k in doc["probes"])
    doc["probes"] = {k: v for k, v in doc["probes"].items() if not k.startswith("state_")}
    (tmp / "older" / "golden.json").write_text(json.dumps(doc))
    return tmp / "with", tmp / "older"


@pytest.mark.parametrize("which", ["with the state probes", "an older golden without them"])
def test_the_state_fault_is_named_engine_state_first_with_or_without_a_state_probe(probed_goldens, tmp_path, cli, which):
    """With the state probes the probe and the resends both say it; without them (an older golden), the probes that
    repeat a prompt fail under their own components (API validation: neutral values on repeats), and the resends
    still name engine state first, on the workload's samples."""
    golden = probed_goldens[0 if which.startswith("with") else 1]
    with server() as srv, Proxy(srv.url, ["state_dependent_answers"]) as px:
        code, doc, out = gate(cli, golden, px.url, tmp_path / "c")
    assert px.mutations and code == 10 and doc["status"] == "frontend_regression", out
    first = doc["diagnosis"][0]
    assert first["component"] == "engine state" and "repeats_disagree" in first["findings"], doc["diagnosis"]
    assert ("probe:state_repeat_after_shared_prefix" in first["findings"]) == which.startswith("with"), first


# ----------------------------------------------------------------------------- batching noise is no state event

NEAR_TIE = -0.69  # the answer's last token and its runner-up: probability about a half each


def near_tie_server():
    """gsm8k's smoke samples answered right, the answer's last token a near tie with the next number (as a small
    model's digit often is); every other token sure."""
    table = {last_user_text({"messages": s.messages}): s.target for s in gsm8k.SUITE.load(None, True)}

    def answer(req):
        target = table.get(last_user_text(req))
        if target is None:
            return arithmetic(req)
        toks = ["Working", " it", " out,", " the", " answer", " is", f" {target}"]
        entries = [{"token": t, "logprob": -0.01, "top_logprobs": [{"token": t, "logprob": -0.01}]} for t in toks[:-1]]
        runner_up = f" {int(target) + 1}"
        entries.append({"token": toks[-1], "logprob": NEAR_TIE, "top_logprobs": [
            {"token": toks[-1], "logprob": NEAR_TIE}, {"token": runner_up, "logprob": NEAR_TIE - 0.01}]})
        return Reply(content="".join(toks), logprob_entries=entries)

    return TestServer(Script(answer, honour_sampling=True))


def _flip_near_tie(d):
    """The decode under another batch shape: the near tie taken the other way (the runner-up, its value and the
    original's swapped, a hair apart), the text with it; sure tokens untouched."""
    pairs = []
    for c in choices_of(d):
        entries = ((c.get("logprobs") or {}).get("content")) or []
        msg = c.get("message") or {}
        for e in entries:
            alts = e.get("top_logprobs") or []
            if len(alts) >= 2 and abs(alts[0]["logprob"] - alts[1]["logprob"]) < 0.05:
                before = e["token"]
                e["token"], alts[0]["token"], alts[1]["token"] = alts[1]["token"], alts[1]["token"], before
                if isinstance(msg.get("content"), str):
                    msg["content"] = msg["content"][: len(msg["content"]) - len(before)] + e["token"]
                pairs.append((before, e["token"]))
    return pairs


def test_a_near_tie_flipped_in_the_concurrent_run_and_not_alone_is_no_engine_state_event(tmp_path, cli):
    """Batch shape flips near ties: the run's concurrent requests take the answer's near tie the other way, the resend
    alone does not. Alone right, in the run wrong, but at a token the model was not sure of: repeats_disagree does not
    fire and engine state is not named (whatever the other evidence says of the changed answers)."""
    from verifier.cli import main
    from verifier.testbed.mutation import Fault, pure_edit

    with near_tie_server() as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp_path / "ref")]) == 0
    assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
    zero_margins(tmp_path / "g")
    noise = Fault("batch_shape_near_tie", "the near tie taken the other way in a concurrent batch", "batch shape",
                  "nothing (no state event)", response=pure_edit(_flip_near_tie), with_shared_prefix=True)
    with near_tie_server() as srv, Proxy(srv.url, [(noise, 1.0)]) as px:
        code, doc, out = gate(cli, tmp_path / "g", px.url, tmp_path / "c")
    assert px.mutations, "the noise never acted"
    right = golden_texts(tmp_path / "g")
    run = {r["sample_id"]: r for r in lines(tmp_path / "c" / "responses.jsonl")}
    again = lines(tmp_path / "c" / "resends.jsonl")
    assert again and all(text_of(r) == right[r["sample_id"]] != text_of(run[r["sample_id"]]) for r in again)
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "repeats_disagree")
    assert ev["verdict"] == "pass" and ev["summary"].startswith("repeats_disagree: 0/"), ev
    assert "engine state" not in {d["component"] for d in doc["diagnosis"]}, doc["diagnosis"]


def test_a_sequential_gate_that_stopped_early_records_its_resend_step_skipped(golden, tmp_path, cli):
    """A sequential gate that stopped on a decided regression judged what it sent; the resend step is not made then,
    and run.json says why (a resume does not make it either: the block is there)."""
    with server() as srv, Proxy(srv.url, ["answer_in_reasoning"]) as px:
        code, doc, out = gate(cli, golden, px.url, tmp_path / "c", "--sequential", "--looks", "4")
    assert code == 10 and doc["sequential"]["saved_samples"] > 0, out
    block = json.loads((tmp_path / "c" / "run.json").read_text())["resend"]
    assert block["state"] == "skipped" and "stopped early" in block["reason"] and block["requests"] == 0, block
    assert not (tmp_path / "c" / "resends.jsonl").exists()
