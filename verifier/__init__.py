"""verifier: a vendor-verifier style evaluation harness for OpenAI-compatible endpoints.

The Python API (verifier/api.py): `from verifier import gate, run, compare, load_golden`. Resolved on first use,
so `import verifier` (and the CLI's start-up) loads none of the SDK, pandas or lm-eval.

`run` is also the name of the package verifier/run/ (planning, runner, journal, scoring). Python binds a package's
subpackage as the package attribute once it is imported, so `verifier.run` is then that package made callable:
calling it is the API's `run(...)`, and `verifier.run.runner` is still the runner. `compare` is the API function
(the paired diff itself is verifier.attribution.compare).

Packages, lowest floor first (docs/DESIGN.md "Packages"; tests/test_architecture.py checks that imports point down):
base modules here (types, errors, jsonsafe, redact, scrub, version, stats) -> surfaces -> wire -> judge -> run ->
suites (top level) -> golden -> attribution -> report -> app -> api, testbed -> cli.
"""

import sys as _sys
from types import ModuleType as _ModuleType  # not `import types`: the submodule verifier.types takes that name

from .version import __version__

__all__ = ["__version__", "compare", "gate", "load_golden", "run"]
API = {"compare", "gate", "load_golden", "run", "Golden"}


class _CallableModule(_ModuleType):
    """verifier.run: the package, callable as the API function."""

    def __call__(self, *args, **kwargs):
        from .api import run

        return run(*args, **kwargs)


class _Package(_ModuleType):
    def __setattr__(self, name, value):
        if name == "run" and type(value) is _ModuleType:  # the import system binding the subpackage
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name in API:
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")
