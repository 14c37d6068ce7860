"""An lm-eval generate_until task built from its YAML without `lm_eval.api.task`, for a fast first request.

`lm_eval.api.task` imports `datasets` (and with it pyarrow and pandas): 3-8 s on a loaded 2-core machine, before
the first request could be sent, only so that a `ConfigurableTask` can hold its rows in a `datasets.Dataset`.
The gsm8k suite needs none of that: its few-shot examples are in the YAML and its rows are ours. `YamlTask` is
the part of `ConfigurableTask` a chat request and its judgement go through, on lm-eval's own pieces: the YAML
read by lm-eval's loader, lm-eval's `TaskConfig` (defaults, few-shot inheritance), its sampler registry, its
`Message` / `maybe_delimit` / `multiturn_to_singleturn` prompt helpers, its Jinja environment (`apply_template`),
its filter ensembles and its metric registry. What is re-stated from `ConfigurableTask` is the glue between them
(`fewshot_context`, `build_qa_turn`, `doc_to_text`/`doc_to_target`, the generate_until branch of
`process_results`), line for line, and only for the configurations that glue covers: anything else (choices,
promptsource prompts, images, few-shot examples from a dataset split, process_docs, list targets) is refused,
and suites/lm_eval_adapter.local_task builds the real task instead. tests/test_suite_gsm8k.py and
tests/test_lm_eval_import.py hold prompts, filtered answers and scores equal to the real `ConfigurableTask`'s.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cached_property, lru_cache, partial
from pathlib import Path
from typing import Any, Callable

# Keys a YamlTask cannot honour the way ConfigurableTask does; a config using one is refused, not approximated.
UNSUPPORTED = ("doc_to_choice", "use_prompt", "doc_to_image", "doc_to_audio", "process_docs")
# Index keys that are not TaskConfig fields (what local_task drops too).
NOT_CONFIG = ("tag", "group", "task_list")
MAX_RENDERS = 65_536
"""Rendered (template, doc) pairs a task keeps: every gsm8k prompt renders the same 8 few-shot docs (16 Jinja
renders of ~25 us), and every judgement renders its doc's target again."""


@lru_cache(maxsize=1)
def _yaml_loader() -> Any:
    """lm-eval's own YAML loader (`!function`, `include`), loaded from its file: importing it as
    `lm_eval.tasks._yaml_loader` would run `lm_eval/tasks/__init__.py`, which imports the task machinery."""
    import lm_eval

    path = Path(lm_eval.__file__).parent / "tasks" / "_yaml_loader.py"
    spec = importlib.util.spec_from_file_location("suites._lm_eval_yaml_loader", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load lm-eval's YAML loader from {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@lru_cache(maxsize=32)
def _read_yaml(path: str) -> dict[str, Any]:
    config: dict[str, Any] = _yaml_loader().load_yaml(path, resolve_func=True)  # a task YAML: a mapping
    return config


def yaml_task(path: str | Path, probe_doc: dict[str, Any]) -> "YamlTask":
    """The task of one lm-eval YAML. `probe_doc` stands for the eval rows (its keys are their fields), as
    ConfigurableTask probes its first doc."""
    return YamlTask(dict(_read_yaml(str(path))), probe_doc)


def supports(cfg: dict[str, Any]) -> str | None:
    """Why a config needs the real ConfigurableTask (None when YamlTask renders and judges it the same)."""
    used = [k for k in UNSUPPORTED if cfg.get(k) is not None]
    if used:
        return f"uses {', '.join(used)}"
    if (cfg.get("output_type") or "generate_until") != "generate_until":
        return f"output_type {cfg.get('output_type')}"
    fs = cfg.get("fewshot_config") or {}
    if (cfg.get("num_fewshot") or 0) > 0 and (fs.get("samples") is None or fs.get("split") or cfg.get("fewshot_split")):
        return "draws few-shot examples from a dataset split"
    return None


class YamlTask:
    """The slice of lm-eval's ConfigurableTask that renders a chat prompt and judges one generation."""

    def __init__(self, cfg: dict[str, Any], probe_doc: dict[str, Any]):
        from lm_eval.api import samplers
        from lm_eval.config.task import TaskConfig

        self._renders: dict[tuple[str, tuple[Any, ...]], Any] = {}
        cfg = {k: v for k, v in cfg.items() if k not in NOT_CONFIG}
        why = supports(cfg)
        if why:
            raise ValueError(f"task {cfg.get('task')} {why}: build it with lm_eval_adapter.local_task")
        self.config = TaskConfig(**cfg)
        self.VERSION: Any = "Yaml"
        if isinstance(self.config.metadata, dict) and "version" in self.config.metadata:
            self.VERSION = self.config.metadata["version"]
        self.OUTPUT_TYPE = self.config.output_type
        self.fewshot_cfg = self.config.fewshot_config
        samples = self.fewshot_cfg.samples
        samples = samples() if callable(samples) else samples
        self.sampler = samplers.get_sampler(self.fewshot_cfg.sampler)(list(samples or []), rnd=None)
        # ConfigurableTask's "test one doc": field names and whether targets are lists come from the first row.
        self.features = list(probe_doc)
        self.doc_to_text(probe_doc)
        if isinstance(self.doc_to_target(probe_doc), list):
            raise ValueError(f"task {self.config.task} has list targets: build it with lm_eval_adapter.local_task")
        self.multiple_target = 0

    def _apply(self, source: str, doc: dict[str, Any]) -> Any:
        """lm-eval's `utils.apply_template(source, doc)`, remembered per (template, doc content): a Jinja render of a
        YAML template is a pure function of the two. A doc with unhashable values is rendered every time."""
        from lm_eval import utils

        key = (source, tuple(doc.items()))
        try:
            out = self._renders.get(key)
        except TypeError:  # a list or dict among the doc's values
            return utils.apply_template(source, doc)
        if out is None:
            out = utils.apply_template(source, doc)
            if len(self._renders) < MAX_RENDERS:
                self._renders[key] = out
        return out

    # ------------------------------------------------------------ prompt (ConfigurableTask.fewshot_context)

    def resolve_field(self, doc: dict[str, Any], field: str | None = None) -> Any:
        if field:
            return doc[field] if field in doc else self._apply(field, doc)
        return None

    def doc_to_text(self, doc: dict[str, Any], doc_to_text: Any = None) -> Any:
        source = doc_to_text if doc_to_text is not None else self.config.doc_to_text
        if isinstance(source, int):
            return source
        if isinstance(source, str):
            return doc[source] if source in self.features else self._apply(source, doc)
        if callable(source):
            return source(doc)
        raise TypeError(f"doc_to_text: {type(source).__name__}")

    def doc_to_target(self, doc: dict[str, Any], doc_to_target: Any = None) -> Any:
        source = doc_to_target if doc_to_target is not None else self.config.doc_to_target
        if isinstance(source, (int, list)):
            return source
        if isinstance(source, str):
            if source in self.features:
                return doc[source]
            return rendered_target(self._apply(source, doc))
        if callable(source):
            return source(doc)
        raise TypeError(f"doc_to_target: {type(source).__name__}")

    def fewshot_context(self, doc: dict[str, Any], num_fewshot: int, system_instruction: str | None = None,
                        apply_chat_template: bool = False, fewshot_as_multiturn: bool = False,
                        chat_template: Callable[..., Any] | None = None, gen_prefix: str | None = None) -> Any:
        from lm_eval.api.utils import Message, maybe_delimit, multiturn_to_singleturn

        messages = []
        chat_template = partial(chat_template, add_generation_prompt=not gen_prefix) if chat_template else None
        description = self.resolve_field(doc, self.config.description) or ""
        system_prompt = maybe_delimit(system_instruction, description, self.config.fewshot_delimiter)
        if system_prompt:
            messages.append(Message("system", system_prompt))
        messages += self.fewshot_turns(doc, num_fewshot)
        messages += build_qa_turn(q=self.doc_to_text(doc), gen_prefix=gen_prefix,
                                  tgt_delim=self.config.target_delimiter, few_delim="")
        if apply_chat_template and chat_template:
            res = [m.to_dict() for m in messages] if fewshot_as_multiturn else multiturn_to_singleturn(messages)
            return chat_template(res)
        return "".join(m.to_text() for m in messages)

    def fewshot_turns(self, doc: dict[str, Any] | None, num_fewshot: int) -> list[Any]:
        """The few-shot examples' turns that come before `doc`'s own (the loop of ConfigurableTask.fewshot_context)."""
        messages: list[Any] = []
        if num_fewshot > 0:
            eval_doc = doc if self.fewshot_cfg.split == self.config.test_split else None
            for fs_doc in self.sampler.sample(n=num_fewshot, eval_doc=eval_doc):
                messages += build_qa_turn(
                    q=self.doc_to_text(fs_doc, self.fewshot_cfg.doc_to_text),
                    a=self.doc_to_target(fs_doc, self.fewshot_cfg.doc_to_target),
                    gen_prefix=self.resolve_field(fs_doc, self.fewshot_cfg.gen_prefix),
                    tgt_delim=self.fewshot_cfg.target_delimiter, few_delim=self.fewshot_cfg.fewshot_delimiter,
                )
        return messages

    # ------------------------------------------------------------ judging (filters, process_results)

    @cached_property
    def _filters(self) -> list[Any]:
        """ConfigurableTask's filter ensembles, built on first use (judging, not the first request)."""
        from lm_eval.filters import build_filter_ensemble

        if self.config.filter_list is None:
            return [build_filter_ensemble("none", [["take_first", None]])]
        out = []
        for filter_config in self.config.filter_list:
            components = [[f["function"], {k: f[k] for k in f if k != "function"}] for f in filter_config["filter"]]
            out.append(build_filter_ensemble(filter_config["name"], components))
        return out

    @cached_property
    def _metric_fn_list(self) -> dict[str, tuple[Callable[..., Any] | None, dict[str, Any]]]:
        """{metric: (function, kwargs)} from metric_list, as ConfigurableTask resolves them."""
        from lm_eval.api.registry import DEFAULT_METRIC_REGISTRY, get_metric

        if self.config.metric_list is None:
            return {m: (get_metric(m), {}) for m in DEFAULT_METRIC_REGISTRY[self.config.output_type]}
        out: dict[str, tuple[Callable[..., Any] | None, dict[str, Any]]] = {}
        for mc in self.config.metric_list:
            name = mc["metric"]
            kwargs = {k: mc[k] for k in mc if k not in ("metric", "aggregation", "higher_is_better", "hf_evaluate")}
            if self.config.process_results is not None:
                out[name] = (None, {})
            elif callable(name):
                out[name.__name__] = (name.__call__, kwargs)
            else:
                out[name] = (get_metric(name, mc.get("hf_evaluate") is True), kwargs)
        return out

    def process_results(self, doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
        """The generate_until branch of ConfigurableTask.process_results (single targets)."""
        if callable(self.config.process_results):
            metrics: dict[str, Any] = self.config.process_results(doc, results)  # the task's own function (untyped)
            return metrics
        gold = self.doc_to_target(doc)
        result = results[0]
        fns = self._metric_fn_list
        if type(gold) is not type(result) and not ("bypass" in fns or isinstance(result, list)):
            gold = type(result)(gold)
        out: dict[str, Any] = {}
        for metric, (fn, kwargs) in fns.items():
            try:
                score = fn(references=[gold], predictions=[result], **kwargs)  # type: ignore[misc]
            except TypeError:  # lm-eval's fallback for metrics with the other interface
                score = fn([gold, result])  # type: ignore[misc]
            if isinstance(score, dict):
                out.update(score)
            else:
                out[metric] = score
        return out


def rendered_target(text: str) -> Any:
    """A target rendered from a template, as ConfigurableTask.doc_to_target reads it: text that spells a Python list
    is that list."""
    if len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        try:
            return ast.literal_eval(text)
        except (SyntaxError, ValueError):
            return text
    return text


def build_qa_turn(*, q: Any = None, a: Any = None, gen_prefix: str | None = None, tgt_delim: str = " ",
                  few_delim: str = "\n\n") -> list[Any]:
    """ConfigurableTask.build_qa_turn without choices: the user turn, then the answer (or gen_prefix) turn."""
    from lm_eval.api.utils import Message, maybe_delimit, requires_delimiter

    assert isinstance(q, str), f"Context is not a string! : {q}"
    has_answer = a is not None and a != ""
    delim = tgt_delim if has_answer and not gen_prefix else tgt_delim if gen_prefix and requires_delimiter(q, gen_prefix) else ""
    msgs = [Message("user", q, delim)]
    if has_answer:
        answer_text = a[0] if isinstance(a, list) else a
        assert isinstance(answer_text, str), f"Answer is not a string! : {a}"
        msgs.append(Message("assistant", maybe_delimit(gen_prefix, answer_text, delimiter=" "), few_delim))
    elif gen_prefix:
        msgs.append(Message("assistant", gen_prefix))
    return msgs
