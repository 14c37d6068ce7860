"""The one redaction pass every file writer goes through (run.json, probes.json, goldens, reports, logs).

The secrets of this process (the environment key's value, each `--header` value) are registered once,
where the endpoint configuration is built; `journal.write_json`/`write_jsonl`, the report writers and the
proxy log then scrub every string they write. Offline commands (bless, report, compare) never saw a
`--header`, so they register what they can still know: the value of the run's `api_key_env` variable.

The matching itself is `verifier.redact.Redactor` when present (it also finds split, escaped and bare
tokens); until then a small fallback here masks whole values and their token-like parts.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

MASK = "***"
MIN_SECRET = 4
"""Shorter values are not scrubbed: masking every `ab` would destroy the text, not protect it."""
MIN_PART = 8
_SCHEME = re.compile(r"^(?:bearer|basic|token|apikey|api-key|key)\s+", re.I)
_TOKEN = re.compile(r"[A-Za-z0-9_\-.~+/=]{%d,}" % MIN_PART)


def parts(secret: str) -> set[str]:
    """A secret's whole value plus each token-like part a server may echo on its own (`sk-...` of `Bearer sk-...`)."""
    s = secret.strip()
    out = {s} if len(s) >= MIN_SECRET else set()
    rest = _SCHEME.sub("", s)
    if len(rest) >= MIN_SECRET:
        out.add(rest)
    out.update(_TOKEN.findall(rest))
    return out


class _Fallback:
    """Whole values and token-like parts, literal only (the full Redactor also handles escapes and splits)."""

    def __init__(self, secrets: Iterable[str | None]):
        found: set[str] = set()
        for s in secrets:
            if s:
                found |= parts(s)
        self._re = re.compile("|".join(re.escape(p) for p in sorted(found, key=lambda p: (-len(p), p)))) if found else None

    def text(self, s: str) -> str:
        return self._re.sub(MASK, s) if self._re is not None else s

    def obj(self, o: Any, depth: int = 0) -> Any:
        if self._re is None or depth > 200:
            return o
        if isinstance(o, str):
            return self.text(o)
        if isinstance(o, dict):
            return {self.text(k) if isinstance(k, str) else k: self.obj(v, depth + 1) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [self.obj(v, depth + 1) for v in o]
        return o


def _make(secrets: Iterable[str | None]) -> Any:
    try:  # H16a's redaction layer, when merged: the same API
        from .redact import Redactor
    except ImportError:
        return _Fallback(secrets)
    return Redactor(secrets)


_secrets: set[str] = set()
_active: Any = _Fallback(())


def register(*secrets: str | None) -> None:
    """Add secrets of this process; every later write is scrubbed of them."""
    global _active
    new = {s for s in secrets if s and len(s.strip()) >= MIN_SECRET} - _secrets
    if new:
        _secrets.update(new)
        _active = _make(sorted(_secrets))


def register_env(name: str | None) -> None:
    """Offline commands: the run's key variable, if it is set here, is scrubbed too."""
    if name and isinstance(name, str):
        register(os.environ.get(name))


def reset() -> None:
    """Forget every secret (tests)."""
    global _active
    _secrets.clear()
    _active = _Fallback(())


def text(s: str) -> str:
    return _active.text(s) if _secrets else s


def obj(o: Any) -> Any:
    return _active.obj(o) if _secrets else o
