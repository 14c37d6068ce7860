import os
import re
import sys
from pathlib import Path

import pytest

from verifier.testbed.server import Reply, Script, TestServer, arithmetic

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


# The run flags every calibrated-golden test uses: smoke, both stream modes, logprobs for the drift signal.
SMOKE_RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-retries", "0"]


def reference_reply(req):
    """The healthy reference endpoint: the right sum, nothing else."""
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return Reply(content=str(int(m.group(1)) + int(m.group(2))))


def build_calibrated_golden(tmp: Path) -> dict[str, Path]:
    """Three reference runs, the first blessed into tmp/goldens/smoke-ref and calibrated with the other two."""
    from verifier.cli import main

    with TestServer(Script(reference_reply)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *SMOKE_RUN, "--base-url", srv.url, "--out", str(tmp / name)]) == 0
    golden = tmp / "goldens" / "smoke-ref"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    return {"golden": golden, "ref": tmp / "ref", "r2": tmp / "r2", "r3": tmp / "r3"}


@pytest.fixture(scope="session")
def calibrated_golden(tmp_path_factory):
    """Built once per session and shared by every module: treat it as read-only (copy it before changing it)."""
    return build_calibrated_golden(tmp_path_factory.mktemp("calibrated"))
