"""The ``repeated`` dataset kind: one text n times per capacity (the seed notebook's)."""

from __future__ import annotations

import asyncio

import pytest

from kvlab.bench.plan.repeated import RepeatedDataset
from kvlab.errors import ConfigError, ExperimentError
from kvlab.experiment import parse_experiment
from kvlab.report.prompts import prompt_rule

EXPERIMENT = '''
name = "x"
[workload]
queries = 1
capacities = [128, 512]
output_tokens = 8
[workload.dataset]
kind = "repeated"
text = "ab "
times = { 128 = 4, 512 = 16 }
[[modes]]
name = "a"
'''


async def words(text: str) -> int:
    """A counter: one token per word."""
    return len(text.split())


def test_each_capacity_gets_the_text_its_number_of_times() -> None:
    experiment = parse_experiment(EXPERIMENT)
    assert isinstance(experiment.workload.dataset, RepeatedDataset)
    dataset = experiment.workload.source()
    assert [q.id for q in dataset.queries()] == ["repeated"]
    for capacity, times in ((128, 4), (512, 16)):
        padding, (prompt,) = asyncio.run(dataset.prepare(words, capacity, 0.5, 8))
        assert padding == 0
        assert prompt.prompt == "ab " * times and prompt.tokens == times
    rule = prompt_rule(0.5, experiment.workload.dataset)
    assert rule.startswith("Prompt = one text repeated (× 4 at 128, × 16 at 512)")


def test_a_capacity_without_times_or_a_prompt_too_long_is_one_line() -> None:
    dataset = RepeatedDataset(text="ab ", times={128: 200}).build(
        parse_experiment(EXPERIMENT).workload)
    with pytest.raises(ConfigError, match="has no entry for capacity 256"):
        asyncio.run(dataset.prepare(words, 256, 0.5, 8))
    with pytest.raises(ConfigError, match="is 200 tokens, which with 8 output tokens does "
                                          "not fit capacity 128"):
        asyncio.run(dataset.prepare(words, 128, 0.5, 8))


def test_times_must_be_positive() -> None:
    with pytest.raises(ExperimentError, match="times"):
        parse_experiment(EXPERIMENT.replace("128 = 4", "128 = 0"))
