"""The roofline of a decode step: bytes read, the machine's bandwidth, time by batch size.

A decode step of B rows reads every weight once (:func:`kvlab.engine.weights.weight_nbytes`)
and each row's cached keys and values; it computes about 2 x weights x B operations.
While the bytes dominate, the step costs bytes / bandwidth whatever B is: batching is
then nearly free. :func:`copy_bandwidth` measures the bandwidth the way STREAM's copy
does (bytes read + bytes written per second, best of a few runs, on arrays far larger
than the caches); :func:`time_steps` times the engine's own batched decode step (the
scheduler's flattened forward over a paged pool) at each batch size, interleaving the
sizes within each repeat so that a change in machine load hits them alike. A
benchmark, never a test: timings are printed, not asserted.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch
from torch import nn

from kvlab.engine.lm import LanguageModel, model_dtype
from kvlab.engine.paged import BlockPool
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.ragged import RaggedBatch
from kvlab.engine.weights import COPY_BYTES, copy_bandwidth, weight_nbytes

__all__ = ["COPY_BYTES", "StepTime", "copy_bandwidth", "kv_nbytes_read", "time_steps"]


def kv_nbytes_read(model: LanguageModel, context: int) -> int:
    """Bytes of keys and values one decode row reads at ``context`` tokens (a sliding
    layer reads at most its window)."""
    c = model.config
    per_token = 2 * c.n_kv_heads * c.head_dim * torch.finfo(model_dtype(model)).bits // 8
    return sum(per_token * min(context, w or context) for w in c.layer_windows)


@dataclass(frozen=True)
class StepTime:
    """One batch size: the median decode step and what it read."""

    batch: int
    step_ms: float
    weight_bytes: int
    kv_bytes: int

    @property
    def tokens_per_s(self) -> float:
        """Tokens the step produces per second (one per row)."""
        return 1e3 * self.batch / self.step_ms

    @property
    def gb_per_s(self) -> float:
        """Bytes read per second (weights and K/V), in GB/s (1e9 bytes)."""
        return (self.weight_bytes + self.kv_bytes) / self.step_ms / 1e6


def time_steps(model: LanguageModel, batch_sizes: list[int], context: int = 64,
               repeats: int = 5, steps: int = 3, seed: int = 0) -> list[StepTime]:
    """Median time of a decode step of B rows for each B in ``batch_sizes``, every row
    at about ``context`` tokens (prompts of random ids, prefilled once)."""
    largest = max(batch_sizes)
    bs = 16
    grow_to = context + repeats * steps * len(batch_sizes) + 1
    pool = BlockPool(model.config, n_blocks=largest * (-(-grow_to // bs) + 1), block_size=bs)
    kv = PagedKV.for_pool(pool, model_dtype(model))
    gen = torch.Generator().manual_seed(seed)
    vocab = model.config.vocab_size
    with torch.inference_mode():
        for seq in range(largest):  # one prefill per sequence
            pool.add(seq)
            pool.grow(seq, context)
            batch = RaggedBatch(pool, kv, [(seq, context)])
            model(torch.randint(0, vocab, (1, context), generator=gen), batch, last_only=True)
            batch.advance()
        samples: dict[int, list[float]] = {b: [] for b in batch_sizes}
        for _ in range(repeats + 1):  # the first round warms up
            for b in batch_sizes:
                for _ in range(steps):
                    ids = torch.randint(0, vocab, (1, b), generator=gen)  # (1, B)
                    start = time.perf_counter()
                    for seq in range(b):
                        pool.grow(seq, 1)
                    batch = RaggedBatch(pool, kv, [(seq, 1) for seq in range(b)])
                    model(ids, batch, logits_at=torch.arange(b))  # (1, B, V)
                    batch.advance()
                    samples[b].append(time.perf_counter() - start)
    weights = weight_nbytes(_as_module(model))
    kv_bytes = kv_nbytes_read(model, context)
    return [StepTime(b, 1e3 * statistics.median(samples[b][steps:]), weights, b * kv_bytes)
            for b in batch_sizes]


def _as_module(model: LanguageModel) -> nn.Module:
    assert isinstance(model, nn.Module)
    return model
