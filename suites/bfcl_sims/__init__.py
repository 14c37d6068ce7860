"""Stateful simulators of the API classes BFCL v4's multi-turn categories use (written for this project).

Owns: `CLASSES` (BFCL class name -> simulator class), the mapping from a class to its function docs
(multi_turn_func_doc/<file>.json in the BFCL data dir) and `functions_for(entry)`, the docs an entry offers.
Each simulator is a deterministic in-memory class: `load_scenario(config, long_context)`, one public method per
documented function (returning a JSON-serializable dict), `state()` for BFCL's state check. Running a call by name,
with argument validation and error results, is `execute.py`'s job. The interface is written in the notes
(SIM_INTERFACE) shared with the multi-turn suite.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._base import Simulator
from .file_system import GorillaFileSystem
from .math_api import MathAPI
from .message import MessageAPI
from .posting import TwitterAPI
from .ticket import TicketAPI
from .trading import TradingBot
from .travel import TravelAPI
from .vehicle import VehicleControlAPI

CLASSES: dict[str, type[Simulator]] = {
    cls.CLASS_NAME: cls
    for cls in (GorillaFileSystem, MathAPI, MessageAPI, TwitterAPI, TicketAPI, TradingBot, TravelAPI,
                VehicleControlAPI)
}
DOC_DIR = "multi_turn_func_doc"


@lru_cache(maxsize=64)
def _read_docs(path: str) -> tuple[dict[str, Any], ...]:
    with open(path, encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def class_docs(class_name: str, data_dir: str | Path) -> list[dict[str, Any]]:
    """The function docs of one class, read from `data_dir`/multi_turn_func_doc (cached; callers get copies)."""
    cls = CLASSES[class_name]
    docs: list[dict[str, Any]] = json.loads(json.dumps(_read_docs(str(Path(data_dir) / DOC_DIR / cls.DOC_FILE))))
    return docs


def functions_for(entry: dict[str, Any], data_dir: str | Path) -> list[dict[str, Any]]:
    """Every function doc of the entry's involved classes, minus its `excluded_function` list (BFCL's rule).

    `miss_func` entries also hold functions back until a turn (`missed_function`: {turn: [names]}); which turn
    offers what is the suite's decision, so nothing is removed for that here.
    """
    excluded = set(entry.get("excluded_function") or [])
    out: list[dict[str, Any]] = []
    for name in entry.get("involved_classes", []):
        out += [d for d in class_docs(name, data_dir) if d.get("name") not in excluded]
    return out


__all__ = ["CLASSES", "Simulator", "class_docs", "functions_for"]
