"""The trace kind: Mooncake-style requests, exact lengths, shared blocks, and times."""

from __future__ import annotations

import json

import pytest

from kvlab.errors import ConfigError, ExperimentError
from tests.bench.plan.kinds import common_prefix, experiment_with, prepare, word_tokens

TRACE = [
    {"timestamp": 1000, "input_length": 40, "output_length": 5, "hash_ids": [7, 8, 9]},
    {"timestamp": 1250, "input_length": 45, "output_length": 6, "hash_ids": [7, 8, 11]},
    {"timestamp": 1250, "input_length": 30, "output_length": 4},
    {"timestamp": 2000, "input_length": 40, "output_length": 5, "hash_ids": [7, 8, 9]},
]


def write(tmp_path, rows=TRACE) -> None:
    (tmp_path / "t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def trace_experiment(tmp_path, extra: str = ""):
    return experiment_with(tmp_path, f'kind = "trace"\npath = "t.jsonl"\nblock_tokens = 16\n'
                           f"{extra}", load='[load]\nkind = "trace"\nvalues = [1.0, 2.0]')


@pytest.mark.parametrize("counter_name", ["byte_tokens", "word_tokens"])
def test_prompts_have_the_asked_lengths_and_share_blocks_by_hash_id(tmp_path,
                                                                    counter_name) -> None:
    from tests.bench.plan import kinds

    write(tmp_path)
    a, b, c, d = prepare(trace_experiment(tmp_path), counter=getattr(kinds, counter_name))
    assert [p.tokens for p in (a, b, c, d)] == [40, 45, 30, 40]
    assert [p.output_tokens for p in (a, b, c, d)] == [5, 6, 4, 5]
    assert [p.arrival_ms for p in (a, b, c, d)] == [1000, 1250, 1250, 2000]
    assert a.prompt == d.prompt  # the same blocks and length: the same request
    shared = common_prefix([a.prompt, b.prompt])
    assert shared.count("\n") == 2  # blocks 7 and 8, then they part
    assert common_prefix([a.prompt, c.prompt]) == ""  # no hash ids: its own
    assert a.source.endswith("t.jsonl:1") and a.query_id == "line1"


def test_the_load_replays_the_times_at_each_speed(tmp_path) -> None:
    write(tmp_path)
    experiment = trace_experiment(tmp_path)
    prompts = prepare(experiment)
    first, second = experiment.load.points(4)
    assert (first.label, second.label) == ("trace=1.0", "trace=2.0")
    assert first.with_prompts(prompts).arrivals_ns(None) == [0, 250e6, 250e6, 1000e6]
    assert second.with_prompts(prompts).arrivals_ns(None) == [0, 125e6, 125e6, 500e6]


@pytest.mark.parametrize(("row", "message"), [
    ({"timestamp": 900, "input_length": 4, "output_length": 2},
     ":3: out of time order: timestamp 900 ms is before 1250 ms on line 2"),
    ({"timestamp": 1300, "input_length": -4, "output_length": 2},
     ":3: input_length is negative (-4)"),
    ({"timestamp": 1300, "output_length": 2}, ":3: no input_length"),
    ({"timestamp": 1300, "input_length": 4, "output_length": 2, "hash_ids": [-1]},
     ":3: hash_ids must be a list of whole numbers, none negative"),
])
def test_a_bad_line_is_one_line_naming_it(tmp_path, row, message) -> None:
    write(tmp_path, [*TRACE[:2], row])
    with pytest.raises(ConfigError) as info:
        trace_experiment(tmp_path).workload.source()
    assert str(info.value).startswith(f"{tmp_path / 't.jsonl'}{message}")


def test_a_request_beyond_the_capacity_is_named_at_its_line(tmp_path) -> None:
    write(tmp_path, [*TRACE[:1], {"timestamp": 1300, "input_length": 500,
                                   "output_length": 20}])
    with pytest.raises(ConfigError) as info:
        prepare(trace_experiment(tmp_path), capacity=512, counter=word_tokens)
    assert str(info.value) == (f"{tmp_path / 't.jsonl'}:2: 500 prompt tokens + 20 output "
                               "tokens exceed the capacity 512")


def test_a_trace_load_needs_a_trace(tmp_path) -> None:
    with pytest.raises(ExperimentError, match="a trace load replays a trace's times"):
        experiment_with(tmp_path, 'kind = "builtin"', load='[load]\nkind = "trace"\n'
                        "values = [1.0]")
