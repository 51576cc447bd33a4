"""The KV check's table (report.md and report.html): a disagreement is shown, never hidden."""

from __future__ import annotations

from kvlab.report.kv_check import kv_check_table
from kvlab.servers.kvlog import LoggedKvCache, PredictedKvCache, build_check

ROW = 256 * 2  # one KV head of dim 256, f16


def _logged(kind: str, cells: int, layers: int, mib: float) -> LoggedKvCache:
    return LoggedKvCache(kind=kind, cells=cells, layers=layers, n_seq_max=1, n_stream=1,
                         type_k="f16", type_v="f16", size_mib=2 * mib, k_mib=mib, v_mib=mib)


def _predicted(kind: str, cells: int, layers: int) -> PredictedKvCache:
    return PredictedKvCache(kind=kind, cells=cells, layers=layers,
                            k_bytes=layers * cells * ROW, v_bytes=layers * cells * ROW)


LOGGED = [_logged("non-SWA", 4096, 3, 6.0), _logged("SWA", 1024, 15, 7.5)]


def test_a_match_reads_as_one() -> None:
    check = build_check([_predicted("non-SWA", 4096, 3), _predicted("SWA", 1024, 15)], LOGGED)
    table = kv_check_table(check)
    assert "| non-SWA | 4096 / 4096 | 3 / 3 | 6.00 / 6.00 | 6.00 / 6.00 | 12582912 | yes |" \
        in table
    assert "KV check: prediction matches the log." in table and "NO" not in table


def test_a_disagreement_is_a_row_marked_no_and_a_line_per_mismatch() -> None:
    check = build_check([_predicted("non-SWA", 4096, 3), _predicted("SWA", 768, 15)], LOGGED)
    table = kv_check_table(check.model_dump(mode="json"))  # as the manifest keeps it
    assert "| SWA | 768 / 1024 |" in table and "| NO |" in table
    assert "PREDICTION DIFFERS FROM THE LOG" in table
    assert "- SWA: cells: predicted 768, logged 1024" in table


def test_a_cache_on_one_side_only_shows_a_dash_on_the_other() -> None:
    table = kv_check_table(build_check([_predicted("non-SWA", 4096, 3)], LOGGED))
    assert "| SWA | – / 1024 | – / 15 | – / 7.50 | – / 7.50 | – | NO |" in table
    assert "- SWA: no predicted cache" in table
