"""Each command's secrets, and the one redaction pass every file writer goes through.

`verifier.redact.Redactor` knows how to find a secret (whole value, token-like parts, escaped, split across
stream chunks); a `Secrets` value knows which secrets one command holds. The CLI runs each command inside
`scrub.command()`, which gives it a fresh `Secrets` (held in a context variable: the command's asyncio tasks share
it, another thread does not see it, and nothing outlives the command). Secrets are registered where the endpoint
configuration is built (the environment key's value, each `--header` value); `safewrite.write_json`, `write_jsonl`
and `write_text` (run.json, probes.json, goldens, comparison, reports, CSV, JUnit, Markdown) then scrub every
string they write with the current command's. The journal's own records go through its Redactor as they are
appended. `gate` with several endpoints runs each gate in its own thread under its own `command()` and adds each
one's secrets to its own before it writes the matrix (`adopt`).

Offline commands (bless, compare, report, matrix, score, merge) never saw a `--header`, so they register what they
can still know of the run they write from: `register_run(header.endpoint)` (the value of the run's `api_key_env` variable).
Reading a run registers nothing: the command that writes from it says so. When the run header says a credential
was sent that this command does not hold (a `--header`, or a key whose variable is not set here), every
token-like string it writes is masked as well (`TOKEN_LIKE`): a secret the journal writer missed cannot be printed
by a process that cannot recognise it.

The Python API's run, compare and gate each run inside `command()` as well. Code outside any command (a test
calling the application directly) uses one fallback `Secrets` for the process; `reset()` empties it.
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import re
from typing import Any, Iterator

from .redact import MASK, MIN_SECRET, Redactor

TOKEN_LIKE = re.compile(
    r"(?<![A-Za-z0-9_\-])(?!sha(?:256|384|512)-)(?:"  # not a CSP / integrity hash (`sha256-...`): those are ours
    r"(?:sk|pk|rk|hf|gh[pousr]|xox[abprs]|AKIA|key|tok)[-_][A-Za-z0-9_\-]{12,}"  # the usual key prefixes
    r"|(?=[A-Za-z0-9_\-]*[a-z])(?=[A-Za-z0-9_\-]*[A-Z])(?=[A-Za-z0-9_\-]*[0-9])[A-Za-z0-9_\-]{20,}"  # mixed-case + digits
    r")")
"""What a credential looks like without knowing it: a known key prefix, or 20+ token characters mixing lower and
upper case and digits. Digests (lower-case hex), run ids and words do not match."""


class Secrets:
    """The secrets of one command, and its redaction of what it writes (`text`, `obj`)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._live_headers: set[str] = set()
        self.mask_token_like = False
        self._redactor = Redactor(())

    def register(self, *secrets: str | None) -> None:
        """Add secrets; every later write of this command is scrubbed of them."""
        new = {s for s in secrets if s and len(s.strip()) >= MIN_SECRET} - self._values
        if new:
            self._values.update(new)
            self._redactor = Redactor(sorted(self._values))

    def register_endpoint(self, api_key: str | None, headers: dict[str, str]) -> None:
        """The credentials this command sends: registered as secrets, and their header names known as held."""
        self.register(api_key, *headers.values())
        self._live_headers.update(k.lower() for k in headers)

    def register_env(self, name: str | None) -> None:
        """The value of environment variable `name`, if it is set here."""
        if name and isinstance(name, str):
            self.register(os.environ.get(name))

    def register_run(self, endpoint: Any) -> None:
        """A run this command writes from, by its header's `endpoint` block (RunHeader.endpoint; anything but an
        object registers nothing): its key variable's value if set here; token-like masking on when the run sent a
        credential this command does not hold (`header_names`, `api_key_sent`)."""
        ep = endpoint
        if not isinstance(ep, dict):
            return
        env = ep.get("api_key_env") if isinstance(ep.get("api_key_env"), str) else None
        self.register_env(env)
        names = {str(n).lower() for n in ep.get("header_names") or () if isinstance(n, str)}
        key_unknown = bool(ep.get("api_key_sent")) and not (env and os.environ.get(env))
        if key_unknown or names - self._live_headers:
            self.mask_token_like = True

    def adopt(self, other: "Secrets") -> None:
        """Everything `other` (another thread's command) holds, added to this one."""
        self.register(*other._values)
        self._live_headers.update(other._live_headers)
        self.mask_token_like = self.mask_token_like or other.mask_token_like

    def secrets(self) -> list[str]:
        return sorted(self._values)

    def text(self, s: str) -> str:
        s = self._redactor.text(s)
        return TOKEN_LIKE.sub(MASK, s) if self.mask_token_like and isinstance(s, str) else s

    def untouched(self, line: str) -> bool:
        """Whether `obj` would leave the value this JSON line encodes unchanged (Redactor.untouched); never when
        token-like strings are masked too (a lookbehind does not see a string's edge inside an encoded line)."""
        return not self.mask_token_like and self._redactor.untouched(line)

    def obj(self, o: Any) -> Any:
        o = self._redactor.obj(o)
        return _token_walk(o, 0) if self.mask_token_like else o


_FALLBACK = Secrets()
_current: contextvars.ContextVar[Secrets | None] = contextvars.ContextVar("verifier_secrets", default=None)


def current() -> Secrets:
    """The running command's secrets (the process fallback outside any command)."""
    s = _current.get()
    return s if s is not None else _FALLBACK


@contextlib.contextmanager
def command() -> Iterator[Secrets]:
    """Run one command with secrets of its own: nothing registered inside outlives it or reaches another thread."""
    mine = Secrets()
    token = _current.set(mine)
    try:
        yield mine
    finally:
        _current.reset(token)


def register(*secrets: str | None) -> None:
    current().register(*secrets)


def register_endpoint(api_key: str | None, headers: dict[str, str]) -> None:
    current().register_endpoint(api_key, headers)


def register_run(endpoint: Any) -> None:
    current().register_run(endpoint)


def register_env(name: str | None) -> None:
    current().register_env(name)


def secrets() -> list[str]:
    """Every secret the running command holds (the journal's Redactor is built from them)."""
    return current().secrets()


def reset() -> None:
    """Forget every secret of the process fallback (tests call the application outside a command)."""
    global _FALLBACK
    _FALLBACK = Secrets()


def text(s: str) -> str:
    return current().text(s)


def obj(o: Any) -> Any:
    return current().obj(o)


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
