"""The vendor matrix in headless Chromium (like tests/test_browser.py): CSP intact, rows sortable, report links work."""

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
