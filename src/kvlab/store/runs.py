"""A run read with what sits above the run directory: its experiment as a model, and a
peer's result file read as a run.

:class:`~kvlab.rundir.run.RunDir` reads every file of a run but sits below the
experiment file's model and the peers' readers; these functions add them.
"""

from __future__ import annotations

from pathlib import Path

from kvlab.errors import ConfigError, KvlabError
from kvlab.experiment import Experiment, load_experiment, parse_experiment
from kvlab.rundir import RunDir, RunState, load_run


def experiment_of(run: RunDir) -> Experiment:
    """The experiment as measured: experiment.toml (the manifest's verbatim copy when
    the file is gone), reduced to one mode measured twice for an A/A run
    (``repeat_aa``). Raises ExperimentError or ConfigError."""
    text = run.experiment_text
    if text is None:
        raise ConfigError(f"{run.path}: no experiment.toml and no experiment in "
                          "manifest.json")
    if run.experiment_path.is_file():
        experiment = load_experiment(run.experiment_path, text)
    else:
        experiment = parse_experiment(text, f"{run.manifest_path}: experiment_file")
    aa = run.state.repeat_aa
    return experiment.repeat_aa(aa) if aa else experiment


def known_experiment(run: RunDir) -> Experiment | None:
    """:func:`experiment_of`, or None when the run has none that reads (an imported
    file, a damaged copy)."""
    try:
        return experiment_of(run)
    except (KvlabError, OSError):
        return None


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
