"""A CI gate on a comparison of two runs: fail only when B is slower beyond doubt.

``kvlab compare A B --fail-on slower[:metric[:threshold%]]`` (A the baseline, B the
candidate) fails when, in some (mode, capacity, load) both runs measured, B's mean of
``metric`` (default ``e2e_ms``) is more than ``threshold`` (default 0 %) above A's *for
the whole 95 % interval*: with the interval [low, high] of the ratio A/B, B/A lies in
[1/high, 1/low], and the gate fails when ``1/high > 1 + threshold``. A difference the
interval cannot tell from the threshold never fails it, so an A/A comparison (the
same configuration twice) passes unless the two runs really differ. A cell with no
interval (too few rows, a refused pair, a metric the runs lack) cannot fail the gate;
it is listed so a pipeline can see what went unjudged.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from kvlab.bench.analysis.comparisons import COMPARED_METRICS, PairComparison
from kvlab.errors import ConfigError

METRICS: tuple[str, ...] = tuple(m.name for m in COMPARED_METRICS)
_RULE = re.compile(r"slower(?::(?P<metric>[a-z0-9_]+))?(?::(?P<threshold>[0-9.]+)%?)?")
Status = Literal["fail", "pass", "not judged"]


@dataclass(frozen=True)
class FailOn:
    """One rule: fail when B's ``metric`` mean is above A's by more than ``threshold``
    (a fraction: 0.05 = 5 %) over the whole interval."""

    metric: str = "e2e_ms"
    threshold: float = 0.0

    @classmethod
    def parse(cls, text: str) -> FailOn:
        """``slower``, ``slower:ttft_ms`` or ``slower:ttft_ms:5%``; ConfigError (one line)
        for anything else."""
        match = _RULE.fullmatch(text.strip())
        if match is None:
            raise ConfigError(f"--fail-on {text!r}: expected slower[:METRIC[:THRESHOLD%]], "
                              "e.g. slower, slower:ttft_ms or slower:e2e_ms:5%")
        metric = match["metric"] or "e2e_ms"
        if metric not in METRICS:
            raise ConfigError(f"--fail-on {text!r}: metric {metric!r} is not one of "
                              f"{', '.join(METRICS)}")
        threshold = float(match["threshold"] or 0.0) / 100.0
        return cls(metric, threshold)

    def describe(self) -> str:
        return f"B's mean {self.metric} above A's by more than {self.threshold:.1%}"


@dataclass(frozen=True)
class GateCheck:
    """One rule in one cell: B/A of the means and its interval (None: not judged)."""

    mode: str
    capacity: int
    load: str | None
    metric: str
    threshold: float
    b_over_a: float | None
    low: float | None  # of B/A
    high: float | None
    status: Status
    why: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        at = f"{self.mode} @ {self.capacity} {self.load or 'sequential'}"
        if self.b_over_a is None or self.low is None or self.high is None:
            return f"{at} {self.metric}: not judged ({self.why})"
        return (f"{at} {self.metric}: B/A = {self.b_over_a:.3f}, 95 % interval "
                f"{self.low:.3f}–{self.high:.3f}, limit {1 + self.threshold:.3f}: "
                f"{self.status}")


@dataclass(frozen=True)
class GateResult:
    """Every check of every rule; ``failed`` when one of them failed."""

    rules: tuple[FailOn, ...]
    checks: tuple[GateCheck, ...]

    @property
    def failed(self) -> bool:
        return any(c.status == "fail" for c in self.checks)

    def to_dict(self) -> dict[str, Any]:
        return {"failed": self.failed, "rules": [asdict(r) for r in self.rules],
                "checks": [c.to_dict() for c in self.checks]}


def check(mode: str, comparison: PairComparison, rule: FailOn) -> GateCheck:
    """``rule`` on one cell of a comparison of two runs (A = ``mode_a``)."""
    def unjudged(why: str) -> GateCheck:
        return GateCheck(mode, comparison.capacity, comparison.load, rule.metric,
                         rule.threshold, None, None, None, "not judged", why)

    if comparison.refused:
        return unjudged(f"refused: {comparison.refused}")
    found = next((m for m in comparison.metrics if m.metric == rule.metric), None)
    if found is None:
        return unjudged("the runs have no such values")
    if found.interval is None:
        return unjudged(found.note or "too few rows for an interval")
    low, high = 1.0 / found.interval.high, 1.0 / found.interval.low
    status: Status = "fail" if low > 1.0 + rule.threshold else "pass"
    return GateCheck(mode, comparison.capacity, comparison.load, rule.metric,
                     rule.threshold, 1.0 / found.ratio, low, high, status)


def gate(comparisons: Sequence[tuple[str, PairComparison]],
         rules: Sequence[FailOn]) -> GateResult:
    """Every rule on every cell of a run comparison (``(mode, comparison)`` pairs)."""
    checks = tuple(check(mode, c, rule) for rule in rules for mode, c in comparisons)
    return GateResult(tuple(rules), checks)
