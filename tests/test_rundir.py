"""RunDir (issue 36) and the hostile run directory (issue 37, items 6, 7 and 8).

- One module spells every file name of a run directory; every reader goes through `RunDir`.
- A run file planted as a FIFO, a device (a symlink to /dev/zero) or a symlink leaving the run is refused by every
  command that reads it, in one line with exit 2: never a hang, never a MemoryError (peak RSS measured in a
  subprocess), never a file from elsewhere.
- No command writes into a golden, or into a run it did not make, without --force.
- A comparison.json edited by hand is not shown by `matrix` as what it claims.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import pytest

from conftest import SMOKE_RUN, reference_reply
from verifier.execution import layout
from verifier.execution.rundir import ComparisonGlance, RunDir
from verifier.testbed.server import Reply, Script, TestServer

ROOT = Path(__file__).resolve().parent.parent


def test_each_run_file_name_is_spelled_in_one_module():
    # The data files (the report outputs' names also appear in the gate file's documented example).
    names = [v for k, v in vars(layout).items() if k.isupper() and isinstance(v, str) and v.endswith((".json", ".jsonl"))]
    assert {"run.json", "samples.jsonl", "responses.jsonl", "comparison.json", "observations.jsonl"} <= set(names)
    spelled: dict[str, set[str]] = {}
    for p in (ROOT / "verifier").rglob("*.py"):
        if "testbed" in p.parts:
            continue  # the test bed plays servers, not run directories
        text = p.read_text(encoding="utf-8")
        for name in names:
            if f'"{name}"' in text:
                spelled.setdefault(name, set()).add(p.relative_to(ROOT).as_posix())
    # samples.jsonl is also a golden's file name (golden/store.OBS): another directory, another module.
    allowed = {"verifier/execution/layout.py", "verifier/golden/store.py"}
    assert {n: m for n, m in spelled.items() if m - allowed or (n != layout.SAMPLES and len(m) > 1)} == {}


def cli_rss(*args, timeout=120):
    """`verifier ARGS` in a fresh interpreter: (exit code, peak RSS in MB, stderr). A hang fails the test. VmHWM is
    this process's own peak; ru_maxrss would carry the forking pytest process's peak across exec."""
    script = ("import json, resource, sys\nfrom verifier.cli import main\ncode = main(sys.argv[1:])\n"
              "print(json.dumps({'code': code, 'rss_mb': int(open('/proc/self/status').read().split('VmHWM:')[1].split()[0]) / 1024}))")
    p = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    last = json.loads(p.stdout.strip().splitlines()[-1])
    return last["code"], last["rss_mb"], p.stderr


def plant(path: Path, kind: str, outside: Path) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "zero":
        path.symlink_to("/dev/zero")
    else:  # a symlink to a file outside the run: its content must never be read, let alone quoted
        outside.write_text('{"suites": {"smoke": {"version": "1"}}, "secret": "OUTSIDE-CONTENT"}\n')
        path.symlink_to(outside)


@pytest.fixture(scope="module")
def scored(calibrated_golden, tmp_path_factory):
    """A scored and compared copy of the reference run (read-only here: each test copies it)."""
    from verifier.cli import main

    d = tmp_path_factory.mktemp("rundir") / "run"
    shutil.copytree(calibrated_golden["ref"], d)
    assert main(["compare", str(d), "--golden", str(calibrated_golden["golden"])]) == 0
    return d


# (command, the file planted): every offline reader of a run directory.
CASES = [
    ("score", layout.RESPONSES), ("score", layout.SAMPLES),
    ("report", layout.RESPONSES), ("report", layout.SUMMARY), ("report", layout.HEADER),
    ("compare", layout.RESPONSES), ("compare", layout.PROBES), ("compare", layout.CONTEXT),
    ("bless", layout.RESPONSES), ("bless", layout.OBSERVATIONS),
    ("merge", layout.RESPONSES), ("merge", layout.SAMPLES),
    ("runs", layout.COMPARISON), ("runs", layout.HEADER),
    ("matrix", layout.COMPARISON),
]


def command(cmd: str, run: Path, golden: Path, tmp: Path) -> list[str]:
    return {"score": ["score", run], "report": ["report", run],
            "compare": ["compare", run, "--golden", golden, "--out", tmp / "c.json"],
            "bless": ["bless", run, "--to", tmp / "g"], "merge": ["merge", run, "--out", tmp / "m"],
            "runs": ["runs", run.parent], "matrix": ["matrix", "--golden", golden, "--out", tmp / "mx", run]}[cmd]


@pytest.mark.parametrize("kind", ["fifo", "zero", "outside"])
@pytest.mark.parametrize("cmd,name", CASES)
def test_a_planted_special_file_is_refused_in_one_line(scored, calibrated_golden, tmp_path, cmd, name, kind):
    run = tmp_path / "runs" / "run"
    shutil.copytree(scored, run)
    plant(run / name, kind, tmp_path / "outside.json")
    code, rss, err = cli_rss(*command(cmd, run, calibrated_golden["golden"], tmp_path))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("verifier: error:") and name in lines[0], err
    assert "OUTSIDE-CONTENT" not in err
    assert rss < 400, f"peak RSS {rss:.0f} MB"
    if cmd in ("compare", "bless", "merge"):
        assert not (tmp_path / "g").exists() and not (tmp_path / "m").exists() and not (tmp_path / "c.json").exists()


def test_rundir_reads_typed_values(scored):
    rd = RunDir(scored)
    assert rd.is_run() and rd.scored() and not rd.stale()
    assert list(rd.header().suites) == ["smoke"]
    assert rd.comparison()["status"] == "pass"
    rows = rd.observations()
    assert rows and len(rows) == len(rd.verdicts())
    assert rd.probes() is None and rd.context() is None


def test_the_listing_reads_a_comparison_leniently_and_staleness_from_the_summary(scored, tmp_path):
    """Issue 45: the run listing's comparison read (any writer's, any age) and the staleness check read the documents
    in RunDir, the load boundary."""
    run = tmp_path / "r"
    shutil.copytree(scored, run)
    rd = RunDir(run)
    glance = rd.comparison_glance()
    assert glance is not None and (glance.status, glance.exit_code) == ("pass", 0)
    (run / layout.COMPARISON).write_text(json.dumps({"status": "odd", "golden": "not an object"}))
    assert rd.comparison_glance() == ComparisonGlance(status="odd", exit_code=None, golden_name=None)
    (run / layout.COMPARISON).write_text("{}")
    assert rd.comparison_glance() is None  # an empty document lists as a run never compared
    assert not rd.stale()
    with open(run / layout.RESPONSES, "ab") as f:
        f.write(b"\n")
    assert rd.stale()  # the journal is not the one summary.json's digest was taken of
    (run / layout.VERDICTS).unlink()
    assert rd.stale()


# ------------------------------------------------------------------------------------------------ item 7


def files(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_no_command_writes_into_a_golden_or_another_run_without_force(calibrated_golden, scored, tmp_path, cli):
    golden = tmp_path / "golden"
    shutil.copytree(calibrated_golden["golden"], golden)
    run = tmp_path / "run"
    shutil.copytree(scored, run)
    before_g, before_r = files(golden), files(run)
    script = Script(reference_reply)
    with TestServer(script) as srv:
        attempts = [
            ("--out", ["gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m", "--quiet",
                       "--out", golden]),
            ("--out", ["run", *SMOKE_RUN, "--base-url", srv.url, "--out", golden]),
            ("--out", ["merge", run, "--out", golden]),
            ("--to", ["bless", run, "--to", run]),
            ("--to", ["bless", calibrated_golden["r2"], "--to", run]),
        ]
        for flag, args in attempts:
            code, out, err = cli(*args)
            assert code == 2, (args, err)
            line = err.strip()
            assert "\n" not in line and "--force" in line and flag in line, line
            assert files(golden) == before_g and files(run) == before_r, args
            assert script.requests == [] and script.preflight == [], args  # refused before anything is sent
        # --force names the intent: the gate then runs there (and the golden's samples.jsonl is the run's)
        code, _, err = cli("gate", "--golden", calibrated_golden["golden"], "--base-url", srv.url, "--model", "m",
                           "--quiet", "--out", golden, "--force")
        assert code == 0, err
    assert files(golden) != before_g


# ------------------------------------------------------------------------------------------------ item 8


def wrong(req):
    m = re.search(r"What is (-?\d+) \+ (-?\d+)", req["messages"][-1]["content"])
    return Reply(content=str(int(m.group(1)) + int(m.group(2)) + 1))


def test_matrix_and_report_do_not_show_a_hand_edited_comparison_as_pass(calibrated_golden, tmp_path, cli):
    """A comparison.json is derived: shown only as far as the run's own evidence backs it (the report used the
    recorded one as it stood)."""
    golden = calibrated_golden["golden"]
    with TestServer(Script(wrong)) as srv:
        code, _, err = cli("gate", "--golden", golden, "--base-url", srv.url, "--model", "m", "--quiet",
                           "--out", tmp_path / "bad")
    assert code not in (0, 2), err
    cp = tmp_path / "bad" / layout.COMPARISON
    doc = json.loads(cp.read_text())
    assert doc["status"] != "pass"
    doc.update(status="pass", exit_code=0, reason="all good")
    cp.write_text(json.dumps(doc))
    code, out, err = cli("matrix", "--golden", golden, "--out", tmp_path / "mx", f"bad={tmp_path / 'bad'}")
    assert code != 0
    m = json.loads((tmp_path / "mx" / "matrix.json").read_text())
    assert {r["status"] for r in m["rows"]} != {"pass"}
    assert "unverified" in err and "bad" in err
    shown = json.loads((tmp_path / "mx" / "comparisons" / "bad.json").read_text())
    assert shown["status"] != "pass" and "unverified" in shown["reason"]
    assert json.loads(cp.read_text())["status"] == "pass"  # the run itself is not rewritten
    code, out, err = cli("report", tmp_path / "bad", "--golden", golden, "-o", tmp_path / "r.html")
    assert code == 0 and f"({shown['status']}, " in out and "unverified" in err, (out, err)
    assert "all good" not in (tmp_path / "r.html").read_text()
    assert json.loads(cp.read_text())["status"] == "pass"


# ------------------------------------------------------------------------------------------------ item 5 of issue 36


def test_reading_a_run_registers_nothing(scored, tmp_path, monkeypatch):
    from verifier import scrub

    run = tmp_path / "run"
    shutil.copytree(scored, run)
    hdr = json.loads((run / layout.HEADER).read_text())
    hdr["endpoint"] = {**hdr["endpoint"], "api_key_env": "RUNDIR_TEST_KEY", "api_key_sent": True, "header_names": ["x-key"]}
    (run / layout.HEADER).write_text(json.dumps(hdr))
    monkeypatch.setenv("RUNDIR_TEST_KEY", "sk-rundir-secret-value-0123456789")
    rd = RunDir(run)
    rd.header(), rd.summary(), rd.comparison(), rd.observations(), rd.verdicts()
    assert scrub.secrets() == [] and not scrub.current().mask_token_like
    with scrub.command() as mine:  # a command that writes from the run says so
        scrub.register_run(rd.header().endpoint)
        assert mine.secrets() == ["sk-rundir-secret-value-0123456789"] and mine.mask_token_like
    assert scrub.secrets() == [] and not scrub.current().mask_token_like  # gone with the command


def test_a_commands_secrets_end_with_it_and_threads_do_not_share_them(tmp_path, cli):
    import threading

    from verifier import scrub

    with TestServer(Script(reference_reply)) as srv:
        code, _, err = cli("run", "--suite", "smoke", "--smoke", "--base-url", srv.url, "--model", "m", "--quiet",
                           "--header", "X-Secret: hdr-secret-value-0123456789", "--out", tmp_path / "r")
    assert code == 0, err
    assert scrub.secrets() == []  # the run's --header was the run's only
    seen: dict[str, list[str]] = {}

    def gate(name: str, secret: str, ready: threading.Barrier) -> None:
        with scrub.command() as mine:
            scrub.register(secret)
            ready.wait()  # both registered: neither may see the other's
            seen[name] = scrub.secrets()
            seen[name + " text"] = [scrub.text(f"a {secret} b")]
        seen[name + " after"] = mine.secrets()

    ready = threading.Barrier(2)
    threads = [threading.Thread(target=gate, args=(n, f"{n}-secret-0123456789", ready)) for n in ("one", "two")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["one"] == ["one-secret-0123456789"] and seen["two"] == ["two-secret-0123456789"]
    assert seen["one text"] == seen["two text"] == ["a *** b"]
    assert scrub.secrets() == []
    parent = scrub.Secrets()
    for n in ("one", "two"):
        other = scrub.Secrets()
        other.register(*seen[n + " after"])
        parent.adopt(other)
    assert parent.secrets() == ["one-secret-0123456789", "two-secret-0123456789"]


def test_merge_refuses_shards_from_different_endpoints(scored, tmp_path, cli):
    """Issue 37 (medium): shards from different endpoints merged silently into one run."""
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(scored, a)
    shutil.copytree(scored, b)
    hdr = json.loads((b / layout.HEADER).read_text())
    hdr["endpoint"]["base_url"] = "http://other.example:8000/v1"
    hdr["run_id"] = "other"
    (b / layout.HEADER).write_text(json.dumps(hdr))
    with (b / layout.RESPONSES).open("a") as f:  # not the same journal (merge refuses a shard given twice)
        f.write((b / layout.RESPONSES).read_text().splitlines()[0] + "\n")
    code, _, err = cli("merge", a, b, "--out", tmp_path / "m")
    assert code == 2 and "other.example" in err and "one endpoint" in err, err
    assert not (tmp_path / "m").exists()


# ------------------------------------------------------------------------------------------------ issue 49: a foreign run


def comparable(doc: dict) -> dict:
    """A comparison without where its run was read from."""
    return {k: v for k, v in doc.items() if k != "run"}


@pytest.mark.parametrize("made", ["scored by a colleague", "never scored"])
def test_compare_out_reads_a_run_it_may_not_write_and_leaves_it_byte_identical(scored, calibrated_golden, tmp_path,
                                                                               monkeypatch, cli, made):
    """A colleague's run (sealed with their key, so its observations are not believed here) or a bare journal is
    scored again; with --out that happens in memory and the run directory is not written at all (it may be
    read-only, another user's). The comparison equals the one made by scoring it in place."""
    monkeypatch.setenv("VERIFIER_CONFIG_DIR", str(tmp_path / "this-user"))  # another key than the one that sealed it
    golden = calibrated_golden["golden"]
    for name in ("run", "in-place"):
        shutil.copytree(scored, tmp_path / name)
        if made == "never scored":
            for derived in (layout.VERDICTS, layout.OBSERVATIONS, layout.SUMMARY, layout.COMPARISON):
                (tmp_path / name / derived).unlink()
    run = tmp_path / "run"
    before = files(run)
    code, out, err = cli("compare", run, "--golden", golden, "--out", tmp_path / "c.json")
    assert code == 0, err
    assert files(run) == before  # not a byte written, not a file added
    assert f"comparison: {tmp_path / 'c.json'}" in out
    code, _, err = cli("compare", tmp_path / "in-place", "--golden", golden, "--force")
    assert code == 0, err
    assert files(tmp_path / "in-place") != before  # scored again in place: its files are this user's now
    assert comparable(json.loads((tmp_path / "c.json").read_text())) == comparable(
        json.loads((tmp_path / "in-place" / layout.COMPARISON).read_text()))


def as_a_reader(*args, env: dict | None = None) -> subprocess.CompletedProcess:
    """`verifier ARGS` in a child process that the file modes bind: for root, without CAP_DAC_OVERRIDE (setpriv),
    so a directory without write permission is one it cannot write, as for a colleague reading another's run."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("root without setpriv: the file modes cannot bind this user")
        prefix = [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-dac_override,-dac_read_search", "--"]
    return subprocess.run([*prefix, sys.executable, "-m", "verifier", *map(str, args)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@contextlib.contextmanager
def read_only(d: Path) -> Iterator[None]:
    """`d` and everything in it without write permission while the block runs; writable again after it."""
    for p in [*d.rglob("*"), d]:
        p.chmod(0o555 if p.is_dir() else 0o444)
    try:
        yield
    finally:
        for q in [d, *d.rglob("*")]:
            q.chmod(0o755 if q.is_dir() else 0o644)


def copies_of(scored: Path, tmp_path: Path, made: str, *names: str) -> None:
    """Copies of the scored run under `tmp_path`, one per name; "never scored" ones keep their journal only."""
    for name in names:
        shutil.copytree(scored, tmp_path / name)
        if made == "never scored":
            for derived in (layout.VERDICTS, layout.OBSERVATIONS, layout.SUMMARY, layout.COMPARISON):
                (tmp_path / name / derived).unlink()


@pytest.mark.parametrize("made", ["scored by a colleague", "never scored"])
def test_a_run_this_user_cannot_write_is_compared_reported_and_blessed_without_a_byte_written(
        scored, calibrated_golden, tmp_path, cli, made):
    """A colleague's run (their seal: its derived files are not believed here) or a bare journal, read-only to this
    user: `compare`, `report` and `bless` score it again from its journal in memory and leave it byte for byte as it
    was; without `--out` / `-o`, where their output would go into the run, they refuse in one line naming the way
    out. What they make equals what scoring a writable copy in place gives. Before, `report` and `bless` scored it
    in place and failed on the first write."""
    golden = calibrated_golden["golden"]
    env = {"VERIFIER_CONFIG_DIR": str(tmp_path / "this-user")}  # another key than the one that sealed the run
    copies_of(scored, tmp_path, made, *("run", "in-place"))
    run = tmp_path / "run"
    before = files(run)
    with read_only(run):
        p = as_a_reader("compare", run, "--golden", golden, env=env)
        assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "--out FILE" in p.stderr, p.stderr
        p = as_a_reader("report", run, "--golden", golden, env=env)
        assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "-o FILE" in p.stderr, p.stderr
        p = as_a_reader("compare", run, "--golden", golden, "--out", tmp_path / "c.json", env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        p = as_a_reader("report", run, "--golden", golden, "-o", tmp_path / "r.html", "--csv", tmp_path / "r.csv", env=env)
        assert p.returncode == 0 and "(pass, 40 records)" in p.stdout, (p.stdout, p.stderr[-2000:])
        p = as_a_reader("bless", run, "--to", tmp_path / "blessed", env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        assert files(run) == before  # not a byte written, not a file added
    # The same commands on a writable copy, scored again in place: the same comparison, rows and golden.
    mine = tmp_path / "in-place"
    p = as_a_reader("bless", mine, "--to", tmp_path / "blessed-in-place", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert files(mine) != files(run)  # scored again in place: its files are this user's now
    for f in ("samples.jsonl", "inputs.jsonl"):
        assert (tmp_path / "blessed" / f).read_bytes() == (tmp_path / "blessed-in-place" / f).read_bytes(), f
    blessed, in_place = (json.loads((tmp_path / d / "golden.json").read_text()) for d in ("blessed", "blessed-in-place"))
    assert blessed["summary"] == in_place["summary"] and blessed["summary"] is not None
    p = as_a_reader("report", mine, "--golden", golden, "-o", tmp_path / "mine.html", "--csv", tmp_path / "mine.csv", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (tmp_path / "r.csv").read_bytes() == (tmp_path / "mine.csv").read_bytes()
    code, _, err = cli("compare", mine, "--golden", golden, "--force")
    assert code == 0, err
    assert comparable(json.loads((tmp_path / "c.json").read_text())) == comparable(
        json.loads((mine / layout.COMPARISON).read_text()))


@pytest.mark.parametrize("made", ["scored by a colleague", "never scored"])
def test_compare_ci_outputs_never_write_into_a_run_this_user_cannot_write(scored, calibrated_golden, tmp_path, made):
    """`compare --ci-outputs` puts report.html, junit.xml, summary.md and samples.csv into the run: on a run this user
    cannot write (file modes binding, root without CAP_DAC_OVERRIDE too) it refuses in one line before anything is
    scored, naming `--ci-outputs-dir DIR`; with it every output, comparison.json included, goes into DIR and the run
    is left byte for byte as it was, even when it could be written. The outputs equal those written into a writable
    copy by `--ci-outputs`. Before, the comparison was made and the report files then failed to write into the run."""
    golden = calibrated_golden["golden"]
    env = {"VERIFIER_CONFIG_DIR": str(tmp_path / "this-user")}  # another key than the one that sealed the run
    copies_of(scored, tmp_path, made, *("run", "writable", "in-place"))
    run = tmp_path / "run"
    before = files(run)
    with read_only(run):
        p = as_a_reader("compare", run, "--golden", golden, "--ci-outputs", env=env)
        assert p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr
        assert "--ci-outputs-dir DIR" in p.stderr and "cannot be written" in p.stderr, p.stderr
        p = as_a_reader("compare", run, "--golden", golden, "--ci-outputs", "--out", tmp_path / "c.json", env=env)
        assert p.returncode == 2 and "--ci-outputs-dir DIR" in p.stderr, p.stderr  # --out moves the comparison only
        assert not (tmp_path / "c.json").exists()
        p = as_a_reader("compare", run, "--golden", golden, "--ci-outputs-dir", tmp_path / "ci", env=env)
        assert p.returncode == 0, p.stderr[-2000:]
        assert files(run) == before  # not a byte written, not a file added
    ci_dir = tmp_path / "ci"
    assert sorted(p.name for p in ci_dir.iterdir()) == sorted(
        [layout.COMPARISON, layout.REPORT_HTML, layout.JUNIT, layout.SUMMARY_MD, layout.SAMPLES_CSV])
    assert f"comparison {ci_dir / layout.COMPARISON}" in p.stdout and f"report: {ci_dir / layout.REPORT_HTML}" in p.stdout
    # A run this user may write is not written either: --ci-outputs-dir reads the run.
    writable = tmp_path / "writable"
    before = files(writable)
    p = as_a_reader("compare", writable, "--golden", golden, "--ci-outputs-dir", tmp_path / "ci2", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    assert files(writable) == before
    # The same outputs as --ci-outputs writes into a writable copy, scored again in place.
    mine = tmp_path / "in-place"
    p = as_a_reader("compare", mine, "--golden", golden, "--ci-outputs", "--force", env=env)
    assert p.returncode == 0, p.stderr[-2000:]
    for name in (layout.SAMPLES_CSV, layout.JUNIT):
        assert (ci_dir / name).read_bytes() == (mine / name).read_bytes() == (tmp_path / "ci2" / name).read_bytes(), name
    assert comparable(json.loads((ci_dir / layout.COMPARISON).read_text())) == comparable(
        json.loads((mine / layout.COMPARISON).read_text()))
    # DIR naming the run itself is refused (that is --ci-outputs).
    p = as_a_reader("compare", mine, "--golden", golden, "--ci-outputs-dir", mine, env=env)
    assert p.returncode == 2 and p.stderr.strip().count("\n") == 0 and "is the run directory" in p.stderr, p.stderr
