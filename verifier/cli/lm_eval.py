"""`verifier lm-eval --task T`: run an lm-eval generate_until task through the endpoint, or import its samples.

Flags declared here so `--help` stays cheap; tests/test_cli.py checks they match suites.lm_eval_task's.
"""

from __future__ import annotations

import argparse
import os


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("lm-eval", help="run an lm-eval generate_until task through the endpoint (or import its samples) into a run directory")
    add_arguments(p)
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", required=True, help="comma-separated lm-eval task names (generate_until tasks)")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1 (default $OPENAI_BASE_URL)")
    p.add_argument("--model", default=os.environ.get("VERIFIER_MODEL"), help="model name sent in every request (default $VERIFIER_MODEL)")
    p.add_argument("--out", required=True, help="run directory to create")
    p.add_argument("--limit", type=float, help="first N docs per task (a fraction < 1 means that share)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (lm-eval num_concurrent, default 8)")
    p.add_argument("--max-tokens", dest="max_tokens", type=int,
                   help="lm-eval max_gen_toks (default: lm-eval's, 256 unless the task sets it; too short for chain of thought)")
    p.add_argument("--num-fewshot", type=int, help="override the task's few-shot count")
    p.add_argument("--single-turn", action="store_true", help="few-shot examples in one user message (lm-eval without --fewshot_as_multiturn)")
    p.add_argument("--include-path", help="directory of extra lm-eval task YAMLs")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key (never written)")
    p.add_argument("--import-samples", metavar="JSONL", help="import an existing lm-eval samples_<task>_*.jsonl instead of running (one task)")
    p.add_argument("--quiet", action="store_true")


def handle(a: argparse.Namespace) -> int:
    from suites import lm_eval_import as lm_eval_task

    return lm_eval_task.run(a)
