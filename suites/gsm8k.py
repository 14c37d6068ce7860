"""GSM8K (1,319 grade-school math problems, test split) with lm-eval's prompts and scoring.

Nothing here re-types lm-eval's task: prompts come from lm-eval's own task YAML and prompt helpers, and answers
are judged by lm-eval's own filter ensembles and exact_match. The task is built without `lm_eval.api.task`, whose
`datasets` import delayed the first request by seconds (suites/lm_eval_lite.py), and compiled once to data that is
checked against lm-eval's code (suites/lm_eval_compiled.py), so a run imports neither numpy nor lm-eval's task
modules. So `strict_match` and `flexible_extract` are lm-eval's `exact_match,strict-match` and
`exact_match,flexible-extract`, sample for sample (the tests compare against the real ConfigurableTask).

Two prompt variants, one suite name each (the Suite interface has no options, and a name keeps
the choice visible in run.json and goldens):

- `gsm8k` (default): lm-eval task `gsm8k_cot_llama`: 8 fixed chain-of-thought examples as
  user/assistant turns ("... The final answer is N"), as lm-eval sends them to a chat endpoint
  with --apply_chat_template --fewshot_as_multiturn. Endpoints are chat, so this is the fair format.
- `gsm8k_cot`: lm-eval task `gsm8k_cot`: the classic 8-shot "Q: ... A: ... The answer is N."
  prompt collapsed into one user message (lm-eval with --apply_chat_template, no multiturn).

Plain lm-eval `gsm8k` (5-shot from the *train* split) is not offered: its examples need the train
split, which is not available offline; both variants above carry their examples in the YAML.

Request: `stop` is lm-eval's `until` cut to 4 (exactly what local-chat-completions sends;
e.g. "Q:" ends a model that starts inventing the next question). max_tokens defaults to 1024,
not lm-eval's 256, which truncates chain of thought on verbose models (a deliberate difference).

Score: `flexible_extract` (the last number in the reply): it measures arithmetic, while
`strict_match` also measures following the answer format, which a chat-template change moves
on its own. Both are reported. When `content` is empty and the answer sits in
`reasoning_content`, the answer is still extracted from the reasoning for the report; the
engine turns the outcome into `contract` (finding `answer_in_reasoning`).

Data: `datasets.load_dataset("openai/gsm8k", "main", split="test")` by default, `--data PATH`
for a local JSONL of {question, answer} (or a directory holding test.jsonl). Ids are
`gsm8k/<row index>` in the test split. `--smoke`: suites/data/gsm8k_smoke.jsonl, 20 rows
(indices 0, 66, ..., 1254) copied from openai/grade-school-math @ 3101c7d, MIT License (c) 2021 OpenAI.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from verifier.types import Judgement, Parsed, Sample, Suite

import suites.hub as hub
import suites.lm_eval_adapter as le
import suites.lm_eval_compiled as compiled
from .lazy import LazySamples

HERE = Path(__file__).parent
SMOKE = HERE / "data" / "gsm8k_smoke.jsonl"
HF_PATH, HF_NAME, HF_SPLIT = "openai/gsm8k", "main", "test"
# lm-eval's filter names -> our metric names (stable; compare and CI read them).
METRICS = {"strict-match": "strict_match", "flexible-extract": "flexible_extract"}
PRIMARY = "flexible_extract"
INVALID = "[invalid]"  # lm-eval's RegexFilter fallback when nothing matched


@dataclass(frozen=True)
class Variant:
    yaml: str
    """Task YAML inside lm-eval's tasks directory."""
    multiturn: bool
    """Few-shot examples as separate user/assistant turns (lm-eval --fewshot_as_multiturn)."""
    description: str


VARIANTS: dict[str, Variant] = {
    "gsm8k": Variant("gsm8k/gsm8k-cot-llama.yaml", True,
                     "GSM8K test (1,319), lm-eval gsm8k_cot_llama: 8-shot chat CoT turns; strict/flexible exact match"),
    "gsm8k_cot": Variant("gsm8k/gsm8k-cot.yaml", False,
                         "GSM8K test (1,319), lm-eval gsm8k_cot: 8-shot Q/A CoT in one user message"),
}

# lm-eval probes the first doc when a task is built; the template task never evaluates it.
_PLACEHOLDER = {"question": "placeholder", "answer": "#### 0"}


@lru_cache(maxsize=None)
def template_task(name: str) -> compiled.CompiledTask | compiled.LmEvalTask:
    """The lm-eval task of a variant, built once, offline. Prompts and judging only need its config, so it is
    lm-eval's YAML on lm-eval's prompt, filter and metric code without `lm_eval.api.task` and `datasets`
    (suites/lm_eval_lite.py), compiled to data and checked against that code (suites/lm_eval_compiled.py):
    the first request goes out seconds sooner, and a run imports neither numpy nor lm-eval's task modules."""
    return compiled.task_for(le.builtin_yaml(VARIANTS[name].yaml), _PLACEHOLDER)


def read_rows(data: str | None, smoke: bool) -> list[tuple[int, dict[str, Any]]]:
    """(row index in the test split, {question, answer}) from the smoke fixture, a local file or the hub."""
    if smoke and not data:
        rows = [json.loads(line) for line in SMOKE.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [(int(r["idx"]), {"question": r["question"], "answer": r["answer"]}) for r in rows]
    if data:
        path = Path(data)
        if path.is_dir():
            path = path / "test.jsonl"
        with path.open(encoding="utf-8") as f:  # FileNotFoundError -> the CLI's usage error
            raw = [json.loads(line) for line in f if line.strip()]
    else:
        def download() -> list[dict[str, Any]]:
            import datasets

            return list(datasets.load_dataset(HF_PATH, HF_NAME, split=HF_SPLIT))

        raw = hub.load(f"gsm8k: hub dataset {HF_PATH} ({HF_NAME}, {HF_SPLIT})", download, repo=HF_PATH)
    out = []
    for i, r in enumerate(raw):
        if not isinstance(r, dict) or not isinstance(r.get("question"), str) or not isinstance(r.get("answer"), str):
            raise ValueError(f"row {i}: expected string fields 'question' and 'answer'")
        out.append((i, {"question": r["question"], "answer": r["answer"]}))
    if smoke:  # --smoke with --data: the same 20 indices from the given file
        keep = {i for i, _ in read_rows(None, True)}
        out = [(i, r) for i, r in out if i in keep]
    return out


def make_load(name: str) -> Callable[[str | None, bool], Sequence[Sample]]:
    def load(data: str | None = None, smoke: bool = False) -> Sequence[Sample]:
        """Rows are read and checked now; each prompt is rendered when the selection reaches it
        (`--limit 5` renders 5 of 1,319: see suites/lazy.py)."""
        rows = read_rows(data, smoke)  # first: a missing dataset is reported before lm-eval is imported
        task = template_task(name)
        multiturn = VARIANTS[name].multiturn

        def make(row: tuple[int, dict[str, Any]]) -> list[Sample]:
            return [_sample(task, row[0], row[1], multiturn)]

        return LazySamples((), rows, make)

    return load


def _sample(task: compiled.CompiledTask | compiled.LmEvalTask, i: int, doc: dict[str, Any], multiturn: bool) -> Sample:
    return Sample(
        id=f"gsm8k/{i}",
        messages=task.messages(doc, multiturn),
        target=task.target(doc),
        # The doc is what lm-eval's process_results reads; the task name and version pin the prompt.
        meta={"doc": doc, "lm_eval_task": task.name, "lm_eval_task_version": task.version},
    )


def make_request(name: str) -> Callable[[Sample], dict[str, Any]]:
    def request(sample: Sample) -> dict[str, Any]:
        return {"messages": sample.messages, "stop": list(template_task(name).stop)}

    return request


def response_text(parsed: Parsed) -> str:
    """What lm-eval would judge: the content. If content is empty, the reasoning, so the report shows
    what the model answered (the engine still marks the verdict `contract`: answer_in_reasoning)."""
    if (parsed.content or "").strip():
        return parsed.content or ""
    return parsed.reasoning or parsed.content or ""


def make_score(name: str) -> Callable[[Sample, Parsed], Judgement]:
    def score(sample: Sample, parsed: Parsed) -> Judgement:
        metrics, filtered = template_task(name).judge(sample.meta["doc"], response_text(parsed))
        ours = {METRICS[f]: float(m["exact_match"]) for f, m in metrics.items()}
        answer = {METRICS[f]: v for f, v in filtered.items()}
        ok = ours[PRIMARY] == 1.0
        reason = "correct" if ok else ("no_answer" if answer[PRIMARY] == INVALID else "wrong_answer")
        return Judgement(score=ours[PRIMARY], answer=answer, reason=reason, metrics=ours)

    return score


def make_suite(name: str) -> Suite:
    return Suite(name=name, version="1", load=make_load(name), request=make_request(name), score=make_score(name),
                 description=VARIANTS[name].description, defaults={"max_tokens": 1024})


SUITE = make_suite("gsm8k")
SUITE_COT = make_suite("gsm8k_cot")
SUITES: dict[str, Suite] = {SUITE.name: SUITE, SUITE_COT.name: SUITE_COT}
