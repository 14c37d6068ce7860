"""The journal and the JSONL writers skip the redaction walk when a scan of the encoded line shows it would change
nothing (Redactor.untouched). The scan may say "maybe" too often, never "untouched" wrongly: checked here on
random values built from secrets, their escaped and percent-encoded forms, backslashes and non-ASCII text."""

from __future__ import annotations

import json
import random

from verifier.safewrite import dumps
from verifier.redact import Redactor

SECRET = "sk-live-Abc123_xyz/789"
PIECES = [
    SECRET, "sk-live", "Abc123_xyz", "Bearer " + SECRET, SECRET.replace("-", "\\u002d"), SECRET.replace("/", "\\/"),
    SECRET.replace("-", "%2d"), SECRET[:7], SECRET[7:], "\\", "\\\\u", "%", "%2", "%zz", "50% off", "\n", "\t", "\x01",
    '"', "é", "日本", "\U0001f600", "u002d", "plain words ", "12345678", " ",
]


def _string(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 4)))


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.random()
    if depth > 3 or kind < 0.4:
        return rng.choice([_string(rng), _string(rng), 12345678, 1.5, None, True])
    if kind < 0.7:
        return [_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {_string(rng): _value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def test_an_untouched_line_is_exactly_what_the_walk_writes():
    redactor = Redactor([SECRET, "Bearer " + SECRET])
    rng = random.Random(7)
    untouched = walked = 0
    for _ in range(4000):
        value = _value(rng)
        line = dumps(value)
        if redactor.untouched(line):
            untouched += 1
            assert dumps(redactor.obj(value)) == line, value
        else:
            walked += 1
    # Both branches are exercised: the check is not vacuous either way.
    assert untouched > 500 and walked > 500, (untouched, walked)


def test_the_scan_finds_every_form_the_walk_masks():
    redactor = Redactor([SECRET])
    for form in (SECRET, SECRET.replace("-", "\\u002d"), SECRET.replace("/", "\\/"), SECRET.replace("-", "%2d"),
                 'a"' + SECRET, "x\n" + SECRET):
        value = {"messages": [{"role": "user", "content": form}]}
        assert redactor.obj(value) != value, form
        assert not redactor.untouched(dumps(value)), form


def test_the_journal_writes_the_bytes_the_walk_would(tmp_path):
    from verifier.execution.journal import Journal
    from verifier.types import Exchange

    body = json.dumps({"choices": [{"message": {"role": "assistant", "content": "50% of 12 is 6 " + SECRET}}]})
    clean = json.dumps({"choices": [{"message": {"role": "assistant", "content": "The answer is 6."}}]})
    redactor = Redactor([SECRET])
    journal = Journal(tmp_path, scrub=[SECRET])
    exchanges = []
    for i, text in enumerate((body, clean)):
        ex = Exchange(suite="s", sample_id=f"s/{i}", epoch=0, mode="chat",
                      request={"messages": [{"role": "user", "content": "Q é\n" * 3}]}, status=200, body=text)
        exchanges.append(ex)
        journal.append(ex)
    journal.close()
    lines = (tmp_path / "responses.jsonl").read_text(encoding="utf-8").splitlines()
    assert lines == [dumps(redactor.record(ex.to_json())) for ex in exchanges]
    assert SECRET not in lines[0] and "***" in lines[0] and "***" not in lines[1]
