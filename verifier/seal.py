"""A key of this user's, for seals on files verifier derives and reads back (observations.jsonl, compiled lm-eval tasks).

A plain checksum over a derived file can be recomputed by whoever rewrites the file: a run directory whose
verdicts, observations and checksum were rewritten consistently looked like honest scoring. A seal here is an
HMAC-SHA256 under a random key that never leaves this user's configuration directory, so a file sealed anywhere
else (another machine, another user, a forger without that key) does not verify and is derived again from its
source (the journal; lm-eval's YAML), never used.

The key: 32 random bytes in `$VERIFIER_CONFIG_DIR/seal.key`, else `$XDG_CONFIG_HOME/verifier/seal.key`, else
`~/.config/verifier/seal.key`, created on first use with mode 0600 in a 0700 directory (O_EXCL, never through a
symlink). It is not a credential and never written anywhere else. What it does not stop: whoever can read it (this
user, root, any process running as this user) can forge a seal. When it cannot be read or made (no home, a
read-only directory, a file that is not 32 bytes), this process uses a key of its own: every derived file is then
derived again, never trusted.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from functools import lru_cache
from pathlib import Path
from verifier import safeio

KEY_BYTES = 32
KEY_FILE = "seal.key"


def key_dir() -> Path | None:
    """Where the key lives: VERIFIER_CONFIG_DIR, else $XDG_CONFIG_HOME/verifier, else ~/.config/verifier (None
    without a home)."""
    return safeio.user_dir("VERIFIER_CONFIG_DIR", "XDG_CONFIG_HOME", ".config")


def _read_key(path: Path) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a FIFO or device is no key
            return None
        data = f.read(KEY_BYTES + 1)
    return data if len(data) == KEY_BYTES else None


def _make_key(path: Path) -> bytes | None:
    """A new key, whole or not at all: written to a temp file (O_EXCL, 0600) and linked to its name, which fails if
    another process made one first (then theirs is read). A reader never sees a half-written key, and a kill
    leaves no empty one behind that would make every later process use a key of its own."""
    data = secrets.token_bytes(KEY_BYTES)
    tmp = path.parent / f".{KEY_FILE}.{secrets.token_hex(8)}"
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            return _read_key(path)
    except OSError:
        return None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return data


@lru_cache(maxsize=8)
def _key_at(directory: str | None) -> bytes:
    if directory is not None:
        path = Path(directory) / KEY_FILE
        found = _read_key(path) if path.exists() or path.is_symlink() else _make_key(path)
        if found is not None:
            return found
    return secrets.token_bytes(KEY_BYTES)  # this process's own: nothing sealed elsewhere verifies


def key() -> bytes:
    where = key_dir()
    return _key_at(None if where is None else str(where))


def sealer() -> "hmac.HMAC":
    """An incremental seal (update() the bytes in order, then hexdigest())."""
    return hmac.new(key(), digestmod=hashlib.sha256)


def seal(data: bytes) -> str:
    s = sealer()
    s.update(data)
    return s.hexdigest()


def holds(data: bytes, claimed: object) -> bool:
    """Whether `claimed` is this user's seal of `data` (compared in constant time)."""
    return isinstance(claimed, str) and hmac.compare_digest(seal(data), claimed)
