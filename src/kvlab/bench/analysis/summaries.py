"""The one summary of a group of rows: distributions, means with intervals, rates.

A *group* is one (mode, capacity, load) cell; ``load`` is the row's load point
(``c=8``, ``rate=4.0``) or None for a sequential run, so the points of a load sweep are
never averaged together. A summary reads a group's
:class:`~kvlab.bench.analysis.valid_rows.ValidRows` (validation's accepted rows, the
refused ones counted by class) and says what it stands on: "n valid of m". Every
number comes from the row metrics of :mod:`kvlab.bench.analysis.metrics` and the
statistics of :mod:`kvlab.bench.analysis.stats`.

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
from kvlab.bench.analysis.stats import Distribution, Interval, bootstrap_ci, describe, percentile
from kvlab.bench.analysis.valid_rows import RowCount, ValidRows
from kvlab.bench.labels import load_order, parse_label
from kvlab.bench.records import Record


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
    ("system_tokens_per_s", "Σ output tokens of valid rows / (last end − first sent) of "
     "every request of the group: what the server delivered under that load"),
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


def modes_in_order(records: Iterable[Record]) -> list[str]:
    """Mode names in their order of first appearance."""
    return list(dict.fromkeys(r.mode for r in records))


def values(rows: Iterable[Record], metric: RowMetric) -> list[float]:
    """The metric over rows, rows where it is unknown left out."""
    return [v for r in rows if (v := metric.fn(r)) is not None]


# ---------------------------------------------------------------------------- summary


@dataclass
class Summary:
    """One (mode, capacity, load) cell over its valid rows (times in ms); ``count``: n
    valid of m measured, the refused ones by class.

    ``metrics`` holds the distribution of every row metric that has a value;
    ``mean_intervals`` the bootstrap 95 % interval of the mean of INTERVAL_METRICS
    (None: too few values). The ``mean_*`` and ``*_ms`` properties read them.
    """

    mode: str
    capacity: int
    load: str | None  # load point label; None: sequential
    count: RowCount  # what the figures stand on
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
    def queries(self) -> int:
        """Valid rows aggregated."""
        return self.count.valid

    @property
    def refused(self) -> int:
        """Rows validation left out."""
        return self.count.measured - self.count.valid

    @property
    def rows(self) -> int:
        """Measured rows: valid plus refused."""
        return self.count.measured

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
            "queries": self.queries, "refused": self.refused, "valid": self.count.to_dict(),
            "mean_ms": self.mean_ms,
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


def summarize(valid: ValidRows, *, resamples: int = 2000) -> Summary:
    """Aggregate the valid rows of one (mode, capacity, load) group (one of
    :meth:`ValidRows.groups`); ValueError for a group without a measured row."""
    if not valid.sent:
        raise ValueError("summarize needs a group with at least one measured row")
    first, rows = valid.sent[0], valid.rows
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
        mode=first.mode, capacity=first.capacity, load=first.load, count=valid.count,
        metrics=dists, mean_intervals=cis,
        tokens_per_second=m.e2e_tokens_per_s(rows),
        system_tokens_per_s=m.system_tokens_per_s(rows, within=valid.sent),
        mean_prompt_tokens=_mean([r.prompt_tokens for r in rows if r.prompt_tokens is not None]),
        mean_decode_per_token_ms=_mean(
            [v for r in rows if (v := m.decode_per_token_ms(r)) is not None]),
        inter_delta_median_ms=percentile(gaps, 50),
        inter_delta_p95_ms=percentile(gaps, 95),
        mean_content_deltas=_mean([float(m.content_deltas(r)) for r in rows])
        if any(r.stream for r in rows) else None,
    )


def report_order(summaries: Sequence[Summary]) -> list[Summary]:
    """Capacity, then load, then mode (in the order the modes first appear): how the
    reports list summaries, as :meth:`ValidRows.groups` orders rows."""
    modes = {m: i for i, m in enumerate(dict.fromkeys(s.mode for s in summaries))}
    return sorted(summaries, key=lambda s: (s.capacity, load_order(s.load), modes[s.mode]))


def summarize_run(valid: ValidRows, *, resamples: int = 2000) -> list[Summary]:
    """One summary per (mode, capacity, load), in report order (see
    :meth:`ValidRows.groups`)."""
    return [summarize(group, resamples=resamples) for group in valid.groups().values()]
