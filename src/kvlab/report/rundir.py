"""A run directory, read back for reports: manifest, records and where to write.

Reports are rebuilt from the files alone (design.md: "a run directory is the unit of
truth"). ``load_run`` refuses anything that is not a run directory with one line that
says what is missing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvlab.bench.records import GAUGES_FILE, GaugeSample, Record, read_gauges, read_records
from kvlab.errors import ConfigError, KvlabError

if TYPE_CHECKING:
    from kvlab.experiment import Experiment

RECORDS_FILE = "records.jsonl"
MANIFEST_FILE = "manifest.json"
EXPERIMENT_FILE = "experiment.toml"


@dataclass
class RunDir:
    """What a report needs from a run directory. ``manifest`` is {} when absent."""

    path: Path
    records: list[Record]
    manifest: dict[str, Any] = field(default_factory=dict)
    gauges: list[GaugeSample] = field(default_factory=list)  # the server's /metrics

    @property
    def run_id(self) -> str:
        """The run id of the records (else the manifest's, else the folder name)."""
        if self.records:
            return self.records[0].run_id
        return str(self.manifest.get("run_id") or self.path.name)


def load_run(path: Path | str) -> RunDir:
    """Read ``records.jsonl`` (required) and ``manifest.json`` (optional) of a run.

    Raises ConfigError when ``path`` is not a directory, has no records file, or a
    file cannot be parsed.
    """
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path}: not a run directory (give the folder a run wrote)")
    records_path = path / RECORDS_FILE
    if not records_path.is_file():
        raise ConfigError(f"{path}: no {RECORDS_FILE}; is this a run directory?")
    try:
        records = read_records(records_path)
    except (ValueError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"{records_path}: cannot read the records ({first})") from None
    manifest: dict[str, Any] = {}
    manifest_path = path / MANIFEST_FILE
    if manifest_path.is_file():
        try:
            loaded = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, OSError) as exc:
            raise ConfigError(f"{manifest_path}: not valid JSON ({exc})") from None
        manifest = loaded if isinstance(loaded, dict) else {}
    return RunDir(path=path, records=records, manifest=manifest,
                  gauges=read_gauges(path / GAUGES_FILE))


def load_run_or_import(path: Path | str, requested_tokens: int | None = None) -> RunDir:
    """A run directory, or a peer's result file (GuideLLM, vLLM, AIPerf) read as one.

    A file's requests become imported Records (kvlab.bench.peers); its manifest only
    says where they came from. ``requested_tokens``: the output length the peer asked
    for, when its file does not say (vLLM).
    """
    path = Path(path)
    if path.is_file():
        from kvlab.bench.peers import read_peer_file

        return RunDir(path=path, records=read_peer_file(path, requested_tokens),
                      manifest={"imported_from": str(path)})
    return load_run(path)


def kv_checks(manifest: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every non-empty ``kv_check`` found in the manifest, with where it was found.

    The llama.cpp server facts carry one per server; we search the whole manifest so
    the report does not depend on where the runner nests those facts.
    """
    return list(_find_key(manifest, "kv_check", ""))


def _find_key(node: Any, key: str, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        for name, value in node.items():
            here = f"{where}.{name}" if where else str(name)
            if name == key and isinstance(value, dict) and value:
                yield where or "manifest", value
            else:
                yield from _find_key(value, key, here)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from _find_key(item, key, f"{where}[{i}]")


def experiment_of(run: RunDir) -> Experiment | None:
    """The run's experiment (experiment.toml, else the manifest's verbatim copy)."""
    from kvlab.experiment import parse_experiment

    path = run.path / EXPERIMENT_FILE
    try:
        if path.is_file():
            return parse_experiment(path.read_text(encoding="utf-8"), str(path))
        text = run.manifest.get("experiment_file")
        if isinstance(text, str):
            return parse_experiment(text, f"{run.path / MANIFEST_FILE}: experiment_file")
    except (KvlabError, OSError):
        return None
    return None


def compare_pairs(run: RunDir) -> list[tuple[str, str]] | None:
    """The experiment's ``compare`` pairs; None when the run does not name any."""
    experiment = experiment_of(run)
    if experiment is None or not experiment.compare:
        return None
    return [(a, b) for a, b in experiment.compare]
