"""The names of a run directory's files, each defined once.

Only the modules of :mod:`kvlab.rundir` take a name from here; every other module
reaches a run's files through :class:`~kvlab.rundir.run.RunDir`
(tests/rundir/test_files.py checks both).
"""

from __future__ import annotations

EXPERIMENT_FILE = "experiment.toml"  # the experiment as measured
MANIFEST_FILE = "manifest.json"  # the run's state (rundir.manifest.RunState)
PREPARED_FILE = "prepared.json"  # the prompts every mode sends, per capacity
RECORDS_FILE = "records.jsonl"  # one line per request
GAUGES_FILE = "gauges.jsonl"  # the server's /metrics during each load point
MEMORY_FILE = "process_memory.jsonl"  # a launched server's process-tree memory
EVALUATION_FILE = "evaluation.json"  # analysis.evaluate.Evaluation
REPORT_FILE = "report.md"
HTML_FILE = "report.html"
RECORDS_CSV = "records.csv"
SUMMARIES_CSV = "summaries.csv"
LOGS_DIR = "logs"  # each launched server's log, <mode>-<capacity>.log
AB_FILE = "ab.json"  # kvlab ab's design, every look and its verdict (run.ab)

#: the reports of a run, the one a reader opens first first
REPORTS = (HTML_FILE, REPORT_FILE)

__all__ = ["AB_FILE", "EVALUATION_FILE", "EXPERIMENT_FILE", "GAUGES_FILE", "HTML_FILE", "LOGS_DIR",
           "MANIFEST_FILE", "MEMORY_FILE", "PREPARED_FILE", "RECORDS_CSV", "RECORDS_FILE",
           "REPORTS", "REPORT_FILE", "SUMMARIES_CSV"]
