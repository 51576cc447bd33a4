"""The random kind: drawn lengths, prompts sized to them exactly, unique or shared
prefixes."""

from __future__ import annotations

import pytest

from kvlab.bench.plan.lengths import Lengths
from kvlab.errors import ConfigError, ExperimentError
from tests.bench.plan.kinds import common_prefix, experiment_with, prepare, word_tokens


@pytest.mark.parametrize("table", [
    {"distribution": "fixed", "value": 40},
    {"distribution": "uniform", "min": 10, "max": 20},
    {"distribution": "normal", "mean": 100, "std": 30, "min": 50},
    {"distribution": "lognormal", "mean": 100, "std": 80, "max": 400},
])
def test_lengths_are_seeded_and_within_their_bounds(table) -> None:
    import random

    lengths = Lengths(**table)
    drawn = lengths.draw(random.Random(3), 2000)
    assert drawn == lengths.draw(random.Random(3), 2000)
    assert min(drawn) >= (table.get("min") or table.get("value") or 1)
    assert max(drawn) <= (table.get("max") or table.get("value") or 10**9)
    if table["distribution"] in ("normal", "lognormal"):  # the mean, within 10 %
        assert abs(sum(drawn) / len(drawn) - 100) < 10


@pytest.mark.parametrize(("table", "message"), [
    ('{ distribution = "uniform", min = 5 }', "a uniform distribution needs max"),
    ('{ distribution = "fixed", value = -3 }', "workload.dataset.input.value: Input should "
     "be greater than or equal to 1"),
    ('{ distribution = "normal", mean = 10, std = 2, value = 3 }', "value: not a parameter"),
])
def test_a_bad_distribution_is_one_line(tmp_path, table, message) -> None:
    with pytest.raises(ExperimentError, match=message):
        experiment_with(tmp_path, f'kind = "random"\ninput = {table}')


@pytest.mark.parametrize("counter_name", ["byte_tokens", "word_tokens"])
def test_unique_prompts_have_their_drawn_length_and_start_differently(tmp_path,
                                                                      counter_name) -> None:
    from tests.bench.plan import kinds

    experiment = experiment_with(tmp_path, 'kind = "random"\nrows = 12\nseed = 5\n'
                                 'input = { distribution = "uniform", min = 20, max = 200 }\n'
                                 'output = { distribution = "uniform", min = 2, max = 9 }')
    counter = getattr(kinds, counter_name)
    prompts = prepare(experiment, counter=counter)
    assert [p.query_id for p in prompts] == [f"r{i:04d}" for i in range(12)]
    assert all(p.tokens == p.target_tokens for p in prompts)
    assert len({p.target_tokens for p in prompts}) > 6  # drawn, not all alike
    assert all(2 <= (p.output_tokens or 0) <= 9 for p in prompts)
    assert len({p.prompt[0] for p in prompts}) == 12  # no shared first character
    again = prepare(experiment_with(tmp_path, experiment_table(tmp_path)), counter=counter)
    assert [p.prompt for p in again] == [p.prompt for p in prompts]  # seeded


def experiment_table(tmp_path) -> str:
    text = (tmp_path / "e.toml").read_text()
    return text.split("[workload.dataset]\n", 1)[1].split("\n[[modes]]", 1)[0]


def test_shared_prefixes_group_rows(tmp_path) -> None:
    experiment = experiment_with(tmp_path, 'kind = "random"\nrows = 7\nprefix = "shared"\n'
                                 "prefix_tokens = 60\ngroup_size = 3\n"
                                 'input = { distribution = "fixed", value = 25 }')
    prompts = prepare(experiment, counter=word_tokens)
    assert [p.prefix_group for p in prompts] == ["g0"] * 3 + ["g1"] * 3 + ["g2"]
    assert all(p.tokens == p.target_tokens == 85 for p in prompts)
    for group in ("g0", "g1", "g2"):
        rows = [p.prompt for p in prompts if p.prefix_group == group]
        shared = common_prefix(rows)
        assert shared.endswith("\n\n") or len(rows) == 1
    g0, g1 = prompts[0].prompt, prompts[3].prompt
    assert g0[0] != g1[0]  # groups start differently


def test_a_row_beyond_the_capacity_is_named(tmp_path) -> None:
    experiment = experiment_with(tmp_path, 'kind = "random"\nrows = 3\n'
                                 'input = { distribution = "fixed", value = 500 }')
    with pytest.raises(ConfigError, match=r"^random row r0000: 500 prompt tokens \+ 64 "
                                          "output tokens exceed the capacity 512"):
        prepare(experiment)


def test_shared_settings_go_together(tmp_path) -> None:
    with pytest.raises(ExperimentError, match='prefix = "shared" needs prefix_tokens'):
        experiment_with(tmp_path, 'kind = "random"\nprefix = "shared"\n'
                        'input = { value = 5 }')
