"""An example verifier suite plugin: sums of two numbers, exact match. The whole suite is this file."""

from __future__ import annotations

import json
import random
import re

from verifier.types import Judgement, Parsed, Sample, Suite


def load(data: str | None = None, smoke: bool = False) -> list[Sample]:
    """Samples with stable ids: from a JSONL file of {"a": .., "b": ..} (--data), else 50 seeded pairs."""
    if data:
        with open(data, encoding="utf-8") as f:
            pairs = [(r["a"], r["b"]) for r in map(json.loads, f) if r]
    else:
        rng = random.Random(15)
        pairs = [(rng.randint(0, 999), rng.randint(0, 999)) for _ in range(50)]
    pairs = pairs[:10] if smoke else pairs
    return [Sample(id=f"sums/{i}", messages=[{"role": "user", "content": f"What is {a} + {b}? Reply with the number only."}],
                   target=str(a + b)) for i, (a, b) in enumerate(pairs)]


def request(sample: Sample) -> dict[str, object]:
    """The body without model and sampling (the runner adds them)."""
    return {"messages": sample.messages}


def score(sample: Sample, parsed: Parsed) -> Judgement:
    """Pure: the last integer in the reply against the target."""
    found = re.findall(r"-?\d+", parsed.content or "")
    answer = found[-1] if found else None
    ok = answer == sample.target
    return Judgement(score=float(ok), answer=answer, metrics={"accuracy": float(ok)},
                     reason="correct" if ok else ("no_answer" if answer is None else "wrong_answer"))


SUITE = Suite(name="sums", version="1", load=load, request=request, score=score,
              description="example plugin: sums of two numbers, exact match", defaults={"max_tokens": 16})
