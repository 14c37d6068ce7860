"""The report in a real browser: Debian's headless Chromium driven by Playwright's Python package.

Needs `apt-get install chromium` and `pip install playwright` (never `playwright install`:
its browser download cannot work here). Skips cleanly when either is missing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
if not CHROMIUM.exists():
    pytest.skip(f"{CHROMIUM} missing (apt-get install chromium)", allow_module_level=True)

expect = sync_api.expect

from test_report import XSS, XSS_SAMPLE, build_world  # noqa: E402  (tests/ is on sys.path via conftest's rootdir)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser):
    # CSP stays on: the test must see the report exactly as a reviewer's browser would.
    pg = browser.new_page(viewport={"width": 1280, "height": 900})
    pg.messages = []
    pg.on("console", lambda m: pg.messages.append((m.type, m.text)))
    pg.on("pageerror", lambda e: pg.messages.append(("pageerror", str(e))))
    requests = []
    pg.on("request", lambda r: requests.append(r.url))
    pg.requests = requests
    yield pg
    pg.close()


def test_report_in_browser(world, page):
    url = world["html"].resolve().as_uri()
    page.goto(url)
    # no console errors, and no request other than the file itself
    assert [m for m in page.messages if m[0] in ("error", "pageerror")] == []
    assert all(u.startswith("file://") or u.startswith("data:") for u in page.requests), page.requests
    # the verdict
    expect(page.locator("#status")).to_have_text("quantization_regression")
    expect(page.locator("#exit-code")).to_have_text("11")
    # a flipped sample, side by side
    card = page.locator(f"#s-{XSS_SAMPLE}")
    expect(card).to_be_visible()
    expect(card).to_contain_text("regressed")
    # the XSS payload did not run, and is visible as text
    assert page.evaluate("typeof window.__xss") == "undefined"
    expect(card.locator("pre").nth(1)).to_have_text(XSS)
    assert page.locator("img[src='x']").count() == 0 and page.locator("a[href^='javascript:']").count() == 0
    # the filter: search narrows the visible rows, the kind filter too
    rows = page.locator("#sample-rows tr.sample")
    expect(page.locator("#match-count")).to_have_text("40 of 40 records")
    assert rows.count() == 40
    page.fill("#q", "add-01")
    expect(page.locator("#match-count")).to_have_text("2 of 40 records")
    assert rows.count() == 2
    page.fill("#q", "")
    page.select_option("#kind", "regressed")
    expect(page.locator("#match-count")).to_have_text(re.compile(r"^(\d+) of 40 records$"))
    n = int(page.inner_text("#match-count").split()[0])
    assert 0 < n < 40 and rows.count() == n
    assert all("regressed" in t for t in rows.locator("td:nth-child(4)").all_inner_texts())
    # search finds the payload as text; expanding the row shows it via textContent, still inert
    page.select_option("#kind", "all")
    page.fill("#q", "__xss=2")
    expect(page.locator("#match-count")).to_have_text("2 of 40 records")
    rows.first.locator("td").nth(1).click()
    expect(page.locator("#sample-rows tr.detail pre").nth(1)).to_contain_text("<script>window.__xss=1</script>")
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert [m for m in page.messages if m[0] in ("error", "pageerror")] == []


def test_deep_link_to_an_unflipped_sample(world, page):
    page.goto(world["html"].resolve().as_uri() + "#s-add-02")  # add-02 is right in both: only in the lazy table
    row = page.locator("#s-add-02")
    expect(row).to_be_visible()
    expect(page.locator("#sample-rows tr.detail").first).to_be_visible()
    assert [m for m in page.messages if m[0] in ("error", "pageerror")] == []
