"""Argument groups shared by several commands, and the one place a Namespace becomes a spec.

Cheap on purpose: only argparse and the app's spec classes (which import nothing heavy at module level).
"""

from __future__ import annotations

import argparse
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..errors import UsageError
import verifier.cli.types as T
from .. import jsonsafe

if TYPE_CHECKING:
    from verifier.app.collect import EndpointSpec, RunSpec
    from verifier.app.spec import GateOptions
    from verifier.attribution.document import Comparison

from ..surfaces.registry import MODES as MODE_NAMES, REFERENCE_MODE  # the registry is pure Python: --help stays cheap


def add_endpoint_args(p: argparse.ArgumentParser, required: bool = True, url_from_env: bool = True,
                      unset: bool = False) -> None:
    """`url_from_env=False` where --base-url is an action of its own (calibrate: make reruns), not a setting.
    `unset=True` (gate): no defaults at all, every flag not given is None, so the command can merge the flags over a
    gate file and the environment as values (app/spec.py); the defaults are filled after the merge."""
    # Environment defaults (docs/reference/cli.md "Environment"): flags win. OPENAI_BASE_URL as the openai SDK reads it;
    # string defaults go through `type`, so a bad VERIFIER_* value is argparse's usual exit-2 error.
    env = (lambda name, default=None: None) if unset else os.environ.get
    dflt = (lambda value: None) if unset else (lambda value: value)
    base_url = env("OPENAI_BASE_URL") if url_from_env else None
    g = p.add_argument_group("endpoint")
    g.add_argument("--base-url", required=required and not base_url, default=base_url,
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1" + (" (default $OPENAI_BASE_URL)" if url_from_env else ""))
    g.add_argument("--model", required=required and not env("VERIFIER_MODEL"), default=env("VERIFIER_MODEL"),
                   help="model name sent in every request (default $VERIFIER_MODEL)")
    g.add_argument("--api-key-env", type=_api_key_env, default=dflt(env("VERIFIER_API_KEY_ENV", "OPENAI_API_KEY")), help="name of the environment variable holding the API key (default OPENAI_API_KEY; the key is never written anywhere)")
    g.add_argument("--header", action="append", metavar="'NAME: VALUE'", help="extra HTTP header (repeatable); values are never written")
    g.add_argument("--extra-body", metavar="JSON|@FILE", help="JSON object merged into every request body, e.g. '{\"chat_template_kwargs\": {\"enable_thinking\": false}}'")
    g.add_argument("--concurrency", type=T.positive_int, default=dflt(env("VERIFIER_CONCURRENCY")),
                   help="requests in flight (default $VERIFIER_CONCURRENCY, else the resumed run's or the golden's, else 8)")
    g.add_argument("--timeout", type=T.positive_float, default=dflt(env("VERIFIER_TIMEOUT", 600.0)), help="per-request timeout, seconds (default 600, or $VERIFIER_TIMEOUT)")
    g.add_argument("--max-retries", type=T.nonneg_int, default=dflt(env("VERIFIER_MAX_RETRIES", 3)), help="retries on 429/5xx/connect/read errors (default 3, or $VERIFIER_MAX_RETRIES)")
    g.add_argument("--max-response-mb", type=T.positive_float, default=dflt(64.0), help="cap on one response's decoded size, MiB (default 64)")
    g.add_argument("--max-stream-events", type=T.positive_int, default=dflt(250_000), help="cap on the events of one streamed response; past it the stream is cut and judged `stream_too_many_events` (default 250000)")
    g.add_argument("--request-deadline", type=T.positive_float, help="total seconds per request, retries and whole stream included (default 10 x --timeout)")
    g.add_argument("--no-model-check", dest="model_check", action="store_false", default=dflt(True),
                   help="send --model even when the server's /v1/models does not list it (gateways that alias names)")
    g.add_argument("--info-deadline", type=T.positive_float, default=dflt(10.0), help="total seconds for the start-up /models, /props, /version calls (default 10)")
    from verifier.wire.serving_adapters import ADAPTERS  # a plain dict of pure functions: --help stays cheap

    g.add_argument("--serving-adapter", choices=sorted(ADAPTERS), metavar="NAME",
                   help="apply this request rewrite in front of --base-url to every chat-completions request and record it "
                        f"in run.json (a golden recorded behind one is gated behind the same); one of {', '.join(sorted(ADAPTERS))} "
                        "(docs/engines.md, 'Tool calls')")
    s = p.add_argument_group("sampling (override suite defaults)")
    s.add_argument("--temperature", type=T.finite_float)
    s.add_argument("--top-p", dest="top_p", type=T.finite_float)
    s.add_argument("--max-tokens", dest="max_tokens", type=T.positive_int)
    s.add_argument("--seed", type=int)
    s.add_argument("--logprobs", type=T.nonneg_int, metavar="N", help="request logprobs with N top alternatives (feeds the logprob-drift signal)")


def _api_key_env(text: str) -> str:
    """--api-key-env takes a variable's name; a key given there is refused and never echoed or written."""
    from verifier.app.spec import api_key_env

    try:
        return api_key_env(text, "--api-key-env")
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--api-key-env: ")) from None


def options_from_env(environ: Mapping[str, str] | None = None) -> GateOptions:
    """The endpoint settings the environment gives (docs/reference/cli.md, "Environment"): below a gate file and the flags."""
    from verifier.app.spec import GateOptions, api_key_env

    env = os.environ if environ is None else environ

    def conv(name: str, fn: Any) -> Any:
        if not env.get(name):
            return None
        try:
            return fn(env[name])
        except (TypeError, ValueError, argparse.ArgumentTypeError) as e:
            raise UsageError(f"${name}: {e}") from None

    return GateOptions(base_url=env.get("OPENAI_BASE_URL") or None, model=env.get("VERIFIER_MODEL") or None,
                       api_key_env=conv("VERIFIER_API_KEY_ENV", lambda v: api_key_env(v, "$VERIFIER_API_KEY_ENV")),
                       concurrency=conv("VERIFIER_CONCURRENCY", T.positive_int), timeout_s=conv("VERIFIER_TIMEOUT", T.positive_float),
                       max_retries=conv("VERIFIER_MAX_RETRIES", T.nonneg_int))


def add_selection_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default=None, action=T.CommaList, help="comma-separated suite names (see list-suites)")
    p.add_argument("--data", help="local dataset path overriding the suites' default source; per suite: bfcl=DIR,gsm8k=FILE")
    p.add_argument("--smoke", action="store_true", help="use each suite's built-in ~20-item smoke subset")
    p.add_argument("--limit", type=T.positive_int, help="first N samples (after --sample-seed shuffling)")
    p.add_argument("--sample-seed", type=int, help="shuffle samples with this seed before --limit")
    p.add_argument("--shard", metavar="I/N", help="run every N-th sample starting at the I-th (1-based), after --sample-seed/--limit; join shards with `verifier merge`")
    p.add_argument("--epochs", type=T.positive_int, default=1, help="repeat every sample N times (default 1)")
    p.add_argument("--mode", default=None, action=T.CommaList, help=f"comma-separated wire modes: {', '.join(MODE_NAMES)} (default chat); "
                   "completions = the dual path: the chat template rendered client-side, sent to /v1/completions")
    p.add_argument("--chat-template", metavar="FILE", help="jinja chat template for the completions mode (default: the one the server reports in /props)")


def names(text: str | None) -> tuple[str, ...]:
    """A comma-separated flag value (a repeated flag's values joined by cli/types.CommaList) -> its non-empty items,
    stripped, each once in order (`--mode chat --mode chat` runs chat once)."""
    return tuple(dict.fromkeys(x.strip() for x in (text or "").split(",") if x.strip()))


def parse_extra_body(text: str | None) -> dict[str, Any]:
    if not text:
        return {}
    if text.startswith("@"):
        try:
            text = Path(text[1:]).read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--extra-body: cannot read {text[1:]}: {e.strerror}") from None
    try:
        val = jsonsafe.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--extra-body is not valid JSON: {e.msg} at position {e.pos}") from None
    if not isinstance(val, dict):
        raise UsageError("--extra-body must be a JSON object")
    return val


def parse_headers(items: list[str] | None) -> dict[str, str]:
    out = {}
    for h in items or []:
        # Never echo what was given: a header without its name is usually a bare credential ('Bearer sk-...').
        if ":" not in h:
            raise UsageError("--header must look like 'Name: value' (one was given without a name and colon)")
        k, v = h.split(":", 1)
        if not k.strip() or not re.fullmatch(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+", k.strip()):
            raise UsageError("--header must look like 'Name: value' (a header name is letters, digits and -_.!#$%&'*+^`|~)")
        out[k.strip()] = v.strip()
    return out


def endpoint_from_args(a: argparse.Namespace) -> EndpointSpec:
    from verifier.app.collect import EndpointSpec

    return EndpointSpec(base_url=a.base_url, model=a.model, api_key_env=a.api_key_env, headers=parse_headers(a.header),
                        concurrency=a.concurrency, timeout_s=a.timeout, max_retries=a.max_retries,
                        max_response_bytes=int(a.max_response_mb * 2**20), max_stream_events=a.max_stream_events, request_deadline_s=a.request_deadline,
                        info_deadline_s=a.info_deadline, model_check=a.model_check, serving_adapter=a.serving_adapter)


def overrides_from_args(a: argparse.Namespace) -> dict[str, Any]:
    """The sampling flags the user set (unset ones leave the suite's or the golden's values)."""
    from verifier.app.spec import sampling

    return sampling(a.temperature, a.top_p, a.max_tokens, a.seed, a.logprobs)


def run_spec_from_args(a: argparse.Namespace) -> RunSpec:
    """`verifier run` flags -> RunSpec (the CLI's half of RunSpec.from_args)."""
    from verifier.app.collect import RunSpec

    suite, data = (a.suite, a.data) if not a.requests else ("replay", a.requests)
    return RunSpec(
        endpoint=endpoint_from_args(a),
        suites=names(suite),
        # On --resume an omitted --mode/--extra-body means the run's own (app refuses one that differs).
        modes=names(a.mode or ("" if a.resume else REFERENCE_MODE)),
        overrides=overrides_from_args(a), extra_body=parse_extra_body(a.extra_body),
        data=data, smoke=a.smoke, limit=a.limit, sample_seed=a.sample_seed, shard=a.shard, epochs=a.epochs,
        chat_template=a.chat_template, out=Path(a.out) if a.out else None, resume=Path(a.resume) if a.resume else None,
        probes=a.probes, quiet=a.quiet, context_probe=getattr(a, "context_probe", False),
        force=bool(getattr(a, "force", False)),
    )


def exit_code(doc: "Comparison", allow_inconclusive: bool) -> int:
    if doc.status == "inconclusive" and allow_inconclusive:
        return 0
    return int(doc.exit_code)


def add_teacher_forcing_args(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """--teacher-forcing and --forced-positions (gate, calibrate): the pass that measures the numerics on the golden's tokens."""
    from verifier.execution.teacher_forcing import CHOICES, DEFAULT_POSITIONS

    p.add_argument("--teacher-forcing", choices=CHOICES, default=default,
                   help="measure the candidate's distribution on the golden's own tokens after the samples: auto (gate's "
                        "default) detects prompt_logprobs, echo or prefill where the golden holds teacher-forced margins; on "
                        "(calibrate's default) measures whatever the golden holds; off skips the pass; a method name insists on it")
    p.add_argument("--forced-positions", type=T.positive_int, metavar="K",
                   help=f"with the prefill method: positions per sample (default {DEFAULT_POSITIONS})")


def add_resend_arg(p: argparse.ArgumentParser) -> None:
    """--resend N (gate, calibrate): the resend step, which reads engine state from repeats of one request."""
    from verifier.execution.resend import DEFAULT_SAMPLES, MAX_SAMPLES

    p.add_argument("--resend", type=T.nonneg_int, metavar="N",
                   help=f"after the samples, send this many greedy requests per suite again, one at a time, to read "
                        f"engine state (a prefix cache, speculative decoding, batching) from how they are answered; "
                        f"only where the golden's records are greedy with logprobs (default {DEFAULT_SAMPLES}, at most "
                        f"{MAX_SAMPLES}; 0: none)")
