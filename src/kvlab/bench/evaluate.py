"""Summaries per (mode, capacity, load), comparisons per pair, and ``evaluation.json``.

``load`` is the row's load point (``c=8``, ``rate=4.0``; None for a sequential run),
so the points of a load sweep are never averaged together, and a comparison pairs A
and B at the same capacity and the same load point.

Every number comes from the run's records: rows are validated first
(:mod:`kvlab.bench.validate`), refused rows are named and left out, and the rest go
through the metric functions and :mod:`kvlab.bench.stats`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kvlab.bench import metrics
from kvlab.bench.load import load_order
from kvlab.bench.records import Record
from kvlab.bench.stats import describe, percentile
from kvlab.bench.validate import Violation, check_pairs, check_rows

METRIC_DEFINITIONS: dict[str, str] = {
    "e2e_ms": "end - sent: the client's whole wait for one request",
    "ttft_ms": "first non-empty content - sent",
    "itl_effective_ms": "(last content - first content) / (output tokens - 1), "
    "output tokens as the server reports them",
    "inter_delta_ms": "gaps between successive content chunks (a chunk may hold several "
    "tokens); median and p95 show client-side jitter",
    "prefill_ms": "llama.cpp timings.prompt_ms (server side; includes the first token)",
    "decode_ms": "llama.cpp timings.predicted_ms (first token to last, server side)",
    "decode_per_token_ms": "decode_ms / (output tokens - 1)",
    "overhead_ms": "e2e - (prefill + decode): HTTP, queueing, client",
    "tokens_per_second": "sum of output tokens / sum of e2e seconds (not a mean of rates)",
    "decode_tokens_per_s": "(predicted_n - 1) / predicted_ms (llama.cpp's own rate)",
    "ratio": "mean_A / mean_B of one metric at equal capacity; > 1 means B took less time",
    "reduction": "1 - 1/ratio = 1 - B/A: the share of A's time that B saves",
}


def current_rows(records: Iterable[Record]) -> list[Record]:
    """The latest record per key: a row retried by ``--resume`` supersedes the earlier
    failed attempt (both stay in records.jsonl). Warm-ups are dropped."""
    latest: dict[tuple[Any, ...], Record] = {}
    for record in records:
        if not record.warmup:
            latest[record.key] = record
    return sorted(latest.values(), key=lambda r: r.position)


def _mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return describe(present).mean if present else None


def _dist(rows: Sequence[Record], fn: Callable[[Record], float | None]) -> dict[str, Any]:
    return describe([v for v in (fn(r) for r in rows) if v is not None]).to_dict()


@dataclass
class Summary:
    """Aggregates of one (mode, capacity, load) over its valid rows (times in ms)."""

    mode: str
    capacity: int
    load: str | None  # load point label; None: sequential
    queries: int  # valid rows aggregated
    refused: int  # rows left out (see violations)
    mean_ms: float | None
    tokens_per_second: float | None
    mean_prompt_tokens: float | None
    mean_prompt_ms: float | None
    mean_decode_ms: float | None
    mean_decode_per_token_ms: float | None
    mean_overhead_ms: float | None
    e2e_ms: dict[str, Any]
    ttft_ms: dict[str, Any]
    itl_effective_ms: dict[str, Any]
    inter_delta_median_ms: float | None
    inter_delta_p95_ms: float | None
    mean_content_deltas: float | None  # chunks per row, not tokens


def summarize(rows: Sequence[Record], mode: str, capacity: int, refused: int = 0,
              load: str | None = None) -> Summary:
    """Aggregate valid rows of one mode at one capacity and load point."""
    gaps = [g for r in rows for g in metrics.inter_delta_gaps_ms(r)]
    return Summary(
        mode=mode,
        capacity=capacity,
        load=load,
        queries=len(rows),
        refused=refused,
        mean_ms=_mean([metrics.e2e_ms(r) for r in rows]),
        tokens_per_second=metrics.e2e_tokens_per_s(rows),
        mean_prompt_tokens=_mean([r.prompt_tokens for r in rows]),
        mean_prompt_ms=_mean([metrics.prefill_ms(r) for r in rows]),
        mean_decode_ms=_mean([metrics.decode_ms(r) for r in rows]),
        mean_decode_per_token_ms=_mean([metrics.decode_per_token_ms(r) for r in rows]),
        mean_overhead_ms=_mean([metrics.overhead_ms(r) for r in rows]),
        e2e_ms=_dist(rows, metrics.e2e_ms),
        ttft_ms=_dist(rows, metrics.ttft_ms),
        itl_effective_ms=_dist(rows, metrics.itl_effective_ms),
        inter_delta_median_ms=percentile(gaps, 50),
        inter_delta_p95_ms=percentile(gaps, 95),
        mean_content_deltas=_mean([float(metrics.content_deltas(r)) for r in rows])
        if any(r.stream for r in rows)
        else None,
    )


# Metrics a comparison reports: name -> how to read the mean from a summary.
COMPARED: dict[str, Callable[[Summary], float | None]] = {
    "e2e_ms": lambda s: s.mean_ms,
    "prefill_ms": lambda s: s.mean_prompt_ms,
    "decode_ms": lambda s: s.mean_decode_ms,
    "ttft_ms": lambda s: s.ttft_ms["mean"],
    "itl_effective_ms": lambda s: s.itl_effective_ms["mean"],
}


def ratio_of(a: float | None, b: float | None) -> float | None:
    """mean_A / mean_B; None when either is missing or B is not positive."""
    if a is None or b is None or b <= 0:
        return None
    return a / b


def reduction_of(ratio: float | None) -> float | None:
    """1 - 1/ratio: the share of A's time B saves (negative: B takes longer)."""
    if ratio is None or ratio <= 0:
        return None
    return 1.0 - 1.0 / ratio


@dataclass
class Comparison:
    """Mode A against mode B at one capacity and load; refused if rows or prompts differ."""

    a: str
    b: str
    capacity: int
    load: str | None  # load point label; None: sequential
    status: str  # "ok" or "refused"
    reasons: list[str] = field(default_factory=list)
    metrics: dict[str, dict[str, float | None]] = field(default_factory=dict)


def compare(
    a: Summary, b: Summary, pair_violations: list[Violation]
) -> Comparison:
    """Ratios A/B and reductions for each compared metric, unless refused."""
    reasons = [str(v) for v in pair_violations]
    for s in (a, b):
        at = f"{s.capacity} {s.load}" if s.load else str(s.capacity)
        if s.refused:
            reasons.append(f"{s.mode} @ {at}: {s.refused} refused rows")
        if s.queries == 0:
            reasons.append(f"{s.mode} @ {at}: no valid rows")
    result = Comparison(a.mode, b.mode, a.capacity, a.load, "refused" if reasons else "ok",
                        reasons)
    if reasons:
        return result
    for name, read in COMPARED.items():
        mean_a, mean_b = read(a), read(b)
        ratio = ratio_of(mean_a, mean_b)
        result.metrics[name] = {
            "mean_a": mean_a,
            "mean_b": mean_b,
            "ratio": ratio,
            "reduction": reduction_of(ratio),
        }
    return result


@dataclass
class Evaluation:
    """Everything evaluation.json holds."""

    run_id: str
    experiment: str
    counts: dict[str, int]
    violations: list[Violation]
    summaries: list[Summary]
    comparisons: list[Comparison]
    extra: dict[str, Any] = field(default_factory=dict)  # load, order, repeat_aa (runner)

    def to_json(self) -> dict[str, Any]:
        return {**self.extra, **{
            "run_id": self.run_id,
            "experiment": self.experiment,
            "metric_definitions": METRIC_DEFINITIONS,
            "counts": self.counts,
            "violations": [v.to_dict() for v in self.violations],
            "summaries": [asdict(s) for s in self.summaries],
            "comparisons": [asdict(c) for c in self.comparisons],
        }}

    def summary(self, mode: str, capacity: int, load: str | None = None) -> Summary | None:
        """The summary of (mode, capacity, load); ``load`` None: the sequential one."""
        for s in self.summaries:
            if s.mode == mode and s.capacity == capacity and s.load == load:
                return s
        return None

    @property
    def has_load(self) -> bool:
        """True when the run has load points (tables then show a load column)."""
        return any(s.load is not None for s in self.summaries)


GroupKey = tuple[str, int, str | None]  # (mode, capacity, load)


def evaluate(
    records: Sequence[Record],
    compare_pairs: Sequence[tuple[str, str]],
    run_id: str = "",
    experiment: str = "",
    mode_order: Sequence[str] = (),
) -> Evaluation:
    """Validate, summarize per (mode, capacity, load) and compare each pair at every
    (capacity, load) both modes measured."""
    rows = current_rows(records)
    violations = check_rows(rows)
    refused_keys = {v.row_key for v in violations}
    groups: dict[GroupKey, list[Record]] = {}
    for r in rows:
        groups.setdefault((r.mode, r.capacity, r.load), []).append(r)
    order = {m: i for i, m in enumerate(mode_order)}
    summaries: list[Summary] = []
    for (mode, capacity, load), group in sorted(
        groups.items(),
        key=lambda kv: (order.get(kv[0][0], len(order)), kv[0][0], kv[0][1],
                        load_order(kv[0][2])),
    ):
        valid = [r for r in group
                 if (r.mode, r.capacity, r.query_id, r.repetition, r.load) not in refused_keys]
        summaries.append(summarize(valid, mode, capacity, refused=len(group) - len(valid),
                                   load=load))
    by_key = {(s.mode, s.capacity, s.load): s for s in summaries}
    comparisons: list[Comparison] = []
    pair_violations: list[Violation] = []
    for a, b in compare_pairs:
        cells_a = {(c, load) for m, c, load in by_key if m == a}
        cells_b = {(c, load) for m, c, load in by_key if m == b}
        for capacity, load in sorted(cells_a & cells_b,
                                     key=lambda cell: (cell[0], load_order(cell[1]))):
            found = check_pairs(a, groups[(a, capacity, load)], b, groups[(b, capacity, load)])
            pair_violations.extend(found)
            comparisons.append(compare(by_key[(a, capacity, load)], by_key[(b, capacity, load)],
                                       found))
    counts = {
        "records": len(records),
        "warmup": sum(1 for r in records if r.warmup),
        "measured": len(rows),
        "superseded": sum(1 for r in records if not r.warmup) - len(rows),
        "refused_rows": len(refused_keys),
    }
    return Evaluation(
        run_id, experiment, counts, violations + pair_violations, summaries, comparisons
    )


def write_evaluation(evaluation: Evaluation, path: Path) -> None:
    """Write evaluation.json (indented, stable key order)."""
    Path(path).write_text(json.dumps(evaluation.to_json(), indent=2) + "\n", encoding="utf-8")


def explain_ratio(ratio: float) -> str:
    """How to read a ratio A/B in words (e.g. 1.2: B saves 16.67 % of A's time)."""
    if ratio <= 0:
        return f"ratio {ratio:g} is not meaningful: times are positive, so A/B must be > 0"
    reduction = reduction_of(ratio)
    assert reduction is not None
    b_over_a = 1.0 / ratio
    if abs(ratio - 1.0) < 1e-12:
        return "ratio 1: A and B took the same time (B/A = 1, no reduction)"
    if ratio > 1:
        return (
            f"ratio {ratio:g}: B is faster. B takes {b_over_a:.4f} of A's time, "
            f"a reduction of {reduction * 100:.2f} % (1 - 1/{ratio:g}); "
            f"A takes {(ratio - 1) * 100:.2f} % more time than B."
        )
    return (
        f"ratio {ratio:g}: B is slower. B takes {b_over_a:.4f} of A's time, "
        f"+{(b_over_a - 1) * 100:.2f} % more time (reduction {reduction * 100:.2f} %, "
        f"1 - 1/{ratio:g})."
    )
