"""Do the issue-47 signals fire between healthy real-engine records? Every ordered pair of shipped goldens that share
samples (llama.cpp and vLLM, Qwen2.5 0.5B, Gemma 3 270M, the test server), one taken as the golden and the other as
the candidate, and each golden against itself: how often tool_args_values_changed, stream_tool_args_changed,
tool_calls_as_text and repeats_disagree fire, of the samples they measure.

    python bench/release/serving_signals_offline.py

Offline (no engine): reads the goldens' recorded observations. Asserts nothing. Between different engines and models
a frontend signal may rightly fire where the serving differs (a golden recorded behind a call-forcing adapter against
an endpoint without it: the calls come back as text); where the two sides differ only by numerics or batch shape,
an event is a false alarm.
"""

from __future__ import annotations

import itertools
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from verifier.attribution import signals  # noqa: E402
from verifier.golden import store  # noqa: E402
from verifier.types import Observation  # noqa: E402

NEW = ("tool_args_values_changed", "stream_tool_args_changed", "tool_calls_as_text", "repeats_disagree")
GOLDENS = Path(__file__).resolve().parents[2] / "verifier" / "goldens"


def rows(name: str) -> dict[tuple[str, str], list[Observation]]:
    by: dict[tuple[str, str], list[Observation]] = defaultdict(list)
    for o in store.load(GOLDENS / name).observations:
        by[(o.suite, o.sample_id)].append(o)
    return by


def rates(g: dict[tuple[str, str], list[Observation]], c: dict[tuple[str, str], list[Observation]]) -> dict[str, tuple[int, int]]:
    out = {}
    for name in NEW:
        measure = signals.by_name()[name].measure
        answers = [measure(g[k], c[k]) for k in set(g) & set(c)]
        out[name] = (sum(bool(a) for a in answers if a is not None), sum(a is not None for a in answers))
    return out


def main() -> None:
    names = sorted(p.name for p in GOLDENS.iterdir() if (p / "golden.json").is_file())
    data = {n: rows(n) for n in names}
    print("| golden | candidate | shared samples | " + " | ".join(NEW) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in NEW) + " |")
    for a, b in [(n, n) for n in names] + list(itertools.permutations(names, 2)):
        shared = set(data[a]) & set(data[b])
        if not shared:
            continue
        r = rates(data[a], data[b])
        if a != b and not any(n for n, _ in r.values()):
            continue  # pairs where nothing fired are summed below
        print(f"| {a} | {'(itself)' if a == b else b} | {len(shared)} | " + " | ".join(f"{x}/{n}" for x, n in r.values()) + " |")
    quiet = sum(1 for a, b in itertools.permutations(names, 2) if set(data[a]) & set(data[b])
                and not any(x for x, _ in rates(data[a], data[b]).values()))
    print(f"\nother ordered pairs sharing samples, where none of the four fired: {quiet}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/: record
    from record import recorded  # noqa: E402

    with recorded("serving_signals_offline"):  # the figures go to bench/results/serving_signals_offline.md
        main()
