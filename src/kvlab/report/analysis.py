"""What a report shows about a run: summaries per group, comparisons with intervals.

Everything here is built from the harness's own pieces: row metrics from
:mod:`kvlab.bench.metrics`, refusals from :mod:`kvlab.bench.validate`, statistics
from :mod:`kvlab.bench.stats`. A *group* is one (mode, capacity, load) cell; ``load``
is None for sequential runs. Comparisons are only ever between two modes in the same
capacity and load, as ratios of mean times A/B with a bootstrap 95 % interval and the
verdict it supports (``stats.verdict``): above 1 means B took less time.

Pairing: rows of A and B are matched on (query, repetition). When at least
``MIN_BOOTSTRAP_VALUES`` queries are valid in both modes, the ratio and its interval
are computed over those matched queries with a paired bootstrap; otherwise over all
valid rows of each mode, resampled independently. A pair of modes whose prompts
differ for the same query is refused, never compared.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvlab.bench import metrics as m
from kvlab.bench.evaluate import current_rows
from kvlab.bench.load import load_order, parse_label
from kvlab.bench.records import Record
from kvlab.bench.stats import (
    MIN_BOOTSTRAP_VALUES,
    Distribution,
    Interval,
    Verdict,
    bootstrap_ci,
    describe,
    ratio_ci,
    verdict,
)
from kvlab.bench.validate import Reason, Violation, check_pairs, check_row

GroupKey = tuple[str, int, str | None]  # (mode, capacity, load)


@dataclass(frozen=True)
class RowMetric:
    """A per-row metric from kvlab.bench.metrics, with its unit and definition."""

    name: str
    unit: str
    fn: Callable[[Record], float | None]
    definition: str


E2E = RowMetric("e2e_ms", "ms", m.e2e_ms, "end − sent: the client's whole wait")
TTFT = RowMetric("ttft_ms", "ms", m.ttft_ms, "first non-empty content − sent")
ITL = RowMetric(
    "itl_effective_ms", "ms", m.itl_effective_ms,
    "(last content − first content) / (output tokens − 1), server-counted tokens",
)
PREFILL = RowMetric(
    "prefill_ms", "ms", m.prefill_ms,
    "llama.cpp timings.prompt_ms (server perimeter; includes the first token)",
)
DECODE = RowMetric("decode_ms", "ms", m.decode_ms, "llama.cpp timings.predicted_ms")
OVERHEAD = RowMetric(
    "overhead_ms", "ms", m.overhead_ms, "e2e − (prefill + decode): HTTP, queueing, client"
)
DECODE_TPS = RowMetric(
    "decode_tokens_per_s", "tokens/s", m.decode_tokens_per_s,
    "(predicted_n − 1) / predicted_ms, llama.cpp's own rate",
)

ROW_METRICS: tuple[RowMetric, ...] = (E2E, TTFT, ITL, PREFILL, DECODE, OVERHEAD, DECODE_TPS)
COMPARED_METRICS: tuple[RowMetric, ...] = (E2E, PREFILL, DECODE, TTFT, ITL)  # times only
# Summaries carry a bootstrap interval of the mean for these (each costs a bootstrap).
INTERVAL_METRICS: tuple[RowMetric, ...] = (E2E, TTFT, ITL)

EXTRA_DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("e2e_tokens_per_s", "Σ output tokens / Σ e2e (not the mean of per-row rates)"),
    ("system_tokens_per_s", "Σ output tokens / (last end − first sent) of the group: "
     "what the server delivered under that load"),
    ("ratio A/B", "mean_A / mean_B of one metric at equal capacity and load; > 1: B took "
     "less time"),
    ("95 % interval", "bootstrap (BCa) interval of the ratio; paired over the queries "
     "both modes answered validly when there are enough"),
    ("verdict", "from the interval only: above 1 → B faster, below 1 → B slower, "
     "containing 1 → no detectable difference"),
    ("relative reduction", "1 − 1/ratio = 1 − B/A"),
)


# ------------------------------------------------------------------------------ groups


def load_value(load: str | None) -> float | None:
    """The number in a load label ("c=8" -> 8.0); None for sequential or unparsable."""
    return parse_label(load)[1]


def groups(records: Iterable[Record]) -> dict[GroupKey, list[Record]]:
    """Measured rows by (mode, capacity, load), in report order.

    Rows are evaluate.current_rows: warm-ups left out, and a row retried by a resume
    supersedes its earlier attempt. Modes keep their order of first appearance;
    capacities ascend; loads ascend.
    """
    by: dict[GroupKey, list[Record]] = {}
    mode_order: dict[str, int] = {}
    for row in current_rows(records):
        mode_order.setdefault(row.mode, len(mode_order))
        by.setdefault((row.mode, row.capacity, row.load), []).append(row)
    order = sorted(by, key=lambda k: (k[1], load_order(k[2]), mode_order[k[0]]))
    return {k: by[k] for k in order}


def modes_in_order(records: Iterable[Record]) -> list[str]:
    """Mode names in their order of first appearance."""
    return list(dict.fromkeys(r.mode for r in records))


def valid_rows(rows: Iterable[Record]) -> list[Record]:
    """Measured rows that pass every row check (validate.check_row)."""
    return [r for r in rows if not r.warmup and not check_row(r)]


def values(rows: Iterable[Record], metric: RowMetric) -> list[float]:
    """The metric over rows, rows where it is unknown left out."""
    return [v for r in rows if (v := metric.fn(r)) is not None]


@dataclass
class GroupSummary:
    """One (mode, capacity, load) cell over its valid rows."""

    mode: str
    capacity: int
    load: str | None
    rows: int  # measured rows
    refused: int  # rows refused by validation
    metrics: dict[str, Distribution]
    mean_intervals: dict[str, Interval | None]
    e2e_tokens_per_s: float | None
    system_tokens_per_s: float | None
    mean_prompt_tokens: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "mode": self.mode, "capacity": self.capacity, "load": self.load,
            "rows": self.rows, "refused": self.refused,
            "metrics": {k: d.to_dict() for k, d in self.metrics.items()},
            "mean_intervals": {
                k: (i.to_dict() if i else None) for k, i in self.mean_intervals.items()
            },
            "e2e_tokens_per_s": self.e2e_tokens_per_s,
            "system_tokens_per_s": self.system_tokens_per_s,
            "mean_prompt_tokens": self.mean_prompt_tokens,
        }


def summarize_group(key: GroupKey, rows: Sequence[Record], *, resamples: int = 2000
                    ) -> GroupSummary:
    """Distributions of every row metric over the valid rows, with mean intervals."""
    good = valid_rows(rows)
    dists: dict[str, Distribution] = {}
    cis: dict[str, Interval | None] = {}
    for metric in ROW_METRICS:
        vals = values(good, metric)
        if not vals:
            continue
        dists[metric.name] = describe(vals)
        if metric in INTERVAL_METRICS:
            cis[metric.name] = bootstrap_ci(vals, "mean", resamples=resamples)
    prompts = [r.prompt_tokens for r in good if r.prompt_tokens is not None]
    return GroupSummary(
        mode=key[0], capacity=key[1], load=key[2],
        rows=len(rows), refused=len(rows) - len(good),
        metrics=dists, mean_intervals=cis,
        e2e_tokens_per_s=m.e2e_tokens_per_s(good),
        system_tokens_per_s=m.system_tokens_per_s(good),
        mean_prompt_tokens=sum(prompts) / len(prompts) if prompts else None,
    )


def summarize_run(records: Iterable[Record], *, resamples: int = 2000) -> list[GroupSummary]:
    """One summary per (mode, capacity, load), in report order."""
    return [summarize_group(k, rows, resamples=resamples) for k, rows in groups(records).items()]


# ------------------------------------------------------------------------- comparisons


@dataclass
class MetricComparison:
    """Ratio of means A/B of one time metric, its interval and the verdict on B."""

    metric: str
    mean_a: float
    mean_b: float
    n: int  # pairs when paired, else min(n_a, n_b)
    paired: bool
    interval: Interval | None  # None below MIN_BOOTSTRAP_VALUES values, or see note
    note: str | None = None  # why there is no interval, when it is not "too few rows"

    @property
    def ratio(self) -> float:
        return self.mean_a / self.mean_b

    @property
    def reduction(self) -> float:
        """1 − 1/ratio = 1 − B/A: the share of A's time B saves (negative: B slower)."""
        return 1.0 - 1.0 / self.ratio

    @property
    def verdict(self) -> Verdict | None:
        return verdict(self.interval) if self.interval is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "mean_a": self.mean_a, "mean_b": self.mean_b,
            "ratio": self.ratio, "reduction": self.reduction, "n": self.n,
            "paired": self.paired,
            "interval": self.interval.to_dict() if self.interval else None,
            "verdict": str(self.verdict) if self.verdict else None,
            "note": self.note,
        }


@dataclass
class PairComparison:
    """Mode B against mode A at one capacity and load; ``refused`` says why not."""

    mode_a: str
    mode_b: str
    capacity: int
    load: str | None
    metrics: list[MetricComparison] = field(default_factory=list)
    refused: str | None = None  # one line; metrics is empty when set
    pair_violations: list[Violation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode_a": self.mode_a, "mode_b": self.mode_b, "capacity": self.capacity,
            "load": self.load, "refused": self.refused,
            "metrics": [c.to_dict() for c in self.metrics],
            "pair_violations": [v.to_dict() for v in self.pair_violations],
        }


_FATAL_PAIR_REASONS = (Reason.PROMPT_DIFFERS, Reason.PROMPT_TOKENS_DIFFER)


def _key(row: Record) -> tuple[str, int]:
    return (row.query_id, row.repetition)


def compare_metric(metric: RowMetric, rows_a: Sequence[Record], rows_b: Sequence[Record],
                   *, resamples: int = 2000) -> MetricComparison | None:
    """Ratio A/B of one metric over valid rows; paired on matching queries if enough.

    Means use every known value (as the summaries do). A ratio interval needs positive
    values: when some are 0 (a stream that delivered all its tokens in one chunk has
    an effective ITL of 0) the interval is None and ``note`` says why. None when either
    mean is not positive (no ratio can be read).
    """
    a_by = {_key(r): v for r in rows_a if (v := metric.fn(r)) is not None}
    b_by = {_key(r): v for r in rows_b if (v := metric.fn(r)) is not None}
    if not a_by or not b_by:
        return None
    common = sorted(a_by.keys() & b_by.keys())
    paired = len(common) >= MIN_BOOTSTRAP_VALUES
    if paired:
        xa, xb = [a_by[k] for k in common], [b_by[k] for k in common]
    else:
        xa, xb = list(a_by.values()), list(b_by.values())
    mean_a, mean_b = sum(xa) / len(xa), sum(xb) / len(xb)
    if mean_a <= 0 or mean_b <= 0:
        return None
    note = None
    interval = None
    if min(xa) <= 0 or min(xb) <= 0:
        note = "some values are 0: no ratio interval"
    else:
        interval = ratio_ci(xa, xb, "mean", paired=paired, resamples=resamples)
    return MetricComparison(
        metric=metric.name, mean_a=mean_a, mean_b=mean_b,
        n=len(common) if paired else min(len(xa), len(xb)), paired=paired, interval=interval,
        note=note,
    )


def compare_rows(mode_a: str, rows_a: Sequence[Record], mode_b: str, rows_b: Sequence[Record],
                 *, capacity: int, load: str | None = None, resamples: int = 2000
                 ) -> PairComparison:
    """Compare two sets of rows of one capacity and load (A and B may be other runs)."""
    pair_violations = check_pairs(mode_a, rows_a, mode_b, rows_b)
    result = PairComparison(mode_a, mode_b, capacity, load, pair_violations=pair_violations)
    fatal = [v for v in pair_violations if v.reason in _FATAL_PAIR_REASONS]
    if fatal:
        result.refused = (f"prompts differ for {len(fatal)} "
                          f"quer{'y' if len(fatal) == 1 else 'ies'}; first: {fatal[0]}")
        return result
    good_a, good_b = valid_rows(rows_a), valid_rows(rows_b)
    if not good_a or not good_b:
        empty = mode_a if not good_a else mode_b
        result.refused = f"no valid row in {empty}"
        return result
    for metric in COMPARED_METRICS:
        found = compare_metric(metric, good_a, good_b, resamples=resamples)
        if found is not None:
            result.metrics.append(found)
    return result


def default_pairs(records: Iterable[Record]) -> list[tuple[str, str]]:
    """Every pair of modes (A before B in order of first appearance)."""
    modes = modes_in_order(records)
    return [(a, b) for i, a in enumerate(modes) for b in modes[i + 1:]]


def compare_run(records: Sequence[Record], pairs: Sequence[tuple[str, str]] | None = None,
                *, resamples: int = 2000) -> list[PairComparison]:
    """Comparisons of ``pairs`` (default: every pair) at each capacity and load both ran."""
    by = groups(records)
    cells = sorted({(k[1], k[2]) for k in by}, key=lambda c: (c[0], load_order(c[1])))
    out: list[PairComparison] = []
    for capacity, load in cells:
        for a, b in pairs if pairs is not None else default_pairs(records):
            rows_a, rows_b = by.get((a, capacity, load)), by.get((b, capacity, load))
            if rows_a and rows_b:
                out.append(compare_rows(a, rows_a, b, rows_b, capacity=capacity, load=load,
                                        resamples=resamples))
    return out
