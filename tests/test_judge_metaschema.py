"""The metaschema check of a tool or response schema (judge/schemacheck.check_schema) takes draft 2020-12's metaschema
as one document, without `$dynamicRef`s: it must say "valid" exactly where jsonschema's own check does. Checked on
hand-made invalid schemas of every vocabulary and, where the shared data is present, on every JSONSchemaBench schema
and every BFCL function's parameters (valid and invalid ones: BFCL writes `"type": "dict"`)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator, Draft7Validator, validators
from jsonschema.exceptions import SchemaError

from verifier.judge import schemacheck

INVALID = [
    {"type": 5}, {"type": "dict"}, {"properties": {"a": {"type": "strin"}}}, {"required": "a"}, {"minLength": -1},
    {"properties": []}, {"items": {"type": ["string", "nope"]}}, {"pattern": 5}, {"pattern": "("},
    {"$defs": {"x": {"type": 1}}}, {"dependentSchemas": {"a": {"minimum": "x"}}}, {"unevaluatedProperties": {"type": 2}},
    {"prefixItems": [{"type": 3}]}, {"allOf": []}, {"anyOf": {}}, {"not": 3}, {"if": {"type": 4}}, {"contentEncoding": 1},
    {"$anchor": "1bad"}, {"$ref": 3}, {"dependencies": {"a": 3}}, {"properties": {"$id": {"type": "x"}}},
    {"additionalProperties": {"properties": {"b": {"enum": "no"}}}}, {"minContains": 1.5}, {"title": 1},
]
VALID = [
    True, {}, {"type": "object", "properties": {"a": {"type": "string", "pattern": "^a+$"}}, "required": ["a"]},
    {"$defs": {"n": {"type": "integer"}}, "items": {"$ref": "#/$defs/n"}}, {"enum": []}, {"dependencies": {"a": ["b"]}},
    {"anyOf": [{"type": "null"}, {"type": "array", "prefixItems": [{"const": 1}]}]}, {"$dynamicAnchor": "x"},
]


def _jsonschema_says_valid(schema):
    try:
        Draft202012Validator.check_schema(schema)
        return True
    except SchemaError:
        return False


def _one_document_says_valid(schema):
    try:
        schemacheck.check_schema(Draft202012Validator, schema)
        return True
    except SchemaError:
        return False


def test_the_one_document_metaschema_is_built():
    flat = schemacheck._flat_metaschema()
    assert flat is not None and "#meta" not in json.dumps(flat.schema) and "meta/" not in json.dumps(flat.schema)
    assert "allOf" not in flat.schema  # the vocabularies are one object schema


@pytest.mark.parametrize("schema", INVALID + VALID, ids=lambda s: json.dumps(s)[:40])
def test_same_verdict_as_jsonschema(schema):
    assert _one_document_says_valid(schema) == _jsonschema_says_valid(schema) == (schema in VALID)


def test_an_invalid_schema_keeps_jsonschemas_own_error():
    """Invalid goes through jsonschema's check, so the reason a finding quotes is the one it always was."""
    with pytest.raises(SchemaError) as ours:
        schemacheck.check_schema(Draft202012Validator, {"properties": {"a": {"type": "strin"}}})
    with pytest.raises(SchemaError) as theirs:
        Draft202012Validator.check_schema({"properties": {"a": {"type": "strin"}}})
    assert ours.value.message == theirs.value.message


def test_other_dialects_are_checked_by_jsonschema():
    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": 5}
    assert validators.validator_for(schema) is Draft7Validator
    with pytest.raises(SchemaError):
        schemacheck.check_schema(Draft7Validator, schema)


def test_same_verdict_on_every_shared_schema(shared_data):
    schemas = []
    for path in sorted((shared_data / "jsonschemabench").rglob("*.json")):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            continue
        schemas.append(doc)
        if isinstance(doc, dict) and isinstance(doc.get("schema"), dict):
            schemas.append(doc["schema"])
    for path in sorted((shared_data / "bfcl").glob("*.json")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            for fn in row.get("function") or () if isinstance(row, dict) else ():
                if isinstance(fn, dict) and isinstance(fn.get("parameters"), dict):
                    schemas.append(fn["parameters"])
    checked = [s for s in schemas if isinstance(s, (dict, bool))
               and validators.validator_for(s, default=Draft202012Validator) is Draft202012Validator]
    # Every third: ~4,000 schemas in ~10 s (all 11,939 agreed when this was written).
    checked = checked[::3]
    assert len(checked) > 1000
    differ = [json.dumps(s)[:120] for s in checked if _one_document_says_valid(s) != _jsonschema_says_valid(s)]
    assert differ == []
