"""One colour and one label per gate status and per verdict, shared by the report, the matrix and summary.md.

A reader learns the colours once: green passed, red failed, amber not decided, grey nothing measured.
`regression_unattributed` (a significant drop whose cause cannot be separated) fails, so it is a failing
colour, but not the red of an attributed regression and never the amber of "not enough evidence".
"""

from __future__ import annotations

GREEN, RED, AMBER, GREY, BROWN, MAGENTA = "#2e7d32", "#c62828", "#b26a00", "#78909c", "#5d4037", "#ad1457"

STATUS_COLOUR = {"pass": GREEN, "frontend_regression": RED, "quantization_regression": RED, "both": RED,
                 "regression_unattributed": MAGENTA, "inconclusive": AMBER, "incomplete": BROWN}
STATUS_ICON = {"pass": "✅", "frontend_regression": "❌", "quantization_regression": "❌", "both": "❌",
               "regression_unattributed": "🟥", "inconclusive": "⚠️", "incomplete": "⛔"}

# Verdicts of checks, signals, metrics and drift as shown: (css class suffix, label, markdown icon).
VERDICT = {"pass": ("pass", "pass", "✅"), "clean": ("pass", "clean", "✅"),
           "fail": ("fail", "fail", "❌"), "fired": ("fail", "fired", "❌"),
           "inconclusive": ("inconclusive", "inconclusive", "⚠️"),
           "not_measured": ("not_measured", "not measured", "➖"), "unavailable": ("not_measured", "not measured", "➖"),
           "reference_fails": ("reference_fails", "reference fails too", "🟨")}


def shown(verdict: str | None, qualifier: str | None = None, measured: bool = True) -> tuple[str, str, str]:
    """(css class suffix, label, icon) of a verdict as a reader should see it: a `pass` that measured nothing
    is "not measured" (grey), a probe passed only because the golden fails it too is "reference fails too"."""
    if not measured or qualifier == "not_measured":
        return VERDICT["not_measured"]
    if qualifier == "reference_fails":
        return VERDICT["reference_fails"]
    return VERDICT.get(verdict or "", (str(verdict), str(verdict), ""))
