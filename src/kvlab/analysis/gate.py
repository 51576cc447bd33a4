"""A CI gate on a comparison of two runs: it passes only what it judged.

``kvlab compare A B --fail-on RULE`` (A the baseline, B the candidate) checks every
(mode, capacity, load) both runs measured against each rule:

- ``slower[:metric[:threshold%]]``: B's mean of ``metric`` (default ``e2e_ms``) is more
  than ``threshold`` (default 0 %) above A's *for the whole 95 % interval*: with the
  interval [low, high] of the ratio A/B, B/A lies in [1/high, 1/low], and the check
  fails when ``1/high > 1 + threshold``. A difference the interval cannot tell from the
  threshold never fails it, so an A/A comparison passes unless the two runs differ.
- ``failures[:threshold%]``: B's valid share (valid rows / measured rows, see
  :class:`~kvlab.analysis.valid_rows.RowCount`) is below A's by more than
  ``threshold`` (percentage points, default 0). On by default: a gate given any rule
  also checks it, unless a ``failures`` rule is given explicitly.

A check it cannot reach is *not judged*, never passed: no valid row on a side, no
interval (too few rows, values of 0), a metric the runs lack, prompts that differ.
:attr:`GateResult.exit_code` is 1 when a check failed, else 2 when a check was not
judged (unless the caller accepts unjudged checks: each is still listed with its
reason), else 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from kvlab.analysis.comparisons import COMPARED_METRICS, PairComparison
from kvlab.analysis.valid_rows import RowCount
from kvlab.analysis.validate import Reason
from kvlab.errors import ConfigError

METRICS: tuple[str, ...] = tuple(m.name for m in COMPARED_METRICS)
_SLOWER = re.compile(r"slower(?::(?P<metric>[a-z0-9_]+))?(?::(?P<threshold>[0-9.]+)%?)?")
_FAILURES = re.compile(r"failures(?::(?P<threshold>[0-9.]+)%?)?")
Status = Literal["fail", "pass", "not judged"]
Kind = Literal["slower", "failures"]
VALID_SHARE = "valid_share"  # the quantity a failures rule checks


@dataclass(frozen=True)
class FailOn:
    """One rule. ``slower``: fail when B's ``metric`` mean is above A's by more than
    ``threshold`` (a fraction: 0.05 = 5 %) over the whole interval. ``failures``: fail
    when B's valid share is below A's by more than ``threshold`` (0.05: 5 points)."""

    kind: Kind = "slower"
    metric: str = "e2e_ms"
    threshold: float = 0.0

    @classmethod
    def parse(cls, text: str) -> FailOn:
        """``slower``, ``slower:ttft_ms``, ``slower:ttft_ms:5%``, ``failures`` or
        ``failures:5%``; ConfigError (one line) for anything else."""
        failures = _FAILURES.fullmatch(text.strip())
        if failures is not None:
            return cls("failures", VALID_SHARE, float(failures["threshold"] or 0.0) / 100.0)
        match = _SLOWER.fullmatch(text.strip())
        if match is None:
            raise ConfigError(f"--fail-on {text!r}: expected slower[:METRIC[:THRESHOLD%]] or "
                              "failures[:THRESHOLD%], e.g. slower, slower:ttft_ms, "
                              "slower:e2e_ms:5% or failures:2%")
        metric = match["metric"] or "e2e_ms"
        if metric not in METRICS:
            raise ConfigError(f"--fail-on {text!r}: metric {metric!r} is not one of "
                              f"{', '.join(METRICS)}")
        return cls("slower", metric, float(match["threshold"] or 0.0) / 100.0)

    def describe(self) -> str:
        if self.kind == "failures":
            return (f"B's valid share below A's by more than {self.threshold * 100:.1f} "
                    "percentage points")
        return f"B's mean {self.metric} above A's by more than {self.threshold:.1%}"


def with_failures(rules: Sequence[FailOn]) -> tuple[FailOn, ...]:
    """``rules`` with the default ``failures`` rule added when none is given (a gate
    without rules stays without rules)."""
    if not rules or any(r.kind == "failures" for r in rules):
        return tuple(rules)
    return (*rules, FailOn("failures", VALID_SHARE))


@dataclass(frozen=True)
class GateCheck:
    """One rule in one cell. ``slower``: B/A of the means and its interval; ``failures``:
    each side's valid share. ``count_a``/``count_b``: what each side stands on."""

    mode: str
    capacity: int
    load: str | None
    kind: Kind
    metric: str
    threshold: float
    status: Status
    count_a: RowCount
    count_b: RowCount
    b_over_a: float | None = None
    low: float | None = None  # of B/A
    high: float | None = None
    why: str = ""  # why not judged

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["count_a"], data["count_b"] = self.count_a.to_dict(), self.count_b.to_dict()
        data["share_a"], data["share_b"] = self.count_a.share, self.count_b.share
        return data

    def describe(self) -> str:
        at = f"{self.mode} @ {self.capacity} {self.load or 'sequential'} {self.metric}"
        sides = f"A {self.count_a.describe()}; B {self.count_b.describe()}"
        if self.status == "not judged":
            return f"{at}: not judged ({self.why}) [{sides}]"
        if self.kind == "failures":
            a, b = self.count_a.share or 0.0, self.count_b.share or 0.0
            return (f"{at}: A {a:.1%}, B {b:.1%}, limit A − {self.threshold * 100:.1f} "
                    f"points: {self.status} [{sides}]")
        return (f"{at}: B/A = {self.b_over_a:.3f}, 95 % interval "
                f"{self.low:.3f}–{self.high:.3f}, limit {1 + self.threshold:.3f}: "
                f"{self.status} [{sides}]")


@dataclass(frozen=True)
class GateResult:
    """Every check of every rule; ``accept_unjudged``: checks not judged do not fail the
    gate (they are still listed)."""

    rules: tuple[FailOn, ...]
    checks: tuple[GateCheck, ...]
    accept_unjudged: bool = False
    failed_checks: tuple[GateCheck, ...] = field(init=False)
    unjudged: tuple[GateCheck, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "failed_checks",
                           tuple(c for c in self.checks if c.status == "fail"))
        object.__setattr__(self, "unjudged",
                           tuple(c for c in self.checks if c.status == "not judged"))

    @property
    def failed(self) -> bool:
        return bool(self.failed_checks)

    @property
    def exit_code(self) -> int:
        """1: a check failed; 2: a check was not judged (and not accepted); 0: every
        check passed."""
        if self.failed:
            return 1
        return 2 if self.unjudged and not self.accept_unjudged else 0

    def summary(self) -> str:
        """One line: the verdict and its counts."""
        verdict = {0: "passed", 1: "FAILED", 2: "NOT JUDGED"}[self.exit_code]
        line = (f"gate: {verdict} ({len(self.failed_checks)} of {len(self.checks)} checks "
                "failed")
        if self.unjudged:
            line += (f", {len(self.unjudged)} not judged"
                     + (", accepted by --accept-unjudged" if self.accept_unjudged else
                        "; --accept-unjudged accepts them"))
        return line + f"; exit {self.exit_code})"

    def to_dict(self) -> dict[str, Any]:
        return {"failed": self.failed, "exit_code": self.exit_code,
                "accept_unjudged": self.accept_unjudged,
                "rules": [asdict(r) for r in self.rules],
                "checks": [c.to_dict() for c in self.checks],
                "unjudged": [{"cell": c.describe(), "why": c.why} for c in self.unjudged]}


_FATAL = (Reason.PROMPT_DIFFERS, Reason.PROMPT_TOKENS_DIFFER)


def check(mode: str, comparison: PairComparison, rule: FailOn) -> GateCheck:
    """``rule`` on one cell of a comparison of two runs (A = ``mode_a``)."""
    c = comparison

    def result(status: Status, why: str = "", **found: float | None) -> GateCheck:
        return GateCheck(mode, c.capacity, c.load, rule.kind, rule.metric, rule.threshold,
                         status, c.count_a, c.count_b, why=why, **found)

    if rule.kind == "failures":
        if any(v.reason in _FATAL for v in c.pair_violations):
            return result("not judged", f"refused: {c.refused}")
        a, b = c.count_a.share, c.count_b.share
        if a is None or b is None:
            return result("not judged", "no measured row on one side")
        return result("fail" if b < a - rule.threshold - 1e-12 else "pass")
    if c.refused:
        return result("not judged", f"refused: {c.refused}")
    found = next((m for m in c.metrics if m.metric == rule.metric), None)
    if found is None:
        return result("not judged", "the runs have no such values")
    if found.interval is None:
        return result("not judged", found.note or "too few rows for an interval")
    low, high = 1.0 / found.interval.high, 1.0 / found.interval.low
    return result("fail" if low > 1.0 + rule.threshold else "pass",
                  b_over_a=1.0 / found.ratio, low=low, high=high)


def gate(comparisons: Sequence[tuple[str, PairComparison]], rules: Sequence[FailOn], *,
         accept_unjudged: bool = False) -> GateResult:
    """Every rule (with the default ``failures`` rule, :func:`with_failures`) on every
    cell of a run comparison (``(mode, comparison)`` pairs)."""
    every = with_failures(rules)
    checks = tuple(check(mode, c, rule) for rule in every for mode, c in comparisons)
    return GateResult(every, checks, accept_unjudged)
