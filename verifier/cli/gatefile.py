"""`verifier gate --config gate.toml`: a gate as a file to review in a pull request.

The file is read with the stdlib's tomllib and translated into the very flags `verifier gate` takes, so a
file and the equivalent command line build the same GateSpec (tests/test_gatefile.py checks the two give the
same comparison.json). Precedence: a flag given on the command line > the file > the environment > defaults.

    golden = "goldens/demo-smoke"
    suites = ["smoke"]                  # a subset of the golden's suites (default: all)
    modes = ["chat", "chat-stream"]     # a subset of the golden's modes (default: all)
    data = "data/"                      # when the golden's suites need a local dataset

    [endpoint]                          # or several [[endpoints]], each with a `name`: gated concurrently
    base_url = "http://127.0.0.1:8080/v1"
    model = "qwen0.5b"
    api_key_env = "CANDIDATE_API_KEY"   # the variable's name; keys and header values never go in the file
    concurrency = 8
    timeout = 600
    max_retries = 3

    [sampling]
    temperature = 0.0
    max_tokens = 512
    logprobs = 1
    extra_body = { chat_template_kwargs = { enable_thinking = false } }

    [budgets]
    infra = 0.02                        # infra error rate above which the run is `incomplete`
    allow_inconclusive = false
    sequential = false
    looks = 5
    probes = false

    [margins]                           # over the golden's calibrated margins; each needs its reason
    "smoke/accuracy" = { value = 0.05, reason = "release notes allow 5 points on arithmetic" }

    [outputs]
    dir = "runs/gate"                   # one endpoint: the run directory; several: one run directory each
    report = "runs/gate/report.html"
    junit = "runs/gate/junit.xml"
    markdown = "runs/gate/summary.md"
    matrix = "reports/matrix"           # several endpoints: matrix.html + matrix.md here
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from ..errors import UsageError

TOP = {"golden", "suites", "modes", "data", "endpoint", "endpoints", "sampling", "budgets", "margins", "outputs"}
ENDPOINT = {"name": None, "base_url": "base_url", "model": "model", "api_key_env": "api_key_env",
            "concurrency": "concurrency", "timeout": "timeout", "max_retries": "max_retries"}
SAMPLING = {"temperature": "temperature", "top_p": "top_p", "max_tokens": "max_tokens", "seed": "seed",
            "logprobs": "logprobs", "extra_body": "extra_body"}
BUDGETS = {"infra": "infra_budget", "allow_inconclusive": "allow_inconclusive", "sequential": "sequential",
           "looks": "looks", "probes": "probes"}
OUTPUTS = {"dir": "out", "report": "report", "junit": "junit", "markdown": "markdown", "matrix": "matrix"}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def read(path: str | Path) -> dict[str, Any]:
    """The TOML document; unreadable or invalid files are usage errors naming the file."""
    import tomllib

    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise UsageError(f"--config: cannot read {path}: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"--config {path}: not valid TOML: {e}") from None


def _check_keys(table: Any, known: set[str] | dict[str, Any], where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise UsageError(f"gate file: [{where}] must be a table")
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise UsageError(f"gate file: unknown key {where + '.' if where else ''}{unknown[0]}; known: {', '.join(sorted(known))}")
    return table


def _csv(value: Any, key: str) -> str:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise UsageError(f"gate file: {key} must be a list of names")
    return ",".join(value)


def _margins(table: Any) -> list[str]:
    """`[margins] "suite/metric" = {value, reason}` -> the `--margin KEY=VALUE:reason` strings."""
    out = []
    for key, m in _check_keys(table, set(table) if isinstance(table, dict) else set(), "margins").items():
        if not isinstance(m, dict) or set(m) != {"value", "reason"} or not isinstance(m["value"], (int, float)) \
                or isinstance(m["value"], bool) or not isinstance(m["reason"], str) or not m["reason"].strip():
            raise UsageError(f"gate file: margin {key!r} must be {{ value = NUMBER, reason = \"why\" }}")
        out.append(f"{key}={float(m['value']):.12f}".rstrip("0") + f":{m['reason'].strip()}")
    return out


def _section(doc: dict[str, Any], name: str, keys: dict[str, Any]) -> dict[str, Any]:
    """The flags one table sets, as {argparse dest: value in the form argparse would produce}."""
    table = _check_keys(doc.get(name, {}), keys, name)
    out: dict[str, Any] = {}
    for k, v in table.items():
        dest = keys[k]
        if dest == "extra_body":
            if not isinstance(v, dict):
                raise UsageError("gate file: sampling.extra_body must be a table")
            v = json.dumps(v)
        if dest is not None:
            out[dest] = v
    return out


def endpoint_flags(table: Any, where: str) -> dict[str, Any]:
    return _section({where: table}, where, ENDPOINT)


def translate(doc: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The gate file -> ({dest: value} for the shared flags, [{dest: value, "name": ...} per endpoint])."""
    from .gatefile_schema import problem

    why = problem(doc)  # every key's type and range first: a wrong type never reaches argparse or changes a meaning
    if why:
        raise UsageError(f"gate file: {why}")
    _check_keys(doc, TOP, "")
    flags: dict[str, Any] = {}
    if "golden" in doc:
        flags["golden"] = str(doc["golden"])
    if "data" in doc:
        flags["data"] = str(doc["data"])
    if "suites" in doc:
        flags["suite"] = _csv(doc["suites"], "suites")
    if "modes" in doc:
        flags["mode"] = _csv(doc["modes"], "modes")
    for name, keys in (("sampling", SAMPLING), ("budgets", BUDGETS), ("outputs", OUTPUTS)):
        flags.update(_section(doc, name, keys))
    if "margins" in doc:
        flags["margin"] = _margins(doc["margins"])
    if "endpoint" in doc and "endpoints" in doc:
        raise UsageError("gate file: give [endpoint] or [[endpoints]], not both")
    endpoints = []
    if "endpoint" in doc:
        endpoints = [endpoint_flags(doc["endpoint"], "endpoint")]
    elif "endpoints" in doc:
        tables = doc["endpoints"]
        if not isinstance(tables, list) or not tables:
            raise UsageError("gate file: [[endpoints]] must list at least one endpoint")
        names = []
        for t in tables:
            e = endpoint_flags(t, "endpoints")
            name = t.get("name") if isinstance(t, dict) else None
            if not isinstance(name, str) or not NAME.match(name):
                raise UsageError("gate file: every [[endpoints]] entry needs a `name` (letters, digits, _ . -)")
            names.append(name)
            endpoints.append({**e, "name": name})
        if len(set(names)) != len(names):
            raise UsageError("gate file: [[endpoints]] names must be unique")
    return flags, endpoints


def explicit_dests(ap: argparse.ArgumentParser, argv: list[str], command: str) -> set[str]:
    """The dests the user set on the command line for `command` (defaults do not count)."""
    sub = subparser(ap, command)
    saved = [(act, act.default, act.required) for act in sub._actions]
    try:
        for act in sub._actions:
            act.default, act.required = argparse.SUPPRESS, False
        ns, _ = ap.parse_known_args(argv)
    finally:
        for act, default, required in saved:
            act.default, act.required = default, required
    return set(vars(ns)) & {act.dest for act in sub._actions}


def apply(a: argparse.Namespace, flags: dict[str, Any], given: set[str], sub: argparse.ArgumentParser) -> argparse.Namespace:
    """A copy of `a` with the file's values wherever the command line did not set the flag, each converted
    by its flag's own type (so `timeout = 600` is the float that `--timeout 600` gives)."""
    types = {act.dest: act.type for act in sub._actions}
    merged = argparse.Namespace(**vars(a))
    for dest, value in flags.items():
        if dest in given:
            continue
        conv = types.get(dest)
        if conv is not None and value is not None and not isinstance(value, (bool, list, dict)):
            try:
                value = conv(value)
            except (TypeError, ValueError, argparse.ArgumentTypeError):  # the last from verifier.cli.types
                raise UsageError(f"gate file: {dest} = {value!r} is not a valid {getattr(conv, '__name__', 'value')}") from None
        setattr(merged, dest, value)
    return merged


def subparser(ap: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    return next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
