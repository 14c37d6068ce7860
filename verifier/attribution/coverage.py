"""Coverage accounting: every (sample, mode) the golden holds, and every probe it has, is either answered
by the candidate or counted missing. Pure.

A comparison that silently skips what the candidate never ran is a false pass waiting to happen
(one shard of two, a chat-only run against a chat + stream golden). Missing coverage above the
infra budget makes the verdict `incomplete`; a subset of the golden is accepted only when the
caller asks for it (`allow_subset`), and is then reported as a subset.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from verifier.execution import probe_results
from verifier.types import Observation

MAX_LISTED = 50


def _keys(obs: Iterable[Observation]) -> set[tuple[str, str, str]]:
    return {(o.suite, o.sample_id, o.mode) for o in obs}


def coverage(golden: list[Observation], cand: list[Observation], golden_probes: dict[str, Any] | None,
             cand_probes: dict[str, Any] | None, allow_subset: bool = False) -> dict[str, Any]:
    """The `coverage` block of comparison.json.

    With `allow_subset`, samples the candidate never ran in any mode are left out of the expected set
    (an explicit `--limit`/`--sample-seed` subset); a sample it ran in some modes but not others still
    counts its missing modes.
    """
    want, have = _keys(golden), _keys(cand)
    ran = {(s, i) for s, i, _ in have}
    skipped = {(s, i) for s, i, _ in want if (s, i) not in ran}
    if allow_subset:
        want = {k for k in want if (k[0], k[1]) in ran}
    missing = sorted(want - have)
    by_sample: dict[tuple[str, str], list[str]] = defaultdict(list)
    for suite, sid, mode in missing:
        by_sample[(suite, sid)].append(mode)
    missing_modes = sorted({m for _, _, m in missing})
    # A probe the reference itself could not get (its requests met an infra error) is no evidence either way, as for
    # a sample: not expected of the candidate. Values are conformance rows or raw probe results.
    no_ref = sorted(k for k, v in (golden_probes or {}).items() if probe_results.reference_infra(v))
    golden_probes = {k: v for k, v in (golden_probes or {}).items() if k not in no_ref}
    probes_missing = sorted(set(golden_probes) - set(cand_probes or {}))
    probes_infra = [k for k in probes_missing if isinstance(golden_probes[k], dict) and golden_probes[k].get("candidate") == "infra"]
    expected = len(want) + len(golden_probes)
    gaps = len(missing) + len(probes_missing)
    # A probe that met an infra error has its own account (`probe_infra`, judged inconclusive by compare), not the
    # samples' budget: one probe's 500 among 8 samples or among 800 is the same evidence, and must give the same exit.
    # A probe never run is missing coverage like a sample (the run did not try what the golden holds).
    counted = expected - len(probes_infra)
    return {
        "expected": expected,
        "answered": expected - gaps,
        "missing": gaps,
        "rate": round((gaps - len(probes_infra)) / counted, 6) if counted else 0.0,
        "probe_infra": {"count": len(probes_infra), "of": len(golden_probes)},
        "missing_samples": [{"suite": s, "sample_id": i, "modes": ms} for (s, i), ms in sorted(by_sample.items())][:MAX_LISTED],
        "missing_sample_count": len(by_sample),
        "missing_modes": missing_modes,
        "missing_probes": probes_missing,
        "missing_probes_infra": probes_infra,
        "probes_reference_infra": no_ref,
        "subset": bool(allow_subset and skipped),
        "subset_skipped_samples": len(skipped) if allow_subset else 0,
    }


def describe(c: dict[str, Any]) -> str:
    """One line naming what is missing, for the verdict's reason."""
    parts = []
    if c["missing_sample_count"]:
        ids = ", ".join(f"{m['suite']}/{m['sample_id']}" for m in c["missing_samples"][:8])
        more = c["missing_sample_count"] - min(8, len(c["missing_samples"]))
        parts.append(f"{c['missing_sample_count']} sample(s) missing modes {'/'.join(c['missing_modes'])}: {ids}"
                     + (f" (+{more} more)" if more > 0 else ""))
    infra = set(c.get("missing_probes_infra") or ())
    not_run = [k for k in c["missing_probes"] if k not in infra]
    if not_run:
        parts.append(f"probes not run: {', '.join(not_run)} (rerun with `verifier gate --probes`)")
    if infra:
        parts.append(f"probes that met an infra error (the reference answered them; not judged, outside the samples' "
                     f"budget): {', '.join(sorted(infra))}")
    return f"missing coverage {c['missing']}/{c['expected']} of the golden: " + "; ".join(parts)
