"""Hugging Face hub datasets that fail fast and say what to do when the hub cannot be reached.

Why: offline, `datasets.load_dataset` retries the hub for 25-40 s and then raises a bare
ConnectionError, which the CLI can only report as an internal error. Here a short TCP probe of the
hub endpoint (HF_ENDPOINT, or the HTTPS proxy when one is set) decides in at most PROBE_S seconds;
an unreachable hub is a usage error (exit 2) naming what was tried and the way out: `--data PATH`
or `--smoke`. With HF_HUB_OFFLINE / HF_DATASETS_OFFLINE set, nothing is probed: the load uses the
local cache, and a cache miss gets the same one-line error (datasets fails fast in offline mode).
"""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Callable, TypeVar
from urllib.parse import urlsplit

from verifier.errors import UsageError

T = TypeVar("T")
PROBE_S = 3.0
"""Longest wait for the hub probe (DNS + TCP connect), seconds."""
DEFAULT_ENDPOINT = "https://huggingface.co"


class HubUnavailable(UsageError):
    """A hub dataset that is neither local nor fetchable."""


def offline_mode() -> bool:
    """The user told the HF libraries to stay offline (as huggingface_hub and datasets read it)."""
    return any(os.environ.get(k, "").strip().upper() in {"1", "ON", "YES", "TRUE"}
               for k in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT


def _probe_target() -> tuple[str, int]:
    """Host and port a download would connect to first: the HTTPS proxy when one is set, else the hub."""
    proxy = next((os.environ[k] for k in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy") if os.environ.get(k)), None)
    url = urlsplit(proxy if proxy and urlsplit(hub_endpoint()).scheme == "https" else hub_endpoint())
    port = url.port or (443 if url.scheme == "https" else 80)
    return url.hostname or "", port


def probe(timeout: float = PROBE_S) -> str | None:
    """None when a TCP connection to the hub (or proxy) opens within `timeout`, else why not.

    Run in a thread because name resolution has no timeout of its own; a hung resolver must not
    hang the command.
    """
    host, port = _probe_target()
    result: list[str | None] = []

    def attempt() -> None:
        try:
            socket.create_connection((host, port), timeout=timeout).close()
            result.append(None)
        except OSError as e:
            result.append(e.strerror or type(e).__name__)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout + 0.5)
    if not result:
        return f"no answer within {timeout:.0f} s"
    return result[0]


WAY_OUT = ("pass --data PATH for a local copy", "--smoke for the built-in subset")


def unavailable(what: str, why: str, way_out: tuple[str, ...], note: str = "") -> HubUnavailable:
    """The error, its ways out as hints (the CLI prints those the command has: gate has no --smoke)."""
    from verifier.errors import hinted

    return hinted(HubUnavailable(f"{what}: not local and the hub ({hub_endpoint()}) cannot be reached ({why}){note}"), *way_out)


def maybe_cached(repo: str) -> bool:
    """Whether the local HF caches may hold dataset `repo` (False means a sure miss: no need to import datasets)."""
    home = Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface")
    hub_cache = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub")
    ds_cache = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets")
    return (hub_cache / f"datasets--{repo.replace('/', '--')}").exists() or (ds_cache / repo.replace("/", "___")).exists()


def load(what: str, fn: Callable[[], T], way_out: tuple[str, ...] = WAY_OUT,
         repo: str | None = None, probe_first: bool = True) -> T:
    """`fn()` (a hub download), failing in seconds with one line when the hub is out of reach.

    `what` names the dataset as the user would look for it (e.g. "gsm8k: openai/gsm8k (main, test)");
    `repo`, the hub dataset id, lets offline mode report a cache miss without importing datasets.
    `probe_first=False` when `fn` may need no hub at all (connection errors are still turned into this error).
    """
    if offline_mode() and repo and not maybe_cached(repo):
        raise unavailable(what, "offline mode, not in the cache", way_out)
    if probe_first and not offline_mode():
        why = probe()
        if why:
            raise unavailable(what, why, way_out, " (a cached copy: set HF_HUB_OFFLINE=1)")
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - datasets, huggingface_hub, requests and httpx each have their own
        if _from_the_hub(e):
            why = "offline mode, not in the cache" if offline_mode() else f"{type(e).__name__}: {str(e)[:120]}"
            raise unavailable(what, why, way_out) from None
        raise


def _from_the_hub(e: BaseException) -> bool:
    """A failure to reach the hub, not any connection error: lm-eval's `fn` also talks to the endpoint under
    test, whose connection errors must not be reported as the hub's."""
    names = {c.__name__ for c in type(e).__mro__}
    if names & {"LocalEntryNotFoundError", "OfflineModeIsEnabled"}:  # huggingface_hub's "cannot reach, not cached"
        return True
    text = str(e)
    host = urlsplit(hub_endpoint()).netloc
    return (isinstance(e, ConnectionError) and "on the Hub" in text) or (isinstance(e, OSError) and bool(host) and host in text)
