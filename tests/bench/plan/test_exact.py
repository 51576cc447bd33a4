"""Texts sized to an exact token count, by whatever counter the run uses."""

from __future__ import annotations

import asyncio
import re

import pytest

from kvlab.bench.plan.exact import fit_tokens, row_tag
from kvlab.errors import ConfigError


async def byte_tokens(text: str) -> int:
    return len(text.encode())


async def word_tokens(text: str) -> int:
    """The synthetic server's count: words and punctuation marks."""
    return len(re.findall(r"\w+|[^\w\s]", text))


async def pair_tokens(text: str) -> int:
    """A counter that skips odd counts beyond the head: no cut lands on them."""
    return 2 * ((len(text) + 1) // 2)


@pytest.mark.parametrize("counter", [byte_tokens, word_tokens])
@pytest.mark.parametrize("target", [7, 64, 301, 4000])
def test_a_head_and_filler_reach_the_target_exactly(counter, target: int) -> None:
    sized = asyncio.run(fit_tokens(counter, "x7. ", target, "row x7"))
    assert sized.text.startswith("x7. ")
    assert sized.tokens == target == asyncio.run(counter(sized.text))


def test_a_filler_shorter_than_the_target_is_repeated() -> None:
    sized = asyncio.run(fit_tokens(byte_tokens, "", 50, "row", filler="abc def"))
    assert sized.tokens == 50 and sized.text.startswith("abc def abc")


def test_a_head_over_the_target_or_an_unreachable_count_names_the_row() -> None:
    with pytest.raises(ConfigError, match=r"^row q: its own text counts 9 tokens, over the 4"):
        asyncio.run(fit_tokens(byte_tokens, "123456789", 4, "row q"))
    with pytest.raises(ConfigError, match=r"^row q: this tokenizer cannot make a prompt of "
                                          "exactly 7 tokens"):
        asyncio.run(fit_tokens(pair_tokens, "ab", 7, "row q"))


def test_row_tags_differ_from_their_first_character() -> None:
    tags = [row_tag(i) for i in range(62)]
    assert len({t[0] for t in tags}) == 62
    assert row_tag(62) == "01" and row_tag(63) == "11"
    with pytest.raises(ValueError):
        row_tag(-1)
