"""A run's groups under other tools' definitions: each tool's aggregates, computed its way.

For every (mode, capacity, load) group of valid rows and every definition set of
:mod:`kvlab.analysis.definitions`: count, mean, median and p95 of each metric (ms) and
the output rate in tokens/s. GuideLLM weights its ITL and TPOT by tokens and reads
percentiles off a weighted distribution without interpolation; the others interpolate
linearly, as numpy does. :func:`evaluation_block` is what evaluation.json keeps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kvlab.analysis.definitions import METRICS, SETS, Samples
from kvlab.analysis.stats import percentile, weighted_percentile
from kvlab.analysis.valid_rows import ValidRows
from kvlab.rundir import Record


@dataclass(frozen=True)
class Aggregate:
    """One metric over a group, the tool's way (ms; None: no value)."""

    count: int
    mean: float | None
    median: float | None
    p95: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {"count": self.count, "mean": self.mean, "median": self.median, "p95": self.p95}


def aggregate(samples: Samples, weighted: bool) -> Aggregate:
    """count, mean, median and p95 of (value, weight) samples.

    Unweighted (``weighted`` False): weights are ignored, percentiles interpolate.
    Weighted: GuideLLM's weighted mean and cumulative-weight percentiles.
    """
    if weighted:
        samples = [(v, w) for v, w in samples if w > 0]
    if not samples:
        return Aggregate(0, None, None, None)
    values = [v for v, _ in samples]
    if not weighted:
        return Aggregate(len(values), sum(values) / len(values), percentile(values, 50),
                         percentile(values, 95))
    weights = [w for _, w in samples]
    mean = sum(v * w for v, w in samples) / sum(weights)
    return Aggregate(len(values), mean, *(weighted_percentile(values, weights, q)
                                          for q in (50, 95)))


@dataclass
class Cell:
    """One (mode, capacity, load) under every definition set asked for."""

    mode: str
    capacity: int
    load: str | None
    rows: int  # valid rows the figures come from
    by_set: dict[str, dict[str, Aggregate]]  # set -> metric -> aggregate
    rates: dict[str, float | None]  # set -> output tokens/s

    def only(self, names: Sequence[str]) -> Cell:
        """The same cell under the sets ``names`` only, in that order."""
        return Cell(self.mode, self.capacity, self.load, self.rows,
                    {n: self.by_set[n] for n in names}, {n: self.rates[n] for n in names})

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode, "capacity": self.capacity, "load": self.load, "rows": self.rows,
            "definitions": {
                name: {**{m: a.to_dict() for m, a in aggs.items()},
                       "output_tokens_per_s": self.rates[name]}
                for name, aggs in self.by_set.items()
            },
        }


def under(rows: Sequence[Record], name: str) -> tuple[dict[str, Aggregate], float | None]:
    """Every metric of set ``name`` over ``rows`` (already validated), and its rate."""
    ds = SETS[name]
    aggs = {m: aggregate([s for r in rows for s in ds.samples[m](r)], ds.weighted)
            for m in METRICS}
    return aggs, ds.rate(rows)


def cells(valid: ValidRows, names: Sequence[str] = tuple(SETS)) -> list[Cell]:
    """The valid rows of each (mode, capacity, load) group, each under the sets
    ``names``; a group without a valid row has no cell."""
    out = []
    for (mode, capacity, load), group in valid.groups().items():
        if not group.rows:
            continue
        results = {n: under(group.rows, n) for n in names}
        out.append(Cell(mode, capacity, load, len(group.rows),
                        {n: r[0] for n, r in results.items()},
                        {n: r[1] for n, r in results.items()}))
    return out


def evaluation_block(found: Sequence[Cell], names: Sequence[str]) -> dict[str, Any]:
    """What evaluation.json keeps under ``definitions``: the sets (with sources) and
    every cell under them. kvlab's own set is always first. ``found``: the cells under
    every set (an evaluation's, :func:`cells`)."""
    chosen = ["kvlab", *[n for n in names if n != "kvlab"]]
    found = [c.only(chosen) for c in found]
    return {
        "sets": {n: {"source": SETS[n].source, "definitions": SETS[n].definitions,
                     "approximations": SETS[n].approximations} for n in chosen},
        "cells": [c.to_dict() for c in found],
    }
