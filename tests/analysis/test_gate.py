"""The CI gate: a rule fails only when B's interval lies beyond the threshold, a drop in
B's valid share fails it, and a cell it cannot judge is never a pass."""

from __future__ import annotations

import pytest

from kvlab.analysis.comparisons import compare_rows
from kvlab.analysis.gate import VALID_SHARE, FailOn, gate
from kvlab.analysis.valid_rows import judge
from kvlab.errors import ConfigError
from kvlab.records import Outcome
from tests.report.synthetic_runs import two_mode_rows

FAILURES = FailOn("failures", VALID_SHARE, 0.0)


@pytest.mark.parametrize(("text", "rule"), [
    ("slower", FailOn("slower", "e2e_ms", 0.0)),
    ("slower:ttft_ms", FailOn("slower", "ttft_ms", 0.0)),
    ("slower:prefill_ms:5%", FailOn("slower", "prefill_ms", 0.05)),
    ("slower:itl_effective_ms:2.5", FailOn("slower", "itl_effective_ms", 0.025)),
    ("failures", FAILURES),
    ("failures:5%", FailOn("failures", VALID_SHARE, 0.05)),
])
def test_rules_parse(text: str, rule: FailOn) -> None:
    assert FailOn.parse(text) == rule


@pytest.mark.parametrize(("text", "message"), [
    ("faster", "expected slower[:METRIC[:THRESHOLD%]] or failures[:THRESHOLD%]"),
    ("slower:tokens_per_s", "metric 'tokens_per_s' is not one of e2e_ms, prefill_ms"),
    ("slower:e2e_ms:-3%", "expected slower"),
    ("failures:e2e_ms", "expected slower"),
])
def test_a_bad_rule_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        FailOn.parse(text)
    assert str(info.value).startswith(f"--fail-on {text!r}: ") and message in str(info.value)


def fast(rows: list) -> list:
    return [r for r in rows if r.mode == "fast"]


def cells(speedup_b: float, b_rows: list | None = None) -> list:
    """Mode "fast" of run A (prefill 2x shorter than "slow") against run B's."""
    a = fast(two_mode_rows(n=8, capacities=(256,)))
    b = b_rows if b_rows is not None else fast(
        two_mode_rows(n=8, capacities=(256,), speedup=speedup_b))
    return [("fast", compare_rows("A", judge(a), "B", judge(b), capacity=256,
                                  resamples=300))]


def test_the_same_rows_pass_and_a_slower_b_fails_beyond_its_threshold() -> None:
    same = gate(cells(2.0), [FailOn("slower", "prefill_ms"), FailOn()])
    assert not same.failed and {c.status for c in same.checks} == {"pass"}
    assert same.exit_code == 0 and same.rules[-1] == FAILURES  # on by default
    # B's prefill takes 2/1.5 = 1.333x A's on every row: its interval is about 1.333
    slower = cells(1.5)
    check = gate(slower, [FailOn("slower", "prefill_ms", 0.20)]).checks[0]
    assert check.status == "fail" and check.b_over_a == pytest.approx(4 / 3)
    assert check.low is not None and check.low > 1.2
    assert not gate(slower, [FailOn("slower", "prefill_ms", 0.40)]).failed
    assert "B/A = 1.333" in check.describe() and "fail" in check.describe()
    assert "[A 8 valid of 8; B 8 valid of 8]" in check.describe()


def test_a_cell_without_an_interval_is_not_judged_and_exits_2() -> None:
    rows = two_mode_rows(n=3, capacities=(256,))[1:4]
    few = [("fast", compare_rows("A", judge(rows), "B", judge(rows), capacity=256))]
    result = gate(few, [FailOn()])
    assert not result.failed and result.checks[0].status == "not judged"
    assert "too few rows" in result.checks[0].describe()
    assert result.exit_code == 2 and "exit 2" in result.summary()
    accepted = gate(few, [FailOn()], accept_unjudged=True)
    assert accepted.exit_code == 0 and accepted.unjudged == result.unjudged
    assert accepted.to_dict()["unjudged"][0]["why"] == "too few rows for an interval"


def test_a_candidate_whose_requests_all_failed_fails_the_gate() -> None:
    """Issue 28: run B's measured requests all answered HTTP 500. Its e2e cannot be
    judged (no valid row) and its valid share fell from 100 % to 0: exit 1."""
    broken = [r.model_copy(update={"outcome": Outcome.HTTP_ERROR, "http_status": 500,
                                   "output_tokens": None, "prompt_tokens": None})
              if not r.warmup else r for r in fast(two_mode_rows(n=8, capacities=(256,)))]
    result = gate(cells(2.0, broken), [FailOn()])
    slower, failures = result.checks
    assert slower.status == "not judged" and "no valid row in B" in slower.why
    assert failures.status == "fail" and failures.count_b.refused == {"failed": 8}
    assert "A 100.0%, B 0.0%" in failures.describe()
    assert result.exit_code == 1 and result.summary().startswith("gate: FAILED (1 of 2")


def test_a_partial_failure_in_b_fails_beyond_the_threshold_only() -> None:
    rows = fast(two_mode_rows(n=8, capacities=(256,)))
    measured = [i for i, r in enumerate(rows) if not r.warmup]
    for i in measured[:2]:  # 2 of 8 answers one token short: 75 % valid
        rows[i] = rows[i].model_copy(update={"output_tokens": rows[i].requested_tokens - 1})
    judged = cells(2.0, rows)
    assert gate(judged, [FailOn()]).exit_code == 1
    within = gate(judged, [FailOn(), FailOn("failures", VALID_SHARE, 0.25)])
    assert [c.status for c in within.checks] == ["pass", "pass"]
