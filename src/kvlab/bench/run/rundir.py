"""A run directory: the unit of truth of one benchmark run.

Layout::

    runs/<experiment>-<YYYYmmdd-HHMMSS>/
      experiment.toml   the experiment file (verbatim, or with `kvlab run --queries N`
                        applied; manifest.json keeps the verbatim text and the overrides)
      manifest.json     versions, host, servers (argv, /props, logs), times, run order
      prepared.json     the prompts every mode sends (per capacity)
      records.jsonl     one line per request, warm-ups flagged
      logs/<mode>-<capacity>.log
      evaluation.json, report.md
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import kvlab
from kvlab.errors import ConfigError
from kvlab.experiment import Experiment, load_experiment, with_queries
from kvlab.servers.preflight import cpu_model


class RunDir:
    """Paths and manifest of one run directory."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    experiment_path = property(lambda self: self.path / "experiment.toml")
    manifest_path = property(lambda self: self.path / "manifest.json")
    prepared_path = property(lambda self: self.path / "prepared.json")
    records_path = property(lambda self: self.path / "records.jsonl")
    evaluation_path = property(lambda self: self.path / "evaluation.json")
    report_path = property(lambda self: self.path / "report.md")

    def log_path(self, mode: str, capacity: int) -> Path:
        return self.path / "logs" / f"{mode}-{capacity}.log"

    @classmethod
    def create(cls, out: Path, experiment_file: Path, experiment: Experiment,
               overrides: dict[str, Any] | None = None) -> RunDir:
        """A fresh run directory under ``out`` holding a copy of the experiment: verbatim,
        or with ``overrides`` applied (only ``{"queries": N}`` today, from ``kvlab run
        --queries``), so a resume and ``evaluate`` read the experiment as measured. The
        manifest keeps the file verbatim and the overrides."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path(out) / f"{experiment.name}-{stamp}"
        suffix = 1
        while path.exists():
            suffix += 1
            path = Path(out) / f"{experiment.name}-{stamp}-{suffix}"
        path.mkdir(parents=True)
        run = cls(path)
        text = Path(experiment_file).read_text(encoding="utf-8")
        copy = text
        if overrides and "queries" in overrides:
            copy = with_queries(text, int(overrides["queries"]), str(experiment_file))
        run.experiment_path.write_text(copy, encoding="utf-8")
        manifest = initial_manifest(run, experiment)
        manifest["experiment_file"] = text  # verbatim, as the user wrote it
        if overrides:
            manifest["overrides"] = dict(overrides)
        run.write_manifest(manifest)
        return run

    @classmethod
    def open(cls, path: Path) -> RunDir:
        """An existing run directory; ConfigError if it is not one."""
        run = cls(path)
        if not run.experiment_path.is_file():
            raise ConfigError(
                f"{path} is not a run directory (no experiment.toml); give the directory "
                "`kvlab run` created, e.g. runs/quickstart-20250101-120000"
            )
        return run

    def experiment(self) -> Experiment:
        """The experiment as it was when the run started."""
        experiment = load_experiment(self.experiment_path)
        # queries_file was made absolute relative to the original file; keep it if the
        # copy's neighbour does not exist.
        return experiment

    def manifest(self) -> dict[str, Any]:
        if not self.manifest_path.is_file():
            return {}
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(self.manifest_path)  # never a half-written manifest

    def update_manifest(self, **changes: Any) -> dict[str, Any]:
        manifest = self.manifest()
        manifest.update(changes)
        self.write_manifest(manifest)
        return manifest


def initial_manifest(run: RunDir, experiment: Experiment) -> dict[str, Any]:
    """What is known before the first request (with this machine's client limits from
    ``kvlab calibrate``, or None, so every later report judges against the same)."""
    from kvlab.bench.analysis.saturation import load_calibration

    calibration = load_calibration()
    return {
        "run_id": run.run_id,
        "kvlab_version": kvlab.__version__,
        "git_commit": git_commit(),
        "experiment_name": experiment.name,
        "experiment_file": run.experiment_path.read_text(encoding="utf-8"),
        "host": host_facts(),
        "sessions": [],
        "servers": [],
        "run_order": [],
        "calibration": calibration.to_dict() if calibration else None,
    }


def now_iso() -> str:
    """Local wall-clock time for the manifest (durations never use it)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


def git_commit() -> str | None:
    """The checkout's commit (``-dirty`` if modified); None outside a git repository."""
    source = Path(kvlab.__file__).resolve().parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=source, capture_output=True, text=True, timeout=5
        )
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=source, capture_output=True, text=True, timeout=5,
        )
        return commit.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def host_facts() -> dict[str, Any]:
    """Platform, CPU, cores, memory, Python and torch versions (torch not imported)."""
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "hostname": platform.node(),
        "recorded_at": now_iso(),
        "clock": "time.perf_counter_ns, relative to each session's start",
        "timezone": time.strftime("%Z"),
    }
