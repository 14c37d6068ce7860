"""lm-eval passthrough against the project's TestServer, the importer, and parity with the gsm8k suite."""

import argparse
import copy
import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports datasets / huggingface_hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest

from suites import BUILTIN as SUITES, gsm8k
from suites import lm_eval_adapter as adapter
from suites import lm_eval_import as le
from verifier.execution import journal, scoring
from verifier.cli import lm_eval as cli_lm_eval
from verifier.testbed.server import Reply, Script, TestServer

TASK = "gsm8k_cot_llama"
N = 8


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


@pytest.fixture
def rows(shared_data):
    lines = (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:N]
    return [json.loads(l) for l in lines]


def gold(doc):
    return doc["answer"].split("####")[-1].strip()


def responder_for(rows):
    """Right (strict), right (flexible only), wrong, no number: cycling over the docs."""
    table = {}
    for i, r in enumerate(rows):
        g = gold(r)
        table[r["question"]] = [
            Reply(content=f"Working... The final answer is {g}"),
            Reply(content=f"The answer is {g}."),
            Reply(content=f"The final answer is {int(g) + 7:,}"),
            Reply(content="I am not sure."),
        ][i % 4]

    def responder(req):
        text = req["messages"][-1]["content"]
        return next((rep for q, rep in table.items() if q in text), Reply(content="?"))

    return responder


@pytest.fixture
def lm_run(rows, tmp_path):
    """lm-eval's simple_evaluate with local-chat-completions against the TestServer, on local data."""
    with TestServer(Script(responder_for(rows))) as srv:
        task = adapter.local_task(adapter.builtin_yaml("gsm8k/gsm8k-cot-llama.yaml"), rows)
        results = adapter.run_task([task], srv.url, "test-model", limit=N, max_gen_toks=1024)
        yield results, list(srv.script.requests), srv


def test_passthrough_import_and_score(lm_run, tmp_path):
    results, reqs, srv = lm_run
    assert len(reqs) == N and all(r["max_tokens"] == 1024 and r["temperature"] == 0 for r in reqs)
    out = le.import_samples(results["samples"], None, tmp_path / "imp", "test-model", srv.url,
                            lm_eval_config=results.get("configs"))
    hdr = json.loads((out / "run.json").read_text())
    name = f"lm_eval:{TASK}"
    assert list(hdr["suites"]) == [name] and hdr["suites"][name]["samples"] == N
    assert hdr["endpoint"]["model"] == "test-model" and hdr["imported_from"]["tool"] == "lm-eval"
    samples = journal.read_samples(out)
    exchanges = journal.read_exchanges(out)
    assert len(samples) == N and len(exchanges) == N
    ex = exchanges[(name, f"{TASK}/0", 0, "chat")]
    body = json.loads(ex.body)
    assert body["choices"][0]["message"]["content"].endswith("The final answer is 18") and body[le.IMPORTED_MARK] == "lm-eval"
    assert ex.request["messages"] == reqs[0]["messages"] and ex.request["stop"] == reqs[0]["stop"]

    verdicts, summary = le.score_imported(out)
    scoring.write_scores(out, verdicts, summary)
    s = summary.suites[name]
    assert s.outcomes == {"content": N} and s.findings == {}
    lm = results["results"][TASK]
    assert s.metrics["exact_match:strict-match"]["value"] == pytest.approx(float(lm["exact_match,strict-match"]), abs=1e-4)
    assert s.metrics["exact_match:flexible-extract"]["value"] == pytest.approx(float(lm["exact_match,flexible-extract"]), abs=1e-4)
    assert s.metrics["exact_match:strict-match"]["value"] == 0.25 and s.metrics["exact_match:flexible-extract"]["value"] == 0.5
    v0 = next(v for v in verdicts if v.sample_id == f"{TASK}/0")
    assert v0.reason == "correct" and v0.answer == {"strict-match": "18", "flexible-extract": "18"}
    # Offline re-scoring is byte-identical (goldens and compare rely on it).
    again = scoring.score_run(out, {name: le.SUITE})
    assert [v.to_json() for v in again[0]] == [v.to_json() for v in verdicts] and again[1].to_json() == summary.to_json()


def test_passthrough_equals_gsm8k_suite(lm_run, rows, tmp_path, cli, shared_data):
    """Same docs, same scripted endpoint: the gsm8k suite sends lm-eval's exact messages and stop
    sequences, and scores every sample exactly as lm-eval did."""
    results, lm_reqs, _ = lm_run
    with TestServer(Script(responder_for(rows))) as srv:
        code, _, err = cli("run", "--suite", "gsm8k", "--data", shared_data / "gsm8k" / "test.jsonl", "--limit", N,
                           "--base-url", srv.url, "--model", "test-model", "--out", tmp_path / "ours", "--quiet")
        our_reqs = list(srv.script.requests)
    assert code == 0, err
    key = lambda r: r["messages"][-1]["content"]  # noqa: E731
    for mine, theirs in zip(sorted(our_reqs, key=key), sorted(lm_reqs, key=key)):
        assert mine["messages"] == theirs["messages"] and mine["stop"] == theirs["stop"]
        assert mine["seed"] == theirs["seed"] and mine["temperature"] == theirs["temperature"]
    lm_per_doc = {}
    for row in results["samples"][TASK]:
        lm_per_doc.setdefault(row["doc_id"], {})[gsm8k.METRICS[row["filter"]]] = float(row["exact_match"])
    verdicts = [json.loads(l) for l in (tmp_path / "ours" / "verdicts.jsonl").read_text().splitlines()]
    assert len(verdicts) == N
    for v in verdicts:
        assert v["outcome"] == "content"
        assert v["metrics"] == lm_per_doc[int(v["sample_id"].split("/")[1])], v["sample_id"]


def test_import_lm_eval_saved_samples_file(lm_run, tmp_path, capsys):
    """The samples_<task>_<date>.jsonl that lm-eval writes (via its own EvaluationTracker) imports the same."""
    from lm_eval.loggers import EvaluationTracker

    results, _, _ = lm_run
    # Exactly lm-eval's CLI save sequence (lm_eval/_cli/run.py) with --output_path --log_samples.
    res = copy.deepcopy(results)
    samples = res.pop("samples")
    tracker = EvaluationTracker(output_path=str(tmp_path / "lm" / "results.json"))
    tracker.save_results_aggregated(results=res, samples=samples)
    for task_name in res["configs"]:
        tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
    files = list((tmp_path / "lm").glob(f"samples_{TASK}_*.jsonl"))
    assert len(files) == 1

    p = argparse.ArgumentParser()
    cli_lm_eval.add_arguments(p)
    a = p.parse_args(["--task", TASK, "--import-samples", str(files[0]), "--model", "test-model", "--out", str(tmp_path / "f"), "--quiet"])
    assert cli_lm_eval.handle(a) == 0
    assert f"lm_eval:{TASK}" in capsys.readouterr().out
    from_file = json.loads((tmp_path / "f" / "summary.json").read_text())["suites"][f"lm_eval:{TASK}"]
    direct = le.import_samples(results["samples"], TASK, tmp_path / "d", "test-model", "")
    assert from_file["metrics"] == le.score_imported(direct)[1].suites[f"lm_eval:{TASK}"].metrics
    s_file = journal.read_samples(tmp_path / "f")
    s_direct = journal.read_samples(direct)
    assert {k: (s.messages, s.meta["lm_eval"]) for k, s in s_file.items()} == {k: (s.messages, s.meta["lm_eval"]) for k, s in s_direct.items()}
    # Re-importing into an existing run directory is refused.
    from verifier.errors import UsageError

    with pytest.raises(UsageError, match="already holds a run"):
        cli_lm_eval.handle(a)


def test_run_command_with_yaml_task(rows, tmp_path, capsys):
    """`verifier lm-eval --task <yaml>`: a custom generate_until task on a local file, no hub, no task index."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"q": f"What is {a} + {b}?", "a": str(a + b)}) + "\n" for a, b in [(1, 2), (3, 4), (5, 6)]))
    yaml_path = tmp_path / "tiny_add.yaml"
    yaml_path.write_text(
        "task: tiny_add\n"
        "dataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n  cache_dir: {tmp_path / 'hf-cache'}\n"
        "output_type: generate_until\n"
        "test_split: test\n"
        "doc_to_text: '{{q}}'\n"
        "doc_to_target: '{{a}}'\n"
        "generation_kwargs:\n  until: [\"\\n\\n\"]\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n"
    )
    from verifier.testbed.server import arithmetic

    with TestServer(Script(lambda req: Reply(content="5") if "5 + 6" in req["messages"][-1]["content"] else arithmetic(req))) as srv:
        p = argparse.ArgumentParser()
        cli_lm_eval.add_arguments(p)
        a = p.parse_args(["--task", str(yaml_path), "--base-url", srv.url, "--model", "m", "--out", str(tmp_path / "r"), "--concurrency", "2", "--quiet"])
        assert cli_lm_eval.handle(a) == 0
        assert srv.script.requests[0]["stop"] == ["\n\n"]
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["lm_eval:tiny_add"]
    assert s["metrics"]["exact_match"]["value"] == pytest.approx(2 / 3, abs=1e-4) and s["metrics"]["exact_match"]["n"] == 3
    assert s["reasons"] == {"correct": 2, "wrong_answer": 1}


def test_lm_eval_suite_entry(cli, server, tmp_path):
    assert SUITES["lm_eval"] is le.SUITE and "lm-eval passthrough" in le.SUITE.description
    with pytest.raises(ValueError, match="verifier lm-eval --task"):
        le.SUITE.load(None, False)
    code, _, err = cli("run", "--suite", "lm_eval", "--base-url", server.url, "--model", "m", "--out", tmp_path / "x", "--quiet")
    assert code == 2 and "verifier lm-eval --task" in err
    from suites import lookup

    assert lookup("lm_eval:gsm8k") is le.SUITE  # a run's `lm_eval:<task>` is scored by this suite


def test_importer_refuses_non_generative_logs(tmp_path):
    row = {"doc_id": 0, "doc": {}, "target": 1, "arguments": [["ctx", " A"]], "resps": [[[-1.5, True]]],
           "filtered_resps": [[-1.5, True]], "filter": "none", "metrics": ["acc"], "acc": 1.0}
    with pytest.raises(ValueError, match="generate_until"):
        le.import_samples([row], "mc_task", tmp_path / "x", "m", "")


def test_local_task_refuses_fewshot_from_missing_split():
    with pytest.raises(ValueError, match="train"):
        adapter.local_task(adapter.builtin_yaml("gsm8k/gsm8k.yaml"), [{"question": "q", "answer": "#### 1"}])


def test_imported_scorer_returns_a_judgement():
    from verifier.types import Judgement, Parsed

    s = le.Sample(id="t/0", messages=[], meta={"lm_eval": {"task": "t", "metrics": {"exact_match": 1.0}, "filtered": {"none": "4"},
                                                           "primary": "exact_match"}})
    j = le.score(s, Parsed(content="4", reasoning=None, tool_calls=None, finish_reason="stop", usage=None))
    assert isinstance(j, Judgement) and (j.score, j.answer, j.reason) == (1.0, "4", "correct")
