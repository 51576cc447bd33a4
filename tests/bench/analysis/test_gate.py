"""The CI gate: a rule fails only when B's interval lies beyond the threshold."""

from __future__ import annotations

import pytest

from kvlab.bench.analysis.comparisons import compare_rows
from kvlab.bench.analysis.gate import FailOn, gate
from kvlab.errors import ConfigError
from tests.report.synthetic_runs import two_mode_rows


@pytest.mark.parametrize(("text", "rule"), [
    ("slower", FailOn("e2e_ms", 0.0)),
    ("slower:ttft_ms", FailOn("ttft_ms", 0.0)),
    ("slower:prefill_ms:5%", FailOn("prefill_ms", 0.05)),
    ("slower:itl_effective_ms:2.5", FailOn("itl_effective_ms", 0.025)),
])
def test_rules_parse(text: str, rule: FailOn) -> None:
    assert FailOn.parse(text) == rule


@pytest.mark.parametrize(("text", "message"), [
    ("faster", "expected slower[:METRIC[:THRESHOLD%]]"),
    ("slower:tokens_per_s", "metric 'tokens_per_s' is not one of e2e_ms, prefill_ms"),
    ("slower:e2e_ms:-3%", "expected slower"),
])
def test_a_bad_rule_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        FailOn.parse(text)
    assert str(info.value).startswith(f"--fail-on {text!r}: ") and message in str(info.value)


def cells(speedup_b: float) -> list:
    """Mode "fast" of run A (prefill 2x shorter than "slow") against run B's."""
    a = [r for r in two_mode_rows(n=8, capacities=(256,)) if r.mode == "fast"]
    b = [r for r in two_mode_rows(n=8, capacities=(256,), speedup=speedup_b)
         if r.mode == "fast"]
    return [("fast", compare_rows("A", [r for r in a if not r.warmup], "B",
                                  [r for r in b if not r.warmup], capacity=256,
                                  resamples=300))]


def test_the_same_rows_pass_and_a_slower_b_fails_beyond_its_threshold() -> None:
    same = gate(cells(2.0), [FailOn("prefill_ms"), FailOn("e2e_ms")])
    assert not same.failed and {c.status for c in same.checks} == {"pass"}
    # B's prefill takes 2/1.5 = 1.333x A's on every row: its interval is about 1.333
    slower = cells(1.5)
    check = gate(slower, [FailOn("prefill_ms", 0.20)]).checks[0]
    assert check.status == "fail" and check.b_over_a == pytest.approx(4 / 3)
    assert check.low is not None and check.low > 1.2
    assert not gate(slower, [FailOn("prefill_ms", 0.40)]).failed
    assert "B/A = 1.333" in check.describe() and "fail" in check.describe()


def test_a_cell_without_an_interval_is_listed_not_judged() -> None:
    few = [("fast", compare_rows("A", two_mode_rows(n=3, capacities=(256,))[1:4], "B",
                                 two_mode_rows(n=3, capacities=(256,))[1:4], capacity=256))]
    result = gate(few, [FailOn()])
    assert not result.failed and result.checks[0].status == "not judged"
    assert "too few rows" in result.checks[0].describe()
