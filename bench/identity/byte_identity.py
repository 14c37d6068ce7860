"""Byte identity across a refactor: the documents every shipped golden gives, hashed, volatile fields normalized.

    python bench/identity/byte_identity.py snapshot OUT.json [--keep DIR] [--golden NAME ...] [--scenario NAME ...]
    python bench/identity/byte_identity.py snapshot OUT.json --replay DIR     # offline: re-score + re-compare kept runs
    python bench/identity/byte_identity.py diff A.json B.json                 # prints the differing files, exit 1 if any
    python bench/identity/byte_identity.py journals --base DIR ROOT...        # raw bytes: every run under ROOT scored by both

`snapshot` starts the project's scripted test server (verifier/testbed, the `arithmetic` responder, as
`verifier demo` does) in this process, and for every golden shipped in verifier/goldens/ and every scenario
(the healthy server, and the same server behind the fault-injection proxy with one fault each) runs
`verifier gate --golden NAME` against it (concurrency 1, no retries: the journal order is the sample order),
then `verifier score RUN_DIR` and `verifier compare RUN_DIR --golden NAME` again on the run it made, and
`verifier report RUN_DIR --golden NAME` (HTML and CSV) with and without observations.jsonl. It hashes
comparison.json, verdicts.jsonl, summary.json and observations.jsonl after each step, the reports, and the
gate's and compare's terminal output, after normalizing what legitimately changes between two runs of the same code: timestamps, run ids,
temporary and installation paths, ports, latencies and durations. The manifest maps
`<golden>/<scenario>/<step>/<file>` to a sha256; `diff` compares two manifests.

`--keep DIR` keeps the run directories and the normalized documents (DIR/<golden>/<scenario>/...), so a
difference can be read with `diff -r`. `--replay DIR` takes the runs kept by an earlier `--keep` instead of a
server (copied, never modified) and only re-scores and re-compares them: this separates "the offline pipeline
changed" from "collection changed". The `verifier` measured is the checkout this file sits in (`--checkout DIR`
measures another one, e.g. an exported base commit); its path is printed and recorded in the manifest.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

CHECKOUT = Path(__file__).resolve().parents[2]

# Faults served through the proxy, one scenario each: reasoning-parser, usage, request-side (prompt tokens),
# response-format, tool-call parser and stream-assembly breaks, and two faults at once (one at a rate: the proxy's
# selection is seeded), so the frontend signals, the diagnosis, the evidence and the reasons are exercised on
# every golden.
SCENARIOS: dict[str, list[str]] = {
    "healthy": [],
    "answer_in_reasoning": ["answer_in_reasoning"],
    "usage_dropped": ["usage_dropped"],
    "drop_system_prompt": ["drop_system_prompt"],
    "finish_reason_wrong": ["finish_reason_wrong"],
    "tool_args_invalid_json": ["tool_args_invalid_json"],
    "tool_markup_in_content": ["tool_markup_in_content"],
    "stream_index_zero": ["stream_index_zero"],
    "drop_tools": ["drop_tools"],
    "reasoning_in_content+usage_dropped:0.5": ["reasoning_in_content", "usage_dropped:0.5"],
}

# Copies of a shipped golden with margins deleted (a golden calibrated before a signal existed): how a missing
# margin is judged is part of the output, so it is measured too.
VARIANTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "demo-smoke~uncalibrated": ("demo-smoke", ("smoke/signal:new_findings", "smoke/accuracy", "smoke/drift")),
}

FILES = ("comparison.json", "verdicts.jsonl", "summary.json", "observations.jsonl")
"""observations.jsonl exists since "parse once" (issue 23): a checkout before it records `<absent>` for it."""
REPORT_FILES = ("report.html", "report.csv")
"""`verifier report` rendered from the re-scored run (the offline step), with observations.jsonl as scoring left it
and again with it removed (`nobs`: the fallback that parses the journal): both must be the same bytes."""

# Keys whose values change between two runs of the same code (time, identity, where, how fast), at any depth.
VOLATILE_KEYS = frozenset({
    "created", "created_at", "started", "started_at", "finished", "finished_at", "date", "time", "timestamp",
    "run_id", "source_run", "responses_digest", "run_dir", "path", "commit", "harness_commit", "git_commit",
    "latency", "latency_s", "latency_ms", "elapsed", "elapsed_s", "duration", "duration_s", "wall_s", "seconds",
    "ttft", "ttft_s", "tpot", "tpot_s", "itl", "itl_s", "throughput", "tokens_per_s", "requests_per_s", "perf",
})
VOLATILE_PARTS = ("latency", "elapsed", "duration", "ttft", "tpot", "_per_s", "wall")


def volatile(key: str) -> bool:
    k = key.lower()
    return k in VOLATILE_KEYS or any(p in k for p in VOLATILE_PARTS)


class Normalizer:
    """Replaces volatile values and machine-specific strings by stable placeholders."""

    def __init__(self, roots: dict[str, str]):
        # longest first, so a root inside another is replaced as the longer one
        self.roots = sorted(roots.items(), key=lambda kv: -len(kv[0]))

    def text(self, s: str) -> str:
        for path, name in self.roots:
            s = s.replace(path, name)
        s = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:<port>", s)
        s = re.sub(r"\b\d{8}T\d{6}(Z|[+-]\d{4})?\b|\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?", "<time>", s)
        s = re.sub(r"\b\d+(\.\d+)? ?(s|ms)\b(?! ?samples?)", "<dur>", s)  # "took 3.2 s", "120 ms"
        return s

    def value(self, v: Any, key: str = "") -> Any:
        if key and volatile(key):
            return "<volatile>"
        if isinstance(v, dict):
            return {k: self.value(x, k) for k, x in v.items()}
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, str):
            return self.text(v)
        return v

    def document(self, path: Path) -> str:
        raw = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            rows = [self.value(json.loads(line)) for line in raw.splitlines() if line.strip()]
            if path.name == "observations.jsonl":
                rows = [self.sealed(r) for r in rows]
            lines = [json.dumps(r, sort_keys=True, ensure_ascii=False) for r in rows]
            return "\n".join(lines) + "\n"
        return json.dumps(self.value(json.loads(raw)), sort_keys=True, ensure_ascii=False, indent=1) + "\n"


    @staticmethod
    def sealed(row: Any) -> Any:
        """observations.jsonl's header holds digests of the raw responses, summary and verdicts files (which hold
        times), and its trailer a seal over all of it: between two runs of the same code they differ by design."""
        if isinstance(row, dict) and "observations" in row:
            return {k: ("<digest>" if isinstance(v, dict) and "sha256" in v else v) for k, v in row.items()}
        if isinstance(row, dict) and "sealed" in row:
            return {**row, "sealed": "<seal>"}
        return row

    def csv(self, text: str) -> str:
        """report.csv with its latency columns blanked (the per-sample latency of this run)."""
        import csv as _csv

        rows = list(_csv.reader(io.StringIO(text)))
        if not rows:
            return text
        cut = [i for i, name in enumerate(rows[0]) if volatile(name)]
        out = io.StringIO()
        w = _csv.writer(out, lineterminator="\n")
        for n, row in enumerate(rows):
            w.writerow(row if n == 0 else ["<volatile>" if i in cut else c for i, c in enumerate(row)])
        return self.text(out.getvalue())

    def html(self, text: str) -> str:
        """report.html with its latency and throughput section cut (the run's timings, drawn), the sample table's
        latency column blanked and commit hashes replaced (the provenance table names the commit that made each run)."""
        text = re.sub(r'<section id="perf">.*?</section>', '<section id="perf"><volatile></section>', text, flags=re.S)
        text = re.sub(r'<script type="application/json" id="sample-data">(.*?)</script>', self._sample_data, text, flags=re.S)
        text = re.sub(r"\b[0-9a-f]{40}\b", "<commit>", text)
        return self.text(text)

    @staticmethod
    def _sample_data(m: "re.Match[str]") -> str:
        table = json.loads(m.group(1))
        cut = [i for i, name in enumerate(table.get("cols") or []) if volatile(name)]
        table["rows"] = [["<volatile>" if i in cut else c for i, c in enumerate(row)] for row in table.get("rows") or []]
        return '<script type="application/json" id="sample-data">' + json.dumps(table, ensure_ascii=False) + "</script>"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def cli(*args: Any) -> tuple[int, str]:
    """The real `verifier` command, in this process (as tests/conftest.py's `cli` fixture); (exit code, stdout+stderr)."""
    from verifier import scrub
    from verifier.cli import main

    scrub.reset()
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:  # argparse errors
            code = int(e.code or 0)
    return code, buf.getvalue()


def golden_names(chosen: list[str] | None, work: Path) -> list[tuple[str, str, str | None]]:
    """(name, --golden argument, model) of every shipped golden and variant, or of the chosen ones."""
    from verifier.golden import store

    out: list[tuple[str, str, str | None]] = []
    shipped = {p.name: p for p in store.packaged()}
    for name, p in shipped.items():
        if not chosen or name in chosen:
            g = json.loads((p / "golden.json").read_text(encoding="utf-8"))
            out.append((name, name, ((g.get("source") or {}).get("endpoint") or {}).get("model")))
    for name, (base, deleted) in VARIANTS.items():
        if chosen and name not in chosen:
            continue
        dest = work / "goldens" / name
        shutil.copytree(shipped[base], dest)
        g = json.loads((dest / "golden.json").read_text(encoding="utf-8"))
        for key in deleted:
            del g["margins"][key]
        (dest / "golden.json").write_text(json.dumps(g, indent=1), encoding="utf-8")
        out.append((name, str(dest), ((g.get("source") or {}).get("endpoint") or {}).get("model")))
    return out


@contextlib.contextmanager
def endpoint(faults: list[str]) -> Iterator[str]:
    from verifier.testbed.proxy import Proxy
    from verifier.testbed.server import Script, TestServer, arithmetic

    with TestServer(Script(arithmetic)) as srv:
        if not faults:
            yield srv.url
            return
        with Proxy(srv.url, faults, seed=0) as broken:
            yield broken.url


class Snapshot:
    def __init__(self, norm: Normalizer, keep: Path | None):
        self.norm = norm
        self.keep = keep
        self.entries: dict[str, str] = {}
        self.exits: dict[str, int] = {}

    def record(self, key: str, run_dir: Path, output: str, code: int) -> None:
        self.exits[key] = code
        docs = {f: run_dir / f for f in FILES}
        for name, path in docs.items():
            text = self.norm.document(path) if path.exists() else "<absent>\n"
            self._put(f"{key}/{name}", text)
        self._put(f"{key}/terminal.txt", self.norm.text(output))

    def _put(self, key: str, text: str) -> None:
        self.entries[key] = sha(text)
        if self.keep:
            dest = self.keep / "normalized" / key
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")

    def offline(self, key: str, run_dir: Path, golden: str) -> None:
        """Re-score the run, then compare it again with the golden (the offline half of the pipeline)."""
        code, out = cli("score", run_dir)
        if code != 0:
            self.exits[f"{key}/score"] = code
        # --force: the gate wrote comparison.json and compare keeps a gate's document unless told to replace it
        code2, out2 = cli("compare", run_dir, "--golden", golden, "--force")
        self.record(f"{key}/rescore", run_dir, out + out2, code2)
        self.report(f"{key}/rescore/report", run_dir, golden)
        obs = run_dir / "observations.jsonl"
        if obs.exists():
            obs.unlink()
        self.report(f"{key}/rescore/report-nobs", run_dir, golden)

    def report(self, key: str, run_dir: Path, golden: str) -> None:
        out = run_dir.parent / f"{run_dir.name}.report"
        out.mkdir(exist_ok=True)
        code, text = cli("report", run_dir, "--golden", golden, "-o", out / "report.html", "--csv", out / "report.csv")
        self.exits[key] = code
        for name in REPORT_FILES:
            path = out / name
            if not path.exists():
                self._put(f"{key}/{name}", "<absent>\n")
                continue
            text = path.read_text(encoding="utf-8")
            self._put(f"{key}/{name}", self.norm.csv(text) if name.endswith(".csv") else self.norm.html(text))


def snapshot(a: argparse.Namespace) -> int:
    import verifier

    work = Path(tempfile.mkdtemp(prefix="byte_identity-"))
    pkg = Path(verifier.__file__).resolve().parent
    keep = Path(a.keep).resolve() if a.keep else None
    roots = {str(work): "<work>", str(pkg): "<pkg>", str(pkg.parent): "<checkout>"}
    if a.replay:
        roots[str(Path(a.replay).resolve())] = "<keep>"
    if keep:
        roots[str(keep)] = "<keep>"
    snap = Snapshot(Normalizer(roots), keep)
    print(f"verifier under test: {pkg}", file=sys.stderr)
    if a.checkout is None and pkg.parent != CHECKOUT:
        raise SystemExit(f"imported {pkg}, not this checkout's verifier ({CHECKOUT})")
    try:
        for name, golden, model in golden_names(a.golden, work):
            for scenario, faults in SCENARIOS.items():
                if a.scenario and scenario not in a.scenario:
                    continue
                key = f"{name}/{scenario}"
                run = work / name / scenario
                if a.replay:
                    src = Path(a.replay) / "runs" / name / scenario
                    if not src.is_dir():
                        print(f"{key}: no kept run in {src}, skipped", file=sys.stderr)
                        continue
                    shutil.copytree(src, run)
                else:
                    with endpoint(faults) as url:
                        code, out = cli("gate", "--golden", golden, "--base-url", url, "--model", model or "test",
                                        "--no-model-check", "--concurrency", "1", "--max-retries", "0", "--quiet",
                                        "--out", run)
                    snap.record(f"{key}/gate", run, out, code)
                    if keep:
                        dest = keep / "runs" / name / scenario
                        shutil.rmtree(dest, ignore_errors=True)
                        shutil.copytree(run, dest)
                snap.offline(key, run, golden)
                print(f"{key}: gate exit {snap.exits.get(key + '/gate', '-')}, compare exit {snap.exits[key + '/rescore']}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    manifest = {"verifier": str(pkg), "mode": "replay" if a.replay else "live", "scenarios": SCENARIOS,
                "exit_codes": dict(sorted(snap.exits.items())), "files": dict(sorted(snap.entries.items()))}
    Path(a.out).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(snap.entries)} files hashed -> {a.out}", file=sys.stderr)
    return 0


def diff(a: argparse.Namespace) -> int:
    A = json.loads(Path(a.a).read_text(encoding="utf-8"))
    B = json.loads(Path(a.b).read_text(encoding="utf-8"))
    differ = []
    # a live manifest against a replayed one: only the offline steps (rescore) are in both
    common_only = A.get("mode") != B.get("mode")
    if common_only:
        print(f"modes differ ({A.get('mode')} vs {B.get('mode')}): comparing the entries both have")
    for section in ("exit_codes", "files"):
        x, y = A.get(section) or {}, B.get(section) or {}
        keys = set(x) & set(y) if common_only else set(x) | set(y)
        for k in sorted(keys):
            if k not in x or k not in y:
                differ.append(f"{section}: {k}: only in {'B' if k not in x else 'A'}")
            elif x[k] != y[k]:
                differ.append(f"{section}: {k}: {x[k]} != {y[k]}")
    for line in differ:
        print(line)
    n = len(set(A.get("files") or {}) & set(B.get("files") or {})) if common_only else len(A.get("files") or {})
    print(f"{len(differ)} difference(s) over {n} files" if differ else f"identical: {n} files, {len(A.get('exit_codes') or {})} exit codes")
    return 1 if differ else 0


SCORE_ALL = """
import json, shutil, sys
from pathlib import Path
from verifier.app.collect import score
from verifier import scrub
out = {}
for d in json.loads(sys.argv[1]):
    scrub.reset()
    try:
        score(Path(d))
        out[d] = "ok"
    except BaseException as e:  # noqa: BLE001 - what went wrong is part of what is compared
        out[d] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
"""


def run_dirs(roots: list[str]) -> list[Path]:
    """Every directory under the roots that holds a journal (run.json, samples.jsonl and responses.jsonl)."""
    found = set()
    for root in roots:
        for p in Path(root).rglob("responses.jsonl"):
            d = p.parent
            if (d / "run.json").is_file() and (d / "samples.jsonl").is_file() and not p.is_symlink():
                found.add(d.resolve())
    return sorted(found)


def journals(a: argparse.Namespace) -> int:
    """Score copies of every journal under the roots with the base checkout and with this one (each in one process
    of its own, `verifier.app.collect.score` per directory) and compare verdicts.jsonl, observations.jsonl and
    summary.json byte for byte, not normalized (and what each run said when scoring failed). Also counts how many
    match the files the run wrote itself (a live-scored run: the bytes `score` writes), for information: a run made
    with a key scores with its token-like text masked when its key is not in the environment (scrub.register_run)."""
    import subprocess

    dirs = run_dirs(a.roots)
    work = Path(tempfile.mkdtemp(prefix="byte_identity_journals-"))
    scored: dict[str, dict[str, str]] = {}
    copies: dict[str, list[Path]] = {"base": [], "this": []}
    try:
        for side in copies:
            for i, d in enumerate(dirs):
                dest = work / side / f"{i:04d}"
                shutil.copytree(d, dest, symlinks=True, ignore=shutil.ignore_patterns(*SCORED_FILES, ".lock"))
                copies[side].append(dest)
        for side, root in (("base", Path(a.base).resolve()), ("this", CHECKOUT)):
            r = subprocess.run([sys.executable, "-c", SCORE_ALL, json.dumps([str(c) for c in copies[side]])],
                               capture_output=True, text=True, cwd=root,
                               env={**__import__("os").environ, "PYTHONPATH": str(root)})
            if r.returncode != 0:
                raise SystemExit(f"scoring with {root} failed: {r.stderr[-2000:]}")
            # an error names the copy scored: the same name on both sides
            scored[side] = {Path(k).name: v.replace(k, "<run>") for k, v in json.loads(r.stdout.strip().splitlines()[-1]).items()}
        differ, same_files, live_same, live_checked = [], 0, 0, 0
        for i, d in enumerate(dirs):
            name = f"{i:04d}"
            base, this = copies["base"][i], copies["this"][i]
            if scored["base"][name] != scored["this"][name]:
                differ.append(f"{d}: scoring said {scored['base'][name]!r} (base) vs {scored['this'][name]!r}")
            for f in SCORED_FILES:
                x, y = base / f, this / f
                bx = x.read_bytes() if x.is_file() else None
                by = y.read_bytes() if y.is_file() else None
                if bx != by:
                    differ.append(f"{d}: {f} differs (base {len(bx or b'')} bytes, this {len(by or b'')} bytes)")
                else:
                    same_files += by is not None
                live = d / f
                if live.is_file() and by is not None and (d / "summary.json").is_file():
                    live_checked += 1
                    live_same += live.read_bytes() == by
        for line in differ:
            print(line)
        print(f"{len(dirs)} journals, scored by {a.base} and by {CHECKOUT}: {same_files} files byte-identical, "
              f"{len(differ)} difference(s); {live_same}/{live_checked} files as the run itself wrote them")
        return 1 if differ else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


SCORED_FILES = ("verdicts.jsonl", "observations.jsonl", "summary.json")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("snapshot")
    s.add_argument("out")
    s.add_argument("--keep", help="keep the runs and the normalized documents here")
    s.add_argument("--replay", help="re-score and re-compare the runs kept by an earlier --keep (no server)")
    s.add_argument("--golden", action="append", help="only this shipped golden or variant (repeatable)")
    s.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="only this scenario (repeatable)")
    s.add_argument("--checkout", help=f"the checkout whose verifier is measured (default {CHECKOUT})")
    s.set_defaults(fn=snapshot)
    d = sub.add_parser("diff")
    d.add_argument("a")
    d.add_argument("b")
    d.set_defaults(fn=diff)
    j = sub.add_parser("journals", help="score every run directory under ROOT with --base and with this checkout; raw bytes")
    j.add_argument("--base", required=True, help="the base checkout, e.g. `git archive main | tar -x -C DIR`")
    j.add_argument("roots", nargs="+")
    j.set_defaults(fn=journals)
    a = ap.parse_args(argv)
    if a.cmd == "snapshot":
        # the checkout under test first on the path: `python bench/identity/byte_identity.py` would otherwise put bench/ there
        # and import whatever verifier is installed
        sys.path.insert(0, str(Path(a.checkout).resolve() if a.checkout else CHECKOUT))
    return int(a.fn(a))


if __name__ == "__main__":
    sys.exit(main())
