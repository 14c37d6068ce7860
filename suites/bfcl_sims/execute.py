"""Running calls on simulator instances: one call by function name, with the error results a real API gives.

Owns: `execute` (find the instance offering the function, check it is allowed this turn, validate the arguments
against the function doc's parameter schema (verifier/judge/schemacheck.py), run it, and turn any failure into an error result,
never an exception), `parse_gt_call` (BFCL's ground-truth call strings, parsed with `ast`, literals only, never
evaluated) and `instances_for` (fresh loaded instances for an entry).
"""

from __future__ import annotations

import ast
import inspect
import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from verifier.judge import schemacheck

from suites.bfcl import data_dir as resolve_data_dir
from suites.bfcl import to_json_schema

from . import CLASSES, class_docs
from ._base import Checkers, Result, Simulator

MAX_ERROR_CHARS = 500
"""An error result quotes the exception or validation message, cut to this length."""
MAX_CALL_CHARS = 1_000_000
"""The longest ground-truth call string parse_gt_call accepts (the long-context ones are ~8 KB)."""
MAX_ARG_CHARS = 1_000_000
"""A call's arguments, as JSON, at most this long: whatever a simulator does with them (echo into a file, search a
list) then stays bounded."""
MAX_ARG_DEPTH = 16
"""Arguments nest at most this deep (the docs' deepest is 3: a dict of lists)."""
MAX_ARG_INT = 2**63
"""Integers in arguments lie in (-MAX_ARG_INT, MAX_ARG_INT), as a real API's would: a simulator's arithmetic on an
unbounded Python integer (an exponent, a repeat count) would otherwise run for hours."""
MAX_RESULT_CHARS = 16_000_000
"""A result longer than this, as JSON, is an error result (the long-context padding is ~1 MB)."""
INFRA_METHODS = frozenset(dir(Simulator))
"""Methods every simulator has that are not API functions (load_scenario, state, ...)."""


def _bounded(message: str) -> str:
    return message if len(message) <= MAX_ERROR_CHARS else message[: MAX_ERROR_CHARS - 3] + "..."


def _error(message: str) -> Result:
    return {"error": _bounded(message)}


@lru_cache(maxsize=None)
def api_functions(cls: type) -> frozenset[str]:
    """The API functions a simulator class offers: its public methods that are not the Simulator machinery."""
    return frozenset(n for n, v in vars(cls).items()
                     if callable(v) and not n.startswith("_") and n not in INFRA_METHODS)


def _owner(instances: dict[str, object], name: str) -> object | None:
    for inst in instances.values():
        # mypy reads a class's __hash__ as the unbound instance method and finds no Hashable; a class hashes by identity
        if name in api_functions(type(inst)):  # type: ignore[arg-type]
            return inst
    return None


def parameters_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a function doc's parameters (BFCL type names mapped), closed to unknown argument names."""
    schema = to_json_schema(doc.get("parameters") or {"type": "object", "properties": {}})
    schema = {**schema, "type": "object"}
    schema.setdefault("properties", {})
    schema["additionalProperties"] = False
    return schema


def _signature_problem(method: Any, args: dict[str, Any]) -> str | None:
    """Without a doc: unknown and missing argument names, from the method's own signature."""
    params = inspect.signature(method).parameters
    unknown = sorted(set(args) - set(params))
    if unknown:
        return f"unexpected argument(s): {', '.join(unknown)}"
    missing = [n for n, p in params.items() if p.default is inspect.Parameter.empty and n not in args]
    if missing:
        return f"missing required argument(s): {', '.join(missing)}"
    return None


def _coerce_integers(schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """jsonschema accepts 2.0 as an integer; the simulators index and slice with it, so make it 2."""
    props = schema.get("properties", {})
    return {k: int(v) if props.get(k, {}).get("type") == "integer" and isinstance(v, float) and v.is_integer()
            else v for k, v in args.items()}


def argument_problem(args: Any) -> str | None:
    """Why these arguments are out of bounds (None when within them): size, depth, integer range. Every call is
    checked here, before the schema and the simulator see it, so no argument can make a simulator loop or
    allocate without bound; the simulators add their own guards for what depends on their state."""
    stack: list[tuple[Any, int]] = [(args, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_ARG_DEPTH:
            return f"arguments nested deeper than {MAX_ARG_DEPTH}"
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and not -MAX_ARG_INT < value < MAX_ARG_INT:
            return "an integer argument is out of range (|n| < 2**63)"
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    try:
        size = len(json.dumps(args, allow_nan=False))
    except (TypeError, ValueError):
        return "arguments are not JSON"
    if size > MAX_ARG_CHARS:
        return f"arguments longer than {MAX_ARG_CHARS} characters"
    return None


def execute(instances: dict[str, object], name: str, args: object, allowed: set[str] | None = None) -> Result:
    """Run one call `name(**args)` on whichever instance offers it; always a dict, an error as {"error": ...}.

    `args` is the model's, unchecked: anything JSON decodes to (None is no arguments, any other non-object an
    error result). `allowed`: the function names offered this turn (None = every function of the instances).
    """
    try:
        return _execute(instances, name, args, allowed)
    except Exception as e:  # e.g. RecursionError validating absurdly nested arguments: still an error result
        return _error(f"{name if isinstance(name, str) else '?'}: {type(e).__name__}: {e}")


def _execute(instances: dict[str, object], name: str, args: object, allowed: set[str] | None) -> Result:
    if not isinstance(name, str) or not name:
        return _error(f"Invalid function name: {name!r}")
    inst = _owner(instances, name)
    if inst is None:
        return _error(f"Function '{name}' not found: no such function in this environment.")
    if allowed is not None and name not in allowed:
        return _error(f"Function '{name}' is not available at this point of the conversation.")
    if args is None:
        args = {}
    if not isinstance(args, dict):
        return _error(f"{name}: arguments must be a JSON object, got {type(args).__name__}.")
    if (problem := argument_problem(args)) is not None:
        return _error(f"{name}: {problem}")
    method = getattr(inst, name)
    checker = _checkers_for(inst).get(name)
    if checker is not None:
        schema, validator = checker
        if isinstance(validator, schemacheck.NotCheckable):
            return _error(f"{name}: the function's parameter schema cannot be checked: {validator.reason}")
        required = set(schema.get("required") or ())
        # A null for an optional parameter means "not given" (what models send for unset optionals).
        args = {k: v for k, v in args.items() if v is not None or k in required}
        try:
            errors = schemacheck.errors_of(validator, args)  # within the step budget
        except schemacheck.NotCheckable as e:
            return _error(f"{name}: the arguments cannot be checked against the function's parameter schema: {e.reason}")
        if errors:
            first = errors[0]
            where = ".".join(str(p) for p in first.path)
            return _error(f"{name}: invalid arguments: {where + ': ' if where else ''}{first.message}")
        args = _coerce_integers(schema, args)
        if (problem := argument_problem(args)) is not None:  # 1e300 made an integer is out of range too
            return _error(f"{name}: {problem}")
    elif (problem := _signature_problem(method, args)) is not None:
        return _error(f"{name}: {problem}")
    try:
        result = method(**args)
    except Exception as e:  # a simulator bug or an argument the schema let through: an error result, not a crash
        return _error(f"{name}: {type(e).__name__}: {e}")
    if not isinstance(result, dict):
        result = {"result": result}
    # A detached JSON copy: what the model is shown is what is compared, and later calls cannot alter it.
    try:
        text = json.dumps(result, allow_nan=False)
    except (TypeError, ValueError) as e:
        return _error(f"{name}: result is not JSON-serializable: {e}")
    if len(text) > MAX_RESULT_CHARS:
        return _error(f"{name}: the result is longer than {MAX_RESULT_CHARS} characters")
    detached: Result = json.loads(text)  # the dumps of a dict just above: a JSON object
    return detached


# ---- function docs per instance ----

def _checkers(docs: list[dict[str, Any]]) -> Checkers:
    out: Checkers = {}
    for doc in docs:
        schema = parameters_schema(doc)
        try:
            found: Any = schemacheck.validator(schema)  # no $ref fetch, no backtracking regex
        except schemacheck.NotCheckable as e:
            found = e  # every call to it is then an error result naming why
        out[doc["name"]] = (schema, found)
    return out


@lru_cache(maxsize=64)
def _checkers_from(class_name: str, data_dir: str | None) -> Checkers:
    """Built once per class and data dir (an entry is many instances). data_dir None: the default BFCL data dir;
    {} when there is none (then execute checks argument names against the method's signature)."""
    try:
        root = resolve_data_dir(None) if data_dir is None else Path(data_dir)
        return _checkers(class_docs(class_name, root))
    except (FileNotFoundError, OSError, ValueError, KeyError):
        if data_dir is not None:
            raise
        return {}


def _checkers_for(inst: object) -> Checkers:
    found: Checkers | None = getattr(inst, "_checkers", None)
    if found is None:
        found = _checkers_from(getattr(type(inst), "CLASS_NAME", ""), None)
    return found


def attach_docs(inst: Simulator, data_dir: str | Path | None) -> None:
    """Validate this instance's calls against the docs in `data_dir` (None: the default data dir). A given
    data_dir without the docs is an error (FileNotFoundError), not a silent fallback."""
    inst._checkers = _checkers_from(type(inst).CLASS_NAME, None if data_dir is None else str(data_dir))


def is_long_context(entry: dict[str, Any]) -> bool:
    """BFCL pads the long_context category (and its composite one); the id says which category an entry is."""
    entry_id = str(entry.get("id", ""))
    return "long_context" in entry_id or "composite" in entry_id


def instances_for(entry: dict[str, Any], data_dir: str | Path | None = None, docs: list[dict[str, Any]] | None = None) -> dict[str, Simulator]:
    """Fresh instances of the entry's involved classes, loaded from its initial_config (long context when the
    entry is a long_context one). An unknown class or a malformed initial_config is a data error (ValueError).

    Calls are validated against `docs` when given (the function docs the caller holds, e.g. a sample's own tools:
    nothing is read), else against the docs in `data_dir` (attach_docs)."""
    checkers = None if docs is None else _checkers(docs)
    config = entry.get("initial_config") or {}
    classes = entry.get("involved_classes") or []
    if not isinstance(config, dict):
        raise ValueError(f"{str(entry.get('id'))[:80]}: initial_config is not an object")
    if not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
        raise ValueError(f"{str(entry.get('id'))[:80]}: involved_classes is not a list of class names")
    out: dict[str, Simulator] = {}
    for class_name in classes:
        cls = CLASSES.get(class_name)
        if cls is None:
            raise ValueError(f"{str(entry.get('id'))[:80]}: no simulator for class {class_name[:80]!r}")
        inst = cls()
        try:
            inst.load_scenario(config.get(class_name) or {}, long_context=is_long_context(entry))
        except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as e:  # a malformed scenario: data error
            raise ValueError(f"{str(entry.get('id'))[:80]}: initial_config for {class_name} is malformed: "
                             f"{type(e).__name__}: {str(e)[:120]}") from None
        if checkers is None:
            attach_docs(inst, data_dir)
        else:
            inst._checkers = checkers
        out[class_name] = inst
    return out


# ---- ground-truth call strings ----


@lru_cache(maxsize=None)
def _positional_names(name: str) -> tuple[str, ...] | None:
    for cls in CLASSES.values():
        if name in api_functions(cls):  # type: ignore[arg-type]  # a class is hashable (see _owner)
            return tuple(p for p in inspect.signature(getattr(cls, name)).parameters if p != "self")
    return None


def parse_gt_call(s: str) -> tuple[str, dict[str, Any]]:
    """`cd(folder='document')` -> ("cd", {"folder": "document"}); positional arguments are named from the
    simulator's signature (BFCL's ground truth writes `sort('final_report.pdf')`). Literals only: anything else
    (a name, a nested call, an attribute) is a ValueError, and nothing is ever evaluated."""
    if not isinstance(s, str) or len(s) > MAX_CALL_CHARS:
        raise ValueError("ground-truth call: not a string of acceptable length")
    try:
        node = ast.parse(s.strip(), mode="eval").body
    except SyntaxError as e:
        raise ValueError(f"ground-truth call does not parse: {e.msg}") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"ground-truth call is not a plain function call: {s[:80]!r}")
    name = node.func.id
    args: dict[str, Any] = {}
    if node.args:
        names = _positional_names(name)
        if names is None or len(node.args) > len(names):
            raise ValueError(f"ground-truth call {name}: cannot name its positional arguments")
        for param, value in zip(names, node.args):
            args[param] = _literal(value, name)
    for kw in node.keywords:
        if kw.arg is None:
            raise ValueError(f"ground-truth call {name}: **kwargs is not a literal argument")
        args[kw.arg] = _literal(kw.value, name)
    return name, args


def _literal(node: ast.expr, name: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise ValueError(f"ground-truth call {name}: an argument is not a literal") from None
