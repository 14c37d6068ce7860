"""Goldens: the typed value (model.py: Golden, Margin, narrow), making and loading one (store.py: the validated
boundary) and the golden.json schema with its bounds (schema.py).
Imports base, surfaces, judge and run (a golden is made from a scored run). The shipped goldens are data in verifier/goldens/.
"""
