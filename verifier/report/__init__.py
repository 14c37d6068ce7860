"""The reviewer's report (one self-contained HTML file), JUnit XML, a Markdown summary and a CSV for CI.

    data.py    the inputs as values (RunData, GoldenData) and the joined per-sample table
    views.py   the report's sections as plain data (charts, tables, flip cards, provenance)
    html.py    render(run, golden, comparison) -> HTML: pure, no file read but the template
    ci.py      junit_xml(doc), markdown(doc), the per-sample CSV
    files.py   the edge: read a run dir / golden / comparison, write every output (`write_report`: the `report` command)

The names below are the package's public surface (tests, bench and the CLI use them).
"""

from .ci import junit_xml, markdown, samples_frame, write_csv
from .data import GoldenData, Inputs, RunData, anchor, inputs
from .files import load, read_golden, read_run, render_html, write_all, write_report
from .html import environment, render, script_json, table_json
from .views import answer_diff

__all__ = ["GoldenData", "Inputs", "RunData", "anchor", "answer_diff", "environment", "inputs", "junit_xml",
           "load", "markdown", "read_golden", "read_run", "render", "render_html", "samples_frame", "script_json",
           "table_json", "write_all", "write_csv", "write_report"]
