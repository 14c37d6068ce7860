"""The probe catalogue of docs/reference/probes.md, generated from the declarations (verifier/execution/probes.py), so the
page cannot drift from the code: the table between the page's BEGIN/END markers is rewritten from `catalogue_table()`.

    python scripts/probe_catalogue.py            # rewrite the table in docs/reference/probes.md
    python scripts/probe_catalogue.py --check    # exit 1 if the page differs from the declarations

tests/test_docs.py runs the check in the fast tier.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference" / "probes.md"
BEGIN = "<!-- BEGIN probe catalogue"
END = "<!-- END probe catalogue -->"


def table() -> str:
    """The catalogue as a Markdown table, one row per declared probe, in declaration order."""
    sys.path.insert(0, str(ROOT))
    from verifier.execution.probes import catalogue_table

    rows = ["| probe | surfaces | sends | checks | component |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| `{name}` | {surfaces} | {sends} | {checks} | {component} |"
             for name, surfaces, sends, checks, component in catalogue_table()]
    return "\n".join(rows)


def render(page: str) -> str:
    """The page with the table between its markers replaced by the declarations' table."""
    start, end = page.index(BEGIN), page.index(END)
    head_end = page.index("\n", start) + 1
    return page[:head_end] + table() + "\n" + page[end:]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="compare only; exit 1 if the page is out of date")
    a = ap.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    fresh = render(page)
    if a.check:
        if fresh != page:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run python scripts/probe_catalogue.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh, encoding="utf-8")
    print(f"{PAGE.relative_to(ROOT)}: {fresh.count(chr(10) + '| `')} probes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
