"""`verifier lm-eval` speaks lm-eval: --tasks, --model_args, --num_fewshot, --output_path, --log_samples,
and writes lm-eval's own results JSON and samples JSONL beside the run directory."""

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before anything imports datasets / huggingface_hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import pytest

from verifier.testbed.server import Reply, Script, TestServer, arithmetic


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")


def tiny_task(tmp_path):
    """A generate_until task on a local file (no hub): three sums, the server gets one wrong."""
    data = tmp_path / "qa.jsonl"
    data.write_text("".join(json.dumps({"q": f"What is {a} + {b}?", "a": str(a + b)}) + "\n" for a, b in [(1, 2), (3, 4), (5, 6)]))
    yaml_path = tmp_path / "tiny_add.yaml"
    yaml_path.write_text(
        "task: tiny_add\ndataset_path: json\n"
        f"dataset_kwargs:\n  data_files:\n    test: {data}\n  cache_dir: {tmp_path / 'hf-cache'}\n"
        "output_type: generate_until\ntest_split: test\ndoc_to_text: '{{q}}'\ndoc_to_target: '{{a}}'\n"
        "generation_kwargs:\n  until: [\"\\n\\n\"]\n  do_sample: false\n"
        "metric_list:\n  - metric: exact_match\n    aggregation: mean\n    higher_is_better: true\nmetadata:\n  version: 1.0\n")
    return yaml_path


def responder(req):
    return Reply(content="5") if "5 + 6" in req["messages"][-1]["content"] else arithmetic(req)


def test_lm_eval_flags_write_lm_evals_own_files(tmp_path, cli):
    task = tiny_task(tmp_path)
    out = tmp_path / "out"
    with TestServer(Script(responder)) as srv:
        code, stdout, err = cli("lm-eval", "--tasks", task, "--model_args", f"base_url={srv.url}/chat/completions,model=m,num_concurrent=2",
                                "--num_fewshot", 0, "--output_path", out, "--log_samples", "--quiet")
        assert code == 0, err
        assert srv.script.requests and all(r["model"] == "m" for r in srv.script.requests)
    results = list(out.rglob("results_*.json"))
    samples = list(out.rglob("samples_tiny_add_*.jsonl"))
    assert len(results) == 1 and len(samples) == 1
    lm = json.loads(results[0].read_text())
    assert lm["results"]["tiny_add"]["exact_match,none"] == pytest.approx(2 / 3)
    assert lm["n-shot"]["tiny_add"] == 0 and "api_key" not in json.dumps(lm["config"]).lower()
    assert [json.loads(line)["exact_match"] for line in samples[0].read_text().splitlines()] == [1.0, 1.0, 0.0]
    # verifier's run directory beside them, with the same metric for the same responses.
    run = out / "verifier-run"
    ours = json.loads((run / "summary.json").read_text())["suites"]["lm_eval:tiny_add"]["metrics"]["exact_match"]
    assert ours["value"] == pytest.approx(lm["results"]["tiny_add"]["exact_match,none"], abs=1e-4) and ours["n"] == 3
    assert json.loads((run / "run.json").read_text())["endpoint"]["model"] == "m"


def test_lm_eval_flag_errors(tmp_path, cli):
    code, _, err = cli("lm-eval", "--tasks", "x", "--model_args", "base_url=http://h/v1,pretrained=gpt2", "--out", tmp_path / "a")
    assert code == 2 and "pretrained is not supported" in err
    code, _, err = cli("lm-eval", "--tasks", "x", "--model_args", "base_url=http://h/v1,model=m", "--log_samples", "--out", tmp_path / "b")
    assert code == 2 and "--log_samples needs --output_path" in err
    code, _, err = cli("lm-eval", "--tasks", "x", "--model_args", "base_url=http://h/v1,model=m")
    assert code == 2 and "--out" in err


def test_model_args_parsing():
    from suites import lm_eval_files as f

    assert f.parse_model_args("base_url=http://h:1/v1/chat/completions, model=m,tokenized_requests=False") == {
        "base_url": "http://h:1/v1/chat/completions", "model": "m", "tokenized_requests": "False"}
    assert f.chat_base_url("http://h:1/v1/chat/completions/") == "http://h:1/v1"
    assert f.chat_base_url("http://h:1/v1") == "http://h:1/v1"


def test_lm_eval_goldens_compare_and_say_how_to_gate(tmp_path, cli):
    """An lm-eval run blesses, calibrates and compares like any run; gate names the way that works."""
    task = tiny_task(tmp_path)
    with TestServer(Script(responder)) as srv:
        code, _, err = cli("lm-eval", "--tasks", task, "--model_args", f"base_url={srv.url},model=m", "--out", tmp_path / "run", "--quiet")
        assert code == 0, err
        assert cli("bless", tmp_path / "run", "--to", tmp_path / "golden")[0] == 0
        assert cli("calibrate", tmp_path / "golden", "--runs", tmp_path / "run", tmp_path / "run")[0] == 0
        code, out, err = cli("compare", tmp_path / "run", "--golden", tmp_path / "golden")
        assert code == 0, out + err
        code, _, err = cli("gate", "--golden", tmp_path / "golden", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "g", "--quiet")
    assert code == 2 and "verifier lm-eval --tasks tiny_add" in err and "verifier compare" in err


def test_lm_eval_gsm8k_results_file_matches_ours(tmp_path, cli, shared_data):
    """The issue's line, on gsm8k: lm-eval's gsm8k_cot_llama over the shared test file (no hub), 8 docs."""
    from suites import lm_eval_adapter as adapter
    from test_lm_eval_import import N, responder_for

    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:N]]
    task = tmp_path / "gsm8k_local.yaml"
    task.write_text(f"include: {adapter.builtin_yaml('gsm8k/gsm8k-cot-llama.yaml')}\ntask: gsm8k_local\n"
                    f"dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n    test: {shared_data / 'gsm8k' / 'test.jsonl'}\n"
                    f"  cache_dir: {tmp_path / 'hf-cache'}\n")
    with TestServer(Script(responder_for(rows))) as srv:
        code, _, err = cli("lm-eval", "--tasks", task, "--model_args", f"base_url={srv.url}/chat/completions,model=m,max_gen_toks=1024",
                           "--limit", N, "--output_path", tmp_path / "out", "--log_samples", "--quiet")
    assert code == 0, err
    lm = json.loads(next((tmp_path / "out").rglob("results_*.json")).read_text())["results"]["gsm8k_local"]
    ours = json.loads((tmp_path / "out" / "verifier-run" / "summary.json").read_text())["suites"]["lm_eval:gsm8k_local"]["metrics"]
    assert lm["exact_match,strict-match"] == pytest.approx(0.25) and lm["exact_match,flexible-extract"] == pytest.approx(0.5)
    for flt in ("strict-match", "flexible-extract"):  # lm-eval's `metric,filter` is our `metric:filter`
        assert ours[f"exact_match:{flt}"]["value"] == pytest.approx(lm[f"exact_match,{flt}"], abs=1e-4)
        assert ours[f"exact_match:{flt}"]["n"] == N


def test_lm_eval_runs_keep_the_real_wire_bytes(tmp_path, cli):
    """lm-eval's client goes through verifier's recorder: real usage, latency and finish_reason, so a frontend
    fault (usage dropped by the proxy) is seen on lm-eval runs too."""
    from verifier.testbed.proxy import Proxy

    task = tiny_task(tmp_path)
    with TestServer(Script(responder)) as srv, Proxy(srv.url, ["usage_dropped"], seed=0) as broken:
        for name, url in (("clean", srv.url), ("faulty", broken.url)):
            code, _, err = cli("lm-eval", "--tasks", task, "--model_args", f"base_url={url},model=m", "--out", tmp_path / name,
                               "--output_path", tmp_path / f"lm-{name}", "--quiet")
            assert code == 0, err
    lines = [json.loads(x) for x in (tmp_path / "clean" / "responses.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    for x in lines:
        body = json.loads(x["body"])
        assert "x_verifier_imported" not in body and body["usage"]["prompt_tokens"] > 0
        assert x["latency_ms"] > 0 and x["request"]["messages"] and x["request"]["model"] == "m"
    faulty = [json.loads(x) for x in (tmp_path / "faulty" / "verdicts.jsonl").read_text().splitlines()]
    assert all(any(f["code"] == "usage_missing" for f in v["findings"]) for v in faulty)
    clean = [json.loads(x) for x in (tmp_path / "clean" / "verdicts.jsonl").read_text().splitlines()]
    assert not any(f["code"] == "usage_missing" for v in clean for f in v["findings"])
    # lm-eval's own results file names the endpoint, not the recorder in between.
    lm = json.loads(next((tmp_path / "lm-clean").rglob("results_*.json")).read_text())
    assert lm["config"]["model_args"]["base_url"] == srv.url + "/chat/completions"
