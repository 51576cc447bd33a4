"""The prefix-cache hits an LRU block cache of a given capacity should count, block by
block.

A server with prefix caching (kvlab serve's :mod:`kvlab.engine.prefix`, vLLM's
``v1/core/block_pool.py``) keeps the K/V of every *full* block of ``block`` tokens it
computed, named by the block's tokens and every token before them (a chain: two
prompts share block ``i`` only if they agree up to its end). A new request is given the
blocks of its longest cached prefix, at most ``(P - 1) // block`` of them (one prompt
token is always computed). What is cached is bounded by the pool:

- the pool has ``capacity`` blocks; a running request holds every block of its sequence
  (``ceil(L / block)`` at its longest, L = prompt + output - 1 tokens: its prompt's at
  arrival, the rest as it decodes), shared blocks once;
- a block no request holds keeps its name and K/V until its place is needed: free
  blocks are taken first, then the least recently used cached block is evicted;
- a finished request gives its blocks back last first, so a prefix's first blocks are
  the last of them to be evicted; its last, partial block has no name and is freed.

:func:`predict_hits` replays that cache over requests described only by their block
names (:class:`BlockRequest`) and their times (arrival, prompt computed, end: a block is
found once the prompt that fills it has been computed), and returns the blocks each
request should find. It knows nothing of where the names come from: a trace's
``hash_ids`` (:mod:`kvlab.analysis.trace_hits`) or the turns of a conversation.
:class:`BlockLru` and :func:`predicted_hits` are the same cache visited one prompt at a
time, by block ids alone. A capacity of None is a cache that never evicts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BlockRequest:
    """One request as the cache sees it.

    ``names``: the names of the full blocks of its sequence at its longest, in order
    (its prompt's first, then those its output fills); ``prompt_named``: how many of
    them its prompt fills (``P // block``); ``prompt_blocks``: the blocks its prompt
    occupies (``ceil(P / block)``); ``blocks``: the blocks it holds at its longest
    (``ceil(L / block)``); ``lookup``: the most leading blocks it may be given
    (``(P - 1) // block``). Times on one clock (ns): ``arrive`` (its lookup),
    ``computed`` (its prompt's blocks can be found from then on), ``end``."""

    names: tuple[Hashable, ...]
    prompt_named: int
    prompt_blocks: int
    blocks: int
    lookup: int
    arrive: int
    computed: int
    end: int


def block_request(names: Sequence[Hashable], prompt_tokens: int, output_tokens: int,
                  block: int, arrive: int, computed: int, end: int) -> BlockRequest:
    """A :class:`BlockRequest` of a sequence of ``prompt_tokens`` + ``output_tokens`` - 1
    tokens in blocks of ``block`` tokens; ``names``: its full blocks' names (extra names
    are cut)."""
    length = prompt_tokens + max(output_tokens, 1) - 1
    return BlockRequest(tuple(names[:length // block]), prompt_tokens // block,
                        -(-prompt_tokens // block), -(-length // block),
                        (prompt_tokens - 1) // block, arrive, computed, end)


class LruBlockCache:
    """A pool of ``capacity`` blocks (None: unbounded) with named, reference-counted
    blocks and an LRU of the cached blocks nobody holds. Requests are known by a key
    (any hashable) from :meth:`arrive` to :meth:`end`."""

    def __init__(self, capacity: int | None) -> None:
        self.capacity = capacity
        self.free = capacity  # never-used or nameless blocks (None: unbounded)
        self.refs: dict[Hashable, int] = {}  # named blocks held, by holders
        self.parked: OrderedDict[Hashable, None] = OrderedDict()  # LRU first
        self.findable: set[Hashable] = set()  # named blocks a lookup can find
        self.held: dict[Hashable, list[Hashable]] = {}  # request -> names it holds
        self.copies: dict[Hashable, int] = {}  # request -> blocks computed twice
        self.overdrawn = 0  # blocks taken with none free or cached (a pool too small)
        self.evicted = 0

    def _take(self) -> None:
        """One block for a request: a free one, else the least recently used cached."""
        if self.free is None:
            return
        if self.free > 0:
            self.free -= 1
        elif self.parked:
            self._evict()
        else:  # more blocks held than the pool has: given back at the request's end
            self.overdrawn += 1

    def _evict(self) -> None:
        name, _ = self.parked.popitem(last=False)
        self.findable.discard(name)
        self.evicted += 1

    def _hold(self, key: Hashable, name: Hashable) -> None:
        self.parked.pop(name, None)
        self.refs[name] = self.refs.get(name, 0) + 1
        self.held.setdefault(key, []).append(name)

    def _name(self, key: Hashable, names: Sequence[Hashable]) -> None:
        """Blocks the request computed get their names; a name another request already
        gave its block stays with that block (this one is a copy, freed at the end)."""
        for name in names:
            if name in self.findable:
                self.copies[key] = self.copies.get(key, 0) + 1
            else:
                self.findable.add(name)
                self._hold(key, name)

    def arrive(self, key: Hashable, request: BlockRequest, reuse: bool = True) -> int:
        """Its lookup (none without ``reuse``): the leading blocks found (held from now
        on); its prompt's other blocks are taken."""
        hits = 0
        for name in request.names[:request.lookup if reuse else 0]:
            if name not in self.findable:
                break
            hits += 1
        self.held[key] = []
        for name in request.names[:hits]:
            self._hold(key, name)
        for _ in range(request.prompt_blocks - hits):
            self._take()
        return hits

    def computed(self, key: Hashable, request: BlockRequest, hits: int) -> None:
        """Its prompt's full blocks are named: later lookups find them."""
        self._name(key, request.names[hits:request.prompt_named])

    def end(self, key: Hashable, request: BlockRequest) -> None:
        """Its output's blocks are taken and named, then every block given back, last
        first."""
        for _ in range(request.blocks - request.prompt_blocks):
            self._take()
        self._name(key, request.names[request.prompt_named:])
        for name in reversed(self.held.pop(key, [])):
            self.refs[name] -= 1
            if self.refs[name] == 0:
                del self.refs[name]
                self.parked[name] = None  # the most recently used end
        spare = request.blocks - len(request.names) + self.copies.pop(key, 0)
        if self.free is not None:
            self.free += spare  # the nameless partial block, and copies
            while self.overdrawn and self.free:
                self.free -= 1
                self.overdrawn -= 1
            while self.overdrawn and self.parked:
                self._evict()
                self.overdrawn -= 1


def predict_hits(requests: Sequence[BlockRequest], capacity: int | None,
                 cache: LruBlockCache | None = None, *,
                 reuse: Sequence[bool] | None = None,
                 keys: Sequence[Hashable] | None = None) -> list[int]:
    """The blocks each request should find, in the order given, replaying arrivals,
    computed prompts and ends in time order (at one time: ends, then computed prompts,
    then arrivals). ``cache``: a cache to go on from (a server that served earlier
    requests); a new one of ``capacity`` blocks otherwise. ``reuse``: per request,
    whether it may be given cached blocks (default: all); ``keys``: per request, its
    name while it runs (default: its index)."""
    lru = cache if cache is not None else LruBlockCache(capacity)
    ids: Sequence[Hashable] = keys if keys is not None else range(len(requests))
    events = sorted(
        [(r.end, 0, i) for i, r in enumerate(requests)]
        + [(r.computed, 1, i) for i, r in enumerate(requests)]
        + [(r.arrive, 2, i) for i, r in enumerate(requests)])
    hits = [0] * len(requests)
    for _, kind, i in events:
        r = requests[i]
        if kind == 2:
            hits[i] = lru.arrive(ids[i], r, reuse[i] if reuse is not None else True)
        elif kind == 1:
            lru.computed(ids[i], r, hits[i])
        else:
            lru.end(ids[i], r)
    return hits


class BlockLru:
    """A prefix cache visited one prompt at a time, each prompt named by its blocks'
    ids (a trace's ``hash_ids``, a conversation's turns): the :class:`LruBlockCache` of
    requests that arrive, are computed and end at once and may find every block of
    theirs. ``capacity_blocks`` None: it never evicts."""

    def __init__(self, capacity_blocks: int | None = None) -> None:
        if capacity_blocks is not None and capacity_blocks < 0:
            raise ValueError(f"a cache of {capacity_blocks} blocks")
        self.capacity = capacity_blocks
        self._cache = LruBlockCache(capacity_blocks)
        self._visits = 0

    def __len__(self) -> int:
        """Blocks it keeps."""
        return len(self._cache.parked)

    @property
    def evictions(self) -> int:
        return self._cache.evicted

    def hits(self, blocks: Sequence[Hashable]) -> int:
        """The leading blocks of ``blocks`` it holds now (nothing changes)."""
        found = 0
        for block in blocks:
            if block not in self._cache.findable:
                break
            found += 1
        return found

    def visit(self, blocks: Sequence[Hashable]) -> int:
        """A prompt of ``blocks`` arrives: the leading blocks found, then every block of
        it kept (its head most recently used), the least recently used evicted past the
        capacity."""
        n = len(blocks)
        request = BlockRequest(tuple(blocks), n, n, n, n, 0, 0, 0)
        key = ("visit", self._visits)
        self._visits += 1
        found = self._cache.arrive(key, request)
        self._cache.computed(key, request, found)
        self._cache.end(key, request)
        return found


def predicted_hits(prompts: Iterable[Sequence[Hashable]],
                   capacity_blocks: int | None = None) -> list[int]:
    """For each prompt (its block ids, in the order a server saw them), the leading
    blocks a prefix cache of ``capacity_blocks`` blocks (None: unbounded) would find."""
    cache = BlockLru(capacity_blocks)
    return [cache.visit(blocks) for blocks in prompts]
