"""The smaller paths of issue 39: calibrate -k help, list-goldens alignment, --golden typo, another model's run."""

import shutil

from conftest import ROOT


def test_calibrate_k_help_says_what_it_does(cli, capsys):
    import pytest

    with pytest.raises(SystemExit):
        cli("calibrate", "--help")
    out = capsys.readouterr().out
    assert "the golden itself counts as one" not in out and "k+1 runs in all" in " ".join(out.split())


def test_list_goldens_columns_align_on_long_names(cli, tmp_path):
    src = ROOT / "verifier" / "goldens" / "demo-smoke"
    for name in ("a", "a-golden-with-a-name-much-longer-than-the-column-was"):
        shutil.copytree(src, tmp_path / name)
    code, out, _ = cli("list-goldens", tmp_path)
    lines = out.splitlines()
    assert code == 0 and len(lines) == 3
    starts = {line.index("smoke") for line in lines[1:]}
    assert len(starts) == 1 and lines[0].index("suites") == starts.pop(), out


def test_a_golden_name_typo_suggests_the_name(cli, server, tmp_path):
    code, _, err = cli("gate", "--golden", "demo-smok", "--base-url", server.url, "--model", "m", "--out", tmp_path / "x", "--quiet")
    assert code == 2 and "did you mean demo-smoke?" in err and "qwen0.5b-vllm-bfcl-mt" not in err


def test_comparing_a_run_of_another_model_says_so(cli, server, tmp_path):
    golden = ROOT / "goldens" / "demo-smoke"
    code, out, _ = cli("gate", "--golden", golden, "--base-url", server.url, "--model", "other", "--out", tmp_path / "g")
    notes = [line for line in out.splitlines() if "note: the run is of model" in line]
    assert code == 0 and notes == ["  note: the run is of model 'other', the golden of 'demo': a difference may be the model's, "
                                   "not the endpoint's"], out
    code, out, _ = cli("gate", "--golden", golden, "--base-url", server.url, "--model", "demo", "--out", tmp_path / "h")
    assert "note: the run is of model" not in out


def test_quiet_prints_the_status_the_first_cause_and_the_report_only(cli, tmp_path):
    """`--quiet` on a regression: three lines (it printed 40-55 against a probe-recorded golden); the rest is in the report."""
    from verifier.testbed.proxy import Proxy
    from verifier.testbed.server import Script, TestServer, arithmetic

    with TestServer(Script(arithmetic)) as srv, Proxy(srv.url, ["answer_in_reasoning"]) as px:
        code, out, err = cli("gate", "--golden", ROOT / "goldens" / "demo-smoke", "--base-url", px.url, "--model", "demo",
                             "--out", tmp_path / "g", "--quiet")
    lines = out.splitlines()
    assert code == 10 and len(lines) == 3, out
    assert lines[0].startswith("status: frontend_regression (exit 10)")
    assert lines[1].startswith("  diagnosis: reasoning parser: ")
    assert lines[2] == f"report: {tmp_path / 'g' / 'report.html'}"
