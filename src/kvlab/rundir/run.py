"""A run directory, the unit of truth of one run: its files, and the one reader of them.

Layout::

    runs/<experiment>-<YYYYmmdd-HHMMSS>/
      experiment.toml   the experiment file (verbatim, or with `kvlab run --queries N`
                        applied; manifest.json keeps the verbatim text and the overrides)
      manifest.json     the run's state: versions, host, servers (argv, /props, logs),
                        times, run order (rundir.manifest.RunState)
      prepared.json     the prompts every mode sends (per capacity)
      records.jsonl     one line per request, warm-ups flagged
      gauges.jsonl      the server's /metrics during each load point (where it has one)
      process_memory.jsonl  a launched server's resident memory during each load point
      logs/<mode>-<capacity>.log
      evaluation.json, report.md, report.html

Everything a run, a resume, ``kvlab evaluate`` and the reports read from a run
directory comes through :class:`RunDir`; each file is read once, on first use. Writes
go through :class:`kvlab.rundir.writer.RunWriter`. A peer's result file (GuideLLM,
vLLM, AIPerf) can be read as a run too (:func:`kvlab.store.runs.load_run_or_import`).
"""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from kvlab.errors import ConfigError
from kvlab.rundir.evaluation import read_evaluation, write_evaluation
from kvlab.rundir.files import (
    AB_FILE,
    EVALUATION_FILE,
    EXPERIMENT_FILE,
    GAUGES_FILE,
    HTML_FILE,
    LOGS_DIR,
    MANIFEST_FILE,
    MEMORY_FILE,
    PREPARED_FILE,
    RECORDS_CSV,
    RECORDS_FILE,
    REPORT_FILE,
    REPORTS,
    SUMMARIES_CSV,
)
from kvlab.rundir.gauges import GaugeSample, read_gauges
from kvlab.rundir.manifest import RunState
from kvlab.rundir.prepared import Prepared
from kvlab.rundir.process_memory import MemorySample, read_memory_samples
from kvlab.rundir.records import Record, read_records

#: a CSV file's columns and rows (column -> value)
CsvTable = tuple[Sequence[str], Sequence[Mapping[str, object]]]


class RunDir:
    """One run directory (or a peer's result file read as one).

    ``records`` and ``state`` given: a run read from elsewhere (an imported file);
    otherwise each is read from the directory on first use.
    """

    def __init__(self, path: Path | str, *, records: list[Record] | None = None,
                 state: RunState | None = None) -> None:
        self.path = Path(path)
        if records is not None:
            self.records = records
        if state is not None:
            self.state = state

    @classmethod
    def open(cls, path: Path | str) -> RunDir:
        """An existing run directory kvlab made; ConfigError if it is not one."""
        run = cls(path)
        if not run.experiment_path.is_file():
            raise ConfigError(
                f"{path} is not a run directory (no experiment.toml); give the directory "
                "`kvlab run` created, e.g. runs/quickstart-20250101-120000"
            )
        return run

    # -- paths -------------------------------------------------------------------------

    @property
    def experiment_path(self) -> Path:
        return self.path / EXPERIMENT_FILE

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST_FILE

    @property
    def prepared_path(self) -> Path:
        return self.path / PREPARED_FILE

    @property
    def records_path(self) -> Path:
        return self.path / RECORDS_FILE

    @property
    def gauges_path(self) -> Path:
        return self.path / GAUGES_FILE

    @property
    def memory_path(self) -> Path:
        return self.path / MEMORY_FILE

    @property
    def evaluation_path(self) -> Path:
        return self.path / EVALUATION_FILE

    @property
    def report_path(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def html_path(self) -> Path:
        return self.path / HTML_FILE

    @property
    def records_csv_path(self) -> Path:
        return self.path / RECORDS_CSV

    @property
    def summaries_csv_path(self) -> Path:
        return self.path / SUMMARIES_CSV

    @property
    def ab_path(self) -> Path:
        """kvlab ab's design, every look and its verdict (``run.ab``)."""
        return self.path / AB_FILE

    def log_path(self, mode: str, capacity: int) -> Path:
        return self.path / LOGS_DIR / f"{mode}-{capacity}.log"

    @property
    def watched_paths(self) -> tuple[Path, ...]:
        """The files whose size and modification time change when a resume appends or a
        report is redone (records, manifest, evaluation, gauges, experiment)."""
        return (self.records_path, self.manifest_path, self.evaluation_path,
                self.gauges_path, self.experiment_path)

    def first_report(self) -> Path | None:
        """The report a reader opens first that the run has (report.html, else
        report.md); None: neither."""
        return next((self.path / name for name in REPORTS if (self.path / name).is_file()),
                    None)

    # -- writes outside a run's writer (a run's own go through RunWriter) --------------

    def write_report(self, text: str) -> Path:
        """Write report.md; its path."""
        self.report_path.write_text(text, encoding="utf-8")
        return self.report_path

    def write_html(self, text: str) -> Path:
        """Write report.html; its path."""
        self.html_path.write_text(text, encoding="utf-8")
        return self.html_path

    def write_experiment(self, text: str) -> None:
        """Write experiment.toml (a new run's copy of the experiment as measured)."""
        self.experiment_path.write_text(text, encoding="utf-8")

    def write_csvs(self, records: CsvTable, summaries: CsvTable) -> list[Path]:
        """Write records.csv and summaries.csv (each its columns and rows); their paths."""
        out = []
        for path, (columns, rows) in ((self.records_csv_path, records),
                                      (self.summaries_csv_path, summaries)):
            with path.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=list(columns))
                writer.writeheader()
                writer.writerows(rows)
            out.append(path)
        return out

    def save_evaluation(self, data: dict[str, object]) -> Path:
        """Write evaluation.json (``Evaluation.to_json()``'s data); its path."""
        write_evaluation(self.evaluation_path, data)
        return self.evaluation_path

    def evaluation_data(self) -> dict[str, object]:
        """evaluation.json's data in the current layout (migrated); EvaluationFileError
        (one line) when it is missing or does not read."""
        return read_evaluation(self.evaluation_path)

    # -- contents ----------------------------------------------------------------------

    @property
    def run_id(self) -> str:
        """The manifest's run id, else the records', else the folder name."""
        if self.state.run_id:
            return self.state.run_id
        if self.records:
            return self.records[0].run_id
        return self.path.name

    @cached_property
    def state(self) -> RunState:
        """The run's state (manifest.json; empty when there is none)."""
        return RunState.read(self.manifest_path)

    def manifest(self) -> dict[str, Any]:
        """The state as manifest.json's JSON data (for rendering and scripts)."""
        return self.state.to_json()

    @cached_property
    def records(self) -> list[Record]:
        """Every record of records.jsonl ([] when there is none); ConfigError (one
        line) when the file cannot be read."""
        if not self.records_path.is_file():
            return []
        try:
            return read_records(self.records_path)
        except (ValueError, OSError) as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ConfigError(f"{self.records_path}: cannot read the records ({first})") \
                from None

    @cached_property
    def prepared(self) -> Prepared | None:
        """prepared.json (the prompts of each capacity), read by its own type; None when
        there is none. ConfigError (one line) when it does not read."""
        if not self.prepared_path.is_file():
            return None
        try:
            return Prepared.load(self.prepared_path)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise ConfigError(f"{self.prepared_path}: cannot read the prepared prompts "
                              f"({type(exc).__name__}: {exc}); rerun kvlab prepare or "
                              "remove the file") from None

    @cached_property
    def gauges(self) -> list[GaugeSample]:
        """The server's /metrics samples (gauges.jsonl; [] when there is none)."""
        return read_gauges(self.gauges_path)

    @cached_property
    def process_memory(self) -> list[MemorySample]:
        """The launched servers' resident memory samples (process_memory.jsonl; [] when
        there is none)."""
        return read_memory_samples(self.memory_path)

    @classmethod
    def under(cls, folder: Path) -> list[Path]:
        """Every run directory under ``folder``, at any depth (those holding
        records.jsonl), sorted."""
        return sorted(p.parent for p in folder.rglob(RECORDS_FILE))

    def records_bytes(self) -> bytes | None:
        """records.jsonl byte for byte (None: the run has none), for a digest."""
        return self.records_path.read_bytes() if self.records_path.is_file() else None

    @property
    def has_records(self) -> bool:
        """True once records.jsonl holds a byte (a run that recorded something)."""
        return self.records_path.is_file() and self.records_path.stat().st_size > 0

    @property
    def experiment_bytes(self) -> bytes | None:
        """The experiment as measured, byte for byte: experiment.toml, else the manifest's
        verbatim copy (UTF-8); None: neither (an imported file)."""
        if self.experiment_path.is_file():
            return self.experiment_path.read_bytes()
        text = self.state.experiment_file
        return None if text is None else text.encode()

    @property
    def experiment_text(self) -> str | None:
        """The experiment as measured: experiment.toml's text, else the manifest's verbatim
        copy (None: neither; the experiment's model is ``store.runs.experiment_of``'s,
        which sits above the experiment file's layer)."""
        if not self.experiment_path.is_file():
            return self.state.experiment_file
        try:
            return self.experiment_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{self.experiment_path}: cannot read the experiment file "
                              f"({exc.strerror})") from None


def load_run(path: Path | str) -> RunDir:
    """A run directory with its records read; ConfigError (one line) when ``path`` is
    not a directory, has no records file, or a file cannot be parsed."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run directory (give the folder a run wrote)")
    run = RunDir(path)
    if not run.records_path.is_file():
        raise ConfigError(f"{path}: no {RECORDS_FILE}; is this a run directory?")
    _ = run.records, run.state  # read now: a damaged file is refused here
    return run
