"""lm-eval's own command-line language for `verifier lm-eval`, and lm-eval's own output files.

An lm-eval user types `--tasks gsm8k --model_args base_url=http://host/v1/chat/completions,model=M
--num_fewshot 5 --output_path out --log_samples`; the same line works here with lm-eval's meanings.
With --output_path, lm-eval's results JSON (and, with --log_samples, its samples JSONL per task) are
written by lm-eval's own EvaluationTracker, exactly as `lm_eval` writes them, so the two can be diffed;
verifier's run directory goes beside them (OUTPUT_PATH/verifier-run unless --out says otherwise).
"""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

from verifier.errors import UsageError

# local-chat-completions model_args we map onto our flags; the rest are accepted when they change nothing here.
MAPPED = {"base_url": "base_url", "model": "model", "num_concurrent": "concurrency", "max_gen_toks": "max_tokens"}
INERT = {"tokenized_requests", "tokenizer_backend", "tokenizer", "max_retries", "timeout", "eos_string", "verify_certificate"}
RUN_DIR_NAME = "verifier-run"


def parse_model_args(text: str) -> dict[str, str]:
    """lm-eval's `k=v,k=v` string; keys we cannot honour are refused rather than ignored."""
    out: dict[str, str] = {}
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise UsageError(f"--model_args: expected key=value, got {item!r}")
        key = key.strip()
        if key not in MAPPED and key not in INERT:
            raise UsageError(f"--model_args: {key} is not supported here; known: {', '.join(sorted(MAPPED | dict.fromkeys(INERT)))}")
        out[key] = value.strip()
    return out


def chat_base_url(url: str) -> str:
    """local-chat-completions takes the full `/chat/completions` URL; verifier takes the base URL."""
    return url.rstrip("/").removesuffix("/chat/completions")


@dataclasses.dataclass(frozen=True)
class LmEvalSpec:
    """What `verifier lm-eval` does, as typed values; verifier/cli/lm_eval.py builds it from the flags."""

    tasks: tuple[str, ...]
    """lm-eval task names or YAML paths (generate_until tasks)."""
    out: str | None = None
    """Run directory to create; None: OUTPUT_PATH/verifier-run (see `resolve`)."""
    base_url: str | None = None
    model: str | None = None
    limit: float | None = None
    """First N docs per task; a fraction < 1 is that share."""
    concurrency: int = 8
    max_tokens: int | None = None
    num_fewshot: int | None = None
    model_args: str | None = None
    """lm-eval's `k=v,...` spelling of base_url/model/num_concurrent/max_gen_toks; wins over the fields."""
    output_path: str | None = None
    log_samples: bool = False
    single_turn: bool = False
    include_path: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    import_samples: str | None = None
    """An lm-eval samples JSONL to import instead of running (one task)."""


def resolve(spec: LmEvalSpec) -> LmEvalSpec:
    """Fold lm-eval's spellings into the spec: --model_args over --base-url/--model/--concurrency/--max-tokens,
    and the run directory's default beside --output_path."""
    changes: dict[str, Any] = {}
    if spec.model_args:
        for key, value in parse_model_args(spec.model_args).items():
            if key not in MAPPED:
                continue
            dest = MAPPED[key]
            setting: str | int = value
            if dest in ("concurrency", "max_tokens"):
                try:
                    setting = int(value)
                except ValueError:
                    raise UsageError(f"--model_args: {key} must be an integer, got {value!r}") from None
            changes[dest] = chat_base_url(value) if dest == "base_url" else setting
    if spec.output_path and spec.import_samples:
        raise UsageError("--output_path writes the files of an lm-eval run; --import-samples reads one that exists")
    if spec.log_samples and not spec.output_path:
        raise UsageError("--log_samples needs --output_path (where lm-eval's samples files go)")
    if not spec.out:
        if not spec.output_path:
            raise UsageError("lm-eval needs --out RUN_DIR (or --output_path, with the run directory beside lm-eval's files)")
        base = Path(spec.output_path)
        changes["out"] = str((base.parent if base.suffix == ".json" else base) / RUN_DIR_NAME)
    return dataclasses.replace(spec, **changes)


def unproxied(results: dict[str, Any], recorder_url: str, base_url: str) -> dict[str, Any]:
    """lm-eval logged the recorder's address as its base_url; its files must name the endpoint that answered."""
    args = (results.get("config") or {}).get("model_args")
    if isinstance(args, dict) and isinstance(args.get("base_url"), str) and args["base_url"].startswith(recorder_url):
        args["base_url"] = base_url.rstrip("/") + args["base_url"][len(recorder_url):]
    return results


def tracker(output_path: str | None) -> Any:
    """lm-eval's EvaluationTracker for --output_path (None without it); simple_evaluate fills in its config."""
    if not output_path:
        return None
    from lm_eval.loggers import EvaluationTracker

    return EvaluationTracker(output_path=output_path)


def save(evaluation_tracker: Any, results: dict[str, Any], log_samples: bool) -> None:
    """lm-eval's own save sequence (lm_eval/_cli/run.py): aggregated results, then one samples file per task."""
    if evaluation_tracker is None:
        return
    res = copy.deepcopy(results)
    samples = res.pop("samples", None) or {}
    evaluation_tracker.save_results_aggregated(results=res, samples=samples if log_samples else None)
    if log_samples:
        for task_name in res["configs"]:
            evaluation_tracker.save_results_samples(task_name=task_name, samples=samples[task_name])
