"""Counter deltas per point from gauges.jsonl readings, checked against the records."""

from __future__ import annotations

from dataclasses import replace

from kvlab.analysis.server_counters import names_of, point_counters
from kvlab.metric_names import VLLM
from kvlab.rundir import GaugeSample, Outcome
from tests.rows import row


def _reading(phase: str, position: int | None, t_s: float, load: str | None = "c=2",
             mode: str = "a", **counters: float) -> GaugeSample:
    return GaugeSample(mode=mode, capacity=512, load=load, t_ns=int(t_s * 1e9),
                       samples=counters, phase=phase, position=position)  # type: ignore[arg-type]


VLLM_START = {'vllm:prompt_tokens_total{engine="0",model_name="g"}': 1000.0,
              'vllm:generation_tokens_total{engine="0",model_name="g"}': 64.0,
              'vllm:num_preemptions_total{engine="0",model_name="g"}': 0.0,
              'vllm:prefix_cache_queries_total{engine="0",model_name="g"}': 1000.0,
              'vllm:prefix_cache_hits_total{engine="0",model_name="g"}': 0.0,
              "process_cpu_seconds_total": 3.0}


def _moved(start: dict[str, float], **by: float) -> dict[str, float]:
    return {k: v + by.get(k.split("{")[0].split(":")[-1], 0.0) for k, v in start.items()}


def test_vllm_deltas_equal_the_records_and_warmups_stay_out() -> None:
    records = [row(position=0, warmup=True, prompt_tokens=250),  # before the start reading
               row(position=1, load="c=2", prompt_tokens=250, cached_tokens=None),
               row(position=2, load="c=2", prompt_tokens=260, cached_tokens=None),
               row(position=3, mode="other", prompt_tokens=999)]  # another mode
    end = _moved(VLLM_START, prompt_tokens_total=510, generation_tokens_total=128,
                 prefix_cache_queries_total=510)
    gauges = [_reading("start", 1, 10.0, **VLLM_START),
              _reading("during", None, 10.2, **VLLM_START),
              _reading("end", 3, 12.5, **end)]
    (point,) = point_counters(records, gauges)
    assert (point.server, point.rows, point.load, point.seconds) == ("vllm", 2, "c=2", 2.5)
    assert point.deltas == {"prompt_tokens": 510, "generation_tokens": 128, "preemptions": 0,
                            "prefix_cache_queries": 510, "prefix_cache_hits": 0}
    assert (point.prompt.delta, point.prompt.records, point.prompt.status) == (510, 510,
                                                                               "equal")
    assert (point.generation.records, point.generation.status) == (128, "equal")
    assert not point.prefix_hits_unasked


def test_llamacpp_counts_computed_tokens_and_a_difference_is_shown() -> None:
    start = {"llamacpp:prompt_tokens_total": 0.0, "llamacpp:tokens_predicted_total": 0.0}
    end = {"llamacpp:prompt_tokens_total": 300.0, "llamacpp:tokens_predicted_total": 128.0}
    records = [row(position=5, load=None, prompt_tokens=250, cached_tokens=100),
               row(position=6, load=None, prompt_tokens=250, cached_tokens=100)]
    (point,) = point_counters(records, [_reading("start", 5, 0, load=None, **start),
                                        _reading("end", 7, 1, load=None, **end)])
    assert point.server == "llamacpp" and point.load is None
    assert (point.prompt.records, point.prompt.status) == (300, "equal")  # 2 × (250 − 100)
    assert point.deltas["preemptions"] is None  # llama.cpp has no such counter
    (other,) = point_counters(records[:1], [_reading("start", 5, 0, load=None, **start),
                                            _reading("end", 7, 1, load=None, **end)])
    assert (other.prompt.records, other.prompt.status) == (150, "differs")


def test_rows_without_counts_make_the_check_not_checkable() -> None:
    start = {"kvlab:prompt_tokens_total": 0.0, "kvlab:generation_tokens_total": 0.0}
    end = {"kvlab:prompt_tokens_total": 250.0, "kvlab:generation_tokens_total": 64.0}
    records = [row(position=0, load="c=2", cached_tokens=0),
               row(position=1, load="c=2", outcome=Outcome.HTTP_ERROR, prompt_tokens=None,
                   output_tokens=None, cached_tokens=None)]
    (point,) = point_counters(records, [_reading("start", 0, 0, **start),
                                        _reading("end", 2, 1, **end)])
    assert point.prompt.status == "equal"  # the failed row is left out, and named
    assert point.prompt.why == ("checked on the 1 finished row; 1 failed row left out "
                                "(the server may have counted some of its tokens)")
    unreported = [records[0], row(position=1, load="c=2", cached_tokens=None)]
    (point,) = point_counters(unreported, [_reading("start", 0, 0, **start),
                                           _reading("end", 2, 1, **end)])
    assert point.prompt.status == "not checkable"
    assert point.prompt.why == "1 of 2 rows without a prompt and a cached token count"


def test_an_interrupted_point_is_left_out_and_its_rerun_counted() -> None:
    start = {"kvlab:prompt_tokens_total": 0.0, "kvlab:generation_tokens_total": 0.0}
    end = {"kvlab:prompt_tokens_total": 250.0, "kvlab:generation_tokens_total": 64.0}
    records = [row(position=0, load="c=2", cached_tokens=0),  # the first attempt
               row(position=4, load="c=2", cached_tokens=0)]  # the rerun
    gauges = [_reading("start", 0, 0, **start),  # no end: interrupted
              _reading("start", 4, 0, **start), _reading("end", 5, 1, **end)]
    (point,) = point_counters(records, gauges)
    assert point.positions == (4, 5) and point.rows == 1 and point.prompt.status == "equal"


def test_unknown_servers_and_prefix_hits_without_reuse() -> None:
    assert names_of({"foo:prompt_tokens_total": 1.0}) is None
    assert names_of({"vllm:prompt_tokens_total": 1.0}) == VLLM
    assert point_counters([row()], [_reading("start", 0, 0, **{"foo:x_total": 1.0}),
                                    _reading("end", 1, 1, **{"foo:x_total": 2.0})]) == []
    end = _moved(VLLM_START, prompt_tokens_total=250, generation_tokens_total=64,
                 prefix_cache_hits_total=128)
    (point,) = point_counters([row(position=0, load="c=2", body={"cache_prompt": False})],
                              [_reading("start", 0, 0, **VLLM_START),
                               _reading("end", 1, 1, **end)])
    assert point.deltas["prefix_cache_hits"] == 128 and point.prefix_hits_unasked


def test_the_names_a_kind_recorded_read_its_counters() -> None:
    """A kind's recorded names win over recognition: readings under a prefix kvlab knows
    no kind by are counted when the run recorded the kind's names for the cell."""
    names = replace(VLLM, server="sglang", prefix="sglang:")
    start = {"sglang:" + k: v for k, v in (("prompt_tokens_total", 100.0),
                                           ("generation_tokens_total", 10.0))}
    end = {"sglang:prompt_tokens_total": 110.0, "sglang:generation_tokens_total": 14.0}
    rows = [row(position=0, prompt_tokens=10, output_tokens=4)]
    gauges = [_reading("start", 0, 0, **start), _reading("end", 1, 1, **end)]
    assert point_counters(rows, gauges) == []  # unknown, and nothing recorded
    (point,) = point_counters(rows, gauges, {(rows[0].mode, rows[0].capacity): names})
    assert (point.server, point.deltas["prompt_tokens"], point.prompt.status) == (
        "sglang", 10.0, "equal")
