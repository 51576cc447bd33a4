"""The one summary of a group of rows: distributions, means with intervals, rates.

A *group* is one (mode, capacity, load) cell; ``load`` is the row's load point
(``c=8``, ``rate=4.0``) or None for a sequential run, so the points of a load sweep are
never averaged together. Rows are :func:`current_rows` (warm-ups left out, a row
retried by ``--resume`` superseding its failed attempt); rows refused by
:func:`~kvlab.bench.analysis.validate.check_row` are counted and left out. Every number
comes from the row metrics of :mod:`kvlab.bench.analysis.metrics` and the statistics
of :mod:`kvlab.bench.analysis.stats`.

evaluation.json, report.md, report.html, summaries.csv and the plots all read these
:class:`Summary` objects. The other views of the same rows answer other questions:
what a load point achieved (:mod:`~kvlab.bench.analysis.load`) and the metrics under
other tools' definitions (:mod:`~kvlab.bench.analysis.definitions`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.bench.analysis import metrics as m
from kvlab.bench.analysis.load import load_order, parse_label
from kvlab.bench.analysis.stats import Distribution, Interval, bootstrap_ci, describe, percentile
from kvlab.bench.analysis.validate import check_row
from kvlab.bench.records import Record

GroupKey = tuple[str, int, str | None]  # (mode, capacity, load)


@dataclass(frozen=True)
class RowMetric:
    """A per-row metric from kvlab.bench.analysis.metrics, with its unit and definition."""

    name: str
    unit: str
    fn: Callable[[Record], float | None]
    definition: str


E2E = RowMetric("e2e_ms", "ms", m.e2e_ms, "end − sent: the client's whole wait")
TTFT = RowMetric("ttft_ms", "ms", m.ttft_ms, "first output token of any kind − sent")
ITL = RowMetric(
    "itl_effective_ms", "ms", m.itl_effective_ms,
    "(last output − first output) / (output tokens − 1), server-counted tokens",
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


def current_rows(records: Iterable[Record]) -> list[Record]:
    """The latest record per key: a row retried by ``--resume`` supersedes the earlier
    failed attempt (both stay in records.jsonl). Warm-ups are dropped."""
    latest: dict[tuple[Any, ...], Record] = {}
    for record in records:
        if not record.warmup:
            latest[record.key] = record
    return sorted(latest.values(), key=lambda r: r.position)


def load_value(load: str | None) -> float | None:
    """The number in a load label ("c=8" -> 8.0); None for sequential or unparsable."""
    return parse_label(load)[1]


def groups(records: Iterable[Record]) -> dict[GroupKey, list[Record]]:
    """Measured rows by (mode, capacity, load), in report order.

    Rows are :func:`current_rows`. Modes keep their order of first appearance;
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


# ---------------------------------------------------------------------------- summary


@dataclass
class Summary:
    """One (mode, capacity, load) cell over its valid rows (times in ms).

    ``metrics`` holds the distribution of every row metric that has a value;
    ``mean_intervals`` the bootstrap 95 % interval of the mean of INTERVAL_METRICS
    (None: too few values). The ``mean_*`` and ``*_ms`` properties read them.
    """

    mode: str
    capacity: int
    load: str | None  # load point label; None: sequential
    queries: int  # valid rows aggregated
    refused: int  # rows left out by validation
    metrics: dict[str, Distribution]
    mean_intervals: dict[str, Interval | None]
    tokens_per_second: float | None  # Σ output tokens / Σ e2e
    system_tokens_per_s: float | None  # Σ output tokens / the group's span
    mean_prompt_tokens: float | None
    mean_decode_per_token_ms: float | None
    inter_delta_median_ms: float | None
    inter_delta_p95_ms: float | None
    mean_content_deltas: float | None  # chunks per row, not tokens; None: not streamed

    @property
    def rows(self) -> int:
        """Measured rows: valid plus refused."""
        return self.queries + self.refused

    @property
    def e2e_tokens_per_s(self) -> float | None:
        return self.tokens_per_second

    def mean(self, name: str) -> float | None:
        """The mean of one row metric; None when no row has it."""
        dist = self.metrics.get(name)
        return dist.mean if dist else None

    def dist(self, name: str) -> dict[str, Any]:
        """The distribution of one row metric as a dict (count 0 when no row has it)."""
        return (self.metrics.get(name) or describe([])).to_dict()

    @property
    def mean_ms(self) -> float | None:
        return self.mean("e2e_ms")

    @property
    def mean_prompt_ms(self) -> float | None:
        return self.mean("prefill_ms")

    @property
    def mean_decode_ms(self) -> float | None:
        return self.mean("decode_ms")

    @property
    def mean_overhead_ms(self) -> float | None:
        return self.mean("overhead_ms")

    @property
    def e2e_ms(self) -> dict[str, Any]:
        return self.dist("e2e_ms")

    @property
    def ttft_ms(self) -> dict[str, Any]:
        return self.dist("ttft_ms")

    @property
    def itl_effective_ms(self) -> dict[str, Any]:
        return self.dist("itl_effective_ms")

    def to_json(self) -> dict[str, Any]:
        """The summary as evaluation.json holds it."""
        return {
            "mode": self.mode, "capacity": self.capacity, "load": self.load,
            "queries": self.queries, "refused": self.refused, "mean_ms": self.mean_ms,
            "tokens_per_second": self.tokens_per_second,
            "mean_prompt_tokens": self.mean_prompt_tokens,
            "mean_prompt_ms": self.mean_prompt_ms, "mean_decode_ms": self.mean_decode_ms,
            "mean_decode_per_token_ms": self.mean_decode_per_token_ms,
            "mean_overhead_ms": self.mean_overhead_ms, "e2e_ms": self.e2e_ms,
            "ttft_ms": self.ttft_ms, "itl_effective_ms": self.itl_effective_ms,
            "inter_delta_median_ms": self.inter_delta_median_ms,
            "inter_delta_p95_ms": self.inter_delta_p95_ms,
            "mean_content_deltas": self.mean_content_deltas,
            "mean_intervals": {k: (i.to_dict() if i else None)
                               for k, i in self.mean_intervals.items()},
            "system_tokens_per_s": self.system_tokens_per_s,
        }


def _mean(present: Sequence[float]) -> float | None:
    return describe(present).mean if present else None


def summarize(rows: Sequence[Record], mode: str, capacity: int, refused: int = 0,
              load: str | None = None, *, resamples: int = 2000) -> Summary:
    """Aggregate the valid ``rows`` of one mode at one capacity and load point
    (``refused``: how many rows validation left out)."""
    dists: dict[str, Distribution] = {}
    cis: dict[str, Interval | None] = {}
    for metric in ROW_METRICS:
        vals = values(rows, metric)
        if not vals:
            continue
        dists[metric.name] = describe(vals)
        if metric in INTERVAL_METRICS:
            cis[metric.name] = bootstrap_ci(vals, "mean", resamples=resamples)
    gaps = [g for r in rows for g in m.inter_delta_gaps_ms(r)]
    return Summary(
        mode=mode, capacity=capacity, load=load, queries=len(rows), refused=refused,
        metrics=dists, mean_intervals=cis,
        tokens_per_second=m.e2e_tokens_per_s(rows),
        system_tokens_per_s=m.system_tokens_per_s(rows),
        mean_prompt_tokens=_mean([r.prompt_tokens for r in rows if r.prompt_tokens is not None]),
        mean_decode_per_token_ms=_mean(
            [v for r in rows if (v := m.decode_per_token_ms(r)) is not None]),
        inter_delta_median_ms=percentile(gaps, 50),
        inter_delta_p95_ms=percentile(gaps, 95),
        mean_content_deltas=_mean([float(m.content_deltas(r)) for r in rows])
        if any(r.stream for r in rows) else None,
    )


def summarize_group(key: GroupKey, rows: Sequence[Record], *, resamples: int = 2000
                    ) -> Summary:
    """The summary of one group's measured rows: refused rows counted and left out."""
    good = valid_rows(rows)
    return summarize(good, key[0], key[1], refused=len(rows) - len(good), load=key[2],
                     resamples=resamples)


def report_order(summaries: Sequence[Summary]) -> list[Summary]:
    """Capacity, then load, then mode (in the order the modes first appear): how the
    reports list summaries, as :func:`groups` orders rows."""
    modes = {m: i for i, m in enumerate(dict.fromkeys(s.mode for s in summaries))}
    return sorted(summaries, key=lambda s: (s.capacity, load_order(s.load), modes[s.mode]))


def summarize_run(records: Iterable[Record], *, resamples: int = 2000) -> list[Summary]:
    """One summary per (mode, capacity, load), in report order (see :func:`groups`)."""
    return [summarize_group(k, rows, resamples=resamples) for k, rows in groups(records).items()]
