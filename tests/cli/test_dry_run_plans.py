"""Guard rail: ``kvlab run --dry-run`` plans every shipped experiment as it did before
the run plan became a type (captures made at f3fd4f6 with the old planner, in
``tests/data/dryrun/``).

The plan printed now is richer (its steps, in run order); each capture keeps what the
old dry run said per (mode, capacity), in the experiment's mode order: the server kind,
the API, the requests (warm-ups + queries x repetitions), and the exact argv kvlab
launches or the external endpoint. The plan's JSON is reduced to that and compared.
Paths and free ports are written as placeholders, so the captures hold on any machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


def dry_run(experiment: Path) -> dict[str, Any]:
    """The plan ``kvlab run EXPERIMENT --dry-run --json`` prints."""
    from typer.testing import CliRunner

    from kvlab.cli import app

    result = CliRunner().invoke(app, ["run", str(experiment), "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    plan: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])["plan"]
    return plan


def servers_of(experiment: Path) -> list[dict[str, object]]:
    """What the dry run says of each (mode, capacity), as the old dry run said it."""
    plan = dry_run(experiment)
    w = plan["workload"]
    launches: dict[tuple[str, int], dict[str, Any]] = {}
    for step in plan["steps"]:
        if step["step"] == "launch":
            launches.setdefault((step["mode"], step["capacity"]), step)
    out = []
    for mode in plan["modes"]:
        for capacity in mode["capacities"]:
            launch = launches[(mode["name"], capacity)]
            entry = {"mode": mode["name"], "capacity": capacity, "server": launch["server"],
                     "api": launch["api"],
                     "requests": w["warmup"] + w["queries"] * w["repetitions"]}
            entry.update({k: launch[k] for k in ("argv", "endpoint") if k in launch})
            out.append(placeholders(entry))
    return out  # type: ignore[return-value]


@pytest.mark.parametrize("experiment", EXPERIMENTS, ids=lambda p: p.stem)
def test_dry_run_plans_what_it_planned_before(experiment: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVLAB_GGUF", raising=False)
    before = json.loads((CAPTURES / f"{experiment.stem}.json").read_text())
    assert servers_of(experiment) == before


def test_every_shipped_experiment_has_a_capture() -> None:
    assert {p.stem for p in EXPERIMENTS} == {p.stem for p in CAPTURES.glob("*.json")}


def test_the_printed_plan_has_a_line_per_step() -> None:
    from typer.testing import CliRunner

    from kvlab.cli import app

    path = ROOT / "experiments" / "quickstart-abba.toml"
    plan = dry_run(path)
    text = CliRunner().invoke(app, ["run", str(path), "--dry-run"]).stdout
    numbered = [line for line in text.splitlines() if line[:5].strip().rstrip(".").isdigit()]
    assert len(numbered) == len(plan["steps"])
    # what sends the requests is the load driver, in the JSON and the first line
    assert plan["driver"] == {"kind": "in-process"}
    assert "tokens; load driver in-process (this process's event loop)" in text
    # ABBA: A1 B1 B2 A2; B1 and B2 are adjacent and share one server
    assert [s["step"] for s in plan["steps"][:4]] == ["launch", "warmup", "rows", "stop"]
    assert [s["mode"] for s in plan["steps"] if s["step"] == "launch"] == [
        "recompute", "kv-cache", "recompute"]
    assert [len(s["rows"]) for s in plan["steps"] if s["step"] == "rows"] == [3, 6, 3]
