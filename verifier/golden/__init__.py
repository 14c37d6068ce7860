"""Goldens: making, loading and resolving one (store.py) and the golden.json schema (schema.py).
Imports base, judge and run (a golden is made from a scored run). The shipped goldens are data in verifier/goldens/.
"""
