"""The dual path: render the chat template client-side and send the prompt to /v1/completions.

If the chat path regresses while the raw-completion path, fed the same conversation, does not, the
regression lives in the chat frontend (template application, reasoning/tool parsers, detokenizer
glue), not in the weights. Rendering follows Hugging Face's conventions (trim_blocks, lstrip_blocks,
`raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII) in a jinja2 sandbox.

The template usually comes from the server under test (`/props`), so it is untrusted code. The
sandbox blocks attribute tricks but not `'x' * 1500000000` or nested loops over `range(100000)`, so
rendering runs in a small worker process with an address-space limit, a wall-clock limit per
render and a cap on the prompt's size; a template over any limit is `TemplateUnavailable`, and the
worker is replaced.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import select
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from jinja2.exceptions import SecurityError, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

# Chat-only fields that have no meaning for a raw completion.
CHAT_ONLY = ("messages", "tools", "tool_choice", "response_format", "logprobs", "top_logprobs",
             "parallel_tool_calls", "stream_options", "chat_template_kwargs")

RENDER_TIMEOUT_S = 10.0
WORKER_START_S = 120.0
"""Start-up is not render time: a new worker imports jinja2, which takes seconds on a loaded machine."""
MAX_PROMPT_CHARS = 4 * 2**20
WORKER_MEMORY_BYTES = 1 * 2**30


class TemplateUnavailable(ValueError):
    pass


def _raise(message: str) -> None:
    raise TemplateError(message)


class _Env(ImmutableSandboxedEnvironment):
    """Fails fast on the cheap bombs (`'x' * 10**9`, `10 ** 10**9`) before they allocate."""

    intercepted_binops = frozenset(["*", "**"])

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int) and len(seq) * n > MAX_PROMPT_CHARS:
                    raise SecurityError("repetition result too large")
        if operator == "**" and isinstance(right, int) and abs(right) > 4096:
            raise SecurityError("exponent too large")
        return super().call_binop(context, operator, left, right)


def _env() -> ImmutableSandboxedEnvironment:
    env = _Env(trim_blocks=True, lstrip_blocks=True)
    env.filters["tojson"] = lambda x, indent=None, ensure_ascii=False, **_: json.dumps(x, indent=indent, ensure_ascii=ensure_ascii)
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: dt.datetime.now().strftime(fmt)
    return env


def render_local(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    """Render in this process (the worker's half): sandboxed, output capped as it is generated."""
    gen = _env().from_string(template).generate(
        messages=messages, tools=tools or None, add_generation_prompt=True, bos_token="", eos_token="", **kwargs
    )
    out: list[str] = []
    size = 0
    for piece in gen:
        size += len(piece)
        if size > MAX_PROMPT_CHARS:
            raise TemplateError(f"output over {MAX_PROMPT_CHARS} characters")
        out.append(piece)
    return "".join(out)


def _serve() -> None:
    """Worker loop: one JSON request per line on stdin, one JSON reply per line on stdout."""
    if os.name == "posix":
        _limit_memory()  # set here rather than in preexec_fn, which is unsafe in a threaded parent
    sys.stdout.write("ready\n")  # the render clock starts after this, not while the worker imports
    sys.stdout.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = {"ok": render_local(req["template"], req["messages"], req["tools"], **req["kwargs"])}
        except (TemplateError, MemoryError, RecursionError) as e:
            reply = {"error": f"{type(e).__name__}: {e}"[:300]}
        except Exception as e:  # a template can raise anything the sandbox lets through
            reply = {"error": f"{type(e).__name__}: {e}"[:300]}
        sys.stdout.write(json.dumps(reply, ensure_ascii=False) + "\n")
        sys.stdout.flush()


def _limit_memory() -> None:  # runs in the worker
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (WORKER_MEMORY_BYTES, WORKER_MEMORY_BYTES))


def _readable(stream: Any, timeout_s: float) -> bool:
    """Whether `stream` has data within `timeout_s`. poll, not select: select fails outright on a descriptor numbered
    1024 or more, which a long-lived process (a sweep, a test session) can reach."""
    poller = select.poll()
    poller.register(stream, select.POLLIN)
    return bool(poller.poll(max(0.0, timeout_s) * 1000))


class _Worker:
    """One long-lived render process (spawning per prompt would cost ~100 ms each); replaced when it fails."""

    def __init__(self) -> None:
        env = dict(os.environ)
        root = str(Path(__file__).resolve().parents[2])  # the directory holding the verifier package
        env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from verifier.wire.dualpath import _serve; _serve()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
            text=True, encoding="utf-8",
        )
        assert self.proc.stdout
        if not _readable(self.proc.stdout, WORKER_START_S) or self.proc.stdout.readline() != "ready\n":
            self.kill()
            raise TemplateUnavailable(f"chat template failed to render: the render worker did not start within {WORKER_START_S:g} s")

    def render(self, payload: dict[str, Any], timeout_s: float) -> str:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps(payload, ensure_ascii=False) + "\n")
        self.proc.stdin.flush()
        if not _readable(self.proc.stdout, timeout_s):
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise MemoryError  # the worker died: its address-space limit (or a crash)
        reply = json.loads(line)
        if "error" in reply:
            raise TemplateUnavailable(f"chat template failed to render: {reply['error']}")
        rendered: str = reply["ok"]  # the worker's reply: {"ok": the rendered prompt} or {"error": ...}
        return rendered

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


_lock = threading.Lock()
_worker: _Worker | None = None


@atexit.register
def _stop() -> None:
    if _worker is not None:
        _worker.kill()


def render(template: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **kwargs: Any) -> str:
    """The prompt the chat template makes of this conversation, with the generation prompt appended.

    `bos_token` renders empty: llama-server (like vLLM's /v1/completions) adds BOS when it tokenizes a
    prompt, and a second one would shift every position (the double-BOS bug).
    """
    global _worker
    payload = {"template": template, "messages": messages, "tools": tools, "kwargs": kwargs}
    with _lock:
        if _worker is None or _worker.proc.poll() is not None:
            _worker = _Worker()
        try:
            return _worker.render(payload, RENDER_TIMEOUT_S)
        except TimeoutError:
            reason = f"took longer than {RENDER_TIMEOUT_S:g} s"
        except (MemoryError, OSError, ValueError) as e:
            if isinstance(e, TemplateUnavailable):
                raise
            reason = "exhausted the render worker's memory limit"
        _worker.kill()
        _worker = None
    raise TemplateUnavailable(f"chat template failed to render: {reason}")


def completion_body(chat_body: dict[str, Any], template: str) -> dict[str, Any]:
    body = {k: v for k, v in chat_body.items() if k not in CHAT_ONLY}
    body["prompt"] = render(template, chat_body.get("messages", []), chat_body.get("tools"),
                            **(chat_body.get("chat_template_kwargs") or {}))
    return body
