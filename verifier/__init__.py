"""verifier: a vendor-verifier style evaluation harness for OpenAI-compatible endpoints.

The Python API (verifier/api.py): `from verifier import gate, run, compare, load_golden`. Resolved on first use
(PEP 562 module `__getattr__`), so `import verifier` (and the CLI's start-up) loads none of the SDK, pandas or lm-eval.
`verifier.run` is always the API function: the package that makes and keeps a run is `verifier.execution`, so no
subpackage import can shadow it.

Packages, lowest floor first (docs/DESIGN.md "Packages"; tests/test_architecture.py checks that imports point down):
base modules here (types, errors, jsonsafe, safeio, redact, scrub, version, stats) -> surfaces -> wire -> judge ->
execution -> suites (top level) -> golden -> attribution -> report -> app -> api, testbed -> cli.
"""

from typing import Any

from .version import __version__

__all__ = ["__version__", "compare", "gate", "load_golden", "run"]
API = {"compare", "gate", "gate_spec", "load_golden", "run", "Golden"}


def __getattr__(name: str) -> Any:  # the API object named: a function or a class
    if name in API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")
