"""BFCL multi-turn simulators: each class's documented behaviours and error results, execute()'s error results,
parse_gt_call's safety, determinism, and the end-to-end property: BFCL's ground truth replays on fresh instances
turn by turn, for all 800 entries of the four multi-turn categories, with no error result except the ones BFCL's
own data causes (each explained and counted).
"""

import json
import time
from pathlib import Path

import pytest

from suites.bfcl_sims import CLASSES, class_docs, functions_for
from suites.bfcl_sims._base import Simulator
from suites.bfcl_sims.execute import (
    MAX_ERROR_CHARS, api_functions, execute, instances_for, is_long_context, parameters_schema, parse_gt_call,
)
from suites.bfcl_sims.file_system import GorillaFileSystem
from suites.bfcl_sims.math_api import MathAPI
from suites.bfcl_sims.message import MessageAPI
from suites.bfcl_sims.posting import TwitterAPI
from suites.bfcl_sims.ticket import TicketAPI
from suites.bfcl_sims.trading import TradingBot
from suites.bfcl_sims.travel import TravelAPI
from suites.bfcl_sims.vehicle import VehicleControlAPI

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")


@pytest.fixture
def bfcl_dir(shared_data) -> Path:
    d = shared_data / "bfcl"
    if not (d / "multi_turn_func_doc").is_dir():
        pytest.skip(f"BFCL multi-turn data not found under {d}")
    return d


def loaded(cls, config=None, long_context=False):
    inst = cls()
    inst.load_scenario(config or {}, long_context=long_context)
    return inst


def fs(tree, long_context=False) -> GorillaFileSystem:
    return loaded(GorillaFileSystem, {"root": {"home": {"type": "directory", "contents": tree}}}, long_context)


def d(**contents):
    return {"type": "directory", "contents": contents}


def f(text=""):
    return {"type": "file", "content": text}


# ---- file system ----


def test_fs_navigation_listing_and_paths():
    s = fs({"docs": d(**{"a.txt": f("x"), ".hidden": f()}), "b.txt": f()})
    assert s.ls() == {"current_directory_content": ["docs", "b.txt"]}
    assert s.cd(folder="docs") == {"current_working_directory": "docs"}
    assert s.ls()["current_directory_content"] == ["a.txt"]
    assert s.ls(a=True)["current_directory_content"] == ["a.txt", ".hidden"]
    assert s.pwd() == {"current_working_directory": "/home/docs"}
    assert "error" in s.cd(folder="docs/deeper")  # one level at a time, as the doc says
    assert "error" in s.cd(folder="missing")
    assert s.cd(folder="..") == {"current_working_directory": "home"}
    assert "error" in s.cd(folder="..")  # already at the root
    s.cd(folder="docs")
    assert s.cd(folder="/") == {"current_working_directory": "home"}
    assert s.find(path=".", name="a") == {"matches": ["./docs/a.txt"]}
    assert "error" in s.find(path="nowhere")


def test_fs_create_write_read_and_their_errors():
    s = fs({})
    assert s.touch(file_name="n.txt") == {}
    assert "error" in s.touch(file_name="n.txt")  # exists
    assert "error" in s.touch(file_name="a/b")  # invalid character
    assert s.echo(content="hello") == {"terminal_output": "hello"}
    assert "error" in s.echo(content="x", file_name="absent.txt")  # echo writes existing files only
    assert s.echo(content="b\na\nc a", file_name="n.txt") == {}
    assert s.cat(file_name="n.txt") == {"file_content": "b\na\nc a"}
    assert s.sort(file_name="n.txt") == {"sorted_content": "a\nb\nc a"}
    assert s.grep(file_name="n.txt", pattern="a") == {"matching_lines": ["a", "c a"]}
    assert s.tail(file_name="n.txt", lines=2) == {"last_lines": "a\nc a"}
    assert s.wc(file_name="n.txt", mode="w") == {"count": 4, "type": "words"}
    assert s.wc(file_name="n.txt") == {"count": 3, "type": "lines"}
    assert "error" in s.wc(file_name="n.txt", mode="z")
    assert s.du() == {"disk_usage": "7 bytes"}
    assert s.mkdir(dir_name="sub") == {}
    assert "error" in s.mkdir(dir_name="sub")
    assert "error" in s.cat(file_name="sub")  # a directory
    assert "error" in s.rmdir(dir_name="n.txt")


def test_fs_diff_format_is_bfcls():
    s = fs({"a": f("same\nold one\nextra"), "b": f("same\nnew one")})
    # Pairs by position, reports only differing pairs, ignores lines past the shorter file (the ground truth quotes it).
    assert s.diff(file_name1="a", file_name2="b") == {"diff_lines": "- old one\n+ new one"}
    assert "error" in s.diff(file_name1="a", file_name2="zzz")


def test_fs_mv_cp_rm_semantics():
    s = fs({"dir": d(), "r.txt": f("R"), "t": d(**{"inner.txt": f("I")})})
    assert s.mv(source="r.txt", destination="dir") == {"result": "'r.txt' moved to 'dir/r.txt'"}
    assert "r.txt" not in s.ls()["current_directory_content"]
    assert s.mv(source="t", destination="renamed")["result"] == "'t' moved to 'renamed'"
    assert "error" in s.mv(source="renamed", destination="a/b")  # no paths in the destination
    assert "error" in s.mv(source="ghost", destination="dir")
    assert s.cp(source="renamed", destination="copy")["result"] == "'renamed' copied to 'copy'"
    s.cd(folder="copy")
    s.echo(content="changed", file_name="inner.txt")
    s.cd(folder="..")
    s.cd(folder="renamed")
    assert s.cat(file_name="inner.txt") == {"file_content": "I"}  # a copy is deep: the original is untouched
    s.cd(folder="..")
    assert "error" in s.rmdir(dir_name="copy")  # not empty
    assert s.rm(file_name="copy") == {"result": "'copy' removed"}
    assert "error" in s.rm(file_name="copy")


def test_fs_state_is_the_tree_not_the_current_directory():
    a, b = fs({"x": d()}), fs({"x": d()})
    a.cd(folder="x")
    assert a.state() == b.state()  # BFCL compares the tree only
    a.touch(file_name="new")
    assert a.state() != b.state()
    json.dumps(a.state())


def test_fs_long_context_pads_files_and_innermost_directories():
    s = fs({"log.txt": f("L"), "notes.txt": f("N"), "deep": d(**{"x.txt": f("X")})}, long_context=True)
    assert s.cat(file_name="log.txt") == {"file_content": "L"}  # BFCL leaves files whose tail is asked for alone
    assert len(s.cat(file_name="notes.txt")["file_content"]) > 1000
    assert len(s.ls()["current_directory_content"]) == 3  # "home" has a subdirectory: not padded
    s.cd(folder="deep")
    assert len(s.ls()["current_directory_content"]) > 10  # innermost: BFCL's many image files


# ---- math ----


def test_math_results_and_errors():
    m = loaded(MathAPI)
    assert m.add(a=2, b=3.5) == {"result": 5.5}
    assert m.divide(a=1, b=0) == {"error": "Cannot divide by zero"}
    assert m.logarithm(value=100, base=10, precision=5) == {"result": 2.0}
    assert m.logarithm(value=630.0, base=10, precision=5) == {"result": 2.7993}
    assert "error" in m.logarithm(value=-1, base=10, precision=3)
    assert m.mean(numbers=[1, 2, 3, 4]) == {"result": 2.5}
    assert "error" in m.mean(numbers=[])
    assert m.standard_deviation(numbers=[2, 4, 4, 4, 5, 5, 7, 9]) == {"result": 2.0}  # population
    assert m.square_root(number=2, precision=3) == {"result": 1.41}
    assert "error" in m.square_root(number=-4, precision=3)
    assert m.si_unit_conversion(value=1.5, unit_in="km", unit_out="m") == {"result": 1500.0}
    assert "error" in m.si_unit_conversion(value=1, unit_in="km", unit_out="lightyear")
    assert m.imperial_si_conversion(value=100, unit_in="celsius", unit_out="fahrenheit") == {"result": 212.0}
    assert m.percentage(part=1, whole=4) == {"result": 25.0}
    assert m.round_number(number=3.14159, decimal_places=2) == {"result": 3.14}
    assert "error" in m.power(base=10, exponent=10**9)  # refused before it is computed
    assert m.state() == {}


# ---- message ----


def test_message_login_send_delete_and_deterministic_ids():
    a, b = loaded(MessageAPI), loaded(MessageAPI)
    assert a.send_message(receiver_id="USR002", message="hi") == {"error": "No user is currently logged in."}
    assert a.message_login(user_id="USR999")["login_status"] is False
    assert a.message_login(user_id="USR001")["login_status"] is True
    b.message_login(user_id="USR001")
    sent_a, sent_b = a.send_message(receiver_id="USR002", message="hi"), b.send_message(receiver_id="USR002", message="hi")
    assert sent_a == sent_b and sent_a["sent_status"] is True  # same seed, same id
    assert "error" in a.send_message(receiver_id="USR404", message="x")
    assert a.view_messages_sent()["messages"]["USR002"] == ["My name is Alice. I want to connect.", "hi"]
    assert a.delete_message(receiver_id="USR002")["deleted_status"] is True  # the latest one goes
    assert a.view_messages_sent()["messages"]["USR002"] == ["My name is Alice. I want to connect."]
    assert a.add_contact(user_name="Eve") == {"added_status": True, "user_id": "USR005",
                                              "message": "Contact 'Eve' added successfully."}
    assert "error" in a.add_contact(user_name="Eve")
    assert a.search_messages(keyword="UPLOAD")["results"][0]["receiver_id"] == "USR003"
    json.dumps(a.state())


# ---- posting ----


def test_posting_auth_tweets_comments_retweets():
    t = loaded(TwitterAPI, {"username": "ann", "password": "pw", "tweet_counter": 5,
                            "tweets": {"4": {"id": 4, "username": "bob", "content": "Hello #x", "tags": ["#x"], "mentions": []}}})
    assert "error" in t.post_tweet(content="no login")
    assert t.authenticate_twitter(username="ann", password="wrong") == {"authentication_status": False}
    assert t.authenticate_twitter(username="ann", password="pw") == {"authentication_status": True}
    tweet = t.post_tweet(content="first", tags=["#a"])
    assert tweet == {"id": 5, "username": "ann", "content": "first", "tags": ["#a"], "mentions": []}
    assert t.get_tweet(tweet_id=4)["username"] == "bob"  # config keys are strings, calls use integers
    assert t.retweet(tweet_id=4) == {"retweet_status": "Successfully retweeted"}
    assert t.retweet(tweet_id=4) == {"retweet_status": "Already retweeted"}
    assert "error" in t.comment(tweet_id=99, comment_content="x")
    assert t.comment(tweet_id=4, comment_content="nice") == {"comment_status": "Comment added successfully"}
    assert t.get_tweet_comments(tweet_id=4) == {"comments": [{"username": "ann", "content": "nice"}]}
    assert [x["id"] for x in t.search_tweets(keyword="#X")["matching_tweets"]] == [4]
    assert t.follow_user(username_to_follow="alice") == {"follow_status": False}  # default list has alice
    assert t.get_user_stats(username="ann") == {"tweet_count": 1, "following_count": 2, "retweet_count": 1}


# ---- ticket ----


def test_ticket_login_create_edit_resolve():
    k = loaded(TicketAPI)
    assert "error" in k.create_ticket(title="t")
    assert k.ticket_login(username="u", password="") == {"success": False}
    assert k.ticket_login(username="u", password="p") == {"success": True}
    assert "error" in k.create_ticket(title="t", priority=9)
    ticket = k.create_ticket(title="Broken", description="screen")
    assert ticket == {"id": 1, "title": "Broken", "description": "screen", "status": "Open", "priority": 1,
                      "created_by": "u"}
    assert "error" in k.edit_ticket(ticket_id=1, updates={"owner": "x"})
    assert k.edit_ticket(ticket_id=1, updates={"priority": 3, "title": None})["status"].endswith("successfully.")
    assert k.get_ticket(ticket_id=1)["priority"] == 3 and k.get_ticket(ticket_id=1)["title"] == "Broken"
    assert "error" in k.get_ticket(ticket_id=2)
    assert k.resolve_ticket(ticket_id=1, resolution="fixed")["status"].endswith("successfully.")
    assert "error" in k.resolve_ticket(ticket_id=1, resolution="again")
    assert [t["id"] for t in k.get_user_tickets(status="resolved")["tickets"]] == [1]
    assert k.logout() == {"success": True} and "error" in k.get_user_tickets()


# ---- trading ----


def test_trading_orders_funds_and_fixed_clock():
    a = loaded(TradingBot, {"market_status": "Open"})
    assert a.get_current_time() == {"current_time": "10:30 AM"}
    assert "error" in a.place_order(order_type="Buy", symbol="AAPL", price=1.0, amount=1)  # not logged in
    a.trading_login(username="u", password="p")
    assert "error" in a.place_order(order_type="Buy", symbol="AAPL", price=227.16, amount=1000)  # insufficient
    assert "error" in a.place_order(order_type="Buy", symbol="NOPE", price=1.0, amount=1)
    order = a.place_order(order_type="Buy", symbol="AAPL", price=227.16, amount=2)
    assert order == {"order_id": 12446, "order_type": "Buy", "status": "Pending", "price": 227.16, "amount": 2}
    assert "error" in a.cancel_order(order_id=12345)  # completed
    assert a.fund_account(amount=500.0)["new_balance"] == 10500.0
    assert a.withdraw_funds(amount=100.0)["new_balance"] == 10400.0
    history = a.get_transaction_history()["transaction_history"]
    assert [h["type"] for h in history] == ["deposit", "withdrawal"]
    assert all(h["timestamp"].startswith(("2024-09-01", "2024-09-02")) for h in history)  # no wall clock
    b = loaded(TradingBot, {"market_status": "Open"})
    b.trading_login(username="u", password="p")
    b.place_order(order_type="Buy", symbol="AAPL", price=227.16, amount=2)
    b.fund_account(amount=500.0)
    b.withdraw_funds(amount=100.0)
    assert a.state() == b.state()  # seeded per instance: same timestamps
    c = loaded(TradingBot)
    c.trading_login(username="u", password="p")
    assert "error" in c.withdraw_funds(amount=1.0)  # the default market is closed
    assert a.add_to_watchlist(stock="TSLA") == {"watchlist": ["NVDA", "TSLA"]}


# ---- travel ----


def _logged_in_travel(config=None) -> tuple[TravelAPI, str]:
    t = loaded(TravelAPI, config)
    token = t.authenticate_travel(client_id="c", client_secret="s", refresh_token="r", grant_type="read_write",
                                  user_first_name="Ann", user_last_name="Lee")["access_token"]
    return t, token


def test_travel_booking_refund_and_deterministic_ids():
    card = {"card1": {"card_number": "1", "balance": 1000.0}}
    t, token = _logged_in_travel({"credit_card_list": card})
    t2, token2 = _logged_in_travel({"credit_card_list": card})
    assert token == token2 and len(token) == 6  # seeded as BFCL seeds it
    # 2024-11-15: digits sum to 14, even: BFCL doubles the fare.
    assert t.get_flight_cost(travel_from="SFO", travel_to="LAX", travel_date="2024-11-15",
                             travel_class="economy") == {"travel_cost_list": [400.0]}
    assert "error" in t.get_flight_cost(travel_from="SFO", travel_to="XXX", travel_date="2024-11-15",
                                        travel_class="economy")
    bad = t.book_flight(access_token="nope", card_id="card1", travel_date="2024-11-15", travel_from="SFO",
                        travel_to="LAX", travel_class="economy")
    assert bad == {"booking_status": False, "error": "Invalid access token"}
    booked = t.book_flight(access_token=token, card_id="card1", travel_date="2024-11-15", travel_from="SFO",
                           travel_to="LAX", travel_class="economy")
    assert booked["booking_status"] is True
    assert t.get_credit_card_balance(access_token=token, card_id="card1") == {"card_balance": 600.0}
    assert t.retrieve_invoice(access_token=token, booking_id=booked["booking_id"])["invoice"]["travel_cost"] == 400.0
    assert t.cancel_booking(access_token=token, booking_id=booked["booking_id"]) == {"cancel_status": True}
    assert t.get_credit_card_balance(access_token=token, card_id="card1") == {"card_balance": 1000.0}
    assert t.compute_exchange_rate(base_currency="USD", target_currency="EUR", value=100) == {"exchanged_value": 80.0}
    assert "error" in t.compute_exchange_rate(base_currency="EUR", target_currency="JPY", value=1)
    assert t.get_nearest_airport_by_city(location="Rivermist") == {"nearest_airport": "RMS"}


def test_travel_verification_uses_a_fixed_day():
    t, _ = _logged_in_travel()
    ok = t.verify_traveler_information(first_name="Ann", last_name="Lee", date_of_birth="1990-01-01",
                                       passport_number="US123")
    assert ok == {"verification_status": True}
    minor = t.verify_traveler_information(first_name="Ann", last_name="Lee", date_of_birth="2010-01-01",
                                          passport_number="US123")
    assert minor["verification_status"] is False
    other = t.verify_traveler_information(first_name="Bob", last_name="Lee", date_of_birth="1990-01-01",
                                          passport_number="US123")
    assert other["verification_status"] is False


# ---- vehicle ----


def test_vehicle_start_needs_locked_doors_and_full_brake():
    v = loaded(VehicleControlAPI, {"fuelLevel": 10.0})
    assert "error" in v.startEngine(ignitionMode="START")  # doors unlocked
    assert v.lockDoors(unlock=False, door=["driver", "passenger", "rear_left", "rear_right"]) == {
        "lockStatus": "locked", "remainingUnlockedDoors": 0}
    assert "error" in v.lockDoors(unlock=False, door=["trunk"])
    assert "error" in v.startEngine(ignitionMode="START")  # brake not pressed
    v.pressBrakePedal(pedalPosition=0.5)
    assert "error" in v.startEngine(ignitionMode="START")  # not fully
    v.pressBrakePedal(pedalPosition=1.0)
    assert v.startEngine(ignitionMode="START")["engineState"] == "running"
    assert "error" in v.setCruiseControl(speed=63, activate=True, distanceToNextVehicle=100)  # not a multiple of 5
    assert v.setCruiseControl(speed=65, activate=True, distanceToNextVehicle=100)["cruiseStatus"] == "active"
    assert "error" in v.fillFuelTank(fuelAmount=45)  # above the 50-gallon tank
    assert v.fillFuelTank(fuelAmount=40) == {"fuelLevel": 50.0}
    v.adjustClimateControl(temperature=212, unit="fahrenheit")
    assert v.state()["acTemperature"] == 100.0  # stored in Celsius
    assert v.estimate_distance(cityA="83214", cityB="74532") == {"distance": 750.0}
    assert "error" in v.estimate_distance(cityA="1", cityB="2")
    assert v.get_outside_temperature_from_weather_com() == {"error": 404}


def test_vehicle_config_spelling_and_door_count():
    v = loaded(VehicleControlAPI, {"engineState": "running", "remainingUnlockedDoors": 4,
                                   "doorStatus": {"driver": "locked", "passenger": "locked", "rear_left": "unlocked",
                                                  "rear_right": "locked"}})
    st = v.state()
    assert st["engine_state"] == "running" and st["remainingUnlockedDoors"] == 1  # recomputed from the doors


# ---- shared properties ----


def test_every_simulator_state_is_json_and_instances_share_nothing():
    for cls in CLASSES.values():
        a, b = loaded(cls), loaded(cls)
        json.dumps(a.state())
        assert a.state() == b.state()
        a.state().clear()  # a snapshot is a copy
        assert a.state() == b.state()
    m1, m2 = loaded(MessageAPI), loaded(MessageAPI)
    m1.add_contact(user_name="Zed")
    assert "Zed" not in m2.user_map and "Zed" not in loaded(MessageAPI).user_map  # defaults are not shared
    config = {"ticket_queue": [{"id": 1, "title": "t", "status": "Open", "created_by": "u"}], "current_user": "u"}
    k = loaded(TicketAPI, config)
    k.close_ticket(ticket_id=1)
    assert config["ticket_queue"][0]["status"] == "Open"  # the entry's config is never mutated


# ---- execute ----


class _Raising(Simulator):
    CLASS_NAME = "NotInBfcl"

    def load_scenario(self, config, long_context=False):
        pass

    def explode(self, x: int) -> dict:
        raise RuntimeError("boom " * 500)


def test_execute_error_results_never_raise(bfcl_dir):
    entry = {"id": "multi_turn_base_x", "involved_classes": ["GorillaFileSystem", "MathAPI"],
             "initial_config": {"GorillaFileSystem": {"root": {"r": d(**{"a.txt": f("1\n2\n3")})}}}}
    inst = instances_for(entry, bfcl_dir)
    assert execute(inst, "tail", {"file_name": "a.txt", "lines": 2}, None) == {"last_lines": "2\n3"}
    assert "not found" in execute(inst, "rm_rf", {}, None)["error"]
    assert "not available" in execute(inst, "tail", {"file_name": "a.txt"}, {"cat"})["error"]
    assert "invalid arguments" in execute(inst, "tail", {"file_name": 5}, None)["error"]  # wrong type
    assert "invalid arguments" in execute(inst, "tail", {}, None)["error"]  # missing required
    assert "invalid arguments" in execute(inst, "tail", {"file_name": "a.txt", "bogus": 1}, None)["error"]
    assert "error" in execute(inst, "tail", ["a.txt"], None)  # arguments not an object
    assert "error" in execute(inst, "", {}, None)
    assert "error" in execute(inst, "load_scenario", {"config": {}}, None)  # machinery is not an API function
    assert execute(inst, "tail", {"file_name": "a.txt", "lines": 1.0}, None) == {"last_lines": "3"}  # 1.0 -> 1
    assert execute(inst, "add", {"a": 1, "b": 2.5}, {"add"}) == {"result": 3.5}  # int where the doc says float
    assert execute(inst, "echo", {"content": "hi", "file_name": None}, None) == {"terminal_output": "hi"}  # null optional
    assert "invalid arguments" in execute(inst, "cat", {"file_name": None}, None)["error"]  # null required
    nested: list = []
    for _ in range(100_000):
        nested = [nested]
    assert "error" in execute(inst, "mean", {"numbers": nested}, None)  # absurd nesting: an error, not a crash
    assert "error" in execute(inst, "power", {"base": 10.0, "exponent": 400}, None)  # overflow
    raising = {"X": _Raising()}
    out = execute(raising, "explode", {"x": 1}, None)  # no doc: the signature check, then the exception caught
    assert out["error"].startswith("explode: RuntimeError: boom") and len(out["error"]) <= MAX_ERROR_CHARS
    assert "unexpected" in execute(raising, "explode", {"y": 1}, None)["error"]


def test_execute_result_is_detached_from_state(bfcl_dir):
    entry = {"id": "multi_turn_base_x", "involved_classes": ["TwitterAPI"],
             "initial_config": {"TwitterAPI": {"tweets": {"0": {"id": 0, "username": "a", "content": "c",
                                                                "tags": [], "mentions": []}}}}}
    inst = instances_for(entry, bfcl_dir)
    got = execute(inst, "get_tweet", {"tweet_id": 0}, None)
    got["content"] = "tampered"
    assert inst["TwitterAPI"].state()["tweets"][0]["content"] == "c"


def test_docs_match_simulators_and_schemas_are_closed(bfcl_dir):
    for name, cls in CLASSES.items():
        docs = class_docs(name, bfcl_dir)
        assert {doc["name"] for doc in docs} == set(api_functions(cls)), name
        for doc in docs:
            schema = parameters_schema(doc)
            assert schema["type"] == "object" and schema["additionalProperties"] is False
            assert "dict" not in json.dumps(schema).replace('"dict"', "")  # BFCL names mapped
    entry = {"involved_classes": ["GorillaFileSystem"], "excluded_function": ["cp"]}
    names = {doc["name"] for doc in functions_for(entry, bfcl_dir)}
    assert "cp" not in names and "mv" in names


def test_instances_for_rejects_unknown_classes_and_detects_long_context():
    with pytest.raises(ValueError):
        instances_for({"id": "x", "involved_classes": ["NoSuchAPI"]})
    assert is_long_context({"id": "multi_turn_long_context_3"}) and not is_long_context({"id": "multi_turn_base_3"})


# ---- parse_gt_call ----


def test_parse_gt_call_literals_only():
    assert parse_gt_call("cd(folder='document')") == ("cd", {"folder": "document"})
    assert parse_gt_call("sort('final_report.pdf')") == ("sort", {"file_name": "final_report.pdf"})
    assert parse_gt_call("purchase_insurance('t', 'comprehensive', 'b1', 50.0, 'c1')")[1] == {
        "access_token": "t", "insurance_type": "comprehensive", "booking_id": "b1", "insurance_cost": 50.0,
        "card_id": "c1"}  # positional order is the signature's, not the doc's property order
    assert parse_gt_call("mean(numbers=[-1, 2.5, 1e3])") == ("mean", {"numbers": [-1, 2.5, 1000.0]})
    assert parse_gt_call("edit_ticket(ticket_id=1, updates={'priority': 2, 'title': None})")[1]["updates"] == {
        "priority": 2, "title": None}
    for bad in ("__import__('os').system('true')", "cd(folder=open('x'))", "cd(folder=x)", "os.cd('a')",
                "cd(**{'folder': 'a'})", "cd(", "lambda: 1", "sort('a', 'b', 'c')", "unknown_fn('a')"):
        with pytest.raises(ValueError):
            parse_gt_call(bad)


# ---- end to end: BFCL's ground truth replays on the simulators ----


def _jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_ground_truth_replays_on_all_800_entries(bfcl_dir):
    """Turn by turn on fresh instances, each turn offering what BFCL offers then (involved classes minus
    excluded_function, minus miss_func's held-back functions before their turn). The only error results allowed
    are the ones BFCL's own data causes, each classified: a ground-truth argument that contradicts its own doc's
    schema, or a ground-truth call to a function the data holds back at that turn."""
    started = time.monotonic()
    entries = clean = 0
    explained: dict[str, list[str]] = {"contradicts_doc": [], "held_back": []}
    unexplained: list[str] = []
    for category in CATEGORIES:
        answers = {a["id"]: a["ground_truth"] for a in _jsonl(bfcl_dir / "possible_answer" / f"BFCL_v4_{category}.json")}
        for entry in _jsonl(bfcl_dir / f"BFCL_v4_{category}.json"):
            entries += 1
            offered = {doc["name"] for doc in functions_for(entry, bfcl_dir)}
            held = {int(t): set(names) for t, names in (entry.get("missed_function") or {}).items()}
            instances = instances_for(entry, bfcl_dir)
            # Determinism, on every 4th entry (time): a second replay gives the same results and states.
            twin = instances_for(entry, bfcl_dir) if entries % 4 == 1 else None
            entry_clean = True
            for turn, calls in enumerate(answers[entry["id"]]):
                allowed = offered - {n for t, names in held.items() if t > turn for n in names}
                for call in calls:
                    name, args = parse_gt_call(call)
                    result = execute(instances, name, args, allowed)
                    if twin is not None:
                        assert execute(twin, name, args, allowed) == result, (entry["id"], call)
                    if "error" not in result:
                        continue
                    entry_clean = False
                    where = f"{entry['id']} turn {turn}: {call[:80]}"
                    if "invalid arguments" in str(result["error"]):
                        explained["contradicts_doc"].append(where)
                    elif name not in allowed and name in offered:
                        explained["held_back"].append(where)
                    else:
                        unexplained.append(f"{where} -> {result['error']}")
                for cls_name, inst in instances.items():
                    json.dumps(inst.state())
                    if twin is not None:
                        assert inst.state() == twin[cls_name].state(), (entry["id"], turn, cls_name)
            clean += entry_clean
    elapsed = time.monotonic() - started
    print(f"\nBFCL multi-turn ground-truth replay: {clean}/{entries} entries without an error result "
          f"({elapsed:.1f} s); explained: { {k: len(v) for k, v in explained.items()} }")
    for kind, where in explained.items():
        for w in where:
            print(f"  {kind}: {w}")
    assert entries == 800
    assert not unexplained, unexplained
    # Measured: 795 of 800; the 5 error results are the BFCL data defects classified above (docs/reference/suites.md).
    assert clean >= 0.99 * entries


def test_fs_bounds_hostile_growth(monkeypatch):
    import suites.bfcl_sims.file_system as fsmod

    s = fs({})
    for i in range(fsmod.MAX_DEPTH):
        assert s.mkdir(dir_name=f"d{i}") == {}
        s.cd(folder=f"d{i}")
    assert "too deeply nested" in s.mkdir(dir_name="deeper")["error"]
    monkeypatch.setattr(fsmod, "MAX_NODES", 9)
    monkeypatch.setattr(fsmod, "MAX_CHARS", 100)
    t = fs({"a": d(**{"x": f("1"), "y": f("2")})})
    assert t.cp(source="a", destination="b")["result"] == "'a' copied to 'b'"
    assert "No space left" in t.cp(source="a", destination="c")["error"]  # root + a + b + c (3 nodes each) = 10 > 9
    t.touch(file_name="big")
    assert "No space left" in t.echo(content="z" * 101, file_name="big")["error"]
    assert t.cat(file_name="big") == {"file_content": ""}
