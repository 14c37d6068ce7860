"""Raw bytes -> Parsed -> findings: parse an exchange (parse.py), the wire contract per surface (contract.py,
contract_surfaces.py) and the multi-turn history replay read from a parsed exchange (history.py).
Pure: imports the base modules, surfaces and wire's body-reading constants only.
"""
