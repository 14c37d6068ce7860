"""An lm-eval generate_until task compiled once to plain data, so a run renders and judges it without importing
lm-eval's task machinery.

Why: `lm_eval.config.task` imports `lm_eval.utils` (numpy, requests with its character-set tables, Jinja) and
exact_match lives in `lm_eval.api.metrics` (numpy, sacrebleu): about 0.4 s of CPU in every process, a third of what
a whole gsm8k run costs the client. What a gsm8k prompt and its judgement need from all that is data: the few-shot
turns (fixed: a `first_n` sampler over the YAML's own samples), the templates of a doc's text and target, the filter
ensembles' settings and the metric's arguments.

Compiled from the YamlTask (suites/lm_eval_lite.py, on lm-eval's own code) and checked against it there and then:
on probe docs and probe generations the compiled task must give the same chat messages, targets, filtered answers
and metric values, or it is not used. It is kept in the user's cache (`VERIFIER_CACHE_DIR`, else
`$XDG_CACHE_HOME/verifier`, else ~/.cache/verifier), one file per compiler version, lm-eval version and resolved
YAML; a file that is missing, unreadable, too large, not of this shape or not sealed by this user is compiled
again. The seal (`seal`, an HMAC-SHA256 of the recipe under this user's key, verifier/seal.py) binds the file to
the check made when it was compiled: an edited filter, template or few-shot turn (or a file copied from another
machine or user) means "compile again", never "use it"; only someone who can read this user's key can seal an edit.
A task the compiled form
cannot state as data (a `!function`, a sampler other than first_n, a few-shot split that is the eval split, a metric
other than exact_match, a filter with state) keeps the YamlTask, whose answers are the same, only slower to import.

Re-stated from lm-eval, and checked against lm-eval at every compile: `utils.apply_template`'s Jinja environment
(three settings and the `regex_replace` filter) and `exact_match_hf_evaluate` (without numpy, whose string arrays
drop trailing NULs: so does the comparison here). The filters are lm-eval's own classes (`lm_eval.filters` is light).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import string
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

import suites.lm_eval_adapter as le
import suites.lm_eval_lite as lite
from verifier import safeio
from verifier import seal as sealing

COMPILER = "2"
"""Bump when the compiled form or its meaning changes: older files are then compiled again. 2: files carry a seal."""
MAX_FILE = 4 * 2**20
EXACT_MATCH_ARGS = ("regexes_to_ignore", "ignore_case", "ignore_punctuation", "ignore_numbers")
PROBE_TEXTS = (
    "The final answer is {t}", "The final answer is {t}.", "THE FINAL ANSWER IS {t}!", "The answer is {t}",
    "#### {t}", "{t}", "{t}\x00", "{t}\x00\x00", " {t} ", "$1,000 and then {t}", "The final answer is $1,234.50",
    "The final answer is {t}\nThe final answer is 7", "no number here", "", "Ünïcödé {t} 日本", "The final answer is -{t}",
)
"""Generations judged both ways when a task is compiled ({t}: the probe doc's own target)."""


def cache_dir() -> Path | None:
    """Where compiled tasks are kept: VERIFIER_CACHE_DIR, else $XDG_CACHE_HOME/verifier, else ~/.cache/verifier;
    None when there is no home to find (the task is then compiled in every process)."""
    return safeio.user_dir("VERIFIER_CACHE_DIR", "XDG_CACHE_HOME", ".cache")


# ---------------------------------------------------------------- what is re-stated from lm-eval


def _regex_replace(text: str, pattern: str, repl: str, count: int = 0) -> str:
    return re.sub(pattern, repl, text, count=count)


@lru_cache(maxsize=1)
def _jinja() -> Any:
    """lm-eval's `utils.env` settings (lm_eval.utils itself imports numpy and requests), in Jinja's immutable sandbox
    with bounded work (suites/bounded_jinja.py): a template read back from the cache is data, and must not reach
    Python's internals, mutate a doc or render without end. A template the sandbox renders differently from lm-eval
    (or not within the bounds) fails the compile-time check and keeps lm-eval's code."""
    from jinja2 import BaseLoader, StrictUndefined

    from suites.bounded_jinja import BoundedSandbox

    env = BoundedSandbox(loader=BaseLoader, undefined=StrictUndefined, keep_trailing_newline=True)
    env.filters["regex_replace"] = _regex_replace
    return env


@lru_cache(maxsize=256)
def _template(source: str) -> Any:
    return _jinja().template(source)


def render(source: str, doc: dict[str, Any]) -> str:
    """lm-eval's `utils.apply_template(source, doc)`; each template compiled once, rendered within the bounds of
    suites/bounded_jinja.py (a template over them is a TemplateBudget, exit 2, never a hang)."""
    from suites.bounded_jinja import render as bounded_render

    return bounded_render(_template(source), **doc)


def _numpy_str(s: Any) -> Any:
    """A string as a numpy string array holds it: trailing NULs dropped."""
    return s.rstrip("\x00") if isinstance(s, str) else s


def exact_match(predictions: list[Any], references: list[Any], regexes_to_ignore: list[str] | None = None,
                ignore_case: bool = False, ignore_punctuation: bool = False, ignore_numbers: bool = False) -> dict[str, float]:
    """lm-eval's `exact_match_hf_evaluate` on plain lists: the same steps in the same order."""
    preds = [_numpy_str(x) for x in predictions]
    refs = [_numpy_str(x) for x in references]
    for pattern in regexes_to_ignore or ():
        preds = [_numpy_str(re.sub(pattern, "", x)) for x in preds]
        refs = [_numpy_str(re.sub(pattern, "", x)) for x in refs]
    if ignore_case:
        preds, refs = [x.lower() for x in preds], [x.lower() for x in refs]
    if ignore_punctuation:
        table = str.maketrans("", "", string.punctuation)
        preds, refs = [_numpy_str(x.translate(table)) for x in preds], [_numpy_str(x.translate(table)) for x in refs]
    if ignore_numbers:
        table = str.maketrans("", "", string.digits)
        preds, refs = [_numpy_str(x.translate(table)) for x in preds], [_numpy_str(x.translate(table)) for x in refs]
    same = [p == r for p, r in zip(preds, refs)]
    return {"exact_match": sum(same) / len(same)}


# ---------------------------------------------------------------- the two task forms gsm8k uses


class LmEvalTask:
    """The YamlTask itself (lm-eval's code), behind the interface the compiled task has."""

    def __init__(self, task: Any):
        self.task = task
        self.name: str = task.config.task
        self.version: Any = task.VERSION
        self.stop: list[str] = le.chat_stop(task)

    def messages(self, doc: dict[str, Any], multiturn: bool) -> list[dict[str, str]]:
        return le.chat_messages(self.task, doc, multiturn=multiturn)

    def target(self, doc: dict[str, Any]) -> Any:
        with le.compiled_templates():
            return self.task.doc_to_target(doc)

    def judge(self, doc: dict[str, Any], text: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        return le.lm_eval_judge(self.task, doc, text)


class CompiledTask:
    """A compiled task: its data (`recipe`, what the cache file holds) and the lm-eval filters built from it."""

    def __init__(self, recipe: dict[str, Any]):
        from lm_eval.filters import build_filter_ensemble

        self.recipe = recipe
        self.name = recipe["task"]
        self.version = recipe["version"]
        self.stop = list(recipe["stop"])
        self._features = set(recipe["features"])
        self._metrics = [(m, dict(kw)) for m, kw in recipe["metrics"]]
        self._filters: list[tuple[str, list[Any]]] = []
        for name, components in recipe["filters"]:
            built = le._built_filters(build_filter_ensemble(name, [[fn, dict(kw)] for fn, kw in components]))
            if built is None:
                raise ValueError(f"filter ensemble {name} holds a filter with state")
            self._filters.append((name, built))

    def _field(self, source: Any, doc: dict[str, Any]) -> Any:
        """YamlTask.doc_to_text / doc_to_target's lookup: a number or list as it is, a doc field, else a template."""
        if isinstance(source, (int, list)):
            return source
        return doc[source] if source in self._features else render(source, doc)

    def target(self, doc: dict[str, Any]) -> Any:
        source = self.recipe["doc_to_target"]
        out = self._field(source, doc)
        return lite.rendered_target(out) if isinstance(source, str) and source not in self._features else out

    def messages(self, doc: dict[str, Any], multiturn: bool) -> list[dict[str, str]]:
        """YamlTask.fewshot_context with no system instruction, for a chat endpoint (lm-eval's prompt helpers)."""
        from lm_eval.api.utils import Message, maybe_delimit, multiturn_to_singleturn

        description = self.recipe["description"]
        description = (doc[description] if description in doc else render(description, doc)) if description else ""
        system = maybe_delimit(None, description, self.recipe["fewshot_delimiter"])
        turns = [Message("system", system)] if system else []
        turns += [Message(role, content, delimiter) for role, content, delimiter in self.recipe["fewshot_turns"]]
        turns += lite.build_qa_turn(q=self._field(self.recipe["doc_to_text"], doc), tgt_delim=self.recipe["target_delimiter"],
                                    few_delim="")
        return [m.to_dict() for m in turns] if multiturn else multiturn_to_singleturn(turns)

    def judge(self, doc: dict[str, Any], text: str | None) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
        """lm_eval_judge: each filter ensemble in turn, then the generate_until branch of process_results."""
        metrics: dict[str, dict[str, Any]] = {}
        filtered: dict[str, Any] = {}
        target = self.target(doc)  # rendered once: the same for every ensemble
        for name, built in self._filters:
            out = le.apply_filters(built, doc, text)
            filtered[name] = out
            gold = target
            if type(gold) is not type(out) and not isinstance(out, list):
                gold = type(out)(gold)
            scores: dict[str, Any] = {}
            for _metric, kwargs in self._metrics:
                scores.update(exact_match(predictions=[out], references=[gold], **kwargs))
            metrics[name] = scores
        return metrics, filtered


# ---------------------------------------------------------------- compiling, checking, caching


def _lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm_eval")


def _key(cfg: dict[str, Any], probe_doc: dict[str, Any]) -> str | None:
    """The cache key of a resolved YAML (None when it holds a `!function`, which data cannot state)."""
    try:
        text = json.dumps([COMPILER, _lm_eval_version(), cfg, probe_doc], sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compile_recipe(task: Any) -> dict[str, Any] | None:
    """The recipe of a YamlTask, or None when one of its parts is behaviour rather than data."""
    cfg, fs = task.config, task.fewshot_cfg
    if fs.sampler != "first_n" or fs.split == cfg.test_split or cfg.process_results is not None:
        return None
    metrics = []
    for mc in cfg.metric_list or ():
        kwargs = {k: mc[k] for k in mc if k not in ("metric", "aggregation", "higher_is_better", "hf_evaluate")}
        if mc.get("metric") != "exact_match" or mc.get("hf_evaluate") or set(kwargs) - set(EXACT_MATCH_ARGS):
            return None
        metrics.append(["exact_match", kwargs])
    if not metrics or cfg.filter_list is None:
        return None
    filters = [[fc["name"], [[f["function"], {k: f[k] for k in f if k != "function"}] for f in fc["filter"]]]
               for fc in cfg.filter_list]
    turns = task.fewshot_turns(None, cfg.num_fewshot or 0)
    recipe = {
        "format": COMPILER, "task": cfg.task, "version": task.VERSION, "stop": le.chat_stop(task), "features": task.features,
        "description": cfg.description or "", "fewshot_delimiter": cfg.fewshot_delimiter,
        "target_delimiter": cfg.target_delimiter, "doc_to_text": cfg.doc_to_text, "doc_to_target": cfg.doc_to_target,
        "fewshot_turns": [[m.role, m.content, m._delimiter] for m in turns], "filters": filters, "metrics": metrics,
    }
    try:  # data only: what does not come back from JSON as it went in is behaviour
        back = json.loads(json.dumps(recipe))
    except (TypeError, ValueError):
        return None
    return back if back == recipe else None


def _probe_docs(task: Any, probe_doc: dict[str, Any]) -> list[dict[str, Any]]:
    samples = task.fewshot_cfg.samples
    samples = list(samples() if callable(samples) else samples or [])
    docs = [probe_doc] + [{k: d.get(k, v) for k, v in probe_doc.items()} for d in samples[:3] if isinstance(d, dict)]
    return docs + [{**probe_doc, **{k: f"{v} ünïcödé\n{{{{x}}}} 1,234.5" for k, v in probe_doc.items() if isinstance(v, str)}}]


def agrees(compiled: CompiledTask, reference: LmEvalTask, docs: list[dict[str, Any]]) -> bool:
    """Whether the compiled task answers as lm-eval's code does on every probe doc and generation (a template over the
    render bounds does not)."""
    from suites.bounded_jinja import TemplateBudget

    try:
        return _agrees(compiled, reference, docs)
    except TemplateBudget:
        return False


def _agrees(compiled: CompiledTask, reference: LmEvalTask, docs: list[dict[str, Any]]) -> bool:
    for doc in docs:
        target = reference.target(doc)
        if compiled.target(doc) != target or compiled.stop != reference.stop:
            return False
        if any(compiled.messages(doc, m) != reference.messages(doc, m) for m in (True, False)):
            return False
        for text in PROBE_TEXTS:
            generation = text.replace("{t}", str(target))
            if compiled.judge(doc, generation) != reference.judge(doc, generation):
                return False
    return True


def _sealed_text(recipe: dict[str, Any]) -> bytes:
    """What the seal covers: the recipe without its seal, as canonical JSON."""
    return json.dumps({k: v for k, v in recipe.items() if k != "seal"}, sort_keys=True, ensure_ascii=True).encode("ascii")


def sealed(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe with this user's seal: what was checked against lm-eval, bound to this user's key."""
    return {**recipe, "seal": sealing.seal(_sealed_text(recipe))}


def _valid(recipe: Any, key: str) -> bool:
    return (isinstance(recipe, dict) and recipe.get("key") == key and recipe.get("format") == COMPILER
            and sealing.holds(_sealed_text(recipe), recipe.get("seal"))
            and isinstance(recipe.get("task"), str) and isinstance(recipe.get("stop"), list)
            and isinstance(recipe.get("features"), list) and isinstance(recipe.get("fewshot_turns"), list)
            and all(isinstance(t, list) and len(t) == 3 and all(isinstance(x, str) for x in t) for t in recipe["fewshot_turns"])
            and isinstance(recipe.get("filters"), list) and isinstance(recipe.get("metrics"), list)
            and all(isinstance(m, list) and len(m) == 2 and m[0] == "exact_match" and isinstance(m[1], dict)
                    and set(m[1]) <= set(EXACT_MATCH_ARGS) for m in recipe["metrics"])
            and all(isinstance(recipe.get(k), str) for k in ("description", "fewshot_delimiter", "target_delimiter"))
            and all(isinstance(recipe.get(k), (str, int)) for k in ("doc_to_text", "doc_to_target")))


def _read(path: Path, key: str) -> CompiledTask | None:
    try:
        recipe = json.loads(safeio.read_bytes(path, max_bytes=MAX_FILE))
        return CompiledTask(recipe) if _valid(recipe, key) else None
    except (OSError, ValueError, TypeError, KeyError):  # safeio.UnsafeFile is a ValueError
        return None


def _write(path: Path, recipe: dict[str, Any]) -> None:
    """Atomic; a cache that cannot be written is no cache (the compiled task is still used by this process)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".compiling-")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(recipe, f, ensure_ascii=False)
        os.replace(tmp, path)
    except OSError:
        pass


def task_for(yaml_path: str | Path, probe_doc: dict[str, Any]) -> CompiledTask | LmEvalTask:
    """The task of one lm-eval YAML: compiled (from the cache, or compiled and checked now), else lm-eval's."""
    cfg = lite._read_yaml(str(yaml_path))
    key = _key(cfg, probe_doc)
    where = cache_dir()
    path = where / "lm_eval_tasks" / f"{key}.json" if key and where is not None else None
    if path is not None:
        hit = _read(path, key or "")
        if hit is not None:
            return hit
    reference = LmEvalTask(lite.yaml_task(yaml_path, probe_doc))
    recipe = compile_recipe(reference.task) if key else None
    if recipe is None:
        return reference
    recipe["key"] = key
    recipe = sealed(recipe)
    try:
        compiled = CompiledTask(recipe)
    except ValueError:
        return reference
    if not agrees(compiled, reference, _probe_docs(reference.task, probe_doc)):
        return reference
    if path is not None:
        _write(path, recipe)
    return compiled
