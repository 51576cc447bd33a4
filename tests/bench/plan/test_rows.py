"""Dataset files read row by row: each row knows its line, and a bad one is one line."""

from __future__ import annotations

import json

import pytest

from kvlab.bench.plan.rows import read_csv, read_json_array, read_jsonl
from kvlab.errors import ConfigError


def test_jsonl_rows_keep_their_line_and_skip_blank_lines(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": "a"}\n\n{"prompt": "b"}\n')
    rows = read_jsonl(path)
    assert [(r.line, r.data["prompt"]) for r in rows] == [(1, "a"), (3, "b")]
    assert rows[1].where == f"{path}:3"


def test_csv_rows_start_on_their_own_line_even_after_a_multiline_field(tmp_path) -> None:
    path = tmp_path / "p.csv"
    path.write_text('id,prompt\nx,"two\nlines"\ny,plain\n')
    rows = read_csv(path)
    assert [(r.line, r.data["id"]) for r in rows] == [(2, "x"), (4, "y")]
    assert rows[0].data["prompt"] == "two\nlines"


def test_a_json_array_gives_each_element_the_line_it_starts_on(tmp_path) -> None:
    path = tmp_path / "s.json"
    items = [{"id": "a"}, {"id": "b"}, {"id": "c"}]
    path.write_text(json.dumps(items, indent=1))
    rows = read_json_array(path)
    text = path.read_text().splitlines()
    for row in rows:  # the line holds the element's opening brace, its id two lines on
        assert text[row.line - 1].strip() == "{"
        assert row.data["id"] in text[row.line]
    assert [r.data["id"] for r in rows] == ["a", "b", "c"]


@pytest.mark.parametrize(("name", "text", "reader", "message"), [
    ("p.jsonl", '{"prompt": "a"}\nnot json\n', read_jsonl, ":2: not JSON"),
    ("p.jsonl", '{"prompt": "a"}\n[1, 2]\n', read_jsonl, ":2: expected a JSON object"),
    ("p.jsonl", "\n\n", read_jsonl, ": no rows in the dataset file"),
    ("p.csv", "a,b\n1,2\n1,2,3\n", read_csv, ":3: 3 fields, the header has 2"),
    ("s.json", '[\n{"id": 1},\n{"id": 2}\n', read_json_array, ":3: the JSON array is not "
     "closed"),
    ("s.json", '[\n{"id": 1}\n{"id": 2}]', read_json_array, ":3: expected ',' or ']'"),
])
def test_a_bad_file_is_one_line_naming_the_file_and_the_line(tmp_path, name, text, reader,
                                                              message) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        reader(path)
    assert str(info.value).startswith(f"{path}{message}")
    assert "\n" not in str(info.value)


def test_lengths_and_prompts_of_a_row_are_checked(tmp_path) -> None:
    path = tmp_path / "p.jsonl"
    path.write_text('{"prompt": " ", "n": -3, "m": 2.5, "k": "12"}\n')
    (row,) = read_jsonl(path)
    with pytest.raises(ConfigError, match=rf"^{path}:1: no prompt: column 'prompt'"):
        row.text("prompt")
    with pytest.raises(ConfigError, match=rf"^{path}:1: the output length is negative \(-3\)"):
        row.length("n", "the output length")
    with pytest.raises(ConfigError, match="not a whole number"):
        row.length("m", "n")
    assert row.length("k", "n") == 12 and row.length("absent", "n") is None
