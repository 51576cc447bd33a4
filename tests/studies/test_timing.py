from __future__ import annotations

import pytest
import torch

from kvlab.errors import ConfigError, PromptTooLongError
from kvlab.studies.timing import BenchSettings, Run, run_kv_bench


def test_metrics_are_functions_of_token_offsets() -> None:
    run = Run("cached", 32, 0, token_ns=[5_000_000, 6_000_000, 7_000_000, 8_000_000])
    assert run.prefill_s == pytest.approx(0.005)
    assert run.decode_s_per_token == pytest.approx(0.001)
    assert run.total_s == pytest.approx(0.008)


@pytest.mark.parametrize(
    "kwargs",
    [{"contexts": (0,)}, {"new_tokens": 1}, {"repeats": 0}, {"threads": 0},
     {"preset": "nope"}],
)
def test_settings_refuse_bad_values(kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        BenchSettings(**kwargs)  # type: ignore[arg-type]


def test_tiny_bench_times_both_paths_and_restores_threads() -> None:
    settings = BenchSettings(contexts=(8, 16), new_tokens=3, repeats=2, threads=1)
    labels: list[str] = []
    result = run_kv_bench(settings, on_step=labels.append)
    assert len(labels) == settings.steps() == 2 * 2 * 2 + 2
    assert len(result.runs) == 8
    assert all(len(r.token_ns) == 3 for r in result.runs)
    assert all(0 < r.token_ns[0] <= r.token_ns[1] <= r.token_ns[2] for r in result.runs)
    rows = result.rows
    assert [r.context for r in rows] == [8, 16]
    for row in rows:
        assert row.naive.decode_s_per_token > 0 and row.cached.total_s > 0
        assert row.decode_speedup == pytest.approx(
            row.naive.decode_s_per_token / row.cached.decode_s_per_token)
    assert result.to_dict()["total_speedup_bound"] == 3
    assert torch.get_num_threads() == 1  # the conftest's setting, restored


def test_context_too_long_is_refused_before_timing() -> None:
    with pytest.raises(PromptTooLongError):
        run_kv_bench(BenchSettings(contexts=(8190,), new_tokens=4))


def test_a_real_model_replaces_the_preset_in_the_settings() -> None:
    from kvlab.studies.timing import BenchSettings

    settings = BenchSettings(preset="not-a-preset", model="gemma-3-270m")
    assert settings.label == "gemma-3-270m"
    assert BenchSettings().label == "toy"
