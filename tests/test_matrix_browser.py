"""The vendor matrix in headless Chromium (like tests/test_report_browser.py): CSP intact, rows sortable, report links work."""

from __future__ import annotations

from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)", allow_module_level=True)

from test_matrix import PROVIDERS, five  # noqa: E402,F401  (the module-scoped 5-provider matrix)


def test_matrix_in_browser(five):  # noqa: F811
    tmp, _, _ = five
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            messages, requests = [], []
            page.on("console", lambda m: messages.append((m.type, m.text)))
            page.on("pageerror", lambda e: messages.append(("pageerror", str(e))))
            page.on("request", lambda r: requests.append(r.url))
            page.goto((tmp / "matrix" / "matrix.html").resolve().as_uri())
            assert [m for m in messages if m[0] in ("error", "pageerror")] == []  # the script's CSP hash matches
            assert all(u.startswith("file://") for u in requests), requests
            providers = lambda: page.locator("#matrix tbody tr").evaluate_all("rs => rs.map(r => r.dataset.provider)")  # noqa: E731
            assert providers() == list(PROVIDERS)
            page.click("th[data-col='0']")
            assert providers() == sorted(PROVIDERS)
            page.click("th[data-col='0']")
            assert providers() == sorted(PROVIDERS, reverse=True)
            page.click("th[data-col='4']")  # frontend verdict, ascending: pass first
            assert providers()[0] == "healthy"
            page.click("th[data-col='4']")
            assert providers()[-1] == "healthy"
            assert page.locator("th[data-col='4']").get_attribute("aria-sort") == "descending"
            # A provider's link opens its full report.
            page.click("a.report >> text=reasoning-parser")
            page.wait_for_load_state()
            assert page.url.endswith("/runs/reasoning-parser/report.html")
            assert "frontend_regression" in page.locator("#status").inner_text()
        finally:
            browser.close()


def test_matrix_status_colours_diagnosis_and_missing(five, tmp_path):  # noqa: F811
    """Status cells in the status colours, the diagnosis beside the status, and what is missing for `incomplete`."""
    import os
    import re

    from test_matrix import DEMO

    from verifier.report import colours
    from verifier.cli import main
    from verifier.testbed.server import Reply, Script, TestServer, arithmetic

    tmp, _, _ = five

    def flaky(req):  # every fourth question's connection is dropped: infra errors over the budget
        r = arithmetic(req)
        m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
        return Reply(drop=True) if m and int(m.group(1)) % 4 == 0 else r

    with TestServer(Script(flaky)) as srv:
        assert main(["gate", "--golden", str(DEMO), "--base-url", srv.url, "--model", "m", "--quiet", "--max-retries", "0",
                     "--out", str(tmp_path / "flaky")]) == 30
    runs = [f"{n}={tmp / 'runs' / n}" for n in ("healthy", "reasoning-parser", "no-usage")] + [f"flaky={tmp_path / 'flaky'}"]
    assert main(["matrix", "--golden", str(DEMO), "--out", str(tmp_path / "m"), *runs]) == 30
    shots = Path(os.environ["VERIFIER_SCREENSHOTS"]) if os.environ.get("VERIFIER_SCREENSHOTS") else tmp_path
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 700})
            messages, requests = [], []
            page.on("console", lambda m: messages.append((m.type, m.text)))
            page.on("pageerror", lambda e: messages.append(("pageerror", str(e))))
            page.on("request", lambda r: requests.append(r.url))
            page.goto((tmp_path / "m" / "matrix.html").resolve().as_uri())
            assert [m for m in messages if m[0] in ("error", "pageerror")] == []
            assert all(u.startswith("file://") for u in requests), requests

            def row(provider):
                return page.locator(f"#matrix tbody tr[data-provider='{provider}']")

            def rgb(hex_colour):
                return "rgb({}, {}, {})".format(*(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)))

            for provider, status in (("healthy", "pass"), ("reasoning-parser", "frontend_regression"), ("flaky", "incomplete")):
                cell = row(provider).locator("td.status")
                assert cell.inner_text().startswith(status)
                assert cell.evaluate("e => getComputedStyle(e).backgroundColor") == rgb(colours.STATUS_COLOUR[status])
            assert "answer_in_reasoning" in row("reasoning-parser").locator("td.why .diagnosis").inner_text()
            assert row("healthy").locator("td.why").inner_text() == "—"
            missing = row("flaky").locator("td.why .missing").first.inner_text()
            assert missing.startswith("missing: infra errors") and "above the budget" in missing
            legend = page.locator(".legend span", has_text="regression_unattributed")
            assert legend.evaluate("e => getComputedStyle(e).backgroundColor") == rgb(colours.STATUS_COLOUR["regression_unattributed"])
            page.screenshot(path=str(shots / "matrix.png"), full_page=True)
        finally:
            browser.close()
