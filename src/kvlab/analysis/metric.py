"""A metric of a summary, declared once: what it means and where each view shows it.

A :class:`Metric` says how its value comes from a group's valid rows (one value per
row, values pooled from every row, or one figure of the whole group), its unit and
definition, whether comparisons report the ratio of its means and whether summaries
carry a bootstrap interval of its mean, its columns in the summary table, and the keys
evaluation.json gives it. Summaries, summaries.csv and records.csv, both reports'
tables and definitions, ``metric_definitions`` and the comparisons all read these
declarations (the registry is :mod:`kvlab.analysis.summary_metrics`); none of
them names a metric itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvlab.rundir import Record

if TYPE_CHECKING:
    from kvlab.analysis.valid_rows import ValidRows

# The statistics a distribution of a metric has (percentiles.Distribution's fields).
STATS = ("count", "mean", "p50", "p95", "p99", "min", "max", "std")
DIST = "dist"  # an evaluation.json key holding the whole distribution
VALUE = "value"  # the statistic of a group figure: the figure itself


@dataclass(frozen=True)
class Column:
    """One column of the summary table: a statistic of a metric (:data:`VALUE` for a
    group figure), its header and the digits it is shown with."""

    header: str
    stat: str = "mean"
    digits: int = 2


@dataclass(frozen=True)
class Metric:
    """One metric; exactly one of ``row``, ``pooled`` and ``group`` says how it is had.

    ``row``: a value per row (None: unknown for that row); a summary keeps their
    distribution and records.csv a column of them. ``pooled``: values per row, pooled
    over the group's rows into one distribution. ``group``: one figure of the whole
    group (a rate over all its rows). ``keys``: (evaluation.json key of a summary,
    statistic or :data:`DIST`) pairs; ``csv_name``: a group figure's column in
    summaries.csv when not ``name``.
    """

    name: str
    unit: str
    definition: str
    row: Callable[[Record], float | None] | None = None
    pooled: Callable[[Record], Sequence[float]] | None = None
    group: Callable[[ValidRows], float | None] | None = None
    compared: bool = False  # comparisons report mean A / mean B (a time)
    interval: bool = False  # summaries carry a bootstrap 95 % interval of the mean
    columns: tuple[Column, ...] = ()
    keys: tuple[tuple[str, str], ...] = ()
    csv_name: str | None = None

    def __post_init__(self) -> None:
        given = [f for f in (self.row, self.pooled, self.group) if f is not None]
        if len(given) != 1:
            raise ValueError(f"metric {self.name}: give exactly one of row, pooled, group")
        if (self.compared or self.interval) and self.row is None:
            raise ValueError(f"metric {self.name}: comparisons and intervals pair or "
                             "resample rows, so they need a value per row")
        one = {VALUE} if self.group is not None else set(STATS)  # what a column shows
        wrong = [c.stat for c in self.columns if c.stat not in one]
        wrong += [s for _, s in self.keys if s not in one and (s != DIST or not self.distributed)]
        if wrong:
            raise ValueError(f"metric {self.name}: it has no statistic {wrong[0]!r}")

    @property
    def distributed(self) -> bool:
        """True when a summary keeps a distribution of it (a row or pooled metric)."""
        return self.group is None

    def of(self, row: Record) -> float | None:
        """Its value for one row (a row metric); None: unknown for that row."""
        if self.row is None:
            raise ValueError(f"metric {self.name} has no value per row")
        return self.row(row)

    def values(self, rows: Sequence[Record]) -> list[float]:
        """Its values over rows (row metrics: rows where it is unknown left out)."""
        if self.row is not None:
            fn = self.row
            return [v for r in rows if (v := fn(r)) is not None]
        if self.pooled is not None:
            pooled = self.pooled
            return [v for r in rows for v in pooled(r)]
        raise ValueError(f"metric {self.name} is a group figure, not values over rows")
