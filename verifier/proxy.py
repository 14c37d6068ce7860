"""Fault-injection reverse proxy (placeholder; being written)."""


def add_arguments(p):
    p.add_argument("--upstream")


def run(a) -> int:
    raise NotImplementedError("proxy not written yet")
