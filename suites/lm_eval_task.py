"""lm-eval as a library: offline task building, its own scoring pipeline, passthrough runs and an importer.

Three jobs, one module, so everything that touches lm-eval internals lives in one place:

1. `local_task` / `lm_eval_judge`: build a real lm-eval `ConfigurableTask` from its YAML with
   in-memory rows (no hub download) and run lm-eval's *own* filter ensembles and
   `process_results` on one response. suites/gsm8k.py builds its prompts and scores with these,
   so its numbers are lm-eval's by construction, not by re-typed regexes.
2. `run_task`: any `generate_until` task through lm-eval's `local-chat-completions` model against
   an endpoint (lm-eval sends the requests; we only record what it logged per sample).
3. `import_samples`: lm-eval's per-sample log -> our run directory (run.json, samples.jsonl,
   responses.jsonl), so goldens, compare and report work for lm-eval tasks too.

An imported run is *not* a wire recording: lm-eval keeps only the response text. Each Exchange
body is a synthetic chat.completion holding that text; `finish_reason` is "stop" and `usage`
holds nulls because lm-eval discarded both (saying "missing" would blame the endpoint for our
importer). The body carries `"x_verifier_imported": "lm-eval"` so nobody mistakes it for wire bytes.
lm-eval's per-sample metric values travel in `Sample.meta["lm_eval"]`; the `lm_eval` suite's
scorer just reads them back, so `score` stays pure and reproduces lm-eval's numbers exactly.

lm-eval is imported lazily: `verifier list-suites` must not pay for torch-free lm-eval + datasets.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import hashlib
import json
import numbers
import os
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Iterator

from verifier.types import Exchange, Parsed, Sample, Suite, Verdict

NAME = "lm_eval"
VERSION = "1"
PREFIX = NAME + ":"
IMPORTED_MARK = "x_verifier_imported"


# ---------------------------------------------------------------- offline lm-eval tasks


def builtin_yaml(relpath: str) -> Path:
    """Path of a task YAML shipped inside the installed lm-eval, e.g. `gsm8k/gsm8k-cot-llama.yaml`."""
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / relpath


@lru_cache(maxsize=32)
def load_task_config(yaml_path: str) -> dict[str, Any]:
    """lm-eval's own YAML loader (resolves `!function` and `include`); cached, callers get a deep copy."""
    from lm_eval.tasks._yaml_loader import load_yaml

    return load_yaml(yaml_path, resolve_func=True)


def local_task(config: dict[str, Any] | str | Path, rows: list[dict[str, Any]], split: str | None = None) -> Any:
    """A real lm-eval ConfigurableTask whose eval split is `rows`, built without touching the hub.

    Why `custom_dataset`: it is lm-eval's supported hook for datasets that are not on the hub;
    everything else (doc_to_text, fewshot sampler, filters, metrics) is lm-eval's untouched code.
    Only the eval split is provided: tasks that draw few-shot examples from another split (e.g.
    plain `gsm8k`, 5-shot from train) need that split and are refused here with a clear error.
    """
    import datasets
    from lm_eval.api.task import ConfigurableTask

    cfg = copy.deepcopy(load_task_config(str(config)) if isinstance(config, (str, Path)) else config)
    for key in ("tag", "group", "task_list"):
        cfg.pop(key, None)
    split = split or cfg.get("test_split") or cfg.get("validation_split") or "test"
    fs = cfg.get("fewshot_config") or {}
    if (cfg.get("num_fewshot") or 0) > 0 and not fs.get("samples"):
        src = cfg.get("fewshot_split") or cfg.get("training_split") or cfg.get("validation_split")
        if src and src != split:
            raise ValueError(f"task {cfg.get('task')} draws few-shot examples from split {src!r}, which is not available offline")
    if not rows:
        raise ValueError("local_task needs at least one row (lm-eval probes the first doc)")
    data = datasets.DatasetDict({split: datasets.Dataset.from_list(rows)})
    cfg["test_split"] = split
    for key in ("validation_split", "training_split", "fewshot_split"):
        if cfg.get(key) != split:
            cfg[key] = None
    cfg["custom_dataset"] = lambda **_: data
    # lm-eval logs a hint about custom kwargs for every custom_dataset task; it is noise here.
    with _quiet_lm_eval():
        return ConfigurableTask(config=cfg)


@contextlib.contextmanager
def _quiet_lm_eval() -> Iterator[None]:
    import logging

    log = logging.getLogger("lm_eval")
    old = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(old)


_COMPILED: dict[str, Any] = {}


@contextlib.contextmanager
def compiled_templates() -> Iterator[None]:
    """Memoize lm-eval's Jinja compilation for the duration of a call.

    lm-eval's `apply_template` compiles the template text anew for every doc (~4 ms each, so
    ~60 s to build 1,319 gsm8k prompts). Compiling is a pure function of the source text, so
    caching it on lm-eval's own Environment keeps its exact code path and output, only faster.
    The patch is an instance attribute, removed on exit.
    """
    from lm_eval import utils

    env = utils.env
    if "from_string" in vars(env):  # already inside (nested call)
        yield
        return
    original = env.from_string

    def from_string(source: Any, globals: Any = None, template_class: Any = None) -> Any:
        if globals is not None or template_class is not None or not isinstance(source, str):
            return original(source, globals, template_class)
        t = _COMPILED.get(source)
        if t is None:
            t = _COMPILED[source] = original(source)
        return t

    env.from_string = from_string
    try:
        yield
    finally:
        vars(env).pop("from_string", None)


def chat_messages(task: Any, doc: dict[str, Any], num_fewshot: int | None = None, multiturn: bool = True) -> list[dict[str, str]]:
    """The chat messages lm-eval sends for `doc` with `--apply_chat_template` (and `--fewshot_as_multiturn`).

    lm-eval's API models render chat as JSON of this very list (JsonChatStr), so an identity
    chat template yields exactly what local-chat-completions puts in `messages`.
    """
    n = task.config.num_fewshot if num_fewshot is None else num_fewshot
    with compiled_templates():
        return task.fewshot_context(
            doc, n or 0, apply_chat_template=True, fewshot_as_multiturn=multiturn,
            chat_template=lambda msgs, add_generation_prompt=True: msgs,
        )


def chat_stop(task: Any) -> list[str]:
    """Stop sequences as local-chat-completions sends them: the task's `until`, first 4 (the OpenAI limit)."""
    until = (task.config.generation_kwargs or {}).get("until") or []
    return [until] if isinstance(until, str) else list(until)[:4]


def lm_eval_judge(task: Any, doc: dict[str, Any], text: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """lm-eval's post-processing of one generation: {filter: {metric: value}}, {filter: filtered answer}.

    Exactly what lm-eval's evaluator does per doc: FilterEnsemble.apply on an Instance, then
    task.process_results(doc, [filtered_resps[filter]]). Pure for a given lm-eval version.
    """
    from lm_eval.api.instance import Instance

    inst = Instance(request_type="generate_until", doc=doc, arguments=("", {}), idx=0, resps=[text])
    metrics: dict[str, dict[str, Any]] = {}
    filtered: dict[str, Any] = {}
    with compiled_templates():
        for ensemble in task._filters:
            ensemble.apply([inst])
            filtered[ensemble.name] = inst.filtered_resps[ensemble.name]
            metrics[ensemble.name] = task.process_results(doc, [inst.filtered_resps[ensemble.name]])
    return metrics, filtered


# ---------------------------------------------------------------- passthrough


@contextlib.contextmanager
def _api_key(env_name: str | None) -> Iterator[None]:
    """local-chat-completions reads OPENAI_API_KEY; pass ours through the environment, never model_args
    (lm-eval logs model_args and writes them into its results config)."""
    key = os.environ.get(env_name) if env_name else None
    old = os.environ.get("OPENAI_API_KEY")
    if key is not None:
        os.environ["OPENAI_API_KEY"] = key
    try:
        yield
    finally:
        if key is not None:
            if old is None:
                os.environ.pop("OPENAI_API_KEY", None)
            else:
                os.environ["OPENAI_API_KEY"] = old


def run_task(
    tasks: list[str | dict[str, Any] | Any],
    base_url: str,
    model: str,
    *,
    limit: int | float | None = None,
    num_concurrent: int = 1,
    max_gen_toks: int | None = None,
    num_fewshot: int | None = None,
    fewshot_as_multiturn: bool = True,
    include_path: str | None = None,
    api_key_env: str | None = None,
    timeout: int = 600,
    max_retries: int = 3,
) -> dict[str, Any]:
    """Run lm-eval tasks through `local-chat-completions` against `base_url`; lm-eval's results dict.

    `tasks` are lm-eval task names, task YAML paths, config dicts or built Task objects (e.g. from
    `local_task`). Requests are lm-eval's own: chat messages, `stop` = until[:4], temperature 0, seed 1234.
    """
    import lm_eval
    from lm_eval.tasks import TaskManager

    # lm-eval's index of its ~10k built-in YAMLs takes ~15 s: build it only when a name needs it
    # (a YAML path, a config dict or a built Task loads without it).
    needs_index = any(isinstance(t, str) and not Path(t).is_file() for t in tasks)
    tm = TaskManager(include_path=include_path, include_defaults=needs_index)
    model_args: dict[str, Any] = {
        "base_url": base_url.rstrip("/") + "/chat/completions",
        "model": model,
        "num_concurrent": num_concurrent,
        "tokenized_requests": False,  # chat endpoints take messages, not token ids
        "tokenizer_backend": None,  # nothing to download: no tokenizer is needed for generate_until
        "timeout": timeout,
        "max_retries": max_retries,
    }
    if max_gen_toks is not None:
        model_args["max_gen_toks"] = max_gen_toks
    with _api_key(api_key_env):
        results = lm_eval.simple_evaluate(
            model="local-chat-completions", model_args=model_args, tasks=list(tasks), num_fewshot=num_fewshot,
            apply_chat_template=True, fewshot_as_multiturn=fewshot_as_multiturn, log_samples=True,
            limit=limit, task_manager=tm,
        )
    if results is None:
        raise RuntimeError("lm-eval returned no results")
    return results


# ---------------------------------------------------------------- importer


def metric_key(metric: str, filt: str) -> str:
    """lm-eval reports `exact_match,strict-match`; a comma would break our comma-separated CLI lists."""
    return metric if filt == "none" else f"{metric}:{filt}"


def read_samples_file(path: str | Path) -> list[dict[str, Any]]:
    """The `samples_<task>_<date>.jsonl` file lm-eval writes with --output_path --log_samples."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _prompt_and_gen(args: Any) -> tuple[Any, dict[str, Any]]:
    """First request's (context, gen_kwargs), from the in-memory tuple or the saved `gen_args_0` dict."""
    if isinstance(args, dict):  # saved file: {"gen_args_0": {"arg_0": ctx, "arg_1": gen_kwargs}}
        g = args.get("gen_args_0") or {}
        return g.get("arg_0"), g.get("arg_1") or {}
    first = args[0]  # in memory: [(ctx, gen_kwargs)] per request
    ctx = first[0] if len(first) > 0 else ""
    gen = first[1] if len(first) > 1 and isinstance(first[1], dict) else {}
    return ctx, gen


def _messages(ctx: Any) -> list[dict[str, Any]]:
    """lm-eval's context -> chat messages. API models carry chat as JSON text (JsonChatStr, a 1-tuple)."""
    if hasattr(ctx, "prompt"):
        ctx = ctx.prompt
    if isinstance(ctx, (list, tuple)) and len(ctx) == 1 and isinstance(ctx[0], str):
        ctx = ctx[0]
    if isinstance(ctx, list) and all(isinstance(m, dict) for m in ctx):
        return ctx
    if isinstance(ctx, str):
        try:
            val = json.loads(ctx)
        except json.JSONDecodeError:
            val = None
        if isinstance(val, list) and val and all(isinstance(m, dict) and "role" in m for m in val):
            return val
        return [{"role": "user", "content": ctx}]
    raise ValueError(f"cannot read lm-eval context of type {type(ctx).__name__}")


def _first_text(resps: Any) -> str | None:
    """resps is [[gen, ...]] per request (or [gen] once sanitized); the first generation, or None."""
    x = resps
    while isinstance(x, list) and x:
        x = x[0]
    if x is None or isinstance(x, str):
        return x
    raise ValueError("only generate_until tasks can be imported (responses are not text)")


def _scalar(v: Any) -> float | None:
    if isinstance(v, numbers.Real):  # lm-eval logs numpy floats; bool and numpy ints are Real too
        return float(v)
    return None  # corpus-level metrics log tuples per sample; they have no per-sample value


def to_run_records(samples: list[dict[str, Any]], task: str, model: str) -> tuple[list[Sample], list[Exchange]]:
    """lm-eval log rows (one per doc x filter) -> one Sample and one Exchange per doc."""
    by_doc: dict[Any, list[dict[str, Any]]] = {}
    for row in samples:
        by_doc.setdefault(row["doc_id"], []).append(row)
    suite = PREFIX + task
    out_s: list[Sample] = []
    out_x: list[Exchange] = []
    for doc_id in sorted(by_doc, key=lambda d: (str(type(d)), d)):
        rows = by_doc[doc_id]
        first = rows[0]
        ctx, gen = _prompt_and_gen(first["arguments"])
        messages = _messages(ctx)
        text = _first_text(first["resps"])
        metrics: dict[str, float] = {}
        filtered: dict[str, Any] = {}
        for row in rows:
            filt = row.get("filter", "none")
            fr = row.get("filtered_resps")
            filtered[filt] = fr[0] if isinstance(fr, list) and fr else fr
            for m in row.get("metrics", []):
                val = _scalar(row.get(m))
                if val is not None:
                    metrics[metric_key(m, filt)] = val
        primary = next(iter(metrics), None)
        target = first.get("target")
        sample = Sample(
            id=f"{task}/{doc_id}", messages=messages,
            target=target if isinstance(target, (str, int, float, list)) else str(target),
            meta={"doc_hash": first.get("doc_hash"), "prompt_hash": first.get("prompt_hash"),
                  "lm_eval": {"task": task, "metrics": metrics, "filtered": filtered, "primary": primary}},
        )
        request = {"model": model, "messages": messages, **_gen_to_request(gen)}
        body = {
            "id": f"lm-eval-{task}-{doc_id}", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
            IMPORTED_MARK: "lm-eval",
        }
        out_s.append(sample)
        out_x.append(Exchange(suite=suite, sample_id=sample.id, epoch=0, mode="chat", request=request,
                              status=200, body=json.dumps(body, ensure_ascii=False, sort_keys=True)))
    return out_s, out_x


def _gen_to_request(gen: dict[str, Any]) -> dict[str, Any]:
    """lm-eval generation kwargs -> the request fields local-chat-completions derives from them."""
    g = {k: v for k, v in (gen or {}).items() if k != "do_sample"}
    out: dict[str, Any] = {}
    if "until" in g:
        until = g.pop("until")
        out["stop"] = ([until] if isinstance(until, str) else list(until or []))[:4]
    if "max_gen_toks" in g:
        out["max_tokens"] = g.pop("max_gen_toks")
    out["temperature"] = g.pop("temperature", 0)
    out.update({k: v for k, v in g.items() if isinstance(v, (str, int, float, bool, list))})
    return out


def stable_sha256(samples: Iterable[Sample]) -> str:
    """Dataset fingerprint over what does not depend on the responses (id, messages, target):
    meta holds this run's lm-eval metric values, which must not make two runs' datasets differ."""
    from verifier import journal

    h = hashlib.sha256()
    for s in samples:
        h.update(journal.dumps({"id": s.id, "messages": s.messages, "target": s.target}).encode())
        h.update(b"\n")
    return h.hexdigest()


def import_samples(
    samples: list[dict[str, Any]] | dict[str, list[dict[str, Any]]],
    task: str | None,
    out_dir: str | Path,
    model: str,
    base_url: str,
    *,
    lm_eval_config: dict[str, Any] | None = None,
    api_key_env: str | None = None,
) -> Path:
    """Write lm-eval per-sample logs as a run directory. `samples` is one task's list, or
    `results["samples"]` ({task: list}) with `task=None` for all of them. Returns the run dir."""
    from verifier import journal, runner
    from verifier.endpoint import redact_url

    per_task = samples if isinstance(samples, dict) else {task: samples}
    if task is not None and isinstance(samples, dict):
        per_task = {task: samples[task]}
    if any(t is None for t in per_task):
        raise ValueError("import_samples needs the task name for a list of samples")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_samples: list[tuple[str, Sample]] = []
    all_x: list[Exchange] = []
    suites_hdr: dict[str, Any] = {}
    for t, rows in sorted(per_task.items()):
        ss, xs = to_run_records(rows, t, model)
        suites_hdr[PREFIX + t] = {"version": VERSION, "dataset_sha256": stable_sha256(ss), "samples": len(ss), "requests": len(xs)}
        all_samples += [(PREFIX + t, s) for s in ss]
        all_x += xs
    try:
        import lm_eval

        lm_version = getattr(lm_eval, "__version__", None)
    except ImportError:  # importing a saved samples file does not need lm-eval installed
        lm_version = None
    stamp = runner.now()
    header = journal.run_header(
        out.name,
        endpoint={"base_url": redact_url(base_url), "model": model, "api_key_env": api_key_env, "header_names": []},
        sampling={"defaults": {}, "overrides": {}, "note": "set by lm-eval per task; see each request"},
        extra_body={}, epochs=1, modes=["chat"], suites=suites_hdr, started=stamp, finished=stamp,
        imported_from={"tool": "lm-eval", "version": lm_version, "configs": _jsonable(lm_eval_config or {})},
    )
    journal.write_samples(out, all_samples)
    journal.write_jsonl(out / journal.RESPONSES, (x.to_json() for x in all_x))
    journal.write_json(out / journal.HEADER, header)
    return out


def _jsonable(obj: Any) -> Any:
    return json.loads(json.dumps(obj, default=str))


# ---------------------------------------------------------------- the suite for imported runs


def _load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    raise ValueError("use `verifier lm-eval --task ...`")


def _request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages}


def score(sample: Sample, parsed: Parsed) -> Verdict:
    """lm-eval already judged this response; read its per-sample values back (pure)."""
    le = sample.meta.get("lm_eval") or {}
    metrics = dict(le.get("metrics") or {})
    primary = le.get("primary")
    value = metrics.get(primary) if primary else None
    filtered = le.get("filtered") or {}
    answer = next(iter(filtered.values())) if len(filtered) == 1 else filtered
    if value is None:
        reason = "no_metric"
    elif value == 1.0:
        reason = "correct"
    elif value == 0.0:
        reason = "wrong_answer"
    else:
        reason = "scored"
    return Verdict(suite=PREFIX + str(le.get("task", "")), sample_id=sample.id, epoch=0, mode="", outcome="content",
                   score=value, answer=answer, reason=reason, metrics=metrics)


SUITE = Suite(
    name=NAME, version=VERSION, load=_load, request=_request, score=score,
    description="plus lm-eval passthrough: `verifier lm-eval --task T` runs any generate_until task and imports it as lm_eval:<task>",
)


def suite_for(name: str) -> Suite | None:
    """The Suite that scores run-directory suite `name` (`lm_eval:<task>`), else None."""
    return SUITE if name.startswith(PREFIX) else None


# ---------------------------------------------------------------- `verifier lm-eval`


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help="comma-separated lm-eval task names (generate_until tasks)")
    p.add_argument("--base-url", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    p.add_argument("--model", help="model name sent in every request")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--limit", type=float, help="first N docs per task (a fraction < 1 means that share)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (lm-eval num_concurrent, default 8)")
    p.add_argument("--max-tokens", dest="max_tokens", type=int,
                   help="lm-eval max_gen_toks (default: lm-eval's, 256 unless the task sets it; too short for chain of thought)")
    p.add_argument("--num-fewshot", type=int, help="override the task's few-shot count")
    p.add_argument("--single-turn", action="store_true", help="few-shot examples in one user message (lm-eval without --fewshot_as_multiturn)")
    p.add_argument("--include-path", help="directory of extra lm-eval task YAMLs")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key (never written)")
    p.add_argument("--import-samples", metavar="JSONL", help="import an existing lm-eval samples_<task>_*.jsonl instead of running (one task)")
    p.add_argument("--quiet", action="store_true")


def run(a: argparse.Namespace) -> int:
    """`verifier lm-eval`: run (or import) lm-eval tasks into a run directory, then score it."""
    from verifier import scoring
    from verifier.app_text import print_summary
    from verifier.errors import UsageError
    from verifier.journal import ensure_writable_new_dir

    tasks = [t.strip() for t in a.task.split(",") if t.strip()]
    if not tasks:
        raise UsageError("--task is required")
    out = Path(a.out)
    ensure_writable_new_dir(out)
    if a.import_samples:
        if len(tasks) != 1:
            raise UsageError("--import-samples takes exactly one --task")
        try:
            rows = read_samples_file(a.import_samples)
        except OSError as e:
            raise UsageError(f"--import-samples: cannot read {a.import_samples}: {e.strerror}") from None
        import_samples(rows, tasks[0], out, a.model or "unknown", a.base_url or "", api_key_env=None)
    else:
        if not a.base_url or not a.model:
            raise UsageError("lm-eval needs --base-url and --model (or --import-samples)")
        limit = int(a.limit) if a.limit is not None and a.limit >= 1 else a.limit
        try:
            results = run_task(tasks, a.base_url, a.model, limit=limit, num_concurrent=a.concurrency,
                               max_gen_toks=a.max_tokens, num_fewshot=a.num_fewshot,
                               fewshot_as_multiturn=not a.single_turn, include_path=a.include_path, api_key_env=a.api_key_env)
        except (KeyError, ValueError) as e:
            raise UsageError(f"lm-eval: {e}") from None
        import_samples(results.get("samples") or {}, None, out, a.model, a.base_url,
                       lm_eval_config=results.get("configs"), api_key_env=a.api_key_env)
    verdicts, summary = score_imported(out)
    scoring.write_scores(out, verdicts, summary)
    if not a.quiet:
        print(f"run: {out}", file=sys.stderr)
    print_summary(summary)
    return 0


def score_imported(run_dir: Path) -> tuple[list[Verdict], dict[str, Any]]:
    """score_run for an imported run: the engine scores every `lm_eval:<task>` with the `lm_eval` suite."""
    from verifier import scoring

    return scoring.score_run(run_dir, {SUITE.name: SUITE})
