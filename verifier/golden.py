"""Goldens: a blessed reference run reduced to small, diffable text, plus calibrated margins.

goldens/<name>/golden.json     header, suite versions, selection, summary, margins + provenance
goldens/<name>/samples.jsonl   one observation per (suite, sample, epoch, mode), sorted
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

from . import journal, scoring
from .parse import MalformedBody, parse_exchange
from .types import JUDGED, Observation

FORMAT = 1
GOLDEN = "golden.json"
OBS = "samples.jsonl"
MAX_CONTENT = 4000
MAX_LOGPROBS = 512
MAX_TOP = 5
"""Alternatives kept per token (top_logprobs), on greedy records: enough to see the reference's token at a parting."""


class BadGolden(ValueError):
    """A golden that cannot be used: corrupt, another suite version, no margins..."""


def observations(run_dir: Path) -> list[dict[str, Any]]:
    """Everything compare needs from a run, per record: verdict facts plus text and logprobs from the journal."""
    verdicts = scoring.read_verdicts(run_dir)
    if not verdicts:
        raise journal.NotARunDir(f"{run_dir} has not been scored (no {scoring.VERDICTS}); run `verifier score {run_dir}`")
    exchanges = journal.read_exchanges(run_dir)
    out = []
    for v in verdicts:
        ex = exchanges.get((v.suite, v.sample_id, v.epoch, v.mode))
        content = logprobs = top = None
        if ex is not None and v.outcome in JUDGED:
            try:
                p = parse_exchange(ex)
                content = (p.content or "")[:MAX_CONTENT]
                if p.logprobs:
                    entries = [t if isinstance(t, dict) else {} for t in p.logprobs[:MAX_LOGPROBS]]
                    logprobs = [[t.get("token"), t.get("logprob")] for t in entries]
                    if ex.request.get("temperature") == 0:
                        top = _alternatives(entries)
            except MalformedBody:
                pass
        out.append(Observation.from_verdict(v, content, logprobs, top).to_dict())
    return out


def _alternatives(entries: list[dict[str, Any]]) -> list[list[list[Any]]] | None:
    """Each token's returned top_logprobs as [[token, logprob], ...]; None when the server returned none."""
    top = [[[a.get("token"), a.get("logprob")] for a in (t.get("top_logprobs") or [])[:MAX_TOP] if isinstance(a, dict)]
           if isinstance(t.get("top_logprobs"), list) else [] for t in entries]
    return top if any(top) else None


def portable(obj: Any) -> Any:
    """Goldens are committed: absolute file paths a server reports (e.g. llama.cpp's model_path) keep only their file name."""
    if isinstance(obj, dict):
        return {k: portable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable(v) for v in obj]
    if isinstance(obj, str) and re.fullmatch(r"(/[^/\s]+){2,}/?|[A-Za-z]:\\[^\s]+", obj):
        return Path(obj).name or obj
    return obj


def bless(run_dir: Path, to: Path, margins: dict[str, Any] | None = None) -> dict[str, Any]:
    hdr = journal.check_run_dir(run_dir)
    summary_path = Path(run_dir) / scoring.SUMMARY
    if not summary_path.exists():
        raise journal.NotARunDir(f"{run_dir} has not been scored; run `verifier score {run_dir}`")
    # A golden keeps chosen tokens only: the alternatives matter on the candidate's side of a parting.
    obs = [{k: v for k, v in o.items() if k != "top_logprobs"} for o in observations(run_dir)]
    info = portable(hdr.get("server_info") or {})
    g = {
        "golden_format": FORMAT,
        "name": to.name,
        "source": {
            "run_id": hdr.get("run_id"), "harness": hdr.get("harness"), "endpoint": hdr.get("endpoint"),
            "server_info": info, "sampling": hdr.get("sampling"), "extra_body": hdr.get("extra_body"),
            "started": hdr.get("started"), "finished": hdr.get("finished"),
        },
        "suites": hdr["suites"],
        "selection": hdr.get("selection", {}),
        "epochs": hdr.get("epochs", 1),
        "modes": hdr.get("modes", ["chat"]),
        "summary": json.loads(summary_path.read_text(encoding="utf-8")),
        "margins": margins,
        "probes": json.loads((Path(run_dir) / "probes.json").read_text()) if (Path(run_dir) / "probes.json").exists() else None,
        "context_probe": json.loads((Path(run_dir) / "context.json").read_text()) if (Path(run_dir) / "context.json").exists() else None,
    }
    _swap_in(to, lambda tmp: (journal.write_jsonl(tmp / OBS, obs), journal.write_json(tmp / GOLDEN, g)))
    return g


def _swap_in(to: Path, fill: Any) -> None:
    """Write a golden into a fresh directory next to `to`, then rename it into place.

    A kill at any point leaves the old golden, no golden, or the new one: never a golden.json of one
    run beside the samples.jsonl of another. Other files in an old golden directory are carried over.
    """
    to = Path(to)
    to.parent.mkdir(parents=True, exist_ok=True)
    tmp = to.with_name(f".{to.name}.new-{os.getpid()}")
    old = to.with_name(f".{to.name}.old-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        fill(tmp)
        if to.exists():
            for f in to.iterdir():
                if f.name not in (GOLDEN, OBS) and f.is_file() and not f.name.endswith(".tmp"):
                    shutil.copy2(f, tmp / f.name)
            os.rename(to, old)
        os.rename(tmp, to)
    except BaseException:
        if old.exists() and not to.exists():
            os.rename(old, to)  # the old golden back in place
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A golden, validated against its schema (golden_schema): anything malformed is a BadGolden naming the field."""
    from .golden_schema import problem

    path = Path(path)
    gp = path / GOLDEN
    if not gp.is_file():
        raise BadGolden(f"{path} is not a golden (no {GOLDEN})")
    try:
        g = json.loads(gp.read_text(encoding="utf-8"))
        obs = list(journal.read_jsonl(path / OBS))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, journal.NotARunDir) as e:
        raise BadGolden(f"golden {path} is corrupt: {getattr(e, 'msg', None) or e}") from None
    if not isinstance(g, dict) or g.get("golden_format") != FORMAT:
        raise BadGolden(f"golden {path} is corrupt or of an unknown format (golden_format must be {FORMAT})")
    why = problem(g, "golden")
    if why:
        raise BadGolden(f"golden {path}: {GOLDEN} {why}")
    seen: set[tuple[Any, ...]] = set()
    for n, o in enumerate(obs, 1):
        why = problem(o, "observation")
        if why is None and o["suite"] not in g["suites"]:
            why = f"$.suite: {o['suite']!r} is not one of the golden's suites"
        if why is None and o["mode"] not in g.get("modes", ["chat"]):
            why = f"$.mode: {o['mode']!r} is not one of the golden's modes"
        key = (o.get("suite"), o.get("sample_id"), o.get("epoch"), o.get("mode"))
        if why is None and key in seen:
            why = "duplicate record (suite, sample_id, epoch, mode)"
        if why:
            raise BadGolden(f"golden {path}: {OBS} line {n}: {why}")
        seen.add(key)
    if not obs:
        raise BadGolden(f"golden {path} has no samples")
    return g, obs


def save_margins(path: Path, margins: dict[str, Any]) -> None:
    g, _ = load(path)
    g["margins"] = margins
    journal.write_json(Path(path) / GOLDEN, g)


MARGIN_ARG = re.compile(r"^(?P<key>[\w:./-]+)=(?P<value>[0-9.]+):(?P<reason>.+)$")
