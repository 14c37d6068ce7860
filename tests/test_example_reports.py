"""The example reports in reports/ (made by `verifier demo`, copied by scripts/example_reports.py) still render from
the current templates: each is rendered again from its own run directory and the shipped golden, and the two HTML
documents must have the same structure (the same elements with the same ids and classes; text and timestamps aside).
Compared as counts, not in order: the gate renders from the comparison it holds, `verifier report` from
comparison.json, whose keys are sorted, so rows of one table may come in another order.
A failure means the templates or the comparison changed: run `python scripts/example_reports.py`."""

from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = {"demo-pass": "pass", "demo-frontend-regression": "frontend_regression"}


class _Shape(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self.tags.append((tag, a.get("id") or "", " ".join(sorted((a.get("class") or "").split()))))


def shape(html: str) -> list[tuple[str, str, str]]:
    p = _Shape()
    p.feed(html)
    return p.tags


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_an_example_report_renders_again_with_the_same_structure(name, tmp_path):
    import shutil

    from verifier.app.report_files import render_html

    # A copy: the example holds no observations.jsonl (its seal would be its author's), so reading it scores it.
    run_dir = shutil.copytree(ROOT / "reports" / name, tmp_path / name)
    assert not (run_dir / "observations.jsonl").exists()
    doc = json.loads((run_dir / "comparison.json").read_text(encoding="utf-8"))
    assert doc["status"] == EXAMPLES[name] and doc["golden"]["path"] == "demo-smoke"
    stored = (run_dir / "report.html").read_text(encoding="utf-8")
    before = sorted(p.name for p in run_dir.iterdir())
    fresh = render_html(run_dir, "demo-smoke", None)
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(before + ["observations.jsonl"])  # scored, nothing else
    assert len(shape(stored)) > 50
    assert Counter(shape(fresh)) == Counter(shape(stored)), f"reports/{name} is stale: run python scripts/example_reports.py"


def test_the_examples_name_no_path_of_this_machine():
    for f in (ROOT / "reports").rglob("*"):
        if f.is_file():
            text = f.read_text(encoding="utf-8", errors="replace")
            assert str(ROOT) not in text and "/tmp/" not in text, f
