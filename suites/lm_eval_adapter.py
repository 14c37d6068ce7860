"""lm-eval as a library: its task built from its own YAML, its prompts, filters and metric, and its runner.

`local_task` builds a real lm-eval `ConfigurableTask` from a task YAML shipped inside the installed
lm-eval (or any YAML path) with in-memory rows: no hub download and no TaskManager, whose index of
lm-eval's ~10k built-in YAMLs is what makes start-up slow. `chat_messages` renders lm-eval's prompt
as a chat endpoint receives it, and `lm_eval_judge` runs lm-eval's *own* filter ensembles and
`process_results` on one response. `chat_messages`, `chat_stop` and `lm_eval_judge` also take the
light task of suites/lm_eval_lite.py (the same YAML, prompt, filter and metric code without
`lm_eval.api.task` and its `datasets` import), which is what suites/gsm8k.py builds, so its first
request goes out seconds sooner and its numbers are still lm-eval's, not re-typed regexes. `run_task` runs tasks through lm-eval's
own `local-chat-completions` model; suites/lm_eval_import.py turns what it logged into a run directory.

lm-eval is imported lazily: `verifier list-suites` must not pay for lm-eval + datasets.
"""

from __future__ import annotations

import contextlib
import copy
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Sequence


def builtin_yaml(relpath: str) -> Path:
    """Path of a task YAML shipped inside the installed lm-eval, e.g. `gsm8k/gsm8k-cot-llama.yaml`."""
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks" / relpath


@lru_cache(maxsize=32)
def load_task_config(yaml_path: str) -> dict[str, Any]:
    """lm-eval's own YAML loader (resolves `!function` and `include`); cached, callers get a deep copy."""
    from lm_eval.tasks._yaml_loader import load_yaml

    config: dict[str, Any] = load_yaml(yaml_path, resolve_func=True)  # a task YAML: a mapping
    return config


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
        messages: list[dict[str, str]] = task.fewshot_context(  # lm-eval's (untyped): the identity template's list
            doc, n or 0, apply_chat_template=True, fewshot_as_multiturn=multiturn,
            chat_template=lambda msgs, add_generation_prompt=True: msgs,
        )
    return messages


def chat_stop(task: Any) -> list[str]:
    """Stop sequences as local-chat-completions sends them: the task's `until`, first 4 (the OpenAI limit)."""
    until = (task.config.generation_kwargs or {}).get("until") or []
    return [until] if isinstance(until, str) else list(until)[:4]


_STATELESS_FILTERS = ("lm_eval.filters.extraction.RegexFilter", "lm_eval.filters.extraction.WhitespaceFilter",
                      "lm_eval.filters.selection.TakeFirstFilter", "lm_eval.filters.transformation.LowercaseFilter",
                      "lm_eval.filters.transformation.UppercaseFilter")
"""lm-eval filters whose `apply` reads nothing but its arguments and the constructor's (compiled) settings: built once
per ensemble and reused for every generation (FilterEnsemble.apply builds each filter anew per call, which for a
regex filter means compiling its pattern again). Any other filter is built per call, as lm-eval does."""
_BUILT: dict[int, tuple[Any, list[Any] | None]] = {}


def _built_filters(ensemble: Any) -> list[Any] | None:
    """The ensemble's filters, built once, when every one is stateless; None: build them per call (lm-eval's way)."""
    hit = _BUILT.get(id(ensemble))
    if hit is not None and hit[0] is ensemble:
        return hit[1]
    built: list[Any] | None = []
    for f in ensemble.filters:
        cls = getattr(f, "func", None)
        if not isinstance(cls, type) or f"{cls.__module__}.{cls.__qualname__}" not in _STATELESS_FILTERS:
            built = None
            break
        built.append(f())  # type: ignore[union-attr]
    _BUILT[id(ensemble)] = (ensemble, built)  # the ensemble is held here: its id is never reused for another
    return built


def apply_filters(built: list[Any], doc: dict[str, Any], text: str | None) -> Any:
    """FilterEnsemble.apply's loop on filters built once: one instance's responses, then each filter in turn."""
    resps: Any = [[text]]
    for f in built:
        resps = f.apply(resps, [doc])
    return next(iter(resps))


def lm_eval_judge(task: Any, doc: dict[str, Any], text: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """lm-eval's post-processing of one generation: {filter: {metric: value}}, {filter: filtered answer}.

    Exactly what lm-eval's evaluator does per doc: FilterEnsemble.apply on an Instance, then
    task.process_results(doc, [filtered_resps[filter]]). Pure for a given lm-eval version. An ensemble of
    stateless filters runs FilterEnsemble.apply's own loop on filters built once (`_built_filters`).
    """
    metrics: dict[str, dict[str, Any]] = {}
    filtered: dict[str, Any] = {}
    with compiled_templates():
        for ensemble in task._filters:
            built = _built_filters(ensemble)
            if built is None:
                from lm_eval.api.instance import Instance

                inst = Instance(request_type="generate_until", doc=doc, arguments=("", {}), idx=0, resps=[text])
                ensemble.apply([inst])
                out = inst.filtered_resps[ensemble.name]
            else:
                out = apply_filters(built, doc, text)
            filtered[ensemble.name] = out
            metrics[ensemble.name] = task.process_results(doc, [out])
    return metrics, filtered


# ---------------------------------------------------------------- passthrough: lm-eval sends the requests


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
    tasks: Sequence[Any],
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
    evaluation_tracker: Any = None,
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
            limit=limit, task_manager=tm, evaluation_tracker=evaluation_tracker,
        )
    if results is None:
        raise RuntimeError("lm-eval returned no results")
    evaluated: dict[str, Any] = results  # simple_evaluate's (untyped) results document
    return evaluated
