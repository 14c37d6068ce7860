"""A non-editable install must carry what `verifier demo` and the suites read at run time.

`pip install .` copies only the packages and their declared package data: a file the demo reads from the
checkout (as goldens/demo-smoke once was) is missing there, and `verifier demo` fails. This builds the
distribution offline from a copy of the source tree and looks inside it.
"""

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import setuptools

ROOT = Path(__file__).resolve().parent.parent

# What commands read from inside the installed package, relative to site-packages.
NEEDED = [
    "verifier/goldens/demo-smoke/golden.json",
    "verifier/goldens/demo-smoke/samples.jsonl",
    "verifier/report/templates/report.html.j2",
    "suites/data/gsm8k_smoke.jsonl",
    "suites/data/templates/drop-system.jinja",
    "suites/bfcl_sims/data/long_context.json",
]


def _can_build_wheel() -> bool:
    """setuptools >= 70.1 builds wheels itself; older ones need the `wheel` package."""
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def built_files(tmp: Path) -> set[str]:
    """Every file of the built distribution: the wheel's members, or (no wheel builder here) what build_py
    collects, which is exactly what bdist_wheel packs."""
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "runs", "reports", "build", "*.egg-info", "__pycache__", ".*"))
    if _can_build_wheel():
        r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                            "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stderr[-2000:]
        (whl,) = (tmp / "dist").glob("verifier-*.whl")
        return set(zipfile.ZipFile(whl).namelist())
    lib = tmp / "lib"
    r = subprocess.run([sys.executable, "-c", "import setuptools; setuptools.setup()", "-q", "build_py", "--build-lib", str(lib)],
                       cwd=src, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return {p.relative_to(lib).as_posix() for p in lib.rglob("*") if p.is_file()}


def test_distribution_carries_the_demo_golden_and_package_data(tmp_path):
    files = built_files(tmp_path)
    missing = [f for f in NEEDED if f not in files]
    assert not missing, f"not in the built distribution: {missing}"
    assert "verifier/cli/demo.py" in files and "verifier/testbed/server.py" in files
    assert not any(f.startswith(("tests/", "bench/", "goldens/")) for f in files)


def test_demo_reads_its_golden_from_the_package():
    from verifier.cli import demo

    assert demo.DEMO_GOLDEN.is_relative_to(ROOT / "verifier")
    assert (demo.DEMO_GOLDEN / "golden.json").is_file() and (demo.DEMO_GOLDEN / "samples.jsonl").is_file()
