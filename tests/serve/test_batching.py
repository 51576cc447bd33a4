"""kvlab serve --slots/--kv-blocks: continuous batching behind the same APIs, /metrics,
refusal of a request the pool cannot hold, and blocks freed when a client leaves."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx
import pytest

from kvlab.bench.client.gauges import parse_prometheus
from kvlab.errors import ConfigError
from kvlab.serve import ServeSettings, create_app
from tests.rounding import assert_no_near_tie
from tests.serve.conftest import SERVED_TOY, start, stream_json

serving = contextmanager(start)


@pytest.fixture(scope="module")
def batched_url() -> Iterator[str]:
    """Up to 8 sequences over 12 blocks of 16 tokens (192 tokens): a tight pool."""
    yield from start(n_ctx=128, slots=8, kv_blocks=12)


def _tokens(base_url: str, prompt: list[int], n: int) -> list[int]:
    body = {"prompt": prompt, "n_predict": n, "temperature": 0, "ignore_eos": True}
    events = stream_json(base_url, "/completion", body)
    return [t for e in events for t in e["tokens"]]


def _metrics(base_url: str) -> dict[str, float]:
    response = httpx.get(base_url + "/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {k.split("{")[0].removeprefix("kvlab:") + ("{" + k.split("{")[1] if "window" in k
                                                      else ""): v
            for k, v in parse_prometheus(response.text).samples.items()}


def test_concurrent_requests_get_the_tokens_one_slot_gives(batched_url: str) -> None:
    prompts = [[(7 * i + j) % 250 + 1 for j in range(3 + 9 * i)] for i in range(6)]
    with serving(n_ctx=128) as one_slot:  # one at a time, contiguous cache
        expected = [_tokens(one_slot, p, 40) for p in prompts]
    before = _metrics(batched_url)
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda p: _tokens(batched_url, p, 40), prompts))
    for prompt in prompts:
        assert_no_near_tie(SERVED_TOY, prompt, 40)
    assert got == expected
    after = _metrics(batched_url)
    # 6 sequences of up to 88 tokens cannot all fit 12 blocks: the youngest were
    # preempted and recomputed, and every block came back.
    assert after["num_preemptions_total"] > before["num_preemptions_total"]
    assert after["generation_tokens_total"] - before["generation_tokens_total"] == 6 * 40
    assert after["request_success_total"] - before["request_success_total"] == 6
    assert after['kv_blocks_in_use{model_name="toy",window="full"}'] == 0
    assert after["kv_blocks_total"] == 12 and after["num_requests_running"] == 0


def test_a_request_larger_than_the_pool_is_a_400_not_a_hang(batched_url: str) -> None:
    # 40 prompt tokens + 40 new: 79 positions, 5 blocks of 16; the pool has 4.
    with serving(n_ctx=256, slots=2, kv_blocks=4) as url:
        for stream in (False, True):
            response = httpx.post(url + "/completion", json={
                "prompt": list(range(1, 41)), "n_predict": 40, "stream": stream}, timeout=30)
            assert response.status_code == 400
            message = response.json()["error"]["message"]
            assert message.startswith("the request needs 5 KV blocks of 16 tokens, "
                                      "the pool has 4")


def test_a_client_that_leaves_frees_its_blocks_at_once() -> None:
    with serving(n_ctx=2048, slots=2, kv_blocks=256) as url:
        body = {"prompt": list(range(1, 200)), "n_predict": 1800, "ignore_eos": True,
                "stream": True, "temperature": 0}
        with httpx.stream("POST", url + "/completion", json=body, timeout=60) as response:
            lines = response.iter_lines()
            seen = sum(1 for _, line in zip(range(20), lines, strict=False) if line)
            assert seen >= 5
            assert _metrics(url)['kv_blocks_in_use{model_name="toy",window="full"}'] > 0
        # The next scheduler step returns the blocks. Judged in the server's own steps,
        # not seconds (a loaded machine takes longer for both): wait until the blocks
        # are back or the request has generated all it asked for, whichever comes first.
        while True:
            metrics = _metrics(url)
            freed = metrics['kv_blocks_in_use{model_name="toy",window="full"}'] == 0
            if freed or metrics["generation_tokens_total"] >= 1800:
                break
            time.sleep(0.02)
        assert freed, metrics
        assert metrics["num_requests_running"] == 0
        assert metrics["generation_tokens_total"] < 1800  # it did not run to the end


def test_one_slot_reports_its_queue_in_metrics(base_url: str) -> None:
    metrics = _metrics(base_url)
    assert metrics["num_requests_running"] == 0 and metrics["num_requests_waiting"] == 0
    assert "kv_blocks_total" not in metrics  # no pool behind one slot


def test_props_say_how_requests_share_the_engine(batched_url: str) -> None:
    props = httpx.get(batched_url + "/props").json()
    assert props["total_slots"] == 8
    assert props["kvlab"]["paged_kv"] == {"blocks": 12, "block_size": 16,
                                          "prefill_budget": 256, "prefix_caching": True}
    assert props["kvlab"]["prompt_reuse"] is True


def test_batching_needs_the_kv_cache() -> None:
    with pytest.raises(ConfigError, match="--no-cache serves one slot"):
        create_app(ServeSettings(slots=4, use_cache=False))
    with pytest.raises(ConfigError, match="--kv-blocks must be >= 1"):
        create_app(ServeSettings(kv_blocks=0))


def test_zero_slots_is_refused() -> None:
    with pytest.raises(ConfigError, match="--slots must be >= 1, got 0"):
        create_app(ServeSettings(slots=0))


def _complete(base_url: str, prompt: list[int], **fields: object) -> dict:
    body = {"prompt": prompt, "max_tokens": 8, "temperature": 0, "ignore_eos": True,
            **fields}
    response = httpx.post(base_url + "/v1/completions", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_repeated_prompt_starts_from_its_cached_blocks() -> None:
    prompt = [(5 * j) % 250 + 1 for j in range(40)]  # 2 full blocks of 16 + 8 tokens
    assert_no_near_tie(SERVED_TOY, prompt, 8)
    with serving(n_ctx=128, slots=4) as url:
        first = _complete(url, prompt)
        again = _complete(url, prompt)
        not_asked = _complete(url, prompt, cache_prompt=False)
        metrics = _metrics(url)
    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 32
    assert again["timings"]["cache_n"] == 32 and again["timings"]["prompt_n"] == 8
    assert not_asked["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert first["choices"][0]["text"] == again["choices"][0]["text"] \
        == not_asked["choices"][0]["text"]
    # vLLM's counters: tokens looked up (the two requests that allowed it) and found.
    assert metrics["prefix_cache_queries_total"] == 80
    assert metrics["prefix_cache_hits_total"] == 32
    assert metrics["prompt_tokens_total"] == 40 + 8 + 40  # computed, not reused
    assert metrics['kv_blocks_cached{model_name="toy",window="full"}'] > 0


def test_no_prefix_cache_reuses_nothing_and_counts_nothing() -> None:
    prompt = [(3 * j) % 250 + 1 for j in range(40)]
    with serving(n_ctx=128, slots=4, prefix_cache=False) as url:
        _complete(url, prompt)
        again = _complete(url, prompt)
        metrics = _metrics(url)
        props = httpx.get(url + "/props").json()
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert "prefix_cache_hits_total" not in metrics and metrics["prompt_tokens_total"] == 80
    assert props["kvlab"]["prompt_reuse"] is False


def _exposition(base_url: str) -> dict[str, float]:
    response = httpx.get(base_url + "/metrics")
    assert response.status_code == 200
    return parse_prometheus(response.text).samples


def _family(samples: dict[str, float], name: str, label: str) -> dict[str, float]:
    """``name``'s samples by the value of ``label``."""
    out = {}
    for key, value in samples.items():
        if key.split("{")[0] == name:
            labels = dict(pair.split("=", 1) for pair in key.split("{")[1][:-1].split(","))
            out[labels[label].strip('"')] = value
    return out


def test_each_step_is_timed_by_phase_on_metrics(batched_url: str) -> None:
    before = _exposition(batched_url)
    assert len(_tokens(batched_url, [5, 6, 7, 8], 12)) == 12
    after = _exposition(batched_url)

    def grew(key: str) -> float:
        return after[key] - before.get(key, 0.0)

    toy = 'model_name="toy"'
    steps = grew(f"kvlab:step_duration_seconds_count{{{toy}}}")
    assert steps >= 12  # the prompt's step samples the first token, one step per other
    assert grew(f"kvlab:step_rows_total{{{toy}}}") == 12
    counts = _family(after, "kvlab:step_phase_seconds_count", "phase")
    sums = _family(after, "kvlab:step_phase_seconds_sum", "phase")
    assert {"schedule", "batch", "forward", "sample", "stream", "finish"} <= set(counts)
    for phase in ("schedule", "batch", "forward", "sample", "finish"):  # in every step
        assert counts[phase] == after[f"kvlab:step_duration_seconds_count{{{toy}}}"]
    # the phases partition each step: their sums add up to the steps' sum
    step_sum = after[f"kvlab:step_duration_seconds_sum{{{toy}}}"]
    phase_sum = sum(v for k, v in sums.items() if k != "between")
    assert phase_sum == pytest.approx(step_sum, rel=1e-6)
    buckets = _family(after, "kvlab:step_duration_seconds_bucket", "le")
    assert buckets["+Inf"] == after[f"kvlab:step_duration_seconds_count{{{toy}}}"]
    assert list(buckets.values()) == sorted(buckets.values())  # cumulative
    seam = _family(after, "kvlab:token_delivery_seconds_count", "stage")["seam"]
    assert seam - _family(before, "kvlab:token_delivery_seconds_count", "stage").get(
        "seam", 0.0) == 12
    assert after[f"kvlab:weight_bytes_per_step{{{toy}}}"] > 0
    # a toy's weights fit in cache: no bandwidth measured, no floor (Gemma's: measured)
    assert after[f"kvlab:copy_bandwidth_bytes_per_second{{{toy}}}"] == 0
