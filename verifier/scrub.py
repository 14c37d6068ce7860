"""The process's secrets, and the one redaction pass every file writer goes through.

`verifier.redact.Redactor` knows how to find a secret (whole value, token-like parts, escaped, split across
stream chunks); this module knows which secrets this process holds. They are registered once, where the
endpoint configuration is built (the environment key's value, each `--header` value); `journal.write_json`,
`write_jsonl` and `write_text` (run.json, probes.json, goldens, comparison, reports, CSV, JUnit, Markdown)
then scrub every string they write. The journal's own records go through its Redactor as they are appended.

Offline commands (bless, compare, report, matrix) never saw a `--header`, so they register what they can still
know: the value of the run's `api_key_env` variable (journal.check_run_dir does it for every run read). When the
run header says a credential was sent that this process does not hold (a `--header`, or a key whose variable is
not set here), every token-like string they write is masked as well (`TOKEN_LIKE`): a secret the journal writer
missed cannot be printed by a process that cannot recognise it.
"""

from __future__ import annotations

import os
import re
from typing import Any

from .redact import MASK, MIN_SECRET, Redactor

_secrets: set[str] = set()
_active = Redactor(())
_live_headers: set[str] = set()
_mask_token_like = False

TOKEN_LIKE = re.compile(
    r"(?<![A-Za-z0-9_\-])(?!sha(?:256|384|512)-)(?:"  # not a CSP / integrity hash (`sha256-...`): those are ours
    r"(?:sk|pk|rk|hf|gh[pousr]|xox[abprs]|AKIA|key|tok)[-_][A-Za-z0-9_\-]{12,}"  # the usual key prefixes
    r"|(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*[0-9])[A-Za-z0-9_\-]{20,}"  # mixed-case + digits
    r")")
"""What a credential looks like without knowing it: a known key prefix, or 20+ token characters mixing lower and
upper case and digits. Digests (lower-case hex), run ids and words do not match."""


def register(*secrets: str | None) -> None:
    """Add secrets of this process; every later write is scrubbed of them."""
    global _active
    new = {s for s in secrets if s and len(s.strip()) >= MIN_SECRET} - _secrets
    if new:
        _secrets.update(new)
        _active = Redactor(sorted(_secrets))


def register_endpoint(api_key: str | None, headers: dict[str, str]) -> None:
    """The credentials this process sends: registered as secrets, and their header names known as held."""
    register(api_key, *headers.values())
    _live_headers.update(k.lower() for k in headers)


def register_run(hdr: dict[str, Any]) -> None:
    """A run header read by this process: its key variable's value if set here; token-like masking on when the
    run sent a credential this process does not hold (`endpoint.header_names`, `endpoint.api_key_sent`)."""
    global _mask_token_like
    ep = hdr.get("endpoint") if isinstance(hdr, dict) else None
    if not isinstance(ep, dict):
        return
    env = ep.get("api_key_env") if isinstance(ep.get("api_key_env"), str) else None
    register_env(env)
    names = {str(n).lower() for n in ep.get("header_names") or () if isinstance(n, str)}
    key_unknown = bool(ep.get("api_key_sent")) and not (env and os.environ.get(env))
    if key_unknown or names - _live_headers:
        _mask_token_like = True


def register_env(name: str | None) -> None:
    """The value of environment variable `name`, if it is set here."""
    if name and isinstance(name, str):
        register(os.environ.get(name))


def secrets() -> list[str]:
    """Every secret this process holds (the journal's Redactor is built from them)."""
    return sorted(_secrets)


def reset() -> None:
    """Forget every secret (tests: one process plays several commands)."""
    global _active, _mask_token_like
    _secrets.clear()
    _live_headers.clear()
    _mask_token_like = False
    _active = Redactor(())


def text(s: str) -> str:
    s = _active.text(s)
    return TOKEN_LIKE.sub(MASK, s) if _mask_token_like and isinstance(s, str) else s


def obj(o: Any) -> Any:
    o = _active.obj(o)
    return _token_walk(o, 0) if _mask_token_like else o


def _token_walk(o: Any, depth: int) -> Any:
    if isinstance(o, str):
        return TOKEN_LIKE.sub(MASK, o)
    if depth > 200:
        return o
    if isinstance(o, dict):
        return {_token_walk(k, depth + 1) if isinstance(k, str) else k: _token_walk(v, depth + 1) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_token_walk(v, depth + 1) for v in o]
    return o
