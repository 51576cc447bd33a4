"""The names of a run directory's files, each defined once.

Every module that reads or writes a file of a run takes its name from here (through
:class:`~kvlab.store.rundir.RunDir`'s paths where it can). ``gauges.jsonl`` and
``process_memory.jsonl`` are named in :mod:`kvlab.records`, whose writers (the
``/metrics`` poller, the process-tree sampler) sit below ``store``; they are
re-exported here so no other module spells them.
"""

from __future__ import annotations

from kvlab.records import GAUGES_FILE, MEMORY_FILE

EXPERIMENT_FILE = "experiment.toml"  # the experiment as measured
MANIFEST_FILE = "manifest.json"  # the run's state (store.state.RunState)
PREPARED_FILE = "prepared.json"  # the prompts every mode sends, per capacity
RECORDS_FILE = "records.jsonl"  # one line per request
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
