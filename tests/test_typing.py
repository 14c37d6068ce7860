"""`mypy --strict` on the whole harness (verifier/, the test bed verifier/testbed/ excepted), the suites and the
example plugin: the configuration and the list are pyproject.toml's [tool.mypy]; this runs it with the test suite,
so CI checks it with the README's test command."""

from __future__ import annotations

import os
import tempfile
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MYPY = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
STRICT = tuple(MYPY["files"])


def test_the_strict_list_keeps_its_floor():
    """The floor is the whole package and the suites; the one exclusion is the test bed."""
    assert {"verifier", "suites", "tests/plugin_example/verifier_example_suite.py"} <= set(STRICT)
    assert MYPY.get("exclude") == ["^verifier/testbed/"]


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


def test_a_suite_whose_functions_break_the_suite_contract_is_refused(tmp_path, monkeypatch):
    """`Suite`'s callables are typed (verifier/types.py), so `mypy --strict` checks a suite module, built-in or a
    plugin, where it builds its Suite: a `load` without (data, smoke) and a `score` that returns a dict are refused,
    as tests/plugin_example (in the strict list) passes."""
    api = pytest.importorskip("mypy.api", reason="mypy is a dev dependency: pip install -e '.[dev]'")
    plugin = tmp_path / "broken_suite_plugin.py"
    plugin.write_text(
        "from __future__ import annotations\n\n"
        "from verifier.types import Parsed, Sample, Suite\n\n\n"
        "def load() -> list[Sample]:\n    return []\n\n\n"
        "def request(sample: Sample) -> dict[str, object]:\n    return {'messages': sample.messages}\n\n\n"
        "def score(sample: Sample, parsed: Parsed) -> dict[str, float]:\n    return {'score': 1.0}\n\n\n"
        "SUITE = Suite(name='broken', version='1', load=load, request=request, score=score)\n",
        encoding="utf-8")
    monkeypatch.setenv("MYPYPATH", str(ROOT))  # this checkout's verifier, not whichever one is installed
    cache = Path(tempfile.gettempdir()) / f"verifier-mypy-cache-plugin-{os.getuid()}"
    out, err, code = api.run(["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(cache), "--strict",
                              str(plugin)])
    assert code == 1, out + err
    problems = [line for line in out.splitlines() if ": error:" in line]
    assert len(problems) == 2, out
    assert 'Argument "load" to "Suite" has incompatible type' in problems[0], out
    assert 'Argument "score" to "Suite" has incompatible type' in problems[1], out
