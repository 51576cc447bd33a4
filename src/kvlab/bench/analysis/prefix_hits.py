"""What a prefix cache should find: prompts' block ids replayed through an LRU of blocks.

A trace names each prompt's blocks (Mooncake's and WEKA's ``hash_ids``): block ``j``'s
id stands for the prompt's tokens up to the end of block ``j``, so two prompts whose
ids agree up to ``j`` share that prefix. A prefix cache of whole blocks finds, for a new
prompt, its longest run of leading blocks it still holds; then it holds every block of
that prompt. Past its capacity it evicts the least recently used block; a prompt's
blocks are touched last to first, so its leading blocks, which more prompts share, go
last (vLLM frees a sequence's blocks tail first for the same reason).

:class:`BlockLru` replays prompts in the order a server saw them and says how many
leading blocks each would find; :func:`predicted_hits` does it for a whole sequence.
The figures are blocks: times the trace's block size, tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence


class BlockLru:
    """A prefix cache of whole blocks, least recently used evicted first;
    ``capacity_blocks`` None: it never evicts."""

    def __init__(self, capacity_blocks: int | None = None) -> None:
        if capacity_blocks is not None and capacity_blocks < 0:
            raise ValueError(f"a cache of {capacity_blocks} blocks")
        self.capacity = capacity_blocks
        self._held: OrderedDict[Hashable, None] = OrderedDict()
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._held)

    def hits(self, blocks: Sequence[Hashable]) -> int:
        """The leading blocks of ``blocks`` it holds now (nothing changes)."""
        found = 0
        for block in blocks:
            if block not in self._held:
                break
            found += 1
        return found

    def visit(self, blocks: Sequence[Hashable]) -> int:
        """A prompt of ``blocks`` arrives: the leading blocks found, then every block of
        it held (most recently used), the oldest evicted past the capacity."""
        found = self.hits(blocks)
        for block in reversed(blocks):
            self._held[block] = None
            self._held.move_to_end(block)
        while self.capacity is not None and len(self._held) > self.capacity:
            self._held.popitem(last=False)
            self.evictions += 1
        return found


def predicted_hits(prompts: Iterable[Sequence[Hashable]],
                   capacity_blocks: int | None = None) -> list[int]:
    """For each prompt (its block ids, in the order a server saw them), the leading blocks
    a prefix cache of ``capacity_blocks`` blocks (None: unbounded) would find."""
    cache = BlockLru(capacity_blocks)
    return [cache.visit(blocks) for blocks in prompts]
