"""A tiny arithmetic suite that proves the spine end to end; the embedded default for `verifier demo`."""

from __future__ import annotations

import re
from typing import Any

from verifier.types import Judgement, Parsed, Sample, Suite

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

# (a, b): fixed, so ids and answers never change.
PAIRS = [(3, 4), (12, 30), (7, 8), (41, 1), (25, 17), (9, 99), (100, 23), (64, 36), (13, 13), (58, 7),
         (2, 2), (81, 19), (33, 44), (15, 6), (70, 5), (11, 89), (46, 54), (27, 38), (90, 9), (123, 321)]


def question(a: int, b: int) -> str:
    return f"What is {a} + {b}? Reply with just the number."


def load(data: str | None = None, smoke: bool = True) -> list[Sample]:
    return [
        Sample(id=f"add-{i:02d}", messages=[{"role": "user", "content": question(a, b)}], target=str(a + b))
        for i, (a, b) in enumerate(PAIRS)
    ]


def request(sample: Sample) -> dict[str, Any]:
    return {"messages": sample.messages}


def score(sample: Sample, parsed: Parsed) -> Judgement:
    numbers = NUMBER.findall(parsed.content or "")
    answer = numbers[-1] if numbers else None
    ok = answer is not None and float(answer) == float(sample.target)
    return Judgement(
        score=float(ok), answer=answer, reason="correct" if ok else ("no_answer" if answer is None else "wrong_answer"),
        metrics={"accuracy": float(ok)},
    )


SUITE = Suite(name="smoke", version="1", load=load, request=request, score=score,
              description="20 two-number additions; proves the spine", defaults={"max_tokens": 32})
