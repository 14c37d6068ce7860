"""Parse once (issue 23): scoring writes observations.jsonl; bless, compare and the report read it instead of parsing
the journal again. One reader (issue 36): when it is missing, stale or edited, the run is scored again (the file is
rebuilt from the journal), with the same bytes out; there is no second way to parse the journal."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import SMOKE_RUN
from verifier.app import report_files
from verifier.app.collect import get_suites
from verifier import seal as sealing
from verifier.golden import store
from verifier.execution import journal, observations as observe, scoring
from verifier.execution.rundir import RunDir
from verifier.testbed.server import Reply, Script, TestServer

# Every module that imports parse_exchange under its own name, on the paths from a scored run to a document.
PARSERS = ["verifier.judge.parse", "verifier.execution.scoring", "verifier.execution.observations"]


def candidate(req):
    """Wrong answers with moved logprobs (flips and token diffs in the report), one with a tool call (a flip card's
    tool_calls), one error body (an unsupported record)."""
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    a = int(m.group(1)) + int(m.group(2))
    if a == 7:
        return Reply(content=None, tool_calls=[{"name": "add", "arguments": '{"a": 3, "b": 4}'}], logprob_shift=0.3)
    if a == 42:
        return Reply(status=400, body='{"error": {"message": "no", "type": "invalid_request_error"}}')
    return Reply(content=str(a + 1 if a % 5 else a), logprob_shift=0.3)


@pytest.fixture(scope="module")
def world(tmp_path_factory, calibrated_golden):
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("observations")
    cand = tmp / "cand"
    with TestServer(Script(candidate)) as srv:
        assert main(["run", *SMOKE_RUN, "--base-url", srv.url, "--out", str(cand)]) == 0
    return {"golden": calibrated_golden["golden"], "cand": cand, "ref": calibrated_golden["ref"]}


def copy_run(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def outputs(run: Path, golden: Path) -> tuple[str, str, list[dict]]:
    """What a gate makes of a scored run offline: the comparison, the report and the observation rows."""
    from verifier.app.gate import compare_run
    from verifier.app.spec import CompareSpec

    doc = compare_run(run, CompareSpec(str(golden), 0.02, write=False))
    html = report_files.render_html(run, golden, doc)
    return json.dumps(doc.to_dict(), sort_keys=True), html, [o.to_dict() for o in store.observations(run)]


def count_parses(monkeypatch, fail: bool = False) -> list[int]:
    import importlib

    from verifier.judge import parse

    real = parse.parse_exchange
    calls = [0]

    def spy(ex):
        calls[0] += 1
        if fail:
            raise AssertionError("parse_exchange called although observations.jsonl is fresh")
        return real(ex)

    for name in PARSERS:
        monkeypatch.setattr(importlib.import_module(name), "parse_exchange", spy)
    return calls


def test_score_writes_observations_beside_verdicts_byte_identical_twice(world, tmp_path, cli):
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    first = {f: (run / f).read_bytes() for f in (observe.OBSERVATIONS, scoring.VERDICTS, scoring.SUMMARY)}
    assert cli("score", run)[0] == 0
    assert {f: (run / f).read_bytes() for f in first} == first
    lines = first[observe.OBSERVATIONS].splitlines(keepends=True)
    head, *rows, seal = [json.loads(line) for line in lines]
    assert head == {"observations": observe.FORMAT, "responses": journal.file_digest(run / journal.RESPONSES),
                    "verdicts": journal.file_digest(run / journal.VERDICTS),
                    "summary": journal.file_digest(run / journal.SUMMARY)}
    assert seal == {observe.SEAL: hmac.new(sealing.key(), b"".join(lines[:-1]), hashlib.sha256).hexdigest(), "rows": len(rows)}
    verdicts = scoring.read_verdicts(run)
    assert [(r["suite"], r["sample_id"], r["epoch"], r["mode"]) for r in rows] == [(v.suite, v.sample_id, v.epoch, v.mode) for v in verdicts]
    # The rows bless and compare read are the file's, key for key and in order.
    assert json.dumps([o.to_dict() for o in store.observations(run)]) == json.dumps([observe.golden_row(r) for r in rows])
    assert any("tool_calls" in (r.get("shown") or {}) for r in rows)
    assert any(r["outcome"] == "unsupported" for r in rows)


def test_fresh_observations_mean_no_parse_and_the_same_documents(world, tmp_path, monkeypatch, cli):
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    fresh = outputs(run, world["golden"])
    count_parses(monkeypatch, fail=True)
    assert outputs(run, world["golden"]) == fresh  # compare, the report and the rows: not one parse
    # bless reads it too
    assert cli("bless", run, "--to", tmp_path / "g")[0] == 0
    monkeypatch.undo()
    assert cli("bless", run, "--to", tmp_path / "g2")[0] == 0
    assert (tmp_path / "g" / store.OBS).read_bytes() == (tmp_path / "g2" / store.OBS).read_bytes()


def test_without_observations_the_run_is_scored_again_with_the_same_result(world, tmp_path, monkeypatch, cli):
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    fresh = outputs(run, world["golden"])
    scored = (run / observe.OBSERVATIONS).read_bytes()
    (run / observe.OBSERVATIONS).unlink()  # a run scored before observations.jsonl existed
    with pytest.raises(journal.NotARunDir, match="verifier score"):
        store.observations(run)  # the golden store never parses the journal itself
    calls = count_parses(monkeypatch)
    assert outputs(run, world["golden"]) == fresh
    assert calls[0] > 0  # by the scorer, which rebuilt the file byte for byte
    assert (run / observe.OBSERVATIONS).read_bytes() == scored


def test_an_edited_row_is_not_trusted(world, tmp_path, cli):
    """Issue 37 item 8: rewriting observations.jsonl's rows while keeping its header digests (the verdicts and the
    journal untouched) must not change what compare says: the seal does not match, the run is scored again."""
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    fresh = outputs(run, world["golden"])
    assert json.loads(fresh[0])["status"] != "pass"
    path = run / observe.OBSERVATIONS
    head, *rows, seal = path.read_text(encoding="utf-8").splitlines()
    # The forger copies the golden's own rows over the candidate's: trusted, they would pass.
    from verifier.attribution import compare as attribution

    golden = store.load(world["golden"])
    g, gobs = golden.header, golden.rows()
    theirs = {(o["suite"], o["sample_id"], o["epoch"], o["mode"]): o for o in gobs}
    forged = [json.dumps(theirs.get((r["suite"], r["sample_id"], r["epoch"], r["mode"]), r))
              for r in map(json.loads, rows)]
    from verifier.types import Observation

    assert attribution.compare(g, golden.observations, [Observation.from_dict(json.loads(r)) for r in forged]).status == "pass"
    path.write_text("\n".join([head, *forged, seal]) + "\n", encoding="utf-8")
    assert observe.read(run) is None
    assert outputs(run, world["golden"]) == fresh
    code, _, err = cli("compare", run, "--golden", world["golden"])
    assert code == json.loads(fresh[0])["exit_code"], err


def forge(run: Path, golden: Path, key: bytes | None) -> None:
    """Issue 49 item 4: a forger who rewrites verdicts.jsonl, summary.json, observations.jsonl and its seal
    consistently (the golden's own rows and verdicts copied over a failing run's), responses.jsonl untouched. `key`:
    the HMAC key the forger seals with; None seals with a plain sha256, as format 2 did."""
    g = store.load(golden)
    theirs = {(o["suite"], o["sample_id"], o["epoch"], o["mode"]): o for o in g.rows()}
    verdicts = []
    for line in (run / journal.VERDICTS).read_text(encoding="utf-8").splitlines():
        v = json.loads(line)
        o = theirs.get((v["suite"], v["sample_id"], v["epoch"], v["mode"]))
        if o is not None:
            v.update({k: o[k] for k in ("outcome", "reason", "metrics", "findings") if k in o and k in v})
        verdicts.append(json.dumps(v))
    (run / journal.VERDICTS).write_text("\n".join(verdicts) + "\n", encoding="utf-8")
    summary = json.loads((run / journal.SUMMARY).read_text(encoding="utf-8"))
    summary["suites"] = {k: {**v, "metrics": g.header.suite_summary(k).get("metrics", v["metrics"])}
                         for k, v in summary["suites"].items()}
    (run / journal.SUMMARY).write_text(json.dumps(summary), encoding="utf-8")
    rows = [json.loads(r) for r in (run / observe.OBSERVATIONS).read_text(encoding="utf-8").splitlines()[1:-1]]
    forged = [theirs.get((r["suite"], r["sample_id"], r["epoch"], r["mode"]), r) for r in rows]
    head = {"observations": observe.FORMAT, "responses": journal.file_digest(run / journal.RESPONSES),
            "verdicts": journal.file_digest(run / journal.VERDICTS), "summary": journal.file_digest(run / journal.SUMMARY)}
    lines = [(json.dumps(x) + "\n").encode("utf-8") for x in [head, *forged]]
    body = b"".join(lines)
    mac = hashlib.sha256(body).hexdigest() if key is None else hmac.new(key, body, hashlib.sha256).hexdigest()
    (run / observe.OBSERVATIONS).write_bytes(body + (json.dumps({observe.SEAL: mac, "rows": len(forged)}) + "\n").encode())


@pytest.mark.parametrize("key", ["sha256", "another key"])
def test_consistent_forgery_without_this_users_key_is_not_believed(world, tmp_path, cli, key):
    """compare, matrix and bless of a run whose derived files were all rewritten consistently give what the
    journal gives; sealed with this user's key the very same files would have been believed (the seal is what
    tells them apart)."""
    honest = copy_run(world["cand"], tmp_path / "honest")
    assert cli("score", honest)[0] == 0
    truth = json.loads(outputs(honest, world["golden"])[0])
    assert truth["status"] != "pass"
    forger_key = None if key == "sha256" else b"k" * 32
    run = copy_run(honest, tmp_path / "run")
    forge(run, world["golden"], forger_key)
    believed = copy_run(honest, tmp_path / "believed")
    forge(believed, world["golden"], sealing.key())
    assert observe.read(believed) is not None
    assert json.loads(outputs(believed, world["golden"])[0])["status"] == "pass"  # what a forgery would get
    assert observe.read(run) is None
    code, _, err = cli("compare", run, "--golden", world["golden"])
    assert code == truth["exit_code"] and code != 0, err
    assert json.loads((run / "comparison.json").read_text())["status"] == truth["status"]
    assert (run / observe.OBSERVATIONS).read_bytes() == (honest / observe.OBSERVATIONS).read_bytes()  # re-scored
    forge(run, world["golden"], forger_key)
    code, _, err = cli("matrix", "--golden", world["golden"], "--out", tmp_path / "mx", f"forged={run}")
    assert code == truth["exit_code"], err
    rows = json.loads((tmp_path / "mx" / "matrix.json").read_text())["rows"]
    assert rows and all(r["status"] == truth["status"] for r in rows)
    forge(run, world["golden"], forger_key)
    assert cli("bless", run, "--to", tmp_path / "g")[0] == 0
    assert cli("bless", honest, "--to", tmp_path / "g2")[0] == 0
    assert (tmp_path / "g" / store.OBS).read_bytes() == (tmp_path / "g2" / store.OBS).read_bytes()
    assert json.loads((tmp_path / "g" / store.GOLDEN).read_text())["summary"] == \
        json.loads((tmp_path / "g2" / store.GOLDEN).read_text())["summary"]


def test_stale_observations_are_not_trusted(world, tmp_path, monkeypatch, cli):
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    assert observe.read(run) is not None
    # Verdicts rewritten by something that left observations.jsonl behind (an older verifier's `score`).
    vs = (run / scoring.VERDICTS).read_text(encoding="utf-8").splitlines(keepends=True)
    (run / scoring.VERDICTS).write_text("".join(vs[1:]), encoding="utf-8")
    assert observe.read(run) is None
    from verifier.app.scored import observed as observations

    calls = count_parses(monkeypatch)
    observations(run)  # scored again: verdicts, observations and summary rebuilt from the journal
    assert calls[0] > 0 and observe.read(run) is not None
    monkeypatch.undo()
    # A resume appended to the journal after scoring: stale until scored again, then fresh.
    assert cli("score", run)[0] == 0
    with (run / journal.RESPONSES).open("a", encoding="utf-8") as f:
        f.write((run / journal.RESPONSES).read_text(encoding="utf-8").splitlines()[-1] + "\n")
    assert RunDir(run).stale() and observe.read(run) is None
    before = outputs(run, world["golden"])  # re-scores (stale verdicts), which rewrites observations.jsonl
    assert observe.read(run) is not None
    count_parses(monkeypatch, fail=True)
    assert outputs(run, world["golden"]) == before


def test_scores_written_without_observations_remove_an_older_file(world, tmp_path, cli):
    run = copy_run(world["cand"], tmp_path / "run")
    assert cli("score", run)[0] == 0
    verdicts, summary = scoring.score_run(run, get_suites())
    scoring.write_scores(run, verdicts, summary)  # as an lm-eval import does
    assert not (run / observe.OBSERVATIONS).exists()


def test_merged_runs_get_observations_from_their_own_journal(world, tmp_path, cli):
    a = copy_run(world["ref"], tmp_path / "a")
    b = copy_run(world["cand"], tmp_path / "b")
    # same suite version: a merge of two runs of different samples is what shards make; here the overlap is resolved
    # by merge itself, and whatever it keeps, observations.jsonl must match the merged journal
    code, out, err = cli("merge", a, b, "--out", tmp_path / "m")
    if code != 0:
        pytest.skip(f"merge refused these runs: {err.strip()[:200]}")
    m = tmp_path / "m"
    assert observe.read(m) is not None
    before = (m / observe.OBSERVATIONS).read_bytes()
    assert cli("score", m)[0] == 0  # what merge scored is what scoring the merged journal again gives
    assert (m / observe.OBSERVATIONS).read_bytes() == before


def test_shown_logprobs_cover_the_report_token_diff():
    from verifier.report.pictures import TOKEN_CONTEXT

    assert observe.SHOWN_LOGPROBS == store.MAX_LOGPROBS + TOKEN_CONTEXT * 4
