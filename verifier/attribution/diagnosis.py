"""Diagnosis: which frontend component a failing comparison implicates, and where an engineer should look.

ONE table (TABLE) maps every contract finding code and every frontend signal to a component; the
docs/reference/attribution.md's diagnosis table is this one. Its finding codes are written here (FINDINGS); its signals are read
from their declarations (signals.SIGNALS: component, meaning, and the variants on streams or surfaces only),
so a declared signal always reaches the diagnosis. `diagnose` turns a comparison document's failing frontend
evidence into the `diagnosis` list of comparison.json, biggest first, which the console summary,
summary.md, the JUnit failure message and the HTML banner all lead with. Pure.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterator, Mapping, Sequence

from verifier.attribution import signals
from verifier.attribution.document import Comparison, DiagnosisEntry, SignalResult, SuiteResult, prompt_tokens_move

from verifier.surfaces.registry import REFERENCE_SURFACE, mode_of, surface_for

# component -> where to look (one line, for an engineer who has to open the right file first)
COMPONENTS: dict[str, str] = {
    "API validation": "request validation and parameter handling (sampling params, response_format, 4xx paths)",
    "chat template & tokenization": "the chat template (--chat-template / tokenizer_config.json), tools rendering, tokenizer version",
    "tokenization": "the detokenizer: token strings vs the text sent (skip_special_tokens, byte fallback, spaces)",
    "reasoning parser": "the reasoning parser (--reasoning-parser, thinking on/off in chat_template_kwargs)",
    "tool-call parser": "the tool-call parser (--tool-call-parser) and its streaming path; tool-call id generation",
    "structured-output backend": "the structured-output / grammar backend (guided decoding, response_format support)",
    "stream assembly": "SSE chunking and delta assembly (tool-call indexes, incremental detokenization)",
    "response formatting & usage": "response serialization: finish_reason mapping, usage block, stream_options.include_usage",
    "surface translation": "the Responses / Messages layer: request translation to the chat template, event serialization, error shape",
    "context handling": "the context window and truncation settings (--ctx-size, truncation / n_keep, gateway prompt-size caps)",
    "engine state": "state the engine keeps between requests: the prefix cache (--enable-prefix-caching), speculative decoding "
                    "(MTP / draft model acceptance), batching and KV-cache reuse; turn each off to find which",
    "conversation history": "how replayed history reaches the model: assistant tool calls and their ids, tool results (role, order, "
                            "tool_call_id / call_id / tool_use_id linkage), reasoning replay, system prompt placement, the template's tool branches",
}

# finding code -> (component, what it means, for one line of the diagnosis); the signals' rows are their declarations
FINDINGS: dict[str, tuple[str, str]] = {
    # contract findings
    "tool_markup_in_content": ("tool-call parser", "raw tool-call markup reached the content: the parser did not run"),
    "tool_args_invalid_json": ("tool-call parser", "tool-call arguments are not valid JSON (truncated or cut braces)"),
    "tool_args_not_object": ("tool-call parser", "tool-call arguments decode to a non-object (double-encoded?)"),
    "tool_args_not_string": ("tool-call parser", "tool-call arguments are not a JSON string"),
    "tool_calls_not_list": ("tool-call parser", "tool_calls is not a list"),
    "tool_name_undeclared": ("tool-call parser", "a tool call names a function the request never declared"),
    "tool_call_id_missing": ("tool-call parser", "tool calls without an id"),
    "tool_call_id_duplicate": ("tool-call parser", "two tool calls share one id"),
    "tool_call_as_text": ("tool-call parser", "a tool call written as plain text"),
    "reasoning_in_content": ("reasoning parser", "<think> reasoning leaked into the content"),
    "answer_in_reasoning": ("reasoning parser", "the answer is stranded in reasoning_content, content empty"),
    "json_invalid_strict": ("structured-output backend", "invalid JSON under a strict response_format"),
    "json_schema_violation_strict": ("structured-output backend", "JSON violates the schema under strict mode"),
    "json_fenced": ("structured-output backend", "JSON wrapped in a ``` fence"),
    "json_too_deep": ("structured-output backend", "JSON nested past the safety limit"),
    "json_too_large": ("structured-output backend", "JSON of more values than an answer may be parsed into"),
    "stream_index_collision": ("stream assembly", "parallel tool calls share one stream index"),
    "stream_chunk_invalid_json": ("stream assembly", "SSE chunks that are not JSON"),
    "stream_ignored": ("stream assembly", "a stream request answered with one JSON body (`stream: true` ignored)"),
    "stream_done_missing": ("stream assembly", "a chat stream that ends without `data: [DONE]` after its finish chunk "
                                               "(clients that wait for it hang or report a cut stream)"),
    "stream_too_many_events": ("stream assembly", "a stream of more events than --max-stream-events (empty or repeated chunks)"),
    "replacement_char": ("stream assembly", "U+FFFD in the text: a multi-byte character was split"),
    "finish_reason_missing": ("response formatting & usage", "finish_reason missing"),
    "finish_reason_mismatch": ("response formatting & usage", "finish_reason does not match what was generated"),
    "finish_reason_tool_calls_without_calls": ("response formatting & usage", "finish_reason tool_calls without any tool call"),
    "usage_missing": ("response formatting & usage", "no usage block (streams: include_usage ignored)"),
    "usage_non_finite": ("response formatting & usage", "usage with non-finite numbers"),
    "empty_response": ("response formatting & usage", "an empty response"),
    "malformed_body": ("response formatting & usage", "a response body that is not the documented shape"),
    "logprobs_non_finite": ("response formatting & usage", "NaN/Infinity logprobs"),
    "logprobs_ignored": ("API validation", "logprobs were asked for and the response, with text, has none"),
    "logprob_positive": ("response formatting & usage", "logprobs above 0 (probabilities or processed scores in the logprob field)"),
    "output_capped": ("API validation", "outputs cut for length below the request's max_tokens: a server or gateway cap "
                                        "overrides the request's limit"),
    "tool_args_schema_violation": ("tool-call parser", "tool-call arguments break the declared parameter schema (types, "
                                                       "required, enum)"),
    "non_greedy_token": ("API validation", "a non-top token at temperature 0: sampling parameters not applied"),
    "detokenize_mismatch": ("tokenization", "the logprob tokens do not spell the content: detokenizer or post-processing changed the text"),
    "stop_token_in_content": ("tokenization", "a stop / special token (<|im_end|>, </s>, <|eot_id|>...) reached the content: "
                                              "detokenizer (skip_special_tokens) or stop handling"),
    # the same, on streams only (the non-streamed text is right): the incremental detokenizer / delta assembly
    "detokenize_mismatch:stream": ("stream assembly", "streamed text differs from the tokens generated (non-streamed text is right)"),
    "probe": ("API validation", "a feature-contract probe the reference passed now fails (each probe names its own component)"),
    # Responses and Messages (contract_surfaces.py)
    "error_shape_wrong": ("surface translation", "an error body not in the surface's own error shape"),
    "stream_terminal_event_missing": ("surface translation", "a stream without response.completed / message_stop"),
    "stream_error_event": ("surface translation", "an error event inside the stream"),
    "function_call_without_call_id": ("tool-call parser", "a Responses function_call item without call_id"),
    "tool_input_not_object": ("tool-call parser", "an Anthropic tool_use input that is not an object"),
    "stop_reason_tool_use_without_block": ("response formatting & usage", "stop_reason tool_use without a tool_use block"),
    "thinking_signature_missing": ("reasoning parser", "a thinking block without signature where thinking was requested"),
    # the 2026 serving classes (issue 47)
    "tool_choice_unmet": ("API validation", "a request whose tool_choice forces a call (required, a named function) got no "
                                            "call: the forcing tool_choice was not applied"),
    "cached_tokens_exceed_prompt": ("response formatting & usage", "usage says more tokens were cached than the prompt has "
                                                                   "(prompt-cache accounting)"),
    "usage_split_across_chunks": ("response formatting & usage", "a stream's usage sent in several chunks whose prompt "
                                                                 "figures disagree (cached_tokens only in a later one)"),
    "context_truncated": ("context handling", "long prompts are silently cut: prompt_tokens capped or the fact at their start lost"),
    "teacher_forced_tokens": ("chat template & tokenization", "the endpoint tokenizes the golden's own output text into other "
                              "tokens than the golden's (teacher forcing): the tokenizer changed"),
}



def signal_rows() -> dict[str, tuple[str, str]]:
    """The diagnosis rows of the declared frontend signals: `<name>`, and `<name>:stream` / `<name>:surface` where
    the declaration has those variants (new_findings has none: its finding codes are its rows)."""
    out: dict[str, tuple[str, str]] = {}
    for sg in signals.declared("frontend"):
        if sg.component is not None and sg.component != signals.BY_FINDING_CODE:
            out[sg.name] = (sg.component, sg.meaning)
        if sg.on_streams_only:
            out[f"{sg.name}:stream"] = sg.on_streams_only
        if sg.on_surface_only:
            out[f"{sg.name}:surface"] = sg.on_surface_only
    return out


class _Table(Mapping[str, tuple[str, str]]):
    """FINDINGS and the declared signals' rows, read at each use (a signal declared later is in it too)."""

    def _rows(self) -> dict[str, tuple[str, str]]:
        return {**FINDINGS, **signal_rows()}

    def __getitem__(self, code: str) -> tuple[str, str]:
        return self._rows()[code]

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows())

    def __len__(self) -> int:
        return len(self._rows())


# finding code or signal name -> (component, what it means, for one line of the diagnosis)
TABLE: Mapping[str, tuple[str, str]] = _Table()

MAX_EXAMPLES = 5

SUITE_LEVEL_FORMS = frozenset({"decoding_changed", "logprobs_transformed"})
"""Signals compare may also fail as one suite-level evidence item (over the suite's samples together) where the
per-sample signal did not fail: the diagnosis counts that item's samples."""

# A root cause and the symptoms it produces by itself: a component whose finding explains another component's
# ranks first, whatever the sample counts (non-determinism breaks every parity check; altered text breaks the
# parity of the paths it was altered on). Ranking by counts alone names the loudest symptom.
PARITY = frozenset({"stream_parity_mismatch", "surface_parity_mismatch", "dual_path_mismatch"})
EXPLAINS: dict[str, frozenset[str]] = {
    "probe:temperature_0_deterministic": PARITY | {"repeats_disagree"},
    # A lower-ranked token chosen at temperature 0 is sampling: it makes repeats disagree by itself. decoding_changed
    # (outputs parted from the golden's at an unchanged distribution) does not explain repeats_disagree: that signal
    # needs one of the request's answers to be the golden's generation, which a changed decoding rule (a penalty, a
    # default) never gives on one send and not on another; repeats_disagree explains it instead (below).
    "decoding_changed": PARITY,
    "non_greedy_token": PARITY | {"repeats_disagree"},
    "stop_token_in_content": PARITY,
    "detokenize_mismatch": PARITY,
    "detokenize_mismatch:stream": PARITY,
    # the streaming tool parser lost calls: the streamed answer differs from the non-streamed one because of it
    "stream_tool_calls_dropped": PARITY,
    "stream_tool_calls_dropped:stream": PARITY,
    # a cap cuts JSON and tool arguments short, and each path where it cut differently
    "output_capped": PARITY | {"json_invalid_strict", "json_schema_violation_strict", "tool_args_invalid_json"},
    "output_cut_short": PARITY | {"json_invalid_strict", "json_schema_violation_strict", "tool_args_invalid_json"},
    # the stream's text changed after generation: what the changed text breaks (JSON, the answer) on streams follows
    # (not the parity signals: where sampling is not greedy, the texts differ for that reason, whose probe ranks first)
    "stream_text_mismatch": frozenset({"json_invalid_strict", "json_schema_violation_strict", "replacement_char"}),
    # the streaming parser lost argument content: the streamed answer differs (parity), the cut values may break the
    # schema or the JSON
    "stream_tool_args_changed": PARITY | {"tool_args_schema_violation", "tool_args_invalid_json"},
    # One request answered two ways by the engine, one of them the golden's: every comparison of two paths of that
    # request breaks with it, and the run's outputs that parted from the golden's at unchanged logprobs
    # (decoding_changed) are that state's too where a resend alone, or a first send, gave the golden's generation
    # ("alone right, under load wrong": a batch-dependent answer reads as a changed decoding path otherwise).
    "repeats_disagree": PARITY | {"stream_text_mismatch", "stream_tool_calls_dropped", "stream_tool_args_changed",
                                  "decoding_changed"},
    # a forcing tool_choice not applied: the call that came back as text follows from it
    "tool_choice_unmet": PARITY | {"tool_calls_as_text"},
    # The engine measured answering one request otherwise when it is warm or batched with prompts sharing its prefix:
    # the suites' samples, sent warm and at concurrency, part from the golden's at unchanged logprobs for that reason,
    # which reads as a changed decoding path (decoding_changed) where no sampling probe failed.
    "probe:state_repeat_after_shared_prefix": PARITY | {"decoding_changed", "repeats_disagree"},
    "probe:state_repeat_under_concurrency": PARITY | {"decoding_changed", "repeats_disagree"},
}


SURFACE_ONLY = ":surface"
"""Suffix of `probe:<name>:surface`: the probe fails on a surface while it passes on chat of the same server."""


def component_of(code: str) -> tuple[str, str]:
    """(component, meaning) of a finding code, signal name or `probe:<name>`; unknown codes stay visible."""
    if code.startswith("probe:") and code.endswith(SURFACE_ONLY):
        return "surface translation", (f"{code[6:-len(SURFACE_ONLY)]} fails on Responses/Messages while it passes on chat of "
                                       "the same server: the layer between them (the surface's translation, or a gateway "
                                       "dropping the parameter there)")
    if code.startswith("probe:"):
        return TABLE["probe"][0], f"{code[6:]}: " + TABLE["probe"][1]
    return TABLE.get(code, ("response formatting & usage", code))


@dataclass
class _Implicated:
    """What the evidence says of one component, gathered before it becomes a DiagnosisEntry."""

    findings: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    suites: set[str] = field(default_factory=set)
    modes: set[str] = field(default_factory=set)
    examples: list[str] = field(default_factory=list)
    ranked: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """The counts it ranks by: all but a passing probe's moved fingerprint or text (probe_results `weak`), which
    is shown and ranks a component only below every component with other evidence."""
    causes: set[str] = field(default_factory=set)
    """The codes that may explain other components' (EXPLAINS): not a finding read on a probe request alone (one
    request whose own check may pass is a symptom to report, never the root cause of the workload's failures)."""


def _add(acc: dict[str, _Implicated], comp: str, code: str, suite: str, count: int, samples: Sequence[str],
         modes: Sequence[str], weak: bool = False, cause: bool = True) -> None:
    d = acc.setdefault(comp, _Implicated())
    d.findings[code] += count
    if not weak:
        d.ranked[code] += count
    if cause:
        d.causes.add(code)
    if suite != "*":
        d.suites.add(suite)
    d.modes.update(modes)
    for sid in samples:
        ref = sid if suite == "*" else f"{suite}/{sid}"
        if ref not in d.examples and len(d.examples) < MAX_EXAMPLES:
            d.examples.append(ref)


def _suite_items(s: SuiteResult) -> list[tuple[str, int, list[str], list[str]]]:
    """(code, count, sample ids, modes) for each failing frontend signal of one suite block."""
    out = []
    declared = signals.by_name()
    for name, sig in s.signals.items():
        sg = declared.get(name)
        if sig.verdict != "fail" or sg is None or sg.side != "frontend":
            continue
        if sg.component == signals.BY_FINDING_CODE:
            for code, det in sorted(s.new_findings().items()):
                out.append((code, len(det.samples), det.samples, det.modes))
                if code == "detokenize_mismatch" and _streams_only(det.modes):
                    out[-1] = ("detokenize_mismatch:stream", *out[-1][1:])
        else:
            modes = s.signal_modes.get(name, [])
            code = f"{name}:stream" if sg.on_streams_only and _streams_only(modes) else name
            if sg.on_surface_only and _off_chat_only(modes, s.modes or []):
                code = f"{name}:surface"
            out.append((code, sig.count, sig.samples or [], modes))
    return out


def _streams_only(modes: list[str]) -> bool:
    return bool(modes) and all(mode_of(m).stream for m in modes)


def _off_chat_only(fired: list[str], ran: list[str]) -> bool:
    return bool(fired) and all(surface_for(m).name != REFERENCE_SURFACE for m in fired) and any(surface_for(m).name == REFERENCE_SURFACE for m in ran)


def diagnose(doc: Comparison) -> list[DiagnosisEntry]:
    """The `diagnosis` list: one entry per implicated component, root causes first (EXPLAINS), then the most
    affected samples first. Reads the verdicts of the document compare is building (its diagnosis not yet set)."""
    acc: dict[str, _Implicated] = {}
    for suite, s in doc.suites.items():
        for code, count, samples, modes in _suite_items(s):
            _add(acc, component_of(code)[0], code, suite, count, samples, modes)
    rows = doc.conformance
    for e in doc.frontend.evidence:
        if e.verdict != "fail":
            continue
        if (e.signal.startswith("probe:") and rows is None) or e.signal == "context_truncated":  # run-wide
            # (probes: a document from before the conformance table; since, the rows below name component and surface)
            _add(acc, e.component or component_of(e.signal)[0], e.signal, "*", 1, [], list(e.modes or []))
        elif e.signal == "teacher_forced_tokens":  # a suite-level event of the teacher-forcing pass, not a signal row
            _add(acc, component_of(e.signal)[0], e.signal, e.suite, max(1, len(e.samples or ())), list(e.samples or ()), [])
        elif e.signal in SUITE_LEVEL_FORMS and e.suite in doc.suites \
                and _verdict_of(doc.suites[e.suite].signals.get(e.signal)) != "fail":
            # a suite-level form (decoding_changed: zero drift on every shared prefix; logprobs_transformed: values
            # pooled over short answers), when the per-sample one did not fail
            samples = list(e.samples or [])
            _add(acc, component_of(e.signal)[0], e.signal, e.suite, len(samples), samples, [])
    failed_probes = {(e.signal, m) for e in doc.frontend.evidence if e.verdict == "fail" and e.signal.startswith("probe:")
                     for m in (e.modes or {})}
    on_chat = {r["probe"] for r in rows or [] if r["surface"] == REFERENCE_SURFACE and (r["status"] in ("pass", "improved") or r.get("weak"))}
    for r in rows or []:  # each probe names its own component, and the surface it failed on
        if r["status"] != "regression":
            continue
        weak = bool(r.get("weak"))
        if (f"probe:{r['probe']}", r["surface"]) not in failed_probes:
            continue  # held inconclusive (a moved greedy text, or a check that reads the output, where the numerics
            # moved too): no frontend evidence
        if not weak and not r.get("evidence_code") and r["surface"] != REFERENCE_SURFACE and r["probe"] in on_chat and r["component"] != "surface translation":
            # the probe's own check fails here and passes on chat: what differs is the surface's layer (it explains
            # the probe's failure; a request's contract finding names its own component instead)
            _add(acc, "surface translation", f"probe:{r['probe']}{SURFACE_ONLY}", "*", 1, [], [r["surface"]])
        # a probe request that went otherwise than the reference's names the finding's component (a contract
        # finding, the prompt-token fingerprint), else the probe's own
        via = r.get("evidence_code")
        comp = component_of(via)[0] if isinstance(via, str) and via in TABLE else str(r["component"])
        _add(acc, comp, f"probe:{r['probe']}", "*", 1, [], [r["surface"]], weak=weak, cause=not via)
        found = r.get("exchange_finding")
        if isinstance(found, str) and found != via:
            # a contract finding on a probe request whose own check failed too: the finding counts, with its
            # component, beside the probe's (the same finding on several probes adds up, as on samples)
            _add(acc, component_of(found)[0], found, "*", 1, [], [r["surface"]], cause=False)
    findings = {comp: _ranked(d.findings) for comp, d in acc.items()}
    out = []
    for comp, d in acc.items():
        codes = findings[comp]
        lead = codes[0]
        explanation = f"{component_of(lead)[1]} ({lead} on {max(d.findings.values())} sample(s)){_length_note(doc, lead)}" \
                      f"{_prompt_tokens_note(doc, lead)}; " \
                      f"look at {COMPONENTS.get(comp, comp)}"
        explained = {c for other, cs in findings.items() if other != comp for c in cs}
        # (a passing probe whose text moved is no root cause: only the evidence it ranks by explains)
        causes = sorted(code for code in codes if code in d.causes and _explained_by(code) & explained)
        explains = None
        if causes:
            explains = sorted({other for other, cs in findings.items()
                               if other != comp and set(cs) & set().union(*(_explained_by(c) for c in causes))})
            explanation += f"; this also explains {', '.join(explains)}"
        out.append(DiagnosisEntry(component=comp, findings=codes, counts=dict(sorted(d.findings.items())),
                                  suites=sorted(d.suites), modes=sorted(d.modes), examples=d.examples,
                                  explanation=explanation, where=COMPONENTS.get(comp, ""), explains=explains))
    # Ties on the most affected samples: evidence seen on the suites' samples before evidence from probes alone
    # (a probe is one request; a sample-level finding is the server's behaviour on the workload), then more
    # distinct findings, then the name (a stable order).
    # A component named only by passing probes whose fingerprint or text moved ranks below every other; their
    # counts rank no component.
    # A root cause whose symptoms are themselves another component's explanation (an engine-state probe explaining
    # decoding_changed, which explains the parity checks) ranks above that component: explained ones come after.
    ranked = {comp: (max(d.ranked.values(), default=0), len(d.ranked)) for comp, d in acc.items()}
    explained_by = {comp: {x.component for x in out if comp in (x.explains or ()) and x.component != comp} for comp in acc}
    out.sort(key=lambda x: (not x.explains, _explained_by_a_cause(x.component, explained_by),
                            not ranked[x.component][0], -ranked[x.component][0], -max(x.counts.values()),
                            not x.suites, -ranked[x.component][1], -len(x.findings), x.component))
    return out


def _explained_by_a_cause(comp: str, explained_by: Mapping[str, set[str]]) -> bool:
    """Whether another component explains this one without this one explaining it back (a root cause above it).
    Where two explain each other neither is the root: both stay where the counts rank them."""
    return any(comp not in explained_by.get(other, set()) for other in explained_by.get(comp, set()))


def _explained_by(code: str) -> frozenset[str]:
    """The codes a root cause explains: EXPLAINS, and a probe failing off chat only explains that probe's failure."""
    if code.startswith("probe:") and code.endswith(SURFACE_ONLY):
        return frozenset({code[: -len(SURFACE_ONLY)]})
    return EXPLAINS.get(code, frozenset())


def _length_note(doc: Comparison, code: str) -> str:
    """For a cap: where the outputs ended ("every output cut for length ends at 8 tokens, the run asked for 1024")."""
    lengths: set[int] = set()
    requested = None
    for s in doc.suites.values():
        det = s.new_finding_detail.get(code) or {}
        lengths.update(x for x in det.get("completion_tokens") or [] if isinstance(x, int))
        requested = det.get("requested_max_tokens", requested)
    if not lengths:
        return ""
    asked = f", the run asked for {requested}" if isinstance(requested, int) else ", below the request's max_tokens"
    if len(lengths) == 1:
        return f": every output cut for length ends at {next(iter(lengths))} tokens{asked}"
    return f": outputs cut for length end at {min(lengths)} to {max(lengths)} tokens{asked}"


def _prompt_tokens_note(doc: Comparison, code: str) -> str:
    """For a moved prompt-token fingerprint: by how much (": median prompt tokens golden 332 → candidate 29"), from the
    figures compare put on the signal's block; per suite when several moved."""
    if code.split(":")[0] != "prompt_tokens_mismatch":
        return ""
    moves = [(suite, sig.prompt_tokens) for suite, s in sorted(doc.suites.items())
             if (sig := s.signals.get("prompt_tokens_mismatch")) is not None and sig.verdict == "fail" and sig.prompt_tokens]
    if not moves:
        return ""
    if len(moves) == 1:
        return f": {prompt_tokens_move(moves[0][1])}"
    return ": " + "; ".join(f"{suite} {prompt_tokens_move(pt)}" for suite, pt in moves[:3])


def _ranked(counts: Mapping[str, int]) -> list[str]:
    """Finding codes, most affected samples first."""
    return sorted(counts, key=lambda c: (-counts[c], c))


def _verdict_of(sig: SignalResult | None) -> str | None:
    return None if sig is None else sig.verdict


def headline(diagnosis: Sequence[DiagnosisEntry]) -> str | None:
    """The first line every output leads with, or None when nothing was diagnosed."""
    if not diagnosis:
        return None
    d = diagnosis[0]
    more = f" (+{len(diagnosis) - 1} more component(s))" if len(diagnosis) > 1 else ""
    ex = f"; e.g. {', '.join(d.examples[:3])}" if d.examples else ""
    return f"diagnosis: {d.component}: {d.explanation}{ex}{more}"
