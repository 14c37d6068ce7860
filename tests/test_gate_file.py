"""`verifier gate --config gate.toml`: the same gate as the equivalent flags; flags override the file."""

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "goldens" / "demo-smoke"


def normalized(run_dir: Path) -> dict:
    """comparison.json without what differs between two runs of the same gate: paths, ids, times."""
    doc = json.loads((run_dir / "comparison.json").read_text())
    doc.pop("run")
    doc["golden"].pop("path")
    return doc


GATE_TOML = """
golden = "{golden}"
suites = ["smoke"]
modes = ["chat"]

[endpoint]
base_url = "{url}"
model = "m"
concurrency = 4
timeout = 60
max_retries = 0

[sampling]
temperature = 0.0
max_tokens = 16
extra_body = {{ x_note = "from the file" }}

[budgets]
infra = 0.05
allow_inconclusive = true

[margins]
"smoke/accuracy" = {{ value = 0.1, reason = "ten points on arithmetic, reviewed in PR 12" }}

[outputs]
dir = "{out}"
"""


def test_gate_file_equals_the_equivalent_flags(server, tmp_path, cli):
    code_flags, _, err = cli("gate", "--golden", DEMO, "--suite", "smoke", "--mode", "chat", "--base-url", server.url,
                             "--model", "m", "--concurrency", 4, "--timeout", 60, "--max-retries", 0, "--temperature", 0,
                             "--max-tokens", 16, "--extra-body", '{"x_note": "from the file"}', "--infra-budget", 0.05,
                             "--allow-inconclusive", "--margin", "smoke/accuracy=0.1:ten points on arithmetic, reviewed in PR 12",
                             "--out", tmp_path / "flags", "--quiet")
    assert code_flags == 0, err
    cfg = tmp_path / "gate.toml"
    cfg.write_text(GATE_TOML.format(golden=DEMO, url=server.url, out=tmp_path / "file"))
    code_file, out, err = cli("gate", "--config", cfg, "--quiet")
    assert code_file == code_flags, err
    a, b = normalized(tmp_path / "flags"), normalized(tmp_path / "file")
    assert a == b
    assert {"source": "gate", "reason": "ten points on arithmetic, reviewed in PR 12", "margins": 1} in a["golden"]["margins_provenance"]["sources"]
    assert set(a["suites"]) == {"smoke"}
    # The same requests went out: modes narrowed to chat, sampling and extra body from the file.
    runs = [json.loads((tmp_path / d / "run.json").read_text()) for d in ("flags", "file")]
    assert runs[0]["modes"] == runs[1]["modes"] == ["chat"]
    assert runs[0]["sampling"] == runs[1]["sampling"] and runs[0]["extra_body"] == runs[1]["extra_body"] == {"x_note": "from the file"}
    for d in ("flags", "file"):
        assert (tmp_path / d / "report.html").exists() and (tmp_path / d / "junit.xml").exists()
        # The report joins the run with the narrowed golden: chat rows only, no golden-only chat-stream rows.
        csv_rows = (tmp_path / d / "samples.csv").read_text().splitlines()[1:]
        assert len(csv_rows) == 20 and not any("chat-stream" in r for r in csv_rows)


def test_flags_override_the_file_and_the_file_overrides_the_environment(server, tmp_path, cli, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # would fail: the file's URL must win
    monkeypatch.setenv("VERIFIER_MODEL", "env-model")
    cfg = tmp_path / "gate.toml"
    cfg.write_text(GATE_TOML.format(golden=DEMO, url=server.url, out=tmp_path / "file"))
    code, _, err = cli("gate", "--config", cfg, "--model", "flag-model", "--out", tmp_path / "flag-out", "--quiet")
    assert code == 0, err
    hdr = json.loads((tmp_path / "flag-out" / "run.json").read_text())
    assert hdr["endpoint"]["model"] == "flag-model" and not (tmp_path / "file").exists()
    # from the file (the samples' requests: the teacher-forcing pass that follows asks for one token)
    assert [r["max_tokens"] for r in server.script.requests if r["max_tokens"] != 1][-1] == 16


@pytest.mark.parametrize("text,needle", [
    ('golden = "g"\nbogus = 1\n', "unknown key bogus"),
    ('golden = "g"\n[endpoint]\nbase_url = "u"\napi_key = "sk-x"\n', "unknown key endpoint.api_key"),
    ('golden = "g"\n[margins]\n"smoke/accuracy" = { value = 0.1 }\n', "reason"),
    ('golden = [\n', "not valid TOML"),
    ('golden = "g"\n[[endpoints]]\nbase_url = "u"\n', "needs a `name`"),
    ('[endpoint]\nbase_url = "u"\nmodel = "m"\n', "--golden"),
])
def test_bad_gate_files_are_usage_errors(tmp_path, cli, text, needle):
    cfg = tmp_path / "gate.toml"
    cfg.write_text(text)
    code, _, err = cli("gate", "--config", cfg)
    assert code == 2 and needle in err and len(err.strip().splitlines()) == 1, err


def test_gate_narrowing_rejects_what_the_golden_lacks(server, tmp_path, cli):
    code, _, err = cli("gate", "--golden", DEMO, "--suite", "gsm8k", "--base-url", server.url, "--model", "m", "--quiet",
                       "--out", tmp_path / "x")
    assert code == 2 and "no suite 'gsm8k'" in err
    code, _, err = cli("gate", "--golden", DEMO, "--margin", "smoke/nope=0.1:why", "--base-url", server.url, "--model", "m",
                       "--quiet", "--out", tmp_path / "y")
    assert code == 2 and "no margin 'smoke/nope'" in err


def test_several_endpoints_take_flags_over_their_own_values(server, tmp_path, cli):
    """A flag on the command line beats each [[endpoints]] entry; entries' numbers get their flags' types."""
    cfg = tmp_path / "gate.toml"
    cfg.write_text(f'golden = "{DEMO}"\n[outputs]\ndir = "{tmp_path / "runs"}"\n'
                   f'[[endpoints]]\nname = "a"\nbase_url = "{server.url}"\nmodel = "ma"\ntimeout = 60\n'
                   f'[[endpoints]]\nname = "b"\nbase_url = "{server.url}"\nmodel = "mb"\n')
    code, out, err = cli("gate", "--config", cfg, "--model", "flag-model")
    assert code == 0, err
    for name in ("a", "b"):
        assert json.loads((tmp_path / "runs" / name / "run.json").read_text())["endpoint"]["model"] == "flag-model"
    assert (tmp_path / "runs" / "matrix" / "matrix.html").exists() and "| a | smoke |" in out


def test_the_docs_gate_files_are_valid():
    import re
    import tomllib

    from verifier.cli import gatefile

    text = (ROOT / "docs" / "ci.md").read_text(encoding="utf-8")
    blocks = [re.split(rf"^#+ {title}$", text, maxsplit=1, flags=re.M)[1] for title in ("Gate files", "A vendor matrix")]
    for block in blocks:
        doc = tomllib.loads(re.search(r"```toml\n(.*?)```", block, re.S).group(1))
        shared, endpoints = gatefile.options(doc, ROOT / "gate.toml")
        assert shared.golden.startswith("goldens/") and (ROOT / shared.golden / "golden.json").exists()
        assert endpoints and all(e.base_url and e.model for _, e in endpoints)


@pytest.mark.parametrize("text,key", [
    # switches take booleans only: a string or a number never turns an option on (or off)
    ('[budgets]\nallow_inconclusive = "false"\n', "budgets.allow_inconclusive"),
    ('[budgets]\nsequential = "false"\n', "budgets.sequential"),
    ('[budgets]\nprobes = "no"\n', "budgets.probes"),
    ('[budgets]\nprobes = 1\n', "budgets.probes"),
    # a fraction: a boolean is not a budget, and neither is 2
    ('[budgets]\ninfra = true\n', "budgets.infra"),
    ('[budgets]\ninfra = 2.0\n', "budgets.infra"),
    # integers and numbers, with their ranges
    ('[budgets]\nlooks = 0\n', "budgets.looks"),
    ('[endpoint]\ntimeout = [1]\n', "endpoint.timeout"),
    ('[endpoint]\ntimeout = -1\n', "endpoint.timeout"),
    ('[endpoint]\nconcurrency = "8"\n', "endpoint.concurrency"),
    ('[endpoint]\nmax_retries = 1.5\n', "endpoint.max_retries"),
    ('[sampling]\ntemperature = "0"\n', "sampling.temperature"),
    ('[sampling]\ntop_p = 0\n', "sampling.top_p"),
    ('[sampling]\nmax_tokens = 0\n', "sampling.max_tokens"),
    ('[sampling]\nlogprobs = true\n', "sampling.logprobs"),
    ('[sampling]\nextra_body = "{}"\n', "sampling.extra_body"),
    # strings and lists of names
    ('golden = 1\n', "golden"),
    ('suites = [1]\n', "suites"),
    ('modes = []\n', "modes"),
    ('[outputs]\njunit = false\n', "outputs.junit"),
    ('[endpoint]\napi_key_env = "sk-not-a-name"\n', "endpoint.api_key_env"),
    # tables and margins
    ('sampling = 1\n', "sampling"),
    ('[margins]\n"smoke/accuracy" = { value = "0.1", reason = "why" }\n', "margins.smoke/accuracy.value"),
    ('[budgets]\nallow_incnclusive = true\n', "unknown key budgets.allow_incnclusive"),
])
def test_a_wrong_type_in_a_gate_file_exits_2_naming_the_key(tmp_path, cli, text, key):
    """Each option type of the gate-file schema: exit 2, one line naming the key, no request sent."""
    cfg = tmp_path / "gate.toml"
    prefix = "" if text.startswith("golden") else 'golden = "goldens/demo-smoke"\n'
    cfg.write_text(prefix + text)
    code, _, err = cli("gate", "--config", cfg, "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    assert code == 2 and key in err and len(err.strip().splitlines()) == 1, err


def test_the_gate_file_schema_is_versioned_and_knows_every_key():
    from verifier.cli import gatefile, gatefile_schema

    props = gatefile_schema.GATE["properties"]
    assert gatefile_schema.GATE["$id"].endswith(f"/{gatefile_schema.SCHEMA_VERSION}")
    assert set(props) == gatefile.TOP
    # Every key the schema admits is read into the options: leaving any one out changes them.
    full = {"golden": "g", "suites": ["s"], "modes": ["chat"], "limit": 2, "data": "d",
            "sampling": {"temperature": 0.5, "top_p": 0.9, "max_tokens": 7, "seed": 3, "logprobs": 2, "extra_body": {"x": 1}},
            "budgets": {"infra": 0.1, "allow_inconclusive": True, "sequential": True, "looks": 3, "probes": False,
                        "teacher_forcing": "off", "forced_positions": 2, "resend": 2},
            "margins": {"s/accuracy": {"value": 0.1, "reason": "why"}},
            "outputs": {"dir": "o", "report": "r.html", "junit": "j.xml", "markdown": "m.md", "matrix": "mx"},
            "endpoint": {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key_env": "K", "concurrency": 2,
                         "timeout": 5, "max_retries": 1, "serving_adapter": "tool-call-prefill"}}
    for table in ("sampling", "budgets", "outputs", "endpoint"):
        assert set(props[table]["properties"]) - {"name"} == set(full[table]), table
    assert gatefile_schema.problem(full) is None
    whole = gatefile.options(full, ROOT / "gate.toml")
    for key in full:
        for sub in (full[key] if isinstance(full[key], dict) and key != "margins" else [None]):
            doc = json.loads(json.dumps(full))
            if sub is None:
                del doc[key]
            else:
                del doc[key][sub]
            assert gatefile.options(doc, ROOT / "gate.toml") != whole, (key, sub)
    assert gatefile_schema.problem({"golden": "g", "budgets": {"allow_inconclusive": False, "infra": 0.05}}) is None


def test_the_gate_files_typed_tables_are_the_schemas_keys():
    """GateFile is read once at the door: each table's fields are exactly its schema keys, so a key added to the
    schema without a field (or a field the schema never admits) fails here, not silently at run time."""
    from dataclasses import fields

    from verifier.cli import gatefile, gatefile_schema

    props = gatefile_schema.GATE["properties"]
    assert {f.name for f in fields(gatefile.GateFile)} == set(props)
    for table, cls in (("endpoint", gatefile.EndpointTable), ("sampling", gatefile.SamplingTable),
                       ("budgets", gatefile.BudgetsTable), ("outputs", gatefile.OutputsTable)):
        assert {f.name for f in fields(cls)} == set(props[table]["properties"]), table
    assert set(props["endpoints"]["items"]["properties"]) == {f.name for f in fields(gatefile.EndpointTable)}
    f = gatefile.gate_file({"golden": "g", "suites": ["a", "b"], "modes": "chat", "budgets": {"probes": False},
                            "sampling": {"extra_body": {}}, "endpoints": [{"name": "x", "timeout": 5}]})
    assert f.suites == ("a", "b") and f.modes == "chat" and f.budgets.probes is False and f.endpoint is None
    assert f.sampling.extra_body == {} and f.endpoints == (gatefile.EndpointTable(name="x", timeout=5),)
    shared, endpoints = f.shared_options(), f.endpoint_options()
    assert shared.probes is not None and shared.probes.value == "off" and shared.extra_body == {} and shared.modes == ("chat",)
    assert [(n, e.timeout_s) for n, e in endpoints] == [("x", 5.0)]


def test_a_data_path_pointing_nowhere_is_refused_before_anything_is_sent(server, tmp_path, cli):
    """smoke reads no dataset: `data = "data/"` pointing nowhere was accepted without a word."""
    path = tmp_path / "gate.toml"
    path.write_text(f'golden = "demo-smoke"\ndata = "{tmp_path / "no-such-data"}"\n[endpoint]\nbase_url = "{server.url}"\n'
                    f'model = "m"\n[outputs]\ndir = "{tmp_path / "g"}"\n')
    code, out, err = cli("gate", "--config", path)
    assert code == 2 and "no-such-data: no such file or directory" in err and err.count("\n") == 1, err
    assert not server.script.requests
