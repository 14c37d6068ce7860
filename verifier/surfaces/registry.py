"""The registry: every API surface, once. `SURFACES`, `MODES` and every lookup below are derived from it.

Adding a surface is one module in this package (a class with the `Surface` protocol of base.py and a `SURFACE`
instance) plus one entry in `SURFACES`. The core looks modes up here and asks the adapter; it never branches on a
surface or mode name (tests/test_architecture.py checks it).
"""

from __future__ import annotations

from typing import Any

from verifier.surfaces import chat, messages, responses
from verifier.surfaces.base import Mode, Surface

SURFACES: tuple[Surface, ...] = (chat.SURFACE, responses.SURFACE, messages.SURFACE)
"""In the order modes are listed (help texts, preflight) and probes run."""

_BY_MODE: dict[str, tuple[Surface, Mode]] = {m.name: (s, m) for s in SURFACES for m in s.modes}
MODES: tuple[str, ...] = tuple(_BY_MODE)
"""Every wire mode name, in registry order."""
SURFACE_NAMES: tuple[str, ...] = tuple(s.name for s in SURFACES)

REFERENCE_MODE = SURFACES[0].modes[0].name
"""The mode every other mode is compared with (stream parity, the dual path, surface parity) and the default one."""
REFERENCE_SURFACE = SURFACES[0].name
STREAM_PARITY_MODE = next(m.name for m in SURFACES[0].modes if m.stream)
"""The reference surface's streamed mode: stream parity compares it with the reference mode."""
DUAL_PATH_MODE = next(m.name for s in SURFACES for m in s.modes if m.dual_path)


def surface_for(mode: str) -> Surface:
    """The surface that speaks `mode`; an unknown mode (a hand-written journal) is read as the reference surface."""
    hit = _BY_MODE.get(mode)
    return hit[0] if hit else SURFACES[0]


def mode_of(mode: str) -> Mode:
    """The `Mode` named `mode`; an unknown name gets the reference route, streamed when it says so."""
    hit = _BY_MODE.get(mode)
    if hit:
        return hit[1]
    ref = SURFACES[0].modes[0]
    return Mode(mode, ref.path, mode.endswith("-stream"), ref.ping)


def mode_named(surface: str, stream: bool) -> str:
    """The plain or streamed mode of a surface (never its dual path)."""
    return next(m.name for m in by_name(surface).modes if m.stream == stream and not m.dual_path)


def by_name(surface: str) -> Surface:
    return next(s for s in SURFACES if s.name == surface)


def surfaces_of(modes: list[str] | tuple[str, ...]) -> list[str]:
    """The names of the surfaces a run's wire modes speak, in registry order."""
    spoken = {surface_for(m).name for m in modes}
    return [s.name for s in SURFACES if s.name in spoken]


def translate(mode: str, body: dict[str, Any]) -> dict[str, Any]:
    """A chat body (stream flags not yet set) -> the body for `mode`'s surface, streamed when the mode is."""
    return surface_for(mode).translate(mode_of(mode), body)
