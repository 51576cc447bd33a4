from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kvlab.errors import ConfigError
from kvlab.studies.bench_files import write_outputs
from kvlab.studies.timing import BenchSettings, KvBenchResult, Run


def _result() -> KvBenchResult:
    result = KvBenchResult(BenchSettings(contexts=(32, 64), new_tokens=3, repeats=1), 10, "x")
    for ctx, scale in ((32, 1), (64, 2)):
        result.runs.append(Run("naive", ctx, 0, [10 * scale, 20 * scale, 30 * scale]))
        result.runs.append(Run("cached", ctx, 0, [10 * scale, 11 * scale, 12 * scale]))
    return result


def test_writes_json_csv_png(tmp_path: Path) -> None:
    json_path, csv_path, png_path = write_outputs(_result(), tmp_path / "out")
    doc = json.loads(json_path.read_text())
    assert [r["context"] for r in doc["rows"]] == [32, 64]
    assert doc["rows"][0]["decode_speedup"] == pytest.approx(10.0)
    assert doc["rows"][0]["total_speedup"] == pytest.approx(2.5)
    assert len(doc["runs"]) == 4
    rows = list(csv.DictReader(csv_path.open()))
    assert rows[1]["context"] == "64" and "cached_decode_s_per_token" in rows[0]
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_unwritable_directory_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match="--out"):
        write_outputs(_result(), blocker / "sub")
