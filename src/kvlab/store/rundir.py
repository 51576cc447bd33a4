"""A run directory, the unit of truth of one run: its files, and the one reader of them.

Layout::

    runs/<experiment>-<YYYYmmdd-HHMMSS>/
      experiment.toml   the experiment file (verbatim, or with `kvlab run --queries N`
                        applied; manifest.json keeps the verbatim text and the overrides)
      manifest.json     the run's state: versions, host, servers (argv, /props, logs),
                        times, run order (store.state.RunState)
      prepared.json     the prompts every mode sends (per capacity)
      records.jsonl     one line per request, warm-ups flagged
      gauges.jsonl      the server's /metrics during each load point (where it has one)
      process_memory.jsonl  a launched server's resident memory during each load point
      logs/<mode>-<capacity>.log
      evaluation.json, report.md, report.html

Everything a run, a resume, ``kvlab evaluate`` and the reports read from a run
directory comes through :class:`RunDir`; each file is read once, on first use. Writes
go through :class:`kvlab.store.writer.RunWriter`. A peer's result file (GuideLLM,
vLLM, AIPerf) can be read as a run too (:func:`load_run_or_import`).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

from kvlab.bench.plan.workload import Prepared
from kvlab.errors import ConfigError, KvlabError
from kvlab.experiment import Experiment, load_experiment, parse_experiment
from kvlab.records import (
    GaugeSample,
    MemorySample,
    Record,
    read_gauges,
    read_memory_samples,
    read_records,
)
from kvlab.store.files import (
    EVALUATION_FILE,
    EXPERIMENT_FILE,
    GAUGES_FILE,
    HTML_FILE,
    LOGS_DIR,
    MANIFEST_FILE,
    MEMORY_FILE,
    PREPARED_FILE,
    RECORDS_FILE,
    REPORT_FILE,
)
from kvlab.store.state import RunState


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

    def log_path(self, mode: str, capacity: int) -> Path:
        return self.path / LOGS_DIR / f"{mode}-{capacity}.log"

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

    def experiment(self) -> Experiment:
        """The experiment as measured: experiment.toml (the manifest's verbatim copy
        when the file is gone), reduced to one mode measured twice for an A/A run
        (``repeat_aa``). Raises ExperimentError or ConfigError."""
        if self.experiment_path.is_file():
            experiment = load_experiment(self.experiment_path)
        elif self.state.experiment_file is not None:
            experiment = parse_experiment(self.state.experiment_file,
                                          f"{self.manifest_path}: experiment_file")
        else:
            raise ConfigError(f"{self.path}: no experiment.toml and no experiment in "
                              "manifest.json")
        aa = self.state.repeat_aa
        return experiment.repeat_aa(aa) if aa else experiment

    @cached_property
    def known_experiment(self) -> Experiment | None:
        """:meth:`experiment`, or None when the run has none that reads (an imported
        file, a damaged copy)."""
        try:
            return self.experiment()
        except (KvlabError, OSError):
            return None


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


def load_run_or_import(path: Path | str, requested_tokens: int | None = None,
                       as_cell: tuple[str, int] | None = None) -> RunDir:
    """A run directory, or a peer's result file (GuideLLM, vLLM, AIPerf) read as one.

    A file's requests become imported Records (kvlab.peers); its state only says
    where they came from. ``requested_tokens``: the output length the peer asked for,
    when its file does not say (vLLM). ``as_cell``: the (mode, capacity) a file's rows
    stand for (default: the tool's name and 0), so they meet a run's cell in a
    comparison.
    """
    path = Path(path)
    if path.is_file():
        from kvlab.peers import read_peer_file

        records = read_peer_file(path, requested_tokens)
        if as_cell is not None:
            mode, capacity = as_cell
            records = [r.model_copy(update={"mode": mode, "capacity": capacity})
                       for r in records]
        return RunDir(path, records=records, state=RunState(imported_from=str(path)))
    return load_run(path)
