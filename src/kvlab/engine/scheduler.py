"""Continuous batching over a paged KV cache: many sequences, one forward per step.

A server that runs one request at a time decodes one token per forward, and a forward
on a small batch costs about what it costs on one row: the weights are read once
either way. The scheduler keeps that forward full. At every :meth:`Scheduler.step`:

1. every running sequence gets the tokens it will compute, oldest first: one token
   when it is decoding, a chunk of its prompt (within a per-step budget of prompt
   tokens) while it is prefilling. When the pool cannot hold a sequence's new tokens,
   the youngest running sequence is *preempted*: its blocks go back to the pool and it
   waits at the head of the queue, to be recomputed (prompt + what it generated) later;
2. if nothing was preempted, waiting requests are admitted while the running set, the
   budget and the free blocks allow. With prefix caching, an admitted request first
   takes the cached blocks of its longest known prefix (unless it asked not to,
   ``cache_prompt=False``) and computes only the rest;
3. all of it goes through the model in one forward: decode rows and prefill chunks
   flattened into one row of tokens (:class:`kvlab.engine.ragged.RaggedBatch`);
4. a sequence whose context is all in the cache samples its next token; one that hits
   its limit or a stop token ends and its blocks return to the pool.

A request that fits the pool alone is never refused: at worst it waits until it runs
alone. One that does not fit is refused at :meth:`Scheduler.submit`.

What a server needs besides :meth:`Scheduler.submit` and :meth:`Scheduler.step` is
:meth:`Scheduler.stats` (its gauges) and :meth:`Scheduler.abort_all` (end everything
after a failed step); the queues and the pool stay the scheduler's.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from kvlab.engine.generate import Greedy, Sampler, check_request, greedy_tokens
from kvlab.engine.lm import LanguageModel, model_dtype
from kvlab.engine.paged import BlockPool, blocks_needed
from kvlab.engine.paged_kv import PagedKV
from kvlab.engine.phases import StepClock
from kvlab.engine.ragged import RaggedBatch
from kvlab.errors import EngineError

DEFAULT_MAX_RUNNING = 16
DEFAULT_TOKEN_BUDGET = 256


class RequestTooLarge(EngineError):
    """A request whose K/V cannot fit the whole pool."""


@dataclass(eq=False)
class Request:
    """One generation: its prompt, limits and what it produced so far.

    ``token_ids`` is the sequence itself, the prompt followed by every sampled token
    (the stop token included); the scheduler reads slices of it. ``on_token`` is called
    on the scheduler's thread with each sampled token id. ``stop_ids``: tokens that
    end the generation. ``cache_prompt`` False: never start from cached blocks.
    """

    prompt: list[int]
    max_new_tokens: int
    sample: Sampler
    stop_ids: tuple[int, ...] = ()
    on_token: Callable[[int], None] | None = None
    keep_logits: bool = False
    cache_prompt: bool = True
    id: int = -1
    token_ids: list[int] = field(default_factory=list)  # prompt, then output
    cached: int = 0  # leading tokens of token_ids whose K/V the pool holds
    prompt_hit: int = -1  # prompt tokens found cached at the first admission (-1: not yet)
    admitted: int = -1  # admission order; the largest is the youngest
    admitted_ns: int = 0  # perf_counter_ns of the first admission (0: still waiting)
    preemptions: int = 0
    stop_type: str = ""  # "", then "eos", "limit", "cancelled" or "aborted"
    cancelled: bool = False  # set from any thread; honoured at the next step
    logits: list[torch.Tensor] = field(default_factory=list)  # per sampled token (V,)

    def __post_init__(self) -> None:
        self.token_ids = list(self.prompt)

    @property
    def tokens(self) -> list[int]:
        """The sampled tokens (a copy)."""
        return self.token_ids[len(self.prompt):]

    @property
    def n_out(self) -> int:
        """Tokens sampled so far."""
        return len(self.token_ids) - len(self.prompt)

    @property
    def done(self) -> bool:
        return bool(self.stop_type)


@dataclass
class Counters:
    """Totals since start (Prometheus counters)."""

    preemptions: int = 0
    prompt_tokens: int = 0  # prompt tokens computed, recomputation included
    generation_tokens: int = 0  # tokens sampled
    finished: int = 0
    prefix_queries: int = 0  # tokens looked up in the prefix cache (vLLM's counter)
    prefix_hits: int = 0  # of them, tokens found there


@dataclass(frozen=True)
class SchedulerStats:
    """A snapshot of the scheduler for gauges: requests in flight and queued, the pool's
    blocks per window group (None: full attention) and the counters since start."""

    running: int
    waiting: int
    blocks_total: int  # per layer
    blocks_used: dict[int | None, int]  # held by sequences, per window group
    blocks_cached: dict[int | None, int] | None  # kept for prefix hits; None: caching off
    counters: Counters


class Scheduler:
    """Runs admitted requests together on ``model`` over the paged ``pool``.

    ``max_running``: the most sequences in flight; ``token_budget``: the most prompt
    tokens computed per step (chunked prefill); ``kv``: the K/V tensors the pool's
    blocks address (None: allocated here for the pool, in the model's dtype). Not
    thread-safe: one thread calls :meth:`submit` and :meth:`step` (the server's worker);
    ``Request.cancelled`` is the only field other threads may set, and :meth:`stats`
    the only method they may call.
    """

    def __init__(
        self, model: LanguageModel, pool: BlockPool,
        max_running: int = DEFAULT_MAX_RUNNING, token_budget: int = DEFAULT_TOKEN_BUDGET,
        kv: PagedKV | None = None,
    ) -> None:
        if max_running < 1 or token_budget < 1:
            raise EngineError(
                f"max_running and token_budget must be >= 1, got {max_running} and "
                f"{token_budget}"
            )
        self.model = model
        self.pool = pool
        self.kv = kv if kv is not None else PagedKV.for_pool(pool, model_dtype(model))
        self.kv.check_fits(pool)
        self.max_running = max_running
        self.token_budget = token_budget
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.counters = Counters()
        self._ids = itertools.count()
        self._admissions = itertools.count()
        self.clock = StepClock()  # each step's phases (kvlab.engine.phases)
        self._busy = False  # the last step left work: the next one follows at once

    def blocks_for(self, n_prompt: int, max_new_tokens: int) -> int:
        """The most blocks (on its largest group) a request holds at once."""
        n_tokens = n_prompt + max(max_new_tokens - 1, 0)
        return max(blocks_needed(n_tokens, w, self.pool.block_size, self.token_budget)
                   for w in self.pool.windows)

    def check_fits(self, n_prompt: int, max_new_tokens: int) -> None:
        """RequestTooLarge if such a request cannot fit the pool even alone."""
        needed = self.blocks_for(n_prompt, max_new_tokens)
        if needed > self.pool.n_blocks:
            raise RequestTooLarge(
                f"the request needs {needed} KV blocks of {self.pool.block_size} tokens, "
                f"the pool has {self.pool.n_blocks}; shorten the prompt or max tokens, "
                "or give the server more blocks"
            )

    def submit(self, request: Request) -> Request:
        """Queue ``request``; RequestTooLarge if it cannot fit the pool even alone."""
        check_request(self.model, request.prompt, request.max_new_tokens)
        self.check_fits(len(request.prompt), request.max_new_tokens)
        request.id = next(self._ids)
        if request.max_new_tokens == 0:
            request.stop_type = "limit"
            return request
        self.waiting.append(request)
        return request

    @property
    def idle(self) -> bool:
        """No request waiting or running."""
        return not self.waiting and not self.running

    def stats(self) -> SchedulerStats:
        """Requests, blocks and counters now (a copy; readable from any thread, each
        figure as of the moment it is read)."""
        pool = self.pool
        groups = dict(zip(pool.windows, range(len(pool.windows)), strict=True))
        return SchedulerStats(
            running=len(self.running), waiting=len(self.waiting),
            blocks_total=pool.n_blocks,
            blocks_used={w: pool.used(g) for w, g in groups.items()},
            blocks_cached={w: pool.cached(g) for w, g in groups.items()}
            if pool.prefix_caching else None,
            counters=dataclasses.replace(self.counters))

    def abort_all(self) -> list[Request]:
        """End every request now, running or waiting (``stop_type`` "aborted"), and give
        their blocks back; the requests ended, running ones first. For a server whose
        step failed: whatever state the step left, the pool holds nothing after."""
        ended = [*self.running, *self.waiting]
        self.pool.release_all()
        for req in ended:
            req.cached = 0
            req.stop_type = "aborted"
        self.running.clear()
        self.waiting.clear()
        return ended

    def step(self) -> list[Request]:
        """Run one scheduling step; the requests that finished in it. Its phases are
        timed by ``clock`` (a step that computed nothing is not recorded)."""
        self.clock.begin("schedule", continued=self._busy)
        ended = self._drop_cancelled()
        plan = self._schedule()
        sampled = self._forward(plan) if plan else 0
        self.clock.phase("finish")
        for req, _ in plan:
            if req.done:
                self._finish(req)
                ended.append(req)
        self._busy = not self.idle
        if plan:
            self.clock.end(sampled)
        return ended

    def _schedule(self) -> list[tuple[Request, int]]:
        """Take blocks for this step's work: (request, tokens to compute) pairs, the
        one-token rows first."""
        budget = self.token_budget
        plan: list[tuple[Request, int]] = []
        preempted = False
        for req in sorted(self.running, key=lambda r: r.admitted):
            if req not in self.running:  # preempted for an older one in this loop
                continue
            remaining = len(req.token_ids) - req.cached
            n = 1 if remaining == 1 else min(remaining, budget)
            if n == 0:
                continue
            while not self.pool.can_grow(req.id, n):
                victim = max(self.running, key=lambda r: r.admitted)
                self._preempt(victim)
                preempted = True
                if victim is req:
                    break
            else:
                self.pool.grow(req.id, n)
                plan.append((req, n))
                budget -= n if remaining > 1 else 0
        while (not preempted and self.waiting and budget > 0
               and len(self.running) < self.max_running):
            req = self.waiting[0]
            self.pool.add(req.id, req.token_ids)
            self._look_up(req)
            n = min(len(req.token_ids) - req.cached, budget)
            if not self.pool.can_grow(req.id, n):
                self.pool.release(req.id)
                req.cached = 0
                break
            self.waiting.popleft()
            self.pool.grow(req.id, n)
            req.admitted = next(self._admissions)
            req.admitted_ns = req.admitted_ns or time.perf_counter_ns()
            self.running.append(req)
            plan.append((req, n))
            budget -= n
        return sorted(plan, key=lambda work: work[1] > 1)  # stable: rows, then chunks

    def _look_up(self, req: Request) -> None:
        """Start ``req`` from the cached blocks of its prefix, where allowed."""
        hit = self.pool.match(req.id) if req.cache_prompt else 0
        if self.pool.prefix_caching and req.cache_prompt:
            self.counters.prefix_queries += len(req.token_ids)
            self.counters.prefix_hits += hit
        req.cached = hit
        if req.prompt_hit < 0:
            req.prompt_hit = min(hit, len(req.prompt))

    def _forward(self, plan: list[tuple[Request, int]]) -> int:
        """One forward over every row and chunk of ``plan``; sample where due; the
        number of tokens sampled."""
        self.clock.phase("batch")
        ids = torch.tensor([[t for req, n in plan
                             for t in req.token_ids[req.cached:req.cached + n]]])  # (1, N)
        batch = RaggedBatch(self.pool, self.kv, [(req.id, n) for req, n in plan],
                            clock=self.clock)
        due = [(req, seg.last) for (req, n), seg in zip(plan, batch.segments, strict=True)
               if req.cached + n == len(req.token_ids)]  # all in the cache after this
        logits_at = torch.tensor([last for _, last in due], dtype=torch.long)  # (K,)
        self.clock.phase("forward")  # a model that times its own parts splits it further
        with torch.inference_mode():
            logits = self.model(ids, batch, logits_at=logits_at)  # (1, K, V)
        self.clock.phase("sample")
        batch.advance()
        for req, n in plan:
            self.counters.prompt_tokens += max(0, min(n, len(req.prompt) - req.cached))
            req.cached += n
        greedy = all(isinstance(req.sample, Greedy) for req, _ in due)
        tokens = greedy_tokens(logits[0]) if greedy else [None] * len(due)  # one pass
        for row, ((req, _), token) in enumerate(zip(due, tokens, strict=True)):
            self._sample(req, logits[0, row], token)
        return len(due)

    def _sample(self, req: Request, logits: torch.Tensor, token: int | None = None
                ) -> None:
        """Take ``token`` (None: ``req``'s sampler picks it from ``logits``)."""
        if token is None:
            with torch.inference_mode():
                token = req.sample(logits)
        req.token_ids.append(token)
        if req.keep_logits:
            req.logits.append(logits.clone())
        self.counters.generation_tokens += 1
        if req.on_token is not None:  # the server's: detokenize, hand to the event loop
            self.clock.phase("stream")
            req.on_token(token)
            self.clock.phase("sample")
        if token in req.stop_ids:
            req.stop_type = "eos"
        elif req.n_out >= req.max_new_tokens:
            req.stop_type = "limit"

    def _preempt(self, req: Request) -> None:
        """Give back ``req``'s blocks; it waits first in line to be recomputed."""
        self.pool.release(req.id)
        self.running.remove(req)
        req.cached = 0
        req.preemptions += 1
        self.counters.preemptions += 1
        self.waiting.appendleft(req)

    def _finish(self, req: Request) -> None:
        self.pool.release(req.id)
        self.running.remove(req)
        self.counters.finished += 1

    def _drop_cancelled(self) -> list[Request]:
        """End cancelled requests now: running ones give their blocks back."""
        ended = []
        for req in [r for r in self.running if r.cancelled]:
            req.stop_type = "cancelled"
            self._finish(req)
            ended.append(req)
        for req in [r for r in self.waiting if r.cancelled]:
            req.stop_type = "cancelled"
            self.waiting.remove(req)
            ended.append(req)
        return ended

    def run(self) -> None:
        """Step until no request is left (for tests and offline batches)."""
        while not self.idle:
            self.step()
