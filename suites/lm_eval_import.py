"""lm-eval's output as a verifier run: the importer, the `lm_eval` suite and `verifier lm-eval`.

Everything here reads lm-eval's output shapes; nothing calls lm-eval's code (that is
suites/lm_eval_adapter.py, including `run_task`, the passthrough run), so importing a saved
samples file works without lm-eval installed.

- `import_samples`: lm-eval's per-sample log -> our run directory (run.json, samples.jsonl,
  responses.jsonl), so goldens, compare and report work for lm-eval tasks too.

An imported run is *not* a wire recording: lm-eval keeps only the response text. Each Exchange
body is a synthetic chat.completion holding that text; `finish_reason` is "stop" and `usage`
holds nulls because lm-eval discarded both (saying "missing" would blame the endpoint for our
importer). The body carries `"x_verifier_imported": "lm-eval"` so nobody mistakes it for wire bytes.
lm-eval's per-sample metric values travel in `Sample.meta["lm_eval"]`; the `lm_eval` suite's
scorer just reads them back, so `score` stays pure and reproduces lm-eval's numbers exactly.
"""

from __future__ import annotations

import hashlib
import json
import numbers
from pathlib import Path
from typing import Any, Iterable

from verifier.errors import UsageError
from verifier.types import Exchange, Judgement, Parsed, RunHeader, RunSummary, Sample, Suite, Verdict
from verifier.surfaces.registry import REFERENCE_MODE

import suites.hub as hub
import suites.lm_eval_adapter as adapter
import suites.lm_eval_files as lm_eval_files
import suites.lm_eval_recorder as recorder
from verifier import jsonsafe

NAME = "lm_eval"
VERSION = "1"
PREFIX = NAME + ":"
IMPORTED_MARK = "x_verifier_imported"


# ---------------------------------------------------------------- importer


def metric_key(metric: str, filt: str) -> str:
    """lm-eval reports `exact_match,strict-match`; a comma would break our comma-separated CLI lists."""
    return metric if filt == "none" else f"{metric}:{filt}"


def read_samples_file(path: str | Path) -> list[dict[str, Any]]:
    """The `samples_<task>_<date>.jsonl` file lm-eval writes with --output_path --log_samples."""
    with open(path, encoding="utf-8") as f:
        return [jsonsafe.loads(line) for line in f if line.strip()]


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
            val = jsonsafe.loads(ctx)
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


def to_run_records(samples: list[dict[str, Any]], task: str, model: str,
                   recorded: dict[str, Any] | None = None) -> tuple[list[Sample], list[Exchange]]:
    """lm-eval log rows (one per doc x filter) -> one Sample and one Exchange per doc. With `recorded`
    ({messages key: Recorded} from suites/lm_eval_recorder.py) the Exchange is the real round trip."""
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
        real = (recorded or {}).get(recorder.messages_key(messages))
        if real is not None:
            out_x.append(Exchange(suite=suite, sample_id=sample.id, epoch=0, mode="chat", request=real.request,
                                  status=real.status or None, body=real.body, latency_ms=real.latency_ms,
                                  error=None if real.status else "connect_error"))
        else:
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
    from verifier import safewrite

    h = hashlib.sha256()
    for s in samples:
        h.update(safewrite.canonical({"id": s.id, "messages": s.messages, "target": s.target}).encode())
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
    recorded: dict[str, Any] | None = None,
) -> Path:
    """Write lm-eval per-sample logs as a run directory. `samples` is one task's list, or
    `results["samples"]` ({task: list}) with `task=None` for all of them. Returns the run dir."""
    from verifier.execution import journal
    from verifier import safewrite, scrub

    scrub.register_env(api_key_env)  # an echoed key in lm-eval's logged responses never reaches the run
    per_task = samples if isinstance(samples, dict) else {task: samples}
    if task is not None and isinstance(samples, dict):
        per_task = {task: samples[task]}
    if any(t is None for t in per_task):
        raise ValueError("import_samples needs the task name for a list of samples")
    named = {t: rows for t, rows in per_task.items() if t is not None}
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_samples: list[tuple[str, Sample]] = []
    all_x: list[Exchange] = []
    suites_hdr: dict[str, Any] = {}
    for t, rows in sorted(named.items()):
        ss, xs = to_run_records(rows, t, model, recorded)
        suites_hdr[PREFIX + t] = {"version": VERSION, "dataset_sha256": stable_sha256(ss), "samples": len(ss), "requests": len(xs)}
        all_samples += [(PREFIX + t, s) for s in ss]
        all_x += xs
    header = run_header(out.name, model, base_url, api_key_env, suites_hdr, lm_eval_config)
    journal.write_samples(out, all_samples)
    safewrite.write_jsonl(out / journal.RESPONSES, (x.to_json() for x in all_x))
    journal.write_header(out, header)
    return out


def run_header(run_id: str, model: str, base_url: str, api_key_env: str | None,
               suites_hdr: dict[str, Any], lm_eval_config: dict[str, Any] | None) -> RunHeader:
    """run.json of an imported run: the shape runner.header writes, plus where the data came from."""
    from verifier.execution import journal
    from verifier.wire.endpoint import redact_url

    try:
        import lm_eval

        lm_version = getattr(lm_eval, "__version__", None)
    except ImportError:  # importing a saved samples file does not need lm-eval installed
        lm_version = None
    stamp = journal.now()
    return journal.run_header(
        run_id,
        endpoint={"base_url": redact_url(base_url), "model": model, "api_key_env": api_key_env, "header_names": []},
        sampling={"defaults": {}, "overrides": {}, "note": "set by lm-eval per task; see each request"},
        extra_body={}, epochs=1, modes=[REFERENCE_MODE], suites=suites_hdr, started=stamp, finished=stamp,
        imported_from={"tool": "lm-eval", "version": lm_version, "configs": _jsonable(lm_eval_config or {})},
    )


def _jsonable(obj: Any) -> Any:
    return jsonsafe.loads(json.dumps(obj, default=str))


# ---------------------------------------------------------------- the suite for imported runs


def _load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    raise ValueError("use `verifier lm-eval --task ...`")


def _request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages}


def score(sample: Sample, parsed: Parsed) -> Judgement:
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
    return Judgement(score=value, answer=answer, reason=reason, metrics=metrics)


SUITE = Suite(
    name=NAME, version=VERSION, load=_load, request=_request, score=score,
    description="plus lm-eval passthrough: `verifier lm-eval --task T` runs any generate_until task and imports it as lm_eval:<task>",
)


# ---------------------------------------------------------------- `verifier lm-eval` (flags: verifier/cli/lm_eval.py)


def run(spec: lm_eval_files.LmEvalSpec) -> tuple[Path, RunSummary]:
    """`verifier lm-eval`: run (or import) lm-eval tasks into a run directory, then score it.
    Returns (run directory, summary)."""
    from verifier.execution import scoring

    tasks = [t.strip() for t in spec.tasks if t.strip()]
    if not tasks:
        raise UsageError("--task is required")
    spec = lm_eval_files.resolve(spec)
    assert spec.out is not None  # resolve sets it or raises UsageError
    out = Path(spec.out)
    _new_run_dir(out)
    if spec.import_samples:
        _import_file(spec, spec.import_samples, tasks, out)
    else:
        _run_and_import(spec, tasks, out)
    # With its observations: compare, bless and the report read an imported run as they read any other.
    verdicts, summary, observed = scoring.score_journal(out, {SUITE.name: SUITE})
    scoring.write_scores(out, verdicts, summary, observed)
    return out, summary


def _new_run_dir(path: Path) -> None:
    """Refuse to import over an existing run; the directory must be writable before lm-eval runs for minutes."""
    from verifier.execution import journal

    journal.ensure_writable_new_dir(path, resumable=False)


def _import_file(a: lm_eval_files.LmEvalSpec, path: str, tasks: list[str], out: Path) -> None:
    """`path`: the spec's import_samples."""
    if len(tasks) != 1:
        raise UsageError("--import-samples takes exactly one --task")
    try:
        rows = read_samples_file(path)
    except OSError as e:
        raise UsageError(f"--import-samples: cannot read {path}: {e.strerror}") from None
    import_samples(rows, tasks[0], out, a.model or "unknown", a.base_url or "", api_key_env=None)


def _run_and_import(a: lm_eval_files.LmEvalSpec, tasks: list[str], out: Path) -> None:
    if not a.base_url or not a.model:
        raise UsageError("lm-eval needs --base-url and --model (or --import-samples)")
    model = a.model
    tracker = lm_eval_files.tracker(a.output_path)
    # lm-eval -> recorder -> endpoint: the imported run keeps the real wire bytes, usage, latency, finish_reason.
    with recorder.Recorder(a.base_url, timeout_s=600.0) as rec:
        try:
            results = hub.load(
                f"lm-eval task {','.join(tasks)} (its dataset comes from the hub)", lambda: _evaluate(a, model, tasks, rec.url, tracker),
                ("pass --import-samples JSONL", "use `verifier run --suite gsm8k --data PATH`"),
                probe_first=not all(Path(t).is_file() for t in tasks))  # YAML tasks may use local data only
        except (KeyError, ValueError) as e:
            raise UsageError(f"lm-eval: {e}") from None
    lm_eval_files.save(tracker, lm_eval_files.unproxied(results, rec.url, a.base_url), a.log_samples)
    import_samples(results.get("samples") or {}, None, out, a.model, a.base_url,
                   lm_eval_config=results.get("configs"), api_key_env=a.api_key_env, recorded=rec.by_messages())


def _evaluate(a: lm_eval_files.LmEvalSpec, model: str, tasks: list[str], url: str, tracker: Any) -> dict[str, Any]:
    """`model`: the spec's, checked given."""
    limit = int(a.limit) if a.limit is not None and a.limit >= 1 else a.limit
    return adapter.run_task(tasks, url, model, limit=limit, num_concurrent=a.concurrency, max_gen_toks=a.max_tokens,
                            num_fewshot=a.num_fewshot, fewshot_as_multiturn=not a.single_turn, include_path=a.include_path,
                            api_key_env=a.api_key_env, evaluation_tracker=tracker)


def score_imported(run_dir: Path) -> tuple[list[Verdict], RunSummary]:
    """score_run for an imported run: the engine scores every `lm_eval:<task>` with the `lm_eval` suite."""
    from verifier.execution import scoring

    return scoring.score_run(run_dir, {SUITE.name: SUITE})
