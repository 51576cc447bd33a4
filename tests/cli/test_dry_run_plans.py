"""Guard rail: ``kvlab run --dry-run`` plans every shipped experiment as it did before
the run plan became a type (captures made at f3fd4f6, in ``tests/data/dryrun/``).

The plan printed now is richer (its steps); each capture keeps what the old dry run
said per launched server: mode, capacity, server kind, API, requests, and the argv or
endpoint. Paths and free ports are written as placeholders, so the captures hold on any
machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
EXPERIMENTS = sorted((ROOT / "experiments").glob("*.toml"))
CAPTURES = ROOT / "tests" / "data" / "dryrun"


def placeholders(value: object) -> object:
    """The value with this machine's paths and ports replaced by placeholders."""
    if isinstance(value, dict):
        return {k: placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        out = [placeholders(v) for v in value]
        return ["<port>" if i and value[i - 1] == "--port" else v for i, v in enumerate(out)]
    if isinstance(value, str):
        for path, name in ((sys.prefix, "<venv>"), (str(ROOT), "<repo>"),
                           (str(Path.home()), "~")):
            value = value.replace(path, name)
    return value


def servers_of(experiment: Path) -> list[dict[str, object]]:
    """What the dry run says of each server it would launch or reach."""
    from kvlab.cli.llamacpp_cmds import dry_run_plan

    return [placeholders(e) for e in dry_run_plan(experiment)]  # type: ignore[misc]


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_dry_run_plans_what_it_planned_before(experiment: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVLAB_GGUF", raising=False)
    before = json.loads((CAPTURES / f"{experiment.stem}.json").read_text())
    assert servers_of(experiment) == before


def test_every_shipped_experiment_has_a_capture() -> None:
    assert {p.stem for p in EXPERIMENTS} == {p.stem for p in CAPTURES.glob("*.json")}
