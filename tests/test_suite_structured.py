import json

import pytest

from suites import structured as st
from verifier.testbed.server import Reply, Script, TestServer
from verifier.types import Parsed, Sample


def parsed(content, finish="stop"):
    return Parsed(content=content, reasoning=None, tool_calls=None, finish_reason=finish, usage={"prompt_tokens": 1})


# ---------------------------------------------------------------- loaders


def test_smoke_is_offline_deterministic_and_covers_every_variant():
    a, b = st.load(None, smoke=True), st.load(None, smoke=True)
    assert [s.to_json() for s in a] == [s.to_json() for s in b]
    ids = [s.id for s in a]
    assert len(ids) == len(set(ids)) == st.SMOKE_EXTRACTION * 3 + len(st.BUILTIN) * 2
    assert "extract/person/strict" in ids and "extract/person/json_object" in ids and "builtin/defs_ref/nonstrict" in ids
    for s in a:
        variant = s.id.rsplit("/", 1)[1]
        assert s.meta["variant"] == variant
        rf = s.response_format
        if variant == "json_object":
            assert rf == {"type": "json_object"} and s.meta["schema"]
        else:
            assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is (variant == "strict")
            assert st.sanitize_name(rf["json_schema"]["name"]) == rf["json_schema"]["name"]
        assert st.request(s) == {"messages": s.messages, "response_format": rf}


def test_project_data_is_self_consistent():
    # Every expected object and built-in example validates against its own schema: the answers are right.
    for s in st.extraction_samples():
        assert st.compliance(st.schema_of(s), s.target) == (True, "")
    assert len(st.extraction_samples()) == 12 * 3
    for b in st.BUILTIN.values():
        assert st.unusable(b["schema"]) is None and st.compliance(b["schema"], b["example"])[0] is True


def test_sanitize_name():
    assert st.sanitize_name("Pasajeros: habitación x.") == "Pasajeros__habitaci_n_x_"
    assert st.sanitize_name("") == "schema" and len(st.sanitize_name("a" * 100)) == 64


def test_unusable_schemas_are_named():
    assert st.unusable([]) == "not an object"
    assert st.unusable({"$ref": "#/definitions/missing"}).startswith("dangling $ref")
    assert st.unusable({"$ref": "http://example.com/s.json"}).startswith("non-local $ref")
    assert st.unusable({"type": "string", "pattern": "\\p{L}+"}).startswith("invalid schema")  # ECMA-only regex
    assert st.unusable({"type": 12}).startswith("invalid schema")
    assert st.unusable({"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}) is None


def test_bench_loader_on_shared_data(shared_data):
    root = st.bench_dir(str(shared_data))
    assert root == st.bench_dir(str(shared_data / "jsonschemabench"))
    # One small subset in full, plus the two files known to be invalid schemas (read in place).
    # (The full 6,599-schema load takes ~25 s: metaschema checks under Draft 2020-12 are slow.)
    rows = list(st.bench_rows(root, ("WashingtonPost",)))
    bad = [("Github_easy", "o66201"), ("Github_medium", "o82255")]
    rows += [(sub, stem, (root / sub / f"{stem}.json").read_text()) for sub, stem in bad]
    samples, skipped = st.bench_samples(iter(rows))
    assert set(skipped) == {"Github_easy/o66201", "Github_medium/o82255"}
    assert all(why.startswith("invalid schema") for why in skipped.values())
    n_files = len(list((root / "WashingtonPost").glob("*.json")))
    assert n_files == 125 and len(rows) == 127
    assert len(samples) == 2 * n_files  # strict + nonstrict, every file of these subsets is usable
    ids = [s.id for s in samples]
    assert len(set(ids)) == len(ids)
    assert "WashingtonPost/wp_0_Normalized/strict" in ids and "WashingtonPost/wp_99_Normalized/nonstrict" in ids
    again, _ = st.bench_samples(iter(rows[:10]))
    assert [s.to_json() for s in again] == [s.to_json() for s in samples[:20]]
    s = samples[0]
    assert s.target is None and json.dumps(st.schema_of(s), ensure_ascii=False) in s.messages[0]["content"]


def test_bench_dir_rejects_other_layouts(tmp_path):
    with pytest.raises(FileNotFoundError):
        st.bench_dir(str(tmp_path))


# ---------------------------------------------------------------- scorer (pure)


def smoke(sid):
    return next(s for s in st.load(None, smoke=True) if s.id == sid)


def test_scorer_metrics_and_findings():
    target = smoke("extract/person/strict").target
    good = json.dumps(target)
    v = st.score(smoke("extract/person/strict"), parsed(good))
    assert (v.outcome, v.reason, v.metrics) == ("content", "correct", {"valid_json": 1.0, "schema_compliance": 1.0, "content_accuracy": 1.0})
    # Normalization: case and whitespace in strings, 34 == 34.0.
    v = st.score(smoke("extract/person/nonstrict"), parsed(json.dumps({**target, "name": "  maria   LOPEZ", "age": 34.0})))
    assert v.metrics["content_accuracy"] == 1.0
    assert not st.same({"ok": True}, {"ok": 1}) and st.same(["b", "A"], ["a", "B"])
    # Strict: invalid JSON and schema violations are blocking contract findings; non-strict: content failures.
    v = st.score(smoke("extract/person/strict"), parsed("{oops"))
    assert v.outcome == "contract" and [f.code for f in v.findings] == ["json_invalid_strict"]
    v = st.score(smoke("extract/person/strict"), parsed(json.dumps({"name": "Maria Lopez"})))
    assert v.outcome == "contract" and [f.code for f in v.findings] == ["json_schema_violation_strict"]
    v = st.score(smoke("extract/person/nonstrict"), parsed("{oops"))
    assert (v.outcome, v.reason, v.findings) == ("content", "invalid_json", ())
    assert v.metrics == {"valid_json": 0.0, "schema_compliance": 0.0, "content_accuracy": 0.0}
    # A token-limit cut is not a broken grammar.
    v = st.score(smoke("extract/person/strict"), parsed('{"name": "Ma', finish="length"))
    assert (v.outcome, v.reason, v.findings) == ("content", "truncated", ())
    # Fences: parsed, and recorded as a (non-blocking) finding.
    v = st.score(smoke("extract/person/json_object"), parsed("Here:\n```json\n" + good + "\n```"))
    assert v.outcome == "content" and v.metrics["content_accuracy"] == 1.0 and [f.code for f in v.findings] == ["json_fenced"]


def test_schema_that_breaks_the_validator_is_na_not_a_failure():
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/nope"}}}
    s = Sample(id="x/y/strict", messages=[], response_format={"type": "json_schema", "json_schema": {"name": "y", "schema": schema, "strict": True}},
               meta={"variant": "strict"})
    v = st.score(s, parsed('{"a": 1}'))
    assert v.outcome == "content" and v.metrics == {"valid_json": 1.0}
    assert [(f.code, f.detail) for f in v.findings] == [("schema_not_checkable", "dangling $ref #/$defs/nope")]


# ---------------------------------------------------------------- end to end through the CLI


def scripted_server():
    """Answers each smoke sample by (messages, response_format); per-sample misbehaviour below."""
    samples = st.load(None, smoke=True)
    by_req = {json.dumps([s.messages, s.response_format], sort_keys=True): s for s in samples}

    def good(s):
        return s.target if s.target is not None else st.BUILTIN[s.id.split("/")[1]]["example"]

    def responder(req):
        s = by_req[json.dumps([req["messages"], req.get("response_format")], sort_keys=True)]
        ok = json.dumps(good(s))
        special = {
            "extract/meeting/strict": Reply(content=json.dumps({"event": "budget review"})),           # violates schema
            "extract/meeting/nonstrict": Reply(content=json.dumps({"event": "budget review"})),
            "extract/meeting/json_object": Reply(content=ok.replace('"B12"', '"C7"')),               # compliant, wrong
            "extract/product/strict": Reply(content='{"product": "Acme X200 drill", "price": 89.99,'),  # invalid JSON
            "extract/product/nonstrict": Reply(content='{"product": "Acme X200 drill", "price": 89.99,'),
            "extract/product/json_object": Reply(content="```json\n" + ok + "\n```"),                  # fenced
            "extract/attendees/strict": Reply(content="```\n" + ok + "\n```"),
            "extract/attendees/nonstrict": Reply(content=json.dumps({"attendees": ["chloe", "ANA", "Ben"], "presenter": " ben "})),
            "extract/recipe/strict": Reply(content='{"dish": "panc', finish_reason="length"),           # token limit
            "extract/review/strict": Reply(status=400, body='{"error": {"message": "json_schema is not supported"}}'),
            "extract/review/nonstrict": Reply(status=400, body='{"error": {"message": "json_schema is not supported"}}'),
        }
        return special.get(s.id, Reply(content=ok))

    return TestServer(Script(responder))


def test_structured_end_to_end(tmp_path, cli):
    out = tmp_path / "r"
    with scripted_server() as srv:
        code, _, err = cli("run", "--suite", "structured", "--smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet")
        sent = srv.script.requests
    assert code == 0, err
    assert len(sent) == 24 and sum(1 for r in sent if (r.get("response_format") or {}).get("json_schema", {}).get("strict")) == 9
    s = json.loads((out / "summary.json").read_text())["suites"]["structured"]
    assert s["outcomes"] == {"content": 20, "contract": 2, "unsupported": 2}
    assert s["findings"]["json_invalid_strict"] == 1 and s["findings"]["json_schema_violation_strict"] == 1
    assert s["findings"]["json_fenced"] == 2
    variants = s["extra"]["variants"]
    assert {k: variants["strict"][k] for k in ("n", "unsupported", "contract", "judged", "valid_json", "schema_compliance", "content_accuracy")} == \
        {"n": 9, "unsupported": 1, "contract": 2, "judged": 8, "valid_json": 6, "schema_compliance": 5, "content_accuracy": 2}
    assert {k: variants["nonstrict"][k] for k in ("n", "unsupported", "contract", "judged", "valid_json", "schema_compliance", "content_accuracy")} == \
        {"n": 9, "unsupported": 1, "contract": 0, "judged": 8, "valid_json": 7, "schema_compliance": 6, "content_accuracy": 3}
    assert {k: variants["json_object"][k] for k in ("n", "unsupported", "contract", "judged", "valid_json", "schema_compliance", "content_accuracy")} == \
        {"n": 6, "unsupported": 0, "contract": 0, "judged": 6, "valid_json": 6, "schema_compliance": 6, "content_accuracy": 5}
    assert variants["json_object"]["rates"]["content_accuracy"] == round(5 / 6, 4)
    # The generic metrics average content verdicts only (contract and unsupported are reported, not scored).
    assert s["metrics"]["valid_json"]["n"] == 20 and s["metrics"]["content_accuracy"]["n"] == 14

    vs = {v["sample_id"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text().splitlines())}
    assert vs["extract/person/strict"]["outcome"] == "content" and vs["extract/person/strict"]["score"] == 1.0
    assert vs["extract/meeting/strict"]["outcome"] == "contract"
    assert [f["code"] for f in vs["extract/meeting/strict"]["findings"]] == ["json_schema_violation_strict"]
    assert vs["extract/meeting/nonstrict"]["outcome"] == "content" and vs["extract/meeting/nonstrict"]["reason"] == "schema_violation"
    assert vs["extract/meeting/json_object"]["reason"] == "wrong_answer" and vs["extract/meeting/json_object"]["metrics"]["schema_compliance"] == 1.0
    assert vs["extract/product/strict"]["outcome"] == "contract" and vs["extract/product/strict"]["reason"] == "invalid_json"
    assert vs["extract/product/nonstrict"]["outcome"] == "content" and vs["extract/product/nonstrict"]["metrics"]["valid_json"] == 0.0
    assert vs["extract/product/json_object"]["outcome"] == "content" and vs["extract/product/json_object"]["score"] == 1.0
    assert "json_fenced" in [f["code"] for f in vs["extract/product/json_object"]["findings"]]
    assert vs["extract/attendees/nonstrict"]["metrics"]["content_accuracy"] == 1.0  # normalization + set semantics
    assert vs["extract/recipe/strict"]["outcome"] == "content" and vs["extract/recipe/strict"]["reason"] == "truncated"
    assert vs["extract/review/strict"]["outcome"] == "unsupported" and vs["extract/review/strict"]["reason"] == "http_400"
    assert vs["extract/review/json_object"]["outcome"] == "content" and vs["extract/review/json_object"]["score"] == 1.0
    assert vs["builtin/defs_ref/strict"]["reason"] == "compliant"


# ---------------------------------------------------------------- start-up: validate only what is selected


def test_lazy_samples_build_only_what_a_slice_needs():
    from suites.lazy import LazySamples

    made = []

    def make(x):
        made.append(x)
        return [] if x % 3 == 0 else [Sample(id=str(x), messages=[])]  # every third item is skipped

    eager = [s.id for x in range(10) for s in make(x)]
    made.clear()
    lazy = LazySamples([Sample(id="head", messages=[])], range(10), make)
    assert [s.id for s in lazy[:3]] == ["head", "1", "2"] and made == [0, 1, 2]
    assert lazy[3].id == "4" and made == [0, 1, 2, 3, 4]
    assert [s.id for s in lazy] == ["head", *eager] and len(lazy) == 1 + len(eager)
    assert made == list(range(10))  # each item built once, in order
    assert lazy[-1].id == "8" and [s.id for s in lazy[1::3]] == ["1", "5"]


def test_limit_validates_only_the_selected_schemas(shared_data, monkeypatch):
    """`--limit` takes the first N: extraction and built-in items come first, so no bench schema is checked;
    deeper selections validate just as far as they reach, and give exactly the eager load's samples."""
    checked = []
    real = st.unusable
    monkeypatch.setattr(st, "unusable", lambda schema: checked.append(1) or real(schema))
    samples = st.load(str(shared_data), False)
    head = len(st.extraction_samples()) + len(st.builtin_samples())
    assert [s.id for s in samples[:10]] == [s.id for s in (st.extraction_samples() + st.builtin_samples())[:10]]
    assert checked == []
    first = samples[: head + 6]
    assert len(checked) == 3  # three schema files, two variants each
    rows = list(st.bench_rows(st.bench_dir(str(shared_data))))[:3]
    assert [s.to_json() for s in first[head:]] == [s.to_json() for s in st.bench_samples(iter(rows))[0]]


def test_scorer_returns_a_judgement_and_scoring_attaches_identity():
    """The scorer knows nothing of epochs and modes; scoring.judge is where a Verdict gets them."""
    from verifier.execution import scoring
    from verifier.types import Exchange, Judgement

    s = next(x for x in st.load(None, smoke=True) if x.id == "extract/person/strict")
    j = st.score(s, parsed("{oops"))
    assert isinstance(j, Judgement) and not hasattr(j, "epoch") and not hasattr(j, "sample_id")
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "{oops"}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}}
    ex = Exchange(suite="structured", sample_id=s.id, epoch=2, mode="chat", request={"messages": s.messages}, status=200,
                  body=json.dumps(body))
    v = scoring.judge(st.SUITE, s, ex)
    assert (v.suite, v.sample_id, v.epoch, v.mode) == ("structured", s.id, 2, "chat")
    assert (v.outcome, v.reason, v.score, v.metrics) == (j.outcome, j.reason, j.score, j.metrics) == ("contract", "invalid_json", 0.0, j.metrics)
    assert v.signals["variant"] == "strict" and v.signals["prompt_tokens"] == 3


def test_a_golden_gates_with_the_schema_key_order_its_reference_sent(tmp_path, cli):
    """Key order is behaviour on the wire: a JSON-schema grammar emits properties in the order the schema lists them.
    The golden's inputs.jsonl and the journal keep the order the reference sent, so its gate sends the same bodies
    (a sorted copy made a fresh vLLM write `age` where its golden wrote `name`: a false frontend regression)."""
    from pathlib import Path

    from verifier.execution import journal

    def schema_orders(run: Path) -> dict[tuple[str, str], list[str]]:
        out = {}
        for k, ex in journal.read_exchanges(run).items():
            rf = ex.request.get("response_format") or {}
            props = ((rf.get("json_schema") or {}).get("schema") or {}).get("properties")
            if props:
                out[(k[1], k[3])] = list(props)
        return out

    run = ["--suite", "structured", "--smoke", "--model", "m", "--quiet", "--max-retries", "0", "--mode", "chat"]
    with TestServer(Script(lambda req: Reply(content="{}"))) as srv:
        for i in range(3):
            assert cli("run", *run, "--base-url", srv.url, "--out", tmp_path / f"r{i}")[0] == 0
        assert cli("bless", tmp_path / "r0", "--to", tmp_path / "g")[0] == 0
        assert cli("calibrate", tmp_path / "g", "--runs", tmp_path / "r1", tmp_path / "r2")[0] == 0
        cli("gate", "--golden", tmp_path / "g", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "c", "--quiet")
    sent = schema_orders(tmp_path / "r0")
    assert sent and any(order != sorted(order) for order in sent.values()), sent  # the suite has unsorted schemas
    assert schema_orders(tmp_path / "c") == sent
    inputs = [json.loads(l) for l in (tmp_path / "g" / "inputs.jsonl").read_text().splitlines()]
    person = next(r for r in inputs if r["id"] == "extract/person/strict")
    assert list(person["response_format"]["json_schema"]["schema"]["properties"]) == ["name", "age", "occupation", "city"]
