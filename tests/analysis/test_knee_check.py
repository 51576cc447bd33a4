"""The knee a recorded KV budget predicts against the first point whose /metrics show
queueing or preemption: within one step of the sweep, a miss, or not judged."""

from __future__ import annotations

from kvlab.analysis.checks import KNEE
from kvlab.analysis.evaluate import evaluate
from kvlab.analysis.knee_check import KneeCheck
from kvlab.analysis.run_view import EvaluateOptions, RunView, recorded_servers
from kvlab.memory.presets import shape_from_preset
from kvlab.memory.served import ServedKv
from kvlab.metric_names import EMBEDDED
from kvlab.rundir import GaugeSample, Record, ServerFacts
from tests.rows import MS, row

GEMMA = shape_from_preset("gemma-3-270m")
KVLAB = ServedKv("paged-blocks", GEMMA, "bf16", max_seqs=16, block_size=16,
                 prefill_budget=256, kv_blocks=60)


def _point(n: int, position: int, t0_s: float, running: int, preempted: int,
           mode: str = "kvlab-serve") -> tuple[list[Record], list[GaugeSample]]:
    """One c=n point of n requests sent together: the server ran ``running`` of them at
    once and preempted ``preempted`` times."""
    t0 = int(t0_s * 1000)
    rows = [row(mode=mode, load=f"c={n}", query_id=f"q{i}", position=position + i,
                prompt_tokens=129, output_tokens=32, requested_tokens=32, cached_tokens=0,
                t_sent=t0 * MS, t_first_content=(t0 + 100) * MS,
                t_last_content=(t0 + 410) * MS, t_end=(t0 + 500) * MS,
                chunk_ns=[(t0 + 100 + 10 * k) * MS for k in range(32)],
                timings={"prompt_ms": 90.0, "predicted_ms": 310.0, "predicted_n": 32})
            for i in range(n)]
    before = {"kvlab:prompt_tokens_total": 129.0 * position,
              "kvlab:generation_tokens_total": 32.0 * position,
              "kvlab:num_preemptions_total": 0.0, "kvlab:kv_blocks_total": 60.0,
              "kvlab:num_requests_running": 0.0, "kvlab:num_requests_waiting": 0.0}
    during = {**before, "kvlab:num_requests_running": float(running),
              "kvlab:num_requests_waiting": float(n - running)}
    after = {**before, "kvlab:prompt_tokens_total": 129.0 * (position + n),
             "kvlab:generation_tokens_total": 32.0 * (position + n),
             "kvlab:num_preemptions_total": float(preempted)}

    def reading(phase: str, at: float, samples: dict[str, float], pos: int | None
                ) -> GaugeSample:
        return GaugeSample(mode=mode, capacity=512, load=f"c={n}", t_ns=int(at * 1e9),
                           samples=samples, phase=phase,  # type: ignore[arg-type]
                           position=pos)

    return rows, [reading("start", t0_s - 0.1, before, position),
                  reading("during", t0_s + 0.25, during, None),
                  reading("end", t0_s + 0.6, after, position + n)]


def _check(shown: dict[int, tuple[int, int]], served: ServedKv = KVLAB) -> KneeCheck:
    """The check of a sweep whose point N showed (running, preemptions) = shown[N]."""
    records: list[Record] = []
    gauges: list[GaugeSample] = []
    for k, (n, (running, preempted)) in enumerate(sorted(shown.items())):
        rows, readings = _point(n, len(records), 10.0 * (k + 1), running, preempted)
        records += rows
        gauges += readings
    (check,) = _knees(records, gauges, served)
    return check


def _knees(records: list[Record], gauges: list[GaugeSample], served: ServedKv = KVLAB
           ) -> list[KneeCheck]:
    """The knee checks of a run of kvlab serve at 512 whose budget is ``served``."""
    view = RunView(records, gauges=gauges, budgets={("kvlab-serve", 512): served})
    return evaluate(view, options=EvaluateOptions(resamples=10)).found(KNEE)


def test_a_knee_measured_where_predicted_is_within_one_step() -> None:
    check = _check({4: (4, 0), 5: (5, 0), 6: (6, 0), 7: (6, 0), 8: (6, 2)})
    assert check.knee is not None and (check.knee.fits, check.knee.first_past) == (6, 7)
    assert check.prompt_tokens == (129, 129) and check.output_tokens == (32, 32)
    assert (check.measured_knee, check.measured_first_past, check.steps) == (6, 7, 0)
    assert check.verdict == "within one step"
    seventh = check.points[3]
    assert seventh.reasons == ["ran at most 6 of 7 in flight"] and seventh.readings == 1
    assert check.points[4].reasons == ["2 preempted", "ran at most 6 of 8 in flight"]
    assert "fits 6, first past 7 (N = 7 in the sweep)" in check.describe()


def test_one_point_late_is_within_two_is_a_miss_with_the_numbers() -> None:
    late = _check({5: (5, 0), 6: (6, 0), 7: (7, 0), 8: (7, 0), 10: (7, 3)})
    assert (late.measured_first_past, late.steps, late.verdict) == (8, 1, "within one step")
    miss = _check({5: (5, 0), 6: (6, 0), 7: (7, 0), 8: (8, 0), 10: (9, 0)})
    assert (miss.measured_first_past, miss.steps, miss.verdict) == (10, 2, "miss")
    early = _check({4: (4, 0), 5: (4, 0), 6: (5, 0), 7: (6, 0)})
    assert (early.measured_first_past, early.expected_first_past) == (5, 7)
    assert early.verdict == "miss" and "2 step(s) apart: miss" in early.describe()


def test_a_second_budget_moves_the_prediction_with_no_other_change() -> None:
    wider = ServedKv("paged-blocks", GEMMA, "bf16", max_seqs=16, block_size=16, prefill_budget=256,
                     kv_blocks=60)
    check = _check({8: (8, 0), 10: (10, 0), 11: (10, 0)}, wider)  # /metrics say 60 blocks
    assert check.knee is not None and check.knee.fits == 6  # the reported pool wins
    assert (check.expected_first_past, check.measured_first_past) == (8, 11)
    assert check.verdict == "miss"


def test_not_judged_without_a_reading_or_a_prediction() -> None:
    records, gauges = _point(6, 0, 10.0, 6, 0)
    blind = [g for g in gauges if g.phase != "during"]  # requests shorter than a poll
    (check,) = _knees(records, blind)
    assert check.verdict == "not judged" and check.points[0].past is None
    assert "no /metrics reading of the requests running at c=6" in check.describe()
    small = ServedKv("paged-blocks", GEMMA, "bf16", max_seqs=16, block_size=16, kv_blocks=4)
    unreported = [g.model_copy(update={"samples": {k: v for k, v in g.samples.items()
                                                   if "kv_blocks" not in k}}) for g in gauges]
    (check,) = _knees(records, unreported, small)
    assert check.knee is None and check.verdict == "not judged"
    assert check.why.startswith("not predicted:")


def test_a_reading_after_the_points_last_answer_is_not_a_reading_of_it() -> None:
    """Requests shorter than a poll: the one 'during' reading landed after they had all
    ended (the recorder waits for the counters to settle), at rest. It says nothing of
    how many ran at once, so the point is not judged, rather than judged past at N = 1."""
    records, gauges = _point(1, 0, 10.0, 1, 0)
    late = [g.model_copy(update={"t_ns": int(10.55e9), "samples": {
        **g.samples, "kvlab:num_requests_running": 0.0, "kvlab:num_requests_waiting": 0.0}})
        if g.phase == "during" else g for g in gauges]
    (check,) = _knees(records, late)
    assert check.points[0].readings == 0 and check.points[0].past is None
    (inside,) = _knees(records, gauges)
    assert inside.points[0].readings == 1 and inside.points[0].past is False


def test_a_point_without_a_reading_is_judged_by_its_neighbours_where_they_decide_it() -> None:
    """N = 1 had no reading; N = 2 ran both at once, so one fits too. N = 8 had none
    either, past N = 7, the first past the knee: it changes nothing."""
    records: list[Record] = []
    gauges: list[GaugeSample] = []
    for k, (n, running) in enumerate([(1, 1), (2, 2), (6, 6), (7, 6), (8, 6)]):
        rows, readings = _point(n, len(records), 10.0 * (k + 1), running, 0)
        records += rows
        gauges += [g for g in readings if n not in (1, 8) or g.phase != "during"]
    (check,) = _knees(records, gauges)
    assert [p.past for p in check.points] == [None, False, False, True, None]
    assert (check.measured_first_past, check.verdict) == (7, "within one step")
    blind = [g for g in gauges if not (g.load in ("c=2", "c=6") and g.phase == "during")]
    (check,) = _knees(records, blind)
    assert check.verdict == "not judged"  # below the first past, nothing says they fit
    assert "at c=1, c=2, c=6" in check.describe()


def test_budgets_come_from_the_launched_servers_facts_and_nothing_unreadable_vanishes() -> None:
    entries = [(("a", 512), {"kv_served": KVLAB.to_dict(), "weights_bytes": 100,
                             "metric_names": EMBEDDED.to_dict()}),
               (("b", 512), {"kv_served": {"server": "?"}, "weights_bytes": "x"}),
               (("c", 512), {}),
               (("d", 512), {"kv_served": None, "metric_names": {"server": "x"}})]
    recorded = recorded_servers((c, ServerFacts.model_validate(f)) for c, f in entries)
    assert recorded.budgets == {("a", 512): KVLAB} and recorded.weights == {("a", 512): 100}
    assert recorded.metric_names == {("a", 512): EMBEDDED}
    # c recorded nothing (its kind exposes none: the checks say so); b and d recorded
    # what cannot be read, and say what
    assert set(recorded.unreadable) == {("b", 512), ("d", 512)}
    assert "kv_served: kv_served is not a served KV budget" in recorded.unreadable[("b", 512)]
    assert recorded.unreadable[("d", 512)].startswith("metric_names: not a server's")


def test_a_knee_beyond_the_sweep_never_seen_is_its_own_verdict_not_a_confirmed_knee() -> None:
    check = _check({2: (2, 0), 3: (3, 0), 4: (4, 0)})  # predicted first past: 7
    assert (check.expected_first_past, check.measured_first_past) == (None, None)
    assert check.verdict == "agrees: none in the sweep"
    assert "within one step" not in check.describe()
    assert "not confirmed" in check.describe()
