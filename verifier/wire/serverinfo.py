"""What we keep of a server's self-description (`/v1/models`, llama.cpp `/props`, vLLM `/version`).

Server info goes into run.json, then into committed goldens and shared reports, so it is an allow-list:
only fields known to be safe and useful for attribution survive. A server that echoes request headers
(or anything else) into these documents cannot put it on disk. Every kept string is still scrubbed by
the Redactor, and strings are capped (a chat template is the only long one we want).
"""

from __future__ import annotations

from typing import Any

from verifier.redact import Redactor

MAX_STR = 200
MAX_TEMPLATE = 256 * 1024
MAX_MODELS = 64

MODEL_KEYS = ("id", "object", "owned_by", "created", "root", "parent", "max_model_len")
PROPS_KEYS = ("chat_template", "model_path", "build_info", "total_slots", "modalities", "bos_token", "eos_token",
              "model_alias")
GEN_KEYS = ("n_ctx", "temperature", "top_k", "top_p", "min_p", "typical_p", "repeat_penalty", "repeat_last_n",
            "presence_penalty", "frequency_penalty", "dry_multiplier", "mirostat", "seed", "n_predict", "samplers")
VERSION_KEYS = ("version",)


def _scalar(v: Any, cap: int = MAX_STR) -> Any:
    if isinstance(v, bool) or v is None or isinstance(v, int):
        return v
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if isinstance(v, str):
        return v[:cap]
    return None


def _pick(d: dict[str, Any], keys: tuple[str, ...], caps: dict[str, int] | None = None) -> dict[str, Any]:
    caps = caps or {}
    out: dict[str, Any] = {}  # a JSON document (serverinfo.json): lists, objects and scalars
    for k in keys:
        if k not in d:
            continue
        v = d[k]
        if isinstance(v, list) and all(isinstance(x, str) for x in v[:32]):
            out[k] = [x[:MAX_STR] for x in v[:32]]
        elif isinstance(v, dict) and k == "modalities":
            out[k] = {str(mk)[:40]: mv for mk, mv in list(v.items())[:8] if isinstance(mv, bool)}
        else:
            s = _scalar(v, caps.get(k, MAX_STR))
            if s is not None:
                out[k] = s
    return out


def _models(m: Any) -> Any:
    if not isinstance(m, dict):
        return None
    data = m.get("data")
    out: dict[str, Any] = {}
    if isinstance(m.get("object"), str):
        out["object"] = m["object"][:MAX_STR]
    if isinstance(data, list):
        out["data"] = [_pick(x, MODEL_KEYS) for x in data[:MAX_MODELS] if isinstance(x, dict)]
    return out


def _props(p: Any) -> Any:
    if not isinstance(p, dict):
        return None
    out = _pick(p, PROPS_KEYS, {"chat_template": MAX_TEMPLATE})
    dgs = p.get("default_generation_settings")
    if isinstance(dgs, dict):
        # Newer llama-server nests the sampling settings under "params".
        params = dgs.get("params")
        flat = {**(params if isinstance(params, dict) else {}), **dgs}
        out["default_generation_settings"] = _pick(flat, GEN_KEYS)
    return out


def _version(v: Any) -> Any:
    return _pick(v, VERSION_KEYS) if isinstance(v, dict) else None


def allowlist(info: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """The safe subset of raw server info ({"models": ..., "props": ..., "version": ...}), scrubbed."""
    out: dict[str, Any] = {}
    for name, fn in (("models", _models), ("props", _props), ("version", _version)):
        if name in info:
            kept = fn(info[name])
            if kept is not None:
                out[name] = kept
    return redactor.obj(out) if redactor else out
