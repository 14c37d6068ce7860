"""verifier: a vendor-verifier style evaluation harness for OpenAI-compatible endpoints.

The Python API (verifier/api.py): `from verifier import gate, run, compare, load_golden`. Resolved on first use,
so `import verifier` (and the CLI's start-up) loads none of the SDK, pandas or lm-eval.

`compare` is also the name of the core module verifier/compare.py (the paired diff). Python binds a package's
submodule as the package attribute once it is imported, so `verifier.compare` is that module made callable: calling
it is the API's `compare(run_dir, golden)`, and `verifier.compare.compare(...)` is still the core function.
"""

import sys as _sys
from types import ModuleType as _ModuleType  # not `import types`: the submodule verifier.types takes that name

from .version import __version__

__all__ = ["__version__", "compare", "gate", "load_golden", "run"]
API = {"gate", "load_golden", "run", "Golden"}


class _CallableModule(_ModuleType):
    """verifier.compare: the core module, callable as the API function."""

    def __call__(self, *args, **kwargs):
        from .api import compare

        return compare(*args, **kwargs)


class _Package(_ModuleType):
    def __setattr__(self, name, value):
        if name == "compare" and type(value) is _ModuleType:  # the import system binding the submodule
            value.__class__ = _CallableModule
        super().__setattr__(name, value)


_sys.modules[__name__].__class__ = _Package


def __getattr__(name: str):
    if name in API:
        from . import api

        return getattr(api, name)
    if name == "compare":
        import importlib

        return importlib.import_module(".compare", __name__)  # binds it through _Package.__setattr__
    raise AttributeError(f"module 'verifier' has no attribute {name!r}")
