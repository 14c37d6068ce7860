"""`--resume` continues the run it names, never a different one: a flag that disagrees with run.json is refused.

A journal with half its records from one model and half from another (while run.json names the first)
would be scored and compared as one run. An omitted flag takes the run's own value: sampling (run.json's
`sampling`, planned from the header) and concurrency (`endpoint.concurrency`, `recorded_concurrency`) included; a
different concurrency is allowed (it only changes batching) and said.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from verifier.errors import UsageError
from verifier.redact import credential_values, mask_credentials
from verifier.surfaces.registry import REFERENCE_MODE
from verifier.types import RunHeader

# RunSpec.overrides key -> the flag that sets it.
SAMPLING_FLAGS = {"temperature": "--temperature", "top_p": "--top-p", "max_tokens": "--max-tokens", "seed": "--seed",
                  "logprobs": "--logprobs", "top_logprobs": "--logprobs"}


def _refuse(run_dir: Path, flag: str, given: Any, recorded: Any) -> UsageError:
    return UsageError(f"--resume {run_dir}: {flag} {given!r} differs from the run's {recorded!r} "
                      f"(omit {flag} to continue with the run's value, or start a new run)")


def endpoint_place(url: str) -> tuple[str, str, str]:
    """Scheme, host and path: a local server restarted on another port is the same endpoint (the served
    models are compared once it answers, see `served_models`)."""
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.path.rstrip("/")


def served_models(info: dict[str, Any]) -> list[str] | None:
    """The model ids an endpoint's /v1/models listed, or None when it did not say."""
    models = info.get("models") if isinstance(info, dict) else None
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    return sorted(str(m.get("id")) for m in data if isinstance(m, dict))


def check_same_server(run_dir: Path, recorded: dict[str, Any], now: dict[str, Any]) -> None:
    """On resume, the endpoint must still serve what it served when the run started."""
    a, b = served_models(recorded), served_models(now)
    if a is not None and b is not None and a != b:
        raise UsageError(f"--resume {run_dir}: --base-url now serves models {b}, the run's endpoint served {a}; "
                         "resume against the same endpoint or start a new run")


def mismatches(spec: Any, hdr: RunHeader) -> list[tuple[str, Any, Any]]:
    """`spec` is an app.RunSpec (not imported: app imports this). (flag, given, recorded) for every flag the user set that disagrees with the run header."""
    from verifier.wire.endpoint import redact_url

    out: list[tuple[str, Any, Any]] = []
    ep = hdr.endpoint
    if spec.endpoint.model and spec.endpoint.model != ep.get("model"):
        out.append(("--model", spec.endpoint.model, ep.get("model")))
    if spec.endpoint.base_url and ep.get("base_url") and endpoint_place(redact_url(spec.endpoint.base_url)) != endpoint_place(str(ep["base_url"])):
        out.append(("--base-url", redact_url(spec.endpoint.base_url), ep["base_url"]))
    if spec.suites and sorted(spec.suites) != sorted(hdr.suites):
        out.append(("--suite", ",".join(spec.suites), ",".join(sorted(hdr.suites))))
    modes = hdr.modes or [REFERENCE_MODE]  # a run from before modes were recorded was made on the reference mode
    if spec.modes and list(spec.modes) != list(modes):
        out.append(("--mode", ",".join(spec.modes), ",".join(modes)))
    # Credential values are masked in run.json: compared masked (a resume cannot check a key it never kept).
    if spec.extra_body and mask_credentials(dict(spec.extra_body)) != mask_credentials(hdr.extra_body):
        out.append(("--extra-body", mask_credentials(dict(spec.extra_body)), hdr.extra_body))
    sampling = hdr.sampling
    recorded = {**(sampling.get("defaults") or {}), **(sampling.get("overrides") or {})}
    for k, v in spec.overrides.items():
        if recorded.get(k) != v:
            out.append((SAMPLING_FLAGS.get(k, k), v, recorded.get(k)))
    if spec.epochs != 1 and spec.epochs != hdr.epochs:
        out.append(("--epochs", spec.epochs, hdr.epochs))
    sel = hdr.selection if isinstance(hdr.selection, dict) else {}
    for flag, key, given in (("--limit", "limit", spec.limit), ("--sample-seed", "sample_seed", spec.sample_seed),
                             ("--shard", "shard", spec.shard)):
        if given is not None and given != sel.get(key):
            out.append((flag, given, sel.get(key)))
    if spec.smoke and not sel.get("smoke"):
        out.append(("--smoke", True, bool(sel.get("smoke"))))
    return out


def check_resume(spec: Any, hdr: RunHeader, run_dir: Path) -> None:
    """Raise a UsageError naming the first flag that disagrees with the run being resumed."""
    bad = mismatches(spec, hdr)
    if bad:
        raise _refuse(run_dir, *bad[0])
    if not spec.extra_body and credential_values(hdr.extra_body):
        raise UsageError(f"--resume {run_dir}: run.json masks the credentials in the run's --extra-body; "
                         "pass the same --extra-body again to continue")


MAX_RECORDED_CONCURRENCY = 1024
"""A recorded concurrency above this is not reused: a golden or run.json is untrusted input, and a value it carries
must not open thousands of connections."""


def recorded_concurrency(endpoint: Any, recorded_endpoint: dict[str, Any], what: str) -> Any:
    """`endpoint` (an app.EndpointSpec) with the concurrency a run header's endpoint block (run.json's, or a golden's
    `source.endpoint`) recorded when the user gave none: concurrency changes the batch, and with it greedy outputs on some engines (llama.cpp).
    When the user gave another one, it is kept and said (on stderr), since the outputs may then differ."""
    import dataclasses
    import sys

    recorded = recorded_endpoint.get("concurrency") if isinstance(recorded_endpoint, dict) else None
    if not isinstance(recorded, int) or isinstance(recorded, bool) or not 1 <= recorded <= MAX_RECORDED_CONCURRENCY:
        return endpoint  # a run from before concurrency was recorded (or a header not to be trusted): the default applies
    if endpoint.concurrency is None:
        return dataclasses.replace(endpoint, concurrency=recorded)
    if endpoint.concurrency != recorded:
        print(f"{what}: --concurrency {endpoint.concurrency} differs from the recorded {recorded} "
              "(batching can change an engine's greedy outputs; omit --concurrency to reuse the recorded value)", file=sys.stderr)
    return endpoint


def recorded_adapter(endpoint: Any, recorded: str | None, what: str) -> Any:
    """`endpoint` (an app.EndpointSpec) with the serving adapter the run recorded (`recorded`: RunHeader.serving_adapter):
    a run is finished behind the adapter it was started behind. Another one named is refused (UsageError): the run's
    records would then come from two different deployments."""
    import dataclasses

    given = endpoint.serving_adapter
    if given is not None and given != recorded:
        raise UsageError(f"{what}: the run was recorded behind serving adapter {recorded or 'none'}, not {given}",
                         hints=("omit --serving-adapter: a resume applies the run's own",))
    return dataclasses.replace(endpoint, serving_adapter=recorded)


def resumed_extra_body(spec: Any, hdr: RunHeader) -> dict[str, Any]:
    """The body extras a resume sends: the user's (with the real credentials) when given, else the run's."""
    return dict(spec.extra_body) if spec.extra_body else dict(hdr.extra_body)
