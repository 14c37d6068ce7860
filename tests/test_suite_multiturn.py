"""Multi-turn replay on every surface against a Kimi-like scripted server: its own `functions.NAME:IDX` ids must
come back, reasoning is replayed as emitted; scripted faults fire the id-format, round-trip and reasoning checks."""

import json
import re

import pytest

from suites import multiturn
from verifier.testbed.proxy import Proxy
from verifier.testbed.surface_faults import DROP_REASONING_HISTORY
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.surfaces import registry

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path
KIMI_ID = re.compile(r"functions\.\w+:\d+$")


def kimi_like(req):
    """Calls the tool on the first turn (with reasoning), answers from tool results after; refuses history whose
    tool-call ids it did not issue or whose results do not answer a call (what a strict server does)."""
    msgs = req["messages"]
    issued = {c["id"] for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls") or []}
    results = [m for m in msgs if m["role"] == "tool"]
    for m in results:
        if m["tool_call_id"] not in issued or not KIMI_ID.match(m["tool_call_id"] or ""):
            return Reply(status=400)  # in the surface's own error shape
    if results:
        return Reply(content="From the tool: " + " ".join(m["content"] for m in results))
    conv = next((k for k, c in multiturn.CONVERSATIONS.items() if c["user1"] == last_user_text(req)), None)
    if conv is None:
        return Reply(content="pong")  # the preflight's ping
    c = multiturn.CONVERSATIONS[conv]
    name = c["tools"][0]["function"]["name"]
    return Reply(content=None, reasoning_content=f"I should call {name}.",
                 tool_calls=[{"name": name, "arguments": json.dumps({"query": k}), "id": f"functions.{name}:{i}"}
                             for i, k in enumerate(c["results"])])


def run(cli, url, out):
    code, _, err = cli("run", "--suite", "multiturn", "--base-url", url, "--model", "m", "--out", out, "--quiet",
                       "--mode", MODES, "--max-retries", "0")
    assert code == 0, err
    return [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]


def test_each_turn_replays_the_servers_own_answer_on_every_surface(tmp_path, cli):
    with TestServer(Script(kimi_like)) as srv:
        verdicts = run(cli, srv.url, tmp_path / "r")
        sent = [r for r, h in zip(srv.script.requests, srv.script.headers) if "x-verifier-preflight" not in {k.lower() for k in h}]
    n = len(multiturn.CONVERSATIONS)
    assert len(verdicts) == 3 * n * 6 and len(sent) == 3 * n * 6
    assert all(v["score"] == 1.0 and v["outcome"] == "content" for v in verdicts), [v for v in verdicts if v["score"] != 1.0][:2]
    assert {tuple(v["signals"].get("tool_call_id_style") or ()) for v in verdicts if v["sample_id"].endswith("/t1")} == {("functions.NAME:<n>",)}
    # Each surface got the history in its own shape, the reasoning included as emitted.
    t2 = [r for r in sent if "input" in r and any(i.get("type") == "function_call_output" for i in r["input"])]
    assert t2 and all(any(i.get("type") == "reasoning" for i in r["input"]) for r in t2)
    msgs = [r for r in sent if "max_tokens" in r and "system" in r and len(r["messages"]) >= 3]
    blocks = [b for r in msgs for m in r["messages"] for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert any(b["type"] == "thinking" and b["signature"] for b in blocks) and any(b["type"] == "tool_result" for b in blocks)
    chat = [r for r in sent if "messages" in r and "system" not in r and any(m["role"] == "tool" for m in r["messages"])]
    assert chat and all(any(m.get("reasoning_content") for m in r["messages"]) for r in chat)


@pytest.fixture(scope="module")
def mt_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("mt")
    with TestServer(Script(kimi_like)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", str(tmp / name),
                         "--quiet", "--mode", MODES, "--max-retries", "0"]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "golden")]) == 0
    assert main(["calibrate", str(tmp / "golden"), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return tmp / "golden"


def gate(cli, golden, url, out):
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", "m", "--out", out, "--quiet")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_same_server_passes(mt_golden, tmp_path, cli):
    with TestServer(Script(kimi_like)) as srv:
        code, doc, text = gate(cli, mt_golden, srv.url, tmp_path / "g")
    assert code == 0 and doc["status"] == "pass", text


@pytest.mark.parametrize("fault,surface,signals", [
    # ids rewritten to chatcmpl-tool-<hex>: the id format moved on t1, and the server refuses them back on t2.
    ("tool_call_ids_rewritten", "messages", {"tool_call_id_format_changed", "new_unsupported"}),
    # reasoning dropped from the replayed history: t2 and t3 prompts are shorter than the golden's.
    ("drop_reasoning_history", "responses", {"prompt_tokens_mismatch"}),
])
def test_scripted_faults_fire_the_multiturn_checks(mt_golden, tmp_path, cli, fault, surface, signals):
    spec = (DROP_REASONING_HISTORY, 1.0) if fault == "drop_reasoning_history" else fault
    with TestServer(Script(kimi_like)) as srv, Proxy(srv.url, [spec], surfaces={surface}) as px:
        code, doc, text = gate(cli, mt_golden, px.url, tmp_path / "g")
    assert doc["frontend"]["verdict"] == "fail", text
    failed = {e["signal"]: e for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"}
    assert signals <= set(failed), failed.keys()
    for e in failed.values():
        assert set(e["modes"]) == {surface, f"{surface}-stream"}, e


def test_a_conversation_is_one_sample_and_resume_sends_only_its_missing_turns(tmp_path, cli):
    """multiturn is a conversation suite: one work item per conversation, and a resume of a run killed after a
    conversation's first turns replays the journaled turns (bit-identical bodies) and sends only the missing ones."""
    from verifier.execution import journal, runner

    samples = multiturn.SUITE.load(None, True)
    sampling = {"overrides": {}}
    work = runner.plan([(multiturn.SUITE, samples)], "m", sampling, {}, 1, ["chat"])
    assert [w[1].id for w in work] == list(multiturn.CONVERSATIONS)
    assert multiturn.SUITE.conversation.records(samples[0]) == ["weather/t1", "weather/t2", "weather/t3"]
    body = runner.build_request(multiturn.SUITE, samples[0], "m", sampling, {"chat_template_kwargs": {"x": 1}}, "messages-stream")
    assert body["chat_template_kwargs"] == {"x": 1} and body["stream"] is True and body["system"] == multiturn.SYSTEM

    out = tmp_path / "r"
    with TestServer(Script(kimi_like)) as srv:
        code, _, err = cli("run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet",
                           "--mode", "chat", "--max-retries", "0")
        assert code == 0, err
        lines = (out / "responses.jsonl").read_text().splitlines()
        ids = [json.loads(x)["sample_id"] for x in lines]
        assert ids.index("weather/t1") < ids.index("weather/t2") < ids.index("weather/t3")  # each after the one before
        # The run was killed before weather's last turn and currency's second: drop them from the journal.
        cut = {"weather/t3", "currency/t2", "currency/t3"}
        (out / "responses.jsonl").write_text("".join(x + "\n" for x in lines if json.loads(x)["sample_id"] not in cut))
        before = len(srv.script.requests)
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet")
        assert code == 0, err
        resent = [r for r in srv.script.requests[before:] if any(m.get("role") == "tool" for m in r.get("messages", []))
                  or len(r.get("messages", [])) > 2]
    assert len(resent) == len(cut), resent  # the missing turns only, each replaying the answers journaled before it
    verdicts = [json.loads(x) for x in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == 3 * len(multiturn.CONVERSATIONS) and all(v["score"] == 1.0 for v in verdicts), verdicts
    assert len({(r.sample_id, r.epoch, r.mode) for r in journal.iter_exchanges(out)}) == 3 * len(multiturn.CONVERSATIONS)


def test_limit_keeps_conversations_whole():
    from suites import multiturn
    from verifier.app.collect import select

    samples = multiturn.load()
    for limit, seed in ((1, None), (2, None), (3, 3), (4, 11)):
        chosen = select(samples, limit, seed)
        assert len(chosen) == limit and all(s.id in multiturn.CONVERSATIONS for s in chosen), (limit, seed)
        recs = [r for s in chosen for r in multiturn.SUITE.conversation.records(s)]
        assert recs == [f"{s.id}/t{k}" for s in chosen for k in (1, 2, 3)]


def test_limit_builds_only_the_selected_samples_of_a_lazy_suite():
    """--limit slices a lazy sample list: the samples it does not select are never built (structured's 13k)."""
    from suites.lazy import LazySamples
    from verifier.app.collect import select
    from verifier.types import Sample

    built = []

    def make(i):
        built.append(i)
        return [Sample(id=str(i), messages=[{"role": "user", "content": str(i)}], target=None)]

    chosen = select(LazySamples([], range(1000), make), 5, None)
    assert [s.id for s in chosen] == ["0", "1", "2", "3", "4"] and len(built) <= 5, len(built)


def _followup_era_rows(samples):
    """samples.jsonl rows as multiturn wrote them when it used Suite.followup (before it was a conversation suite):
    one row per turn, `<conversation>/t<k>`, the first with meta.turn_ids, the later ones with meta.after."""
    rows = []
    for s in samples:
        for k, tid in enumerate(s.meta["turn_ids"], 1):
            meta = {"conversation": s.meta["conversation"], "turn": k, "turns": s.meta["turns"]}
            meta.update({"turn_ids": s.meta["turn_ids"]} if k == 1 else {"after": s.meta["turn_ids"][k - 2]})
            rows.append({"suite": "multiturn", **{**s.to_json(), "id": tid, "target": s.target[k - 1], "meta": meta}})
    return rows


def test_runs_and_goldens_of_the_followup_era_still_score_and_gate(tmp_path, cli):
    """A run whose samples.jsonl holds one row per turn (the followup-era shape) scores to the same verdicts, and a
    golden blessed from it keeps its rows as recorded (its dataset_sha256 still checks) and gates a rerun."""
    from verifier.execution import journal
    from verifier.types import Sample

    samples = multiturn.load()
    rows = _followup_era_rows(samples)
    converted = [s for _, s in journal.legacy_turn_samples(("multiturn", Sample.from_json({k: v for k, v in r.items() if k != "suite"})) for r in rows)]
    assert converted == samples  # the conversation sample the suite builds today
    out = tmp_path / "old"
    with TestServer(Script(kimi_like)) as srv:
        code, _, err = cli("run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet",
                           "--mode", "chat,responses", "--max-retries", "0")
        assert code == 0, err
        now = (out / "verdicts.jsonl").read_text()
        (out / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        hdr = json.loads((out / "run.json").read_text())
        hdr["suites"]["multiturn"].update(samples=len(rows), dataset_sha256=runner_sha(rows))
        (out / "run.json").write_text(json.dumps(hdr))
        code, _, err = cli("score", out)
        assert code == 0, err
        assert (out / "verdicts.jsonl").read_text() == now
        code, _, err = cli("bless", out, "--to", tmp_path / "golden")
        assert code == 0, err
        code, _, err = cli("run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r2",
                           "--quiet", "--mode", "chat,responses", "--max-retries", "0")
        assert code == 0, err
        code, _, err = cli("calibrate", tmp_path / "golden", "--runs", tmp_path / "r2", out)
        assert code == 0, err
        assert [json.loads(x)["id"] for x in (tmp_path / "golden" / "inputs.jsonl").read_text().splitlines()] == [r["id"] for r in rows]
        code, stdout, err = cli("gate", "--golden", tmp_path / "golden", "--base-url", srv.url, "--model", "m",
                                "--out", tmp_path / "g", "--quiet")
    assert code == 0 and json.loads((tmp_path / "g" / "comparison.json").read_text())["status"] == "pass", stdout + err


def runner_sha(rows):
    from verifier.execution.runner import dataset_sha256
    from verifier.types import Sample

    return dataset_sha256([Sample.from_json({k: v for k, v in r.items() if k != "suite"}) for r in rows])


@pytest.mark.parametrize("broken,outcome,reason", [
    (Reply(status=400), "unsupported", "not_reached:http_400"),
    (Reply(body="{not json"), "contract", "not_reached:malformed_body"),
])
def test_a_failed_turn_ends_its_conversation_and_the_turns_after_it_carry_its_outcome(tmp_path, cli, broken, outcome, reason):
    """The turn that failed is judged as any request; the turns after it are never sent and say why (not scored as
    wrong answers, nor as infra when the server broke the contract)."""
    def server(req):
        if any(m.get("role") == "tool" for m in req.get("messages", [])) and "Paris" in json.dumps(req):
            return broken  # weather's second turn
        return kimi_like(req)

    with TestServer(Script(server)) as srv:
        code, _, err = cli("run", "--suite", "multiturn", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r",
                           "--quiet", "--mode", "chat", "--max-retries", "0")
        verdicts = {v["sample_id"]: v for v in map(json.loads, (tmp_path / "r" / "verdicts.jsonl").read_text().splitlines())}
        sent = [r for r in srv.script.requests if "Paris" in json.dumps(r)]
    assert len(verdicts) == 3 * len(multiturn.CONVERSATIONS), (code, err)
    assert verdicts["weather/t1"]["outcome"] == "content"
    assert verdicts["weather/t2"]["outcome"] == outcome
    assert (verdicts["weather/t3"]["outcome"], verdicts["weather/t3"]["reason"]) == (outcome, reason)
    assert all(verdicts[f"{c}/t{k}"]["score"] == 1.0 for c in ("currency", "order") for k in (1, 2, 3))
    assert not any("Is it sunny" in json.dumps(r) for r in sent)  # weather's third turn was never sent
