"""The house rules on imports, checked on the source (ast), not by importing anything. This is the one import walker.

Arrows point down the floors below (docs/DESIGN.md "Packages"): a module imports only modules on its own floor or
lower; the core never imports the app, the CLI or the test bed; and no two modules import each other, even
through a function-local import.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("verifier", "suites")
HEAVY = ("openai", "pandas", "aiohttp", "lm_eval", "datasets")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Package modules that `name` imports anywhere in its body (function-local imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from pkg import sub` imports the submodule when there is one, else a name of pkg itself.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:  # `import verifier.cli.main` -> verifier.cli.main; `import x.y` of a name -> x
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports(name, path, known) for name, path in mods.items()}


def inside(name: str, pkg: str) -> bool:
    return name == pkg or name.startswith(pkg + ".")


# Lowest first. A module belongs to the floor of its longest matching prefix; `verifier` alone is the package's
# __init__ (the lazy Python API). Keep in step with docs/DESIGN.md "Packages" and "Package map".
FLOORS: list[tuple[str, tuple[str, ...]]] = [
    ("base", ("verifier.types", "verifier.errors", "verifier.jsonsafe", "verifier.safeio", "verifier.safewrite", "verifier.redact", "verifier.textmemory",
              "verifier.scrub", "verifier.seal", "verifier.version", "verifier.stats")),
    ("surfaces", ("verifier.surfaces",)),
    ("wire", ("verifier.wire",)),
    ("judge", ("verifier.judge",)),
    ("execution", ("verifier.execution",)),
    ("suites", ("suites",)),
    ("golden", ("verifier.golden",)),
    ("attribution", ("verifier.attribution",)),
    ("report", ("verifier.report",)),
    ("app", ("verifier.app",)),
    ("api", ("verifier.api", "verifier")),
    ("testbed", ("verifier.testbed",)),
    ("cli", ("verifier.cli", "verifier.__main__")),
]
CORE = [name for name, _ in FLOORS[: [n for n, _ in FLOORS].index("app")]]


def floor_of(module: str) -> int | None:
    best = None
    for level, (_, prefixes) in enumerate(FLOORS):
        for p in prefixes:
            hit = module == p if p == "verifier" else inside(module, p)
            if hit and (best is None or len(p) > best[1]):
                best = (level, len(p))
    return None if best is None else best[0]


def upward_imports(g: dict[str, set[str]]) -> dict[str, list[str]]:
    out = {}
    for m, targets in g.items():
        up = sorted(t for t in targets if floor_of(t) is not None and floor_of(m) is not None and floor_of(t) > floor_of(m))
        if up:
            out[m] = up
    return out


def test_every_module_has_a_floor():
    assert sorted(m for m in graph() if floor_of(m) is None) == []


def test_imports_point_down_the_floors():
    up = upward_imports(graph())
    named = {f"{m} ({FLOORS[floor_of(m)][0]})": [f"{t} ({FLOORS[floor_of(t)][0]})" for t in ts] for m, ts in up.items()}
    assert named == {}


def test_the_core_never_imports_the_app_cli_or_testbed():
    top = ("verifier.app", "verifier.api", "verifier.cli", "verifier.testbed", "verifier.__main__")
    offenders = {m: sorted(t for t in ts if any(inside(t, x) for x in top) or t == "verifier")
                 for m, ts in graph().items() if FLOORS[floor_of(m)][0] in CORE}
    assert {m: ts for m, ts in offenders.items() if ts} == {}


def test_the_floor_check_finds_an_upward_import():
    assert upward_imports({"verifier.judge.parse": {"verifier.execution.journal", "verifier.types"}}) == {
        "verifier.judge.parse": ["verifier.execution.journal"]}
    assert upward_imports({"verifier.cli.main": {"verifier.app.gate"}}) == {}
    assert floor_of("verifier") == floor_of("verifier.api") and floor_of("verifier.version") == 0


def test_the_testbed_is_a_wing_of_its_own():
    names = {p.name for p in (ROOT / "verifier" / "testbed").glob("*.py")}
    assert names >= {"__init__.py", "faults.py", "proxy.py", "server.py", "engines.py"}
    assert not {m: ts for m, ts in graph().items() if inside(m, "verifier.testbed") and any(inside(t, "verifier.cli") for t in ts)}


def test_only_the_cli_imports_the_cli():
    # verifier/__main__.py is `python -m verifier`: the CLI's own entry, on the top floor with it.
    top = ("verifier.cli", "verifier.__main__")
    offenders = {m: sorted(t for t in ts if inside(t, "verifier.cli")) for m, ts in graph().items() if m not in top and not inside(m, top[0])}
    assert not {m: ts for m, ts in offenders.items() if ts}


def test_the_core_never_imports_the_testbed():
    # verifier.testbed may not exist yet: then nothing can import it and this passes.
    allowed = ("verifier.cli", "verifier.testbed")
    offenders = {m: sorted(t for t in ts if inside(t, "verifier.testbed")) for m, ts in graph().items()
                 if inside(m, "verifier") and not any(inside(m, a) for a in allowed)}
    assert not {m: ts for m, ts in offenders.items() if ts}


# ---------------------------------------------------------------- one writer of files
# Files are written whole and scrubbed by verifier/safewrite.py, beside safeio.py's reads on the base floor: the
# report, the golden store and the sweep write without the run package, and the journal keeps exchange and sample I/O.

WRITERS = {"write_json", "write_jsonl", "write_text", "atomic_write", "create_new", "check_writable", "scrubbed_line", "scrubbed", "dumps",
           "canonical"}
WRITER_FLOOR = {"verifier.errors", "verifier.jsonsafe", "verifier.redact", "verifier.safeio", "verifier.scrub"}


def writes_through_the_journal(source: str) -> list[tuple[int, str]]:
    """`journal.write_json(...)` (any alias of the journal module) or `from verifier.execution.journal import write_json`."""
    tree = ast.parse(source)
    aliases = {"journal"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("verifier.execution", "execution", None):
            aliases |= {a.asname or a.name for a in node.names if a.name == "journal"}
        elif isinstance(node, ast.Import):
            aliases |= {a.asname for a in node.names if a.name == "verifier.execution.journal" and a.asname}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                and node.attr in WRITERS:
            out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.ImportFrom) and (node.module or "").endswith("journal") \
                and any(a.name in WRITERS for a in node.names):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_the_file_writer_sits_beside_safeio():
    assert graph()["verifier.safewrite"] <= WRITER_FLOOR


def test_files_are_written_through_safewrite_not_the_journal():
    found = {}
    for p in sorted(p for top in (*PACKAGES, "tests", "bench") for p in (ROOT / top).rglob("*.py")):
        rel = p.relative_to(ROOT).as_posix()
        hits = writes_through_the_journal(p.read_text(encoding="utf-8"))
        if hits:
            found[rel] = hits
    assert found == {}
    journal = ast.parse((ROOT / "verifier" / "execution" / "journal.py").read_text(encoding="utf-8"))
    defined = {n.name for n in journal.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    assert defined & WRITERS == set()


def test_the_report_and_the_golden_store_write_without_the_journal():
    g = graph()
    for m, targets in g.items():
        if inside(m, "verifier.report") or inside(m, "verifier.golden"):
            if "verifier.execution.journal" in targets:
                source = modules()[m].read_text(encoding="utf-8")
                assert writes_through_the_journal(source) == [], m


def test_the_journal_writer_finder_finds_writes():
    bad = ("from verifier.execution import journal\njournal.write_json(p, d)\n"
           "from verifier.execution import journal as j\nj.write_text(p, t)\n"
           "from verifier.execution.journal import write_jsonl\n")
    assert sorted(ln for ln, _ in writes_through_the_journal(bad)) == [2, 4, 5]
    assert writes_through_the_journal("from verifier import safewrite\nsafewrite.write_json(p, d)\njournal.HEADER\n") == []


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_cli_start_up_imports_nothing_heavy():
    # Through sys.modules in a fresh interpreter, not a stopwatch: timing flakes on a busy machine.
    code = ("import sys, verifier.cli\n"
            "from verifier.cli import build_parser\n"
            "build_parser()\n"
            "try:\n    build_parser().parse_args(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "usage: verifier" in r.stdout
    assert r.stdout.strip().splitlines()[-1] == "HEAVY="


def test_every_subcommand_help_imports_nothing_heavy():
    code = ("import sys\nfrom verifier.cli import build_parser\nap = build_parser()\n"
            "sub = next(a for a in ap._actions if a.dest == 'cmd')\n"
            "for name in sub.choices:\n"
            "    try:\n        ap.parse_args([name, '--help'])\n    except SystemExit:\n        pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "HEAVY="


def test_version_flag():
    from verifier import __version__

    r = subprocess.run([sys.executable, "-m", "verifier", "--version"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == f"verifier {__version__}"


# ---------------------------------------------------------------- one adapter per surface
# Surface knowledge lives in verifier/surfaces/ (one module per surface, one line in registry.py). The rest of the
# core looks a mode up in the registry and asks its adapter; it never branches on a surface or mode name. The test
# bed (the scripted server and the fault proxy) keeps its own surface knowledge: it plays the servers.

SURFACE_OWNERS = ("verifier/surfaces/", "verifier/testbed/")


def surface_and_mode_names() -> set[str]:
    """Read from the adapters' source: every `Mode("<name>", ...)` and every class-level `name = "<surface>"`."""
    out = set()
    for p in sorted((ROOT / "verifier" / "surfaces").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "Mode" and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.add(node.args[0].value)
            elif isinstance(node, ast.ClassDef):
                for st in node.body:
                    if isinstance(st, ast.Assign) and [getattr(t, "id", None) for t in st.targets] == ["name"] \
                            and isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
                        out.add(st.value.value)
    return out


def _named(node: ast.AST, names: set[str]) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value} & names
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return set().union(set(), *(_named(e, names) for e in node.elts))
    return set()


def surface_branches(source: str, names: set[str]) -> list[tuple[int, str]]:
    """Places that decide on a surface or mode name: a comparison or membership test with a name literal
    (`surface == "responses"`, `mode in ("chat", ...)`), `startswith`/`endswith` of a name or of "-stream",
    a mode name built by hand (f"{surface}-stream"), a `case "messages":`, and the old `surface_of(...)`.
    `"messages" in body` is a chat body key, not a surface: allowed unless the container is named like modes."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            hit = set().union(*(_named(o, names) for o in [node.left, *node.comparators]))
            if hit == {"messages"} and _named(node.left, names) and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops) \
                    and not any(w in ast.unparse(node.comparators[0]).lower() for w in ("mode", "surface")):
                hit = set()
            if hit:
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.Call):
            f = node.func
            fname = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if fname == "surface_of":
                out.append((node.lineno, ast.unparse(node)))
            elif fname in ("startswith", "endswith") and node.args:
                a = node.args[0]
                consts = list(a.elts) if isinstance(a, ast.Tuple) else [a]
                if any(isinstance(c, ast.Constant) and isinstance(c.value, str) and (c.value in names or c.value == "-stream")
                       for c in consts):
                    out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.JoinedStr):
            if any(isinstance(v, ast.Constant) and isinstance(v.value, str) and v.value.startswith("-stream") for v in node.values):
                out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.MatchValue) and _named(node.value, names):
            out.append((node.lineno, ast.unparse(node.value)))
    return out


def test_the_surface_names_are_read_from_the_adapters():
    from verifier.surfaces.registry import MODES, SURFACE_NAMES

    assert surface_and_mode_names() >= set(MODES) | set(SURFACE_NAMES)


def test_no_branch_on_a_surface_or_mode_name_outside_the_surfaces():
    names = surface_and_mode_names()
    found = {}
    for pkg in PACKAGES:
        for p in sorted((ROOT / pkg).rglob("*.py")):
            rel = p.relative_to(ROOT).as_posix()
            if rel.startswith(SURFACE_OWNERS):
                continue
            hits = surface_branches(p.read_text(encoding="utf-8"), names)
            if hits:
                found[rel] = hits
    assert found == {}, "move these onto the surface adapter (verifier/surfaces/) and ask it through the registry"


def test_the_surface_branch_finder_finds_branches():
    from verifier.surfaces.registry import MODES, SURFACE_NAMES

    names = set(MODES) | set(SURFACE_NAMES)
    bad = ('if surface == "responses": pass\n'
           'x = mode.endswith("-stream")\n'
           'y = mode.startswith(("responses", "messages"))\n'
           'z = "completions" in modes\n'
           'w = surface_of(mode) != "chat"\n'
           'v = f"{surface}-stream"\n'
           'u = "messages" in surfaces\n'
           'match mode:\n    case "chat":\n        pass\n')
    assert sorted({ln for ln, _ in surface_branches(bad, names)}) == [1, 2, 3, 4, 5, 6, 7, 9]
    fine = ('a = "messages" in body\n'
            'b = body.get("messages")\n'
            'c = mode_of(m).stream\n'
            'd = surface_for(m).name != REFERENCE_SURFACE\n'
            'e = ("chat", "responses")\n')
    assert surface_branches(fine, names) == []


def test_verifier_run_is_the_api_function_whatever_was_imported_before():
    """No module is made callable: the run package is verifier.execution, so importing it (and everything the CLI
    imports) can never rebind `verifier.run`; verifier/__init__.py rewrites no class."""
    code = ("import inspect, verifier.execution.runner, verifier.execution.journal, verifier.app.collect, verifier.cli.main\n"
            "import verifier, verifier.api\n"
            "assert inspect.isfunction(verifier.run) and verifier.run is verifier.api.run, verifier.run\n"
            "assert type(verifier) is type(inspect), type(verifier)\n"
            "print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
    source = (ROOT / "verifier" / "__init__.py").read_text()
    assert "__class__" not in source and "ModuleType" not in source


# ---------------------------------------------------------------- a run's and a golden's JSON, read typed
# Issue 45: outside the load boundaries nothing indexes run.json, summary.json, golden.json or comparison.json by
# string key; their typed values (RunHeader, RunSummary, Golden/GoldenHeader, Comparison) are read instead.
DOCUMENT_BOUNDARIES = {
    "verifier/golden/store.py", "verifier/golden/model.py", "verifier/golden/schema.py",  # the golden's load boundary
    "verifier/execution/rundir.py", "verifier/execution/observations.py",  # the run directory's
    "verifier/types.py", "verifier/attribution/document.py",  # the typed documents' from_dict / to_json
}
DOCUMENT_SERIALISERS = {"from_json", "from_dict", "to_json", "to_dict"}
"""A function of these names anywhere is a document (de)serialiser: the edge where a JSON object becomes a value."""
TYPED_DOCUMENTS = {"verifier/types.py": ("RunHeader", "RunSummary", "SuiteSummary"),
                   "verifier/attribution/document.py": ("Comparison", "SuiteResult")}
SHARED_WORDS = {"name", "reason", "status", "extra", "findings", "samples", "version", "summary", "source", "requests",
                "missing", "metrics", "value", "tool_calls", "document", "cls", "format"}
"""Keys these documents share with the wire protocol (`tool_calls`, `name`), a Verdict, an evidence item, a margin
or a finding: indexing them says nothing about which document is read, so they are not counted."""
RUN_HEADER_EXTRAS = {"gate", "gate_of", "teacher_forcing", "server_info", "shard_set"}
"""run.json's optional keys that RunHeader reads through typed accessors (kept in its `extra`)."""
STRING_KEY_DEBT = {
    # Shrinking: each module's count of string-key reads on these documents' keys that remain. Lower a count when a
    # module reads its values typed; remove it at 0. Nothing is left (from 181 reads in 26 modules): the comparison's
    # side counts and finding details read as SideCounts / NewFinding (attribution/document.py), probe results as
    # probe_results.ProbeResult, a Verdict's latency as Verdict.latency_ms, the listing's comparison as
    # rundir.ComparisonGlance, run.json's suites as RunSuite, and run.json's check and summary.json's digest moved from
    # journal.py into execution/rundir.py; the gate file's and the sweep file's tables are typed once at their doors
    # after their schema check (cli/gatefile.GateFile, cli/sweep.SweepFile), the matrix's and the sweep's rows are
    # typed (report/matrix.MatrixRow, report/sweep.SweepRow), and a sweep's config.json is app/sweep.ConfigRecord.
}


def document_keys() -> set[str]:
    """The top-level and per-suite keys of run.json, summary.json, golden.json and comparison.json: the typed
    classes' fields (read from their source) and the shipped goldens' documents, so the set follows the code."""
    import json

    keys: set[str] = set(RUN_HEADER_EXTRAS)
    for rel, classes in TYPED_DOCUMENTS.items():
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                keys |= {s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
    for path in sorted((ROOT / "verifier" / "goldens").glob("*/golden.json")):
        g = json.loads(path.read_text(encoding="utf-8"))
        keys |= set(g) | set(g.get("source") or {}) | set(g.get("summary") or {})
        for info in (g.get("suites") or {}).values():
            keys |= set(info)
        for info in ((g.get("summary") or {}).get("suites") or {}).values():
            keys |= set(info)
    return keys - SHARED_WORDS


def string_key_reads(tree: ast.AST, keys: set[str]) -> list[tuple[str, int]]:
    """`x["key"]` (read, not assigned) and `x.get("key")` with a document key, outside document (de)serialisers."""
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST, serialiser: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DOCUMENT_SERIALISERS:
            serialiser = True
        key = None
        if not serialiser:
            if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and isinstance(node.slice, ast.Constant)
                    and isinstance(node.slice.value, str)):
                key = node.slice.value
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                  and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                key = node.args[0].value
        if key in keys:
            out.append((key, getattr(node, "lineno", 0)))
        for child in ast.iter_child_nodes(node):
            visit(child, serialiser)

    visit(tree, False)
    return out


def test_the_document_keys_are_derived_from_the_typed_classes_and_goldens():
    keys = document_keys()
    assert {"run_id", "endpoint", "suites", "exit_code", "frontend", "infra_rate", "margins", "gate_of"} <= keys
    assert not keys & SHARED_WORDS


def test_outside_the_load_boundaries_no_module_reads_a_run_or_golden_by_string_key():
    keys = document_keys()
    found = {}
    for path in sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("verifier/testbed/") or rel in DOCUMENT_BOUNDARIES:
            continue
        reads = string_key_reads(ast.parse(path.read_text(encoding="utf-8")), keys)
        if reads:
            found[rel] = reads
    worse = {rel: reads for rel, reads in found.items() if len(reads) > STRING_KEY_DEBT.get(rel, 0)}
    assert not worse, ("string-key reads of run/golden/comparison keys outside the load boundaries (read the typed "
                       f"value: RunDir.header()/summary(), Golden, Comparison): {worse}")
    paid = {rel: len(found.get(rel, ())) for rel, n in STRING_KEY_DEBT.items() if len(found.get(rel, ())) < n}
    assert not paid, f"fewer string-key reads than STRING_KEY_DEBT allows: lower these counts to {paid}"


def test_the_string_key_check_catches_a_read():
    tree = ast.parse("def f(h):\n    return h['run_id'], h.get('suites'), h['model']\n"
                     "def to_json(self):\n    return self.d['run_id']\n")
    assert [k for k, _ in string_key_reads(tree, {"run_id", "suites"})] == ["run_id", "suites"]


def test_the_report_renders_and_never_scores_or_compares():
    """Issue 45: verifier/report/ is the last, pure step. It takes typed values (a RunDir's header and summary, a
    GoldenHeader, a Comparison) and imports neither the application (which scores and compares) nor scoring."""
    g = graph()
    bad = {name: sorted(t for t in targets if inside(t, "verifier.app") or t == "verifier.execution.scoring")
           for name, targets in g.items() if inside(name, "verifier.report")}
    assert not {k: v for k, v in bad.items() if v}, bad


READERS = ("verifier.execution.rundir", "verifier.execution.journal", "verifier.execution.layout", "verifier.golden.store",
           "verifier.safeio", "verifier.scrub")
"""What reads a run directory or a golden from disk (or registers a run's secrets on the way)."""


def test_the_report_reads_no_run_directory_itself():
    """Issue 45: the report's entries are typed values (RunData, GoldenData, Comparison; the matrix's Entry) read by
    app/report_files; no module under verifier/report/ opens a run directory or a golden (the matrix did)."""
    g = graph()
    bad = {name: sorted(t for t in targets if t in READERS) for name, targets in g.items() if inside(name, "verifier.report")}
    assert not {k: v for k, v in bad.items() if v}, bad
