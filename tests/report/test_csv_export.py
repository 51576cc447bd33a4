"""records.csv and summaries.csv: columns, derived metrics, refused rows flagged."""

from __future__ import annotations

import csv
from pathlib import Path

from kvlab.report.csv_export import RECORD_COLUMNS, SUMMARY_COLUMNS, write_csvs
from tests.report.synthetic_runs import two_mode_rows, write_run


def _read(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def test_csv_columns_and_values(tmp_path: Path) -> None:
    rows = two_mode_rows(n=5, capacities=(256,))
    bad = next(i for i, r in enumerate(rows) if r.mode == "fast" and not r.warmup)
    rows[bad] = rows[bad].model_copy(update={"truncated": True})
    run = write_run(tmp_path / "run", rows)
    records_csv, summaries_csv = write_csvs(run, resamples=50)
    header, records = _read(records_csv)
    assert tuple(header) == RECORD_COLUMNS
    assert {"e2e_ms", "ttft_ms", "itl_effective_ms", "prefill_ms", "overhead_ms"} <= set(header)
    assert len(records) == len(rows)  # warm-ups included, flagged
    assert sum(r["warmup"] == "true" for r in records) == 2
    refused = [r for r in records if r["refused_reasons"]]
    assert [(r["mode"], r["refused_reasons"], r["valid"]) for r in refused] == [
        ("fast", "truncated", "false")]
    first = next(r for r in records if r["warmup"] == "false")
    # slow q00 @ 256: prefill 28, decode 30, overhead 2 (ms)
    assert float(first["e2e_ms"]) == 60.0 and float(first["overhead_ms"]) == 2.0
    header, summaries = _read(summaries_csv)
    assert tuple(header) == SUMMARY_COLUMNS
    assert [(s["mode"], s["capacity"], s["load"], s["rows"], s["refused"]) for s in summaries] \
        == [("slow", "256", "", "5", "0"), ("fast", "256", "", "5", "1")]
    assert [(s["valid"], s["refused_by_reason"]) for s in summaries] == [
        ("5", ""), ("4", "truncated=1")]
    assert float(summaries[0]["e2e_ms_mean_ci_low"]) <= float(summaries[0]["e2e_ms_mean"])


def test_every_column_is_named_once() -> None:
    """A metric's name must not be a record field's (records.csv would name two columns
    alike), nor give two metrics one summaries.csv column."""
    for columns in (RECORD_COLUMNS, SUMMARY_COLUMNS):
        assert len(columns) == len(set(columns)), sorted(c for c in columns
                                                         if columns.count(c) > 1)
