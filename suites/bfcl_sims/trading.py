"""TradingBot: a brokerage account, its orders, a stock table, a watchlist and the transaction history.

Owns: orders (id -> order), account_info (balance, ...), authenticated, market_status, order_counter (the next order
id), stocks (symbol -> quote), watch_list and transaction_history. The clock is fixed at BFCL's 2024-09-01 10:30, and
transaction timestamps come from a per-instance generator seeded as BFCL seeds it (no wall clock). Comparable
state: all of those.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from .long_context import get as padding_get
from ._base import Config, Result, Simulator, error

CURRENT_TIME = datetime(2024, 9, 1, 10, 30)
DEFAULT_SEED = 1053520
DEFAULTS = {
    "orders": {
        12345: {"id": 12345, "order_type": "Buy", "symbol": "AAPL", "price": 210.65, "amount": 10, "status": "Completed"},
        12446: {"id": 12446, "order_type": "Sell", "symbol": "GOOG", "price": 2840.56, "amount": 5, "status": "Pending"},
    },
    "account_info": {"account_id": 12345, "balance": 10000.0, "binding_card": 1974202140965533},
    "authenticated": False,
    "market_status": "Closed",
    "order_counter": 12446,
    "stocks": {
        "AAPL": {"price": 227.16, "percent_change": 0.17, "volume": 2.552, "MA(5)": 227.11, "MA(20)": 227.09},
        "GOOG": {"price": 2840.34, "percent_change": 0.24, "volume": 1.123, "MA(5)": 2835.67, "MA(20)": 2842.15},
        "TSLA": {"price": 667.92, "percent_change": -0.12, "volume": 1.654, "MA(5)": 671.15, "MA(20)": 668.2},
        "MSFT": {"price": 310.23, "percent_change": 0.09, "volume": 3.234, "MA(5)": 309.88, "MA(20)": 310.11},
        "NVDA": {"price": 220.34, "percent_change": 0.34, "volume": 1.234, "MA(5)": 220.45, "MA(20)": 220.67},
        "ALPH": {"price": 1320.45, "percent_change": -0.08, "volume": 1.567, "MA(5)": 1321.12, "MA(20)": 1325.78},
        "OMEG": {"price": 457.23, "percent_change": 0.12, "volume": 2.345, "MA(5)": 456.78, "MA(20)": 458.12},
        "QUAS": {"price": 725.89, "percent_change": -0.03, "volume": 1.789, "MA(5)": 726.45, "MA(20)": 728.0},
        "NEPT": {"price": 88.34, "percent_change": 0.19, "volume": 0.654, "MA(5)": 88.21, "MA(20)": 88.67},
        "SYNX": {"price": 345.67, "percent_change": 0.11, "volume": 2.112, "MA(5)": 345.34, "MA(20)": 346.12},
        "ZETA": {"price": 22.09, "percent_change": -0.05, "volume": 0.789, "MA(5)": 22.12, "MA(20)": 22.34},
    },
    "watch_list": ["NVDA"],
    "transaction_history": [],
}
SYMBOLS_BY_NAME = {
    "Apple": "AAPL", "Google": "GOOG", "Tesla": "TSLA", "Microsoft": "MSFT", "Nvidia": "NVDA", "Zeta Corp": "ZETA",
    "Alpha Tech": "ALPH", "Omega Industries": "OMEG", "Quasar Ltd.": "QUAS", "Neptune Systems": "NEPT",
    "Synex Solutions": "SYNX", "Amazon": "AMZN", "Gorilla": "GORI",
}
SECTORS = {"Technology": ["AAPL", "GOOG", "MSFT", "NVDA"], "Automobile": ["TSLA", "F", "GM"]}
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


def _parse_day(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return None


class TradingBot(Simulator):
    CLASS_NAME = "TradingBot"
    DOC_FILE = "trading_bot.json"
    STATE_FIELDS = tuple(DEFAULTS)

    # Set by load_scenario from the entry's config, else DEFAULTS (JSON values: an order's or account's fields vary).
    orders: dict[int | str, dict[str, Any]]
    account_info: dict[str, Any]
    authenticated: bool
    market_status: str
    order_counter: int
    stocks: dict[str, dict[str, float]]
    watch_list: list[str]
    transaction_history: list[dict[str, Any]]

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        self._seed(config, DEFAULT_SEED)
        for key, default in DEFAULTS.items():
            setattr(self, key, self._take(config, key, default))
        # JSON config keys are strings; order ids are integers in calls.
        self.orders = {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in self.orders.items()}

    def _timestamp(self) -> str:
        """A time within the day after CURRENT_TIME, drawn as BFCL draws it (one randint over that second range)."""
        seconds = self._random.randint(0, 24 * 3600)
        return (CURRENT_TIME + timedelta(seconds=seconds)).strftime(TIMESTAMP_FORMAT)

    def _need_login(self, action: str) -> Result | None:
        if not self.authenticated:
            return error(f"User not authenticated. Please log in to {action}.")
        return None

    def get_current_time(self) -> Result:
        return {"current_time": CURRENT_TIME.strftime("%I:%M %p")}

    def get_symbol_by_name(self, name: str) -> Result:
        return {"symbol": SYMBOLS_BY_NAME.get(name, "Stock not found")}

    def get_stock_info(self, symbol: str) -> Result:
        if symbol not in self.stocks:
            return error(f"Stock with symbol '{symbol}' not found.")
        stock = dict(self.stocks[symbol])
        if self.long_context:
            stock["MA(5)"] = padding_get("MA_5_EXTENSION")
            stock["MA(20)"] = padding_get("MA_20_EXTENSION")
        return stock

    def get_order_details(self, order_id: int) -> Result:
        if order_id not in self.orders:
            return error(f"Order with ID {order_id} not found. Here is the list of orders_id: {list(self.orders)}")
        order = dict(self.orders[order_id])
        if self.long_context:
            symbol = str(order.get("symbol", ""))
            order["metadata"] = {k: v.replace("{symbol}", symbol)
                                 for k, v in padding_get("ORDER_DETAIL_EXTENSION").items()}
        return order

    def cancel_order(self, order_id: int) -> Result:
        if order_id not in self.orders:
            return error(f"Order with ID {order_id} not found.")
        if self.orders[order_id].get("status") == "Completed":
            return error(f"Can't cancel order {order_id}. Order is already completed.")
        self.orders[order_id]["status"] = "Cancelled"
        return {"order_id": order_id, "status": "Cancelled"}

    def place_order(self, order_type: str, symbol: str, price: float, amount: int) -> Result:
        if (denied := self._need_login("place an order")) is not None:
            return denied
        if symbol not in self.stocks:
            return error(f"Invalid stock symbol: {symbol}")
        if price <= 0 or amount <= 0:
            return error("Price and amount must be positive values.")
        balance = self.account_info.get("balance", 0)
        if order_type.lower() == "buy" and float(price) * int(amount) > balance:
            return error(f"Insufficient funds: required ${float(price) * int(amount):.2f} but only ${balance:.2f} available.")
        order_id = self.order_counter
        self.orders[order_id] = {"id": order_id, "order_type": order_type, "symbol": symbol, "price": float(price),
                                 "amount": amount, "status": "Open"}
        self.order_counter += 1
        return {"order_id": order_id, "order_type": order_type, "status": "Pending", "price": float(price),
                "amount": amount}

    def withdraw_funds(self, amount: float) -> Result:
        if (denied := self._need_login("make a transaction")) is not None:
            return denied
        if self.market_status != "Open":
            return error("Market is closed. Transactions are not allowed.")
        if amount <= 0:
            return error("Transaction amount must be positive.")
        if amount > self.account_info["balance"]:
            return error("Insufficient funds for withdrawal.")
        self.account_info["balance"] -= amount
        self.transaction_history.append({"type": "withdrawal", "amount": amount, "timestamp": self._timestamp()})
        return {"status": "Withdrawal successful", "new_balance": self.account_info["balance"]}

    def get_account_info(self) -> Result:
        if (denied := self._need_login("view account information")) is not None:
            return denied
        return dict(self.account_info)

    def trading_login(self, username: str, password: str) -> Result:
        """Any credentials log in (BFCL's rule)."""
        if self.authenticated:
            return {"status": "Already logged in"}
        self.authenticated = True
        return {"status": "Logged in successfully"}

    def trading_get_login_status(self) -> Result:
        return {"status": bool(self.authenticated)}

    def trading_logout(self) -> Result:
        if not self.authenticated:
            return {"status": "No user is currently logged in"}
        self.authenticated = False
        return {"status": "Logged out successfully"}

    def fund_account(self, amount: float) -> Result:
        if (denied := self._need_login("fund the account")) is not None:
            return denied
        if amount <= 0:
            return error("Funding amount must be positive.")
        self.account_info["balance"] += amount
        self.transaction_history.append({"type": "deposit", "amount": amount, "timestamp": self._timestamp()})
        return {"status": "Account funded successfully", "new_balance": self.account_info["balance"]}

    def remove_stock_from_watchlist(self, symbol: str) -> Result:
        if (denied := self._need_login("modify the watchlist")) is not None:
            return denied
        if symbol not in self.watch_list:
            return error(f"Stock {symbol} not found in watchlist.")
        self.watch_list.remove(symbol)
        return {"status": f"Stock {symbol} removed from watchlist successfully."}

    def get_watchlist(self) -> Result:
        if (denied := self._need_login("view the watchlist")) is not None:
            return denied
        watch = list(self.watch_list)
        if self.long_context:
            watch += padding_get("WATCH_LIST_EXTENSION")
        return {"watchlist": watch}

    def get_order_history(self) -> Result:
        if (denied := self._need_login("view order history")) is not None:
            return denied
        return {"history": list(self.orders)}

    def get_transaction_history(self, start_date: str | None = None, end_date: str | None = None) -> Result:
        """Transactions between the two days inclusive of midnight bounds (BFCL's comparison); absent = unbounded."""
        if (denied := self._need_login("view transaction history")) is not None:
            return denied
        start, end = datetime.min, datetime.max
        if start_date and start_date != "None":
            if (start_day := _parse_day(start_date)) is None:
                return error(f"Invalid start_date '{start_date}': use YYYY-MM-DD.")
            start = start_day
        if end_date and end_date != "None":
            if (end_day := _parse_day(end_date)) is None:
                return error(f"Invalid end_date '{end_date}': use YYYY-MM-DD.")
            end = end_day
        history = [t for t in self.transaction_history
                   if start <= datetime.strptime(t["timestamp"], TIMESTAMP_FORMAT) <= end]
        if self.long_context:
            history += padding_get("TRANSACTION_HISTORY_EXTENSION")
        return {"transaction_history": history}

    def get_available_stocks(self, sector: str) -> Result:
        stocks = list(SECTORS.get(sector, []))
        if self.long_context and sector in ("Technology", "Automobile"):
            stocks += padding_get("TECHNOLOGY_EXTENSION" if sector == "Technology" else "AUTOMOBILE_EXTENSION")
        return {"stock_list": stocks}

    def filter_stocks_by_price(self, stocks: list[str], min_price: float, max_price: float) -> Result:
        def price(symbol: str) -> float:
            return self.stocks.get(symbol, {}).get("price", 0)

        return {"filtered_stocks": [s for s in stocks if min_price <= price(s) <= max_price]}

    def add_to_watchlist(self, stock: str) -> Result:
        """Adds a known symbol once; an unknown one is ignored (BFCL's behaviour), the list is returned either way."""
        if stock not in self.watch_list and stock in self.stocks:
            self.watch_list.append(stock)
        return {"watchlist": list(self.watch_list)}

    def notify_price_change(self, stocks: list[str], threshold: float) -> Result:
        changed = [s for s in stocks if s in self.stocks and abs(self.stocks[s]["percent_change"]) >= threshold]
        if changed:
            return {"notification": f"Stocks {', '.join(changed)} have significant price changes."}
        return {"notification": "No significant price changes in the selected stocks."}
