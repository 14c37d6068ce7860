"""The report's pictures as geometry: pure functions of the joined Inputs, drawn as inline SVG by the template.

- drift_plots: per suite, each measured sample's mean |Δ logprob| on the shared prefix against the token where
  its greedy output parts from the golden's, with the calibrated noise floor as a line (comparison.json
  `suites.<s>.drift.per_sample`, bounded there);
- token_scatter: per suite, golden vs candidate `prompt_tokens` of every record; the diagonal is "unchanged";
- token_diff: one sample's golden and candidate tokens side by side from their logprobs, the first differing
  token marked, each differing token with its logprob, shared tokens shaded by |Δ logprob|.

Nothing here reads a file: the journal's exchanges are already in the Inputs (parsed only for the few samples
that get a token diff).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from verifier.attribution.numerics import parted_median  # the one definition compare's summaries use too
from verifier.report import colours
from ..jsonsafe import is_finite_number
from verifier.surfaces.registry import REFERENCE_MODE
from .data import Inputs, anchor, fmt

W, H = 660, 280
LEFT, RIGHT, TOP, BOTTOM = 64, 18, 28, 46
MAX_SCATTER_POINTS = 2000   # distinct (golden, candidate) pairs drawn per suite
TOKEN_CONTEXT = 12          # shared tokens shown before the first difference, and tokens shown after it
MAX_TOKEN_DIFFS = 12        # token diffs in the drift section (flip cards carry their own)


def nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering [lo, hi] (1, 2, 5 x 10^k steps)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / max(n - 1, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    start = math.floor(lo / step + 1e-9) * step
    ticks: list[float] = []
    t = start
    while not ticks or ticks[-1] < hi - step * 1e-9:  # the last tick is at or beyond hi: every point is inside
        ticks.append(round(t, 10))
        t += step
    return ticks


def _label(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100 or float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"


class _Axes:
    """A linear x/y mapping into the plot box, with ticks. `head`: extra height above the box (title lines, legend)."""

    def __init__(self, x0: float, x1: float, y0: float, y1: float, head: float = 0) -> None:
        self.xt, self.yt = nice_ticks(x0, x1), nice_ticks(y0, y1)
        self.x0, self.x1 = self.xt[0], self.xt[-1]
        self.y0, self.y1 = self.yt[0], self.yt[-1]
        self.h, self.top = H + head, TOP + head

    def x(self, v: float) -> float:
        return round(LEFT + (v - self.x0) / ((self.x1 - self.x0) or 1) * (W - LEFT - RIGHT), 1)

    def y(self, v: float) -> float:
        return round(self.h - BOTTOM - (v - self.y0) / ((self.y1 - self.y0) or 1) * (self.h - self.top - BOTTOM), 1)

    def frame(self) -> dict[str, Any]:
        return {"w": W, "h": self.h, "left": LEFT, "right": W - RIGHT, "top": self.top, "bottom": self.h - BOTTOM,
                "xticks": [{"x": self.x(t), "label": _label(t)} for t in self.xt],
                "yticks": [{"y": self.y(t), "label": _label(t)} for t in self.yt]}


def _anchors(inp: Inputs) -> dict[tuple[str, str], str]:
    return dict(zip(zip(inp.frame["suite"], inp.frame["sample_id"]), inp.frame["anchor"]))


def drift_plots(inp: Inputs, diff_targets: set[tuple[str, str]] | None = None) -> list[dict[str, Any]]:
    """Per suite with per-sample drift: points (first divergence, mean |Δ logprob|), the floor and the suite mean."""
    out = []
    anchors = _anchors(inp)
    for suite, s in sorted((inp.doc.suites if inp.doc is not None else {}).items()):
        d = s.drift
        rows = d.per_sample
        if not rows:
            continue
        floor = d.margin
        ys = [r["mean_abs_delta"] for r in rows if r.get("mean_abs_delta") is not None]
        top = max(ys + [(floor or 0) * 1.3, d.mean_abs_delta or 0, 1e-3]) * 1.08  # headroom over the top dot
        right = max([r["first_divergence"] for r in rows] + [r.get("length") or 0 for r in rows] + [1])
        ax = _Axes(0, right, 0, top, head=DRIFT_HEAD)
        pts = []
        for r in rows:
            mean = r.get("mean_abs_delta")
            above = mean is not None and floor is not None and mean > floor
            colour = colours.GREY if mean is None else colours.RED if above else colours.GREEN
            a = anchors.get((suite, r["id"]), anchor(r["id"]))
            where = (f"parts from the golden at token {r['first_divergence']}" if r.get("parted")
                     else f"same {r.get('length')} tokens as the golden")
            lp = "no shared prefix" if mean is None else f"mean |Δ logprob| {human(mean)} over {r['tokens']} shared tokens"
            pts.append({"id": r["id"], "n": 1, "label": None, "r": 4.5,
                        "cx": ax.x(r["first_divergence"]), "cy": ax.y(mean or 0.0), "colour": colour, "parted": bool(r.get("parted")),
                        "href": ("#t-" if (suite, r["id"]) in (diff_targets or set()) else "#s-") + a,
                        "title": f"{r['id']}: {lp}; {where}", "above": above})
        fired = sum(p["above"] for p in pts)
        pts = _spread(pts)
        shown = f" ({len(rows)} of {d.samples} shown)" if d.samples and d.samples > len(rows) else ""
        out.append({"suite": suite, "frame": ax.frame(), "points": pts, "state": d.state, "n": d.samples,
                    "shown": len(rows), "above": fired, "legend": drift_legend(pts),
                    "title": title_line(f"{suite}: {fired} of {len(rows)} samples above the floor{shown}"),
                    "subtitle": title_line(parting(d)),
                    "floor": None if floor is None else {"y": ax.y(floor), "label": f"noise floor {human(floor)}"},
                    "mean": None if not d.mean_abs_delta else {"y": ax.y(d.mean_abs_delta),
                                                               "label": f"suite mean {human(d.mean_abs_delta)}"},
                    "parting": parting(d)})
    return out


DRIFT_HEAD = 32.0
"""The drift plot's extra height above the box: its title takes two lines (the count, then where outputs parted; one
line was clipped at the plot's width) and the legend a third."""
LEGEND_CHAR_PX = 6.2
"""The width of one character of the legend's 11 px text, to place the next entry."""
TITLE_CHARS = 96
"""What one 11 px title line holds across the plot's width (about 6.5 px a character): a longer one is cut with "…"."""


def drift_legend(pts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The legend of the dots drawn, each entry with its x position in the plot: every colour a dot has, the ring (a
    sample that never parts) and the counted dot (×N) when one is drawn. A grey dot is a sample with no shared prefix,
    whose drift cannot be measured."""
    kinds = [(colours.RED, True, "above the floor"), (colours.GREEN, True, "within it"),
             (colours.GREY, True, "no shared prefix")]
    present = {p["colour"] for p in pts}
    entries: list[tuple[str | None, bool, str]] = [k for k in kinds if k[0] in present]
    if any(not p["parted"] for p in pts):
        entries.append(("#555", False, "never parts"))
    if any(p["n"] > 1 for p in pts):
        entries.append((None, False, "×N: N samples at one spot"))
    out = []
    x = 8.0
    for colour, filled, text in entries:
        out.append({"colour": colour, "filled": filled, "text": text, "x": x})
        x += (14 if colour else 0) + LEGEND_CHAR_PX * len(text) + 12
    return out


def title_line(text: str) -> str:
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1] + "…"


def parting(d: Any) -> str:
    """Where greedy outputs parted from the golden's, in words, from the per-sample rows: the median over the samples
    that parted (a sample that never parted has no divergence token); "" when the document has no rows to tell."""
    rows = d.per_sample
    if rows is None:  # a document from before per-sample rows: its own median, as it was written
        return "" if d.first_divergence_median is None else f"median first divergence at token {d.first_divergence_median}"
    if not rows:
        return ""
    parted = parted_median(rows)
    if parted is None:
        return f"no greedy output parted from the golden's ({len(rows)} samples)"
    return f"greedy outputs parted on {parted[0]} of {len(rows)} samples, median first divergence at token {parted[1]:g}"


SPREAD_MAX = 4              # dots at one spot drawn side by side; more become one dot with a count


def _spread(pts: list[dict[str, Any]], step: float = 7.0) -> list[dict[str, Any]]:
    """Dots at the same spot (same divergence token, same drift): a few side by side, a crowd as one counted dot."""
    at: dict[tuple[float, float, bool], list[dict[str, Any]]] = {}
    for p in pts:
        at.setdefault((p["cx"], p["cy"], p["parted"]), []).append(p)
    out = []
    for group in at.values():
        if len(group) > SPREAD_MAX:
            head = group[0]
            ids = [p["id"] for p in group]
            shown = ", ".join(ids[:8]) + (f" (+{len(ids) - 8} more)" if len(ids) > 8 else "")
            out.append({**head, "n": len(group), "label": f"×{len(group)}", "r": 7.0,
                        "title": f"{len(group)} samples: {head['title'].split(': ', 1)[1]}: {shown}"})
            continue
        for k, p in enumerate(group):
            out.append({**p, "cx": round(p["cx"] + (k - (len(group) - 1) / 2) * step, 1)})
    return out


@dataclass
class _TokenPair:
    """The records of one suite with one (golden, candidate) prompt-token pair: a point of token_scatter."""

    anchor: str
    """The first record's anchor (the point links to it)."""
    n: int = 0
    ids: list[str] = field(default_factory=list)
    """At most 5 sample ids, for the point's title."""
    modes: set[str] = field(default_factory=set)

    def add(self, sample_id: str, mode: str) -> None:
        self.n += 1
        self.modes.add(mode)
        if len(self.ids) < 5 and sample_id not in self.ids:
            self.ids.append(sample_id)


def token_scatter(inp: Inputs) -> list[dict[str, Any]]:
    """Per suite: golden vs candidate prompt_tokens of each record, aggregated by (golden, candidate) pair."""
    if inp.golden_header is None:
        return []
    out = []
    df = inp.frame
    for suite, g in df.groupby("suite", sort=True):
        both = g[g["g_prompt_tokens"].notna() & g["c_prompt_tokens"].notna()]
        if both.empty:
            continue
        pairs: dict[tuple[int, int], _TokenPair] = {}
        for gt, ct, sid, mode, a in zip(both["g_prompt_tokens"], both["c_prompt_tokens"], both["sample_id"], both["mode"], both["anchor"]):
            pairs.setdefault((int(gt), int(ct)), _TokenPair(anchor=a)).add(sid, mode)
        # Off-diagonal pairs first: when a suite has more distinct pairs than the cap, the moved ones are kept.
        keys = sorted(pairs, key=lambda k: (k[0] == k[1], -pairs[k].n, k))[:MAX_SCATTER_POINTS]
        lo = min(min(k) for k in keys)
        hi = max(max(k) for k in keys)
        pad = max(1.0, (hi - lo) * 0.05)
        ax = _Axes(max(0.0, lo - pad), hi + pad, max(0.0, lo - pad), hi + pad)
        peak = max(pairs[k].n for k in keys)
        pts = []
        for k in keys:
            p = pairs[k]
            moved = k[0] != k[1]
            more = f" (+{p.n - len(p.ids)} more)" if p.n > len(p.ids) else ""
            pts.append({"cx": ax.x(k[0]), "cy": ax.y(k[1]), "r": round(3 + 5 * math.sqrt(p.n / peak), 1), "moved": moved,
                        "label": f"×{p.n}" if p.n > 1 and len(keys) <= 30 else None,
                        "colour": colours.RED if moved else colours.GREEN, "href": "#s-" + p.anchor if moved else None,
                        "title": f"golden {k[0]} → candidate {k[1]} ({k[1] - k[0]:+d}) on {p.n} record(s) "
                                 f"[{', '.join(sorted(p.modes))}]: {', '.join(p.ids)}{more}"})
        pts.sort(key=lambda p: bool(p["moved"]))  # moved points drawn last, on top
        moved_records = sum(pairs[k].n for k in pairs if k[0] != k[1])
        out.append({"suite": suite, "frame": ax.frame(), "points": pts, "records": int(len(both)), "moved": moved_records,
                    "diag": {"x1": ax.x(ax.x0), "y1": ax.y(ax.y0), "x2": ax.x(ax.x1), "y2": ax.y(ax.y1)},
                    "dropped": max(0, len(pairs) - len(keys))})
    return out


def _visible(tok: Any) -> str:
    """Whitespace made visible; a token is short, but a hostile one is cut."""
    t = "" if tok is None else str(tok)
    t = t.replace(" ", "␣").replace("\n", "↵").replace("\t", "⇥").replace("\r", "␍")
    return t if len(t) <= 24 else t[:23] + "…"


def _lp(x: Any) -> float | None:
    return float(x) if is_finite_number(x) else None


def token_diff(gl: list[list[Any]] | None, cl: list[list[Any]] | None, floor: float | None = None) -> dict[str, Any] | None:
    """Golden and candidate tokens side by side: shared prefix (shaded by |Δ logprob| against the floor), the first
    differing token marked, then a few tokens of each side with their logprobs. None without tokens on both sides."""
    if not gl or not cl:
        return None
    k = 0
    while k < min(len(gl), len(cl)) and gl[k][0] == cl[k][0]:
        k += 1
    parted = k < max(len(gl), len(cl))
    start = max(0, k - TOKEN_CONTEXT)
    shared = []
    for i in range(start, k):
        g, c = _lp(gl[i][1]), _lp(cl[i][1])
        delta = None if g is None or c is None else abs(g - c)
        hot = delta is not None and floor is not None and delta > floor
        shared.append({"text": _visible(gl[i][0]), "delta": delta, "hot": hot,
                       "title": f"token {i}: golden {_fmt_lp(g)}, candidate {_fmt_lp(c)}" + ("" if delta is None else f", |Δ| {delta:.3g}")})

    def tail(seq: list[list[Any]]) -> list[dict[str, Any]]:
        return [{"text": _visible(t), "lp": _fmt_lp(_lp(lp)), "first": i == k, "title": f"token {i}: logprob {_fmt_lp(_lp(lp))}"}
                for i, (t, lp) in enumerate(seq[k:k + TOKEN_CONTEXT], start=k)]

    return {"at": k, "parted": parted, "skipped": start, "shared": shared, "golden": tail(gl), "candidate": tail(cl),
            "g_len": len(gl), "c_len": len(cl), "g_more": max(0, len(gl) - k - TOKEN_CONTEXT), "c_more": max(0, len(cl) - k - TOKEN_CONTEXT)}


def _fmt_lp(x: float | None) -> str:
    return "–" if x is None else f"{x + 0.0:.3f}" if abs(x) >= 0.0005 else "0.000"


def _reference_row(obs: list[Any]) -> Any:
    return next((o for o in obs if o.mode == REFERENCE_MODE and o.epoch == 0), obs[0]) if obs else None


def sample_token_diff(inp: Inputs, suite: str, sample_id: str, golden_obs: dict[tuple[str, str], list[Any]]) -> dict[str, Any] | None:
    """token_diff of one sample's reference records (chat, epoch 0: the ones drift is measured on)."""
    g = _reference_row(golden_obs.get((suite, sample_id), []))
    if g is None or not g.logprobs:
        return None
    # parsed once, by scoring, from the journal's record (observations.jsonl): no record, no `shown`
    shown = (inp.shown or {}).get((suite, sample_id, g.epoch, g.mode))
    if shown is None:
        return None
    cl = shown.token_logprobs(len(g.logprobs) + TOKEN_CONTEXT * 4)
    s = inp.doc.suites.get(suite) if inp.doc is not None else None
    floor = s.drift.margin if s is not None else None
    return token_diff(g.logprobs, cl, floor)


def golden_index(obs: list[Any] | None) -> dict[tuple[str, str], list[Any]]:
    out: dict[tuple[str, str], list[Any]] = {}
    for o in obs or []:
        out.setdefault((o.suite, o.sample_id), []).append(o)
    return out


def evidence_samples(inp: Inputs) -> list[tuple[str, str]]:
    """(suite, sample id) named by the comparison's failing evidence, in the document's order (diagnosis examples,
    then each failing signal's samples): the samples that carry the verdict."""
    out: list[tuple[str, str]] = []
    doc = inp.doc
    if doc is None:
        return out
    for d in doc.diagnosis or ():
        for ref in d.examples:
            suite, _, sid = ref.partition("/")
            if suite in doc.suites and sid:
                out.append((suite, sid))
    for side in ("frontend", "quantization"):
        for e in doc.side(side).evidence:
            if e.verdict == "fail" and e.suite in doc.suites:
                out += [(e.suite, sid) for sid in e.samples or ()]
    return list(dict.fromkeys(out))


def diff_candidates(inp: Inputs, exclude: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The samples whose token diff the drift section shows, those that carry the evidence first: the samples failing
    evidence names, then per suite those above the noise floor (highest first), then the earliest partings; outputs
    that never part and stay within the floor are drawn only when nothing else is (two examples say it)."""
    suites = inp.doc.suites if inp.doc is not None else {}
    measured = {(suite, r["id"]) for suite, s in suites.items() for r in s.drift.per_sample or []}
    picks = [k for k in evidence_samples(inp) if k in measured and k not in exclude]
    per_suite = max(1, MAX_TOKEN_DIFFS // max(1, len(suites)))
    rest: list[tuple[str, str]] = []
    quiet: list[tuple[str, str]] = []
    for suite, s in sorted(suites.items()):
        floor = s.drift.margin
        rows = [r for r in s.drift.per_sample or [] if (suite, r["id"]) not in exclude and (suite, r["id"]) not in picks]
        above = sorted((r for r in rows if floor is not None and (r.get("mean_abs_delta") or 0) > floor),
                       key=lambda r: (-(r.get("mean_abs_delta") or 0.0), r["id"]))
        parted = sorted((r for r in rows if r.get("parted") and r not in above), key=lambda r: (r["first_divergence"], r["id"]))
        # Above the floor without parting: two examples say it (each would read "the same N tokens on both sides").
        above = [r for r in above if r.get("parted")] + [r for r in above if not r.get("parted")][:2]
        rest += [(suite, r["id"]) for r in (above + parted)[:per_suite]]
        quiet += [(suite, r["id"]) for r in rows if not r.get("parted") and r not in above and (r.get("mean_abs_delta") or 0) > 0][:2]
    picks += rest
    return (picks or quiet)[:MAX_TOKEN_DIFFS]




def human(x: float | None) -> str:
    """A number as a person reads it (data.fmt): a few significant digits, thousands grouped, never 0.013094999999999999."""
    return fmt(x)


def _curve(values: list[float], ax: _Axes) -> str:
    """SVG polyline points of sorted values against their quantile (0..1)."""
    xs = sorted(values)
    n = len(xs)
    return " ".join(f"{ax.x((i + 0.5) / n)},{ax.y(v)}" for i, v in enumerate(xs))


def teacher_forced_plots(inp: Inputs) -> list[dict[str, Any]]:
    """Per suite with a measured teacher-forced distance: the per-sample KL of the reference's reruns (the golden's
    margin `<suite>/teacher_forced_kl`, `reference_per_sample`) against the candidate's, as sorted curves; and KL along
    the tokens of the candidate's furthest sample (comparison.json `suites.<s>.teacher_forced`)."""
    out = []
    margins = inp.golden_header.margins if inp.golden_header is not None else {}
    for suite, s in sorted((inp.doc.suites if inp.doc is not None else {}).items()):
        t = s.teacher_forced or {}
        rows = t.get("per_sample") or []
        cand = [r["kl_mean"] for r in rows if is_finite_number(r.get("kl_mean"))]
        if t.get("state") != "measured" or not cand:
            continue
        m = margins.get(f"{suite}/teacher_forced_kl")
        raw = m.reference_per_sample if m is not None else None
        ref = [float(x) for x in raw if is_finite_number(x)] if isinstance(raw, list) else []
        top = max(cand + ref + [1e-6]) * 1.08
        ax = _Axes(0, 1, 0, top)
        dist = {"frame": ax.frame(), "candidate": _curve(cand, ax), "reference": _curve(ref, ax) if ref else None,
                "n": len(cand), "reference_n": len(ref)}
        far = t.get("furthest_sample") or {}
        kl = [k for k in far.get("kl") or [] if is_finite_number(k)]
        along = None
        if kl:
            pos = [p for p in far.get("positions") or []][:len(kl)]
            toks = [str(x) for x in far.get("tokens") or []][:len(kl)]
            ax2 = _Axes(0, max(pos + [1]), 0, max(kl + [1e-6]) * 1.08)
            along = {"frame": ax2.frame(), "id": far.get("id"),
                     "bars": [{"x": ax2.x(p), "y": ax2.y(k), "base": ax2.y(0), "title": f"token {p} {_visible(tok)!s}: KL {human(k)}"}
                              for p, k, tok in zip(pos, kl, toks + [""] * len(kl))]}
        out.append({"suite": suite, "method": t.get("method"), "verdict": t.get("verdict"), "distribution": dist,
                    "along": along, "kl_mean": human(t.get("kl_mean")), "reference_kl_mean": human(t.get("reference_kl_mean"))})
    return out
