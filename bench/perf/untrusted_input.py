"""What an untrusted schema or simulator call costs the scorer (issue #37), measured, not asserted:

    python bench/perf/untrusted_input.py [--data DIR]      # DIR: the JSONSchemaBench root (default: $VERIFIER_SHARED_DATA)

Rows: Python's `re` on `^(a+)+$` against n 'a' then '!' (doubling per character) beside RE2 on 40; the
JSONSchemaBench URL pattern (Github_medium o82647); how many of JSONSchemaBench's patterns RE2 compiles and why the
unusable schemas are unusable; `uniqueItems` over 500,000 distinct objects; absurd simulator calls; issue 49: a schema
of in-document `$ref`s expanding 2**n times (checked until its step budget), the value count that keeps a 60 MiB
`[{},...]` answer from being parsed, and a cached template of nested `range(100000)` loops. The figures go to
bench/results/untrusted_input.md (bench/record.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from suites import structured as st  # noqa: E402
from suites.bfcl_sims import execute as ex  # noqa: E402
from verifier.judge import schemacheck  # noqa: E402

EVIL = "^(a+)+$"


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def patterns(node):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "pattern" and isinstance(v, str):
                yield v
            elif k == "patternProperties" and isinstance(v, dict):
                yield from v
                yield from (p for x in v.values() for p in patterns(x))
            elif k not in ("enum", "const", "default", "examples"):
                yield from patterns(v)
    elif isinstance(node, list):
        for v in node:
            yield from patterns(v)


def _exploding(levels: int) -> dict:
    defs: dict = {"a0": {"type": "object"}}
    for i in range(1, levels + 1):
        defs[f"a{i}"] = {"allOf": [{"$ref": f"#/$defs/a{i - 1}"}, {"$ref": f"#/$defs/a{i - 1}"}]}
    return {"$defs": defs, "$ref": f"#/$defs/a{levels}"}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=str(Path(os.environ.get("VERIFIER_SHARED_DATA", ROOT.parent / "shared" / "data")) / "jsonschemabench"))
    a = ap.parse_args()
    out: dict = {}
    out["python_re_s"] = {n: round(timed(lambda n=n: re.search(EVIL, "a" * n + "!")), 4) for n in (16, 18, 20, 22)}
    out["re2_40_chars_s"] = round(timed(lambda: schemacheck.first_error({"pattern": EVIL}, "a" * 40 + "!")), 6)
    bench = Path(a.data)
    o82647 = bench / "Github_medium" / "o82647.json"
    if o82647.is_file():
        schema = json.loads(o82647.read_text())
        out["o82647_s"] = round(timed(lambda: st.compliance(schema, {"fallback_src_url": "http://a.bc/" + "a" * 40 + "!"})), 6)
        n = total = compiled = 0
        reasons: collections.Counter = collections.Counter()
        for f in sorted(bench.glob("*/*.json")):
            try:
                doc = json.loads(f.read_text())
            except ValueError:
                continue
            n += 1
            for p in patterns(doc):
                total += 1
                try:
                    schemacheck.compile_regex(p)
                    compiled += 1
                except schemacheck.NotCheckable:
                    pass
            why = st.unusable(doc)
            if why:
                reasons[why.split(" ")[0]] += 1
        out["jsonschemabench"] = {"schemas": n, "patterns": total, "re2_compiled": compiled, "unusable": dict(reasons)}
    items = [{"a": i} for i in range(500_000)]
    out["unique_items_500k_s"] = round(timed(lambda: schemacheck.first_error({"uniqueItems": True}, items)), 3)
    inst = ex.instances_for({"id": "b", "involved_classes": ["MathAPI", "MessageAPI"],
                             "initial_config": {"MessageAPI": {"generated_ids": list(range(10000, 100000)), "current_user": "USR001"}}})
    out["sim_calls_s"] = {
        "round_number(5, -1e9)": round(timed(lambda: ex.execute(inst, "round_number", {"number": 5, "decimal_places": -1e9})), 6),
        "send_message, all ids taken": round(timed(lambda: ex.execute(inst, "send_message", {"receiver_id": "USR002", "message": "x"})), 6),
    }
    out["ref_explosion_s"] = {n: round(timed(lambda n=n: st.compliance(_exploding(n), {})), 3) for n in (10, 14, 20, 40)}
    many = "[" + "{}," * (60 * 2**20 // 3) + "{}]"
    from verifier import jsonsafe
    from suites import lm_eval_compiled
    from suites.bounded_jinja import TemplateBudget

    out["values_over_60mib_s"] = round(timed(lambda: jsonsafe.values_over(many)), 4)

    def nested_loops() -> None:
        try:
            lm_eval_compiled.render("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {})
        except TemplateBudget:
            pass

    out["nested_range_template_s"] = round(timed(nested_loops), 4)
    for k, v in out.items():
        print(f"{k}: {json.dumps(v)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record
    from record import recorded  # noqa: E402

    with recorded("untrusted_input"):  # the figures go to bench/results/untrusted_input.md
        code = main()
    raise SystemExit(code)
