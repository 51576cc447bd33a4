"""What a server's prefix cache answered, row by row, and what it did to TTFT.

Only where the experiment allowed reuse (a row's request carried ``cache_prompt:
true``; under false a cached row is refused, see :mod:`kvlab.analysis.validate`).
Per (mode, capacity, load), over the valid rows (:mod:`~kvlab.analysis.valid_rows`)
whose server counted cached prompt tokens:

- each row's cached tokens, prompt tokens and TTFT (the evaluation keeps every row);
- **hits**: rows with cached tokens > 0; the share of all prompt tokens that came from
  the cache (Σ cached / Σ prompt);
- **TTFT split by hit**: the distribution of TTFT (ms) over hits and over misses. A
  hit skips the prefill of its cached tokens, so its TTFT should be lower; how much
  lower is what a prefix cache buys on this workload.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from kvlab.analysis import metrics
from kvlab.analysis.stats import Distribution, describe
from kvlab.analysis.valid_rows import ValidRows
from kvlab.analysis.validate import reuse_asked
from kvlab.labels import load_order


@dataclass(frozen=True)
class CachedRow:
    """One row's prefix-cache facts (tokens; TTFT in ms, None without a stream)."""

    query_id: str
    repetition: int
    cached_tokens: int
    prompt_tokens: int | None
    ttft_ms: float | None


@dataclass
class CacheSplit:
    """The prefix-cache view of one (mode, capacity, load) group."""

    mode: str
    capacity: int
    load: str | None
    rows: list[CachedRow] = field(default_factory=list)
    ttft_hit_ms: Distribution = field(default_factory=lambda: describe([]))
    ttft_miss_ms: Distribution = field(default_factory=lambda: describe([]))

    @property
    def hits(self) -> int:
        return sum(1 for r in self.rows if r.cached_tokens > 0)

    @property
    def cached_share(self) -> float | None:
        """Σ cached / Σ prompt tokens over the rows that state both (None: none do)."""
        known = [r for r in self.rows if r.prompt_tokens]
        total = sum(r.prompt_tokens or 0 for r in known)
        return sum(r.cached_tokens for r in known) / total if total else None

    def to_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "capacity": self.capacity, "load": self.load,
                "rows": len(self.rows), "hits": self.hits, "cached_share": self.cached_share,
                "ttft_hit_ms": self.ttft_hit_ms.to_dict(),
                "ttft_miss_ms": self.ttft_miss_ms.to_dict(),
                "per_row": [asdict(r) for r in self.rows]}


def cache_splits(valid: ValidRows) -> list[CacheSplit]:
    """One split per group whose valid rows allowed reuse and state cached tokens, in
    mode, capacity and load order."""
    groups: dict[tuple[str, int, str | None], CacheSplit] = {}
    modes: dict[str, int] = {}
    for r in valid.rows:
        if r.cached_tokens is None or not reuse_asked(r):
            continue
        modes.setdefault(r.mode, len(modes))
        split = groups.setdefault((r.mode, r.capacity, r.load),
                                  CacheSplit(r.mode, r.capacity, r.load))
        split.rows.append(CachedRow(r.query_id, r.repetition, r.cached_tokens,
                                    r.prompt_tokens, metrics.ttft_ms(r)))
    for split in groups.values():
        hit = [r.ttft_ms for r in split.rows if r.cached_tokens > 0 and r.ttft_ms is not None]
        miss = [r.ttft_ms for r in split.rows if r.cached_tokens == 0 and r.ttft_ms is not None]
        split.ttft_hit_ms, split.ttft_miss_ms = describe(hit), describe(miss)
    return [groups[k] for k in sorted(groups, key=lambda k: (modes[k[0]], k[1],
                                                            load_order(k[2])))]
