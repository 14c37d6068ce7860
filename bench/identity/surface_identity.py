"""Byte identity on every wire mode: bench/identity/byte_identity.py's shipped goldens speak chat and chat-stream only, so
this builds goldens on all seven modes (chat, chat-stream, completions, responses, responses-stream, messages,
messages-stream) against the scripted test server, with the probes, and gates against them healthy and behind
faults, on single-turn suites (bfcl, gsm8k, structured: tool calls, answers, JSON) and on the multi-turn suite
(history replay). Hashes comparison.json, verdicts.jsonl, summary.json, probes.json, golden.json and every request
body sent (responses.jsonl `request`), normalized as byte_identity.py does.

    python bench/identity/surface_identity.py snapshot OUT.json [--checkout DIR] [--keep DIR]
    python bench/identity/byte_identity.py diff A.json B.json

The responders are the tests' own (tests/test_surfaces_gate.py `oracle`, tests/test_suite_multiturn.py `kimi_like`),
read from the checkout under test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHECKOUT = HERE.parents[1]
BYTE_IDENTITY = (HERE, HERE.parent)  # bench/identity/byte_identity.py, wherever it lives (bench/ now, bench/identity/ later)
ALL = "chat,chat-stream,completions,responses,responses-stream,messages,messages-stream"
SURFACES_ONLY = "chat,responses,messages,chat-stream,responses-stream,messages-stream"
SETS = {
    # name: (responder, suites, modes, extra run flags, [(scenario, faults, surfaces)])
    "single": ("oracle", "bfcl,gsm8k,structured", ALL, ["--smoke", "--probes"],
               [("healthy", [], None), ("answer_in_reasoning", ["answer_in_reasoning"], None),
                ("usage_dropped", ["usage_dropped"], None), ("finish_reason_wrong", ["finish_reason_wrong"], None),
                ("tool_args_invalid_json", ["tool_args_invalid_json"], None),
                ("messages_only_usage_dropped", ["usage_dropped"], {"messages"}),
                ("responses_only_finish_reason_wrong", ["finish_reason_wrong"], {"responses"})]),
    "multiturn": ("kimi_like", "multiturn", SURFACES_ONLY, [],
                  [("healthy", [], None), ("tool_call_ids_rewritten", ["tool_call_ids_rewritten"], {"messages"}),
                   ("drop_reasoning_history", ["DROP_REASONING_HISTORY"], {"responses"})]),
}
FILES = ("comparison.json", "verdicts.jsonl", "summary.json", "probes.json")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["snapshot"])
    ap.add_argument("out")
    ap.add_argument("--checkout")
    ap.add_argument("--keep")
    a = ap.parse_args()
    root = Path(a.checkout).resolve() if a.checkout else CHECKOUT
    sys.path[:0] = [str(root), str(root / "tests"), *map(str, BYTE_IDENTITY)]
    import verifier
    from byte_identity import Normalizer, cli, sha
    from verifier.testbed.proxy import Proxy
    from verifier.testbed.server import Script, TestServer
    import test_multiturn
    import test_surfaces_gate
    from verifier.testbed.surface_faults import DROP_REASONING_HISTORY

    print("verifier under test:", Path(verifier.__file__).parent, flush=True)
    responders = {"oracle": test_surfaces_gate.oracle(), "kimi_like": test_multiturn.kimi_like}
    work = Path(a.keep or tempfile.mkdtemp(prefix="surface-identity-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    norm = Normalizer({str(work): "<work>", str(root): "<checkout>"})
    entries: dict[str, str] = {}

    def put(key: str, text: str) -> None:
        entries[key] = sha(text)
        if a.keep:
            dest = work / "normalized" / key
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")

    def record(key: str, run_dir: Path, output: str, code: int) -> None:
        put(f"{key}/exit", f"{code}\n")
        put(f"{key}/terminal.txt", norm.text(output))
        for f in FILES:
            p = run_dir / f
            put(f"{key}/{f}", norm.document(p) if p.exists() else "<absent>\n")
        rows = [json.loads(x) for x in (run_dir / "responses.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()] \
            if (run_dir / "responses.jsonl").exists() else []
        sent = sorted(json.dumps(norm.value({k: r.get(k) for k in ("suite", "sample_id", "epoch", "mode", "request", "status")}),
                                 sort_keys=True, ensure_ascii=False) for r in rows)
        put(f"{key}/requests.jsonl", "\n".join(sent) + "\n")

    for name, (responder, suites, modes, flags, scenarios) in SETS.items():
        d = work / name
        with TestServer(Script(responders[responder])) as srv:
            for r in ("ref", "r2", "r3"):
                code, out = cli("run", "--suite", suites, "--base-url", srv.url, "--model", "m", "--out", d / r, "--quiet",
                                "--mode", modes, "--max-retries", "0", "--concurrency", "1", *flags)
                record(f"{name}/{r}/run", d / r, out, code)
        code, out = cli("bless", d / "ref", "--to", d / "golden")
        put(f"{name}/bless/exit", f"{code}\n")
        code, out = cli("calibrate", d / "golden", "--runs", d / "r2", d / "r3")
        put(f"{name}/calibrate/exit", f"{code}\n")
        put(f"{name}/golden.json", norm.document(d / "golden" / "golden.json"))
        for scen, faults, surfaces in scenarios:
            specs = [(DROP_REASONING_HISTORY, 1.0) if f == "DROP_REASONING_HISTORY" else f for f in faults]
            g = d / f"gate-{scen}"
            with TestServer(Script(responders[responder])) as srv:
                if specs:
                    with Proxy(srv.url, specs, seed=0, surfaces=surfaces) as px:
                        code, out = cli("gate", "--golden", d / "golden", "--base-url", px.url, "--model", "m", "--out", g,
                                        "--quiet", "--max-retries", "0", "--concurrency", "1")
                else:
                    code, out = cli("gate", "--golden", d / "golden", "--base-url", srv.url, "--model", "m", "--out", g,
                                    "--quiet", "--max-retries", "0", "--concurrency", "1")
            record(f"{name}/{scen}/gate", g, out, code)
            c1, o1 = cli("score", g)
            c2, o2 = cli("compare", g, "--golden", d / "golden")
            record(f"{name}/{scen}/rescore", g, o1 + o2, c2)
            print(f"{name}/{scen}: gate exit {code}, compare exit {c2}", flush=True)
    Path(a.out).write_text(json.dumps({"checkout": str(root), "files": entries, "exit_codes": {}}, indent=1, sort_keys=True), encoding="utf-8")
    print(f"{len(entries)} files hashed -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
