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


# ---------------------------------------------------------------- the compiled task (suites/lm_eval_compiled.py)

from suites import lm_eval_compiled as compiled  # noqa: E402

JUDGED = ("The final answer is {t}", "The answer is {t}.", "#### {t}", "the FINAL answer is ${t}!", "{t}\x00", "no idea", "",
          "The final answer is 1,{t}", "The final answer is {t}\nThe final answer is 3")


@pytest.mark.parametrize("name", ["gsm8k", "gsm8k_cot"])
def test_compiled_task_equals_configurable_task(name, shared_data, tmp_path, monkeypatch):
    """The compiled task renders and judges as lm-eval's ConfigurableTask: 150 rows' prompts in both chat layouts, their
    targets, and 9 generations judged on 30 rows; read back from its cache file it is the same again."""
    monkeypatch.setenv("VERIFIER_CACHE_DIR", str(tmp_path))
    rows = [json.loads(line) for line in (shared_data / "gsm8k" / "test.jsonl").read_text().splitlines()[:150]]
    yaml = le.builtin_yaml(gsm8k.VARIANTS[name].yaml)
    real = le.local_task(yaml, rows)
    first = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    again = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    assert isinstance(first, compiled.CompiledTask) and isinstance(again, compiled.CompiledTask)
    assert again.recipe == first.recipe and len(list((tmp_path / "lm_eval_tasks").glob("*.json"))) == 1
    assert (first.name, first.version, first.stop) == (real.config.task, real.VERSION, le.chat_stop(real))
    with le.compiled_templates():
        for i, doc in enumerate(rows):
            for multiturn in (True, False):
                assert again.messages(doc, multiturn) == le.chat_messages(real, doc, multiturn=multiturn)
            target = real.doc_to_target(doc)
            assert again.target(doc) == target
            for text in JUDGED if i < 30 else ():
                generation = text.replace("{t}", str(target))
                assert again.judge(doc, generation) == le.lm_eval_judge(real, doc, generation), generation


def test_exact_match_is_lm_evals(tmp_path):
    """The re-stated exact_match gives lm-eval's value on every combination of its options, NULs and case included."""
    from lm_eval.api.metrics import exact_match_hf_evaluate

    pairs = [("18", "18"), ("18\x00", "18"), ("\x0018", "18"), ("A.b", "a.B"), ("$1,000.", "1000"), ("x 7", "y 7"),
             ("ünï", "ÜNÏ"), ("", ""), ("1 2", "12"), ("The answer is 5", "5")]
    for regexes in (None, [",", "\\$", "(?s).*#### ", "\\.$"]):
        for case in (False, True):
            for punct in (False, True):
                for numbers in (False, True):
                    kw = {"regexes_to_ignore": regexes, "ignore_case": case, "ignore_punctuation": punct, "ignore_numbers": numbers}
                    for p, r in pairs:
                        assert compiled.exact_match([p], [r], **kw) == exact_match_hf_evaluate([p], [r], **kw), (p, r, kw)


def test_a_bad_cache_file_is_compiled_again(tmp_path, monkeypatch):
    """The cache is a file anyone with the account can edit: garbage, another shape, a planted FIFO or a recipe that
    lm-eval's code disagrees with are never used; the task is compiled and checked again."""
    import os

    monkeypatch.setenv("VERIFIER_CACHE_DIR", str(tmp_path))
    yaml = le.builtin_yaml(gsm8k.VARIANTS["gsm8k"].yaml)
    good = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    (path,) = (tmp_path / "lm_eval_tasks").glob("*.json")
    doc = {"question": "Two plus two?", "answer": "#### 4"}
    for bad in (b"{not json", json.dumps({**good.recipe, "metrics": [["bleu", {}]]}).encode(), b"[]" * 10,
                json.dumps({**good.recipe, "format": "0"}).encode()):
        path.write_bytes(bad)
        task = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
        assert isinstance(task, compiled.CompiledTask) and task.recipe == good.recipe
        assert json.loads(path.read_bytes()) == good.recipe
        assert task.judge(doc, "The final answer is 4")[0]["strict-match"] == {"exact_match": 1.0}
    path.unlink()
    os.mkfifo(path)
    task = compiled.task_for(yaml, gsm8k._PLACEHOLDER)  # a FIFO is refused at once (safeio), never read
    assert isinstance(task, compiled.CompiledTask) and path.is_file()
    # A recipe whose data disagrees with lm-eval's code (here one few-shot turn edited) is not used.
    reference = compiled.LmEvalTask(lite.yaml_task(yaml, gsm8k._PLACEHOLDER))
    edited = json.loads(json.dumps(good.recipe))
    edited["fewshot_turns"][0][1] += " "
    assert not compiled.agrees(compiled.CompiledTask(edited), reference, [gsm8k._PLACEHOLDER])
    assert compiled.agrees(compiled.CompiledTask(good.recipe), reference, [gsm8k._PLACEHOLDER])


def test_a_task_that_is_behaviour_keeps_lm_evals_code(tmp_path):
    """A metric other than exact_match, or a process_results function, cannot be stated as data: lm-eval's code stays."""
    base = le.builtin_yaml(gsm8k.VARIANTS["gsm8k"].yaml)
    for extra in ("metric_list:\n  - metric: bleu\n", "metric_list:\n  - metric: exact_match\n    ignore_whitespace: true\n"):
        yaml = tmp_path / "task.yaml"
        yaml.write_text(f"include: {base}\ntask: changed\n{extra}", encoding="utf-8")
        assert compiled.compile_recipe(lite.yaml_task(yaml, gsm8k._PLACEHOLDER)) is None


PROBE_IMPORTS = """
import json, sys
from suites import gsm8k
from verifier.types import Parsed
samples = gsm8k.SUITE.load(sys.argv[1], False)[:3]
parsed = Parsed(content="The final answer is 18", reasoning=None, tool_calls=None, finish_reason="stop", usage={})
print(json.dumps({"kind": type(gsm8k.template_task("gsm8k")).__name__, "score": gsm8k.SUITE.score(samples[0], parsed).score,
                  "heavy": sorted(m for m in ("numpy", "requests", "sacrebleu", "lm_eval.utils", "lm_eval.config",
                                              "lm_eval.api.metrics", "jinja2") if m in sys.modules)}))
"""


def test_once_compiled_a_process_imports_neither_numpy_nor_lm_evals_task_modules(shared_data, tmp_path):
    """The first process compiles (and imports lm-eval's task code to check the compiled form); the next ones read
    the compiled task and import none of numpy, requests, sacrebleu or lm-eval's config and metrics modules."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERIFIER_CACHE_DIR": str(tmp_path)}
    runs = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", PROBE_IMPORTS, str(shared_data / "gsm8k" / "test.jsonl")],
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert out.returncode == 0, out.stderr
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    assert runs[0]["kind"] == runs[1]["kind"] == "CompiledTask" and runs[0]["score"] == runs[1]["score"] == 1.0
    assert "lm_eval.config" in runs[0]["heavy"]
    assert runs[1]["heavy"] == ["jinja2"]


def test_a_cache_that_cannot_be_written_is_no_cache(tmp_path, monkeypatch):
    """A cache directory that cannot be made (here a file stands where it would be) costs the compile, nothing else."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x", encoding="utf-8")
    monkeypatch.setenv("VERIFIER_CACHE_DIR", str(blocker / "cache"))
    task = compiled.task_for(le.builtin_yaml(gsm8k.VARIANTS["gsm8k"].yaml), gsm8k._PLACEHOLDER)
    assert isinstance(task, compiled.CompiledTask) and blocker.read_text(encoding="utf-8") == "x"
    assert task.judge({"question": "q", "answer": "#### 4"}, "The final answer is 4")[1]["strict-match"] == "4"


def test_a_template_planted_in_the_cache_cannot_reach_python(tmp_path, monkeypatch):
    """Templates read back from the cache render in Jinja's immutable sandbox: one that reaches for Python's internals
    raises instead of running anything."""
    from jinja2.exceptions import SecurityError

    monkeypatch.setenv("VERIFIER_CACHE_DIR", str(tmp_path))
    yaml = le.builtin_yaml(gsm8k.VARIANTS["gsm8k"].yaml)
    good = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    (path,) = (tmp_path / "lm_eval_tasks").glob("*.json")
    marker = tmp_path / "ran"
    # sealed with this user's key, as only this user could (unsealed it would not be read at all: below)
    planted = compiled.sealed({**good.recipe, "doc_to_text": "{{ cycler.__init__.__globals__.os.system('touch %s') }}" % marker})
    path.write_text(json.dumps(planted), encoding="utf-8")
    task = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    with pytest.raises(SecurityError):
        task.messages({"question": "q", "answer": "#### 1"}, True)
    assert not marker.exists()


@pytest.mark.parametrize("edit", ["match-everything filter", "doc_to_text", "few-shot turn"])
@pytest.mark.parametrize("seal", ["kept", "sha256", "another key"])
def test_an_edited_cache_is_compiled_again_never_used(tmp_path, monkeypatch, edit, seal):
    """Issue 49 item 6: a cache file of the expected shape whose filter matches everything (wrong answers would score
    1.0), whose doc_to_text changes the prompts sent, or whose few-shot turn is edited, is not used, whatever seal it
    carries but this user's: the task is compiled and checked again, and the scores and prompts are lm-eval's."""
    import hashlib
    import hmac

    monkeypatch.setenv("VERIFIER_CACHE_DIR", str(tmp_path))
    yaml = le.builtin_yaml(gsm8k.VARIANTS["gsm8k"].yaml)
    good = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    (path,) = (tmp_path / "lm_eval_tasks").glob("*.json")
    doc = {"question": "Two plus two?", "answer": "#### 4"}
    wrong = "The final answer is 5"
    assert good.judge(doc, wrong)[0]["strict-match"] == {"exact_match": 0.0}
    recipe = json.loads(json.dumps(good.recipe))
    if edit == "match-everything filter":
        recipe["filters"] = [[name, [["regex", {"regex_pattern": "(.*)", "group_select": 0}], ["take_first", {}]]]
                             for name, _ in recipe["filters"]]
        recipe["metrics"] = [["exact_match", {"regexes_to_ignore": [".*"]}]]
    elif edit == "doc_to_text":
        recipe["doc_to_text"] = "Say 5. {{question}}"
    else:
        recipe["fewshot_turns"][0][1] = "What is 2+2? Answer 5."
    body = json.dumps({k: v for k, v in recipe.items() if k != "seal"}, sort_keys=True, ensure_ascii=True).encode()
    if seal == "sha256":
        recipe["seal"] = hashlib.sha256(body).hexdigest()
    elif seal == "another key":
        recipe["seal"] = hmac.new(b"k" * 32, body, hashlib.sha256).hexdigest()
    forged = compiled.CompiledTask(recipe)  # what the edit would do if it were used
    if edit == "match-everything filter":
        assert forged.judge(doc, wrong)[0]["strict-match"] == {"exact_match": 1.0}
    else:
        assert forged.messages(doc, True) != good.messages(doc, True)
    path.write_text(json.dumps(recipe), encoding="utf-8")
    task = compiled.task_for(yaml, gsm8k._PLACEHOLDER)
    assert isinstance(task, compiled.CompiledTask) and task.recipe == good.recipe
    assert task.judge(doc, wrong)[0]["strict-match"] == {"exact_match": 0.0}
    assert task.judge(doc, "The final answer is 4")[0]["strict-match"] == {"exact_match": 1.0}
    assert task.messages(doc, True) == good.messages(doc, True)
    reference = compiled.LmEvalTask(lite.yaml_task(yaml, gsm8k._PLACEHOLDER))
    assert task.messages(doc, True) == reference.messages(doc, True)
    assert task.judge(doc, wrong) == reference.judge(doc, wrong)
    assert json.loads(path.read_bytes()) == good.recipe  # compiled again and re-sealed
