"""What the benchmark scripts share: a free port, waiting for a server process to answer, and the machine line
printed beside every figure (figures on a shared 2-core machine move with its load)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, deadline_s: float = 60.0) -> None:
    """Poll `url` until it answers; fail at once if `proc` dies, or at the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).read()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > end:
                raise RuntimeError(f"server did not start at {url}") from None
            time.sleep(0.05)


def machine() -> str:
    info = Path("/proc/cpuinfo")
    cpu = next((line.split(":", 1)[1].strip() for line in info.read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "?") if info.exists() else "?"
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f}"
