"""The CI gate: three verdicts with stated error rates (regress, pass, inconclusive),
A's whole plan (a cell B lacks or did not finish fails, named "k of n planned"), a
drop in B's valid share fails, a cell it cannot judge is never a pass, and Holm over
the family of checks."""

from __future__ import annotations

import time

import pytest

from kvlab.analysis.gate import (
    DEFAULT_MARGIN,
    VALID_SHARE,
    CellRuns,
    FailOn,
    NoiseFloor,
    gate,
)
from kvlab.analysis.valid_rows import CellPlan, judge
from kvlab.errors import ConfigError
from kvlab.records import Outcome
from tests.gate_runs import LOAD, gate_rows

FAILURES = FailOn("failures", VALID_SHARE, 0.0)
KEY = ("fast", 256, LOAD)


@pytest.mark.parametrize(("text", "rule"), [
    ("slower", FailOn("slower", "e2e_ms", DEFAULT_MARGIN)),
    ("slower:ttft_ms", FailOn("slower", "ttft_ms", DEFAULT_MARGIN)),
    ("slower:prefill_ms:5%", FailOn("slower", "prefill_ms", 0.05)),
    ("slower:itl_effective_ms:2.5", FailOn("slower", "itl_effective_ms", 0.025)),
    ("slower:e2e_ms:0%", FailOn("slower", "e2e_ms", 0.0)),
    ("failures", FAILURES),
    ("failures:5%", FailOn("failures", VALID_SHARE, 0.05)),
])
def test_rules_parse(text: str, rule: FailOn) -> None:
    assert FailOn.parse(text) == rule


@pytest.mark.parametrize(("text", "message"), [
    ("faster", "expected slower[:METRIC[:MARGIN%]] or failures[:THRESHOLD%]"),
    ("slower:tokens_per_s", "metric 'tokens_per_s' is not one of e2e_ms, prefill_ms"),
    ("slower:e2e_ms:-3%", "expected slower"),
    ("failures:e2e_ms", "expected slower"),
])
def test_a_bad_rule_is_one_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        FailOn.parse(text)
    assert str(info.value).startswith(f"--fail-on {text!r}: ") and message in str(info.value)


def side(seeds: list[int], slowdown: float = 1.0, plan: CellPlan | None = None,
         **over: object) -> tuple:
    """One ValidRows of the "fast" c=4 cell per run (one run per seed)."""
    out = []
    for seed in seeds:
        rows = gate_rows(f"r{seed}", seed=seed, slowdown=slowdown, **over)  # type: ignore[arg-type]
        valid = judge(rows, plan={KEY: plan} if plan else None)
        out.append(valid.groups()[KEY])
    return tuple(out)


def cell(a: tuple, b: tuple, floor: float | None = None) -> CellRuns:
    floors = {} if floor is None else {"e2e_ms": NoiseFloor(floor, 5, "test")}
    return CellRuns("fast", 256, LOAD, a, b, floors)


def test_identical_runs_pass_and_a_large_slowdown_regresses() -> None:
    same = gate([cell(side([1]), side([1]))], [FailOn()])
    slower, failures = same.checks
    assert slower.status == "pass" and slower.b_over_a == pytest.approx(1.0)
    assert slower.high is not None and slower.high < 1 + DEFAULT_MARGIN
    assert failures == same.checks[-1] and failures.kind == "failures"
    assert same.exit_code == 0 and "no noise floor known" in slower.describe()
    # fast's decode twice as long: e2e about 1.4x
    worse = gate([cell(side([1]), side([2], slowdown=2.0))], [FailOn()])
    check = worse.checks[0]
    assert check.status == "fail" and check.b_over_a > 1.25 and check.low > 1.05
    assert worse.exit_code == 1 and "regress" in check.describe()
    assert worse.to_dict()["checks"][0]["verdict"] == "regress"


def test_a_noise_floor_makes_a_close_call_inconclusive_and_says_so() -> None:
    """B 3 % slower with runs 4 % apart: neither beyond 1.04 nor below it."""
    found = gate([cell(side([1]), side([2], slowdown=1.06), floor=0.04)], [FailOn()])
    check = found.checks[0]
    assert check.status == "inconclusive" and found.exit_code == 3
    assert "noise floor 4.00% (5 runs, test)" in check.describe()
    assert check.detectable is not None and check.detectable > 0.10
    assert "could detect ≥ " in check.describe() and "INCONCLUSIVE" in found.summary()
    ok = gate([cell(side([1]), side([2], slowdown=1.06), floor=0.04)], [FailOn()],
              inconclusive_ok=True)
    assert ok.exit_code == 0


def test_several_runs_per_side_are_resampled() -> None:
    found = gate([cell(side([1, 2, 3]), side([4, 5, 6]))], [FailOn()])
    check = found.checks[0]
    assert check.runs_a == check.runs_b == 3 and "resampled (3 and 3 runs; Student" in check.between
    assert check.status in ("pass", "inconclusive")


def test_a_cell_b_lacks_fails_named_unless_allowed() -> None:
    missing = gate([cell(side([1]), ())], [FailOn()])
    (check,) = missing.checks
    assert check.kind == "complete" and check.status == "fail" and missing.exit_code == 1
    assert "fast @ 256 c=4 plan: not measured in B: 0 of 40 planned: fail" in check.describe()
    allowed = gate([cell(side([1]), ())], [FailOn()], allow_missing=True)
    assert allowed.checks[0].status == "allowed" and allowed.exit_code == 0
    assert allowed.to_dict()["missing"] == [allowed.checks[0].describe()]


def test_a_point_b_did_not_finish_fails_with_k_of_n_planned() -> None:
    cut = side([2], plan=CellPlan(40, False), sent=8, modes=("fast",))
    assert cut[0].count.describe() == "8 valid of 40 planned (8 sent), not finished"
    found = gate([cell(side([1], plan=CellPlan(40)), cut)], [FailOn()])
    complete = found.checks[0]
    assert complete.status == "fail" and "run 1 of B: 8 of 40 planned, not finished" \
        in complete.why
    # its valid share is of the rows planned: 8 of 40
    assert found.checks[-1].kind == "failures" and found.checks[-1].status == "fail"
    assert found.exit_code == 1


def test_a_candidate_whose_requests_all_failed_fails_the_gate() -> None:
    """Issue 28: B's measured requests all answered HTTP 500: its e2e is not judged (no
    valid row) and its valid share fell from 100 % to 0: exit 1."""
    rows = [r.model_copy(update={"outcome": Outcome.HTTP_ERROR, "http_status": 500,
                                 "output_tokens": None, "prompt_tokens": None})
            for r in gate_rows("r2", seed=2)]
    broken = (judge(rows).groups()[KEY],)
    result = gate([cell(side([1]), broken)], [FailOn()])
    slower, failures = result.checks
    assert slower.status == "not judged" and "no valid row in B" in slower.why
    assert failures.status == "fail" and failures.count_b.refused == {"failed": 40}
    assert "A 100.0%, B 0.0%" in failures.describe()
    assert result.exit_code == 1 and result.summary().startswith("gate: FAILED (1 of 2")


def test_holm_over_many_cells_states_the_family_and_widens_each_interval() -> None:
    one = gate([cell(side([1]), side([2]))], [FailOn()])
    cells = [cell(side([1]), side([2]))] + [cell(side([10 + i]), side([20 + i]))
                                             for i in range(9)]
    many = gate(cells, [FailOn()])
    assert one.family == 1 and many.family == 10
    assert "over 10 slower checks (Holm)" in many.error_rates()
    first, again = one.checks[0], many.checks[0]
    assert again.low is not None and first.low is not None and again.low < first.low
    assert again.p_pass is not None and first.p_pass is not None
    assert again.p_pass >= first.p_pass
    assert again.detectable is not None and first.detectable is not None
    assert again.detectable > first.detectable


def test_the_gate_on_two_runs_of_1000_rows_takes_under_2_s() -> None:
    """The one timing the issue asks for: generous, the gate alone (rows judged first)."""
    a = side([1], rows=1000, modes=("fast",))
    b = side([2], rows=1000, modes=("fast",))
    started = time.perf_counter()
    found = gate([cell(a, b)], [FailOn(), FailOn("slower", "itl_effective_ms")])
    took = time.perf_counter() - started
    assert found.family == 2 and took < 2.0, took
