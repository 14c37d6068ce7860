"""Every command writes only its declared outputs (issue #25): after each one, every other file of a temp tree that
holds the inputs, the working directory and $HOME keeps its bytes and modification time, and no file appears
elsewhere. Commands run in sequence, each on what the ones before it wrote, as a user would chain them."""

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import http_ready

ROOT = Path(__file__).resolve().parent.parent


def snapshot(root: Path) -> dict[str, tuple[int, int, str]]:
    out = {}
    for p in root.rglob("*"):
        if p.is_file() and not p.is_symlink():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (st.st_mtime_ns, st.st_size, hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def outside(before: dict, after: dict, allowed: list[str]) -> list[str]:
    """Files added or changed that are not under any of `allowed` (paths relative to the tree)."""
    changed = [k for k in after if before.get(k) != after[k]] + [f"(deleted) {k}" for k in before if k not in after]
    return [k for k in changed if not any(k == a or k.startswith(a.rstrip("/") + "/") for a in allowed)]


# (command line, declared outputs). Paths are relative to the tree, which is also the working directory.
STEPS = [
    (["list-suites"], []),
    (["list-goldens"], []),
    (["run", "--suite", "smoke", "--smoke", "--mode", "chat,chat-stream", "--logprobs", "1", "--probes", "--out", "runs/ref", "{EP}"], ["runs/ref"]),
    (["run", "--suite", "smoke", "--smoke", "--mode", "chat,chat-stream", "--logprobs", "1", "--probes", "--out", "runs/r2", "{EP}"], ["runs/r2"]),
    (["run", "--suite", "smoke", "--smoke", "--mode", "chat,chat-stream", "--logprobs", "1", "--probes", "--out", "runs/r3", "{EP}"], ["runs/r3"]),
    (["score", "runs/ref"], ["runs/ref"]),
    (["bless", "runs/ref", "--to", "goldens/mine"], ["goldens/mine"]),
    (["calibrate", "goldens/mine", "--runs", "runs/r2", "runs/r3"], ["goldens/mine"]),
    (["calibrate", "goldens/mine", "-k", "2", "--out-prefix", "runs/cal", "{EP}"], ["goldens/mine", "runs/cal-1", "runs/cal-2"]),
    (["compare", "runs/r2", "--golden", "goldens/mine"], ["runs/r2/comparison.json"]),
    (["compare", "runs/r3", "--golden", "goldens/mine", "--out", "cmp/r3.json"], ["cmp/r3.json"]),
    (["compare", "runs/r3", "--golden", "goldens/mine", "--ci-outputs"], ["runs/r3"]),
    (["gate", "--golden", "goldens/mine", "--out", "runs/gate", "{EP}"], ["runs/gate"]),
    (["gate", "--config", "gate.toml", "--out", "runs/gate2"], ["runs/gate2"]),
    (["gate", "--config", "gate.toml"], ["runs/gate-file"]),
    (["gate", "--config", "many.toml"], ["runs/many"]),
    (["matrix", "--golden", "goldens/mine", "a=runs/gate", "b=runs/cal-1"], ["reports/matrix"]),  # the default --out
    (["report", "runs/cal-2", "--golden", "goldens/mine", "-o", "reports/cal2.html", "--csv", "reports/cal2.csv"],
     ["reports/cal2.html", "reports/cal2.csv"]),
    (["run", "--suite", "smoke", "--smoke", "--shard", "1/2", "--out", "runs/s1", "{EP}"], ["runs/s1"]),
    (["run", "--suite", "smoke", "--smoke", "--shard", "2/2", "--out", "runs/s2", "{EP}"], ["runs/s2"]),
    (["merge", "runs/s1", "runs/s2", "--out", "runs/merged"], ["runs/merged"]),
    (["run", "--resume", "runs/s1", "--base-url", "{URL}"], ["runs/s1"]),
    (["runs", "runs"], []),
    (["demo", "--out", "runs/demo", "--quiet"], ["runs/demo"]),
    (["engine", "info"], []),
]


@pytest.fixture
def tree(tmp_path, monkeypatch, server):
    root = tmp_path / "tree"
    (root / "home").mkdir(parents=True)
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (root / "gate.toml").write_text(
        f'golden = "goldens/mine"\n[endpoint]\nbase_url = "{server.url}"\nmodel = "m"\n'
        '[outputs]\ndir = "runs/gate-file"\nreport = "runs/gate-file/report.html"\njunit = "junit.xml"\nmarkdown = "md/summary.md"\n')
    (root / "many.toml").write_text(
        f'golden = "goldens/mine"\n[outputs]\ndir = "runs/many"\nmatrix = "matrix"\n'
        + "".join(f'[[endpoints]]\nname = "{n}"\nbase_url = "{server.url}"\nmodel = "m"\n' for n in ("x", "y")))
    return root, server.url


def test_every_command_writes_only_its_declared_outputs(tree, cli):
    root, url = tree
    for argv, allowed in STEPS:
        args = []
        for x in argv:
            args += ["--base-url", url, "--model", "m", "--quiet"] if x == "{EP}" else [x.replace("{URL}", url)]
        before = snapshot(root)
        code, out, err = cli(*args)
        assert code in (0, 10, 11, 12, 20, 30), (args, err)
        after = snapshot(root)
        assert not outside(before, after, allowed), (args, outside(before, after, allowed))
        assert any(k.startswith(tuple(allowed)) for k in after if before.get(k) != after[k]) or not allowed, (args, "wrote nothing")
    # [outputs] paths follow the run the gate makes: --out runs/gate2 wrote its report there, not into runs/gate-file
    assert (root / "runs/gate2/report.html").exists() and (root / "runs/gate2/junit.xml").exists()
    assert (root / "runs/gate2/md/summary.md").exists()
    assert (root / "runs/gate-file/report.html").exists() and (root / "runs/gate-file/md/summary.md").exists()
    assert (root / "runs/many/matrix/matrix.html").exists()


@pytest.mark.parametrize("argv, stream", [(["testbed", "serve", "--port", "0"], "stdout"),
                                          (["proxy", "--upstream", "{URL}", "--port", "0", "--fault", "usage_dropped"], "stderr")])
def test_servers_write_nothing(argv, stream, tree):
    root, url = tree
    before = snapshot(root)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "verifier", *[a.replace("{URL}", url) for a in argv]], cwd=root, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         # SIGINT back to its default: a background job of a shell without job control inherits it ignored
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        first = getattr(p, stream).readline()  # the line that names the base URL once it listens
        m = re.search(r"http://127\.0\.0\.1:\d+/v1", first)
        assert m, first
        base = m.group(0)
        http_ready(base.rstrip("/") + "/models", p)
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    assert not outside(before, snapshot(root), [])
