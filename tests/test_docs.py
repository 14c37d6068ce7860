"""The documentation against the code, in the fast tier: every relative link resolves (to a file, and to a heading
when it names one), every docs/ or tests/ file the code cites exists, the probe catalogue page equals the
declarations, and the README stays a five-minute read with its two commands exactly as CI runs them.
docs/_incoming/ (text other changes hand in before it is folded into the pages) is not checked."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("verifier", "suites", "tests", "bench", "scripts", ".ci")
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def pages() -> list[Path]:
    """The Markdown a reader follows links through: README, CHANGELOG, docs/, bench/results/, reports/."""
    out = [ROOT / "README.md", ROOT / "CHANGELOG.md"]
    for d in ("docs", "bench/results", "reports"):
        out += sorted(p for p in (ROOT / d).rglob("*.md") if "_incoming" not in p.relative_to(ROOT).parts)
    return out


def outside_code(text: str) -> str:
    """The text without fenced code blocks and inline code (a link inside code is not a link)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def test_every_relative_link_resolves():
    broken = []
    for page in pages():
        for target in LINK.findall(outside_code(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def code_files() -> list[Path]:
    return [p for d in CODE_DIRS for p in sorted((ROOT / d).rglob("*")) if p.is_file() and
            (p.suffix in (".py", ".toml", ".j2", ".sh") or p.name == "run")]


@pytest.mark.parametrize("kind, pattern", [
    ("docs", r"\bdocs/[\w./-]+\.md\b"),
    ("tests", r"\btests/test_\w+\.py\b"),
])
def test_every_file_the_code_cites_exists(kind, pattern):
    missing = set()
    for f in code_files():
        for cited in re.findall(pattern, f.read_text(encoding="utf-8", errors="replace")):
            if not (ROOT / cited).exists():
                missing.add(f"{f.relative_to(ROOT)}: {cited}")
    assert not missing, sorted(missing)


def test_the_probe_catalogue_page_equals_the_declarations():
    sys.path.insert(0, str(ROOT / "scripts"))
    import probe_catalogue

    page = probe_catalogue.PAGE.read_text(encoding="utf-8")
    assert probe_catalogue.render(page) == page, "run python scripts/probe_catalogue.py"
    from verifier.execution.probes import CATALOGUE

    assert page.count("\n| `") == len(CATALOGUE)


def test_the_catalogue_script_checks_from_the_command_line():
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "probe_catalogue.py"), "--check"], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr


def test_the_readme_is_short_undated_and_holds_the_two_commands():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    assert not re.findall(r"\b20\d\d-\d\d-\d\d\b", text), "dated figures belong in bench/results/"
    # .ci/run and the CI recipe run these exactly as written
    assert "```bash\npip install -e . && verifier demo\n```" in text
    assert "```bash\npip install -e '.[dev]' && python -m pytest\n```" in text
    for page in ("docs/ci.md", "docs/extending.md", "docs/security.md", "docs/reference/cli.md", "docs/engines.md"):
        assert f"]({page}" in text, f"README does not link {page}"


def test_the_bug_catalogue_names_only_real_faults_findings_signals_and_probes():
    from verifier.attribution import diagnosis, signals
    from verifier.execution.probes import CATALOGUE
    from verifier.testbed.faults import ALL_FAULTS

    readers = set(diagnosis.TABLE) | {s.name for s in signals.SIGNALS} | {p.name for p in CATALOGUE}
    faults = set(ALL_FAULTS)
    unknown = []
    rows = [line.split(" | ") for line in (ROOT / "docs" / "frontend-bugs.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("| ") and not line.startswith(("| ---", "| wire symptom"))]
    assert len(rows) > 30
    for cells in rows:
        for column, known in ((cells[1], readers), (cells[-1], faults)):
            for name in re.findall(r"`([a-z_*]+)`", column):
                if not any(re.fullmatch(name.replace("*", "[a-z_]*"), k) for k in known):
                    unknown.append(name)
    assert not unknown, unknown


def test_a_benchmark_adds_its_dated_section_first_under_the_header(tmp_path):
    import datetime as dt

    sys.path.insert(0, str(ROOT / "bench"))
    import record

    t1, t2 = dt.datetime(2026, 1, 1, 9, 0), dt.datetime(2026, 1, 2, 9, 0)
    path = record.add("x", "old figure", "python bench/perf/x.py --n 1", "2 cores", t1, root=tmp_path)
    record.add("x", "new figure", "python bench/perf/x.py --n 2", "4 cores", t2, root=tmp_path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("# x\n\nFigures printed by `bench/perf/x.py`, newest first.\n\n## 2026-01-02 09:00 UTC\n")
    assert text.index("new figure") < text.index("old figure") and text.count("## 2026-") == 2
    assert "Machine: 4 cores. Command: `python bench/perf/x.py --n 2`" in text


def test_every_results_file_is_listed_with_the_script_that_makes_it():
    results = ROOT / "bench" / "results"
    index = (results / "README.md").read_text(encoding="utf-8")
    for f in sorted(results.glob("*.md")):
        if f.name != "README.md":
            assert f"]({f.name})" in index, f"bench/results/README.md does not list {f.name}"
    for script in re.findall(r"`(bench/[\w/]+\.py)`", index):
        assert (ROOT / script).exists(), script


def _code_commands(path: Path) -> list[str]:
    """The shell commands in a page's fenced code blocks, continuation lines joined."""
    out = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", path.read_text(encoding="utf-8"), flags=re.S | re.M):
        out += [line.strip() for line in block.replace("\\\n", " ").splitlines() if line.strip()]
    return out


def test_the_readme_says_to_make_a_venv_before_the_first_install():
    """Issue 50, low: a new user installed into the system interpreter."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python3 -m venv" in text and text.index("python3 -m venv") < text.index("pip install"), "venv first"


def test_the_docs_lead_with_gates_that_finish_in_minutes_on_two_cores():
    """Issue 50, item 5 and its acceptance line: a bfcl golden gate took 14 minutes per endpoint on 2 cores. Every gate
    the README and the pages show against a shipped real-engine golden is limited (`--limit`), and a page that starts
    an engine gives the threads advice before its first `verifier engine start`."""
    from verifier.golden import store

    engine_goldens = {p.name for p in store.packaged() if not p.name.startswith("demo-")}
    shown = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        if "_incoming" in page.parts:
            continue
        commands = _code_commands(page)
        for cmd in commands:
            m = re.match(r"verifier gate\b.*--golden (\S+)", cmd)
            if m and m.group(1) in engine_goldens:
                shown.append(cmd)
                assert "--limit" in cmd, f"{page.name}: {cmd}"
        starts = [c for c in commands if c.startswith("verifier engine start")]
        if starts and page.name in ("README.md", "quickstart.md"):
            text = page.read_text(encoding="utf-8")
            first_start = re.search(r"^\s*verifier engine start", text, re.M)
            assert first_start and text.index("--threads") < first_start.start(), f"{page.name}: threads advice after the first start"
    assert shown, "no gate against a shipped engine golden is shown: the check checked nothing"


def test_every_documented_lm_eval_import_names_its_out():
    """Issue 50, low: the docs' `verifier lm-eval --task T ...` exited 2 (`needs --out`)."""
    shown = [c for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))] for c in _code_commands(page)
             if c.startswith("verifier lm-eval --task ")]
    assert shown and all("--out " in c for c in shown), shown


def test_every_test_the_security_page_names_exists():
    """docs/security.md's table of bounds names the test that holds each one: a renamed or deleted test must not
    leave the page claiming a bound nothing asserts."""
    text = (ROOT / "docs" / "security.md").read_text(encoding="utf-8")
    named = set(re.findall(r"tests/(test_\w+\.py)::(test_\w+)", text))
    assert len(named) >= 30
    missing = [f"{f}::{t}" for f, t in sorted(named)
               if not re.search(rf"^def {t}\(", (ROOT / "tests" / f).read_text(encoding="utf-8"), re.M)]
    assert not missing, missing
