"""The report's inputs as values, and the per-sample table every view reads.

RunData and GoldenData are what the files layer reads from disk; `inputs` joins them with the
comparison document into one row per (suite, sample, epoch, mode), columns `c_*` (candidate)
and `g_*` (golden). Everything here is pure: no file is read.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ..attribution.document import Comparison
from ..golden.model import Golden, GoldenHeader
from ..types import Exchange, Observation, RunHeader, RunSummary

MAX_CONTENT = 4000          # same cap as goldens: both sides of a diff are cut alike
KEYS = ["suite", "sample_id", "epoch", "mode"]
COLS = ["outcome", "score", "answer", "reason", "findings", "prompt_tokens", "completion_tokens", "finish_reason", "latency_ms", "content"]


@dataclass(frozen=True)
class RunData:
    """A scored run directory as the report reads it."""

    run_dir: Path
    header: RunHeader
    """run.json."""
    summary: RunSummary | None
    """summary.json (None when absent)."""
    rows: list[Observation]
    """One per verdict; content capped at MAX_CONTENT, no logprobs (the report does not show them)."""
    findings: list[dict[str, Any]]
    """Candidate findings with their detail: suite, sample_id, mode, code, detail."""
    exchanges: dict[tuple[str, str, int, str], Exchange] = field(default_factory=dict)
    """The journal, for raw bodies and requests in flip cards."""
    shown: "dict[tuple[str, str, int, str], Shown] | None" = None
    """From observations.jsonl: what flip cards and token diffs show of each parsed record. None: the run has no
    fresh observations.jsonl, and the views parse the journal's exchanges themselves."""


@dataclass(frozen=True)
class Shown:
    """What the report shows of one record beyond its row, as scoring parsed it (execution/observations `shown`)."""

    tool_calls: str | None = None
    """The parsed tool calls as a flip card prints them (indented JSON), None when there are none."""
    logprobs: list[list[Any]] = field(default_factory=list)
    """[[token, logprob], ...] of the first SHOWN_LOGPROBS entries the server returned, in order."""
    skip: frozenset[int] = frozenset()
    """Positions in `logprobs` whose entry was not an object (a token diff leaves them out)."""

    @staticmethod
    def of(row: Observation, shown: dict[str, Any]) -> "Shown":
        """From a row and its `shown` block as execution/observations reads them (the file's format is read there)."""
        return Shown(shown.get("tool_calls"), list(row.logprobs or []) + list(shown.get("lp") or []),
                     frozenset(shown.get("skip") or ()))

    def token_logprobs(self, n: int) -> list[list[Any]]:
        """The first n entries as the token diff reads them (objects only)."""
        return [t for i, t in enumerate(self.logprobs[:n]) if i not in self.skip]


@dataclass(frozen=True)
class Drawn:
    """What a flip card shows of one journal record (views.drawn cuts it): the raw response and the request as
    text, each cut, and the raw response's whole length. The report keeps this, not the record: memory follows
    the cards drawn, never the journal."""

    raw: str
    raw_cut: bool
    raw_len: int
    request: str
    request_cut: bool


@dataclass(frozen=True)
class GoldenData:
    """A loaded golden as the report shows it: its header (as the gate saw it, narrowed) and its observations."""

    header: GoldenHeader
    obs: list[Observation]

    @staticmethod
    def of(golden: Golden) -> "GoldenData":
        return GoldenData(golden.header, list(golden.observations))


@dataclass
class Inputs:
    """Everything the views need: the run, the golden's metadata, the comparison and the joined table."""

    run_dir: Path
    header: RunHeader
    summary: RunSummary | None
    doc: Comparison | None
    golden_header: GoldenHeader | None
    frame: pd.DataFrame                     # one row per (suite, sample, epoch, mode), columns c_* and g_*
    exchanges: dict[tuple[str, str, int, str], Exchange]
    findings: pd.DataFrame                  # candidate findings with detail: suite, sample_id, mode, code, detail
    golden_obs: list[Observation] = field(default_factory=list)   # with logprobs: the token diffs read them
    shown: dict[tuple[str, str, int, str], Shown] | None = None    # RunData.shown
    drawn: dict[tuple[str, str, int, str], Drawn] | None = None    # the flip cards' records, cut (app.report_files.load)


def j(x: Any) -> str | None:
    """Answers are compared and shown as canonical JSON text."""
    return None if x is None else json.dumps(x, sort_keys=True, ensure_ascii=False)


def anchor(sample_id: str) -> str:
    """A stable, HTML-id-safe form of a sample id: [A-Za-z0-9-] kept, anything else as _<hex>_ (reversible)."""
    return re.sub(r"[^A-Za-z0-9-]", lambda m: f"_{ord(m.group(0)):x}_", sample_id)


def _side(obs: list[Observation], prefix: str) -> pd.DataFrame:
    rows = [[getattr(o, k) for k in KEYS] + [j(o.answer) if k == "answer" else list(o.findings) if k == "findings" else getattr(o, k)
                                             for k in COLS] for o in obs]
    # dtype=object: no per-column type inference (pandas' arrow strings cost ~0.4 s at 10k rows and buy nothing here).
    df = pd.DataFrame(rows, columns=KEYS + COLS, dtype=object)
    return df.rename(columns={k: prefix + k for k in COLS})


def _flips(doc: Comparison | None) -> dict[tuple[str, str], str]:
    """Every flipped sample: the suite's own flips (clean samples, the accuracy delta) and those of the per-mode
    counts (any record, a frontend-touched one included), so "N samples flipped" and the per-mode line agree."""
    flips: dict[tuple[str, str], str] = {}
    for suite, s in (doc.suites if doc is not None else {}).items():
        for kind in ("improved", "regressed"):  # regressed wins for a sample that went both ways on two modes
            for per_mode in s.flips_by_mode.values():
                for sid in per_mode.get(kind, []):
                    flips[(suite, sid)] = kind
        for kind in ("improved", "regressed"):
            for sid in s.flips.get(kind, []):
                flips[(suite, sid)] = kind
    return flips


def _flipped_modes(doc: Comparison | None) -> set[tuple[str, str, str]]:
    """(suite, sample, mode) of every record whose own mode flipped (a card shows such a record)."""
    out: set[tuple[str, str, str]] = set()
    for suite, s in (doc.suites if doc is not None else {}).items():
        for mode, per in s.flips_by_mode.items():
            out |= {(suite, sid, mode) for kind in ("regressed", "improved") for sid in per.get(kind, [])}
    return out


def frame(cand: list[Observation], gold: list[Observation] | None, doc: Comparison | None) -> pd.DataFrame:
    c = _side(cand, "c_")
    if gold is not None:
        df = c.merge(_side(gold, "g_"), on=KEYS, how="outer")
    else:
        df = c.assign(**{"g_" + k: None for k in COLS})
    df = df.sort_values(KEYS, kind="stable").reset_index(drop=True)
    df = df.astype(object).where(df.notna(), None)
    for col in ("epoch", "c_prompt_tokens", "g_prompt_tokens", "c_completion_tokens", "g_completion_tokens"):
        df[col] = [None if v is None else int(v) for v in df[col]]  # an outer merge turned them into floats
    flips = _flips(doc)
    ids_per_suite = df.groupby("sample_id")["suite"].nunique()
    shared = set(ids_per_suite[ids_per_suite > 1].index)
    df["anchor"] = [anchor(f"{su}/{sid}" if sid in shared else sid) for su, sid in zip(df["suite"], df["sample_id"])]
    df["flip"] = [flips.get(k, "") for k in zip(df["suite"], df["sample_id"])]
    moded = _flipped_modes(doc)
    df["flip_here"] = [k in moded for k in zip(df["suite"], df["sample_id"], df["mode"])]
    df["new_findings"] = [sorted(set(cf or []) - set(gf or [])) if gf is not None else [] for cf, gf in zip(df["c_findings"], df["g_findings"])]
    df["answer_changed"] = [g is not None and c_ is not None and g != c_ for g, c_ in zip(df["g_answer"], df["c_answer"])]
    df["pt_mismatch"] = [g is not None and c_ is not None and g != c_ for g, c_ in zip(df["g_prompt_tokens"], df["c_prompt_tokens"])]
    return df


def inputs(run: RunData, golden: GoldenData | None, doc: Comparison | None) -> Inputs:
    """The joined view model of (run, golden, comparison): typed values in, nothing read."""
    fdf = pd.DataFrame(run.findings, columns=["suite", "sample_id", "mode", "code", "detail"])
    return Inputs(run.run_dir, run.header, run.summary, doc, golden.header if golden else None,
                  frame(run.rows, golden.obs if golden else None, doc), run.exchanges, fdf, golden.obs if golden else [],
                  run.shown)


def fmt(x: Any, digits: int = 4) -> str:
    """A number or list for humans: the HTML template's `fmt` filter and the Markdown cells."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float):
        if abs(x) >= 10 ** digits:  # 26540.0 ms is "26,540", never 2.654e+04
            return f"{x:,.0f}"
        return f"{x:.{digits}g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(fmt(v, digits) for v in x) + "]"
    return str(x)
