"""verifier: a vendor-verifier style evaluation harness for OpenAI-compatible endpoints.

The Python API (verifier/api.py): `from verifier import gate, run, compare, load_golden`. Resolved on first use,
so `import verifier` (and the CLI's start-up) loads none of the SDK, pandas or lm-eval.
"""

from .version import __version__

__all__ = ["__version__", "compare", "gate", "load_golden", "run"]
API = {"compare", "gate", "load_golden", "run", "Golden"}


def __getattr__(name: str):
    if name in API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")
