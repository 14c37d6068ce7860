"""What every simulator shares: loading a scenario key with BFCL's default, and the comparable-state snapshot.

BFCL's state checker compares an instance's public attributes (`vars()` minus names starting with "_"). Here each
simulator lists its comparable attributes in STATE_FIELDS instead, so bookkeeping (the per-instance random
generator, the current directory, caches) is private by construction and `state()` is an explicit, deep-copied,
JSON-serializable snapshot that two instances compare with `==`.
"""

from __future__ import annotations

import random
from typing import Any

Result = dict[str, Any]
"""What a simulated call returns: a JSON object the model reads back as the tool's answer (BFCL serializes it with
json.dumps), its shape set per function by BFCL's own simulator, so its values stay JSON (`Any`)."""
Config = dict[str, Any]
"""An entry's `initial_config` for one class: parsed JSON, each key read with BFCL's default by `_take`."""
Checkers = dict[str, tuple[dict[str, Any], Any]]
"""Function name -> (its closed parameters schema, a jsonschema validator for it or why there is none): the
validator is jsonschema's, which ships no types (see verifier/judge/schemacheck.py)."""


class Simulator:
    """Base of the BFCL API simulators; subclasses set CLASS_NAME, DOC_FILE and STATE_FIELDS."""

    CLASS_NAME = ""
    """The BFCL class name, as the entries' `involved_classes` spell it."""
    DOC_FILE = ""
    """The file under multi_turn_func_doc/ holding this class's function docs."""
    STATE_FIELDS: tuple[str, ...] = ()
    """The attributes BFCL's state checker compares."""
    _checkers: Checkers
    """Set by execute.attach_docs or execute.instances_for (absent until then: execute reads it with getattr)."""

    def __init__(self) -> None:
        self.long_context = False
        # Seeded per instance in load_scenario; never the module-level `random` (shared, unseeded).
        self._random = random.Random(0)

    def load_scenario(self, config: Config, long_context: bool = False) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    @staticmethod
    def _take(config: Config, key: str, default: Any) -> Any:
        """config[key] if present else BFCL's default, deep-copied: the entry's dict must stay untouched."""
        return copy_json(config[key] if key in config else default)

    def _seed(self, config: Config, default_seed: int) -> None:
        self._random = random.Random(config.get("random_seed", default_seed))

    def state(self) -> dict[str, Any]:
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


def error(message: str) -> Result:
    return {"error": message}
