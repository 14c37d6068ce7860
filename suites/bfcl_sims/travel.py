"""TravelAPI (travel booking): an OAuth-like login, registered credit cards, flight bookings, budget and insurance.

Owns: credit_card_list (card id -> card with balance), booking_record (booking id -> booking), the access token and
its type/expiry/scope, the user's first and last name, and budget_limit. Ids and tokens come from a per-instance
generator seeded as BFCL seeds it, so the same calls give the same ids (the ground truth quotes them). Age checks
use a fixed reference day, not the wall clock. Comparable state: all of those.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from .long_context import get as padding_get
from ._base import Config, Result, Simulator, error

DEFAULT_SEED = 141053
DEFAULTS: dict[str, Any] = {
    "credit_card_list": {}, "booking_record": {}, "access_token": None, "token_type": None,
    "token_expires_in": None, "token_scope": None, "user_first_name": None, "user_last_name": None,
    "budget_limit": None,
}
REFERENCE_DAY = date(2024, 9, 1)
"""'Today' for the traveler's age: fixed so a verdict never depends on the day a run happens."""

# Route base fares (economy, USD): "FROM TO:fare ..." per line, in BFCL's table order (long context lists them all).
_FARES = """
    SFO LAX:200 JFK:500 ORD:400 BOS:450 RMS:300 SBK:350 MPC:370 SVP:320 SHD:330 SSV:340 OKD:360 WLB:310 CRH:380 ATV:390 PHV:420 GFD:430 CIA:700
    LAX SFO:100 JFK:600 ORD:500 BOS:550 RMS:310 SBK:320 MPC:330 SVP:340 SHD:350 SSV:360 OKD:370 WLB:380 CRH:390 ATV:400 PHV:410 GFD:420 HND:430
    JFK ORD:300 BOS:250 RMS:450 SBK:460 MPC:470 SVP:480 SHD:490 SSV:500 OKD:510 WLB:520 CRH:530 ATV:540 PHV:550 GFD:560 LAX:570 HND:800 PVG:950 PEK:1000
    ORD LAX:180 BOS:200 RMS:350 SBK:360 MPC:370 SVP:380 SHD:390 SSV:400 OKD:410 WLB:420 CRH:430 ATV:440 PHV:450 GFD:460
    BOS RMS:400 SBK:410 MPC:420 SVP:430 SHD:440 SSV:450 OKD:460 WLB:470 CRH:480 ATV:490 PHV:500 GFD:510
    RMS BOS:200 JFK:210 SBK:220 MPC:230 SVP:240 SHD:250 SSV:260 OKD:270 WLB:280 CRH:290 ATV:300 PHV:310 GFD:320 LAX:330
    SBK MPC:200 SVP:210 SHD:220 SSV:230 OKD:240 WLB:250 CRH:260 ATV:270 PHV:280 GFD:290
    MPC SVP:210 SHD:220 SSV:230 OKD:240 WLB:250 CRH:260 ATV:270 PHV:280 GFD:290
    SVP SHD:230 SSV:240 OKD:250 WLB:260 CRH:270 ATV:280 PHV:290 GFD:300
    SHD SSV:220 OKD:230 WLB:240 CRH:250 ATV:260 PHV:270 GFD:280
    SSV OKD:240 WLB:250 CRH:260 ATV:270 PHV:280 GFD:290
    OKD WLB:230 CRH:240 ATV:250 PHV:260 GFD:270
    WLB CRH:250 ATV:260 PHV:270 GFD:280
    CRH ATV:240 PHV:250 GFD:260 SFO:270 RMS:280 HKG:290 JFK:300
    ATV PHV:230 GFD:240
    PHV GFD:220
    LHR CDG:100
    OKD LAX:220
"""


def _parse_fares(table: str) -> dict[tuple[str, str], int]:
    fares: dict[tuple[str, str], int] = {}
    for line in table.split("\n"):
        origin, *routes = line.split() or [""]
        for route in routes:
            dest, fare = route.split(":")
            fares[(origin, dest)] = int(fare)
    return fares


FARES = _parse_fares(_FARES)
CLASS_FACTORS = {"economy": 1, "business": 2, "first": 5}
AIRPORTS = ["RMS", "SBK", "MPC", "SVP", "SHD", "CDG", "LHR", "SSV", "OKD", "WLB", "PEK", "HND", "HKG", "CIA", "CRH",
            "ATV", "PHV", "GFD", "SFO", "LAX", "JFK", "ORD", "BOS"]
AIRPORT_BY_CITY = {
    "Rivermist": "RMS", "Stonebrook": "SBK", "Maplecrest": "MPC", "Silverpine": "SVP", "Shadowridge": "SHD",
    "London": "LHR", "Paris": "CDG", "Sunset Valley": "SSV", "Oakendale": "OKD", "Willowbend": "WLB",
    "Crescent Hollow": "CRH", "Autumnville": "ATV", "Pinehaven": "PHV", "Greenfield": "GFD", "San Francisco": "SFO",
    "Los Angeles": "LAX", "New York": "JFK", "Chicago": "ORD", "Boston": "BOS", "Beijing": "PEK", "Hong Kong": "HKG",
    "Rome": "CIA", "Tokyo": "HND",
}
USD_RATES = {"RMB": 7, "EUR": 0.8, "JPY": 110, "GBP": 0.7, "CAD": 1.3, "AUD": 1.4, "INR": 70, "RUB": 60, "BRL": 3.8,
             "MXN": 20}
"""Units of each currency per USD; only USD pairs are convertible (BFCL's table)."""


def _date_multiplier(travel_date: str) -> int:
    """BFCL's fare rule: double when the date's digits sum to an even number."""
    return 2 if sum(int(c) for c in travel_date if c.isdigit()) % 2 == 0 else 1


class TravelAPI(Simulator):
    CLASS_NAME = "TravelAPI"
    DOC_FILE = "travel_booking.json"
    STATE_FIELDS = tuple(DEFAULTS)

    # Set by load_scenario from the entry's config, else DEFAULTS (a card's or booking's fields are JSON values).
    credit_card_list: dict[str, dict[str, Any]]
    booking_record: dict[str, dict[str, Any]]
    access_token: str | None
    token_type: str | None
    token_expires_in: int | None
    token_scope: str | None
    user_first_name: str | None
    user_last_name: str | None
    budget_limit: float | None

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        self._seed(config, DEFAULT_SEED)
        for key, default in DEFAULTS.items():
            setattr(self, key, self._take(config, key, default))
        if long_context:
            for card_id, card in padding_get("CREDIT_CARD_EXTENSION").items():
                self.credit_card_list.setdefault(card_id, card)
            for booking_id, booking in padding_get("BOOKING_RECORD_EXTENSION").items():
                self.booking_record.setdefault(booking_id, booking)

    def _token_error(self, access_token: str) -> str | None:
        if self.token_expires_in == 0:
            return "Token expired"
        if access_token != self.access_token:
            return "Invalid access token"
        return None

    def authenticate_travel(self, client_id: str, client_secret: str, refresh_token: str, grant_type: str,
                            user_first_name: str, user_last_name: str) -> Result:
        """Always grants a token (6 digits, 'expires_in' 2): the simulated OAuth server accepts any client."""
        self.token_expires_in = 2
        self.access_token = str(self._random.randint(100000, 999999))
        self.token_type = "Bearer"
        self.token_scope = grant_type
        self.user_first_name = user_first_name
        self.user_last_name = user_last_name
        return {"expires_in": 2, "access_token": self.access_token, "token_type": "Bearer", "scope": grant_type}

    def travel_get_login_status(self) -> Result:
        return {"status": self.token_expires_in not in (None, 0)}

    def get_budget_fiscal_year(self, lastModifiedAfter: str | None = None, includeRemoved: str | None = None) -> Result:
        return {"budget_fiscal_year": "2018"}

    def register_credit_card(self, access_token: str, card_number: str, expiration_date: str, cardholder_name: str,
                             card_verification_number: int) -> Result:
        if self.token_expires_in is None:
            return error("Token not initialized")
        if (problem := self._token_error(access_token)) is not None:
            return error(problem)
        if card_number in self.credit_card_list:
            return error("Card already registered")
        card_id = str(self._random.randint(100000000000, 999999999999))
        self.credit_card_list[card_id] = {
            "card_number": card_number, "expiration_date": expiration_date, "cardholder_name": cardholder_name,
            "card_verification_number": card_verification_number, "balance": self._random.randint(10000, 99999),
        }
        return {"card_id": card_id}

    def _fare(self, travel_from: str, travel_to: str, travel_date: str, travel_class: str) -> float | str:
        """The fare, or the reason there is none."""
        if (travel_from, travel_to) not in FARES:
            return "No available route for the given airports."
        if travel_class not in CLASS_FACTORS:
            return "Invalid travel class. Options are: economy, business, first."
        return float(FARES[(travel_from, travel_to)] * CLASS_FACTORS[travel_class] * _date_multiplier(travel_date))

    def get_flight_cost(self, travel_from: str, travel_to: str, travel_date: str, travel_class: str) -> Result:
        fare = self._fare(travel_from, travel_to, travel_date, travel_class)
        if isinstance(fare, str):
            return error(fare)
        if self.long_context:
            # Long context answers with every route's fare for that class and date (BFCL's padding).
            factor = CLASS_FACTORS[travel_class] * _date_multiplier(travel_date)
            return {"travel_cost_list": [float(base * factor) for base in FARES.values()]}
        return {"travel_cost_list": [fare]}

    def get_credit_card_balance(self, access_token: str, card_id: str) -> Result:
        if (problem := self._token_error(access_token)) is not None:
            return error(problem)
        if card_id not in self.credit_card_list:
            return error(f"Card not registered. Here are a list of card_id's: {list(self.credit_card_list)}")
        return {"card_balance": self.credit_card_list[card_id]["balance"]}

    def book_flight(self, access_token: str, card_id: str, travel_date: str, travel_from: str, travel_to: str,
                    travel_class: str) -> Result:
        def refused(reason: str) -> Result:
            return {"booking_status": False, "error": reason}

        if (problem := self._token_error(access_token)) is not None:
            return refused(problem)
        card = self.credit_card_list.get(card_id)
        if card is None:
            return refused("Card not registered")
        if "balance" not in card:
            return refused("Balance not found")
        if travel_from not in AIRPORTS:
            return refused(f"Invalid departure airport code: {travel_from}")
        if travel_to not in AIRPORTS:
            return refused(f"Invalid destination airport code: {travel_to}")
        try:
            datetime.strptime(travel_date, "%Y-%m-%d")
        except ValueError:
            return refused("Invalid date format. Use YYYY-MM-DD.")
        if travel_class not in CLASS_FACTORS:
            return refused(f"Invalid travel class. Must be one of {sorted(CLASS_FACTORS)}")
        fare = self._fare(travel_from, travel_to, travel_date, travel_class)
        if isinstance(fare, str):
            return refused(fare)
        if card["balance"] < fare:
            return refused("Insufficient funds")
        if self.budget_limit is not None and card["balance"] < self.budget_limit:
            return refused("Balance is less than budget limit")
        card["balance"] -= fare
        booking_id = str(self._random.randint(1000000, 9999999))
        transaction_id = str(self._random.randint(10000000, 99999999))
        self.booking_record[booking_id] = {
            "card_id": card_id, "travel_date": travel_date, "travel_from": travel_from, "travel_to": travel_to,
            "travel_class": travel_class, "travel_cost": fare, "transaction_id": transaction_id,
        }
        history = self.booking_record if self.long_context else {}
        return {"booking_id": booking_id, "transaction_id": transaction_id, "booking_status": True,
                "booking_history": history}

    def retrieve_invoice(self, access_token: str, booking_id: str | None = None, insurance_id: str | None = None) -> Result:
        if (problem := self._token_error(access_token)) is not None:
            return error(problem)
        booking = self.booking_record.get(booking_id) if booking_id is not None else None
        if booking is None:
            return error("Booking not found")
        fields = ("travel_date", "travel_from", "travel_to", "travel_class", "travel_cost", "transaction_id")
        return {"invoice": {"booking_id": booking_id, **{f: booking.get(f) for f in fields}}}

    def get_booking_history(self, access_token: str) -> Result:
        if (problem := self._token_error(access_token)) is not None:
            return error(problem)
        return {"booking_history": self.booking_record}

    def list_all_airports(self) -> Result:
        return {"airports": list(AIRPORTS)}

    def cancel_booking(self, access_token: str, booking_id: str) -> Result:
        """Refunds the fare to the card that paid, then forgets the booking."""
        if (problem := self._token_error(access_token)) is not None:
            return {"cancel_status": False, "error": problem}
        booking = self.booking_record.get(booking_id)
        if booking is None:
            return {"cancel_status": False, "error": "Booking not found"}
        card = self.credit_card_list.get(booking["card_id"])
        if card is not None:
            card["balance"] += booking["travel_cost"]
        del self.booking_record[booking_id]
        return {"cancel_status": True}

    def compute_exchange_rate(self, base_currency: str, target_currency: str, value: float) -> Result:
        if base_currency == "USD" and target_currency in USD_RATES:
            return {"exchanged_value": float(value * USD_RATES[target_currency])}
        if target_currency == "USD" and base_currency in USD_RATES:
            return {"exchanged_value": round(value / USD_RATES[base_currency], 2)}
        return error("No available exchange rate for the given currencies.")

    def verify_traveler_information(self, first_name: str, last_name: str, date_of_birth: str,
                                    passport_number: str) -> Result:
        if self.user_first_name != first_name or self.user_last_name != last_name:
            return {"verification_status": False,
                    "verification_failure": "Cannot book flight information for another user."
                                            f"Expected {self.user_first_name} {self.user_last_name}, got {first_name} {last_name}"}
        try:
            born = datetime.strptime(date_of_birth, "%Y-%m-%d").date()
        except ValueError:
            return {"verification_status": False,
                    "verification_failure": "Invalid date of birth format. Please use YYYY-MM-DD."}
        today = REFERENCE_DAY
        age = today.year - born.year - ((today.month, today.day) < (born.month, born.day))
        if age < 18:
            return {"verification_status": False, "verification_failure": "Traveler must be at least 18 years old."}
        if not passport_number.startswith("US"):
            return {"verification_status": False,
                    "verification_failure": "Passport must be issued by the United States."}
        return {"verification_status": True}

    def set_budget_limit(self, access_token: str, budget_limit: float) -> Result:
        if (problem := self._token_error(access_token)) is not None:
            return error(problem)
        self.budget_limit = float(budget_limit)
        return {"budget_limit": self.budget_limit}

    def get_nearest_airport_by_city(self, location: str) -> Result:
        return {"nearest_airport": AIRPORT_BY_CITY.get(location, "Unknown")}

    def purchase_insurance(self, access_token: str, insurance_type: str, booking_id: str, insurance_cost: float,
                           card_id: str) -> Result:
        def refused(reason: str) -> Result:
            return {"insurance_status": False, "error": reason}

        if (problem := self._token_error(access_token)) is not None:
            return refused(problem)
        if self.budget_limit is not None and self.budget_limit < insurance_cost:
            return refused("Exceeded budget limit")
        if booking_id not in self.booking_record:
            return refused("Booking not found")
        if card_id not in self.credit_card_list:
            return refused("Credit card not registered")
        self.credit_card_list[card_id]["balance"] -= insurance_cost
        return {"insurance_id": str(self._random.randint(100000000, 999999999)), "insurance_status": True}

    def contact_customer_support(self, booking_id: str, message: str) -> Result:
        if booking_id not in self.booking_record:
            return error("Booking not found")
        return {"customer_support_message": "Thank you for contacting customer support. Your message has been "
                                            "received and we will get back to you shortly."}

    def get_all_credit_cards(self) -> Result:
        return {"credit_card_list": self.credit_card_list}

