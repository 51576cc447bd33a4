"""Queries, padding and prompt sizing (with a byte-count tokenizer standing in)."""

from __future__ import annotations

import asyncio

import pytest

from kvlab.bench.plan.workload import (
    builtin_queries,
    load_queries,
    padding_text,
    prepare_capacity,
    sha256,
    size_padding,
)
from kvlab.errors import ConfigError


async def byte_tokens(text: str) -> int:
    return len(text.encode())


def test_thirty_builtin_queries_with_ids() -> None:
    queries = builtin_queries()
    assert [q.id for q in queries][:2] == ["q01", "q02"] and queries[-1].id == "q30"
    assert len({q.text for q in queries}) == 30
    assert len(builtin_queries(5)) == 5


def test_padding_is_long_enough_for_8k_byte_tokens() -> None:
    assert len(padding_text().encode()) > 8192 * 4


def test_prepare_sizes_prompts_near_the_target() -> None:
    queries = builtin_queries(4)
    padding_tokens, prompts = asyncio.run(prepare_capacity(byte_tokens, queries, 1024, 0.5, 64))
    assert 400 < padding_tokens <= 512
    assert len({p.prompt.split("\n\n" + p.query)[0] for p in prompts}) == 1  # same padding
    for p in prompts:
        assert p.sha256 == sha256(p.prompt)
        assert p.tokens == len(p.prompt.encode()) and p.tokens + 64 <= 1024


def test_prompts_that_do_not_fit_are_refused() -> None:
    with pytest.raises(ConfigError, match="does not fit"):
        asyncio.run(prepare_capacity(byte_tokens, builtin_queries(2), 200, 0.95, 64))


def test_custom_queries_file(tmp_path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"id": "a", "text": "Why?"}\n\n{"id": "b", "text": "How?"}\n')
    assert [q.id for q in load_queries(path)] == ["a", "b"]
    path.write_text('{"id": "a"}\n')
    with pytest.raises(ConfigError, match=":1: expected"):
        load_queries(path)


@pytest.mark.parametrize("target", [2, 37, 500, 2000, 9000])
@pytest.mark.parametrize("count", ["bytes", "words"])
def test_size_padding_finds_the_longest_prefix_within_the_target(target: int,
                                                                 count: str) -> None:
    """The estimate-then-bisect search stops at the last cut point within the target:
    the next word would pass it (counts grow with the prefix)."""
    calls: list[str] = []

    def measure(text: str) -> int:
        return len(text.encode()) if count == "bytes" else len(text.split())

    async def tokens(text: str) -> int:
        calls.append(text)
        return measure(text)

    text, n = asyncio.run(size_padding(tokens, target))
    full = padding_text()
    assert full.startswith(text) and full[len(text)] == " "
    assert n == measure(text) <= target
    assert measure(full[: full.index(" ", len(text) + 1)]) > target
    assert len(calls) <= 20  # a scan would take thousands of counts
