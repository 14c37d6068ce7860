"""`verifier matrix` and multi-endpoint gate files: 5 providers (the test server behind 5 proxy fault settings)
against one golden -> one HTML page (sortable, linking to each report) and one Markdown table."""

import json
import re
from contextlib import ExitStack
from pathlib import Path

import pytest

from verifier.golden.model import GoldenHeader

from verifier.testbed.proxy import Proxy

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "goldens" / "demo-smoke"
# provider -> faults; what the comparison must say about it.
PROVIDERS = {
    "healthy": ([], "pass"),
    "reasoning-parser": (["answer_in_reasoning"], "frontend_regression"),
    "no-finish-reason": (["finish_reason_missing"], "frontend_regression"),
    "no-usage": (["usage_dropped"], "frontend_regression"),
    "garbled-stream": (["stream_garble"], None),
}


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """A gate file with five endpoints, gated concurrently; returns (tmp, exit code, stdout)."""
    from verifier.cli import main
    from verifier.testbed.server import Script, TestServer, arithmetic

    tmp = tmp_path_factory.mktemp("matrix")
    with TestServer(Script(arithmetic)) as srv, ExitStack() as stack:
        urls = {name: stack.enter_context(Proxy(srv.url, faults, seed=0)).url for name, (faults, _) in PROVIDERS.items()}
        endpoints = "".join(f'\n[[endpoints]]\nname = "{n}"\nbase_url = "{u}"\nmodel = "m"\nmax_retries = 0\n' for n, u in urls.items())
        cfg = tmp / "gate.toml"
        cfg.write_text(f'golden = "{DEMO}"\n[budgets]\ninfra = 1.0\n[outputs]\ndir = "{tmp / "runs"}"\nmatrix = "{tmp / "matrix"}"\n{endpoints}')
        import io
        import contextlib

        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(["gate", "--config", str(cfg)])
    return tmp, code, out.getvalue()


def test_gate_file_with_five_endpoints_writes_the_matrix(five):
    tmp, code, stdout = five
    assert code == 10  # the worst provider's exit code: frontend regressions
    m = json.loads((tmp / "matrix" / "matrix.json").read_text())
    assert m["providers"] == list(PROVIDERS) and m["golden"] == "demo-smoke"
    rows = {r["provider"]: r for r in m["rows"]}
    for name, (_, status) in PROVIDERS.items():
        assert (tmp / "runs" / name / "comparison.json").exists()
        if status:
            assert rows[name]["status"] == status, (name, rows[name])
    assert rows["healthy"]["frontend"] == "pass" and rows["healthy"]["evidence"] == ""
    assert rows["healthy"]["metrics"][0]["name"] == "accuracy" and rows["healthy"]["latency_ms"]["p50"] > 0
    assert rows["reasoning-parser"]["frontend"] == "fail" and "new: answer_in_reasoning 20" in rows["reasoning-parser"]["evidence"]
    assert "finish_reason_missing" in rows["no-finish-reason"]["evidence"]
    # The Markdown table: header + one line per provider, printed and written.
    md = (tmp / "matrix" / "matrix.md").read_text()
    assert md in stdout
    table = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith(("| provider", "| ---"))]
    assert len(table) == 5 and all(f"| {n} | smoke |" in md for n in PROVIDERS)
    assert "[report](../runs/healthy/report.html)" in md


def test_matrix_html_links_every_provider_to_its_report(five):
    tmp, _, _ = five
    html = (tmp / "matrix" / "matrix.html").read_text()
    links = re.findall(r'<a class="report" href="([^"]+)">([^<]+)</a>', html)
    assert [name for _, name in links] == list(PROVIDERS)
    for href, name in links:
        assert (tmp / "matrix" / href).resolve() == (tmp / "runs" / name / "report.html").resolve()
        assert (tmp / "matrix" / href).exists()


def test_matrix_command_on_run_dirs_gives_the_same_rows(five, tmp_path, cli):
    tmp, _, _ = five
    code, out, err = cli("matrix", "--golden", DEMO, "--out", tmp_path / "m",
                         *[f"{n}={tmp / 'runs' / n}" for n in PROVIDERS])
    assert code == 10, err
    again = json.loads((tmp_path / "m" / "matrix.json").read_text())
    first = json.loads((tmp / "matrix" / "matrix.json").read_text())
    strip = lambda rows: [{k: v for k, v in r.items() if k not in ("report", "comparison")} for r in rows]  # noqa: E731 - links are relative
    assert strip(again["rows"]) == strip(first["rows"])
    # Bad input: a directory that is not a run, and clashing names.
    code, _, err = cli("matrix", "--golden", DEMO, "--out", tmp_path / "x", tmp_path)
    assert code == 2
    code, _, err = cli("matrix", "--golden", DEMO, "--out", tmp_path / "y", f"a={tmp / 'runs' / 'healthy'}", f"a={tmp / 'runs' / 'no-usage'}")
    assert code == 2 and "unique" in err


def test_matrix_without_out_writes_into_reports_matrix_under_the_current_directory(five, tmp_path, cli, monkeypatch):
    tmp, _, _ = five
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("matrix", "--golden", DEMO, *[f"{n}={tmp / 'runs' / n}" for n in PROVIDERS])
    assert code == 10, err
    written = json.loads((tmp_path / "reports" / "matrix" / "matrix.json").read_text())
    first = json.loads((tmp / "matrix" / "matrix.json").read_text())
    assert [r["provider"] for r in written["rows"]] == [r["provider"] for r in first["rows"]]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]


def test_matrix_escapes_what_endpoints_say(tmp_path):
    from verifier.report import matrix

    from verifier.attribution import compare
    from verifier.attribution.document import Comparison
    from verifier.types import Observation

    rows = [Observation(suite="s", sample_id="x", epoch=0, mode="chat", outcome="content", score=1.0, metrics={}, answer=4)]
    doc = compare.compare(GoldenHeader.from_json({"suites": {"s": {}}, "margins": {}}), rows, rows).to_dict()  # a real document, then hostile strings in it
    doc["frontend"]["evidence"] = [{"suite": "s", "signal": "x", "verdict": "fail", "summary": "<script>window.__x=1</script>|pipe"}]
    doc["golden"], doc["run"] = {"name": "g"}, {"endpoint": {"base_url": "http://e/<b>"}}
    m = matrix.build([matrix.Entry("<img src=x>", Comparison.from_dict(doc), tmp_path / "report.html", tmp_path / "comparison.json")], tmp_path)
    html = matrix.render_html(m)
    assert "<script>window" not in html and "&lt;img src=x&gt;" in html and "<img src=x>" not in html
    assert "\\|pipe" in matrix.markdown(m)


def test_matrix_only_reads_its_inputs_and_keeps_each_gates_margins(server, tmp_path, cli):
    """The matrix never rewrites a run (comparison.json, report.html, junit.xml, summary.md stay byte-identical), and a
    gate's own [margins] override is what its row says, not recomputed away."""
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "{DEMO}"\n[endpoint]\nbase_url = "{server.url}"\nmodel = "m"\n'
                   f'[margins]\n"smoke/accuracy" = {{ value = 0.05, reason = "vendor allows 5 points" }}\n'
                   f'[outputs]\ndir = "{tmp_path / "gated"}"\n')
    assert cli("gate", "--config", cfg, "--quiet")[0] == 0
    assert cli("run", "--suite", "smoke", "--smoke", "--mode", "chat,chat-stream", "--base-url", server.url, "--model", "m",
               "--out", tmp_path / "plain", "--quiet")[0] == 0
    inputs = [tmp_path / "gated", tmp_path / "plain"]
    before = {p: p.read_bytes() for d in inputs for p in sorted(d.rglob("*")) if p.is_file()}
    code, out, err = cli("matrix", "--golden", DEMO, "--out", tmp_path / "m", f"gated={inputs[0]}", f"plain={inputs[1]}")
    assert code == 0, err
    after = {p: p.read_bytes() for d in inputs for p in sorted(d.rglob("*")) if p.is_file()}
    assert after == before  # nothing written, changed or added in the input runs
    assert not (tmp_path / "plain" / "comparison.json").exists()
    m = json.loads((tmp_path / "m" / "matrix.json").read_text())
    rows = {r["provider"]: r for r in m["rows"]}
    margin = {r: next(x for x in rows[r]["metrics"] if x["name"] == "accuracy") for r in rows}
    gated_doc = json.loads((tmp_path / "gated" / "comparison.json").read_text())
    assert gated_doc["suites"]["smoke"]["metrics"]["accuracy"]["margin"] == 0.05
    # Issue 50: a link named "report" goes to a report; a run without one says so and links its comparison.
    assert rows["gated"]["report"].endswith("gated/report.html") and rows["gated"]["comparison"].endswith("gated/comparison.json")
    assert rows["plain"]["report"] is None and rows["plain"]["comparison"].endswith("comparisons/plain.json")
    md = (tmp_path / "m" / "matrix.md").read_text()
    assert "[report](../gated/report.html)" in md and "no report: [comparison](comparisons/plain.json)" in md, md
    html = (tmp_path / "m" / "matrix.html").read_text()
    assert 'class="report" href="../gated/report.html"' in html and '(no report: <a class="comparison" href="comparisons/plain.json">' in html
    plain_doc = json.loads((tmp_path / "m" / "comparisons" / "plain.json").read_text())
    assert plain_doc["status"] == rows["plain"]["status"] == "pass"
    assert margin["gated"]["verdict"] == "pass" and "matrix:" in err


@pytest.mark.parametrize("name", ["a/../../../x", "..", "a\\b", "x\ny", "n" * 129])
def test_a_provider_name_cannot_write_outside_out(five, tmp_path, cli, name):
    """Issue 49 item 13: a provider name is one file name under --out (OUT/comparisons/NAME.json): one with a path
    separator or `..` is refused (exit 2) before anything is written, inside --out or outside it."""
    tmp, _, _ = five
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    before = sorted(p for p in tmp_path.rglob("*"))
    code, _, err = cli("matrix", "--golden", DEMO, "--out", work / "m", f"{name}={tmp / 'runs' / 'healthy'}")
    assert code == 2 and "provider name" in err and err.count("\n") == 1, err
    assert sorted(p for p in tmp_path.rglob("*")) == before
    # the same run under a plain name is compared and written under --out
    code, _, err = cli("matrix", "--golden", DEMO, "--out", work / "m", f"ok={tmp / 'runs' / 'healthy'}")
    assert code == 0 and (work / "m" / "matrix.json").is_file(), err
    assert all(p.is_relative_to(work / "m") for p in set(tmp_path.rglob("*")) - set(before) if p != work / "m")
