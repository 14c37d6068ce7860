"""The application steps: specs in, documents and their files out. collect.py (run, score, merge, resume),
gate.py (compare a run with a golden, bless, calibrate), spec.py (the gate spec every front door builds), runs.py (listing run directories), sweep.py, catalog.py
(which suites exist: reads the suites package) and report_files.py (the report's disk edge: read a run dir, golden
and comparison, write every report file). Imports every core package and suites; never the CLI or the test bed.
"""
