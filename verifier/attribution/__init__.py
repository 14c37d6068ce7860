"""Observations + golden -> Comparison: the frontend and numerics signals (signals.py, surface_signals.py,
numerics.py, turn_diff.py), coverage, the paired comparison and its decision (compare.py), the diagnosis table
(diagnosis.py) and the plain-language explanation (explain.py). Pure; imports base, surfaces, judge, run's
documents and golden.
"""
