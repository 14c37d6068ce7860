import os
import sys
from pathlib import Path

import pytest

from verifier.testbed.server import Script, TestServer, arithmetic

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("VERIFIER_SHARED_DATA", ROOT.parent / "shared" / "data"))


@pytest.fixture
def server():
    with TestServer(Script(arithmetic)) as srv:
        yield srv


@pytest.fixture
def shared_data():
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set VERIFIER_SHARED_DATA)")
    return SHARED


@pytest.fixture
def cli(monkeypatch, capsys):
    """Drive the real `verifier` command in-process; returns (exit_code, stdout, stderr)."""
    from verifier.cli import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
