"""The random-sessions kind: sessions of drawn lengths, sized exactly, reproducible."""

from __future__ import annotations

import asyncio

from kvlab.bench.plan.lengths import Lengths
from kvlab.bench.plan.sessions.synthetic import RandomSessions
from tests.bench.plan.kinds import byte_tokens, common_prefix


def table(**extra) -> RandomSessions:
    return RandomSessions(sessions=3, seed=5, turns=Lengths(distribution="uniform", min=2,
                                                            max=4),
                          first_input=Lengths(value=40), input=Lengths(
                              distribution="uniform", min=8, max=12),
                          output=Lengths(value=6), think_ms=Lengths(
                              distribution="uniform", min=10, max=30), **extra)


def test_sessions_have_drawn_turns_lengths_and_think_times() -> None:
    rows = table().build(None)  # type: ignore[arg-type]
    _, prompts = asyncio.run(rows.prepare(byte_tokens, 1024, 0.5, 16))
    turns = [p.session for p in prompts]
    assert all(t is not None for t in turns)
    sessions = sorted({t.session for t in turns if t is not None})
    assert sessions == ["s00", "s01", "s02"]
    for p in prompts:
        assert p.session is not None
        assert p.tokens == p.target_tokens  # sized exactly
        assert p.tokens == 40 if p.session.index == 1 else 8 <= p.tokens <= 12
        assert p.output_tokens == 6
        assert p.session.think_ms == 0 if p.session.index == 1 else \
            10 <= p.session.think_ms <= 30
    assert all(2 <= sum(1 for t in turns if t and t.session == s) <= 4 for s in sessions)
    # no two turns open alike: each text starts with its session's and turn's tag
    assert common_prefix([p.prompt for p in prompts]) == ""
    again = asyncio.run(table().build(None).prepare(  # type: ignore[arg-type]
        byte_tokens, 1024, 0.5, 16))[1]
    assert [p.prompt for p in again] == [p.prompt for p in prompts]


def test_a_sized_turn_counts_the_same_inside_the_chat_template(gemma_tokenizer) -> None:
    """Gemma's tokenizer merges a trailing space or punctuation mark with ChatML's
    ``<|im_end|>`` (``,<``): every sized turn ends on a letter, digit or newline, so the
    conversation grows by exactly its count."""

    async def count(text: str) -> int:
        return len(gemma_tokenizer.encode(text, add_bos=False))

    rows = RandomSessions(sessions=6, seed=3, turns=Lengths(value=4),
                          input=Lengths(distribution="uniform", min=6, max=60),
                          output=Lengths(value=4)).build(None)  # type: ignore[arg-type]
    _, prompts = asyncio.run(rows.prepare(count, 4096, 0.5, 4))
    end = asyncio.run(count("<|im_end|>\n"))
    for p in prompts:
        assert p.tokens == p.target_tokens
        inside = asyncio.run(count(f"user\n{p.prompt}<|im_end|>\n"))
        assert inside == asyncio.run(count("user\n")) + p.tokens + end, p.prompt[-12:]
