"""The `verifier` command. Exit codes: 0 pass, 10/11/12 regressions, 20 inconclusive, 30 incomplete, 2 usage, 1 internal."""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

from . import journal, runner, scoring
from .endpoint import MODES, EndpointConfig, reachable
from .types import Sample, Suite


class UsageError(Exception):
    """Bad input: one line on stderr, exit 2, nothing half-written."""


def get_suites() -> dict[str, Suite]:
    from suites import SUITES

    return SUITES


def _suite_named(name: str) -> Suite:
    from suites import lookup

    suite = lookup(name)
    if suite is None:
        raise UsageError(f"unknown suite {name!r}; known: {', '.join(sorted(get_suites()))}")
    return suite


def resolve_suites(names: str) -> list[Suite]:
    table = get_suites()
    out = []
    for n in [x.strip() for x in names.split(",") if x.strip()]:
        if n not in table:
            raise UsageError(f"unknown suite {n!r}; known: {', '.join(sorted(table))}")
        out.append(table[n])
    if not out:
        raise UsageError("no suite given")
    return out


def parse_extra_body(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--extra-body: cannot read {text[1:]}: {e.strerror}") from None
    try:
        val = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--extra-body is not valid JSON: {e.msg} at position {e.pos}") from None
    if not isinstance(val, dict):
        raise UsageError("--extra-body must be a JSON object")
    return val


def parse_headers(items: list[str] | None) -> dict[str, str]:
    out = {}
    for h in items or []:
        if ":" not in h:
            raise UsageError(f"--header must look like 'Name: value', got {h.split(':')[0][:40]!r}")
        k, v = h.split(":", 1)
        out[k.strip()] = v.strip()
    return out


def ensure_writable_new_dir(path: Path) -> None:
    if (path / journal.HEADER).exists():
        raise UsageError(f"{path} already holds a run; use --resume {path} or another --out")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"output directory {path} is not writable: {e.strerror}") from None


def select(samples: list[Sample], limit: int | None, seed: int | None) -> list[Sample]:
    if seed is not None:
        samples = list(samples)
        random.Random(seed).shuffle(samples)
    return samples[:limit] if limit else samples


def sampling_from_args(a: argparse.Namespace) -> dict[str, Any]:
    overrides = dict(getattr(a, "base_overrides", None) or {})
    overrides.update({k: getattr(a, k) for k in ("temperature", "top_p", "max_tokens", "seed") if getattr(a, k) is not None})
    if getattr(a, "logprobs", None):
        overrides.update({"logprobs": True, "top_logprobs": a.logprobs})
    return {"defaults": runner.DEFAULT_SAMPLING, "overrides": overrides}


def add_endpoint_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    g = p.add_argument_group("endpoint")
    g.add_argument("--base-url", required=required, help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1")
    g.add_argument("--model", required=required, help="model name sent in every request")
    g.add_argument("--api-key-env", default="OPENAI_API_KEY", help="name of the environment variable holding the API key (the key is never written anywhere)")
    g.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="extra HTTP header (repeatable); values are never written")
    g.add_argument("--extra-body", metavar="JSON|@FILE", help="JSON object merged into every request body, e.g. '{\"chat_template_kwargs\": {\"enable_thinking\": false}}'")
    g.add_argument("--concurrency", type=int, default=8, help="requests in flight (default 8)")
    g.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds (default 600)")
    g.add_argument("--max-retries", type=int, default=3, help="retries on 429/5xx/connect/read errors (default 3)")
    g.add_argument("--max-response-mb", type=float, default=64.0, help="cap on one response's decoded size, MiB (default 64)")
    g.add_argument("--request-deadline", type=float, help="total seconds per request, retries and whole stream included (default 10 x --timeout)")
    g.add_argument("--info-deadline", type=float, default=10.0, help="total seconds for the start-up /models, /props, /version calls (default 10)")
    s = p.add_argument_group("sampling (override suite defaults)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--top-p", dest="top_p", type=float)
    s.add_argument("--max-tokens", dest="max_tokens", type=int)
    s.add_argument("--seed", type=int)
    s.add_argument("--logprobs", type=int, metavar="N", help="request logprobs with N top alternatives (feeds the logprob-drift signal)")


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default=None, help="comma-separated suite names (see list-suites)")
    p.add_argument("--data", help="local dataset path overriding the suites' default source; per suite: bfcl=DIR,gsm8k=FILE")
    p.add_argument("--smoke", action="store_true", help="use each suite's built-in ~20-item smoke subset")
    p.add_argument("--limit", type=int, help="first N samples (after --sample-seed shuffling)")
    p.add_argument("--sample-seed", type=int, help="shuffle samples with this seed before --limit")
    p.add_argument("--shard", metavar="I/N", help="run every N-th sample starting at the I-th (1-based), after --sample-seed/--limit; join shards with `verifier merge`")
    p.add_argument("--epochs", type=int, default=1, help="repeat every sample N times (default 1)")
    p.add_argument("--mode", default="chat", help=f"comma-separated wire modes: {', '.join(MODES)} (default chat); "
                   "completions = the dual path: the chat template rendered client-side, sent to /v1/completions")
    p.add_argument("--chat-template", metavar="FILE", help="jinja chat template for the completions mode (default: the one the server reports in /props)")


def endpoint_config(a: argparse.Namespace, base_url: str | None = None, model: str | None = None) -> EndpointConfig:
    if a.concurrency < 1:
        raise UsageError("--concurrency must be at least 1")
    return EndpointConfig(
        base_url=base_url or a.base_url,
        model=model or a.model,
        api_key=os.environ.get(a.api_key_env) if a.api_key_env else None,
        headers=parse_headers(a.header),
        concurrency=a.concurrency,
        timeout_s=a.timeout,
        max_retries=a.max_retries,
        max_response_bytes=int(getattr(a, "max_response_mb", 64.0) * 2**20),
        request_deadline_s=getattr(a, "request_deadline", None),
        info_deadline_s=getattr(a, "info_deadline", 10.0),
    )


def default_run_dir(prefix: str) -> Path:
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{stamp}-{prefix}"


def data_for(data: str | None, suite: str) -> str | None:
    """`--data PATH` goes to every suite; `--data bfcl=DIR,gsm8k=FILE` names one path per suite."""
    if not data or "=" not in data:
        return data
    table = dict(item.split("=", 1) for item in data.split(",") if "=" in item)
    return table.get(suite)


def load_suite_samples(suites: list[Suite], a: argparse.Namespace) -> list[tuple[Suite, list[Sample]]]:
    out = []
    for s in suites:
        try:
            samples = s.load(data_for(a.data, s.name), a.smoke)
        except FileNotFoundError as e:
            raise UsageError(f"suite {s.name}: data not found: {e.filename or e}") from None
        except ValueError as e:
            raise UsageError(f"suite {s.name}: {e}") from None
        chosen = select(samples, a.limit, a.sample_seed)
        if getattr(a, "shard", None):
            from .merge import take_shard

            try:
                chosen = take_shard(chosen, a.shard)
            except ValueError as e:
                raise UsageError(str(e)) from None
        only = getattr(a, "only_ids", None)
        if only is not None:
            chosen = [x for x in samples if x.id in only.get(s.name, ())]
        out.append((s, chosen))
    return out


def _server_facts(cfg: EndpointConfig, a: argparse.Namespace, modes: list[str]) -> tuple[dict[str, Any], str | None]:
    """Reachability, server info, and the chat template for the dual path (flag > /props)."""
    why = asyncio.run(reachable(cfg.base_url))
    if why:
        raise UsageError(why)

    async def info() -> dict[str, Any]:
        from .endpoint import Endpoint

        ep = Endpoint(cfg)
        try:
            return await ep.server_info()
        finally:
            await ep.aclose()

    facts = asyncio.run(info())
    template = None
    if getattr(a, "chat_template", None):
        try:
            template = Path(a.chat_template).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--chat-template: cannot read {a.chat_template}: {e.strerror}") from None
    elif isinstance(facts.get("props"), dict):
        template = facts["props"].get("chat_template")
    if "completions" in modes and not template:
        raise UsageError("mode 'completions' (the dual path) needs a chat template: the server reports none in /props; pass --chat-template FILE")
    return facts, template


def do_run(a: argparse.Namespace, stop_check: Any = None) -> dict[str, Any]:
    """Collect (or resume) a run, then score it. Returns the summary.

    With `stop_check`, work is sent in `a.looks` sample-aligned batches (seeded order) and
    `stop_check()` is asked after each whether the answer is already decided.
    """
    table = get_suites()
    if a.resume:
        run_dir = Path(a.resume)
        try:
            hdr = journal.check_run_dir(run_dir)
        except journal.NotARunDir as e:
            raise UsageError(str(e)) from None
        samples = journal.read_samples(run_dir)
        suites = []
        for name in hdr["suites"]:
            suite = _suite_named(name)
            if suite.version != hdr["suites"][name]["version"]:
                raise UsageError(f"run was made with {name} version {hdr['suites'][name]['version']}, this harness has {suite.version}")
            suites.append((suite, [s for (sn, _), s in samples.items() if sn == name]))
        cfg = endpoint_config(a, a.base_url or None, a.model or hdr["endpoint"]["model"])
        if not a.base_url:
            raise UsageError("--resume needs --base-url (the journal stores it redacted)")
        done = {k for k, ex in journal.read_exchanges(run_dir).items() if ex.error is None}
        info, template = _server_facts(cfg, a, hdr["modes"])
        hdr["server_info"] = info
        work = runner.plan(suites, cfg.model, hdr["sampling"], hdr.get("extra_body", {}), hdr["epochs"], hdr["modes"], done, template)
    else:
        if getattr(a, "requests", None):
            a.suite, a.data = "replay", a.requests
        if not a.suite:
            raise UsageError("--suite is required")
        suites_ = resolve_suites(a.suite)
        modes = [m.strip() for m in a.mode.split(",")]
        for m in modes:
            if m not in MODES:
                raise UsageError(f"unknown mode {m!r}; known: {', '.join(MODES)}")
        extra = parse_extra_body(a.extra_body)
        cfg = endpoint_config(a)
        run_dir = Path(a.out) if a.out else default_run_dir("-".join(s.name for s in suites_))
        suites = load_suite_samples(suites_, a)
        info, template = _server_facts(cfg, a, modes)
        sampling = sampling_from_args(a)
        try:
            work = runner.plan(suites, cfg.model, sampling, extra, a.epochs, modes, template=template)
        except ValueError as e:  # e.g. a template that does not render: before anything is written
            raise UsageError(str(e)) from None
        ensure_writable_new_dir(run_dir)
        hdr = runner.header(run_dir.name, cfg, suites, sampling, extra, a.epochs, modes, a.api_key_env)
        hdr["server_info"] = info
        if template and "completions" in modes:
            hdr["dual_path_template_sha256"] = hashlib.sha256(template.encode()).hexdigest()
        hdr["selection"] = {"smoke": bool(a.smoke), "limit": a.limit, "sample_seed": a.sample_seed,
                            "ids": getattr(a, "only_ids", None) is not None,
                            "shard": getattr(a, "shard", None)}
        journal.write_samples(run_dir, [(s.name, x) for s, xs in suites for x in xs])

    async def go() -> dict[str, int]:
        from .endpoint import Endpoint

        ep = Endpoint(cfg)
        try:
            journal.write_json(run_dir / journal.HEADER, hdr)
            if getattr(a, "probes", False):
                from .probes import run_probes

                journal.write_json(run_dir / "probes.json", await run_probes(ep, cfg.model, hdr.get("extra_body") or {}))
            if stop_check is None:
                return await runner.execute(run_dir, work, cfg, quiet=a.quiet, endpoint=ep)
            sent = {"sent": 0, "errors": 0}
            for batch in _batches(work, getattr(a, "looks", 5)):
                r = await runner.execute(run_dir, batch, cfg, quiet=a.quiet, endpoint=ep)
                sent = {k: sent[k] + r[k] for k in sent}
                if stop_check():
                    break
            return sent
        finally:
            await ep.aclose()

    stats = asyncio.run(go())
    hdr["finished"] = runner.now()
    journal.write_json(run_dir / journal.HEADER, hdr)
    summary = do_score(run_dir)
    if not a.quiet:
        print(f"run: {run_dir}  sent={stats['sent']} infra_errors={stats['errors']}", file=sys.stderr)
    return summary


def do_score(run_dir: Path) -> dict[str, Any]:
    try:
        verdicts, summary = scoring.score_run(run_dir, get_suites())
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None
    except KeyError as e:
        raise UsageError(f"{run_dir}: journal names unknown suite or sample {e}") from None
    scoring.write_scores(run_dir, verdicts, summary)
    return summary


def print_summary(summary: dict[str, Any]) -> None:
    for name, s in summary["suites"].items():
        ms = "  ".join(f"{m}={v['value']:.3f} [{v['ci'][0]:.3f}, {v['ci'][1]:.3f}] (n={v['n']})" for m, v in s["metrics"].items() if v["value"] is not None)
        print(f"{name} v{s['version']}: {ms or 'no metric values (see outcomes)'}")
        print(f"  outcomes {s['outcomes']}  findings {s['findings'] or '{}'}")


def cmd_run(a: argparse.Namespace) -> int:
    summary = do_run(a)
    print_summary(summary)
    return 0


def cmd_score(a: argparse.Namespace) -> int:
    summary = do_score(Path(a.run_dir))
    print_summary(summary)
    return 0


def cmd_list_suites(a: argparse.Namespace) -> int:
    for name, s in sorted(get_suites().items()):
        print(f"{name:<14} v{s.version:<6} {s.description}")
    return 0


DEMO_GOLDEN = Path(__file__).resolve().parent.parent / "goldens" / "demo-smoke"


def cmd_demo(a: argparse.Namespace) -> int:
    """The whole loop on the embedded default: gate a healthy endpoint, then the same one behind a frontend fault."""
    from .proxy import Proxy
    from .testserver import Script, TestServer, arithmetic

    if not (DEMO_GOLDEN / "golden.json").exists():
        raise UsageError(f"demo golden not found at {DEMO_GOLDEN}; run the demo from a checkout (pip install -e .)")
    root = Path(a.out) if a.out else default_run_dir("demo")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; pass another --out")
    codes = {}
    with TestServer(Script(arithmetic)) as srv:
        with Proxy(srv.url, ["answer_in_reasoning"], seed=0) as broken:
            for name, url in (("healthy", srv.url), ("faulty-frontend", broken.url)):
                print(f"== gate {name} endpoint against {DEMO_GOLDEN.name}", flush=True)
                ns = build_parser().parse_args(["gate", "--golden", str(DEMO_GOLDEN), "--base-url", url, "--model", "demo",
                                                "--out", str(root / name), *(["--quiet"] if a.quiet else [])])
                codes[name] = cmd_gate(ns)
    ok = codes == {"healthy": 0, "faulty-frontend": 10}
    print(f"demo: healthy endpoint exit {codes['healthy']} (expected 0), faulty frontend exit {codes['faulty-frontend']} (expected 10)")
    print(f"runs, comparisons and reports under {root}")
    return 0 if ok else 1


def _load_golden(path: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    from . import golden

    try:
        g, obs = golden.load(Path(path))
    except golden.BadGolden as e:
        raise UsageError(str(e)) from None
    for name, info in g["suites"].items():
        suite = _suite_named(name)
        if suite.name == name and suite.version != info.get("version"):
            raise UsageError(f"golden {path} was made with {name} version {info.get('version')}; this harness has version {suite.version}: re-bless it")
    return g, obs


def _require_margins(g: dict[str, Any], path: str) -> None:
    if not g.get("margins"):
        raise UsageError(f"golden {path} has no margins; run `verifier calibrate {path} ...` first")


def _observations(run_dir: Path) -> list[dict[str, Any]]:
    from . import golden

    try:
        journal.check_run_dir(run_dir)
        if not (run_dir / scoring.VERDICTS).exists():
            do_score(run_dir)
        return golden.observations(run_dir)
    except journal.NotARunDir as e:
        raise UsageError(str(e)) from None


def compare_run(run_dir: Path, golden_path: str, out: Path | None, infra_budget: float) -> dict[str, Any]:
    from . import compare

    g, gobs = _load_golden(golden_path)
    _require_margins(g, golden_path)
    hdr = journal.check_run_dir(run_dir) if (run_dir / journal.HEADER).exists() else None
    if hdr is None:
        raise UsageError(f"{run_dir} is not a run directory (no {journal.HEADER})")
    for name, info in hdr["suites"].items():
        if name in g["suites"] and info.get("version") != g["suites"][name].get("version"):
            raise UsageError(f"run {run_dir} used {name} version {info.get('version')}, golden has {g['suites'][name].get('version')}")
    cobs = _observations(run_dir)
    probes_path = run_dir / "probes.json"
    probes = None
    if probes_path.exists():
        from .probes import verdicts as probe_verdicts

        probes = probe_verdicts(json.loads(probes_path.read_text()), g.get("probes"))
    try:
        doc = compare.compare(g, gobs, cobs, infra_budget=infra_budget, probes=probes)
    except compare.NoOverlap as e:
        raise UsageError(f"{run_dir} vs {golden_path}: {e}") from None
    except KeyError as e:
        raise UsageError(f"golden {golden_path} has no margin for {e.args[0]}; run `verifier calibrate` again") from None
    doc["golden"] = {"name": g.get("name"), "path": str(golden_path), "source_run": g["source"].get("run_id"),
                     "endpoint": g["source"].get("endpoint"), "margins_provenance": _provenance(g)}
    doc["run"] = {"run_dir": str(run_dir), "run_id": hdr.get("run_id"), "endpoint": hdr.get("endpoint")}
    target = out or run_dir / "comparison.json"
    journal.write_json(target, doc)
    return doc


def _provenance(g: dict[str, Any]) -> dict[str, Any]:
    srcs = {}
    for k, v in (g.get("margins") or {}).items():
        if isinstance(v, dict):
            key = json.dumps({x: v[x] for x in sorted(v) if x != "value"}, sort_keys=True)
            srcs[key] = srcs.get(key, 0) + 1
    return {"sources": [dict(json.loads(k), margins=n) for k, n in srcs.items()]}


def print_comparison(doc: dict[str, Any]) -> None:
    print(f"status: {doc['status']} (exit {doc['exit_code']}): {doc['meaning']}")
    for side in ("frontend", "quantization"):
        print(f"  {side}: {doc[side]['verdict']}")
        for e in doc[side]["evidence"]:
            if e["verdict"] not in ("pass",):
                print(f"    [{e['verdict']}] {e['suite']}: {e['summary']}")
    print(f"  infra: {doc['infra']['count']}/{doc['infra']['total']} (budget {doc['infra']['budget']:.0%})")


def cmd_bless(a: argparse.Namespace) -> int:
    from . import golden

    run_dir, to = Path(a.run_dir), Path(a.to)
    if (to / golden.GOLDEN).exists() and not a.force:
        raise UsageError(f"{to} already holds a golden; pass --force to replace it")
    _observations(run_dir)
    margins = None
    if a.epochs_as_reruns:
        margins = _margins_from_epochs(run_dir)
    g = golden.bless(run_dir, to, margins)
    print(f"blessed {run_dir} -> {to} ({sum(x['samples'] for x in g['suites'].values())} samples)" + ("" if margins else "; next: verifier calibrate"))
    return 0


def _margins_from_epochs(run_dir: Path) -> dict[str, Any]:
    from . import compare

    obs = _observations(run_dir)
    epochs = sorted({o["epoch"] for o in obs})
    if len(epochs) < 3:
        raise UsageError(f"{run_dir} has {len(epochs)} epoch(s); calibration from epochs needs at least 3")
    runs = [[{**o, "epoch": 0} for o in obs if o["epoch"] == e] for e in epochs]
    return compare.calibrate_margins(runs, {"method": "epochs", "k": len(epochs), "runs": [run_dir.name], "created": runner.now()})


def cmd_calibrate(a: argparse.Namespace) -> int:
    from . import compare, golden

    g, gobs = _load_golden(a.golden)
    runs = [gobs]
    names = [g["source"].get("run_id")]
    for r in a.runs or []:
        runs.append(_observations(Path(r)))
        names.append(Path(r).name)
    if a.base_url:
        for i in range(a.k):
            rd = Path(a.out_prefix + f"-{i + 1}")
            ns = _gate_namespace(a, g, gobs, rd)
            do_run(ns)
            runs.append(_observations(rd))
            names.append(rd.name)
    if len(runs) < 3:
        raise UsageError(f"calibration needs k >= 3 reference runs in all (have {len(runs)}): pass --runs or --base-url with -k")
    margins = compare.calibrate_margins(runs, {"method": "reruns", "k": len(runs), "runs": names, "created": runner.now()})
    for item in a.margin or []:
        m = golden.MARGIN_ARG.match(item)
        if not m:
            raise UsageError(f"--margin must look like KEY=VALUE:reason, got {item!r}")
        margins[m["key"]] = {"value": float(m["value"]), "source": "manual", "reason": m["reason"]}
    golden.save_margins(Path(a.golden), margins)
    print(f"calibrated {len(margins)} margins from {len(runs)} reference runs into {a.golden}")
    return 0


def cmd_compare(a: argparse.Namespace) -> int:
    doc = compare_run(Path(a.run_dir), a.golden, Path(a.out) if a.out else None, a.infra_budget)
    print_comparison(doc)
    return _exit(doc, a)


def _exit(doc: dict[str, Any], a: argparse.Namespace) -> int:
    if doc["status"] == "inconclusive" and getattr(a, "allow_inconclusive", False):
        return 0
    return int(doc["exit_code"])


def _gate_namespace(a: argparse.Namespace, g: dict[str, Any], gobs: list[dict[str, Any]], out: Path) -> argparse.Namespace:
    """A `run` invocation that reproduces the golden's selection against the candidate endpoint."""
    ids: dict[str, set[str]] = {}
    for o in gobs:
        ids.setdefault(o["suite"], set()).add(o["sample_id"])
    sel = g.get("selection", {})
    return argparse.Namespace(
        resume=None, requests=None, suite=",".join(g["suites"]), base_url=a.base_url, model=a.model,
        api_key_env=a.api_key_env, header=a.header,
        extra_body=a.extra_body or json.dumps(g["source"].get("extra_body") or {}), concurrency=a.concurrency,
        timeout=a.timeout, max_retries=a.max_retries, temperature=a.temperature, top_p=a.top_p,
        max_response_mb=a.max_response_mb, request_deadline=a.request_deadline, info_deadline=a.info_deadline,
        max_tokens=a.max_tokens, seed=a.seed, logprobs=a.logprobs, data=a.data, smoke=sel.get("smoke", False), limit=None,
        base_overrides=(g["source"].get("sampling") or {}).get("overrides", {}),
        sample_seed=None, epochs=g.get("epochs", 1), mode=",".join(g.get("modes", ["chat"])), out=str(out), chat_template=None,
        quiet=a.quiet, only_ids=ids, looks=getattr(a, "looks", 5), probes=getattr(a, "probes", False) or bool(g.get("probes")),
    )


def _batches(work: list[Any], looks: int) -> list[list[Any]]:
    """Split work into `looks` batches that keep each sample's epochs and modes together, in a seeded order."""
    ids = sorted({(w[0].name, w[1].id) for w in work})
    random.Random(0).shuffle(ids)
    size = max(1, -(-len(ids) // max(1, looks)))
    rank = {k: i // size for i, k in enumerate(ids)}
    out: list[list[Any]] = [[] for _ in range(max(rank.values(), default=0) + 1)]
    for w in work:
        out[rank[(w[0].name, w[1].id)]].append(w)
    return out


# Sequential stopping ends a run early only on a decided regression: a large one shows within
# the first batches, while a pass needs every sample (no flips in 20% of them is weak evidence).
DECIDED = {"frontend_regression", "quantization_regression", "both"}


def cmd_gate(a: argparse.Namespace) -> int:
    g, gobs = _load_golden(a.golden)
    _require_margins(g, a.golden)
    out = Path(a.out) if a.out else default_run_dir("gate")
    ns = _gate_namespace(a, g, gobs, out)
    looks: list[dict[str, Any]] = []

    def decided() -> bool:
        do_score(out)
        doc = compare_run(out, a.golden, None, a.infra_budget)
        looks.append({"status": doc["status"], "samples": sum(s["paired"] for s in doc["suites"].values())})
        return doc["status"] in DECIDED

    do_run(ns, stop_check=decided if a.sequential else None)
    doc = compare_run(out, a.golden, None, a.infra_budget)
    if a.sequential:
        total_samples = sum(len(v) for v in ns.only_ids.values())
        used = looks[-1]["samples"] if looks else 0
        doc["sequential"] = {"looks": looks, "used_samples": used, "total_samples": total_samples,
                             "saved_samples": total_samples - used}
        journal.write_json(out / "comparison.json", doc)
        print(f"sequential: decided after {used}/{total_samples} samples ({total_samples - used} not sent)")
    print_comparison(doc)
    write_ci_outputs(out, doc, a)
    return _exit(doc, a)


def write_ci_outputs(run_dir: Path, doc: dict[str, Any], a: argparse.Namespace) -> None:
    """HTML report, JUnit XML and Markdown summary, where the report module offers them."""
    try:
        from . import report
    except ImportError:
        return
    report.write_all(run_dir, doc, html=getattr(a, "report", None), junit=getattr(a, "junit", None), markdown=getattr(a, "markdown", None))


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="verifier", description="Vendor-verifier harness for OpenAI-compatible endpoints.")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("run", help="collect responses from an endpoint into a run directory, then score it")
    add_selection_args(p)
    add_endpoint_args(p, required=False)
    p.add_argument("--out", help="run directory to create (default runs/<timestamp>-<suites>)")
    p.add_argument("--resume", metavar="RUN_DIR", help="re-send only what is missing or ended in an infra error")
    p.add_argument("--requests", metavar="FILE.jsonl", help="replay raw chat-completions request bodies as-is (K2-Vendor-Verifier format); same as --suite replay --data FILE")
    p.add_argument("--quiet", action="store_true", help="no progress bar (for CI)")
    p.add_argument("--probes", action="store_true", help="also run the parameter-contract probes (probes.json)")
    p.set_defaults(fn=cmd_run)

    p = sub.add_parser("score", help="score a run directory offline: verdicts.jsonl + summary.json")
    p.add_argument("run_dir")
    p.set_defaults(fn=cmd_score)

    p = sub.add_parser("list-suites", help="list the available suites")
    p.set_defaults(fn=cmd_list_suites)

    p = sub.add_parser("bless", help="turn a scored reference run into a golden")
    p.add_argument("run_dir")
    p.add_argument("--to", required=True, help="golden directory, e.g. goldens/<name>")
    p.add_argument("--force", action="store_true", help="replace an existing golden")
    p.add_argument("--epochs-as-reruns", action="store_true", help="calibrate margins from the run's epochs (needs >= 3)")
    p.set_defaults(fn=cmd_bless)

    p = sub.add_parser("calibrate", help="store run-to-run spread of reference reruns as the golden's margins")
    p.add_argument("golden")
    p.add_argument("--runs", nargs="*", help="existing reference rerun directories")
    p.add_argument("-k", type=int, default=2, help="with --base-url: how many reruns to make (the golden itself counts as one)")
    p.add_argument("--out-prefix", default=str(Path("runs") / "calibrate"), help="run directory prefix for new reruns")
    p.add_argument("--margin", action="append", metavar="KEY=VALUE:reason", help="manual margin, recorded with its reason")
    p.add_argument("--data")
    p.add_argument("--quiet", action="store_true")
    add_endpoint_args(p, required=False)
    p.set_defaults(fn=cmd_calibrate)

    p = sub.add_parser("compare", help="paired diff of a run against a golden; writes comparison.json; exit code")
    p.add_argument("run_dir")
    p.add_argument("--golden", required=True)
    p.add_argument("--out", help="where to write comparison.json (default RUN_DIR/comparison.json)")
    p.add_argument("--infra-budget", type=float, default=0.02, help="infra error rate above which the run is incomplete (default 0.02)")
    p.add_argument("--allow-inconclusive", action="store_true", help="exit 0 instead of 20 when inconclusive")
    p.set_defaults(fn=cmd_compare)

    p = sub.add_parser("gate", help="run the golden's samples against an endpoint, compare, report; CI exit code")
    p.add_argument("--golden", required=True)
    p.add_argument("--data", help="local dataset path, when the golden's suites need one")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-gate)")
    p.add_argument("--infra-budget", type=float, default=0.02)
    p.add_argument("--allow-inconclusive", action="store_true", help="exit 0 instead of 20 when inconclusive")
    p.add_argument("--report", help="HTML report path (default RUN_DIR/report.html)")
    p.add_argument("--junit", help="JUnit XML path (default RUN_DIR/junit.xml)")
    p.add_argument("--markdown", help="Markdown summary path (default RUN_DIR/summary.md; also appended to $GITHUB_STEP_SUMMARY)")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--probes", action="store_true", help="run the parameter-contract probes (default: when the golden has them)")
    p.add_argument("--sequential", action="store_true", help="send samples in batches and stop once a regression is decided (reports samples saved)")
    p.add_argument("--looks", type=int, default=5, help="with --sequential: number of batches / interim looks (default 5)")
    add_endpoint_args(p)
    p.set_defaults(fn=cmd_gate)

    from suites import lm_eval_task

    from . import engines, merge, proxy, report

    # Commands whose arguments live with their module: (name, module, help).
    for name, module, help_ in (
        ("lm-eval", lm_eval_task, "run an lm-eval generate_until task through the endpoint (or import its samples) into a run directory"),
        ("report", report, "self-contained HTML report of a run, optionally against a golden"),
        ("merge", merge, "merge shard run directories into one run directory, then score it"),
        ("engine", engines, "serve packaged models with llama.cpp (reference, requantized, KV-quantized, wrong-template variants)"),
        ("proxy", proxy, "fault-injection reverse proxy in front of any OpenAI-compatible endpoint"),
    ):
        p = sub.add_parser(name, help=help_)
        module.add_arguments(p)
        p.set_defaults(fn=module.run)

    p = sub.add_parser("demo", help="the whole loop on the embedded default (no network)")
    p.add_argument("--out", help="run directory (default runs/<timestamp>-demo)")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(fn=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    a = ap.parse_args(argv)
    if getattr(a, "fn", None) is cmd_run and not a.resume and (not a.base_url or not a.model):
        ap.error("run needs --base-url and --model (or --resume)")
    try:
        return a.fn(a)
    except UsageError as e:
        print(f"verifier: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("verifier: interrupted; resume with --resume", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the contract is one line and exit 1
        if os.environ.get("VERIFIER_DEBUG"):
            raise
        print(f"verifier: internal error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1


def entry() -> None:
    sys.exit(main())
