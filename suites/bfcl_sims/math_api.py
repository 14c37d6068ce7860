"""MathAPI: stateless arithmetic and statistics (the docs' functions), results as {"result": number}.

Owns no state (BFCL's MathAPI has none; its initial_config entries are ignored as BFCL ignores them). Precision
arguments use `decimal` at that many significant digits, then a float, so results stay JSON numbers.
"""

from __future__ import annotations

import math
from decimal import Decimal, InvalidOperation, localcontext

from ._base import Config, Result, Simulator, error

TO_METERS = {"km": 1000.0, "m": 1.0, "cm": 0.01, "mm": 0.001, "um": 1e-6, "nm": 1e-9}
IMPERIAL_FACTORS = {
    "cm_to_in": 0.393701, "in_to_cm": 2.54, "m_to_ft": 3.28084, "ft_to_m": 0.3048, "m_to_yd": 1.09361,
    "yd_to_m": 0.9144, "km_to_miles": 0.621371, "miles_to_km": 1.60934, "kg_to_lb": 2.20462, "lb_to_kg": 0.453592,
}
MAX_PRECISION = 1000
"""A hostile precision must not make decimal allocate without bound."""
MAX_RESULT_BITS = 4096
MAX_DECIMAL_PLACES = 400
"""round_number's decimal_places at most this far from 0: round(5, -10**9) computes 10**(10**9) (hours, 415 MB);
a float has no more than ~330 meaningful decimal places either way."""


def _numbers(values: object) -> list[float] | None:
    if not isinstance(values, list) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return None
    return values


class MathAPI(Simulator):
    CLASS_NAME = "MathAPI"
    DOC_FILE = "math_api.json"
    STATE_FIELDS = ()

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context

    def logarithm(self, value: float, base: float, precision: int) -> Result:
        if value <= 0 or base <= 0 or base == 1:
            return error("math domain error: value and base must be positive and base must not be 1")
        if not 0 < precision <= MAX_PRECISION:
            return error(f"precision must be between 1 and {MAX_PRECISION}")
        with localcontext() as ctx:
            ctx.prec = precision
            return {"result": float(Decimal(value).ln() / Decimal(base).ln())}

    def mean(self, numbers: list[float]) -> Result:
        nums = _numbers(numbers)
        if not numbers:
            return error("Cannot calculate mean of an empty list")
        if nums is None:
            return error("All elements in the list must be numbers")
        return {"result": sum(nums) / len(nums)}

    def standard_deviation(self, numbers: list[float]) -> Result:
        """Population standard deviation (divides by n), as BFCL's."""
        nums = _numbers(numbers)
        if not numbers:
            return error("Cannot calculate standard deviation of an empty list")
        if nums is None:
            return error("All elements in the list must be numbers")
        mean = sum(nums) / len(nums)
        return {"result": math.sqrt(sum((x - mean) ** 2 for x in nums) / len(nums))}

    def si_unit_conversion(self, value: float, unit_in: str, unit_out: str) -> Result:
        if unit_in not in TO_METERS or unit_out not in TO_METERS:
            return error(f"Conversion from '{unit_in}' to '{unit_out}' is not supported")
        return {"result": value * TO_METERS[unit_in] * (1 / TO_METERS[unit_out])}

    def imperial_si_conversion(self, value: float, unit_in: str, unit_out: str) -> Result:
        if unit_in == unit_out:
            return {"result": value}
        if (unit_in, unit_out) == ("celsius", "fahrenheit"):
            return {"result": value * 1.8 + 32}
        if (unit_in, unit_out) == ("fahrenheit", "celsius"):
            return {"result": (value - 32) * 5 / 9}
        factor = IMPERIAL_FACTORS.get(f"{unit_in}_to_{unit_out}")
        if factor is None:
            return error(f"Conversion from '{unit_in}' to '{unit_out}' is not supported")
        return {"result": value * factor}

    def add(self, a: float, b: float) -> Result:
        return {"result": a + b}

    def subtract(self, a: float, b: float) -> Result:
        return {"result": a - b}

    def multiply(self, a: float, b: float) -> Result:
        return {"result": a * b}

    def divide(self, a: float, b: float) -> Result:
        if b == 0:
            return error("Cannot divide by zero")
        return {"result": a / b}

    def power(self, base: float, exponent: float) -> Result:
        # Integer powers are exact and unbounded in Python: refuse a result too large before computing it.
        if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0 \
                and exponent * math.log2(abs(base)) > MAX_RESULT_BITS:
            return error("power: the result is too large")
        try:
            result = base ** exponent
        except (OverflowError, ZeroDivisionError) as e:
            return error(f"power: {e}")
        if isinstance(result, complex):
            return error("power: the result is not a real number")
        return {"result": result}

    def square_root(self, number: float, precision: int) -> Result:
        if number < 0:
            return error("Cannot calculate square root of a negative number")
        if not 0 < precision <= MAX_PRECISION:
            return error(f"precision must be between 1 and {MAX_PRECISION}")
        with localcontext() as ctx:
            ctx.prec = precision
            try:
                return {"result": float(Decimal(number).sqrt())}
            except InvalidOperation:
                return error("Input must be a number or computation resulted in an invalid operation")

    def absolute_value(self, number: float) -> Result:
        return {"result": abs(number)}

    def round_number(self, number: float, decimal_places: int = 0) -> Result:
        if not isinstance(decimal_places, int) or abs(decimal_places) > MAX_DECIMAL_PLACES:
            return error(f"decimal_places must be an integer between -{MAX_DECIMAL_PLACES} and {MAX_DECIMAL_PLACES}")
        return {"result": round(number, decimal_places)}

    def percentage(self, part: float, whole: float) -> Result:
        if whole == 0:
            return error("Whole value cannot be zero")
        return {"result": part / whole * 100}

    def min_value(self, numbers: list[float]) -> Result:
        nums = _numbers(numbers)
        if not numbers:
            return error("Cannot find minimum of an empty list")
        if nums is None:
            return error("All elements in the list must be numbers")
        return {"result": min(nums)}

    def max_value(self, numbers: list[float]) -> Result:
        nums = _numbers(numbers)
        if not numbers:
            return error("Cannot find maximum of an empty list")
        if nums is None:
            return error("All elements in the list must be numbers")
        return {"result": max(nums)}

    def sum_values(self, numbers: list[float]) -> Result:
        nums = _numbers(numbers)
        if not numbers:
            return error("Cannot calculate sum of an empty list")
        if nums is None:
            return error("All elements in the list must be numbers")
        return {"result": sum(nums)}
