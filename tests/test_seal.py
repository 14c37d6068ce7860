"""verifier/seal.py: this user's key for seals on derived files (observations.jsonl, compiled lm-eval tasks)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHOW_KEY = "from verifier import seal; print(seal.key().hex())"


def key_in(directory: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "VERIFIER_CONFIG_DIR": str(directory)}
    p = subprocess.run([sys.executable, "-c", SHOW_KEY], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_the_key_is_made_once_private_and_kept(tmp_path):
    d = tmp_path / "cfg"
    first, second = key_in(d), key_in(d)
    assert first == second and len(bytes.fromhex(first)) == 32
    path = d / "seal.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(d.stat().st_mode) == 0o700
    assert path.read_bytes().hex() == first and [p.name for p in d.iterdir()] == ["seal.key"]


@pytest.mark.parametrize("kind", ["symlink", "short", "fifo"])
def test_a_key_file_that_is_not_a_key_means_a_key_of_the_process_own(tmp_path, kind):
    """A planted symlink (to a key an attacker knows), a truncated file or a FIFO is never used: each process then
    seals with a key of its own, so nothing sealed by another process verifies (derived files are derived again)."""
    d = tmp_path / "cfg"
    d.mkdir()
    known = tmp_path / "known.key"
    known.write_bytes(b"k" * 32)
    if kind == "symlink":
        (d / "seal.key").symlink_to(known)
    elif kind == "short":
        (d / "seal.key").write_bytes(b"k" * 31)
    else:
        os.mkfifo(d / "seal.key")
    first, second = key_in(d), key_in(d)
    assert first != second and bytes.fromhex(first) != b"k" * 32


def test_seals_verify_only_under_the_same_key(tmp_path, monkeypatch):
    from verifier import seal

    assert seal.holds(b"data", seal.seal(b"data")) and not seal.holds(b"data!", seal.seal(b"data"))
    assert not seal.holds(b"data", None) and not seal.holds(b"data", "00" * 32)
