"""BFCL's long-context padding (the `long_context` category): read once from data/long_context.json.

The padding is BFCL's own data (Apache-2.0), kept verbatim because the long_context ground truth quotes it: a
ground-truth `post_tweet` carries the padded file content, `du` sizes include it, `ls` lists the padding files.
Callers get copies, so a simulator mutating its state never alters the shared constants.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._base import copy_json

DATA_FILE = Path(__file__).parent / "data" / "long_context.json"


@lru_cache(maxsize=1)
def _constants() -> dict[str, Any]:
    with open(DATA_FILE, encoding="utf-8") as f:
        constants: dict[str, Any] = json.load(f)  # the shipped padding file: a JSON object of named constants
    return constants


def get(name: str) -> Any:
    """A fresh copy of one padding constant (e.g. "FILE_CONTENT_EXTENSION")."""
    return copy_json(_constants()[name])
