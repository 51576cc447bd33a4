"""The times a comparison reads, under one tool's definitions (``kvlab compare
--definitions``).

A comparison of two runs reads kvlab's own TTFT, ITL and e2e by default. Beside a
peer's file (GuideLLM, AIPerf, vLLM), it can read both sides the peer's way instead:
each row's value under the peer's definition set (:mod:`kvlab.analysis.definitions`),
so a difference is one of measurement, never of definition. The ratio is of the means
of those per-row values: where a tool pools values over rows (vLLM's ITL: every gap) a
row's value is the mean of its own, and GuideLLM's token weights are equal for rows of
one forced length.
"""

from __future__ import annotations

from collections.abc import Callable

from kvlab.analysis.definitions import METRICS, SETS, RowSamples, resolve
from kvlab.analysis.metric import Metric
from kvlab.errors import ConfigError
from kvlab.rundir import Record


def _row_value(samples: RowSamples) -> Callable[[Record], float | None]:
    def value(row: Record) -> float | None:
        found = samples(row)
        if not found:
            return None
        return sum(v for v, _ in found) / len(found)
    return value


def compared_under(name: str) -> tuple[Metric, ...]:
    """The compared times (TTFT, ITL, TPOT, e2e: those the set defines) under the
    definition set ``name``; ConfigError listing the sets for an unknown one."""
    found = resolve([name])
    if len(found) != 1:
        raise ConfigError(f"--definitions takes one set; valid: {', '.join(SETS)}")
    ds = SETS[found[0]]
    out = []
    for metric in METRICS:
        definition = ds.definitions.get(metric, "")
        if definition.startswith("none"):
            continue
        out.append(Metric(f"{metric}", "ms", f"{ds.name}: {definition}",
                          row=_row_value(ds.samples[metric]), compared=True))
    return tuple(out)
