"""``kvlab compare``'s body: resolve the sides, show the comparison, run the gate.

The table compares the first run of each side (as two runs were always compared); the
gate (kvlab.analysis.gate) judges every run of each side over A's whole plan, with the
noise floor the history keeps when a side has fewer than three runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from kvlab.cli._app import console, print_json


def _say(text: str) -> None:
    console.print(text, highlight=False, markup=False, soft_wrap=True)


def noise_floors(a: list[Any], b: list[Any], db: Path | None, strict: bool
                 ) -> tuple[dict[Any, Any], str]:
    """The floors for a comparison with fewer than three runs on a side, and where they
    came from (none when the history is off or missing)."""
    from kvlab.analysis.gate_stats import MIN_RUNS_TO_RESAMPLE
    from kvlab.errors import ConfigError
    from kvlab.history.floors import floors_for
    from kvlab.history.location import db_path
    from kvlab.history.queries import read_only

    if min(len(a), len(b)) >= MIN_RUNS_TO_RESAMPLE:
        return {}, "between-run noise from the runs themselves"
    try:
        where = db_path(db)
        if not where.is_file():
            return {}, "no noise floor known (no run history)"
        conn = read_only(where)
    except ConfigError:
        return {}, "no noise floor known (the run history is off)"
    try:
        avoid = {r.run_id for r in b} | {str(r.path.resolve()) for r in b}
        return floors_for(conn, a[0], avoid, strict=strict)
    finally:
        conn.close()


def _table(result: Any, definitions: str | None) -> None:
    from rich import box
    from rich.table import Table

    from kvlab.report.verdicts import comparison_rows, load_label

    for mode, c in result.comparisons:
        title = (f"{mode} @ {c.capacity}, {load_label(c.load)}: B against A (A "
                 f"{c.count_a.describe()}; B {c.count_b.describe()})")
        if c.refused:
            _say(f"{title}: refused: {c.refused}")
            continue
        table = Table(title=title, title_justify="left", box=box.SIMPLE, pad_edge=False)
        for name in ("metric", "A ms", "B ms", "A/B", "95 % CI", "verdict", "n"):
            left = name in ("metric", "verdict")
            table.add_column(name, justify="left" if left else "right",
                             no_wrap=name not in ("verdict", "95 % CI"))
        for r in comparison_rows(c):
            table.add_row(r["metric"].removesuffix("_ms"), r["mean_a"], r["mean_b"], r["ratio"],
                          r["interval"], r["verdict"], r["n"].replace(" paired", "p"))
        console.print(table)
    _say("A/B > 1: B took less time; n: rows (p = paired on queries); the verdict is read "
         "from the interval alone; --json adds reductions (1 − B/A)."
         + (f" Times as {definitions} defines them, on both sides." if definitions else ""))


def compare_and_gate(run_a: str, run_b: str, *, json_out: bool, requested_tokens: int | None,
                     fail_on: list[str], alpha: float, allow_missing: bool,
                     inconclusive_ok: bool, accept_unjudged: bool, strict: bool,
                     db: Path | None, cell: tuple[str, int] | None,
                     definitions: str | None) -> None:
    """Compare the first runs of the sides; with rules, gate every run of both."""
    from kvlab.analysis.comparisons import COMPARED_METRICS
    from kvlab.analysis.definition_metrics import compared_under
    from kvlab.analysis.gate import FailOn, gate
    from kvlab.cli.sides import resolve_sides
    from kvlab.report.compare_runs import compare_runs
    from kvlab.report.gate_runs import plan_cells, refuse_self
    from kvlab.store.runs import load_run_or_import

    rules = [FailOn.parse(text) for text in fail_on]  # a bad rule: one line, exit 2
    metrics = COMPARED_METRICS if definitions is None else compared_under(definitions)
    paths_a, paths_b = resolve_sides(run_a, run_b, db)
    a = [load_run_or_import(p, requested_tokens, cell) for p in paths_a]
    b = [load_run_or_import(p, requested_tokens, cell) for p in paths_b]
    refuse_self(a, b)
    result = compare_runs(a[0], b[0], strict=strict, metrics=metrics)
    verdict, floor_line = None, ""
    if rules:
        floors, floor_line = noise_floors(a, b, db, strict)
        verdict = gate(plan_cells(a, b, strict=strict, floors=floors), rules, alpha=alpha,
                       accept_unjudged=accept_unjudged, allow_missing=allow_missing,
                       inconclusive_ok=inconclusive_ok)
    sides = {"a": [{"run_id": r.run_id, "path": str(r.path)} for r in a],
             "b": [{"run_id": r.run_id, "path": str(r.path)} for r in b]}
    if json_out:
        gated = {"gate": verdict.to_dict() | {"noise_floor": floor_line}} if verdict else {}
        print_json(result.to_dict() | {"sides": sides} | gated)
        if verdict is not None and verdict.exit_code:
            raise typer.Exit(verdict.exit_code)
        return
    for name, runs in (("A", a), ("B", b)):
        _say(f"{name} = " + ", ".join(f"{r.run_id} ({r.path})" for r in runs))
    if len(a) > 1 or len(b) > 1:
        _say("the tables compare the first run of each side; the gate judges every run")
    _table(result, definitions)
    if verdict is None:
        return
    for rule in verdict.rules:
        _say(f"gate: fail when {rule.describe()}")
    _say(f"gate: {verdict.error_rates()}; {floor_line}")
    for line in verdict.checks:
        _say(f"  {line.describe()}")
    _say(verdict.summary())
    if verdict.exit_code:
        raise typer.Exit(verdict.exit_code)
