"""The main job's sizes: ``make run`` runs every experiment of ``make run-full``, each at
a size that still gives a bootstrap interval, and its guide page gives those sizes.

The experiment steps are read from ``make -n`` (what make would run), planned with
``kvlab run --dry-run`` as the real command line gives them, and each measured cell
(mode, capacity, load point) must have at least MIN_BOOTSTRAP_VALUES rows.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from kvlab.analysis.intervals import MIN_BOOTSTRAP_VALUES

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def experiment_steps(target: str) -> list[list[str]]:
    """The ``kvlab run`` lines of ``make -n TARGET``, as argv after ``kvlab``."""
    out = subprocess.run(["make", "-n", target, "RESULTS=/nonexistent/results"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return [shlex.split(line)[1:] for line in out.splitlines()
            if re.match(r"^\S*kvlab run experiments/", line)]


def dry_plan(argv: list[str]) -> dict[str, Any]:
    from typer.testing import CliRunner

    from kvlab.cli import app

    at = argv.index("--out")
    result = CliRunner().invoke(app, [*argv[:at], *argv[at + 2:], "--dry-run", "--json"])
    assert result.exit_code == 0, f"{shlex.join(argv)}: {result.output}"
    plan: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])["plan"]
    return plan


def test_make_run_runs_what_make_run_full_runs() -> None:
    quick, full = experiment_steps("run"), experiment_steps("run-full")
    assert [a[1] for a in quick] == [a[1] for a in full] and len(quick) >= 6


@pytest.mark.parametrize("argv", experiment_steps("run"), ids=lambda a: Path(a[1]).stem)
def test_each_cell_of_make_run_has_the_rows_of_an_interval(argv: list[str]) -> None:
    plan = dry_plan(argv)
    cells: dict[tuple[str, int, str], int] = {}
    for step in plan["steps"]:
        if step["step"] == "point":
            key = (step["mode"], step["capacity"], step["load"])
            cells[key] = cells.get(key, 0) + step["requests"]
        elif step["step"] == "rows":
            for row in step["rows"]:
                key = (row[0], step["capacity"], "")
                cells[key] = cells.get(key, 0) + 1
    assert cells, f"{argv[1]}: no measured step in the plan"
    few = {k: n for k, n in cells.items() if n < MIN_BOOTSTRAP_VALUES}
    assert not few, f"{argv[1]}: cells below {MIN_BOOTSTRAP_VALUES} rows: {few}"


def test_the_main_job_page_gives_make_runs_sizes() -> None:
    page = (ROOT / "docs" / "getting-started" / "main-job.md").read_text()
    for argv in experiment_steps("run"):
        sizes = shlex.join(argv[2:argv.index("--out")])
        assert sizes in page, f"docs/getting-started/main-job.md lacks {argv[1]}'s {sizes}"
