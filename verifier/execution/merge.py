"""`verifier merge SHARD... --out RUN_DIR`: shard run directories -> one run directory, then scored.

CI splits a large run across matrix jobs (`--shard i/n`, or `--limit`/`--sample-seed`);
each job uploads its run dir; one job merges them and compares the result with the
golden as if it were one run. Shards must agree on everything that makes runs
comparable (model, suite versions, sampling, epochs, modes); they may differ in
which samples they hold and in when they ran.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from verifier import safewrite
from verifier.execution import journal
from verifier.execution.layout import CONTEXT, PROBES
from verifier.execution.resume import endpoint_place, served_models
from verifier.execution.rundir import RunDir
from verifier import scrub
from verifier.errors import UsageError
from verifier.types import RunHeader, Sample

SAME = ("sampling", "extra_body", "epochs", "modes")


def parse_shard(spec: str) -> tuple[int, int]:
    """'2/4' -> (2, 4): the second of four shards, 1-based like CI matrix indexes."""
    try:
        i, n = (int(x) for x in spec.split("/"))
    except ValueError:
        raise ValueError(f"--shard must look like I/N (e.g. 2/4), got {spec!r}") from None
    if not 1 <= i <= n:
        raise ValueError(f"--shard {spec}: need 1 <= I <= N")
    return i, n


def take_shard(samples: Sequence[Sample], spec: str | None) -> list[Sample]:
    """Every n-th sample starting at i-1: balanced, disjoint, and the shards' union is the whole selection."""
    if not spec:
        return list(samples)
    i, n = parse_shard(spec)
    return list(samples[i - 1::n])


def _usage(msg: str, hints: tuple[str, ...] = ()) -> Exception:
    return UsageError(msg, hints=hints)


def merge_headers(run_id: str, headers: list[tuple[Path, RunHeader]]) -> RunHeader:
    """The merged run's header from the shards' (checked to be one run's parts): the first shard's model, sampling,
    epochs and modes, the shards' suites, the earliest start and the latest finish, the shard list and selection.
    The per-suite counts and the shard set are `merge`'s to add."""
    first_dir, first = headers[0]
    model = first.model
    where = endpoint_place(str(first.endpoint.get("base_url") or ""))
    versions: dict[str, tuple[str | None, Path]] = {}
    for d, h in headers:
        if h.model != model:
            raise _usage(f"shard {d} used model {h.model!r}, shard {first_dir} used {model!r}")
        # Another endpoint is another system under test (a port may differ: a local server restarted, as --resume allows).
        if endpoint_place(str(h.endpoint.get("base_url") or "")) != where:
            raise _usage(f"shard {d} ran against {h.endpoint.get('base_url')!r}, shard {first_dir} against "
                         f"{first.endpoint.get('base_url')!r}: shards of one run share one endpoint")
        mine, theirs = _comparable(h), _comparable(first)
        for k in SAME:
            if mine[k] != theirs[k]:
                raise _usage(f"shard {d} differs from {first_dir} in {k}: {mine[k]!r} vs {theirs[k]!r}")
        a, b = served_models(first.server_info or {}), served_models(h.server_info or {})
        if a is not None and b is not None and a != b:  # one run's evidence must come from one served model
            raise _usage(f"shard {d}'s endpoint served models {b}, shard {first_dir}'s served {a}: merge shards of one endpoint")
        for name in h.suites:
            version = h.suite_version(name)
            seen = versions.setdefault(name, (version, d))
            if seen[0] != version:
                raise _usage(f"conflicting {name} versions: {seen[0]} in {seen[1]}, {version} in {d}")
    starts = [h.started for _, h in headers if h.started]  # ISO-8601 strings as the shards wrote them
    ends = [h.finished for _, h in headers if h.finished]
    rest = dict(first.extra)  # server_info and whatever else the first shard had
    endpoints = sorted({str(h.endpoint.get("base_url")) for _, h in headers})
    if len(endpoints) > 1:  # e.g. one server per CI job on its own port: the same model, said in run.json
        rest["endpoints"] = endpoints
    rest.update(
        selection={"smoke": all(_selection(h).get("smoke") for _, h in headers), "limit": None, "sample_seed": None,
                   "ids": any(_selection(h).get("ids") for _, h in headers)},
        shards=[{"run_id": h.run_id, "endpoint": h.endpoint, "started": h.started, "finished": h.finished,
                 "selection": h.selection, "suites": h.suites} for _, h in headers],
    )
    return journal.run_header(  # the first shard's harness, sampling, extra body, epochs and modes
        run_id, endpoint=first.endpoint, harness=first.harness, sampling=first.sampling, extra_body=first.extra_body,
        epochs=first.epochs, modes=first.modes,
        suites={name: {**h.suites[name]} for _, h in reversed(headers) for name in h.suites},
        started=min(starts) if starts else None,
        # ISO-8601 UTC strings sort chronologically; a shard that never finished leaves the merge unfinished.
        finished=max(ends) if len(ends) == len(headers) else None,
        **rest,
    )


def _comparable(h: RunHeader) -> dict[str, Any]:
    """What every shard must share (SAME), by name, for the message that names the first difference."""
    return {"sampling": h.sampling, "extra_body": h.extra_body, "epochs": h.epochs, "modes": h.modes}


def _selection(h: RunHeader) -> dict[str, Any]:
    """A shard's `selection` (how its samples were chosen), empty when it recorded none."""
    return h.selection if isinstance(h.selection, dict) else {}


def _refuse_repeats(shards: list[Path]) -> None:
    """The same shard given twice (or a copy of it) would double its records."""
    seen: dict[Any, Path] = {}
    for d in shards:
        digest = journal.file_digest(Path(d) / journal.RESPONSES)
        keys = [Path(d).resolve()] + ([digest["sha256"]] if digest and digest["size"] else [])
        for k in keys:
            if k in seen:
                raise _usage(f"shard {d} is the same run as {seen[k]}: each shard may be merged once")
            seen[k] = Path(d)


def shard_set(headers: list[tuple[Path, RunHeader]]) -> dict[str, Any]:
    """The `--shard i/N` of each input, and which of the N are absent (an incomplete set must not pass as whole)."""
    specs = [(_selection(h).get("shard"), d) for d, h in headers]
    parsed = [(parse_shard(sp), d) for sp, d in specs if sp]
    if not parsed:
        return {"inputs": [None] * len(headers), "n": None, "missing": [], "complete": True}
    ns = {n for (_, n), _ in parsed}
    if len(ns) > 1 or len(parsed) != len(headers):
        unsharded = [str(d) for sp, d in specs if not sp]
        raise _usage(f"shards disagree on N: {sorted(ns)}" + (f"; not sharded: {', '.join(unsharded)}" if unsharded else ""))
    n = ns.pop()
    missing = sorted(set(range(1, n + 1)) - {i for (i, _), _ in parsed})
    return {"inputs": [sp for sp, _ in specs], "n": n, "missing": [f"{i}/{n}" for i in missing], "complete": not missing}


def merge(shards: list[Path], out: Path, allow_partial: bool = False, force: bool = False) -> RunHeader:
    """Write the merged run dir (header, samples union, responses concatenated); returns the header. Does not score.

    An incomplete shard set (2/4 and 4/4 of four) is refused unless `allow_partial`; the header records
    the set either way, and compare counts what is missing against the golden. `out` may not be a golden
    directory unless `force` (it would replace the golden's samples.jsonl)."""
    if len(shards) < 1:
        raise _usage("merge needs at least one shard run directory")
    RunDir(out).claim_for_write(flag="--out", force=force, own_run=True)  # a run there is refused below, naming --resume
    headers: list[tuple[Path, RunHeader]] = []
    for d in shards:
        try:
            headers.append((d, RunDir(d).header()))
            scrub.register_run(headers[-1][1].endpoint)  # the merged files are scrubbed of each shard's key
        except journal.NotARunDir as e:
            raise _usage(str(e)) from None
    _refuse_repeats(shards)
    sset = shard_set(headers)
    if not sset["complete"] and not allow_partial:
        raise _usage(f"incomplete shard set: have {', '.join(sset['inputs'])}, missing {', '.join(sset['missing'])} "
                     "(a failed matrix job?)", hints=("pass --allow-partial to merge anyway (compare will report the gap)",))
    hdr = merge_headers(out.name, headers)
    samples: dict[tuple[str, str], Sample] = {}
    for d, _ in headers:
        for key, s in journal.read_samples(d).items():
            if key in samples and samples[key] != s:
                raise _usage(f"sample {key[0]}/{key[1]} differs between shards (another dataset?); last seen in {d}")
            samples[key] = s
    journal.ensure_writable_new_dir(out)
    ordered = sorted(samples.items())
    journal.write_samples(out, [(suite, s) for (suite, _), s in ordered])
    suites: dict[str, Any] = {}
    for name, info in hdr.suites.items():
        mine = [s for (suite, _), s in ordered if suite == name]
        h = hashlib.sha256()
        for s in mine:
            h.update(safewrite.canonical(s.to_json()).encode())
            h.update(b"\n")
        reqs = sum(x.suites.get(name, {}).get("requests", 0) for _, x in headers)
        suites[name] = {**info, "dataset_sha256": h.hexdigest(), "samples": len(mine), "requests": reqs}
    # Responses: concatenated in shard order. Readers keep the latest record per key, so a sample that two
    # shards both ran resolves to the later shard, the same rule as a resumed run.
    with safewrite.atomic_write(out / journal.RESPONSES) as f:
        for d, _ in headers:
            for rec in journal.read_jsonl(d / journal.RESPONSES):
                f.write(safewrite.scrubbed_line(rec) + "\n")
    parts = _merge_probes(headers, out)
    hdr = replace(hdr, suites=suites, extra={**hdr.extra, "shard_set": sset, **({"merged_parts": parts} if parts else {})})
    journal.write_header(out, hdr)
    return hdr


def _merge_probes(headers: list[tuple[Path, RunHeader]], out: Path) -> dict[str, list[str]]:
    """The parameter-contract probes and the context probe are part of the run: a merge without them could
    never cover a golden that has them. Each probe's result comes from the first shard that ran it; shards
    that disagree on one make it failed (a failure seen on the endpoint is not outvoted), naming both.
    Returns which shards each merged file came from (run.json's `merged_parts`; empty when none had either)."""
    probes: dict[str, Any] = {}
    sources: dict[str, list[str]] = {}
    for d, _ in headers:
        for name, result in (RunDir(d).probes() or {}).items():
            if not isinstance(result, dict):
                raise _usage(f"{RunDir(d).file(PROBES)} is corrupt: probe {name!r} is not an object")
            sources.setdefault(PROBES, [])
            if str(d) not in sources[PROBES]:
                sources[PROBES].append(str(d))
            first = probes.get(name)
            if first is None:
                probes[name] = dict(result)
            elif bool(first.get("passed")) != bool(result.get("passed")):
                probes[name] = {"passed": False, "detail": f"shards disagree: {first.get('detail')} / {result.get('detail')} ({d})"}
    if probes:
        safewrite.write_json(out / PROBES, probes)
    for d, _ in headers:
        ctx = RunDir(d).context()
        if ctx is not None:
            safewrite.write_json(out / CONTEXT, ctx)
            sources[CONTEXT] = [str(d)]
            break
    return sources
