"""What every simulator shares: loading a scenario key with BFCL's default, and the comparable-state snapshot.

BFCL's state checker compares an instance's public attributes (`vars()` minus names starting with "_"). Here each
simulator lists its comparable attributes in STATE_FIELDS instead, so bookkeeping (the per-instance random
generator, the current directory, caches) is private by construction and `state()` is an explicit, deep-copied,
JSON-serializable snapshot that two instances compare with `==`.
"""

from __future__ import annotations

import random
from typing import Any


class Simulator:
    """Base of the BFCL API simulators; subclasses set CLASS_NAME, DOC_FILE and STATE_FIELDS."""

    CLASS_NAME = ""
    """The BFCL class name, as the entries' `involved_classes` spell it."""
    DOC_FILE = ""
    """The file under multi_turn_func_doc/ holding this class's function docs."""
    STATE_FIELDS: tuple[str, ...] = ()
    """The attributes BFCL's state checker compares."""

    def __init__(self) -> None:
        self.long_context = False
        # Seeded per instance in load_scenario; never the module-level `random` (shared, unseeded).
        self._random = random.Random(0)

    def load_scenario(self, config: dict, long_context: bool = False) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def _take(config: dict, key: str, default: Any) -> Any:
        """config[key] if present else BFCL's default, deep-copied: the entry's dict must stay untouched."""
        return copy_json(config[key] if key in config else default)

    def _seed(self, config: dict, default_seed: int) -> None:
        self._random = random.Random(config.get("random_seed", default_seed))

    def state(self) -> dict:
        return {name: copy_json(getattr(self, name)) for name in self.STATE_FIELDS}


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data (dicts, lists, scalars; sets become sorted lists, the only non-JSON container
    the simulators hold). Several times faster than copy.deepcopy, which matters: an entry copies its config and
    the long-context padding into every instance."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [copy_json(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(copy_json(v) for v in value)
    return value


def error(message: str) -> dict:
    return {"error": message}
