"""The GitHub Actions recipes of docs/ci.md, run as written against the test server with the shipped goldens.

Every `run:` step that calls `verifier` is executed by bash, in job order (matrix jobs once per value),
in one working directory that holds the repository's goldens, so uploads and downloads of artifacts are
just the files left in place. `${{ vars.* }}` become the test server; `${{ secrets.* }}` a dummy key.
"""

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
VERDICT_CODES = {0, 10, 11, 12, 20, 30}  # a gate that ran; 1 (internal) and 2 (usage) mean the recipe is broken


def workflows() -> dict[str, dict]:
    """{section title: parsed YAML} for the first ```yaml block under each CI section of docs/ci.md."""
    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    out = {}
    for title in ("A pre-release gate in GitHub Actions", "Sharding a large run across jobs"):
        section = re.split(rf"^#+ {re.escape(title)}$", text, maxsplit=1, flags=re.M)[1]
        block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
        out[title] = yaml.safe_load(block)
    return out


def substitute(text: str, url: str, shard: int | None) -> str:
    def expr(m: re.Match) -> str:
        e = m.group(1).strip()
        if e == "vars.CANDIDATE_URL":
            return url
        if e == "vars.CANDIDATE_MODEL":
            return "test-model"
        if e.startswith("secrets."):
            return "sk-test-not-a-secret"
        if e == "matrix.shard":
            return str(shard)
        raise AssertionError(f"unknown expression in the docs/ci.md workflow: {e}")

    return re.sub(r"\$\{\{(.*?)\}\}", expr, text)


def steps(job: dict, url: str):
    """(shard, step) for every step of a job, once per matrix value."""
    values = ((job.get("strategy") or {}).get("matrix") or {}).get("shard") or [None]
    for shard in values:
        for step in job["steps"]:
            yield shard, step


@pytest.fixture
def world(tmp_path, server):
    work = tmp_path / "work"
    work.mkdir()
    (work / "goldens").symlink_to(ROOT / "goldens")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "verifier"
    shim.write_text(f"#!/bin/sh\nexec {sys.executable} -m verifier \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "step_summary.md"), "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_BASE_URL", None)
    return work, env, server.url


def run_workflow(wf: dict, work: Path, env: dict, url: str) -> list[tuple[str, int]]:
    ran = []
    for job_name, job in wf["jobs"].items():
        for shard, step in steps(job, url):
            if "run" in step and "verifier" in step["run"]:
                script = substitute(step["run"], url, shard)
                step_env = {**env, **{k: substitute(str(v), url, shard) for k, v in (step.get("env") or {}).items()}}
                p = subprocess.run(["bash", "-e", "-c", script], cwd=work, env=step_env, capture_output=True, text=True, timeout=300)
                ran.append((script, p.returncode))
                assert p.returncode in VERDICT_CODES, f"{job_name}: {script}\n{p.stderr[-2000:]}"
                if p.returncode != 0:
                    break  # a failing gate step ends the job, as in Actions
            paths = ((step.get("with") or {}).get("path")) if "upload-artifact" in str(step.get("uses")) else None
            if paths and (step.get("if") == "always()" or (ran and ran[-1][1] == 0)):
                for path in str(substitute(paths, url, shard)).split():
                    assert list(work.glob(path)), f"{job_name}: artifact {path} was not written"
    return ran


def test_readme_gate_workflow_runs_as_written(world):
    work, env, url = world
    wf = workflows()["A pre-release gate in GitHub Actions"]
    ran = run_workflow(wf, work, env, url)
    assert len(ran) == 1 and "verifier gate --golden goldens/qwen0.5b-smoke" in ran[0][0]
    print("gate exit code against the test server:", ran[0][1])
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().strip()  # the gate's summary reached the job page


def golden_like(name: str, url: str, work: Path, env: dict) -> Path:
    """A golden recorded from the test server with the shape of the shipped `name` (suites, smoke selection, modes,
    logprobs, probes), calibrated on two reruns: the recipe against it must pass, so any exit but 0 is a broken recipe."""
    shipped = json.loads((ROOT / "goldens" / name / "golden.json").read_text())
    assert shipped["probes"], "the sharding recipe is meant for a golden with probes"
    overrides = shipped["source"]["sampling"]["overrides"]
    args = ["run", "--suite", ",".join(shipped["suites"]), "--smoke", "--mode", ",".join(shipped["modes"]), "--probes",
            "--base-url", url, "--model", "test-model", "--quiet", *(["--logprobs", str(overrides["top_logprobs"])] if overrides.get("logprobs") else [])]
    ref = work.parent / "reference"
    for i in range(3):
        r = subprocess.run([sys.executable, "-m", "verifier", *args, "--out", str(ref / str(i))], env=env,
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    golden = work / "goldens" / name
    for cmd in (["bless", str(ref / "0"), "--to", str(golden)], ["calibrate", str(golden), "--runs", str(ref / "1"), str(ref / "2")]):
        r = subprocess.run([sys.executable, "-m", "verifier", *cmd], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
    return golden


def test_readme_shard_workflow_runs_as_written(world):
    work, env, url = world
    (work / "goldens").unlink()  # the shipped goldens, except the one the recipe gates against
    (work / "goldens").mkdir()
    for p in (ROOT / "goldens").iterdir():
        if p.name != "qwen0.5b-bfcl":
            (work / "goldens" / p.name).symlink_to(p)
    golden = golden_like("qwen0.5b-bfcl", url, work, env)
    wf = workflows()["Sharding a large run across jobs"]
    ran = run_workflow(wf, work, env, url)
    assert [re.search(r"verifier (\w+)", s).group(1) for s, _ in ran] == ["run"] * 4 + ["merge", "compare"]
    assert [code for _, code in ran] == [0] * 6, ran  # the gate passes: nothing the golden holds is lost on the way
    merged = work / "runs" / "merged"
    assert all((merged / f).exists() for f in ("comparison.json", "report.html", "junit.xml", "summary.md", "probes.json"))
    cmp = json.loads((merged / "comparison.json").read_text())
    assert cmp["status"] == "pass" and not cmp["coverage"]["missing"] and not cmp["coverage"].get("missing_probes")
    assert json.loads((merged / "probes.json").read_text()).keys() == json.loads((golden / "golden.json").read_text())["probes"].keys()
    hdr = json.loads((merged / "run.json").read_text())
    shard = json.loads((work / "runs" / "shard-1" / "run.json").read_text())
    assert hdr["server_info"] == shard["server_info"] and hdr["merged_parts"]["probes.json"]
    assert Path(env["GITHUB_STEP_SUMMARY"]).read_text().strip()  # the merge job's summary reached the job page


def test_readme_names_only_goldens_that_exist():
    """README and every page of docs/ name only goldens that exist (docs/_incoming/ is text not yet folded in)."""
    pages = [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if "_incoming" not in p.parts)]
    text = "\n".join(p.read_text(encoding="utf-8") for p in pages)
    names = {n for n in re.findall(r"goldens/([A-Za-z0-9_.<>-]+)", text) if "<" not in n}  # <name>: a placeholder
    assert "qwen0.5b-smoke" in names
    for name in names:
        assert (ROOT / "goldens" / name / "golden.json").exists(), f"the documentation names goldens/{name}, which does not exist"
