"""The report's pictures and honest badges, on gates against the scripted test server with a calibrated golden.

Three candidates of one wordy reference (multi-token answers, so greedy outputs can part mid-sentence):
- `requantized`: every logprob shifted by 0.02-0.06, a third of the samples part from the golden at tokens 1-15
  (others with a wrong last token): the drift plot has dots above the floor, token diffs name the parting token;
- `template`: a third of the prompts cost 3 more tokens (a chat-template change): off-diagonal scatter points;
- `rerun`: the reference again: a pass, every dot at 0 under the floor, the scatter on its diagonal.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import pytest

from verifier.attribution.document import Comparison

from verifier.report import colours
from verifier import report
from verifier.app import report_files
from verifier.attribution.explain import cut_words
from verifier.report import pictures
from verifier.testbed.server import Reply, Script, TestServer, prompt_tokens

WORDY = "Adding {a} and {b} step by step gives the sum we want, so the final answer is {s}."
GATE = ["--model", "m", "--quiet", "--max-retries", "0"]


def _ab(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return int(m.group(1)), int(m.group(2))


def wordy(req):
    a, b = _ab(req)
    return Reply(content=WORDY.format(a=a, b=b, s=a + b))


def requantized(req):
    a, b = _ab(req)
    s = a + b
    words = WORDY.format(a=a, b=b, s=s + 1 if s % 4 == 0 else s).split(" ")
    if s % 3 == 0:  # parts from the golden's greedy output at a word between 1 and 15
        words[1 + (5 * a) % 15] = "carefully"
    return Reply(content=" ".join(words), logprob_shift=0.02 + 0.01 * (a % 5))


def template_changed(req):
    a, b = _ab(req)
    r = wordy(req)
    if (a + b) % 3 == 0:
        pt = prompt_tokens(req) + 3
        r.usage = {"prompt_tokens": pt, "completion_tokens": 18, "total_tokens": pt + 18}
    return r


def _gate(golden: Path, script, out: Path) -> tuple[int, str]:
    from verifier.cli import main

    buf = io.StringIO()
    with TestServer(Script(script)) as srv, contextlib.redirect_stdout(buf):
        code = main(["gate", "--golden", str(golden), "--base-url", srv.url, *GATE, "--out", str(out)])
    return code, buf.getvalue()


@pytest.fixture(scope="module")
def gates(tmp_path_factory):
    """A wordy golden (3 reference runs, calibrated) and three gated candidates, each with its report."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("pictures")
    run = ["--suite", "smoke", "--model", "m", "--quiet", "--mode", "chat,chat-stream", "--logprobs", "1", "--max-retries", "0"]
    with TestServer(Script(wordy)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *run, "--base-url", srv.url, "--out", str(tmp / name)]) == 0
    golden = tmp / "goldens" / "wordy"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    out = {"golden": golden, "tmp": tmp}
    for name, script in (("requantized", requantized), ("template", template_changed), ("rerun", wordy)):
        code, stdout = _gate(golden, script, tmp / name)
        out[name] = {"dir": tmp / name, "code": code, "stdout": stdout,
                     "doc": json.loads((tmp / name / "comparison.json").read_text()),
                     "html": (tmp / name / "report.html").read_text(encoding="utf-8"),
                     "md": (tmp / name / "summary.md").read_text(encoding="utf-8")}
    return out


def test_the_three_gates_say_what_they_are(gates):
    assert gates["rerun"]["code"] == 0 and gates["rerun"]["doc"]["status"] == "pass"
    assert gates["requantized"]["doc"]["quantization"]["verdict"] == "fail", gates["requantized"]["doc"]["reasons"]
    assert gates["template"]["doc"]["frontend"]["verdict"] == "fail"


def test_comparison_keeps_bounded_per_sample_drift(gates):
    d = gates["requantized"]["doc"]["suites"]["smoke"]["drift"]
    rows = d["per_sample"]
    assert len(rows) == d["samples"] == 20
    assert {"id", "tokens", "mean_abs_delta", "first_divergence", "parted", "length"} <= set(rows[0])
    parted = [r for r in rows if r["parted"]]
    assert parted and all(1 <= r["first_divergence"] < r["length"] for r in parted)
    assert all(r["mean_abs_delta"] > d["margin"] for r in rows if r["tokens"])
    # Bounded: a 1,000-sample suite keeps PER_SAMPLE_MAX rows, the most drifted half among them.
    from verifier.attribution import numerics

    many = [{"id": f"s{i}", "tokens": 5, "mean_abs_delta": i / 1000, "first_divergence": 5, "parted": False, "length": 5}
            for i in range(1000)]
    kept = numerics.bounded_per_sample(many)
    assert len(kept) == numerics.PER_SAMPLE_MAX and [r["id"] for r in kept] == sorted((r["id"] for r in kept), key=lambda x: int(x[1:]))
    assert {f"s{i}" for i in range(1000 - numerics.PER_SAMPLE_MAX // 2, 1000)} <= {r["id"] for r in kept}


def test_drift_plot_has_a_dot_per_sample_and_the_floor(gates):
    html = gates["requantized"]["html"]
    svg = re.search(r'<svg class="plot drift-plot" data-suite="smoke".*?</svg>', html, flags=re.S).group(0)
    assert sum(map(int, re.findall(r'class="pt" data-n="(\d+)"', svg))) == 20  # every sample, crowds as one counted dot
    assert 'class="floor"' in svg and "noise floor 0.01" in svg and "suite mean" in svg
    assert svg.count(f'stroke="{colours.RED}"') >= 20  # every sample drifted above the floor: red dots (+ the floor line)
    assert "20 of 20 samples above the floor" in svg
    assert re.search(r'href="#[st]-add-\d\d"', svg)  # dots link to their sample
    rerun = re.search(r'<svg class="plot drift-plot".*?</svg>', gates["rerun"]["html"], flags=re.S).group(0)
    assert sum(map(int, re.findall(r'class="pt" data-n="(\d+)"', rerun))) == 20 and f'stroke="{colours.RED}" stroke-width="1.6"' not in rerun
    assert "×20" in rerun  # 20 identical outputs at drift 0: one dot, counted
    assert "0 of 20 samples above the floor" in rerun


def test_token_diff_marks_the_first_differing_token(gates):
    doc, html = gates["requantized"]["doc"], gates["requantized"]["html"]
    parted = {r["id"]: r["first_divergence"] for r in doc["suites"]["smoke"]["drift"]["per_sample"] if r["parted"]}
    cards = re.findall(r'<div class="(?:card flip|card token-diff-card)" id="[st]-(add-\d\d)">(.*?)</div>\n</div>', html, flags=re.S)
    seen = 0
    for sid, card in cards:
        if sid not in parted or "tokdiff" not in card:
            continue
        seen += 1
        assert f"part at token <strong>{parted[sid]}</strong>" in card
        first = re.findall(r'<span class="tk d first" title="token (\d+): logprob (-?[\d.]+)">([^<]*)<i>', card)
        assert len(first) == 2 and {int(t) for t, _, _ in first} == {parted[sid]}
        assert first[1][2] == "␣carefully" and first[0][2] != "␣carefully"  # whitespace made visible  # golden's token vs the candidate's
        assert float(first[1][1]) < 0  # the differing token's logprob is shown
        assert 'class="tk hot"' in card  # shared tokens that moved beyond the floor are shaded
    assert seen >= 3


def test_prompt_token_scatter(gates):
    svg = re.search(r'<svg class="plot token-scatter" data-suite="smoke".*?</svg>', gates["template"]["html"], flags=re.S).group(0)
    doc = gates["template"]["doc"]
    moved = doc["suites"]["smoke"]["signals"]["prompt_tokens_mismatch"]["count"]
    assert moved > 0 and 'class="diagonal"' in svg and "unchanged" in svg
    pts = re.findall(r'<a href="#s-(add-\d\d)"><circle class="pt moved"', svg)
    assert pts and set(pts) <= set(doc["suites"]["smoke"]["signals"]["prompt_tokens_mismatch"]["samples"])
    assert re.search(r"golden (\d+) → candidate (\d+) \(\+3\)", svg)
    ok = re.search(r'<svg class="plot token-scatter".*?</svg>', gates["rerun"]["html"], flags=re.S).group(0)
    assert "0 of 40 records off the diagonal" in ok and 'class="pt moved"' not in ok


def test_unmeasured_is_grey_and_reference_failures_are_not_green(gates, tmp_path):
    """A signal with nothing to measure is "not measured", never a green pass; a probe failed by both sides is
    "reference fails too" (amber), never green."""
    doc = json.loads(json.dumps(gates["rerun"]["doc"]))
    doc["frontend"]["evidence"].append({"signal": "probe:max_tokens_honoured", "suite": "*", "verdict": "pass",
                                        "summary": "max_tokens_honoured: FAILED (ignored; reference also fails)", "qualifier": "reference_fails"})
    run = report_files.read_run(gates["rerun"]["dir"])
    html = report.render(run, report_files.read_golden(gates["golden"]), Comparison.from_dict(doc))
    row = re.search(r'<tr class="ref-fails">.*?</tr>', html, flags=re.S).group(0)
    assert '<span class="v v-reference_fails">reference fails too</span>' in row and "v-pass" not in row
    # smoke has no tool calls: the tool-call signals measured nothing, and say so
    sig = re.search(r"<tr><td>tool_args_invalid</td>.*?</tr>", html, flags=re.S) or re.search(r"<tr><td>tool_[a-z_]+</td><td class=\"num\">0/0</td>.*?</tr>", html, flags=re.S)
    assert sig and "not measured" in sig.group(0) and "v-pass" not in sig.group(0)
    md = report.markdown(Comparison.from_dict(doc))
    assert "reference fails too" not in md or "🟨" in md
    assert "### Failed by the golden too" in md and "max_tokens_honoured: FAILED" in md


def test_probe_verdicts_mark_a_shared_failure():
    from verifier.execution.probes import verdicts

    v = verdicts({"a": {"passed": False, "detail": "x"}, "b": {"passed": False, "detail": "y"}, "c": {"passed": True, "detail": "z"}},
                 {"a": {"passed": False, "detail": "x"}, "b": {"passed": True, "detail": "y"}, "c": {"passed": False, "detail": "z"}})
    a, b, c = v["a@chat"], v["b@chat"], v["c@chat"]  # bare (old) names are chat results
    assert a["verdict"] == "pass" and a["qualifier"] == "reference_fails" and "reference also fails" in a["summary"]
    assert b["verdict"] == "fail" and "qualifier" not in b and "qualifier" not in c


def test_shown_verdicts():
    assert colours.shown("pass") == ("pass", "pass", "✅")
    assert colours.shown("pass", measured=False)[1] == "not measured"
    assert colours.shown("pass", "not_measured")[0] == "not_measured"
    assert colours.shown("unavailable")[1] == "not measured"
    assert colours.shown("pass", "reference_fails")[1] == "reference fails too"
    assert colours.STATUS_COLOUR["regression_unattributed"] not in (colours.AMBER, colours.STATUS_COLOUR["inconclusive"])
    assert colours.STATUS_COLOUR["regression_unattributed"] != colours.GREEN


def test_summary_md_never_cuts_mid_word(gates):
    text = "median first divergence at token 12 on 20 samples " * 3
    for limit in range(10, len(text)):
        cut = cut_words(text, limit)
        assert len(cut) <= limit
        if cut != text:
            stem = cut[:-1]
            assert cut.endswith("…") and text.startswith(stem) and (text[len(stem)] == " " or text[len(stem) - 1] in " ,;:("), (limit, cut)
    md = gates["requantized"]["md"].replace("\\|", "|")
    drift = next(line for line in md.splitlines() if "mean |Δ logprob|" in line)
    assert "median first divergence at token" in drift and not drift.endswith("token ")  # the whole sentence is kept
    doc = gates["requantized"]["doc"]
    ev = next(e for e in doc["quantization"]["evidence"] if e["signal"] == "logprob_drift")
    assert ev["summary"] in md


def test_summary_md_lists_what_was_not_measured(gates):
    md = gates["rerun"]["md"]
    line = next(x for x in md.splitlines() if "not measured on this run" in x)
    unmeasured = [c["name"] for c in gates["rerun"]["doc"]["checks"] if c["verdict"] == "not_measured"]
    assert unmeasured and f"({len(unmeasured)} checks)" in line and line.startswith("➖")


def test_report_size_stays_bounded(gates):
    # 20 samples x 2 modes with pictures and token diffs: well under what the 10k-sample bench allows.
    assert len(gates["requantized"]["html"]) < 400_000


@pytest.fixture(scope="module")
def bfcl_gate(tmp_path_factory):
    """A bfcl golden of a perfect model (calibrated on two reruns) and a gate of the imperfect oracle against it."""
    from test_suite_bfcl import SMOKE_ROWS, _right_reply, _user_text, oracle_script

    from verifier.cli import main
    from verifier.testbed.server import last_user_text

    tmp = tmp_path_factory.mktemp("bfcl-gate")
    by_text = {_user_text(r): _right_reply(r) for r in SMOKE_ROWS}
    run = ["--suite", "bfcl", "--smoke", "--model", "m", "--quiet", "--max-retries", "0"]
    with TestServer(Script(lambda req: by_text[last_user_text(req)])) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", *run, "--base-url", srv.url, "--out", str(tmp / name)]) == 0
    golden = tmp / "goldens" / "bfcl-ref"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    buf = io.StringIO()
    with TestServer(oracle_script()) as srv, contextlib.redirect_stdout(buf):
        # not --quiet: the console's full summary is read below (--quiet prints the status, first cause, report only)
        code = main(["gate", "--golden", str(golden), "--base-url", srv.url, "--model", "m", "--max-retries", "0",
                     "--out", str(tmp / "cand")])
    return {"tmp": tmp, "code": code, "stdout": buf.getvalue(), "cand": tmp / "cand",
            "doc": json.loads((tmp / "cand" / "comparison.json").read_text())}


def test_tool_call_f1_and_schema_accuracy_beside_the_golden(bfcl_gate):
    tc = bfcl_gate["doc"]["suites"]["bfcl"]["tool_calls"]
    summary = json.loads((bfcl_gate["cand"] / "summary.json").read_text())["suites"]["bfcl"]["extra"]
    assert tc["trigger_f1"] == {"golden": 1.0, "candidate": summary["trigger"]["f1"]} and summary["trigger"]["f1"] < 1.0
    assert tc["schema_accuracy"]["golden"] == 1.0 and tc["schema_accuracy"]["candidate"] == pytest.approx(25 / 30, abs=1e-6)
    assert tc["trigger_agreement_f1"] == bfcl_gate["doc"]["suites"]["bfcl"]["tool_trigger"]["f1"]
    line = (f"tool calls: trigger F1 {summary['trigger']['f1']:.3f} (golden 1.000); schema accuracy 0.833 (golden 1.000, 30 calls); "
            f"trigger agreement with golden F1 {tc['trigger_agreement_f1']:.3f}")
    assert f"  bfcl {line}" in bfcl_gate["stdout"]  # the console gate summary
    assert f"- **bfcl** {line}" in (bfcl_gate["cand"] / "summary.md").read_text()
    assert line in (bfcl_gate["cand"] / "report.html").read_text()
    from verifier.app.report_files import read_matrix_entry
    from verifier.report import matrix

    m = matrix.build([read_matrix_entry("vendor", bfcl_gate["cand"])], bfcl_gate["tmp"] / "m")
    assert m.rows[0].tool_calls == line
    assert line in matrix.markdown(m) and line in matrix.render_html(m)
    # A suite without tool calls has no such line.
    assert "tool_calls" not in json.loads(json.dumps(bfcl_gate["doc"]))["suites"].get("smoke", {})


def test_token_diff_edges():
    assert pictures.token_diff(None, [["a", -0.1]]) is None and pictures.token_diff([], []) is None
    same = pictures.token_diff([["a", -0.1], [" b", -0.2]], [["a", -0.1], [" b", -0.5]], floor=0.01)
    assert not same["parted"] and same["at"] == 2 and [t["hot"] for t in same["shared"]] == [False, True]
    assert same["shared"][1]["text"] == "␣b" and same["golden"] == [] == same["candidate"]
    # One side stops first: it parts where the shorter one ends; a hostile token is cut, NaN shows as a dash.
    longer = [["x", -0.1]] * 3 + [["<script>" * 10, float("nan")]]
    d = pictures.token_diff([["x", -0.1]] * 3, longer)
    assert d["parted"] and d["at"] == 3 and d["golden"] == [] and d["candidate"][0]["first"]
    assert len(d["candidate"][0]["text"]) == 24 and d["candidate"][0]["lp"] == "–"
    # Token 0 differs: no shared prefix, both first tokens marked.
    z = pictures.token_diff([["a", -1.0]], [["b", -2.0]])
    assert z["at"] == 0 and z["shared"] == [] and z["golden"][0]["first"] and z["candidate"][0]["lp"] == "-2.000"


def test_nice_ticks_cover_the_data():
    for lo, hi in ((0, 18), (0, 0.0648), (29, 41), (0, 1), (5, 5), (0, 512)):
        t = pictures.nice_ticks(lo, hi)
        assert t[0] <= lo and t[-1] >= hi and len(t) <= 7 and t == sorted(t)


def test_an_older_comparison_without_per_sample_drift_says_so(gates):
    doc = json.loads(json.dumps(gates["requantized"]["doc"]))
    del doc["suites"]["smoke"]["drift"]["per_sample"]
    html = report.render(report_files.read_run(gates["requantized"]["dir"]), report_files.read_golden(gates["golden"]),
                         Comparison.from_dict(doc))
    assert 'class="plot drift-plot"' not in html and "predates per-sample drift" in html
    assert 'class="plot token-scatter"' in html  # the scatter needs only the records


def test_drift_plot_title_fits_and_its_legend_names_every_dot_drawn():
    """Issue 50: the title (count, then where outputs parted) was one line clipped at the plot's width, and a grey
    counted dot (no shared prefix) was in no legend. Each title line now fits; the legend names every colour drawn,
    the ring and the counted dot."""
    from types import SimpleNamespace

    rows = [{"id": f"s{i}", "tokens": 0, "mean_abs_delta": None, "first_divergence": 0, "parted": True, "length": 40}
            for i in range(10)]
    rows += [{"id": "far", "tokens": 30, "mean_abs_delta": 0.5, "first_divergence": 17, "parted": True, "length": 40},
             {"id": "same", "tokens": 40, "mean_abs_delta": 0.001, "first_divergence": 40, "parted": False, "length": 40}]
    drift = SimpleNamespace(per_sample=rows, margin=0.01, mean_abs_delta=0.05, state="fail", samples=12,
                            first_divergence_median=None)
    suite = "a-suite-with-a-rather-long-name-as-plugins-have"
    inp = SimpleNamespace(doc=SimpleNamespace(suites={suite: SimpleNamespace(drift=drift)}),
                          frame={"suite": [], "sample_id": [], "anchor": []})
    (plot,) = pictures.drift_plots(inp)  # type: ignore[arg-type]  # the fields drift_plots reads
    for line in (plot["title"], plot["subtitle"]):
        assert 0 < len(line) <= pictures.TITLE_CHARS
        assert 8 + 6.5 * len(line) <= plot["frame"]["w"], line  # 11 px text from x=8 stays inside the plot
    assert "median first divergence" in plot["subtitle"] and plot["title"].startswith(suite)
    grey = [p for p in plot["points"] if p["colour"] == colours.GREY]
    assert grey and grey[0]["label"] == "×10"
    legend = {e["text"]: e for e in plot["legend"]}
    assert legend["no shared prefix"]["colour"] == colours.GREY and legend["no shared prefix"]["filled"]
    assert {colours.RED, colours.GREEN, colours.GREY} <= {e["colour"] for e in plot["legend"]}
    assert not legend["never parts"]["filled"] and any(t.startswith("×N") for t in legend)
    xs = [e["x"] for e in plot["legend"]]
    last = plot["legend"][-1]
    assert xs == sorted(xs) and last["x"] + (14 if last["colour"] else 0) + pictures.LEGEND_CHAR_PX * len(last["text"]) <= plot["frame"]["w"]
    # Drawn within the plot's head, above the box.
    assert plot["frame"]["top"] > 47


def test_a_moved_prompt_token_fingerprint_gives_its_magnitude_in_the_diagnosis_line(gates):
    """Issue 50: the chat-template banner named the component but not how far the prompt moved (332 → 29 was only in
    samples.csv). compare computes the median prompt tokens golden → candidate over the samples whose fingerprint
    moved; the diagnosis line (console, summary.md, report banner) carries it, rendered, not recomputed."""
    import statistics

    from verifier.golden import store as golden_store

    g = gates["template"]
    block = g["doc"]["suites"]["smoke"]["signals"]["prompt_tokens_mismatch"]
    assert block["verdict"] == "fail"
    moved = set(block["samples"])
    gold = {o.sample_id: o.prompt_tokens for o in golden_store.load(gates["golden"]).observations if o.mode == "chat"}
    want = statistics.median(gold[s] for s in moved)
    assert block["prompt_tokens"] == {"golden_median": want, "candidate_median": want + 3, "samples": len(moved)}
    line = f"median prompt tokens golden {want:g} → candidate {want + 3:g}"
    lead = g["doc"]["diagnosis"][0]
    assert lead["component"] == "chat template & tokenization" and line in lead["explanation"], lead
    assert line in g["stdout"] and line in g["md"] and line in g["html"]
    # Nothing moved, nothing said.
    rerun = gates["rerun"]["doc"]["suites"]["smoke"]["signals"]["prompt_tokens_mismatch"]
    assert "prompt_tokens" not in rerun and "median prompt tokens" not in gates["rerun"]["stdout"]
