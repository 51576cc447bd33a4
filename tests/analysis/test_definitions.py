"""Peers' definitions and kvlab's own, on hand-made records with known answers."""

from __future__ import annotations

import pytest

from kvlab.analysis import definitions as d
from kvlab.analysis.definition_cells import under
from kvlab.analysis.evaluate import summarize
from kvlab.analysis.valid_rows import judge
from kvlab.errors import ConfigError
from kvlab.rundir import ApiKind
from tests.rows import MS, row

# --------------------------------------------------------------- kvlab against the seeds


def test_tokens_per_second_is_sum_over_sum_not_mean_of_rates() -> None:
    # Seed 003: tokens_per_second = 64 × n / Σ seconds. Two rows of 64 tokens in 0.5 s
    # and 1.5 s: 128 / 2.0 = 64 tok/s; the mean of per-row rates would be 85.33.
    rows = [row(query_id="q1", t_end=500 * MS, t_last_content=400 * MS),
            row(query_id="q2", t_end=1500 * MS)]
    _, rate = under(rows, "kvlab")
    assert rate == pytest.approx(64.0)
    assert rate != pytest.approx((64 / 0.5 + 64 / 1.5) / 2)  # 85.33


def test_notebook_itl_uses_server_tokens_and_inter_delta_p95() -> None:
    # Seed 000: ITL effective = (last delta − first delta) / (completion tokens − 1),
    # from the server's count, even when deltas bundle tokens (2 deltas for 32 tokens).
    bundled = row(api=ApiKind.OPENAI_CHAT, output_tokens=32, requested_tokens=32,
                  t_first_content=117 * MS, t_last_content=(117 + 31 * 8) * MS,
                  chunk_ns=[117 * MS, (117 + 31 * 8) * MS])
    aggs, _ = under([bundled], "kvlab")
    assert aggs["itl_ms"].median == pytest.approx(8.0)
    assert aggs["ttft_ms"].median == pytest.approx(117.0)
    # Inter-delta median and p95 pool every gap of every row, linear interpolation.
    gaps_row = row(chunk_ns=[(100 + 10 * i) * MS for i in range(63)] + [(720 + 40) * MS])
    s = summarize(judge([gaps_row]))
    assert s.dist("inter_delta_ms")["p50"] == pytest.approx(10.0)
    # 63 gaps: 62 of 10 ms and one of 40 ms; rank 0.95 × 62 = 58.9 lies within the 10s.
    assert s.dist("inter_delta_ms")["p95"] == pytest.approx(10.0)
    tail = row(chunk_ns=[0, 10 * MS, 20 * MS, 30 * MS, 70 * MS])  # gaps 10, 10, 10, 40
    # p95 of [10, 10, 10, 40]: rank 0.95 × 3 = 2.85 → 10 + 0.85 × 30 = 35.5
    assert summarize(judge([tail])).dist("inter_delta_ms")["p95"] == pytest.approx(35.5)


# ---------------------------------------------------------------------- the other sets


def _chat_row(**kw: object) -> object:
    # A chat stream: empty role chunk read at 50 ms, content 100..730 ms every 10 ms,
    # finish/usage/[DONE] read at 800 ms; 64 tokens.
    fields = dict(api=ApiKind.OPENAI_CHAT, t_first_chunk=50 * MS, t_end=800 * MS)
    fields.update(kw)
    return row(**fields)


def test_vllm_counts_the_role_chunk_and_pools_chunk_gaps() -> None:
    r = _chat_row()
    assert d.vllm_ttft_ms(r) == pytest.approx(50.0)  # role chunk, not first content
    gaps = [v for v, _ in d.vllm_itl_samples(r)]
    # 50 → 100 (role to first content), 63 × 10, 730 → 800 (last content to finish)
    assert len(gaps) == 65
    assert gaps[0] == pytest.approx(50.0) and gaps[-1] == pytest.approx(70.0)
    assert d.vllm_tpot_ms(r) == pytest.approx((800 - 50) / 63)
    aggs, rate = under([r], "vllm")
    assert aggs["itl_ms"].median == pytest.approx(10.0)
    assert aggs["e2e_ms"].median == pytest.approx(800.0)
    assert rate == pytest.approx(64 / 0.8)


def test_guidellm_tpot_includes_ttft_and_percentiles_do_not_interpolate() -> None:
    r = _chat_row()
    assert d.guidellm_tpot_ms(r) == pytest.approx(730 / 64)
    assert d.guidellm_itl_ms(r) == pytest.approx(630 / 63)
    rows = [row(query_id=f"q{i}", t_end=e * MS) for i, e in enumerate((1000, 2000, 3000, 4000))]
    g, _ = under(rows, "guidellm")
    k, _ = under(rows, "kvlab")
    assert g["e2e_ms"].median == pytest.approx(2000.0)  # first value reaching 50 %
    assert k["e2e_ms"].median == pytest.approx(2500.0)  # linear interpolation


def test_guidellm_weights_itl_by_tokens() -> None:
    # ITL 10 ms over 63 gaps and 100 ms over 1 gap (2 tokens): weighted mean
    # (10·63 + 100·1) / 64, not (10 + 100) / 2.
    short = row(query_id="q2", output_tokens=2, requested_tokens=2,
                t_first_content=100 * MS, t_last_content=200 * MS)
    g, _ = under([row(), short], "guidellm")
    assert g["itl_ms"].mean == pytest.approx((10 * 63 + 100) / 64)
    k, _ = under([row(), short], "kvlab")
    assert k["itl_ms"].mean == pytest.approx(55.0)


def test_aiperf_ends_at_last_content() -> None:
    r = _chat_row()
    assert d.aiperf_e2e_ms(r) == pytest.approx(730.0)
    assert d.aiperf_itl_ms(r) == pytest.approx((730 - 100) / 63)
    aggs, _ = under([r], "aiperf")
    assert aggs["tpot_ms"].count == 0  # AIPerf has no TPOT


def test_missing_facts_leave_metrics_empty() -> None:
    r = row(stream=False, t_first_content=None, t_last_content=None, chunk_ns=[],
            t_first_chunk=None)
    for name in d.SETS:
        aggs, _ = under([r], name)
        assert aggs["ttft_ms"].count == 0
        assert aggs["e2e_ms"].count == (0 if name == "aiperf" else 1)


def test_resolve_names() -> None:
    assert d.resolve(["all"]) == ["kvlab", "vllm", "guidellm", "aiperf"]
    assert d.resolve(["aiperf", "vllm"]) == ["vllm", "aiperf"]
    with pytest.raises(ConfigError, match="valid: kvlab, vllm, guidellm, aiperf, all"):
        d.resolve(["genai-perf"])
