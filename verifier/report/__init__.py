"""The reviewer's report (one self-contained HTML file), JUnit XML, a Markdown summary and a CSV for CI.

    data.py    the inputs as values (RunData, GoldenData) and the joined per-sample table
    views.py   the report's sections as plain data (charts, tables, flip cards, provenance)
    html.py    render(run, golden, comparison) -> HTML: pure, no file read but the template
    ci.py      junit_xml(doc), markdown(doc), the per-sample CSV
    pictures.py the SVG pictures of the report
    matrix.py  the engine x surface x mode matrix page (pure renderer of comparisons)
    colours.py the status colours every page shares
    sweep.py   the sweep page
Reading a run dir / golden / comparison from disk and writing every output is the app's edge
(verifier/app/report_files.py): report is pure, it imports only what is below it (attribution, golden, run, judge, base).

The names below are the package's public surface (tests, bench and the CLI use them).
"""

from .ci import junit_xml, markdown, samples_frame, write_csv
from .data import GoldenData, Inputs, RunData, anchor, inputs
from .html import environment, render, script_json, table_json
from .views import answer_diff

__all__ = ["GoldenData", "Inputs", "RunData", "anchor", "answer_diff", "environment", "inputs", "junit_xml",
           "markdown", "render", "samples_frame", "script_json", "table_json", "write_csv"]
