"""Smoke-check the installed llama.cpp server: start it on the packaged SmolLM2, send one chat request.

Exit 0 when the server answers. Otherwise one clear message on stderr, naming how it died (a signal in words)
and the CPU features this machine advertises, since a native build on a host whose hypervisor blocks some of
them (AMX, AVX-512) dies with SIGILL at its first compute while `llama-server --version` still runs.
Exit 3 specifically for death by SIGILL, so .ci/run can rebuild portably and retry once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

DEADLINE_S = 180


def cpu_flags() -> str:
    try:
        text = open("/proc/cpuinfo", encoding="utf-8").read()
    except OSError:
        return "unknown"
    m = re.search(r"^flags\s*:\s*(.*)$", text, re.M)
    flags = set(m.group(1).split()) if m else set()
    risky = sorted(f for f in flags if f.startswith(("amx", "avx512", "avx_vnni")))
    return ", ".join(risky) if risky else "none of amx/avx512/avx_vnni"


def chat(url: str) -> str:
    body = json.dumps({"model": "smollm2", "messages": [{"role": "user", "content": "Say hi."}],
                       "max_tokens": 8, "temperature": 0}).encode()
    req = urllib.request.Request(url + "/chat/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        doc = json.loads(r.read())
    return doc["choices"][0]["message"].get("content") or ""


def main() -> int:
    cmd = [sys.executable, "-m", "verifier", "engine", "start", "--model", "smollm2", "--port", "0", "--slots", "1",
           "--ctx", "512"]
    # Its own session: stop() can reach llama-server too, whatever happens to `verifier engine start`.
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        url = ""
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            line = p.stdout.readline() if p.stdout else ""
            if line.startswith("http"):
                url = line.strip()
                break
            if not line and p.poll() is not None:
                break
        if not url:
            err = (p.stderr.read() if p.stderr and p.poll() is not None else "").strip().splitlines()
            reason = err[-1] if err else f"no URL within {DEADLINE_S}s"
            print(f"engine smoke: llama-server did not start: {reason}\n"
                  f"engine smoke: this CPU advertises: {cpu_flags()}", file=sys.stderr)
            return 3 if "SIGILL" in reason or "exited with -4" in reason else 1
        text = chat(url)
        print(f"engine smoke: llama-server answered at {url}: {text[:40]!r}")
        return 0
    except Exception as e:  # the request itself failed: the server may have died mid-compute
        time.sleep(0.5)
        rc = p.poll()
        died = f"killed by {signal.Signals(-rc).name}" if rc is not None and rc < 0 else f"exit {rc}"
        print(f"engine smoke: request failed ({type(e).__name__}: {e}); engine {died}\n"
              f"engine smoke: this CPU advertises: {cpu_flags()}", file=sys.stderr)
        return 3 if "SIGILL" in died else 1
    finally:
        stop(p)


def stop(p: subprocess.Popen) -> None:
    """SIGTERM (`verifier engine start` stops llama-server and exits 0), then SIGKILL to the whole group.

    Not SIGINT: a shell without job control (CI's) starts its jobs with SIGINT ignored, so the engine never saw
    it; p.kill() then killed only `verifier`, and llama-server ran on, orphaned, after CI had ended."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(p.pid, signal.SIGKILL)  # anything of the group still running (none, after a clean stop)
    except (ProcessLookupError, PermissionError):
        pass
    p.wait(10)


if __name__ == "__main__":
    sys.exit(main())
