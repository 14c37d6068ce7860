"""Frontend envelope checks on one response -> findings.

These are weight-independent: a correct frontend passes them whatever the
model says, so a rise in their rate points at the serving stack, not the
weights. Codes are stable names used by compare, the report and CI.
"""

from __future__ import annotations

import re
from typing import Any

from verifier.judge import contract_surfaces
from verifier.jsonsafe import TooDeep, is_finite_number, loads_bounded
from verifier.types import Finding, Parsed

# Findings that make the answer unusable as sent: the verdict becomes `contract`
# and the sample is kept out of quality metrics (it is a frontend failure, not a wrong answer).
BLOCKING = {
    "malformed_body",
    "tool_calls_not_list",
    "tool_args_invalid_json",
    "tool_args_not_object",
    "tool_name_undeclared",
    "tool_markup_in_content",
    "reasoning_in_content",
    "answer_in_reasoning",
    "finish_reason_tool_calls_without_calls",
    "stream_index_collision",
    "json_invalid_strict",
    "json_schema_violation_strict",
    "json_too_deep",
    "json_too_large",
    "stream_ignored",
    "stream_too_many_events",
    "tool_choice_unmet",
} | contract_surfaces.BLOCKING

# Findings about what the model chose to write rather than what the serving stack did with it: recorded
# and reported, but not frontend evidence (new weights move them; e.g. a requantized model writes one more
# tool call as plain text). None of them is blocking: the sample stays in the quality metrics and is scored
# on what it says (an empty answer is a wrong one), so every finding is judged by some side (see `sides`).
# `schema_not_checkable` is here for the same reason: it describes the golden's schema (a `$ref` outside its
# document, a regex without a linear-time matcher), not the serving stack; the sample's schema metric is n/a.
# (tool_args_schema_violation: a model may write "5" for an integer or leave out a required argument; what a parser
# did to the arguments shows against the golden's calls on the same sample, signals.tool_args_types_changed.)
MODEL_BEHAVIOUR = {"tool_call_as_text", "json_fenced", "empty_response", "schema_not_checkable", "tool_args_schema_violation"}

# Findings judged against the golden by a signal rather than by new_findings: by itself the code says nothing a
# healthy server cannot show (an engine that returns no logprobs on some records); the golden's same record having
# what the candidate's lacks is the evidence (signals.logprobs_dropped).
SIGNAL_JUDGED = {"logprobs_ignored"}

# Model tool-call markup that a correct tool-call parser never lets through to the client.
MARKUP = re.compile(
    r"<tool_call>|</tool_call>|<\|tool_calls?_section_begin\|>|<\|tool_call_begin\|>|<｜tool▁calls?▁begin｜>"
    r"|<\|channel\|>|<\|python_tag\|>|\[TOOL_CALLS\]|<function=",
)
# End-of-turn, stop and other special tokens (ChatML, Llama 3, Gemma, SentencePiece, DeepSeek): in the content
# they are the detokenizer's or the stop handling's leak (skip_special_tokens, stop strings), not tool markup.
SPECIAL_TOKEN = re.compile(
    r"<\|(?:im_end|im_start|endoftext|end_of_text|eot_id|eom_id|end|eos|begin_of_text|start_header_id|end_header_id|file_separator)\|>"
    r"|</s>|<s>|<eos>|<bos>|<pad>|<end_of_turn>|<start_of_turn>|<｜end▁of▁sentence｜>|<｜begin▁of▁sentence｜>"
)
# A whole logprob token that is a special token (some engines list the stop token among the generated ones:
# vLLM gives `<|im_end|>` last, llama.cpp gives ""): the content rightly leaves it out.
SPECIAL_TOKEN_WHOLE = re.compile(r"\s*(?:" + SPECIAL_TOKEN.pattern + r"|<\|[A-Za-z0-9_.-]{1,40}\|>|<｜[^｜]{1,40}｜>)\s*")
# Byte-level BPE and SentencePiece markers some servers return raw in token strings (Ġ space, Ċ newline, ▁ space).
BYTE_MARKERS = str.maketrans({"Ġ": " ", "Ċ": "\n", "ĉ": "\t", "▁": " "})


def sides(code: str) -> set[str]:
    """Which side of a comparison judges a finding code: `frontend` (a new one fails the frontend signal
    new_findings) unless it is model behaviour, `metrics` (the sample stays in the quality metrics, scored on
    what it says) unless it is blocking. Never neither: tests/test_verdict_unscripted_endpoints.py enumerates every code."""
    # (SIGNAL_JUDGED codes: frontend evidence through their signal, against the golden's same record, not by themselves)
    return ({"frontend"} if code not in MODEL_BEHAVIOUR | SIGNAL_JUDGED else set()) | ({"metrics"} if code not in BLOCKING else set())
THINK = re.compile(r"</?think>")


def _declared_schemas(request: dict[str, Any]) -> dict[str, Any]:
    """Declared function name -> its parameter schema (chat nests both under `function`; Responses puts them at the
    top; Messages calls it `input_schema`)."""
    out: dict[str, Any] = {}
    for t in request.get("tools") or []:
        if isinstance(t, dict):
            function = t.get("function")
            fn: dict[str, Any] = function if isinstance(function, dict) else t
            schema = fn.get("parameters", fn.get("input_schema"))
            if isinstance(fn.get("name"), str) and isinstance(schema, dict):
                out[fn["name"]] = schema
    return out


def _declared(request: dict[str, Any]) -> set[object] | None:
    """The names the request's tools declare, as sent (JSON values: a name that is not a string is kept as it is)."""
    tools = request.get("tools")
    if not tools:
        return None
    # Chat nests the name under `function`; Responses and Messages tools carry it at the top.
    return {(t.get("function") or t).get("name") for t in tools if isinstance(t, dict)}


def id_style(call_id: str, name: str | None) -> str:
    """The shape of a tool-call id ('call_<hex>', 'functions.NAME:<n>'...): models copy ids from history, so a changed shape matters."""
    s = call_id.replace(name, "NAME") if name else call_id
    # Whole alphanumeric runs only: a random id (llama-server's 32 letters and digits) holds hex-looking pieces
    # by chance, and classifying the pieces gave every response its own "shape" (a false format change).
    s = re.sub(r"[A-Za-z0-9]+", _run_style, s)
    return re.sub(r"\d+", "<n>", s)


def _run_style(m: re.Match[str]) -> str:
    run = m.group(0)
    if len(run) >= 6 and re.fullmatch(r"[0-9a-fA-F]+", run):
        return "<hex>"
    return "<id>" if len(run) >= 16 else run


def check(request: dict[str, Any], p: Parsed, mode: str) -> list[Finding]:
    """All envelope findings for one response, in a fixed order (verdicts name the first). Pure."""
    f: list[Finding] = []
    if p.extra.json_too_deep:
        # First, so it names the verdict: the response nests JSON past the limit (a hostile or broken server).
        f.append(Finding("json_too_deep", str(p.extra.json_too_deep)))
    if p.extra.json_too_large:
        f.append(Finding("json_too_large", str(p.extra.json_too_large)))
    # Typed a list, but a surface's parser hands on what the server sent: anything else is a finding.
    sent: object = p.tool_calls
    if sent is not None and not isinstance(sent, list):
        f.append(Finding("tool_calls_not_list", type(sent).__name__))
    calls: list[Any] = sent if isinstance(sent, list) else []
    f += _tool_call_findings(request, calls)
    if p.extra.index_collisions:
        f.append(Finding("stream_index_collision", f"indexes {p.extra.index_collisions}"))
    f += _finish_findings(request, p, calls)
    markup = tool_markup(p)  # searched once: the text findings name it, and it answers a forced call's absence
    f += _text_findings(p, calls, markup)
    f += _tool_choice_findings(request, p, calls, markup)
    f += _usage_and_logprob_findings(p)
    f += _usage_accounting_findings(p)
    f += _logprob_range_findings(p)
    if request.get("logprobs") is True and not p.logprobs and (p.content or "").strip():
        f.append(Finding("logprobs_ignored", "logprobs asked for, none returned"))
    f += _greedy_findings(request, p)
    if p.extra.bad_chunks:
        f.append(Finding("stream_chunk_invalid_json", str(p.extra.bad_chunks)))
    if p.extra.stream_ignored:
        f.append(Finding("stream_ignored", str(p.extra.stream_ignored)))
    if p.extra.stream_done_missing:
        f.append(Finding("stream_done_missing", "the stream ended after its finish chunk without data: [DONE]"))
    detok = detokenize_mismatch(p)
    if detok:
        f.append(Finding("detokenize_mismatch", detok))
    return f + contract_surfaces.check(request, p, mode)


def _tool_call_findings(request: dict[str, Any], calls: list[Any]) -> list[Finding]:
    f: list[Finding] = []
    declared = _declared(request)
    schemas = _declared_schemas(request)
    seen_ids: set[str] = set()
    for c in calls:
        fn = (c or {}).get("function") or {}
        args = fn.get("arguments")
        name: Any = fn.get("name")  # the server's JSON value, whatever its type
        if not isinstance(args, str):
            f.append(Finding("tool_args_not_string", f"{name}: {type(args).__name__}"))
        else:
            try:
                val = loads_bounded(args) if args.strip() else {}
            except TooDeep:
                f.append(Finding("json_too_deep", f"{name}: tool arguments"))
                val = {}
            except ValueError:
                f.append(Finding("tool_args_invalid_json", f"{name}: {args[:120]}"))
            else:
                if not isinstance(val, dict):
                    f.append(Finding("tool_args_not_object", f"{name}: {type(val).__name__}"))
                elif isinstance(schemas.get(name), dict):
                    errors = argument_errors(val, schemas[name])
                    if errors:
                        f.append(Finding("tool_args_schema_violation", f"{name}: {'; '.join(errors[:3])}"))
        if declared is not None and name not in declared:
            f.append(Finding("tool_name_undeclared", str(name)[:80]))
        cid = (c or {}).get("id")
        if not cid:
            f.append(Finding("tool_call_id_missing", str(name)))
        elif cid in seen_ids:
            f.append(Finding("tool_call_id_duplicate", cid))
        else:
            seen_ids.add(cid)
    return f


def _finish_findings(request: dict[str, Any], p: Parsed, calls: list[Any]) -> list[Finding]:
    f: list[Finding] = []
    fr = p.finish_reason
    if fr is None:
        f.append(Finding("finish_reason_missing"))
    elif fr == "tool_calls" and not calls:
        f.append(Finding("finish_reason_tool_calls_without_calls"))
    elif calls and fr not in ("tool_calls", "length"):
        # llama.cpp and vLLM both say tool_calls; `stop` with calls is a parser or assembly bug.
        f.append(Finding("finish_reason_mismatch", f"{fr} with {len(calls)} tool call(s)"))
    max_tokens = request.get("max_tokens") or request.get("max_completion_tokens") or request.get("max_output_tokens")
    if fr == "length" and isinstance(max_tokens, int) and isinstance(p.completion_tokens, int) \
            and p.completion_tokens < max_tokens * CAP_FRACTION:
        # Cut for length well below the limit the request set: a server or gateway default capped the output
        # (a parameter-handling fault; an engine cut at the request's limit reports that limit). A context window
        # filled first is the other way to get here; that shows on the golden's same sample too.
        f.append(Finding("output_capped", f"length after {p.completion_tokens} of {max_tokens} tokens"))
    return f


CAP_FRACTION = 0.9
"""`length` below this share of the request's max_tokens is a cap (an engine cut at the limit reports the limit;
the margin is for servers counting a stop or reasoning token differently)."""


def tool_markup(p: Parsed) -> dict[str, str]:
    """Tool-call markup the model wrote as text, per field (`content`, `reasoning`): the first match in each. One
    search of each text, which both `_text_findings` and `_tool_choice_findings` read (the texts may be long)."""
    found: dict[str, str] = {}
    for field_name, text in (("content", p.content), ("reasoning", p.reasoning)):
        if text and (m := MARKUP.search(text)):
            found[field_name] = m.group(0)
    return found


def _text_findings(p: Parsed, calls: list[Any], markup: dict[str, str]) -> list[Finding]:
    """`markup`: tool_markup(p)."""
    f: list[Finding] = []
    fr = p.finish_reason
    for field_name, text in (("content", p.content), ("reasoning", p.reasoning)):
        if field_name in markup:
            f.append(Finding("tool_markup_in_content", f"{field_name}: {markup[field_name]}"))
        if text and (special := SPECIAL_TOKEN.search(text)):
            f.append(Finding("stop_token_in_content", f"{field_name}: {special.group(0)}"))
    if p.content and (think := THINK.search(p.content)):
        f.append(Finding("reasoning_in_content", think.group(0)))
    if not (p.content or "").strip() and not calls:
        if (p.reasoning or "").strip() and fr != "length":
            f.append(Finding("answer_in_reasoning", (p.reasoning or "")[-120:]))
        elif not (p.reasoning or "").strip() and fr != "length":
            f.append(Finding("empty_response"))
    return f


def forces_a_call(request: dict[str, Any]) -> str | None:
    """The tool_choice of a request that demands a call, as sent (chat and Responses "required" or a named function,
    Messages "any" or "tool"); None when the model may answer without one."""
    tc = request.get("tool_choice")
    if tc == "required":
        return "required"
    if isinstance(tc, dict):
        function = tc.get("function")
        fn: dict[str, Any] = function if isinstance(function, dict) else tc
        if tc.get("type") in ("function", "tool") or isinstance(tc.get("function"), dict):
            return f"function {str(fn.get('name'))[:80]}"
        if tc.get("type") == "any":
            return "any"
    return None


def _tool_choice_findings(request: dict[str, Any], p: Parsed, calls: list[Any], markup: dict[str, str]) -> list[Finding]:
    """A request whose tool_choice forces a call answered without one: the contract the client relies on (it sent
    `required` so that it gets a call) is broken whatever the model wrote, so the answer is unusable as sent. An
    output cut for length may have been cut inside the call, and says so itself. `markup`: tool_markup(p), the
    search `_text_findings` reported from."""
    forced = forces_a_call(request)
    if forced is None or calls or p.finish_reason == "length" or not request.get("tools"):
        return []
    if markup:
        return []  # the model wrote the call in its tool-call markup and the parser let it through: tool_markup_in_content
    said = (p.content or "").strip()
    return [Finding("tool_choice_unmet", f"tool_choice {forced}, no tool call" + (f"; text: {said[:80]}" if said else ""))]


CACHED_PATHS = (("prompt_tokens", "prompt_tokens_details"), ("input_tokens", "input_tokens_details"))
"""Where chat (prompt_tokens_details) and Responses (input_tokens_details) report cached_tokens, beside the prompt
count they are a part of. Messages reports cache_read_input_tokens apart from input_tokens (the sum is the prompt), so
it can never exceed it there."""


def _usage_accounting_findings(p: Parsed) -> list[Finding]:
    """Cached tokens are a part of the prompt: more of them than the prompt has is an accounting fault (a prefix cache
    counting blocks twice); and a stream's usage is one object, or running counts that agree (a second usage chunk
    that adds or changes the prompt's figures leaves a client with whichever it read)."""
    f: list[Finding] = []
    u = p.usage or {}
    for total_key, details_key in CACHED_PATHS:
        total, details = u.get(total_key), u.get(details_key)
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if is_finite_number(total) and is_finite_number(cached) and not isinstance(cached, bool) and cached > total:
            f.append(Finding("cached_tokens_exceed_prompt", f"cached_tokens {cached} > {total_key} {total}"))
    if p.extra.usage_split:
        f.append(Finding("usage_split_across_chunks", p.extra.usage_split))
    return f


def _usage_and_logprob_findings(p: Parsed) -> list[Finding]:
    f: list[Finding] = []
    if p.usage is None:
        f.append(Finding("usage_missing"))
    if p.extra.usage_non_finite:
        f.append(Finding("usage_non_finite", str(p.extra.usage_non_finite)))
    if p.logprobs:
        bad = sum(1 for t in p.logprobs if isinstance(t, dict) and isinstance(t.get("logprob"), float)
                  and not is_finite_number(t["logprob"]))
        if bad:
            # NaN/Infinity logprobs: the numerics cannot be measured, which must not read as clean drift.
            f.append(Finding("logprobs_non_finite", f"{bad} of {len(p.logprobs)} tokens"))
    for field_name, text in (("content", p.content), ("reasoning", p.reasoning)):
        if text and "\ufffd" in text:
            # U+FFFD: a detokenizer split a multi-byte character (garbled stream text).
            f.append(Finding("replacement_char", field_name))
    return f


def _logprob_range_findings(p: Parsed) -> list[Finding]:
    """A logprob is log(p) <= 0: a value above 0 (a probability, or a processed score, in the logprob field) is
    a reporting fault whatever the model. The tolerance covers float rounding of log(1)."""
    values = [t.get("logprob") for t in p.logprobs or [] if isinstance(t, dict)]
    values += [x.get("logprob") for t in p.logprobs or [] if isinstance(t, dict)
               for x in (t.get("top_logprobs") or []) if isinstance(x, dict)]
    above = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and is_finite_number(v)
             and v > LOGPROB_TOLERANCE]
    return [Finding("logprob_positive", f"{len(above)} logprob(s) above 0, e.g. {max(above):.4g}")] if above else []


LOGPROB_TOLERANCE = 1e-4


# The JSON types a declared parameter type admits. BFCL's schemas say `dict`, `float`, `tuple`, `any`; an unknown
# type name is not checked (a schema we cannot read is no evidence).
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "float": (int, float), "boolean": (bool,),
    "object": (dict,), "dict": (dict,), "array": (list,), "tuple": (list,), "null": (type(None),),
}
MAX_SCHEMA_DEPTH = 8


def argument_errors(value: Any, schema: Any, depth: int = 0, path: str = "") -> list[str]:
    """What in a tool call's arguments breaks its declared parameter schema: types, required properties, enum
    (nested properties and array items too, to MAX_SCHEMA_DEPTH). Pure and bounded; nothing else of JSON Schema
    (a $ref, a combinator) is read, so the answer is never a false error. One function, so a fuller bounded
    validator can replace it."""
    if depth > MAX_SCHEMA_DEPTH or not isinstance(schema, dict):
        return []
    errors: list[str] = []
    where = path or "arguments"
    declared = schema.get("type")
    names = [declared] if isinstance(declared, str) else [t for t in declared if isinstance(t, str)] if isinstance(declared, list) else []
    known = [n for n in names if n in _TYPES]
    if known and len(known) == len(names):
        ok = False
        for n in known:
            types = _TYPES[n]
            if isinstance(value, bool) and bool not in types:
                continue  # JSON true is no integer
            if isinstance(value, types) or (n == "integer" and isinstance(value, float) and value.is_integer()):
                ok = True
        if not ok:
            return [f"{where}: {type(value).__name__} {str(json_preview(value))} where {'/'.join(names)} is declared"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        errors.append(f"{where}: {json_preview(value)} not in enum")
    if isinstance(value, dict):
        properties = schema.get("properties")
        props: dict[str, Any] = properties if isinstance(properties, dict) else {}
        for k in schema.get("required") or []:
            if isinstance(k, str) and k not in value:
                errors.append(f"{where}: required {k!r} missing")
        for k, v in value.items():
            if k in props:
                errors += argument_errors(v, props[k], depth + 1, f"{path}.{k}" if path else k)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value[:100]):
            errors += argument_errors(v, schema["items"], depth + 1, f"{where}[{i}]")
    return errors


def json_preview(value: Any) -> str:
    s = repr(value)
    return s if len(s) <= 40 else s[:39] + "…"


def _greedy_findings(request: dict[str, Any], p: Parsed) -> list[Finding]:
    constrained = bool(request.get("response_format") or request.get("tools") or request.get("text") or request.get("output_format"))
    # Under a grammar (response_format, tools) top_logprobs are the unconstrained ranking, so the
    # chosen token may rightly be a lower one: the check only holds for free decoding.
    if request.get("temperature") != 0 or not p.logprobs or constrained:
        return []
    # Greedy decoding always takes the top token. A lower-ranked choice at temperature 0 means the
    # sampling parameters were not applied: a frontend fault that no weight change can produce.
    for i, t in enumerate(p.logprobs):
        tops = [x.get("logprob") for x in (t.get("top_logprobs") or []) if isinstance(x.get("logprob"), (int, float))]
        if tops and isinstance(t.get("logprob"), (int, float)) and t["logprob"] < max(tops) - 1e-3:
            return [Finding("non_greedy_token", f"token {i} {t.get('token')!r}: {t['logprob']:.3f} < top {max(tops):.3f}")]
    return []


def visible_tokens(tokens: list[str]) -> list[str]:
    """Logprob token strings as text: whole special tokens (a stop token listed last, a BOS first) and the
    empty end-of-generation token dropped. Benign engine differences: the content rightly omits them."""
    return [t for t in tokens if t and not SPECIAL_TOKEN_WHOLE.fullmatch(t)]


def comparable(logprobs: list[list[Any]] | None) -> list[tuple[int, Any, Any]]:
    """(position, token, logprob) of the generated tokens two engines can be compared on: special tokens (a listed
    stop token, llama.cpp's "" end of generation) left out, byte-level markers read as the text they stand for."""
    out = []
    for i, pair in enumerate(logprobs or []):
        t, lp = pair[0], pair[1]
        if isinstance(t, str):
            if not t or SPECIAL_TOKEN_WHOLE.fullmatch(t):
                continue
            t = t.translate(BYTE_MARKERS)
        out.append((i, t, lp))
    return out


def detokenize_mismatch(p: Parsed) -> str | None:
    """Where logprobs are returned, their tokens must spell the content: a difference is the detokenizer's or
    a post-processing step's doing (the model generated those tokens). None when it holds or cannot be judged.

    Accepted as benign (engines legitimately differ): special tokens listed among the logprob tokens, raw
    byte-level markers (Ġ, Ċ, ▁) in token strings, reasoning tokens listed first, trailing whitespace."""
    listed = [t.get("token") for t in p.logprobs or [] if isinstance(t, dict)]
    content = p.content or ""
    if not listed or p.tool_calls or not all(isinstance(t, str) for t in listed):
        return None
    toks = [t for t in listed if isinstance(t, str)]  # all of them (checked just above)
    if any(t.startswith("bytes:") for t in toks):
        return None  # vLLM's spelling of a byte-fallback piece: it cannot spell a character by itself
    text = "".join(visible_tokens(toks))
    content = SPECIAL_TOKEN.sub("", content)  # a stop token left in the content is stop_token_in_content's finding
    if "\ufffd" in text:
        return None  # byte-level tokens that split a character: their strings cannot spell it
    if not content.strip():
        if text.strip() and not (p.reasoning or "").strip():
            # The model generated text and the client got none: the answer was lost after generation.
            return f"content empty, tokens spell {text.strip()[:40]!r}"
        return None
    # Reasoning tokens may come first (some servers list every generated token); trailing space is cosmetic.
    for spelled in (text, text.translate(BYTE_MARKERS)):
        if spelled.rstrip().endswith(content.rstrip()):
            return None
    i = next((k for k, (a, b) in enumerate(zip(text, content)) if a != b), min(len(text), len(content)))
    return f"at char {i}: tokens {text[max(0, i - 10):i + 20]!r} vs content {content[max(0, i - 10):i + 20]!r}"


def blocking(findings: list[Finding] | tuple[Finding, ...]) -> bool:
    return any(x.code in BLOCKING for x in findings)
