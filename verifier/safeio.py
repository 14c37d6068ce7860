"""Reading a file of an untrusted directory (a golden, a run directory, a gate or sweep file): regular files only,
with a size cap, so a planted FIFO, device or symlink can neither hang a reader, exhaust memory nor quote a file
from elsewhere.

Every reader of such a file opens it through `open_regular` (or `read_bytes` / `read_text` / `iter_lines`):
- the last path component must not be a symlink (O_NOFOLLOW), and with `within`, the resolved path must stay inside
  that directory (a symlinked parent that leaves it is refused too);
- it is opened O_NONBLOCK, so opening a FIFO with no writer returns at once instead of waiting for one, and then
  refused because it is not a regular file (S_ISREG), as are devices (/dev/zero) and sockets;
- a file larger than `max_bytes` is refused before a byte of it is read, and reading stops at the cap even if the
  file grows meanwhile.
The error is `UnsafeFile`, a ValueError whose message is one line naming the file and the reason (the CLI's exit 2).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO, Iterator

MIB = 1024 * 1024
DEFAULT_MAX_BYTES = 512 * MIB
"""The cap when a caller names none: larger than any journal a test or a shipped golden holds, small enough that a
planted file cannot take the machine's memory."""


class UnsafeFile(ValueError):
    """A file that is not a regular file inside its directory, or larger than its cap."""


_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


def user_dir(own_variable: str, xdg_variable: str, home_default: str) -> Path | None:
    """A per-user directory of verifier's: `$own_variable`, else `$xdg_variable/verifier`, else `~/home_default/verifier`;
    None when there is no home to find (no HOME and no password entry)."""
    mine = os.environ.get(own_variable)
    if mine:
        return Path(mine)
    try:
        return Path(os.environ.get(xdg_variable) or Path.home() / home_default) / "verifier"
    except RuntimeError:
        return None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def refuse_special(path: str | Path, what: str = "data") -> None:
    """Refuse a path the user named for reading (`--data`, a gate file's `data`) that is neither a regular file nor a
    directory: /dev/zero would be read until memory runs out, a FIFO waited on forever. Symlinks are followed (the
    user named the path); a missing path is left to the reader, which says it is missing. Nothing is opened."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        raise UnsafeFile(f"{path}: refused, {_kind(st.st_mode)} ({what} is read from regular files and directories only)")


def check_within(path: Path, within: Path) -> None:
    """Refuse a path whose resolved location leaves `within` (a symlinked file or parent pointing elsewhere)."""
    try:
        Path(path).resolve().relative_to(Path(within).resolve())
    except ValueError:
        raise UnsafeFile(f"{path}: refused, it leads outside {within} (a symlink?)") from None


def open_regular(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: str | Path | None = None) -> BinaryIO:
    """Open `path` for reading in binary mode if it is a regular file of at most `max_bytes` (see the module doc)."""
    path = Path(path)
    if within is not None:
        check_within(path, Path(within))
    try:
        fd = os.open(path, _FLAGS)
    except OSError as e:
        if path.is_symlink():
            raise UnsafeFile(f"{path}: refused, a symlink (readers open regular files only)") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(f"{path}: refused, {_kind(st.st_mode)} (readers open regular files only)")
        if st.st_size > max_bytes:
            raise UnsafeFile(f"{path}: {st.st_size} bytes, over the cap of {max_bytes} bytes")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: str | Path | None = None) -> bytes:
    """The whole file, refused (UnsafeFile) if it is not a regular file or holds more than `max_bytes`."""
    with open_regular(path, max_bytes=max_bytes, within=within) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew after the size check
        raise UnsafeFile(f"{path}: over the cap of {max_bytes} bytes")
    return data


def read_text(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: str | Path | None = None) -> str:
    """`read_bytes` decoded as UTF-8 (undecodable bytes are an UnsafeFile naming the file, not a traceback)."""
    data = read_bytes(path, max_bytes=max_bytes, within=within)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UnsafeFile(f"{path}: not UTF-8 text (byte {e.start})") from None


SCAN_CHUNK = MIB
"""The piece a long line is measured in before it is read (`read_line`): what refusing a line over its cap costs."""


def read_line(f: BinaryIO, cap: int) -> bytes | None:
    """The next line of `f`, a regular file open in binary mode (newline kept; the last may lack it; b"" at the end),
    or None when it is longer than `cap` bytes. A line longer than SCAN_CHUNK is measured first, a piece at a time and
    nothing kept, and read in one piece only when it is within the cap: a line over its cap is refused after holding
    one piece of it, never the whole line (a 1 GB line costs 1 MiB of memory and one pass over its bytes). After
    None the position is somewhere inside the over-long line: the caller refuses the file (or stops reading it)."""
    probe = min(cap, SCAN_CHUNK) + 1
    head = f.readline(probe)
    if head.endswith(b"\n") or len(head) < probe:
        return head if len(head) <= cap else None
    length = len(head)
    start = f.tell() - length  # only for a long line: tell() costs a system call
    del head
    while length <= cap:
        piece = f.read(SCAN_CHUNK)
        if not piece:
            break  # a last line without its newline (a torn tail, the caller's to judge)
        newline = piece.find(b"\n")
        length += len(piece) if newline < 0 else newline + 1
        if newline >= 0:
            break
    if length > cap:
        return None
    f.seek(start)
    line = f.read(length)  # one allocation of the line's size (a file that shrank meanwhile gives a shorter one)
    return line


def iter_lines(path: str | Path, *, max_bytes: int = DEFAULT_MAX_BYTES, within: str | Path | None = None,
               max_line: int | None = None) -> Iterator[bytes]:
    """The file's lines as bytes (newline kept), streamed; the total read is capped at `max_bytes`, and one line at
    `max_line` (default: `max_bytes`): a longer line is refused naming its number, after holding at most
    SCAN_CHUNK bytes of it (`read_line`), never the whole line."""
    cap = max_bytes if max_line is None else min(max_line, max_bytes)
    with open_regular(path, max_bytes=max_bytes, within=within) as f:
        total = n = 0
        while (line := read_line(f, cap)) != b"":
            n += 1
            if line is None:
                raise UnsafeFile(f"{path}: line {n} is longer than the cap of {cap} bytes on one line")
            total += len(line)
            if total > max_bytes:
                raise UnsafeFile(f"{path}: over the cap of {max_bytes} bytes")
            yield line
