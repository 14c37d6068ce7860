"""verifier's BFCL scorer against bfcl-eval's own checker: 0 disagreements on the parity table's candidates.

tests/bfcl_parity_table.json holds, per BFCL item, bfcl-eval's verdict on each model-free candidate that
scripts/bfcl_parity_table.py generates (FC mode, an OpenAI-style model, bfcl-eval pinned there). This test rebuilds the
same candidates from the shared BFCL data, scores each with `suites.bfcl.score` and compares. No network, no bfcl-eval
at test time. A failure lists the item, the candidate kind, the candidate and both verdicts.
"""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from conftest import SHARED
from suites import bfcl
from suites import bfcl_multi_turn as mt
from verifier.types import Exchange, Parsed

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import bfcl_parity_table as parity  # noqa: E402

TABLE = json.loads(parity.TABLE.read_text())

# The kinds the issue names, each of which the table must exercise (and which must come out both right and wrong
# somewhere where both are possible).
REQUIRED_KINDS = {
    "exact", "alternative", "omit_optional", "wrong_type", "nested_element_type", "enum_other", "enum_case", "case_upper",
    "key_order", "list_order", "parallel_reversed", "dict_drop_key", "list_dict_drop_key", "args_bad_json", "args_object",
    "args_empty_string", "dotted_name", "underscore_as_dot", "args_null", "args_list", "call_undeclared_name",
    "two_calls_one_bad", "no_call_text", "int_for_float", "float_as_int",
}


def _score(category: str, entry: dict, answer: dict | None, cand: parity.Candidate) -> bool:
    sample = bfcl.make_sample(category, entry, answer)
    _, tool_calls, content = cand
    parsed = Parsed(content=content, reasoning=None, tool_calls=tool_calls,
                    finish_reason="tool_calls" if tool_calls else "stop", usage={})
    return bfcl.score(sample, parsed).score == 1.0


@pytest.fixture(scope="module")
def rows():
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set VERIFIER_SHARED_DATA)")
    root = SHARED / "bfcl"
    out = []
    for category in bfcl.CATEGORIES:
        assert parity.file_sha256(root, category) == TABLE["data_sha256"][category], (
            f"{category}: the shared BFCL data is not the data the table was made from (bfcl-eval {TABLE['bfcl_eval']})")
        entries, answers = parity.data(root, category)
        by_id = {e["id"]: e for e in entries}
        for item_id, row in TABLE["items"].items():
            if row["category"] != category:
                continue
            entry, answer = by_id[item_id], answers.get(item_id)
            cands = parity.candidates(category, entry, answer)
            assert parity.digest(cands) == row["candidates"], f"{item_id}: candidates changed: run scripts/bfcl_parity_table.py"
            out += [(category, entry, answer, c, v == "1") for c, v in zip(cands, row["bfcl"], strict=True)]
    return out


def test_table_is_pinned_and_covers_every_category_and_kind(rows):
    assert TABLE["bfcl_eval"] == parity.BFCL_EVAL_VERSION
    assert {r[0] for r in rows} == set(bfcl.CATEGORIES)
    kinds = Counter(c[0] for _, _, _, c, _ in rows)
    assert REQUIRED_KINDS <= set(kinds), sorted(REQUIRED_KINDS - set(kinds))
    verdicts = {(c[0], v) for _, _, _, c, v in rows}
    for kind in ("exact", "alternative", "omit_optional", "key_order", "parallel_reversed", "case_upper", "call"):
        assert (kind, True) in verdicts, kind
    for kind in ("wrong_type", "nested_element_type", "args_object", "args_empty_string", "dotted_name", "args_bad_json"):
        assert (kind, False) in verdicts, kind
    assert len(rows) > 5000
    assert not set(TABLE["items"]) & set(bfcl.SKIPPED)


def test_verifier_scores_every_candidate_as_bfcl_eval_does(rows):
    wrong = []
    for category, entry, answer, cand, theirs in rows:
        ours = _score(category, entry, answer, cand)
        if ours != theirs:
            wrong.append(f"{entry['id']} {cand[0]}: bfcl-eval {theirs}, verifier {ours}: {json.dumps(cand[1:])[:200]}")
    assert not wrong, f"{len(wrong)} of {len(rows)} candidates scored unlike bfcl-eval:\n" + "\n".join(wrong[:30])


def test_the_skipped_items_are_not_loaded_and_say_why(shared_data):
    samples = bfcl.load_category(shared_data / "bfcl", "live_multiple")
    ids = {s.meta["bfcl_id"] for s in samples}
    assert not ids & set(bfcl.SKIPPED)
    assert len(samples) == len(parity.data(shared_data / "bfcl", "live_multiple")[0]) - 2
    assert all("does not declare" in why for why in bfcl.SKIPPED.values())


# ---- multi-turn: whole histories, per-turn prefixes ----


def _exchanges(entry_id: str, history: list) -> list[Exchange]:
    out = []
    for k, answers in enumerate(history, start=1):
        for j, step in enumerate(answers):
            calls = [{"id": f"call_{k}_{j}_{i}", "type": "function", "function": {"name": n, "arguments": a}}
                     for i, (n, a) in enumerate(step)] if isinstance(step, list) else None
            message = {"role": "assistant", "content": step if isinstance(step, str) else None, **({"tool_calls": calls} if calls else {})}
            body = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}]}
            out.append(Exchange(suite=mt.NAME, sample_id=f"{entry_id}/t{k}/{j}", epoch=0, mode="chat", request={}, status=200,
                                body=json.dumps(body)))
    return out


@pytest.fixture(scope="module")
def mt_rows():
    if not SHARED.is_dir():
        pytest.skip(f"shared data not found at {SHARED} (set VERIFIER_SHARED_DATA)")
    root = SHARED / "bfcl"
    out = []
    for category in mt.CATEGORIES:
        assert parity.file_sha256(root, category) == TABLE["data_sha256"][category], category
        entries, answers = parity.data(root, category)
        samples = {s.id: s for s in mt.load_category(root, category)}
        for e in entries:
            row = TABLE["items"].get(e["id"])
            if row is None:
                continue
            hists = parity.mt_candidates(e, answers[e["id"]])
            assert parity.digest(hists) == row["candidates"], f"{e['id']}: candidates changed: run scripts/bfcl_parity_table.py"
            out += [(samples[e["id"]], h, v) for h, v in zip(hists, row["bfcl"], strict=True)]
    return out


def test_multi_turn_covers_every_category_and_kind(mt_rows):
    assert {s.meta["category"] for s, _, _ in mt_rows} == set(mt.CATEGORIES)
    kinds = {h[0] for _, h, _ in mt_rows}
    assert {"mt_exact", "mt_args_object", "mt_args_bad_json", "mt_args_empty_string", "mt_turn_skipped", "mt_last_step_undecodable",
            "mt_calls_reversed", "mt_last_call_missing", "mt_bad_step_then_retry", "mt_call_in_turn_without_ground_truth"} <= kinds
    assert {v[-1] for _, _, v in mt_rows} == {"0", "1"}


def test_multi_turn_turns_are_checked_as_bfcl_eval_does(mt_rows):
    wrong = []
    for sample, (kind, history), theirs in mt_rows:
        records = mt.score_conversation(sample, _exchanges(sample.id, history))
        passed, ours = True, ""
        for _, j, _ in records:  # bfcl-eval's verdict on turns 1..k: every turn up to k passed
            passed = passed and j.score == 1.0
            ours += "1" if passed else "0"
        if ours != theirs:
            wrong.append(f"{sample.id} {kind}: bfcl-eval {theirs}, verifier {ours} ({[j.reason for _, j, _ in records]})")
    assert not wrong, f"{len(wrong)} of {len(mt_rows)} histories checked unlike bfcl-eval:\n" + "\n".join(wrong[:30])
