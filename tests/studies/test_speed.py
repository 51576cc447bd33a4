"""The speed benchmark's arithmetic and runners on a tiny model (timings are never
asserted: they are measured by ``kvlab engine-speed``)."""

from __future__ import annotations

import pytest

from kvlab.engine.gemma import build_gemma
from kvlab.engine.gemma_config import GemmaConfig
from kvlab.studies import speed

TINY = GemmaConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, n_kv_heads=1,
                   head_dim=16, ffn_dim=48, max_len=64, window=4, sliding=(True, False))


def test_rates_are_prompt_over_first_and_steps_over_the_rest() -> None:
    assert speed._rates(100, 11, 0.5, 1.5) == (200.0, 10.0)


def test_measure_warms_up_then_takes_medians_per_runner() -> None:
    calls: list[tuple[str, int]] = []

    def runner(name: str, rates: tuple[float, float]):  # type: ignore[no-untyped-def]
        def run(ids: list[int], n: int) -> tuple[float, float]:
            calls.append((name, len(ids)))
            return rates
        return run

    results = speed.measure({"engine": runner("engine", (100.0, 20.0)),
                             "transformers": runner("transformers", (50.0, 10.0))},
                            {4: [1] * 4, 8: [1] * 8}, new_tokens=3, repeats=2)
    assert calls[:2] == [("engine", 4), ("transformers", 4)]  # warm-ups on the shortest
    assert len(calls) == 2 + 2 * 2 * 2
    ratios = speed.ratios(results)
    assert [(r["context"], r["versus"]) for r in ratios] == [(4, "transformers"),
                                                             (8, "transformers")]
    assert ratios[0]["decode_ratio"] == pytest.approx(2.0)


def test_engine_runner_on_a_tiny_model() -> None:
    prefill, decode = speed.time_engine(build_gemma(TINY), list(range(10)), 4)
    assert prefill > 0 and decode > 0
