"""A new run directory (:mod:`kvlab.store.rundir` reads one): the copy of the
experiment, and the facts known before the first request (versions, commit, host)."""

from __future__ import annotations

import os
import platform
import time
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import kvlab
from kvlab.experiment import Experiment
from kvlab.run.overrides import overridden_text
from kvlab.servers.preflight import cpu_flags, cpu_model
from kvlab.store.rundir import RunDir
from kvlab.store.state import RunState
from kvlab.store.writer import RunWriter
from kvlab.version import source_commit

__all__ = ["RunDir", "create_run", "host_facts", "initial_state", "now_iso"]


def create_run(out: Path, experiment_file: Path, experiment: Experiment,
               overrides: dict[str, Any] | None = None) -> RunDir:
    """A fresh run directory under ``out`` holding a copy of the experiment: verbatim,
    or with ``overrides`` applied (``kvlab run --queries N`` and ``--set KEY=VALUE``:
    run.overrides), so a resume and ``evaluate`` read the experiment as measured. Its
    state (in memory as ``run.state``, saved as manifest.json) keeps the file verbatim
    and the overrides."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = Path(out) / f"{experiment.name}-{stamp}"
    suffix = 1
    while path.exists():
        suffix += 1
        path = Path(out) / f"{experiment.name}-{stamp}-{suffix}"
    path.mkdir(parents=True)
    run = RunDir(path)
    text = Path(experiment_file).read_text(encoding="utf-8")
    copy = overridden_text(text, overrides or {}, str(experiment_file))
    run.experiment_path.write_text(copy, encoding="utf-8")
    run.state = initial_state(run, experiment, text, overrides)
    with RunWriter(run.path) as writer:
        writer.save(run.state)
    return run


def initial_state(run: RunDir, experiment: Experiment, verbatim: str,
                  overrides: dict[str, Any] | None = None) -> RunState:
    """What is known before the first request (with this machine's client limits from
    ``kvlab calibrate``, or None, so every later report judges against the same);
    ``verbatim``: the experiment file as the user wrote it."""
    from kvlab.analysis.saturation import load_calibration

    calibration = load_calibration()
    return RunState(
        run_id=run.path.name,
        kvlab_version=kvlab.__version__,
        git_commit=source_commit(),
        experiment_name=experiment.name,
        experiment_file=verbatim,
        host=host_facts(),
        calibration=calibration.to_dict() if calibration else None,
        overrides=dict(overrides) if overrides else None,
        dataset_file=experiment.workload.dataset.data_file(),
    )


def now_iso() -> str:
    """Local wall-clock time for the manifest (durations never use it)."""
    return datetime.now().astimezone().isoformat(timespec="seconds")


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
    """Platform, CPU (model and SIMD flags), cores, memory, Python and torch versions
    (torch not imported)."""
    return {
        "platform": platform.platform(),
        "cpu": cpu_model(),
        "cpu_flags": cpu_flags(),
        "cores": os.cpu_count(),
        "memory_bytes": _memory_bytes(),
        "python": platform.python_version(),
        "torch": _version("torch"),
        "hostname": platform.node(),
        "recorded_at": now_iso(),
        "clock": "time.perf_counter_ns, relative to each invocation's start",
        "timezone": time.strftime("%Z"),
    }
