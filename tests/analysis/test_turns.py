"""Multi-turn growth: server-counted prompt tokens grow turn to turn as sized."""

from __future__ import annotations

from kvlab.analysis.turns import TurnPlan, turn_growth
from kvlab.rundir import Outcome
from tests.rows import row

PLANS = [TurnPlan(512, f"c.t{k}", "c", k, tokens) for k, tokens in
         ((1, 20), (2, 55), (3, 90))]


def rows(counted: list[int], **last: object) -> list:
    out = [row(query_id=f"c.t{k}", position=k, prompt_tokens=n)
           for k, n in enumerate(counted, 1)]
    out[-1] = out[-1].model_copy(update=last)
    return out


def test_a_constant_offset_cancels_and_a_wrong_growth_is_named() -> None:
    (same,) = turn_growth(rows([21, 56, 91]), PLANS)  # one BOS more on every turn
    assert same.status == "grows as sized" and same.counted == [21, 56, 91]
    (wrong,) = turn_growth(rows([21, 56, 95]), PLANS)
    assert wrong.status == "differs"
    assert wrong.detail == ("turn 3: the server counted +39 prompt tokens over turn 2, "
                            "+35 when sized")


def test_a_failed_turn_leaves_the_conversation_incomplete() -> None:
    (check,) = turn_growth(rows([21, 56, 91], outcome=Outcome.TIMEOUT), PLANS)
    assert check.status == "incomplete" and check.detail == "no ok row for turn 3"
    assert turn_growth([row(query_id="other")], PLANS) == []
