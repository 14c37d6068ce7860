"""The BFCL parity table: model-free candidate answers, each scored by bfcl-eval's own checker.

verifier's BFCL accuracy must be bfcl-eval's on the same outputs (FC mode, an OpenAI-style model whose config maps
`.` in function names to `_`). This script builds a candidate set from the BFCL data (exact calls, alternatives,
omitted optionals, wrong types, nested element types, enums, case, order, parallel order, nested values, malformed,
non-string and empty arguments, dotted names, relevance with undecodable or non-object arguments...), scores every
candidate with bfcl-eval's runner functions (`_evaluate_single_ast_entry`, `_evaluate_single_relevance_entry`, which
call the FC handler's `decode_ast` and `ast_checker`), and writes tests/bfcl_parity_table.json: per BFCL item, the
verdicts in candidate order and a digest of the candidates. tests/test_bfcl_parity.py regenerates the same
candidates (`candidates`, pure), scores them with verifier's scorer and asserts 0 disagreements, offline.

bfcl-eval is installed without its dependencies (they include torch); its checker needs none of them, but the
modules the runner imports pull in provider SDKs and parsers, which are replaced by inert stand-ins here (never
called on this path). Its model registry is one of those imports: the stand-in holds the one entry this script
scores as, checked against the registry's source text.

Re-check (the pinned version, or a newer one):
    pip install --no-deps --target /tmp/bfcl-eval bfcl-eval==2026.3.23
    python scripts/bfcl_parity_table.py --bfcl-eval /tmp/bfcl-eval          # rewrites the table
    python scripts/bfcl_parity_table.py --bfcl-eval /tmp/bfcl-eval --check  # exit 1 when a verdict moved
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from suites import bfcl  # noqa: E402

BFCL_EVAL_VERSION = "2026.3.23"
MODEL = "gpt-4o-2024-11-20-FC"
"""The bfcl-eval model entry scored as: an OpenAI FC model (`underscore_to_dot=True`)."""
TABLE = ROOT / "tests" / "bfcl_parity_table.json"
INSTALLED = ""
"""The bfcl-eval version found (load_bfcl_eval)."""
AST_CATEGORIES = tuple(c for c in bfcl.CATEGORIES if c not in bfcl.NO_ANSWER)
PER_CATEGORY = 20
"""Items per category, evenly spaced through the file, plus the first item each otherwise unexercised kind needs."""

Candidate = tuple[str, Any, Any]
"""(kind, tool_calls as the server sent them (None: no tool_calls key), content)."""


# ---- candidates (pure: the test regenerates them) ----


def _non_empty(vals: list[Any]) -> list[Any]:
    return [v for v in vals if v != ""] if isinstance(vals, list) else []


def _pick(value: Any, last: bool = False) -> Any:
    """A concrete value from one acceptable answer value: dicts and lists of dicts hold lists of acceptable values."""
    if isinstance(value, dict):
        out = {}
        for k, vs in value.items():
            ne = _non_empty(vs)
            if ne:
                out[k] = _pick(ne[-1] if last else ne[0], last)
        return out
    if isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        return [_pick(x, last) for x in value]
    return value


def _args(params: dict[str, list[Any]], last: bool = False, omit_optional: bool = False) -> dict[str, Any]:
    out = {}
    for p, vals in params.items():
        ne = _non_empty(vals)
        if not ne or (omit_optional and "" in vals):
            continue
        out[p] = _pick(ne[-1] if last else ne[0], last)
    return out


def _call(name: str, args: Any, i: int = 0) -> dict[str, Any]:
    return {"id": f"call_{i}", "type": "function",
            "function": {"name": name, "arguments": args if not isinstance(args, dict) else json.dumps(args)}}


def _wire(calls: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [_call(n, a, i) for i, (n, a) in enumerate(calls)]


def _doc(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next((f for f in functions if f.get("name") == name), {})


def _props(doc: dict[str, Any]) -> dict[str, Any]:
    return (doc.get("parameters") or {}).get("properties") or {}


def _wrong_type(v: Any) -> Any:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return float(v)
    if isinstance(v, float):
        return str(v)
    if isinstance(v, str):
        return 12345
    if isinstance(v, list):
        return json.dumps(v)
    if isinstance(v, dict):
        return list(v.values())
    return "x"


def _element_retyped(v: list[Any]) -> list[Any] | None:
    """An array whose numeric elements change type (int <-> float) or whose strings become numbers."""
    if not v:
        return None
    if all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        return [float(x) for x in v]
    if all(isinstance(x, float) for x in v):
        return [int(x) if x == int(x) else str(x) for x in v]
    if all(isinstance(x, str) for x in v):
        return [len(x) for x in v]
    return None


def _param_kinds(name: str, doc: dict[str, Any], params: dict[str, list[Any]], base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One-call variants that change one parameter of the exact call."""
    out: list[tuple[str, dict[str, Any]]] = []
    props = _props(doc)
    required = (doc.get("parameters") or {}).get("required") or []
    if base:
        first = next(iter(base))
        out.append(("wrong_type", {**base, first: _wrong_type(base[first])}))
        out.append(("missing_param", {k: v for k, v in base.items() if k != first}))
        out.append(("key_order", dict(reversed(list(base.items())))))
    out.append(("unexpected_param", {**base, "zz_not_declared": 1}))
    declared_unanswered = [p for p in props if p not in params]
    if declared_unanswered:
        p = declared_unanswered[0]
        out.append(("declared_not_in_answer", {**base, p: props[p].get("default", "x")}))
    missing_req = [p for p in required if p in base]
    if missing_req:
        out.append(("missing_required", {k: v for k, v in base.items() if k != missing_req[-1]}))
    for p, v in base.items():
        t = str((props.get(p) or {}).get("type"))
        if isinstance(v, str) and v:
            out.append(("case_upper", {**base, p: v.upper()}))
            out.append(("punctuation", {**base, p: v.replace(" ", " - ") + "."}))
            out.append(("value_wrong", {**base, p: v + " zz"}))
            enum = (props.get(p) or {}).get("enum") or []
            other = [e for e in enum if isinstance(e, str) and e.lower() != v.lower()]
            if other:
                out.append(("enum_other", {**base, p: other[0]}))
            if enum:
                out.append(("enum_case", {**base, p: v.swapcase()}))
            break
    for p, v in base.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append(("number_off_by_one", {**base, p: v + 1}))
            out.append(("number_as_string", {**base, p: str(v)}))
            if isinstance(v, float) and v == int(v):
                out.append(("float_as_int", {**base, p: int(v)}))
            if isinstance(v, int) and t == "float":
                out.append(("int_for_float", {**base, p: v}))
            break
    for p, v in base.items():
        if isinstance(v, bool):
            out.append(("bool_flipped", {**base, p: not v}))
            out.append(("bool_as_string", {**base, p: str(v).lower()}))
            break
    for p, v in base.items():
        if isinstance(v, list):
            if len(v) > 1:
                out.append(("list_order", {**base, p: list(reversed(v))}))
            retyped = _element_retyped(v)
            if retyped is not None:
                out.append(("nested_element_type", {**base, p: retyped}))
            out.append(("list_extra_element", {**base, p: v + v[:1]}))
            if v and all(isinstance(x, dict) for x in v):
                out.append(("list_dict_drop_key", {**base, p: [dict(list(x.items())[1:]) for x in v]}))
            break
    for p, v in base.items():
        if isinstance(v, dict) and v:
            k0 = next(iter(v))
            out.append(("dict_drop_key", {**base, p: {k: x for k, x in v.items() if k != k0}}))
            out.append(("dict_wrong_value", {**base, p: {**v, k0: _wrong_type(v[k0])}}))
            out.append(("dict_extra_key", {**base, p: {**v, "zz_key": 1}}))
            break
    return out


def ast_candidates(entry: dict[str, Any], answer: list[dict[str, Any]]) -> list[Candidate]:
    """Candidates for a category with possible answers, in a fixed order."""
    functions = entry["function"]
    names = [next(iter(a)) for a in answer]
    exact = [(bfcl.openai_name(n), _args(a[n])) for n, a in zip(names, answer)]
    out: list[Candidate] = [("exact", _wire(exact), None)]
    alt = [(bfcl.openai_name(n), _args(a[n], last=True)) for n, a in zip(names, answer)]
    if alt != exact:
        out.append(("alternative", _wire(alt), None))
    omit = [(bfcl.openai_name(n), _args(a[n], omit_optional=True)) for n, a in zip(names, answer)]
    if omit != exact:
        out.append(("omit_optional", _wire(omit), None))
    n0, a0 = exact[0]
    for kind, args in _param_kinds(names[0], _doc(functions, names[0]), answer[0][names[0]], a0):
        out.append((kind, _wire([(n0, args)] + exact[1:]), None))
    # names
    if "." in names[0]:
        out.append(("dotted_name", _wire([(names[0], a0)] + exact[1:]), None))
    elif "_" in n0:
        out.append(("underscore_as_dot", _wire([(n0.replace("_", ".", 1), a0)] + exact[1:]), None))
    out.append(("name_case", _wire([(n0.upper(), a0)] + exact[1:]), None))
    others = [f["name"] for f in functions if f["name"] != names[0]]
    if others:
        out.append(("other_function", _wire([(bfcl.openai_name(others[0]), a0)] + exact[1:]), None))
    # calls
    if len(exact) > 1:
        out.append(("parallel_reversed", _wire(exact[::-1]), None))
        out.append(("parallel_rotated", _wire(exact[1:] + exact[:1]), None))
        out.append(("parallel_one_missing", _wire(exact[:-1]), None))
        out.append(("parallel_first_twice", _wire([exact[0]] + exact[:-1]), None))
    out.append(("one_extra_call", _wire(exact + exact[:1]), None))
    # the envelope: arguments as bfcl-eval's decoder reads them
    wire = _wire(exact)
    for kind, raw in (("args_object", a0), ("args_empty_string", ""), ("args_whitespace", " "), ("args_bad_json", "{bad"),
                      ("args_null", "null"), ("args_list", "[1]"), ("args_number", "1"), ("args_empty_object", "{}"),
                      ("args_truncated", json.dumps(a0)[:-1]), ("args_trailing_text", json.dumps(a0) + " x"),
                      ("args_nan", json.dumps({**a0, "zz_nan": 1}).replace("1}", "NaN}"))):
        w = copy.deepcopy(wire)
        w[0]["function"]["arguments"] = raw
        out.append((kind, w, None))
    if len(wire) > 1:
        w = copy.deepcopy(wire)
        w[-1]["function"]["arguments"] = exact[-1][1]
        out.append(("args_object_last_call", w, None))
    out.append(("no_call_text", None, "I cannot call a function for this."))
    out.append(("no_call_empty_list", [], None))
    out.append(("no_call_empty_content", None, ""))
    return out


def relevance_candidates(entry: dict[str, Any]) -> list[Candidate]:
    """Candidates for irrelevance / live_irrelevance / live_relevance: calls valid or not, and no call."""
    functions = entry.get("function") or []
    f0 = functions[0] if functions else {"name": "lookup", "parameters": {"properties": {}}}
    name = bfcl.openai_name(f0["name"])
    args = {p: "x" for p in ((f0.get("parameters") or {}).get("required") or [])}
    one = _wire([(name, args)])
    out: list[Candidate] = [("no_call_text", None, "No function fits this request."), ("no_call_empty_list", [], None),
                            ("call", one, None), ("call_empty_object", _wire([(name, {})]), None),
                            ("call_undeclared_name", _wire([("zz_undeclared", args)]), None),
                            ("call_dotted_name", _wire([(f0["name"].replace("_", ".", 1), args)]), None),
                            ("two_calls", _wire([(name, args), (name, {})]), None)]
    for kind, raw in (("args_object", args), ("args_empty_string", ""), ("args_bad_json", "{bad"), ("args_null", "null"),
                      ("args_list", "[1]"), ("args_string", '"x"')):
        w = copy.deepcopy(one)
        w[0]["function"]["arguments"] = raw
        out.append((kind, w, None))
    w = _wire([(name, args), (name, args)])
    w[1]["function"]["arguments"] = "{bad"
    out.append(("two_calls_one_bad", w, None))
    w = _wire([(name, args), (name, args)])
    w[1]["function"]["arguments"] = "null"
    out.append(("two_calls_one_null", w, None))
    return out


def candidates(category: str, entry: dict[str, Any], answer: dict[str, Any] | None) -> list[Candidate]:
    return relevance_candidates(entry) if category in bfcl.NO_ANSWER else ast_candidates(entry, answer["ground_truth"] if answer else [])


def digest(cands: list[Any]) -> str:
    return hashlib.sha256(json.dumps(cands, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


# ---- multi-turn candidates: whole histories (pure) ----

MT_PER_CATEGORY = 5
Step = Any
"""One answer of a multi-turn history: a list of (name, arguments as sent) calls, or a text (no call)."""
History = tuple[str, list[list[Step]]]
"""(kind, per turn the answers of that turn in order)."""


def _gt_calls(turn: list[str]) -> list[tuple[str, dict[str, Any]]]:
    from suites.bfcl_sims.execute import parse_gt_call

    return [parse_gt_call(c) for c in turn]


def _as_sent(calls: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, Any]]:
    return [(n, json.dumps(a)) for n, a in calls]


def mt_candidates(entry: dict[str, Any], answer: dict[str, Any]) -> list[History]:
    """Histories built from the ground truth: replayed right (one answer per turn, or one answer per call), with
    arguments as objects, with an undecodable call in an answer (then retried alone), a turn skipped, a call missing,
    a call repeated, calls reordered, calls made in a turn whose ground truth calls nothing. Each turn ends with a
    text answer, as a model's turn does."""
    gt = [_gt_calls(t) for t in answer["ground_truth"]]
    done = "Done."

    def turns(per_turn: list[list[Step]]) -> list[list[Step]]:
        return [steps + [done] for steps in per_turn]

    right = [[_as_sent(t)] if t else [] for t in gt]
    out: list[History] = [("mt_exact", turns(right))]
    out.append(("mt_step_per_call", turns([[_as_sent([c]) for c in t] for t in gt])))
    out.append(("mt_args_object", turns([[[(n, a) for n, a in t]] if t else [] for t in gt])))
    k = next((i for i, t in enumerate(gt) if t), None)
    if k is not None:
        for kind, raw in (("mt_args_bad_json", "{bad"), ("mt_args_empty_string", ""), ("mt_args_null", "null"), ("mt_args_list", "[1]")):
            bad = copy.deepcopy(right)
            bad[k][0] = bad[k][0][:-1] + [(bad[k][0][-1][0], raw)]
            out.append((kind, turns(bad)))
        skipped = copy.deepcopy(right)
        skipped[k] = []
        out.append(("mt_turn_skipped", turns(skipped)))
        extra = copy.deepcopy(right)
        extra[k] = [extra[k][0] + extra[k][0][:1]]
        out.append(("mt_call_repeated", turns(extra)))
        split_bad = copy.deepcopy(right)
        split_bad[k] = [[c] for c in split_bad[k][0]]
        split_bad[k][-1] = [(split_bad[k][-1][0][0], "{bad")]
        out.append(("mt_last_step_undecodable", turns(split_bad)))
        retry = copy.deepcopy(right)
        retry[k] = [retry[k][0][:-1] + [(retry[k][0][-1][0], "{bad")], retry[k][0][-1:]]
        out.append(("mt_bad_step_then_retry", turns(retry)))
    empty = next((i for i, t in enumerate(gt) if not t and i + 1 < len(gt) and gt[i + 1]), None)
    if empty is not None and not entry.get("missed_function"):  # a held-back function is not offered before its turn
        early = copy.deepcopy(right)
        early[empty] = [_as_sent(gt[empty + 1])]
        out.append(("mt_call_in_turn_without_ground_truth", turns(early)))
    last = max((i for i, t in enumerate(gt) if t), default=None)
    if last is not None:
        missing = copy.deepcopy(right)
        missing[last] = [missing[last][0][:-1]] if len(missing[last][0]) > 1 else []
        out.append(("mt_last_call_missing", turns(missing)))
    multi = next((i for i, t in enumerate(gt) if len(t) > 1), None)
    if multi is not None:
        rev = copy.deepcopy(right)
        rev[multi] = [rev[multi][0][::-1]]
        out.append(("mt_calls_reversed", turns(rev)))
    return out


def _kinds(category: str, entry: dict[str, Any], answer: dict[str, Any] | None) -> set[str]:
    return {k for k, _, _ in candidates(category, entry, answer)}


def select(category: str, entries: list[dict[str, Any]], answers: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Evenly spaced items of a category, then, for each kind some item of it would exercise and none chosen does, the
    first item that does; items the suite skips (bfcl.SKIPPED) are never chosen."""
    usable = [e for e in entries if e["id"] not in bfcl.SKIPPED]
    step = max(1, len(usable) // PER_CATEGORY)
    chosen = usable[::step][:PER_CATEGORY]
    have = set().union(*(_kinds(category, e, answers.get(e["id"])) for e in chosen)) if chosen else set()
    for e in usable:
        new = _kinds(category, e, answers.get(e["id"])) - have
        if new and e not in chosen:
            chosen.append(e)
            have |= new
    return chosen


def data(root: Path, category: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    entries = bfcl._jsonl(root / f"BFCL_v4_{category}.json")
    answers = {} if category in bfcl.NO_ANSWER else {a["id"]: a for a in bfcl._jsonl(root / "possible_answer" / f"BFCL_v4_{category}.json")}
    return entries, answers


def file_sha256(root: Path, category: str) -> str:
    h = hashlib.sha256((root / f"BFCL_v4_{category}.json").read_bytes())
    if category not in bfcl.NO_ANSWER:
        h.update((root / "possible_answer" / f"BFCL_v4_{category}.json").read_bytes())
    return h.hexdigest()


# ---- bfcl-eval's verdicts ----


class _Inert:
    """Stand-in for a name of a module bfcl-eval's checker path imports but never calls (a provider SDK, a parser)."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> "_Inert":
        return _Inert()

    def __getattr__(self, name: str) -> "_Inert":
        return _Inert()


def _inert_module(name: str) -> None:
    m = types.ModuleType(name)
    m.__path__ = []  # type: ignore[attr-defined]
    m.__getattr__ = lambda attr: _Inert  # type: ignore[method-assign]
    sys.modules[name] = m


def load_bfcl_eval(site: str | None) -> tuple[Any, Any, Any, Path]:
    """(eval_runner, an FC OpenAICompletionsHandler, the Language/ReturnFormat enums module, the package's data dir)."""
    if site:
        sys.path.insert(0, site)
    os.environ.setdefault("BFCL_PROJECT_ROOT", tempfile.mkdtemp(prefix="bfcl-parity-"))
    import importlib.metadata
    import importlib.util

    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("bfcl_eval is not importable: pip install --no-deps --target DIR bfcl-eval==" + BFCL_EVAL_VERSION + ", then --bfcl-eval DIR")
    pkg = Path(list(spec.submodule_search_locations)[0])
    registry = (pkg / "constants" / "model_config.py").read_text()
    block = re.search(r'"' + re.escape(MODEL) + r'": ModelConfig\((.*?)\n    \),', registry, re.S)
    if not block or "underscore_to_dot=True" not in block.group(1) or "is_fc_model=True" not in block.group(1):
        raise SystemExit(f"bfcl-eval's registry no longer declares {MODEL} as an FC model with underscore_to_dot=True")
    registry_stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    registry_stand_in.MODEL_CONFIG_MAPPING = {MODEL: types.SimpleNamespace(underscore_to_dot=True, is_fc_model=True)}  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = registry_stand_in
    for _ in range(64):  # each round finds one missing third-party module
        try:
            from bfcl_eval.constants import enums
            from bfcl_eval.eval_checker import eval_runner
            from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler
            break
        except ModuleNotFoundError as e:
            if not e.name or e.name.split(".")[0] == "bfcl_eval":
                raise
            _inert_module(e.name)
            for k in [k for k in sys.modules if k.startswith("bfcl_eval.") and k != "bfcl_eval.constants.model_config"]:
                del sys.modules[k]
    global INSTALLED
    INSTALLED = importlib.metadata.version("bfcl-eval")
    handler = OpenAICompletionsHandler.__new__(OpenAICompletionsHandler)
    handler.is_fc_model = True
    handler.model_name = MODEL
    return eval_runner, handler, enums, pkg / "data"


def model_result(tool_calls: Any, content: Any) -> Any:
    """What the FC handler's `_parse_query_response_FC` keeps of a chat completion (`[{name: arguments}]`, or the
    content when `message.tool_calls` is None), as the result file stores and the checker reads it back."""
    if tool_calls is None:
        result = content
    else:
        result = [{c["function"]["name"]: c["function"]["arguments"]} for c in tool_calls]
    return json.loads(json.dumps(result))


def bfcl_verdict(runner: Any, handler: Any, enums: Any, category: str, entry: dict[str, Any], answer: dict[str, Any] | None,
                 cand: Candidate) -> bool:
    _, tool_calls, content = cand
    result = model_result(tool_calls, content)
    prompt = copy.deepcopy(entry)
    if category in bfcl.NO_ANSWER:
        r = runner._evaluate_single_relevance_entry(handler, entry["id"], result, prompt, MODEL, category)
    else:
        r = runner._evaluate_single_ast_entry(handler, entry["id"], result, copy.deepcopy(answer["ground_truth"]), prompt, MODEL,
                                              category, language=enums.Language.PYTHON, return_format=enums.ReturnFormat.PYTHON,
                                              has_tool_call_tag=False)
    return bool(r["valid"])


def mt_model_result(history: list[list[Step]]) -> list[list[Any]]:
    """A history as the FC handler's multi-turn result file holds it: per turn, per answer `[{name: arguments}]`
    or the answer's text."""
    return json.loads(json.dumps([[[{n: a} for n, a in step] if isinstance(step, list) else step for step in t] for t in history]))


def bfcl_mt_verdicts(runner: Any, handler: Any, category: str, entry: dict[str, Any], answer: dict[str, Any], history: list[list[Step]],
                     run_id: str) -> str:
    """bfcl-eval's multi-turn verdict on every prefix of the history (turns 1..k against ground truth 1..k): one
    character per turn, so the turn where the check first fails is compared too."""
    out = ""
    for k in range(1, len(history) + 1):
        prompt = copy.deepcopy(entry)
        r = runner._evaluate_single_multi_turn_entry(handler, entry["id"], mt_model_result(history[:k]),
                                                     copy.deepcopy(answer["ground_truth"][:k]), prompt, f"{run_id}_{k}", category)
        out += "1" if r["valid"] else "0"
    return out


def build(site: str | None) -> dict[str, Any]:
    runner, handler, enums, root = load_bfcl_eval(site)
    table: dict[str, Any] = {"bfcl_eval": INSTALLED, "model": MODEL, "data_sha256": {}, "items": {}}
    for category in bfcl.CATEGORIES:
        entries, answers = data(root, category)
        table["data_sha256"][category] = file_sha256(root, category)
        for e in select(category, entries, answers):
            cands = candidates(category, e, answers.get(e["id"]))
            verdicts = "".join("1" if bfcl_verdict(runner, handler, enums, category, e, answers.get(e["id"]), c) else "0" for c in cands)
            table["items"][e["id"]] = {"category": category, "candidates": digest(cands), "bfcl": verdicts}
    from suites import bfcl_multi_turn as mt

    n = 0
    for category in mt.CATEGORIES:
        entries, answers = data(root, category)
        table["data_sha256"][category] = file_sha256(root, category)
        usable = [e for e in entries if e["id"] in answers]
        for e in usable[::max(1, len(usable) // MT_PER_CATEGORY)][:MT_PER_CATEGORY]:
            hists = mt_candidates(e, answers[e["id"]])
            per_turn: list[str] = []  # per history, bfcl-eval's verdict on each prefix of turns
            for _, history in hists:
                n += 1  # each history checks on instances of its own (bfcl-eval keys them by model name)
                per_turn.append(bfcl_mt_verdicts(runner, handler, category, e, answers[e["id"]], history, f"parity{n}"))
            table["items"][e["id"]] = {"category": category, "candidates": digest(hists), "bfcl": per_turn}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bfcl-eval", metavar="DIR", help="where bfcl-eval is installed (pip install --no-deps --target DIR)")
    ap.add_argument("--out", type=Path, default=TABLE)
    ap.add_argument("--check", action="store_true", help="compare with the stored table instead of writing it")
    args = ap.parse_args(argv)
    table = build(args.bfcl_eval)
    n = sum(len(v["bfcl"]) for v in table["items"].values())
    if args.check:
        stored = json.loads(args.out.read_text())
        moved = sorted(k for k in table["items"] if stored["items"].get(k) != table["items"][k])
        data_moved = sorted(c for c in table["data_sha256"] if stored.get("data_sha256", {}).get(c) != table["data_sha256"][c])
        print(f"bfcl-eval {INSTALLED} (table: {stored.get('bfcl_eval')}): {len(table['items'])} items, {n} candidates; "
              f"{len(moved)} items with other verdicts: {moved[:10]}; data files changed: {data_moved}")
        return 1 if moved or data_moved else 0
    if INSTALLED != BFCL_EVAL_VERSION:
        raise SystemExit(f"bfcl-eval {INSTALLED} is installed, the pin is {BFCL_EVAL_VERSION}: raise BFCL_EVAL_VERSION to write its table")
    args.out.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"wrote {args.out}: {len(table['items'])} items, {n} candidates")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
