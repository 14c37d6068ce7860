"""gsm8k suite: data, prompts and scoring are lm-eval's own (proved against lm-eval's evaluator path)."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports datasets / huggingface_hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest

from suites import BUILTIN as SUITES, gsm8k
from suites import lm_eval_adapter as le
from verifier.execution import runner
from verifier.testbed.server import Reply, Script, TestServer
from verifier.types import Parsed


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def parsed(content, reasoning=None, finish="stop"):
    return Parsed(content=content, reasoning=reasoning, tool_calls=None, finish_reason=finish, usage={"prompt_tokens": 1, "completion_tokens": 1})


def gold(doc):
    return doc["answer"].split("####")[-1].strip()


def test_registered_variants():
    assert SUITES["gsm8k"] is gsm8k.SUITE and SUITES["gsm8k_cot"] is gsm8k.SUITE_COT
    assert gsm8k.SUITE.defaults["max_tokens"] >= 1024


def test_loader_on_shared_data(shared_data):
    samples = gsm8k.SUITE.load(str(shared_data / "gsm8k" / "test.jsonl"), False)
    assert len(samples) == 1319
    ids = [s.id for s in samples]
    assert len(set(ids)) == 1319 and ids[0] == "gsm8k/0" and ids[-1] == "gsm8k/1318"
    s0 = samples[0]
    assert s0.target == "18" and "Janet" in s0.messages[-1]["content"]
    # gsm8k_cot_llama: 8 fixed shots as user/assistant turns, then the question.
    assert [m["role"] for m in s0.messages] == ["user", "assistant"] * 8 + ["user"]
    assert s0.messages[1]["content"].endswith("The final answer is 6")
    assert s0.meta["lm_eval_task"] == "gsm8k_cot_llama"
    # A directory holding test.jsonl works too.
    assert [s.id for s in gsm8k.SUITE.load(str(shared_data / "gsm8k"), False)[:3]] == ids[:3]


def test_smoke_subset_is_offline_and_matches_full_set(shared_data):
    smoke = gsm8k.SUITE.load(None, True)
    assert len(smoke) == 20 and len({s.id for s in smoke}) == 20
    full = {s.id: s for s in gsm8k.SUITE.load(str(shared_data / "gsm8k" / "test.jsonl"), False)}
    for s in smoke:  # fixture rows keep their test-split index as id
        assert full[s.id].messages == s.messages and full[s.id].target == s.target
    # --smoke with --data: the same 20 ids, taken from the given file.
    assert [s.id for s in gsm8k.SUITE.load(str(shared_data / "gsm8k" / "test.jsonl"), True)] == [s.id for s in smoke]


def test_cot_variant_is_one_user_message():
    s = gsm8k.SUITE_COT.load(None, True)[0]
    assert len(s.messages) == 1 and s.messages[0]["role"] == "user"
    text = s.messages[0]["content"]
    assert text.startswith("Q: There are 15 trees") and text.count("\nA: ") == 8 and text.endswith("\nA:")
    assert s.meta["lm_eval_task"] == "gsm8k_cot"


def test_bad_data_is_a_value_error(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"q": "x"}) + "\n")
    with pytest.raises(ValueError, match="question"):
        gsm8k.SUITE.load(str(p), False)
    with pytest.raises(FileNotFoundError):
        gsm8k.SUITE.load(str(tmp_path / "missing.jsonl"), False)


def test_request_shape():
    s = gsm8k.SUITE.load(None, True)[0]
    sampling = {"defaults": runner.DEFAULT_SAMPLING, "overrides": {}}
    body = runner.build_request(gsm8k.SUITE, s, "m", sampling, {}, "chat")
    assert body["messages"] == s.messages and body["model"] == "m"
    # lm-eval's until, cut to 4 as local-chat-completions sends it.
    assert body["stop"] == ["<|eot_id|>", "<|start_header_id|>user<|end_header_id|>", "Q:", "</s>"]
    assert body["max_tokens"] == 1024 and body["temperature"] == 0.0
    assert runner.build_request(gsm8k.SUITE_COT, gsm8k.SUITE_COT.load(None, True)[0], "m", sampling, {}, "chat")["stop"] == ["Q:", "</s>", "<|im_end|>"]


def responses_for(g: str) -> list:
    """Scripted replies exercising every branch of lm-eval's two filters and exact_match settings."""
    n = int(g)
    big = f"{n * 1000:,}"
    return [
        f"Step by step: ... The final answer is {g}",
        f"So the total is {g}. The answer is {g}.",
        f"#### {g}",
        "The answer is 42.",
        "The final answer is 42",
        "I cannot tell from the problem.",
        "",
        None,
        f"The final answer is ${g}",
        f"The final answer is ${big}",
        f"The final answer is {g}.00",
        f"{g} is wrong, the answer is {n + 1}",
        f"The answer is {n + 1}, no wait, it is {g}",
        f"The final answer is -{g}",
        f"The final answer is {g}\n\nQ: next question",
        f"THE FINAL ANSWER IS {g}",
        f"The final answer is {g},",
        f"1,{g}",
    ]


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k_cot"])
def test_scores_equal_lm_eval_pipeline(name, shared_data):
    """Per sample and in aggregate, our strict/flexible == lm-eval's evaluator path on the same replies:
    build_all_requests -> resps -> apply_filters -> process_results -> aggregation."""
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:6]]
    variant = gsm8k.VARIANTS[name]
    task = le.local_task(le.builtin_yaml(variant.yaml), rows)
    task.build_all_requests(limit=len(rows), apply_chat_template=True, fewshot_as_multiturn=variant.multiturn,
                            chat_template=lambda msgs, add_generation_prompt=True: json.dumps(msgs))
    insts = sorted(task.instances, key=lambda i: i.doc_id)
    ours = {s.id: s for s in gsm8k.make_suite(name).load(str(shared_data / "gsm8k" / "test.jsonl"), False)[:6]}
    # One lm-eval instance per (doc, scripted reply): re-run the filters per reply.
    theirs: dict[str, list[float]] = {"strict-match": [], "flexible-extract": []}
    mine: dict[str, list[float]] = {"strict_match": [], "flexible_extract": []}
    checked = 0
    for reply_idx in range(len(responses_for("1"))):
        for inst in insts:
            doc = inst.doc
            sample = ours[f"gsm8k/{inst.doc_id}"]
            # Same prompt as lm-eval builds for this doc.
            assert json.loads(inst.arguments[0]) == sample.messages
            text = responses_for(gold(doc))[reply_idx]
            inst.resps = [text]
            inst.filtered_resps = {}
        task.apply_filters()
        for inst in insts:
            sample = ours[f"gsm8k/{inst.doc_id}"]
            v = gsm8k.make_suite(name).score(sample, parsed(inst.resps[0]))
            for filt, metric in gsm8k.METRICS.items():
                ref = task.process_results(inst.doc, [inst.filtered_resps[filt]])["exact_match"]
                assert v.metrics[metric] == ref, (name, inst.resps[0], filt)
                assert v.answer[metric] == inst.filtered_resps[filt]
                theirs[filt].append(ref)
                mine[metric].append(v.metrics[metric])
            checked += 1
    assert checked == 6 * len(responses_for("1"))
    agg = task.aggregation()["exact_match"]
    for filt, metric in gsm8k.METRICS.items():
        assert agg(theirs[filt]) == sum(mine[metric]) / len(mine[metric])
    # The replies really exercise both outcomes of both filters.
    assert 0 < sum(mine["strict_match"]) < len(mine["strict_match"])
    assert sum(mine["strict_match"]) < sum(mine["flexible_extract"]) < len(mine["flexible_extract"])


def test_score_reasons_and_reasoning_fallback():
    s = gsm8k.SUITE.load(None, True)[0]  # target 18
    score = gsm8k.SUITE.score
    v = score(s, parsed("So 16 - 3 - 4 = 9 eggs, 9 * 2 = 18. The final answer is 18"))
    assert (v.score, v.reason, v.metrics) == (1.0, "correct", {"strict_match": 1.0, "flexible_extract": 1.0})
    v = score(s, parsed("The answer is 18."))
    assert v.metrics == {"strict_match": 0.0, "flexible_extract": 1.0} and v.answer == {"strict_match": "[invalid]", "flexible_extract": "18."}
    assert score(s, parsed("The final answer is 19")).reason == "wrong_answer"
    assert score(s, parsed("no idea")).reason == "no_answer"
    # Empty content, answer in reasoning: still extracted for the report (the engine makes it `contract`).
    v = score(s, parsed("", reasoning="9 * 2 = 18. The final answer is 18"))
    assert v.answer == {"strict_match": "18", "flexible_extract": "18"} and v.score == 1.0


def smoke_replies():
    """question prefix -> reply, for the 20 smoke items; the rest answer 1 (no smoke target is 1)."""
    by_idx = {
        0: Reply(content="16 - 3 - 4 = 9; 9 * 2 = 18. The final answer is 18"),
        66: Reply(content="The answer is 48."),
        132: Reply(content="The final answer is 61"),
        198: Reply(content="", reasoning_content="20 + ... = 320. The final answer is 320"),
        264: Reply(content="The final answer is $400"),
        330: Reply(content="I cannot solve this."),
        858: Reply(content="The final answer is 3,430."),
    }
    rows = [json.loads(l) for l in gsm8k.SMOKE.read_text().splitlines()]
    table = {r["question"]: by_idx.get(r["idx"], Reply(content="The final answer is 1")) for r in rows}

    def responder(req):
        text = req["messages"][-1]["content"]
        for q, reply in table.items():
            if q in text:
                return reply
        return Reply(content="?")

    return responder


def test_end_to_end_through_cli(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(Script(smoke_replies())) as srv:
        code, stdout, err = cli("run", "--suite", "gsm8k", "--smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet")
        reqs = list(srv.script.requests)
    assert code == 0, err
    assert len(reqs) == 20 and all(r["max_tokens"] == 1024 and len(r["stop"]) == 4 and len(r["messages"]) == 17 for r in reqs)
    s = json.loads((out / "summary.json").read_text())["suites"]["gsm8k"]
    assert s["outcomes"] == {"content": 19, "contract": 1}
    assert s["findings"].get("answer_in_reasoning") == 1
    m = s["metrics"]
    assert m["strict_match"]["n"] == 19 and m["strict_match"]["value"] == pytest.approx(3 / 19, abs=1e-4)
    assert m["flexible_extract"]["value"] == pytest.approx(4 / 19, abs=1e-4)
    assert s["reasons"]["no_answer"] == 1 and s["reasons"]["answer_in_reasoning"] == 1
    vs = {v["sample_id"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    assert vs["gsm8k/198"]["outcome"] == "contract" and vs["gsm8k/198"]["answer"]["flexible_extract"] == "320"
    assert vs["gsm8k/858"]["metrics"] == {"strict_match": 1.0, "flexible_extract": 1.0}
    assert vs["gsm8k/66"]["metrics"] == {"strict_match": 0.0, "flexible_extract": 1.0}
    # Re-scoring offline gives the same bytes.
    first = (out / "verdicts.jsonl").read_bytes()
    assert cli("score", out)[0] == 0 and (out / "verdicts.jsonl").read_bytes() == first


def test_limit_renders_only_the_selected_prompts(shared_data, monkeypatch):
    """Start-up: rows are read and checked at load, prompts rendered only as far as the selection reaches,
    and those samples are exactly the eagerly built ones."""
    path = str(shared_data / "gsm8k" / "test.jsonl")
    full = gsm8k.SUITE.load(path, False)
    expected = [s.to_json() for s in full[:5]]
    rendered = []
    task = gsm8k.template_task("gsm8k")
    real = task.messages
    monkeypatch.setattr(task, "messages", lambda *a, **k: rendered.append(1) or real(*a, **k))
    samples = gsm8k.SUITE.load(path, False)
    assert [s.to_json() for s in samples[:5]] == expected and len(rendered) == 5
    assert len(samples) == 1319 and len(rendered) == 1319


def test_task_is_built_from_its_yaml_without_the_task_index(monkeypatch):
    """lm-eval's TaskManager indexes ~10k YAMLs; the gsm8k suite builds its task from the one YAML file."""
    from lm_eval.tasks import TaskManager

    def refuse(*a, **k):
        raise AssertionError("TaskManager used")

    monkeypatch.setattr(TaskManager, "__init__", refuse)
    gsm8k.template_task.cache_clear()
    try:
        task = gsm8k.template_task("gsm8k_cot")
        assert task.name == "gsm8k_cot" and task.stop == ["Q:", "</s>", "<|im_end|>"]
    finally:
        gsm8k.template_task.cache_clear()
