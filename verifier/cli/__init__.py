"""The `verifier` command: the top floor. Commands build specs and call verifier.app.collect; nothing below imports this.

`from verifier.cli import main` and the `verifier.cli:entry` script keep working.
"""

from __future__ import annotations

from typing import Any

from .main import build_parser, entry, main

__all__ = ["build_parser", "entry", "main"]


def __getattr__(name: str) -> Any:  # the object an old import path names
    # Old import paths (`from verifier.cli import data_for`, `UsageError`): resolved on use, so importing the
    # package stays cheap.
    if name == "UsageError":
        from ..errors import UsageError

        return UsageError
    if name == "data_for":
        from verifier.app.collect import data_for

        return data_for
    raise AttributeError(name)
