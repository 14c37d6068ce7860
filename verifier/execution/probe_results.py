"""Probe results, judged against the golden's: the conformance table (probe x surface, reference vs candidate,
component) and the evidence a comparison counts. Pure; no network.

A result is keyed `<probe>@<surface>`. Goldens blessed before probes ran per surface hold bare probe names:
those were chat results, and are read as `<probe>@chat`, so an old golden keeps gating the probes it has.

How a row is judged:
- the reference passed and the candidate fails: `regression`, a frontend failure of the probe's component;
- the reference fails too: `reference_fails`, reported, never blamed (an engine that clamps instead of refusing,
  a server without stored responses or count_tokens);
- the golden never ran the probe on that surface: `not_in_golden`, reported, not blamed, not a coverage gap;
- the golden has it and the candidate did not run it: `not_run`, counted in the golden coverage (incomplete);
- `infra`: the candidate's requests met an infra error (timeout, transport, 5xx): no evidence, missing coverage;
- `reference_infra`: the reference's own requests met one (an image prompt a text-only server answers with a 500):
  no evidence either way whatever the candidate got, as for a sample the golden could not get; not a coverage gap;
- `pass`, or `improved` (the reference failed, the candidate passes).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from verifier.judge import contract
from verifier.surfaces.registry import mode_of
from verifier.types import Parsed

TEXT_CHARS = 400
"""What a probe result keeps of each greedy answer's text, to compare with the golden's same request."""

SEP = "@"
DEFAULT_SURFACE = "chat"
# Failing rows lead the table; then what is reported but not blamed; then passes.
STATUS_ORDER = ("regression", "not_run", "infra", "reference_fails", "reference_infra", "not_in_golden", "improved", "pass")
STATUS_TEXT = {
    "regression": "REGRESSION (the reference passed)",
    "not_run": "not run (the golden has it)",
    "infra": "infra error (no evidence; counted as missing coverage)",
    "reference_fails": "the reference fails it too (not blamed)",
    "reference_infra": "the reference could not get it either (infra error on the golden: no evidence either way)",
    "not_in_golden": "not in golden (reported, not blamed)",
    "improved": "passes (the reference failed)",
    "pass": "pass",
}


def key(probe: str, surface: str) -> str:
    return f"{probe}{SEP}{surface}"


def split(k: str) -> tuple[str, str]:
    """`name@surface` -> (name, surface); a bare name (a golden from before surfaces) is a chat result."""
    name, sep, surface = k.partition(SEP)
    return (name, surface) if sep else (name, DEFAULT_SURFACE)


def normalize(results: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Results keyed `name@surface` whatever the file's age; entries that are not results are dropped."""
    out: dict[str, dict[str, Any]] = {}
    for k, v in (results or {}).items():
        if isinstance(v, dict) and isinstance(v.get("passed"), bool):
            name, surface = split(k)
            out[key(name, surface)] = {**v, "probe": v.get("probe", name), "surface": v.get("surface", surface)}
    return out


def _component(row_probe: str, *sides: ProbeResult | None, components: dict[str, str] | None = None) -> str:
    """The first side's own component; else the probe's as `components` names it (old goldens)."""
    for s in sides:
        if s is not None and s.component is not None:
            return s.component
    return (components or {}).get(row_probe, "API validation")


def exchange_facts(sent: dict[str, Any], parsed: Parsed | None, mode: str) -> dict[str, Any] | None:
    """What one probe request's answer shows beside the probe's own check, kept in the result so a gate compares it
    with the golden's same request: the contract findings (frontend codes), the prompt-token fingerprint, and at
    temperature 0 the text. None where nothing parsed (an expected 4xx, a skipped request)."""
    if parsed is None:
        return None
    codes = {f.code for f in contract.check(sent, parsed, mode)} - contract.MODEL_BEHAVIOUR - contract.SIGNAL_JUDGED
    greedy = sent.get("temperature") == 0 and not sent.get("n")
    return {"findings": sorted(codes), "prompt_tokens": parsed.prompt_tokens,
            "text": (parsed.content or "")[:TEXT_CHARS] if greedy else None, "stream": mode_of(mode).stream}


def _fingerprint_moved(c: dict[str, Any], g: dict[str, Any], stream: bool) -> bool:
    """Some request of this probe (streamed ones, or the others) counted other prompt tokens than the golden's."""
    ce, ge = c.get("exchanges"), g.get("exchanges")
    if not isinstance(ce, list) or not isinstance(ge, list):
        return False
    return any(isinstance(a, dict) and isinstance(b, dict) and bool(b.get("stream")) == stream
               and isinstance(a.get("prompt_tokens"), int) and isinstance(b.get("prompt_tokens"), int)
               and a["prompt_tokens"] != b["prompt_tokens"] for a, b in zip(ge, ce))


def _text_moved(c: dict[str, Any], g: dict[str, Any], stream: bool) -> bool:
    """Some request of this probe (streamed ones, or the others) wrote another greedy text than the golden's."""
    ce, ge = c.get("exchanges"), g.get("exchanges")
    if not isinstance(ce, list) or not isinstance(ge, list):
        return False
    return any(isinstance(a, dict) and isinstance(b, dict) and bool(b.get("stream")) == stream
               and isinstance(a.get("text"), str) and isinstance(b.get("text"), str) and a["text"] != b["text"]
               for a, b in zip(ge, ce))


STREAM_TEXT = "stream_text_mismatch"
"""The code a probe request's moved greedy text carries when only streamed requests moved: the stream's doing."""


def exchange_changes(c: dict[str, Any], g: dict[str, Any], template_moved: bool = True, text_moved: bool = True,
                     compare_text: bool = True) -> tuple[tuple[str, str] | None, tuple[str, str | None] | None]:
    """How the candidate's probe requests went otherwise than the golden's same requests, as two answers:
    (the first new contract finding: (what, its code)) and (the first other prompt-token count or other greedy text:
    (what, `prompt_tokens_mismatch` or None for the probe's own component)). Each None: the same, or not comparable (a
    golden from before this). A finding is looked for on every request before the fingerprint and the text.
    `template_moved`: some non-streamed probe request of the run counted other prompt tokens; where none did, a
    streamed request's other count is the stream's usage report (`prompt_tokens_mismatch:stream`), not the prompt.
    `text_moved`: some non-streamed probe request of the run wrote another greedy text; where none did, a streamed
    request's other text was edited in the stream (STREAM_TEXT: stream assembly), not generated otherwise, since the
    same engine generated every non-streamed text as the reference's. `compare_text` False: the probe's requests were
    sent together (a batch whose shape is the probe's point), so their greedy text is not the golden's to compare with:
    batch shape moves near-tie tokens on a healthy engine; the probe's own check reads its texts against each other."""
    ce, ge = c.get("exchanges"), g.get("exchanges")
    if not isinstance(ce, list) or not isinstance(ge, list):
        return None, None
    pairs = [(i, a, b) for i, (a, b) in enumerate(zip(ge, ce), 1) if isinstance(a, dict) and isinstance(b, dict)]
    finding = None
    for i, a, b in pairs:
        new = sorted(set(b.get("findings") or []) - set(a.get("findings") or []))
        if new:
            finding = (f"request {i}: {new[0]} (the reference's same request had none)", new[0])
            break
    moved: tuple[str, str | None] | None = None
    for i, a, b in pairs:
        pa, pb = a.get("prompt_tokens"), b.get("prompt_tokens")
        if isinstance(pa, int) and isinstance(pb, int) and pa != pb:
            code = "prompt_tokens_mismatch:stream" if b.get("stream") and not template_moved else "prompt_tokens_mismatch"
            moved = (f"request {i}: prompt_tokens {pb}, the reference's {pa}", code)
            break
        ta, tb = a.get("text"), b.get("text")
        if compare_text and isinstance(ta, str) and isinstance(tb, str) and ta != tb:
            moved = (f"request {i}: temperature-0 text {tb[:40]!r}, the reference's {ta[:40]!r}",
                     STREAM_TEXT if b.get("stream") and not text_moved else None)
            break
    return finding, moved


@dataclass(frozen=True)
class ProbeResult:
    """One probe x surface result as a run's probes.json or a golden holds it (normalize's entries), typed for
    judging. `document` is the entry as read: its per-request `exchanges` are compared with the golden's by
    exchange_changes."""

    passed: bool
    """What the probe's own check said."""
    infra: bool
    """Its requests met an infra error (timeout, transport, 5xx): no evidence."""
    detail: str
    component: str | None
    """The probe's component as the result names it (None: an old golden's result, named by `components`)."""
    has_value: bool
    value: Any
    """A measured value (prompt tokens, packet sizes) a comparator reads against the reference's; see has_value."""
    document: dict[str, Any]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeResult:
        """An entry as read; lenient (an entry normalize would drop reads as a failed check)."""
        comp = d.get("component")
        return cls(passed=d.get("passed") is True, infra=bool(d.get("infra")), detail=d.get("detail", ""),
                   component=comp if isinstance(comp, str) else None, has_value="value" in d, value=d.get("value"),
                   document=d)


def reference_infra(entry: Any) -> bool:
    """Whether a golden's probe entry says the reference's own requests met an infra error: a conformance row's
    `reference` column (judge), or a raw result's flag."""
    if not isinstance(entry, dict):
        return False
    return entry.get("reference") == "infra" or ProbeResult.from_dict(entry).infra


@dataclass(frozen=True)
class _Judging:
    """What judge was given, and what it found over the whole run, that each row's judgement reads."""

    components: dict[str, str]
    comparators: dict[str, Callable[[Any, Any], tuple[bool, str]]]
    reads_output: frozenset[str]
    moves_outputs: frozenset[str]
    batched: frozenset[str]
    template_moved: bool
    """Some non-streamed probe request of the run counted other prompt tokens than the golden's (exchange_changes)."""
    text_moved: bool
    """Some non-streamed, not batched, probe request of the run wrote another greedy text than the golden's."""


def judge(candidate: dict[str, Any] | None, golden: dict[str, Any] | None,
          components: dict[str, str] | None = None,
          comparators: dict[str, Callable[[Any, Any], tuple[bool, str]]] | None = None,
          reads_output: frozenset[str] = frozenset(), moves_outputs: frozenset[str] = frozenset(),
          batched: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The conformance table, failing rows first. `components` names a probe's component where a result does not
    (old goldens); `comparators` compare a measured value (prompt tokens, packet sizes) with the reference's;
    `reads_output`: the probes whose check reads what the model wrote (probes.Probe.reads_output); `moves_outputs`:
    the probes whose failing check shows the server changing the model's outputs by itself (Probe.moves_outputs);
    `batched`: the probes whose requests are sent together (their greedy text is judged by their own check only)."""
    cand = {k: ProbeResult.from_dict(v) for k, v in normalize(candidate).items()}
    gold = {k: ProbeResult.from_dict(v) for k, v in normalize(golden).items()}
    both = set(cand) & set(gold)
    how = _Judging(
        components=components or {}, comparators=comparators or {}, reads_output=reads_output,
        moves_outputs=moves_outputs, batched=batched,
        template_moved=any(_fingerprint_moved(cand[k].document, gold[k].document, stream=False) for k in both),
        text_moved=any(_text_moved(cand[k].document, gold[k].document, stream=False) for k in both
                       if split(k)[0] not in batched))
    rows = [_row(k, cand.get(k), gold.get(k), how) for k in sorted(set(cand) | set(gold))]
    rows.sort(key=lambda r: (STATUS_ORDER.index(r["status"]), r["probe"], r["surface"]))
    return rows


def _own_check(name: str, c: ProbeResult | None, g: ProbeResult | None, how: _Judging) -> tuple[bool | None, str]:
    """The candidate's own check (None: not run) and its detail, with a measured value held against the
    reference's where both checks passed and the probe has a comparator."""
    if c is None:
        return None, ""
    c_ok, why = c.passed, c.detail
    comparator = how.comparators.get(name)
    if g is not None and c_ok and g.passed and comparator and c.has_value and g.has_value:
        same, moved = comparator(c.value, g.value)  # a measured value against the reference's
        if not same:
            c_ok, why = False, f"{why}; {moved}" if why else moved
    return c_ok, why


def _status(c: ProbeResult | None, g: ProbeResult | None, c_ok: bool | None) -> str:
    """The row's status from the two checks alone (STATUS_ORDER; exchange_evidence may make it a regression)."""
    if g is not None and g.infra:
        return "reference_infra"  # whatever the candidate got: there is nothing to compare it with
    if c is not None and c.infra:
        return "infra"  # no answer to judge: counted as missing coverage, never as a failure
    if c is None:
        return "not_run"
    if g is None:
        return "not_in_golden"
    if c_ok:
        return "pass" if g.passed else "improved"
    return "regression" if g.passed else "reference_fails"


@dataclass(frozen=True)
class _ExchangeEvidence:
    """What the probe's requests, held against the golden's same requests, add to a row."""

    status: str
    why: str
    evidence_code: str | None = None
    exchange_finding: str | None = None
    weak: bool = False
    text_only: bool = False
    """Both checks failed alike and only the greedy text moved: read with the numerics, like `weak` (evidence)."""


def _exchange_evidence(name: str, c: ProbeResult, g: ProbeResult, status: str, why: str,
                       how: _Judging) -> _ExchangeEvidence:
    """Every probe request goes through the contract findings and the prompt-token fingerprint against the golden's
    same request, and at temperature 0 its text, whatever the probe's own check said:
    - a new contract finding always counts, with the finding's component (a check that fails as the reference's
      did, or passes, blames nothing by itself: the finding does);
    - where the check failed as the reference's did, a moved fingerprint or text is the evidence (reasoning moved,
      tools dropped from the prompt, server defaults);
    - where it passed on both sides, a moved fingerprint or text is evidence too, ranked below the sample-level
      evidence (`weak`: one request, whose greedy text also moves with the numerics)."""
    finding, moved = exchange_changes(c.document, g.document, how.template_moved, how.text_moved,
                                      compare_text=name not in how.batched)
    evidence_code, exchange_finding, weak, text_only = None, None, False, False
    if finding is not None:
        exchange_finding = finding[1]
        if status != "regression":
            evidence_code = finding[1]
        why = f"{why}; {finding[0]}" if why else finding[0]
    elif moved is not None and status != "regression":
        evidence_code, weak = moved[1], status == "pass"
        # both checks failed alike and only the greedy text moved: what the model wrote, read with the
        # numerics like a passing probe's moved text (a KV-q4_0 model writes another refusal than the
        # reference's under a tool_choice neither enforces)
        text_only = status == "reference_fails" and moved[1] in (None, STREAM_TEXT)
        why = f"{why}; but {moved[0]}" if why else moved[0]
    if status != "regression" and (finding is not None or moved is not None):
        status = "regression"
    return _ExchangeEvidence(status, why, evidence_code, exchange_finding, weak, text_only)


def _row(k: str, c: ProbeResult | None, g: ProbeResult | None, how: _Judging) -> dict[str, Any]:
    """One conformance row: the two checks, the status, and what the exchanges add."""
    name, surface = split(k)
    comp = _component(name, c, g, components=how.components)
    c_ok, why = _own_check(name, c, g, how)
    status = _status(c, g, c_ok)
    found = _ExchangeEvidence(status, why)
    if c is not None and g is not None and status in ("regression", "reference_fails", "pass") and not c.infra:
        found = _exchange_evidence(name, c, g, status, why, how)
    return {
        "key": k, "probe": name, "surface": surface, "component": comp,
        "reference": None if g is None else "infra" if g.infra else ("pass" if g.passed else "fail"),
        "candidate": None if c is None else "infra" if c.infra else ("pass" if c_ok else "fail"),
        "status": found.status, "candidate_detail": found.why, "reference_detail": "" if g is None else g.detail,
        **({"evidence_code": found.evidence_code} if found.evidence_code else {}),
        **({"exchange_finding": found.exchange_finding} if found.exchange_finding else {}),
        **({"weak": True} if found.weak else {}),
        **({"text_only": True} if found.text_only else {}),
        **({"reads_output": True} if name in how.reads_output else {}),
        **({"moves_outputs": True} if name in how.moves_outputs else {}),
    }


def evidence(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Evidence items for the comparison, one per probe x surface both sides ran: only a regression fails.
    Rows the golden never had are reported in the table only (no evidence: nothing to regress from)."""
    out = {}
    for r in rows:
        if r["status"] in ("not_run", "not_in_golden", "infra", "reference_infra"):
            continue
        verdict = "fail" if r["status"] == "regression" else "pass"
        # What each side's own check said, as the results hold it (a row can regress on a moved exchange while both
        # checks passed, or both failed: the words must not say otherwise).
        ref = "reference passed" if r["reference"] == "pass" else \
            "reference also fails" if r["candidate"] == "fail" else "reference failed"
        if r["candidate"] == "pass":
            said = "its check passed, but the exchange moved" if verdict == "fail" else "passed"
        else:
            said = "FAILED"
        out[r["key"]] = {"signal": f"probe:{r['probe']}", "surface": r["surface"], "component": r["component"],
                         "verdict": verdict,
                         "summary": f"{r['probe']} on {r['surface']}: {said} ({r['candidate_detail']}; {ref}) [{r['component']}]"}
        if verdict == "fail" and r.get("moves_outputs") and r["candidate"] == "fail":
            # its own check failed: the server changes what the model writes, so the other probes' evidence that is
            # what the model wrote names no component of its own (compare.py)
            out[r["key"]]["moves_outputs"] = True
        if r["status"] == "reference_fails":
            out[r["key"]]["qualifier"] = "reference_fails"  # a pass only because the golden cannot do it either
        elif r.get("weak") or r.get("text_only"):
            # the check passed on both sides (or failed alike); only the request's fingerprint or greedy text moved
            # (compare.py holds a moved text as inconclusive where the numerics moved too: no frontend evidence then)
            out[r["key"]]["qualifier"] = "exchange_text" if r.get("evidence_code") in (None, STREAM_TEXT) else "exchange_fingerprint"
        elif verdict == "fail" and r.get("reads_output") and not r.get("exchange_finding"):
            # the check read what the model wrote: compare.py holds it inconclusive where the sample-level numerics
            # moved (other weights write otherwise); a new contract finding on its requests stays evidence
            out[r["key"]]["qualifier"] = "model_output"
    return out


def failing(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in rows if r["status"] == "regression"]


def markdown(rows: list[dict[str, Any]], cell: Callable[[Any, int], str]) -> list[str]:
    """The conformance table as Markdown lines (`cell` escapes a value for a table cell)."""
    if not rows:
        return []
    mark = {"pass": "✅ pass", "fail": "❌ fail", "infra": "⛔ infra", None: "–"}
    out = ["", f"### Probe conformance ({len(failing(rows))} regression(s) in {len(rows)} probe x surface rows)", "",
           "| probe | surface | reference | candidate | component | status | detail |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {cell(r['probe'], 60)} | {cell(r['surface'], 20)} | {mark[r['reference']]} | {mark[r['candidate']]} | "
                   f"{cell(r['component'], 40)} | {cell(STATUS_TEXT[r['status']], 60)} | {cell(r['candidate_detail'] or r['reference_detail'], 160)} |")
    return out
