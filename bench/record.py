"""Where a benchmark's figures go: bench/results/<name>.md, one dated section per run (date, machine, command, what the
script printed), newest first under the file's own header. A figure in the documentation links to that file, so it
always names the script, the machine and the command that made it, and a rerun of the script renews it.

    from record import recorded
    with recorded("startup"):      # in the script's `if __name__ == "__main__":` block
        main()

`VERIFIER_BENCH_RECORD=0` runs a script without writing (a try-out); `--help`, and a run that raises or exits
non-zero, write nothing.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator, TextIO

RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent


class _Tee(io.TextIOBase):
    """Writes to the terminal and keeps a copy."""

    def __init__(self, out: TextIO) -> None:
        self.out, self.copy = out, io.StringIO()

    def write(self, s: str) -> int:
        self.copy.write(s)
        return self.out.write(s)

    def flush(self) -> None:
        self.out.flush()


def command() -> str:
    """The command line as typed from the repository root."""
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(REPO) if script.is_relative_to(REPO) else script.name
    return shlex.join(["python", str(shown), *sys.argv[1:]])


def section(text: str, cmd: str, machine: str, when: dt.datetime) -> str:
    return (f"## {when:%Y-%m-%d %H:%M} UTC\n\nMachine: {machine}. Command: `{cmd}`\n\n"
            f"```text\n{text.rstrip()}\n```\n")


def add(name: str, text: str, cmd: str, machine: str, when: dt.datetime | None = None, root: Path = RESULTS) -> Path:
    """Put one run's section first under the header of root/<name>.md (created with a header naming the script)."""
    path = root / f"{name}.md"
    new = section(text, cmd, machine, when or dt.datetime.now(dt.timezone.utc))
    if path.exists():
        old = path.read_text(encoding="utf-8")
        head, sep, rest = old.partition("\n## ")
        body = head.rstrip("\n") + "\n\n" + new + (("\n## " + rest) if sep else "")
    else:
        body = f"# {name}\n\nFigures printed by `{cmd.split()[1]}`, newest first.\n\n{new}"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text(body, encoding="utf-8")
    return path


@contextlib.contextmanager
def recorded(name: str) -> Iterator[None]:
    """Run the body with stdout copied; when it ends without an exception, add the copy to bench/results/<name>.md."""
    if os.environ.get("VERIFIER_BENCH_RECORD", "1") == "0" or {"-h", "--help"} & set(sys.argv[1:]):
        yield
        return
    from benchlib import machine  # noqa: PLC0415 - bench/ is on the path of every script that imports this module

    tee = _Tee(sys.stdout)
    before, sys.stdout = sys.stdout, tee  # type: ignore[assignment]
    ok = False
    try:
        yield
        ok = True
    except SystemExit as e:
        ok = e.code in (0, None)
        raise
    finally:
        sys.stdout = before
        if ok:
            print(f"figures: {add(name, tee.copy.getvalue(), command(), machine())}", file=sys.stderr)
