"""The jsonl and csv kinds: prompts sent as written, a column mapping, per-row outputs."""

from __future__ import annotations

import json

import pytest

from kvlab.errors import ConfigError
from tests.bench.plan.kinds import experiment_with, prepare


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_jsonl_prompts_keep_their_text_ids_and_output_lengths(tmp_path) -> None:
    write_jsonl(tmp_path / "p.jsonl", [{"q": "What is a KV cache?", "key": "a", "n": 12},
                                       {"q": "Why prefill first?", "key": "b"}])
    experiment = experiment_with(tmp_path, 'kind = "jsonl"\npath = "p.jsonl"\n'
                                 '[workload.dataset.columns]\nprompt = "q"\nid = "key"\n'
                                 'output_tokens = "n"')
    assert experiment.workload.dataset.data_file() == str(tmp_path / "p.jsonl")
    assert [q.id for q in experiment.workload.source().queries()] == ["a", "b"]
    a, b = prepare(experiment)
    assert (a.prompt, a.tokens, a.output_tokens) == ("What is a KV cache?", 19, 12)
    assert (b.prompt, b.output_tokens) == ("Why prefill first?", 64)  # the workload's
    assert a.source == f"{tmp_path / 'p.jsonl'}:1" and b.source.endswith(":2")


def test_jsonl_defaults_name_rows_by_line_and_read_the_first_n(tmp_path) -> None:
    write_jsonl(tmp_path / "p.jsonl", [{"prompt": f"question {i}"} for i in range(5)])
    experiment = experiment_with(tmp_path, 'kind = "jsonl"\npath = "p.jsonl"\nrows = 3')
    assert [q.id for q in experiment.workload.source().queries()] == ["line1", "line2",
                                                                      "line3"]


def test_csv_prompts_with_a_column_mapping(tmp_path) -> None:
    (tmp_path / "p.tsv").write_text("qid\tquestion\tanswer_tokens\nx1\tHow big is KV?\t5\n")
    experiment = experiment_with(tmp_path, 'kind = "csv"\npath = "p.tsv"\ndelimiter = "\\t"\n'
                                 '[workload.dataset.columns]\nprompt = "question"\n'
                                 'id = "qid"\noutput_tokens = "answer_tokens"')
    (row,) = prepare(experiment)
    assert (row.query_id, row.prompt, row.output_tokens) == ("x1", "How big is KV?", 5)


@pytest.mark.parametrize(("rows", "columns", "message"), [
    ([{"prompt": "a"}, {"text": "b"}], "", ":2: no prompt: column 'prompt' is missing"),
    ([{"prompt": "a", "n": -4}], 'output_tokens = "n"', ":1: the output length is "
     "negative (-4)"),
    ([{"prompt": "a", "n": 0}], 'output_tokens = "n"', ":1: the output length is 0"),
    ([{"prompt": "a", "id": "x"}, {"prompt": "b", "id": "x"}], 'id = "id"',
     ":2: id 'x' is also the id of line 1"),
])
def test_a_bad_row_is_one_line_naming_the_file_and_the_line(tmp_path, rows, columns,
                                                              message) -> None:
    write_jsonl(tmp_path / "p.jsonl", rows)
    experiment = experiment_with(tmp_path, 'kind = "jsonl"\npath = "p.jsonl"\n'
                                 f'[workload.dataset.columns]\n{columns}')
    with pytest.raises(ConfigError) as info:
        experiment.workload.source()
    assert str(info.value).startswith(f"{tmp_path / 'p.jsonl'}{message}")


def test_a_row_beyond_the_capacity_is_named_at_its_line(tmp_path) -> None:
    write_jsonl(tmp_path / "p.jsonl", [{"prompt": "short"}, {"prompt": "x" * 300, "n": 8}])
    experiment = experiment_with(tmp_path, 'kind = "jsonl"\npath = "p.jsonl"\n'
                                 '[workload.dataset.columns]\noutput_tokens = "n"')
    with pytest.raises(ConfigError) as info:
        prepare(experiment, capacity=256)
    assert str(info.value) == (f"{tmp_path / 'p.jsonl'}:2: row line2: 300 prompt tokens + 8 "
                               "output tokens exceed the capacity 256; drop the row or raise "
                               "the capacity")


def test_a_missing_file_is_one_line(tmp_path) -> None:
    experiment = experiment_with(tmp_path, 'kind = "jsonl"\npath = "nowhere.jsonl"')
    with pytest.raises(ConfigError, match=r"nowhere.jsonl: cannot read the dataset file"):
        experiment.workload.source()
