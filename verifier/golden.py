"""Goldens: a blessed reference run reduced to small, diffable text, plus calibrated margins.

goldens/<name>/golden.json     header, suite versions, selection, summary, margins + provenance
goldens/<name>/samples.jsonl   one observation per (suite, sample, epoch, mode), sorted
"""

from __future__ import annotations

import json
import re
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
        content = logprobs = None
        if ex is not None and v.outcome in JUDGED:
            try:
                p = parse_exchange(ex)
                content = (p.content or "")[:MAX_CONTENT]
                if p.logprobs:
                    logprobs = [[t.get("token"), t.get("logprob")] for t in p.logprobs[:MAX_LOGPROBS]]
            except MalformedBody:
                pass
        out.append(Observation.from_verdict(v, content, logprobs).to_dict())
    return out


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
    obs = observations(run_dir)
    to.mkdir(parents=True, exist_ok=True)
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
    }
    journal.write_jsonl(to / OBS, (o for o in obs))
    journal.write_json(to / GOLDEN, g)
    return g


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    path = Path(path)
    gp = path / GOLDEN
    if not gp.is_file():
        raise BadGolden(f"{path} is not a golden (no {GOLDEN})")
    try:
        g = json.loads(gp.read_text(encoding="utf-8"))
        obs = list(journal.read_jsonl(path / OBS))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise BadGolden(f"golden {path} is corrupt: {e}") from None
    if not isinstance(g, dict) or g.get("golden_format") != FORMAT or not isinstance(g.get("suites"), dict):
        raise BadGolden(f"golden {path} is corrupt or of an unknown format")
    for o in obs:
        if not isinstance(o, dict) or not {"suite", "sample_id", "epoch", "mode", "outcome"} <= set(o):
            raise BadGolden(f"golden {path} is corrupt: a sample record lacks required fields")
    if not obs:
        raise BadGolden(f"golden {path} has no samples")
    return g, obs


def save_margins(path: Path, margins: dict[str, Any]) -> None:
    g, _ = load(path)
    g["margins"] = margins
    journal.write_json(Path(path) / GOLDEN, g)


MARGIN_ARG = re.compile(r"^(?P<key>[\w:./-]+)=(?P<value>[0-9.]+):(?P<reason>.+)$")
