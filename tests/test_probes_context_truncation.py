"""The context-truncation probe: a server that silently cuts long prompts is a frontend regression; one that refuses them is not."""

import json
import re

import pytest

from verifier.execution import context_probe as cp
from verifier.testbed.context import ContextLimit, apply, limited
from verifier.testbed.server import Reply, Script, TestServer, last_user_text, prompt_tokens

RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat", "--logprobs", "1", "--max-retries", "0"]


def recall(req):
    """The context probe's model: answers the code word from the prompt it was given."""
    m = re.search(r"secret code word is (\w+)", last_user_text(req))
    return Reply(content=m.group(1) if m else "I don't know.")


def reference(req):
    """Sums the smoke suite's questions, recalls the probe's code word."""
    text = last_user_text(req)
    if "secret code word" in text:
        return recall(req)
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", text)
    return Reply(content=str(int(m.group(1)) + int(m.group(2))))


@pytest.fixture(scope="module")
def golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("ctx")
    with TestServer(Script(reference)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *RUN, "--base-url", srv.url, "--out", str(tmp / name), "--context-probe"]) == 0
    g = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(g)]) == 0
    assert main(["calibrate", str(g), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return g


def gate(cli, golden, limit, out):
    with TestServer(Script(limited(reference, limit))) as srv:
        code, stdout, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--out", out, "--quiet")
    doc = json.loads((out / "comparison.json").read_text())
    ev = {e["signal"]: e for e in doc["frontend"]["evidence"]}
    if "context_truncated" in ev:  # the evidence line, with the details comparison.json keeps beside it
        ev["context_truncated"] = {**ev["context_truncated"], **doc["context_truncation"]}
    return code, doc, ev, stdout + err


def test_the_golden_records_every_length_answered(golden):
    g = json.loads((golden / "golden.json").read_text())["context_probe"]
    assert g["lengths"] == list(cp.LENGTHS)
    assert [r["status"] for r in g["results"]] == [200] * 4 and all(r["answered"] for r in g["results"])
    pts = [r["prompt_tokens"] for r in g["results"]]
    assert pts == sorted(pts) and pts[-1] > 3 * pts[0]


def test_silent_truncation_is_a_frontend_regression_at_the_length_it_starts(golden, tmp_path, cli):
    code, doc, ev, out = gate(cli, golden, ContextLimit(3000), tmp_path / "c")
    assert code == 10 and doc["status"] == "frontend_regression", out
    e = ev["context_truncated"]
    assert e["verdict"] == "fail" and e["length"] == 4000, e
    assert "from about 4000 tokens" in e["summary"] and "answer lost" in e["summary"]
    # Everything else about the server is healthy: the probe alone caught it.
    assert all(x["verdict"] == "pass" for s, x in ev.items() if s != "context_truncated"), ev
    cand = json.loads((tmp_path / "c" / cp.FILE).read_text())["results"]
    assert [r["answered"] for r in cand] == [True, True, False, False]
    assert all(r["prompt_tokens"] <= 3000 for r in cand)


def test_a_proxy_cutting_long_prompts_is_caught_where_it_starts(golden, tmp_path, cli):
    from verifier.testbed.proxy import Proxy

    with TestServer(Script(reference)) as srv, Proxy(srv.url, ["prompt_front_truncated"]) as px:
        code, stdout, err = cli("gate", "--golden", golden, "--base-url", px.url, "--model", "m", "--out", tmp_path / "c", "--quiet")
    doc = json.loads((tmp_path / "c" / "comparison.json").read_text())
    e = doc["context_truncation"]
    assert code == 10 and e["verdict"] == "fail" and e["length"] == 2000, (e, stdout + err)
    assert {x["signal"]: x for x in doc["frontend"]["evidence"]}["context_truncated"]["verdict"] == "fail"


def test_refusing_long_prompts_is_unsupported_not_a_regression(golden, tmp_path, cli):
    code, doc, ev, out = gate(cli, golden, ContextLimit(3000, "reject"), tmp_path / "c")
    assert code == 0 and doc["status"] == "pass", out
    e = ev["context_truncated"]
    assert e["verdict"] == "pass" and e["length"] is None and e["unsupported_from"] == 4000, e
    assert "unsupported" in e["summary"] and "exceed_context_size_error" in e["summary"]


def test_a_server_with_room_passes(golden, tmp_path, cli):
    code, doc, ev, out = gate(cli, golden, ContextLimit(100_000), tmp_path / "c")
    assert code == 0 and ev["context_truncated"]["verdict"] == "pass", out


def r(target, status=200, pt=None, answered=True):
    return {"target": target, "status": status, "prompt_tokens": pt if pt is not None else target, "answered": answered}


GOLD = {"lengths": [1000, 2000, 4000], "results": [r(1000), r(2000), r(4000)]}


@pytest.mark.parametrize("cand, verdict, length", [
    ([r(1000), r(2000), r(4000)], "pass", None),
    ([r(1000), r(2000), r(4000, pt=2048)], "fail", 4000),                     # capped prompt_tokens: decisive
    ([r(1000), r(2000, answered=False), r(4000, answered=False)], "fail", 2000),  # kept below, lost from 2000 on
    ([r(1000, answered=False), r(2000, answered=False), r(4000, answered=False)], "inconclusive", 1000),  # the model
    ([r(1000), r(2000, answered=False), r(4000)], "inconclusive", 2000),      # lost once, not a cut
    ([r(1000), r(2000, status=400), r(4000, status=400)], "pass", None),      # unsupported
    ([r(1000), r(2000, status=None), r(4000)], "inconclusive", None),         # infra
])
def test_verdict_shapes(cand, verdict, length):
    e = cp.verdict({"results": cand}, GOLD)
    assert (e["verdict"], e["length"]) == (verdict, length), e


def test_a_length_the_golden_lost_too_is_no_finding():
    gold = {"results": [r(1000), r(2000, answered=False)]}
    assert cp.verdict({"results": [r(1000), r(2000, answered=False)]}, gold)["verdict"] == "pass"
    assert cp.verdict({"results": [r(1000)]}, None) is None


def test_lengths_fit_the_servers_context():
    assert cp.lengths_for(None) == [1000, 2000, 4000, 8000]
    assert cp.lengths_for(8192) == [1000, 2000, 4000, 8000]
    assert cp.lengths_for(4096) == [1000, 2000, 3968]
    assert cp.lengths_for(cp.n_ctx_of({"props": {"default_generation_settings": {"n_ctx": 2048}}})) == [1000, 1920]
    assert cp.n_ctx_of({"models": {}}) is None


def test_the_scripted_limit_cuts_the_start_or_refuses():
    req = {"messages": [{"role": "user", "content": "alpha beta " * 100 + "omega?"}]}
    n = prompt_tokens(req)
    cut = apply(ContextLimit(n - 50), req, prompt_tokens)
    assert prompt_tokens(cut) <= n - 50 and cut["messages"][0]["content"].endswith("omega?")
    assert req["messages"][0]["content"].startswith("alpha")  # the caller's request is untouched
    assert "exceeds" in apply(ContextLimit(n - 1, "reject"), req, prompt_tokens)
    assert apply(ContextLimit(n), req, prompt_tokens) is req
    assert ContextLimit.parse("2048:reject") == ContextLimit(2048, "reject")
    with pytest.raises(ValueError):
        ContextLimit.parse("lots")
