"""Trace replay checks the cache behaviour it encodes: the prefix-cache hits a Mooncake
trace's ``hash_ids`` predict, against the hits the server counted.

A trace row's prompt is its blocks' texts in order, ``block_tokens`` tokens each
(:mod:`kvlab.bench.plan.trace`; prepared.json keeps each row's block names), so two rows
share their text up to the end of their last equal block. Under ``cache_prompt = true``
a server with an LRU prefix cache of full blocks (kvlab serve, vLLM on a model with one
block group) should then find, for each request, the leading *server* blocks whose
tokens an earlier request computed and the cache still holds.

Per (mode, capacity) whose server recorded its KV budget, every request it served (the
warm-up included: its blocks take room too) is named block by block: server block ``k``
ends at prompt token ``(k + 1) x block - 1``, which is text token ``j`` once the tokens
the server adds in front (BOS: the server's prompt count less prepared.json's) are
left out; its name is the row's trace block names up to block ``j // block_tokens``
and ``j mod block_tokens``. Blocks that reach into the output are the request's own.
:func:`~kvlab.analysis.prefix_hits.predict_hits` replays the server's pool
(``kv_blocks_total`` / ``num_gpu_blocks`` blocks of its block size, from its
``/metrics``) over the requests in the order and at the times the records give
(sent, first token, end); the cache carries over from one point to the next, as the
server's does.

Per point: the hits predicted (tokens), the server's counter (Δ ``prefix_cache_hits``:
kvlab's and vLLM's count tokens) and the cached tokens the records report. They drift
when the counted hits differ from the predicted: the workload sent is not the one the
trace encodes (lengths, block texts, the server's cache), and the report says so.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.analysis.knee_check import CellKey
from kvlab.analysis.prefix_hits import (
    BlockRequest,
    LruBlockCache,
    block_request,
    predict_hits,
)
from kvlab.analysis.server_counters import PointCounters, exposition
from kvlab.analysis.validate import reuse_asked
from kvlab.errors import KvlabError
from kvlab.memory.served import ServedKv
from kvlab.rundir import GaugeSample, Record


@dataclass(frozen=True)
class TraceBlocks:
    """A trace row as prepared: its block names, tokens per block, and the prompt tokens
    the sizing counted (the text alone)."""

    names: tuple[str, ...]
    block_tokens: int
    text_tokens: int


def server_block_names(row: Record, trace: TraceBlocks | None, block: int
                       ) -> list[Hashable]:
    """The names of ``row``'s full server blocks over its prompt and output (a block
    reaching past the prompt text, or any block of a row outside the trace, is the
    row's own)."""
    own = (row.mode, row.position)
    prompt = row.prompt_tokens or 0
    length = prompt + max(row.output_tokens or 1, 1) - 1
    offset = prompt - trace.text_tokens if trace is not None else 0
    names: list[Hashable] = []
    for k in range(length // block):
        j = (k + 1) * block - 1 - offset  # the block's last token, in the text
        if trace is None or not 0 <= j < trace.text_tokens:
            names.append((own, k))
            continue
        q, r = divmod(j, trace.block_tokens)
        names.append((trace.names[:q + 1], r))
    return names


@dataclass(frozen=True)
class PointHits:
    """One point's prefix-cache hits, tokens: ``predicted`` by the LRU replay,
    ``counted`` by the server (Δ of its counter; None: it has none), ``cached`` as the
    records report them (None: a row without the count). ``requests``: the point's
    requests; ``differing``: (query id, predicted, cached) of rows whose own count
    differs from the prediction."""

    mode: str
    capacity: int
    load: str | None
    requests: int
    predicted: int
    counted: float | None
    cached: int | None
    block: int
    pool: int
    differing: tuple[tuple[str, int, int | None], ...] = field(default=())

    @property
    def drift(self) -> bool:
        """True when the server counted other hits than the trace predicts."""
        seen = self.counted if self.counted is not None else self.cached
        return seen is not None and seen != self.predicted

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "requests": self.requests, "predicted_tokens": self.predicted,
                "counted_tokens": self.counted, "cached_tokens": self.cached,
                "block": self.block, "pool": self.pool, "drift": self.drift,
                "differing": [list(d) for d in self.differing]}


def _request(row: Record, names: list[Hashable], block: int) -> BlockRequest:
    computed = row.t_first_content or row.t_first_chunk or row.t_end or row.t_sent
    return block_request(names, row.prompt_tokens or 0, row.output_tokens or 1, block,
                         row.t_sent, computed, row.t_end or computed)


def _cell_hits(cell: CellKey, served: ServedKv, rows: list[Record],
               blocks: Mapping[tuple[int, str], TraceBlocks],
               counters: Mapping[str | None, PointCounters], metrics: str | None
               ) -> list[PointHits]:
    mode, capacity = cell
    try:
        pool, block = served.prefix_pool(metrics)
    except KvlabError:
        return []
    traced = [r for r in rows if (capacity, r.query_id) in blocks and not r.warmup]
    if not traced or not any(reuse_asked(r) for r in traced):
        return []
    cache = LruBlockCache(pool)
    out = []
    for load in dict.fromkeys(r.load for r in rows):
        group = [r for r in rows if r.load == load]
        requests = [_request(r, server_block_names(
            r, None if r.warmup else blocks.get((capacity, r.query_id)), block), block)
            for r in group]
        hits = predict_hits(requests, pool, cache, reuse=[reuse_asked(r) for r in group],
                            keys=[("row", r.position) for r in group])
        measured = [r for r in group if not r.warmup]
        if not any((capacity, r.query_id) in blocks for r in measured):
            continue
        predicted = {id(r): h * block for r, h in zip(group, hits, strict=True)}
        cached = [r.cached_tokens for r in measured]
        counter = counters.get(load)
        out.append(PointHits(
            mode, capacity, load, len(measured), sum(predicted[id(r)] for r in measured),
            counter.deltas["prefix_cache_hits"] if counter else None,
            None if any(c is None for c in cached) else sum(c or 0 for c in cached),
            block, pool,
            tuple((r.query_id, predicted[id(r)], r.cached_tokens) for r in measured
                  if r.cached_tokens != predicted[id(r)])))
    return out


def trace_hits(budgets: Mapping[CellKey, ServedKv], records: Sequence[Record],
               blocks: Mapping[tuple[int, str], TraceBlocks],
               counters: Sequence[PointCounters], gauges: Sequence[GaugeSample]
               ) -> list[PointHits]:
    """Predicted against counted hits per point of every (mode, capacity) that replayed
    a trace on a server with an LRU prefix cache; ``records``: every record (warm-ups
    and superseded attempts included: the server served them)."""
    out = []
    for cell, served in budgets.items():
        rows = sorted((r for r in records if (r.mode, r.capacity) == cell),
                      key=lambda r: r.position)
        mine = [g for g in gauges if (g.mode, g.capacity) == cell]
        out += _cell_hits(cell, served, rows, blocks,
                          {c.load: c for c in counters if (c.mode, c.capacity) == cell},
                          exposition(mine[0].samples) if mine else None)
    return out
