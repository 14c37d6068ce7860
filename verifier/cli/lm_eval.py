"""`verifier lm-eval --task T`: run an lm-eval generate_until task through the endpoint, or import its samples.

The flags live only here, so `--help` stays cheap; the handler builds an LmEvalSpec for suites.lm_eval_import.run.
"""

from __future__ import annotations

import argparse
import os

from .types import CommaList


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lm-eval", help="run an lm-eval generate_until task through the endpoint (or import its samples) into a run directory")
    add_arguments(p)
    p.set_defaults(fn=handle)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", "--tasks", dest="task", required=True, action=CommaList, help="comma-separated lm-eval task names or YAML paths (generate_until tasks)")
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"),
                   help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8080/v1 (default $OPENAI_BASE_URL)")
    p.add_argument("--model", default=os.environ.get("VERIFIER_MODEL"), help="model name sent in every request (default $VERIFIER_MODEL)")
    p.add_argument("--out", help="run directory to create (default OUTPUT_PATH/verifier-run with --output_path)")
    p.add_argument("--limit", type=float, help="first N docs per task (a fraction < 1 means that share)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight (lm-eval num_concurrent, default 8)")
    p.add_argument("--max-tokens", dest="max_tokens", type=int,
                   help="lm-eval max_gen_toks (default: lm-eval's, 256 unless the task sets it; too short for chain of thought)")
    p.add_argument("--num-fewshot", "--num_fewshot", dest="num_fewshot", type=int, help="override the task's few-shot count")
    p.add_argument("--model-args", "--model_args", dest="model_args", metavar="base_url=URL,model=M,...",
                   help="lm-eval's local-chat-completions model_args: base_url (with or without /chat/completions), model, num_concurrent, max_gen_toks")
    p.add_argument("--output-path", "--output_path", dest="output_path", metavar="PATH",
                   help="also write lm-eval's own results JSON here, exactly as lm-eval does")
    p.add_argument("--log-samples", "--log_samples", dest="log_samples", action="store_true",
                   help="with --output_path: also lm-eval's samples_<task>_<time>.jsonl per task")
    p.add_argument("--single-turn", action="store_true", help="few-shot examples in one user message (lm-eval without --fewshot_as_multiturn)")
    p.add_argument("--include-path", help="directory of extra lm-eval task YAMLs")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY", help="environment variable holding the API key (never written)")
    p.add_argument("--import-samples", metavar="JSONL", help="import an existing lm-eval samples_<task>_*.jsonl instead of running (one task)")
    p.add_argument("--quiet", action="store_true")


def handle(a: argparse.Namespace) -> int:
    import sys

    from suites import lm_eval_import
    from suites.lm_eval_files import LmEvalSpec
    from verifier.execution.scoring import summary_lines
    from .args import names

    spec = LmEvalSpec(names(a.task), out=a.out, base_url=a.base_url, model=a.model, limit=a.limit,
                      concurrency=a.concurrency, max_tokens=a.max_tokens, num_fewshot=a.num_fewshot, model_args=a.model_args,
                      output_path=a.output_path, log_samples=a.log_samples, single_turn=a.single_turn,
                      include_path=a.include_path, api_key_env=a.api_key_env, import_samples=a.import_samples)
    out, summary = lm_eval_import.run(spec)
    if not a.quiet:
        print(f"run: {out}", file=sys.stderr)
    print("\n".join(summary_lines(summary)))
    return 0
