"""Every hint is true (issue #25): a flag named in any error or hint exists on the command that prints it.

Statically: every string in an error or hint anywhere in the source (UsageError, argparse errors, hub/suite errors,
hints=...) is collected with the AST. A flag in the message of a module that only one command reaches must exist
on that command; a shared module names flags only as hints (the CLI prints the ones the command has) or quoted
after `verifier CMD` in backticks, which must exist on CMD. At run time, VERIFIER_CHECK_HINTS (set for the whole
suite in conftest) fails any printed error line that names a flag its command lacks.
"""

import ast
import shutil
from pathlib import Path

import pytest

from verifier.cli import build_parser
from verifier.cli.parser import FLAG, foreign_flags, option_strings, own_flags, render, subparsers, untrue

ROOT = Path(__file__).resolve().parent.parent
ERRORS = {"UsageError", "HubUnavailable", "error", "hinted", "unavailable", "_usage", "_refuse", "ConfigError"}
# Modules reached by one command only: their messages may name that command's flags.
ONE_COMMAND = {"verifier/execution/resume.py": "run", "suites/lm_eval_files.py": "lm-eval", "suites/lm_eval_import.py": "lm-eval",
               "verifier/testbed/proxy.py": "proxy", "verifier/testbed/engines.py": "engine"}


def strings(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and isinstance(n.value, str):
            out.append(n.value)
    return out


def error_texts() -> list[tuple[str, str, str]]:
    """(module, 'message' or 'hint', text) for every string inside an error or hint constructor call."""
    out = []
    for path in sorted(list((ROOT / "verifier").rglob("*.py")) + list((ROOT / "suites").rglob("*.py"))):
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in ERRORS:
                continue
            hint_nodes = [k.value for k in node.keywords if k.arg == "hints"] + (node.args[1:] if name in ("hinted", "unavailable") else [])
            for n in node.args[:1] + ([node.args[0]] if False else []):
                out += [(rel, "message", s) for s in strings(n)]
            for n in hint_nodes:
                out += [(rel, "hint", s) for s in strings(n)]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # hint tuples assigned by name (WAY_OUT, TRANSPORT_HINTS)
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and ("hint" in t.id.lower() or "WAY_OUT" in t.id) for t in node.targets):
                out += [(rel, "hint", s) for s in strings(node.value)]
    return out


@pytest.fixture(scope="module")
def root():
    return build_parser()


def all_flags(root) -> set[str]:
    cmds = subparsers(root)
    return set().union(*(option_strings(p) | {f for q in subparsers(p).values() for f in option_strings(q)} for p in cmds.values()))


def test_the_collector_sees_the_messages_it_must():
    texts = error_texts()
    assert len(texts) > 100
    assert any("use --resume" in t for _, kind, t in texts if kind == "hint")
    assert any("--no-model-check" in t for _, kind, t in texts if kind == "hint")


def test_every_flag_in_an_error_or_hint_exists_where_it_says(root):
    cmds = subparsers(root)
    every = all_flags(root) | {"--help"}
    problems = []
    for module, kind, text in error_texts():
        for cmd, flag in foreign_flags(text):  # `verifier CMD --flag`: on CMD
            if cmd not in cmds or (flag not in option_strings(cmds[cmd]) and not any(flag in option_strings(q) for q in subparsers(cmds[cmd]).values())):
                problems.append((module, text, f"{flag} is not a flag of verifier {cmd}"))
        flags = own_flags(text)
        if kind == "hint":
            problems += [(module, text, f"{f} exists on no command") for f in flags if f not in every]
        elif module in ONE_COMMAND:
            p = cmds[ONE_COMMAND[module]]
            have = option_strings(p) | {f for q in subparsers(p).values() for f in option_strings(q)}
            problems += [(module, text, f"{f} is not a flag of verifier {ONE_COMMAND[module]}") for f in flags if f not in have]
        elif module.startswith("verifier/cli/") and not module.endswith(("/parser.py", "/args.py", "/main.py", "/gatefile.py", "/types.py")):
            cmd = Path(module).stem.replace("_", "-")
            p = cmds.get(cmd)
            if p is not None:
                have = option_strings(p) | {f for q in subparsers(p).values() for f in option_strings(q)}
                problems += [(module, text, f"{f} is not a flag of verifier {cmd}") for f in flags if f not in have]
        else:  # shared: only flags every command that builds an endpoint has, named as the user's own input
            problems += [(module, text, f"{f} exists on no command") for f in flags if f not in every]
    assert not problems, "\n".join(map(str, problems))


def test_hints_are_filtered_by_the_command_that_prints_them(root):
    cmds = subparsers(root)
    hints = [t for _, kind, t in error_texts() if kind == "hint"]
    for name, p in cmds.items():
        line = render("x", hints, p)
        assert not untrue(line, p, root), (name, untrue(line, p, root))
    assert "--resume" in render("x", ("use --resume R",), cmds["run"]) and "--resume" not in render("x", ("use --resume R",), cmds["gate"])


def test_the_issues_false_hints_are_gone(server, tmp_path, cli):
    # gate --out EXISTING: gate has no --resume
    assert cli("run", "--suite", "smoke", "--smoke", "--limit", "2", "--base-url", server.url, "--model", "m", "--out", tmp_path / "r", "--quiet")[0] == 0
    code, _, err = cli("gate", "--golden", "demo-smoke", "--base-url", server.url, "--model", "m", "--out", tmp_path / "r", "--quiet")
    assert code == 2 and "already holds a run" in err and "--resume" not in err and "another --out" in err
    code, _, err = cli("run", "--suite", "smoke", "--smoke", "--base-url", server.url, "--model", "m", "--out", tmp_path / "r", "--quiet")
    assert code == 2 and f"use --resume {tmp_path / 'r'}" in err
    # a second calibrate: it has --out-prefix, not --out or --resume
    g = tmp_path / "g"
    shutil.copytree(ROOT / "goldens" / "demo-smoke", g)
    args = ("calibrate", g, "--base-url", server.url, "--model", "m", "-k", "2", "--out-prefix", tmp_path / "cal", "--quiet")
    assert cli(*args)[0] == 0
    code, _, err = cli(*args)
    assert code == 2 and "another --out-prefix" in err and "--resume" not in err and "--out " not in err
    # a sequential gate that stops early never mentions --allow-subset
    code, out, err = cli("gate", "--golden", "demo-smoke", "--base-url", server.url, "--model", "m", "--sequential",
                         "--out", tmp_path / "seq", "--quiet")
    assert "--allow-subset" not in out + err


def test_usage_errors_are_one_line_with_did_you_mean(cli, capsys):
    cases = [(["gate", "--conc", "4"], "did you mean --concurrency?"),
             (["gat"], "did you mean gate?"),
             (["run", "--suite", "smok", "--smoke", "--base-url", "http://127.0.0.1:1/v1", "--model", "m"], "did you mean smoke?"),
             (["testbed", "serve", "--responder", "arithmetc"], "did you mean arithmetic?"),
             (["compare"], "required")]
    for argv, words in cases:
        try:
            code = cli(*argv)[0]
            err = ""
        except SystemExit as e:
            code, err = e.code, capsys.readouterr().err
        if not err:
            code, _, err = code, None, capsys.readouterr().err or cli(*argv)[2]
        assert code == 2 and err.count("\n") == 1 and words in err and "usage:" not in err, (argv, err)
    # no abbreviations: a prefix is an error, not a silent --concurrency
    for p in [build_parser()] + list(subparsers(build_parser()).values()):
        assert p.allow_abbrev is False
