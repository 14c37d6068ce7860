"""Validating an instance against a JSON Schema that came from untrusted input (a golden, a sample, a `--requests`
tool declaration): the one place the core builds a jsonschema validator for such a schema.

What it guarantees, whatever the schema says:
- No network, no file: `$ref` resolves only inside the schema's own document. The validator gets a
  `referencing.Registry` whose retrieve function refuses every URI (jsonschema's default would fetch it with
  `urlopen`), and `$ref`s that are not `#...` are refused before any validation.
- No catastrophic backtracking: `pattern`, `patternProperties` (and `additionalProperties`, which consults the
  patternProperties' regexes) match with RE2, which runs in time linear in the input. A regex RE2 cannot compile
  (backreferences, lookaround, repetition counts over 1,000) makes the schema not checkable: Python's `re` has no
  per-match time budget inside a thread, and a worker process per match would cost more than the check, while
  none of JSONSchemaBench's 2,986 patterns needs it. Each regex gets 1 MiB of RE2 memory (MAX_REGEX_MEMORY).
  `unevaluatedProperties` next to `patternProperties` (which jsonschema evaluates with `re`) is not checkable for
  the same reason.
- No quadratic `uniqueItems`: items are compared by their canonical JSON text in a set, not pairwise.
- No format assertions (format is an annotation since 2019-09) and so no format checker runs at all.
- Bounded work: a check evaluates at most `step_budget(instance)` keywords (BASE_STEPS plus STEPS_PER_NODE per
  value of the instance; checks inside `one_budget` share one). In-document `$ref`s can expand a 2 KB schema into 2**40 subschemas (`$defs` a1..a40, each an
  `allOf` of two refs to the one before); past the budget the schema is not checkable on that sample. A count of
  steps, not a clock, so the same journal always gives the same verdict.

A schema that cannot be checked is `NotCheckable(reason)`: callers make it a finding on that sample
(`schema_not_checkable`), never an internal error. The reason is short and never quotes anything but the schema.
"""

from __future__ import annotations

import contextlib
import functools
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import referencing
import referencing.exceptions
from jsonschema import Draft202012Validator, ValidationError, validators
from jsonschema.exceptions import SchemaError

MAX_REGEX_MEMORY = 1 << 20
"""RE2's memory budget per compiled regex (its default is 8 MiB): every JSONSchemaBench pattern fits in 1 MiB, and a
golden of many huge patterns cannot hold gigabytes in the cache. Over it, the pattern is not checkable."""
MAX_REASON = 120
"""A reason quotes at most this many characters."""
BASE_STEPS = 100_000
"""Keyword evaluations any check may take, whatever the instance: a BFCL tool call takes tens, a JSONSchemaBench
answer hundreds; 100,000 take about 0.5 s (2 s where every step resolves a `$ref`)."""
STEPS_PER_NODE = 10
"""More keyword evaluations per value in the instance (an object, array, string, number...): a 200,000-item array of
one-property objects takes 2.5 per value, so a large honest answer is checked in full."""
_ECMA_U_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u([0-9A-Fa-f]{4})")


class NotCheckable(Exception):
    """This schema cannot be checked safely; `reason` says why in one short line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason[:MAX_REASON])
        self.reason = reason[:MAX_REASON]


def _refuse(uri: str) -> referencing.Resource[Any]:
    """The registry's retrieve function: nothing outside the document is ever fetched or read."""
    # the field is declared through attrs, which mypy's attrs plugin does not read in referencing's package
    raise referencing.exceptions.NoSuchResource(ref=uri)  # type: ignore[call-arg]


REGISTRY: referencing.Registry[Any] = referencing.Registry(retrieve=_refuse)  # type: ignore[call-arg]


# ---- bounded work: a step budget per check ----


class _Budget(threading.local):
    """The keyword evaluations the current thread's check may still make (each thread checks on its own); `shared`:
    inside `one_budget`, whose checks all draw on the budget it set."""

    left = BASE_STEPS
    total = BASE_STEPS
    shared = False


_BUDGET = _Budget()


def _nodes(instance: Any) -> int:
    """How many values the instance holds, itself included (iterative: an instance may be nested 100 deep)."""
    count, stack = 0, [instance]
    while stack:
        x = stack.pop()
        count += 1
        if isinstance(x, dict):
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return count


def step_budget(instance: Any) -> int:
    """The keyword evaluations one check of `instance` may take."""
    return BASE_STEPS + STEPS_PER_NODE * _nodes(instance)


def _start(instance: Any) -> None:
    if not _BUDGET.shared:
        _BUDGET.left = _BUDGET.total = step_budget(instance)


@contextlib.contextmanager
def one_budget(instances: list[Any]) -> Iterator[None]:
    """Every check inside draws on one budget, BASE_STEPS plus STEPS_PER_NODE per value of all `instances`: a
    response of a thousand tool calls costs one budget, not a thousand."""
    _BUDGET.left = _BUDGET.total = BASE_STEPS + STEPS_PER_NODE * sum(_nodes(x) for x in instances)
    _BUDGET.shared = True
    try:
        yield
    finally:
        _BUDGET.shared = False


def _counted(fn: Any) -> Any:
    """A keyword function that first spends one step of the thread's budget; over it, the schema is not checkable."""

    def step(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        _BUDGET.left -= 1
        if _BUDGET.left < 0:
            raise NotCheckable(f"checking needs more than {_BUDGET.total} steps, the budget for this answer")
        return fn(validator, value, instance, schema)

    return step


# ---- regexes: RE2 only ----


@functools.lru_cache(maxsize=1024)
def compile_regex(pattern: str) -> Any:
    """An RE2 regex for an ECMA-262 pattern (its `\\uXXXX` escapes written as RE2's `\\x{XXXX}`)."""
    import re2  # google-re2

    options = re2.Options()
    options.log_errors = False  # a refused pattern is our finding, not a line on stderr
    options.max_mem = MAX_REGEX_MEMORY
    try:
        return re2.compile(_ECMA_U_ESCAPE.sub(r"\1\\x{\2}", pattern), options)
    except Exception as e:  # noqa: BLE001 - re2.error and friends: any refusal is the same answer
        detail = str(e.args[0] if e.args else e).strip("b'\"")
        raise NotCheckable(f"pattern {pattern[:40]!r} cannot be matched in linear time (RE2: {detail[:50]})") from None


def _search(pattern: str, text: str) -> bool:
    return compile_regex(pattern).search(text) is not None


def _pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(validator: Any, pattern_properties: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for k, v in instance.items():
            if _search(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional_properties(validator: Any, ap: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's additionalProperties, with the patternProperties' regexes matched by RE2."""
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in properties and not any(_search(p, k) for p in patterns)]
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        shown = ", ".join(repr(e) for e in sorted(extras)[:5])
        if patterns:
            yield ValidationError(f"{shown} do(es) not match any of the regexes: {', '.join(map(repr, sorted(patterns)))}")
        else:
            yield ValidationError(f"Additional properties are not allowed ({shown} unexpected)")


def _canonical(x: Any) -> Any:
    """A JSON value with the equality JSON Schema uses: 1 == 1.0, true != 1, objects equal whatever their key order."""
    if isinstance(x, float) and x.is_integer():
        return int(x)
    if isinstance(x, dict):
        return {k: _canonical(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_canonical(v) for v in x]
    return x


def _unique_items(validator: Any, unique: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """jsonschema's uniqueItems compares unsortable items (objects) pairwise: an endpoint answering 500,000 distinct
    objects would take ~10**11 comparisons. One canonical JSON text per item and a set: linear in the answer."""
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(_canonical(item), sort_keys=True)
        if key in seen:
            yield ValidationError(f"array has non-unique elements ({key[:60]} repeats)")
            return
        seen.add(key)


@functools.lru_cache(maxsize=None)
def _safe_class(base: type) -> Any:
    """`base` with RE2 regexes, a linear uniqueItems, and every keyword counted against the step budget."""
    safe = {**base.VALIDATORS, "pattern": _pattern, "patternProperties": _pattern_properties,  # type: ignore[attr-defined]
            "additionalProperties": _additional_properties, "uniqueItems": _unique_items}
    return validators.extend(base, {k: _counted(fn) for k, fn in safe.items()})


# ---- the document ----


_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples"})
"""Keywords whose values are instances, not schemas: a "$ref" or "pattern" inside them means nothing."""


def _walk(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, value) of every object in the document."""
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, dict):
            for k, v in cur.items():
                yield k, v
                if k not in _DATA_KEYWORDS:
                    stack.append(v)
        elif isinstance(cur, list):
            stack.extend(cur)


def _static_problem(schema: Any) -> str | None:
    """Refuse, before validating anything, what would need the outside world or an unbounded regex."""
    has_pattern_properties = has_unevaluated = False
    anchors = {v for k, v in _walk(schema) if k in ("$anchor", "$dynamicAnchor") and isinstance(v, str)}
    anchors |= {v[1:] for k, v in _walk(schema) if k in ("$id", "id") and isinstance(v, str) and v.startswith("#")}
    for key, value in _walk(schema):
        if key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(value, str):
            if not value.startswith("#"):
                return f"non-local {key} {value[:60]} (only in-document references are resolved)"
            if value.startswith("#/") and not _pointer_resolves(schema, value):
                return f"dangling {key} {value[:60]}"
            if len(value) > 1 and not value.startswith("#/") and value[1:] not in anchors:
                return f"dangling {key} {value[:60]} (no such anchor)"
        elif key == "pattern" and isinstance(value, str):
            compile_regex(value)
        elif key == "patternProperties" and isinstance(value, dict):
            has_pattern_properties = True
            for p in value:
                compile_regex(p)
        elif key == "unevaluatedProperties":
            has_unevaluated = True
    if has_pattern_properties and has_unevaluated:
        return "unevaluatedProperties with patternProperties has no linear-time matcher here"
    return None


def _pointer_resolves(root: Any, ref: str) -> bool:
    from urllib.parse import unquote

    cur = root
    for tok in unquote(ref[2:]).split("/"):
        tok = tok.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and tok in cur:
            cur = cur[tok]
        elif isinstance(cur, list) and tok.isdigit() and int(tok) < len(cur):
            cur = cur[int(tok)]
        else:
            return False
    return True


# ---- the metaschema check ----

_META_KEYS = frozenset({"$id", "$schema", "$dynamicAnchor", "$vocabulary", "$comment"})
_NAME_MAPS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_VOCAB_REF = re.compile(r"meta/[a-z-]+(#/\$defs/[A-Za-z0-9]+)")


def _one_document(node: Any, defs: dict[str, Any]) -> Any:
    """A 2020-12 vocabulary metaschema with its references made local: `$dynamicRef: "#meta"` (which, validating
    against the 2020-12 metaschema, always lands on its root) becomes `$ref: "#"`, `meta/<vocab>#/$defs/X` becomes
    `#/$defs/X`, and its `$defs` are gathered into `defs`. ValueError for anything else that refers elsewhere."""
    if isinstance(node, list):
        return [_one_document(v, defs) for v in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _META_KEYS:
            continue
        if key == "$dynamicRef":
            if value != "#meta":
                raise ValueError(f"$dynamicRef {value}")
            out["$ref"] = "#"
        elif key == "$ref":
            local = _VOCAB_REF.fullmatch(value)
            if not (value.startswith("#/$defs/") or local):
                raise ValueError(f"$ref {value}")
            out["$ref"] = local.group(1) if local else value
        elif key == "$defs":
            for name, sub in value.items():
                sub = _one_document(sub, defs)
                if defs.setdefault(name, sub) != sub:
                    raise ValueError(f"two $defs named {name}")
        elif key in _NAME_MAPS:  # {name: subschema}: the names ("$id", "$ref"...) are not keywords here
            out[key] = {name: _one_document(sub, defs) for name, sub in value.items()}
        else:
            out[key] = _one_document(value, defs)
    return out


_ANNOTATIONS = frozenset({"title", "description", "default", "deprecated", "examples"})


def _conjoin(into: dict[str, Any], schema: dict[str, Any]) -> None:
    """`into` AND `schema` as one object schema: what each vocabulary document of the metaschema says about a schema
    object is a `type` they all share and `properties` of their own keywords, so their `allOf` is one `properties`
    (a property two of them describe gets both, under an allOf). Annotations say nothing about validity and are left
    out. ValueError for any other keyword two of them disagree on."""
    for key, value in schema.items():
        if key in _ANNOTATIONS or into.get(key) == value:
            continue
        if key not in into:
            into[key] = value
        elif key in _NAME_MAPS:
            for name, sub in value.items():
                mine = into[key].get(name)
                into[key][name] = sub if mine is None or mine == sub else {"allOf": [mine, sub]}
        else:
            raise ValueError(f"two values of {key}")


@functools.lru_cache(maxsize=1)
def _flat_metaschema() -> Any:
    """Draft 2020-12's metaschema as one object schema, for a validator that resolves only plain local `$ref`s: the
    same rules as the metaschema and its seven linked vocabulary documents, checked in about a fifth of the time.
    jsonschema's `$dynamicRef` resolution walks the dynamic scope at every subschema, and each of the seven
    vocabularies is a separate `allOf` branch to descend into: ~0.9 ms per BFCL tool schema, most of a bfcl run's
    scoring. Built from jsonschema's own metaschema documents; None if their shape is not the one this expects, and
    the full check runs."""
    from jsonschema_specifications import REGISTRY as SPECIFICATIONS

    meta = Draft202012Validator.META_SCHEMA
    try:
        defs: dict[str, Any] = {}
        flat: dict[str, Any] = {}
        _conjoin(flat, _one_document({k: v for k, v in meta.items() if k != "allOf"}, defs))
        for item in meta["allOf"]:
            _conjoin(flat, _one_document(SPECIFICATIONS.contents(f"https://json-schema.org/draft/2020-12/{item['$ref']}"), defs))
    except (KeyError, TypeError, ValueError, AttributeError, LookupError, referencing.exceptions.Unresolvable):
        return None
    return Draft202012Validator({**flat, "$defs": defs}, format_checker=Draft202012Validator.FORMAT_CHECKER)


def check_schema(base: Any, schema: Any) -> None:
    """`base.check_schema(schema)`, with the same verdict. A 2020-12 schema the one-object metaschema finds valid
    is valid; any other (and every other dialect) gets jsonschema's own check, which raises its own SchemaError."""
    if base is Draft202012Validator:
        flat = _flat_metaschema()
        if flat is not None and next(flat.iter_errors(schema), None) is None:
            return
    base.check_schema(schema)


def _build(schema: Any) -> Any:
    if not isinstance(schema, (dict, bool)):
        raise NotCheckable(f"a schema must be an object, not {type(schema).__name__}")
    try:
        base = validators.validator_for(schema, default=Draft202012Validator)
        check_schema(base, schema)
        problem = _static_problem(schema)
    except NotCheckable:
        raise
    except SchemaError as e:
        raise NotCheckable(f"invalid schema: {e.message[:80]}") from None
    except RecursionError:
        raise NotCheckable("schema nested too deep") from None
    except Exception as e:  # noqa: BLE001 - whatever stops reading the schema makes it not checkable
        raise NotCheckable(f"invalid schema: {type(e).__name__}") from None
    if problem:
        raise NotCheckable(problem)
    return _safe_class(base)(schema, registry=REGISTRY, format_checker=None)


@functools.lru_cache(maxsize=4096)
def _validator_for_text(schema_json: str) -> Any:
    try:
        return _build(json.loads(schema_json))
    except NotCheckable as e:
        return e.reason  # cached too: a refused schema is refused once (its reason, not the exception and its traceback)


def validator(schema: Any) -> Any:
    """A validator that cannot reach the network, the file system or a backtracking regex; NotCheckable if none."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        raise NotCheckable("schema is not JSON") from None
    found = _validator_for_text(key)
    if isinstance(found, str):
        raise NotCheckable(found)
    return found


def problem(schema: Any) -> str | None:
    """Why this schema cannot be checked (None when it can), with an empty instance smoke-tested too."""
    try:
        first_error(schema, {})
    except NotCheckable as e:
        return e.reason
    return None


def first_error(schema: Any, instance: Any) -> ValidationError | None:
    """The first validation error (None: valid). NotCheckable when the schema cannot be checked safely."""
    v = validator(schema)
    _start(instance)
    try:
        return next(iter(v.iter_errors(instance)), None)
    except NotCheckable:
        raise
    except (referencing.exceptions.Unresolvable, referencing.exceptions.Unretrievable) as e:
        raise NotCheckable(f"unresolvable $ref ({type(e).__name__})") from None
    except RecursionError:
        raise NotCheckable("schema or instance nested too deep") from None
    except Exception as e:  # noqa: BLE001 - the schema, not the endpoint, failed inside the validator
        if "Unresolvable" in type(e).__name__ or "RefResolution" in type(e).__name__:
            raise NotCheckable("unresolvable $ref") from None
        raise NotCheckable(f"validator error: {type(e).__name__}") from None


def errors(schema: Any, instance: Any) -> list[ValidationError]:
    """All validation errors, sorted by path. NotCheckable as first_error."""
    return errors_of(validator(schema), instance)


def errors_of(v: Any, instance: Any) -> list[ValidationError]:
    """All errors of a validator `validator()` made, sorted by path, within the step budget; NotCheckable as first_error."""
    _start(instance)
    try:
        return sorted(v.iter_errors(instance), key=lambda e: [str(p) for p in e.path])
    except NotCheckable:
        raise
    except RecursionError:
        raise NotCheckable("schema or instance nested too deep") from None
    except Exception as e:  # noqa: BLE001
        raise NotCheckable(f"validator error: {type(e).__name__}") from None
