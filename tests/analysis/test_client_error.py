"""Each load point's client error budget beside its TTFT: flagged over its share,
refused under --strict, and the set-up every request paid when a server closes after
each answer."""

from __future__ import annotations

from kvlab.analysis.client_error import client_errors
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.run_view import EvaluateOptions, RunView
from kvlab.analysis.valid_rows import judge
from kvlab.analysis.validate import Reason
from kvlab.rundir import Record
from tests.rows import MS, row

US = 1_000


def _point(load: str, n: int, *, loop_lag_us: int = 20, read_lag_us: int = 30,
           reused: bool = True, setup_us: int = 300) -> list[Record]:
    """``n`` closed-loop rows of 100 ms TTFT, each sent 50 µs after it was due."""
    rows = []
    for i in range(n):
        t0 = 2000 * MS * i
        own = {} if reused else {"t_connect_start": t0 - setup_us * US, "t_connected": t0}
        rows.append(row(load=load, query_id=f"q{i}", position=i, t_scheduled=t0 - 50 * US
                        - (0 if reused else setup_us * US), t_sent=t0,
                        t_first_content=t0 + 100 * MS, t_last_content=t0 + 730 * MS,
                        t_end=t0 + 1000 * MS,
                        chunk_ns=[t0 + (100 + 10 * k) * MS for k in range(64)],
                        loop_lag_ns=loop_lag_us * US, read_lag_ns=read_lag_us * US,
                        connection_reused=reused, **own))
    return rows


def test_a_quiet_client_is_within_its_share_and_its_parts_are_named() -> None:
    (e,) = client_errors(judge(_point("c=1", 8)))
    assert e.ttft_p50_ms == 100.0 and e.send_lag_p99_ms == 0.05
    assert (e.loop_lag_p50_ms, e.read_lag_p50_ms, e.setup_mean_ms) == (0.02, 0.03, 0.0)
    assert abs(e.bound_ms - 0.1) < 1e-9 and abs(e.share - 0.001) < 1e-9  # type: ignore[operator]
    assert e.over == [] and e.load_shortfall == 0.0 and not e.closes_each_answer


def test_a_point_over_five_percent_is_flagged_everywhere_and_refused_under_strict() -> None:
    rows = _point("c=1", 8, loop_lag_us=6000)  # 6 ms of loop lag on a 100 ms TTFT
    evaluation = evaluate(RunView(rows), options=EvaluateOptions(resamples=10))
    (e,) = evaluation.client_errors
    assert e.over and "6.0" in e.over[0] and "limit 5%" in e.over[0]
    (verdict,) = [v for v in evaluation.verdicts if v.reason == Reason.CLIENT_ERROR]
    assert not verdict.refuses
    assert evaluation.summaries[0].count.flags  # the star on every figure of the point
    strict = evaluate(RunView(rows), options=EvaluateOptions(resamples=10, strict=True))
    assert strict.valid.count.valid == 0
    assert strict.valid.count.refused == {"client_error": 8}
    looser = evaluate(RunView(rows, client_error_limit=0.1), options=EvaluateOptions(resamples=10))
    assert looser.client_errors[0].over == []


def test_a_server_that_closes_after_each_answer_shows_the_set_up_every_request_paid(
        ) -> None:
    (e,) = client_errors(judge(_point("c=1", 4, reused=False, setup_us=300)))
    assert e.closes_each_answer and e.setup_paid == 4
    assert e.setup_paid_p50_ms == 0.3 and e.setup_mean_ms == 0.3
    assert e.send_lag_p99_ms == 0.05  # lag counts to the set-up's start, not past it


def test_a_warmed_point_whose_server_closes_after_each_answer_is_named() -> None:
    """llama-server: the first N requests go on the warm-up's connections, every later
    one opens its own; a server that keeps them has every request on a reused one."""
    rows = _point("c=1", 4, reused=False)
    rows[0] = rows[0].model_copy(update={"connection_reused": True, "t_connect_start": None,
                                         "t_connected": None})  # the warm-up's connection
    (e,) = client_errors(judge(rows))
    assert (e.setup_paid, e.in_flight) == (3, 1) and e.closes_each_answer
    (kept,) = client_errors(judge(_point("c=1", 4)))
    assert not kept.closes_each_answer
