"""Tool-call checkers: BFCL's AST semantics, and the K2-Vendor-Verifier envelope metrics.

The BFCL half scores an answer as bfcl-eval's FC-mode checker scores an OpenAI-style model's output
(`bfcl_eval/eval_checker/ast_eval/ast_checker.py` and the OpenAI FC handler's `decode_ast`, Python
categories only), so our accuracy is the leaderboard's on the same outputs:
  - decoding (`decode_fc`): every call's `arguments` must be a JSON string that decodes to an object; one call
    that does not (an object sent as is, `""`, `{bad`, `null`, `[1]`) means the response holds no valid call;
  - names are compared as sent, against the declared name with `.` mapped to `_` (BFCL's `convert_func_name`
    for models that cannot send dots), so `calculus.derivative` does not match a declared `calculus_derivative`;
  - acceptable values are lists per parameter, `""` in a list means "may be omitted", ints are promoted to
    floats, strings are compared after BFCL's normalisation, array elements must have the declared item type,
    parallel calls match in any order (greedily, as BFCL does).
scripts/bfcl_parity_table.py checks this against bfcl-eval itself (tests/test_bfcl_parity.py).
Each failure carries one stable error code so compare/report can group them.

The K2VV half answers a weight-independent question (is every call well-formed
against the declared tools?) and is shared with the raw-replay suite.
All functions are pure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from verifier import jsonsafe
from verifier.types import Finding

# BFCL type name -> the Python type a JSON-decoded value must have (BFCL's PYTHON_TYPE_MAPPING;
# "any" is checked as str there). Unknown names fall back to str, like "any".
PY_TYPES: dict[str, type] = {
    "string": str, "integer": int, "float": float, "number": float, "boolean": bool,
    "array": list, "tuple": list, "dict": dict, "object": dict, "any": str,
}
NESTED = ("array", "tuple")
_STD = re.compile(r"[ ,./\-_*^]")

# Error codes, in the order BFCL tests them.
CODES = (
    "correct", "no_call", "irrelevance_called", "args_invalid", "decoder_failed", "wrong_count", "wrong_func_name",
    "missing_required", "unexpected_param", "type_error", "value_error", "missing_optional",
)


@dataclass(frozen=True)
class Check:
    """Outcome of comparing model calls with the possible answers."""

    ok: bool
    code: str
    """One of CODES."""
    detail: str = ""


OK = Check(True, "correct")
Call = tuple[str, Any]
"""(function name as the model sent it, decoded arguments)."""


@dataclass(frozen=True)
class Decoded:
    """A response's tool calls as bfcl-eval's OpenAI FC handler decodes them (`decode_ast`)."""

    calls: tuple[Call, ...]
    """The calls, each with a JSON-object argument dict; empty when there is none or the decode failed."""
    failure: str = ""
    """Why the calls could not be decoded ("" when they were): BFCL then counts the response as holding no call."""


def standardize(s: str) -> str:
    """BFCL's string normalisation: drop spaces and `,./-_*^`, lowercase, single quotes -> double."""
    return _STD.sub("", s).lower().replace("'", '"')


def _std(x: Any) -> Any:
    return standardize(x) if isinstance(x, str) else x


def _answer_type(possible: list[Any]) -> type | None:
    """Type of the first non-optional acceptable value (BFCL uses it to spot 'variable' answers)."""
    for a in possible:
        if a != "":
            return type(a)
    return None


def _type_ok(value: Any, possible: list[Any], expected: type[Any], nested: type | None) -> tuple[bool, bool]:
    """(valid, is_variable), as BFCL's type_checker decides (one nesting level only).

    An array whose elements fail the item type is invalid whatever the answers hold: BFCL's fall-through after
    the nested check keeps `valid` False (it only records `is_variable`)."""
    ans_t = _answer_type(possible)
    is_var = ans_t is not None and ans_t is not expected
    if type(value) is expected:
        if nested is None:
            return True, is_var
        for item in possible:
            if not isinstance(item, list) or all(_type_ok(v, item, nested, None)[0] for v in value):
                return True, is_var
        return False, False
    if ans_t is not None and type(value) is ans_t:
        return True, True
    return False, False


def _dict_ok(value: dict[str, Any], possible: list[Any]) -> bool:
    for cand in possible:
        if cand == "" or not isinstance(cand, dict):
            continue
        if all(k in cand and _std(v) in [_std(x) for x in cand[k]] for k, v in value.items()) and all(
            k in value or "" in vals for k, vals in cand.items()
        ):
            return True
    return False


def _list_dict_ok(value: list[Any], possible: list[Any]) -> bool:
    for cand in possible:
        if len(value) == len(cand) and all(isinstance(v, dict) and _dict_ok(v, [c]) for v, c in zip(value, cand)):
            return True
    return False


def _list_ok(value: list[Any], possible: list[Any]) -> bool:
    got = [_std(v) for v in value]
    # BFCL iterates each candidate; an optional "" candidate thus behaves as an empty list.
    return any(got == [_std(x) for x in cand] for cand in possible if isinstance(cand, (list, str)))


def bfcl_name(name: str) -> str:
    """The name an OpenAI-style model must send for a declared BFCL function: `.` becomes `_` (BFCL's
    convert_func_name for models whose config says underscore_to_dot, as OpenAI's does)."""
    return name.replace(".", "_")


def check_call(func: dict[str, Any], call: Call, expected: dict[str, dict[str, list[Any]]]) -> Check:
    """One call against one `{name: {param: [acceptable...]}}` (BFCL's simple_function_checker).

    The name checked is the function doc's (`func`), mapped as `bfcl_name` does, as BFCL checks it."""
    answers = next(iter(expected.values()))
    exp_name = bfcl_name(str(func.get("name", next(iter(expected)))))
    name, args = call
    if name != exp_name:
        return Check(False, "wrong_func_name", f"expected {exp_name}, got {name}")
    if not isinstance(args, dict):
        return Check(False, "args_invalid", f"{name}: arguments are not a JSON object")
    params = func.get("parameters") or {}
    details = params.get("properties") or {}
    for p in params.get("required") or []:
        if p not in args:
            return Check(False, "missing_required", p)
    for p, value in args.items():
        if p not in details or p not in answers:
            return Check(False, "unexpected_param", p)
        tname = str(details[p].get("type", "any"))
        expected_t = PY_TYPES.get(tname, str)
        nested = None
        if tname in NESTED:
            items = details[p].get("items") or {}
            nested = PY_TYPES.get(str(items.get("type", "any")), str) if items else None
        if tname == "float" and type(value) is int:
            value = float(value)  # BFCL allows Python's int -> float promotion (not the reverse)
        valid, is_var = _type_ok(value, answers[p], expected_t, nested)
        if not valid:
            return Check(False, "type_error", f"{p}: expected {tname}, got {type(value).__name__}")
        if not is_var:
            if expected_t is dict:
                ok = _dict_ok(value, answers[p])
            elif expected_t is list and nested is dict:
                ok = _list_dict_ok(value, answers[p])
            elif expected_t is str:
                ok = standardize(value) in [standardize(x) for x in answers[p] if isinstance(x, str)]
            elif expected_t is list:
                ok = _list_ok(value, answers[p])
            else:
                ok = value in answers[p]
        else:
            ok = value in answers[p]
        if not ok:
            return Check(False, "value_error", f"{p}: {json.dumps(value, ensure_ascii=False)[:80]}")
    for p, vals in answers.items():
        if p not in args and "" not in vals:
            return Check(False, "missing_optional", p)
    return OK


def _find(functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next((f for f in functions if f.get("name") == name), {})


def decode_fc(tool_calls: Any) -> Decoded:
    """A response's `tool_calls` as bfcl-eval's OpenAI FC handler decodes them: each call's `arguments` goes through
    `json.loads`, so it must be a string (an object sent as is fails the decode, `""` too); one failed call fails the
    whole response; a decoded value that is not an object makes the output "not in function-call format", which
    BFCL treats as no call as well. No `tool_calls` (absent, null, []) is no call."""
    if not isinstance(tool_calls, list):
        return Decoded(())
    out: list[Call] = []
    for i, c in enumerate(tool_calls):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            return Decoded((), f"call {i}: no function name")
        name, raw = fn["name"], fn.get("arguments")
        if not isinstance(raw, str):
            return Decoded((), f"{name}: arguments are {type(raw).__name__}, not a JSON string")
        try:
            args = jsonsafe.loads(raw)
        except (json.JSONDecodeError, RecursionError):
            return Decoded((), f"{name}: arguments are not JSON: {raw[:60]}")
        if not isinstance(args, dict):
            return Decoded((), f"{name}: arguments are a JSON {type(args).__name__}, not an object")
        out.append((name, args))
    return Decoded(tuple(out))


def check(functions: list[dict[str, Any]], decoded: Decoded, answer: list[dict[str, Any]] | None, category: str) -> Check:
    """A decoded response against a BFCL entry, as bfcl-eval's runner and ast_checker decide it. `answer` is
    `ground_truth` (None: a category without an answer file)."""
    calls = list(decoded.calls)
    if "irrelevance" in category:  # relevance categories: right when no valid call was decoded / when one was
        return OK if not calls else Check(False, "irrelevance_called", ", ".join(sorted(n for n, _ in calls)))
    if "relevance" in category or answer is None:
        return OK if calls else Check(False, "decoder_failed" if decoded.failure else "no_call", decoded.failure)
    if decoded.failure:
        return Check(False, "decoder_failed", decoded.failure)
    if not calls:
        return Check(False, "no_call")
    if "parallel" not in category:
        want = len(answer) if "multiple" in category else 1
        if len(calls) != want:
            return Check(False, "wrong_count", f"expected {want}, got {len(calls)}")
        exp = answer[0]
        # BFCL's simple categories check against the first function doc, the multiple ones against the answer's.
        func = _find(functions, next(iter(exp))) if "multiple" in category else (functions[0] if functions else {})
        return check_call(func, calls[0], exp)
    if len(calls) != len(answer):
        return Check(False, "wrong_count", f"expected {len(answer)}, got {len(calls)}")
    matched: set[int] = set()
    for i, exp in enumerate(answer):
        func = _find(functions, next(iter(exp)))
        exp_name = bfcl_name(str(func.get("name", next(iter(exp)))))
        first_err: Check | None = None
        for j, call in enumerate(calls):
            if j in matched:
                continue
            r = check_call(func, call, exp)
            if r.ok:
                matched.add(j)
                break
            if first_err is None and call[0] == exp_name:
                first_err = r
        else:
            err = first_err or Check(False, "wrong_func_name", f"no call to {exp_name}")
            return Check(False, err.code, f"expected call #{i} ({exp_name}) unmatched: {err.detail}")
    return OK


# ---- K2-Vendor-Verifier envelope metrics (shared with the replay suite) ----


def tools_by_name(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    """OpenAI `tools` -> {name: parameters schema}."""
    out = {}
    for t in tools or []:
        fn = (t or {}).get("function") or {}
        if isinstance(fn.get("name"), str):
            out[fn["name"]] = fn.get("parameters") or {"type": "object"}
    return out


def decode_args(args: Any) -> Any:
    """A call's `arguments` -> decoded value; a blank string is `{}` (as contract.py reads it); None when not JSON."""
    if isinstance(args, dict):
        return args
    if not isinstance(args, str):
        return None
    if not args.strip():
        return {}
    try:
        return jsonsafe.loads(args)
    except json.JSONDecodeError:
        return None


def schema_check(call: dict[str, Any], declared: dict[str, dict[str, Any]]) -> bool | str:
    """K2VV: the call names a declared tool and its arguments are a JSON object valid under its schema (Draft
    2020-12 unless `$schema` says otherwise). A string says why the declared schema cannot be checked safely (a `$ref`
    outside the document, a regex without a linear-time matcher, a check over its step budget:
    verifier/judge/schemacheck.py)."""
    fn = (call or {}).get("function") or {}
    name = fn.get("name")
    if name not in declared:
        return False
    args = decode_args(fn.get("arguments"))
    if not isinstance(args, dict):
        return False
    from verifier.judge import schemacheck  # here: jsonschema costs ~50 ms to import, and only a bfcl run needs it

    try:
        return schemacheck.first_error(declared[name], args) is None
    except schemacheck.NotCheckable as e:
        return e.reason


def schema_valid(call: dict[str, Any], declared: dict[str, dict[str, Any]]) -> bool | None:
    """`schema_check`, with None when the declared schema cannot be checked."""
    found = schema_check(call, declared)
    return None if isinstance(found, str) else found


def call_checks(tools: list[dict[str, Any]] | None, tool_calls: Any) -> list[bool | str]:
    """`schema_check` of each call, once per response: k2vv_signals and not_checkable_finding both read it (a check
    may take its whole step budget, so it is not made twice). All the calls of a response share one step budget."""
    calls = [c for c in (tool_calls if isinstance(tool_calls, list) else []) if isinstance(c, dict)]
    if not calls:
        return []
    from verifier.judge import schemacheck  # here, as in schema_check

    declared = tools_by_name(tools)
    args = [decode_args(((c.get("function") or {}) if isinstance(c.get("function"), dict) else {}).get("arguments")) for c in calls]
    with schemacheck.one_budget([a for a in args if isinstance(a, dict)]):
        return [schema_check(c, declared) for c in calls]


def unchecked_schemas(tools: list[dict[str, Any]] | None, tool_calls: list[Any] | None,
                      checks: list[bool | str] | None = None) -> list[str]:
    """`name: why` for each called tool whose declared parameters schema cannot be checked safely: the schema
    itself, or (with `checks`, from call_checks on the same calls) a call's check over its step budget."""
    from verifier.judge import schemacheck  # here, as in schema_valid

    declared = tools_by_name(tools)
    calls = [c for c in tool_calls or [] if isinstance(c, dict)]
    why: dict[str, str] = {}
    for name in sorted({str((c.get("function") or {}).get("name")) for c in calls}):
        if name in declared:
            try:
                schemacheck.validator(declared[name])
            except schemacheck.NotCheckable as e:
                why[name] = e.reason
    for c, found in zip(calls, checks or []):
        if isinstance(found, str):
            why.setdefault(str((c.get("function") or {}).get("name")), found)
    return [f"{name}: {reason}" for name, reason in sorted(why.items())]


def calls_as_text(content: str | None, names: set[str], limit: int = 64) -> list[str]:
    """Declared function names found in JSON objects written into `content` (a call the parser missed)."""
    if not content or not names:
        return []
    dec, found, i, tries = json.JSONDecoder(), [], 0, 0
    while tries < limit and (i := content.find("{", i)) != -1:
        tries += 1
        try:
            obj, end = dec.raw_decode(content, i)
        except ValueError:
            i += 1
            continue
        found.extend(_call_names(obj, names, 0))
        i = end
    return found


def _call_names(obj: Any, names: set[str], depth: int) -> list[str]:
    if depth > 4:
        return []
    if isinstance(obj, list):
        return [n for x in obj for n in _call_names(x, names, depth + 1)]
    if not isinstance(obj, dict):
        return []
    name = obj.get("name")
    if isinstance(name, str) and name in names:
        return [name]
    if len(obj) == 1:
        (k, v), = obj.items()
        if k in names and isinstance(v, dict):
            return [k]
    return [n for v in obj.values() if isinstance(v, (dict, list)) for n in _call_names(v, names, depth + 1)]


def k2vv_signals(tools: list[dict[str, Any]] | None, tool_calls: list[Any] | None, finish_reason: str | None,
                 checks: list[bool | str] | None = None) -> dict[str, Any]:
    """Per-response K2VV signals: whether a call was triggered, how many calls, how many schema-valid (`checks`:
    call_checks of the same calls, when the caller has them)."""
    if checks is None:
        checks = call_checks(tools, tool_calls)
    out = {
        "tool_triggered": finish_reason == "tool_calls",
        "n_calls": len(checks),
        "n_schema_valid": sum(c is True for c in checks),
    }
    unchecked = sum(isinstance(c, str) for c in checks)
    if unchecked:  # only then, so the signals of every checkable sample stay as they were
        out["n_schema_unchecked"] = unchecked
    return out


def schema_accuracy(sig: dict[str, Any]) -> float | None:
    """Valid calls over the calls whose declared schema could be checked (None: none could)."""
    checked = int(sig.get("n_calls", 0)) - int(sig.get("n_schema_unchecked", 0))
    return sig.get("n_schema_valid", 0) / checked if checked > 0 else None


def not_checkable_finding(tools: list[dict[str, Any]] | None, tool_calls: Any,
                          checks: list[bool | str] | None = None) -> tuple[Finding, ...]:
    """(Finding("schema_not_checkable", ...),) when a called tool's schema cannot be checked, else ()."""
    why = unchecked_schemas(tools, tool_calls if isinstance(tool_calls, list) else None, checks)
    return (Finding("schema_not_checkable", "; ".join(why)[:160]),) if why else ()


def k2vv_summary(verdicts: list[Any]) -> dict[str, Any]:
    """Calls-weighted schema accuracy and trigger counts over judged (content + contract) verdicts.

    Contract verdicts are included on purpose: invalid arguments are exactly what makes a verdict
    `contract`, so leaving them out (as the per-sample metric mean does) would hide the failures.
    """
    judged = [v for v in verdicts if v.outcome in ("content", "contract")]
    calls = sum(int(v.signals.get("n_calls", 0)) - int(v.signals.get("n_schema_unchecked", 0)) for v in judged)
    valid = sum(int(v.signals.get("n_schema_valid", 0)) for v in judged)
    finish: dict[str, int] = {}
    for v in judged:
        fr = str(v.signals.get("finish_reason"))
        finish[fr] = finish.get(fr, 0) + 1
    return {
        "schema_accuracy": {"value": round(valid / calls, 6) if calls else None, "valid": valid, "calls": calls},
        "trigger": {
            "judged": len(judged),
            "tool_triggered": sum(bool(v.signals.get("tool_triggered")) for v in judged),
            "finish_reasons": dict(sorted(finish.items())),
        },
    }
