"""One gate spec, four front doors: CLI flags, a gate file, a sweep's [gate] table and the API's keyword arguments
each parse an option once into the same GateSpec (app/spec.py), and every option means the same from every door.

The table sends each option through each door that offers it and asserts one spec; the second half runs real gates
against the project's test server (a two-suite golden blessed here, and the shipped demo-smoke): `--suite S`,
`suites = ["S"]`, `[gate] suites = ["S"]` and `verifier.gate(..., suites=["S"])` each run only S and pass, and
`probes = false` leaves the probes out (no probes.json)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from verifier.app.spec import GateSpec, Probes
from verifier.golden.model import Margin
from verifier.testbed.server import Script, TestServer, arithmetic

URL = "http://127.0.0.1:9/v1"
BASE = {"golden": "demo-smoke", "base_url": URL, "model": "m"}


def via_cli(args: list[str]) -> GateSpec:
    from verifier.cli.args import options_from_env
    from verifier.cli.gate import options_from_flags
    from verifier.cli.main import build_parser

    a = build_parser().parse_args(["gate", "--golden", BASE["golden"], "--base-url", URL, "--model", "m", *map(str, args)])
    return options_from_flags(a).over(options_from_env({})).spec()


def via_gate_file(top: dict, endpoint: dict, tmp_path: Path) -> GateSpec:
    import tomllib

    from verifier.cli import gatefile

    def toml(d: dict) -> str:  # the few shapes the table uses, written as TOML and read back as a user's file is
        out = []
        for k, v in d.items():
            out.append(f"{json.dumps(k)} = {_toml_value(v)}")
        return "\n".join(out) + "\n"

    text = f'golden = "{BASE["golden"]}"\n' + toml({k: v for k, v in top.items() if not isinstance(v, dict)})
    for table, body in {k: v for k, v in top.items() if isinstance(v, dict)}.items():
        text += f"[{table}]\n" + toml(body)
    text += "[endpoint]\n" + toml({"base_url": URL, "model": "m", **endpoint})
    path = tmp_path / "gate.toml"
    path.write_text(text)
    shared, endpoints = gatefile.options(gatefile.read(path), path)
    assert tomllib.loads(text)  # valid TOML
    return endpoints[0][1].over(shared).spec()


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(v)


def via_sweep(gate: dict, config: dict, tmp_path: Path) -> GateSpec:
    from verifier.app import sweep as app_sweep
    from verifier.cli import sweep

    text = f'golden = "{BASE["golden"]}"\n[gate]\n' + "".join(f"{json.dumps(k)} = {_toml_value(v)}\n" for k, v in gate.items())
    text += f'\n[[config]]\nname = "a"\nbase_url = "{URL}"\nmodel = "m"\n' + "".join(
        f"{k} = {_toml_value(v)}\n" for k, v in config.items())
    path = tmp_path / "sweep.toml"
    path.write_text(text)
    spec = sweep.spec_from_file(sweep.read(str(path)), tmp_path / "sw", quiet=False)
    return app_sweep.gate_spec(spec, spec.configs[0].endpoint, Path("out"))


def via_api(kwargs: dict) -> GateSpec:
    import verifier.api

    return verifier.api.gate_spec(BASE["golden"], base_url=URL, model="m", **kwargs)


def same(spec: GateSpec) -> GateSpec:
    """What differs by door on purpose: the API is quiet by default, a sweep puts each gate in OUT/<config>/gate."""
    return dataclasses.replace(spec, quiet=False, out=None)


M = Margin("smoke/accuracy", 0.1, "ten points, reviewed", "gate")

# option: (CLI flags, gate file (top-level, [endpoint]), sweep ([gate], [[config]]), API kwargs, what the spec holds)
# None: that door does not offer the option.
TABLE = {
    "suites": (["--suite", "smoke"], ({"suites": ["smoke"]}, {}), ({"suites": ["smoke"]}, {}), {"suites": ["smoke"]},
               lambda s: s.suites == ("smoke",)),
    "modes": (["--mode", "chat"], ({"modes": ["chat"]}, {}), ({"modes": ["chat"]}, {}), {"modes": ["chat"]},
              lambda s: s.modes == ("chat",)),
    # A list of two, given each door's ways: a file's or the API's item is split at commas as the flag's value is;
    # a name given twice is one name.
    "two modes, a list": (["--mode", "chat,chat-stream"], ({"modes": ["chat", "chat-stream"]}, {}),
                          ({"modes": ["chat", "chat-stream"]}, {}), {"modes": ["chat", "chat-stream"]},
                          lambda s: s.modes == ("chat", "chat-stream")),
    "two modes, comma string": (["--mode", "chat,chat-stream"], ({"modes": ["chat,chat-stream"]}, {}),
                                ({"modes": ["chat", "chat-stream,chat"]}, {}), {"modes": "chat,chat-stream"},
                                lambda s: s.modes == ("chat", "chat-stream")),
    "a suite named twice": (["--suite", "smoke,smoke"], ({"suites": "smoke"}, {}), ({"suites": ["smoke", "smoke"]}, {}),
                            {"suites": ("smoke", "smoke")}, lambda s: s.suites == ("smoke",)),
    "limit": (["--limit", 3], ({"limit": 3}, {}), ({"limit": 3}, {}), {"limit": 3}, lambda s: s.limit == 3),
    "probes on": (["--probes"], ({"budgets": {"probes": True}}, {}), ({"probes": True}, {}), {"probes": True},
                  lambda s: s.probes is Probes.ON),
    "probes off": (["--no-probes"], ({"budgets": {"probes": False}}, {}), ({"probes": False}, {}), {"probes": False},
                   lambda s: s.probes is Probes.OFF),
    "probes unset": ([], ({}, {}), ({}, {}), {}, lambda s: s.probes is Probes.GOLDEN),
    "margins": (["--margin", "smoke/accuracy=0.1:ten points, reviewed"],
                ({"margins": {"smoke/accuracy": {"value": 0.1, "reason": "ten points, reviewed"}}}, {}),
                ({"margins": {"smoke/accuracy": {"value": 0.1, "reason": "ten points, reviewed"}}}, {}),
                {"margins": {"smoke/accuracy": {"value": 0.1, "reason": "ten points, reviewed"}}},
                lambda s: s.margins == (M,)),
    "extra_body": (["--extra-body", '{"x": {"y": 1}}'], ({"sampling": {"extra_body": {"x": {"y": 1}}}}, {}),
                   ({"sampling": {"extra_body": {"x": {"y": 1}}}}, {}), {"extra_body": {"x": {"y": 1}}},
                   lambda s: s.extra_body == {"x": {"y": 1}}),
    "sampling": (["--temperature", 0.5, "--max-tokens", 9, "--logprobs", 2, "--seed", 4, "--top-p", 0.9],
                 ({"sampling": {"temperature": 0.5, "max_tokens": 9, "logprobs": 2, "seed": 4, "top_p": 0.9}}, {}),
                 ({"sampling": {"temperature": 0.5, "max_tokens": 9, "logprobs": 2, "seed": 4, "top_p": 0.9}}, {}),
                 {"sampling": {"temperature": 0.5, "max_tokens": 9, "seed": 4, "top_p": 0.9}, "logprobs": 2},
                 lambda s: s.overrides == {"temperature": 0.5, "max_tokens": 9, "seed": 4, "top_p": 0.9, "logprobs": True,
                                           "top_logprobs": 2}),
    "concurrency": (["--concurrency", 3], ({}, {"concurrency": 3}), ({"concurrency": 3}, {}), {"concurrency": 3},
                    lambda s: s.endpoint.concurrency == 3),
    "timeout": (["--timeout", 5], ({}, {"timeout": 5}), ({"timeout": 5}, {}), {"timeout_s": 5},
                lambda s: s.endpoint.timeout_s == 5.0 and isinstance(s.endpoint.timeout_s, float)),
    "max_retries": (["--max-retries", 0], ({}, {"max_retries": 0}), ({"max_retries": 0}, {}), {"max_retries": 0},
                    lambda s: s.endpoint.max_retries == 0),
    "api_key_env": (["--api-key-env", "CANDIDATE_KEY"], ({}, {"api_key_env": "CANDIDATE_KEY"}),
                    ({}, {"api_key_env": "CANDIDATE_KEY"}), {"api_key_env": "CANDIDATE_KEY"},
                    lambda s: s.endpoint.api_key_env == "CANDIDATE_KEY"),
    "infra_budget": (["--infra-budget", 0.1], ({"budgets": {"infra": 0.1}}, {}), ({"infra_budget": 0.1}, {}),
                     {"infra_budget": 0.1}, lambda s: s.infra_budget == 0.1),
    "data": (["--data", "d"], ({"data": "d"}, {}), ({"data": "d"}, {}), {"data": "d"}, lambda s: s.data == "d"),
    "sequential": (["--sequential", "--looks", 3], ({"budgets": {"sequential": True, "looks": 3}}, {}),
                   ({"sequential": True, "looks": 3}, {}),
                   {"sequential": True, "looks": 3}, lambda s: s.sequential and s.looks == 3),
    "teacher_forcing": (["--teacher-forcing", "prefill", "--forced-positions", 6],
                        ({"budgets": {"teacher_forcing": "prefill", "forced_positions": 6}}, {}),
                        ({"teacher_forcing": "prefill", "forced_positions": 6}, {}),
                        {"teacher_forcing": "prefill", "forced_positions": 6},
                        lambda s: s.teacher_forcing == "prefill" and s.forced_positions == 6),
    "resend": (["--resend", 2], ({"budgets": {"resend": 2}}, {}), ({"resend": 2}, {}), {"resend": 2},
               lambda s: s.resend == 2),
    "resend off": (["--resend", 0], ({"budgets": {"resend": 0}}, {}), ({"resend": 0}, {}), {"resend": 0},
                   lambda s: s.resend == 0),
}


@pytest.mark.parametrize("option", sorted(TABLE))
def test_every_option_means_the_same_from_every_door(option, tmp_path):
    flags, gfile, sweep_tables, api, holds = TABLE[option]
    specs = {"cli": via_cli(flags), "gate file": via_gate_file(*gfile, tmp_path), "api": via_api(api)}
    if sweep_tables is not None:
        specs["sweep"] = via_sweep(*sweep_tables, tmp_path)
    for door, spec in specs.items():
        assert holds(spec), (door, spec)
    first = same(specs["cli"])
    assert {door: same(s) for door, s in specs.items()} == {door: first for door in specs}


def test_the_doors_agree_on_the_defaults_too(tmp_path):
    spec = same(via_cli([]))
    assert spec == same(via_gate_file({}, {}, tmp_path)) == same(via_sweep({}, {}, tmp_path)) == same(via_api({}))
    assert spec.probes is Probes.GOLDEN and spec.suites == () and spec.margins == () and spec.extra_body is None


def test_a_flag_beats_the_file_and_margins_merge_per_key(tmp_path):
    from verifier.cli import gatefile
    from verifier.cli.args import options_from_env
    from verifier.cli.gate import options_from_flags
    from verifier.cli.main import build_parser

    path = tmp_path / "gate.toml"
    path.write_text('golden = "demo-smoke"\nsuites = ["smoke"]\n[budgets]\nprobes = false\n[margins]\n'
                    '"smoke/accuracy" = { value = 0.1, reason = "file" }\n"smoke/drift" = { value = 0.2, reason = "file" }\n'
                    f'[endpoint]\nbase_url = "{URL}"\nmodel = "m"\nconcurrency = 2\n')
    shared, endpoints = gatefile.options(gatefile.read(path), path)
    a = build_parser().parse_args(["gate", "--config", str(path), "--probes", "--concurrency", "5",
                                   "--margin", "smoke/drift=0.3:flag"])
    env = options_from_env({"VERIFIER_CONCURRENCY": "7", "VERIFIER_MODEL": "env-model"})
    spec = options_from_flags(a).over(endpoints[0][1].over(shared)).over(env).spec()
    assert spec.probes is Probes.ON and spec.endpoint.concurrency == 5 and spec.endpoint.model == "m"
    assert spec.suites == ("smoke",)
    assert {m.key: (m.value, m.reason) for m in spec.margins} == {"smoke/accuracy": (0.1, "file"), "smoke/drift": (0.3, "flag")}


@pytest.mark.parametrize("value", ["sk-proj-abcdefghijklmnop1234", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz", "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                                   "aB3dE5gH7jK9mN1pQ3sT5vX7zA9cE1gI"])
def test_a_key_given_as_the_variable_name_is_refused_and_never_written(value, tmp_path, cli, capsys):
    import verifier.api
    from verifier.errors import UsageError

    out = tmp_path / "o"
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit 2 (the flag's type refuses it)
        cli("gate", "--golden", "demo-smoke", "--base-url", URL, "--model", "m", "--api-key-env", value, "--out", out)
    stdout, err = capsys.readouterr()
    assert stopped.value.code == 2 and "looks like a key, not a variable name" in err and value not in err + stdout
    path = tmp_path / "gate.toml"
    path.write_text(f'golden = "demo-smoke"\n[endpoint]\nbase_url = "{URL}"\nmodel = "m"\napi_key_env = "{value}"\n'
                    f'[outputs]\ndir = "{out}"\n')
    code, stdout, err = cli("gate", "--config", path)
    assert code == 2 and "looks like a key, not a variable name" in err and value not in err + stdout
    sw = tmp_path / "sweep.toml"
    sw.write_text(f'golden = "demo-smoke"\n[[config]]\nname = "a"\nbase_url = "{URL}"\nmodel = "m"\napi_key_env = "{value}"\n')
    code, stdout, err = cli("sweep", sw, "--out", out)
    assert code == 2 and "looks like a key, not a variable name" in err and value not in err + stdout
    with pytest.raises(UsageError, match="looks like a key"):
        verifier.api.gate_spec("demo-smoke", base_url=URL, model="m", api_key_env=value)
    assert not out.exists()
    # an ordinary variable name is accepted
    assert via_cli(["--api-key-env", "OPENAI_API_KEY"]).endpoint.api_key_env == "OPENAI_API_KEY"


@pytest.mark.parametrize("key,value", [("report", "../../x.html"), ("junit", "/tmp/elsewhere/j.xml"), ("matrix", "../../m")])
def test_gate_file_outputs_stay_under_the_run_or_the_file_directory(key, value, tmp_path, cli):
    path = tmp_path / "cfg" / "gate.toml"
    path.parent.mkdir()
    path.write_text(f'golden = "demo-smoke"\n[endpoint]\nbase_url = "{URL}"\nmodel = "m"\n'
                    f'[outputs]\ndir = "{tmp_path / "run"}"\n{key} = "{value}"\n')
    code, _, err = cli("gate", "--config", path)
    assert code == 2 and f"[outputs] {key}" in err and "leads outside" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("kind", ["a directory of other files", "a file", "a symlink"])
def test_gate_file_dir_that_exists_and_is_not_a_run_is_refused(kind, tmp_path, cli):
    """Issue 49 item 8: [outputs] dir naming an existing directory that is not a run (a home, a source tree) is
    refused in one line before anything is sent, read or written; its files stay as they were. An empty directory,
    or one the gate makes, is where a run goes (checked last: the same file with an empty `dir` gets past it)."""
    target = tmp_path / "mine"
    if kind == "a file":
        target.write_text("keep", encoding="utf-8")
    elif kind == "a symlink":
        (tmp_path / "elsewhere").mkdir()
        target.symlink_to(tmp_path / "elsewhere")
    else:
        target.mkdir()
        (target / "summary.md").write_text("my notes\n", encoding="utf-8")
        (target / "notes.txt").write_text("keep", encoding="utf-8")
    path = tmp_path / "gate.toml"
    path.write_text(f'golden = "demo-smoke"\n[endpoint]\nbase_url = "{URL}"\nmodel = "m"\n'
                    f'[outputs]\ndir = "{target}"\n')
    before = {p: (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")}
    code, _, err = cli("gate", "--config", path)
    assert code == 2 and "[outputs] dir" in err and err.count("\n") == 1, err
    assert {p: (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")} == before
    empty = tmp_path / "empty"
    empty.mkdir()
    path.write_text(f'golden = "demo-smoke"\n[endpoint]\nbase_url = "{URL}"\nmodel = "m"\n'
                    f'[outputs]\ndir = "{empty}"\n')
    code, _, err = cli("gate", "--config", path, "--timeout", "2", "--info-deadline", "2")
    assert "[outputs] dir" not in err


# ------------------------------------------------------------------------------ real gates, every door, one suite

@pytest.fixture(scope="module")
def two_suites(tmp_path_factory):
    """A golden of two suites (smoke and replay), with probes, blessed and calibrated from the test server."""
    from verifier.cli import main

    tmp = tmp_path_factory.mktemp("two-suites")
    requests = tmp / "requests.jsonl"
    requests.write_text("".join(json.dumps({"messages": [{"role": "user", "content": f"What is {i} + {i + 1}?"}],
                                            "max_tokens": 8}) + "\n" for i in range(4)))
    with TestServer(Script(arithmetic)) as srv:
        for name in ("ref", "r2", "r3"):
            assert main(["run", "--suite", "smoke,replay", "--smoke", "--data", f"replay={requests}", "--model", "m",
                         "--quiet", "--mode", "chat,chat-stream", "--max-retries", "0", "--probes", "--base-url", srv.url,
                         "--out", str(tmp / name)]) == 0
    golden = tmp / "golden"
    assert main(["bless", str(tmp / "ref"), "--to", str(golden)]) == 0
    assert main(["calibrate", str(golden), "--runs", str(tmp / "r2"), str(tmp / "r3")]) == 0
    assert sorted(json.loads((golden / "golden.json").read_text())["suites"]) == ["replay", "smoke"]
    return golden


@pytest.fixture(scope="module")
def healthy():
    with TestServer(Script(arithmetic)) as srv:
        yield srv


def gated_only_smoke(run_dir: Path) -> None:
    doc = json.loads((run_dir / "comparison.json").read_text())
    assert doc["status"] == "pass" and doc["exit_code"] == 0, doc.get("reason")
    assert set(doc["suites"]) == {"smoke"}
    assert json.loads((run_dir / "run.json").read_text())["suites"] == ["smoke"] or \
        list(json.loads((run_dir / "run.json").read_text())["suites"]) == ["smoke"]


@pytest.mark.parametrize("golden_kind", ["two-suite", "demo-smoke"])
def test_one_suite_of_a_golden_from_every_door(golden_kind, two_suites, healthy, tmp_path, cli):
    import verifier.api

    golden = str(two_suites) if golden_kind == "two-suite" else "demo-smoke"
    common = ["--base-url", healthy.url, "--model", "m", "--max-retries", "0", "--quiet"]
    # CLI flags
    code, _, err = cli("gate", "--golden", golden, "--suite", "smoke", *common, "--out", tmp_path / "cli")
    assert code == 0, err
    gated_only_smoke(tmp_path / "cli")
    # a gate file
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "{golden}"\nsuites = ["smoke"]\n[endpoint]\nbase_url = "{healthy.url}"\nmodel = "m"\n'
                   f'max_retries = 0\n[outputs]\ndir = "{tmp_path / "file"}"\n')
    code, _, err = cli("gate", "--config", cfg, "--quiet")
    assert code == 0, err
    gated_only_smoke(tmp_path / "file")
    # a sweep's [gate] table
    sw = tmp_path / "sweep.toml"
    sw.write_text(f'golden = "{golden}"\n[gate]\nsuites = ["smoke"]\nmax_retries = 0\n'
                  '[perf]\nconcurrency = [1]\nprompt_tokens = [8]\noutput_tokens = 4\nrequests = 1\nrepeats = 1\nwarmup = 0\n'
                  f'[[config]]\nname = "a"\nbase_url = "{healthy.url}"\nmodel = "m"\n')
    code, out, err = cli("sweep", sw, "--out", tmp_path / "sweep", "--quiet")
    assert code == 0, (out, err)
    gated_only_smoke(tmp_path / "sweep" / "a" / "gate")
    # the API
    doc = verifier.api.gate(golden, base_url=healthy.url, model="m", suites=["smoke"], max_retries=0, out=tmp_path / "api")
    assert doc.status == "pass" and set(doc.suites) == {"smoke"}
    gated_only_smoke(tmp_path / "api")
    # the four doors ran the same requests
    sent = [json.loads((tmp_path / d / "run.json").read_text()) for d in ("cli", "file", "api")]
    sent.append(json.loads((tmp_path / "sweep" / "a" / "gate" / "run.json").read_text()))
    assert len({json.dumps([s["modes"], s["sampling"], s["extra_body"]], sort_keys=True) for s in sent}) == 1


def test_probes_false_in_a_gate_file_or_a_sweep_turns_probes_off(two_suites, healthy, tmp_path, cli):
    base = f'golden = "{two_suites}"\n'
    # unset: exactly the golden's probes
    code, _, err = cli("gate", "--golden", two_suites, "--base-url", healthy.url, "--model", "m", "--quiet",
                       "--out", tmp_path / "default")
    assert code == 0, err
    assert (tmp_path / "default" / "probes.json").exists()
    cfg = tmp_path / "gate.toml"
    cfg.write_text(base + f'[budgets]\nprobes = false\n[endpoint]\nbase_url = "{healthy.url}"\nmodel = "m"\n'
                   f'[outputs]\ndir = "{tmp_path / "file"}"\n')
    code, _, err = cli("gate", "--config", cfg, "--quiet")
    assert code == 0, err
    assert not (tmp_path / "file" / "probes.json").exists()
    assert json.loads((tmp_path / "file" / "comparison.json").read_text())["limited"]["probes_left_out"] is True
    sw = tmp_path / "sweep.toml"
    sw.write_text(base + '[gate]\nprobes = false\n'
                  '[perf]\nconcurrency = [1]\nprompt_tokens = [8]\noutput_tokens = 4\nrequests = 1\nrepeats = 1\nwarmup = 0\n'
                  f'[[config]]\nname = "a"\nbase_url = "{healthy.url}"\nmodel = "m"\n')
    code, out, err = cli("sweep", sw, "--out", tmp_path / "sweep", "--quiet")
    assert code == 0, (out, err)
    assert (tmp_path / "sweep" / "a" / "gate" / "comparison.json").exists()
    assert not (tmp_path / "sweep" / "a" / "gate" / "probes.json").exists()


def test_probes_false_on_a_golden_without_probes_is_no_limited_gate(healthy, tmp_path, cli):
    """Issue 50, low: `probes = false` on a golden that never had probes printed a "limited" line: nothing of the
    golden was left out, so the gate is whole."""
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "demo-smoke"\n[budgets]\nprobes = false\n[endpoint]\nbase_url = "{healthy.url}"\nmodel = "m"\n'
                   f'[outputs]\ndir = "{tmp_path / "file"}"\n')
    code, out, err = cli("gate", "--config", cfg)
    assert code == 0, out + err
    assert "limited" not in json.loads((tmp_path / "file" / "comparison.json").read_text())
    assert "limited" not in out + err


def test_a_gate_loads_its_golden_once(two_suites, healthy, tmp_path, cli, monkeypatch):
    import verifier.api
    from verifier.golden import store

    loads = []
    real = store.load

    def counting(path, *limit):
        loads.append(Path(path))
        return real(path, *limit)

    monkeypatch.setattr(store, "load", counting)
    code, _, err = cli("gate", "--golden", two_suites, "--suite", "smoke", "--base-url", healthy.url, "--model", "m",
                       "--quiet", "--out", tmp_path / "cli", "--sequential", "--looks", 2)
    assert code == 0, err
    assert len(loads) == 1 and (tmp_path / "cli" / "report.html").exists()
    loads.clear()
    verifier.api.gate(two_suites, base_url=healthy.url, model="m", out=tmp_path / "api")
    assert len(loads) == 1 and (tmp_path / "api" / "report.html").exists()
    loads.clear()  # a sweep loads it once for all its configurations
    sw = tmp_path / "sweep.toml"
    sw.write_text(f'golden = "{two_suites}"\n[gate]\nsuites = ["smoke"]\n'
                  '[perf]\nconcurrency = [1]\nprompt_tokens = [8]\noutput_tokens = 4\nrequests = 1\nrepeats = 1\nwarmup = 0\n'
                  + "".join(f'[[config]]\nname = "{n}"\nbase_url = "{healthy.url}"\nmodel = "m"\n' for n in ("a", "b")))
    code, out, err = cli("sweep", sw, "--out", tmp_path / "sweep", "--quiet")
    assert code == 0, (out, err)
    assert len(loads) == 1


@pytest.mark.parametrize("value", ["aB3dE5gH7jK9mN1pQ3sT5v", "s3cret-key-123"])
def test_a_key_like_value_is_never_echoed_by_any_door(value, tmp_path, cli, capsys):
    """A 22-character mixed token (taken for a variable name before) and a value that is no variable name: refused
    with one line naming the flag, the value never printed."""
    with pytest.raises(SystemExit) as stopped:
        cli("run", "--suite", "smoke", "--base-url", URL, "--model", "m", "--api-key-env", value, "--out", tmp_path / "o")
    stdout, err = capsys.readouterr()
    assert stopped.value.code == 2 and "--api-key-env" in err and value not in err + stdout, err
    path = tmp_path / "gate.toml"
    path.write_text(f'golden = "demo-smoke"\n[endpoint]\nbase_url = "{URL}"\nmodel = "m"\napi_key_env = "{value}"\n')
    code, stdout, err = cli("gate", "--config", path)
    assert code == 2 and "api_key_env" in err and value not in err + stdout, err


def test_the_401_hint_names_the_flag_not_the_variable(tmp_path, cli, monkeypatch):
    from verifier.testbed.server import Script, TestServer, arithmetic

    monkeypatch.setenv("MY_CANDIDATE_KEY", "k-123")
    with TestServer(Script(arithmetic, models_status=401)) as srv:
        code, out, err = cli("run", "--suite", "smoke", "--limit", "1", "--base-url", srv.url, "--model", "m",
                             "--api-key-env", "MY_CANDIDATE_KEY", "--out", tmp_path / "o")
    assert code == 2 and "the variable --api-key-env names" in err and "MY_CANDIDATE_KEY" not in err, err
