"""Give a golden's inputs.jsonl back the key order its reference sent.

Goldens blessed before the journal kept key order hold their samples with every object's keys sorted, so a gate
sent other bodies than the reference had (a JSON schema's properties in another order: a grammar then writes the
keys in another order). The samples' content is right; only the order is lost. This reloads each suite's samples
from where the reference took them (the suite's built-in smoke set, or `--data`), checks that every record equals
the reloaded sample as content (key order aside), and rewrites inputs.jsonl in the loader's order. A record whose
content differs, or that the loader no longer has, stops it with the reason: nothing is guessed.

    python bench/reorder_golden_inputs.py GOLDEN_DIR [GOLDEN_DIR ...] [--data PATH]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from verifier.app.catalog import suite_named
from verifier.app.collect import data_for
from verifier.golden import store
from verifier.run import journal


def reorder(golden: Path, data: str | None) -> int:
    g = store.load(golden).header
    smoke = g.smoke
    records = list(journal.read_jsonl(golden / store.INPUTS))
    loaded: dict[str, dict[str, object]] = {}
    for name in g.suites:
        suite = suite_named(name)
        loaded[name] = {s.id: s for s in suite.load(data_for(data, name), smoke)}
    out, changed = [], 0
    for n, rec in enumerate(records, 1):
        fresh = loaded.get(rec["suite"], {}).get(rec["id"])
        if fresh is None:
            raise SystemExit(f"{golden}: {store.INPUTS} line {n}: {rec['suite']}/{rec['id']} is not among the loader's samples")
        new = {"suite": rec["suite"], **journal.sample_fields(fresh)}  # type: ignore[arg-type]
        if journal.canonical(new) != journal.canonical(rec):
            raise SystemExit(f"{golden}: {store.INPUTS} line {n}: {rec['suite']}/{rec['id']} differs from the loader's sample")
        changed += journal.dumps(new) != journal.dumps(rec)
        out.append(new)
    journal.write_jsonl(golden / store.INPUTS, out)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("goldens", nargs="+")
    ap.add_argument("--data", help="dataset path for suites that load one (as `verifier run --data`)")
    a = ap.parse_args(argv)
    for d in a.goldens:
        print(f"{d}: {reorder(Path(d), a.data)} record(s) reordered")
    return 0


if __name__ == "__main__":
    sys.exit(main())
