"""The process's secrets, and the one redaction pass every file writer goes through.

`verifier.redact.Redactor` knows how to find a secret (whole value, token-like parts, escaped, split across
stream chunks); this module knows which secrets this process holds. They are registered once, where the
endpoint configuration is built (the environment key's value, each `--header` value); `journal.write_json`,
`write_jsonl` and `write_text` (run.json, probes.json, goldens, comparison, reports, CSV, JUnit, Markdown)
then scrub every string they write. The journal's own records go through its Redactor as they are appended.

Offline commands (bless, compare, report) never saw a `--header`, so they register what they can still
know: the value of the run's `api_key_env` variable (journal.check_run_dir does it for every run read).
"""

from __future__ import annotations

import os
from typing import Any

from .redact import MIN_SECRET, Redactor

_secrets: set[str] = set()
_active = Redactor(())


def register(*secrets: str | None) -> None:
    """Add secrets of this process; every later write is scrubbed of them."""
    global _active
    new = {s for s in secrets if s and len(s.strip()) >= MIN_SECRET} - _secrets
    if new:
        _secrets.update(new)
        _active = Redactor(sorted(_secrets))


def register_env(name: str | None) -> None:
    """The value of environment variable `name`, if it is set here."""
    if name and isinstance(name, str):
        register(os.environ.get(name))


def reset() -> None:
    """Forget every secret (tests: one process plays several commands)."""
    global _active
    _secrets.clear()
    _active = Redactor(())


def text(s: str) -> str:
    return _active.text(s)


def obj(o: Any) -> Any:
    return _active.obj(o)
