"""A run directory, the contract of a run: every file in it, read and written here only.

Ground level (it imports only ``api``, for a Record's API): each file has a typed model
and its name once (:mod:`kvlab.rundir.files`):

- ``records.jsonl``: :class:`Record` lines (records), appended by :class:`RunWriter`
  (writer) or :class:`RecordStore`, read by :func:`read_records`;
- ``manifest.json``: the run's state, :class:`RunState` (manifest);
- ``prepared.json``: the prompts per capacity, :class:`Prepared` (prepared), a
  session's turn :class:`SessionTurn` (session_turn);
- ``gauges.jsonl`` and ``process_memory.jsonl``: :class:`GaugeSample` and
  :class:`MemorySample` lines (gauges, process_memory), appended through
  :class:`JsonlAppender` (jsonl);
- ``evaluation.json``: its data read and migrated to the current layout, and written
  (evaluation); ``analysis.evaluation_file.StoredEvaluation`` types it;
- ``experiment.toml``, the reports and CSV files: text, read and written through
  :class:`RunDir` (run), the one reader of a run directory.
"""

from kvlab.rundir.gauges import GaugeSample, point_spans, read_gauges
from kvlab.rundir.jsonl import JsonlAppender
from kvlab.rundir.manifest import (
    Host,
    InvocationEntry,
    LoadWorkers,
    NoLaunch,
    Overrides,
    PointClocks,
    RunState,
    ServerEntry,
    ServerFacts,
)
from kvlab.rundir.prepared import Prepared, PreparedPrompt, Sizing
from kvlab.rundir.process_memory import MemorySample, read_memory_samples
from kvlab.rundir.records import (
    RECORD_SCHEMA,
    ApiKind,
    Outcome,
    Record,
    RecordStore,
    RunClock,
    iter_records,
    measured,
    read_records,
)
from kvlab.rundir.run import RunDir, load_run
from kvlab.rundir.session_turn import SessionTurn
from kvlab.rundir.writer import RunWriter

__all__ = [
    "RECORD_SCHEMA",
    "ApiKind",
    "GaugeSample",
    "Host",
    "InvocationEntry",
    "JsonlAppender",
    "LoadWorkers",
    "MemorySample",
    "NoLaunch",
    "Outcome",
    "Overrides",
    "PointClocks",
    "Prepared",
    "PreparedPrompt",
    "Record",
    "RecordStore",
    "RunClock",
    "RunDir",
    "RunState",
    "RunWriter",
    "ServerEntry",
    "ServerFacts",
    "SessionTurn",
    "Sizing",
    "iter_records",
    "load_run",
    "measured",
    "point_spans",
    "read_gauges",
    "read_memory_samples",
    "read_records",
]
