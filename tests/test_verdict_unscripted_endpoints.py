"""The verdict holds against endpoints nobody scripted the gate against (issue #21): never pass a broken endpoint,
never blame a healthy one. Each test is a project-written misbehaving server on 127.0.0.1 against a golden of the
test server; the comparison is the real `verifier compare` / `gate` on the real wire."""

import json
import random
import re
from pathlib import Path

import pytest

from conftest import SMOKE_RUN
from verifier.judge import contract
from verifier.attribution import signals
from verifier.testbed.server import Reply, Script, TestServer, last_user_text, prompt_tokens
from verifier.surfaces import registry


def comparison(path: Path) -> dict:
    return json.loads((path / "comparison.json").read_text())


def _sum(req) -> int:
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
    return int(m.group(1)) + int(m.group(2)) if m else 0  # 0: a preflight ping or a probe prompt


def entries(tokens, logprob=lambda i: round(-0.01 * (i % 7), 6), top=None):
    """logprobs.content entries for `tokens`; `top(i, token, lp)` gives that position's top_logprobs."""
    out = []
    for i, t in enumerate(tokens):
        lp = logprob(i)
        out.append({"token": t, "logprob": lp, "top_logprobs": top(i, t, lp) if top else []})
    return out


def build_golden(tmp: Path, cli, responder, run_args, name="g", honour_sampling=False) -> Path:
    """Three reference runs of `responder`: the first blessed, calibrated with the other two."""
    with TestServer(Script(responder, honour_sampling=honour_sampling)) as srv:
        for run in ("ref", "r2", "r3"):
            code, _, err = cli("run", *run_args, "--base-url", srv.url, "--out", tmp / f"{name}-{run}")
            assert code == 0, err
    golden = tmp / "goldens" / name
    assert cli("bless", tmp / f"{name}-ref", "--to", golden)[0] == 0
    assert cli("calibrate", golden, "--runs", tmp / f"{name}-r2", tmp / f"{name}-r3")[0] == 0
    return golden


def run_and_compare(tmp: Path, cli, golden: Path, responder, run_args, name: str, *compare_args, honour_sampling=False):
    with TestServer(Script(responder, honour_sampling=honour_sampling)) as srv:
        code, _, err = cli("run", *run_args, "--base-url", srv.url, "--out", tmp / name)
        assert code == 0, err
    code, out, _ = cli("compare", tmp / name, "--golden", golden, *compare_args)
    return code, out, comparison(tmp / name)


# ----------------------------------------------------------------------------- every finding is judged by a side


def emitted_codes() -> set[str]:
    """Every finding code a source file can emit: `Finding("code"` literals in the core and the suites."""
    root = Path(__file__).resolve().parent.parent
    codes = set()
    for p in [q for q in (root / "verifier").rglob("*.py") if "testbed" not in q.parts] + list((root / "suites").rglob("*.py")):
        codes |= set(re.findall(r'Finding\("([a-z_]+)"', p.read_text(encoding="utf-8")))
    return codes


def test_every_finding_code_is_judged_by_some_side():
    """A table: code -> the sides that judge it. A new code on the candidate is either frontend evidence (the
    new_findings signal) or the sample stays in the quality metrics, or both; never neither."""
    from verifier.attribution import numerics
    from verifier.types import Observation

    codes = emitted_codes()
    assert {"empty_response", "detokenize_mismatch", "stop_token_in_content", "tool_call_as_text", "json_fenced",
            "malformed_body", "usage_missing", "error_shape_wrong"} <= codes
    table = {code: contract.sides(code) for code in sorted(codes)}
    assert not [c for c, s in table.items() if not s], table
    assert table["empty_response"] == {"metrics"}  # a wrong answer, scored as one
    assert table["tool_args_invalid_json"] == {"frontend"}
    assert table["usage_missing"] == {"frontend", "metrics"}
    # ... and the comparison really does judge each code on the side the table says.
    for code, sides in table.items():
        outcome = "contract" if code in contract.BLOCKING else "content"
        g = [Observation("s", "a", 0, "chat", "content", score=1.0, metrics={"m": 1.0}, answer="1")]
        c = [Observation("s", "a", 0, "chat", outcome, score=0.0, metrics={"m": 0.0}, answer="2", findings=(code,))]
        results = signals.evaluate(g, c)
        acc = numerics.Numerics()
        if [o for o in c if o.clean] and not signals.touched_by_frontend(results):
            acc.add("a", g, [o for o in c if o.clean])
        judged = {"frontend"} if results["new_findings"] else set()
        judged |= {"metrics"} if acc.summary().metrics.get("m") else set()
        assert judged == sides, (code, judged, sides)


# ----------------------------------------------------------------------------- never pass a broken endpoint


def test_ninety_percent_empty_answers_never_pass(calibrated_golden, tmp_path, cli):
    """18/20 answers `content: ""` in an otherwise normal envelope: used to pass, judged on n=2."""
    golden = calibrated_golden["golden"]

    def empty_with_tokens(req):  # the model generated the answer (logprobs say so); the client got nothing
        s = _sum(req)
        return Reply(content=str(s) if s in (7, 15) else "", logprob_entries=entries([str(s)]))

    def empty_bare(req):  # no logprobs either: only the scores can tell
        s = _sum(req)
        return Reply(content=str(s) if s in (7, 15) else "", logprob_entries=None if s in (7, 15) else [])

    code, out, doc = run_and_compare(tmp_path, cli, golden, empty_with_tokens, SMOKE_RUN, "lost", "--allow-inconclusive")
    assert code == 10 and doc["status"] == "frontend_regression", out
    assert doc["diagnosis"][0]["component"] == "tokenization" and "detokenize_mismatch" in doc["diagnosis"][0]["findings"]
    assert any(re.search(r"smoke: empty_response on 18/20 samples", r) for r in doc["reasons"]), doc["reasons"]
    assert "empty_response" in out

    code, out, doc = run_and_compare(tmp_path, cli, golden, empty_bare, SMOKE_RUN, "bare", "--allow-inconclusive")
    assert code == 13 and doc["status"] == "regression_unattributed", out
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["n"] == 20  # every sample judged, the empty ones as wrong
    assert any("empty_response on" in r for r in doc["reasons"]), doc["reasons"]


def test_every_answer_wrong_with_logprobs_is_unattributed_and_allow_inconclusive_keeps_it_failing(calibrated_golden, tmp_path, cli):
    golden = calibrated_golden["golden"]
    off_by_one = lambda req: Reply(content=str(_sum(req) + 1))  # noqa: E731
    code, out, doc = run_and_compare(tmp_path, cli, golden, off_by_one, SMOKE_RUN, "wrong", "--allow-inconclusive")
    assert code == 13 and doc["status"] == "regression_unattributed" and doc["exit_code"] == 13, out
    assert "outputs part from the golden at token 0 on 20/20 samples: no shared prefix to measure drift" in doc["reason"]
    assert "--logprobs" not in " ".join(doc["reasons"])  # logprobs were there: no advice to add them
    assert "status: regression_unattributed (exit 13)" in out
    from verifier.attribution.document import Comparison
    from verifier.report import ci

    assert 'failures="0"' not in ci.junit_xml(Comparison.from_dict(doc))  # CI sees the failing quality check
    assert ci.STATUS_ICON["regression_unattributed"] not in (ci.STATUS_ICON["inconclusive"], ci.STATUS_ICON["pass"])  # a failing icon


# ----------------------------------------------------------------------------- never blame a healthy engine


def test_a_stop_token_listed_in_the_logprobs_is_no_tokenization_blame(calibrated_golden, tmp_path, cli):
    """vLLM lists `<|im_end|>` as the last logprob token and rightly leaves it out of the content; it also says
    `eos_token`-style finish reasons elsewhere. The same model behind it is not a frontend regression."""
    golden = calibrated_golden["golden"]

    def vllm_like(req):
        s = str(_sum(req))
        return Reply(content=s, finish_reason="eos_token", logprob_entries=entries([s, "<|im_end|>"]))

    code, out, doc = run_and_compare(tmp_path, cli, golden, vllm_like, SMOKE_RUN, "xengine")
    assert doc["status"] in ("pass", "quantization_regression"), out
    assert doc["frontend"]["verdict"] == "pass"
    assert not any(d["component"] == "tokenization" for d in doc["diagnosis"])
    assert doc["suites"]["smoke"]["findings"].get("detokenize_mismatch", {"candidate": 0})["candidate"] == 0
    assert doc["suites"]["smoke"]["metrics"]["accuracy"]["n"] == 20  # every sample judged by the numerics


def test_benign_token_differences_are_accepted_by_the_detokenizer_check():
    from verifier.types import Parsed

    def p(content, toks):
        return Parsed(content=content, reasoning=None, tool_calls=None, finish_reason="stop", usage={},
                      logprobs=[{"token": t, "logprob": -0.1} for t in toks])

    assert contract.detokenize_mismatch(p("Hello world", ["Hello", "Ġworld"])) is None  # byte-level marker
    assert contract.detokenize_mismatch(p("Hello world", ["▁Hello", "▁world"])) is None  # SentencePiece marker
    assert contract.detokenize_mismatch(p("Hi", ["<s>", "Hi", "</s>"])) is None  # BOS and EOS listed
    assert contract.detokenize_mismatch(p("Hi", ["Hi", "<|eot_id|>"])) is None
    assert contract.detokenize_mismatch(p("Hi", ["Hi", ""])) is None  # llama.cpp's end of generation
    assert contract.detokenize_mismatch(p("Hi", ["Hi", "bytes:\\xe2\\x80"])) is None  # vLLM's byte pieces
    assert contract.detokenize_mismatch(p("Bye", ["Hi"])) is not None  # a real difference still counts
    assert contract.detokenize_mismatch(p("", ["Hi"])) is not None  # generated, then lost


# ----------------------------------------------------------------------------- decoding-path change


SENTENCE = ["The", " sum", " is"]
ALT = " equals"


def reference_sentence(req):
    """A healthy greedy engine: every chosen token is its own top one."""
    toks = SENTENCE + [f" {_sum(req)}."]
    return Reply(content="".join(toks), logprob_entries=entries(toks, top=lambda i, t, lp: [{"token": t, "logprob": lp},
                                                                                            {"token": "X", "logprob": lp - 3}]))


def penalised(req):
    """A server-side repetition penalty / sampling default: at token 2 it takes ' equals', which its own (raw)
    distribution rates below the reference's ' is' (returned among the alternatives with the reference's logprob)."""
    toks = ["The", " sum", ALT, f" {_sum(req)}."]
    ref = entries(SENTENCE + [toks[3]])

    def top(i, t, lp):
        if i == 2:
            return [{"token": " is", "logprob": ref[2]["logprob"]}, {"token": ALT, "logprob": -1.5}]
        return [{"token": t, "logprob": lp}]
    e = entries(toks, top=top)
    e[2]["logprob"] = -1.5
    return Reply(content="".join(toks), logprob_entries=e)


def penalised_no_alternatives(req):
    """The same decoding change on an engine that returns no alternatives: every shared prefix identical."""
    toks = ["The", " sum", ALT, f" {_sum(req)}."]
    return Reply(content="".join(toks), logprob_entries=entries(toks))


def batch_shape_drift(req):
    """A healthy engine on another batch shape: small drift everywhere, a near-tie flips at token 2, and the
    chosen token is the candidate's own top one. Numerics, never the frontend."""
    toks = ["The", " sum", ALT, f" {_sum(req)}."]
    e = entries(toks, logprob=lambda i: round(-0.01 * (i % 7) - 0.003, 6),
                top=lambda i, t, lp: [{"token": t, "logprob": lp}, {"token": " is" if i == 2 else "X", "logprob": lp - 0.01}])
    return Reply(content="".join(toks), logprob_entries=e)


SURFACE_RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,responses,messages", "--logprobs", "2",
               "--max-retries", "0"]


@pytest.fixture(scope="module")
def sentence_golden(tmp_path_factory):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("sentence")

    def cli(*args):
        return main([str(a) for a in args]), "", ""
    return build_golden(tmp, cli, reference_sentence, SURFACE_RUN, "sentence")


def test_a_decoding_change_fails_the_frontend_on_every_surface_with_logprobs(sentence_golden, tmp_path, cli):
    code, out, doc = run_and_compare(tmp_path, cli, sentence_golden, penalised, SURFACE_RUN, "pen")
    assert code == 10 and doc["status"] == "frontend_regression", out
    sig = doc["suites"]["smoke"]["signals"]["decoding_changed"]
    assert sig["verdict"] == "fail" and sig["count"] == 20
    ev = next(e for e in doc["frontend"]["evidence"] if e["signal"] == "decoding_changed")
    assert set(ev["modes"]) == {"chat", "responses"}  # the surfaces that carry logprobs, each named
    assert doc["diagnosis"][0]["component"] == "API validation" and "decoding path changed" in doc["diagnosis"][0]["explanation"]
    # the Messages API has no logprobs: said so, not guessed
    assert any("no logprobs on messages" in r and "Messages API returns no logprobs" in r for r in doc["reasons"]), doc["reasons"]
    summary = json.loads((tmp_path / "pen" / "summary.json").read_text())
    assert summary["suites"]["smoke"]["metrics"]["accuracy"]["value"] == 1.0  # every answer right: only the signal saw it


def test_a_decoding_change_without_alternatives_is_seen_by_zero_drift(sentence_golden, tmp_path, cli):
    code, out, doc = run_and_compare(tmp_path, cli, sentence_golden, penalised_no_alternatives, SURFACE_RUN, "pen0")
    assert code == 10 and doc["frontend"]["verdict"] == "fail", out
    ev = [e for e in doc["frontend"]["evidence"] if e["signal"] == "decoding_changed" and e["verdict"] == "fail"]
    assert ev and "decoding path changed" in ev[0]["summary"] and "zero logprob drift" in ev[0]["summary"]
    assert doc["diagnosis"][0]["component"] == "API validation"


def test_batch_shape_drift_is_not_frontend_blame(sentence_golden, tmp_path, cli):
    code, out, doc = run_and_compare(tmp_path, cli, sentence_golden, batch_shape_drift, SURFACE_RUN, "batch")
    assert doc["frontend"]["verdict"] == "pass", out
    assert doc["suites"]["smoke"]["signals"]["decoding_changed"]["count"] == 0
    assert not [e for e in doc["frontend"]["evidence"] if e["signal"] == "decoding_changed" and e["verdict"] != "pass"]
    assert doc["suites"]["smoke"]["drift"]["mean_abs_delta"] > 0  # it did drift: the numerics side judges it


# ----------------------------------------------------------------------------- diagnosis names the root cause


ALL_MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path
WIDE_RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", ALL_MODES, "--max-retries", "0"]


@pytest.fixture(scope="module")
def wide_golden(tmp_path_factory):
    """Every surface and stream mode, with probe results (a sampling-honouring reference), no logprobs."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("wide")

    def cli(*args):
        return main([str(a) for a in args]), "", ""
    def reference(req):  # right sums; the probes' counting prompt gets a deterministic count
        return Reply(content=str(_sum(req)) if "What is" in last_user_text(req) else " ".join(map(str, range(1, 31))))
    return build_golden(tmp, cli, reference, [*WIDE_RUN, "--probes"], "wide", honour_sampling=True)


def gate(cli, golden, responder, out, honour_sampling=False):
    with TestServer(Script(responder, honour_sampling=honour_sampling)) as srv:
        code, text, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--quiet", "--out", out,
                              "--max-retries", "0")
    assert code != 1, err
    return code, text, comparison(out)


def test_temperature_ignored_is_api_validation_first(wide_golden, tmp_path, cli):
    """Identical temperature-0 requests give different outputs: the determinism probe fails, and the same
    non-determinism breaks stream and cross-surface parity on many more samples. The cause ranks first."""
    rng = random.Random(7)

    def ignores_temperature(req):
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", last_user_text(req))
        if m:
            return Reply(content=str(int(m.group(1)) + int(m.group(2)) + rng.choice([0, 0, 1])))
        return Reply(content=" ".join(str(i) for i in range(1, rng.randint(5, 30))))

    code, out, doc = gate(cli, wide_golden, ignores_temperature, tmp_path / "t", honour_sampling=True)
    assert doc["frontend"]["verdict"] == "fail", out
    comps = [d["component"] for d in doc["diagnosis"]]
    assert comps[0] == "API validation", comps
    assert {"stream assembly", "surface translation"} & set(comps[1:]), comps  # the symptoms, ranked after
    assert "probe:temperature_0_deterministic" in doc["diagnosis"][0]["findings"]
    assert "this also explains" in doc["diagnosis"][0]["explanation"]


def test_prompt_tokens_wrong_on_streams_only_is_usage_reporting(wide_golden, tmp_path, cli):
    def stream_usage_off(req):
        pt = prompt_tokens(req)
        # the reference's answers (a probe's counting prompt too: probe texts are compared with the golden's), only
        # the streamed usage wrong
        text = str(_sum(req)) if "What is" in last_user_text(req) else " ".join(map(str, range(1, 31)))
        return Reply(content=text, stream_usage={"prompt_tokens": pt + 7, "completion_tokens": 1, "total_tokens": pt + 8})

    code, out, doc = gate(cli, wide_golden, stream_usage_off, tmp_path / "u", honour_sampling=True)
    assert code == 10, out
    first = doc["diagnosis"][0]
    assert first["component"] == "response formatting & usage", doc["diagnosis"]
    assert "prompt_tokens_mismatch:stream" in first["findings"]
    # streamed records only; the probes name their surfaces: the one that compares streamed with non-streamed usage
    # (chat), and the streamed probe requests on Responses / Messages whose usage reports the same wrong prompt tokens
    assert set(first["modes"]) - {"chat", "responses", "messages"} == {"chat-stream", "responses-stream", "messages-stream"}
    assert "probe:stream_usage_last_chunk" in first["findings"]
    assert not any(d["component"] == "chat template & tokenization" for d in doc["diagnosis"])


@pytest.mark.parametrize("stop", ["<|im_end|>", "</s>", "<|eot_id|>", "<|endoftext|>"])
def test_a_stop_token_left_in_the_content_is_tokenization(wide_golden, tmp_path, cli, stop):
    code, out, doc = gate(cli, wide_golden, lambda req: Reply(content=f"{_sum(req)}{stop}"), tmp_path / "s", honour_sampling=True)
    assert code == 10, out
    assert doc["diagnosis"][0]["component"] == "tokenization", doc["diagnosis"]
    assert "stop_token_in_content" in doc["diagnosis"][0]["findings"]
    assert not any(d["component"] == "tool-call parser" for d in doc["diagnosis"])
    assert set(doc["diagnosis"][0]["modes"]) >= {"chat", "responses", "messages"}
