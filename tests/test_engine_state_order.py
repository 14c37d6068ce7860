"""Issue 47: the journal's send order. Every exchange records when it was sent (Exchange.sent, one sequence across the
run's workers, batches and resumes), so "first right, later wrong" is read from the journal: repeats_disagree fires
where a record that went out after the golden's generation parted from it, not where a cold first request did. A
journal without the order still reads, unordered as before, and the evidence says so."""

import json

import pytest

from conftest import zero_margins
from suites import gsm8k
from verifier.attribution import signals
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.types import Exchange, Observation

RUN = ["--suite", "gsm8k", "--smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--epochs", "2",
       "--logprobs", "2", "--max-retries", "0", "--concurrency", "4"]


def server():
    table = {last_user_text({"messages": s.messages}): s.target for s in gsm8k.SUITE.load(None, True)}
    return TestServer(Script(lambda req: Reply(content=f"Working it out step by step, the final answer is {table.get(last_user_text(req), '0')}"),
                             honour_sampling=True))


def journal(run):
    return [json.loads(line) for line in (run / "responses.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("order")
    with server() as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp / "ref")]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "g")]) == 0
    zero_margins(tmp / "g")
    return tmp / "g"


def test_every_exchange_records_its_place_in_one_send_sequence_across_concurrency(golden, tmp_path, cli):
    with server() as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--out", tmp_path / "r")[0] == 0
    recs = journal(tmp_path / "r")
    assert sorted(r["sent"] for r in recs) == list(range(len(recs)))  # one number each, none shared by two workers
    # the golden's rows keep the order too (bless), and a row without it still loads (older goldens)
    rows = [json.loads(x) for x in (golden / "samples.jsonl").read_text().splitlines()]
    assert all(isinstance(r.get("sent"), int) for r in rows)
    assert Observation.from_dict({k: v for k, v in rows[0].items() if k != "sent"}).sent is None


def test_a_resume_numbers_its_sends_after_every_journaled_one(tmp_path, cli):
    out = tmp_path / "r"
    with server() as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--out", out)[0] == 0
        lines = (out / "responses.jsonl").read_text().splitlines(keepends=True)
        (out / "responses.jsonl").write_text("".join(lines[:5]))
        kept = max(json.loads(x)["sent"] for x in lines[:5])
        assert cli("run", "--resume", out, "--base-url", srv.url, "--quiet")[0] == 0
    recs = journal(out)
    assert len(recs) == len(lines) and len({r["sent"] for r in recs}) == len(recs)
    assert all(r["sent"] > kept for r in recs[5:]), [r["sent"] for r in recs]


def test_first_right_later_wrong_is_read_from_the_journal_and_an_old_journal_reads_unordered(golden, tmp_path, cli):
    """The state fault (the second and later sends of a prompt answered otherwise) through the proxy: engine state is
    named, on records sent after a right one. The same journal stripped of its send order (an older verifier's) still
    fails on engine state, and the evidence says the repeats were read without their order."""
    run = tmp_path / "g"
    with server() as srv, Proxy(srv.url, ["state_dependent_answers"]) as px:
        code, out, err = cli("gate", "--golden", golden, "--base-url", px.url, "--model", "m", "--out", run, "--quiet")
    assert px.mutations and code == 10, out + err
    doc = json.loads((run / "comparison.json").read_text())
    assert doc["diagnosis"][0]["component"] == "engine state", doc["diagnosis"]
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "repeats_disagree")
    assert ev["verdict"] == "fail" and "send order" not in ev["summary"], ev
    # where it fired, a record with the golden's text went out before one without it ("first right, later wrong")
    golden_text = {r["sample_id"]: r["content"] for r in map(json.loads, (golden / "samples.jsonl").read_text().splitlines())}
    for sid in ev["samples"]:
        recs = [r for r in journal(run) if r["sample_id"] == sid and r["mode"] == "chat"]
        right = [r["sent"] for r in recs if json.loads(r["body"])["choices"][0]["message"]["content"] == golden_text[sid]]
        wrong = [r["sent"] for r in recs if json.loads(r["body"])["choices"][0]["message"]["content"] != golden_text[sid]]
        assert right and wrong and min(right) < max(wrong), (sid, right, wrong)
    assert ev["samples"]

    old = tmp_path / "old"
    old.mkdir()
    for name in ("run.json", "samples.jsonl"):
        (old / name).write_bytes((run / name).read_bytes())
    (old / "responses.jsonl").write_text("".join(json.dumps({k: v for k, v in r.items() if k != "sent"}) + "\n" for r in journal(run)))
    code, out, err = cli("compare", old, "--golden", golden, "--out", tmp_path / "old.json")
    assert code == 10, out + err
    doc = json.loads((tmp_path / "old.json").read_text())
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "repeats_disagree")
    assert ev["verdict"] == "fail" and "without their send order" in ev["summary"], ev
    assert doc["diagnosis"][0]["component"] == "engine state"


# ----------------------------------------------------------------------------- the rule, pure

SURE = -0.01
ANSWER = [("The", SURE), (" answer", SURE), (" is", SURE), (" 18", SURE)]
WRONG = [("The", SURE), (" answer", SURE), (" is", SURE), (" 29", SURE)]


def rec(mode, tokens, sent, epoch=0):
    return Observation(suite="s", sample_id="a", epoch=epoch, mode=mode, outcome="content", prompt_tokens=10,
                       content="".join(t for t, _ in tokens), logprobs=[list(x) for x in tokens], sent=sent)


def test_repeats_disagree_wants_the_wrong_repeat_sent_after_a_right_one():
    golden = [rec("chat", ANSWER, 0), rec("chat-stream", ANSWER, 1)]
    assert signals.repeats_disagree(golden, [rec("chat", ANSWER, 3), rec("chat-stream", WRONG, 4)]) is True
    # a cold first request answered otherwise, the later ones right: not state the engine kept
    assert signals.repeats_disagree(golden, [rec("chat", WRONG, 3), rec("chat-stream", ANSWER, 4)]) is False
    assert signals.repeats_disagree(golden, [rec("chat", WRONG, 3), rec("chat-stream", ANSWER, 4),
                                             rec("chat", WRONG, 5, epoch=1)]) is True  # and wrong again after it
    # no order recorded (an older journal): any two repeats, as before
    assert signals.repeats_disagree(golden, [rec("chat", WRONG, None), rec("chat-stream", ANSWER, None)]) is True
    assert signals.send_order_unknown([rec("chat", WRONG, None), rec("chat-stream", ANSWER, 4)])
    assert not signals.send_order_unknown([rec("chat", WRONG, 3), rec("chat-stream", ANSWER, 4)])


def test_an_exchange_without_send_order_writes_the_historical_line():
    ex = Exchange("s", "a", 0, "chat", {}, 200, "{}")
    assert "sent" not in ex.to_json() and Exchange.from_json(ex.to_json()) == ex
    assert Exchange("s", "a", 0, "chat", {}, 200, "{}", sent=7).to_json()["sent"] == 7
    assert "sent" not in Observation(suite="s", sample_id="a", epoch=0, mode="chat", outcome="content").to_dict()


def test_cached_tokens_dropped_reads_presence_per_record_not_the_value():
    def o(mode="chat", cached=None, prompt=10, epoch=0):
        return Observation(suite="s", sample_id="a", epoch=epoch, mode=mode, outcome="content", prompt_tokens=prompt,
                           cached_tokens=cached)

    f = signals.cached_tokens_dropped
    assert f([o(cached=0)], [o(cached=None)]) is True  # the golden's engine counted (0 included), the candidate's did not
    assert f([o(cached=12)], [o(cached=0)]) is False  # a colder cache is not a dropped figure
    assert f([o(cached=None)], [o(cached=None)]) is None  # the golden's engine never reported it: nothing to hold to
    assert f([o(cached=5)], [o(cached=None, prompt=None)]) is None  # no usage at all: usage_missing's to say
    assert f([o(cached=5), o("chat-stream", cached=None)], [o(cached=5), o("chat-stream", cached=None)]) is False
    assert f([o(cached=5), o("chat-stream", cached=5)], [o(cached=5), o("chat-stream", cached=None)]) is True  # per record


# ----------------------------------------------------------------------------- the concurrent state probe

def test_the_concurrent_state_probe_sends_its_batch_at_once_and_the_fault_spares_a_request_alone():
    """state_repeat_under_concurrency on the test server: clean, it passes; behind the fault of state shared across a
    batch, the cold question (sent alone) is right and its warm resends, in flight with other prompts sharing the
    prefix, are not, so it fails naming the resends; the sequential state probe, which never batches, still passes."""
    import asyncio

    from verifier.execution.probes import PROBES, run_one
    from verifier.testbed.server import arithmetic
    from verifier.wire.endpoint import Endpoint, EndpointConfig

    async def probe(url, name):
        ep = Endpoint(EndpointConfig(base_url=url, model="m", max_retries=0, concurrency=8))
        try:
            return await run_one(ep, PROBES[name], "chat", "m", {})
        finally:
            await ep.aclose()

    with TestServer(Script(arithmetic, honour_sampling=True)) as srv:
        clean = asyncio.run(probe(srv.url, "state_repeat_under_concurrency"))
        assert clean["passed"] and "2 warm answers in the concurrent batch" in clean["detail"], clean
        with Proxy(srv.url, ["shared_prefix_batch_state"]) as px:
            bad = asyncio.run(probe(px.url, "state_repeat_under_concurrency"))
            sequential = asyncio.run(probe(px.url, "state_repeat_after_shared_prefix"))
    assert not bad["passed"] and "in the concurrent batch" in bad["detail"] and "'53'" in bad["detail"], bad
    assert sequential["passed"], sequential  # nothing in flight beside it: the batch fault never acts
    texts = [x["text"] for x in bad["exchanges"]]
    assert texts[0] == "42" and texts[2] == texts[4] == "53", texts  # cold right; the warm resends in the batch not
    mutated = sorted(m["request"] for m in px.mutations)
    assert len(mutated) == 4 and 1 not in mutated, mutated  # the batch of four, never the cold request alone


def test_cached_tokens_are_read_where_each_surface_reports_them_and_only_there():
    from verifier.execution.scoring import cached_tokens
    from verifier.surfaces.messages import messages_usage

    assert cached_tokens(messages_usage({"input_tokens": 1, "cache_read_input_tokens": 31, "output_tokens": 2})) == 31
    assert cached_tokens(messages_usage({"input_tokens": 32, "output_tokens": 2})) is None  # not reported: not 0
    assert cached_tokens({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": 0}}) == 0
    assert cached_tokens({"prompt_tokens": 9, "prompt_tokens_details": None}) is None
    assert cached_tokens({"input_tokens": 9, "input_tokens_details": {"cached_tokens": 4}}) == 4
    assert cached_tokens({"prompt_tokens": 9, "prompt_tokens_details": {"cached_tokens": True}}) is None


def test_a_batched_probe_is_judged_by_its_own_check_not_by_its_text_against_the_golden():
    """Measured on llama-server (2 slots): the concurrent state probe's check passed (cold and warm answers equal),
    but its batched greedy text was not the reference's (batch shape moves near-tie tokens on a healthy engine). That
    text is no evidence: a probe sent together is judged by its own check, while an unbatched probe's moved text is."""
    from verifier.execution import probe_results

    def result(text: str) -> dict:
        return {"state_probe@chat": {"passed": True, "detail": "cold and warm answers equal",
                                     "exchanges": [{"text": text, "prompt_tokens": 30, "findings": []}]}}

    golden, candidate = result("17 + 25 = 42"), result("17 + 25 = 32")
    batched = probe_results.judge(candidate, golden, batched=frozenset({"state_probe"}))
    alone = probe_results.judge(candidate, golden)
    assert [r["status"] for r in batched] == ["pass"], batched
    assert [r["status"] for r in alone] == ["regression"], alone
    from verifier.execution.probes import BATCHED

    assert "state_repeat_under_concurrency" in BATCHED


def test_state_shared_across_a_batch_on_the_samples_names_engine_state_first(tmp_path, cli):
    """#47: the fault of state shared across a batch hits the suites' samples too (they are sent at concurrency with a
    shared first message): their greedy outputs part from the golden's at unchanged logprobs, which alone reads as a
    changed decoding path (decoding_changed, API validation). The concurrent state probe measures the cause directly,
    so engine state is named first and said to explain it."""
    from verifier.cli import main
    from verifier.testbed.server import arithmetic

    table = {last_user_text({"messages": s.messages}): s.target for s in gsm8k.SUITE.load(None, True)}

    def answer(req):  # the gsm8k samples as above; the probes' arithmetic (the state probes ask a sum) answered right
        target = table.get(last_user_text(req))
        return Reply(content=f"Working it out step by step, the final answer is {target}") if target else arithmetic(req)

    def serve():
        return TestServer(Script(answer, honour_sampling=True))

    at = RUN.index("--epochs")
    run = RUN[:at] + RUN[at + 2:] + ["--probes"]  # one epoch: the state probes and the samples' parting are the evidence
    with serve() as srv:
        assert main(["run", *run, "--base-url", srv.url, "--out", str(tmp_path / "ref")]) == 0
    assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
    zero_margins(tmp_path / "g")
    with serve() as srv, Proxy(srv.url, ["shared_prefix_batch_state"]) as px:
        code, out, err = cli("gate", "--golden", tmp_path / "g", "--base-url", px.url, "--model", "m",
                             "--out", tmp_path / "c", "--quiet")
    doc = json.loads((tmp_path / "c" / "comparison.json").read_text())
    assert px.mutations and code == 10 and doc["status"] == "frontend_regression", out + err
    comps = {d["component"]: d for d in doc["diagnosis"]}
    assert "decoding_changed" in comps["API validation"]["findings"], doc["diagnosis"]  # the samples' symptom, still shown
    first = doc["diagnosis"][0]
    assert first["component"] == "engine state" and "probe:state_repeat_under_concurrency" in first["findings"], doc["diagnosis"]
    assert "API validation" in first["explains"] and doc["reason"].startswith("diagnosis: engine state"), doc["reason"]
