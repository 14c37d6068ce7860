"""Making and keeping a run: the runner (runner.py), the run directory's files (journal.py), resume and merge,
scoring a journal into verdicts and the summary (scoring.py), the probes (probes.py, probe_checks.py,
probe_results.py), the context probe and the perf figures. Imports base, surfaces, wire and judge.
(Named `execution`, not `run`, so that `verifier.run` stays the API function whatever has been imported.)
"""
