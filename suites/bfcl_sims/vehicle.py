"""VehicleControlAPI: a car's engine, doors, brakes, climate, lights, cruise control, navigation and tires.

Owns: fuel level (gallons, tank 50), battery voltage, engine state, door locks (and the count still unlocked),
climate settings, headlights, parking brake, brake pedal, cruise control and the distance kept to the next vehicle,
navigation destination and the four tire pressures. Starting the engine needs every door locked and the brake
pedal fully pressed, as the docs say. Sensor readings (speed, outside temperature) come from a per-instance
generator seeded as BFCL seeds it. Comparable state: what BFCL compares (brake and slope forces are private there).
"""

from __future__ import annotations

from .long_context import get as padding_get
from ._base import Config, Result, Simulator, error

DEFAULT_SEED = 141053
MAX_FUEL_LEVEL = 50.0
MIN_FUEL_LEVEL = 0.0
MILES_PER_GALLON = 20.0
FULL_BRAKE_FORCE = 1000.0
DOORS = ("driver", "passenger", "rear_left", "rear_right")
DEFAULTS = {
    "fuelLevel": 0.0, "batteryVoltage": 12.6, "engine_state": "stopped",
    "doorStatus": {d: "unlocked" for d in DOORS}, "acTemperature": 25.0, "fanSpeed": 50, "acMode": "auto",
    "humidityLevel": 50.0, "headLightStatus": "off", "parkingBrakeStatus": "released", "brakePedalStatus": "released",
    "distanceToNextVehicle": 50.0, "cruiseStatus": "inactive", "destination": "None",
    "frontLeftTirePressure": 32.0, "frontRightTirePressure": 32.0, "rearLeftTirePressure": 30.0,
    "rearRightTirePressure": 30.0,
}
CONFIG_KEYS = {"engine_state": "engineState"}
"""Where the entries' config spells a state key differently (BFCL reads engineState into engine_state)."""
ZIPCODES = {
    "Rivermist": "83214", "Stonebrook": "74532", "Maplecrest": "56108", "Silverpine": "62947",
    "Shadowridge": "71354", "Sunset Valley": "83462", "Oakendale": "47329", "Willowbend": "52013",
    "Crescent Hollow": "69238", "Autumnville": "51479", "San Francisco": "94016",
}
DISTANCES = {  # miles between zip codes, either direction
    frozenset(("83214", "74532")): 750.0, frozenset(("56108", "62947")): 320.0,
    frozenset(("71354", "83462")): 450.0, frozenset(("47329", "52013")): 290.0,
    frozenset(("69238", "51479")): 630.0, frozenset(("94016", "83214")): 980.0,
    frozenset(("94016", "94704")): 600.0, frozenset(("94704", "08540")): 2550.0,
    frozenset(("94016", "08540")): 1950.0, frozenset(("62947", "47329")): 1053.0,
    frozenset(("94016", "62947")): 780.0, frozenset(("74532", "94016")): 880.0,
}
STATUS_OPTIONS = ("fuel", "battery", "doors", "climate", "headlights", "parkingBrake", "brakePedal", "engine")


class VehicleControlAPI(Simulator):
    CLASS_NAME = "VehicleControlAPI"
    DOC_FILE = "vehicle_control.json"
    STATE_FIELDS = (*DEFAULTS, "remainingUnlockedDoors")

    # Set by load_scenario from the entry's config, else DEFAULTS.
    fuelLevel: float
    batteryVoltage: float
    engine_state: str
    doorStatus: dict[str, str]
    acTemperature: float
    fanSpeed: int
    acMode: str
    humidityLevel: float
    headLightStatus: str
    parkingBrakeStatus: str
    brakePedalStatus: str
    distanceToNextVehicle: float
    cruiseStatus: str
    destination: str
    frontLeftTirePressure: float
    frontRightTirePressure: float
    rearLeftTirePressure: float
    rearRightTirePressure: float

    def load_scenario(self, config: Config, long_context: bool = False) -> None:
        self.long_context = long_context
        self._seed(config, DEFAULT_SEED)
        for key, default in DEFAULTS.items():
            setattr(self, key, self._take(config, CONFIG_KEYS.get(key, key), default))
        # The count follows the doors, whatever the config says (as BFCL recomputes it).
        self.remainingUnlockedDoors = 4 - sum(1 for s in self.doorStatus.values() if s == "locked")
        self._parkingBrakeForce = float(config.get("parkingBrakeForce", 0.0))
        self._slopeAngle = float(config.get("slopeAngle", 0.0))
        self._brakePedalForce = float(config.get("brakePedalForce", 0.0))

    def startEngine(self, ignitionMode: str) -> Result:
        if ignitionMode == "STOP":
            self.engine_state = "stopped"
            return {"engineState": self.engine_state, "fuelLevel": self.fuelLevel, "batteryVoltage": self.batteryVoltage}
        if ignitionMode != "START":
            return error("Invalid ignition mode.")
        if self.remainingUnlockedDoors > 0:
            unlocked = ", ".join(d for d, s in self.doorStatus.items() if s == "unlocked")
            return error(f"All doors must be locked before starting the engine. Here are the unlocked doors: {unlocked}")
        if self.brakePedalStatus != "pressed":
            return error("Brake pedal needs to be pressed when starting the engine.")
        if self._brakePedalForce != FULL_BRAKE_FORCE:
            return error("Must press the brake fully before starting the engine.")
        if self.fuelLevel < MIN_FUEL_LEVEL:
            return error("Fuel tank is empty.")
        self.engine_state = "running"
        return {"engineState": self.engine_state, "fuelLevel": self.fuelLevel, "batteryVoltage": self.batteryVoltage}

    def fillFuelTank(self, fuelAmount: float) -> Result:
        if fuelAmount < 0:
            return error("Fuel amount cannot be negative.")
        if self.fuelLevel + fuelAmount > MAX_FUEL_LEVEL:
            return error("Cannot fill gas above the tank capacity.")
        self.fuelLevel += fuelAmount
        return {"fuelLevel": self.fuelLevel}

    def lockDoors(self, unlock: bool, door: list[str]) -> Result:
        unknown = [d for d in door if d not in self.doorStatus]
        if unknown:
            return error(f"Unknown door(s): {', '.join(map(str, unknown))}. Doors: {', '.join(self.doorStatus)}")
        wanted = "unlocked" if unlock else "locked"
        for d in door:
            if self.doorStatus[d] != wanted:
                self.doorStatus[d] = wanted
                self.remainingUnlockedDoors += 1 if unlock else -1
        return {"lockStatus": wanted, "remainingUnlockedDoors": self.remainingUnlockedDoors}

    def adjustClimateControl(self, temperature: float, unit: str = "celsius", fanSpeed: int = 50,
                             mode: str = "auto") -> Result:
        """Stores the temperature in Celsius; answers with the temperature as given (BFCL's reply)."""
        if not 0 <= fanSpeed <= 100:
            return error("Fan speed must be between 0 and 100.")
        self.acTemperature = (temperature - 32) * 5 / 9 if unit == "fahrenheit" else temperature
        self.fanSpeed = fanSpeed
        self.acMode = mode
        return {"currentACTemperature": temperature, "climateMode": mode, "humidityLevel": self.humidityLevel}

    def get_outside_temperature_from_google(self) -> Result:
        reading = {"outsideTemperature": self._random.uniform(-10.0, 40.0)}
        if self.long_context:
            return {**padding_get("LONG_WEATHER_EXTENSION"), **reading}
        return reading

    def get_outside_temperature_from_weather_com(self) -> Result:
        """Always fails: the service is down in BFCL's world (its data expects this error)."""
        return {"error": 404}

    def setHeadlights(self, mode: str) -> Result:
        if mode not in ("on", "off", "auto"):
            return error("Invalid headlight mode.")
        self.headLightStatus = "on" if mode == "on" else "off"
        return {"headlightStatus": self.headLightStatus}

    def displayCarStatus(self, option: str) -> Result:
        status: Result = {"metadata": padding_get("CAR_STATUS_METADATA_EXTENSION")} if self.long_context else {}
        if option == "fuel":
            status["fuelLevel"] = self.fuelLevel
        elif option == "battery":
            status["batteryVoltage"] = self.batteryVoltage
        elif option == "doors":
            status["doorStatus"] = dict(self.doorStatus)
        elif option == "climate":
            status.update(currentACTemperature=self.acTemperature, fanSpeed=self.fanSpeed, climateMode=self.acMode,
                          humidityLevel=self.humidityLevel)
        elif option == "headlights":
            status["headlightStatus"] = self.headLightStatus
        elif option == "parkingBrake":
            status.update(parkingBrakeStatus=self.parkingBrakeStatus, parkingBrakeForce=self._parkingBrakeForce,
                          slopeAngle=self._slopeAngle)
        elif option == "brakePedal":
            status.update(brakePedalStatus=self.brakePedalStatus, brakePedalForce=self._brakePedalForce)
        elif option == "engine":
            status["engineState"] = self.engine_state
        else:
            status["error"] = f"Invalid option '{option}'; one of: {', '.join(STATUS_OPTIONS)}"
        return status

    def activateParkingBrake(self, mode: str) -> Result:
        if mode not in ("engage", "release"):
            return error("Invalid mode")
        engaged = mode == "engage"
        self.parkingBrakeStatus = "engaged" if engaged else "released"
        self._parkingBrakeForce = 500.0 if engaged else 0.0
        self._slopeAngle = 10.0
        reply = {"parkingBrakeStatus": self.parkingBrakeStatus, "_parkingBrakeForce": self._parkingBrakeForce,
                 "_slopeAngle": self._slopeAngle}
        if self.long_context:
            return {"parkingBrakeInstruction": padding_get("PARKING_BRAKE_INSTRUCTION"), **reply}
        return reply

    def pressBrakePedal(self, pedalPosition: float) -> Result:
        if not 0 <= pedalPosition <= 1:
            return error("Pedal position must be between 0 and 1.")
        if pedalPosition == 0:
            return self.releaseBrakePedal()
        self.brakePedalStatus = "pressed"
        self._brakePedalForce = float(pedalPosition * FULL_BRAKE_FORCE)
        return {"brakePedalStatus": "pressed", "brakePedalForce": self._brakePedalForce}

    def releaseBrakePedal(self) -> Result:
        self.brakePedalStatus = "released"
        self._brakePedalForce = 0.0
        return {"brakePedalStatus": "released", "brakePedalForce": 0.0}

    def setCruiseControl(self, speed: float, activate: bool, distanceToNextVehicle: float) -> Result:
        """Needs a running engine; speed 0-120 in steps of 5. The distance is kept even when the speed is refused
        (BFCL's order of checks)."""
        if self.engine_state == "stopped":
            return error("Start the engine before activating the cruise control.")
        self.distanceToNextVehicle = float(distanceToNextVehicle)
        speed = float(speed)
        if activate and not (0 <= speed <= 120 and speed % 5 == 0):
            return error("Invalid speed")
        self.cruiseStatus = "active" if activate else "inactive"
        return {"cruiseStatus": self.cruiseStatus, "currentSpeed": speed,
                "distanceToNextVehicle": self.distanceToNextVehicle}

    def get_current_speed(self) -> Result:
        return {"currentSpeed": self._random.uniform(0.0, 120.0)}

    def display_log(self, messages: list[str]) -> Result:
        return {"log": list(messages)}

    def estimate_drive_feasibility_by_mileage(self, distance: float) -> Result:
        return {"canDrive": self.fuelLevel * MILES_PER_GALLON >= distance}

    def liter_to_gallon(self, liter: float) -> Result:
        return {"gallon": liter * 0.264172}

    def gallon_to_liter(self, gallon: float) -> Result:
        return {"liter": gallon * 3.78541}

    def estimate_distance(self, cityA: str, cityB: str) -> Result:
        """Distance between two zip codes from a fixed table (the docs' 'cities' are zip codes)."""
        miles = DISTANCES.get(frozenset((cityA, cityB)))
        result: Result = {"distance": miles} if miles is not None else error("distance not found in database.")
        if self.long_context:
            result["intermediaryCities"] = padding_get("INTERMEDIARY_CITIES")
        return result

    def get_zipcode_based_on_city(self, city: str) -> Result:
        return {"zipcode": ZIPCODES.get(city, "00000")}

    def set_navigation(self, destination: str) -> Result:
        self.destination = destination
        return {"status": "Navigating to " + destination}

    def check_tire_pressure(self) -> Result:
        pressures = {k: getattr(self, k) for k in ("frontLeftTirePressure", "frontRightTirePressure",
                                                   "rearLeftTirePressure", "rearRightTirePressure")}
        healthy = 30 <= sum(pressures.values()) / 4 <= 35
        car_info = padding_get("CAR_STATUS_METADATA_EXTENSION") if self.long_context else {}
        return {**pressures, "healthy_tire_pressure": healthy, "car_info": car_info}

    def find_nearest_tire_shop(self) -> Result:
        return {"shopLocation": "456 Oakwood Avenue, Rivermist, 83214"}
