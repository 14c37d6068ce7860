"""BFCL v4 single-turn tool calling (FC mode): BFCL data -> OpenAI `tools` -> BFCL's AST decision.

Why a suite of its own: tool calling is where serving frontends break most
(parsers, streaming assembly, templates), and BFCL gives ground truth that is
judged with documented, reproducible rules. Each verdict also carries the
weight-independent K2-Vendor-Verifier signals (tool triggered, schema-valid
calls), so a parser regression shows up even when accuracy barely moves.

Data: BFCL_v4_<category>.json (one JSON object a line) and
possible_answer/BFCL_v4_<category>.json, from `--data DIR`, else
$VERIFIER_BFCL_DATA, else the data dir of an installed `bfcl_eval` (located,
never imported: it pulls torch). `smoke=True` reads a built-in 22-item subset
(2 per category) shipped in suites/data/bfcl_smoke.jsonl, so it works offline.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

from verifier.types import JUDGED, Finding, Judgement, Parsed, Sample, Suite, Verdict

import suites.bfcl_checker as chk

NAME = "bfcl"
VERSION = "1"
CATEGORIES = (
    "simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple", "live_irrelevance", "live_relevance",
)
NO_ANSWER = frozenset({"irrelevance", "live_irrelevance", "live_relevance"})
"""Categories without a possible_answer file: irrelevance = no call is right, live_relevance = any call is right."""
SKIPPED = {
    "live_multiple_862-181-3": "every possible answer calls Trains_1_FindTrains with journey_start_time, which it does not declare",
    "live_multiple_964-207-0": "every possible answer calls transfer_to_human_agent with question, which it does not declare (it declares statement)",
}
"""BFCL items no answer can pass, under bfcl-eval's checker or ours (a required answer parameter the function does not
declare is an unexpected parameter): not loaded, so they do not count as wrong answers. docs/reference/suites.md."""
SMOKE_FILE = Path(__file__).parent / "data" / "bfcl_smoke.jsonl"
ENV_VAR = "VERIFIER_BFCL_DATA"
TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array"}
"""BFCL type names that are not JSON Schema; "any" drops the type constraint instead."""


# ---- BFCL function docs -> OpenAI tools ----


def to_json_schema(s: Any) -> Any:
    """Map BFCL's type names to JSON Schema, recursively through properties, items and additionalProperties."""
    if isinstance(s, list):
        return [to_json_schema(x) for x in s]
    if not isinstance(s, dict):
        return s
    out: dict[str, Any] = {}
    for k, v in s.items():
        if k == "type" and isinstance(v, str):
            if v == "any":
                continue
            out[k] = TYPE_MAP.get(v, v)
        elif k == "properties" and isinstance(v, dict):
            out[k] = {p: to_json_schema(x) for p, x in v.items()}
        elif k in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[k] = to_json_schema(v)
        else:
            out[k] = v
    return out


def openai_name(name: str) -> str:
    """OpenAI tool names match ^[a-zA-Z0-9_-]{1,64}$; BFCL maps '.' to '_' for such models."""
    return name.replace(".", "_")


def to_tools(functions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """BFCL function docs -> (OpenAI tools, {openai name: original BFCL name})."""
    tools, names = [], {}
    for f in functions:
        n = openai_name(f["name"])
        names[n] = f["name"]
        fn = {"name": n, "description": f.get("description", ""), "parameters": to_json_schema(f.get("parameters") or {"type": "dict", "properties": {}})}
        tools.append({"type": "function", "function": fn})
    return tools, names


# ---- loading ----


def data_dir(data: str | None) -> Path:
    """Explicit beats implicit: --data, then $VERIFIER_BFCL_DATA, then an installed bfcl_eval's data dir."""
    if data:
        return Path(data)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    spec = importlib.util.find_spec("bfcl_eval")  # top-level lookup: does not import the package
    for loc in (spec.submodule_search_locations or []) if spec else []:
        if (Path(loc) / "data").is_dir():
            return Path(loc) / "data"
    raise FileNotFoundError(f"BFCL data not found: pass --data DIR (holding BFCL_v4_<category>.json), set ${ENV_VAR}, or install bfcl-eval")


def _jsonl(path: Path) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def make_sample(category: str, entry: dict[str, Any], answer: dict[str, Any] | None) -> Sample:
    tools, names = to_tools(entry["function"])
    return Sample(
        id=f"{category}/{entry['id']}",
        messages=entry["question"][0],
        tools=tools or None,
        target=answer["ground_truth"] if answer else None,
        meta={"category": category, "bfcl_id": entry["id"], "functions": entry["function"], "names": names},
    )


def load_category(root: Path, category: str) -> list[Sample]:
    entries = _jsonl(root / f"BFCL_v4_{category}.json")
    answers: dict[str, dict[str, Any]] = {}
    if category not in NO_ANSWER:
        answers = {a["id"]: a for a in _jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
        missing = [e["id"] for e in entries if e["id"] not in answers]
        if missing:
            raise ValueError(f"{category}: no possible answer for {missing[:3]}")
    return [make_sample(category, e, answers.get(e["id"])) for e in entries if e["id"] not in SKIPPED]


def stratified(groups: list[list[Sample]]) -> list[Sample]:
    """The categories interleaved: the first item of each (in CATEGORIES order), then the second of each, and so on,
    each in file order. Any prefix (`--limit N`) then draws from every category, multi-call ones included, instead of
    N items of the first file (the first 400 are all simple_python); the order is fixed, so reruns pick the same."""
    out: list[Sample] = []
    for k in range(max((len(g) for g in groups), default=0)):
        out += [g[k] for g in groups if k < len(g)]
    return out


def load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    """All categories present, interleaved (stratified: item k of every category before item k+1 of any), each in
    file order; smoke: the built-in subset, in CATEGORIES order.

    `data` may also name one BFCL_v4_<category>.json file (its possible_answer/ dir beside it).
    """
    if smoke:
        rows = _jsonl(SMOKE_FILE)
        order = {c: i for i, c in enumerate(CATEGORIES)}
        rows.sort(key=lambda r: order[r["category"]])  # stable: file order within a category
        return [make_sample(r["category"], r["entry"], r["possible_answer"]) for r in rows]
    root = data_dir(data)
    m = re.fullmatch(r"BFCL_v4_(\w+)\.json", root.name)
    if root.is_file() and m and m.group(1) in CATEGORIES:  # one category file, answers beside it
        return load_category(root.parent, m.group(1))
    if not root.is_dir():
        raise FileNotFoundError(f"BFCL data dir {root} does not exist (want a dir holding BFCL_v4_<category>.json)")
    present = [c for c in CATEGORIES if (root / f"BFCL_v4_{c}.json").is_file()]
    if not present:
        raise FileNotFoundError(f"no BFCL_v4_<category>.json files in {root}")
    return stratified([load_category(root, c) for c in present])


# ---- request and score ----


def request(sample: Sample) -> dict[str, Any]:
    body: dict[str, Any] = {"messages": sample.messages}
    if sample.tools:  # some live_irrelevance entries declare no function; `tools: []` is rejected by many servers
        body["tools"] = sample.tools
        body["tool_choice"] = "auto"
    return body


def decoded_calls(parsed: Parsed, names: dict[str, str]) -> list[chk.Call]:
    """Returned tool calls -> (original BFCL name, decoded arguments or the raw value when undecodable): the answer
    as recorded (and diffed against the golden's), read leniently so that every call shows. Scoring reads the calls
    as BFCL does instead (chk.decode_fc)."""
    out: list[chk.Call] = []
    for c in parsed.tool_calls if isinstance(parsed.tool_calls, list) else []:
        fn = (c.get("function") if isinstance(c, dict) else None) or {}
        name = str(fn.get("name"))
        raw = fn.get("arguments")
        args = chk.decode_args(raw)
        out.append((names.get(name, name), args if args is not None else raw))
    return out


def text_call_findings(sample: Sample, parsed: Parsed) -> tuple[Finding, ...]:
    """`tool_call_as_text`: no tool_calls, but content holds a JSON call to a declared function."""
    if parsed.tool_calls or not sample.tools:
        return ()
    names = set(sample.meta.get("names", {})) | set(sample.meta.get("names", {}).values())
    found = chk.calls_as_text(parsed.content, names)
    return (Finding("tool_call_as_text", ", ".join(sorted(set(found)))[:120]),) if found else ()


def _sort_key(call: dict[str, Any]) -> str:
    return json.dumps(call, sort_keys=True, ensure_ascii=False)


def score(sample: Sample, parsed: Parsed) -> Judgement:
    category = sample.meta["category"]
    calls = decoded_calls(parsed, sample.meta.get("names", {}))
    r = chk.check(sample.meta["functions"], chk.decode_fc(parsed.tool_calls), sample.target, category)
    checks = chk.call_checks(sample.tools, parsed.tool_calls)
    sig = chk.k2vv_signals(sample.tools, parsed.tool_calls, parsed.finish_reason, checks)
    metrics = {"accuracy": float(r.ok)}
    if (accuracy := chk.schema_accuracy(sig)) is not None:
        metrics["schema_accuracy"] = accuracy
    return Judgement(
        score=float(r.ok), answer=sorted(({"name": n, "arguments": a} for n, a in calls), key=_sort_key),
        reason=r.code if not r.ok else "correct",
        findings=text_call_findings(sample, parsed) + chk.not_checkable_finding(sample.tools, parsed.tool_calls, checks), metrics=metrics,
        signals={**sig, "category": category, "expects_call": "irrelevance" not in category, "check_detail": r.detail},
    )


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    """Per-category accuracy as bfcl-eval counts the same outputs (every answered sample, contract verdicts included:
    their score is BFCL's verdict on what was sent, and one without a score, a body that could not be read, is
    wrong; epochs averaged per sample), K2VV schema accuracy and triggers.
    The suite's `metrics.accuracy` keeps the project's rule instead: content verdicts only."""
    per: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for v in verdicts:
        if v.outcome in JUDGED:  # a contract verdict without a score (a malformed body) held no call: wrong to bfcl-eval
            category = str(v.signals.get("category") or v.sample_id.split("/", 1)[0])
            per[category][v.sample_id].append(v.score if v.score is not None else 0.0)
    by_cat = {}
    for cat in sorted(per, key=lambda c: (CATEGORIES.index(c) if c in CATEGORIES else len(CATEGORIES), c)):
        vals = [sum(x) / len(x) for x in per[cat].values()]
        by_cat[cat] = {"accuracy": round(sum(vals) / len(vals), 6), "n": len(vals)}
    out = chk.k2vv_summary(verdicts)
    judged = [v for v in verdicts if v.outcome in ("content", "contract")]
    called = [bool(v.signals.get("n_calls")) for v in judged]
    expects = [bool(v.signals.get("expects_call")) for v in judged]
    tp = sum(c and e for c, e in zip(called, expects))
    fp = sum(c and not e for c, e in zip(called, expects))
    fn = sum(e and not c for c, e in zip(called, expects))
    prec = tp / (tp + fp) if tp + fp else None
    rec = tp / (tp + fn) if tp + fn else None
    f1 = 2 * prec * rec / (prec + rec) if prec and rec else (0.0 if prec is not None and rec is not None else None)

    def rnd(x: float | None) -> float | None:
        return None if x is None else round(x, 6)

    out["trigger"].update({"expected_call": sum(expects), "tp": tp, "fp": fp, "fn": fn, "tn": len(judged) - tp - fp - fn,
                           "precision": rnd(prec), "recall": rnd(rec), "f1": rnd(f1)})
    out["accuracy_by_category"] = by_cat
    out["category_mean_accuracy"] = round(sum(c["accuracy"] for c in by_cat.values()) / len(by_cat), 6) if by_cat else None
    return out


SUITE = Suite(
    name=NAME, version=VERSION, load=load, request=request, score=score, summarize=summarize,
    description="BFCL v4 single-turn tool calling (FC mode), BFCL AST checker + K2VV schema accuracy",
)
