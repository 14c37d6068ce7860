"""The gsm8k suite's light lm-eval task: the real ConfigurableTask's prompts, without importing `datasets`."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from suites import gsm8k
from suites import lm_eval_adapter as le
from suites import lm_eval_lite as lite

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import json, sys
from suites import BUILTIN as SUITES
from verifier.execution import runner
from verifier.types import Parsed
suite = SUITES[sys.argv[1]]
samples = suite.load(sys.argv[2], False)[:5]
sampling = {"defaults": runner.DEFAULT_SAMPLING, "overrides": {}}
bodies = [runner.build_request(suite, s, "m", sampling, {}, "chat") for s in samples]
parsed = Parsed(content="The final answer is 18", reasoning=None, tool_calls=None, finish_reason="stop", usage={})
score = suite.score(samples[0], parsed).score
print(json.dumps({"n": len(bodies), "score": score,
                  "loaded": sorted(m for m in ("datasets", "pyarrow", "lm_eval.api.task", "lm_eval.tasks") if m in sys.modules)}))
"""


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k_cot"])
def test_requests_and_scores_do_not_import_datasets(name, shared_data):
    """Start-up: preparing gsm8k's requests (and judging one) loads neither `datasets` nor lm-eval's task module."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE, name, str(shared_data / "gsm8k" / "test.jsonl")],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got == {"n": 5, "score": 1.0, "loaded": []}


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k_cot"])
def test_prompts_and_config_equal_configurable_task(name, shared_data):
    """Every prompt of the first 150 rows, both chat layouts and the plain-text one, as the real task renders them."""
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:150]]
    yaml = le.builtin_yaml(gsm8k.VARIANTS[name].yaml)
    real = le.local_task(yaml, rows)
    light = lite.yaml_task(yaml, rows[0])
    assert (light.config.task, light.VERSION, le.chat_stop(light)) == (real.config.task, real.VERSION, le.chat_stop(real))
    with le.compiled_templates():
        for doc in rows:
            for multiturn in (True, False):
                assert le.chat_messages(light, doc, multiturn=multiturn) == le.chat_messages(real, doc, multiturn=multiturn)
            assert light.fewshot_context(doc, 8) == real.fewshot_context(doc, 8)
            assert light.doc_to_target(doc) == real.doc_to_target(doc)
    for text in ("The final answer is 18", "The answer is 18.", "#### 18", "no idea", ""):
        assert le.lm_eval_judge(light, rows[0], text) == le.lm_eval_judge(real, rows[0], text)


def test_unsupported_configs_are_refused():
    """What the light task cannot render as ConfigurableTask does is refused, never approximated."""
    probe = {"question": "q", "answer": "#### 1"}
    with pytest.raises(ValueError, match="few-shot examples from a dataset split"):
        lite.yaml_task(le.builtin_yaml("gsm8k/gsm8k.yaml"), probe)
    base = {"task": "t", "doc_to_text": "{{question}}", "doc_to_target": "answer"}
    assert lite.supports(base) is None
    assert "doc_to_choice" in lite.supports({**base, "doc_to_choice": ["a", "b"]})
    assert "output_type" in lite.supports({**base, "output_type": "multiple_choice"})
    with pytest.raises(ValueError, match="list targets"):
        lite.YamlTask({**base, "doc_to_target": "{{ ['a', 'b'] }}"}, probe)
