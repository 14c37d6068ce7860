"""bfcl-multi-turn against the scripted test server: a model replaying BFCL's ground truth scores every reachable
entry right in every category and on every surface; one that skips a call fails that turn; each multi-turn history
fault in the proxy fails the frontend on the turn whose history it first edits, named by the diagnosis; a run
killed mid-conversation resumes with only its missing steps and the same verdicts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bfcl_mt_helpers import gt_table, key_of, replayer
from suites import bfcl_multi_turn as mt
from verifier.execution import journal
from verifier.testbed.faults import HISTORY_FAULTS
from verifier.testbed.proxy import Proxy
from verifier.testbed.server import Script, TestServer
from verifier.surfaces import registry

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("VERIFIER_SHARED_DATA", ROOT.parent / "shared" / "data"))
BFCL = SHARED / "bfcl"
SURFACES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path

pytestmark = pytest.mark.skipif(not (BFCL / "BFCL_v4_multi_turn_base.json").is_file(), reason=f"BFCL data not found under {SHARED}")


def category_file(cat: str) -> Path:
    return BFCL / f"BFCL_v4_{cat}.json"


def verdicts(run: Path) -> dict[tuple[str, str], dict]:
    return {(v["sample_id"], v["mode"]): v for v in map(json.loads, (run / "verdicts.jsonl").read_text().splitlines())}


def unreachable(sample) -> set[str]:
    """Record ids whose ground truth calls a function the entry does not offer at that turn (a data defect: no
    model can pass them), and every later turn of that entry."""
    out: set[str] = set()
    for k, calls in enumerate(sample.target, 1):
        offered = {t["function"]["name"] for t in mt._tools_at(sample, k)}
        if out or any(mt._gt_call(c)[0] not in offered for c in calls):
            out.add(f"{sample.id}/t{k}")
    return out


def run(cli, url, out, data, *extra):
    code, _, err = cli("run", "--suite", "bfcl-multi-turn", "--data", data, "--base-url", url, "--model", "m",
                       "--out", out, "--quiet", "--max-retries", "0", *extra)
    assert code == 0, err
    return verdicts(out)


@pytest.mark.parametrize("category", mt.CATEGORIES)
def test_ground_truth_replay_scores_every_reachable_turn(tmp_path, cli, category):
    samples = mt.load(str(category_file(category)))
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        vs = run(cli, srv.url, tmp_path / "r", category_file(category), "--limit", "10", "--sample-seed", "7")
    chosen = {sid.split("/")[0] for sid, _ in vs}
    assert len(chosen) == 10
    skip = set().union(*(unreachable(s) for s in samples if s.id in chosen))
    judged = {sid: v for (sid, _), v in vs.items() if sid not in skip}
    assert judged and all(v["outcome"] == "content" and v["reason"] == "correct" for v in judged.values()), \
        [(s, v["reason"], v["signals"].get("check_detail")) for s, v in judged.items() if v["reason"] != "correct"][:3]
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["bfcl-multi-turn"]
    n_turns = sum(s.meta["turns"] for s in samples if s.id in chosen)
    assert summary["requests"] == summary["recorded"] == n_turns and summary["missing"] == 0
    if not skip:
        assert summary["metrics"]["entry_accuracy"]["value"] == 1.0 and summary["metrics"]["turn_accuracy"]["value"] == 1.0
    # One journaled request per step, ids `<entry>/t<k>/<j>`, each tool result linked to its call by id.
    exs = journal.read_exchanges(tmp_path / "r")
    for ex in exs.values():
        msgs = ex.request["messages"]
        calls = {c["id"] for m in msgs if m["role"] == "assistant" for c in m.get("tool_calls") or []}
        assert all(m["tool_call_id"] in calls for m in msgs if m["role"] == "tool")
    assert len(exs) > n_turns  # tool-result steps on top of one request per turn


def test_the_miss_func_turn_offers_the_held_back_function(tmp_path, cli):
    samples = [s for s in mt.load(str(category_file("multi_turn_miss_func")))][:3]
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        run(cli, srv.url, tmp_path / "r", category_file("multi_turn_miss_func"), "--limit", "3")
    exs = journal.read_exchanges(tmp_path / "r")
    for s in samples:
        (turn, names), = ((int(k) + 1, [t["function"]["name"] for t in v]) for k, v in s.meta["held"].items())
        for ex in exs.values():
            if ex.sample_id.startswith(s.id + "/"):
                offered = {t["function"]["name"] for t in ex.request["tools"]}
                assert set(names) <= offered if mt.position(ex.sample_id)[0] >= turn else not set(names) & offered
        first = exs[("bfcl-multi-turn", f"{s.id}/t{turn}/0", 0, "chat")]
        assert first.request["messages"][-1] == {"role": "user", "content": mt.HOLDOUT_PROMPT}


def test_a_model_that_skips_a_call_fails_that_turn(tmp_path, cli):
    samples = mt.load(str(category_file("multi_turn_base")))[:8]
    # The first entry whose second turn changes state (a call that is not a read): skip its last call.
    target = next(s for s in samples if s.target[1] and mt._gt_call(s.target[1][-1])[0] in {"mv", "cp", "mkdir", "touch", "rm", "echo"})
    users = [m["content"] for k in range(2) for m in mt._turn_messages(target.meta["questions"], k, target.meta["held"])]
    names = tuple(sorted(t["function"]["name"] for t in mt._tools_at(target, 2)))
    with TestServer(Script(replayer(gt_table(samples), skip={(tuple(users), names)}))) as srv:
        vs = run(cli, srv.url, tmp_path / "r", category_file("multi_turn_base"), "--limit", "8")
    t1, t2 = vs[(f"{target.id}/t1", "chat")], vs[(f"{target.id}/t2", "chat")]
    assert t1["reason"] == "correct" and t1["metrics"]["turn_accuracy"] == 1.0
    assert t2["outcome"] == "content" and t2["reason"] in ("state_mismatch", "response_missing") and t2["score"] == 0.0
    last = vs[(f"{target.id}/t{target.meta['turns']}", "chat")]
    assert last["metrics"]["entry_accuracy"] == 0.0
    others = [v for (sid, _), v in vs.items() if not sid.startswith(target.id + "/")]
    assert others and all(v["reason"] == "correct" for v in others)


def test_every_surface_replays_history_in_its_own_shape(tmp_path, cli):
    samples = mt.load(str(category_file("multi_turn_base")))
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        vs = run(cli, srv.url, tmp_path / "r", category_file("multi_turn_base"), "--limit", "3", "--mode", SURFACES)
    assert {m for _, m in vs} == set(SURFACES.split(","))
    assert all(v["reason"] == "correct" for v in vs.values()), [(k, v["reason"], v["signals"].get("check_detail")) for k, v in vs.items() if v["reason"] != "correct"][:3]
    exs = list(journal.read_exchanges(tmp_path / "r").values())
    resp = [ex.request for ex in exs if ex.mode.startswith("responses")]
    items = [i for r in resp for i in r["input"] if isinstance(i, dict)]
    outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
    assert outputs and outputs <= {i["call_id"] for i in items if i.get("type") == "function_call"}
    assert any(i.get("type") == "reasoning" for i in items)
    blocks = [b for ex in exs if ex.mode.startswith("messages") for m in ex.request["messages"]
              for b in (m["content"] if isinstance(m["content"], list) else [])]
    assert {b["tool_use_id"] for b in blocks if b["type"] == "tool_result"} <= {b["id"] for b in blocks if b["type"] == "tool_use"}
    assert any(b["type"] == "thinking" and b.get("signature") for b in blocks)
    chat = [ex.request for ex in exs if ex.mode.startswith("chat")]
    assert any(m.get("reasoning_content") for r in chat for m in r["messages"] if m["role"] == "assistant")


# ---------------------------------------------------------------- golden diff and history faults

GOLDEN_FLAGS = ["--limit", "6", "--sample-seed", "5"]


@pytest.fixture(scope="module")
def mt_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("bfclmt")
    data = str(category_file("multi_turn_base"))
    samples = mt.load(data)
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", "--suite", "bfcl-multi-turn", "--data", data, "--base-url", srv.url, "--model", "m",
                         "--out", str(tmp / name), "--quiet", "--max-retries", "0", "--mode", "chat,messages", *GOLDEN_FLAGS]) == 0
    assert main(["bless", str(tmp / "ref"), "--to", str(tmp / "golden")]) == 0
    assert main(["calibrate", str(tmp / "golden"), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return {"golden": tmp / "golden", "ref": tmp / "ref", "samples": samples, "data": data}


def gate(cli, g, url, out, *extra, data=True):
    code, stdout, err = cli("gate", "--golden", g["golden"], "--base-url", url, "--model", "m", "--out", out,
                            "--quiet", *(["--data", g["data"]] if data else []), "--max-retries", "0", *extra)
    assert (out / "comparison.json").exists(), (code, stdout + err)
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def test_a_rerun_passes_and_reports_no_divergence(tmp_path, cli, mt_golden):
    with TestServer(Script(replayer(gt_table(mt_golden["samples"])))) as srv:
        code, doc, out = gate(cli, mt_golden, srv.url, tmp_path / "c")
    assert code == 0 and doc["status"] == "pass", out
    td = doc["suites"]["bfcl-multi-turn"]["turn_diff"]
    assert td["conversations"] == 6 and all(m["diverged"] == 0 for m in td["by_mode"].values())
    assert set(td["by_surface"]) == {"chat", "messages"}


def first_edited_turns(ref: Path, fault) -> dict[tuple[str, str], int]:
    """Per (conversation, mode): the first turn with a request the fault edits (the turn it must be caught on)."""
    from verifier.testbed.surface_faults import on_surface

    out: dict[tuple[str, str], int] = {}
    for ex in sorted(journal.read_exchanges(ref).values(), key=lambda e: (e.sample_id.split("/")[0], e.mode, mt.position(e.sample_id))):
        conv = ex.sample_id.split("/")[0]
        if (conv, ex.mode) not in out and on_surface(fault, "messages" if ex.mode.startswith("messages") else "chat").request(ex.request):
            out[(conv, ex.mode)] = mt.position(ex.sample_id)[0]
    return out


def flagged_turns(doc, suite: str = "bfcl-multi-turn") -> dict[str, int]:
    """Per conversation: the earliest turn a conversation-history signal fired on."""
    out: dict[str, int] = {}
    sig = doc["suites"][suite]["signals"]
    for name in ("history_tokens_mismatch", "followup_divergence", "prompt_tokens_mismatch"):
        for rec in sig[name]["samples"]:
            conv, t = rec.rsplit("/t", 1)
            out[conv] = min(out.get(conv, 99), int(t))
    return out


@pytest.mark.parametrize("fault", sorted(HISTORY_FAULTS))
def test_each_history_fault_fails_the_frontend_on_the_turn_it_first_edits(tmp_path, cli, mt_golden, fault):
    expected = first_edited_turns(mt_golden["ref"], HISTORY_FAULTS[fault])
    assert expected, f"{fault} edits no request of the golden's conversations: the test would prove nothing"
    # The Anthropic system-prompt bug is a Messages-path bug: applied there only, the diagnosis names the surface.
    surfaces = {"messages"} if fault == "system_moved" else None
    expected = {k: t for k, t in expected.items() if surfaces is None or k[1] in surfaces}
    with TestServer(Script(replayer(gt_table(mt_golden["samples"])))) as srv, Proxy(srv.url, [fault], surfaces=surfaces) as px:
        code, doc, out = gate(cli, mt_golden, px.url, tmp_path / "c")
    assert code == 10 and doc["status"] == "frontend_regression", out
    components = [d["component"] for d in doc["diagnosis"]]
    assert components[0] == ("surface translation" if surfaces else "conversation history"), doc["diagnosis"]
    flagged = flagged_turns(doc)
    want = {}
    for (conv, _), t in expected.items():
        want[conv] = min(want.get(conv, 99), t)
    assert flagged == want, (flagged, want)


def test_the_follow_up_signal_fires_on_the_turn_after_a_matching_first_turn(tmp_path, cli, mt_golden):
    """A server that answers the first turn like the golden's and a later turn otherwise (here: it stops calling
    after the first user turn) is the follow-up failure: turn_diff names turn 2+ and the signal fires."""
    table = gt_table(mt_golden["samples"])
    later = {k for k in table if len(k[0]) >= 2}
    with TestServer(Script(replayer(table, skip=later))) as srv:
        code, doc, out = gate(cli, mt_golden, srv.url, tmp_path / "c")
    s = doc["suites"]["bfcl-multi-turn"]
    td = s["turn_diff"]["by_mode"]["chat"]
    assert td["diverged"] >= 1 and td["later_turn"] == td["diverged"] and "1" not in td["first_turn"]
    assert s["signals"]["followup_divergence"]["verdict"] == "fail" and code == 10, out
    assert doc["diagnosis"][0]["component"] == "conversation history"
    assert td["examples"][0]["kind"] in ("tool_name", "arguments", "result", "final_text")


def _skips(g, opening: int, follow: slice) -> set:
    """Replayer skip keys: the opening turn of the golden's first `opening` conversations (a numerics change shows on
    requests that replay no history too), and every later turn of the conversations in `follow`."""
    convs = sorted({ex.sample_id.split("/")[0] for ex in journal.read_exchanges(g["ref"]).values()})
    by_id = {s.id: s for s in g["samples"]}
    keys = {c: set(gt_table([by_id[c]])) for c in convs}
    return ({k for c in convs[:opening] for k in keys[c] if len(k[0]) == 1}
            | {k for c in convs[follow] for k in keys[c] if len(k[0]) >= 2})


def test_follow_ups_that_part_no_more_than_the_openings_are_not_blamed_on_the_history(tmp_path, cli, mt_golden):
    """Numerics moved (different weights or kernels): some conversations part on their opening request, which replays
    no history, and a few others on a follow-up with the same prompt tokens. That is no evidence against the history:
    followup_divergence is inconclusive and says why, and the diagnosis does not name the conversation history."""
    skip = _skips(mt_golden, 2, slice(2, 3))
    with TestServer(Script(replayer(gt_table(mt_golden["samples"]), skip=skip))) as srv:
        code, doc, out = gate(cli, mt_golden, srv.url, tmp_path / "c")
    s = doc["suites"]["bfcl-multi-turn"]
    td = s["turn_diff"]["by_mode"]
    assert sum(m["diverged"] - m["followup"] for m in td.values()) >= 2 and sum(m["followup"] for m in td.values()) >= 1
    fu = s["signals"]["followup_divergence"]
    assert fu["count"] >= 1 and fu["verdict"] == "inconclusive" and "opening request" in fu["note"], fu
    assert s["signals"]["history_tokens_mismatch"]["verdict"] == "pass"
    ev = [e for e in doc["frontend"]["evidence"] if e["signal"] == "followup_divergence"]
    assert ev and ev[0]["verdict"] == "inconclusive" and ev[0]["qualifier"] == "confounded"
    assert doc["frontend"]["verdict"] == "inconclusive" and code != 10, out
    assert "conversation history" not in [d["component"] for d in doc["diagnosis"]]


def test_follow_ups_that_part_far_more_often_than_the_openings_still_fail_the_history(tmp_path, cli, mt_golden):
    """One opening parted (numerics are not bit-identical), but every other conversation parts on a follow-up: far
    more than numerics explain, so the follow-up signal still fails the frontend and names the history."""
    skip = _skips(mt_golden, 1, slice(1, None))
    with TestServer(Script(replayer(gt_table(mt_golden["samples"]), skip=skip))) as srv:
        code, doc, out = gate(cli, mt_golden, srv.url, tmp_path / "c")
    fu = doc["suites"]["bfcl-multi-turn"]["signals"]["followup_divergence"]
    assert fu["verdict"] == "fail" and "significantly more often" in fu["note"], fu
    assert code == 10 and doc["diagnosis"][0]["component"] == "conversation history", out


def test_a_golden_without_the_new_signal_margins_is_refused_or_judged_never_a_crash(tmp_path, cli, mt_golden):
    """Goldens calibrated before history_tokens_mismatch / followup_divergence existed lack their margins: the
    comparison says so (a usage error naming the margin, or an uncalibrated verdict), never a traceback."""
    import shutil

    g = tmp_path / "old"
    shutil.copytree(mt_golden["golden"], g)
    meta = json.loads((g / "golden.json").read_text())
    meta["margins"] = {k: v for k, v in meta["margins"].items() if "history_tokens" not in k and "followup" not in k}
    (g / "golden.json").write_text(json.dumps(meta))
    with TestServer(Script(replayer(gt_table(mt_golden["samples"])))) as srv:
        code, _, err = cli("gate", "--golden", g, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "c",
                           "--quiet", "--data", mt_golden["data"], "--max-retries", "0")
    assert code in (0, 20) or (code == 2 and "history_tokens_mismatch" in err), err


# ---------------------------------------------------------------- resume after kill -9

SERVER_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from bfcl_mt_helpers import gt_table, replayer
from suites import bfcl_multi_turn as mt
from verifier.testbed.server import Script, TestServer
respond = replayer(gt_table(mt.load({data!r})))
def slow(req):
    time.sleep({delay})
    return respond(req)
with TestServer(Script(slow), port={port}) as srv:
    print(srv.url, flush=True)
    time.sleep(3600)
"""


def test_resume_after_kill_sends_only_the_missing_steps_and_scores_the_same(tmp_path, cli):
    from verifier.testbed.server import Script as _S  # noqa: F401  (the in-process server below)

    data = str(category_file("multi_turn_base"))
    samples = mt.load(data)
    flags = ["--limit", "4", "--concurrency", "2"]
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        whole = run(cli, srv.url, tmp_path / "whole", data, *flags)
        total = len(journal.read_exchanges(tmp_path / "whole"))
        # The same run through a slowed server, killed with SIGKILL halfway through the journal.
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        slow = subprocess.Popen([sys.executable, "-c", SERVER_SCRIPT.format(tests=str(ROOT / "tests"), data=data, delay=0.05, port=0)],
                                stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
        try:
            url = slow.stdout.readline().strip()
            out = tmp_path / "killed"
            proc = subprocess.Popen([sys.executable, "-m", "verifier", "run", "--suite", "bfcl-multi-turn", "--data", data,
                                     "--base-url", url, "--model", "m", "--out", str(out), "--quiet", "--max-retries", "0", *flags],
                                    env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.time() + 120
            while time.time() < deadline:
                p = out / journal.RESPONSES
                if p.exists() and len(p.read_text().splitlines()) >= total // 2:
                    break
                time.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        finally:
            slow.kill()
            slow.wait()
        before = len(journal.read_exchanges(out))
        assert 0 < before < total
        sent_before = len(srv.script.requests)
        code, _, err = cli("run", "--resume", out, "--base-url", srv.url, "--quiet", "--max-retries", "0")
        assert code == 0, err
        resent = [r for r, h in zip(srv.script.requests[sent_before:], srv.script.headers[sent_before:])
                  if "x-verifier-preflight" not in {k.lower() for k in h}]
    assert len(resent) == total - before
    resumed = verdicts(out)

    def strip(v):
        return {k: v[k] for k in ("sample_id", "mode", "outcome", "score", "answer", "reason", "metrics")}

    assert {k: strip(v) for k, v in resumed.items()} == {k: strip(v) for k, v in whole.items()}


# ---------------------------------------------------------------- Responses chained by previous_response_id

CHAINED = "bfcl-multi-turn-chained"


def test_chained_responses_send_only_what_is_new_and_score_like_the_whole_history(tmp_path, cli):
    data = str(category_file("multi_turn_base"))
    samples = mt.load(data)
    modes = "chat,responses,responses-stream"
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        code, _, err = cli("run", "--suite", CHAINED, "--data", data, "--base-url", srv.url, "--model", "m", "--out",
                           tmp_path / "r", "--quiet", "--max-retries", "0", "--limit", "3", "--mode", modes)
        assert code == 0, err
    vs = verdicts(tmp_path / "r")
    assert {m for _, m in vs} == set(modes.split(","))
    assert all(v["reason"] == "correct" for v in vs.values()), [(k, v["reason"]) for k, v in vs.items() if v["reason"] != "correct"][:3]
    exs = sorted(journal.read_exchanges(tmp_path / "r").values(), key=lambda e: (e.mode, e.sample_id.split("/")[0], mt.position(e.sample_id)))
    chained = 0
    for prev, ex in zip(exs, exs[1:]):
        same_conv = (prev.mode, prev.sample_id.split("/")[0]) == (ex.mode, ex.sample_id.split("/")[0])
        if not same_conv:
            continue
        if ex.mode.startswith("responses"):
            # Each follow-up names the answer before it and carries only tool outputs and the next user message.
            assert ex.request["previous_response_id"] == mt.response_id(prev)
            assert all(i.get("type") == "function_call_output" or i.get("role") == "user" for i in ex.request["input"]), ex.request["input"]
            chained += 1
        else:
            assert "previous_response_id" not in ex.request and len(ex.request["messages"]) > len(prev.request["messages"])
    assert chained > 6
    # The same conversations, whole history every time, judge alike turn for turn.
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        whole = run(cli, srv.url, tmp_path / "w", data, "--limit", "3", "--mode", modes)
    assert {k: v["answer"]["steps"] for k, v in whole.items()} == {k: v["answer"]["steps"] for k, v in vs.items()}


def test_a_proxy_that_drops_previous_response_id_fails_the_frontend_on_the_first_follow_up(tmp_path, cli):
    from verifier.cli import main

    data = str(category_file("multi_turn_base"))
    samples = mt.load(data)
    flags = ["--suite", CHAINED, "--data", data, "--model", "m", "--quiet", "--max-retries", "0", "--mode",
             "responses,responses-stream", "--limit", "4", "--sample-seed", "3"]
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *flags, "--base-url", srv.url, "--out", str(tmp_path / name)]) == 0
    assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
    assert main(["calibrate", str(tmp_path / "g"), "--runs", str(tmp_path / "r2"), str(tmp_path / "r3")]) == 0
    g = {"golden": tmp_path / "g", "data": data}
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        code, doc, out = gate(cli, g, srv.url, tmp_path / "ok")
        assert code == 0 and doc["status"] == "pass", out
        with Proxy(srv.url, ["previous_response_ignored"]) as px:
            code, doc, out = gate(cli, g, px.url, tmp_path / "c")
            assert px.mutations
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert doc["diagnosis"][0]["component"] in ("conversation history", "surface translation"), doc["diagnosis"]
    # Caught on turn 1: its tool-result step is the first request that is chained.
    flagged = flagged_turns(doc, CHAINED)
    assert flagged and set(flagged.values()) == {1}, flagged


# ---------------------------------------------------------------- sequential early stopping

def test_sequential_gate_stops_early_on_a_decided_regression_judging_whole_entries(tmp_path, cli):
    """`gate --sequential` on conversations: the looks come between whole entries (an interim look never pairs
    half a conversation), and a history fault decided at an early look leaves the remaining entries unsent."""
    from verifier.cli import main

    data = str(category_file("multi_turn_base"))
    samples = mt.load(data)
    flags = ["--suite", "bfcl-multi-turn", "--data", data, "--model", "m", "--quiet", "--max-retries", "0",
             "--mode", "chat", "--limit", "16", "--sample-seed", "11", "--concurrency", "2"]
    with TestServer(Script(replayer(gt_table(samples)))) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *flags, "--base-url", srv.url, "--out", str(tmp_path / name)]) == 0
    assert main(["bless", str(tmp_path / "ref"), "--to", str(tmp_path / "g")]) == 0
    assert main(["calibrate", str(tmp_path / "g"), "--runs", str(tmp_path / "r2"), str(tmp_path / "r3")]) == 0
    golden_turns = len(verdicts(tmp_path / "ref"))
    with TestServer(Script(replayer(gt_table(samples)))) as srv, Proxy(srv.url, ["tool_call_id_rewritten"]) as px:
        code, _, err = cli("gate", "--golden", tmp_path / "g", "--base-url", px.url, "--model", "m", "--out", tmp_path / "c",
                           "--quiet", "--data", data, "--max-retries", "0", "--concurrency", "2", "--sequential", "--looks", "4")
    doc = json.loads((tmp_path / "c" / "comparison.json").read_text())
    assert code == 10 and doc["status"] == "frontend_regression", err
    seq = doc["sequential"]
    assert seq["total_samples"] == golden_turns and 0 < seq["used_samples"] < golden_turns and seq["saved_samples"] > 0
    assert seq["looks"][-1]["status"] == "frontend_regression" and len(seq["looks"]) < 4
    # Whole entries: every entry that was started ran to its end, and the records judged are exactly their turns.
    sent = {}
    for ex in journal.read_exchanges(tmp_path / "c").values():
        sent.setdefault(ex.sample_id.split("/")[0], set()).add(mt.position(ex.sample_id)[0])
    by_id = {s.id: s for s in samples}
    assert 0 < len(sent) < 16
    assert all(turns == set(range(1, by_id[e].meta["turns"] + 1)) for e, turns in sent.items()), sent
    assert seq["used_samples"] == sum(by_id[e].meta["turns"] for e in sent)


def test_gate_limit_keeps_whole_conversations(tmp_path, cli, mt_golden):
    """`gate --limit 1` on a multi-turn golden gates its first entry whole: every turn and step of it, nothing else.
    With no --data: the golden's inputs.jsonl holds the entries, its records are their turns."""
    first = json.loads((mt_golden["golden"] / "inputs.jsonl").read_text().splitlines()[0])["id"]
    with TestServer(Script(replayer(gt_table(mt_golden["samples"])))) as srv:
        code, doc, out = gate(cli, mt_golden, srv.url, tmp_path / "c", "--limit", "1", data=False)
    assert code == 0 and doc["status"] == "pass", out
    sent = {json.loads(l)["sample_id"] for l in (tmp_path / "c" / "responses.jsonl").read_text().splitlines()}
    assert sent and {s.split("/")[0] for s in sent} == {first} and any("/t2/" in s for s in sent), sent
    td = doc["suites"]["bfcl-multi-turn"]["turn_diff"]
    assert td["conversations"] == 1 and set(td["by_surface"]) == {"chat", "messages"}, td


# ---------------------------------------------------------------- a hostile golden's simulator state

@pytest.mark.parametrize("config", [[1, 2], "x", {"GorillaFileSystem": [1]}], ids=["list", "string", "class-list"])
def test_a_golden_whose_initial_config_has_the_wrong_shape_is_exit_2_naming_it(tmp_path, cli, mt_golden, config):
    """The simulators' state comes from the golden (inputs.jsonl): a wrong shape is refused before anything is sent
    (exit 2, one line naming the sample and the field), never an internal error when scoring reaches it."""
    import shutil

    from verifier.execution.runner import dataset_sha256
    from verifier.types import Sample

    g = tmp_path / "hostile"
    shutil.copytree(mt_golden["golden"], g)
    rows = [json.loads(x) for x in (g / "inputs.jsonl").read_text().splitlines()]
    victim = next(r for r in rows if "GorillaFileSystem" in r["meta"]["involved_classes"])
    victim["meta"]["initial_config"] = config
    (g / "inputs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    meta = json.loads((g / "golden.json").read_text())  # a consistent forgery: the dataset hash follows the edit
    samples = [Sample.from_json({k: v for k, v in r.items() if k != "suite"}) for r in rows]
    meta["suites"]["bfcl-multi-turn"]["dataset_sha256"] = dataset_sha256(samples)
    (g / "golden.json").write_text(json.dumps(meta))
    script = Script(replayer(gt_table(mt_golden["samples"])))
    with TestServer(script) as srv:
        code, _, err = cli("gate", "--golden", g, "--base-url", srv.url, "--model", "m", "--out", tmp_path / "c",
                           "--quiet", "--max-retries", "0")
    assert code == 2 and "initial_config" in err and victim["id"] in err and err.count("\n") == 1, err
    assert "internal" not in err.lower()
    assert script.requests == []  # refused before anything was sent


def test_a_run_directory_whose_initial_config_has_the_wrong_shape_is_exit_2_when_scored(tmp_path, cli, mt_golden):
    """A run directory is untrusted too (a CI shard, a reviewer's copy): `score` refuses its samples.jsonl in one
    line naming the sample and the field, never an internal error from a simulator."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(mt_golden["ref"], run)
    rows = [json.loads(x) for x in (run / "samples.jsonl").read_text().splitlines()]
    rows[0]["meta"]["initial_config"] = ["not", "an", "object"]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, err = cli("score", run)
    assert code == 2 and "initial_config" in err and rows[0]["id"] in err and err.count("\n") == 1, err
