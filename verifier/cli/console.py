"""The console edge: everything verifier prints goes through `printable`.

Model ids from `/v1/models`, sample ids from `--requests`, server error messages and answers reach the
summary lines. A hostile endpoint that puts an ANSI escape or a carriage return in one of them could rewrite
the console (clear the screen, draw a fake "status: pass" over the real line). `main` wraps stdout and stderr
so every write is escaped here; only the progress bar, which is ours, writes raw (through `.raw`).
"""

from __future__ import annotations

import re
from typing import Any

# C0 controls except tab and newline (so CR and ESC too), DEL, C1 controls, and the bidirectional overrides and
# isolates that reorder what a terminal shows ("Trojan source"); and lone surrogates ("\ud800" is valid JSON in an
# answer or a golden's name), which no UTF-8 terminal can be sent: printing one raised UnicodeEncodeError.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def printable(text: str) -> str:
    """`text` with every control character and lone surrogate written as a visible escape (`\\x1b`, `\\r`, `\\u202e`,
    `\\ud800`)."""
    return _CONTROL.sub(_escape, text) if isinstance(text, str) else text


class Printable:
    """A text stream whose writes go through `printable`; `.raw` is the stream itself."""

    def __init__(self, stream: Any):
        self.raw = stream

    def write(self, text: str) -> int:
        self.raw.write(printable(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)
