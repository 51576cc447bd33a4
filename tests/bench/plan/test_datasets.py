"""Dataset kinds: the experiment's [workload.dataset] builds the queries and prompts."""

from __future__ import annotations

import asyncio
import json

import pytest

from kvlab.bench.plan.builtin import BuiltinDataset, PaddedQueries
from kvlab.bench.plan.datasets import DATASET_KINDS
from kvlab.bench.plan.workload import builtin_queries, prepare_capacity
from kvlab.errors import ExperimentError
from kvlab.experiment import load_experiment, parse_experiment
from tests.experiments import embedded, experiment


async def byte_tokens(text: str) -> int:
    return len(text.encode())


def test_builtin_is_the_default_kind_and_reads_the_workload() -> None:
    assert DATASET_KINDS["builtin"] is BuiltinDataset
    assert list(DATASET_KINDS) == ["builtin", "repeated", "jsonl", "csv", "sharegpt",
                                   "random", "trace", "sessions", "sharegpt-sessions",
                                   "random-sessions", "weka"]
    experiment = parse_experiment('name = "x"\n[workload]\nqueries = 4\n[[modes]]\nname = "a"\n')
    assert isinstance(experiment.workload.dataset, BuiltinDataset)
    dataset = experiment.workload.source()
    assert [q.id for q in dataset.queries()] == ["q01", "q02", "q03", "q04"]
    explicit = parse_experiment('name = "x"\n[workload]\nqueries = 4\n[workload.dataset]\n'
                                'kind = "builtin"\n[[modes]]\nname = "a"\n')
    assert explicit.workload.source().queries() == dataset.queries()


def test_builtin_prompts_are_todays_padding_plus_query() -> None:
    queries = builtin_queries(3)
    got = asyncio.run(PaddedQueries(queries).prepare(byte_tokens, 1024, 0.5, 16))
    assert got == asyncio.run(prepare_capacity(byte_tokens, queries, 1024, 0.5, 16))


def test_a_queries_file_is_the_builtin_kinds_too(tmp_path) -> None:
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps({"id": f"x{i}", "text": f"t {i}"})
                                                for i in range(2)))
    path = experiment("x", embedded("a"), workload=dict(queries_file="q.jsonl")).write(tmp_path)
    loaded = load_experiment(path)
    assert [q.id for q in loaded.workload.source().queries()] == ["x0", "x1"]


@pytest.mark.parametrize(("table", "message"), [
    ('kind = "sharegpt-typo"', "workload.dataset: kind 'sharegpt-typo' is not one of "
     "builtin, repeated, jsonl, csv, sharegpt, random, trace, sessions, sharegpt-sessions, "
     "random-sessions, weka"),
    ("shuffle = true", "workload.dataset.shuffle: unknown key"),
])
def test_a_bad_dataset_table_is_one_line(table, message) -> None:
    with pytest.raises(ExperimentError) as info:
        parse_experiment(f'name = "x"\n[workload.dataset]\n{table}\n[[modes]]\nname = "a"\n',
                         "x.toml")
    assert str(info.value) == f"x.toml: {message}"
