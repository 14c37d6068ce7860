"""`mypy --strict` on the packages that decide a gate (verifier/attribution/, verifier/golden/) and the modules made
strict-clean since (the typed documents' readers): the configuration and the list are pyproject.toml's [tool.mypy];
this runs it with the test suite, so CI checks it with the README's test command."""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STRICT = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]["files"])


def test_the_strict_list_keeps_its_floor():
    assert {"verifier/attribution", "verifier/golden"} <= set(STRICT)


def test_mypy_strict_passes_on_attribution_and_golden():
    api = pytest.importorskip("mypy.api", reason="mypy is a dev dependency: pip install -e '.[dev]'")
    # the cache lives outside the checkout (the tests write nothing into it) and is reused between runs
    cache = Path(tempfile.gettempdir()) / f"verifier-mypy-cache-{os.getuid()}"
    cwd = os.getcwd()
    os.chdir(ROOT)  # [tool.mypy] names its files relative to the checkout
    try:
        out, err, code = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache), "--strict",
                                  *STRICT])
    finally:
        os.chdir(cwd)
    assert code == 0, out + err
