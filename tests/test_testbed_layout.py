"""The test bed is a wing of its own: the core never imports it, and it never imports the CLI."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "verifier"


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module a file imports, lazy imports inside functions included."""
    package = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            mod = ".".join(x for x in (base, node.module) if x)
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_core_never_imports_the_testbed():
    core = [p for p in ROOT.glob("*.py") if p.name not in ("cli.py", "__main__.py")]
    assert core
    offenders = {p.name: sorted(m for m in imported_modules(p) if m.startswith("verifier.testbed")) for p in core}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_testbed_never_imports_the_cli():
    # No line cap: layer order and cohesion decide where a module splits (issue #23), not a count.
    files = sorted((ROOT / "testbed").glob("*.py"))
    assert {p.name for p in files} >= {"__init__.py", "faults.py", "proxy.py", "server.py", "engines.py"}
    for p in files:
        assert not [m for m in imported_modules(p) if m == "verifier.cli" or m.startswith("verifier.cli.")], p.name
