"""Suite plugins: an installed distribution adds suites through the `verifier.suites` entry points.

The example package under tests/plugin_example/ is installed by pip (`--target` a temporary site directory put on
PYTHONPATH of a subprocess), from a copy so the build leaves nothing in the source tree. Offline: no index and no
build isolation, with the setuptools and wheel that the dev extra installs.
"""

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "tests" / "plugin_example"


def install(pkg: Path, site: Path) -> str:
    """`pip install` the project at `pkg` into `site`; its distribution name."""
    src = site.parent / f"{pkg.name}-src"
    shutil.copytree(pkg, src)
    p = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--no-build-isolation",
                        "--disable-pip-version-check", "--target", str(site), str(src)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    return tomllib.loads((pkg / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"]


def verifier(site: Path, *args):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "verifier", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)


def test_example_plugin_is_listed_and_runs(tmp_path, server):
    site = tmp_path / "site"
    site.mkdir()
    dist = install(EXAMPLE, site)
    p = verifier(site, "list-suites")
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line.split() for line in p.stdout.splitlines()}
    assert rows["sums"][2] == dist == "verifier-example-suite"
    assert rows["smoke"][2] == "builtin" and rows["gsm8k"][2] == "builtin"
    run = tmp_path / "run"
    p = verifier(site, "run", "--suite", "sums,smoke", "--smoke", "--base-url", server.url, "--model", "m", "--quiet", "--out", run)
    assert p.returncode == 0, p.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["suites"]["sums"]["metrics"]["accuracy"]["value"] == 1.0  # the arithmetic responder adds right
    # Offline re-scoring and a golden round trip need the plugin too: found the same way.
    assert verifier(site, "score", run).returncode == 0
    assert verifier(site, "bless", run, "--to", tmp_path / "golden").returncode == 0
    assert verifier(site, "calibrate", tmp_path / "golden", "--runs", run, run).returncode == 0
    p = verifier(site, "compare", run, "--golden", tmp_path / "golden")
    assert p.returncode == 0, p.stdout + p.stderr
    # Without the plugin on the path the suite is unknown: exit 2, one line.
    p = subprocess.run([sys.executable, "-m", "verifier", "score", str(run)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert p.returncode == 2 and "sums" in p.stderr


def test_broken_and_clashing_plugins_are_skipped_with_a_warning(tmp_path):
    site = tmp_path / "site"
    info = site / "bad_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[verifier.suites]\nmissing = no_such_module:SUITE\nclash = bad_plugin_mod:SUITE\n")
    (site / "bad_plugin_mod.py").write_text("from suites.smoke import SUITE\n")  # named `smoke`: a built-in's name
    p = verifier(site, "list-suites")
    assert p.returncode == 0
    assert "smoke" in p.stdout and "builtin" in p.stdout and "bad-plugin" not in p.stdout
    assert "suite plugin 'missing' from bad-plugin not loaded" in p.stderr
    assert "suite 'smoke' from bad-plugin ignored" in p.stderr


def test_entry_point_objects(monkeypatch):
    import suites
    from suites.smoke import SUITE

    assert suites._as_suites(SUITE) == [SUITE]
    assert suites._as_suites({"a": SUITE}) == [SUITE]
    assert suites._as_suites(lambda: SUITE) == [SUITE]
    import pytest

    with pytest.raises(TypeError):
        suites._as_suites(42)
    assert suites.origin("smoke") == "builtin"


def test_the_docs_show_the_tested_example():
    readme = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    module = (EXAMPLE / "verifier_example_suite.py").read_text(encoding="utf-8")
    assert f"```python\n{module.rstrip()}\n```" in readme
    assert len(module.splitlines()) <= 40
    assert 'sums = "verifier_example_suite:SUITE"' in readme


EXITING_PLUGIN = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "verifier-exiting-plugin"\nversion = "0.1.0"\n\n'
                      '[tool.setuptools]\npy-modules = ["verifier_exiting_plugin"]\n\n'
                      '[project.entry-points."verifier.suites"]\nexits = "verifier_exiting_plugin:SUITE"\n',
    "verifier_exiting_plugin.py": '"""A plugin that ends the process on import: the loader must report it and go on."""\nimport sys\n\nsys.exit(0)\n',
}


def test_a_plugin_calling_sys_exit_at_import_is_skipped_and_the_verdict_holds(tmp_path):
    """`sys.exit(0)` in a plugin's import used to make every command exit 0 with no run and no request sent."""
    import re

    from verifier.testbed.server import Reply, Script, TestServer, arithmetic

    pkg = tmp_path / "exiting"
    pkg.mkdir()
    for name, text in EXITING_PLUGIN.items():
        (pkg / name).write_text(text)
    site = tmp_path / "site"
    site.mkdir()
    assert install(pkg, site) == "verifier-exiting-plugin"
    golden = ROOT / "verifier" / "goldens" / "demo-smoke"

    def off_by_one(req):
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
        return Reply(content=str(int(m.group(1)) + int(m.group(2)) + 1))

    for responder, want in ((arithmetic, 0), (off_by_one, 13)):  # a pass stays 0, a regression stays 13
        with TestServer(Script(responder)) as srv:
            out = tmp_path / f"gate-{want}"
            p = verifier(site, "gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--quiet", "--out", out,
                         "--allow-inconclusive")
            assert p.returncode == want, p.stdout + p.stderr
            assert "suite plugin 'exits' from verifier-exiting-plugin not loaded: SystemExit" in p.stderr
            assert len(srv.script.requests) >= 20  # the run happened: built-in suites still work
            assert json.loads((out / "comparison.json").read_text())["exit_code"] == want


def test_a_dist_info_planted_in_the_current_directory_is_not_imported(tmp_path):
    """Issue 49 item 11: `python -m verifier` puts the current directory first on sys.path; a `*.dist-info` planted
    there must not make it import a module (here one that leaves a marker file). The same plugin on PYTHONPATH, an
    installed place, is loaded (the discovery itself still works)."""
    cwd = tmp_path / "downloaded"
    info = cwd / "planted-1.0.dist-info"
    info.mkdir(parents=True)
    marker = tmp_path / "imported"
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[verifier.suites]\nplanted = planted_mod:SUITE\n")
    (cwd / "planted_mod.py").write_text(f"open({str(marker)!r}, 'w').close()\nfrom suites.smoke import SUITE\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "verifier", "list-suites"], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=120)
    assert p.returncode == 0, p.stderr
    assert not marker.exists() and "planted" not in p.stdout + p.stderr
    # from an installed place (PYTHONPATH), the same distribution is found and loaded
    p = subprocess.run([sys.executable, "-m", "verifier", "list-suites"], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(cwd), str(ROOT)])}, cwd=tmp_path, timeout=120)
    assert marker.exists() and "suite 'smoke' from planted ignored" in p.stderr, p.stderr
