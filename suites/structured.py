"""Structured output: `response_format` json_schema (strict and non-strict) and json_object.

Two sources of items:
- JSONSchemaBench (arXiv 2501.10868): real-world schemas, "produce an instance of this schema";
  validity and compliance only (there is no single right answer). From `--data DIR` (the folder of
  subset folders, or a folder containing `jsonschemabench/`) or the hub dataset when no --data.
- `suites/data/structured_extraction.jsonl`: short texts with a schema and the expected object, so
  the suite measures content accuracy too, not only that the JSON is well formed.

Sample ids are `<source>/<stem>/<variant>`; `variant` is `strict`, `nonstrict` or `json_object`.

Scoring decisions (documented because they change numbers):
- Fences: when the content is (or contains) a ```-fenced block we parse the block, so a chatty model is
  still judged on merit, and record the non-blocking finding `json_fenced`: an endpoint that enforced
  the format (grammar) can never emit a fence, so its rate is a frontend signal compare can track.
- Strict json_schema: invalid JSON or a schema violation is a blocking contract finding
  (`json_invalid_strict` / `json_schema_violation_strict`): the server promised enforcement. Not when
  `finish_reason` is `length`: the token limit cut the output, the grammar did not fail.
- Non-strict and json_object: the same failures are content failures (metrics 0).
- Schema validation uses the draft named by `$schema`, else Draft 2020-12. `format` is an annotation
  (the 2019+ default): we do not assert formats. A schema that is itself invalid (bad regex, dangling
  `$ref`...) is skipped at load; one that cannot be checked at score time (a golden's schema with a `$ref`
  outside the document, a regex without a linear-time matcher: verifier/judge/schemacheck.py) is n/a
  (no `schema_compliance` key) with the finding `schema_not_checkable`, never counted against the endpoint.
- content_accuracy: exact match after normalization: strings casefolded with whitespace collapsed,
  numbers compared as floats (34 == 34.0; booleans stay booleans), object keys exact, arrays compared
  as multisets (extraction answers are sets in practice: 'Ana, Ben and Chloe' in any order).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any, Iterator, Sequence

from verifier.types import Finding, Judgement, Parsed, Sample, Suite, Verdict

import suites.hub as hub
from .lazy import LazySamples
from verifier import jsonsafe

NAME = "structured"
HUB = "epfl-dlab/JSONSchemaBench"
# The subsets in the shared copy (SOURCE.txt); the hub offers more, these keep both sources comparable.
HUB_SUBSETS = ("Github_trivial", "Github_easy", "Github_medium", "Glaiveai2K", "Snowplow", "WashingtonPost")
EXTRACTION = Path(__file__).parent / "data" / "structured_extraction.jsonl"
VARIANTS = ("strict", "nonstrict", "json_object")

# Tiny built-in schemas for the offline smoke subset; `example` is a valid instance (tests use it).
BUILTIN: dict[str, dict[str, Any]] = {
    "flag": {
        "schema": {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False},
        "example": {"ok": True},
    },
    "enum_range": {
        "schema": {
            "type": "object",
            "properties": {
                "level": {"type": "string", "enum": ["low", "mid", "high"]},
                "score": {"type": "integer", "minimum": 0, "maximum": 10},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
            },
            "required": ["level", "score", "tags"],
            "additionalProperties": False,
        },
        "example": {"level": "mid", "score": 7, "tags": ["a"]},
    },
    # $defs/$ref: a known grammar-compiler weak spot (vLLM #21148 returned empty content).
    "defs_ref": {
        "schema": {
            "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                                "required": ["x", "y"], "additionalProperties": False}},
            "type": "object",
            "properties": {"start": {"$ref": "#/$defs/point"}, "end": {"$ref": "#/$defs/point"}},
            "required": ["start", "end"],
            "additionalProperties": False,
        },
        "example": {"start": {"x": 0, "y": 0}, "end": {"x": 1.5, "y": -2}},
    },
}
SMOKE_EXTRACTION = 6  # first N extraction items x 3 variants + built-ins x 2 = 24 smoke samples

FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)\n?[ \t]*```", re.S)


# ---------------------------------------------------------------- schemas


def sanitize_name(name: str) -> str:
    """OpenAI requires ^[a-zA-Z0-9_-]{1,64}$ for json_schema.name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "schema"


def unusable(schema: Any) -> str | None:
    """Why a schema cannot judge an endpoint (None when usable). Checked at load so bad data never scores: an
    invalid schema, a `$ref` outside the document or dangling, a regex without a linear-time matcher
    (verifier/judge/schemacheck.py)."""
    from verifier.judge import schemacheck  # here: jsonschema costs ~50 ms to import, and other suites' runs never use it

    if not isinstance(schema, dict):
        return "not an object"
    return schemacheck.problem(schema)


def compliance(schema: dict[str, Any], instance: Any) -> tuple[bool | None, str]:
    """(True | False | None = not checkable, first error or why not checkable). Pure; the validator cache only
    saves time. A schema a golden carries is checked without the network, files or backtracking regexes."""
    from verifier.judge import schemacheck

    try:
        err = schemacheck.first_error(schema, instance)
    except schemacheck.NotCheckable as e:
        return None, e.reason
    return (err is None), ("" if err is None else f"{'/'.join(map(str, err.absolute_path))}: {err.message}"[:160])


# ---------------------------------------------------------------- samples


def _format(variant: str, name: str, schema: dict[str, Any]) -> dict[str, Any]:
    if variant == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": sanitize_name(name), "schema": schema, "strict": variant == "strict"}}


def _sample(sid: str, variant: str, name: str, prompt: str, schema: dict[str, Any], target: Any, source: str) -> Sample:
    meta: dict[str, Any] = {"variant": variant, "source": source}
    if variant == "json_object":
        meta["schema"] = schema  # json_schema variants carry it in response_format; not duplicated there
    return Sample(id=f"{sid}/{variant}", messages=[{"role": "user", "content": prompt}],
                  response_format=_format(variant, name, schema), target=target, meta=meta)


def generate_prompt(schema: dict[str, Any]) -> str:
    return ("Generate a realistic JSON document that conforms to the following JSON Schema. "
            "Reply with the JSON only.\n\nSchema:\n" + json.dumps(schema, ensure_ascii=False))


def extract_prompt(text: str, schema: dict[str, Any]) -> str:
    return ("Extract the information in the text below as a JSON object that conforms to this JSON Schema. "
            "Copy values as written in the text; use null when the text does not give a value.\n\n"
            f"Schema:\n{json.dumps(schema, ensure_ascii=False)}\n\nText:\n{text}\n\nReply with the JSON object only.")


def extraction_samples(limit: int | None = None) -> list[Sample]:
    rows = [jsonsafe.loads(line) for line in EXTRACTION.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for r in rows[:limit]:
        for v in VARIANTS:
            out.append(_sample(f"extract/{r['id']}", v, r["id"], extract_prompt(r["text"], r["schema"]), r["schema"], r["expected"], "extract"))
    return out


def builtin_samples() -> list[Sample]:
    return [_sample(f"builtin/{k}", v, k, generate_prompt(b["schema"]), b["schema"], None, "builtin")
            for k, b in BUILTIN.items() for v in ("strict", "nonstrict")]


def bench_dir(data: str) -> Path:
    """--data DIR: the JSONSchemaBench root (subset folders of *.json), or a folder holding `jsonschemabench/`."""
    root = Path(data)
    if (root / "jsonschemabench").is_dir():
        root = root / "jsonschemabench"
    if not root.is_dir() or not any(root.glob("*/*.json")):
        raise FileNotFoundError(f"no JSONSchemaBench layout (<subset>/<name>.json) under {data}")
    return root


def bench_rows(root: Path, subsets: tuple[str, ...] | None = None) -> Iterator[tuple[str, str, str]]:
    """(subset, file stem, schema text), sorted so the sample order (and dataset sha256) is stable."""
    for sub in sorted(p for p in root.iterdir() if p.is_dir() and (subsets is None or p.name in subsets)):
        for f in sorted(sub.glob("*.json")):
            yield sub.name, f.stem, f.read_text(encoding="utf-8")


def _hub_rows() -> Iterator[tuple[str, str, str]]:
    def download(subset: str) -> Any:  # a datasets.Dataset (the library ships no types): rows are dicts
        import datasets  # heavy; only when actually used

        return datasets.load_dataset(HUB, subset, split="test")

    for subset in HUB_SUBSETS:
        for row in hub.load(f"structured: hub dataset {HUB} ({subset})", partial(download, subset),
                            ("pass --data DIR (JSONSchemaBench folders)", "--smoke"), repo=HUB):
            yield subset, str(row["unique_id"]), row["json_schema"]


def row_samples(row: tuple[str, str, str], skipped: dict[str, str] | None = None) -> list[Sample]:
    """One schema item in strict and non-strict variants; none (and {id: why} in `skipped`) when unusable."""
    subset, stem, text = row
    sid = f"{subset}/{stem}"
    try:
        schema = jsonsafe.loads(text)
    except json.JSONDecodeError:
        why: str | None = "not JSON"
    else:
        why = unusable(schema)
    if why:
        if skipped is not None:
            skipped[sid] = why
        return []
    name = schema.get("title") if isinstance(schema.get("title"), str) else stem
    return [_sample(sid, v, name, generate_prompt(schema), schema, None, subset) for v in ("strict", "nonstrict")]


def bench_samples(rows: Iterator[tuple[str, str, str]]) -> tuple[list[Sample], dict[str, str]]:
    """Schema items in strict and non-strict variants, plus {id: why} for the unusable ones skipped."""
    samples: list[Sample] = []
    skipped: dict[str, str] = {}
    for row in rows:
        samples += row_samples(row, skipped)
    return samples, skipped


def load(data: str | None = None, smoke: bool = False) -> Sequence[Sample]:
    """Extraction and built-in items first, then the bench schemas, each validated only when the
    selection reaches it (`--limit 10` reads none of the 6,598): see suites/lazy.py."""
    if smoke:
        return extraction_samples(SMOKE_EXTRACTION) + builtin_samples()
    rows = bench_rows(bench_dir(data)) if data else _hub_rows()
    return LazySamples(extraction_samples() + builtin_samples(), rows, row_samples)


def request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages, "response_format": sample.response_format}


# ---------------------------------------------------------------- scoring


def schema_of(sample: Sample) -> dict[str, Any]:
    rf = sample.response_format or {}
    return sample.meta.get("schema") or (rf.get("json_schema") or {}).get("schema") or {}


def unfence(text: str) -> tuple[str, bool]:
    """The JSON text to parse, and whether it came out of a ``` fence."""
    if "```" in text:
        m = FENCE.search(text)
        if m:
            return m.group(1), True
    return text, False


def _canon(x: Any) -> Any:
    if isinstance(x, str):
        return " ".join(x.casefold().split())
    if isinstance(x, bool) or x is None:
        return x
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, dict):
        return {k: _canon(v) for k, v in x.items()}
    if isinstance(x, list):
        return sorted((_canon(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))
    return x


def same(a: Any, b: Any) -> bool:
    """Normalized exact match; compared as canonical JSON so True never equals 1.0."""
    return json.dumps(_canon(a), sort_keys=True) == json.dumps(_canon(b), sort_keys=True)


def score(sample: Sample, parsed: Parsed) -> Judgement:
    variant = sample.meta.get("variant", "")
    text, fenced = unfence(parsed.content or "")
    findings: list[Finding] = [Finding("json_fenced", (parsed.content or "")[:60])] if fenced else []
    try:
        obj, valid = jsonsafe.loads(text), True
    except (json.JSONDecodeError, ValueError):
        obj, valid = None, False
    metrics: dict[str, float] = {"valid_json": float(valid)}
    ok, err = compliance(schema_of(sample), obj) if valid else (False, "invalid JSON")
    if ok is not None:
        metrics["schema_compliance"] = float(ok)
    else:
        findings.append(Finding("schema_not_checkable", err))
    if sample.target is not None:
        metrics["content_accuracy"] = float(valid and same(obj, sample.target))

    truncated = parsed.finish_reason == "length"
    if variant == "strict" and not truncated:
        if not valid:
            findings.append(Finding("json_invalid_strict", (parsed.content or "")[:120]))
        elif ok is False:
            findings.append(Finding("json_schema_violation_strict", err))

    if not valid:
        reason = "truncated" if truncated else "invalid_json"
    elif ok is False:
        reason = "schema_violation"
    elif "content_accuracy" in metrics:
        reason = "correct" if metrics["content_accuracy"] else "wrong_answer"
    else:
        reason = "compliant" if ok else "valid_json"
    primary = metrics.get("content_accuracy", metrics.get("schema_compliance", metrics["valid_json"]))
    strict_fail = any(f.code.endswith("_strict") for f in findings)
    return Judgement(
        outcome="contract" if strict_fail else "content", score=primary, answer=obj if valid else None, reason=reason,
        findings=tuple(findings), metrics=metrics, signals={"variant": variant},
    )


def variant_of(sample_id: str) -> str:
    return sample_id.rsplit("/", 1)[-1]


def summarize(verdicts: list[Verdict]) -> dict[str, Any]:
    """Per variant: counts of outcomes and of metric successes. Metric counts are over judged verdicts
    (content + contract): a strict failure is exactly what this table must show, so it is not dropped."""
    metrics = ("valid_json", "schema_compliance", "content_accuracy")
    table: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for v in verdicts:
        t = table[variant_of(v.sample_id)]
        t["n"] += 1
        t[v.outcome] += 1
        if v.outcome in ("content", "contract"):
            t["judged"] += 1
            for m in metrics:
                if m in v.metrics:
                    t[m] += int(v.metrics[m])
                    t[f"{m}_of"] += 1  # denominator: n/a schemas and target-less items are not counted
    out = {}
    for variant, t in sorted(table.items()):
        row: dict[str, Any] = {k: t[k] for k in ("n", "unsupported", "infra", "contract", "judged", *metrics)}
        row["rates"] = {m: round(t[m] / t[f"{m}_of"], 4) if t[f"{m}_of"] else None for m in metrics}
        out[variant] = row
    return {"variants": out}


SUITE = Suite(
    name=NAME, version="1", load=load, request=request, score=score,
    description="response_format json_schema (strict / non-strict) and json_object: JSONSchemaBench + extraction with answers",
    defaults={"max_tokens": 2048}, summarize=summarize,
)
