"""BFCL suite: checker decisions (as BFCL's ast_checker makes them), type mapping, loading, and the CLI end to end."""

import json
import re
from pathlib import Path

import pytest

from suites import BUILTIN as SUITES, bfcl
from suites import bfcl_checker as chk
from verifier.testbed.server import Reply, Script, TestServer, last_user_text
from verifier.types import Parsed

# ---- (a) checker decisions ----

AREA = {
    "name": "geometry.area",
    "parameters": {
        "type": "dict",
        "properties": {
            "base": {"type": "integer"}, "height": {"type": "float"}, "unit": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}}, "opts": {"type": "dict", "properties": {"round": {"type": "boolean"}}},
        },
        "required": ["base", "height"],
    },
}
ANSWER = [{"geometry.area": {"base": [10], "height": [5.0], "unit": ["units", ""], "tags": [["a b", "C"], ""], "opts": [{"round": [True]}, ""]}}]
WEATHER = {"name": "get_weather", "parameters": {"type": "dict", "properties": {"city": {"type": "string"}}, "required": ["city"]}}
PAR_ANSWER = [{"get_weather": {"city": ["Boston, MA"]}}, {"get_weather": {"city": ["San Francisco"]}}]


def calls(*pairs):
    """Decoded calls, named as an OpenAI-style model must send them (BFCL maps the declared `.` to `_`)."""
    return chk.Decoded(tuple(pairs))


def simple(args, name="geometry_area"):
    return chk.check([AREA], calls((name, args)), ANSWER, "simple_python")


@pytest.mark.parametrize("args, code", [
    ({"base": 10, "height": 5.0}, "correct"),
    ({"base": 10, "height": 5}, "correct"),  # int -> float promotion
    ({"base": 10, "height": 5.0, "unit": "units"}, "correct"),
    ({"base": 10, "height": 5.0, "unit": "  UNITS "}, "correct"),  # BFCL string normalisation
    ({"base": 10, "height": 5.0, "tags": ["A-B", "c"]}, "correct"),  # list elements normalised element-wise
    ({"base": 10, "height": 5.0, "opts": {"round": True}}, "correct"),
    ({"base": 11, "height": 5.0}, "value_error"),
    ({"base": 10.0, "height": 5.0}, "type_error"),  # float -> int is not allowed
    ({"base": "10", "height": 5.0}, "type_error"),
    ({"height": 5.0}, "missing_required"),
    ({"base": 10, "height": 5.0, "color": "red"}, "unexpected_param"),
    ({"base": 10, "height": 5.0, "unit": "meters"}, "value_error"),
    ({"base": 10, "height": 5.0, "tags": ["C", "a b"]}, "value_error"),  # list order matters
    ({"base": 10, "height": 5.0, "opts": {"round": False}}, "value_error"),
    ({"base": 10, "height": 5.0, "opts": {"other": True}}, "value_error"),
])
def test_simple_checker_decisions(args, code):
    assert simple(args).code == code
    assert simple(args).ok == (code == "correct")


def test_wrong_name_wrong_count_and_missing_optional():
    assert simple({"base": 10, "height": 5.0}, name="area").code == "wrong_func_name"
    # BFCL compares the name an OpenAI-style model can send: the declared dotted name is not it.
    assert simple({"base": 10, "height": 5.0}, name="geometry.area").code == "wrong_func_name"
    two = calls(*[("geometry_area", {"base": 10, "height": 5.0})] * 2)
    assert chk.check([AREA], two, ANSWER, "simple_python").code == "wrong_count"
    assert chk.check([AREA], calls(), ANSWER, "simple_python").code == "no_call"
    bad = chk.decode_fc([{"function": {"name": "geometry_area", "arguments": "{bad"}}])
    assert bad.calls == () and chk.check([AREA], bad, ANSWER, "simple_python").code == "decoder_failed"
    # A parameter in the answer without "" must be given even when the schema calls it optional.
    strict = [{"geometry.area": {"base": [10], "height": [5.0], "unit": ["units"]}}]
    assert chk.check([AREA], calls(("geometry_area", {"base": 10, "height": 5.0})), strict, "simple_python").code == "missing_optional"


def wire(*args):
    return [{"id": f"c{i}", "type": "function", "function": {"name": "get_weather", "arguments": a}} for i, a in enumerate(args)]


@pytest.mark.parametrize("arguments, why", [
    ({"city": "x"}, "dict, not a JSON string"),  # OpenAI's `arguments` is a string; bfcl-eval's json.loads fails on an object
    ("", "not JSON"),  # "" is not {}: a failed decode
    ("{bad", "not JSON"),
    ("null", "JSON NoneType, not an object"),
    ("[1]", "JSON list, not an object"),
])
def test_decode_fc_fails_the_whole_response_as_bfcl_eval_does(arguments, why):
    d = chk.decode_fc(wire('{"city": "x"}', arguments))
    assert d.calls == () and why in d.failure
    assert chk.check([WEATHER], d, PAR_ANSWER, "parallel").code == "decoder_failed"
    assert chk.check([WEATHER], d, None, "live_relevance").code == "decoder_failed"  # no valid call
    assert chk.check([WEATHER], d, None, "irrelevance").ok  # ... which is right here
    assert chk.decode_fc(wire('{"city": "x"}')).calls == (("get_weather", {"city": "x"}),)
    assert chk.decode_fc(None) == chk.decode_fc([]) == chk.Decoded(())


def test_array_elements_must_have_the_declared_item_type():
    # The nested check failing is final: it does not fall through to a value comparison (85.0 == 85).
    fn = {"name": "avg", "parameters": {"type": "dict", "required": ["xs"], "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}}
    ans = [{"avg": {"xs": [[85, 90]]}}]
    assert chk.check([fn], calls(("avg", {"xs": [85, 90]})), ans, "simple_python").ok
    assert chk.check([fn], calls(("avg", {"xs": [85.0, 90.0]})), ans, "simple_python").code == "type_error"


def test_multiple_checks_the_expected_function():
    fns = [AREA, WEATHER]
    ans = [{"get_weather": {"city": ["Paris"]}}]
    assert chk.check(fns, calls(("get_weather", {"city": "paris"})), ans, "multiple").ok
    assert chk.check(fns, calls(("geometry_area", {"base": 1, "height": 1.0})), ans, "live_multiple").code == "wrong_func_name"


def test_parallel_is_order_insensitive():
    fwd = [("get_weather", {"city": "Boston, MA"}), ("get_weather", {"city": "San Francisco"})]
    assert chk.check([WEATHER], calls(*fwd), PAR_ANSWER, "parallel").ok
    assert chk.check([WEATHER], calls(*fwd[::-1]), PAR_ANSWER, "live_parallel").ok
    bad = [("get_weather", {"city": "Boston"}), ("get_weather", {"city": "San Francisco"})]
    r = chk.check([WEATHER], calls(*bad), PAR_ANSWER, "parallel")
    assert not r.ok and r.code == "value_error"
    assert chk.check([WEATHER], calls(*fwd[:1]), PAR_ANSWER, "parallel").code == "wrong_count"
    dup = [fwd[0], fwd[0]]
    assert not chk.check([WEATHER], calls(*dup), PAR_ANSWER, "parallel").ok  # one output cannot match two answers


def test_irrelevance_and_relevance():
    call = calls(("get_weather", {"city": "x"}))
    assert chk.check([WEATHER], calls(), None, "irrelevance").ok
    assert chk.check([WEATHER], call, None, "live_irrelevance").code == "irrelevance_called"
    assert chk.check([WEATHER], call, None, "live_relevance").ok
    assert chk.check([WEATHER], calls(), None, "live_relevance").code == "no_call"


def test_standardize_matches_bfcl():
    assert chk.standardize("April 1, 2024") == chk.standardize("april 1,2024") == "april12024"
    assert chk.standardize("it's") == 'it"s'


def test_schema_valid_and_calls_as_text():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    decl = chk.tools_by_name(tools)
    call = lambda n, a: {"function": {"name": n, "arguments": a}}  # noqa: E731
    assert chk.schema_valid(call("get_weather", '{"city": "Oslo"}'), decl)
    assert not chk.schema_valid(call("get_weather", '{"city": 5}'), decl)
    assert not chk.schema_valid(call("get_weather", "{}"), decl)
    assert not chk.schema_valid(call("get_weather", '{"city": "Oslo"'), decl)
    assert not chk.schema_valid(call("get_weather", '["Oslo"]'), decl)
    assert not chk.schema_valid(call("other", '{"city": "Oslo"}'), decl)
    names = {"get_weather"}
    assert chk.calls_as_text('Sure: {"name": "get_weather", "arguments": {"city": "Oslo"}}', names) == ["get_weather"]
    assert chk.calls_as_text('[{"get_weather": {"city": "Oslo"}}]', names) == ["get_weather"]
    assert chk.calls_as_text('{"name": "other"} and {broken', names) == []
    assert chk.calls_as_text("It is sunny.", names) == []


# ---- (b) type mapping and names ----


def test_type_mapping_and_dotted_names():
    fn = {
        "name": "math.stats.mean", "description": "d",
        "parameters": {"type": "dict", "required": ["xs"], "properties": {
            "xs": {"type": "array", "items": {"type": "float"}},
            "pair": {"type": "tuple", "items": {"type": "any"}},
            "cfg": {"type": "dict", "properties": {"w": {"type": "float"}, "v": {"type": "any", "description": "anything"}}},
            "n": {"type": "integer"}, "flag": {"type": "boolean"},
        }},
    }
    tools, names = bfcl.to_tools([fn])
    f = tools[0]["function"]
    assert tools[0]["type"] == "function" and f["name"] == "math_stats_mean" and names == {"math_stats_mean": "math.stats.mean"}
    p = f["parameters"]
    assert p["type"] == "object" and p["required"] == ["xs"]
    assert p["properties"]["xs"] == {"type": "array", "items": {"type": "number"}}
    assert p["properties"]["pair"] == {"type": "array", "items": {}}
    assert p["properties"]["cfg"]["type"] == "object"
    assert p["properties"]["cfg"]["properties"] == {"w": {"type": "number"}, "v": {"description": "anything"}}
    assert p["properties"]["n"] == {"type": "integer"} and p["properties"]["flag"] == {"type": "boolean"}
    assert fn["parameters"]["type"] == "dict"  # the original is not mutated


def test_score_maps_names_back_and_sorts_answer():
    s = bfcl.make_sample("parallel", {"id": "p", "question": [[{"role": "user", "content": "q"}]], "function": [dict(WEATHER, name="w.get")]},
                         {"id": "p", "ground_truth": [{"w.get": {"city": ["B"]}}, {"w.get": {"city": ["A"]}}]})
    calls = [{"id": "1", "type": "function", "function": {"name": "w_get", "arguments": json.dumps({"city": c})}} for c in "AB"]
    v = bfcl.score(s, Parsed(content=None, reasoning=None, tool_calls=calls, finish_reason="tool_calls", usage={}))
    assert v.score == 1.0 and v.reason == "correct" and v.outcome == "content"
    assert v.answer == [{"name": "w.get", "arguments": {"city": "A"}}, {"name": "w.get", "arguments": {"city": "B"}}]
    assert v.metrics == {"accuracy": 1.0, "schema_accuracy": 1.0}
    assert v.signals["tool_triggered"] is True and v.signals["category"] == "parallel"
    assert bfcl.request(s) == {"messages": [{"role": "user", "content": "q"}], "tools": s.tools, "tool_choice": "auto"}


# ---- (c) loading ----


def _types(schema):
    """Every `type` value in a schema, through properties and items."""
    if not isinstance(schema, dict):
        return set()
    out = {schema["type"]} if isinstance(schema.get("type"), str) else set()
    for p in (schema.get("properties") or {}).values():
        out |= _types(p)
    return out | _types(schema.get("items")) | _types(schema.get("additionalProperties"))


def test_load_shared_data(shared_data):
    root = shared_data / "bfcl"
    samples = bfcl.load(str(root))
    counts = {}
    for s in samples:
        counts[s.meta["category"]] = counts.get(s.meta["category"], 0) + 1
    assert list(counts) == list(bfcl.CATEGORIES) and all(n > 0 for n in counts.values())
    ids = [s.id for s in samples]
    assert len(ids) == len(set(ids))
    assert all(s.id == f"{s.meta['category']}/{s.meta['bfcl_id']}" for s in samples)
    assert ids == [s.id for s in bfcl.load(str(root))]
    first = samples[0]
    assert first.id == "simple_python/simple_python_0" and first.target and first.tools
    for s in samples:
        if s.meta["category"] in bfcl.NO_ANSWER:
            assert s.target is None
        else:
            assert s.target
        for t in s.tools or []:
            assert re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", t["function"]["name"])
            assert not (_types(t["function"]["parameters"]) & {"dict", "float", "tuple", "any"})


def test_smoke_fixture_is_offline_and_matches_shared_data(shared_data):
    smoke = bfcl.load(smoke=True)
    assert 18 <= len(smoke) <= 24 and len({s.id for s in smoke}) == len(smoke)
    assert {s.meta["category"] for s in smoke} == set(bfcl.CATEGORIES)
    full = {s.id: s for s in bfcl.load(str(shared_data / "bfcl"))}
    for s in smoke:
        assert s == full[s.id]


def test_data_dir_resolution(tmp_path, monkeypatch):
    monkeypatch.delenv(bfcl.ENV_VAR, raising=False)
    # A stand-in bfcl_eval that must never be imported (the real one pulls torch).
    pkg = tmp_path / "site" / "bfcl_eval"
    (pkg / "data" / "possible_answer").mkdir(parents=True)
    (pkg / "__init__.py").write_text("raise ImportError('bfcl_eval must not be imported')\n")
    entry = {"id": "simple_python_0", "question": [[{"role": "user", "content": "hi"}]], "function": [WEATHER]}
    (pkg / "data" / "BFCL_v4_simple_python.json").write_text(json.dumps(entry) + "\n")
    (pkg / "data" / "possible_answer" / "BFCL_v4_simple_python.json").write_text(json.dumps({"id": "simple_python_0", "ground_truth": [{"get_weather": {"city": ["x"]}}]}) + "\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    assert [s.id for s in bfcl.load()] == ["simple_python/simple_python_0"]
    other = tmp_path / "env"
    other.mkdir()
    (other / "BFCL_v4_irrelevance.json").write_text(json.dumps(dict(entry, id="irrelevance_0")) + "\n")
    monkeypatch.setenv(bfcl.ENV_VAR, str(other))
    assert [s.id for s in bfcl.load()] == ["irrelevance/irrelevance_0"]
    assert [s.id for s in bfcl.load(str(pkg / "data"))] == ["simple_python/simple_python_0"]
    assert [s.id for s in bfcl.load(str(pkg / "data" / "BFCL_v4_simple_python.json"))] == ["simple_python/simple_python_0"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        bfcl.load(str(tmp_path / "nowhere"))


def test_missing_data_is_a_clear_error(tmp_path, monkeypatch, server, cli):
    monkeypatch.delenv(bfcl.ENV_VAR, raising=False)
    monkeypatch.setattr(bfcl.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(FileNotFoundError, match="--data DIR"):
        bfcl.load()
    code, _, err = cli("run", "--suite", "bfcl", "--base-url", server.url, "--model", "m", "--out", tmp_path / "r", "--quiet")
    assert code == 2 and "bfcl" in err and "data" in err


# ---- (d) end to end through the CLI ----

SMOKE_ROWS = [json.loads(line) for line in Path(bfcl.SMOKE_FILE).read_text().splitlines() if line.strip()]
DEFAULTS = {"string": "x", "integer": 1, "float": 1.0, "number": 1.0, "boolean": True, "array": [], "tuple": [], "dict": {}}


def _user_text(row):
    return [m for m in row["entry"]["question"][0] if m["role"] == "user"][-1]["content"]


def _right_reply(row):
    """What a perfect model answers: omits what may be omitted, else gives the first acceptable value."""
    fns = row["entry"]["function"]
    if row["category"] in ("irrelevance", "live_irrelevance"):
        return Reply(content="Sorry, none of the tools can do that.")
    if row["possible_answer"] is None:  # relevance: any well-formed call is right
        f = fns[0]
        args = {p: DEFAULTS[f["parameters"]["properties"][p]["type"]] for p in f["parameters"].get("required", [])}
        return Reply(content=None, tool_calls=[{"name": bfcl.openai_name(f["name"]), "arguments": json.dumps(args)}])
    calls = []
    for exp in row["possible_answer"]["ground_truth"]:
        (name, params), = exp.items()
        args = {p: vals[0] for p, vals in params.items() if "" not in vals}
        calls.append({"name": bfcl.openai_name(name), "arguments": json.dumps(args)})
    return Reply(content=None, tool_calls=calls)


def oracle_script():
    by_text = {_user_text(r): _right_reply(r) for r in SMOKE_ROWS}
    script = Script(lambda req: by_text.get(last_user_text(req), Reply(content="unknown question")))
    rule = lambda text, reply: script.rule(re.escape(text), reply)  # noqa: E731
    rule("Calculate the factorial of the number 5", Reply(content=None, tool_calls=[{"name": "math_factorial", "arguments": '{"number": 6}'}]))
    rule("prime factors of the number 123456", Reply(content=None, tool_calls=[{"name": "number_analysis_prime_factors", "arguments": '{"number": 123456'}]))
    rule("founder of Buddhism", Reply(content=None, tool_calls=[{"name": "religion.get_origin", "arguments": '{"religion": "Buddhism"}'}]))
    rule("integral of x^3", Reply(content=None, tool_calls=[{"name": "str_to_int", "arguments": '{"value": "x^3"}'}]))
    rule("sum of 133 and 34", Reply(content='{"name": "sum_numbers", "arguments": {"numbers_list": [133, 34]}}'))
    rule("factorial of 5,10 and 15", Reply(content=None, tool_calls=[{"name": "math_factorial", "arguments": json.dumps({"number": str(n)})} for n in (5, 10, 15)]))
    rule("prime factors of the numbers 45, 100, and 150", Reply(content=None, tool_calls=[{"name": "number_analysis_prime_factors", "arguments": json.dumps({"number": n})} for n in (150, 45, 100)]))
    return script


def by_sample(run):
    return {(v["sample_id"], v["mode"]): v for v in map(json.loads, (run / "verdicts.jsonl").read_text().splitlines())}


def test_cli_end_to_end_scripted(tmp_path, cli):
    out = tmp_path / "r"
    with TestServer(oracle_script()) as srv:
        code, _, err = cli("run", "--suite", "bfcl", "--smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet", "--mode", "chat,chat-stream")
        sent = list(srv.script.requests)
    assert code == 0, err
    n = len(SMOKE_ROWS)
    assert len(sent) == 2 * n
    for req in sent:
        if req.get("tools"):
            assert req["tool_choice"] == "auto" and all("." not in t["function"]["name"] for t in req["tools"])
    s = json.loads((out / "summary.json").read_text())["suites"]["bfcl"]
    assert s["version"] == "1" and s["outcomes"] == {"content": 2 * (n - 2), "contract": 4}
    assert s["metrics"]["accuracy"]["value"] == pytest.approx((n - 6) / (n - 2), abs=1e-4)
    assert s["findings"]["tool_args_invalid_json"] == 2 and s["findings"]["tool_name_undeclared"] == 2
    assert s["findings"]["tool_call_as_text"] == 2
    v = by_sample(out)
    for mode in ("chat", "chat-stream"):
        g = lambda sid: v[(sid, mode)]  # noqa: E731
        assert g("simple_python/simple_python_97")["reason"] == "value_error" and g("simple_python/simple_python_97")["score"] == 0
        assert g("simple_python/simple_python_97")["answer"] == [{"name": "math.factorial", "arguments": {"number": 6}}]
        assert g("simple_python/simple_python_18")["outcome"] == "contract" and g("simple_python/simple_python_18")["reason"] == "tool_args_invalid_json"
        assert g("multiple/multiple_73")["outcome"] == "contract" and g("multiple/multiple_73")["reason"] == "tool_name_undeclared"
        assert g("irrelevance/irrelevance_8")["reason"] == "irrelevance_called"
        assert g("irrelevance/irrelevance_49")["reason"] == "correct"
        t = g("live_simple/live_simple_116-72-0")
        assert t["reason"] == "no_call" and t["outcome"] == "content" and [f["code"] for f in t["findings"]] == ["tool_call_as_text"]
        assert g("parallel/parallel_7")["reason"] == "type_error" and g("parallel/parallel_7")["metrics"]["schema_accuracy"] == 0.0
        assert g("parallel/parallel_75")["reason"] == "correct"  # answered out of order
        assert g("live_relevance/live_relevance_3-3-0")["reason"] == "correct"
        assert g("live_parallel_multiple/live_parallel_multiple_23-20-0")["reason"] == "correct"
        assert g("multiple/multiple_29")["signals"]["tool_triggered"] is True
        assert g("live_irrelevance/live_irrelevance_405-87-0")["signals"]["tool_triggered"] is False
    # Streamed and non-streamed answers are scored alike.
    for sid, mode in v:
        if mode == "chat":
            a, b = v[(sid, "chat")], v[(sid, "chat-stream")]
            assert (a["outcome"], a["score"], a["reason"], a["answer"]) == (b["outcome"], b["score"], b["reason"], b["answer"]), sid
    extra = s["extra"]
    sa = extra["schema_accuracy"]
    assert sa["calls"] == 2 * 30 and sa["valid"] == 2 * 25 and sa["value"] == pytest.approx(25 / 30, abs=1e-6)
    assert s["metrics"]["schema_accuracy"]["value"] < 1.0
    # Per category as bfcl-eval counts the same outputs: contract verdicts too (simple_python_18's broken JSON is wrong).
    assert extra["accuracy_by_category"]["simple_python"] == {"accuracy": 0.0, "n": 2}
    assert extra["accuracy_by_category"]["live_parallel"] == {"accuracy": 1.0, "n": 2}
    assert set(extra["accuracy_by_category"]) == set(bfcl.CATEGORIES)
    trig = extra["trigger"]
    assert trig["judged"] == 2 * n and trig["fp"] == 2 and trig["fn"] == 2 and trig["tool_triggered"] == trig["tp"] + trig["fp"]


def test_cli_perfect_model_scores_one(tmp_path, cli):
    by_text = {_user_text(r): _right_reply(r) for r in SMOKE_ROWS}
    with TestServer(Script(lambda req: by_text[last_user_text(req)])) as srv:
        code, _, err = cli("run", "--suite", "bfcl", "--smoke", "--base-url", srv.url, "--model", "m", "--out", tmp_path / "r", "--quiet")
    assert code == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())["suites"]["bfcl"]
    assert s["outcomes"] == {"content": len(SMOKE_ROWS)} and s["findings"] == {}
    assert s["metrics"]["accuracy"]["value"] == 1.0 and s["metrics"]["schema_accuracy"]["value"] == 1.0
    assert s["extra"]["trigger"]["f1"] == 1.0 and s["extra"]["category_mean_accuracy"] == 1.0
    assert code == 0 and cli("score", tmp_path / "r")[0] == 0


def test_cli_scores_the_envelope_as_bfcl_eval_does(tmp_path, cli):
    """Arguments sent as a JSON object instead of OpenAI's string, or as a JSON `null`, are no call to bfcl-eval's FC
    decoder: wrong answers in the score, and the wire findings stay beside them."""
    by_text = {_user_text(r): _right_reply(r) for r in SMOKE_ROWS}
    sp = next(r for r in SMOKE_ROWS if r["category"] == "simple_python")
    call = _right_reply(sp).tool_calls[0]
    by_text[_user_text(sp)] = Reply(content=None, tool_calls=[{"name": call["name"], "arguments": json.loads(call["arguments"])}])
    rel = next(r for r in SMOKE_ROWS if r["category"] == "live_relevance")
    by_text[_user_text(rel)] = Reply(content=None, tool_calls=[{"name": _right_reply(rel).tool_calls[0]["name"], "arguments": "null"}])
    out = tmp_path / "r"
    with TestServer(Script(lambda req: by_text[last_user_text(req)])) as srv:
        code, _, err = cli("run", "--suite", "bfcl", "--smoke", "--base-url", srv.url, "--model", "m", "--out", out, "--quiet")
    assert code == 0, err
    v = by_sample(out)
    a = v[(f"simple_python/{sp['entry']['id']}", "chat")]
    assert (a["outcome"], a["score"], a["reason"]) == ("content", 0.0, "decoder_failed")
    assert [f["code"] for f in a["findings"]] == ["tool_args_not_string"]
    b = v[(f"live_relevance/{rel['entry']['id']}", "chat")]
    assert (b["outcome"], b["score"], b["reason"]) == ("contract", 0.0, "tool_args_not_object")
    s = json.loads((out / "summary.json").read_text())["suites"]["bfcl"]
    assert s["findings"] == {"tool_args_not_string": 1, "tool_args_not_object": 1}
    n_sp = sum(r["category"] == "simple_python" for r in SMOKE_ROWS)
    assert s["extra"]["accuracy_by_category"]["simple_python"] == {"accuracy": round((n_sp - 1) / n_sp, 6), "n": n_sp}
    n_rel = sum(r["category"] == "live_relevance" for r in SMOKE_ROWS)
    assert s["extra"]["accuracy_by_category"]["live_relevance"] == {"accuracy": round((n_rel - 1) / n_rel, 6), "n": n_rel}


def test_registered():
    assert SUITES["bfcl"] is bfcl.SUITE and bfcl.SUITE.version == "1"
