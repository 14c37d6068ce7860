"""A golden is self-contained (issue #25): it carries its samples (inputs.jsonl), so `gate` and `calibrate` run from
it with no --data and no hub, from any directory, by path or by packaged name; another format is refused in one line."""

import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = ROOT / "verifier" / "goldens"
VERDICT_CODES = {0, 10, 11, 12, 20, 30}  # the gate ran; 2 would mean it asked for data


def project_rows(n: int = 6) -> str:
    """A gsm8k-format dataset written here (not a hub copy): {question, answer} with lm-eval's `#### N` answers."""
    rows = [{"question": f"Ann has {a} apples and buys {b} more. How many apples does she have?",
             "answer": f"{a} + {b} = {a + b}\n#### {a + b}"} for a, b in [(3, 4), (10, 5), (7, 8), (20, 22), (1, 1), (9, 0)][:n]]
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def hub_off(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.delenv("VERIFIER_BFCL_DATA", raising=False)


def test_a_golden_from_a_local_dataset_gates_elsewhere_without_it(server, tmp_path, cli, hub_off, monkeypatch):
    data = tmp_path / "maker" / "gsm8k.jsonl"
    data.parent.mkdir()
    data.write_text(project_rows())
    ref = tmp_path / "maker" / "ref"
    code, _, err = cli("run", "--suite", "gsm8k", "--data", data, "--epochs", "3", "--base-url", server.url, "--model", "m",
                       "--out", ref, "--quiet", "--probes")
    assert code == 0, err
    golden = tmp_path / "maker" / "gsm8k-ref"
    assert cli("bless", ref, "--to", golden, "--epochs-as-reruns")[0] == 0
    inputs = [json.loads(x) for x in (golden / "inputs.jsonl").read_text().splitlines()]
    assert [r["id"] for r in inputs] == [f"gsm8k/{i}" for i in range(6)] and inputs[0]["messages"]
    # The golden travels; the dataset does not.
    provider = tmp_path / "provider"
    shutil.copytree(golden, provider / "mygoldens" / "gsm8k-ref")
    shutil.rmtree(tmp_path / "maker")
    monkeypatch.chdir(provider)
    server.script.requests.clear()
    code, out, err = cli("gate", "--golden", "mygoldens/gsm8k-ref", "--base-url", server.url, "--model", "m", "--out", "g", "--quiet")
    assert code == 0, err
    sent = {r["messages"][-1]["content"] for r in server.script.requests
            if r.get("messages") and isinstance(r["messages"][-1].get("content"), str)}  # probes also send image parts
    assert {r["messages"][-1]["content"] for r in inputs} <= sent  # the golden's own prompts (and its probes)
    assert (Path("g") / "probes.json").exists()
    assert "report: g/report.html" in out
    # calibrate makes its reruns from the golden's samples too.
    code, _, err = cli("calibrate", "mygoldens/gsm8k-ref", "--base-url", server.url, "--model", "m", "-k", "2",
                       "--out-prefix", "cal", "--quiet")
    assert code == 0, err
    assert json.loads((Path("cal-1") / "run.json").read_text())["selection"]["source"] == "golden"


@pytest.mark.parametrize("name", ["qwen0.5b-bfcl", "qwen0.5b-gsm8k", "qwen0.5b-structured"])
def test_shipped_goldens_copied_elsewhere_gate_with_no_dataset(name, server, tmp_path, cli, hub_off, monkeypatch):
    """The answers of the test server are wrong for these goldens: the gate must run and judge, not ask for data."""
    shutil.copytree(PACKAGED / name, tmp_path / "copy" / name)
    monkeypatch.chdir(tmp_path)
    code, out, err = cli("gate", "--golden", f"copy/{name}", "--base-url", server.url, "--model", "m", "--out", "g",
                         "--quiet", "--max-retries", "0")
    assert code in VERDICT_CODES, err
    assert "--data" not in err and (tmp_path / "g" / "comparison.json").exists()
    g = json.loads((PACKAGED / name / "golden.json").read_text())
    sent = json.loads((tmp_path / "g" / "run.json").read_text())["suites"]
    assert {k: v["dataset_sha256"] for k, v in sent.items()} == {k: v["dataset_sha256"] for k, v in g["suites"].items()}


def test_packaged_goldens_by_name_from_any_directory(server, tmp_path, cli, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no goldens/ here
    for name in ("demo-smoke", "goldens/demo-smoke"):
        code, out, err = cli("gate", "--golden", name, "--base-url", server.url, "--model", "m", "--out", f"g-{len(name)}", "--quiet")
        assert code == 0, err
    code, _, err = cli("gate", "--golden", "demo-smok", "--base-url", server.url, "--model", "m", "--out", "x", "--quiet")
    assert code == 2 and err.count("\n") == 1 and "demo-smoke" in err and "list-goldens" in err
    code, out, _ = cli("list-goldens")
    rows = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(rows) == {p.name for p in PACKAGED.iterdir() if (p / "golden.json").exists()}
    assert "smoke" in rows["demo-smoke"] and "chat,chat-stream" in rows["demo-smoke"] and "demo" in rows["demo-smoke"]
    assert "probes" in rows["qwen0.5b-bfcl"] and "qwen0.5b" in rows["qwen0.5b-bfcl"]
    # calibrate writes into the golden: never into the installed package by name
    code, _, err = cli("calibrate", "demo-smoke", "--runs", "a", "b")
    assert code == 2 and "not a directory" in err


def test_every_shipped_golden_is_current_and_self_contained():
    from verifier.app.catalog import get_suites
    from verifier.golden import store as golden

    suites = get_suites()

    def record_ids(suite: str, sample) -> list[str]:  # a conversation suite records each turn of a sample
        conv = suites[suite].conversation
        return conv.records(sample) if conv is not None else [sample.id]

    for p in golden.packaged():
        g = golden.load(p)
        assert g.header.document["golden_format"] == golden.FORMAT
        assert {(o.suite, o.sample_id) for o in g.observations} <= {(s, r) for s, xs in g.inputs.items() for x in xs for r in record_ids(s, x)}, p.name
    assert (ROOT / "goldens").resolve() == PACKAGED.resolve()  # the checkout's goldens/ are the packaged ones


@pytest.mark.parametrize("edit, words", [
    (lambda d: d["golden.json"].update(golden_format=1), "golden_format 1 (an older verifier's)"),
    (lambda d: d["golden.json"].update(golden_format=3), "golden_format 3 (a newer verifier's)"),
])
def test_a_golden_of_another_format_is_refused_in_one_line(edit, words, server, tmp_path, cli):
    dst = tmp_path / "g"
    shutil.copytree(PACKAGED / "demo-smoke", dst)
    doc = {"golden.json": json.loads((dst / "golden.json").read_text())}
    edit(doc)
    (dst / "golden.json").write_text(json.dumps(doc["golden.json"]))
    for cmd in (["gate", "--golden", dst, "--base-url", server.url, "--model", "m", "--out", tmp_path / "o"],
                ["list-goldens", tmp_path]):
        code, out, err = cli(*cmd)
        assert (code == 2 and err.count("\n") == 1 and words in err) or (cmd[0] == "list-goldens" and words in out), (out, err)
    assert not server.script.requests


def test_an_edited_or_missing_input_is_refused(server, tmp_path, cli):
    dst = tmp_path / "g"
    shutil.copytree(PACKAGED / "demo-smoke", dst)
    lines = (dst / "inputs.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["messages"][-1]["content"] += " Also, ignore the question."
    (dst / "inputs.jsonl").write_text("\n".join([json.dumps(rec)] + lines[1:]) + "\n")
    code, _, err = cli("gate", "--golden", dst, "--base-url", server.url, "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and "dataset_sha256" in err and err.count("\n") == 1
    (dst / "inputs.jsonl").write_text("\n".join(lines[1:]) + "\n")
    code, _, err = cli("gate", "--golden", dst, "--base-url", server.url, "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and "lacks sample" in err
    (dst / "inputs.jsonl").unlink()
    code, _, err = cli("gate", "--golden", dst, "--base-url", server.url, "--model", "m", "--out", tmp_path / "o")
    assert code == 2 and "no inputs.jsonl" in err
    assert not server.script.requests


def test_python_api(server, tmp_path):
    import verifier
    from verifier.errors import UsageError

    g = verifier.load_golden("demo-smoke")
    assert g.name == "demo-smoke" and g.suites == ("smoke",) and len(g.inputs["smoke"]) == 20 and g.margins
    doc = verifier.gate("demo-smoke", base_url=server.url, model="m", out=tmp_path / "gate")
    assert doc.status == "pass" and doc.exit_code == 0 and (tmp_path / "gate" / "report.html").exists()
    assert doc.to_json() == json.loads((tmp_path / "gate" / "comparison.json").read_text())  # the documented document
    # docs/python-api.md's example: run the golden's modes (run's default is the reference mode alone), compare with the loaded golden.
    assert verifier.run("smoke", base_url=server.url, model="m", smoke=True, limit=1, out=tmp_path / "one").run_dir
    assert json.loads((tmp_path / "one" / "run.json").read_text())["modes"] == ["chat"]
    r = verifier.run("smoke", base_url=server.url, model="m", smoke=True, modes=g.modes, out=tmp_path / "run")
    assert r.run_dir == tmp_path / "run" and r.summary.suites["smoke"].metrics["accuracy"]["value"] == 1.0
    assert r.to_json() == json.loads((tmp_path / "run" / "summary.json").read_text())
    again = verifier.compare(tmp_path / "run", "demo-smoke", write=False)
    assert again.status == "pass" and not (tmp_path / "run" / "comparison.json").exists()
    assert verifier.compare(tmp_path / "run", g, write=False).status == "pass"
    with pytest.raises(UsageError):
        verifier.load_golden(tmp_path / "nope")


def test_the_api_compare_keeps_a_gates_comparison_unless_told(server, tmp_path):
    """As the command does (cli/compare): a gate's comparison.json is its verdict of record; `verifier.compare` writes
    over it only with force=True, and out= writes elsewhere. A plain run's comparison is written as before."""
    import verifier
    from verifier.errors import UsageError

    doc = verifier.gate("demo-smoke", base_url=server.url, model="m", out=tmp_path / "gate", reports=False)
    recorded = (tmp_path / "gate" / "comparison.json").read_bytes()
    with pytest.raises(UsageError, match="force=True"):
        verifier.compare(tmp_path / "gate", "demo-smoke")
    assert (tmp_path / "gate" / "comparison.json").read_bytes() == recorded
    assert verifier.compare(tmp_path / "gate", "demo-smoke", write=False).status == doc.status
    elsewhere = verifier.compare(tmp_path / "gate", "demo-smoke", out=tmp_path / "again.json")
    assert json.loads((tmp_path / "again.json").read_text()) == elsewhere.to_json()
    assert (tmp_path / "gate" / "comparison.json").read_bytes() == recorded
    replaced = verifier.compare(tmp_path / "gate", "demo-smoke", force=True)
    assert json.loads((tmp_path / "gate" / "comparison.json").read_text()) == replaced.to_json()
    verifier.run("smoke", base_url=server.url, model="m", smoke=True, modes=("chat", "chat-stream"), out=tmp_path / "run")
    for _ in range(2):  # a run compared by `compare` is compared again without ceremony
        assert verifier.compare(tmp_path / "run", "demo-smoke").status == "pass"
    assert (tmp_path / "run" / "comparison.json").exists()


def test_runs_lists_past_runs_and_gates_newest_first(server, tmp_path, cli):
    runs = tmp_path / "runs"
    assert cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", server.url, "--model", "m",
               "--out", runs / "a-run", "--quiet")[0] == 0
    assert cli("gate", "--golden", "demo-smoke", "--base-url", server.url, "--model", "m", "--out", runs / "b-gate", "--quiet")[0] == 0
    # an older, failing gate (its header says when)
    shutil.copytree(runs / "b-gate", runs / "nested" / "c-old")
    hdr = json.loads((runs / "nested" / "c-old" / "run.json").read_text())
    hdr["started"] = "2026-01-01T00:00:00+00:00"
    (runs / "nested" / "c-old" / "run.json").write_text(json.dumps(hdr))
    cmp = json.loads((runs / "nested" / "c-old" / "comparison.json").read_text())
    cmp.update(status="frontend_regression", exit_code=10)
    (runs / "nested" / "c-old" / "comparison.json").write_text(json.dumps(cmp))
    code, out, _ = cli("runs", runs, "--json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert code == 0 and [Path(r["run_dir"]).name for r in rows] == ["b-gate", "a-run", "c-old"]
    assert rows[0]["kind"] == "gate" and rows[0]["status"] == "pass" and rows[0]["golden"] == "demo-smoke"
    assert rows[1]["kind"] == "run" and rows[1]["exit_code"] is None and rows[1]["model"] == "m"
    assert rows[2]["exit_code"] == 10 and rows[2]["suites"] == ["smoke"]
    code, out, _ = cli("runs", runs, "--status", "frontend_regression")
    assert out.count("\n") == 2 and "c-old" in out and "frontend_regression" in out
    code, out, _ = cli("runs", runs, "--since", "1d", "--json")
    assert {Path(json.loads(x)["run_dir"]).name for x in out.splitlines()} == {"a-run", "b-gate"}
    code, out, _ = cli("runs", runs, "--model", "other")
    assert "no runs" in out
    code, _, err = cli("runs", runs, "--since", "yesterday")
    assert code == 2 and "--since" in err
