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

from test_report_ci_outputs import XSS, XSS_SAMPLE, build_world  # noqa: E402  (tests/ is on sys.path via conftest's rootdir)
from test_report_pictures import gates  # noqa: E402,F401  (module-scoped: the wordy golden and three gates)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return build_world(tmp_path_factory.mktemp("browser"))


@pytest.fixture(scope="module")
def browser(world, gates):  # noqa: F811
    # The worlds are built first: Playwright's sync API keeps an event loop running, and a gate inside it cannot run.
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


# ----------------------------------------------------------------------------- the pictures


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    """Where screenshots go: $VERIFIER_SCREENSHOTS when set (to look at them), else a temp dir."""
    import os

    d = Path(os.environ["VERIFIER_SCREENSHOTS"]) if os.environ.get("VERIFIER_SCREENSHOTS") else tmp_path_factory.mktemp("shots")
    d.mkdir(parents=True, exist_ok=True)
    return d


def _clean(page):
    assert [m for m in page.messages if m[0] in ("error", "pageerror")] == []
    assert all(u.startswith("file://") or u.startswith("data:") for u in page.requests), page.requests


def _box(locator):
    b = locator.bounding_box()
    assert b and b["width"] > 50 and b["height"] > 50, b
    return b


def test_drift_plot_and_token_diffs_render(gates, page, shots):  # noqa: F811
    page.goto((gates["requantized"]["dir"] / "report.html").resolve().as_uri())
    _clean(page)
    plot = page.locator("svg.drift-plot")
    expect(plot).to_have_count(1)
    _box(plot)
    dots = plot.locator("circle.pt")
    assert sum(int(n) for n in dots.evaluate_all("ds => ds.map(d => d.dataset.n)")) == 20  # crowds are one counted dot
    assert all(_box_ok(dots.nth(i)) for i in range(dots.count()))
    expect(plot.locator("line.floor")).to_have_count(1)
    expect(plot).to_contain_text("noise floor")
    first = page.locator(".tk.first")
    assert first.count() >= 6 and first.first.is_visible()
    page.locator("#drift").screenshot(path=str(shots / "report-drift.png"))
    page.locator("section#flips .card.flip").first.screenshot(path=str(shots / "report-flip-card.png"))
    page.screenshot(path=str(shots / "report-requantized.png"), full_page=True)
    # A dot opens its sample (scrolled to the middle: the sticky nav covers the top of the viewport).
    dots.first.evaluate("e => e.scrollIntoView({block: 'center'})")
    dots.first.click()
    assert re.search(r"#[st]-add-\d\d$", page.url)
    _clean(page)


def _box_ok(locator):
    b = locator.bounding_box()
    return b is not None and b["width"] > 0 and b["height"] > 0


def test_prompt_token_scatter_renders_and_links(gates, page, shots):  # noqa: F811
    page.goto((gates["template"]["dir"] / "report.html").resolve().as_uri())
    _clean(page)
    sc = page.locator("svg.token-scatter")
    expect(sc).to_have_count(1)
    _box(sc)
    moved = sc.locator("circle.pt.moved")
    assert moved.count() > 0 and sc.locator("line.diagonal").count() == 1
    page.locator("#fingerprint").screenshot(path=str(shots / "report-fingerprint.png"))
    page.locator("#verdict").screenshot(path=str(shots / "report-template-banner.png"))
    moved.first.evaluate("e => e.scrollIntoView({block: 'center'})")
    moved.first.click()
    m = re.search(r"#s-(add-\d\d)$", page.url)
    assert m
    expect(page.locator(f"#s-{m.group(1)}")).to_be_visible()
    _clean(page)


def test_a_pass_report_shows_grey_not_measured_badges(gates, page, shots):  # noqa: F811
    page.goto((gates["rerun"]["dir"] / "report.html").resolve().as_uri())
    _clean(page)
    expect(page.locator("#status")).to_have_text("pass")
    grey = page.locator("#attribution .v-not_measured")
    assert grey.count() > 0
    colour = grey.first.evaluate("e => getComputedStyle(e).backgroundColor")
    assert colour == "rgb(144, 164, 174)"  # #90a4ae: grey, not the pass green
    _box(page.locator("svg.drift-plot"))
    page.screenshot(path=str(shots / "report-pass.png"), full_page=True)
